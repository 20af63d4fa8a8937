//! `threadlab doctor` in the terminal: the facts with what each means, the settings measured
//! A/B as one table (knob, figure, off, on, effect with its interval, CPU cost, how to apply),
//! how to apply each, what could not be tried and why, where a wake-up's time goes, and what
//! to change. It reads the doctor experiment's tables from the results, like every reporter.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};

use crate::report::table::{heading, warning_lines, wrap};
use crate::results::ids::doctor;
use crate::results::{ExperimentResult, RunResults, Status};

/// The whole doctor report for a terminal `width` columns wide.
pub fn render(r: &RunResults, width: usize) -> String {
    let mut out = heading("threadlab doctor", r, &r.mode, width);
    out.push_str(&warning_lines(r, width));
    let Some(e) = r.experiments.iter().find(|e| e.name == "doctor") else {
        out.push_str("\nNo doctor results in this file.\n");
        return out;
    };
    if e.status != Status::Ok {
        out.push_str(&wrap(
            &format!(
                "\ndoctor {:?}: {}",
                e.status,
                e.reason.as_deref().unwrap_or("no reason given")
            ),
            width,
            "",
            "  ",
        ));
    }
    out.push_str(&facts(e, width));
    out.push_str(&knobs(e, width));
    out.push_str(&apply(e, width));
    for t in e.tables.iter().filter(|t| doctor::is_split_table(&t.id)) {
        out.push_str(&format!("\n{}\n", t.title));
        out.push_str(&grid(&t.header, &t.rows, width));
        out.push_str(&wrap(&t.note, width, "  ", "  "));
    }
    if let Some(t) = table_of(e, doctor::RESTORED) {
        out.push_str(&format!("\n{}\n", t.title));
        out.push_str(&grid(&t.header, &t.rows, width));
    }
    if let Some(c) = &e.conclusion {
        out.push('\n');
        out.push_str(&wrap(&format!("→ {c}"), width, "", "  "));
    }
    out
}

/// The doctor's table `name` (`doctor::FACTS`, ...).
pub(crate) fn table_of<'a>(
    e: &'a ExperimentResult,
    name: &str,
) -> Option<&'a crate::results::Table> {
    let id = doctor::table(name);
    e.tables.iter().find(|t| t.id == id)
}

fn facts(e: &ExperimentResult, width: usize) -> String {
    let Some(t) = table_of(e, doctor::FACTS) else {
        return String::new();
    };
    let mut out = format!("\n{}\n", t.title);
    for row in &t.rows {
        out.push_str(&wrap(
            &format!("{}: {}", row[0], row[1]),
            width,
            "  ",
            "      ",
        ));
        out.push_str(&wrap(&row[2], width, "      ", "      "));
    }
    out
}

fn knobs(e: &ExperimentResult, width: usize) -> String {
    let Some(t) = table_of(e, doctor::KNOBS) else {
        return String::new();
    };
    let mut out = format!("\n{}\n", t.title);
    // The program call goes to the "how to apply" section below, where it has room.
    let header: Vec<String> = t.header.iter().take(6).cloned().collect();
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| r.iter().take(6).cloned().collect())
        .collect();
    out.push_str(&grid(&header, &rows, width));
    out.push_str(&wrap(&t.note, width, "  ", "  "));
    out
}

fn apply(e: &ExperimentResult, width: usize) -> String {
    let Some(t) = table_of(e, doctor::APPLY) else {
        return String::new();
    };
    let mut out = String::from("\nHow to apply each setting\n");
    let mut not_here = String::from("\nNot tried here, and why\n");
    for row in &t.rows {
        let (id, title, program, machine, here) = (&row[0], &row[1], &row[2], &row[3], &row[4]);
        if let Some(why) = here.strip_prefix("not tried here: ") {
            not_here.push_str(&wrap(
                &format!("{id} ({title}): {why}"),
                width,
                "  ",
                "      ",
            ));
            continue;
        }
        out.push_str(&wrap(&format!("{id}: {title}"), width, "  ", "      "));
        out.push_str(&wrap(
            &format!("program: {program}"),
            width,
            "      ",
            "        ",
        ));
        out.push_str(&wrap(
            &format!("machine: {machine}"),
            width,
            "      ",
            "        ",
        ));
    }
    out.push_str(&not_here);
    out
}

/// A table whose cells are cut to fit `width`: every column gets an equal share at most.
fn grid(header: &[String], rows: &[Vec<String>], width: usize) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Disabled);
    t.force_no_tty();
    t.set_header(header.to_vec());
    let ncol = header.len().max(1);
    let natural: usize = (0..ncol)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .chain(header.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
                + 3
        })
        .sum::<usize>()
        + 1;
    let share = (width.saturating_sub(3 * ncol + 1) / ncol).max(8);
    for r in rows {
        let cells: Vec<Cell> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let text = if natural > width {
                    crate::report::short_note(c, share)
                } else {
                    c.clone()
                };
                let numeric =
                    c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '×' || ch == '-');
                let cell = Cell::new(text);
                if numeric && i > 1 {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                }
            })
            .collect();
        t.add_row(cells);
    }
    let mut out = t.to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Table as DataTable;

    fn result() -> RunResults {
        let mut facts = DataTable::new("doctor.facts", "Facts", &["fact", "here", "meaning"]);
        facts.row(vec![
            "cpuidle".into(),
            "haltpoll".into(),
            "an idle CPU halts".into(),
        ]);
        let mut knobs = DataTable::new(
            "doctor.knobs",
            "Knobs",
            &["knob", "figure", "off", "on", "effect", "CPU", "how"],
        );
        knobs.row(vec![
            "idle_latency".into(),
            "wakeup".into(),
            "25 us".into(),
            "3 us".into(),
            "×0.12 [0.1, 0.15] lower".into(),
            "40% → 200%".into(),
            "open /dev/cpu_dma_latency".into(),
        ]);
        let mut apply = DataTable::new("doctor.apply", "Apply", &["k", "t", "p", "m", "h"]);
        apply.row(vec![
            "idle_latency".into(),
            "Idle limit".into(),
            "open /dev/cpu_dma_latency, write 0".into(),
            "tuned latency-performance".into(),
            "measured: on vs off".into(),
        ]);
        apply.row(vec![
            "smt_sibling".into(),
            "SMT".into(),
            "affinity".into(),
            "taskset".into(),
            "not tried here: no SMT here".into(),
        ]);
        let e = ExperimentResult {
            wall_s: 1.0,
            tables: vec![facts, knobs, apply],
            conclusion: Some("Hold the limit.".into()),
            ..ExperimentResult::new("doctor", Status::Ok)
        };
        RunResults {
            threadlab_version: "0".into(),
            ..RunResults::new("full", vec![e])
        }
    }

    #[test]
    fn every_section_appears_and_lines_fit() {
        let text = render(&result(), 100);
        for needle in [
            "cpuidle: haltpoll",
            "an idle CPU halts",
            "×0.12 [0.1, 0.15] lower",
            "program: open /dev/cpu_dma_latency, write 0",
            "machine: tuned latency-performance",
            "smt_sibling (SMT): no SMT here",
            "→ Hold the limit.",
        ] {
            assert!(text.contains(needle), "{needle} missing in\n{text}");
        }
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    }
}
