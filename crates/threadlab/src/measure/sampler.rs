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
use crate::measure::drift::phase_probe;
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
    /// Read the machine's phase around every sample and set aside samples the host disturbed
    /// (see `PhaseLog`). Off in unit tests, whose batches are synthetic.
    pub phase_filter: bool,
}

/// The machine's phase read around every sample (round): before the first, then after each.
/// A sample is quiet when the readings on both sides of it are within `QUIET_MARGIN` of the
/// best readings of its group; when at least `MIN_SAMPLES` are quiet, only those are kept. A
/// phase of the host that slows the core (a co-tenant on the core's other hyper-thread, the
/// host's own work) lasts seconds and shows in both readings; the samples taken in it are
/// set aside, so runs taken in different phases report the same machine. Each reading costs
/// about 0.2 ms.
struct PhaseLog {
    on: bool,
    phases: Vec<[f64; 2]>,
}

impl PhaseLog {
    fn new(on: bool) -> PhaseLog {
        let mut phases = Vec::new();
        if on {
            phases.push(phase_probe());
        }
        PhaseLog { on, phases }
    }

    /// After a sample (or a round of samples).
    fn read(&mut self) {
        if self.on {
            self.phases.push(phase_probe());
        }
    }

    fn quiet(&self) -> usize {
        if self.on {
            quiet_rounds(&self.phases).len()
        } else {
            self.phases.len()
        }
    }

    /// Enough quiet samples to stop: `target` of them; or `MIN_SAMPLES` once the budget is
    /// spent; or, on a machine disturbed throughout, when twice the budget or four times the
    /// target have gone by.
    fn done(&self, taken: usize, target: usize, spent: Duration, budget: Duration) -> bool {
        if !self.on {
            return taken >= target || (taken >= MIN_SAMPLES && spent > budget);
        }
        let quiet = self.quiet();
        quiet >= target
            || (spent > budget && quiet >= MIN_SAMPLES)
            || (taken >= MIN_SAMPLES && (spent > budget * 2 || taken >= 4 * target))
    }

    /// Which of the `taken` samples to keep, and what was done, for the metric's note.
    fn select(&self, taken: usize) -> (Vec<usize>, Option<PhaseFilter>) {
        if !self.on {
            return ((0..taken).collect(), None);
        }
        let quiet = quiet_rounds(&self.phases);
        let n_quiet = quiet.len();
        let keep: Vec<usize> = if n_quiet >= MIN_SAMPLES {
            quiet
        } else {
            (0..taken).collect()
        };
        let f = PhaseFilter {
            taken,
            quiet: n_quiet,
            kept: keep.len(),
        };
        (keep, Some(f))
    }
}

/// What the phase filter did to a metric's samples.
pub use crate::measure::stats::PhaseFilter;

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
        let target = self.cfg.samples.max(MIN_SAMPLES);
        let budget = self.cfg.budget * rows.len().max(1) as u32;
        let start = Instant::now();
        // Round 0 is a warm-up: every row has cooled while the others calibrated. The phase
        // log starts after it, so every sampled round has a reading before and after it.
        let mut log = PhaseLog::new(false);
        let mut round = 0usize;
        loop {
            if round == 1 {
                log = PhaseLog::new(self.cfg.phase_filter);
            }
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
            if round > 0 {
                log.read();
                if log.done(round, target, start.elapsed(), budget) {
                    break;
                }
            }
            round += 1;
        }
        let (keep, filter) = log.select(round);
        let state: Vec<std::result::Result<(u64, Vec<f64>), String>> = state
            .into_iter()
            .map(|st| {
                st.map(|(iters, samples)| {
                    let kept = keep
                        .iter()
                        .filter_map(|&k| samples.get(k).copied())
                        .collect();
                    (iters, kept)
                })
            })
            .collect();
        let filter_of = filter;
        Ok(state
            .into_iter()
            .map(|st| {
                st.and_then(|(iters, samples)| {
                    let mut s = Summary::from_samples(&samples, iters)
                        .ok_or_else(|| "the samples were not finite numbers".to_string())?;
                    s.phase = filter_of;
                    Ok(s)
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
        let target = self.cfg.samples.max(MIN_SAMPLES);
        let mut samples = Vec::with_capacity(target);
        let mut log = PhaseLog::new(self.cfg.phase_filter);
        loop {
            self.cancel.check()?;
            let took = batch(iters)?;
            samples.push(took.as_nanos() as f64 / iters as f64);
            log.read();
            // An operation whose cost jumped after calibration (a lock convoy, a cache that
            // stopped fitting) would make every later batch far too long: re-size the batch to
            // the cost just seen. Samples stay per-operation, so they remain comparable.
            if took > self.cfg.min_batch * RESIZE_FACTOR && iters > 1 {
                let per_op = took.as_secs_f64() / iters as f64;
                iters = ((self.cfg.min_batch.as_secs_f64() * 1.2 / per_op).ceil() as u64).max(1);
            }
            if log.done(samples.len(), target, start.elapsed(), self.cfg.budget) {
                break;
            }
        }
        summarise(&samples, iters, &log)
    }

    /// Statistics over values the caller measured itself, one per sample (already per-op).
    pub fn repeat(&self, mut sample: impl FnMut() -> Result<f64>, batch: u64) -> Result<Summary> {
        let start = Instant::now();
        while start.elapsed() < self.cfg.warmup {
            self.cancel.check()?;
            sample()?;
        }
        let target = self.cfg.samples.max(MIN_SAMPLES);
        let mut samples = Vec::with_capacity(target);
        let mut log = PhaseLog::new(self.cfg.phase_filter);
        loop {
            self.cancel.check()?;
            samples.push(sample()?);
            log.read();
            if log.done(samples.len(), target, start.elapsed(), self.cfg.budget) {
                break;
            }
        }
        summarise(&samples, batch, &log)
    }
}

/// The summary of the samples the phase log keeps, saying what it set aside.
fn summarise(samples: &[f64], batch: u64, log: &PhaseLog) -> Result<Summary> {
    let (keep, filter) = log.select(samples.len());
    let kept: Vec<f64> = keep
        .iter()
        .filter_map(|&k| samples.get(k).copied())
        .collect();
    let mut s = Summary::from_samples(&kept, batch)
        .ok_or_else(|| Error::Fail("the samples were not finite numbers".into()))?;
    s.phase = filter;
    Ok(s)
}

/// A reading counts as quiet when both of its parts are within `QUIET_MARGIN` of the best
/// reading of its group.
pub const QUIET_MARGIN: f64 = 0.10;

/// The rounds taken while the machine was quiet: `phases[k]` is read before round k and
/// `phases[k + 1]` after it, and a round is quiet when both are (a phase of the host that began
/// in the middle of a round shows in the reading after it).
pub fn quiet_rounds(phases: &[[f64; 2]]) -> Vec<usize> {
    let best = |k: usize| phases.iter().map(|p| p[k]).fold(f64::INFINITY, f64::min);
    let (bw, bs) = (best(0), best(1));
    let quiet =
        |p: &[f64; 2]| p[0] <= bw * (1.0 + QUIET_MARGIN) && p[1] <= bs * (1.0 + QUIET_MARGIN);
    (0..phases.len().saturating_sub(1))
        .filter(|&k| quiet(&phases[k]) && quiet(&phases[k + 1]))
        .collect()
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
            phase_filter: false,
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
    fn rounds_the_host_disturbed_are_set_aside() {
        // Readings between rounds: round k lies between readings k and k + 1.
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
}
