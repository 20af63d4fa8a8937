use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use super::*;
use crate::error::Error;
use crate::measure::stats::Stop;

fn cfg() -> SamplerConfig {
    SamplerConfig {
        warmup: Duration::from_millis(1),
        min_batch: Duration::from_micros(200),
        min_trials: 8,
        max_trials: 20,
        rounds: 3,
        budget: Duration::from_secs(5),
        phase_filter: false,
    }
}

#[test]
fn calibrated_batches_reach_min_batch_and_stop_at_the_target() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let mut last_iters = 0;
    let sum = s
        .per_op_ns(|n| {
            last_iters = n;
            // A steady synthetic cost: 50 ns per op.
            Ok(Duration::from_nanos(n * 50))
        })
        .unwrap();
    assert_eq!(sum.n, 8, "steady trials stop at the minimum");
    assert_eq!(sum.batch, last_iters);
    assert!(sum.batch > 1, "a trivial op must be batched");
    assert_eq!(sum.batches.len(), 8);
    assert!(sum.batches.iter().all(|b| b.len() == 3));
    let log = sum.trials.as_ref().unwrap();
    assert_eq!(log.stop, Stop::Precision);
    assert_eq!((log.taken, log.kept), (8, 8));
    assert_eq!(log.ci_pct, Some(0.0));
}

#[test]
fn trials_that_disagree_take_more_until_the_limit() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let calls = &Cell::new(0u64);
    let trial = Cell::new(0u64);
    // A fresh subject per trial whose cost alternates 100 / 200 ns: the trials disagree by 2x,
    // so the median's interval never narrows to 3% and sampling runs to the trial limit.
    let sum = s
        .one(InterleavedRow::fresh(|| {
            trial.set(trial.get() + 1);
            let cost = if trial.get() % 2 == 0 { 100 } else { 200 };
            Ok(move |n: u64| {
                calls.set(calls.get() + 1);
                Ok(Duration::from_nanos(n * cost))
            })
        }))
        .unwrap();
    let log = sum.trials.as_ref().unwrap();
    assert_eq!(log.stop, Stop::Limit);
    assert_eq!(sum.n, 20);
    // One subject for calibration, then one per trial.
    assert_eq!(trial.get(), 21);
    // Every trial of a fresh subject has a warm-up batch before its 3 kept ones.
    assert!(calls.get() >= 20 * 4);
    assert!(sum.values.iter().all(|v| *v == 100.0 || *v == 200.0));
}

#[test]
fn a_trials_figure_is_the_median_of_its_batches() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let k = Cell::new(0u64);
    // Batches cost 10, 30, 20, 10, 30, 20, ... ns per op: each trial of 3 holds one of each.
    let sum = s
        .per_op_ns_fixed(10, |n| {
            k.set(k.get() + 1);
            Ok(Duration::from_nanos(
                n * [10, 30, 20][(k.get() % 3) as usize],
            ))
        })
        .unwrap();
    for (b, v) in sum.batches.iter().zip(&sum.values) {
        assert_eq!(*v, crate::measure::stats::median(b));
    }
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
fn a_spent_budget_stops_at_the_minimum_trials() {
    let cancel = Cancel::never();
    let mut c = cfg();
    c.max_trials = 1000;
    c.budget = Duration::ZERO;
    let s = Sampler::new(c, &cancel);
    let x = Cell::new(1.0f64);
    // 1, 3, 1, 3, ...: trials of three alternate medians 1 and 3, so the interval stays wide
    // and only the budget can stop it.
    let sum = s
        .repeat(
            || {
                x.set(4.0 - x.get());
                Ok(x.get())
            },
            1,
        )
        .unwrap();
    assert_eq!(sum.n, 8);
    assert_eq!(sum.trials.unwrap().stop, Stop::Budget);
}

