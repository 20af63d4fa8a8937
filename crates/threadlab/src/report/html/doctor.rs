//! "What to change on this machine": beside "what to choose", the settings doctor measured
//! that lower a figure (their interval entirely below 1), strongest first, each with the
//! figure before and after, its interval, the CPU it burns and how to apply it; then what made
//! no clear difference, and what could not be tried here. Read from the doctor experiment's
//! metrics and its `doctor.apply` table.

use std::fmt::Write;

use super::svg::esc;
use crate::measure::units::fmt_value;
use crate::report::fmt_with_unit;
use crate::results::ids::doctor;
use crate::results::{ExperimentResult, Metric, RunResults, Status};

/// One measured effect, from a `doctor.<knob>.<figure>.effect` metric and its off/on rows.
struct Row<'a> {
    knob: &'a str,
    figure: &'a str,
    effect: &'a Metric,
    off: Option<&'a Metric>,
    on: Option<&'a Metric>,
}

fn rows(e: &ExperimentResult) -> Vec<Row<'_>> {
    e.metrics
        .iter()
        .filter_map(|m| {
            let (knob, figure) = doctor::parse_effect(&m.id)?;
            (figure != doctor::CPU).then(|| Row {
                knob,
                figure,
                effect: m,
                off: e.metric(&doctor::part(knob, figure, doctor::OFF)),
                on: e.metric(&doctor::part(knob, figure, doctor::ON)),
            })
        })
        .collect()
}

/// The knob's CPU burned, off -> on.
fn cost(e: &ExperimentResult, knob: &str) -> String {
    match (
        e.metric(&doctor::part(knob, doctor::CPU, doctor::OFF)),
        e.metric(&doctor::part(knob, doctor::CPU, doctor::ON)),
    ) {
        (Some(off), Some(on)) => format!(
            "CPU burned {:.0}% → {:.0}% of one CPU",
            off.median, on.median
        ),
        _ => "CPU cost not readable".into(),
    }
}

/// (program, machine) for a knob, from the apply table.
fn how(e: &ExperimentResult, knob: &str) -> Option<(String, String)> {
    let t = crate::report::doctor::table_of(e, doctor::APPLY)?;
    let r = t
        .rows
        .iter()
        .find(|r| r.first().map(String::as_str) == Some(knob))?;
    Some((r.get(2)?.clone(), r.get(3)?.clone()))
}

fn lower(m: &Metric) -> bool {
    m.interval.is_some_and(|[_, hi]| hi < 1.0)
}

