//! The terminal summary, what `threadlab run` prints by default: per experiment its headline
//! figures (median, spread, the study's figure and then/now) and its verdict; then what to
//! choose on this machine, each answer with the ids of the figures it rests on; the warnings
//! that change how far the figures can be trusted; and last the files written. Everything else
//! is in the results file, printed again by `threadlab show FILE --detail`.

use crate::report::table::wrap;
use crate::report::{fmt_attempts, fmt_now, fmt_spread, fmt_then};
use crate::results::{ExperimentResult, RunResults, Status};

/// Warnings that only describe the machine (a virtual machine is no fault of the run).
const INFORMATIONAL: &[&str] = &["virtualized"];

/// The files the summary ends with: (what, path).
pub type Files<'a> = &'a [(&'a str, String)];

/// The summary of `r` at `width` columns, for the experiments named in `only` (all when
/// empty); the advice shown is that resting on those experiments' figures.
pub fn render(r: &RunResults, width: usize, only: &[String], files: Files) -> String {
    let mut out = header(r, width);
    let shown: Vec<&ExperimentResult> = r
        .experiments
        .iter()
        .filter(|e| only.is_empty() || only.contains(&e.name))
        .collect();
    for e in &shown {
        out.push('\n');
        out.push_str(&experiment(e, width));
    }
    out.push_str(&choose(r, width, &shown, false));
    if let Some((_, results)) = files.iter().find(|(what, _)| *what == "results") {
        out.push('\n');
        out.push_str(&wrap(
            &format!("All figures and tables: threadlab show {results} --detail"),
            width,
            "",
            "  ",
        ));
    }
    out.push_str(&closing(r, width, files));
    out
}

/// The run in one line, wrapped: version, suite, machine.
pub fn header(r: &RunResults, width: usize) -> String {
    crate::report::table::heading("threadlab", r, &crate::report::table::suite(r), width)
}

fn experiment(e: &ExperimentResult, width: usize) -> String {
    let status = match e.status {
        Status::Ok => "",
        Status::Skipped => " — SKIPPED",
        Status::Interrupted => " — INTERRUPTED",
        Status::Failed => " — FAILED",
    };
    let mut out = format!("{} ({:.1} s){status}{}\n", e.name, e.wall_s, more(e));
    if let Some(reason) = &e.reason {
        out.push_str(&wrap(reason, width, "  ", "    "));
    }
    out.push_str(&headline(e, width));
    if let Some(v) = &e.verdict {
        out.push_str(&wrap(&format!("→ {v}"), width, "  ", "    "));
    }
    out
}

/// What the summary leaves out of an experiment, on its title line.
fn more(e: &ExperimentResult) -> String {
    let hidden = e.metrics.len().saturating_sub(e.headline.len());
    let mut parts = Vec::new();
    if hidden > 0 {
        parts.push(format!("{hidden} more {}", plural(hidden, "figure")));
    }
    if !e.tables.is_empty() {
        parts.push(format!(
            "{} {}",
            e.tables.len(),
            plural(e.tables.len(), "table")
        ));
    }
    if !e.skipped_metrics.is_empty() {
        parts.push(format!("{} skipped here", e.skipped_metrics.len()));
    }
    // Which attempt was kept and how far the references moved is in the detail.
    if fmt_attempts(e).is_some() {
        parts.push("the host's speed moved during it".into());
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" · {}", parts.join(", "))
    }
}

/// "figure" or "figures".
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// The headline figures, aligned: id, median (or modes), spread, then the study's figure and
/// then/now where it has one, then the flags. Nothing is cut: a long row wraps. A row too wide
/// to share the columns (two modes, a long id) is left out of them, so the rest stay aligned.
fn headline(e: &ExperimentResult, width: usize) -> String {
    let rows: Vec<[String; 4]> = e
        .headline
        .iter()
        .filter_map(|id| e.metric(id))
        .map(|m| {
            let (then, ratio) = fmt_then(m);
            let mut tail = if then == "-" {
                String::new()
            } else {
                format!("then {then}, then/now {ratio}")
            };
            if !m.flags.is_empty() {
                let sep = if tail.is_empty() { "" } else { "  " };
                tail.push_str(&format!("{sep}[{}]", m.flags.join(", ")));
            }
            [m.id.clone(), fmt_now(m), fmt_spread(m), tail]
        })
        .collect();
    let aligned = aligned_rows(&rows, width);
    let col = |i: usize| {
        aligned
            .iter()
            .map(|&k| rows[k][i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (id_w, now_w, spread_w) = (col(0), col(1), col(2));
    let mut out = String::new();
    for (k, [id, now, spread, tail]) in rows.iter().enumerate() {
        let figure = if aligned.contains(&k) {
            format!("  {id:<id_w$}  {now:>now_w$}  {spread:<spread_w$}")
        } else {
            format!("  {id}  {now}  {spread}")
        };
        let line = format!("{figure}  {tail}");
        if line.trim_end().chars().count() <= width {
            out.push_str(line.trim_end());
            out.push('\n');
        } else if figure.trim_end().chars().count() <= width {
            // The study's figure on a line of its own keeps the columns aligned.
            out.push_str(figure.trim_end());
            out.push('\n');
            if !tail.is_empty() {
                out.push_str(&wrap(tail, width, "      ", "      "));
            }
        } else {
            out.push_str(&wrap(&line, width, "  ", "      "));
        }
    }
    out
}

/// The rows that share the columns: all of them when every row then fits `width`; otherwise,
/// one at a time, the row with the widest figure (id, median, spread) is left out until the
/// rest fit.
fn aligned_rows(rows: &[[String; 4]], width: usize) -> Vec<usize> {
    let len = |k: usize, i: usize| rows[k][i].chars().count();
    let mut set: Vec<usize> = (0..rows.len()).collect();
    while !set.is_empty() {
        let w = |i: usize| set.iter().map(|&k| len(k, i)).max().unwrap_or(0);
        let figure = 2 + w(0) + 2 + w(1) + 2 + w(2);
        let fits = |k: usize| len(k, 3) == 0 || figure + 2 + len(k, 3) <= width;
        if set.iter().all(|&k| fits(k)) {
            break;
        }
        let widest = *set
            .iter()
            .max_by_key(|&&k| len(k, 0) + len(k, 1) + len(k, 2))
            .expect("not empty");
        set.retain(|&k| k != widest);
    }
    set
}

/// "What to choose on this machine": the answers resting on the shown experiments' figures
/// (all of them when every experiment is shown).
fn choose(r: &RunResults, width: usize, shown: &[&ExperimentResult], detail: bool) -> String {
    let all = shown.len() == r.experiments.len();
    let of_shown = |id: &String| shown.iter().any(|e| e.metric(id).is_some());
    let answers: Vec<_> = r
        .advice
        .iter()
        .filter(|a| all || a.rests_on.iter().any(of_shown))
        .collect();
    if answers.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nWhat to choose on this machine\n");
    for a in answers {
        let condition = a
            .condition
            .as_deref()
            .map_or(String::new(), |c| format!(" ({c})"));
        out.push_str(&wrap(
            &format!("{}{condition}: {}", a.topic, a.claim),
            width,
            "  ",
            "    ",
        ));
        if detail && !a.rests_on.is_empty() {
            out.push_str(&wrap(
                &format!("rests on {}", a.rests_on.join(", ")),
                width,
                "    ",
                "      ",
            ));
        }
    }
    out
}

/// The warnings that matter, then the files.
fn closing(r: &RunResults, width: usize, files: Files) -> String {
    let mut out = String::new();
    // A busy machine at start says what the competing tasks at start would: the terminal
    // gives the one (the results file and the report keep both).
    let busy = r.warnings.iter().any(|w| w.kind == "busy_machine");
    let warnings: Vec<_> = r
        .warnings
        .iter()
        .filter(|w| !INFORMATIONAL.contains(&w.kind.as_str()))
        .filter(|w| !(busy && w.kind == "competing_tasks_start"))
        .collect();
    if !warnings.is_empty() {
        out.push_str("\nWarnings\n");
        for w in warnings {
            out.push_str(&wrap(&w.text, width, "  ", "    "));
        }
    }
    if let Some(sig) = &r.interrupted_by {
        out.push_str(&wrap(
            &format!("interrupted by {sig}: the figures finished before it are kept"),
            width,
            "",
            "  ",
        ));
    }
    if !files.is_empty() {
        out.push('\n');
    }
    for (what, path) in files {
        out.push_str(&format!("{what}: {path}\n"));
    }
    out
}

/// What follows the full tables of `--detail`: the answers and the closing lines, so that the
/// files are the last lines whichever output was asked for.
pub fn tail(r: &RunResults, width: usize, files: Files) -> String {
    let all: Vec<&ExperimentResult> = r.experiments.iter().collect();
    let mut out = choose(r, width, &all, true);
    out.push_str(&closing(r, width, files));
    out
}

#[cfg(test)]
mod tests {
    use super::aligned_rows;

    fn row(id: &str, now: &str, spread: &str, tail: &str) -> [String; 4] {
        [id.into(), now.into(), spread.into(), tail.into()]
    }

    #[test]
    fn a_row_too_wide_for_the_columns_is_left_out_and_the_rest_stay_aligned() {
        let rows = vec![
            row(
                "switch.thread.futex.unpinned",
                "132.0 ns (80%) | 15201 ns (20%)",
                "bimodal",
                "[race]",
            ),
            row(
                "switch.thread.yield",
                "1346.7 ns",
                "±0.7%",
                "then 17.93 us (Ultra-1 1999), then/now 13.31x",
            ),
            row("switch.green.yield", "3.21 ns", "±0.4%", ""),
        ];
        assert_eq!(aligned_rows(&rows, 100), vec![1, 2]);
        // Wide enough for all: nothing is left out.
        assert_eq!(aligned_rows(&rows, 160), vec![0, 1, 2]);
        // Rows without a study figure always fit the columns they set.
        let plain = vec![
            row("a.long.id", "1 ns", "±1%", ""),
            row("b", "2 ns", "±2%", ""),
        ];
        assert_eq!(aligned_rows(&plain, 10), vec![0, 1]);
    }
}
