//! The comparison as a page: the same kind of self-contained report as a run's, with each
//! experiment's ratios B/A drawn against their noise bands, the table of verdicts, and every
//! curve of the runs overlaid. A fleet (more than two files) gets its table with the fastest
//! and slowest marked, and the curves overlaid.

use std::fmt::Write;

use super::parts::series_chart;
use super::svg::{esc, ratio_chart, Line, RatioRow};
use super::{figure, page, Chart, Page};
use crate::measure::units::Unit;
use crate::report::compare::{
    column_name, fmt_detectable, machines_banner, reach_text, rule_text, summary, verdict_text,
    Comparison, Fleet, Row, Run, Verdict,
};
use crate::report::{fmt_value, fmt_with_unit};

fn header(runs: &[(String, &super::super::compare::RunInfo)]) -> String {
    let mut out = String::from("<header>\n<h1>threadlab: runs compared</h1>\n<table>\n");
    for (name, r) in runs {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td><code>{}</code></td><td>{} run, {}, threadlab {}</td><td class=\"machine\">{}</td></tr>",
            esc(name),
            esc(&r.label),
            esc(&r.mode),
            esc(&r.started_at),
            esc(&r.version),
            esc(&r.machine)
        );
    }
    out.push_str("</table>\n</header>\n");
    out
}

/// Curves of every series id any run has, one chart per id, one line per run.
fn overlaid_curves(runs: &[&Run], keys: &mut Page) -> Vec<(String, Chart)> {
    let mut ids: Vec<(String, String)> = Vec::new();
    for r in runs {
        for e in &r.results.experiments {
            for s in &e.series {
                if !ids.iter().any(|(x, id)| *x == e.name && *id == s.id) {
                    ids.push((e.name.clone(), s.id.clone()));
                }
            }
        }
    }
    let mut charts = Vec::new();
    for (exp, id) in ids {
        let mut lines = Vec::new();
        let mut first: Option<&crate::results::Series> = None;
        let mut numbers = vec![vec!["run".to_string(), "x → y".into()]];
        for (i, r) in runs.iter().enumerate() {
            let Some(s) = r
                .results
                .experiments
                .iter()
                .filter(|e| e.name == exp)
                .flat_map(|e| e.series.iter())
                .find(|s| s.id == id)
            else {
                continue;
            };
            let base = first.get_or_insert(s);
            // A run whose series is in another unit is converted, or left out.
            let (Some(_), Some(_)) = (
                s.x_unit.convert(1.0, base.x_unit),
                s.y_unit.convert(1.0, base.y_unit),
            ) else {
                continue;
            };
            let pts: Vec<(f64, f64)> =
                s.x.iter()
                    .zip(&s.y)
                    .filter_map(|(x, y)| {
                        Some((
                            s.x_unit.convert(*x, base.x_unit)?,
                            s.y_unit.convert(*y, base.y_unit)?,
                        ))
                    })
                    .collect();
            let fx = |x: f64| {
                if base.x_unit == Unit::Bytes {
                    super::svg::fmt_bytes(x)
                } else {
                    super::svg::fmt_tick(x)
                }
            };
            numbers.push(vec![
                column_name(i),
                pts.iter()
                    .map(|(x, y)| format!("{}→{}", fx(*x), fmt_value(*y)))
                    .collect::<Vec<_>>()
                    .join("  "),
            ]);
            lines.push(Line {
                name: format!("{} ({})", column_name(i), r.label),
                points: pts,
                then: false,
                colour: i,
                marker: super::svg::Marker::nth(i),
                ..Line::default()
            });
        }
        let Some(s0) = first else { continue };
        if lines.is_empty() {
            continue;
        }
        let chart = series_chart(s0, |u| u.to_string(), lines, Vec::new());
        let title = format!("{id}: the runs overlaid");
        charts.push((
            exp.clone(),
            Chart {
                key: keys.unique(&format!("chart-{id}")),
                svg: chart.svg(&title),
                title,
                caption: s0.note.clone(),
                numbers,
            },
        ));
    }
    charts
}

