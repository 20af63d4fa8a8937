//! The results file: what a run found, in the shape documented in docs/results-schema.md.
//!
//! Everything an experiment reports passes through these types, and every exporter
//! (terminal table, JSON, CSV, Markdown) reads only these types.

use serde::{Deserialize, Serialize};

use crate::measure::env::Environment;
use crate::measure::stats::Summary;

/// Bumped whenever a field is renamed or its meaning changes; adding a field does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunResults {
    pub schema_version: u32,
    pub threadlab_version: String,
    /// RFC 3339 UTC time at which the run started.
    pub started_at: String,
    /// RFC 3339 UTC time at which the run ended (or was interrupted).
    pub finished_at: String,
    /// "quick", "full" or "tiny" (the last only for tests).
    pub mode: String,
    /// Set when the run was cut short by SIGINT or SIGTERM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
    pub environment: Environment,
    /// What in the environment makes this run's figures less trustworthy or harder to compare,
    /// judged when the run ended and stored so that a file read later reports the same.
    /// Absent from files written before it existed, which then show none.
    #[serde(default)]
    pub warnings: Vec<Warning>,
    pub experiments: Vec<ExperimentResult>,
}

/// One warning about the run's conditions (report::warnings::EnvWarning).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Warning {
    /// Stable snake_case name of the kind, e.g. "busy_machine" (docs/results-schema.md).
    pub kind: String,
    /// What was seen, what it means for the figures, and what to do.
    pub text: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Skipped,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExperimentResult {
    pub name: String,
    /// Short citation of the study the experiment reproduces.
    pub study: String,
    pub status: Status,
    /// Why the experiment was skipped or failed; absent when ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Wall time the experiment took, in seconds.
    pub wall_s: f64,
    pub metrics: Vec<Metric>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
    /// Metrics this experiment could not take here, each with its reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_metrics: Vec<SkippedMetric>,
    /// Plain-language conclusion: what the figures mean and what to choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
}

/// A metric an experiment could not take here, and why (too few CPUs, no permission...).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SkippedMetric {
    pub id: String,
    pub reason: String,
}

/// A figure from one of the source studies, in the study's own unit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Historical {
    pub value: f64,
    pub unit: String,
    /// Study, machine and year, e.g. "Kothari & Claypool 1999, Sun Ultra-1 / SunOS 5.6".
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Metric {
    pub id: String,
    /// One of the units listed in docs/results-schema.md ("ns", "us", "ms", "s", "GB/s", "%", "count", ...).
    pub unit: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// First and third quartile of the samples.
    pub q1: f64,
    pub q3: f64,
    /// Coefficient of variation of the samples (standard deviation / mean), a fraction.
    pub cv: f64,
    /// Number of samples the statistics are over (each sample is itself a batch mean).
    pub samples: usize,
    /// Operations per sample; the sample is the batch's mean.
    pub batch: u64,
    /// Set when the spread is wide (see measure::stats::is_noisy).
    pub noisy: bool,
    /// Where the threads or processes ran, e.g. "same_cpu(0)", "cross_cpu(0,1)", "unpinned".
    pub placement: String,
    /// Method: what is included, what was subtracted, the state measured in.
    pub note: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub historical: Option<Historical>,
}

/// A curve: y against x, e.g. creation time against number created.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub id: String,
    pub x_label: String,
    pub x_unit: String,
    pub y_label: String,
    pub y_unit: String,
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The study's curve where it gives one, as (x, y) points in the study's units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub historical: Option<HistoricalSeries>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistoricalSeries {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub y_unit: String,
    pub source: String,
}

impl Metric {
    /// A metric from a sampled summary.
    pub fn from_summary(id: &str, unit: &str, s: &Summary, placement: &str, note: &str) -> Metric {
        Metric {
            id: id.to_string(),
            unit: unit.to_string(),
            median: s.median,
            min: s.min,
            max: s.max,
            q1: s.q1,
            q3: s.q3,
            cv: s.cv,
            samples: s.n,
            batch: s.batch,
            noisy: s.is_noisy(),
            placement: placement.to_string(),
            note: note.to_string(),
            historical: None,
        }
    }

    /// A single derived value (a count, a best N, a percentage) that has no spread of its own.
    pub fn single(id: &str, unit: &str, value: f64, placement: &str, note: &str) -> Metric {
        Metric {
            id: id.to_string(),
            unit: unit.to_string(),
            median: value,
            min: value,
            max: value,
            q1: value,
            q3: value,
            cv: 0.0,
            samples: 1,
            batch: 1,
            noisy: false,
            placement: placement.to_string(),
            note: note.to_string(),
            historical: None,
        }
    }

    pub fn with_historical(mut self, h: Option<Historical>) -> Metric {
        self.historical = h;
        self
    }

    /// then / now: how many times the historical figure exceeds today's, in a common unit.
    /// None when there is no historical figure or the units cannot be compared.
    pub fn ratio_then_now(&self) -> Option<f64> {
        let h = self.historical.as_ref()?;
        let (then, now) = if h.unit == self.unit {
            (h.value, self.median)
        } else {
            (
                to_base(h.value, &h.unit)?,
                to_base(self.median, &self.unit)?,
            )
        };
        if now > 0.0 {
            Some(then / now)
        } else {
            None
        }
    }
}

/// Converts a value to the base unit of its dimension (seconds for time), for ratios.
/// Units without a conversion compare only with themselves.
pub fn to_base(value: f64, unit: &str) -> Option<f64> {
    let f = match unit {
        "ns" => 1e-9,
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return None,
    };
    Some(value * f)
}

/// Every unit a metric or series may carry; the schema test checks against this list.
pub const KNOWN_UNITS: &[&str] = &[
    "ns", "us", "ms", "s", "GB/s", "%", "count", "ratio", "per_s", "score", "index", "threads",
    "bytes",
];
