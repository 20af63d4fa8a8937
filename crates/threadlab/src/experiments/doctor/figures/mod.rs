//! The thread figures a setting can move, each measured for one phase of an A/B: a phase runs
//! fresh threads set up as `Setup` says, for about the phase's duration, and returns one value
//! per figure (the mean over the phase's operations, as every sample of the lab is a batch
//! mean).
//!
//! - `Wake`: a thread asleep for 1 ms on another CPU, woken by FUTEX_WAKE (cross-CPU wake-up).
//! - `Handoff`: two threads passing a turn back and forth with futexes (ping-pong).
//! - `Timer` / `TimerContended`: lateness of a 1 ms periodic absolute sleep, alone on its CPU
//!   or beside a CPU-bound thread.
//! - `Probe`: the BeOS latency probe (a clock-reading loop) beside a CPU-bound thread: the
//!   share of time lost in gaps over the threshold and the longest gap.
//! - `Echo`: a 64-byte request and reply over loopback TCP between two threads.
//! - `Buffer`: first touch and dependent random reads of a 64 MiB anonymous buffer.

mod buffer;
mod echo;
mod probe;
mod threads;
mod timer;
mod wake;

use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::Result;
use crate::measure::placement::Placement;
use crate::measure::units::Unit;

pub use echo::{busy_poll_refusal, round_trips_stamped};
pub use threads::settle_idle;
pub use wake::wake_stamped;

/// One figure a measurement yields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// The id's third segment: `doctor.<knob>.<figure>.…`.
    pub id: &'static str,
    pub unit: Unit,
    /// What one value is, for the metric's note.
    pub what: &'static str,
}

/// What a phase measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Wake,
    Handoff,
    Timer,
    TimerContended,
    Probe,
    Echo,
    Buffer,
}

const WAKE: [Figure; 1] = [Figure {
    id: "wakeup",
    unit: Unit::Us,
    what: "a thread asleep 1 ms in FUTEX_WAIT, woken by another thread: from just before \
           the waker's FUTEX_WAKE to the woken thread's first instruction (mean over the phase)",
}];
const HANDOFF: [Figure; 1] = [Figure {
    id: "handoff",
    unit: Unit::Us,
    what: "two threads pass a turn back and forth through two futex words (FUTEX_WAKE, then \
           FUTEX_WAIT for the reply): round trip / 2, the waiting side parking at once unless \
           the setup says it spins first",
}];
const TIMER: [Figure; 1] = [Figure {
    id: "timer",
    unit: Unit::Us,
    what: "cyclictest's method: clock_nanosleep to absolute deadlines 1 ms apart, lateness of \
           each wake-up (mean), nothing else on the thread's CPU",
}];
const TIMER_CONTENDED: [Figure; 1] = [Figure {
    id: "timer_contended",
    unit: Unit::Us,
    what: "the same timer lateness with a CPU-bound thread pinned to the same CPU",
}];
const PROBE: [Figure; 2] = [
    Figure {
        id: "gaps_lost",
        unit: Unit::Percent,
        what: "the BeOS probe: a thread reads the clock in a tight loop beside a CPU-bound \
               thread on its CPU; share of the phase lost in gaps over the latency threshold",
    },
    Figure {
        id: "gaps_longest",
        unit: Unit::Us,
        what: "the same probe's longest gap between two clock reads in the phase",
    },
];
const ECHO: [Figure; 1] = [Figure {
    id: "echo",
    unit: Unit::Us,
    what: "a 64-byte request and its 64-byte reply over loopback TCP (TCP_NODELAY, blocking \
           sockets), client and server threads on two CPUs: the round trip (mean)",
}];
const BUFFER: [Figure; 2] = [
    Figure {
        id: "fault_in",
        unit: Unit::Ms,
        what: "first touch of a fresh 64 MiB anonymous mapping, one write per 4 KiB page: the \
               page faults and the zeroing",
    },
    Figure {
        id: "random_read",
        unit: Unit::Ns,
        what: "dependent random 8-byte reads over the same 64 MiB once touched (each address \
               depends on the previous read): TLB reach and page walks",
    },
];

