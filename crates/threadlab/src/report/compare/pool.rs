//! Several runs of one build as one side of a comparison (`--also-a`, `--also-b`): their trials
//! pooled metric by metric, so that a side's spread between trials is also its spread between
//! runs.
//!
//! One run's trials share the run's host state: where the host put the vCPUs, how fast it
//! wakes an idle one, the memory its other tenants load. Compared with another run, a figure can
//! sit outside the first run's spread and still inside what the same build gives from one run
//! to the next. Pooled, each side's IQR, its clusters and its references span every run it
//! holds, and the test asks whether B lies outside all of that.

use super::noise::machine_differences;
use super::Run;
use crate::error::{Error, Result};
use crate::measure::stats::{Summary, TrialLog};
use crate::results::{Attempt, ExperimentResult, Metric};

/// `base` with the trials of `more` (other runs of the same build on the same machine, in the
/// same mode) added to each of its metrics. Metrics, experiments and fields only `more` holds
/// are left out: the side is `base`'s, with more evidence.
pub fn pool(base: Run, more: Vec<Run>) -> Result<Run> {
    if more.is_empty() {
        return Ok(base);
    }
    for m in &more {
        let differences = machine_differences(&base.results, &m.results);
        if let Some(first) = differences.first() {
            return Err(Error::Usage(format!(
                "{} comes from another machine or kernel than {} ({first}): pool only runs of \
                 one machine",
                m.label, base.label
            )));
        }
        if m.results.mode != base.results.mode {
            return Err(Error::Usage(format!(
                "{} is a {} run and {} a {} run: pool only runs of one mode",
                m.label, m.results.mode, base.label, base.results.mode
            )));
        }
    }
    let label = format!(
        "{} (+{} more run{})",
        base.label,
        more.len(),
        if more.len() == 1 { "" } else { "s" }
    );
    let mut results = base.results;
    for e in results.experiments.iter_mut() {
        let others: Vec<&ExperimentResult> = more
            .iter()
            .filter_map(|r| r.results.experiments.iter().find(|x| x.name == e.name))
            .collect();
        pool_experiment(e, &others);
    }
    Ok(Run { label, results })
}

fn pool_experiment(e: &mut ExperimentResult, others: &[&ExperimentResult]) {
    if others.is_empty() {
        return;
    }
    let all: Vec<&ExperimentResult> = std::iter::once(&*e).chain(others.iter().copied()).collect();
    let attempt = pooled_attempt(&all);
    let wall_s = all.iter().map(|x| x.wall_s).sum();
    let metrics = e
        .metrics
        .iter()
        .map(|m| {
            let same: Vec<&Metric> = others
                .iter()
                .filter_map(|o| o.metric(&m.id))
                .filter(|o| o.unit == m.unit)
                .collect();
            pool_metric(m, &same)
        })
        .collect();
    e.metrics = metrics;
    e.wall_s = wall_s;
    if let Some(a) = attempt {
        e.attempts = vec![a];
    }
}

/// One kept attempt standing for every run's kept one: each reference's lowest and highest
/// reading across them (so what moved between the runs reads as having moved during the side's
/// experiment, which is what the pooled trials went through), the largest drift. None when a
/// run has no kept attempt with readings (an older or interrupted file): then the side keeps
/// its own.
fn pooled_attempt(all: &[&ExperimentResult]) -> Option<Attempt> {
    let kept: Vec<&Attempt> = all
        .iter()
        .map(|e| e.attempts.iter().find(|a| a.kept))
        .collect::<Option<Vec<_>>>()?;
    let range = |read: fn(&Attempt) -> [f64; 2]| -> [f64; 2] {
        let v: Vec<f64> = kept
            .iter()
            .flat_map(|a| read(a))
            .filter(|x| *x > 0.0 && x.is_finite())
            .collect();
        match (
            v.iter().copied().reduce(f64::min),
            v.iter().copied().reduce(f64::max),
        ) {
            // A run without a reading (zeros, from an older file) leaves the reference unread.
            (Some(lo), Some(hi)) if v.len() == 2 * kept.len() => [lo, hi],
            _ => [0.0; 2],
        }
    };
    Some(Attempt {
        wall_s: kept.iter().map(|a| a.wall_s).sum(),
        reference_wide_ns: range(|a| a.reference_wide_ns),
        reference_syscall_ns: range(|a| a.reference_syscall_ns),
        reference_memory_ns: range(|a| a.reference_memory_ns),
        reference_pair_ns: range(|a| a.reference_pair_ns),
        drift_pct: kept.iter().map(|a| a.drift_pct).fold(0.0, f64::max),
        kept: true,
    })
}

