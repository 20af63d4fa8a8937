//! `doctor`: what this machine does to threads, and what to change, measured.
//!
//! 1. The facts that shape thread performance here (`facts`), each with what it means.
//! 2. Settings a program or root can change at run time (`knobs`), each measured A/B in one
//!    run (`ab`: off, on, off, on ...) on the figures it moves (`figures`), with the effect as
//!    an on/off ratio and its 95% interval, the CPU it burns (`cost`) and how to apply it
//!    (`record`). What cannot be tried here is listed with the reason.
//! 3. Where a cross-CPU wake-up's time goes (`attribution`): traced where the kernel lets us,
//!    inferred from the A/B otherwise.
//! 4. Machine-wide settings only with `--allow-machine-changes`, each restored and checked
//!    (`machine`); everything else is scoped to a file descriptor or a thread.
//!
//! The quick suite runs the knobs that matter most with fewer rounds; `threadlab doctor` (the
//! full mode) runs them all.

mod ab;
mod attribution;
mod cost;
mod facts;
mod figures;
mod knobs;
mod machine;
mod record;
mod tables;

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::env::cpu_times;
use crate::measure::placement::{allowed_cpus, cpu_pair};
use crate::seeds::Study;

use ab::{run_knob, AbPlan};
use figures::Measure;
use knobs::{catalogue, Here, Planned};
use machine::Machine;

/// doctor reproduces no study: its "study" line says what it is instead.
pub const DOCTOR: Study = Study {
    citation: "threadlab doctor: this machine's settings measured A/B (the methods of \
               cyclictest, rtla timerlat and tuned, applied to thread figures); no historical \
               study",
    label: "this machine",
};

const INFO: Info = Info {
    name: "doctor",
    study: &DOCTOR,
    measures: "what this machine does to threads (idle states, PM QoS, topology, tick, \
               throttling, steal ...) and which settings change it: each measured A/B (off, \
               on, off, on ...) with its effect, a 95% interval, its CPU cost and how to apply it",
    rough_secs: [3.0, 4.3, 32.0],
};

/// The knobs the quick suite measures, each on the figure it moves most, within the quick
/// suite's few seconds.
const QUICK: &[(&str, &[Measure])] = &[
    ("idle_latency", &[Measure::Wake, Measure::Handoff]),
    ("spin_then_park", &[Measure::Handoff]),
    ("timer_slack", &[Measure::Timer]),
    ("same_cpu", &[Measure::Handoff]),
];

/// The doctor experiment. The suite's instance never changes machine-wide settings;
/// `threadlab doctor --allow-machine-changes` makes one that may.
pub struct Doctor {
    pub allow_machine_changes: bool,
    /// Where machine-wide settings live ("/" unless a test points it at a stand-in folder).
    pub machine_root: Option<PathBuf>,
    /// Measure only these knobs (every one when empty).
    pub only: Vec<String>,
}

pub static SUITE: Doctor = Doctor {
    allow_machine_changes: false,
    machine_root: None,
    only: Vec::new(),
};

/// Every knob's id, in the order they are measured.
pub const KNOBS: &[&str] = &[
    "idle_latency",
    "haltpoll_window",
    "cpu_resume_latency",
    "same_cpu",
    "other_core",
    "smt_sibling",
    "other_llc",
    "other_node",
    "sched_fifo",
    "nice_background",
    "sched_idle_background",
    "timer_slack",
    "spin_then_park",
    "busy_poll",
    "thp",
    "rt_throttling",
    "cpufreq_performance",
    "nohz_full",
    "mitigations",
    "autogroup",
];

/// Rounds and phase lengths per mode. The verdict rests on the sign test's 95% interval of
/// the on/off ratios, whose ends are order statistics: with 6 rounds they are the lowest and
/// the highest ratio, so one round in the other regime (a hand-off that spun instead of
/// slept) puts 1 inside and drops a setting that is 9x better in every other round; in 8 quick
/// runs with 6 rounds, same_cpu fell out of the advice in 2 and idle_latency in 1. From 9
/// rounds the interval's ends are the second lowest and second highest ratios. The quick
/// suite's phases are 30 ms (40 ms with 6 rounds): a phase's mean over some thousand
/// hand-offs or a few hundred timers is precise enough, and the rounds cost about what 6 did.
fn plan(mode: Mode) -> AbPlan {
    match mode {
        Mode::Tiny => AbPlan {
            rounds: 2,
            phase: Duration::from_millis(4),
            knob_phases: false,
        },
        Mode::Quick => AbPlan {
            rounds: 9,
            phase: Duration::from_millis(30),
            knob_phases: false,
        },
        Mode::Full => AbPlan {
            rounds: 10,
            phase: Duration::from_millis(60),
            knob_phases: true,
        },
    }
}

