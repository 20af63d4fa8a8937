use super::*;
use crate::measure::units::Unit;

#[test]
fn rfc3339_known_instants() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_795_425_667), "2026-11-23T09:21:07Z");
}

#[test]
fn drift_is_the_larger_relative_move() {
    let a = Reading {
        wide_ns: 100.0,
        syscall_ns: 200.0,
        memory_ns: 90.0,
        pair_ns: 45.0,
    };
    let b = Reading {
        wide_ns: 104.0,
        syscall_ns: 180.0,
        memory_ns: 120.0,
        pair_ns: 370.0,
    };
    // Neither the memory walk nor the pair's distance (45 -> 370 ns) counts.
    assert!((drift_pct(a, b) - 10.0).abs() < 1e-9);
    assert_eq!(drift_pct(a, a), 0.0);
}

#[test]
fn the_pair_range_spans_every_reading_of_the_run() {
    let env = Environment {
        reference_pair_ns_start: Some(45.0),
        reference_pair_ns_end: Some(46.0),
        ..Environment::default()
    };
    let mut e = ExperimentResult::new("x", Status::Ok);
    e.attempts = vec![Attempt {
        reference_pair_ns: [44.0, 370.0],
        ..Attempt::unread()
    }];
    // An interrupted attempt's zeros are no reading.
    let mut cut = ExperimentResult::new("y", Status::Ok);
    cut.attempts = vec![Attempt::unread()];
    assert_eq!(pair_range(&env, &[e, cut]), Some([44.0, 370.0]));
    assert_eq!(pair_range(&Environment::default(), &[]), None);
}

#[test]
fn a_budget_scales_to_what_is_left_and_refuses_what_cannot_fit() {
    let b = Budget {
        total: Duration::from_secs(100),
        started: Instant::now(),
    };
    // 100 s left for 200 s of estimates: half speed.
    let s = b.scale(20.0, 200.0).unwrap();
    assert!((s - 0.5).abs() < 0.01, "{s}");
    // Far more time than estimated: capped.
    assert_eq!(b.scale(1.0, 1.0).unwrap(), SCALE_RANGE.1);
    // Far less: the floor.
    assert_eq!(b.scale(10.0, 10_000.0).unwrap(), SCALE_RANGE.0);
    // An experiment that needs more than what is left even at the floor is refused.
    let why = b.scale(1000.0, 1000.0).unwrap_err();
    assert!(why.contains("--budget"), "{why}");
}

#[test]
fn measuring_again_must_leave_the_run_within_its_target() {
    // A --full run whose create drifted at 78 s (39 s a go), with about 470 s to come:
    // measuring it again would end the run near 587 s, past 570 (600 less 5%).
    assert!(!fits_within(78.0, 39.0, 470.0, 600.0));
    // The same at 30 s to come fits.
    assert!(fits_within(78.0, 39.0, 30.0, 600.0));
    // The quick suite: 5 s again at 20 s, with 75 s to come (100 s <= 104.5 s).
    assert!(fits_within(20.0, 5.0, 75.0, 110.0));
    assert!(!fits_within(20.0, 5.0, 85.0, 110.0));
    // The clock counts: a deadline whose run started 500 s ago has no room for 60 s more
    // (a clock that has not run 500 s since boot cannot say so).
    if let Some(started) = Instant::now().checked_sub(Duration::from_secs(500)) {
        let d = Deadline {
            started,
            target: Duration::from_secs(600),
            after_s: 20.0,
            what: "--full's target",
        };
        assert!(!d.fits(Duration::from_secs(60)));
        assert!(d.fits(Duration::from_secs(30)));
    }
    // Every mode that promises a time has one; the tiny test runs do not.
    assert_eq!(Mode::Full.target_wall(), Some(Duration::from_secs(600)));
    assert_eq!(Mode::Quick.target_wall(), Some(Duration::from_secs(110)));
    assert_eq!(Mode::Tiny.target_wall(), None);
}

