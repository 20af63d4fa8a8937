//! `threadlab export --prom`: a run's figures in the Prometheus text format 0.0.4, the format
//! node_exporter's textfile collector reads, so a fleet's figures go into the monitoring people
//! already run.
//!
//! What the collector needs, and what this writes:
//! - Gauges only, each family with `# HELP` and `# TYPE`; no timestamps (the collector refuses
//!   them) and no OpenMetrics-only lines (`# UNIT`, `# EOF`).
//! - Base units (seconds, bytes, ratios), one family per kind of quantity, the metric id as a
//!   label: `threadlab_time_seconds{experiment="create",metric="create.thread",
//!   placement="same_cpu(0)",machine="host",stat="median"} 3.78e-5`; `stat` is one of
//!   min, q1, median, q3, max of the run's samples.
//! - Every sample of a family carries the same label names (the collector rejects a family
//!   whose samples disagree), and no sample appears twice.
//! - The file is written atomically (temporary file beside it, then rename), so the collector
//!   never reads half of it; the temporary name does not end in `.prom`.
//!
//! docs/compare.md lists the families and labels.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::measure::units::Unit;
use crate::results::{RunResults, Status};

/// A family: its help text and its samples (label set, value), in order.
struct Family {
    help: &'static str,
    samples: Vec<(String, f64)>,
}

/// The family a unit's metrics go to, and the factor to the family's base unit.
pub fn family_of(unit: Unit) -> (&'static str, &'static str, f64) {
    match unit {
        Unit::Ns | Unit::Us | Unit::Ms | Unit::S => (
            "threadlab_time_seconds",
            "A time threadlab measured (a cost per operation, a latency, a wall time), in seconds.",
            unit.convert(1.0, Unit::S).unwrap_or(1.0),
        ),
        Unit::GbPerS => (
            "threadlab_bandwidth_bytes_per_second",
            "A bandwidth threadlab measured, in bytes per second.",
            1e9,
        ),
        Unit::PerS => (
            "threadlab_rate_per_second",
            "A rate threadlab measured (acquisitions, operations), per second.",
            1.0,
        ),
        Unit::Percent => (
            "threadlab_share_ratio",
            "A share or a relative change threadlab measured, as a fraction (the results file's percent / 100).",
            0.01,
        ),
        Unit::Ratio => (
            "threadlab_ratio",
            "A quotient of two figures threadlab measured (how many times one exceeds the other).",
            1.0,
        ),
        Unit::Count => (
            "threadlab_occurrences",
            "How many times something happened during a threadlab measurement (gaps, relaxed outcomes, switches).",
            1.0,
        ),
        Unit::Score => (
            "threadlab_score",
            "A Mac Thread Manager score: time relative to the job never yielding (1 = as fast).",
            1.0,
        ),
        Unit::Index => (
            "threadlab_index",
            "An index threadlab computed, such as Jain's fairness index (1 = equal shares).",
            1.0,
        ),
        Unit::Threads => (
            "threadlab_threads",
            "A number of threads threadlab found best or recommends.",
            1.0,
        ),
        Unit::Bytes | Unit::KiB | Unit::MiB => (
            "threadlab_size_bytes",
            "A size threadlab measured, in bytes.",
            unit.convert(1.0, Unit::Bytes).unwrap_or(1.0),
        ),
    }
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn label_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// A sample value, shortest form that reads back exactly (`+Inf` and `NaN` never occur:
/// values come from JSON).
fn value(v: f64) -> String {
    // 15 significant digits: a unit conversion's float dust (5.2066999999999995e-5) goes.
    let v: f64 = format!("{v:.14e}").parse().unwrap_or(v);
    let a = v.abs();
    if a == 0.0 || (1e-4..1e15).contains(&a) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// Seconds since the epoch of an RFC 3339 UTC time as the results file writes it
/// ("2025-11-23T17:57:00Z", fractions of a second allowed); None for anything else.
pub fn epoch_seconds(t: &str) -> Option<f64> {
    let t = t.strip_suffix('Z')?;
    let (date, time) = t.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, format!("0.{b}").parse::<f64>().ok()?),
        None => (time, 0.0),
    };
    let h: Vec<i64> = hms
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || h.len() != 3 || !(1..=12).contains(&d[1]) || !(1..=31).contains(&d[2]) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h[0] * 3_600 + h[1] * 60 + h[2]) as f64 + frac)
}

/// The machine label: the name given, else the host name the run recorded, else "unknown".
pub fn machine_label(r: &RunResults, given: Option<&str>) -> String {
    given
        .map(str::to_string)
        .or_else(|| r.environment.hostname.clone())
        .unwrap_or_else(|| "unknown".into())
}

