//! An experiment's series as curves, grouped by what they plot.

use super::*;

/// The series that pass `keep`, one chart per group: series that share their id's last segment
/// and both units are drawn together (`shm.thread.read_time` beside `shm.process.read_time`,
/// one `server.<design>.…` curve per design). Each series' study curve, when it has one in a
/// comparable unit, is drawn dashed beside it.
pub fn series_charts(e: &ExperimentResult, keep: &dyn Fn(&Series) -> bool) -> Vec<Chart> {
    let mut groups: Vec<(String, Vec<&Series>)> = Vec::new();
    for s in e.series.iter().filter(|s| keep(s)) {
        let last = ids::last(&s.id);
        let k = format!("{last}|{}|{}", s.x_unit, s.y_unit);
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1.push(s),
            None => groups.push((k, vec![s])),
        }
    }
    groups
        .into_iter()
        .map(|(_, ss)| {
            let last = ids::last(&ss[0].id);
            let title = format!("{} vs {}", ss[0].y_label, ss[0].x_label);
            curve_chart(e, last, &capitalise(&title), &ss, Vec::new())
        })
        .collect()
}

pub(super) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The name of a series inside its group: its id without the experiment and the last segment.
pub(super) fn series_name(s: &Series) -> String {
    match ids::middle(&s.id) {
        Some(m) => m.to_string(),
        None => s.y_label.clone(),
    }
}

/// Curves of series sharing units, with their study curves and references.
pub(super) fn curve_chart(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    ss: &[&Series],
    references: Vec<Reference>,
) -> Chart {
    let s0 = ss[0];
    let mut lines = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    let mut seen_then: Vec<(Vec<u64>, Vec<u64>)> = Vec::new();
    for (i, s) in ss.iter().enumerate() {
        lines.push(Line {
            name: series_name(s),
            points: s.x.iter().copied().zip(s.y.iter().copied()).collect(),
            then: false,
            colour: i,
            marker: Marker::nth(i),
            ..Line::default()
        });
        if !s.note.is_empty() && !notes.contains(&s.note) {
            notes.push(s.note.clone());
        }
        if let Some(h) = &s.historical {
            // The same study curve attached to several series is drawn once.
            let sig = (
                h.x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                h.y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            );
            if seen_then.contains(&sig) {
                continue;
            }
            seen_then.push(sig);
            if let Some(pts) =
                h.x.iter()
                    .zip(&h.y)
                    .map(|(x, y)| h.y_unit.convert(*y, s.y_unit).map(|y| (*x, y)))
                    .collect::<Option<Vec<_>>>()
            {
                lines.push(Line {
                    name: format!("then: {}", seeds::label_of(&h.source)),
                    points: pts,
                    then: true,
                    colour: 0,
                    ..Line::default()
                });
                sources.push(h.source.clone());
            }
        }
    }
    let chart = series_chart(s0, unit_label, lines, references);
    // Numbers: x down the side, one column per curve.
    let mut xs_sorted: Vec<f64> = ss.iter().flat_map(|s| s.x.iter().copied()).collect();
    xs_sorted.sort_by(f64::total_cmp);
    xs_sorted.dedup();
    let mut numbers = vec![std::iter::once(unit_label(s0.x_unit))
        .chain(chart.lines.iter().map(|l| l.name.clone()))
        .collect::<Vec<_>>()];
    for x in &xs_sorted {
        let xl = if s0.x_unit == Unit::Bytes {
            crate::report::html::svg::fmt_bytes(*x)
        } else if *x == x.trunc() && x.abs() < 1e15 {
            format!("{}", *x as i64)
        } else {
            fmt_value(*x)
        };
        let mut row = vec![xl];
        for l in &chart.lines {
            row.push(
                l.points
                    .iter()
                    .find(|p| p.0 == *x)
                    .map_or("-".into(), |p| fmt_value(p.1)),
            );
        }
        numbers.push(row);
    }
    let mut caption = notes.join(" · ");
    if !sources.is_empty() {
        caption.push_str(&format!(" · Then: {}.", sources.join("; ")));
    }
    chart_for(e, what, title, &chart, caption, numbers)
}
