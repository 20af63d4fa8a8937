//! Experiments: one file each, all behind the `Experiment` trait, listed in `registry()`.
//!
//! Adding an experiment means writing its file and adding one line to `registry()`.

use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::Result;
use crate::measure::env::Environment;
use crate::measure::sampler::{Sampler, SamplerConfig};
use crate::results::{Metric, Series, SkippedMetric};

pub mod coop;
pub mod create;
pub mod fairness;
pub mod latency;
pub mod locks;
pub mod ordering;
pub mod peers;
pub mod preempt;
pub mod priority;
pub mod shm;
pub mod switch;
pub mod sync;
pub mod sync_contended;
pub mod throttle;

/// How much work a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Smallest possible: for the end-to-end tests (structure, not figures).
    Tiny,
    /// The default suite: every experiment, short.
    Quick,
    /// `--full`: the studies' full ranges and more samples.
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tiny => "tiny",
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }

    /// Sampling defaults for one metric in this mode.
    pub fn sampler_config(self) -> SamplerConfig {
        match self {
            Mode::Tiny => SamplerConfig {
                warmup: Duration::from_micros(200),
                samples: 7,
                min_batch: Duration::from_micros(100),
                budget: Duration::from_millis(20),
            },
            Mode::Quick => SamplerConfig {
                warmup: Duration::from_millis(20),
                samples: 11,
                min_batch: Duration::from_millis(2),
                budget: Duration::from_millis(400),
            },
            Mode::Full => SamplerConfig {
                warmup: Duration::from_millis(100),
                samples: 31,
                min_batch: Duration::from_millis(5),
                budget: Duration::from_secs(4),
            },
        }
    }

    /// Picks the value for this mode.
    pub fn pick<T>(self, tiny: T, quick: T, full: T) -> T {
        match self {
            Mode::Tiny => tiny,
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }
}

/// What an experiment gets to run with. No global state: everything comes through here.
pub struct Ctx<'a> {
    pub mode: Mode,
    pub cancel: &'a Cancel,
    /// Reports what is being measured now (shown beside the progress bar).
    pub progress: &'a (dyn Fn(&str) + Sync),
    /// The machine as the runner captured it at the start of the run; experiments read it
    /// here rather than capturing again (which would re-probe and re-read /sys mid-run).
    pub env: &'a Environment,
}

impl<'a> Ctx<'a> {
    pub fn sampler(&self) -> Sampler<'a> {
        Sampler::new(self.mode.sampler_config(), self.cancel)
    }

    pub fn step(&self, what: &str) -> Result<()> {
        self.cancel.check()?;
        (self.progress)(what);
        Ok(())
    }
}

/// What a successful run of an experiment produced.
#[derive(Debug, Default)]
pub struct Outcome {
    pub metrics: Vec<Metric>,
    pub series: Vec<Series>,
    pub skipped: Vec<SkippedMetric>,
    pub conclusion: Option<String>,
}

impl Outcome {
    pub fn skip(&mut self, id: &str, reason: impl Into<String>) {
        self.skipped.push(SkippedMetric {
            id: id.to_string(),
            reason: reason.into(),
        });
    }
}

pub trait Experiment: Sync {
    /// The name used on the command line.
    fn name(&self) -> &'static str;
    /// The study it reproduces (short citation).
    fn study(&self) -> &'static str;
    /// One line: what it measures.
    fn measures(&self) -> &'static str;
    /// Rough wall time in this mode on a 2-core machine, for `threadlab list`.
    fn rough_duration(&self, mode: Mode) -> Duration;
    /// Runs it. Err(Skip) when it cannot run here, Err(Cancelled) when interrupted.
    fn run(&self, ctx: &Ctx) -> Result<Outcome>;
}

/// Every experiment, in the order the suite runs them.
pub fn registry() -> Vec<&'static dyn Experiment> {
    vec![
        &create::Create,
        &sync::Sync,
        &switch::Switch,
        &shm::Shm,
        &fairness::Fairness,
        &ordering::MemoryOrdering,
        &preempt::Preempt,
        &throttle::Throttle,
        &priority::Priority,
        &latency::Latency,
        &coop::Coop,
    ]
}

pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    registry().into_iter().find(|e| e.name() == name)
}
