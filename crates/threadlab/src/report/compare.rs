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
//! 3. The noise floor of a metric is the largest of: `--noise` (default 5%); each run's own
//!    spread of that metric, IQR / median; each run's CPU drift during that experiment (its
//!    throughput-bound reference loop before and after); when both files come from the same machine and
//!    kernel, how far the throughput-bound reference loop moved between the two runs; and,
//!    with enough tested metrics, three robust standard deviations of how far they moved.
//! 4. A metric has changed only when its Holm-adjusted p < alpha *and* its whole interval lies
//!    beyond the floor: above 1 + floor, or below 1 / (1 + floor). Direction (from the schema)
//!    says whether that is slower, faster, or just changed.
//! 5. `--fail-if-slower PCT`: exit status 1 when a metric is slower by that rule and its ratio
//!    says more than PCT percent slower.
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
            Verdict::WithinNoise => "within noise",
            Verdict::NotSignificant => "same",
            Verdict::Untested => "not tested",
        }
    }

    pub fn flagged(self) -> bool {
        matches!(self, Verdict::Slower | Verdict::Faster | Verdict::Changed)
    }
}

/// One file's side of a row.
#[derive(Debug, Clone)]
pub struct Side {
    pub median: f64,
    pub samples: usize,
    /// IQR / |median|, percent; None for one sample.
    pub spread_pct: Option<f64>,
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
    /// The floor set by how far this comparison's tested metrics moved around their common
    /// shift (three robust standard deviations), when there are enough of them.
    pub scatter_floor_pct: Option<f64>,
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
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Slower && r.slowdown_pct().is_some_and(|s| s > pct))
            .collect()
    }

    /// 1 when `--fail-if-slower` was given and a metric is slower by more than it, else 0.
    pub fn exit_status(&self) -> i32 {
        match self.options.fail_if_slower_pct {
            Some(pct) if !self.slower_than(pct).is_empty() => 1,
            _ => 0,
        }
    }
}

/// What identifies a machine and kernel for the purpose of comparing code.
fn fingerprint(r: &RunResults) -> Vec<(&'static str, String)> {
    let e = &r.environment;
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
    let mut v = vec![
        ("CPU", opt(&e.cpu_model)),
        (
            "logical CPUs",
            e.logical_cpus.map_or("unknown".into(), |c| c.to_string()),
        ),
        (
            "kernel",
            format!("{} {}", e.kernel_release, e.kernel_version),
        ),
        ("preemption", e.preemption_model.clone()),
        (
            "virtualisation",
            match (&e.hypervisor, e.virtualized) {
                (Some(h), _) => h.clone(),
                (None, Some(true)) => "virtualised".into(),
                (None, Some(false)) => "bare metal".into(),
                (None, None) => "unknown".into(),
            },
        ),
        ("cpuidle", opt(&e.cpuidle_driver)),
        ("governor", opt(&e.frequency_governor)),
        ("build", e.build_profile.clone()),
    ];
    if let Some(h) = &e.hostname {
        v.push(("host", h.clone()));
    }
    v
}

fn machine_differences(a: &RunResults, b: &RunResults) -> Vec<String> {
    let (fa, fb) = (fingerprint(a), fingerprint(b));
    let mut d = Vec::new();
    for (k, va) in &fa {
        // A field only one file records (an older file without a host name) is not a difference.
        if let Some((_, vb)) = fb.iter().find(|(kb, _)| kb == k) {
            if va != vb {
                d.push(format!("{k}: {va} vs {vb}"));
            }
        }
    }
    d
}

fn side(m: &Metric) -> Side {
    Side {
        median: m.median,
        samples: m.values.len(),
        spread_pct: (m.values.len() > 1 && m.median != 0.0)
            .then(|| (m.q3 - m.q1) / m.median.abs() * 100.0),
    }
}

/// The kept attempt of an experiment, when it recorded its references.
fn kept(e: &ExperimentResult) -> Option<&crate::results::Attempt> {
    e.attempts
        .iter()
        .find(|a| a.kept)
        .filter(|a| a.reference_wide_ns.iter().all(|v| *v > 0.0))
}

/// The mean of an attempt's before and after readings of one reference, ns.
fn reference_mean(x: [f64; 2]) -> Option<f64> {
    let m = (x[0] + x[1]) / 2.0;
    (m > 0.0 && m.is_finite()).then_some(m)
}

/// How far the machine's speed moved between the two runs around this experiment, percent:
/// the throughput-bound reference loop (the mean of its before and after readings), A against
/// B. Every figure runs on the CPU, so every figure of the experiment may move with it.
fn machine_shift_pct(ea: &ExperimentResult, eb: &ExperimentResult) -> Option<f64> {
    let a = reference_mean(kept(ea)?.reference_wide_ns)?;
    let b = reference_mean(kept(eb)?.reference_wide_ns)?;
    Some((b / a - 1.0).abs() * 100.0)
}

