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

/// A page's first line, wrapped: `<title> <version> · <what ran> · <machine>`.
pub fn heading(title: &str, r: &RunResults, what: &str, width: usize) -> String {
    wrap(
        &format!(
            "{title} {} · {what} · {}",
            r.threadlab_version,
            one_line(&r.environment)
        ),
        width,
        "",
        "  ",
    )
}

/// What ran: the suite, with the number of runs when repeated.
pub fn suite(r: &RunResults) -> String {
    if r.repeat > 1 {
        format!("{} suite × {} runs", r.mode, r.repeat)
    } else {
        format!("{} suite", r.mode)
    }
}

/// The run's warnings, one wrapped line each.
pub fn warning_lines(r: &RunResults, width: usize) -> String {
    r.warnings
        .iter()
        .map(|w| wrap(&format!("warning: {}", w.text), width, "  ", "    "))
        .collect()
}

pub fn render(r: &RunResults, style: &Style) -> String {
    let width = style.width.unwrap_or(160) as usize;
    let mut out = heading("threadlab", r, &suite(r), width);
    out.push_str(&warning_lines(r, width));
    let mut legend_shown = false;
    for e in &r.experiments {
        out.push('\n');
        out.push_str(&experiment(e, style, width, &mut legend_shown));
    }
    out
}

