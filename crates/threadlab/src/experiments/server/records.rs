//! The records of the generator's steps, shared by the steps that make them, the capacity
//! search that probes with them, and the metrics and verdicts read from them: what a step
//! was, where it ran, and whether it met the latency target or fell behind its plan.

use super::limits::LimitsRecord;
use super::loadgen::StepResult;
use super::meter::Footprint;
use super::setup::SLO_P99_NS;

/// Which pattern a record comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// The generator against the null server, closed loop.
    Calibration,
    Peak,
    Rate,
    Block,
    Spin,
    /// A probe of the capacity search at this offered rate.
    Sweep(f64),
    Overload,
    Scale,
}

/// One step of one design.
pub struct Record {
    pub design: &'static str,
    pub pattern: Pattern,
    pub trial: usize,
    pub offered: f64,
    pub connections: usize,
    pub result: StepResult,
    /// ListenOverflows + ListenDrops during the design's visit (system-wide counters).
    pub listen_overflows: Option<u64>,
    /// Memory before the connections and after they were made and served once.
    pub footprint: Option<(Footprint, Footprint)>,
    /// Connections that could not be made.
    pub connect_failures: u64,
    /// Why the server's CPU could not be measured (a remote server without STATS for us).
    pub usage_unavailable: Option<String>,
    /// The state the lab was in, for designs whose cost depends on it (a fork copies the
    /// lab's address space).
    pub state: Option<String>,
    pub placed: Placed,
}

impl Record {
    /// Share of the measured period the generator's thread was busy (spinning excluded).
    pub fn generator_busy(&self) -> f64 {
        let r = &self.result;
        r.generator_cpu_ns.saturating_sub(r.generator_spin_ns) as f64 / r.measured_ns.max(1) as f64
    }

    pub fn errors(&self) -> u64 {
        self.result.failures.total() + self.connect_failures
    }
}

/// Everything the generator-driven patterns recorded, and why some were not run.
#[derive(Default)]
pub struct Records {
    pub all: Vec<Record>,
    /// (design, pattern, reason) for patterns a design could not run.
    pub skipped: Vec<(&'static str, &'static str, String)>,
    /// The generator's ceiling, replies per second of its own CPU.
    pub ceiling: Option<f64>,
    /// The limits step, per design.
    pub limits: Vec<LimitsRecord>,
}

impl Records {
    /// A design's records of a pattern, pinned.
    pub fn of<'a>(&'a self, design: &'a str, pattern: Pattern) -> impl Iterator<Item = &'a Record> {
        self.of_placed(design, pattern, Placed::Pinned)
    }

    pub fn of_placed<'a>(
        &'a self,
        design: &'a str,
        pattern: Pattern,
        placed: Placed,
    ) -> impl Iterator<Item = &'a Record> {
        self.all
            .iter()
            .filter(move |r| r.design == design && r.pattern == pattern && r.placed == placed)
    }

    /// Notes that a design could not run a pattern (once, however many trials ask).
    pub fn skip(&mut self, design: &'static str, pattern: &'static str, why: String) {
        if !self
            .skipped
            .iter()
            .any(|(d, p, _)| *d == design && *p == pattern)
        {
            self.skipped.push((design, pattern, why));
        }
    }
}

/// Where a visit ran the design and the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Servers on the server CPUs, the generator on the client CPU.
    Pinned,
    /// The default placement: the server's threads, children and the generator allowed on
    /// every CPU, placed by the kernel.
    Unpinned,
}

impl Placed {
    /// The key under which a visit that could not run is noted (`emit::skipped_ids`).
    pub fn pattern_key(self) -> &'static str {
        match self {
            Placed::Pinned => "all",
            Placed::Unpinned => "unpinned",
        }
    }
}

/// A sweep step passes when it was not cut short, its p99 is within the target, and 99% of
/// the requests planned in its measured period were answered.
pub fn meets_target(r: &StepResult) -> bool {
    r.saturated.is_none()
        && r.latency.value_at_quantile(0.99) <= SLO_P99_NS
        && r.service.len() as f64 >= 0.99 * r.planned as f64
}

/// Why an open-loop step did not keep up with its plan, if it did not (the server, or the
/// generator: `client_bound` tells which): cut short by the generator; fewer than 97% of the
/// requests planned in the measured period answered at all; or fewer than 97% of them answered
/// *within* the period, the rest only while the generator drained its backlog after it (a
/// server that serves 12,800/s of 30,000/s offered, its latency growing window after window).
pub fn fell_behind(rec: &Record) -> Option<String> {
    let r = &rec.result;
    if let Some(s) = &r.saturated {
        return Some(s.clone());
    }
    let open = !matches!(rec.pattern, Pattern::Peak | Pattern::Calibration);
    if !open || r.planned == 0 {
        return None;
    }
    let planned = r.planned as f64;
    let answered = r.service.len() as f64;
    if answered < 0.97 * planned {
        return Some(format!(
            "the server fell behind the plan: {answered:.0} of the {planned:.0} requests planned \
             in the measured period were answered"
        ));
    }
    // A few requests in flight at either end of the period move between periods; ten covers
    // them at the rates and latencies of a server that keeps up.
    if (r.completed as f64) < 0.97 * planned - 10.0 {
        return Some(format!(
            "the server fell behind the plan: {:.0}/s served in the measured period of {:.0}/s \
             offered; the rest were answered late, after it",
            r.achieved_per_s(),
            rec.offered
        ));
    }
    None
}