/// How far the throughput-bound reference loop moved during the kept attempt of an experiment,
/// percent (before against after): the CPU's own drift while its figures were taken. The
/// attempt's `drift_pct` also counts the kernel-entry reference, which is kept out of floors
/// (see `kernel_entry_move_pct`).
fn cpu_drift_pct(e: &ExperimentResult) -> Option<f64> {
    let [before, after] = kept(e)?.reference_wide_ns;
    (before > 0.0 && after > 0.0).then(|| (after / before - 1.0).abs() * 100.0)
}

/// The largest move of the kernel-entry reference (one getppid) around this experiment,
/// percent: during A's attempt, during B's, or between the two runs. On a VM it can double
/// within minutes; only figures that enter the kernel move with it, so it is reported, not
/// added to every floor.
fn kernel_entry_move_pct(ea: &ExperimentResult, eb: &ExperimentResult) -> Option<f64> {
    let (ka, kb) = (kept(ea)?, kept(eb)?);
    let change = |x: f64, y: f64| (x > 0.0 && y > 0.0).then(|| (y / x - 1.0).abs() * 100.0);
    let between = change(
        reference_mean(ka.reference_syscall_ns)?,
        reference_mean(kb.reference_syscall_ns)?,
    );
    [ka, kb]
        .iter()
        .filter_map(|k| change(k.reference_syscall_ns[0], k.reference_syscall_ns[1]))
        .chain(between)
        .reduce(f64::max)
}

/// Kernel-entry moves (during or between the runs) larger than this are reported.
const KERNEL_ENTRY_NOTE_PCT: f64 = 10.0;

/// Fewer tested metrics than this give too rough a scatter to set a floor with.
pub const SCATTER_MIN_METRICS: usize = 20;

/// How far metrics move between two runs of the same code, beyond what each run's samples
/// show, estimated from this comparison itself: the log ratios of the tested metrics, their
/// median (a common shift, which this does not absorb), and the scaled median absolute
/// deviation around it (a robust standard deviation; Hampel's identifier). A metric whose
/// ratio lies within three of those of 1 moved no further than metrics typically do between
/// these two runs. None for fewer than `SCATTER_MIN_METRICS` ratios.
pub fn scatter_floor_pct(ratios: impl Iterator<Item = f64>) -> Option<f64> {
    let logs: Vec<f64> = ratios
        .filter(|r| *r > 0.0 && r.is_finite())
        .map(f64::ln)
        .collect();
    if logs.len() < SCATTER_MIN_METRICS {
        return None;
    }
    let centre = crate::measure::stats::median(&logs);
    let deviations: Vec<f64> = logs.iter().map(|x| (x - centre).abs()).collect();
    let sd = 1.4826 * crate::measure::stats::median(&deviations);
    Some(((3.0 * sd).exp() - 1.0) * 100.0)
}

/// The smallest p-value a two-sided U test can give with these sample counts (complete
/// separation, no ties): a metric that cannot reach alpha is not put to the test.
fn smallest_p(na: usize, nb: usize) -> f64 {
    let a: Vec<f64> = (0..na).map(|i| i as f64).collect();
    let b: Vec<f64> = (0..nb).map(|i| (na + i) as f64).collect();
    mann_whitney_p(&a, &b)
}

