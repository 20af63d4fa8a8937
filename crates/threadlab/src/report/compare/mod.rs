//! `threadlab compare`: two runs metric by metric, or a fleet of runs side by side.
//!
//! Two files (A, the baseline, and B). For every metric id both hold:
//!
//! 1. Both medians, the ratio B/A with a 95% percentile-bootstrap interval (10,000 resamples of
//!    each file's stored samples, fixed seed), and the two-sided Mann-Whitney U p-value on the
//!    samples.
//! 2. The family of tests is every metric whose sample counts can reach p < alpha at all (with
//!    2 samples a side the smallest possible p is 0.33: such a metric is shown, not tested).
//!    Holm's step-down correction runs over that family.
//! 3. The noise floor of a metric is its own: the largest of `--noise` (default 5%); each
//!    run's spread of that metric between trials (fresh threads, objects and placement each),
//!    IQR / median; each run's CPU drift during that experiment (its throughput-bound reference
//!    loop before and after); and, when both files come from the same machine and kernel, how
//!    far the CPU's speed moved between the two runs where the metric's kept trials were taken
//!    (the phase probe beside each, or the reference loop around the experiment in older files).
//! 4. A metric has changed only when its Holm-adjusted p < alpha *and* its whole interval lies
//!    beyond the floor: above 1 + floor, or below 1 / (1 + floor). Direction (from the schema)
//!    says whether that is slower, faster, or just changed. A metric that changed but whose
//!    regime changed too (the host ran the two CPUs further apart or closer, or its trials fall
//!    in two clusters) is "unstable", not slower.
//! 5. Each row says the smallest change the pair could have detected: the floor, widened by
//!    the interval's half-width; none when too few trials for the family's correction.
//! 6. `--fail-if-slower PCT`: exit status 1 when a metric is slower by that rule and its ratio
//!    says more than PCT percent slower.
//!
//! `--also-a` / `--also-b`: more runs of a side's build, whose trials are pooled with its file's
//! (`pool`), so that the side's spread includes how much each figure moves between runs.
//!
//! More files: one column per file, the fastest and slowest marked per row; no test.
//! docs/compare.md gives the reasons for each choice.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table};

use crate::error::{Error, Result};
use crate::measure::significance::{bootstrap_ratio_ci, holm_adjust, mann_whitney_p};
use crate::measure::units::{Direction, Unit};
use crate::report::{fmt_with_unit, machine_text};
use crate::results::{ExperimentResult, Metric, RunResults};

/// The rule's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Family-wise error rate, after Holm's correction.
    pub alpha: f64,
    /// The smallest change, percent, that counts (the floor's fixed part).
    pub noise_pct: f64,
    /// Fail (status 1) when a metric is slower by more than this percent.
    pub fail_if_slower_pct: Option<f64>,
    pub resamples: usize,
}

/// The floor below which no change counts, percent: performance of the same code on the same
/// machine moves by a few percent between runs for reasons a run cannot record (memory layout,
/// page placement, the host's other guests).
pub const DEFAULT_NOISE_PCT: f64 = 5.0;
pub const DEFAULT_ALPHA: f64 = 0.05;
pub const RESAMPLES: usize = 10_000;

impl Default for Options {
    fn default() -> Options {
        Options {
            alpha: DEFAULT_ALPHA,
            noise_pct: DEFAULT_NOISE_PCT,
            fail_if_slower_pct: None,
            resamples: RESAMPLES,
        }
    }
}

