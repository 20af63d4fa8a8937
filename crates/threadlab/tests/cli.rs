//! The binary as a user meets it: errors, listing, the results file, interruption.
//! These tests check structure and behaviour only, never durations.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use threadlab::results::{Metric, RunResults, Status, SCHEMA_VERSION};

mod common;
use common::*;

#[test]
fn unknown_experiment_is_one_line_and_status_2() {
    let o = run(&["run", "no-such-experiment", "--allow-debug", "--no-save"]);
    assert_one_line_usage_error(&o, "threadlab list");
    assert!(stderr(&o).contains("no-such-experiment"));
}

#[test]
fn malformed_options_are_one_line_and_status_2() {
    assert_one_line_usage_error(&run(&["run", "--bogus"]), "--help");
    assert_one_line_usage_error(&run(&["run", "--json"]), "--help");
    assert_one_line_usage_error(&run(&["frobnicate"]), "--help");
    assert_one_line_usage_error(&run(&["env", "--json=yes"]), "--help");
}

#[test]
fn unwritable_output_is_refused_before_measuring() {
    let o = run(&[
        "run",
        "create",
        "--allow-debug",
        "--json",
        "/nonexistent-folder/out.json",
    ]);
    assert_one_line_usage_error(&o, "/nonexistent-folder/out.json");
    let dir = scratch("unwritable");
    let o = run(&[
        "run",
        "create",
        "--allow-debug",
        "--csv",
        dir.to_str().unwrap(),
    ]);
    assert_one_line_usage_error(&o, "is a folder");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn debug_build_is_refused_without_allow_debug() {
    if !cfg!(debug_assertions) {
        return; // the refusal only exists in debug builds
    }
    let o = run(&["run", "create", "--no-save"]);
    assert_one_line_usage_error(&o, "--release");
}

#[test]
fn list_names_every_experiment() {
    let o = run(&["list"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for e in threadlab::experiments::registry() {
        assert!(out.contains(e.info().name), "list lacks {}", e.info().name);
    }
}

#[test]
fn env_json_is_an_environment() {
    let o = run(&["env", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e: threadlab::measure::env::Environment =
        serde_json::from_slice(&o.stdout).expect("env --json parses");
    assert!(e.logical_cpus.unwrap_or(0) >= 1);
}

/// Metric ids documented in docs/results-schema.md, as patterns where `<x>` is any segment,
/// with the unit the page gives them.
fn documented() -> Vec<(String, String)> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
    let text = std::fs::read_to_string(&doc).expect("docs/results-schema.md exists");
    let start = text.find("## Metric ids").expect("a metric id section");
    text[start..]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let id = l.split('`').nth(1)?.to_string();
            let unit = l.split('|').nth(2)?.trim().to_string();
            Some((id, unit))
        })
        .collect()
}

/// Every metric is documented, with the unit it carries: an id never changes unit silently.
fn assert_documented(m: &Metric, docs: &[(String, String)]) {
    let doc = docs
        .iter()
        .find(|(p, _)| matches_pattern(&m.id, p))
        .unwrap_or_else(|| panic!("{} is not documented in docs/results-schema.md", m.id));
    assert_eq!(
        doc.1,
        m.unit.as_str(),
        "{}: unit {} but docs/results-schema.md says {}",
        m.id,
        m.unit,
        doc.1
    );
}

/// Every statistic comes from the stored samples, in the metric's unit (schema 2).
fn assert_statistics_from_values(m: &Metric) {
    assert_eq!(m.values.len(), m.samples, "{}: values vs samples", m.id);
    let n = m.values.len() as f64;
    let mean = m.values.iter().sum::<f64>() / n;
    let cv = if m.values.len() < 2 || mean == 0.0 {
        0.0
    } else {
        let var = m
            .values
            .iter()
            .map(|x| (x - mean) * (x - mean))
            .sum::<f64>()
            / (n - 1.0);
        var.sqrt() / mean.abs()
    };
    assert!((m.cv - cv).abs() < 1e-9, "{}: cv {} vs {}", m.id, m.cv, cv);
    let mut v = m.values.clone();
    v.sort_by(f64::total_cmp);
    assert_eq!(m.min, v[0], "{}", m.id);
    assert_eq!(m.max, v[v.len() - 1], "{}", m.id);
    // A metric made of trials keeps each trial's batches; its value is their median.
    if !m.batches.is_empty() {
        assert_eq!(
            m.batches.len(),
            m.values.len(),
            "{}: a value per trial",
            m.id
        );
        for (b, v) in m.batches.iter().zip(&m.values) {
            let mut b = b.clone();
            b.sort_by(f64::total_cmp);
            let k = b.len();
            let med = if k % 2 == 1 {
                b[k / 2]
            } else {
                (b[k / 2 - 1] + b[k / 2]) / 2.0
            };
            assert!(
                (med - v).abs() <= 1e-9 * v.abs().max(1.0),
                "{}: trial",
                m.id
            );
        }
        let t = m.trials.as_ref().expect("trials come with their log");
        assert_eq!(t.kept, m.values.len(), "{}: kept trials", m.id);
        assert!(t.taken >= t.kept, "{}", m.id);
    }
}

fn matches_pattern(id: &str, pattern: &str) -> bool {
    let (ip, pp): (Vec<_>, Vec<_>) = (id.split('.').collect(), pattern.split('.').collect());
    ip.len() == pp.len()
        && ip.iter().zip(&pp).all(|(i, p)| {
            if p.contains('<') {
                // "t<T>" matches "t4"; "<lock>" matches any segment.
                let prefix = &p[..p.find('<').unwrap()];
                i.starts_with(prefix)
            } else {
                i == p
            }
        })
}

#[test]
fn started_by_cargo_the_lab_takes_cargos_library_path_out_and_records_it() {
    // `cargo run` puts the target directory (and the toolchain's) in front of LD_LIBRARY_PATH;
    // the lab's children must not search them, and the user's own entries must stay.
    let dir = scratch("cargo-env");
    let json = dir.join("r.json");
    let exe = Path::new(env!("CARGO_BIN_EXE_threadlab"));
    let deps = exe.parent().unwrap().join("deps").display().to_string();
    let value = format!("{deps}:/opt/threadlab-test-lib");
    let run_shm = |cargo: bool| {
        let mut c = threadlab();
        c.env("LD_LIBRARY_PATH", &value);
        if cargo {
            c.env("CARGO", "cargo");
        } else {
            c.env_remove("CARGO");
        }
        let o = c
            .args(["run", "shm", "--tiny", "--allow-debug", "--json"])
            .arg(&json)
            .output()
            .expect("threadlab runs");
        assert!(o.status.success(), "status {:?}: {}", o.status, stderr(&o));
        let r: RunResults = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        r.environment.cargo_library_path_removed
    };
    assert_eq!(run_shm(true), vec![deps.clone()]);
    // Not started by cargo: the variable is the user's, all of it.
    assert!(run_shm(false).is_empty());
}

#[test]
fn tiny_end_to_end_run_writes_a_sane_documented_results_file() {
    let dir = scratch("e2e");
    let json = dir.join("r.json");
    let csv = dir.join("r.csv");
    let md = dir.join("r.md");
    let o = run_tiny(
        "run",
        &["create", "sync"],
        &[
            "--csv",
            csv.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
        &json,
    );
    assert!(o.status.success(), "status {:?}: {}", o.status, stderr(&o));
    let text = std::fs::read_to_string(&json).unwrap();
    let r: RunResults = serde_json::from_str(&text).expect("results parse as the schema");

    // Round trip: what we read re-encodes to the same document.
    let again: RunResults = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(r, again);
    // The documented top-level fields are there by name.
    let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
    for key in [
        "schema_version",
        "threadlab_version",
        "started_at",
        "environment",
        "experiments",
    ] {
        assert!(raw.get(key).is_some(), "missing top-level {key}");
    }
    assert_eq!(r.schema_version, SCHEMA_VERSION);
    assert_eq!(r.mode, "tiny");
    assert!(r.interrupted_by.is_none());
    assert_eq!(
        r.experiments
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        ["create", "sync"]
    );

    let docs = documented();
    let mut ids = std::collections::HashSet::new();
    for e in &r.experiments {
        assert_eq!(e.status, Status::Ok, "{}: {:?}", e.name, e.reason);
        assert!(!e.metrics.is_empty());
        assert!(e.conclusion.is_some());
        for m in &e.metrics {
            assert!(ids.insert(m.id.clone()), "duplicate id {}", m.id);
            assert!(m.median > 0.0, "{}: median {}", m.id, m.median);
            assert!(m.min <= m.median && m.median <= m.max, "{}: order", m.id);
            assert!(m.q1 <= m.median && m.median <= m.q3, "{}: quartiles", m.id);
            assert!(m.samples >= 6, "{}: {} trials", m.id, m.samples);
            assert!(!m.placement.is_empty() && !m.note.is_empty());
            assert_documented(m, &docs);
            assert_statistics_from_values(m);
        }
        for s in &e.series {
            assert_eq!(s.x.len(), s.y.len());
            assert!(s.y.iter().all(|y| *y > 0.0));
        }
    }
    for required in [
        "create.thread",
        "create.process.fork",
        "destroy.thread",
        "destroy.process",
        "sync.mutex",
        "sync.mutex.single_thread",
        "sync.mutex.std",
        "sync.semaphore",
        "sync.wake.same_cpu",
    ] {
        assert!(ids.contains(required), "missing {required}");
    }
    let ct = r.experiments[0]
        .metrics
        .iter()
        .find(|m| m.id == "create.thread")
        .unwrap();
    assert_eq!(ct.historical.as_ref().unwrap().value, 67.8961);

    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), ids.len() + 1);
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .contains("create.thread"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Processes whose command line mentions `marker` (the unique results path of one run).
fn processes_mentioning(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                found.push(name);
            }
        }
    }
    found
}

