//! Warm-up, batching and sampling.
//!
//! An operation is measured in batches: the closure runs `iters` operations and returns the time
//! they took (the closure decides which part is timed, so set-up can be excluded). The batch size
//! is doubled until one batch takes at least `min_batch` (>= 1 ms in the quick suite, so the
//! clock's own cost, ~20-50 ns, stays far under 1% of a sample). Warm-up batches run and are
//! discarded; then `samples` batches are kept, each reduced to time per operation. Once the
//! minimum of 7 samples is in, sampling stops early if the experiment's time budget is spent.

use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::stats::Summary;

/// A batch this many times longer than the calibrated length gets re-sized.
const RESIZE_FACTOR: u32 = 20;

/// Fewer samples than this never make a metric.
pub const MIN_SAMPLES: usize = 7;

#[derive(Debug, Clone, Copy)]
pub struct SamplerConfig {
    pub warmup: Duration,
    pub samples: usize,
    pub min_batch: Duration,
    /// Soft limit for one metric: past it, sampling stops at MIN_SAMPLES.
    pub budget: Duration,
}

pub struct Sampler<'a> {
    pub cfg: SamplerConfig,
    cancel: &'a Cancel,
}

impl<'a> Sampler<'a> {
    pub fn new(cfg: SamplerConfig, cancel: &'a Cancel) -> Sampler<'a> {
        Sampler { cfg, cancel }
    }

    /// Time per operation, in nanoseconds, over samples of calibrated batches.
    pub fn per_op_ns(&self, mut batch: impl FnMut(u64) -> Result<Duration>) -> Result<Summary> {
        let start = Instant::now();
        // Calibration doubles as warm-up: run growing batches until one is long enough and the
        // warm-up time has passed.
        let mut iters: u64 = 1;
        loop {
            self.cancel.check()?;
            let took = batch(iters)?;
            let warm = start.elapsed() >= self.cfg.warmup;
            if took >= self.cfg.min_batch {
                if warm {
                    break;
                }
            } else if iters < (1 << 40) {
                // Jump straight to the size the last batch suggests, with a margin.
                let per_op = took.as_secs_f64() / iters as f64;
                let want = if per_op > 0.0 {
                    (self.cfg.min_batch.as_secs_f64() * 1.2 / per_op).ceil() as u64
                } else {
                    iters * 2
                };
                iters = want.clamp(iters + 1, iters.saturating_mul(16));
            } else {
                return Err(Error::Fail(
                    "the operation is too fast to time: the batch never reached the minimum length"
                        .into(),
                ));
            }
        }
        self.collect(iters, batch, start)
    }

    /// Like per_op_ns but with a fixed batch size (operations that are slow or stateful).
    pub fn per_op_ns_fixed(
        &self,
        iters: u64,
        mut batch: impl FnMut(u64) -> Result<Duration>,
    ) -> Result<Summary> {
        let start = Instant::now();
        while start.elapsed() < self.cfg.warmup {
            self.cancel.check()?;
            batch(iters)?;
        }
        self.collect(iters, batch, start)
    }

    fn collect(
        &self,
        mut iters: u64,
        mut batch: impl FnMut(u64) -> Result<Duration>,
        start: Instant,
    ) -> Result<Summary> {
        let mut samples = Vec::with_capacity(self.cfg.samples);
        while samples.len() < self.cfg.samples.max(MIN_SAMPLES) {
            self.cancel.check()?;
            let took = batch(iters)?;
            samples.push(took.as_nanos() as f64 / iters as f64);
            // An operation whose cost jumped after calibration (a lock convoy, a cache that
            // stopped fitting) would make every later batch far too long: re-size the batch to
            // the cost just seen. Samples stay per-operation, so they remain comparable.
            if took > self.cfg.min_batch * RESIZE_FACTOR && iters > 1 {
                let per_op = took.as_secs_f64() / iters as f64;
                iters = ((self.cfg.min_batch.as_secs_f64() * 1.2 / per_op).ceil() as u64).max(1);
            }
            if samples.len() >= MIN_SAMPLES && start.elapsed() > self.cfg.budget {
                break;
            }
        }
        Summary::from_samples(&samples, iters)
            .ok_or_else(|| Error::Fail("the samples were not finite numbers".into()))
    }

    /// Statistics over values the caller measured itself, one per sample (already per-op).
    pub fn repeat(&self, mut sample: impl FnMut() -> Result<f64>, batch: u64) -> Result<Summary> {
        let start = Instant::now();
        while start.elapsed() < self.cfg.warmup {
            self.cancel.check()?;
            sample()?;
        }
        let mut samples = Vec::with_capacity(self.cfg.samples);
        while samples.len() < self.cfg.samples.max(MIN_SAMPLES) {
            self.cancel.check()?;
            samples.push(sample()?);
            if samples.len() >= MIN_SAMPLES && start.elapsed() > self.cfg.budget {
                break;
            }
        }
        Summary::from_samples(&samples, batch)
            .ok_or_else(|| Error::Fail("the samples were not finite numbers".into()))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SamplerConfig {
        SamplerConfig {
            warmup: Duration::from_millis(1),
            samples: 9,
            min_batch: Duration::from_micros(200),
            budget: Duration::from_secs(5),
        }
    }

    #[test]
    fn calibrated_batches_reach_min_batch_and_give_enough_samples() {
        let cancel = Cancel::never();
        let s = Sampler::new(cfg(), &cancel);
        let mut last_iters = 0;
        let sum = s
            .per_op_ns(|n| {
                last_iters = n;
                let t = Instant::now();
                let mut x = 0u64;
                for i in 0..n {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                Ok(t.elapsed())
            })
            .unwrap();
        assert_eq!(sum.n, 9);
        assert_eq!(sum.batch, last_iters);
        assert!(sum.batch > 1, "a trivial op must be batched");
        assert!(sum.min <= sum.median && sum.median <= sum.max);
    }

    #[test]
    fn cancellation_stops_sampling() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGINT);
        let s = Sampler::new(cfg(), &cancel);
        let r = s.per_op_ns(|_| Ok(Duration::from_millis(1)));
        assert!(matches!(r, Err(Error::Cancelled(libc::SIGINT))));
    }

    #[test]
    fn budget_stops_at_minimum_samples() {
        let cancel = Cancel::never();
        let mut c = cfg();
        c.samples = 1000;
        c.budget = Duration::ZERO;
        let s = Sampler::new(c, &cancel);
        let sum = s.repeat(|| Ok(1.0), 1).unwrap();
        assert_eq!(sum.n, MIN_SAMPLES);
    }

    #[test]
    fn a_cost_jump_after_calibration_resizes_the_batch() {
        let cancel = Cancel::never();
        let s = Sampler::new(cfg(), &cancel);
        let mut calls = 0u32;
        let mut sizes = Vec::new();
        let sum = s
            .per_op_ns_fixed(1000, |n| {
                calls += 1;
                sizes.push(n);
                // 1 us per op at first, then 1000x dearer: as a lock convoy would.
                let per_op_ns = if calls < 3 { 1_000 } else { 1_000_000 };
                Ok(Duration::from_nanos(n * per_op_ns))
            })
            .unwrap();
        assert_eq!(sum.n, 9);
        // After the first dear batch of 1000 ops (1 s), the batch shrinks to ~240 us of work.
        assert!(*sizes.last().unwrap() <= 1, "{sizes:?}");
        assert_eq!(sum.median, 1_000_000.0);
    }

    #[test]
    fn errors_from_the_operation_propagate() {
        let cancel = Cancel::never();
        let s = Sampler::new(cfg(), &cancel);
        let r = s.per_op_ns(|_| Err(Error::Skip("no".into())));
        assert!(matches!(r, Err(Error::Skip(_))));
    }
}