#[test]
fn the_pace_counts_one_go_of_an_experiment_not_its_attempts_again() {
    let attempt = |wall_s: f64| Attempt {
        wall_s,
        ..Attempt::unread()
    };
    // Measured three times for drift, 10, 12 and 11 s: one go is 11 s, not 33.
    let r = ExperimentResult {
        wall_s: 33.0,
        attempts: vec![attempt(10.0), attempt(12.0), attempt(11.0)],
        ..ExperimentResult::new("x", Status::Ok)
    };
    assert!((one_attempt_s(&r) - 11.0).abs() < 1e-9);
    // A result without attempts (not run, or from an older file): its wall time.
    let r = ExperimentResult {
        wall_s: 7.0,
        ..ExperimentResult::new("x", Status::Ok)
    };
    assert!((one_attempt_s(&r) - 7.0).abs() < 1e-9);
}

fn result_with(median: f64) -> ExperimentResult {
    ExperimentResult {
        wall_s: 1.0,
        metrics: vec![Metric::from_values(
            "x.a",
            Unit::Ns,
            &[median - 1.0, median, median + 1.0],
            10,
            "same_cpu(0)",
            "n",
        )
        .unwrap()],
        conclusion: Some("c".into()),
        ..ExperimentResult::new("x", Status::Ok)
    }
}

#[test]
fn repeats_merge_into_the_median_of_medians() {
    let merged = merge_repeats(vec![
        result_with(10.0),
        result_with(30.0),
        result_with(20.0),
    ]);
    let m = merged.metric("x.a").unwrap();
    assert_eq!(m.values, vec![10.0, 30.0, 20.0]);
    assert_eq!(m.median, 20.0);
    assert_eq!(m.samples, 3);
    assert!(m.note.contains("--repeat 3"));
    assert!((merged.wall_s - 3.0).abs() < 1e-9);
    assert!(merged.conclusion.unwrap().contains("run 3 of 3"));
}

fn histogram(name: &str) -> crate::results::SerializedHistogram {
    crate::results::SerializedHistogram {
        name: name.into(),
        unit: Unit::Ns,
        count: 3,
        encoding: crate::results::HDR_ENCODING.into(),
        data: format!("data-of-{name}"),
    }
}

#[test]
fn repeats_keep_every_runs_flags_and_the_last_runs_histograms() {
    let mut runs = vec![result_with(10.0), result_with(30.0), result_with(20.0)];
    let flag = |r: &mut ExperimentResult, flags: &[&str]| {
        let m = &mut r.metrics[0];
        m.flags = flags.iter().map(|f| f.to_string()).collect();
        m.note = format!("[{}] {}", flags.join(", "), m.note);
    };
    flag(&mut runs[0], &["client_bound"]);
    flag(&mut runs[1], &["saturated", "client_bound"]);
    runs[0].metrics[0].histograms = vec![histogram("first")];
    runs[1].metrics[0].histograms = vec![histogram("second")];
    runs[2].metrics[0].histograms = vec![histogram("latency"), histogram("service")];
    // The last run did not finish: the histograms are those of the last that did.
    let mut unfinished = result_with(40.0);
    unfinished.status = Status::Interrupted;
    unfinished.metrics[0].histograms = vec![histogram("unfinished")];
    runs.push(unfinished);
    let merged = merge_repeats(runs);
    let m = merged.metric("x.a").unwrap();
    assert_eq!(m.values, vec![10.0, 30.0, 20.0]);
    assert_eq!(m.flags, vec!["client_bound", "saturated"]);
    assert!(
        m.note
            .starts_with("[client_bound, saturated] n; --repeat 4"),
        "{}",
        m.note
    );
    let names: Vec<&str> = m.histograms.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["latency", "service"]);
    assert!(m.note.contains("histograms are run 3's"), "{}", m.note);
    // The fields kept from the runs survive too.
    assert_eq!(m.direction, merged.metrics[0].direction);

    // No run flagged: no flags and no prefix.
    let merged = merge_repeats(vec![result_with(1.0), result_with(2.0)]);
    let m = merged.metric("x.a").unwrap();
    assert!(m.flags.is_empty() && m.histograms.is_empty());
    assert!(m.note.starts_with("n; --repeat 2"), "{}", m.note);
}
