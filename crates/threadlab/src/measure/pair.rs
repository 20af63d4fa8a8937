//! The distance between two CPUs: the round trip of one cache line between a thread pinned to
//! each (core-to-core latency, as nviennot/core-to-core-latency measures it).
//!
//! On a VM the host decides where the two vCPUs run: on one core complex (a round trip of some
//! 40-50 ns on a recent EPYC) or on two (several hundred ns), and it may move them between two
//! runs of the lab, or within one. Every cross-CPU figure follows: a contended lock, a wake-up, a
//! hand-off. The sampler measures this at the start of every trial of a metric whose threads
//! span two CPUs, so the results file says which regime each trial saw, and `compare` can tell
//! a metric that moved because the host moved the vCPUs from one that moved because the code
//! changed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::measure::placement::{pin_current_thread, PinGuard};
use crate::measure::spawn::spawn_scoped;

/// Round trips per reading; two readings, the faster kept.
const ROUND_TRIPS: u64 = 1_000;

/// Spins before a side gives up on its partner (it was descheduled for seconds, or is gone).
const SPIN_LIMIT: u64 = 2_000_000_000;

/// A value on a cache line of its own (128 bytes: adjacent-line prefetch pairs lines). Words two
/// threads pass between them live in one, never in a stack frame: a frame's place within its
/// line follows the stack's random base, so a spilled register or a return address written
/// beside the shared word would make each process of a run fast or slow for its whole life.
#[repr(align(128))]
#[derive(Default)]
pub struct CacheLine<T>(pub T);

/// The round trip of a cache line between `a` and `b`, ns: this thread (pinned to `a` for the
/// call) writes an odd number, a partner pinned to `b` answers with the next even one. The
/// faster of two readings of `ROUND_TRIPS` round trips each, so a reading that the host
/// interrupted does not count.
pub fn round_trip_ns(a: usize, b: usize) -> Result<f64> {
    let word = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let total = 2 * ROUND_TRIPS;
    std::thread::scope(|s| -> Result<f64> {
        let partner = spawn_scoped(s, "the cache-line partner", || {
            if pin_current_thread(b).is_err() {
                failed.store(true, Ordering::Release);
                return;
            }
            for i in 0..total {
                let mut spins = 0u64;
                while word.load(Ordering::Acquire) != 2 * i + 1 {
                    if failed.load(Ordering::Relaxed) || spins > SPIN_LIMIT {
                        return;
                    }
                    spins += 1;
                    std::hint::spin_loop();
                }
                word.store(2 * i + 2, Ordering::Release);
            }
        })?;
        let measured = (|| -> Result<f64> {
            let _pin = PinGuard::pin(a)?;
            let mut best = f64::INFINITY;
            for reading in 0..2 {
                let t = Instant::now();
                for k in 0..ROUND_TRIPS {
                    let i = reading * ROUND_TRIPS + k;
                    word.store(2 * i + 1, Ordering::Release);
                    let mut spins = 0u64;
                    while word.load(Ordering::Acquire) != 2 * i + 2 {
                        if failed.load(Ordering::Acquire) {
                            return Err(Error::Skip(format!("cannot pin a thread to CPU {b}")));
                        }
                        spins += 1;
                        if spins > SPIN_LIMIT {
                            return Err(Error::Fail(
                                "the cache-line partner stopped answering".into(),
                            ));
                        }
                        std::hint::spin_loop();
                    }
                }
                best = best.min(t.elapsed().as_nanos() as f64 / ROUND_TRIPS as f64);
            }
            Ok(best)
        })();
        if measured.is_err() {
            failed.store(true, Ordering::Release);
        }
        partner
            .join()
            .map_err(|_| Error::Fail("the cache-line partner panicked".into()))?;
        measured
    })
}

/// The pair's distance as a drift reference, read before and after every experiment
/// (`Attempt::reference_pair_ns`): the round trip between the two CPUs the experiments use
/// (`cpu_pair`), ns; 0 when this process may use only one CPU or the partner cannot be pinned.
/// Figures that do not read it per trial (the server's, fairness', the doctor's) are read
/// against this one by compare: on the 2-vCPU guest this was written on, the doctor's spinning
/// hand-off across the two vCPUs read 0.06 us in runs whose pair read 43-57 ns and 0.25 us in
/// those whose pair read 368-381 ns.
pub fn reference_pair_ns() -> f64 {
    crate::measure::placement::cpu_pair()
        .and_then(|(a, b)| round_trip_ns(a, b).ok())
        .unwrap_or(0.0)
}

/// The cache-line distance between the two CPUs moved more than this (either way): the host
/// placed the vCPUs differently, and every cross-CPU figure may follow.
pub const PAIR_REGIME_RATIO: f64 = 1.3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::placement::cpu_pair;

    #[test]
    fn a_round_trip_between_two_cpus_is_positive_and_finite() {
        let Some((a, b)) = cpu_pair() else { return };
        let ns = round_trip_ns(a, b).unwrap();
        assert!(ns > 0.0 && ns.is_finite(), "{ns}");
    }
}
