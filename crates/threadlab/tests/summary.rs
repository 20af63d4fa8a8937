//! What `threadlab run` prints by default (the summary) and what `threadlab show` prints of a
//! saved run, as a user meets them. Structure only, never durations.

use std::path::{Path, PathBuf};

use threadlab::results::{parse_results, RunResults, Status};

mod common;
use common::*;

/// The summary's bar: a whole run fits in this many lines at 100 columns.
const MAX_LINES: usize = 160;

fn tiny_run(dir: &Path, extra: &[&str]) -> (PathBuf, String) {
    let json = dir.join("tiny.json");
    let mut args = vec![
        "run",
        "--tiny",
        "--allow-debug",
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = threadlab()
        .args(&args)
        .env("COLUMNS", "100")
        .output()
        .expect("threadlab runs");
    assert!(o.status.success(), "tiny run: {}", stderr(&o));
    (json, stdout(&o))
}

fn results(path: &Path) -> RunResults {
    parse_results(&std::fs::read_to_string(path).unwrap(), "test").unwrap()
}

fn show(args: &[&str]) -> std::process::Output {
    threadlab()
        .arg("show")
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .expect("threadlab runs")
}

/// What the summary must hold: every experiment's verdict, what to choose, the files last.
fn assert_summary(out: &str, r: &RunResults, json: &Path) {
    let lines: Vec<&str> = out.lines().collect();
    // The warnings depend on the machine's load while the test runs (and a debug build adds
    // one); the rest is what the bar bounds.
    let warnings = match out.find("\nWarnings\n") {
        Some(at) => out[at..]
            .lines()
            .take_while(|l| !l.starts_with("results: "))
            .count(),
        None => 0,
    };
    assert!(
        lines.len() - warnings <= MAX_LINES,
        "{} lines:\n{out}",
        lines.len()
    );
    for e in &r.experiments {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{} (", e.name))),
            "{} missing:\n{out}",
            e.name
        );
        if e.status == Status::Ok {
            let verdict = e
                .verdict
                .as_deref()
                .expect("an ok experiment has a verdict");
            let first_word = verdict.split_whitespace().next().unwrap();
            assert!(
                out.contains(&format!("→ {first_word}")),
                "{}'s verdict missing:\n{out}",
                e.name
            );
            assert!(!e.headline.is_empty(), "{} has no headline", e.name);
            for id in &e.headline {
                assert!(out.contains(id.as_str()), "headline {id} missing");
            }
        }
    }
    assert!(out.contains("What to choose on this machine"), "{out}");
    for a in &r.advice {
        assert!(
            out.contains(&format!("  {}", a.topic)),
            "{} missing",
            a.topic
        );
    }
    let n = lines.len();
    assert_eq!(
        lines[n - 2],
        format!("results: {}", json.display()),
        "{out}"
    );
    assert_eq!(
        lines[n - 1],
        format!("report: {}", json.with_extension("html").display()),
        "{out}"
    );
    for l in &lines {
        assert!(l.chars().count() <= 100, "wider than COLUMNS=100: {l}");
    }
}

#[test]
fn run_prints_a_summary_that_ends_with_the_files_and_show_prints_it_again() {
    let dir = scratch("summary");
    let (json, out) = tiny_run(&dir, &[]);
    let r = results(&json);
    assert_eq!(r.advice.len(), 6, "{:?}", r.advice);
    for a in &r.advice {
        for id in &a.rests_on {
            assert!(
                r.experiments.iter().any(|e| e.metric(id).is_some()),
                "{} rests on {id}, which the file lacks",
                a.topic
            );
        }
    }
    assert_summary(&out, &r, &json);

    // `show` prints the same summary from the file, the results file last.
    let o = show(&[json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    let until_files = |s: &str| s[..s.rfind("\nresults: ").unwrap()].to_string();
    assert_eq!(until_files(&shown), until_files(&out));
    assert!(shown
        .trim_end()
        .ends_with(&format!("results: {}", json.display())));

    // A file written before the advice, headlines and verdicts were stored still reads, and
    // gets them from its metrics.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("advice");
    for e in v["experiments"].as_array_mut().unwrap() {
        let e = e.as_object_mut().unwrap();
        e.remove("headline");
        e.remove("verdict");
    }
    let older = dir.join("older.json");
    std::fs::write(&older, serde_json::to_string(&v).unwrap()).unwrap();
    let o = show(&[older.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rebuilt = stdout(&o);
    assert!(rebuilt.contains("What to choose on this machine") && rebuilt.contains("→ "));
    assert_eq!(
        rebuilt.matches("\n  → ").count(),
        out.matches("\n  → ").count(),
        "{rebuilt}"
    );

    // One experiment: its lines and the advice resting on it, no other experiment's.
    let o = show(&[json.to_str().unwrap(), "throttle"]);
    let one = stdout(&o);
    assert!(
        one.contains("throttle (") && !one.contains("\ncreate ("),
        "{one}"
    );
    assert!(one.contains("Pool size"), "{one}");
}

#[test]
fn show_detail_reproduces_the_runs_tables() {
    let dir = scratch("detail");
    let (json, out) = tiny_run(&dir, &["create", "server", "--detail"]);
    let tables = |s: &str| s[..s.find("\nWhat to choose").unwrap_or(s.len())].to_string();
    assert!(
        out.contains("server.designs") || out.contains("design"),
        "{out}"
    );
    let o = show(&[json.to_str().unwrap(), "--detail"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tables(&stdout(&o)), tables(&out));
    // One experiment's tables: the server's as the run printed them.
    let o = show(&[json.to_str().unwrap(), "server", "--detail"]);
    let server = stdout(&o);
    let from = |s: &str| s[s.find("\nserver (").unwrap()..].to_string();
    assert_eq!(tables(&from(&server)), tables(&from(&out)));
    assert!(!server.contains("\ncreate ("), "{server}");
}

#[test]
fn show_refuses_bad_input_in_one_line() {
    let dir = scratch("bad");
    let o = show(&[dir.join("absent.json").to_str().unwrap()]);
    assert_one_line_usage_error(&o, "cannot read");
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    assert_one_line_usage_error(&show(&[junk.to_str().unwrap()]), "junk.json");
    let o = show(&[dir.to_str().unwrap()]);
    assert_one_line_usage_error(&o, "not a regular file");
}

#[test]
fn show_names_the_experiments_a_file_has() {
    let dir = scratch("unknown");
    let (json, _) = tiny_run(&dir, &["shm"]);
    let o = show(&[json.to_str().unwrap(), "nosuch"]);
    assert_one_line_usage_error(&o, "choose from shm");
}

#[test]
fn a_budget_that_is_not_a_duration_is_one_line() {
    let o = run(&["run", "--budget", "soon", "--no-save"]);
    assert_one_line_usage_error(&o, "not a duration");
    let o = run(&["run", "--budget", "2s", "--no-save"]);
    assert_one_line_usage_error(&o, "under 10 s");
}

#[test]
fn list_gives_each_experiments_time_and_the_total() {
    let o = run(&["list"]);
    let out = stdout(&o);
    assert!(out.lines().any(|l| l.starts_with("all ")), "{out}");
    assert!(out.contains("quick") && out.contains("--full"), "{out}");
}
