//! The results file: what a run found, in the shape documented in docs/results-schema.md.
//!
//! Everything an experiment reports passes through these types, and every exporter
//! (terminal table, JSON, CSV, Markdown) reads only these types.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::measure::env::Environment;
use crate::measure::host::HostActivity;
use crate::measure::pair;
use crate::measure::stats::{two_modes, ModeCluster, Summary, TrialLog};
use crate::measure::units::{Direction, Unit};

pub mod flag;
pub mod ids;

/// Bumped whenever a field is renamed or its meaning changes; adding a field does not bump it.
/// 2: every metric keeps its samples (`values`), `cv` is computed from them, `direction`,
/// `modes`, `ratio_of`, structured `tables`, re-measuring `attempts`, `repeat`.
/// 3: `values` are trials (each the median of its batches, kept in `batches`), `trials` says
/// what the sampler did (replacing `phase`), experiments record `host` (steal, run delay).
pub const SCHEMA_VERSION: u32 = 3;

/// The oldest schema this version still reads: a version-2 file's `values` are samples of one
/// set of threads rather than trials, which `compare` takes into account.
pub const OLDEST_READABLE_SCHEMA: u32 = 2;

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
    /// Set when the run was cut short by SIGINT, SIGTERM or SIGHUP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
    /// How many times each experiment ran (`--repeat K`); metrics are then the median of the K
    /// runs' medians, and `values` holds those medians.
    #[serde(default = "one")]
    pub repeat: u32,
    /// An experiment whose drift references moved more than this (percent) during it was
    /// measured again.
    #[serde(default)]
    pub drift_threshold_pct: f64,
    pub environment: Environment,
    /// What in the environment makes this run's figures less trustworthy or harder to compare,
    /// judged when the run ended and stored so that a file read later reports the same.
    /// Absent from files written before it existed, which then show none.
    #[serde(default)]
    pub warnings: Vec<Warning>,
    pub experiments: Vec<ExperimentResult>,
    /// "What to choose on this machine": each answer with the metric ids it rests on, built
    /// once when the run ends (report/advice.rs) and rendered as it is by every report.
    /// Absent from files written before it existed; readers then build it from the metrics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advice: Vec<Advice>,
}

impl RunResults {
    /// The results of a run in `mode` holding `experiments`, written by this version, with
    /// no times, warnings or advice yet.
    pub fn new(mode: &str, experiments: Vec<ExperimentResult>) -> RunResults {
        RunResults {
            schema_version: SCHEMA_VERSION,
            threadlab_version: env!("CARGO_PKG_VERSION").into(),
            started_at: String::new(),
            finished_at: String::new(),
            mode: mode.into(),
            interrupted_by: None,
            repeat: 1,
            drift_threshold_pct: 0.0,
            environment: Environment::default(),
            warnings: Vec::new(),
            experiments,
            advice: Vec::new(),
        }
    }
}

/// One answer to a question a user of threads asks (pool size, lock, server design ...).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Advice {
    /// The question, e.g. "Pool size".
    pub topic: String,
    /// The answer, with the figures it rests on written into it.
    pub claim: String,
    /// Ids of the metrics the claim quotes (any experiment's); empty when the file could not
    /// answer the question.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rests_on: Vec<String>,
    /// When the claim holds or what it assumes, e.g. "CPU-bound workers"; absent when general.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
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
    /// Cannot run here (a limit, a permission, a missing tool): the reason says which.
    Skipped,
    /// Stopped by SIGINT, SIGTERM or SIGHUP; the metrics it finished are kept.
    Interrupted,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExperimentResult {
    pub name: String,
    /// Citation of the study the experiment reproduces.
    pub study: String,
    /// The study's machine and year in a few words ("Ultra-1 1999"), for tables.
    #[serde(default)]
    pub study_label: String,
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
    /// Tables the experiment reports beside its metrics (today beside the study, per N, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<Table>,
    /// Plain-language conclusion: what the figures mean and what to choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    /// Ids of the metrics the verdict rests on, the default placement's first: what a short
    /// report shows of this experiment. Absent from older files (readers build it then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headline: Vec<String>,
    /// The conclusion in one or two sentences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The runs of this experiment with their drift-reference readings; more than one when the
    /// machine's speed moved during a run and it was measured again. The kept one is marked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// Why the kept attempt is not a steady one, when it is not (every attempt drifted, or the
    /// re-measuring budget was spent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_note: Option<String>,
    /// What the host took during the kept attempt: steal per CPU, the lab's run delay, trials
    /// set aside. Absent from files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostActivity>,
}

