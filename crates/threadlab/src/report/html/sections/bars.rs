//! Bars from metrics: labels and captions, a study's then-vs-now pairs, bars from tables.

use super::*;

pub(super) fn all_with_history(e: &ExperimentResult) -> Vec<&str> {
    e.metrics
        .iter()
        .filter(|m| m.historical.is_some())
        .map(|m| m.id.as_str())
        .collect()
}

/// A label for a metric inside its experiment's section: the id without the experiment.
pub(super) fn short_id<'a>(e: &ExperimentResult, id: &'a str) -> &'a str {
    ids::within(&e.name, id)
}

/// The distinct first clauses of the metrics' notes: how they were measured.
pub(super) fn caption_of(metrics: &[&Metric]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for m in metrics {
        let s = short_note(&m.note, 220);
        if !s.is_empty() && !seen.contains(&s) {
            seen.push(s);
        }
    }
    let mut out = String::new();
    for (i, s) in seen.iter().enumerate().take(6) {
        if i > 0 {
            out.push_str(" · ");
        }
        out.push_str(s);
    }
    if seen.len() > 6 {
        out.push_str(" · (the other methods are in the table below)");
    }
    if !out.is_empty() {
        out.push('.');
    }
    out
}

/// Bars of the listed metrics that are in the file, in a common unit, with quartile
/// whiskers. Metrics at or below zero cannot be drawn on a log axis: they are left to the table.
pub(super) fn bars(e: &ExperimentResult, what: &str, title: &str, ids: &[&str]) -> Option<Chart> {
    let ms: Vec<&Metric> = ids.iter().filter_map(|id| e.metric(id)).collect();
    let unit = common_unit(&ms)?;
    let values: Vec<f64> = ms.iter().map(|m| conv(m.median, m.unit, unit)).collect();
    let log = crate::report::html::svg::spans_decades(
        &values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .collect::<Vec<_>>(),
    );
    let shown: Vec<&Metric> = ms
        .iter()
        .copied()
        .filter(|m| !log || m.median > 0.0)
        .collect();
    if shown.is_empty() {
        return None;
    }
    let left_out: Vec<&str> = ms
        .iter()
        .filter(|m| log && m.median <= 0.0)
        .map(|m| m.id.as_str())
        .collect();
    let chart = BarChart {
        y: Axis {
            label: unit_label(unit),
            scale: if log { Scale::Log } else { Scale::Linear },
        },
        series: vec![BarSeries::now("now")],
        groups: shown
            .iter()
            .map(|m| BarGroup {
                label: short_id(e, &m.id).to_string(),
                bars: vec![Some(metric_bar(m, unit, ""))],
                note: None,
            })
            .collect(),
        references: Vec::new(),
    };
    let mut numbers = vec![vec![
        "metric".to_string(),
        format!("median ({})", unit_label(unit)),
        "quartiles".into(),
        "samples".into(),
    ]];
    for m in &ms {
        numbers.push(vec![
            short_id(e, &m.id).to_string(),
            fmt_value(conv(m.median, m.unit, unit)),
            format!(
                "{} .. {}",
                fmt_value(conv(m.q1, m.unit, unit)),
                fmt_value(conv(m.q3, m.unit, unit))
            ),
            m.samples.to_string(),
        ]);
    }
    let mut caption = caption_of(&ms);
    caption.push_str(" Bars: medians; whiskers: quartiles.");
    if !left_out.is_empty() {
        caption.push_str(&format!(
            " Not drawn on this log axis (zero or below): {}.",
            left_out.join(", ")
        ));
    }
    Some(chart_for(e, what, title, &chart, caption, numbers))
}

/// Every metric (that passes `keep`) as bars, one chart per unit, at most 16 bars a chart.
pub(super) fn metric_bars_by_unit(
    e: &ExperimentResult,
    keep: &dyn Fn(&Metric) -> bool,
) -> Vec<Chart> {
    let mut units: Vec<Unit> = Vec::new();
    for m in e.metrics.iter().filter(|m| keep(m)) {
        if !units.contains(&m.unit) {
            units.push(m.unit);
        }
    }
    let mut v = Vec::new();
    for u in units {
        let ids: Vec<&str> = e
            .metrics
            .iter()
            .filter(|m| keep(m) && m.unit == u)
            .map(|m| m.id.as_str())
            .collect();
        for (i, chunk) in ids.chunks(16).enumerate() {
            let part = if ids.len() > 16 {
                format!(" ({}/{})", i + 1, ids.len().div_ceil(16))
            } else {
                String::new()
            };
            v.extend(bars(
                e,
                &format!("metrics-{}-{i}", u.as_str()),
                &format!("Metrics in {}{part}", unit_label(u)),
                chunk,
            ));
        }
    }
    v
}

/// The study's figures beside today's: two bars per metric, the then/now ratio above.
pub(in crate::report::html) fn then_now(
    e: &ExperimentResult,
    ids: &[&str],
    what: &str,
    title: &str,
) -> Option<Chart> {
    let ms: Vec<&Metric> = ids
        .iter()
        .filter_map(|id| e.metric(id))
        .filter(|m| m.historical.is_some())
        .collect();
    let unit = common_unit(&ms)?;
    let mut groups = Vec::new();
    let mut numbers = vec![vec![
        "metric".to_string(),
        "then".into(),
        "now".into(),
        "then/now".into(),
    ]];
    let mut sources = BTreeSet::new();
    let mut all = Vec::new();
    for m in &ms {
        let h = m.historical.as_ref()?;
        let then = h.unit.convert(h.value, unit);
        sources.insert(h.source.clone());
        let ratio = m.ratio_then_now();
        all.extend(then);
        all.push(conv(m.median, m.unit, unit));
        groups.push(BarGroup {
            label: short_id(e, &m.id).to_string(),
            bars: vec![
                then.map(|t| Bar {
                    value: t,
                    range: None,
                    title: format!(
                        "{}: {} ({})",
                        m.id,
                        fmt_with_unit(h.value, h.unit),
                        seeds::label_of(&h.source)
                    ),
                    flag: None,
                }),
                Some(metric_bar(m, unit, "now")),
            ],
            note: ratio.map(|r| format!("{}x", fmt_value(r))),
        });
        numbers.push(vec![
            short_id(e, &m.id).to_string(),
            format!(
                "{} ({})",
                fmt_with_unit(h.value, h.unit),
                seeds::label_of(&h.source)
            ),
            fmt_with_unit(m.median, m.unit),
            ratio.map_or("-".into(), |r| format!("{}x", fmt_value(r))),
        ]);
    }
    if groups.is_empty() {
        return None;
    }
    let labels: BTreeSet<String> = sources.iter().map(|s| seeds::label_of(s)).collect();
    let chart = BarChart {
        y: Axis::auto(unit_label(unit), &all),
        series: vec![
            BarSeries::then(format!(
                "then ({})",
                labels.into_iter().collect::<Vec<_>>().join(", ")
            )),
            BarSeries::now("now"),
        ],
        groups,
        references: Vec::new(),
    };
    let mut caption = caption_of(&ms);
    caption.push_str(&format!(
        " The number above each pair is then ÷ now. Then: {}.",
        sources.into_iter().collect::<Vec<_>>().join("; ")
    ));
    Some(chart_for(e, what, title, &chart, caption, numbers))
}