/// Compares B against A by the rule in this module's documentation.
pub fn compare_pair(a: &Run, b: &Run, o: &Options) -> Result<Comparison> {
    let diffs = machine_differences(&a.results, &b.results);
    let same_machine = diffs.is_empty();
    let mut rows: Vec<Row> = Vec::new();
    let mut only_in_a = Vec::new();
    let mut only_in_b = Vec::new();
    let mut seen_b = std::collections::HashSet::new();
    for ea in &a.results.experiments {
        let eb = b.results.experiments.iter().find(|e| e.name == ea.name);
        for ma in &ea.metrics {
            let mb = eb.and_then(|e| e.metric(&ma.id));
            let (Some(eb), Some(mb)) = (eb, mb) else {
                only_in_a.push(ma.id.clone());
                continue;
            };
            if !seen_b.insert((eb.name.clone(), mb.id.clone())) {
                continue; // a duplicate id in a hand-edited file: the first one counts
            }
            rows.push(pair_row(ea, eb, ma, mb, same_machine, o));
        }
    }
    for eb in &b.results.experiments {
        for mb in &eb.metrics {
            if !seen_b.contains(&(eb.name.clone(), mb.id.clone())) {
                only_in_b.push(mb.id.clone());
            }
        }
    }
    if rows.is_empty() {
        return Err(Error::Usage(format!(
            "{} and {} share no metric; compare results of the same experiments (e.g. two runs \
             of 'threadlab run')",
            a.label, b.label
        )));
    }
    // The family: every row with a p-value.
    let tested: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].p.is_some()).collect();
    let scatter = scatter_floor_pct(tested.iter().filter_map(|&i| rows[i].ratio));
    if let Some(f) = scatter {
        for &i in &tested {
            if f > rows[i].floor_pct {
                rows[i].floor_pct = f;
                rows[i].floor_from = "this comparison's scatter (3 robust sd)".into();
            }
        }
    }
    let ps: Vec<f64> = tested.iter().map(|&i| rows[i].p.unwrap_or(1.0)).collect();
    let adjusted = holm_adjust(&ps);
    for (k, &i) in tested.iter().enumerate() {
        let row = &mut rows[i];
        row.p_holm = Some(adjusted[k]);
        row.verdict = verdict(row, o.alpha);
    }
    let mut notes = Vec::new();
    if same_machine {
        let moved: Vec<String> = a
            .results
            .experiments
            .iter()
            .filter_map(|ea| {
                let eb = b.results.experiments.iter().find(|e| e.name == ea.name)?;
                let s = kernel_entry_move_pct(ea, eb)?;
                (s > KERNEL_ENTRY_NOTE_PCT).then(|| format!("{} {s:.0}%", ea.name))
            })
            .collect();
        if !moved.is_empty() {
            notes.push(format!(
                "the kernel-entry reference (one getppid) moved by up to this much during or \
                 between the runs around {}: figures that enter the kernel may have moved with \
                 it, whatever the code did",
                moved.join(", ")
            ));
        }
    }
    let flagged = rows.iter().filter(|r| r.flags_text().is_some()).count();
    if flagged > 0 {
        notes.push(format!(
            "{flagged} metric{} carr{} flags in A or B (client_bound, saturated, ...: the file \
             says its figure should not be taken at face value; named in the flags column): \
             read a change in {} as a change in the measurement's conditions as much as in the \
             code",
            if flagged == 1 { "" } else { "s" },
            if flagged == 1 { "ies" } else { "y" },
            if flagged == 1 { "it" } else { "them" }
        ));
    }
    if a.results.mode != b.results.mode {
        notes.push(format!(
            "A is a {} run and B a {} run: sample counts and ranges differ",
            a.results.mode, b.results.mode
        ));
    }
    for r in [a, b] {
        if let Some(sig) = &r.results.interrupted_by {
            notes.push(format!("{} was interrupted by {sig}", r.label));
        }
        if r.results.environment.build_profile == "debug" {
            notes.push(format!(
                "{} is from a debug build: its figures mean nothing",
                r.label
            ));
        }
    }
    Ok(Comparison {
        a: RunInfo::of(a),
        b: RunInfo::of(b),
        machine_differences: diffs,
        rows,
        only_in_a,
        only_in_b,
        family: tested.len(),
        scatter_floor_pct: scatter,
        options: *o,
        notes,
    })
}

fn pair_row(
    ea: &ExperimentResult,
    eb: &ExperimentResult,
    ma: &Metric,
    mb: &Metric,
    same_machine: bool,
    o: &Options,
) -> Row {
    // B's samples in A's unit (a unit that changed between versions still compares when it
    // converts); otherwise the row is shown untested.
    let b_values: Option<Vec<f64>> = mb
        .values
        .iter()
        .map(|v| mb.unit.convert(*v, ma.unit))
        .collect();
    let mut b_side = side(mb);
    if let Some(m) = mb.unit.convert(mb.median, ma.unit) {
        b_side.median = m;
    }
    // The floor: the fixed part, then each measured part that is larger.
    let mut floor = (o.noise_pct, "--noise".to_string());
    let mut raise = |v: Option<f64>, what: String| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            if v > floor.0 {
                floor = (v, what);
            }
        }
    };
    let a_side = side(ma);
    raise(a_side.spread_pct, "A's spread (IQR/median)".into());
    raise(b_side.spread_pct, "B's spread (IQR/median)".into());
    // An experiment's drift says what its samples went through, unless the sampler kept only
    // samples taken while the machine was quiet (the metric's `phase`): then the drift around
    // the experiment says nothing about them.
    let filtered = |m: &Metric| m.phase.is_some_and(|f| f.quiet >= f.kept && f.kept > 0);
    if !filtered(ma) {
        raise(cpu_drift_pct(ea), "A's drift during the experiment".into());
    }
    if !filtered(mb) {
        raise(cpu_drift_pct(eb), "B's drift during the experiment".into());
    }
    if same_machine {
        raise(
            machine_shift_pct(ea, eb),
            "the machine's reference loop, A vs B".into(),
        );
    }
    let mut row = Row {
        experiment: ea.name.clone(),
        id: ma.id.clone(),
        unit: ma.unit,
        direction: ma.direction,
        ratio_row: ma.ratio_of.is_some(),
        a: a_side,
        b: b_side,
        ratio: None,
        ci: None,
        p: None,
        p_holm: None,
        floor_pct: floor.0,
        floor_from: floor.1,
        verdict: Verdict::Untested,
        why: String::new(),
        flags_a: ma.flags.clone(),
        flags_b: mb.flags.clone(),
    };
    let Some(bv) = b_values else {
        row.why = format!("units differ ({} vs {})", ma.unit, mb.unit);
        return row;
    };
    if !(ma.median > 0.0 && row.b.median > 0.0) {
        row.why = "a median at or below zero: no ratio".into();
        return row;
    }
    row.ratio = Some(row.b.median / ma.median);
    if ma.values.len() > 1 && bv.len() > 1 {
        row.ci = bootstrap_ratio_ci(&ma.values, &bv, o.resamples);
    }
    if smallest_p(ma.values.len(), bv.len()) >= o.alpha {
        row.why = format!(
            "{} vs {} samples: the U test cannot reach p < {}",
            ma.values.len(),
            bv.len(),
            o.alpha
        );
        return row;
    }
    row.p = Some(mann_whitney_p(&ma.values, &bv));
    row.verdict = Verdict::NotSignificant;
    row
}