/// `m` with the values of `more` (the same metric in the other runs) after its own, and every
/// statistic recomputed over them all (`Metric::from_summary`, as a run makes it).
///
/// The pattern below names every field of `Metric`, so a field added to it does not compile
/// here until it is decided how runs pool it.
fn pool_metric(m: &Metric, more: &[&Metric]) -> Metric {
    if more.is_empty() {
        return m.clone();
    }
    let all: Vec<&Metric> = std::iter::once(m).chain(more.iter().copied()).collect();
    let values: Vec<f64> = all.iter().flat_map(|x| x.values.iter().copied()).collect();
    let Some(s) = Summary::from_samples(&values, m.batch) else {
        return m.clone();
    };
    let Metric {
        // Recomputed over the pool by from_summary.
        median: _,
        min: _,
        max: _,
        q1: _,
        q3: _,
        mean: _,
        cv: _,
        samples: _,
        noisy: _,
        modes: _,
        values: _,
        // The first run's, as it is.
        id,
        unit,
        batch: _,
        placement,
        note,
        historical,
        direction,
        ratio_of,
        histograms,
        // An interval a run computed over its own rounds says nothing about the pool.
        interval: _,
        // Pooled below.
        batches: _,
        trials: _,
        flags: _,
        memory_bound: _,
        trial_of: _,
    } = m;
    let mut p = Metric::from_summary(
        id,
        *unit,
        &s,
        placement,
        format!(
            "{note}; pooled with the trials of {} more run{}",
            more.len(),
            if more.len() == 1 { "" } else { "s" }
        ),
    );
    p.historical = historical.clone();
    p.direction = *direction;
    p.ratio_of = ratio_of.clone();
    p.histograms = histograms.clone();
    // Batches only when every run kept them, one list per value.
    if all
        .iter()
        .all(|x| !x.batches.is_empty() && x.batches.len() == x.values.len())
    {
        p.batches = all.iter().flat_map(|x| x.batches.iter().cloned()).collect();
    }
    p.trials = pooled_log(&all);
    for f in all.iter().flat_map(|x| x.flags.iter()) {
        if !p.flags.contains(f) {
            p.flags.push(f.clone());
        }
    }
    p.memory_bound = all.iter().any(|x| x.memory_bound);
    p.trial_of = pooled_trial_of(&all);
    p
}

/// The runs' trial logs added up, their per-trial readings in order; None unless every run
/// kept one.
fn pooled_log(all: &[&Metric]) -> Option<TrialLog> {
    let logs: Vec<&TrialLog> = all
        .iter()
        .map(|m| m.trials.as_ref())
        .collect::<Option<_>>()?;
    TrialLog::pooled(&logs)
}

