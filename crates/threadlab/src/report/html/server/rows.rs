//! The study's rows as the results file holds them, and how figures and their flags are written.

use super::*;

/// "64b" -> 64, "1kib" -> 1024, "2mib" -> 2 MiB.
pub(super) fn parse_size(s: &str) -> Option<f64> {
    let (num, mult) = if let Some(n) = s.strip_suffix("kib") {
        (n, 1024.0)
    } else if let Some(n) = s.strip_suffix("mib") {
        (n, 1024.0 * 1024.0)
    } else if let Some(n) = s.strip_suffix('b') {
        (n, 1.0)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|n| n * mult)
}

/// One of the study's rows: `server.<design>[.same_cpu].<short|long>.<size>.mean`.
pub(super) struct StudyRow<'a> {
    pub(super) design: usize,
    pub(super) same_cpu: bool,
    pub(super) bytes: f64,
    pub(super) metric: &'a Metric,
}

pub(super) fn study_rows<'a>(
    e: &'a ExperimentResult,
    designs: &[String],
    long: bool,
) -> Vec<StudyRow<'a>> {
    let kind = if long { "long" } else { "short" };
    let mut rows = Vec::new();
    for m in &e.metrics {
        let p: Vec<&str> = m.id.split('.').collect();
        let (d, same, rest) = match p.as_slice() {
            ["server", d, "same_cpu", rest @ ..] => (*d, true, rest),
            ["server", d, rest @ ..] => (*d, false, rest),
            _ => continue,
        };
        let [k, size, "mean"] = rest else { continue };
        if *k != kind {
            continue;
        }
        let (Some(design), Some(bytes)) = (designs.iter().position(|x| x == d), parse_size(size))
        else {
            continue;
        };
        rows.push(StudyRow {
            design,
            same_cpu: same,
            bytes,
            metric: m,
        });
    }
    rows
}

/// A number for the tables: whole numbers without decimals (16 connections, 3 threads).
pub(super) fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else {
        fmt_value(v)
    }
}

/// A metric's median with its unit, whole counts without decimals.
pub(super) fn fmt_metric(m: &Metric) -> String {
    match m.unit {
        Unit::Count | Unit::Threads => fmt_num(m.median),
        u => fmt_with_unit(m.median, u),
    }
}

/// A metric's method without its flags prefix, cut at the first "; " (and to `max` chars).
pub(super) fn method(m: &Metric, max: usize) -> String {
    let note = crate::report::html::note_body(m);
    let cut = note.split("; ").next().unwrap_or(note).trim();
    if cut.chars().count() <= max {
        cut.to_string()
    } else {
        format!(
            "{}…",
            cut.chars().take(max - 1).collect::<String>().trim_end()
        )
    }
}

/// What each flag means, for captions and the first things to know.
pub fn flag_meaning(flag: &str) -> &'static str {
    match flag {
        "client_bound" => {
            "the load generator may have held the load back (busy, lagging its plan, or near \
             its own ceiling)"
        }
        "listen_overflow" => "the kernel's accept queue overflowed during the step",
        "saturated" => {
            "the server fell behind the plan: the step was cut short or under 97% of the \
             planned requests were answered"
        }
        "errors" => "the client saw failures (connect, reset, a wrong reply)",
        "little_law_mismatch" => {
            "throughput x latency did not match the requests in flight (Little's law) within 10%"
        }
        _ => "see the metric's note",
    }
}

/// The caption's sentence on flags, naming only those present on the chart's metrics.
pub(super) fn flag_caption(ms: &[&Metric]) -> String {
    let mut flags: Vec<&str> = Vec::new();
    for m in ms {
        for f in &m.flags {
            if !flags.contains(&f.as_str()) {
                flags.push(f);
            }
        }
    }
    if flags.is_empty() {
        return String::new();
    }
    format!(
        " Pale bars with a dashed outline and a ! above carry flags (named on hover and in the \
         table): {}.",
        flags
            .iter()
            .map(|f| format!("{f}: {}", flag_meaning(f)))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

// ---------------------------------------------------------------------------------------------
// Figs. 4 and 5.

pub(super) fn placement_of<'a>(rows: &[StudyRow<'a>], same: bool) -> Option<&'a str> {
    rows.iter()
        .find(|r| r.same_cpu == same)
        .map(|r| r.metric.placement.as_str())
}
