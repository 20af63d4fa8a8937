//! doctor's tables and conclusion, as data in the results file: the facts, every knob's
//! effect per figure, how to apply each knob (tried or not), where a wake-up's time goes, and
//! the machine-wide values checked after they were restored.

use std::collections::BTreeMap;

use super::ab::KnobRun;
use super::attribution::Split;
use super::facts::{facts, table as facts_table};
use super::knobs::{Knob, Planned};
use super::machine::{Check, Machine};
use super::record::{record, Effect};
use crate::experiments::{Ctx, Outcome};
use crate::measure::units::fmt_value;
use crate::results::Table;

/// A measured knob's id and the CPU it burned, off and on (% of one CPU).
type KnobCost = (&'static str, Option<(f64, f64)>);

/// What the run found so far.
pub struct Report {
    pub effects: Vec<Effect>,
    /// Per knob measured: its id and CPU burned (off %, on %).
    costs: Vec<KnobCost>,
    knob_rows: Vec<Vec<String>>,
    apply_rows: Vec<Vec<String>>,
    replayed: Vec<String>,
    split: Option<Split>,
    not_tried: usize,
    /// The lab runs in a virtual machine: figures that wake another, idle vCPU carry
    /// idle_vcpu.
    guest: bool,
}

impl Report {
    pub fn new(replayed: Vec<String>, guest: bool) -> Report {
        Report {
            effects: Vec::new(),
            costs: Vec::new(),
            knob_rows: Vec::new(),
            apply_rows: Vec::new(),
            replayed,
            split: None,
            not_tried: 0,
            guest,
        }
    }

    pub fn measured(&mut self, k: &Knob, run: &KnobRun, out: &mut Outcome) {
        let (effects, rows) = record(k, run, self.guest, out);
        self.effects.extend(effects);
        self.knob_rows.extend(rows);
        let med = crate::measure::stats::median;
        self.costs.push((
            k.about.id,
            (!run.cpu_off.is_empty()).then(|| (med(&run.cpu_off), med(&run.cpu_on))),
        ));
        let mut tried = format!(
            "measured: {} vs {}; while measured, scoped to {}",
            k.on_label, k.off_label, k.scope
        );
        if let Some((off, on)) = run.huge_backed {
            tried.push_str(&format!(
                "; huge pages backed {off:.0}% of the buffer off, {on:.0}% on"
            ));
        }
        self.apply_rows.push(vec![
            k.about.id.to_string(),
            k.about.title.to_string(),
            k.about.program.clone(),
            k.about.machine.clone(),
            tried,
        ]);
    }

    pub fn not_tried(&mut self, p: &Planned, reason: &str, out: &mut Outcome) {
        self.not_tried += 1;
        out.skip(&format!("doctor.{}", p.id()), reason);
        let (title, program, machine) = match p {
            Planned::Try(k) => (
                k.about.title,
                k.about.program.clone(),
                k.about.machine.clone(),
            ),
            Planned::NotHere(n) => (
                n.about.title,
                n.about.program.clone(),
                n.about.machine.clone(),
            ),
        };
        self.apply_rows.push(vec![
            p.id().to_string(),
            title.to_string(),
            program,
            machine,
            format!("not tried here: {reason}"),
        ]);
    }

    pub fn split(&mut self, s: Split) {
        self.split = Some(s);
    }

    /// Writes the tables and the conclusion into `out`.
    pub fn finish(
        &mut self,
        ctx: &Ctx,
        out: &mut Outcome,
        machine: &std::result::Result<Machine, String>,
        steal: Option<f64>,
    ) {
        let tracing = self
            .split
            .as_ref()
            .map_or("not tried".to_string(), |s| s.tracing.clone());
        out.tables
            .push(facts_table(&facts(ctx.env, steal, &tracing)));
        let mut knobs = Table::new(
            "doctor.knobs",
            "Settings measured A/B on this machine",
            &[
                "knob",
                "figure",
                "off",
                "on",
                "effect on/off [95% interval]",
                "CPU burned off → on",
                "how to apply (program)",
            ],
        );
        for r in &self.knob_rows {
            knobs.row(r.clone());
        }
        knobs.note = "Medians over the rounds; the effect is the median of the per-round on/off \
                      ratios with the sign test's interval (lower is better for every figure \
                      here); CPU burned is busy or polling time, % of one CPU, over the \
                      setting's phases."
            .into();
        out.tables.push(knobs);
        let mut apply = Table::new(
            "doctor.apply",
            "How to apply each setting",
            &["knob", "setting", "as a program", "for the machine", "here"],
        );
        for r in &self.apply_rows {
            apply.row(r.clone());
        }
        out.tables.push(apply);
        if let Some(s) = &self.split {
            out.tables.extend(s.tables.iter().cloned());
        }
        let checks = machine.as_ref().map(Machine::checks).unwrap_or_default();
        if !checks.is_empty() {
            out.tables.push(checks_table(&checks));
        }
        out.conclusion = Some(self.conclusion(&checks));
    }

    fn conclusion(&self, checks: &[Check]) -> String {
        let mut s = String::new();
        // Per knob, its clear gains, strongest first; knobs ordered by their strongest gain.
        let mut by_knob: Vec<(&str, Vec<&Effect>)> = Vec::new();
        for e in self.effects.iter().filter(|e| e.verdict() < 0) {
            match by_knob.iter_mut().find(|(k, _)| *k == e.knob) {
                Some((_, v)) => v.push(e),
                None => by_knob.push((e.knob, vec![e])),
            }
        }
        for (_, v) in by_knob.iter_mut() {
            v.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
        }
        by_knob.sort_by(|a, b| a.1[0].ratio.total_cmp(&b.1[0].ratio));
        if by_knob.is_empty() {
            s.push_str("No setting tried here lowered a figure clearly (every interval holds 1). ");
        } else {
            s.push_str("What to change on this machine, strongest first: ");
            let parts: Vec<String> = by_knob
                .iter()
                .map(|(knob, effects)| {
                    let cost = self
                        .costs
                        .iter()
                        .find(|c| c.0 == *knob)
                        .and_then(|c| c.1)
                        .map_or(String::new(), |(off, on)| {
                            format!(" for CPU burned {off:.0}% → {on:.0}%")
                        });
                    let figures: Vec<String> = effects
                        .iter()
                        .map(|e| {
                            // A gain as a divisor ("122x less" reads, "×8.18e-3" does not).
                            format!(
                                "{} {} → {} ({}x less)",
                                e.figure,
                                crate::report::fmt_with_unit(e.off, e.unit),
                                crate::report::fmt_with_unit(e.on, e.unit),
                                fmt_value(1.0 / e.ratio.max(1e-12))
                            )
                        })
                        .collect();
                    format!("{knob}: {}{cost}", figures.join(", "))
                })
                .collect();
            s.push_str(&parts.join("; "));
            s.push_str(". ");
        }
        let worse: Vec<String> = self
            .effects
            .iter()
            .filter(|e| e.verdict() > 0)
            .map(|e| format!("{} on {} (×{})", e.knob, e.figure, fmt_value(e.ratio)))
            .collect();
        if !worse.is_empty() {
            s.push_str(&format!("Made worse: {}. ", worse.join(", ")));
        }
        let mut unclear: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for e in self.effects.iter().filter(|e| e.verdict() == 0) {
            unclear.entry(e.knob).or_default().push(e.figure);
        }
        if !unclear.is_empty() {
            let list: Vec<String> = unclear
                .iter()
                .map(|(k, f)| format!("{k} ({})", f.join(", ")))
                .collect();
            s.push_str(&format!("No clear change: {}. ", list.join("; ")));
        }
        s.push_str(&format!(
            "{} settings measured, {} not tried here (each with its reason). ",
            self.costs.len(),
            self.not_tried
        ));
        if let Some(split) = &self.split {
            s.push_str(&split.summary);
            s.push(' ');
        }
        if !checks.is_empty() {
            let bad = checks.iter().filter(|c| !c.ok()).count();
            s.push_str(&if bad == 0 {
                format!(
                    "Every machine-wide value was written back and read again as it was ({} \
                     restores checked). ",
                    checks.len()
                )
            } else {
                format!("{bad} machine-wide values did NOT read back as they were: see doctor.restored. ")
            });
        }
        for r in &self.replayed {
            s.push_str(&format!("From a run that was killed: {r}. "));
        }
        s.trim_end().to_string()
    }
}

/// Every machine-wide value, as it was before the run and as it read after the last restore.
fn checks_table(checks: &[Check]) -> Table {
    let mut t = Table::new(
        "doctor.restored",
        "Machine-wide settings: written back and read again",
        &["setting", "before", "after", "restores", "all as before"],
    );
    let mut by_path: BTreeMap<&str, Vec<&Check>> = BTreeMap::new();
    for c in checks {
        by_path.entry(c.path.as_str()).or_default().push(c);
    }
    for (path, cs) in by_path {
        let first = cs[0];
        let last = cs[cs.len() - 1];
        t.row(vec![
            path.to_string(),
            first.before.clone(),
            last.after.clone(),
            cs.len().to_string(),
            if cs.iter().all(|c| c.ok()) {
                "yes"
            } else {
                "NO"
            }
            .to_string(),
        ]);
    }
    t.note = "Each \"on\" phase wrote the setting and the end of the phase wrote the original \
              back; \"after\" is the value read back after the last one."
        .into();
    t
}