/// Which trial each pooled value came from, the runs' trials numbered one after another; empty
/// when every value is a trial of its own in every run.
fn pooled_trial_of(all: &[&Metric]) -> Vec<u32> {
    if all.iter().all(|m| m.trial_of.is_empty()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut next = 0u32;
    for m in all {
        let own: Vec<u32> = if m.trial_of.len() == m.values.len() {
            m.trial_of.clone()
        } else {
            (0..m.values.len() as u32).collect()
        };
        let span = own.iter().max().map_or(0, |&x| x + 1);
        out.extend(own.iter().map(|t| t + next));
        next += span;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::units::Unit;
    use crate::results::{RunResults, Status};

    fn metric(id: &str, values: &[f64], pair: f64) -> Metric {
        let mut m = Metric::from_values(id, Unit::Ns, values, 1, "cross_cpu(0,1)", "n").unwrap();
        m.trials = Some(TrialLog {
            taken: values.len() + 1,
            kept: values.len(),
            steal: 1,
            disturbed: 0,
            slowed: 0,
            stop: crate::measure::stats::Stop::Limit,
            target_pct: 5.0,
            ci_pct: Some(1.0),
            pair_ns: vec![pair; values.len()],
            colocated: vec![],
            phase_wide_ns: vec![],
        });
        m
    }

    fn run(label: &str, metrics: Vec<Metric>, wide: [f64; 2], pair: [f64; 2]) -> Run {
        let mut e = ExperimentResult::new("x", Status::Ok);
        e.metrics = metrics;
        e.wall_s = 2.0;
        e.attempts = vec![Attempt {
            wall_s: 2.0,
            reference_wide_ns: wide,
            reference_syscall_ns: [50.0, 51.0],
            reference_memory_ns: [95.0, 96.0],
            reference_pair_ns: pair,
            drift_pct: 1.0,
            kept: true,
        }];
        Run {
            label: label.into(),
            results: RunResults::new("quick", vec![e]),
        }
    }

    #[test]
    fn runs_pool_their_trials_flags_and_references() {
        let mut windows = metric("x.windows", &[10.0, 11.0, 12.0], 45.0);
        windows.trial_of = vec![0, 0, 1];
        let mut flagged = metric("x.a", &[3.0, 4.0], 370.0);
        flagged.flags = vec!["race".into()];
        let a = run(
            "a1.json",
            vec![metric("x.a", &[1.0, 2.0], 45.0), windows.clone()],
            [100.0, 101.0],
            [45.0, 46.0],
        );
        let a2 = run(
            "a2.json",
            vec![flagged, metric("x.windows", &[20.0, 21.0], 45.0)],
            [104.0, 103.0],
            [370.0, 372.0],
        );
        let p = pool(a, vec![a2]).unwrap();
        assert_eq!(p.label, "a1.json (+1 more run)");
        let e = &p.results.experiments[0];
        let m = e.metric("x.a").unwrap();
        assert_eq!(m.values, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(m.median, 2.5);
        assert_eq!(m.flags, ["race"]);
        let t = m.trials.as_ref().unwrap();
        assert_eq!((t.taken, t.kept, t.steal), (6, 4, 2));
        assert_eq!(t.pair_ns, [45.0, 45.0, 370.0, 370.0]);
        // A's windows were trials 0 and 1; the other run's values are trials of their own.
        let w = e.metric("x.windows").unwrap();
        assert_eq!(w.trial_of, [0, 0, 1, 2, 3]);
        let k = &e.attempts[0];
        assert!(k.kept);
        assert_eq!(k.reference_wide_ns, [100.0, 104.0]);
        assert_eq!(k.reference_pair_ns, [45.0, 372.0]);
        assert_eq!(e.wall_s, 4.0);
    }

    #[test]
    fn a_run_of_another_machine_or_mode_is_refused() {
        let a = run("a.json", vec![], [1.0, 1.0], [45.0, 45.0]);
        let mut other = run("b.json", vec![], [1.0, 1.0], [45.0, 45.0]);
        other.results.environment.cpu_model = Some("another CPU".into());
        let e = pool(a.clone(), vec![other]).unwrap_err();
        assert!(e.to_string().contains("another machine"), "{e}");
        let mut full = run("c.json", vec![], [1.0, 1.0], [45.0, 45.0]);
        full.results.mode = "full".into();
        let e = pool(a, vec![full]).unwrap_err();
        assert!(e.to_string().contains("one mode"), "{e}");
    }
}