impl ExperimentResult {
    /// A result with nothing in it yet: no study named, no figures, tables or notes; the
    /// start from which a results file is built up field by field.
    pub fn new(name: &str, status: Status) -> ExperimentResult {
        ExperimentResult {
            name: name.into(),
            study: String::new(),
            study_label: String::new(),
            status,
            reason: None,
            wall_s: 0.0,
            metrics: Vec::new(),
            series: Vec::new(),
            skipped_metrics: Vec::new(),
            tables: Vec::new(),
            conclusion: None,
            headline: Vec::new(),
            verdict: None,
            attempts: Vec::new(),
            drift_note: None,
            host: None,
        }
    }

    /// Measured again because the host's speed moved during an attempt.
    pub fn remeasured(&self) -> bool {
        self.attempts.len() > 1
    }

    pub fn metric(&self, id: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.id == id)
    }
}

/// One run of an experiment, bracketed by the drift references.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Attempt {
    pub wall_s: f64,
    /// The throughput-bound reference loop before and after, ns.
    pub reference_wide_ns: [f64; 2],
    /// One getppid system call before and after, ns.
    pub reference_syscall_ns: [f64; 2],
    /// One step of the walk through memory shared with the host's other tenants before and
    /// after, ns (`measure::drift::reference_memory_ns`); zeros in files that predate it.
    #[serde(default)]
    pub reference_memory_ns: [f64; 2],
    /// The cache-line round trip between the two CPUs before and after, ns
    /// (`measure::pair::reference_pair_ns`): where the host ran the two vCPUs around the
    /// experiment. Zeros when it could not be read (one CPU) and in files that predate it.
    #[serde(default)]
    pub reference_pair_ns: [f64; 2],
    /// The larger of the wide loop's and the system call's relative change, percent (absolute
    /// value); the memory reference is not counted.
    pub drift_pct: f64,
    /// This attempt's figures are the ones reported.
    pub kept: bool,
}

impl Attempt {
    /// An attempt cut short by an interruption: no reference was read after it.
    pub fn unread() -> Attempt {
        Attempt {
            wall_s: 0.0,
            reference_wide_ns: [0.0; 2],
            reference_syscall_ns: [0.0; 2],
            reference_memory_ns: [0.0; 2],
            reference_pair_ns: [0.0; 2],
            drift_pct: 0.0,
            kept: false,
        }
    }
}

