//! The A/B runner: one setting at a time, its "off" and "on" phases alternated (off, on, off,
//! on, ...) so that a phase of the host (seconds of a co-tenant) touches both alike, each
//! round giving one on/off ratio per figure. What the "on" phases need held (a PM QoS file
//! descriptor, machine-wide values) is taken for each "on" phase and released right after it,
//! so the machine spends as little time changed as possible and an interruption finds it
//! changed for one phase at most.

use std::io::Write;
use std::time::Duration;

use super::cost::{Burned, Meter, Source};
use super::figures::{run_phase, settle_idle, Figure, Measure};
use super::knobs::{Hold, Knob};
use super::machine::{Changed, Machine};
use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// How long and how often.
#[derive(Debug, Clone, Copy)]
pub struct AbPlan {
    /// Rounds kept (a warm-up round comes first and is not kept).
    pub rounds: usize,
    /// Length of one phase of one figure.
    pub phase: Duration,
    /// Whether a knob's own longer phase applies (the full mode): shorter modes check
    /// structure or give a first look, not the throttle's once-a-second behaviour.
    pub knob_phases: bool,
}

/// One figure's values, one per round, in the figure's unit.
#[derive(Debug, Clone)]
pub struct FigureRun {
    pub measure: Measure,
    pub figure: Figure,
    pub off: Vec<f64>,
    pub on: Vec<f64>,
    /// Operations per phase, on average (what each value is the mean of).
    pub ops_per_phase: u64,
}

impl FigureRun {
    /// on / off per round, where both are finite and off is above zero.
    pub fn ratios(&self) -> Vec<f64> {
        self.off
            .iter()
            .zip(&self.on)
            .filter(|(off, on)| **off > 0.0 && off.is_finite() && on.is_finite())
            .map(|(off, on)| on / off)
            .collect()
    }
}

/// Everything one setting's A/B gave.
#[derive(Debug, Clone)]
pub struct KnobRun {
    pub figures: Vec<FigureRun>,
    /// CPU burned per round over all of the knob's phases, % of one CPU.
    pub cpu_off: Vec<f64>,
    pub cpu_on: Vec<f64>,
    pub cost_source: Source,
    /// Buffer phases: mean share backed by huge pages, off and on, %.
    pub huge_backed: Option<(f64, f64)>,
    pub rounds: usize,
}