pub fn render(r: &RunResults) -> String {
    let mut out = String::from(
        "<section class=\"advice\" id=\"change\">\n<h2>What to change on this machine</h2>\n",
    );
    let Some(e) = r
        .experiments
        .iter()
        .find(|e| e.name == "doctor" && e.status == Status::Ok)
    else {
        out.push_str(
            "<p>Not measured in this file: run 'threadlab doctor' (or 'threadlab run doctor') \
             to measure which settings change this machine's figures.</p>\n</section>\n",
        );
        return out;
    };
    let mut all = rows(e);
    all.sort_by(|a, b| a.effect.median.total_cmp(&b.effect.median));
    let helps: Vec<&Row> = all.iter().filter(|x| lower(x.effect)).collect();
    if helps.is_empty() {
        out.push_str("<p>No setting doctor tried lowered a figure clearly here.</p>\n");
    } else {
        out.push_str("<ul>\n");
        for x in helps {
            let [lo, hi] = x.effect.interval.unwrap_or([f64::NAN; 2]);
            let figures = match (x.off, x.on) {
                (Some(off), Some(on)) => format!(
                    "{} → {}",
                    fmt_with_unit(off.median, off.unit),
                    fmt_with_unit(on.median, on.unit)
                ),
                _ => String::new(),
            };
            let _ = write!(
                out,
                "<li><b>{}</b> on {}: {} (×{}, 95% interval {}–{}); {}.",
                esc(x.knob),
                esc(x.figure),
                esc(&figures),
                esc(&fmt_value(x.effect.median)),
                esc(&fmt_value(lo)),
                esc(&fmt_value(hi)),
                esc(&cost(e, x.knob))
            );
            if let Some((program, machine)) = how(e, x.knob) {
                let _ = write!(
                    out,
                    " <span class=\"muted\">As a program: {}. For the machine: {}.</span>",
                    esc(&program),
                    esc(&machine)
                );
            }
            out.push_str("</li>\n");
        }
        out.push_str("</ul>\n");
    }
    let unclear: Vec<String> = all
        .iter()
        .filter(|x| !lower(x.effect))
        .map(|x| {
            format!(
                "{} on {} (×{})",
                x.knob,
                x.figure,
                fmt_value(x.effect.median)
            )
        })
        .collect();
    if !unclear.is_empty() {
        let _ = writeln!(
            out,
            "<p>No clear gain (the interval reaches 1 or lies above it): {}.</p>",
            esc(&unclear.join(", "))
        );
    }
    let not_tried: Vec<String> = e
        .skipped_metrics
        .iter()
        .filter(|s| s.id.matches('.').count() == 1)
        .map(|s| format!("{}: {}", s.id.trim_start_matches("doctor."), s.reason))
        .collect();
    if !not_tried.is_empty() {
        let _ = writeln!(
            out,
            "<details><summary>{} settings not tried here, and why</summary><ul>{}</ul></details>",
            not_tried.len(),
            not_tried
                .iter()
                .map(|t| format!("<li>{}</li>", esc(t)))
                .collect::<String>()
        );
    }
    out.push_str(
        "<p class=\"muted\">Each setting measured in one run, its phases alternated (off, on, off, on \
         ...) so that the host's drift touches both; the effect is the median on/off ratio over \
         the rounds. See the doctor section for the facts, every figure and where a wake-up's \
         time goes.</p>\n</section>\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::units::Unit;

    fn metric(id: &str, unit: Unit, v: f64, interval: Option<[f64; 2]>) -> Metric {
        let mut m = Metric::from_values(id, unit, &[v, v, v], 1, "x", "n").unwrap();
        m.interval = interval;
        m
    }

    #[test]
    fn only_clear_gains_are_advised_strongest_first() {
        let e = ExperimentResult {
            study: "s".into(),
            study_label: "l".into(),
            wall_s: 1.0,
            metrics: vec![
                metric("doctor.a.wakeup.off", Unit::Us, 25.0, None),
                metric("doctor.a.wakeup.on", Unit::Us, 5.0, None),
                metric(
                    "doctor.a.wakeup.effect",
                    Unit::Ratio,
                    0.2,
                    Some([0.15, 0.25]),
                ),
                metric(
                    "doctor.b.handoff.effect",
                    Unit::Ratio,
                    0.01,
                    Some([0.005, 0.02]),
                ),
                metric("doctor.c.echo.effect", Unit::Ratio, 0.99, Some([0.9, 1.1])),
                metric("doctor.a.cpu.off", Unit::Percent, 40.0, None),
                metric("doctor.a.cpu.on", Unit::Percent, 200.0, None),
            ],
            skipped_metrics: vec![crate::results::SkippedMetric {
                id: "doctor.smt_sibling".into(),
                reason: "no SMT <here>".into(),
            }],
            ..ExperimentResult::new("doctor", Status::Ok)
        };
        let mut r = RunResults::new("full", vec![e]);
        let html = render(&r);
        let b = html.find("<b>b</b>").unwrap();
        let a = html.find("<b>a</b>").unwrap();
        assert!(b < a, "strongest first");
        assert!(html.contains("25.00 us → 5.00 us"), "{html}");
        assert!(html.contains("CPU burned 40% → 200%"), "{html}");
        assert!(html.contains("c on echo"), "no clear gain listed");
        assert!(html.contains("no SMT &lt;here&gt;"), "escaped");
        r.experiments.clear();
        assert!(render(&r).contains("Not measured in this file"));
    }
}