/// A table an experiment reports as data; every reporter renders it its own way.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Table {
    /// Stable id, e.g. "throttle.per_n".
    pub id: String,
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// How to read it (sources, units), shown under it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Table {
    pub fn new(id: &str, title: &str, header: &[&str]) -> Table {
        Table {
            id: id.to_string(),
            title: title.to_string(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            note: String::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(
            cells.len(),
            self.header.len(),
            "table {} row width",
            self.id
        );
        self.rows.push(cells);
    }
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
    pub unit: Unit,
    /// Study, machine and year, e.g. "Kothari & Claypool 1999, Sun Ultra-1 / SunOS 5.6".
    pub source: String,
}

/// The flag of a figure decided by a race between threads (who wins a contended lock, whether a
/// spinning partner sees a flip before it next yields or sleeps) whose outcome can last longer
/// than all of a run's trials: back-to-back runs of one build read `sync.ticket.contended.same_cpu`
/// 5.5, 6.0, 6.2, 8.9 and 12.7 ns and `switch.thread.yield.cross_cpu` 206-282 ns, each run's
/// trials agreeing. `compare` calls a change of such a figure unstable, never slower.
pub const RACE_FLAG: &str = "race";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Metric {
    pub id: String,
    pub unit: Unit,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// First and third quartile of the samples.
    pub q1: f64,
    pub q3: f64,
    pub mean: f64,
    /// Coefficient of variation of `values` (sample standard deviation / mean), a fraction.
    pub cv: f64,
    /// Number of samples the statistics are over (each sample is itself a batch mean).
    pub samples: usize,
    /// Operations per sample; the sample is the batch's mean.
    pub batch: u64,
    /// Set when the spread is wide (IQR over 10% of the median).
    pub noisy: bool,
    /// Where the threads or processes ran, e.g. "same_cpu(0)", "cross_cpu(0,1)", "unpinned".
    pub placement: String,
    /// Method: what is included, what was subtracted, the state measured in.
    pub note: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub historical: Option<Historical>,
    /// Which way is better, for comparisons between runs.
    pub direction: Direction,
    /// The samples in this metric's unit, in the order taken (interleaved rows: one per round).
    pub values: Vec<f64>,
    /// When the samples fall in two clusters: both, lower first (the median then sits in one
    /// of them by chance, so read these instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<Vec<ModeCluster>>,
    /// For a ratio row: the two metrics it divides, computed per round of interleaved sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_of: Option<[String; 2]>,
    /// A 95% confidence interval for the median, [low, high] in the metric's unit, where the
    /// metric states one: doctor's effects carry the distribution-free interval of their
    /// per-round ratios (measure::significance::median_interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    /// Each trial's batch figures in this metric's unit, in the order taken; `values[i]` is the
    /// median of `batches[i]`. Empty for metrics that are not made of trials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<Vec<f64>>,
    /// What the sampler's trials did: taken, kept, set aside and why, why sampling stopped, the
    /// precision reached, the CPU pair's distance per trial (see the note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials: Option<TrialLog>,
    /// Why this figure should not be taken at face value, as stable snake_case names (the
    /// server experiment: `client_bound`, `listen_overflow`, `little_law_mismatch`,
    /// `saturated`, `errors`; spin hand-offs across CPUs and contended locks: `race`, see
    /// `RACE_FLAG`); empty when there is nothing to say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Histograms the metric was read from, serialized, so that any percentile can be
    /// recomputed and runs merged later (latency metrics of the server experiment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<SerializedHistogram>,
    /// Its operations walk more memory than a core's own caches hold (large copies, many
    /// stacks, page tables), so the figure moves with the cache and memory a VM's host shares
    /// with other tenants; `compare` then reads the memory reference too
    /// (`Attempt::reference_memory_ns`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub memory_bound: bool,
    /// For values that are not each a trial of their own: the trial (a fresh server, fresh
    /// connections and threads) value `i` came from is `trial_of[i]` (a server step's
    /// windows, one step's attempts). Values of one trial share its regime and say nothing
    /// about the next, so `compare` reads one value per trial (`trial_values`). Empty: every
    /// value is a trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trial_of: Vec<u32>,
}

/// An HdrHistogram in the V2 + DEFLATE format, base64 (HdrHistogram's own interchange format:
/// `hdrhistogram::serialization::Deserializer` and the Java and C libraries read it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SerializedHistogram {
    /// What was recorded, e.g. "latency" (from the planned send), "service" (from the actual
    /// send), "send_lag".
    pub name: String,
    /// The unit of the recorded values.
    pub unit: Unit,
    /// Values recorded.
    pub count: u64,
    /// `HDR_ENCODING`.
    pub encoding: String,
    pub data: String,
}

/// The encoding `SerializedHistogram::encoding` names for HdrHistogram V2 + DEFLATE, base64.
pub const HDR_ENCODING: &str = "hdr-v2-deflate-base64";

/// A curve: y against x, e.g. creation time against number created.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub id: String,
    pub x_label: String,
    pub x_unit: Unit,
    pub y_label: String,
    pub y_unit: Unit,
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
    pub y_unit: Unit,
    pub source: String,
}

