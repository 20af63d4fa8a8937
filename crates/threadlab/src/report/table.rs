//! The terminal report: the environment in one line, then per experiment a table of
//! metric | now | spread | then (machine, year) | then/now | where | note, the experiment's own
//! tables, and its conclusion.
//!
//! The table reads at any width: a metric id never wraps (its column fits the longest id), the
//! note column gives way first, and below `WIDE_ENOUGH` columns only id, now, spread and
//! then/now stay in the table while the rest of each row moves to a line below it.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Color, ColumnConstraint, ContentArrangement, Table};

use crate::report::env::one_line;
use crate::report::{
    fmt_attempts, fmt_now, fmt_spread, fmt_then, fmt_value, fmt_with_unit, short_note,
};
use crate::results::{self, ExperimentResult, RunResults, Status};

pub struct Style {
    pub color: bool,
    /// Terminal width, if known.
    pub width: Option<u16>,
}

/// Below this many columns of note, the note moves below the table.
const MIN_NOTE: usize = 24;

pub fn render(r: &RunResults, style: &Style) -> String {
    let width = style.width.unwrap_or(160) as usize;
    let mut out = String::new();
    out.push_str(&wrap(
        &format!(
            "threadlab {} · {} suite{} · {}",
            r.threadlab_version,
            r.mode,
            if r.repeat > 1 {
                format!(" × {} runs", r.repeat)
            } else {
                String::new()
            },
            one_line(&r.environment)
        ),
        width,
        "",
        "  ",
    ));
    for w in &r.warnings {
        out.push_str(&wrap(&format!("warning: {}", w.text), width, "  ", "    "));
    }
    for e in &r.experiments {
        out.push('\n');
        out.push_str(&experiment(e, style, width));
    }
    out
}

fn experiment(e: &ExperimentResult, style: &Style, width: usize) -> String {
    let mut out = String::new();
    let status = match e.status {
        Status::Ok => String::new(),
        Status::Skipped => " — SKIPPED".into(),
        Status::Interrupted => " — INTERRUPTED".into(),
        Status::Failed => " — FAILED".into(),
    };
    out.push_str(&format!("{} ({:.1} s){status}\n", e.name, e.wall_s));
    if let Some(a) = fmt_attempts(e) {
        out.push_str(&wrap(&a, width, "  ", "    "));
    }
    if let Some(reason) = &e.reason {
        out.push_str(&wrap(&format!("reason: {reason}"), width, "  ", "    "));
    }
    if !e.metrics.is_empty() {
        out.push_str(&metric_table(e, style, width));
    }
    for s in &e.skipped_metrics {
        out.push_str(&wrap(
            &format!("skipped {}: {}", s.id, s.reason),
            width,
            "  ",
            "    ",
        ));
    }
    for t in &e.tables {
        out.push_str(&data_table(t, style, width));
    }
    for s in &e.series {
        let pairs: Vec<String> =
            s.x.iter()
                .zip(&s.y)
                .map(|(x, y)| format!("{}→{}", compact_x(*x, s.x_unit), fmt_value(*y)))
                .collect();
        out.push_str(&wrap(
            &format!(
                "series {} ({} per {}): {}",
                s.id,
                s.y_unit,
                s.x_label,
                pairs.join("  ")
            ),
            width,
            "  ",
            "    ",
        ));
    }
    if let Some(c) = &e.conclusion {
        out.push_str(&wrap(&format!("→ {c}"), width, "  ", "    "));
    }
    out
}

