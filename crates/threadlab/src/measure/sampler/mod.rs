//! Warm-up, batching, trials and sampling.
//!
//! An operation is measured in batches: the closure runs `iters` operations and returns the time
//! they took (the closure decides which part is timed, so set-up can be excluded). The batch size
//! is grown until one batch takes at least `min_batch` (>= 1 ms in the quick suite, so the
//! clock's own cost, ~20-50 ns, stays far under 1% of a batch). Calibration doubles as warm-up.
//!
//! Batches are taken in **trials**, the unit of replication. A figure decided by a race (which
//! thread wins a lock, where a woken thread lands, where the host runs the vCPUs) keeps one
//! regime for the life of its threads, so batches of one set of threads agree with each other
//! and say nothing about the next set. A row that makes its subject fresh (threads, locks,
//! objects, placement: `InterleavedRow::fresh`) gets a new one for every trial; every trial runs
//! a warm-up batch where the subject is new, then `rounds` batches. A trial's figure is the
//! median of its batches; a metric's statistics (median, quartiles, spread) are over its
//! trials, and the results file keeps every batch of every trial.
//!
//! How many trials: at least `min_trials` kept; then more while the distribution-free 95%
//! interval of the median over the trials is wider than the row's target (`Precision`), until
//! the interval is narrow enough, the budget is spent or `max_trials` were taken: the trials'
//! own disagreement decides, and the metric says which stopped it.
//!
//! Around every trial the machine is read (`trials::Reading`): a trial during which the host
//! stole time from a CPU the rows use, or one with a slow throughput or system-call reference on
//! either side, is set aside when enough others remain; while too few are quiet, sampling goes
//! on to half as many trials again and half the budget again (`trials::limits`), and only then
//! keeps every trial, disturbed or not. The host can also slow a trial between two quiet
//! readings: a trial in which most of the group's rows on one CPU read well above their own
//! medians together is set aside too (`trials::slowed_together`).

mod trials;

use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::Result;
use crate::measure::host::HostLog;
use crate::measure::stats::Summary;

pub use crate::measure::stats::MIN_TRIALS;
pub use trials::quiet_rounds;

/// A batch this many times longer than the calibrated length gets re-sized.
pub const RESIZE_FACTOR: u32 = 20;

/// How precisely a row's median must be known before sampling may stop: the half-width of the
/// distribution-free 95% interval of the median over the trials, as a percentage of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Precision {
    /// User-level code on one CPU (a green switch, an uncontended lock): ±1%.
    UserLevel,
    /// A kernel path on one CPU (a system call, a switch, a fork): ±3%.
    Kernel,
    /// Decided by a race or by placement (cross-CPU hand-offs, contended locks, the kernel
    /// placing threads): ±5%.
    Race,
    /// Another target, percent.
    Pct(f64),
}

