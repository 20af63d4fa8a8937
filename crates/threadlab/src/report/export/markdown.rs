//! Markdown: the whole report with full notes, for a README, an issue or a wiki page.

use crate::report::env::one_line;
use crate::report::{fmt_attempts, fmt_now, fmt_spread, fmt_then, fmt_value};
use crate::results::{RunResults, Status, Table};

/// A table cell: pipes escaped, line breaks flattened, so a cell never breaks the table.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn pipe_table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        header
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(header.len())
    );
    for r in rows {
        out.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        ));
    }
    out
}

fn data_table(t: &Table) -> String {
    let mut out = format!("\n**{}**\n\n", cell(&t.title));
    out.push_str(&pipe_table(&t.header, &t.rows));
    if !t.note.is_empty() {
        out.push_str(&format!("\n*{}*\n", t.note.replace('*', "\\*")));
    }
    out
}

pub fn render(r: &RunResults) -> String {
    let mut out = format!(
        "# threadlab {} — {} suite, {}\n\n{}\n\n",
        r.threadlab_version,
        r.mode,
        r.started_at,
        one_line(&r.environment)
    );
    for w in &r.warnings {
        out.push_str(&format!("- warning: {}\n", w.text));
    }
    for e in &r.experiments {
        out.push_str(&format!("\n## {}\n\n*{}*\n\n", e.name, e.study));
        if e.status != Status::Ok {
            out.push_str(&format!(
                "**{:?}**: {}\n\n",
                e.status,
                e.reason.as_deref().unwrap_or("")
            ));
        }
        if let Some(a) = fmt_attempts(e) {
            out.push_str(&format!("*{a}*\n\n"));
        }
        if !e.metrics.is_empty() {
            let header: Vec<String> = [
                "metric",
                "now",
                "spread (±IQR/2)",
                "min .. max",
                "then",
                "then/now",
                "placement",
                "note",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let rows: Vec<Vec<String>> = e
                .metrics
                .iter()
                .map(|m| {
                    let (then, ratio) = fmt_then(m);
                    vec![
                        format!("`{}`", m.id),
                        fmt_now(m),
                        fmt_spread(m),
                        format!("{} .. {}", fmt_value(m.min), fmt_value(m.max)),
                        then,
                        ratio,
                        m.placement.clone(),
                        m.note.clone(),
                    ]
                })
                .collect();
            out.push_str(&pipe_table(&header, &rows));
        }
        for s in &e.skipped_metrics {
            out.push_str(&format!("\n- skipped `{}`: {}\n", s.id, s.reason));
        }
        for t in &e.tables {
            out.push_str(&data_table(t));
        }
        for s in &e.series {
            out.push_str(&format!(
                "\n**{}** — {} ({}) vs {} ({}). {}\n\n",
                s.id, s.y_label, s.y_unit, s.x_label, s.x_unit, s.note
            ));
            let rows: Vec<Vec<String>> =
                s.x.iter()
                    .zip(&s.y)
                    .map(|(x, y)| vec![fmt_value(*x), fmt_value(*y)])
                    .collect();
            out.push_str(&pipe_table(&["x".into(), "y".into()], &rows));
        }
        if let Some(c) = &e.conclusion {
            // Every line of a quote is quoted, so a conclusion never leaks out of it.
            let quoted: Vec<String> = c.lines().map(|l| format!("> {l}")).collect();
            out.push_str(&format!("\n{}\n", quoted.join("\n")));
        }
    }
    out
}

/// The `--markdown` output.
pub const EXPORTER: super::Plain = super::Plain {
    flag: "--markdown",
    label: "markdown",
    render,
};
