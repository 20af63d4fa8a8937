//! `export`: the Prometheus text format, written atomically.

use super::*;

/// Checks the Prometheus text format 0.0.4 as node_exporter's textfile collector reads it.
fn check_text_format(text: &str) {
    let mut families: Vec<String> = Vec::new();
    let mut typed: Option<String> = None;
    let mut label_names: std::collections::HashMap<String, Vec<String>> = Default::default();
    let mut seen = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert!(!families.contains(&name), "{name} twice");
            families.push(name);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut p = rest.split(' ');
            let name = p.next().unwrap();
            assert_eq!(Some(name), families.last().map(String::as_str));
            assert_eq!(p.next(), Some("gauge"));
            typed = Some(name.to_string());
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line}");
        let (name, rest) = line.split_once('{').expect("labels");
        assert_eq!(Some(name), typed.as_deref(), "{line}");
        let (labels, value) = rest.rsplit_once("} ").expect("a value after the labels");
        assert!(!value.contains(' '), "a timestamp or junk: {line}");
        assert!(value.parse::<f64>().is_ok(), "{line}");
        assert!(seen.insert(format!("{name}{{{labels}")), "duplicate {line}");
        let names: Vec<String> = labels
            .split("\",")
            .map(|kv| kv.split('=').next().unwrap().to_string())
            .collect();
        let first = label_names.entry(name.to_string()).or_insert(names.clone());
        assert_eq!(*first, names, "label names differ within {name}");
        assert!(names.iter().any(|n| n == "machine"), "{line}");
    }
    for f in [
        "threadlab_time_seconds",
        "threadlab_info",
        "threadlab_experiment_ok",
    ] {
        assert!(families.iter().any(|x| x == f), "no {f}");
    }
}

#[test]
fn export_writes_the_prometheus_text_format_atomically() {
    let dir = scratch("prom");
    let prom = dir.join("threadlab.prom");
    let o = run(&[
        "export",
        "--prom",
        prom.to_str().unwrap(),
        tiny().to_str().unwrap(),
        "--machine",
        "lab \"one\"",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&prom).unwrap();
    check_text_format(&text);
    assert!(
        text.contains("machine=\"lab \\\"one\\\"\""),
        "label escaping"
    );
    assert!(text.contains("metric=\"create.thread\""));
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a temporary was left"
    );
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&prom).unwrap())
        .output()
    {
        Ok(out) => {
            let said = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                out.status.success() && said.trim().is_empty(),
                "promtool: {said}"
            );
            println!("promtool check metrics: clean");
        }
        Err(e) => println!(
            "skipped promtool check: promtool is not installed ({e}); apt-get install prometheus"
        ),
    }
    assert_one_line_usage_error(
        &run(&[
            "export",
            "--prom",
            prom.to_str().unwrap(),
            "/nonexistent.json",
        ]),
        "cannot read",
    );
    assert_one_line_usage_error(&run(&["export", tiny().to_str().unwrap()]), "--help");
    std::fs::remove_dir_all(&dir).unwrap();
}
