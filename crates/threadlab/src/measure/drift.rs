//! Drift references: fixed loops timed at the start and end of a run and around each
//! experiment. Their change between two moments is the machine's change (the host taking the
//! core, a frequency step, a co-tenant on the core's other hyper-thread), not the code's: when
//! they moved during an experiment, its figures are not those of the machine at rest, and the
//! runner measures it again.

use std::time::Instant;

use crate::measure::stats::Summary;

/// The median of 15 runs of `run`, which returns its own figure; `batch` is how many operations
/// each run averaged over (recorded with the summary). The drift references and the clock cost
/// are measured this way: fixed, short, no calibration.
fn median_of_15(batch: u64, mut run: impl FnMut() -> f64) -> f64 {
    let v: Vec<f64> = (0..15).map(|_| run()).collect();
    Summary::from_samples(&v, batch).map_or(0.0, |s| s.median)
}

/// Time of a fixed chain of 250,000 dependent multiply-adds in one register, in ns (median of 15
/// runs). No memory traffic and no system call, so its change between two moments is the CPU's
/// own clock changing (frequency, the host preempting the vCPU), not the kernel's. Bound by the
/// chain's latency, it hardly notices a co-tenant sharing the core's issue slots (see
/// `reference_wide_ns`). The empty `asm!` per step makes the value opaque to the compiler, which
/// otherwise rewrites the chain into far fewer instructions (it did: 0.14 ns per step, below
/// one multiply's latency).
pub fn reference_loop_ns() -> f64 {
    median_of_15(1, || {
        let t = Instant::now();
        let mut x = std::hint::black_box(1u64);
        for i in 0..250_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
            // SAFETY: an empty template; it only claims to read and write `x` in a register.
            unsafe {
                std::arch::asm!("/* {0} */", inout(reg) x, options(nomem, nostack, preserves_flags))
            };
        }
        std::hint::black_box(x);
        t.elapsed().as_nanos() as f64
    })
}

/// Time of 250,000 iterations of eight independent xor-add chains in registers, in ns (median
/// of 15 runs). Bound by how many instructions the core issues per cycle rather than by a
/// chain's latency, so it slows when something else takes the core's issue slots (an SMT
/// sibling on the host, unseen from a guest) while `reference_loop_ns` stays put.
/// Throughput-bound figures such as a user-level switch move with this one. The empty `asm!`
/// per iteration keeps the eight chains in registers and stops the compiler from vectorising
/// them into fewer instructions.
pub fn reference_wide_ns() -> f64 {
    median_of_15(1, || {
        let t = Instant::now();
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] =
            std::hint::black_box([1u64, 2, 3, 4, 5, 6, 7, 8]);
        for i in 0..250_000u64 {
            a = a.wrapping_add(i ^ 1);
            b = b.wrapping_add(i ^ 2);
            c = c.wrapping_add(i ^ 3);
            d = d.wrapping_add(i ^ 4);
            e = e.wrapping_add(i ^ 5);
            f = f.wrapping_add(i ^ 6);
            g = g.wrapping_add(i ^ 7);
            h = h.wrapping_add(i ^ 8);
            // SAFETY: an empty template; it only claims to read and write eight registers.
            unsafe {
                std::arch::asm!(
                    "/* {0} {1} {2} {3} {4} {5} {6} {7} */",
                    inout(reg) a, inout(reg) b, inout(reg) c, inout(reg) d,
                    inout(reg) e, inout(reg) f, inout(reg) g, inout(reg) h,
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
        std::hint::black_box([a, b, c, d, e, f, g, h]);
        t.elapsed().as_nanos() as f64
    })
}

/// Time of one getppid system call in ns (median of 15 runs of 20,000): the kernel's entry and
/// exit path, which changes with the host's state on a VM.
pub fn reference_syscall_ns() -> f64 {
    median_of_15(20_000, || {
        let t = Instant::now();
        for _ in 0..20_000 {
            // SAFETY: getppid has no preconditions and cannot fail.
            std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
        t.elapsed().as_nanos() as f64 / 20_000.0
    })
}

/// Bytes the memory reference walks: more than the L3 of any CPU a 2-vCPU guest runs on, so
/// its steps go to memory, through the L3 and the memory controllers the host's other tenants
/// share.
const MEMORY_REFERENCE_BYTES: usize = 64 << 20;
/// Steps of one memory reference run (about 1.5 ms at 150 ns a step).
const MEMORY_REFERENCE_STEPS: usize = 10_000;
/// u64 slots per 64-byte line.
const STRIDE: usize = 8;

/// The walk: one u64 per cache line holding the index of the next, all lines in one cycle,
/// mapped once per process and excluded from fork (MADV_DONTFORK), so that the page tables of
/// its 64 MiB are not copied by every fork the create experiment times. With where the last
/// reading stopped: each reading walks on from there, through lines no reading touched lately.
struct Ring {
    pid: u32,
    base: *mut u64,
    at: u64,
    /// MADV_DONTFORK took: a fork leaves the walk out.
    not_forked: bool,
}

// SAFETY: the mapping is private to this process and only reached under the mutex below.
unsafe impl Send for Ring {}

static RING: std::sync::Mutex<Option<Ring>> = std::sync::Mutex::new(None);

fn map_ring() -> Option<Ring> {
    let lines = MEMORY_REFERENCE_BYTES / 64;
    // SAFETY: an anonymous private mapping with no address hint; the result is checked.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            MEMORY_REFERENCE_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `base` is the mapping just made, of that length. Failure only means a fork
    // copies it, which costs time, not correctness.
    let not_forked =
        unsafe { libc::madvise(base, MEMORY_REFERENCE_BYTES, libc::MADV_DONTFORK) } == 0;
    let base = base.cast::<u64>();
    // Sattolo's shuffle gives one cycle through every line, in an order the prefetchers cannot
    // follow; a fixed seed makes it the same walk in every run.
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..lines).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % i as u64) as usize);
    }
    for (k, &line) in order.iter().enumerate() {
        let next = order[(k + 1) % lines] as u64 * STRIDE as u64;
        // SAFETY: `line * STRIDE` < lines * STRIDE = the mapping's length in u64s.
        unsafe { base.add(line as usize * STRIDE).write(next) };
    }
    Some(Ring {
        pid: std::process::id(),
        base,
        at: 0,
        not_forked,
    })
}

