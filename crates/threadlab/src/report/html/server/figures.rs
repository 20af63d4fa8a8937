//! Figs. 4 and 5 redrawn: response time against request size, then and now, per design.

use super::*;

/// Rows of the numbers table: a header, then one per curve and one per study point.
type Numbers = Vec<Vec<String>>;

/// Response time against request size, one curve per design and placement: Fig. 4 (short
/// connections) or Fig. 5 (long), the study's stated points beside them.
pub(super) fn figure(e: &ExperimentResult, designs: &[String], long: bool) -> Option<Chart> {
    let rows = study_rows(e, designs, long);
    if rows.is_empty() {
        return None;
    }
    let unit = common_unit(&rows.iter().map(|r| r.metric).collect::<Vec<_>>())?;
    let mut sizes: Vec<f64> = rows.iter().map(|r| r.bytes).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let mut numbers = vec![std::iter::once("design, client".to_string())
        .chain(
            sizes
                .iter()
                .map(|b| crate::report::html::svg::fmt_bytes(*b)),
        )
        .collect::<Vec<_>>()];
    let lines = design_lines(&rows, designs, &sizes, unit, &mut numbers);
    // The study's points: Fig. 5 has none.
    let (annotations, sources) = if long {
        (Vec::new(), Vec::new())
    } else {
        study_points(e, &rows, designs, &sizes, unit, &mut numbers)
    };
    let (across, same) = (placement_of(&rows, false), placement_of(&rows, true));
    let xs: Vec<f64> = rows
        .iter()
        .map(|r| r.bytes)
        .chain(annotations.iter().map(|a| a.x))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(annotations.iter().map(|a| a.y))
        .collect();
    let (title, what, y_label) = if long {
        (
            "Fig. 5 redrawn: time per request on a long connection vs request size",
            "fig5",
            format!("time per request, long connection ({})", unit_label(unit)),
        )
    } else {
        (
            "Fig. 4 redrawn: time per short connection vs request size, then and now",
            "fig4",
            format!("time per short connection ({})", unit_label(unit)),
        )
    };
    let chart = LineChart {
        // Sizes are powers of two: a binary log axis whatever their span.
        x: Axis {
            label: "request size (bytes, log scale)".into(),
            scale: if xs.iter().all(|x| *x > 0.0) {
                Scale::LogBytes
            } else {
                Scale::Linear
            },
        },
        y: Axis::auto(y_label, &ys),
        lines,
        references: Vec::new(),
        x_unit: "bytes".into(),
        y_unit: unit_label(unit),
        keys: solid_dotted_keys(
            across.map(|p| format!("solid: client on another CPU ({p})")),
            same.map(|p| format!("dotted, hollow: client on the server's CPU ({p})")),
        ),
        annotations,
    };
    let mut caption = how_measured(&rows)?;
    if across.is_some() && same.is_some() {
        caption.push_str(
            " Solid lines, filled markers: the client on another CPU than the server (the study \
             used two machines); dotted lines, hollow markers: on the server's CPU.",
        );
    }
    if long {
        caption.push_str(
            " The study gives no values for Fig. 5, only that the thread and fork servers \
             converge once a connection carries many requests; the fork/thread ratio chart \
             below puts that beside today's.",
        );
    } else if !sources.is_empty() {
        caption.push_str(&format!(
            " Grey diamonds: the study's figures; its text states only this one point of Fig. \
             4 ({}).",
            sources.join("; ")
        ));
    }
    Some(chart_for(e, what, title, &chart, caption, numbers))
}

