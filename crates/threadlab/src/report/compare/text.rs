//! The comparison of two runs as text: the rule applied, the machines, the table, the summary.

use super::*;

/// The rule in one paragraph, with this comparison's numbers.
pub fn rule_text(c: &Comparison) -> String {
    format!(
        "Changed = Mann-Whitney U p < {} over the trials, after Holm's correction over the {} \
         metrics with enough trials to be tested, and the bootstrap 95% interval of B/A ({} \
         resamples) wholly beyond the metric's own noise floor: the largest of {}% (--noise), \
         each run's IQR/median between trials, each run's CPU drift during the experiment{} \
         (and, for a memory-bound figure, the memory walk's move). A \
         change whose regime changed too (the CPUs' distance, two clusters of trials) is \
         unstable, not slower. 'detects': the smallest change this pair could have flagged. See \
         docs/compare.md.",
        c.options.alpha,
        c.family,
        c.options.resamples,
        crate::report::fmt_tick(c.options.noise_pct),
        if c.same_machine() {
            ", how far the CPU's speed moved between the runs (beside the kept trials)"
        } else {
            ""
        }
    )
}

/// The banner for files from different machines or kernels, if any.
pub fn machines_banner(c: &Comparison) -> Option<String> {
    (!c.same_machine()).then(|| {
        format!(
            "A and B ran on different machines or kernels ({}): the tests compare the machines, \
             not the code; the ratios still hold.",
            c.machine_differences.join("; ")
        )
    })
}

/// B/A with its interval, bounded in width whatever the medians.
pub fn fmt_ratio(r: &Row) -> String {
    match (r.ratio, r.ci) {
        (Some(x), Some((lo, hi))) => format!(
            "{} [{}, {}]",
            crate::measure::units::fmt_fixed(x, 3),
            crate::measure::units::fmt_fixed(lo, 3),
            crate::measure::units::fmt_fixed(hi, 3)
        ),
        (Some(x), None) => crate::measure::units::fmt_fixed(x, 3),
        _ => "-".into(),
    }
}

pub(super) fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.001 => format!("{p:.1e}"),
        Some(p) => format!("{p:.3}"),
        None => "-".into(),
    }
}

/// The smallest change the pair could have flagged: "±6.1%", or "-" when too few trials.
pub fn fmt_detectable(r: &Row) -> String {
    match r.detectable_pct {
        Some(d) => format!("±{}%", crate::measure::units::fmt_fixed(d, 1)),
        None => "-".into(),
    }
}

/// The verdict as a reader wants it: "SLOWER +30.2%".
pub fn verdict_text(r: &Row) -> String {
    match r.verdict {
        Verdict::Slower => format!(
            "SLOWER +{}%",
            crate::measure::units::fmt_fixed(r.slowdown_pct().unwrap_or(0.0), 1)
        ),
        Verdict::Faster => match r.ratio {
            Some(x) if r.direction == Direction::HigherIsBetter => {
                format!(
                    "faster +{}%",
                    crate::measure::units::fmt_fixed((x - 1.0) * 100.0, 1)
                )
            }
            Some(x) if x > 0.0 => format!(
                "faster {}%",
                crate::measure::units::fmt_fixed((1.0 - x) * 100.0, 1)
            ),
            _ => "faster".into(),
        },
        Verdict::Changed => match r.ratio {
            Some(x) => format!(
                "CHANGED {}{}%",
                if x >= 1.0 { "+" } else { "" },
                crate::measure::units::fmt_fixed((x - 1.0) * 100.0, 1)
            ),
            None => "CHANGED".into(),
        },
        Verdict::Unstable => match r.ratio {
            Some(x) => format!(
                "unstable {}{}%",
                if x >= 1.0 { "+" } else { "" },
                crate::measure::units::fmt_fixed((x - 1.0) * 100.0, 1)
            ),
            None => "unstable".into(),
        },
        Verdict::Untested => format!("not tested: {}", r.why),
        v => v.word().into(),
    }
}

pub(super) fn new_table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_content_arrangement(ContentArrangement::Disabled);
    t.force_no_tty();
    t
}