fn verdict(row: &Row, alpha: f64) -> Verdict {
    let (Some(p), Some(ratio)) = (row.p_holm, row.ratio) else {
        return Verdict::Untested;
    };
    if p >= alpha {
        return Verdict::NotSignificant;
    }
    let band = 1.0 + row.floor_pct / 100.0;
    let (lo, hi) = row.ci.unwrap_or((ratio, ratio));
    let beyond = lo > band || hi < 1.0 / band;
    if !beyond {
        return Verdict::WithinNoise;
    }
    match row.direction {
        Direction::LowerIsBetter if ratio > 1.0 => Verdict::Slower,
        Direction::LowerIsBetter => Verdict::Faster,
        Direction::HigherIsBetter if ratio < 1.0 => Verdict::Slower,
        Direction::HigherIsBetter => Verdict::Faster,
        Direction::Neither => Verdict::Changed,
    }
}

/// The rule in one paragraph, with this comparison's numbers.
pub fn rule_text(c: &Comparison) -> String {
    format!(
        "Changed = Mann-Whitney U p < {} after Holm's correction over the {} metrics with enough \
         samples to be tested, and the bootstrap 95% interval of B/A ({} resamples) wholly beyond \
         the metric's noise floor: the largest of {}% (--noise), each run's IQR/median, each \
         run's CPU drift during the experiment{}{}. See docs/compare.md.",
        c.options.alpha,
        c.family,
        c.options.resamples,
        crate::report::html::svg::fmt_tick(c.options.noise_pct),
        if c.same_machine() {
            ", how far the machine's throughput-bound reference loop moved between the runs"
        } else {
            ""
        },
        match c.scatter_floor_pct {
            Some(f) => format!(
                ", and three robust standard deviations of how far the tested metrics moved \
                 ({f:.1}%)"
            ),
            None => String::new(),
        }
    )
}

/// The banner for files from different machines or kernels, if any.
pub fn machines_banner(c: &Comparison) -> Option<String> {
    (!c.same_machine()).then(|| {
        format!(
            "A and B ran on different machines or kernels ({}): the tests compare the machines, \
             not the code; the ratios still hold.",
            c.machine_differences.join("; ")
        )
    })
}

fn fmt_ratio(r: &Row) -> String {
    match (r.ratio, r.ci) {
        (Some(x), Some((lo, hi))) => format!("{x:.3} [{lo:.3}, {hi:.3}]"),
        (Some(x), None) => format!("{x:.3}"),
        _ => "-".into(),
    }
}

fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.001 => format!("{p:.1e}"),
        Some(p) => format!("{p:.3}"),
        None => "-".into(),
    }
}

/// The verdict as a reader wants it: "SLOWER +30.2%".
pub fn verdict_text(r: &Row) -> String {
    match r.verdict {
        Verdict::Slower => format!("SLOWER +{:.1}%", r.slowdown_pct().unwrap_or(0.0)),
        Verdict::Faster => match r.ratio {
            Some(x) if r.direction == Direction::HigherIsBetter => {
                format!("faster +{:.1}%", (x - 1.0) * 100.0)
            }
            Some(x) if x > 0.0 => format!("faster {:.1}%", (1.0 - x) * 100.0),
            _ => "faster".into(),
        },
        Verdict::Changed => match r.ratio {
            Some(x) => format!("CHANGED {:+.1}%", (x - 1.0) * 100.0),
            None => "CHANGED".into(),
        },
        Verdict::Untested => format!("not tested: {}", r.why),
        v => v.word().into(),
    }
}

fn new_table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Disabled);
    t.force_no_tty();
    t
}

