//! From an A/B to the results file: `doctor.<knob>.<figure>.{off,on,effect}` metrics (and
//! `doctor.<knob>.cpu.…` for the cost), the knob table's rows, and the effects the conclusion
//! and the report rank.

use super::ab::{FigureRun, KnobRun};
use super::figures::{Measure, Setup};
use super::knobs::Knob;
use crate::experiments::Outcome;
use crate::measure::significance::median_interval;
use crate::measure::stats::median;
use crate::measure::units::{fmt_value, Direction, Unit};
use crate::results::flag::{add_flag, Flag};
use crate::results::ids::doctor;
use crate::results::Metric;

/// One figure's effect, for the tables and the conclusion.
#[derive(Debug, Clone)]
pub struct Effect {
    pub knob: &'static str,
    pub figure: &'static str,
    pub unit: Unit,
    pub off: f64,
    pub on: f64,
    /// Median on/off over the rounds.
    pub ratio: f64,
    /// The sign test's 95% interval, when the rounds allow one.
    pub interval: Option<(f64, f64)>,
}

impl Effect {
    /// -1: the setting lowers the figure (every figure here is better lower), 1: raises it,
    /// 0: the interval holds 1 (no change shown).
    pub fn verdict(&self) -> i8 {
        match self.interval {
            Some((_, hi)) if hi < 1.0 => -1,
            Some((lo, _)) if lo > 1.0 => 1,
            _ => 0,
        }
    }

    pub fn text(&self) -> String {
        let word = match self.verdict() {
            -1 => "lower",
            1 => "higher",
            _ => "no clear change",
        };
        match self.interval {
            Some((lo, hi)) => format!(
                "×{} [{}, {}] {word}",
                fmt_value(self.ratio),
                fmt_value(lo),
                fmt_value(hi)
            ),
            None => format!(
                "×{} (too few rounds for an interval)",
                fmt_value(self.ratio)
            ),
        }
    }
}

fn with_unit(v: f64, unit: Unit) -> String {
    crate::report::fmt_with_unit(v, unit)
}

/// Records a knob's metrics into `out` and returns its effects and its table rows.
pub fn record(
    knob: &Knob,
    run: &KnobRun,
    guest: bool,
    out: &mut Outcome,
) -> (Vec<Effect>, Vec<Vec<String>>) {
    let mut effects = Vec::new();
    let mut rows = Vec::new();
    let cost = cost_text(run);
    for f in &run.figures {
        let Some(e) = record_figure(knob, run, f, guest, out) else {
            continue;
        };
        rows.push(vec![
            knob.about.id.to_string(),
            f.figure.id.to_string(),
            with_unit(e.off, e.unit),
            with_unit(e.on, e.unit),
            e.text(),
            cost.clone(),
            short_program(&knob.about.program),
        ]);
        effects.push(e);
    }
    record_cost(knob, run, guest, out);
    (effects, rows)
}

/// The knob's cost in one cell: CPU burned off -> on.
fn cost_text(run: &KnobRun) -> String {
    if run.cpu_off.is_empty() {
        return "not readable".into();
    }
    format!("{:.0}% → {:.0}%", median(&run.cpu_off), median(&run.cpu_on))
}

/// The call, cut at its first clause, for the knob table (the whole text is in the apply
/// table).
fn short_program(p: &str) -> String {
    crate::report::short_note(p, 60)
}

fn phases_note(run: &KnobRun, f: &FigureRun) -> String {
    format!(
        "one value per phase (the mean of about {} operations); {} phases with the setting \
         off alternated with {} with it on (off, on, off, on ...), after a warm-up round",
        f.ops_per_phase, run.rounds, run.rounds
    )
}

/// In a guest, a figure that wakes a thread asleep on another vCPU times how fast the host
/// brings that vCPU back, which moves from run to run while a run's phases agree. In 19
/// `--full` doctor runs of this week's builds on a 2-vCPU KVM guest, the cross-CPU loopback
/// echo read 39.7-52.3 us in 16 and 61.6-65.3 us in 3, while a run's phases agreed within
/// about 3%, and the CPU burned during it followed (74.7-75.6% in those 3, 78.3-82.4% in the
/// others). Such figures, and the CPU burned during them, carry idle_vcpu, so compare reads
/// their changes as unstable; the effect rows take off and on in the same round and keep
/// their gate.
fn idle_vcpu(guest: bool, setup: &Setup, measures: &[Measure]) -> bool {
    guest && measures.iter().any(|&m| setup.wakes_other_cpu(m))
}

