//! What a phase cost in CPU: the CPU time this process used (every thread, from the process
//! CPU clock) plus the time idle CPUs spent polling instead of halting (the cpuidle residency
//! of the polling state), as a percentage of one CPU (200% = two CPUs all the time).
//!
//! Polling is the price of the fast wake-ups several settings buy, and it is invisible to the
//! scheduler: /proc/stat counts a polling CPU as idle, so it cannot show that cost (on a VM
//! the host core under the vCPU is busy all the same). /proc/stat's busy time would also count
//! whatever else runs on the machine. Without cpuidle only the process's own time is counted,
//! and the note says so.

use crate::measure::env::{idle_residency, IdleResidency};
use crate::measure::process::{clock_ns, mono_ns};

/// Which counters a meter reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    ProcessAndPolling,
    ProcessOnly,
}

impl Source {
    pub fn note(self) -> &'static str {
        match self {
            Source::ProcessAndPolling => {
                "CPU burned = this process's CPU time (all its threads) + time idle CPUs spent \
                 polling instead of halting (cpuidle residency of the POLL state), % of one CPU"
            }
            Source::ProcessOnly => {
                "CPU burned = this process's CPU time (all its threads), % of one CPU; this \
                 machine has no cpuidle, so idle polling is not visible"
            }
        }
    }
}

/// The counters at the start of a phase.
pub struct Meter {
    cpus: Vec<usize>,
    wall_ns: u64,
    process_ns: u64,
    residency: Option<IdleResidency>,
}

impl Meter {
    pub fn start(cpus: &[usize]) -> Meter {
        Meter {
            cpus: cpus.to_vec(),
            wall_ns: mono_ns(),
            process_ns: clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID),
            residency: idle_residency(cpus),
        }
    }

    pub fn source(&self) -> Source {
        if self.residency.is_some() {
            Source::ProcessAndPolling
        } else {
            Source::ProcessOnly
        }
    }

    /// (CPU-µs burned, wall µs) since the start.
    pub fn read(&self) -> Option<(f64, f64)> {
        let wall_us = mono_ns().saturating_sub(self.wall_ns) as f64 / 1e3;
        let process_us =
            clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(self.process_ns) as f64 / 1e3;
        let polling_us = match (self.residency, idle_residency(&self.cpus)) {
            (Some(r0), Some(r1)) => r1.polling_us.saturating_sub(r0.polling_us) as f64,
            _ => 0.0,
        };
        Some((process_us + polling_us, wall_us))
    }
}

/// Accumulates the burned and wall time of several phases into one percentage.
#[derive(Debug, Default, Clone, Copy)]
pub struct Burned {
    cpu_us: f64,
    wall_us: f64,
}

impl Burned {
    pub fn add(&mut self, reading: Option<(f64, f64)>) {
        if let Some((c, w)) = reading {
            self.cpu_us += c;
            self.wall_us += w;
        }
    }

    /// % of one CPU; None when nothing was read.
    pub fn pct(&self) -> Option<f64> {
        (self.wall_us > 0.0).then(|| self.cpu_us / self.wall_us * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burned_time_is_a_share_of_the_wall_time() {
        let mut b = Burned::default();
        assert_eq!(b.pct(), None);
        b.add(Some((150.0, 100.0)));
        b.add(None);
        b.add(Some((50.0, 100.0)));
        assert_eq!(b.pct(), Some(100.0));
    }

    #[test]
    fn a_meter_reads_something_sensible_here() {
        let cpus = crate::measure::placement::allowed_cpus();
        let m = Meter::start(&cpus);
        // Spin a little: at least this thread was busy.
        let t = mono_ns();
        while mono_ns() - t < 2_000_000 {
            std::hint::spin_loop();
        }
        let (burned, wall) = m.read().unwrap();
        assert!(wall > 0.0 && burned > 0.0, "this thread spun");
        // Polling residency lags by up to one idle period per CPU; a generous bound.
        assert!(burned <= (wall + 10_000.0) * cpus.len() as f64);
    }
}
