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
