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
use crate::measure::stats::median;
use crate::measure::units::{fmt_value, fmt_with_unit, Unit};

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

/// A step this wide between a metric's trials' readings, in order, separates two placements
/// (`placement_split`): single readings within one placement spread more than the medians
/// `PAIR_REGIME_RATIO` compares (62-81 ns within one quick run on the guest below, against
/// 303-354 ns for the far placement; a third, 29-53 ns, is less than 2x from the first).
pub const SPLIT_RATIO: f64 = 2.0;

/// The far trials' median and the near ones' differ by more than this, percent, for a metric's
/// note to set them side by side (`placement_split`).
pub const SPLIT_PCT: f64 = 10.0;

/// One kept trial of a metric: its value and the pair's distance read as it started, ns.
type TrialAt = (f64, f64);

/// For the note of a metric on two CPUs whose kept trials met the host's vCPUs both near and
/// far (their readings in order step up `SPLIT_RATIO` times or more; split at the widest
/// step), at least two trials each, and read apart in the two (every trial of one group beyond
/// every trial of the other, the groups' medians more than `SPLIT_PCT` apart): what each group
/// read, with its distances. `values` and `pair_ns` are per kept trial, in the same order;
/// None when they do not pair up. On the 2-vCPU guest this was written on, Tokio's fan-out tree read about 5.5 ms in
/// trials whose pair read 60-70 ns and about 12 ms in those at 303-354 ns, while uthread's read
/// the same either way (docs/compare.md has the trials).
pub fn placement_split(values: &[f64], pair_ns: &[f64], unit: Unit) -> Option<String> {
    if values.len() != pair_ns.len() || pair_ns.iter().any(|p| !(*p > 0.0 && p.is_finite())) {
        return None;
    }
    // Split at the widest step between the readings in order, if it is wide enough.
    let mut trials: Vec<TrialAt> = values
        .iter()
        .copied()
        .zip(pair_ns.iter().copied())
        .collect();
    trials.sort_by(|x, y| x.1.total_cmp(&y.1));
    let (cut, step) = (1..trials.len())
        .map(|i| (i, trials[i].1 / trials[i - 1].1))
        .max_by(|x, y| x.1.total_cmp(&y.1))?;
    if step < SPLIT_RATIO {
        return None;
    }
    let (near, far) = trials.split_at(cut);
    if near.len() < 2 || far.len() < 2 {
        return None;
    }
    let range = |g: &[TrialAt], pick: fn(&TrialAt) -> f64| {
        let lo = g.iter().map(pick).fold(f64::INFINITY, f64::min);
        let hi = g.iter().map(pick).fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let value = |t: &TrialAt| t.0;
    let med = |g: &[TrialAt]| median(&g.iter().map(value).collect::<Vec<_>>());
    let (a, b) = (med(near), med(far));
    let ((near_lo, near_hi), (far_lo, far_hi)) = (range(near, value), range(far, value));
    let apart = near_hi < far_lo || far_hi < near_lo;
    if !(a > 0.0 && b > 0.0 && apart) || (b / a).max(a / b) <= 1.0 + SPLIT_PCT / 100.0 {
        return None;
    }
    let span = |g: &[TrialAt]| {
        let (lo, hi) = range(g, |t| t.1);
        if lo.round() == hi.round() {
            format!("{lo:.0}")
        } else {
            format!("{lo:.0}-{hi:.0}")
        }
    };
    Some(format!(
        "; the host moved the vCPUs during its trials: the {} with the two CPUs {} ns apart (a \
         cache line's round trip) read {}, the {} with them {} ns apart {} ({}x)",
        near.len(),
        span(near),
        fmt_with_unit(a, unit),
        far.len(),
        span(far),
        fmt_with_unit(b, unit),
        fmt_value(b / a)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::placement::cpu_pair;

    #[test]
    fn trials_near_and_far_read_apart_are_set_side_by_side() {
        // create.tokio.tree's trials in one quick run, rounded: two near, six far.
        let values = [5.8, 12.7, 11.5, 12.1, 12.1, 11.8, 12.6, 5.6];
        let pair = [64.1, 307.0, 312.0, 318.0, 325.7, 302.8, 312.0, 65.9];
        let s = placement_split(&values, &pair, Unit::Ms).unwrap();
        assert!(
            s.contains("the 2 with the two CPUs 64-66 ns apart") && s.contains("read 5.70 ms"),
            "{s}"
        );
        assert!(
            s.contains("the 6 with them 303-326 ns apart 12.10 ms (2.12x)"),
            "{s}"
        );
    }

    #[test]
    fn no_split_when_the_groups_agree_are_too_small_or_do_not_pair_up() {
        let pair = [64.0, 66.0, 320.0, 330.0];
        // uthread's tree: the same either way.
        assert_eq!(
            placement_split(&[6.0, 6.2, 6.1, 6.3], &pair, Unit::Ms),
            None
        );
        // Readings within one placement's spread (62-81 ns) are one group.
        let jitter = [62.0, 81.0, 64.0, 79.0];
        assert_eq!(
            placement_split(&[6.0, 12.0, 6.1, 12.1], &jitter, Unit::Ms),
            None
        );
        // Three placements: split at the widest step (70 -> 311), which leaves one far trial.
        let three = [29.0, 53.0, 62.0, 65.0, 70.0, 311.0];
        let v = [62.0, 60.0, 55.0, 56.0, 55.0, 54.0];
        assert_eq!(placement_split(&v, &three, Unit::Us), None);
        // One far trial is not a group.
        let one_far = [64.0, 66.0, 65.0, 330.0];
        assert_eq!(
            placement_split(&[6.0, 6.2, 6.1, 12.0], &one_far, Unit::Ms),
            None
        );
        // Every trial near.
        let near = [64.0, 66.0, 65.0, 70.0];
        assert_eq!(
            placement_split(&[6.0, 6.2, 12.1, 12.0], &near, Unit::Ms),
            None
        );
        // Values and readings that do not pair up, or a missing reading.
        assert_eq!(placement_split(&[6.0, 12.0], &pair, Unit::Ms), None);
        let missing = [64.0, 0.0, 320.0, 330.0];
        assert_eq!(
            placement_split(&[6.0, 6.2, 12.0, 12.1], &missing, Unit::Ms),
            None
        );
    }

    #[test]
    fn a_round_trip_between_two_cpus_is_positive_and_finite() {
        let Some((a, b)) = cpu_pair() else { return };
        let ns = round_trip_ns(a, b).unwrap();
        assert!(ns > 0.0 && ns.is_finite(), "{ns}");
    }
}