/// The terminal text of a two-file comparison.
pub fn render_pair_text(c: &Comparison) -> String {
    let mut out = String::from("threadlab compare\n");
    for (k, r) in [("A", &c.a), ("B", &c.b)] {
        out.push_str(&format!(
            "  {k}  {} · {} run · {} · threadlab {}\n     {}\n",
            r.label, r.mode, r.started_at, r.version, r.machine
        ));
    }
    if let Some(b) = machines_banner(c) {
        out.push_str(&format!("\n!! {b}\n"));
    }
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&format!("\n{}\n", rule_text(c)));
    let mut experiments: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !experiments.contains(&r.experiment.as_str()) {
            experiments.push(&r.experiment);
        }
    }
    for e in experiments {
        out.push_str(&format!("\n{e}\n"));
        let mut t = new_table();
        // A flags column only where a metric of this experiment carries flags.
        let flagged = c
            .rows
            .iter()
            .any(|r| r.experiment == e && r.flags_text().is_some());
        let mut header = vec![
            "metric",
            "A",
            "B",
            "B/A [95% CI]",
            "p (Holm)",
            "floor",
            "verdict",
        ];
        if flagged {
            header.push("flags");
        }
        t.set_header(header);
        for r in c.rows.iter().filter(|r| r.experiment == e) {
            let mut cells = vec![
                Cell::new(&r.id),
                Cell::new(fmt_with_unit(r.a.median, r.unit)).set_alignment(CellAlignment::Right),
                Cell::new(fmt_with_unit(r.b.median, r.unit)).set_alignment(CellAlignment::Right),
                Cell::new(fmt_ratio(r)).set_alignment(CellAlignment::Right),
                Cell::new(fmt_p(r.p_holm)).set_alignment(CellAlignment::Right),
                Cell::new(format!("{:.1}%", r.floor_pct)).set_alignment(CellAlignment::Right),
                Cell::new(verdict_text(r)),
            ];
            if flagged {
                cells.push(Cell::new(r.flags_text().unwrap_or_default()));
            }
            t.add_row(cells);
        }
        for col in t.column_iter_mut() {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    for (what, ids) in [("only in A", &c.only_in_a), ("only in B", &c.only_in_b)] {
        if !ids.is_empty() {
            out.push_str(&format!("\n{what}: {}\n", ids.join(", ")));
        }
    }
    out.push_str(&format!("\n{}\n", summary(c)));
    if let Some(pct) = c.options.fail_if_slower_pct {
        let slow = c.slower_than(pct);
        if slow.is_empty() {
            out.push_str(&format!(
                "--fail-if-slower {}: nothing is slower by more than {}%.\n",
                crate::report::html::svg::fmt_tick(pct),
                crate::report::html::svg::fmt_tick(pct)
            ));
        } else {
            let list: Vec<String> = slow
                .iter()
                .map(|r| format!("{} +{:.1}%", r.id, r.slowdown_pct().unwrap_or(0.0)))
                .collect();
            out.push_str(&format!(
                "--fail-if-slower {}: slower by more than {}%: {} (exit status 1).\n",
                crate::report::html::svg::fmt_tick(pct),
                crate::report::html::svg::fmt_tick(pct),
                list.join(", ")
            ));
        }
    }
    out
}

/// "2 slower (a +30.2%, b +12.0%), 1 faster, ..."
pub fn summary(c: &Comparison) -> String {
    let list = |v: Verdict| -> String {
        let ids: Vec<String> = c
            .rows
            .iter()
            .filter(|r| r.verdict == v)
            .map(|r| r.id.clone())
            .collect();
        if ids.is_empty() || ids.len() > 12 {
            String::new()
        } else {
            format!(" ({})", ids.join(", "))
        }
    };
    format!(
        "{} metrics compared: {} slower{}, {} faster{}, {} changed{}, {} within noise, {} the \
         same, {} not tested (too few samples or no ratio).",
        c.rows.len(),
        c.count(Verdict::Slower),
        list(Verdict::Slower),
        c.count(Verdict::Faster),
        list(Verdict::Faster),
        c.count(Verdict::Changed),
        list(Verdict::Changed),
        c.count(Verdict::WithinNoise),
        c.count(Verdict::NotSignificant),
        c.count(Verdict::Untested)
    )
}

/// A fleet: one column per file.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub runs: Vec<RunInfo>,
    pub rows: Vec<FleetRow>,
}

#[derive(Debug, Clone)]
pub struct FleetRow {
    pub experiment: String,
    pub id: String,
    pub unit: Unit,
    pub direction: Direction,
    /// Per file, in the first file's unit where it converts.
    pub medians: Vec<Option<f64>>,
    /// Per file, the metric's flags there (empty when none or absent).
    pub flags: Vec<Vec<String>>,
    pub fastest: Option<usize>,
    pub slowest: Option<usize>,
}