impl Doctor {
    fn machine(&self) -> std::result::Result<Machine, String> {
        if !self.allow_machine_changes {
            return Err("a machine-wide setting: changed only by `threadlab doctor \
                        --allow-machine-changes` (recorded before, restored after each phase \
                        and checked)"
                .into());
        }
        let root = self
            .machine_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("/"));
        Machine::open(&root)
    }

    /// Which planned knobs this run measures; the others are listed with the reason.
    fn selected(&self, mode: Mode, p: &Planned) -> Option<String> {
        if !self.only.is_empty() && !self.only.iter().any(|o| o == p.id()) {
            return Some(format!(
                "not asked for this time (threadlab doctor {})",
                self.only.join(" ")
            ));
        }
        match (mode, p) {
            (Mode::Full, _) | (_, Planned::NotHere(_)) => None,
            (Mode::Tiny, _) => None,
            (_, Planned::Try(k)) if QUICK.iter().any(|(id, _)| *id == k.about.id) => None,
            _ => Some(
                "not in the quick suite, which keeps the settings that matter most: \
                 `threadlab doctor` (or `threadlab run doctor --full`) measures it"
                    .into(),
            ),
        }
    }
}

impl Doctor {
    /// The knob as this mode measures it: the quick suite keeps only its main figures.
    fn narrowed(&self, mode: Mode, k: &knobs::Knob) -> knobs::Knob {
        let mut k = k.clone();
        if mode == Mode::Quick {
            if let Some((_, keep)) = QUICK.iter().find(|(id, _)| *id == k.about.id) {
                k.measures.retain(|m| keep.contains(m));
            }
        }
        k
    }
}

/// The figures that walk more memory than a core's caches hold: the 64 MiB buffer's first
/// touch (faults and zeroing) and its dependent random reads, with and without huge pages.
/// They move with the host's memory phase as the walk reference does; their effect rows read
/// both settings round by round and are left as they are.
fn memory_bound(id: &str) -> bool {
    id.starts_with("doctor.thp.") && (id.contains(".random_read.") || id.contains(".fault_in."))
}

impl Experiment for Doctor {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpus = allowed_cpus();
        let (a, b) = cpu_pair().ok_or_else(|| {
            Error::Skip(
                "this process may use one CPU only: doctor's figures need two (a waker and a \
                 woken thread on different CPUs)"
                    .into(),
            )
        })?;
        let steal_before = cpu_times(&cpus);
        let mut machine = self.machine();
        let replayed = machine
            .as_ref()
            .map(|m| m.replayed.clone())
            .unwrap_or_default();
        let planned = catalogue(&Here {
            env: ctx.env,
            cpus: &cpus,
            a,
            b,
            machine: machine.as_ref().map_err(|e| e.clone()),
        });
        let plan = plan(ctx.mode);
        let mut report = tables::Report::new(replayed, ctx.env.is_guest());
        for p in &planned {
            if let Some(why) = self.selected(ctx.mode, p) {
                report.not_tried(p, &why, out);
                continue;
            }
            let k = match p {
                Planned::NotHere(n) => {
                    report.not_tried(p, &n.reason, out);
                    continue;
                }
                Planned::Try(k) => k,
            };
            ctx.step(&format!("doctor.{}", k.about.id))?;
            let k = &self.narrowed(ctx.mode, k);
            let run = run_knob(
                k,
                &plan,
                &cpus,
                machine.as_mut().ok(),
                ctx.cancel,
                ctx.progress,
            );
            match run {
                Ok(run) => report.measured(k, &run, out),
                Err(Error::Skip(why)) => report.not_tried(p, &why, out),
                Err(Error::Fail(why)) => {
                    report.not_tried(p, &format!("could not be measured: {why}"), out)
                }
                Err(e) => {
                    report.finish(ctx, out, &machine, None);
                    return Err(e);
                }
            }
        }
        ctx.step("doctor.split")?;
        let split = attribution::wakeup_split(ctx, a, b, &report.effects, &planned);
        report.split(split);
        let steal = facts::steal_pct(steal_before, cpu_times(&cpus));
        report.finish(ctx, out, &machine, steal);
        out.mark_memory_bound(0, memory_bound);
        Ok(())
    }
}
