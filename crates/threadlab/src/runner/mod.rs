//! Runs a list of experiments and gathers their results; knows nothing of output.
//!
//! Each experiment runs between two readings of the drift references (measure/drift.rs): a
//! throughput-bound loop and a system call. When either moved more than the threshold during
//! the experiment, the host's speed changed under it, so it runs again (at most twice more,
//! within a time budget); every attempt is recorded with its readings and the steadiest one is
//! kept. With `repeat` > 1 the whole list runs that many times, interleaved (A B C A B C), and
//! each metric becomes the median of the runs' medians.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime};

use crate::cancel::Cancel;
use crate::error::{signal_name, Error};
use crate::experiments::{Ctx, Experiment, Mode, Outcome};
use crate::measure::drift::{
    clock_cost_ns, reference_loop_ns, reference_memory_ns, reference_syscall_ns, reference_wide_ns,
};
use crate::measure::env::{self, Environment};
use crate::measure::host::{steal_ms, steal_ticks, HostLog};
use crate::report::warnings::env_warnings;
use crate::results::{
    flag, Attempt, ExperimentResult, Metric, RunResults, Status, Warning, SCHEMA_VERSION,
};

/// Where the runner reports progress (a bar on a terminal, plain lines otherwise).
pub trait Progress: Sync {
    /// Experiment `index` (0-based) of `total` starts.
    fn experiment(&self, index: usize, total: usize, name: &str);
    /// A step inside the current experiment.
    fn step(&self, what: &str);
    /// The current experiment ended with this status.
    fn finished(&self, name: &str, status: Status, wall_s: f64);
    /// About this many seconds of the run are left (the estimates of the experiments still
    /// to run, scaled to `--budget` when one is set), as a new experiment starts.
    fn time_left(&self, _secs: f64) {}
}

/// What to run and how.
pub struct Plan<'a> {
    pub experiments: &'a [&'static dyn Experiment],
    pub mode: Mode,
    /// Runs of the whole list (>= 1).
    pub repeat: u32,
    /// Re-measure an experiment when a drift reference moved more than this, percent; None
    /// turns re-measuring off.
    pub drift_threshold_pct: Option<f64>,
    /// Fit the run into this wall time (`--budget`): see `Budget`.
    pub budget: Option<Duration>,
}

/// `--budget`: before each experiment, the time left over the estimates of the experiments
/// still to run gives the scale of every sampler's budget and trial counts (within
/// `SCALE_RANGE`); an experiment whose estimate at the smallest scale no longer fits in what is
/// left is skipped with that reason, so the run ends within its budget.
struct Budget {
    total: Duration,
    started: Instant,
}

/// The budget scales samplers between these factors: below, too few trials make a median;
/// above, a row only runs into its own precision target sooner.
pub const SCALE_RANGE: (f64, f64) = (0.25, 4.0);

impl Budget {
    fn left_s(&self) -> f64 {
        (self.total.as_secs_f64() - self.started.elapsed().as_secs_f64()).max(0.0)
    }

    /// The scale for the next experiment, or the reason it cannot run in what is left.
    fn scale(&self, this_s: f64, remaining_s: f64) -> std::result::Result<f64, String> {
        let left = self.left_s();
        if this_s * SCALE_RANGE.0 > left {
            return Err(format!(
                "not run: the --budget of {} s leaves {left:.1} s, and this experiment needs about \
                 {:.1} s even at its smallest scale; give a larger --budget or name fewer \
                 experiments",
                self.total.as_secs(),
                this_s * SCALE_RANGE.0
            ));
        }
        Ok((left / remaining_s.max(1e-3)).clamp(SCALE_RANGE.0, SCALE_RANGE.1))
    }
}

/// Re-measuring stops this far short of a run's target, a share of it: the estimates of the
/// experiments still to run are rough (the server's --full step took 172-190 s here).
const DEADLINE_MARGIN: f64 = 0.05;

/// When the run should end (`--budget`, else `Mode::target_wall`) and what the experiments
/// after the current one are expected to take: measuring the current one again must fit.
#[derive(Clone, Copy)]
struct Deadline {
    started: Instant,
    target: Duration,
    /// The estimates of the experiments after the current one, at the run's pace so far.
    after_s: f64,
    /// "--full's target", "its --budget": for the note of a refusal.
    what: &'static str,
}