fn interrupt_run(signal: i32, expected_status: i32, label: &str) {
    let dir = scratch(label);
    let json = dir.join("interrupted.json");
    let marker = json.to_str().unwrap().to_string();
    let mut child = threadlab()
        .args([
            "run",
            "switch",
            "shm",
            "create",
            "--allow-debug",
            "--json",
            &marker,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt while switch is forking partners (it runs for several seconds).
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "threadlab did not stop after the signal"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(expected_status));
    // No process of that run is left (forked partners carry the same command line).
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(processes_mentioning(&marker), Vec::<String>::new());
    // The file is complete and says what happened; unfinished experiments are marked.
    let r: RunResults =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("complete file");
    assert!(r.interrupted_by.is_some());
    assert_eq!(r.experiments.len(), 3);
    assert!(r.experiments.iter().any(|e| e.status == Status::Interrupted
        && e.reason.as_deref().unwrap_or("").contains("interrupted")));
    // The report of what finished is beside it, and no temporary file.
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["interrupted.html", "interrupted.json"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigint_stops_cleanly_with_status_130() {
    interrupt_run(libc::SIGINT, 130, "sigint");
}

#[test]
fn sigterm_stops_cleanly_with_status_143() {
    interrupt_run(libc::SIGTERM, 143, "sigterm");
}

#[test]
fn every_experiment_runs_tiny_and_every_metric_is_documented() {
    let dir = scratch("all");
    let json = dir.join("all.json");
    let o = run_tiny("run", &[], &[], &json);
    assert!(o.status.success(), "status {:?}: {}", o.status, stderr(&o));
    let r: RunResults =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("parses");
    assert_eq!(
        r.experiments.len(),
        threadlab::experiments::registry().len()
    );
    let docs = documented();
    let mut seen = std::collections::HashSet::new();
    for e in &r.experiments {
        // Skipped is acceptable (a machine may lack what it needs); failed is not.
        assert_ne!(e.status, Status::Failed, "{}: {:?}", e.name, e.reason);
        if e.status == Status::Ok {
            assert!(e.conclusion.is_some(), "{} has no conclusion", e.name);
        }
        for m in &e.metrics {
            assert!(
                m.median.is_finite() && m.min <= m.median && m.median <= m.max,
                "{}",
                m.id
            );
            assert_documented(m, &docs);
            assert_statistics_from_values(m);
            seen.insert(m.id.clone());
        }
        for s in &e.skipped_metrics {
            assert!(!s.reason.is_empty(), "{} skipped without a reason", s.id);
            seen.insert(s.id.clone());
        }
        for s in &e.series {
            assert_eq!(s.x.len(), s.y.len(), "{}", s.id);
        }
        for t in &e.tables {
            assert!(t.rows.iter().all(|r| r.len() == t.header.len()), "{}", t.id);
        }
    }
    // Every historical figure is keyed by an id the run emits (or skips with its reason): a
    // typo in seeds.rs would otherwise drop the figure silently.
    for f in threadlab::seeds::FIGURES {
        assert!(
            seen.contains(f.id),
            "seeds.rs has a figure for {}, which no experiment emits",
            f.id
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