fn experiment(
    e: &ExperimentResult,
    style: &Style,
    width: usize,
    legend_shown: &mut bool,
) -> String {
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
        out.push_str(&data_table(t, style, width, legend_shown));
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

/// Short names for the server designs, used only in a table too wide for the terminal; the
/// legend is printed once, before the first table that uses them.
const SHORT_NAMES: &[(&str, &str)] = &[
    ("thread_per_client", "thr/client"),
    ("thread_per_request", "thr/req"),
    ("fork_per_client", "fork/client"),
    ("epoll_per_core", "epoll/core"),
];

/// The legend of `SHORT_NAMES`, as printed.
pub fn short_names_legend() -> String {
    let pairs: Vec<String> = SHORT_NAMES
        .iter()
        .map(|(long, short)| format!("{short} = {long}"))
        .collect();
    format!("designs shortened to fit: {}", pairs.join(", "))
}

/// A cell that holds a figure (a number, with or without its unit) or a dash for none: such a
/// cell is never cut nor broken across lines.
fn is_figure(c: &str) -> bool {
    c == "-" || c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+')
}

/// Its widest word: the narrowest a wrapped cell may be without cutting a word (a flag, a
/// unit, a name).
fn widest_word(c: &str) -> usize {
    c.split_whitespace().map(w).max().unwrap_or(0)
}

/// One of an experiment's own tables: its title, the table, and its note. When it is wider
/// than the terminal, design names are shortened (the legend once per report, `legend_shown`)
/// and then text cells wrap between words; a figure, a unit or a flag is never cut.
fn data_table(
    tbl: &results::Table,
    style: &Style,
    width: usize,
    legend_shown: &mut bool,
) -> String {
    let mut out = wrap(&format!("{}:", tbl.title), width, "  ", "    ");
    let ncol = tbl.header.len().max(1);
    let total = |rows: &[Vec<String>]| -> usize {
        (0..ncol)
            .map(|i| {
                rows.iter()
                    .map(|r| r.get(i).map_or(0, |c| w(c)))
                    .chain([w(&tbl.header[i])])
                    .max()
                    .unwrap_or(0)
                    + 3
            })
            .sum::<usize>()
            + 1
    };
    let mut rows = tbl.rows.clone();
    if total(&rows) > width {
        let mut shortened = false;
        for c in rows.iter_mut().flatten() {
            if let Some((_, short)) = SHORT_NAMES.iter().find(|(long, _)| c == long) {
                *c = short.to_string();
                shortened = true;
            }
        }
        if shortened && !*legend_shown {
            out.push_str(&wrap(&short_names_legend(), width, "  ", "    "));
            *legend_shown = true;
        }
    }
    let fits = total(&rows) <= width;
    let widths = if fits {
        None
    } else {
        Some(column_widths(&tbl.header, &rows, width))
    };
    // Too wide still: text cells (and headers) are wrapped here, between words, to the widths
    // chosen; a figure is never wrapped.
    let fit = |c: &str, i: usize| match &widths {
        Some(ws) if !is_figure(c) => wrap(c, ws[i], "", "").trim_end().to_string(),
        _ => c.to_string(),
    };
    let mut t = new_table(style);
    t.set_header(
        tbl.header
            .iter()
            .enumerate()
            .map(|(i, h)| match &widths {
                Some(ws) => wrap(h, ws[i], "", "").trim_end().to_string(),
                None => h.clone(),
            })
            .collect::<Vec<_>>(),
    );
    for row in &rows {
        let cells: Vec<Cell> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let cell = Cell::new(fit(c, i));
                if i > 0 && is_figure(c) {
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

/// Column widths for a table wider than `width`: a column of figures keeps its widest figure
/// (and its header's widest word); the text columns share what is left in proportion to their
/// natural widths, each at least its widest word. When even that is wider than `width`, the
/// table is wider: nothing is cut.
fn column_widths(header: &[String], rows: &[Vec<String>], width: usize) -> Vec<usize> {
    let ncol = header.len();
    let cells = |i: usize| rows.iter().filter_map(move |r| r.get(i));
    let figures: Vec<bool> = (0..ncol).map(|i| cells(i).all(|c| is_figure(c))).collect();
    let natural: Vec<usize> = (0..ncol)
        .map(|i| {
            cells(i)
                .map(|c| w(c))
                .chain([w(&header[i])])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let floor: Vec<usize> = (0..ncol)
        .map(|i| {
            cells(i)
                .map(|c| if is_figure(c) { w(c) } else { widest_word(c) })
                .chain([widest_word(&header[i])])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let fixed: usize = (0..ncol).filter(|&i| figures[i]).map(|i| floor[i]).sum();
    let room = width.saturating_sub(fixed + 3 * ncol + 1);
    let text_natural: usize = (0..ncol).filter(|&i| !figures[i]).map(|i| natural[i]).sum();
    (0..ncol)
        .map(|i| {
            if figures[i] {
                floor[i]
            } else {
                let share = room * natural[i] / text_natural.max(1);
                share.clamp(floor[i], natural[i].max(floor[i]))
            }
        })
        .collect()
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
            wall_s: 1.0,
            metrics: vec![m],
            tables: vec![t],
            conclusion: Some(
                "A conclusion long enough to wrap at a narrow width, in prose.".into(),
            ),
            ..ExperimentResult::new("switch", crate::results::Status::Ok)
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
                &mut false,
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
            &mut false,
        );
        let header = text.lines().find(|l| l.contains("metric")).unwrap();
        assert!(
            header.contains("then/now") && !header.contains("note"),
            "{text}"
        );
        assert!(text.contains("cross_cpu(0,1) ·"), "{text}");
        let wide = at_200(&sample());
        assert!(wide.lines().any(|l| l.contains("note")), "{wide}");
    }

    #[test]
    fn two_modes_are_shown_with_their_shares() {
        let text = at_200(&sample());
        assert!(text.contains("(67%) |"), "{text}");
        assert!(text.contains("bimodal"), "{text}");
    }

    /// An experiment's table at 200 columns, without colour.
    fn at_200(e: &ExperimentResult) -> String {
        let style = Style {
            color: false,
            width: None,
        };
        experiment(e, &style, 200, &mut false)
    }

    /// A server-like table: long design names, figures with units, flags.
    fn designs_table() -> crate::results::Table {
        const HEADER: &str =
            "design,p50,p99,p99.9,CPU/req,switches/req,KiB/conn,threads,peak/s,block p99,flags";
        let mut t = crate::results::Table::new(
            "server.designs",
            "each design at the open-loop point",
            &HEADER.split(',').collect::<Vec<_>>(),
        );
        for d in [
            "thread_per_client",
            "thread_per_request",
            "epoll_per_core",
            "go",
        ] {
            t.row(vec![
                d.into(),
                "39.8 us".into(),
                "110 us".into(),
                "141.30 ms".into(),
                "12.5 us".into(),
                "1.02".into(),
                "10.2".into(),
                "1001".into(),
                "98250".into(),
                "1.17 ms".into(),
                "client_bound(peak) client_bound(rate)".into(),
            ]);
        }
        t
    }

    #[test]
    fn wide_tables_shorten_designs_once_and_never_cut_a_figure_or_flag() {
        for width in [60usize, 100, 200] {
            let mut legend = false;
            let style = Style {
                color: false,
                width: None,
            };
            let first = data_table(&designs_table(), &style, width, &mut legend);
            let second = data_table(&designs_table(), &style, width, &mut legend);
            let both = format!("{first}{second}");
            assert!(!both.contains('…'), "{width}: something cut:\n{both}");
            for figure in ["39.8 us", "141.30 ms", "98250", "1.17 ms"] {
                assert!(
                    first.contains(figure),
                    "{width}: {figure} missing:\n{first}"
                );
            }
            for flag in ["client_bound(peak)", "client_bound(rate)"] {
                assert!(first.contains(flag), "{width}: {flag} broken:\n{first}");
            }
            let legends = both.matches("designs shortened to fit").count();
            if width >= 200 {
                assert_eq!(legends, 0, "{both}");
                assert!(first.contains("thread_per_request"), "{first}");
            } else {
                assert_eq!(legends, 1, "{width}: the legend once:\n{both}");
                let rows: Vec<&str> = first.lines().filter(|l| l.starts_with('│')).collect();
                assert!(
                    rows.iter().any(|l| l.contains("thr/req"))
                        && !rows.iter().any(|l| l.contains("thread_pe")),
                    "{first}"
                );
            }
            // Narrower, the figures' own widths add up to more than the line: it overflows
            // rather than cut one.
            if width >= 200 {
                for line in both.lines() {
                    assert!(w(line) <= width, "{width}: {line}");
                }
            }
        }
    }

    #[test]
    fn wrap_indents_continuation_lines() {
        let s = wrap("aaa bbb ccc ddd", 9, "  ", "    ");
        assert_eq!(s, "  aaa bbb\n    ccc\n    ddd\n");
        assert_eq!(wrap("word", 3, "", ""), "word\n");
    }
}
