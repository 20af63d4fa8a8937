//! Markdown: the whole report with full notes, for a README, an issue or a wiki page.

use crate::report::env::one_line;
use crate::report::{fmt_spread, fmt_value, fmt_with_unit};
use crate::results::{RunResults, Status};

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
        if !e.metrics.is_empty() {
            out.push_str("| metric | now | spread (±IQR/2) | min .. max | then | then/now | placement | note |\n");
            out.push_str("|---|---:|---:|---:|---|---:|---|---|\n");
            for m in &e.metrics {
                let (then, ratio) = match &m.historical {
                    Some(h) => (
                        format!("{} ({})", fmt_with_unit(h.value, &h.unit), h.source),
                        m.ratio_then_now()
                            .map(|x| format!("{}x", fmt_value(x)))
                            .unwrap_or_default(),
                    ),
                    None => (String::new(), String::new()),
                };
                out.push_str(&format!(
                    "| `{}` | {} | {}{} | {} .. {} | {} | {} | {} | {} |\n",
                    m.id,
                    fmt_with_unit(m.median, &m.unit),
                    fmt_spread(m),
                    if m.noisy { " noisy" } else { "" },
                    fmt_value(m.min),
                    fmt_value(m.max),
                    then,
                    ratio,
                    m.placement,
                    m.note.replace('|', "\\|")
                ));
            }
        }
        for s in &e.skipped_metrics {
            out.push_str(&format!("\n- skipped `{}`: {}\n", s.id, s.reason));
        }
        for s in &e.series {
            out.push_str(&format!(
                "\n**{}** — {} ({}) vs {} ({}). {}\n\n| x | y |\n|---:|---:|\n",
                s.id, s.y_label, s.y_unit, s.x_label, s.x_unit, s.note
            ));
            for (x, y) in s.x.iter().zip(&s.y) {
                out.push_str(&format!("| {} | {} |\n", fmt_value(*x), fmt_value(*y)));
            }
        }
        if let Some(c) = &e.conclusion {
            out.push_str(&format!("\n> {c}\n"));
        }
    }
    out
}
