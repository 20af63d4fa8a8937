//! The terminal report: the environment in one line, then per experiment a table of
//! metric | now | spread | then (machine, year) | then/now | note, and its conclusion.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Color, ContentArrangement, Table};

use crate::report::env::one_line;
use crate::report::{fmt_spread, fmt_value, fmt_with_unit, short_note, short_source};
use crate::results::{RunResults, Status};

pub struct Style {
    pub color: bool,
    /// Terminal width, if known.
    pub width: Option<u16>,
}

pub fn render(r: &RunResults, style: &Style) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "threadlab {} · {} suite · {}\n",
        r.threadlab_version,
        r.mode,
        one_line(&r.environment)
    ));
    for w in &r.warnings {
        out.push_str(&format!("  warning: {}\n", w.text));
    }
    for e in &r.experiments {
        out.push('\n');
        let status = match e.status {
            Status::Ok => String::new(),
            Status::Skipped => " — SKIPPED".into(),
            Status::Failed => " — FAILED".into(),
        };
        out.push_str(&format!("{} ({:.1} s){status}\n", e.name, e.wall_s));
        if let Some(reason) = &e.reason {
            out.push_str(&format!("  reason: {reason}\n"));
        }
        if !e.metrics.is_empty() {
            out.push_str(&metric_table(e, style));
            out.push('\n');
        }
        for s in &e.skipped_metrics {
            out.push_str(&format!("  skipped {}: {}\n", s.id, s.reason));
        }
        for s in &e.series {
            out.push_str(&format!(
                "  series {} ({} per {}): {}\n",
                s.id,
                s.y_unit,
                s.x_label,
                s.x.iter()
                    .zip(&s.y)
                    .map(|(x, y)| format!("{}→{}", compact_x(*x, &s.x_unit), fmt_value(*y)))
                    .collect::<Vec<_>>()
                    .join("  ")
            ));
        }
        if let Some(c) = &e.conclusion {
            out.push_str(&format!("  → {c}\n"));
        }
    }
    out
}

fn compact_x(x: f64, unit: &str) -> String {
    if unit == "bytes" {
        let b = x as u64;
        if b >= 1 << 20 {
            format!("{}M", b >> 20)
        } else if b >= 1 << 10 {
            format!("{}K", b >> 10)
        } else {
            format!("{b}")
        }
    } else {
        fmt_value(x)
    }
}

fn metric_table(e: &crate::results::ExperimentResult, style: &Style) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Dynamic);
    if let Some(w) = style.width {
        t.set_width(w);
    }
    if !style.color {
        t.force_no_tty();
    }
    t.set_header(vec![
        "metric", "now", "spread", "then", "then/now", "where", "note",
    ]);
    for m in &e.metrics {
        let mut spread = Cell::new(if m.noisy {
            format!("{} noisy", fmt_spread(m))
        } else {
            fmt_spread(m)
        });
        if m.noisy && style.color {
            spread = spread.fg(Color::Yellow);
        }
        let (then, ratio) = match &m.historical {
            Some(h) => (
                format!(
                    "{} ({})",
                    fmt_with_unit(h.value, &h.unit),
                    short_source(&h.source)
                ),
                m.ratio_then_now()
                    .map(|r| format!("{}x", fmt_value(r)))
                    .unwrap_or_else(|| "-".into()),
            ),
            None => ("-".into(), "-".into()),
        };
        t.add_row(vec![
            Cell::new(&m.id),
            Cell::new(fmt_with_unit(m.median, &m.unit)).set_alignment(CellAlignment::Right),
            spread,
            Cell::new(then),
            Cell::new(ratio).set_alignment(CellAlignment::Right),
            Cell::new(&m.placement),
            Cell::new(short_note(&m.note, 48)),
        ]);
    }
    t.to_string()
}