impl Metric {
    /// Whether its trials fell on both sides of zero: a difference or a loss this measurement
    /// cannot tell from none, whose sign moves from run to run.
    pub fn straddles_zero(&self) -> bool {
        self.values.len() >= 2 && self.min < 0.0 && self.max > 0.0
    }

    /// The throughput a preemptive thread loses, as a sentence's object: "0.41% of its
    /// throughput", or, when the trials straddle zero, that none was measurable and their range.
    pub fn loss_words(&self) -> String {
        if self.straddles_zero() {
            format!(
                "no measurable share of its throughput (trials from {:.2}% to +{:.2}%)",
                self.min, self.max
            )
        } else {
            format!("{:.2}% of its throughput", self.median)
        }
    }

    /// A per-check cost in ns that is the difference of two loops, as a sentence's object:
    /// under a tenth of a nanosecond (a third of a cycle) it is lost in the loop's own work and
    /// its median is noise, so it reads as at most its trials' highest.
    pub fn check_cost_words(&self) -> String {
        if self.max < 0.1 {
            format!("at most {:.3} ns (its trials' highest)", self.max.max(0.0))
        } else {
            format!("{:.2} ns", self.median)
        }
    }

    /// A metric over samples already in `unit`. Statistics come from `values`; None if there
    /// are none or one is not finite.
    pub fn from_values(
        id: &str,
        unit: Unit,
        values: &[f64],
        batch: u64,
        placement: impl ToString,
        note: impl Into<String>,
    ) -> Option<Metric> {
        let s = Summary::from_samples(values, batch)?;
        Some(Metric::from_summary(id, unit, &s, placement, note))
    }

    /// A metric from a summary whose samples are in `unit`.
    pub fn from_summary(
        id: &str,
        unit: Unit,
        s: &Summary,
        placement: impl ToString,
        note: impl Into<String>,
    ) -> Metric {
        let modes = if s.is_noisy() {
            two_modes(&s.values).map(|m| m.to_vec())
        } else {
            None
        };
        let placement = placement.to_string();
        let note = {
            let mut n: String = note.into();
            if let Some(t) = &s.trials {
                n.push_str(&t.note());
                if crate::measure::placement::spans_two_cpus(&placement) {
                    let split = pair::placement_split(&s.values, &t.pair_ns, unit);
                    n.push_str(&split.unwrap_or_default());
                }
            }
            n
        };
        Metric {
            id: id.to_string(),
            unit,
            median: s.median,
            min: s.min,
            max: s.max,
            q1: s.q1,
            q3: s.q3,
            mean: s.mean,
            cv: s.cv,
            samples: s.n,
            batch: s.batch,
            noisy: s.is_noisy(),
            placement,
            note,
            historical: None,
            direction: unit.default_direction(),
            values: s.values.clone(),
            modes,
            ratio_of: None,
            interval: None,
            batches: s.batches.clone(),
            trials: s.trials.clone(),
            flags: Vec::new(),
            histograms: Vec::new(),
            memory_bound: false,
            trial_of: Vec::new(),
        }
    }

    /// A single derived value (a count, a best N, a percentage) that has no spread of its own.
    pub fn single(
        id: &str,
        unit: Unit,
        value: f64,
        placement: impl ToString,
        note: impl Into<String>,
    ) -> Metric {
        Metric {
            id: id.to_string(),
            unit,
            median: value,
            min: value,
            max: value,
            q1: value,
            q3: value,
            mean: value,
            cv: 0.0,
            samples: 1,
            batch: 1,
            noisy: false,
            placement: placement.to_string(),
            note: note.into(),
            historical: None,
            direction: unit.default_direction(),
            values: vec![value],
            modes: None,
            ratio_of: None,
            interval: None,
            batches: Vec::new(),
            trials: None,
            flags: Vec::new(),
            histograms: Vec::new(),
            memory_bound: false,
            trial_of: Vec::new(),
        }
    }

    pub fn with_direction(mut self, d: Direction) -> Metric {
        self.direction = d;
        self
    }