impl Precision {
    pub fn target_pct(self) -> f64 {
        match self {
            Precision::UserLevel => 1.0,
            Precision::Kernel => 3.0,
            Precision::Race => 5.0,
            Precision::Pct(p) => p,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SamplerConfig {
    pub warmup: Duration,
    pub min_batch: Duration,
    /// Trials kept at least (unless the budget runs out twice over on a disturbed machine).
    pub min_trials: usize,
    /// Trials taken at most.
    pub max_trials: usize,
    /// Batches per trial, after the warm-up batch of a fresh subject.
    pub rounds: usize,
    /// Soft limit per row: past it, sampling stops once `min_trials` are kept.
    pub budget: Duration,
    /// Read the machine around every trial and set aside the trials the host disturbed. Off in
    /// unit tests, whose batches are synthetic.
    pub phase_filter: bool,
}

impl SamplerConfig {
    /// This configuration with its budget and its trial counts scaled by `factor` (`--budget`
    /// fitting a run into a wall time): more trials and a longer budget above 1, fewer below,
    /// but never fewer than `MIN_TRIALS` kept, the fewest a median's 95% interval needs. Each
    /// row still stops early once its median is known to its target.
    pub fn scaled(self, factor: f64) -> SamplerConfig {
        if !factor.is_finite() || factor <= 0.0 || (factor - 1.0).abs() < 1e-6 {
            return self;
        }
        let times = |n: usize| (n as f64 * factor).round() as usize;
        let min_trials = if factor < 1.0 {
            times(self.min_trials).max(MIN_TRIALS).min(self.min_trials)
        } else {
            self.min_trials
        };
        SamplerConfig {
            budget: self.budget.mul_f64(factor),
            min_trials,
            max_trials: times(self.max_trials).max(min_trials),
            ..self
        }
    }
}

/// Where a group's rows run: the CPUs whose steal sets a trial aside, and the pair whose
/// cache-line distance is measured at the start of every trial (rows spanning two CPUs or
/// placed by the kernel).
#[derive(Debug, Clone, Default)]
pub struct Span {
    pub cpus: Vec<usize>,
    pub pair: Option<(usize, usize)>,
}

type BatchFn<'a> = Box<dyn FnMut(u64) -> Result<Duration> + 'a>;
type FreshFn<'a> = Box<dyn FnMut() -> Result<BatchFn<'a>> + 'a>;

/// Where a row's batches come from.
enum Source<'a> {
    /// The same batch closure every trial: its subject lives outside the sampler, or the batch
    /// makes a fresh one itself (a batch of thread creations, of forks).
    Batch(BatchFn<'a>),
    /// A fresh subject every trial: the factory makes it and returns its batch; dropping the
    /// batch ends the subject (joins its threads).
    Fresh(FreshFn<'a>),
    /// Figures the caller measures itself, already per operation, one per call.
    Value(Box<dyn FnMut() -> Result<f64> + 'a>),
}

/// One row of a sampled group.
pub struct InterleavedRow<'a> {
    source: Source<'a>,
    /// Slow or stateful operations run a fixed number per batch instead of a calibrated one.
    pub fixed_iters: Option<u64>,
    pub precision: Precision,
    /// For rows the kernel places: asked after every kept batch which share of its operations
    /// had their parties on one CPU (0 or 1 for a pair that stays put for the batch; None: not
    /// known for that batch). Where the kernel put them is the regime such a figure depends
    /// on; each trial records the mean share over its batches.
    pub colocation: Option<Colocation<'a>>,
    /// The row runs on one CPU, so where the host puts the vCPUs does not move it: it votes on
    /// whether the host slowed a trial (`trials::slowed_together`). Rows on two CPUs or placed
    /// by the kernel do not vote: the vCPUs' distance moves them all at once, and that is a
    /// regime to report, not a disturbance to set aside.
    pub one_cpu: bool,
}

/// Says, after a batch, which share of a kernel-placed row's operations had their parties on
/// one CPU, from 0 to 1.
pub type Colocation<'a> = Box<dyn Fn() -> Option<f64> + 'a>;

impl<'a> InterleavedRow<'a> {
    /// A row whose batch closure serves every trial.
    pub fn new(batch: impl FnMut(u64) -> Result<Duration> + 'a) -> InterleavedRow<'a> {
        InterleavedRow::with_source(Source::Batch(Box::new(batch)))
    }

    /// A row with a fixed batch size (slow or stateful operations).
    pub fn fixed(
        iters: u64,
        batch: impl FnMut(u64) -> Result<Duration> + 'a,
    ) -> InterleavedRow<'a> {
        let mut r = InterleavedRow::new(batch);
        r.fixed_iters = Some(iters.max(1));
        r
    }

    /// A row whose subject is made fresh for every trial by `make`, which returns its batch.
    pub fn fresh<B>(mut make: impl FnMut() -> Result<B> + 'a) -> InterleavedRow<'a>
    where
        B: FnMut(u64) -> Result<Duration> + 'a,
    {
        InterleavedRow::with_source(Source::Fresh(Box::new(move || {
            make().map(|b| Box::new(b) as BatchFn<'a>)
        })))
    }

    /// A row of figures the caller measures itself (per operation), one per call.
    pub fn values(sample: impl FnMut() -> Result<f64> + 'a) -> InterleavedRow<'a> {
        InterleavedRow::with_source(Source::Value(Box::new(sample)))
    }

    fn with_source(source: Source<'a>) -> InterleavedRow<'a> {
        InterleavedRow {
            source,
            fixed_iters: None,
            precision: Precision::Kernel,
            colocation: None,
            one_cpu: false,
        }
    }

    pub fn precision(mut self, p: Precision) -> InterleavedRow<'a> {
        self.precision = p;
        self
    }

    pub fn fixed_batch(mut self, iters: u64) -> InterleavedRow<'a> {
        self.fixed_iters = Some(iters.max(1));
        self
    }

    /// The row runs on one CPU (see `one_cpu`).
    pub fn on_one_cpu(mut self) -> InterleavedRow<'a> {
        self.one_cpu = true;
        self
    }
}

pub struct Sampler<'a> {
    pub cfg: SamplerConfig,
    cancel: &'a Cancel,
    host: Option<&'a HostLog>,
    span: Span,
}

impl<'a> Sampler<'a> {
    pub fn new(cfg: SamplerConfig, cancel: &'a Cancel) -> Sampler<'a> {
        Sampler {
            cfg,
            cancel,
            host: None,
            span: Span::default(),
        }
    }

    /// Adds what the trials saw of the host (run delay, trials set aside) to `log`.
    pub fn with_host_log(mut self, log: &'a HostLog) -> Sampler<'a> {
        self.host = Some(log);
        self
    }

    /// The CPUs the rows use (their steal sets a trial aside) and the pair whose distance is
    /// read at the start of every trial.
    pub fn on(mut self, span: Span) -> Sampler<'a> {
        self.span = span;
        self
    }

    /// Time per operation, in nanoseconds, over trials of calibrated batches of one operation
    /// whose subject lives outside the sampler.
    pub fn per_op_ns(&self, batch: impl FnMut(u64) -> Result<Duration>) -> Result<Summary> {
        self.one(InterleavedRow::new(batch))
    }

    /// Like per_op_ns but with a fixed batch size (operations that are slow or stateful).
    pub fn per_op_ns_fixed(
        &self,
        iters: u64,
        batch: impl FnMut(u64) -> Result<Duration>,
    ) -> Result<Summary> {
        self.one(InterleavedRow::fixed(iters, batch))
    }

    /// Statistics over figures the caller measures itself, one per call (already per
    /// operation; `batch` operations each).
    pub fn repeat(&self, sample: impl FnMut() -> Result<f64>, batch: u64) -> Result<Summary> {
        let mut s = self.one(InterleavedRow::values(sample))?;
        s.batch = batch;
        Ok(s)
    }

    /// One row, sampled alone: its skip reason, if any, becomes the error.
    pub fn one(&self, row: InterleavedRow<'_>) -> Result<Summary> {
        let mut rows = [row];
        let mut out = self.interleaved(&mut rows)?;
        out.pop()
            .expect("one row in, one result out")
            .map_err(crate::error::Error::Skip)
    }

    /// Samples several rows in the same trials, round by round: in every trial each row gets a
    /// fresh subject where it makes one, a warm-up batch where that is new, then round k runs
    /// batch k of every row in turn. A phase of the host (seconds of a co-tenant, a frequency
    /// change) then touches one round of every row alike instead of all the batches of one row,
    /// so rows stay comparable and a ratio taken per round is steadier than the ratio of two
    /// medians taken apart.
    ///
    /// A row whose batch fails with `Error::Skip` leaves the group (its reason is returned in
    /// its slot) and the others go on; any other error ends the measurement. Per-op ns,
    /// aligned by trial and round across the rows that finished.
    pub fn interleaved(
        &self,
        rows: &mut [InterleavedRow<'_>],
    ) -> Result<Vec<std::result::Result<Summary, String>>> {
        trials::run(self, rows)
    }
}

#[cfg(test)]
mod tests;
