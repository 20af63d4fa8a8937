//! Golden tests of the reports: a fixed results document rendered as Markdown and as terminal
//! tables at 80 and 160 columns must match the files in tests/golden/ byte for byte. After an
//! intended change of a report, regenerate them with `UPDATE_GOLDEN=1 cargo test --test golden`
//! and read the diff.

use std::path::PathBuf;

use threadlab::measure::units::Unit;
use threadlab::report::export::markdown;
use threadlab::report::table;
use threadlab::results::{
    Attempt, ExperimentResult, Metric, RunResults, SkippedMetric, Status, Table, Warning,
};

fn fixture() -> RunResults {
    let mut create = Metric::from_values(
        "create.thread",
        Unit::Us,
        &[24.0, 25.0, 26.0, 24.5, 25.5, 25.2, 24.8],
        40,
        "same_cpu(0)",
        "pthread_create + pthread_join of a thread that returns at once; nothing subtracted",
    )
    .unwrap();
    create.historical = threadlab::seeds::historical("create.thread");
    let ratio = {
        let mut m = Metric::from_values(
            "create.green.vs_thread",
            Unit::Ratio,
            &[400.0, 410.0, 405.0, 398.0, 402.0, 407.0, 401.0],
            1,
            "same_cpu(0)",
            "create.thread / create.green, one value per round of interleaved sampling",
        )
        .unwrap();
        m.ratio_of = Some(["create.thread".into(), "create.green".into()]);
        m
    };
    let bimodal = Metric::from_values(
        "switch.thread.futex.cross_cpu",
        Unit::Ns,
        &[
            270.0, 17_600.0, 280.0, 265.0, 17_900.0, 275.0, 17_200.0, 290.0, 272.0,
        ],
        100,
        "cross_cpu(0,1)",
        "two threads on different CPUs hand off by futex | half a round trip",
    )
    .unwrap();
    let mut t = Table::new(
        "create.per_count",
        "A table with a | in a cell",
        &["n", "us"],
    );
    t.row(vec!["1".into(), "24.6".into()]);
    t.row(vec!["10 | 100".into(), "19.1".into()]);
    t.note = "cells with pipes stay in their column".into();
    let create_result = ExperimentResult {
        study: threadlab::seeds::PTHREADS_1999.citation.into(),
        study_label: threadlab::seeds::PTHREADS_1999.label.into(),
        wall_s: 2.5,
        metrics: vec![create, ratio, bimodal],
        skipped_metrics: vec![SkippedMetric {
            id: "create.go".into(),
            reason: "no Go toolchain on PATH".into(),
        }],
        tables: vec![t],
        conclusion: Some("A kernel thread costs 25 us here. It is prose.".into()),
        attempts: vec![
            Attempt {
                wall_s: 1.2,
                reference_wide_ns: [417_000.0, 560_000.0],
                reference_syscall_ns: [210.0, 212.0],
                reference_memory_ns: [96.0, 131.0],
                reference_pair_ns: [45.0, 370.0],
                drift_pct: 34.3,
                kept: false,
            },
            Attempt {
                wall_s: 1.3,
                reference_wide_ns: [560_000.0, 561_000.0],
                reference_syscall_ns: [212.0, 211.0],
                reference_memory_ns: [131.0, 99.0],
                reference_pair_ns: [370.0, 372.0],
                drift_pct: 0.5,
                kept: true,
            },
        ],
        ..ExperimentResult::new("create", Status::Ok)
    };
    let skipped = ExperimentResult {
        study: threadlab::seeds::DELPHI_2010S.citation.into(),
        study_label: threadlab::seeds::DELPHI_2010S.label.into(),
        reason: Some("litmus tests need two CPUs".into()),
        ..ExperimentResult::new("ordering", Status::Skipped)
    };
    RunResults {
        threadlab_version: "0.0.0-golden".into(),
        started_at: "2026-11-23T10:00:00Z".into(),
        finished_at: "2026-11-23T10:01:00Z".into(),
        drift_threshold_pct: 5.0,
        warnings: vec![Warning {
            kind: "busy_machine".into(),
            text: "busy machine: 1-minute load average 1.62 at start is above 0.5 per CPU (2 \
                   CPUs); figures may be slower and noisier than this machine at rest"
                .into(),
        }],
        ..RunResults::new("quick", vec![create_result, skipped])
    }
}

fn check(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} is missing; run with UPDATE_GOLDEN=1", path.display()));
    assert_eq!(got, want, "{name} differs from its golden file");
}

#[test]
fn markdown_report_matches_its_golden_file() {
    let md = markdown::render(&fixture());
    // Every table row has as many unescaped cell separators as its header.
    for block in md.split("\n\n") {
        let rows: Vec<&str> = block.lines().filter(|l| l.starts_with('|')).collect();
        if let Some(h) = rows.first() {
            let cols = |l: &str| l.replace("\\|", "").matches('|').count();
            assert!(rows.iter().all(|r| cols(r) == cols(h)), "{block}");
        }
    }
    check("report.md", &md);
}

#[test]
fn terminal_report_matches_its_golden_files() {
    for width in [80u16, 160] {
        let style = table::Style {
            color: false,
            width: Some(width),
        };
        let text = table::render(&fixture(), &style);
        for line in text.lines() {
            assert!(
                line.chars().count() <= width as usize,
                "{width} columns: {line}"
            );
        }
        check(&format!("report-{width}.txt"), &text);
    }
}
