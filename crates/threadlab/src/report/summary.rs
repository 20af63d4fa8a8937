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

/// The headline figures, aligned: id, median (or modes), spread, flags, then the study's
/// figure and then/now where it has one. Nothing is cut: a long row wraps.
fn headline(e: &ExperimentResult, width: usize) -> String {
    let rows: Vec<[String; 4]> = e
        .headline
        .iter()
        .filter_map(|id| e.metric(id))
        .map(|m| {
            let (then, ratio) = fmt_then(m);
            let mut spread = fmt_spread(m);
            if !m.flags.is_empty() {
                spread.push_str(&format!(" [{}]", m.flags.join(", ")));
            }
            let then = if then == "-" {
                String::new()
            } else {
                format!("then {then}, then/now {ratio}")
            };
            [m.id.clone(), fmt_now(m), spread, then]
        })
        .collect();
    let col = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (id_w, now_w, spread_w) = (col(0), col(1), col(2));
    let mut out = String::new();
    for [id, now, spread, then] in &rows {
        let figure = format!("  {id:<id_w$}  {now:>now_w$}  {spread:<spread_w$}");
        let line = format!("{figure}  {then}");
        // Unaligned, when another row's wide figure (two modes) pushes this one past the width.
        let plain = format!("  {id}  {now}  {spread}  {then}");
        if line.trim_end().chars().count() <= width {
            out.push_str(line.trim_end());
            out.push('\n');
        } else if plain.trim_end().chars().count() <= width {
            out.push_str(plain.trim_end());
            out.push('\n');
        } else if figure.trim_end().chars().count() <= width {
            // The study's figure on a line of its own keeps the columns aligned.
            out.push_str(figure.trim_end());
            out.push('\n');
            if !then.is_empty() {
                out.push_str(&wrap(then, width, "      ", "      "));
            }
        } else {
            out.push_str(&wrap(&line, width, "  ", "      "));
        }
    }
    out
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
    let warnings: Vec<_> = r
        .warnings
        .iter()
        .filter(|w| !INFORMATIONAL.contains(&w.kind.as_str()))
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
