//! Runs a list of experiments in order and gathers their results; knows nothing of output.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Instant, SystemTime};

use crate::cancel::Cancel;
use crate::error::{signal_name, Error};
use crate::experiments::{Ctx, Experiment, Mode};
use crate::measure::env::{self, Environment};
use crate::measure::sampler::{
    clock_cost_ns, reference_loop_ns, reference_syscall_ns, reference_wide_ns,
};
use crate::report::warnings::env_warnings;
use crate::results::{ExperimentResult, RunResults, Status, Warning, SCHEMA_VERSION};

/// Where the runner reports progress (a bar on a terminal, plain lines otherwise).
pub trait Progress: Sync {
    /// Experiment `index` (0-based) of `total` starts.
    fn experiment(&self, index: usize, total: usize, name: &str);
    /// A step inside the current experiment.
    fn step(&self, what: &str);
    /// The current experiment ended with this status.
    fn finished(&self, name: &str, status: Status, wall_s: f64);
}

/// Runs `experiments` in order. Never panics: an experiment that panics is marked failed.
pub fn run(
    experiments: &[&'static dyn Experiment],
    mode: Mode,
    cancel: &Cancel,
    progress: &dyn Progress,
) -> RunResults {
    let started_at = rfc3339_now();
    let mut environment: Environment = env::capture();
    environment.clock_read_cost_ns = Some(clock_cost_ns());
    environment.reference_loop_ns_start = Some(reference_loop_ns());
    environment.reference_wide_ns_start = Some(reference_wide_ns());
    environment.reference_syscall_ns_start = Some(reference_syscall_ns());
    let mut results = Vec::with_capacity(experiments.len());

    for (i, exp) in experiments.iter().enumerate() {
        if let Some(sig) = cancel.signal() {
            results.push(not_run(
                *exp,
                format!("interrupted by {} before it started", signal_name(sig)),
            ));
            continue;
        }
        progress.experiment(i, experiments.len(), exp.name());
        let step = |what: &str| progress.step(what);
        let ctx = Ctx {
            mode,
            cancel,
            progress: &step,
            env: &environment,
        };
        let t = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| exp.run(&ctx)));
        let wall_s = t.elapsed().as_secs_f64();
        let mut r = ExperimentResult {
            name: exp.name().to_string(),
            study: exp.study().to_string(),
            status: Status::Ok,
            reason: None,
            wall_s,
            metrics: Vec::new(),
            series: Vec::new(),
            skipped_metrics: Vec::new(),
            conclusion: None,
        };
        match outcome {
            Ok(Ok(o)) => {
                r.metrics = o.metrics;
                r.series = o.series;
                r.skipped_metrics = o.skipped;
                r.conclusion = o.conclusion;
            }
            Ok(Err(Error::Skip(reason))) => {
                r.status = Status::Skipped;
                r.reason = Some(reason);
            }
            Ok(Err(Error::Cancelled(sig))) => {
                r.status = Status::Skipped;
                r.reason = Some(format!(
                    "interrupted by {} before it finished",
                    signal_name(sig)
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
        progress.finished(exp.name(), r.status, wall_s);
        results.push(r);
    }
    environment.record_end();
    if !cancel.is_cancelled() {
        environment.reference_loop_ns_end = Some(reference_loop_ns());
        environment.reference_wide_ns_end = Some(reference_wide_ns());
        environment.reference_syscall_ns_end = Some(reference_syscall_ns());
    }
    // Stored rather than recomputed by each report, so that a results file read later (or by a
    // newer threadlab with other thresholds) shows what this run showed.
    let warnings = env_warnings(&environment)
        .iter()
        .map(Warning::from)
        .collect();
    RunResults {
        schema_version: SCHEMA_VERSION,
        threadlab_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        finished_at: rfc3339_now(),
        mode: mode.name().to_string(),
        interrupted_by: cancel.signal().map(|s| signal_name(s).to_string()),
        environment,
        warnings,
        experiments: results,
    }
}

fn not_run(exp: &dyn Experiment, reason: String) -> ExperimentResult {
    ExperimentResult {
        name: exp.name().to_string(),
        study: exp.study().to_string(),
        status: Status::Skipped,
        reason: Some(reason),
        wall_s: 0.0,
        metrics: Vec::new(),
        series: Vec::new(),
        skipped_metrics: Vec::new(),
        conclusion: None,
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
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_425_667), "2026-11-23T09:21:07Z");
    }
}
