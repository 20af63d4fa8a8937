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

/// One operation of an interleaved group: its batch closure (runs `n` operations, returns the
/// time they took) and, for slow or stateful operations, a fixed batch size.
pub struct InterleavedRow<'a> {
    pub batch: Box<dyn FnMut(u64) -> Result<Duration> + 'a>,
    pub fixed_iters: Option<u64>,
    skipped: Option<String>,
}

impl<'a> InterleavedRow<'a> {
    pub fn new(batch: impl FnMut(u64) -> Result<Duration> + 'a) -> InterleavedRow<'a> {
        InterleavedRow {
            batch: Box::new(batch),
            fixed_iters: None,
            skipped: None,
        }
    }

    pub fn fixed(
        iters: u64,
        batch: impl FnMut(u64) -> Result<Duration> + 'a,
    ) -> InterleavedRow<'a> {
        InterleavedRow {
            batch: Box::new(batch),
            fixed_iters: Some(iters.max(1)),
            skipped: None,
        }
    }
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
        let iters = self.calibrate(&mut batch, start)?;
        self.collect(iters, batch, start)
    }

    /// Runs growing batches until one lasts at least `min_batch` and the warm-up time since
    /// `start` has passed (calibration doubles as warm-up); returns that batch size.
    fn calibrate(
        &self,
        batch: &mut impl FnMut(u64) -> Result<Duration>,
        start: Instant,
    ) -> Result<u64> {
        let mut iters: u64 = 1;
        loop {
            self.cancel.check()?;
            let took = batch(iters)?;
            let warm = start.elapsed() >= self.cfg.warmup;
            if took >= self.cfg.min_batch {
                if warm {
                    return Ok(iters);
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
    }

    /// Samples several operations interleaved: each is calibrated (and warmed up) on its own,
    /// then one warm-up round runs every row once, then round k runs batch k of every row in
    /// turn. A phase of the host (seconds of a co-tenant, a frequency change) then touches one
    /// round of every row alike instead of all the samples of one row, so rows stay comparable
    /// and a ratio taken per round is steadier than the ratio of two medians taken apart.
    ///
    /// A row whose batch fails with `Error::Skip` leaves the group (its reason is returned in
    /// its slot) and the others go on; any other error ends the measurement. Per-op ns,
    /// aligned by round across the rows that finished.
    pub fn interleaved(
        &self,
        rows: &mut [InterleavedRow<'_>],
    ) -> Result<Vec<std::result::Result<Summary, String>>> {
        let mut state: Vec<std::result::Result<(u64, Vec<f64>), String>> =
            Vec::with_capacity(rows.len());
        let per_row =
            |row: &mut InterleavedRow<'_>, r: Result<Duration>| -> Result<Option<Duration>> {
                match r {
                    Ok(d) => Ok(Some(d)),
                    Err(Error::Skip(reason)) => {
                        row.skipped = Some(reason);
                        Ok(None)
                    }
                    Err(e) => Err(e),
                }
            };
        for row in rows.iter_mut() {
            let start = Instant::now();
            let iters = match row.fixed_iters {
                Some(n) => {
                    while start.elapsed() < self.cfg.warmup && row.skipped.is_none() {
                        self.cancel.check()?;
                        let r = (row.batch)(n);
                        per_row(row, r)?;
                    }
                    Ok(n)
                }
                None => match self.calibrate(&mut row.batch, start) {
                    Ok(n) => Ok(n),
                    Err(Error::Skip(reason)) => Err(reason),
                    Err(e) => return Err(e),
                },
            };
            state.push(match (iters, row.skipped.take()) {
                (Ok(n), None) => Ok((n, Vec::with_capacity(self.cfg.samples))),
                (_, Some(reason)) | (Err(reason), None) => Err(reason),
            });
        }
        let rounds = self.cfg.samples.max(MIN_SAMPLES);
        let budget = self.cfg.budget * rows.len().max(1) as u32;
        let start = Instant::now();
        // Round 0 is a warm-up: every row has cooled while the others calibrated.
        for round in 0..=rounds {
            for (row, st) in rows.iter_mut().zip(state.iter_mut()) {
                let Ok((iters, samples)) = st else { continue };
                self.cancel.check()?;
                let r = (row.batch)(*iters);
                let Some(took) = per_row(row, r)? else {
                    *st = Err(row.skipped.take().unwrap_or_default());
                    continue;
                };
                if round > 0 {
                    samples.push(took.as_nanos() as f64 / *iters as f64);
                }
                if took > self.cfg.min_batch * RESIZE_FACTOR
                    && *iters > 1
                    && row.fixed_iters.is_none()
                {
                    let per_op = took.as_secs_f64() / *iters as f64;
                    *iters =
                        ((self.cfg.min_batch.as_secs_f64() * 1.2 / per_op).ceil() as u64).max(1);
                }
            }
            if round >= MIN_SAMPLES && start.elapsed() > budget {
                break;
            }
        }
        Ok(state
            .into_iter()
            .map(|st| {
                st.and_then(|(iters, samples)| {
                    Summary::from_samples(&samples, iters)
                        .ok_or_else(|| "the samples were not finite numbers".to_string())
                })
            })
            .collect())
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
    fn interleaved_rows_take_their_samples_round_by_round() {
        let cancel = Cancel::never();
        let s = Sampler::new(cfg(), &cancel);
        let log = std::cell::RefCell::new(Vec::new());
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
        assert_eq!(a.n, 9);
        assert_eq!(b.n, 9);
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
    fn errors_from_the_operation_propagate() {
        let cancel = Cancel::never();
        let s = Sampler::new(cfg(), &cancel);
        let r = s.per_op_ns(|_| Err(Error::Skip("no".into())));
        assert!(matches!(r, Err(Error::Skip(_))));
    }
}