impl Deadline {
    /// Whether measuring the current experiment again, for about `again`, still ends the run
    /// within its target, less the margin.
    fn fits(&self, again: Duration) -> bool {
        fits_within(
            self.started.elapsed().as_secs_f64(),
            again.as_secs_f64(),
            self.after_s,
            self.target.as_secs_f64(),
        )
    }
}

fn fits_within(elapsed_s: f64, again_s: f64, after_s: f64, target_s: f64) -> bool {
    elapsed_s + again_s + after_s <= target_s * (1.0 - DEADLINE_MARGIN)
}

/// What may still be spent re-measuring: the mode's budget for it, and the run's deadline.
struct Remeasure {
    budget_left: Duration,
    /// When the run started: every deadline counts from it.
    started: Instant,
    /// The run's target and its name: `--budget`, else the mode's.
    target: Option<(Duration, &'static str)>,
    /// For the experiment about to run (`Remeasure::next`).
    deadline: Option<Deadline>,
}

impl Remeasure {
    fn for_plan(plan: &Plan, started: Instant) -> Remeasure {
        let target = match plan.budget {
            Some(total) => Some((total, "its --budget")),
            None => plan
                .mode
                .target_wall()
                .map(|t| (t, plan.mode.target_name())),
        };
        Remeasure {
            budget_left: plan.mode.remeasure_budget(),
            started,
            target,
            deadline: None,
        }
    }