/// Every metric id any file holds, in the order first seen, with each file's median.
pub fn fleet(runs: &[Run]) -> Result<Fleet> {
    let mut rows: Vec<FleetRow> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for e in &run.results.experiments {
            for m in &e.metrics {
                let row = match rows
                    .iter_mut()
                    .find(|r| r.experiment == e.name && r.id == m.id)
                {
                    Some(r) => r,
                    None => {
                        rows.push(FleetRow {
                            experiment: e.name.clone(),
                            id: m.id.clone(),
                            unit: m.unit,
                            direction: m.direction,
                            medians: vec![None; runs.len()],
                            flags: vec![Vec::new(); runs.len()],
                            fastest: None,
                            slowest: None,
                        });
                        rows.last_mut().expect("just pushed")
                    }
                };
                if row.medians[i].is_none() {
                    row.medians[i] = m.unit.convert(m.median, row.unit);
                    row.flags[i] = m.flags.clone();
                }
            }
        }
    }
    if !rows
        .iter()
        .any(|r| r.medians.iter().filter(|m| m.is_some()).count() > 1)
    {
        return Err(Error::Usage(
            "the files share no metric; compare results of the same experiments (e.g. runs of \
             'threadlab run' on each machine)"
                .into(),
        ));
    }
    for r in rows.iter_mut() {
        let present: Vec<(usize, f64)> = r
            .medians
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.map(|m| (i, m)))
            .collect();
        if present.len() < 2 {
            continue;
        }
        let min = present
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|x| x.0);
        let max = present
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|x| x.0);
        let all_equal = present.iter().all(|x| x.1 == present[0].1);
        if all_equal {
            continue;
        }
        (r.fastest, r.slowest) = match r.direction {
            Direction::LowerIsBetter => (min, max),
            Direction::HigherIsBetter => (max, min),
            Direction::Neither => (None, None),
        };
    }
    Ok(Fleet {
        runs: runs.iter().map(RunInfo::of).collect(),
        rows,
    })
}

/// Column names for a fleet: A, B, C ... Z, then F27, F28 ...
pub fn column_name(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("F{}", i + 1)
    }
}