/// The terminal text of a two-file comparison.
pub fn render_pair_text(c: &Comparison) -> String {
    let mut out = String::from("threadlab compare\n");
    for (k, r) in [("A", &c.a), ("B", &c.b)] {
        out.push_str(&format!(
            "  {k}  {} · {} run · {} · threadlab {}\n     {}\n",
            r.label, r.mode, r.started_at, r.version, r.machine
        ));
    }
    if let Some(b) = machines_banner(c) {
        out.push_str(&format!("\n!! {b}\n"));
    }
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&format!("\n{}\n", rule_text(c)));
    let mut experiments: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !experiments.contains(&r.experiment.as_str()) {
            experiments.push(&r.experiment);
        }
    }
    for e in experiments {
        out.push_str(&format!("\n{e}\n"));
        let mut t = new_table();
        // A flags column only where a metric of this experiment carries flags.
        let flagged = c
            .rows
            .iter()
            .any(|r| r.experiment == e && r.flags_text().is_some());
        let mut header = vec![
            "metric",
            "A",
            "B",
            "B/A [95% CI]",
            "p (Holm)",
            "floor",
            "detects",
            "verdict",
        ];
        if flagged {
            header.push("flags");
        }
        t.set_header(header);
        for r in c.rows.iter().filter(|r| r.experiment == e) {
            let mut cells = vec![
                Cell::new(&r.id),
                Cell::new(fmt_with_unit(r.a.median, r.unit)).set_alignment(CellAlignment::Right),
                Cell::new(fmt_with_unit(r.b.median, r.unit)).set_alignment(CellAlignment::Right),
                Cell::new(fmt_ratio(r)).set_alignment(CellAlignment::Right),
                Cell::new(fmt_p(r.p_holm)).set_alignment(CellAlignment::Right),
                Cell::new(format!(
                    "{}%",
                    crate::measure::units::fmt_fixed(r.floor_pct, 1)
                ))
                .set_alignment(CellAlignment::Right),
                Cell::new(fmt_detectable(r)).set_alignment(CellAlignment::Right),
                Cell::new(verdict_text(r)),
            ];
            if flagged {
                cells.push(Cell::new(r.flags_text().unwrap_or_default()));
            }
            t.add_row(cells);
        }
        for col in t.column_iter_mut() {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
        out.push_str(&t.to_string());
        out.push('\n');
        for r in c
            .rows
            .iter()
            .filter(|r| r.experiment == e && r.verdict == Verdict::Unstable)
        {
            out.push_str(&format!(
                "  unstable {}: {}\n",
                r.id,
                r.regime.as_deref().unwrap_or("")
            ));
        }
    }
    for (what, ids) in [("only in A", &c.only_in_a), ("only in B", &c.only_in_b)] {
        if !ids.is_empty() {
            out.push_str(&format!("\n{what}: {}\n", ids.join(", ")));
        }
    }
    out.push_str(&format!("\n{}\n", summary(c)));
    if let Some(pct) = c.options.fail_if_slower_pct {
        let slow = c.slower_than(pct);
        if slow.is_empty() {
            out.push_str(&format!(
                "--fail-if-slower {}: nothing is slower by more than {}%.\n",
                crate::report::fmt_tick(pct),
                crate::report::fmt_tick(pct)
            ));
        } else {
            let list: Vec<String> = slow
                .iter()
                .map(|r| {
                    format!(
                        "{} +{}%",
                        r.id,
                        crate::measure::units::fmt_fixed(r.slowdown_pct().unwrap_or(0.0), 1)
                    )
                })
                .collect();
            out.push_str(&format!(
                "--fail-if-slower {}: slower by more than {}%: {} (exit status 1).\n",
                crate::report::fmt_tick(pct),
                crate::report::fmt_tick(pct),
                list.join(", ")
            ));
        }
        out.push_str(&reach_text(c, pct));
        out.push('\n');
    }
    out
}

/// The gate's reach in a sentence or two: whether this pair could have shown each metric the
/// gate covers `pct` percent slower, and, where not, why, grouped (the largest groups first).
pub fn reach_text(c: &Comparison, pct: f64) -> String {
    let (covered, blind) = c.blind_to(pct);
    let tick = crate::report::fmt_tick(pct);
    if blind.is_empty() {
        return format!(
            "This pair could have shown a {tick}% slowdown in each of the {covered} metrics the \
             gate covers."
        );
    }
    let mut groups: Vec<(Blind<'_>, usize)> = Vec::new();
    for (_, why) in &blind {
        match groups.iter_mut().find(|g| g.0 == *why) {
            Some(g) => g.1 += 1,
            None => groups.push((*why, 1)),
        }
    }
    // Stable: equal counts keep the order the rows came in.
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    let shown = groups.len().min(4);
    let mut parts: Vec<String> = groups[..shown]
        .iter()
        .map(|(why, n)| format!("{n} {why}"))
        .collect();
    let rest: usize = groups[shown..].iter().map(|g| g.1).sum();
    if rest > 0 {
        parts.push(format!("{rest} for other reasons"));
    }
    format!(
        "This pair could not have shown a {tick}% slowdown in {} of the {covered} metrics the \
         gate covers ('detects' wider than {tick}%, or no test): {}. The gate says nothing about \
         them: measure both sides again while the machine is quiet, or pool more runs of each \
         (--also-a, --also-b).",
        blind.len(),
        parts.join(", ")
    )
}

/// "2 slower (a +30.2%, b +12.0%), 1 faster, ..."
pub fn summary(c: &Comparison) -> String {
    let list = |v: Verdict| -> String {
        let ids: Vec<String> = c
            .rows
            .iter()
            .filter(|r| r.verdict == v)
            .map(|r| r.id.clone())
            .collect();
        if ids.is_empty() || ids.len() > 12 {
            String::new()
        } else {
            format!(" ({})", ids.join(", "))
        }
    };
    format!(
        "{} metrics compared: {} slower{}, {} faster{}, {} changed{}, {} unstable{}, {} within \
         noise, {} the same, {} not tested (too few trials or no ratio).",
        c.rows.len(),
        c.count(Verdict::Slower),
        list(Verdict::Slower),
        c.count(Verdict::Faster),
        list(Verdict::Faster),
        c.count(Verdict::Changed),
        list(Verdict::Changed),
        c.count(Verdict::Unstable),
        list(Verdict::Unstable),
        c.count(Verdict::WithinNoise),
        c.count(Verdict::NotSignificant),
        c.count(Verdict::Untested)
    )
}