/// The text format of `r`, `machine` naming the machine in every sample.
pub fn render(r: &RunResults, machine: &str) -> String {
    let mut families: BTreeMap<&'static str, Family> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    let mut add = |name: &'static str, help: &'static str, labels: String, v: f64| {
        if !v.is_finite() || !seen.insert(format!("{name}{labels}")) {
            return;
        }
        families
            .entry(name)
            .or_insert_with(|| Family {
                help,
                samples: Vec::new(),
            })
            .samples
            .push((labels, v));
    };
    let env = &r.environment;
    add(
        "threadlab_info",
        "The run this file describes; always 1, the facts are labels.",
        labels(&[
            ("machine", machine),
            ("version", &r.threadlab_version),
            ("mode", &r.mode),
            ("kernel", &env.kernel_release),
            ("cpu", env.cpu_model.as_deref().unwrap_or("unknown")),
        ]),
        1.0,
    );
    if let Some(t) = epoch_seconds(&r.finished_at) {
        add(
            "threadlab_run_finished_timestamp_seconds",
            "When the run ended, seconds since the Unix epoch (a value, not a sample timestamp).",
            labels(&[("machine", machine)]),
            t,
        );
    }
    for e in &r.experiments {
        add(
            "threadlab_experiment_ok",
            "1 when the experiment ran, 0 when it was skipped or failed.",
            labels(&[("experiment", &e.name), ("machine", machine)]),
            if e.status == Status::Ok { 1.0 } else { 0.0 },
        );
        add(
            "threadlab_experiment_wall_seconds",
            "Wall time the experiment took, in seconds.",
            labels(&[("experiment", &e.name), ("machine", machine)]),
            e.wall_s,
        );
        for m in &e.metrics {
            let (name, help, factor) = family_of(m.unit);
            let base = [
                ("experiment", e.name.as_str()),
                ("metric", m.id.as_str()),
                ("placement", m.placement.as_str()),
                ("machine", machine),
            ];
            // `stat`, not `quantile`: these are gauges over a run's samples, and Prometheus
            // keeps the `quantile` label for summaries.
            for (stat, v) in [
                ("min", m.min),
                ("q1", m.q1),
                ("median", m.median),
                ("q3", m.q3),
                ("max", m.max),
            ] {
                let mut l: Vec<(&str, &str)> = base.to_vec();
                l.push(("stat", stat));
                add(name, help, labels(&l), v * factor);
            }
            add(
                "threadlab_samples",
                "How many samples a metric's statistics are over.",
                labels(&base),
                m.values.len() as f64,
            );
            add(
                "threadlab_noisy",
                "1 when a metric's spread is wide (IQR over 10% of the median) or its samples fall in two clusters.",
                labels(&base),
                if m.noisy || m.modes.is_some() { 1.0 } else { 0.0 },
            );
            if let Some(ratio) = m.ratio_then_now() {
                add(
                    "threadlab_then_now_ratio",
                    "The source study's figure over today's median, in a common unit (how many times the old figure exceeds today's).",
                    labels(&base),
                    ratio,
                );
            }
        }
    }
    let mut out = String::new();
    for (name, f) in families {
        let _ = writeln!(out, "# HELP {name} {}", f.help);
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (l, v) in f.samples {
            let _ = writeln!(out, "{name}{l} {}", value(v));
        }
    }
    out
}

/// The `--prom` output: the machine label is the one given, else the host name the run
/// recorded.
pub struct Prometheus;

impl super::Exporter for Prometheus {
    fn flag(&self) -> &'static str {
        "--prom"
    }

    fn label(&self) -> &'static str {
        "prometheus"
    }

    fn render(&self, r: &RunResults, cx: &super::Context) -> crate::error::Result<String> {
        Ok(render(r, &machine_label(r, cx.machine)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(labels(&[("k", "v")]), "{k=\"v\"}");
    }

    #[test]
    fn values_and_times_are_in_the_text_format() {
        assert_eq!(value(1.0), "1");
        assert_eq!(value(0.25), "0.25");
        assert_eq!(value(3.78e-5), "3.78e-5");
        assert_eq!(value(52.067 * 1e-6), "5.2067e-5");
        assert_eq!(epoch_seconds("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(epoch_seconds("2000-03-01T00:00:01.5Z"), Some(951_868_801.5));
        assert_eq!(epoch_seconds("2025-11-23T17:57:00+01:00"), None);
        assert_eq!(epoch_seconds("garbage"), None);
    }

    #[test]
    fn every_unit_has_a_family_in_base_units() {
        for u in Unit::ALL {
            let (name, help, factor) = family_of(u);
            assert!(name.starts_with("threadlab_") && !help.is_empty() && factor > 0.0);
            for bad in [
                "_count", "_sum", "_bucket", "_total", "percent", "micro", "milli",
            ] {
                assert!(!name.contains(bad), "{name}");
            }
        }
        assert_eq!(family_of(Unit::Us).2, 1e-6);
    }
}