    /// The metric with `trial_of` (the trial each value came from); ignored unless it has one
    /// entry per value.
    pub fn with_trial_of(mut self, trial_of: Vec<u32>) -> Metric {
        if trial_of.len() == self.values.len() {
            self.trial_of = trial_of;
        }
        self
    }

    /// One value per trial: the values themselves, or, where `trial_of` groups several values
    /// into one trial, each trial's median, in the order the trials first appear.
    pub fn trial_values(&self) -> Vec<f64> {
        if self.trial_of.len() != self.values.len() {
            return self.values.clone();
        }
        let mut groups: Vec<(u32, Vec<f64>)> = Vec::new();
        for (&t, &v) in self.trial_of.iter().zip(&self.values) {
            match groups.iter_mut().find(|(g, _)| *g == t) {
                Some((_, vs)) => vs.push(v),
                None => groups.push((t, vec![v])),
            }
        }
        groups
            .iter()
            .map(|(_, vs)| crate::measure::stats::median(vs))
            .collect()
    }

    /// then / now: how many times the historical figure exceeds today's, in a common unit.
    /// None when there is no historical figure or the units cannot be compared.
    pub fn ratio_then_now(&self) -> Option<f64> {
        let h = self.historical.as_ref()?;
        let then = h.unit.convert(h.value, self.unit)?;
        if self.median > 0.0 {
            Some(then / self.median)
        } else {
            None
        }
    }

    /// Half the IQR relative to the median, percent: the spread the tables show.
    pub fn half_iqr_pct(&self) -> Option<f64> {
        (self.samples > 1 && self.median != 0.0)
            .then(|| (self.q3 - self.q1) / 2.0 / self.median.abs() * 100.0)
    }
}

fn one() -> u32 {
    1
}

/// Reads a results file's text. A file of another schema version, or one that is not a
/// results file at all, is a usage error that says what to do.
pub fn parse_results(text: &str, what: &str) -> Result<RunResults> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Error::Usage(format!(
            "{what} is not a threadlab results file (not JSON: {e}); give the JSON that \
             'threadlab run' wrote"
        ))
    })?;
    match value.get("schema_version").and_then(|v| v.as_u64()) {
        Some(v) if (u64::from(OLDEST_READABLE_SCHEMA)..=u64::from(SCHEMA_VERSION)).contains(&v) => {
        }
        Some(v) => {
            return Err(Error::Usage(format!(
                "{what} has results schema version {v}, this threadlab reads versions \
                 {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}; run the suite again with this \
                 version to compare or report it (see docs/results-schema.md for what changed)"
            )))
        }
        None => {
            let found = match value.get("schema_version") {
                None => "no schema_version".to_string(),
                Some(v) => format!("its schema_version is {}, not a whole number", kind_of(v)),
            };
            return Err(Error::Usage(format!(
                "{what} is not a threadlab results file ({found}); give the JSON that \
                 'threadlab run' wrote"
            )));
        }
    }
    let results: RunResults = serde_json::from_value(value).map_err(|e| {
        Error::Usage(format!(
            "{what} is not a complete threadlab results file ({e}); was it edited or cut short?"
        ))
    })?;
    refuse_duplicates(&results, what)?;
    Ok(results)
}

