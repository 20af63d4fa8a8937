//! `shm`: how long one thread (or process) takes to read data another has just written
//! (PThreads 1999, Fig. 2), for 1 KiB .. 64 MiB.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sys::{futex_wait_for, futex_wake};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::experiments::{own_series, Axis, Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::process::{fork_child, wait_until, SharedMap};
use crate::measure::spawn::spawn_scoped;
use crate::measure::stats::Summary;
use crate::measure::units::Unit;
use crate::seeds;

pub struct Shm;

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const MAX_SIZE: usize = 64 * MIB;
/// Small sizes are read as several fresh copies back to back, so a sample covers at least this
/// many bytes and the clock's cost stays negligible.
const MIN_BYTES_PER_SAMPLE: usize = 64 * KIB;
const WAIT_LIMIT_NS: u64 = 10_000_000_000;

/// Commands from the reader to the writer; lives in memory both can see.
#[repr(C)]
#[derive(Default)]
struct Control {
    round: AtomicU64,
    size: AtomicU64,
    copies: AtomicU64,
    value: AtomicU64,
    done: AtomicU64,
    stop: AtomicU64,
    /// Rung (incremented, then FUTEX_WAKE) after every new round and at the stop: an idle
    /// writer sleeps on it, so it takes no CPU from what else runs on its CPU between samples
    /// (the sampler's reading of the two CPUs' distance runs there).
    bell: AtomicU32,
}

impl Control {
    fn ring(&self) {
        self.bell.fetch_add(1, Ordering::Release);
        // Shared: the writer may be another process, sleeping on the same MAP_SHARED page.
        futex_wake(&self.bell, 1, true);
    }
}

/// The writer's loop: for each new round, fill `copies` buffers of `size` bytes with `value`.
/// Async-signal-safe: atomics, plain stores and raw futex calls only (a forked child runs it).
fn writer_loop(ctl: &Control, base: *mut u64) {
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        let round = loop {
            let bell = ctl.bell.load(Ordering::Acquire);
            let r = ctl.round.load(Ordering::Acquire);
            if ctl.stop.load(Ordering::Acquire) != 0 {
                return;
            }
            if r != seen {
                break r;
            }
            spins += 1;
            if spins > 200 {
                // Returns at once if the bell rang since it was read above (no lost wake-up),
                // and at the latest after 100 ms.
                futex_wait_for(&ctl.bell, bell, true, 100);
            } else {
                std::hint::spin_loop();
            }
        };
        seen = round;
        let words = ctl.size.load(Ordering::Acquire) as usize / 8
            * ctl.copies.load(Ordering::Acquire) as usize;
        let v = ctl.value.load(Ordering::Acquire);
        for i in 0..words {
            // SAFETY: the reader sized the request within the buffer (size * copies <= MAX_SIZE),
            // and it does not read until `done` is published below.
            unsafe { base.add(i).write_volatile(v) };
        }
        ctl.done.store(round, Ordering::Release);
    }
}

fn read_sum(base: *const u64, words: usize) -> u64 {
    // SAFETY: the caller guarantees `words` u64s are readable at base and not being written.
    let data = unsafe { std::slice::from_raw_parts(base, words) };
    data.iter().fold(0u64, |a, &x| a.wrapping_add(x))
}

/// One party's reading side: asks for a fresh write of `size` bytes, then times reading it.
struct Reader<'a> {
    ctl: &'a Control,
    base: *const u64,
    round: u64,
}

impl Reader<'_> {
    /// Nanoseconds to read one buffer of `size` bytes that the writer has just written.
    fn sample(&mut self, size: usize) -> Result<f64> {
        let copies = (MIN_BYTES_PER_SAMPLE / size).max(1);
        self.round += 1;
        let value = self.round;
        self.ctl.size.store(size as u64, Ordering::Release);
        self.ctl.copies.store(copies as u64, Ordering::Release);
        self.ctl.value.store(value, Ordering::Release);
        self.ctl.round.store(self.round, Ordering::Release);
        self.ctl.ring();
        let round = self.round;
        wait_until(
            || self.ctl.done.load(Ordering::Acquire) == round,
            WAIT_LIMIT_NS,
        )?;
        let words = size / 8 * copies;
        let t = Instant::now();
        let sum = std::hint::black_box(read_sum(self.base, words));
        let took = t.elapsed();
        if sum != value.wrapping_mul(words as u64) {
            return Err(Error::Fail(
                "the reader saw data other than what the writer wrote".into(),
            ));
        }
        Ok(took.as_nanos() as f64 / copies as f64)
    }
}

