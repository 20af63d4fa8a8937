//! Grids of bars, sample distributions, and bars from an experiment's own table.

use super::*;

/// Bars on a grid: one group per row key, one bar per column key, `id(row, col)` naming the
/// metric; `verdict(row, col)` adds to a bar's hover text.
#[allow(clippy::type_complexity)]
pub(super) fn grid(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    rows: &[(String, String)],
    cols: &[(String, String)],
    id: &dyn Fn(&str, &str) -> String,
    verdict: Option<&dyn Fn(&str, &str) -> Option<String>>,
) -> Option<Chart> {
    let mut ms: Vec<&Metric> = Vec::new();
    for (r, _) in rows {
        for (c, _) in cols {
            ms.extend(e.metric(&id(r, c)));
        }
    }
    let unit = common_unit(&ms)?;
    let mut numbers = vec![std::iter::once(String::new())
        .chain(cols.iter().map(|c| c.1.clone()))
        .collect::<Vec<_>>()];
    let mut groups = Vec::new();
    let mut all = Vec::new();
    for (r, rl) in rows {
        let mut row = vec![rl.clone()];
        let bars: Vec<Option<Bar>> = cols
            .iter()
            .map(|(c, cl)| {
                let m = e.metric(&id(r, c));
                row.push(m.map_or("-".into(), |m| fmt_with_unit(m.median, m.unit)));
                m.map(|m| {
                    all.push(conv(m.median, m.unit, unit));
                    let mut b = metric_bar(m, unit, cl);
                    if let Some(v) = verdict.and_then(|f| f(r, c)) {
                        b.title.push_str(&format!("; {v}"));
                    }
                    b
                })
            })
            .collect();
        if bars.iter().any(|b| b.is_some()) {
            groups.push(BarGroup {
                label: rl.clone(),
                bars,
                note: None,
            });
            numbers.push(row);
        }
    }
    let positive: Vec<f64> = all.iter().copied().filter(|v| *v > 0.0).collect();
    let log = positive.len() == all.len() && crate::report::html::svg::spans_decades(&positive);
    let chart = BarChart {
        y: Axis {
            label: unit_label(unit),
            scale: if log { Scale::Log } else { Scale::Linear },
        },
        series: cols.iter().map(|c| BarSeries::now(c.1.clone())).collect(),
        groups,
        references: Vec::new(),
    };
    let mut caption = caption_of(&ms);
    caption.push_str(" Bars: medians; whiskers: quartiles.");
    Some(chart_for(e, what, title, &chart, caption, numbers))
}

/// Every sample of each metric as a dot, with its quartile box; `colour_by` names the row
/// groups that share a colour (a lock keeps its colour across thread counts).
/// One row of a distribution chart: its label, the metric whose samples it draws, and values
/// to mark beside them (in the metric's unit).
pub(super) struct DistInput<'a> {
    pub(super) label: String,
    pub(super) metric: &'a Metric,
    pub(super) marks: Vec<(f64, String)>,
}

pub(super) fn distribution(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    rows: &[DistInput],
    colour_by: &[String],
) -> Option<Chart> {
    let ms: Vec<&Metric> = rows.iter().map(|r| r.metric).collect();
    let unit = common_unit(&ms)?;
    let all: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            r.metric
                .values
                .iter()
                .map(|v| conv(*v, r.metric.unit, unit))
        })
        .collect();
    let colour = |label: &str| {
        colour_by
            .iter()
            .position(|c| label.starts_with(c.as_str()) && label[c.len()..].starts_with(' '))
            .unwrap_or(0)
    };
    let chart = DistChart {
        x: Axis::auto(unit_label(unit), &all),
        rows: rows
            .iter()
            .enumerate()
            .map(
                |(
                    i,
                    DistInput {
                        label,
                        metric: m,
                        marks,
                    },
                )| DistRow {
                    label: label.clone(),
                    values: m.values.iter().map(|v| conv(*v, m.unit, unit)).collect(),
                    colour: if colour_by.is_empty() {
                        i
                    } else {
                        colour(label)
                    },
                    marks: marks
                        .iter()
                        .map(|(v, name)| (conv(*v, m.unit, unit), name.clone()))
                        .collect(),
                },
            )
            .collect(),
        unit: unit_label(unit),
    };
    let mut numbers = vec![vec![
        String::new(),
        "median".into(),
        "quartiles".into(),
        "min .. max".into(),
        "samples".into(),
    ]];
    for DistInput {
        label,
        metric: m,
        marks,
    } in rows
    {
        let mut median = fmt_with_unit(m.median, m.unit);
        for (v, name) in marks {
            median.push_str(&format!(" ({name}: {})", fmt_with_unit(*v, m.unit)));
        }
        numbers.push(vec![
            label.clone(),
            median,
            format!("{} .. {}", fmt_value(m.q1), fmt_value(m.q3)),
            format!("{} .. {}", fmt_value(m.min), fmt_value(m.max)),
            m.samples.to_string(),
        ]);
    }
    let mut caption = caption_of(&ms);
    caption.push_str(" Dots: samples; box: quartiles; line: median; diamond: marked value.");
    Some(chart_for(e, what, title, &chart, caption, numbers))
}