/// The page of a two-file comparison.
pub fn render_pair(c: &Comparison, a: &Run, b: &Run) -> String {
    let mut keys = Page::default();
    let mut body = header(&[("A".into(), &c.a), ("B".into(), &c.b)]);
    if let Some(banner) = machines_banner(c) {
        let _ = writeln!(body, "<p class=\"banner\">{}</p>", esc(&banner));
    }
    body.push_str(&verdict_section(c));
    let curves = overlaid_curves(&[a, b], &mut keys);
    let experiments = experiments_of(c.rows.iter().map(|r| r.experiment.as_str()));
    body.push_str("<nav class=\"toc\">");
    for e in &experiments {
        let _ = write!(
            body,
            "<a href=\"#cmp-{}\">{}</a>",
            super::html_id(e),
            esc(e)
        );
    }
    body.push_str("</nav>\n");
    for e in experiments {
        let rows: Vec<&Row> = c.rows.iter().filter(|r| r.experiment == e).collect();
        open_experiment(&mut body, e);
        let ratio_rows: Vec<RatioRow> = rows.iter().filter_map(|r| ratio_row(e, r)).collect();
        if !ratio_rows.is_empty() {
            let title = format!("{e}: B / A per metric");
            let chart = Chart {
                key: keys.unique(&format!("chart-{e}-ratios")),
                svg: ratio_chart(
                    &ratio_rows,
                    "B ÷ A (log scale; grey band: the noise floor)",
                    &title,
                ),
                title,
                caption: "Dots: the ratio of medians; lines: its bootstrap 95% interval; grey: \
                          the metric's noise floor. Red: slower beyond noise and significant \
                          after Holm; green: faster; pink: changed (no better direction)."
                    .into(),
                numbers: vec![],
            };
            body.push_str(&figure(&chart));
        }
        for (_, chart) in curves.iter().filter(|(x, _)| x == e) {
            body.push_str(&figure(chart));
        }
        body.push_str(&verdict_table(&rows));
    }
    for (what, ids) in [("Only in A", &c.only_in_a), ("Only in B", &c.only_in_b)] {
        if !ids.is_empty() {
            let _ = writeln!(body, "<p><b>{what}:</b> {}</p>", esc(&ids.join(", ")));
        }
    }
    body.push_str(
        "<footer>Written by threadlab compare. Self-contained: it loads nothing from the network. The rule is explained in docs/compare.md.</footer>\n",
    );
    page(
        &format!("threadlab compare: {} vs {}", c.a.label, c.b.label),
        &body,
    )
}

/// The verdict first: the summary, the --fail-if-slower outcome, the notes and the rule.
fn verdict_section(c: &Comparison) -> String {
    let mut body = String::from("<section class=\"first\" id=\"first\"><h3>The verdict</h3><ul>");
    let _ = write!(body, "<li>{}</li>", esc(&summary(c)));
    if let Some(pct) = c.options.fail_if_slower_pct {
        let slow = c.slower_than(pct);
        let _ = write!(
            body,
            "<li>--fail-if-slower {}: {}</li>",
            crate::report::html::svg::fmt_tick(pct),
            if slow.is_empty() {
                "nothing is slower by more than that".to_string()
            } else {
                esc(&slow
                    .iter()
                    .map(|r| r.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", "))
            }
        );
        let _ = write!(body, "<li>{}</li>", esc(&reach_text(c, pct)));
    }
    for n in &c.notes {
        let _ = write!(body, "<li>{}</li>", esc(n));
    }
    let _ = write!(body, "<li class=\"muted\">{}</li>", esc(&rule_text(c)));
    body.push_str("</ul></section>\n");
    body
}

/// The experiments in the order their rows first appear.
fn experiments_of<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut experiments: Vec<&str> = Vec::new();
    for name in names {
        if !experiments.contains(&name) {
            experiments.push(name);
        }
    }
    experiments
}

/// An experiment's section up to its charts.
fn open_experiment(body: &mut String, e: &str) {
    let _ = writeln!(
        body,
        "<section class=\"experiment\" id=\"cmp-{}\" data-experiment=\"{}\"><h2>{}</h2><div class=\"charts\">",
        super::html_id(e),
        esc(e),
        esc(e)
    );
}

/// A metric's B/A with its interval and verdict, None when it has no ratio.
fn ratio_row(e: &str, r: &Row) -> Option<RatioRow> {
    let ratio = r.ratio?;
    Some(RatioRow {
        label: crate::results::ids::within(e, &r.id).to_string(),
        ratio,
        ci: r.ci,
        band: 1.0 + r.floor_pct / 100.0,
        verdict: match r.verdict {
            Verdict::Slower => 1,
            Verdict::Faster => 2,
            Verdict::Changed => 3,
            _ => 0,
        },
        title: format!(
            "{}: B/A {}{}; {}{}",
            r.id,
            crate::measure::units::fmt_fixed(ratio, 3),
            r.ci.map(|(lo, hi)| format!(
                " [{}, {}]",
                crate::measure::units::fmt_fixed(lo, 3),
                crate::measure::units::fmt_fixed(hi, 3)
            ))
            .unwrap_or_default(),
            verdict_text(r),
            r.flags_text()
                .map(|f| format!("; flagged: {f}"))
                .unwrap_or_default()
        ),
    })
}