fn sizes(mode: Mode) -> Vec<usize> {
    match mode {
        Mode::Tiny => vec![KIB, 64 * KIB, MIB],
        Mode::Quick => vec![
            KIB,
            4 * KIB,
            16 * KIB,
            64 * KIB,
            256 * KIB,
            MIB,
            4 * MIB,
            16 * MIB,
            64 * MIB,
        ],
        Mode::Full => (10..=26).map(|p| 1usize << p).collect(),
    }
}

fn size_name(size: usize) -> String {
    if size >= MIB {
        format!("{}mib", size / MIB)
    } else {
        format!("{}kib", size / KIB)
    }
}

/// Reads at every size, returning a summary (ns per read) per size. `cpus`: the reader's and
/// the writer's, whose distance every trial records (the host may run the two vCPUs close or
/// far apart, and every read of the other's writes follows).
fn sweep(
    ctx: &Ctx,
    reader: &mut Reader,
    label: &str,
    cpus: (usize, usize),
) -> Result<Vec<(usize, Summary)>> {
    let placement = Placement::CrossCpu(cpus.0, cpus.1).to_string();
    let sampler = ctx.sampler_on(&[&placement]);
    let mut out = Vec::new();
    for size in sizes(ctx.mode) {
        ctx.step(&format!("shm.{label} {}", size_name(size)))?;
        let s = sampler.repeat(|| reader.sample(size), 1)?;
        out.push((size, s));
    }
    Ok(out)
}

fn thread_sweep(ctx: &Ctx, cpus: (usize, usize)) -> Result<Vec<(usize, Summary)>> {
    let mut buf = vec![1u64; MAX_SIZE / 8]; // filled, so every page is faulted in up front
    let base = buf.as_mut_ptr() as usize;
    let ctl = Control::default();
    let _pin = PinGuard::pin(cpus.0)?;
    std::thread::scope(|s| {
        let writer = spawn_scoped(s, "the writer thread", || -> Result<()> {
            pin_current_thread(cpus.1)?;
            writer_loop(&ctl, base as *mut u64);
            Ok(())
        })?;
        let mut reader = Reader {
            ctl: &ctl,
            base: base as *const u64,
            round: 0,
        };
        let result = sweep(ctx, &mut reader, "thread", cpus);
        ctl.stop.store(1, Ordering::Release);
        ctl.ring();
        writer
            .join()
            .map_err(|_| Error::Fail("the writer thread panicked".into()))??;
        result
    })
}

fn process_sweep(ctx: &Ctx, cpus: (usize, usize)) -> Result<Vec<(usize, Summary)>> {
    let control_map = SharedMap::new(4096)?;
    let data = SharedMap::new(MAX_SIZE)?;
    // SAFETY: the mapping is zero-filled and page aligned; Control is atomics only, so all-zero
    // is a valid value, and it fits in the 4096-byte page.
    let ctl: &Control = unsafe { &*(control_map.as_ptr() as *const Control) };
    // Fault every page in here; the child faults its own page tables in during warm-up.
    // SAFETY: data is MAX_SIZE writable bytes.
    unsafe { std::ptr::write_bytes(data.as_ptr(), 1, MAX_SIZE) };
    let base = data.as_ptr() as *mut u64;
    let _pin = PinGuard::pin(cpus.0)?;
    // SAFETY: the child runs writer_loop, which is async-signal-safe.
    let child = unsafe { fork_child(Some(cpus.1), || writer_loop(ctl, base)) }?;
    let mut reader = Reader {
        ctl,
        base,
        round: 0,
    };
    let result = sweep(ctx, &mut reader, "process", cpus);
    ctl.stop.store(1, Ordering::Release);
    ctl.ring();
    child.wait()?;
    result
}

/// Whether a read of `size` bytes written by the other party goes through caches or memory the
/// whole machine shares (`Metric::memory_bound`): from 1 MiB on it has left the reader's own
/// caches and comes from the shared L3 or memory; between two CPUs every size crosses from the
/// writer's caches through the shared ones. A program on a virtual machine shares those with the
/// host's other tenants, and the 4 KiB read between two vCPUs takes one of a few levels the host
/// keeps for seconds to minutes, which no reference of the run sees. A test program reading
/// 64 KiB just written on the other vCPU, trial by trial, from one buffer, from a fresh 64 KiB
/// one and from the start of a fresh 64 MiB one, with the same writer thread and with a fresh
/// one, read the same level each way, trial by trial, and mostly one level through a run: about
/// 320 ns in one run and 446 ns in the next; over 9 s of another, 445 ns, then 80 ns for 3.5 s
/// while the host ran both vCPUs on one core, then 445 ns again. The lab's thread and process rows, one sweep after the other, read 0.28
/// and 0.45 us in one run.
fn through_shared_caches(size: usize, (reader, writer): (usize, usize)) -> bool {
    size >= MIB || reader != writer
}