impl Measure {
    pub fn figures(self) -> &'static [Figure] {
        match self {
            Measure::Wake => &WAKE,
            Measure::Handoff => &HANDOFF,
            Measure::Timer => &TIMER,
            Measure::TimerContended => &TIMER_CONTENDED,
            Measure::Probe => &PROBE,
            Measure::Echo => &ECHO,
            Measure::Buffer => &BUFFER,
        }
    }

    /// Whether it involves an idle CPU waking up, so that a phase must start from the idle
    /// governor's steady state (see `settle_idle`).
    pub fn wakes_idle_cpus(self) -> bool {
        matches!(
            self,
            Measure::Wake | Measure::Handoff | Measure::Timer | Measure::Echo
        )
    }
}

/// A thread that competes for the measured thread's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Competitor {
    /// SCHED_OTHER at this nice level.
    Fair { nice: i32 },
    /// SCHED_IDLE: runs only when nothing else on its CPU wants to.
    Idle,
}

/// Everything a knob may change about the threads of a phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// Two-party measurements: the measuring thread's CPU and its partner's (`CrossCpu(a, b)`:
    /// measurer on a, partner on b); `Unpinned` lets the kernel place both.
    pub placement: Placement,
    /// One-thread measurements (timer, probe): the CPU they and their competitor run on.
    pub cpu: usize,
    /// How long a waiting thread spins before it parks in FUTEX_WAIT (zero: parks at once).
    pub spin_before_park: Duration,
    /// The measuring thread's timer slack (PR_SET_TIMERSLACK), ns; None leaves the default.
    pub timer_slack_ns: Option<u64>,
    /// The measuring thread at SCHED_FIFO (priority 50) instead of SCHED_OTHER.
    pub fifo: bool,
    pub competitor: Competitor,
    /// SO_BUSY_POLL on both ends of the echo connection, µs.
    pub busy_poll_us: Option<u32>,
    /// madvise(MADV_HUGEPAGE) (true) or MADV_NOHUGEPAGE (false) on the buffer.
    pub huge_pages: bool,
}

impl Setup {
    /// The setup every knob starts from: the two CPUs `a` and `b`, parties pinned one on each,
    /// one-thread figures on `b`, nothing else changed.
    pub fn base(a: usize, b: usize) -> Setup {
        Setup {
            placement: Placement::CrossCpu(a, b),
            cpu: b,
            spin_before_park: Duration::ZERO,
            timer_slack_ns: None,
            fifo: false,
            competitor: Competitor::Fair { nice: 0 },
            busy_poll_us: None,
            huge_pages: false,
        }
    }

    /// Whether a measurement with this setup wakes a thread asleep on another CPU: its two
    /// parties are not pinned to one CPU, and the woken one does not spin for the hand-off.
    pub fn wakes_other_cpu(&self, m: Measure) -> bool {
        let spins = m == Measure::Handoff && !self.spin_before_park.is_zero();
        matches!(m, Measure::Wake | Measure::Handoff | Measure::Echo)
            && !matches!(self.placement, Placement::SameCpu(_))
            && !spins
    }

    /// Where a measurement with this setup runs, for the metric's placement field.
    pub fn placement_of(&self, m: Measure) -> String {
        match m {
            Measure::Wake | Measure::Handoff | Measure::Echo => self.placement.to_string(),
            Measure::Buffer => "unpinned".into(),
            _ => Placement::SameCpu(self.cpu).to_string(),
        }
    }
}

/// What one phase gave: one value per figure of the measurement (in the figure's unit), how
/// many operations they are the mean of, and diagnostics for the notes.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseValues {
    pub values: Vec<f64>,
    pub ops: u64,
    /// Buffer: the share of the buffer the kernel backed with huge pages, %.
    pub huge_backed_pct: Option<f64>,
}

/// Runs one phase of `m` with `setup` for about `length` (the buffer measurement does a fixed
/// amount of work instead).
pub fn run_phase(
    m: Measure,
    setup: &Setup,
    length: Duration,
    cancel: &Cancel,
) -> Result<PhaseValues> {
    match m {
        Measure::Wake => wake::wake(setup, length, cancel),
        Measure::Handoff => wake::handoff(setup, length, cancel),
        Measure::Timer => timer::lateness(setup, false, length, cancel),
        Measure::TimerContended => timer::lateness(setup, true, length, cancel),
        Measure::Probe => probe::gaps(setup, length, cancel),
        Measure::Echo => echo::round_trips(setup, length, cancel),
        Measure::Buffer => buffer::touch_and_read(setup, cancel),
    }
}