fn record_figure(
    knob: &Knob,
    run: &KnobRun,
    f: &FigureRun,
    guest: bool,
    out: &mut Outcome,
) -> Option<Effect> {
    let base = doctor::figure(knob.about.id, f.figure.id);
    let (off_place, on_place) = (
        knob.off.placement_of(f.measure),
        knob.on.placement_of(f.measure),
    );
    let dir = Direction::LowerIsBetter;
    let mut push = |suffix: &str, values: &[f64], (setup, place): (&Setup, &str), label: &str| {
        let mut m = Metric::from_values(
            &doctor::part(knob.about.id, f.figure.id, suffix),
            f.figure.unit,
            values,
            f.ops_per_phase.max(1),
            place,
            format!("{}; {label}; {}", f.figure.what, phases_note(run, f)),
        )?
        .with_direction(dir);
        if idle_vcpu(guest, setup, &[f.measure]) {
            add_flag(&mut m, Flag::IdleVcpu);
        }
        let med = m.median;
        out.add(m);
        Some(med)
    };
    let off = push(
        doctor::OFF,
        &f.off,
        (&knob.off, &off_place),
        &knob.off_label,
    )?;
    let on = push(doctor::ON, &f.on, (&knob.on, &on_place), &knob.on_label)?;
    let ratios = f.ratios();
    let id = doctor::part(knob.about.id, f.figure.id, doctor::EFFECT);
    if ratios.is_empty() {
        out.skip(
            &id,
            "the figure was 0 in every phase with the setting off, so no ratio exists",
        );
        return None;
    }
    let interval = median_interval(&ratios);
    let place = if off_place == on_place {
        off_place.clone()
    } else {
        format!("{on_place} vs {off_place}")
    };
    let note = format!(
        "{base}.on / {base}.off round by round ({}: {} vs {}); the median of {} rounds{}",
        knob.about.title,
        knob.on_label,
        knob.off_label,
        ratios.len(),
        match interval {
            Some(i) => format!(
                " with the sign test's distribution-free 95% interval [{}, {}] (coverage at \
                 least 95%); below 1 the setting lowers the figure",
                fmt_value(i.lo),
                fmt_value(i.hi)
            ),
            None => "; too few rounds for a 95% interval (6 are needed)".into(),
        }
    );
    let mut m = Metric::from_values(&id, Unit::Ratio, &ratios, 1, place, note)?;
    m.interval = interval.map(|i| [i.lo, i.hi]);
    m.ratio_of = Some([
        doctor::part(knob.about.id, f.figure.id, doctor::ON),
        doctor::part(knob.about.id, f.figure.id, doctor::OFF),
    ]);
    let ratio = m.median;
    out.add(m);
    Some(Effect {
        knob: knob.about.id,
        figure: f.figure.id,
        unit: f.figure.unit,
        off,
        on,
        ratio,
        interval: interval.map(|i| (i.lo, i.hi)),
    })
}

fn record_cost(knob: &Knob, run: &KnobRun, guest: bool, out: &mut Outcome) {
    let base = doctor::figure(knob.about.id, doctor::CPU);
    if run.cpu_off.is_empty() {
        out.skip(&base, run.cost_source.note());
        return;
    }
    let what = format!(
        "{}; during every phase of this setting's figures ({} with the setting off, {} with it \
         on), one value per round",
        run.cost_source.note(),
        knob.off_label,
        knob.on_label
    );
    for (suffix, values, setup) in [
        (doctor::OFF, &run.cpu_off, &knob.off),
        (doctor::ON, &run.cpu_on, &knob.on),
    ] {
        if let Some(mut m) = Metric::from_values(
            &doctor::part(knob.about.id, doctor::CPU, suffix),
            Unit::Percent,
            values,
            1,
            "the CPUs used",
            what.clone(),
        ) {
            if idle_vcpu(guest, setup, &knob.measures) {
                add_flag(&mut m, Flag::IdleVcpu);
            }
            out.add(m.with_direction(Direction::LowerIsBetter));
        }
    }
    let ratios: Vec<f64> = run
        .cpu_off
        .iter()
        .zip(&run.cpu_on)
        .filter(|(off, _)| **off > 0.0)
        .map(|(off, on)| on / off)
        .collect();
    let interval = median_interval(&ratios);
    if let Some(mut m) = Metric::from_values(
        &doctor::part(knob.about.id, doctor::CPU, doctor::EFFECT),
        Unit::Ratio,
        &ratios,
        1,
        "the CPUs used",
        format!("{base}.on / {base}.off round by round: how many times the CPU burned grows"),
    ) {
        m.interval = interval.map(|i| [i.lo, i.hi]);
        m.ratio_of = Some([
            doctor::part(knob.about.id, doctor::CPU, doctor::ON),
            doctor::part(knob.about.id, doctor::CPU, doctor::OFF),
        ]);
        out.add(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(interval: Option<(f64, f64)>) -> Effect {
        Effect {
            knob: "k",
            figure: "f",
            unit: Unit::Us,
            off: 25.0,
            on: 3.0,
            ratio: 0.12,
            interval,
        }
    }

    #[test]
    fn the_verdict_follows_the_interval_not_the_median() {
        assert_eq!(effect(Some((0.1, 0.15))).verdict(), -1);
        assert_eq!(effect(Some((1.1, 1.3))).verdict(), 1);
        assert_eq!(effect(Some((0.1, 1.3))).verdict(), 0);
        assert_eq!(effect(None).verdict(), 0);
        assert!(effect(Some((0.1, 0.15))).text().contains("lower"));
        assert!(effect(None).text().contains("too few rounds"));
    }
}
