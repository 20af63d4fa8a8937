//! Comparisons of literal runs: the statistics, the noise floor, the verdicts, the text and the fleet.

use super::*;
use crate::results::flag::Flag;
use crate::results::{Attempt, ExperimentResult};

/// A run with one experiment whose metrics take the given samples.
pub(super) fn run(label: &str, metrics: &[(&str, Unit, Vec<f64>)]) -> Run {
    let mut e = ExperimentResult::new("x", crate::results::Status::Ok);
    e.wall_s = 1.0;
    e.metrics = metrics
        .iter()
        .map(|(id, unit, v)| Metric::from_values(id, *unit, v, 1, "p", "n").unwrap())
        .collect();
    e.attempts = vec![Attempt {
        wall_s: 1.0,
        reference_wide_ns: [100.0, 101.0],
        reference_syscall_ns: [50.0, 50.0],
        reference_memory_ns: [95.0, 96.0],
        reference_pair_ns: [45.0, 46.0],
        drift_pct: 1.0,
        kept: true,
    }];
    let environment = serde_json::from_str(
        r##"{"kernel_release":"6.1","kernel_version":"#1","preemption_model":"voluntary",
               "allowed_cpus":[0,1],"cpu_flags_of_note":[],"boot_options_of_note":[],
               "available_clocksources":[],"rt_priority_permitted":false,
               "glibc_version":"2.36","build_profile":"release","target":"x86_64"}"##,
    )
    .unwrap_or_else(|e| panic!("environment: {e}"));
    let results = RunResults {
        threadlab_version: "0".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        finished_at: "2025-01-01T00:01:00Z".into(),
        drift_threshold_pct: 5.0,
        environment,
        ..RunResults::new("quick", vec![e])
    };
    Run {
        label: label.into(),
        results,
    }
}

/// The options of a CI gate: `--fail-if-slower 10`.
pub(super) fn gated() -> Options {
    Options {
        fail_if_slower_pct: Some(10.0),
        ..Options::default()
    }
}

pub(super) fn samples(base: f64, n: usize) -> Vec<f64> {
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
    let o = gated();
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
    let mut draw = || -> Vec<f64> { (0..11).map(|_| 100.0 * (1.0 + 0.03 * rng.unit())).collect() };
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
    a2.results.experiments[0].metrics[0].flags = vec!["client_bound".into(), "saturated".into()];
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

/// A metric made of trials: `values` one per trial, and the trials' CPU-pair distances.
pub(super) fn trial_metric(id: &str, values: &[f64], pair_ns: f64) -> Metric {
    let mut m = Metric::from_values(id, Unit::Ns, values, 1, "cross_cpu(0,1)", "n").unwrap();
    m.batches = values.iter().map(|v| vec![*v; 3]).collect();
    m.trials = Some(crate::measure::stats::TrialLog {
        taken: values.len(),
        kept: values.len(),
        steal: 0,
        disturbed: 0,
        slowed: 0,
        stop: crate::measure::stats::Stop::Limit,
        target_pct: 5.0,
        ci_pct: None,
        pair_ns: vec![pair_ns; values.len()],
        colocated: vec![],
        phase_wide_ns: vec![],
    });
    m
}

#[test]
fn a_figure_decided_by_a_race_is_unstable_when_it_moves_and_a_steady_one_beside_it_is_caught() {
    let o = gated();
    let raced = |base: f64| {
        let mut m = trial_metric("x.lock.contended", &steady(base), 45.0);
        m.flags = vec![crate::results::RACE_FLAG.to_string()];
        m
    };
    // Each run's trials agree; between the runs the lock settled differently (+40%).
    let a = with_metrics(
        run("a", &[]),
        vec![raced(6.0), trial_metric("x.steady", &steady(100.0), 45.0)],
    );
    let b = with_metrics(
        run("b", &[]),
        vec![raced(8.4), trial_metric("x.steady", &steady(100.0), 45.0)],
    );
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert!(!c.rows[1].verdict.flagged());
    assert_eq!(c.exit_status(), 0);
    assert!(render_pair_text(&c).contains("a race between threads decides this figure"));
    // The steady metric x 1.2 in B: caught beside it.
    let b = with_metrics(
        run("b", &[]),
        vec![
            raced(8.4),
            trial_metric(
                "x.steady",
                &steady(100.0).iter().map(|v| v * 1.2).collect::<Vec<_>>(),
                45.0,
            ),
        ],
    );
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[1].verdict, Verdict::Slower);
    assert_eq!(c.exit_status(), 1);
}