/// A JSON value's kind in words, for messages (never the value itself: it may be huge).
fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A run never writes an experiment twice, nor a metric id twice within one: a file that does
/// was merged or edited by hand, and every reader would have to pick one of the two silently.
fn refuse_duplicates(r: &RunResults, what: &str) -> Result<()> {
    let fix = "keep one of them (a file that 'threadlab run' wrote never repeats one)";
    let mut experiments = std::collections::HashSet::new();
    for e in &r.experiments {
        if !experiments.insert(e.name.as_str()) {
            return Err(Error::Usage(format!(
                "{what} holds experiment '{}' twice; {fix}",
                e.name
            )));
        }
        let mut ids = std::collections::HashSet::new();
        for m in &e.metrics {
            if !ids.insert(m.id.as_str()) {
                return Err(Error::Usage(format!(
                    "{what} holds metric '{}' twice in experiment '{}'; {fix}",
                    m.id, e.name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(median_us: f64, hist: Option<(f64, Unit)>) -> Metric {
        let mut m = Metric::single("x", Unit::Us, median_us, "same_cpu(0)", "n");
        m.historical = hist.map(|(value, unit)| Historical {
            value,
            unit,
            source: "s".into(),
        });
        m
    }

    #[test]
    fn trial_values_are_one_median_per_trial_in_the_order_the_trials_came() {
        let v = [5.0, 1.0, 3.0, 9.0, 2.0, 7.0];
        let m = Metric::from_values("x", Unit::Us, &v, 1, "p", "n").unwrap();
        assert_eq!(m.trial_values(), v);
        let m = m.with_trial_of(vec![1, 1, 1, 0, 0, 0]);
        assert_eq!(m.trial_values(), [3.0, 7.0]);
        // One entry per value or none: a list of another length is not taken.
        let m = Metric::from_values("x", Unit::Us, &v, 1, "p", "n")
            .unwrap()
            .with_trial_of(vec![0, 0]);
        assert!(m.trial_of.is_empty());
        assert_eq!(m.trial_values().len(), 6);
    }

    #[test]
    fn then_now_ratio_converts_units() {
        assert_eq!(
            metric(2.0, Some((20.0, Unit::Us))).ratio_then_now(),
            Some(10.0)
        );
        // 24.42 ms then against 2442 us now: 10x.
        let r = metric(2442.0, Some((24.42, Unit::Ms)))
            .ratio_then_now()
            .unwrap();
        assert!((r - 10.0).abs() < 1e-9);
        assert_eq!(metric(2.0, Some((3.0, Unit::Count))).ratio_then_now(), None);
        assert_eq!(metric(2.0, None).ratio_then_now(), None);
        assert_eq!(metric(0.0, Some((3.0, Unit::Us))).ratio_then_now(), None);
    }

    #[test]
    fn metric_statistics_come_from_its_values() {
        let m = Metric::from_values("a", Unit::Us, &[1.0, 2.0, 3.0, 4.0], 10, "x", "n").unwrap();
        assert_eq!(m.values, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m.median, 2.5);
        assert!((m.cv - crate::measure::stats::cv(&m.values)).abs() < 1e-12);
        assert_eq!(m.direction, Direction::LowerIsBetter);
        assert!(Metric::from_values("a", Unit::Us, &[], 1, "x", "n").is_none());
    }

    #[test]
    fn a_loss_whose_trials_straddle_zero_reads_as_none_measurable() {
        let m = |v: &[f64]| Metric::from_values("l", Unit::Percent, v, 1, "x", "n").unwrap();
        let both = m(&[-0.9, -0.1, 0.2, 0.5]);
        assert!(both.straddles_zero());
        assert_eq!(
            both.loss_words(),
            "no measurable share of its throughput (trials from -0.90% to +0.50%)"
        );
        let positive = m(&[0.3, 0.4, 0.5]);
        assert!(!positive.straddles_zero());
        assert_eq!(positive.loss_words(), "0.40% of its throughput");
        // One trial says nothing about its spread.
        assert!(!m(&[-0.2]).straddles_zero());
    }

    #[test]
    fn a_schema_version_of_the_wrong_type_is_named_so() {
        let e = parse_results(r#"{"schema_version": "two"}"#, "f.json");
        match e {
            Err(Error::Usage(m)) => assert!(m.contains("a string, not a whole number"), "{m}"),
            other => panic!("{other:?}"),
        }
        match parse_results(r#"{"experiments": []}"#, "f.json") {
            Err(Error::Usage(m)) => assert!(m.contains("no schema_version"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_version_1_file_is_a_usage_error() {
        let e = parse_results(r#"{"schema_version": 1, "experiments": []}"#, "old.json");
        match e {
            Err(Error::Usage(m)) => assert!(m.contains("version 1") && !m.contains('\n'), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_results("not json", "x"),
            Err(Error::Usage(_))
        ));
        assert!(matches!(parse_results("{}", "x"), Err(Error::Usage(_))));
    }
}