/// The leading number of a table cell ("57.7%", "1044.9 us", "0.733"); None for "-".
pub(super) fn cell_number(s: &str) -> Option<f64> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|(i, ch)| {
            !(ch.is_ascii_digit() || *ch == '.' || ((*ch == '-' || *ch == '+') && *i == 0))
        })
        .map_or(t.len(), |(i, _)| i);
    t[..end].parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Bars from an experiment's own table: the first column labels the groups, `cols` are
/// (column index, is the study's figure). The column headers name the series. With
/// `then_now`, the study's value over today's first value is written above each group.
pub(super) fn table_bars(
    t: &Table,
    what: &str,
    title: &str,
    cols: &[(usize, bool)],
    y_label: &str,
    then_now: bool,
) -> Option<Chart> {
    let mut groups = Vec::new();
    let mut all = Vec::new();
    let mut ratios = Vec::new();
    for row in &t.rows {
        let label = row.first()?.clone();
        let value = |then: bool| {
            cols.iter()
                .find(|c| c.1 == then)
                .and_then(|(i, _)| cell_number(row.get(*i)?))
        };
        let ratio = match (value(true), value(false)) {
            (Some(a), Some(b)) if then_now && a > 0.0 && b > 0.0 => Some(a / b),
            _ => None,
        };
        ratios.push(ratio);
        let bars: Vec<Option<Bar>> = cols
            .iter()
            .map(|(i, _)| {
                let v = cell_number(row.get(*i)?)?;
                all.push(v);
                Some(Bar {
                    value: v,
                    range: None,
                    title: format!("{label}: {} {}", t.header.get(*i)?, row.get(*i)?),
                    flag: None,
                })
            })
            .collect();
        if bars.iter().any(|b| b.is_some()) {
            groups.push(BarGroup {
                label,
                bars,
                note: ratio.map(|r| format!("{}x", fmt_value(r))),
            });
        }
    }
    if groups.is_empty() {
        return None;
    }
    let chart = BarChart {
        y: Axis::auto(y_label, &all),
        series: cols
            .iter()
            .map(|(i, then)| BarSeries {
                name: t.header.get(*i).cloned().unwrap_or_default(),
                then: *then,
            })
            .collect(),
        groups,
        references: Vec::new(),
    };
    let mut header: Vec<String> = std::iter::once(t.header.first().cloned().unwrap_or_default())
        .chain(
            cols.iter()
                .map(|(i, _)| t.header.get(*i).cloned().unwrap_or_default()),
        )
        .collect();
    if then_now {
        header.push("then/now".into());
    }
    let mut numbers = vec![header];
    for (row, ratio) in t.rows.iter().zip(&ratios) {
        let mut cells: Vec<String> = std::iter::once(row.first().cloned().unwrap_or_default())
            .chain(
                cols.iter()
                    .map(|(i, _)| row.get(*i).cloned().unwrap_or_default()),
            )
            .collect();
        if then_now {
            cells.push(ratio.map_or("-".into(), |r| format!("{}x", fmt_value(r))));
        }
        numbers.push(cells);
    }
    let mut caption = t.title.clone();
    if !t.note.is_empty() {
        caption.push_str(&format!(" ({})", t.note));
    }
    caption.push('.');
    if then_now {
        caption.push_str(" The number above a group is then ÷ now.");
    }
    Some(Chart {
        key: crate::report::html::html_id(&format!("{}-{what}", ids::experiment(&t.id))),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}