/// The bytes of this process's resident memory that a fork leaves out: the memory walk, once a
/// reading has mapped and written it here (MADV_DONTFORK). A note that gives the resident size
/// a fork's cost grows with subtracts it.
pub fn resident_not_forked_bytes() -> usize {
    let guard = RING.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(r) if r.pid == std::process::id() && r.not_forked => MEMORY_REFERENCE_BYTES,
        _ => 0,
    }
}

/// Time of one step of a dependent walk through 64 MiB in random cache-line order, in ns: the
/// fastest of 5 runs of 10,000 steps, each run going on where the last stopped (about 10 ms;
/// the first reading of a process also writes the 64 MiB walk first). Every step is a load
/// from memory, through the L3 and memory controllers a VM shares with the host's other
/// tenants: when they load them, steps slow, and the register loops above do not notice. A
/// C walk through 16 MiB read here 136-145 ns a step for a minute at rest, then 147-177 ns
/// for a minute in which a 64 MiB read lost 5-15% of its bandwidth, while a register loop
/// moved under 3%. Figures that walk more memory than the core's caches hold (large copies,
/// many stacks, page tables) move with this one (`Metric::memory_bound`). 0 when the walk
/// cannot be mapped.
pub fn reference_memory_ns() -> f64 {
    let mut guard = RING.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if !guard.as_ref().is_some_and(|r| r.pid == pid) {
        // A forked child does not have the parent's walk (MADV_DONTFORK): it maps its own.
        *guard = map_ring();
    }
    let Some(ring) = guard.as_mut() else {
        return 0.0;
    };
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        let mut i = ring.at;
        for _ in 0..MEMORY_REFERENCE_STEPS {
            // SAFETY: every slot the walk reaches holds the index of a line's first u64, below
            // the mapping's length (built so by `map_ring`).
            i = unsafe { ring.base.add(std::hint::black_box(i) as usize).read() };
        }
        ring.at = i;
        best = best.min(t.elapsed().as_nanos() as f64 / MEMORY_REFERENCE_STEPS as f64);
    }
    best
}

/// Cost of one read of the monotonic clock, in ns (median of 15 runs of 10,000 reads).
pub fn clock_cost_ns() -> f64 {
    median_of_15(10_000, || {
        let t = Instant::now();
        let mut last = t;
        for _ in 0..10_000 {
            last = std::hint::black_box(Instant::now());
        }
        last.duration_since(t).as_nanos() as f64 / 10_000.0
    })
}

/// A quick reading of the machine's phase, taken before each round of interleaved sampling:
/// the time of 40,000 iterations of the throughput-bound loop and of one getppid (over 200),
/// in ns, each the faster of two readings (about 0.2 ms in all). A round whose reading is well
/// above the best of its group was taken while the host was taking the core.
pub fn phase_probe() -> [f64; 2] {
    let wide = || {
        let t = Instant::now();
        let [mut a, mut b, mut c, mut d] = std::hint::black_box([1u64, 2, 3, 4]);
        for i in 0..40_000u64 {
            a = a.wrapping_add(i ^ 1);
            b = b.wrapping_add(i ^ 2);
            c = c.wrapping_add(i ^ 3);
            d = d.wrapping_add(i ^ 4);
            // SAFETY: an empty template; it only claims to read and write four registers.
            unsafe {
                std::arch::asm!(
                    "/* {0} {1} {2} {3} */",
                    inout(reg) a, inout(reg) b, inout(reg) c, inout(reg) d,
                    options(nomem, nostack, preserves_flags)
                )
            };
        }
        std::hint::black_box([a, b, c, d]);
        t.elapsed().as_nanos() as f64
    };
    let syscall = || {
        let t = Instant::now();
        for _ in 0..200 {
            // SAFETY: getppid has no preconditions and cannot fail.
            std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
        }
        t.elapsed().as_nanos() as f64 / 200.0
    };
    [wide().min(wide()), syscall().min(syscall())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_walk_is_one_cycle_through_every_line() {
        assert!(reference_memory_ns() > 0.0);
        let guard = RING.lock().unwrap();
        let ring = guard.as_ref().expect("mapped by the reading");
        let lines = MEMORY_REFERENCE_BYTES / 64;
        let mut seen = vec![false; lines];
        let mut near = 0;
        let mut i = 0u64;
        for step in 0..lines {
            assert_eq!(i as usize % STRIDE, 0, "a step lands inside a line");
            let line = i as usize / STRIDE;
            assert!(!seen[line], "the walk closed early, at line {line}");
            seen[line] = true;
            // SAFETY: as in `reference_memory_ns`.
            let next = unsafe { ring.base.add(i as usize).read() };
            if step < 1000 {
                // Not the trivial order: steps rarely land on a neighbouring line.
                near += usize::from(next.abs_diff(i) <= STRIDE as u64);
            }
            i = next;
        }
        assert_eq!(i, 0, "the walk does not return to its start");
        assert!(
            near < 10,
            "{near} of 1000 steps went to a neighbouring line"
        );
    }
}