pub fn render_fleet_text(f: &Fleet) -> String {
    let mut out = String::from("threadlab compare: a fleet of runs, one column each\n");
    for (i, r) in f.runs.iter().enumerate() {
        out.push_str(&format!(
            "  {}  {} · {} run · {}\n     {}\n",
            column_name(i),
            r.label,
            r.mode,
            r.started_at,
            r.machine
        ));
    }
    out.push_str(
        "\n+ marks the fastest and - the slowest of each row (by the metric's direction; none \
         for counts, shares and ratios); ! a figure its file flags (client_bound, saturated, \
         ...: not to be taken at face value). No test is made across more than two files: \
         compare two of them for that.\n",
    );
    let mut experiments: Vec<&str> = Vec::new();
    for r in &f.rows {
        if !experiments.contains(&r.experiment.as_str()) {
            experiments.push(&r.experiment);
        }
    }
    for e in experiments {
        out.push_str(&format!("\n{e}\n"));
        let mut t = new_table();
        let mut header = vec!["metric".to_string()];
        header.extend((0..f.runs.len()).map(column_name));
        t.set_header(header);
        for r in f.rows.iter().filter(|r| r.experiment == e) {
            let mut cells = vec![Cell::new(&r.id)];
            for (i, m) in r.medians.iter().enumerate() {
                let mark = if r.fastest == Some(i) {
                    " +"
                } else if r.slowest == Some(i) {
                    " -"
                } else {
                    "  "
                };
                let text = m.map_or("-".to_string(), |v| fmt_with_unit(v, r.unit));
                let flag = if r.flags[i].is_empty() { "" } else { " !" };
                cells.push(
                    Cell::new(format!("{text}{flag}{mark}")).set_alignment(CellAlignment::Right),
                );
            }
            t.add_row(cells);
        }
        for col in t.column_iter_mut() {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Attempt, ExperimentResult, Status};

    /// A run with one experiment whose metrics take the given samples.
    fn run(label: &str, metrics: &[(&str, Unit, Vec<f64>)]) -> Run {
        let results = RunResults {
            schema_version: crate::results::SCHEMA_VERSION,
            threadlab_version: "0".into(),
            started_at: "2025-01-01T00:00:00Z".into(),
            finished_at: "2025-01-01T00:01:00Z".into(),
            mode: "quick".into(),
            interrupted_by: None,
            repeat: 1,
            drift_threshold_pct: 5.0,
            environment: serde_json::from_str(
                r##"{"kernel_release":"6.1","kernel_version":"#1","preemption_model":"voluntary",
                   "allowed_cpus":[0,1],"cpu_flags_of_note":[],"boot_options_of_note":[],
                   "available_clocksources":[],"rt_priority_permitted":false,
                   "glibc_version":"2.36","build_profile":"release","target":"x86_64"}"##,
            )
            .unwrap_or_else(|e| panic!("environment: {e}")),
            warnings: Vec::new(),
            experiments: vec![ExperimentResult {
                name: "x".into(),
                study: "s".into(),
                study_label: "l".into(),
                status: Status::Ok,
                reason: None,
                wall_s: 1.0,
                metrics: metrics
                    .iter()
                    .map(|(id, unit, v)| Metric::from_values(id, *unit, v, 1, "p", "n").unwrap())
                    .collect(),
                series: vec![],
                skipped_metrics: vec![],
                tables: vec![],
                conclusion: None,
                attempts: vec![Attempt {
                    wall_s: 1.0,
                    reference_wide_ns: [100.0, 101.0],
                    reference_syscall_ns: [50.0, 50.0],
                    drift_pct: 1.0,
                    kept: true,
                }],
                drift_note: None,
            }],
        };
        Run {
            label: label.into(),
            results,
        }
    }

    fn samples(base: f64, n: usize) -> Vec<f64> {
        // A spread of about +-1% around base, in a fixed order.
        (0..n)
            .map(|i| base * (1.0 + ((i * 7) % n) as f64 / n as f64 * 0.02 - 0.01))
            .collect()
    }

    #[test]
    fn a_30_percent_slowdown_is_flagged_and_the_rest_is_not() {
        let ids = ["m.a", "m.b", "m.c", "m.d"];
        let a = run(
            "a",
            &ids.iter()
                .map(|id| (*id, Unit::Ns, samples(100.0, 11)))
                .collect::<Vec<_>>(),
        );
        let b = run(
            "b",
            &ids.iter()
                .map(|id| {
                    let scale = if *id == "m.c" { 1.3 } else { 1.0 };
                    (
                        *id,
                        Unit::Ns,
                        samples(100.0, 11).iter().map(|x| x * scale).collect(),
                    )
                })
                .collect::<Vec<_>>(),
        );
        let o = Options {
            fail_if_slower_pct: Some(10.0),
            ..Options::default()
        };
        let c = compare_pair(&a, &b, &o).unwrap();
        let flagged: Vec<&str> = c
            .rows
            .iter()
            .filter(|r| r.verdict.flagged())
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(flagged, ["m.c"]);
        assert_eq!(c.rows[2].verdict, Verdict::Slower);
        assert!((c.rows[2].slowdown_pct().unwrap() - 30.0).abs() < 0.5);
        assert_eq!(c.exit_status(), 1);
        assert!(c.same_machine());
        // Without the option, the same comparison exits 0; above 30%, too.
        let c0 = compare_pair(&a, &b, &Options::default()).unwrap();
        assert_eq!(c0.exit_status(), 0);
        let c40 = compare_pair(
            &a,
            &b,
            &Options {
                fail_if_slower_pct: Some(40.0),
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(c40.exit_status(), 0);
        let text = render_pair_text(&c);
        assert!(text.contains("SLOWER +30"), "{text}");
    }

    #[test]
    fn throughput_falling_is_slower_and_counts_have_no_direction() {
        let a = run(
            "a",
            &[
                ("t", Unit::PerS, samples(1000.0, 11)),
                ("c", Unit::Count, samples(10.0, 11)),
            ],
        );
        let b = run(
            "b",
            &[
                ("t", Unit::PerS, samples(700.0, 11)),
                ("c", Unit::Count, samples(20.0, 11)),
            ],
        );
        let c = compare_pair(&a, &b, &Options::default()).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Slower);
        assert!((c.rows[0].slowdown_pct().unwrap() - 42.86).abs() < 0.5);
        assert_eq!(c.rows[1].verdict, Verdict::Changed);
        assert_eq!(c.rows[1].slowdown_pct(), None);
    }

    #[test]
    fn spread_and_few_samples_keep_a_change_from_counting() {
        // 2 samples a side can never be significant; a wide spread raises the floor.
        let wide: Vec<f64> = (0..11).map(|i| 100.0 + (i as f64 - 5.0) * 8.0).collect();
        let a = run(
            "a",
            &[
                ("few", Unit::Ns, vec![100.0, 101.0]),
                ("wide", Unit::Ns, wide.clone()),
            ],
        );
        let b = run(
            "b",
            &[
                ("few", Unit::Ns, vec![200.0, 201.0]),
                ("wide", Unit::Ns, wide.iter().map(|x| x * 1.2).collect()),
            ],
        );
        let c = compare_pair(&a, &b, &Options::default()).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Untested);
        assert!(c.rows[0].why.contains("cannot reach"), "{}", c.rows[0].why);
        assert!(c.rows[1].floor_pct > 20.0, "{}", c.rows[1].floor_pct);
        assert!(!c.rows[1].verdict.flagged(), "{:?}", c.rows[1].verdict);
        assert_eq!(c.family, 1);
    }

    #[test]
    fn a_thousand_identical_pairs_flag_nothing() {
        // A/A: both files drawn from one distribution, 1000 metrics.
        let mut rng = crate::measure::significance::SplitMix64(7);
        let mut draw =
            || -> Vec<f64> { (0..11).map(|_| 100.0 * (1.0 + 0.03 * rng.unit())).collect() };
        let ids: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        let ma: Vec<(&str, Unit, Vec<f64>)> = ids
            .iter()
            .map(|id| (id.as_str(), Unit::Ns, draw()))
            .collect();
        let mb: Vec<(&str, Unit, Vec<f64>)> = ids
            .iter()
            .map(|id| (id.as_str(), Unit::Ns, draw()))
            .collect();
        let o = Options {
            resamples: 200,
            ..Options::default()
        };
        let c = compare_pair(&run("a", &ma), &run("b", &mb), &o).unwrap();
        let raw = c
            .rows
            .iter()
            .filter(|r| r.p.is_some_and(|p| p < 0.05))
            .count();
        // Uncorrected, about 5% would pass by chance; after Holm and the floor, none.
        assert!(raw <= 80, "{raw}");
        assert_eq!(c.rows.iter().filter(|r| r.verdict.flagged()).count(), 0);
    }

    #[test]
    fn different_machines_get_a_banner_and_no_shared_metric_is_a_usage_error() {
        let a = run("a", &[("m", Unit::Ns, samples(1.0, 7))]);
        let mut b = run("b", &[("m", Unit::Ns, samples(1.0, 7))]);
        b.results.environment.kernel_release = "6.8".into();
        let c = compare_pair(&a, &b, &Options::default()).unwrap();
        assert!(machines_banner(&c).unwrap().contains("kernel"));
        let other = run("o", &[("n", Unit::Ns, samples(1.0, 7))]);
        assert!(matches!(
            compare_pair(&a, &other, &Options::default()),
            Err(Error::Usage(_))
        ));
    }

    #[test]
    fn the_scatter_floor_ignores_a_common_shift_and_needs_enough_metrics() {
        assert_eq!(scatter_floor_pct([1.0; 19].into_iter()), None);
        // Every metric 20% slower: no scatter, the shift itself stays visible.
        assert!(scatter_floor_pct([1.2; 30].into_iter()).unwrap() < 1e-9);
        // Log ratios spread evenly over +-5% (and one outlier, which barely counts): the MAD is
        // 2.5%, a robust sd 3.7%, three of them 11.1%, i.e. a floor of 11.8%.
        let mut r: Vec<f64> = (0..=40)
            .map(|i| (-0.05 + 0.1 * i as f64 / 40.0).exp())
            .collect();
        r.push(3.0);
        let f = scatter_floor_pct(r.into_iter()).unwrap();
        assert!((f - 11.8).abs() < 1.0, "{f}");
    }

    #[test]
    fn flagged_metrics_are_marked_in_the_table() {
        let a = run(
            "a",
            &[
                ("m", Unit::Ns, samples(1.0, 11)),
                ("n", Unit::Ns, samples(1.0, 11)),
            ],
        );
        let mut b = a.clone();
        b.results.experiments[0].metrics[0].flags = vec!["client_bound".into()];
        let mut a2 = a.clone();
        a2.results.experiments[0].metrics[0].flags =
            vec!["client_bound".into(), "saturated".into()];
        let c = compare_pair(&a2, &b, &Options::default()).unwrap();
        assert_eq!(
            c.rows[0].flags_text().as_deref(),
            Some("client_bound (A B), saturated (A)")
        );
        assert_eq!(c.rows[1].flags_text(), None);
        assert!(c
            .notes
            .iter()
            .any(|n| n.starts_with("1 metric carries flags")));
        let text = render_pair_text(&c);
        assert!(
            text.contains("flags") && text.contains("saturated (A)"),
            "{text}"
        );
        // Nothing flagged: no column, no note.
        let c = compare_pair(&a, &a, &Options::default()).unwrap();
        assert!(c.notes.is_empty() && !render_pair_text(&c).contains("flags"));
        // A fleet marks the flagged file's figure.
        let f = fleet(&[a.clone(), b]).unwrap();
        assert_eq!(f.rows[0].flags, [vec![], vec!["client_bound".to_string()]]);
        assert!(render_fleet_text(&f).contains(" !"));
    }

    #[test]
    fn a_fleet_marks_the_fastest_and_slowest() {
        let runs = [
            run(
                "a",
                &[
                    ("m", Unit::Ns, samples(2.0, 7)),
                    ("s", Unit::Percent, samples(5.0, 7)),
                ],
            ),
            run(
                "b",
                &[
                    ("m", Unit::Ns, samples(1.0, 7)),
                    ("s", Unit::Percent, samples(6.0, 7)),
                ],
            ),
            run("c", &[("m", Unit::Us, samples(0.003, 7))]),
        ];
        let f = fleet(&runs).unwrap();
        let m = &f.rows[0];
        assert_eq!((m.fastest, m.slowest), (Some(1), Some(2)));
        assert!((m.medians[2].unwrap() - 3.0).abs() < 0.1);
        assert_eq!((f.rows[1].fastest, f.rows[1].slowest), (None, None));
        let text = render_fleet_text(&f);
        assert!(text.contains("+") && text.contains("C"));
    }
}