const INFO: Info = Info {
    name: "shm",
    study: &seeds::PTHREADS_1999,
    measures: "time for a thread or a process to read 1 KiB..64 MiB another has just written (Fig. 2), with bandwidth",
    rough_secs: [1.0, 1.5, 6.0],
};

impl Experiment for Shm {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let (cpus, placement) = match cpu_pair() {
            Some((a, b)) => ((a, b), Placement::CrossCpu(a, b)),
            None => ((home_cpu(), home_cpu()), Placement::SameCpu(home_cpu())),
        };
        let cache_state = if cpus.0 != cpus.1 {
            "the writer on the other CPU wrote the data just before the read: small sizes come \
             from its private caches or the shared last-level cache, large ones from memory"
        } else {
            "writer and reader share one CPU: small sizes are still in its own caches"
        };
        // What was seen on a guest, said only on one: on bare metal there are no vCPUs for the
        // host to place.
        let levels = if cpus.0 != cpus.1 && ctx.env.is_guest() {
            "; between two vCPUs a read settles at one of a few levels that the host keeps for \
             seconds to minutes, whatever the writer or the buffer (4 KiB on a 2-vCPU KVM guest: \
             0.26-0.30, 0.32-0.39 or 0.42-0.48 us over 34 runs, and 0.09 us while the host ran \
             both vCPUs on one core), so one run's spread does not show the next run's level, \
             and compare calls a move of it in a virtual machine unstable (docs/compare.md)"
        } else {
            ""
        };
        let threads = thread_sweep(ctx, cpus)?;
        let processes = process_sweep(ctx, cpus)?;

        for (label, results, how) in [
            (
                "thread",
                &threads,
                "two threads of one process, a private anonymous buffer",
            ),
            (
                "process",
                &processes,
                "two processes sharing a MAP_SHARED anonymous mapping (shmem pages; page tables \
                 already populated in both before timing)",
            ),
        ] {
            let note = format!(
                "{how}; {cache_state}; sizes under 64 KiB are read as several fresh copies per \
                 sample and divided back; median of >= 7 fresh writes per size{levels}"
            );
            let sizes = || Axis {
                label: "data size",
                unit: Unit::Bytes,
                values: results.iter().map(|(s, _)| *s as f64).collect(),
            };
            out.series.push(own_series(
                format!("shm.{label}.read_time"),
                sizes(),
                Axis {
                    label: "time to read it once",
                    unit: Unit::Us,
                    values: results
                        .iter()
                        .map(|(_, m)| Unit::Us.from_ns(m.median))
                        .collect(),
                },
                note.clone(),
            ));
            out.series.push(own_series(
                format!("shm.{label}.bandwidth"),
                sizes(),
                Axis {
                    label: "read bandwidth",
                    unit: Unit::GbPerS,
                    values: results.iter().map(|(s, m)| *s as f64 / m.median).collect(),
                },
                note.clone(),
            ));
            for (size, s) in results.iter() {
                if [4 * KIB, MIB, 64 * MIB].contains(size) {
                    out.add_ns(
                        &format!("shm.{label}.read.{}", size_name(*size)),
                        Unit::Us,
                        s,
                        placement,
                        note.clone(),
                    )?
                    .memory_bound = through_shared_caches(*size, cpus);
                }
            }
        }
        let big = |r: &Vec<(usize, Summary)>| r.last().map(|(s, m)| *s as f64 / m.median);
        if let (Some(t), Some(p)) = (big(&threads), big(&processes)) {
            out.conclusion = Some(format!(
                "Reading data another party just wrote runs at {t:.1} GB/s between threads and \
                 {p:.1} GB/s between processes at the largest size: shared memory costs the same \
                 once mapped, as the 1999 study found (Fig. 2). Choose threads or processes for \
                 isolation and start-up cost, not for the speed of sharing; remember a process \
                 pays page faults on first touch of a shared mapping."
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_between_two_cpus_go_through_the_shared_caches_at_every_size() {
        for size in [KIB, 4 * KIB, 64 * KIB, MIB, 64 * MIB] {
            assert!(through_shared_caches(size, (0, 1)), "{size}");
        }
        assert!(!through_shared_caches(4 * KIB, (0, 0)));
        assert!(!through_shared_caches(256 * KIB, (1, 1)));
        assert!(through_shared_caches(MIB, (0, 0)));
    }
}
