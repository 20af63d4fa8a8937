//! Comparisons of literal runs: the statistics, the noise floor, the verdicts, the text and the fleet.

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
            host: None,
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
