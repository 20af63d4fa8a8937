//! Tracepoint samples through perf_event_open: one event per (tracepoint, CPU), each with a
//! ring buffer mapped from the kernel, timestamps on CLOCK_MONOTONIC (so they line up with the
//! threads' own clock reads), and the raw record of the tracepoint's fields.
//!
//! The buffers are read once, after the traced loop: the tail is never advanced meanwhile, so
//! the kernel never overwrites a record; when a buffer fills, it drops what comes next and
//! says how much (PERF_RECORD_LOST), which the caller reports.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use perf_event_open_sys as sys;

/// One tracepoint hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub time_ns: u64,
    pub cpu: u32,
    pub tid: u32,
    /// The tracepoint's record: common fields, then its own (see tracefs formats).
    pub raw: Vec<u8>,
}

impl Sample {
    /// A field of the raw record as an unsigned integer of its size (1, 2, 4 or 8 bytes).
    pub fn field(&self, (offset, size): (usize, usize)) -> Option<u64> {
        let b = self.raw.get(offset..offset + size)?;
        Some(match size {
            1 => u64::from(b[0]),
            2 => u64::from(u16::from_ne_bytes([b[0], b[1]])),
            4 => u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// One event's ring buffer.
struct Ring {
    event: usize,
    fd: OwnedFd,
    map: *mut u8,
    len: usize,
}

/// Several tracepoint events, each on one CPU, recording while enabled.
pub struct Recorder {
    rings: Vec<Ring>,
}

// SAFETY: the mapped pointers are only read through `&self` after the kernel has written them,
// and unmapped once, in Drop.
unsafe impl Send for Recorder {}

const DATA_PAGES: usize = 64;

impl Recorder {
    /// Opens (disabled) one event per `(event index, tracepoint id, cpu)`. Err says why the
    /// kernel refused (perf_event_paranoid, no CAP_PERFMON ...).
    pub fn open(events: &[(usize, u64, usize)]) -> Result<Recorder, String> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = page * (1 + DATA_PAGES);
        let mut rings = Vec::with_capacity(events.len());
        for &(event, id, cpu) in events {
            let mut attr = sys::bindings::perf_event_attr {
                size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
                type_: sys::bindings::PERF_TYPE_TRACEPOINT,
                config: id,
                sample_type: u64::from(
                    sys::bindings::PERF_SAMPLE_TID
                        | sys::bindings::PERF_SAMPLE_TIME
                        | sys::bindings::PERF_SAMPLE_CPU
                        | sys::bindings::PERF_SAMPLE_RAW,
                ),
                clockid: libc::CLOCK_MONOTONIC,
                ..Default::default()
            };
            attr.__bindgen_anon_1.sample_period = 1;
            attr.set_disabled(1);
            attr.set_use_clockid(1);
            // SAFETY: attr is a fully initialised perf_event_attr; pid -1 with a cpu means
            // every task on that CPU; no group.
            let fd = unsafe {
                sys::perf_event_open(
                    &mut attr,
                    -1,
                    cpu as libc::c_int,
                    -1,
                    libc::c_ulong::from(sys::bindings::PERF_FLAG_FD_CLOEXEC),
                )
            };
            if fd < 0 {
                return Err(format!(
                    "perf_event_open of a tracepoint on CPU {cpu} was refused: {} (needs root \
                     or CAP_PERFMON, or kernel.perf_event_paranoid = -1)",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: fd was just returned by the kernel and is owned by nothing else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: maps the event's ring buffer (one header page + 2^n data pages), shared
            // with the kernel, read and write (write so that the kernel keeps unread records).
            let map = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if map == libc::MAP_FAILED {
                return Err(format!(
                    "the ring buffer of a tracepoint event could not be mapped: {}",
                    std::io::Error::last_os_error()
                ));
            }
            rings.push(Ring {
                event,
                fd,
                map: map as *mut u8,
                len,
            });
        }
        Ok(Recorder { rings })
    }

    fn ioctl_all(&self, enable: bool) {
        for r in &self.rings {
            // SAFETY: an ioctl on an event descriptor this recorder owns.
            unsafe {
                if enable {
                    sys::ioctls::ENABLE(r.fd.as_raw_fd(), 0);
                } else {
                    sys::ioctls::DISABLE(r.fd.as_raw_fd(), 0);
                }
            }
        }
    }

    pub fn enable(&self) {
        self.ioctl_all(true);
    }

    pub fn disable(&self) {
        self.ioctl_all(false);
    }

    /// Every sample recorded, with its event index, and how many the kernel had to drop.
    pub fn samples(&self) -> (Vec<(usize, Sample)>, u64) {
        let mut all = Vec::new();
        let mut lost = 0;
        for r in &self.rings {
            let header = r.map as *const sys::bindings::perf_event_mmap_page;
            // SAFETY: the header page is mapped for the recorder's life; data_head is written
            // by the kernel, so it is read volatile, and the acquire fence orders the reads of
            // the data after it (as the perf ABI requires).
            let (head, offset, size) = unsafe {
                let head = std::ptr::addr_of!((*header).data_head).read_volatile();
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                let offset = std::ptr::addr_of!((*header).data_offset).read_volatile();
                let size = std::ptr::addr_of!((*header).data_size).read_volatile();
                (head, offset as usize, size as usize)
            };
            if size == 0 || offset + size > r.len {
                continue;
            }
            // SAFETY: offset..offset + size lies inside the mapping (checked above).
            let data = unsafe { std::slice::from_raw_parts(r.map.add(offset), size) };
            let (samples, l) = parse_records(data, head);
            lost += l;
            all.extend(samples.into_iter().map(|s| (r.event, s)));
        }
        (all, lost)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.disable();
        for r in &self.rings {
            // SAFETY: unmaps the mapping made in open, once; the fd closes after (OwnedFd).
            unsafe {
                libc::munmap(r.map as *mut libc::c_void, r.len);
            }
        }
    }
}

/// The records of a ring buffer's data area from offset 0 (the tail, never advanced) to
/// `head`, wrapping at the area's size: the samples of TID | TIME | CPU | RAW, and the count
/// of records lost.
pub fn parse_records(data: &[u8], head: u64) -> (Vec<Sample>, u64) {
    let size = data.len() as u64;
    let mut samples = Vec::new();
    let mut lost = 0;
    if size == 0 {
        return (samples, lost);
    }
    // Reads n bytes at ring position pos, wrapping.
    let bytes = |pos: u64, n: usize| -> Vec<u8> {
        (0..n as u64)
            .map(|i| data[((pos + i) % size) as usize])
            .collect()
    };
    let u32_at = |b: &[u8], o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let u64_at = |b: &[u8], o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_ne_bytes(a)
    };
    // Only the last `size` bytes before head are still there.
    let mut pos = head.saturating_sub(size);
    while pos + 8 <= head {
        let h = bytes(pos, 8);
        let kind = u32_at(&h, 0);
        let len = u16::from_ne_bytes([h[6], h[7]]) as u64;
        if len < 8 || pos + len > head {
            break;
        }
        let rec = bytes(pos, len as usize);
        if kind == sys::bindings::PERF_RECORD_SAMPLE && rec.len() >= 36 {
            // pid, tid (u32 each), time (u64), cpu, res (u32 each), raw size (u32), raw.
            let tid = u32_at(&rec, 12);
            let time_ns = u64_at(&rec, 16);
            let cpu = u32_at(&rec, 24);
            let raw_len = u32_at(&rec, 32) as usize;
            let raw = rec
                .get(36..36 + raw_len)
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            samples.push(Sample {
                time_ns,
                cpu,
                tid,
                raw,
            });
        } else if kind == sys::bindings::PERF_RECORD_LOST && rec.len() >= 24 {
            // id (u64), lost (u64).
            lost += u64_at(&rec, 16);
        }
        pos += len;
    }
    (samples, lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_record(time: u64, cpu: u32, tid: u32, raw: &[u8]) -> Vec<u8> {
        let body = 8 + 8 + 8 + 4 + raw.len();
        let len = (8 + body).div_ceil(8) * 8;
        let mut r = Vec::with_capacity(len);
        r.extend_from_slice(&sys::bindings::PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&(len as u16).to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes()); // pid
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&time.to_ne_bytes());
        r.extend_from_slice(&cpu.to_ne_bytes());
        r.extend_from_slice(&0u32.to_ne_bytes());
        r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        r.extend_from_slice(raw);
        r.resize(len, 0);
        r
    }

    #[test]
    fn samples_and_lost_records_are_parsed_across_the_wrap() {
        let mut stream = Vec::new();
        stream.extend(sample_record(100, 1, 42, &[1, 0, 2, 0, 7, 0, 0, 0]));
        let mut lost = Vec::new();
        lost.extend_from_slice(&sys::bindings::PERF_RECORD_LOST.to_ne_bytes());
        lost.extend_from_slice(&0u16.to_ne_bytes());
        lost.extend_from_slice(&24u16.to_ne_bytes());
        lost.extend_from_slice(&9u64.to_ne_bytes());
        lost.extend_from_slice(&3u64.to_ne_bytes());
        stream.extend(lost);
        stream.extend(sample_record(200, 0, 43, &[9; 12]));
        // A ring exactly the stream's size, written from position 40 on, so that records
        // straddle the ring's end: head = 40 + len, and the last `size` bytes are the stream.
        let size = stream.len();
        let start = 40u64;
        let mut ring = vec![0u8; size];
        for (i, b) in stream.iter().enumerate() {
            ring[((start + i as u64) % size as u64) as usize] = *b;
        }
        let (s, l) = parse_records(&ring, start + size as u64);
        assert_eq!(l, 3);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].time_ns, s[0].cpu, s[0].tid), (100, 1, 42));
        assert_eq!(s[0].field((4, 4)), Some(7));
        assert_eq!(s[0].field((0, 2)), Some(1));
        assert_eq!(s[1].raw.len(), 12);
        assert_eq!(s[1].field((10, 4)), None, "past the record");
        // As the recorder reads it: from 0, the kernel having stopped inside the last record.
        let mut ring = stream.clone();
        ring.resize(256, 0);
        let (s, l) = parse_records(&ring, stream.len() as u64 - 4);
        assert_eq!((s.len(), l), (1, 3), "the cut record is left out");
        assert_eq!(parse_records(&[], 10), (vec![], 0));
    }
}
