//! Results files are input from anyone: `compare`, `report` and `export` print nothing a
//! terminal would act on, refuse a file that repeats an experiment or a metric, print every
//! number with a bounded width, and name a schema_version of the wrong type as such.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use threadlab::results::{parse_results, RunResults};

mod common;
use common::*;

/// One small run shared by the tests (three quick experiments).
fn small() -> &'static Path {
    static SMALL: OnceLock<PathBuf> = OnceLock::new();
    SMALL.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("files-hostile");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("small.json");
        let o = run_tiny("run", &["create", "sync", "switch"], &["--no-save"], &json);
        assert!(o.status.success(), "small run: {}", stderr(&o));
        json
    })
}

fn load() -> RunResults {
    parse_results(&std::fs::read_to_string(small()).unwrap(), "small").unwrap()
}

fn save(dir: &Path, name: &str, r: &RunResults) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string(r).unwrap()).unwrap();
    p.to_str().unwrap().to_string()
}

/// A character a terminal would act on (C0 but the line break, DEL, C1, bidi controls).
fn acts_on_terminal(c: char) -> bool {
    matches!(c, '\0'..='\u{09}' | '\u{0B}'..='\u{1F}' | '\u{7F}'..='\u{9F}'
        | '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[test]
fn nothing_from_a_file_reaches_the_terminal_as_a_control_sequence() {
    let dir = scratch("control");
    let a = save(&dir, "a.json", &load());
    let hostile = [
        "\u{1b}]0;owned\u{7}\u{1b}[2J",
        "\u{1b}]8;;http://x.test\u{1b}\\link\u{1b}]8;;\u{1b}\\",
        "nul\0byte",
        "over\u{202E}ride",
        "c1\u{9b}31m",
    ];
    for (i, h) in hostile.iter().enumerate() {
        let mut r = load();
        r.environment.cpu_model = Some(h.to_string());
        r.threadlab_version = h.to_string();
        let e = &mut r.experiments[0];
        e.metrics[0].id = format!("{h}{}", e.metrics[0].id);
        e.metrics[1].note = h.to_string();
        let b = save(&dir, &format!("b{i}.json"), &r);
        let prom = dir.join("x.prom");
        let html = dir.join("x.html");
        for args in [
            vec!["compare", &a, &b],
            vec!["compare", &b, &a, &b],
            vec!["report", &b, "-o", html.to_str().unwrap()],
            vec!["export", "--prom", prom.to_str().unwrap(), &b],
        ] {
            let o = run(&args);
            let text = stdout(&o) + &stderr(&o);
            assert!(o.status.code().is_some_and(|c| c < 2), "{args:?}: {text}");
            let bad: Vec<char> = text.chars().filter(|&c| acts_on_terminal(c)).collect();
            assert!(bad.is_empty(), "{args:?} printed {bad:?}");
        }
    }
}

#[test]
fn a_file_that_repeats_a_metric_or_an_experiment_is_refused_in_one_line() {
    let dir = scratch("duplicates");
    let a = save(&dir, "a.json", &load());
    let mut r = load();
    let mut twin = r.experiments[1].metrics[0].clone();
    twin.median *= 10.0;
    twin.values.iter_mut().for_each(|v| *v *= 10.0);
    r.experiments[1].metrics.push(twin);
    let metric = save(&dir, "metric.json", &r);
    let mut r = load();
    r.experiments.push(r.experiments[0].clone());
    let experiment = save(&dir, "experiment.json", &r);
    let html = dir.join("x.html");
    for b in [&metric, &experiment] {
        for args in [
            vec!["compare", &a, b],
            vec!["compare", b, &a, &a],
            vec!["report", b, "-o", html.to_str().unwrap()],
        ] {
            assert_one_line_usage_error(&run(&args), "twice");
        }
    }
    let text = std::fs::read_to_string(&a).unwrap().replacen(
        "\"schema_version\":",
        "\"schema_version\":\"two\",\"was\":",
        1,
    );
    let typed = dir.join("typed.json");
    std::fs::write(&typed, text).unwrap();
    assert_one_line_usage_error(
        &run(&["compare", &a, typed.to_str().unwrap()]),
        "a string, not a whole number",
    );
}

/// The longest run of decimal digits in `s`.
fn longest_digits(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

#[test]
fn numbers_print_with_a_bounded_width_whatever_their_size() {
    let dir = scratch("numbers");
    let a = save(&dir, "a.json", &load());
    for v in [1e308, -1e308, f64::MAX, 5e-324, 1e15] {
        let mut r = load();
        for e in r.experiments.iter_mut() {
            for m in e.metrics.iter_mut() {
                (m.median, m.min, m.max, m.q1, m.q3, m.mean) = (v, v, v, v, v, v);
                m.values.iter_mut().for_each(|x| *x = v);
                if let Some(h) = m.historical.as_mut() {
                    h.value = v;
                }
            }
            for s in e.series.iter_mut() {
                s.y.iter_mut().for_each(|y| *y = v);
            }
        }
        let b = save(&dir, "b.json", &r);
        let html = dir.join("x.html");
        let prom = dir.join("x.prom");
        let h = html.to_str().unwrap();
        for args in [
            vec!["compare", &a, &b, "--html", h],
            vec!["compare", &b, &a, &b, "--html", h],
            vec!["report", &b, "-o", h],
            vec!["export", "--prom", prom.to_str().unwrap(), &b],
        ] {
            let o = run(&args);
            assert!(
                o.status.code().is_some_and(|c| c < 2),
                "{args:?}: {}",
                stderr(&o)
            );
            let file = if args[0] == "export" { &prom } else { &html };
            for (what, text) in [
                ("terminal", stdout(&o) + &stderr(&o)),
                ("file", std::fs::read_to_string(file).unwrap()),
            ] {
                let n = longest_digits(&text);
                assert!(n <= 20, "{v:e}: {args:?} {what}: a run of {n} digits");
            }
        }
    }
}