/// The rest of an experiment's section: its table of verdicts, one row a metric.
fn verdict_table(rows: &[&Row]) -> String {
    let mut body = String::new();
    let flagged = rows.iter().any(|r| r.flags_text().is_some());
    let _ = writeln!(
        body,
        "</div>\n<div class=\"scroll\"><table><thead><tr><th>metric</th><th>A</th><th>B</th><th>B/A [95% CI]</th><th>p (Holm)</th><th>floor</th><th>detects</th><th>verdict</th>{}</tr></thead><tbody>",
        if flagged { "<th>flags</th>" } else { "" }
    );
    for r in rows {
        let class = match r.verdict {
            Verdict::Slower => " class=\"slower\"",
            Verdict::Faster => " class=\"faster\"",
            Verdict::Changed => " class=\"changed\"",
            _ => "",
        };
        let flags = if flagged {
            format!(
                "<td>{}</td>",
                r.flags_text()
                    .map(|f| format!("<span class=\"flag\">{}</span>", esc(&f)))
                    .unwrap_or_default()
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            body,
            "<tr{class}><td class=\"id\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\" title=\"{}\">{}%</td><td class=\"num\">{}</td><td title=\"{}\">{}</td>{flags}</tr>",
            esc(&r.id),
            esc(&fmt_with_unit(r.a.median, r.unit)),
            esc(&fmt_with_unit(r.b.median, r.unit)),
            esc(&crate::report::compare::fmt_ratio(r)),
            r.p_holm.map_or("-".into(), |p| if p < 0.001 { format!("{p:.1e}") } else { format!("{p:.3}") }),
            esc(&r.floor_from),
            crate::measure::units::fmt_fixed(r.floor_pct, 1),
            esc(&fmt_detectable(r)),
            esc(r.regime.as_deref().unwrap_or("")),
            esc(&verdict_text(r))
        );
    }
    body.push_str("</tbody></table></div></section>\n");
    body
}

/// The page of a fleet comparison.
pub fn render_fleet(f: &Fleet, runs: &[Run]) -> String {
    let mut keys = Page::default();
    let named: Vec<(String, &super::super::compare::RunInfo)> = f
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| (column_name(i), r))
        .collect();
    let mut body = header(&named);
    body.push_str(
        "<p class=\"muted\">One column per file; per row, <span class=\"fastest\">green</span> \
         marks the fastest and <span class=\"slowest\">red</span> the slowest by the metric's \
         direction (none for counts, shares and ratios); a boxed name after a figure is a flag \
         its file gives it (not to be taken at face value). No test is made across more than \
         two files: compare two of them for that.</p>\n",
    );
    let refs: Vec<&Run> = runs.iter().collect();
    let curves = overlaid_curves(&refs, &mut keys);
    for e in experiments_of(f.rows.iter().map(|r| r.experiment.as_str())) {
        open_experiment(&mut body, e);
        for (_, chart) in curves.iter().filter(|(x, _)| x == e) {
            body.push_str(&figure(chart));
        }
        body.push_str("</div><div class=\"scroll\"><table><thead><tr><th>metric</th>");
        for (name, _) in &named {
            let _ = write!(body, "<th>{}</th>", esc(name));
        }
        body.push_str("</tr></thead><tbody>\n");
        for r in f.rows.iter().filter(|r| r.experiment == e) {
            let _ = write!(body, "<tr><td class=\"id\">{}</td>", esc(&r.id));
            for (i, m) in r.medians.iter().enumerate() {
                let class = if r.fastest == Some(i) {
                    " fastest"
                } else if r.slowest == Some(i) {
                    " slowest"
                } else {
                    ""
                };
                let _ = write!(
                    body,
                    "<td class=\"num{class}\">{}{}</td>",
                    esc(&m.map_or("-".into(), |v| fmt_with_unit(v, r.unit))),
                    if r.flags[i].is_empty() {
                        String::new()
                    } else {
                        format!(
                            " <span class=\"flag\">{}</span>",
                            esc(&r.flags[i].join(", "))
                        )
                    }
                );
            }
            body.push_str("</tr>\n");
        }
        body.push_str("</tbody></table></div></section>\n");
    }
    body.push_str(
        "<footer>Written by threadlab compare. Self-contained: it loads nothing from the network.</footer>\n",
    );
    page("threadlab compare: a fleet of runs", &body)
}
