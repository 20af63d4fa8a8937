//! The study's rows as the results file holds them, and how figures and their flags are written.

use super::*;

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
    let mut rows = Vec::new();
    for m in &e.metrics {
        let Some(c) = Connection::parse(&m.id) else {
            continue;
        };
        if c.long != long || c.statistic != stat::MEAN {
            continue;
        }
        let (Some(design), Some(bytes)) = (
            designs.iter().position(|x| x == c.design),
            sid::size_bytes(c.size),
        ) else {
            continue;
        };
        rows.push(StudyRow {
            design,
            same_cpu: c.same_cpu,
            bytes,
            metric: m,
        });
    }
    rows
}

pub(super) use crate::report::server_facts::fmt_num;

/// A metric's median with its unit, whole counts without decimals.
pub(super) fn fmt_metric(m: &Metric) -> String {
    match m.unit {
        Unit::Count | Unit::Threads => fmt_num(m.median),
        u => fmt_with_unit(m.median, u),
    }
}

/// A metric's method without its flags prefix, cut at the first "; " (and to `max` chars).
pub(super) fn method(m: &Metric, max: usize) -> String {
    let note = flag::note_body(m);
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
            .map(|f| format!("{f}: {}", flag::meaning_of(f)))
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

/// The keys that say what solid lines with filled markers and dotted ones with hollow
/// markers stand for, each when the chart draws it.
pub(super) fn solid_dotted_keys(solid: Option<String>, dotted: Option<String>) -> Vec<Key> {
    let mut keys = Vec::new();
    if let Some(name) = solid {
        keys.push(Key {
            name,
            colour: THEN,
            marker: Some((Marker::Circle, false)),
            ..Key::default()
        });
    }
    if let Some(name) = dotted {
        keys.push(Key {
            name,
            colour: THEN,
            dash: Dash::Dotted,
            marker: Some((Marker::Circle, true)),
            ..Key::default()
        });
    }
    keys
}