/// A results file and the name it is shown by.
#[derive(Debug, Clone)]
pub struct Run {
    pub label: String,
    pub results: RunResults,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Worse beyond noise, by the metric's direction.
    Slower,
    Faster,
    /// Beyond noise, for a metric with no better direction (a count, a share, a ratio row).
    Changed,
    /// Beyond noise, but the metric's regime changed between the runs (the CPUs' distance, or
    /// trials in two clusters): a change of the machine, not a verdict on the code.
    Unstable,
    /// Significant, but the interval reaches into the noise floor.
    WithinNoise,
    NotSignificant,
    /// No test: too few samples, or no ratio (a median at or below zero, units that differ).
    Untested,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Slower => "SLOWER",
            Verdict::Faster => "faster",
            Verdict::Changed => "CHANGED",
            Verdict::Unstable => "unstable",
            Verdict::WithinNoise => "within noise",
            Verdict::NotSignificant => "same",
            Verdict::Untested => "not tested",
        }
    }

    pub fn flagged(self) -> bool {
        matches!(self, Verdict::Slower | Verdict::Faster | Verdict::Changed)
    }
}

/// Why a pair could not have shown a metric slower by the gate's percent
/// (`Comparison::blind_to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blind<'a> {
    /// Its regime is the host's or a race's (`Row::regime`, whether or not it moved): a
    /// change of it reads as unstable, never slower.
    Unstable,
    /// A median at or below zero, or units that differ.
    NoRatio,
    /// Too few trials for the test to survive Holm's correction.
    TooFewTrials,
    /// Its floor alone reaches the gate's percent: the part of the floor that set it.
    Floor(&'a str),
    /// Its floor is below the gate's percent, and the width of B/A's interval took the rest.
    Interval,
}

impl std::fmt::Display for Blind<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blind::Unstable => f.write_str("unstable if moved (the host's or a race's regime)"),
            Blind::NoRatio => f.write_str("no ratio"),
            Blind::TooFewTrials => f.write_str("too few trials to test"),
            Blind::Floor(part) => write!(f, "by {part}"),
            Blind::Interval => f.write_str("by the width of B/A's interval"),
        }
    }
}

/// One file's side of a row.
#[derive(Debug, Clone)]
pub struct Side {
    /// The median of the file's values (its trials), recomputed from them.
    pub median: f64,
    pub samples: usize,
    /// IQR / |median| of the values, percent; None for one value.
    pub spread_pct: Option<f64>,
    /// The values are trials (schema 3), not samples of one set of threads (schema 2).
    pub trials: bool,
}

#[derive(Debug, Clone)]
pub struct Row {
    pub experiment: String,
    pub id: String,
    /// A's unit; B's medians are converted to it.
    pub unit: Unit,
    pub direction: Direction,
    pub ratio_row: bool,
    pub a: Side,
    pub b: Side,
    /// median(B) / median(A).
    pub ratio: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub p: Option<f64>,
    pub p_holm: Option<f64>,
    /// The noise floor, percent, and which part of the rule set it.
    pub floor_pct: f64,
    pub floor_from: String,
    /// The smallest change this pair could have flagged, percent (the floor widened by the
    /// interval's half-width); None when its trials are too few for the family's correction.
    pub detectable_pct: Option<f64>,
    /// Why the metric's regime differs between the runs, when it does (see `Verdict::Unstable`).
    pub regime: Option<String>,
    pub verdict: Verdict,
    /// Why a row is not tested.
    pub why: String,
    /// The metric's flags in A and in B (`client_bound`, `saturated`, ...): its figure there
    /// should not be taken at face value. Marked in the tables, never a verdict of its own.
    pub flags_a: Vec<String>,
    pub flags_b: Vec<String>,
}

impl Row {
    /// "client_bound (A B), saturated (B)"; None when neither file flags the metric.
    pub fn flags_text(&self) -> Option<String> {
        flags_of(&[&self.flags_a, &self.flags_b])
    }

    /// Whether `--fail-if-slower pct` fails on this row: slower by the rule, and by more than
    /// `pct` percent.
    pub fn fails_gate(&self, pct: f64) -> bool {
        self.verdict == Verdict::Slower && self.slowdown_pct().is_some_and(|s| s > pct)
    }