/// One curve per design and placement (the client on another CPU, then on the server's),
/// each also a row of `numbers`: the study's two designs bold, the others pale.
fn design_lines(
    rows: &[StudyRow],
    designs: &[String],
    sizes: &[f64],
    unit: Unit,
    numbers: &mut Numbers,
) -> Vec<Line> {
    let mut lines = Vec::new();
    for (di, d) in designs.iter().enumerate() {
        for same_cpu in [false, true] {
            let mut pts: Vec<&StudyRow> = rows
                .iter()
                .filter(|r| r.design == di && r.same_cpu == same_cpu)
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.bytes.total_cmp(&b.bytes));
            let where_ = if same_cpu { "same CPU" } else { "another CPU" };
            let study = d == THREAD || d == FORK;
            let listed_apart = rows.iter().any(|r| r.design == di && !r.same_cpu);
            lines.push(Line {
                name: d.clone(),
                points: pts
                    .iter()
                    .map(|r| (r.bytes, conv(r.metric.median, r.metric.unit, unit)))
                    .collect(),
                colour: di,
                marker: Marker::nth(di),
                dash: if same_cpu { Dash::Dotted } else { Dash::Solid },
                hollow: same_cpu,
                light: !study,
                // The legend names each design once; the keys say what dotted means.
                unlisted: same_cpu && listed_apart,
                titles: pts
                    .iter()
                    .map(|r| point_title(d, where_, r, unit))
                    .collect(),
                ..Line::default()
            });
            let mut row = vec![format!("{d}, {where_}")];
            for b in sizes {
                row.push(pts.iter().find(|r| r.bytes == *b).map_or("-".into(), |r| {
                    fmt_value(conv(r.metric.median, r.metric.unit, unit))
                }));
            }
            numbers.push(row);
        }
    }
    lines
}

/// A point's hover text: design, placement, size, median and quartiles in `unit`.
fn point_title(d: &str, where_: &str, r: &StudyRow, unit: Unit) -> String {
    let m = r.metric;
    format!(
        "{d}, client on {where_} ({}), {}: median {}, quartiles {} .. {}, {} samples",
        m.placement,
        crate::report::html::svg::fmt_bytes(r.bytes),
        fmt_with_unit(conv(m.median, m.unit, unit), unit),
        fmt_value(conv(m.q1, m.unit, unit)),
        fmt_value(conv(m.q3, m.unit, unit)),
        m.samples
    )
}

/// Fig. 4's stated points, one per design that has one, each also a row of `numbers`; and
/// their sources. Fig. 4's series carry them with their size; otherwise the metric's own
/// historical figure at the metric's size.
fn study_points(
    e: &ExperimentResult,
    rows: &[StudyRow],
    designs: &[String],
    sizes: &[f64],
    unit: Unit,
    numbers: &mut Numbers,
) -> (Vec<Annotation>, Vec<String>) {
    let mut annotations = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    for (di, d) in designs.iter().enumerate() {
        let series = e
            .series
            .iter()
            .find(|s| sid::figure_series_design(&s.id, 4) == Some(d.as_str()));
        // (x, the figure in the chart's unit, its source, the figure as the study gave it)
        let from_series = series.and_then(|s| {
            let h = s.historical.as_ref()?;
            let (x, y) = (*h.x.first()?, *h.y.first()?);
            Some((x, h.y_unit.convert(y, unit)?, h.source.clone(), y, h.y_unit))
        });
        let from_metric = || {
            rows.iter()
                .filter(|r| r.design == di && !r.same_cpu)
                .find_map(|r| {
                    let h = r.metric.historical.as_ref()?;
                    Some((
                        r.bytes,
                        h.unit.convert(h.value, unit)?,
                        h.source.clone(),
                        h.value,
                        h.unit,
                    ))
                })
        };
        let Some((x, y, source, value, vunit)) = from_series.or_else(from_metric) else {
            continue;
        };
        let label = seeds::label_of(&source);
        annotations.push(Annotation {
            x,
            y,
            text: format!("{label}: {d} {}", fmt_with_unit(value, vunit)),
            title: format!(
                "{d}: {} at {} bytes ({source})",
                fmt_with_unit(value, vunit),
                fmt_value(x)
            ),
        });
        let mut row = vec![format!("{d}, {label}")];
        for b in sizes {
            row.push(if (b - x).abs() / x < 0.05 {
                fmt_value(y)
            } else {
                "-".into()
            });
        }
        numbers.push(row);
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    (annotations, sources)
}

/// How it was measured: the first design's note (the study's thread server when present),
/// which every design shares but for its name.
fn how_measured(rows: &[StudyRow]) -> Option<String> {
    let rep = rows
        .iter()
        .find(|r| r.design == 0 && !r.same_cpu)
        .or(rows.first())
        .map(|r| r.metric)?;
    let samples = rows.iter().map(|r| r.metric.samples).max().unwrap_or(0);
    Some(format!(
        "How measured (every design alike): {}. Points: medians of up to {samples} samples, \
         every design's rows sampled interleaved round by round; hover for quartiles. {} and {} \
         (the study's two servers) are drawn bold, the other designs pale.",
        flag::note_body(rep).trim_end_matches('.'),
        THREAD,
        FORK
    ))
}

// ---------------------------------------------------------------------------------------------
// fork / thread.