fn compact_x(x: f64, unit: crate::measure::units::Unit) -> String {
    if unit == crate::measure::units::Unit::Bytes {
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

fn new_table(style: &Style) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    // Widths are decided here (ids never wrap, the note is cut to fit), so comfy-table only
    // lays the cells out.
    t.set_content_arrangement(ContentArrangement::Disabled);
    if !style.color {
        t.force_no_tty();
    }
    t
}

/// Visible width of a cell's text.
fn w(s: &str) -> usize {
    s.chars().count()
}

fn metric_table(e: &ExperimentResult, style: &Style, width: usize) -> String {
    struct Row {
        id: String,
        now: String,
        median: String,
        spread: String,
        then: String,
        ratio: String,
        placement: String,
        noisy: bool,
    }
    let rows: Vec<Row> = e
        .metrics
        .iter()
        .map(|m| {
            let (then, ratio) = fmt_then(m);
            Row {
                id: m.id.clone(),
                now: fmt_now(m),
                median: fmt_with_unit(m.median, m.unit),
                spread: fmt_spread(m),
                then,
                ratio,
                placement: m.placement.clone(),
                noisy: m.noisy || m.modes.is_some(),
            }
        })
        .collect();
    let col = |f: &dyn Fn(&Row) -> usize, header: &str| {
        rows.iter().map(f).max().unwrap_or(0).max(w(header))
    };
    let id_w = col(&|r| w(&r.id), "metric");
    let now_w = col(&|r| w(&r.now), "now");
    let spread_w = col(&|r| w(&r.spread), "spread");
    let then_w = col(&|r| w(&r.then), "then");
    let ratio_w = col(&|r| w(&r.ratio), "then/now");
    let where_w = col(&|r| w(&r.placement), "where");
    // Each column costs its text plus 3 (a separator and two spaces of padding); one more for
    // the table's right edge.
    let with_then = id_w + now_w + spread_w + ratio_w + then_w + where_w + 6 * 3 + 1;
    let note_room = width.saturating_sub(with_then + 3);
    let wide = note_room >= MIN_NOTE;

    let mut t = new_table(style);
    let mut header = vec!["metric", "now", "spread"];
    if wide {
        header.extend(["then", "then/now", "where", "note"]);
    } else {
        header.push("then/now");
    }
    t.set_header(header);
    for (m, r) in e.metrics.iter().zip(&rows) {
        let mut spread = Cell::new(&r.spread);
        if r.noisy && style.color {
            spread = spread.fg(Color::Yellow);
        }
        // Narrow tables show the median; the two modes, if any, go below with the rest.
        let now =
            Cell::new(if wide { &r.now } else { &r.median }).set_alignment(CellAlignment::Right);
        let ratio = Cell::new(&r.ratio).set_alignment(CellAlignment::Right);
        if wide {
            t.add_row(vec![
                Cell::new(&r.id),
                now,
                spread,
                Cell::new(&r.then),
                ratio,
                Cell::new(&r.placement),
                Cell::new(short_note(&m.note, note_room)),
            ]);
        } else {
            t.add_row(vec![Cell::new(&r.id), now, spread, ratio]);
        }
    }
    for c in t.column_iter_mut() {
        c.set_constraint(ColumnConstraint::ContentWidth);
    }
    let mut out = t.to_string();
    out.push('\n');
    if !wide {
        for (m, r) in e.metrics.iter().zip(&rows) {
            let mut parts = Vec::new();
            if r.now != r.median {
                parts.push(format!("modes {}", r.now));
            }
            if r.then != "-" {
                parts.push(format!("then {}", r.then));
            }
            parts.push(r.placement.clone());
            parts.push(short_note(&m.note, usize::MAX));
            out.push_str(&wrap(
                &format!("{}: {}", r.id, parts.join(" · ")),
                width,
                "  ",
                "    ",
            ));
        }
    }
    out
}

/// One of an experiment's own tables: its title, the table (cells cut to fit when the
/// terminal is narrow), and its note.
fn data_table(tbl: &results::Table, style: &Style, width: usize) -> String {
    let mut out = wrap(&format!("{}:", tbl.title), width, "  ", "    ");
    let mut t = new_table(style);
    t.set_header(tbl.header.clone());
    let ncol = tbl.header.len().max(1);
    // The widest a cell may be: an equal share of the width, but never less than 8.
    let share = (width.saturating_sub(3 * ncol + 1) / ncol).max(8);
    let widths: Vec<usize> = (0..ncol)
        .map(|i| {
            tbl.rows
                .iter()
                .map(|r| r.get(i).map_or(0, |c| w(c)))
                .chain([w(&tbl.header[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let total: usize = widths.iter().map(|x| x + 3).sum::<usize>() + 1;
    for row in &tbl.rows {
        let cells: Vec<Cell> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let text = if total > width {
                    short_note(c, share)
                } else {
                    c.clone()
                };
                let numeric =
                    c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+');
                let cell = Cell::new(text);
                if numeric && i > 0 {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                }
            })
            .collect();
        t.add_row(cells);
    }
    for c in t.column_iter_mut() {
        c.set_constraint(ColumnConstraint::ContentWidth);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    if !tbl.note.is_empty() {
        out.push_str(&wrap(&tbl.note, width, "  ", "  "));
    }
    out
}

/// Word-wraps `text` to `width` columns: the first line after `first`, the rest after `rest`.
/// A word longer than a line stays whole on its own line.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(first);
    let mut line_w = w(first);
    let mut empty = true;
    for word in text.split_whitespace() {
        let ww = w(word);
        if !empty && line_w + 1 + ww > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = String::from(rest);
            line_w = w(rest);
            empty = true;
        }
        if !empty {
            line.push(' ');
            line_w += 1;
        }
        line.push_str(word);
        line_w += ww;
        empty = false;
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::units::Unit;
    use crate::results::Metric;

    fn sample() -> ExperimentResult {
        let mut m = Metric::from_values(
            "switch.thread.futex.cross_cpu",
            Unit::Ns,
            &[
                270.0, 280.0, 265.0, 17_600.0, 275.0, 17_900.0, 290.0, 17_200.0, 272.0,
            ],
            100,
            "cross_cpu(0,1)",
            "two threads of one process on different CPUs hand off by futex: half a round trip",
        )
        .unwrap();
        m.historical = crate::seeds::historical("switch.thread.yield");
        let mut t = crate::results::Table::new("x.t", "A table", &["a", "b"]);
        t.row(vec!["one".into(), "1.0".into()]);
        ExperimentResult {
            name: "switch".into(),
            study: "s".into(),
            study_label: "l".into(),
            status: Status::Ok,
            reason: None,
            wall_s: 1.0,
            metrics: vec![m],
            series: vec![],
            skipped_metrics: vec![],
            tables: vec![t],
            conclusion: Some(
                "A conclusion long enough to wrap at a narrow width, in prose.".into(),
            ),
            attempts: vec![],
            drift_note: None,
            host: None,
        }
    }

    #[test]
    fn ids_never_wrap_and_lines_fit_the_width() {
        for width in [60usize, 80, 100, 160] {
            let text = experiment(
                &sample(),
                &Style {
                    color: false,
                    width: None,
                },
                width,
            );
            assert!(
                text.contains("switch.thread.futex.cross_cpu"),
                "id cut at {width}:\n{text}"
            );
            for line in text.lines() {
                // A table row may exceed a very narrow width only by its unbreakable columns.
                if width >= 80 {
                    assert!(w(line) <= width, "{width}: {line}");
                }
            }
        }
    }

    #[test]
    fn at_80_columns_the_rest_moves_below() {
        let text = experiment(
            &sample(),
            &Style {
                color: false,
                width: None,
            },
            80,
        );
        let header = text.lines().find(|l| l.contains("metric")).unwrap();
        assert!(
            header.contains("then/now") && !header.contains("note"),
            "{text}"
        );
        assert!(text.contains("cross_cpu(0,1) ·"), "{text}");
        let wide = experiment(
            &sample(),
            &Style {
                color: false,
                width: None,
            },
            200,
        );
        assert!(wide.lines().any(|l| l.contains("note")), "{wide}");
    }

    #[test]
    fn two_modes_are_shown_with_their_shares() {
        let text = experiment(
            &sample(),
            &Style {
                color: false,
                width: None,
            },
            200,
        );
        assert!(text.contains("(67%) |"), "{text}");
        assert!(text.contains("bimodal"), "{text}");
    }

    #[test]
    fn wrap_indents_continuation_lines() {
        let s = wrap("aaa bbb ccc ddd", 9, "  ", "    ");
        assert_eq!(s, "  aaa bbb\n    ccc\n    ddd\n");
        assert_eq!(wrap("word", 3, "", ""), "word\n");
    }
}