#[test]
fn a_cost_jump_after_calibration_resizes_the_batch() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let calls = Cell::new(0u32);
    let sizes = RefCell::new(Vec::new());
    let t = Instant::now();
    let sum = s
        .per_op_ns(|n| {
            calls.set(calls.get() + 1);
            sizes.borrow_mut().push(n);
            // 1 ns per op at first, then 1000x dearer: as a lock convoy would.
            let per_op_ns = if calls.get() < 12 { 1 } else { 1_000 };
            Ok(Duration::from_nanos(n * per_op_ns))
        })
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(60));
    // After the first dear batch, the batch shrinks to ~240 us of work (240 ops).
    assert!(
        *sizes.borrow().last().unwrap() <= 300,
        "{:?}",
        sizes.borrow()
    );
    assert_eq!(sum.median, 1_000.0);
}

#[test]
fn interleaved_rows_take_their_batches_round_by_round() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let log = RefCell::new(Vec::new());
    let mut rows = vec![
        InterleavedRow::new(|n| {
            log.borrow_mut().push('a');
            Ok(Duration::from_nanos(n * 100))
        }),
        InterleavedRow::new(|n| {
            log.borrow_mut().push('b');
            Ok(Duration::from_nanos(n * 300))
        }),
    ];
    let out = s.interleaved(&mut rows).unwrap();
    drop(rows);
    let a = out[0].as_ref().unwrap();
    let b = out[1].as_ref().unwrap();
    assert_eq!(a.n, 8);
    assert_eq!(b.n, 8);
    assert_eq!(a.median, 100.0);
    assert_eq!(b.median, 300.0);
    // After both calibrations, the batches alternate a, b, a, b, ...
    let log = log.into_inner();
    let tail: String = log[log.len() - 20..].iter().collect();
    assert_eq!(tail, "ab".repeat(10));
}

#[test]
fn a_row_that_cannot_run_leaves_the_group_with_its_reason() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let mut calls = 0;
    let mut rows = vec![
        InterleavedRow::new(|n| Ok(Duration::from_nanos(n * 100))),
        InterleavedRow::fixed(10, |_| {
            calls += 1;
            if calls > 3 {
                Err(Error::Skip("gone".into()))
            } else {
                Ok(Duration::from_millis(1))
            }
        }),
    ];
    let out = s.interleaved(&mut rows).unwrap();
    assert!(out[0].is_ok());
    assert_eq!(out[1].as_ref().unwrap_err(), "gone");
    let mut rows = vec![InterleavedRow::new(|_| Err(Error::Fail("broken".into())))];
    assert!(matches!(s.interleaved(&mut rows), Err(Error::Fail(_))));
}

#[test]
fn a_fresh_row_whose_subject_cannot_be_made_is_skipped() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let r = s.one(InterleavedRow::fresh(
        || -> Result<fn(u64) -> Result<Duration>> { Err(Error::Skip("no partner CPU".into())) },
    ));
    assert!(matches!(r, Err(Error::Skip(m)) if m == "no partner CPU"));
}

#[test]
fn trials_the_host_disturbed_are_set_aside() {
    // Readings between trials: trial k lies between readings k and k + 1.
    let phases = [
        [100.0, 50.0],
        [104.0, 52.0],
        [109.0, 54.0],
        [160.0, 50.0], // the core was shared: the throughput loop slowed
        [101.0, 51.0],
        [101.0, 80.0], // the kernel path slowed
        [102.0, 50.0],
        [103.0, 51.0],
    ];
    assert_eq!(quiet_rounds(&phases), vec![0, 1, 6]);
    assert!(quiet_rounds(&[]).is_empty());
    assert!(quiet_rounds(&[[1.0, 1.0]]).is_empty());
}

#[test]
fn errors_from_the_operation_propagate() {
    let cancel = Cancel::never();
    let s = Sampler::new(cfg(), &cancel);
    let r = s.per_op_ns(|_| Err(Error::Skip("no".into())));
    assert!(matches!(r, Err(Error::Skip(_))));
}