#[test]
fn a_hand_off_whose_threads_the_kernel_placed_apart_in_one_run_only_is_unstable() {
    let o = gated();
    // A: the two threads of an unpinned hand-off ended on one CPU in 90% of the batches (a
    // switch, 2 us); B: in 10% (a cross-CPU wake-up, 17 us). Same code, same CPU distance.
    let placed = |base: f64, together: f64| {
        let mut m = trial_metric("x.handoff.unpinned", &steady(base), 45.0);
        m.trials.as_mut().unwrap().colocated = vec![together; 12];
        m
    };
    let a = with_metrics(run("a", &[]), vec![placed(2.0, 0.9)]);
    let b = with_metrics(run("b", &[]), vec![placed(17.0, 0.1)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
    assert!(render_pair_text(&c).contains("on one CPU for 90% of A's operations and 10% of B's"));
    // Placed alike (both 90%) and 8.5x slower: that is a real change, and the gate fails.
    let b = with_metrics(run("b", &[]), vec![placed(17.0, 0.9)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Slower);
    assert_eq!(c.exit_status(), 1);
    // A thread create+join placed anew each time: all new threads on the creator's CPU in A
    // (17 us), about half in B (31 us). Unstable, not slower.
    let a = with_metrics(run("a", &[]), vec![placed(17.0, 1.0)]);
    let b = with_metrics(run("b", &[]), vec![placed(31.0, 0.52)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
}

#[test]
fn a_figure_whose_trials_step_to_another_level_partway_through_a_run_is_unstable() {
    let o = gated();
    // A pair seen here: posix_spawn in the default placement read 540 us in A; in B its first
    // nine trials read about 770 us and the last three about 590 us. No two clusters (the
    // levels are 1.3x apart), the same CPU distance: the step in B's trials is what tells.
    let a = with_metrics(
        run("a", &[]),
        vec![trial_metric("x.spawn.unpinned", &steady(540.0), 45.0)],
    );
    let stepped: Vec<f64> = [
        758., 790., 779., 765., 769., 762., 811., 757., 799., 644., 585., 567.,
    ]
    .to_vec();
    assert_eq!(
        level_shift(&trial_metric("x", &stepped, 45.0)).map(|(_, _, n)| n),
        Some(9)
    );
    let b = with_metrics(
        run("b", &[]),
        vec![trial_metric("x.spawn.unpinned", &stepped, 45.0)],
    );
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
    assert!(render_pair_text(&c).contains("for B's first 9 trials"));
    // Every trial of B 1.2x A's, or 1.4x: a change of code moves them all, and it is caught.
    for factor in [1.2, 1.4] {
        let b = with_metrics(
            run("b", &[]),
            vec![trial_metric(
                "x.spawn.unpinned",
                &steady(540.0 * factor),
                45.0,
            )],
        );
        let c = compare_pair(&a, &b, &o).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Slower, "{c:#?}");
        assert_eq!(c.exit_status(), 1);
    }
    // Trials that wander a few per cent, in order, are no step.
    let wander: Vec<f64> = (0..12).map(|i| 100.0 + i as f64).collect();
    assert_eq!(level_shift(&trial_metric("x", &wander, 45.0)), None);
}

#[test]
fn an_idle_vcpu_wake_up_that_moved_is_unstable_and_unflagged_it_is_slower() {
    // A pair seen here: 20.5 us in A, 25.9 us in B, each run's trials within a few per cent.
    let [flagged, unflagged] =
        moved_with_and_without("x.wake.cross_cpu", 20.5, 25.9, Flag::IdleVcpu);
    assert_eq!(flagged.rows[0].verdict, Verdict::Unstable, "{flagged:#?}");
    assert_eq!(flagged.exit_status(), 0);
    assert!(render_pair_text(&flagged).contains("wake-up of an idle virtual CPU"));
    // The same move on bare metal, where nothing flags it, fails the gate.
    assert_eq!(unflagged.rows[0].verdict, Verdict::Slower);
    assert_eq!(unflagged.exit_status(), 1);
}

/// A steady row `id` moved from `a` to `b`, compared through the gate twice: with `flag` on both
/// sides, then with no flag.
pub(super) fn moved_with_and_without(id: &str, a: f64, b: f64, flag: Flag) -> [Comparison; 2] {
    [Some(flag), None].map(|f| {
        let a = with_metrics(run("a", &[]), vec![steady_row(id, a, f)]);
        let b = with_metrics(run("b", &[]), vec![steady_row(id, b, f)]);
        compare_pair(&a, &b, &gated()).unwrap()
    })
}

pub(super) fn with_metrics(mut r: Run, metrics: Vec<Metric>) -> Run {
    r.results.experiments[0].metrics = metrics;
    r
}

/// Steady trials (about +-1%) around `base`.
pub(super) fn steady(base: f64) -> Vec<f64> {
    samples(base, 12)
}

/// A metric of steady trials around `base` on two CPUs 45 ns apart, carrying `flag` if any.
pub(super) fn steady_row(id: &str, base: f64, flag: Option<Flag>) -> Metric {
    let mut m = trial_metric(id, &steady(base), 45.0);
    if let Some(f) = flag {
        crate::results::flag::add_flag(&mut m, f);
    }
    m
}

#[test]
fn a_two_regime_metric_compared_with_itself_is_quiet_and_a_planted_20_percent_is_caught() {
    let o = gated();
    // A: the contended lock's trials sit in the near regime (the two vCPUs 45 ns apart); B, the
    // same code a minute later, in the far one (370 ns apart), where it reads twice as high.
    let lock_a = trial_metric("x.lock", &steady(21.0), 45.0);
    let lock_b = trial_metric("x.lock", &steady(46.0), 370.0);
    // Within one regime, trials that fall in two clusters (fresh threads settle one way or the
    // other): A mostly low, B mostly high.
    let mut mixed_a: Vec<f64> = vec![25.0; 9];
    mixed_a.extend([50.0; 3]);
    let mut mixed_b: Vec<f64> = vec![25.0; 3];
    mixed_b.extend([50.0; 9]);
    let mix = |v: &[f64]| {
        let v: Vec<f64> = v
            .iter()
            .enumerate()
            .map(|(i, x)| x * (1.0 + i as f64 * 0.001))
            .collect();
        trial_metric("x.mixed", &v, 45.0)
    };
    let a = with_metrics(
        run("a", &[]),
        vec![
            lock_a,
            mix(&mixed_a),
            trial_metric("x.steady", &steady(100.0), 45.0),
        ],
    );
    let b = with_metrics(
        run("b", &[]),
        vec![
            lock_b,
            mix(&mixed_b),
            trial_metric("x.steady", &steady(100.0), 45.0),
        ],
    );
    let c = compare_pair(&a, &b, &o).unwrap();
    let verdict = |id: &str| c.rows.iter().find(|r| r.id == id).unwrap().verdict;
    assert_eq!(verdict("x.lock"), Verdict::Unstable, "{c:#?}");
    // Its medians differ 2x, but its trials overlap: not significant, or unstable, never slower.
    assert!(!verdict("x.mixed").flagged());
    assert!(!verdict("x.steady").flagged());
    assert_eq!(c.exit_status(), 0, "A/A of regimes must not fail the gate");
    let text = render_pair_text(&c);
    assert!(text.contains("unstable x.lock: the two CPUs were 45 ns apart in A and 370 ns in B"));

    // The same pair with the steady metric's trials x 1.2 in B: caught, and the gate fails.
    let b20 = with_metrics(
        run("b", &[]),
        vec![
            trial_metric("x.lock", &steady(46.0), 370.0),
            mix(&mixed_b),
            trial_metric(
                "x.steady",
                &steady(100.0).iter().map(|v| v * 1.2).collect::<Vec<_>>(),
                45.0,
            ),
        ],
    );
    let c = compare_pair(&a, &b20, &o).unwrap();
    let row = c.rows.iter().find(|r| r.id == "x.steady").unwrap();
    assert_eq!(row.verdict, Verdict::Slower);
    assert!((row.slowdown_pct().unwrap() - 20.0).abs() < 1.0);
    assert_eq!(c.exit_status(), 1);
    // What it could have detected: about the 5% floor, widened by the interval.
    let d = row.detectable_pct.unwrap();
    assert!((5.0..8.0).contains(&d), "{d}");
}

#[test]
fn a_row_on_one_cpu_is_tested_when_the_pair_moved() {
    let o = gated();
    // Files written before this rule kept the pair's distance on every row of a group that had
    // one row on two CPUs, same-CPU rows included (`switch.green.yield` beside
    // `switch.thread.futex.cross_cpu`). The host moving the vCPUs apart says nothing about a
    // switch on one CPU: +20% there is caught, while the row on two CPUs is unstable.
    let on = |placement: &str, base: f64, pair: f64| {
        let mut m = trial_metric(&format!("x.{placement}"), &steady(base), pair);
        m.placement = placement.to_string();
        m
    };
    let a = with_metrics(
        run("a", &[]),
        vec![
            on("same_cpu(0)", 2.2, 45.0),
            on("cross_cpu(0,1)", 100.0, 45.0),
        ],
    );
    let b = with_metrics(
        run("b", &[]),
        vec![
            on("same_cpu(0)", 2.2 * 1.2, 370.0),
            on("cross_cpu(0,1)", 120.0, 370.0),
        ],
    );
    let c = compare_pair(&a, &b, &o).unwrap();
    let verdict = |id: &str| c.rows.iter().find(|r| r.id == id).unwrap().verdict;
    assert_eq!(verdict("x.same_cpu(0)"), Verdict::Slower, "{c:#?}");
    assert_eq!(verdict("x.cross_cpu(0,1)"), Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 1);
}

#[test]
fn a_figure_on_two_cpus_without_trial_distances_reads_the_experiments_pair() {
    let o = gated();
    // The doctor's spinning hand-off across the two vCPUs: 0.059 us in one quick run and
    // 0.252 us in the next, with the pair 45 ns apart around the first and 370 ns around the
    // second. Its values are rounds, not sampler trials: no per-trial distance.
    let phase = |id: &str, placement: &str, base: f64| {
        Metric::from_values(id, Unit::Us, &steady(base), 1, placement, "n").unwrap()
    };
    let a = with_metrics(
        run("a", &[]),
        vec![
            phase("x.handoff.on", "cross_cpu(0,1)", 0.059),
            phase("x.switch", "same_cpu(0)", 2.0),
        ],
    );
    let b_at = |pair: [f64; 2], handoff: f64| {
        let mut b = with_metrics(
            run("b", &[]),
            vec![
                phase("x.handoff.on", "cross_cpu(0,1)", handoff),
                phase("x.switch", "same_cpu(0)", 2.4),
            ],
        );
        b.results.experiments[0].attempts[0].reference_pair_ns = pair;
        b
    };
    let c = compare_pair(&a, &b_at([370.0, 372.0], 0.252), &o).unwrap();
    let verdict = |c: &Comparison, id: &str| c.rows.iter().find(|r| r.id == id).unwrap().verdict;
    assert_eq!(verdict(&c, "x.handoff.on"), Verdict::Unstable, "{c:#?}");
    // The same-CPU figure beside it is read as before: +20% is slower.
    assert_eq!(verdict(&c, "x.switch"), Verdict::Slower);
    assert!(render_pair_text(&c)
        .contains("the two CPUs were 45-46 ns apart around A's experiment and 370-372 ns"));
    // The host moved them during B's experiment only: that too is a change of regime.
    let c = compare_pair(&a, &b_at([46.0, 371.0], 0.252), &o).unwrap();
    assert_eq!(verdict(&c, "x.handoff.on"), Verdict::Unstable);
    // The same distance in both: the move is the code's, and the gate fails on it.
    let c = compare_pair(&a, &b_at([46.0, 45.0], 0.059 * 1.2), &o).unwrap();
    assert_eq!(verdict(&c, "x.handoff.on"), Verdict::Slower, "{c:#?}");
    // A file that predates the reading (zeros): nothing is known, and the rule stays out.
    let c = compare_pair(&a, &b_at([0.0, 0.0], 0.252), &o).unwrap();
    assert_eq!(verdict(&c, "x.handoff.on"), Verdict::Slower);
}

#[test]
fn a_baseline_pooled_from_several_runs_holds_a_move_between_runs_and_catches_a_larger_one() {
    let o = gated();
    let at = |label: &str, level: f64| {
        with_metrics(
            run(label, &[]),
            vec![trial_metric("x.read", &steady(level), 45.0)],
        )
    };
    // Three runs of one build: each run's trials agree within 1%, the runs sit at 100, 112 and
    // 96 (a host phase lasting a whole run). A fourth run of the same build at 113.
    let (a1, a2, a3) = (at("a1", 100.0), at("a2", 112.0), at("a3", 96.0));
    let b = at("b", 113.0);
    let verdict = |c: &Comparison| c.rows[0].verdict;
    let alone = compare_pair(&a1, &b, &o).unwrap();
    assert_eq!(verdict(&alone), Verdict::Slower, "{alone:#?}");
    assert_eq!(alone.exit_status(), 1);
    let pooled = pool(a1.clone(), vec![a2.clone(), a3.clone()]).unwrap();
    assert_eq!(pooled.results.experiments[0].metrics[0].samples, 36);
    let c = compare_pair(&pooled, &b, &o).unwrap();
    assert!(!verdict(&c).flagged(), "{c:#?}");
    assert_eq!(c.exit_status(), 0);
    assert!(
        c.rows[0].floor_from.contains("A's spread"),
        "{}",
        c.rows[0].floor_from
    );
    // A change beyond what the runs give: 1.3x the pooled median is still caught.
    let c = compare_pair(&pooled, &at("b", 130.0), &o).unwrap();
    assert_eq!(verdict(&c), Verdict::Slower, "{c:#?}");
    assert_eq!(c.exit_status(), 1);
}

#[test]
fn a_metric_whose_trials_disagree_gets_a_floor_as_wide_as_they_do() {
    // Trials spread +-15% (a contended lock in one regime): a 12% move of the median between
    // two runs is within that metric's floor, while a steady metric's floor stays at 5%.
    let wide = |base: f64| -> Vec<f64> {
        (0..12)
            .map(|i| base * (0.85 + 0.3 * ((i * 5) % 12) as f64 / 11.0))
            .collect()
    };
    let a = with_metrics(
        run("a", &[]),
        vec![trial_metric("x.lock", &wide(30.0), 45.0)],
    );
    let b = with_metrics(
        run("b", &[]),
        vec![trial_metric("x.lock", &wide(33.6), 45.0)],
    );
    let c = compare_pair(&a, &b, &Options::default()).unwrap();
    let row = &c.rows[0];
    assert!(row.floor_pct > 15.0, "{}", row.floor_pct);
    assert!(
        row.floor_from.contains("between trials"),
        "{}",
        row.floor_from
    );
    assert!(!row.verdict.flagged());
}

/// Two steady figures around `base`: a memory-bound read (`x.read.64mib`) and a switch that
/// stays in the core's caches (`x.switch`).
pub(super) fn memory_and_core(base: f64) -> Vec<Metric> {
    let mut big =
        Metric::from_values("x.read.64mib", Unit::Us, &steady(base), 1, "p", "n").unwrap();
    big.memory_bound = true;
    let small = Metric::from_values("x.switch", Unit::Ns, &steady(base), 1, "p", "n").unwrap();
    vec![big, small]
}

#[test]
fn a_memory_bound_figure_moves_with_the_memory_reference_and_a_core_bound_one_does_not() {
    // Between the runs the walk through shared cache slowed 2x (co-tenants loading the L3)
    // while the register loops stayed put. A memory-bound figure 12% slower is unstable, not
    // slower; the same 12% on a figure that stays in the core's caches is caught. With the
    // reference at rest, the memory-bound figure is caught too.
    let a = with_metrics(run("a", &[]), memory_and_core(100.0));
    let mut b = with_metrics(run("b", &[]), memory_and_core(112.0));
    let o = gated();
    let at_rest = compare_pair(&a, &b, &o).unwrap();
    assert!(at_rest
        .rows
        .iter()
        .all(|r| r.verdict == Verdict::Slower && r.regime.is_none()));
    b.results.experiments[0].attempts[0].reference_memory_ns = [190.0, 200.0];
    let c = compare_pair(&a, &b, &o).unwrap();
    let big = c.rows.iter().find(|r| r.id == "x.read.64mib").unwrap();
    let small = c.rows.iter().find(|r| r.id == "x.switch").unwrap();
    assert_eq!(big.verdict, Verdict::Unstable, "{big:?}");
    let why = big.regime.as_deref().unwrap();
    assert!(why.contains("95.0-96.0 ns around A's"), "{why}");
    assert!(why.contains("190.0-200.0 ns around B's"), "{why}");
    assert!(small.regime.is_none());
    assert_eq!(small.verdict, Verdict::Slower);
    assert_eq!(c.exit_status(), 1);
    // The flag survives the results file.
    let json = serde_json::to_string(&b.results.experiments[0].metrics[0]).unwrap();
    assert!(json.contains("\"memory_bound\":true"), "{json}");
    let small_json = serde_json::to_string(&b.results.experiments[0].metrics[1]).unwrap();
    assert!(!small_json.contains("memory_bound"), "{small_json}");
}

#[test]
fn the_memory_walks_move_during_a_run_joins_a_memory_bound_floor_only() {
    // During B the walk through 64 MiB moved 12% (under the 15% that makes a change unstable):
    // a memory-bound figure 10% slower is then within noise, its floor the walk's move; the
    // same 10% on a figure that stays in the core's caches is caught.
    let a = with_metrics(run("a", &[]), memory_and_core(100.0));
    let mut b = with_metrics(run("b", &[]), memory_and_core(110.0));
    b.results.experiments[0].attempts[0].reference_memory_ns = [96.0, 107.52];
    let o = Options {
        fail_if_slower_pct: Some(5.0),
        ..Options::default()
    };
    let c = compare_pair(&a, &b, &o).unwrap();
    let big = c.rows.iter().find(|r| r.id == "x.read.64mib").unwrap();
    let small = c.rows.iter().find(|r| r.id == "x.switch").unwrap();
    assert!(big.regime.is_none(), "{big:?}");
    assert_eq!(big.verdict, Verdict::WithinNoise, "{big:?}");
    assert!((big.floor_pct - 12.0).abs() < 0.01, "{}", big.floor_pct);
    assert_eq!(big.floor_from, "B's memory walk during the experiment");
    assert_eq!(small.verdict, Verdict::Slower, "{small:?}");
    assert!(small.floor_pct < 6.0, "{}", small.floor_pct);
    assert_eq!(c.exit_status(), 1);
}

#[test]
fn a_row_no_change_could_have_flagged_is_not_called_the_same() {
    // 500 metrics of 8 trials a side: a complete separation gives p = 2/12870, above
    // 0.05/500, so no change of any of them could be flagged. A 14% move is then "not tested",
    // with the reason, rather than "same".
    let ids: Vec<String> = (0..500).map(|i| format!("m.{i}")).collect();
    let metrics = |moved: f64| -> Vec<(&str, Unit, Vec<f64>)> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| {
                let scale = if i == 0 { moved } else { 1.0 };
                (
                    id.as_str(),
                    Unit::Ns,
                    samples(100.0, 8).iter().map(|x| x * scale).collect(),
                )
            })
            .collect()
    };
    let a = run("a", &metrics(1.0));
    let b = run("b", &metrics(0.86));
    let c = compare_pair(&a, &b, &Options::default()).unwrap();
    let row = &c.rows[0];
    assert_eq!(row.verdict, Verdict::Untested, "{row:?}");
    assert!(row.detectable_pct.is_none());
    assert!(
        row.why.contains("8 vs 8 trials cannot reach p < 0.05"),
        "{}",
        row.why
    );
    // With only ten metrics the same pair is tested, and the 14% move is caught.
    let few = |moved: f64| metrics(moved).into_iter().take(10).collect::<Vec<_>>();
    let c = compare_pair(
        &run("a", &few(1.0)),
        &run("b", &few(0.86)),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Faster);
}

#[test]
fn windows_of_one_trial_are_one_value_and_trials_of_windows_still_catch_a_change() {
    let o = gated();
    // A server step's 20 windows, all of one trial: B's step landed 30% higher, as two runs
    // of one build did for a closed-loop peak (97,050 -> 77,112/s) while each step's windows
    // agreed within a few per cent.
    let step = |base: f64, trials: usize| {
        let per = 20 / trials;
        let trial_of = (0..per * trials).map(|i| (i / per) as u32).collect();
        Metric::from_values(
            "x.peak",
            Unit::Us,
            &samples(base, per * trials),
            1,
            "p",
            "n",
        )
        .unwrap()
        .with_trial_of(trial_of)
    };
    let a = with_metrics(run("a", &[]), vec![step(100.0, 1)]);
    let b = with_metrics(run("b", &[]), vec![step(130.0, 1)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Untested, "{c:#?}");
    assert!(c.rows[0].why.contains("1 vs 1 trials"), "{}", c.rows[0].why);
    assert_eq!(c.exit_status(), 0);
    // The same values read as 20 trials a side: slower.
    let loose = |m: Metric| Metric {
        trial_of: Vec::new(),
        ..m
    };
    let a = with_metrics(run("a", &[]), vec![loose(step(100.0, 1))]);
    let b = with_metrics(run("b", &[]), vec![loose(step(130.0, 1))]);
    assert_eq!(
        compare_pair(&a, &b, &o).unwrap().rows[0].verdict,
        Verdict::Slower
    );
    // A file from before values named their trial, beside one that names them: the two
    // sides count different things, so the row is not tested.
    let a = with_metrics(run("a", &[]), vec![loose(step(100.0, 1))]);
    let b = with_metrics(run("b", &[]), vec![step(130.0, 1)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Untested);
    assert!(
        c.rows[0].why.starts_with("A does not say"),
        "{}",
        c.rows[0].why
    );
    // Ten trials of two windows a side: a planted +20% is still caught.
    let a = with_metrics(run("a", &[]), vec![step(100.0, 10)]);
    let b = with_metrics(run("b", &[]), vec![step(120.0, 10)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].a.samples, 10);
    assert_eq!(c.rows[0].verdict, Verdict::Slower, "{c:#?}");
}