    /// How much slower B is, percent (time per operation), or None when not slower.
    pub fn slowdown_pct(&self) -> Option<f64> {
        let r = self.ratio?;
        match self.direction {
            Direction::LowerIsBetter if r > 1.0 => Some((r - 1.0) * 100.0),
            Direction::HigherIsBetter if r < 1.0 && r > 0.0 => Some((1.0 / r - 1.0) * 100.0),
            _ => None,
        }
    }
}

/// Each flag any file gives a metric, with the files (by column name) that give it:
/// "client_bound (A B), saturated (B)"; None when there are none.
pub fn flags_of(per_file: &[&Vec<String>]) -> Option<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (i, flags) in per_file.iter().enumerate() {
        for f in flags.iter() {
            match out.iter_mut().find(|x| x.0 == *f) {
                Some(x) => x.1.push(column_name(i)),
                None => out.push((f.clone(), vec![column_name(i)])),
            }
        }
    }
    (!out.is_empty()).then(|| {
        out.iter()
            .map(|(f, files)| format!("{f} ({})", files.join(" ")))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// What a run is, in one line, for the headers.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub label: String,
    pub mode: String,
    pub started_at: String,
    pub version: String,
    pub machine: String,
}

impl RunInfo {
    fn of(r: &Run) -> RunInfo {
        RunInfo {
            label: r.label.clone(),
            mode: r.results.mode.clone(),
            started_at: r.results.started_at.clone(),
            version: r.results.threadlab_version.clone(),
            machine: machine_text(&r.results.environment),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: RunInfo,
    pub b: RunInfo,
    /// How the machines differ ("kernel: 6.1 vs 6.8"); empty for the same machine.
    pub machine_differences: Vec<String>,
    pub rows: Vec<Row>,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    /// How many metrics the correction ran over.
    pub family: usize,
    pub options: Options,
    /// Other things a reader should know (modes differ, a run was interrupted...).
    pub notes: Vec<String>,
}

impl Comparison {
    pub fn same_machine(&self) -> bool {
        self.machine_differences.is_empty()
    }

    pub fn count(&self, v: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == v).count()
    }

    /// Metrics slower by the rule and by more than `pct` percent.
    pub fn slower_than(&self, pct: f64) -> Vec<&Row> {
        self.rows.iter().filter(|r| r.fails_gate(pct)).collect()
    }

    /// The gate's reach: how many metrics `--fail-if-slower` covers (those with a better
    /// direction), and each of them this pair could not have shown `pct` percent slower, with
    /// why. A metric already failing the gate is not among them.
    pub fn blind_to(&self, pct: f64) -> (usize, Vec<(&Row, Blind<'_>)>) {
        let covered: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.direction != Direction::Neither)
            .collect();
        let blind = covered
            .iter()
            .filter(|r| !r.fails_gate(pct))
            .filter_map(|r| {
                let why = if r.regime.is_some() {
                    Blind::Unstable
                } else {
                    match r.detectable_pct {
                        None if r.ratio.is_none() => Blind::NoRatio,
                        None => Blind::TooFewTrials,
                        Some(d) if d > pct && r.floor_pct >= pct => Blind::Floor(&r.floor_from),
                        Some(d) if d > pct => Blind::Interval,
                        Some(_) => return None,
                    }
                };
                Some((*r, why))
            })
            .collect();
        (covered.len(), blind)
    }

    /// 1 when `--fail-if-slower` was given and a metric is slower by more than it, else 0.
    pub fn exit_status(&self) -> i32 {
        match self.options.fail_if_slower_pct {
            Some(pct) if !self.slower_than(pct).is_empty() => 1,
            _ => 0,
        }
    }
}

mod fleet;
mod noise;
mod pair;
mod pool;
mod text;

pub use fleet::*;
pub use noise::*;
pub use pair::*;
pub use pool::pool;
pub use text::*;

#[cfg(test)]
mod guest_tests;
#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod program_tests;
#[cfg(test)]
mod reach_tests;
#[cfg(test)]
mod tests;
