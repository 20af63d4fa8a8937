//! A large buffer with and without transparent huge pages: the first touch of a fresh 64 MiB
//! anonymous mapping (page faults and zeroing: 16,384 faults of 4 KiB or 32 of 2 MiB) and
//! dependent random reads over it once touched (with 4 KiB pages the buffer needs 16,384 TLB
//! entries, far beyond the TLB; with 2 MiB pages, 32).

use std::time::Duration;

use super::{PhaseValues, Setup};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;

const LEN: usize = 64 << 20;
const HUGE: usize = 2 << 20;
const PAGE: usize = 4096;
const READS: u64 = 1 << 19;

/// An anonymous mapping aligned to 2 MiB, unmapped on drop.
struct Mapping {
    base: *mut u8,
    total: usize,
    aligned: *mut u8,
}

impl Mapping {
    fn new(huge: bool) -> Result<Mapping> {
        let total = LEN + HUGE;
        // SAFETY: a fresh private anonymous mapping; no address hint, no file.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::Skip(format!(
                "cannot map a 64 MiB buffer: {}",
                std::io::Error::last_os_error()
            )));
        }
        let base = base as *mut u8;
        let offset = (HUGE - (base as usize) % HUGE) % HUGE;
        // SAFETY: offset < HUGE, and the mapping is LEN + HUGE long, so aligned..aligned+LEN
        // lies inside it.
        let aligned = unsafe { base.add(offset) };
        let m = Mapping {
            base,
            total,
            aligned,
        };
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: the range is inside our mapping and 2 MiB aligned (so page aligned).
        if unsafe { libc::madvise(aligned as *mut libc::c_void, LEN, advice) } != 0 {
            return Err(Error::Skip(format!(
                "madvise({}) was refused: {}",
                if huge {
                    "MADV_HUGEPAGE"
                } else {
                    "MADV_NOHUGEPAGE"
                },
                std::io::Error::last_os_error()
            )));
        }
        Ok(m)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value owns; nothing refers to it any more.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.total);
        }
    }
}

/// First touch (ms for the 64 MiB) and dependent random reads (ns each), with the buffer
/// advised for huge pages or against them as the setup says; the share the kernel actually
/// backed with huge pages is kept as a diagnostic.
pub fn touch_and_read(setup: &Setup, cancel: &Cancel) -> Result<PhaseValues> {
    cancel.check()?;
    let m = Mapping::new(setup.huge_pages)?;
    let t = mono_ns();
    for off in (0..LEN).step_by(PAGE) {
        // SAFETY: off < LEN, inside the aligned range of the live mapping.
        unsafe { m.aligned.add(off).write_volatile(1) };
    }
    let touch_ns = mono_ns() - t;
    cancel.check()?;
    let words = LEN / 8;
    let p = m.aligned as *const u64;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let t = mono_ns();
    for _ in 0..READS {
        // A multiplicative step, plus what was read: the next address depends on the last
        // read, so the reads cannot overlap (what a pointer chase pays).
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let i = (x >> 20) as usize % words;
        // SAFETY: i < words, so the read is inside the aligned range; the memory was written
        // above (or is zero), and u64 reads at 8-byte aligned offsets are aligned.
        let v = unsafe { p.add(i).read_volatile() };
        x = x.wrapping_add(std::hint::black_box(v) & 1);
    }
    let read_ns = mono_ns() - t;
    let huge_kib = anon_huge_kib(m.aligned as usize, LEN);
    Ok(PhaseValues {
        values: vec![
            Duration::from_nanos(touch_ns).as_secs_f64() * 1e3,
            read_ns as f64 / READS as f64,
        ],
        ops: READS,
        huge_backed_pct: huge_kib.map(|k| k as f64 * 1024.0 / LEN as f64 * 100.0),
    })
}

/// The AnonHugePages of the mappings overlapping [start, start + len), KiB, from
/// /proc/self/smaps.
fn anon_huge_kib(start: usize, len: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    Some(parse_anon_huge_kib(&smaps, start, start + len))
}

fn parse_anon_huge_kib(smaps: &str, start: usize, end: usize) -> u64 {
    let mut inside = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = a < end && b > start;
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                kib += rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    kib
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_huge_pages_are_summed_over_the_overlapping_mappings() {
        let smaps = "7f0000000000-7f0004000000 rw-p 00000000 00:00 0\n\
                     Size:              65536 kB\nAnonHugePages:     63488 kB\n\
                     7f0004000000-7f0004200000 rw-p 00000000 00:00 0\n\
                     AnonHugePages:      2048 kB\n\
                     7f0005000000-7f0006000000 rw-p 00000000 00:00 0\n\
                     AnonHugePages:      9999 kB\n";
        let start = 0x7f00_0000_0000;
        assert_eq!(
            parse_anon_huge_kib(smaps, start, start + (66 << 20)),
            65_536
        );
        assert_eq!(parse_anon_huge_kib(smaps, start, start + (1 << 20)), 63_488);
        assert_eq!(parse_anon_huge_kib("", start, start + 1), 0);
    }

    #[test]
    fn a_buffer_phase_touches_reads_and_unmaps() {
        let s = Setup::base(0, 0);
        let v = touch_and_read(&s, &Cancel::never()).unwrap();
        assert_eq!(v.values.len(), 2);
        assert!(v.values.iter().all(|x| *x > 0.0), "{v:?}");
        let pct = v.huge_backed_pct.expect("smaps is readable");
        assert!((0.0..=100.0).contains(&pct));
    }
}