/// What an "on" phase holds; dropping it ends the setting.
enum Held {
    Nothing,
    /// The PM QoS request lives as long as this descriptor.
    Fd(#[allow(dead_code)] std::fs::File),
    Files(#[allow(dead_code)] Vec<Changed>),
}

fn acquire(hold: &Hold, machine: &mut Option<&mut Machine>) -> Result<Held> {
    match hold {
        Hold::Nothing => Ok(Held::Nothing),
        Hold::PmQosZero => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/cpu_dma_latency")
                .map_err(|e| Error::Skip(format!("/dev/cpu_dma_latency: {e}")))?;
            f.write_all(&0i32.to_ne_bytes())
                .map_err(|e| Error::Fail(format!("writing 0 to /dev/cpu_dma_latency: {e}")))?;
            Ok(Held::Fd(f))
        }
        Hold::Files(files) => {
            let m = machine.as_deref_mut().ok_or_else(|| {
                Error::Skip("machine-wide settings may not be changed in this run".into())
            })?;
            let mut changed = Vec::new();
            for (path, value) in files {
                changed.push(m.set(path, value)?);
            }
            Ok(Held::Files(changed))
        }
    }
}

/// Whether the knob changes how idle CPUs behave, so that phases must start from the idle
/// governor's steady state.
fn touches_idle(k: &Knob) -> bool {
    !matches!(k.hold, Hold::Nothing)
}

/// Measures `knob` A/B. `cpus` are the CPUs whose burned time is the cost.
pub fn run_knob(
    knob: &Knob,
    plan: &AbPlan,
    cpus: &[usize],
    mut machine: Option<&mut Machine>,
    cancel: &Cancel,
    progress: &dyn Fn(&str),
) -> Result<KnobRun> {
    let length = knob
        .phase
        .filter(|_| plan.knob_phases)
        .unwrap_or(plan.phase);
    let settle = touches_idle(knob);
    let mut figures: Vec<FigureRun> = knob
        .measures
        .iter()
        .flat_map(|&m| {
            m.figures().iter().map(move |&f| FigureRun {
                measure: m,
                figure: f,
                off: Vec::new(),
                on: Vec::new(),
                ops_per_phase: 0,
            })
        })
        .collect();
    let (mut cpu_off, mut cpu_on) = (Vec::new(), Vec::new());
    let mut source = Source::ProcessOnly;
    let (mut huge_off, mut huge_on) = (Vec::new(), Vec::new());
    let mut ops: Vec<(Measure, u64)> = Vec::new();
    // Round 0 warms up (first faults, fresh code paths) and is not kept.
    for round in 0..=plan.rounds {
        progress(&format!(
            "doctor.{} round {round}/{}",
            knob.about.id, plan.rounds
        ));
        let (mut burned_off, mut burned_on) = (Burned::default(), Burned::default());
        for &m in &knob.measures {
            if settle && m.wakes_idle_cpus() {
                settle_idle(cpus, cancel)?;
            }
            let meter = Meter::start(cpus);
            source = meter.source();
            let off = run_phase(m, &knob.off, length, cancel)?;
            burned_off.add(meter.read());
            let held = acquire(&knob.hold, &mut machine)?;
            let meter = Meter::start(cpus);
            let on = run_phase(m, &knob.on, length, cancel);
            burned_on.add(meter.read());
            drop(held);
            let on = on?;
            if round == 0 {
                continue;
            }
            ops.push((m, off.ops + on.ops));
            if let (Some(a), Some(b)) = (off.huge_backed_pct, on.huge_backed_pct) {
                huge_off.push(a);
                huge_on.push(b);
            }
            for (i, f) in figures.iter_mut().filter(|f| f.measure == m).enumerate() {
                f.off.push(off.values[i]);
                f.on.push(on.values[i]);
            }
        }
        if round > 0 {
            if let (Some(a), Some(b)) = (burned_off.pct(), burned_on.pct()) {
                cpu_off.push(a);
                cpu_on.push(b);
            }
        }
    }
    if settle {
        // Leave the idle governor as the knob found it (see settle_idle).
        settle_idle(cpus, cancel)?;
    }
    for f in figures.iter_mut() {
        let (n, sum) = ops
            .iter()
            .filter(|(m, _)| *m == f.measure)
            .fold((0u64, 0u64), |(n, s), (_, o)| (n + 2, s + o));
        f.ops_per_phase = sum.checked_div(n).unwrap_or(0);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    Ok(KnobRun {
        figures,
        cpu_off,
        cpu_on,
        cost_source: source,
        huge_backed: (!huge_off.is_empty()).then(|| (mean(&huge_off), mean(&huge_on))),
        rounds: plan.rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::doctor::figures::Setup;
    use crate::experiments::doctor::knobs::About;

    #[test]
    fn ratios_skip_rounds_without_a_positive_off_value() {
        let f = FigureRun {
            measure: Measure::Probe,
            figure: Measure::Probe.figures()[0],
            off: vec![2.0, 0.0, 4.0, f64::NAN],
            on: vec![1.0, 1.0, 1.0, 1.0],
            ops_per_phase: 1,
        };
        assert_eq!(f.ratios(), vec![0.5, 0.25]);
    }

    #[test]
    fn a_knob_is_measured_off_and_on_round_by_round() {
        let cpus = crate::measure::placement::allowed_cpus();
        let b = *cpus.last().unwrap();
        let base = Setup::base(cpus[0], b);
        let mut on = base.clone();
        on.timer_slack_ns = Some(1);
        let knob = Knob {
            about: About {
                id: "t",
                title: "t",
                program: String::new(),
                machine: String::new(),
            },
            off_label: "off".into(),
            on_label: "on".into(),
            scope: "",
            measures: vec![Measure::Timer],
            off: base,
            on,
            hold: Hold::Nothing,
            phase: None,
        };
        let plan = AbPlan {
            rounds: 3,
            phase: Duration::from_millis(5),
            knob_phases: false,
        };
        let seen = std::sync::Mutex::new(Vec::new());
        let r = run_knob(&knob, &plan, &cpus, None, &Cancel::never(), &|s| {
            seen.lock().unwrap().push(s.to_string())
        })
        .unwrap();
        assert_eq!(r.figures.len(), 1);
        assert_eq!(r.figures[0].off.len(), 3);
        assert_eq!(r.figures[0].on.len(), 3);
        assert_eq!(
            seen.lock().unwrap().len(),
            4,
            "a warm-up round and three kept"
        );
        // A hold that needs machine changes, without a Machine, is a skip with its reason.
        let mut k = knob.clone();
        k.hold = Hold::Files(vec![("/proc/sys/kernel/x".into(), "1".into())]);
        let e = run_knob(&k, &plan, &cpus, None, &Cancel::never(), &|_| {});
        assert!(matches!(e, Err(Error::Skip(_))), "{e:?}");
    }
}