    /// Sets the deadline for the next experiment, with `after_s` of experiments estimated after
    /// it, counted at the run's pace when that is slower than the estimates, never faster (one
    /// experiment that ran fast says little about the next: a --full whose sync took half its
    /// estimate re-measured switch twice and took 622.7 s).
    fn next(&mut self, after_s: f64) {
        self.deadline = self.target.map(|(target, what)| Deadline {
            started: self.started,
            target,
            after_s,
            what,
        });
    }
}

/// What one go of an experiment took, seconds: the mean of its attempts. The run's pace (time
/// taken against the estimates) is read from this, not from the experiment's whole wall time:
/// attempts made again for drift are the re-measuring budget's, and counting them would make the
/// experiments still to come look slower than they run, and the deadline refuse re-measuring
/// that fits.
fn one_attempt_s(r: &ExperimentResult) -> f64 {
    let walls: Vec<f64> = r.attempts.iter().map(|a| a.wall_s).collect();
    if walls.is_empty() {
        r.wall_s
    } else {
        walls.iter().sum::<f64>() / walls.len() as f64
    }
}

/// An experiment's estimated wall time in `mode`, seconds (`Info::rough_secs`).
fn estimate_s(exp: &dyn Experiment, mode: Mode) -> f64 {
    exp.info().rough_duration(mode).as_secs_f64()
}

/// Seconds of estimated work the time left treats as already run at the estimated pace, so
/// that the first experiments' pace moves it gradually.
const PACE_PRIOR_S: f64 = 20.0;

/// Attempts per experiment at most (the first and two more).
pub const MAX_ATTEMPTS: usize = 3;

/// Default drift threshold, percent.
pub const DEFAULT_DRIFT_PCT: f64 = 5.0;

/// The drift references, read once.
#[derive(Clone, Copy)]
struct Reading {
    wide_ns: f64,
    syscall_ns: f64,
    memory_ns: f64,
    pair_ns: f64,
}

fn read_references() -> Reading {
    Reading {
        wide_ns: reference_wide_ns(),
        syscall_ns: reference_syscall_ns(),
        memory_ns: reference_memory_ns(),
        pair_ns: crate::measure::pair::reference_pair_ns(),
    }
}

/// The lowest and highest reading of the pair's distance in the run: at its start and end, and
/// around every attempt of every experiment. None when none was read (one CPU).
fn pair_range(env: &Environment, experiments: &[ExperimentResult]) -> Option<[f64; 2]> {
    let readings: Vec<f64> = [env.reference_pair_ns_start, env.reference_pair_ns_end]
        .into_iter()
        .flatten()
        .chain(
            experiments
                .iter()
                .flat_map(|e| &e.attempts)
                .flat_map(|a| a.reference_pair_ns),
        )
        .filter(|&ns| ns > 0.0 && ns.is_finite())
        .collect();
    let lo = readings.iter().copied().reduce(f64::min)?;
    let hi = readings.iter().copied().reduce(f64::max)?;
    Some([lo, hi])
}

fn drift_pct(before: Reading, after: Reading) -> f64 {
    let rel = |a: f64, b: f64| {
        if a > 0.0 {
            ((b - a) / a).abs() * 100.0
        } else {
            0.0
        }
    };
    // The memory reference is recorded, not counted: it jitters more than the loops, and
    // `compare` reads it only for the figures that move with it.
    rel(before.wide_ns, after.wide_ns).max(rel(before.syscall_ns, after.syscall_ns))
}

/// Runs the plan. Never panics: an experiment that panics is marked failed.
pub fn run(plan: &Plan, cancel: &Cancel, progress: &dyn Progress) -> RunResults {
    // The Go programs are built once for the whole run, and their folders go when it ends.
    let _builds = crate::subjects::go_build::keep_builds();
    let started_at = rfc3339_now();
    let run_started = Instant::now();
    let mut environment: Environment = env::capture();
    environment.clock_read_cost_ns = Some(clock_cost_ns());
    environment.reference_loop_ns_start = Some(reference_loop_ns());
    environment.reference_wide_ns_start = Some(reference_wide_ns());
    environment.reference_syscall_ns_start = Some(reference_syscall_ns());
    environment.reference_memory_ns_start = Some(reference_memory_ns());

    let repeat = plan.repeat.max(1) as usize;
    let n = plan.experiments.len();
    let mut runs: Vec<Vec<ExperimentResult>> = vec![Vec::with_capacity(repeat); n];
    let mut remeasure = Remeasure::for_plan(plan, run_started);
    let mut reading = read_references();
    environment.reference_pair_ns_start = Some(reading.pair_ns).filter(|&ns| ns > 0.0);
    let budget = plan.budget.map(|total| Budget {
        total,
        started: run_started,
    });
    let estimates: Vec<f64> = plan
        .experiments
        .iter()
        .map(|e| estimate_s(*e, plan.mode))
        .collect();
    // What the estimates have said of the experiments run so far against what they took: the
    // time left is the estimates of the rest corrected by it.
    let (mut estimated_done, mut took_done) = (0.0f64, 0.0f64);
    for round in 0..repeat {
        for (i, exp) in plan.experiments.iter().enumerate() {
            let name = exp.info().name;
            if let Some(sig) = cancel.signal() {
                let mut r = not_run(
                    *exp,
                    format!("interrupted by {} before it started", signal_name(sig)),
                );
                r.status = Status::Interrupted;
                runs[i].push(r);
                continue;
            }
            let remaining_s: f64 = estimates[i..].iter().sum::<f64>()
                + estimates.iter().sum::<f64>() * (repeat - 1 - round) as f64;
            let scale = match budget.as_ref().map(|b| b.scale(estimates[i], remaining_s)) {
                None => 1.0,
                Some(Ok(s)) => s,
                Some(Err(reason)) => {
                    runs[i].push(not_run(*exp, reason));
                    continue;
                }
            };
            // Shrunk toward the estimates: one experiment that met a slow phase of the host
            // (create at 10.6 s against its 6) once put the time left at 2 min 46 s, 70 s more
            // than the run went on to take.
            let pace = (took_done + PACE_PRIOR_S) / (estimated_done + PACE_PRIOR_S);
            progress.time_left(match &budget {
                Some(b) => (remaining_s * scale).min(b.left_s()),
                None => remaining_s * pace,
            });
            // The deadline never counts on what is still to run being faster than estimated.
            let rate = budget.as_ref().map_or(pace.max(1.0), |_| scale);
            remeasure.next((remaining_s - estimates[i]) * rate);
            progress.experiment(round * n + i, repeat * n, name);
            let r = run_with_drift_control(
                *exp,
                plan,
                (&environment, scale),
                cancel,
                progress,
                &mut reading,
                &mut remeasure,
            );
            progress.finished(name, r.status, r.wall_s);
            estimated_done += estimates[i] * scale;
            took_done += one_attempt_s(&r);
            runs[i].push(r);
        }
    }
    let experiments: Vec<ExperimentResult> = runs.into_iter().map(merge_repeats).collect();

    environment.record_end();
    environment.run_wall_s = Some(run_started.elapsed().as_secs_f64());
    if !cancel.is_cancelled() {
        environment.reference_loop_ns_end = Some(reference_loop_ns());
        environment.reference_wide_ns_end = Some(reference_wide_ns());
        environment.reference_syscall_ns_end = Some(reference_syscall_ns());
        environment.reference_memory_ns_end = Some(reference_memory_ns());
        environment.reference_pair_ns_end =
            Some(crate::measure::pair::reference_pair_ns()).filter(|&ns| ns > 0.0);
    }
    environment.reference_pair_ns_range = pair_range(&environment, &experiments);
    // Stored rather than recomputed by each report, so that a results file read later (or by a
    // newer threadlab with other thresholds) shows what this run showed.
    let warnings = env_warnings(&environment)
        .iter()
        .map(Warning::from)
        .collect();
    let mut results = RunResults {
        schema_version: SCHEMA_VERSION,
        threadlab_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        finished_at: rfc3339_now(),
        mode: plan.mode.name().to_string(),
        interrupted_by: cancel.signal().map(|s| signal_name(s).to_string()),
        repeat: repeat as u32,
        drift_threshold_pct: plan.drift_threshold_pct.unwrap_or(0.0),
        environment,
        warnings,
        experiments,
        advice: Vec::new(),
    };
    // Built once here and stored, so every report shows the same answers and a file read
    // later shows what this run showed.
    crate::report::advice::annotate(&mut results);
    results
}

/// Runs one experiment, again while the references moved more than the threshold (at most
/// `MAX_ATTEMPTS` in all, within the budget), and keeps the steadiest attempt.
fn run_with_drift_control(
    exp: &'static dyn Experiment,
    plan: &Plan,
    (environment, scale): (&Environment, f64),
    cancel: &Cancel,
    progress: &dyn Progress,
    reading: &mut Reading,
    remeasure: &mut Remeasure,
) -> ExperimentResult {
    let mut attempts: Vec<(ExperimentResult, Attempt)> = Vec::new();
    let mut drift_note = None;
    loop {
        let before = *reading;
        let r = run_once(exp, plan.mode, (environment, scale), cancel, progress);
        if cancel.is_cancelled() {
            // The readings would only delay the exit; the figures are what they are.
            let attempt = Attempt {
                wall_s: r.wall_s,
                ..Attempt::unread()
            };
            attempts.push((r, attempt));
            break;
        }
        let after = read_references();
        *reading = after;
        let drift = drift_pct(before, after);
        let attempt = Attempt {
            wall_s: r.wall_s,
            reference_wide_ns: [before.wide_ns, after.wide_ns],
            reference_syscall_ns: [before.syscall_ns, after.syscall_ns],
            reference_memory_ns: [before.memory_ns, after.memory_ns],
            reference_pair_ns: [before.pair_ns, after.pair_ns],
            drift_pct: drift,
            kept: false,
        };
        let ok = r.status == Status::Ok;
        let wall = Duration::from_secs_f64(r.wall_s);
        attempts.push((r, attempt));
        let Some(threshold) = plan.drift_threshold_pct else {
            break;
        };
        if !ok || drift <= threshold {
            break;
        }
        if attempts.len() >= MAX_ATTEMPTS {
            drift_note = Some(format!(
                "the drift references moved more than {threshold}% in each of {MAX_ATTEMPTS} \
                 attempts; the steadiest is kept"
            ));
            break;
        }
        if wall > remeasure.budget_left {
            drift_note = Some(format!(
                "the drift references moved {drift:.1}% (> {threshold}%), but measuring again \
                 would pass the run's re-measuring budget ({} s); figures kept as they are",
                plan.mode.remeasure_budget().as_secs()
            ));
            break;
        }
        if let Some(d) = remeasure.deadline.filter(|d| !d.fits(wall)) {
            drift_note = Some(format!(
                "the drift references moved {drift:.1}% (> {threshold}%), but measuring again \
                 (about {:.0} s) would take the run past {} ({} s, less a margin of {:.0}%), \
                 with {:.0} s of experiments still to run; figures kept as they are",
                wall.as_secs_f64(),
                d.what,
                d.target.as_secs(),
                DEADLINE_MARGIN * 100.0,
                d.after_s
            ));
            break;
        }
        remeasure.budget_left -= wall;
    }
    // Keep the steadiest finished attempt; an unfinished one only if nothing finished.
    let kept = attempts
        .iter()
        .enumerate()
        .filter(|(_, (r, _))| r.status == Status::Ok)
        .min_by(|a, b| a.1 .1.drift_pct.total_cmp(&b.1 .1.drift_pct))
        .map(|(i, _)| i)
        .unwrap_or(attempts.len() - 1);
    let mut recorded: Vec<Attempt> = attempts.iter().map(|(_, a)| a.clone()).collect();
    recorded[kept].kept = true;
    let mut result = attempts.swap_remove(kept).0;
    result.wall_s = recorded.iter().map(|a| a.wall_s).sum();
    result.attempts = recorded;
    result.drift_note = drift_note;
    result
}

fn run_once(
    exp: &'static dyn Experiment,
    mode: Mode,
    (environment, budget_scale): (&Environment, f64),
    cancel: &Cancel,
    progress: &dyn Progress,
) -> ExperimentResult {
    let step = |what: &str| progress.step(what);
    let host = HostLog::default();
    let ctx = Ctx {
        mode,
        cancel,
        progress: &step,
        env: environment,
        host: &host,
        budget_scale,
    };
    let steal_before = steal_ticks();
    let t = Instant::now();
    let mut out = Outcome::default();
    let outcome = catch_unwind(AssertUnwindSafe(|| exp.run(&ctx, &mut out)));
    let mut r = empty_result(exp);
    r.wall_s = t.elapsed().as_secs_f64();
    r.host = Some(host.activity(steal_ms(&steal_before, &steal_ticks())));
    // What the experiment recorded before it ended is kept, whatever ended it.
    r.metrics = std::mem::take(&mut out.metrics);
    r.series = std::mem::take(&mut out.series);
    r.skipped_metrics = std::mem::take(&mut out.skipped);
    r.tables = std::mem::take(&mut out.tables);
    match outcome {
        Ok(Ok(())) => r.conclusion = out.conclusion.take(),
        Ok(Err(Error::Skip(reason))) => {
            r.status = Status::Skipped;
            r.reason = Some(reason);
        }
        Ok(Err(Error::Cancelled(sig))) => {
            r.status = Status::Interrupted;
            r.reason = Some(format!(
                "interrupted by {} before it finished{}",
                signal_name(sig),
                if r.metrics.is_empty() {
                    String::new()
                } else {
                    format!("; the {} metrics it finished are kept", r.metrics.len())
                }
            ));
        }
        Ok(Err(e)) => {
            r.status = Status::Failed;
            r.reason = Some(e.to_string());
        }
        Err(payload) => {
            r.status = Status::Failed;
            r.reason = Some(format!("internal error: {}", panic_message(&payload)));
        }
    }
    r
}

fn empty_result(exp: &dyn Experiment) -> ExperimentResult {
    let info = exp.info();
    ExperimentResult {
        study: info.study.citation.to_string(),
        study_label: info.study.label.to_string(),
        ..ExperimentResult::new(info.name, Status::Ok)
    }
}

fn not_run(exp: &dyn Experiment, reason: String) -> ExperimentResult {
    let mut r = empty_result(exp);
    r.status = Status::Skipped;
    r.reason = Some(reason);
    r
}

/// One result from the K runs of an experiment: each metric's values are the runs' medians
/// (the median of medians is its figure, their spread the spread across runs), its flags the
/// union of every finished run's, its histograms the last finished run's; series, tables and
/// the conclusion are the last finished run's, as it says.
fn merge_repeats(mut runs: Vec<ExperimentResult>) -> ExperimentResult {
    if runs.len() == 1 {
        return runs.pop().expect("one run");
    }
    let k = runs.len();
    let finished: Vec<&ExperimentResult> = runs.iter().filter(|r| r.status == Status::Ok).collect();
    let mut merged = match finished.last() {
        Some(last) => (*last).clone(),
        None => return runs.pop().expect("at least one run"),
    };
    // Which of the K runs the kept series, tables, conclusion and histograms come from.
    let last_run = runs
        .iter()
        .rposition(|r| r.status == Status::Ok)
        .map_or(k, |i| i + 1);
    merged.wall_s = runs.iter().map(|r| r.wall_s).sum();
    merged.attempts = runs.iter().flat_map(|r| r.attempts.clone()).collect();
    if let Some(failed) = runs.iter().find(|r| r.status == Status::Failed) {
        merged.status = Status::Failed;
        merged.reason = failed.reason.clone();
    }
    merged.metrics = merged
        .metrics
        .iter()
        .map(|m| merge_metric(m, &finished, k, last_run))
        .collect();
    if let Some(c) = merged.conclusion.as_mut() {
        c.push_str(&format!(
            " (Figures in this text are from run {last_run} of {k}; the tables' medians are \
             over all {} finished runs.)",
            finished.len()
        ));
    }
    merged
}

/// One metric over the finished runs. `m` is the last finished run's (run `last_run` of `k`).
///
/// Every field is named below, so a field added to `Metric` does not compile here until it is
/// decided whether it is recomputed, merged across runs or kept from the last run: none can be
/// silently lost.
fn merge_metric(m: &Metric, finished: &[&ExperimentResult], k: usize, last_run: usize) -> Metric {
    let of_runs: Vec<&Metric> = finished.iter().filter_map(|r| r.metric(&m.id)).collect();
    let medians: Vec<f64> = of_runs.iter().map(|x| x.median).collect();
    // Flags: any run's reason to doubt the figure is a reason to doubt the median of medians.
    let mut flags: Vec<String> = Vec::new();
    for f in of_runs.iter().flat_map(|x| x.flags.iter()) {
        if !flags.contains(f) {
            flags.push(f.clone());
        }
    }
    let mut note = flag::tagged(
        &flags,
        &format!(
            "{}; --repeat {k}: the median of {} runs' medians, spread across runs",
            flag::untagged(m),
            medians.len()
        ),
    );
    if !m.histograms.is_empty() {
        note.push_str(&format!(
            "; its histograms are run {last_run}'s (the last finished), not merged"
        ));
    }
    let Some(fresh) = Metric::from_values(&m.id, m.unit, &medians, m.batch, &m.placement, note)
    else {
        return m.clone();
    };
    let Metric {
        // Recomputed from the runs' medians.
        id,
        unit,
        median,
        min,
        max,
        q1,
        q3,
        mean,
        cv,
        samples,
        batch,
        noisy,
        placement,
        note,
        values,
        modes,
        // Each run is one replication of the merged metric: its trial figures stand in for a
        // trial's batches, so `values[i]` (run i's median) is the median of `batches[i]`.
        batches: _,
        trials,
        // Recomputed below from the runs' medians, where the runs stated one.
        interval: _,
        // Kept from the metric as the runs reported it.
        historical: _,
        direction: _,
        ratio_of: _,
        flags: _,
        histograms: _,
        memory_bound: _,
        // Each run is one replication: its median stands for one trial.
        trial_of: _,
    } = fresh;
    let interval = m
        .interval
        .and(crate::measure::significance::median_interval(&values))
        .map(|i| [i.lo, i.hi]);
    Metric {
        id,
        unit,
        median,
        min,
        max,
        q1,
        q3,
        mean,
        cv,
        samples,
        batch,
        noisy,
        placement,
        note,
        values,
        modes,
        batches: of_runs.iter().map(|x| x.values.clone()).collect(),
        trials,
        historical: m.historical.clone(),
        direction: m.direction,
        ratio_of: m.ratio_of.clone(),
        interval,
        flags,
        histograms: m.histograms.clone(),
        memory_bound: m.memory_bound,
        trial_of: Vec::new(),
    }
}

fn panic_message(payload: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// The current UTC time as RFC 3339 ("2026-11-23T09:41:07Z").
pub fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

/// Formats seconds since the epoch as RFC 3339 UTC (civil-from-days, proleptic Gregorian).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests;
