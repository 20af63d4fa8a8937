//! What a phase cost in CPU: the time the CPUs were busy or polling in their idle loop, as a
//! percentage of one CPU (200% = two CPUs all the time).
//!
//! Where the CPUs have cpuidle, it is wall time minus the time spent in halting idle states,
//! from the residency counters, exact to the microsecond: an idle CPU that polls (the price of
//! a fast wake-up) counts as burned, as it is for the machine and, on a VM, for the host core
//! under the vCPU. /proc/stat cannot show that: it counts a polling idle CPU as idle (the
//! scheduler's view), and its busy time is sampled by the tick. Without cpuidle, /proc/stat is
//! all there is, and the note says so.

use crate::measure::env::{cpu_times, idle_residency, CpuTimes, IdleResidency};
use crate::measure::process::mono_ns;

/// Which counters a meter reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Residency,
    ProcStat,
    None,
}

impl Source {
    pub fn note(self) -> &'static str {
        match self {
            Source::Residency => {
                "CPU burned = wall time x CPUs - time in halting idle states (cpuidle residency \
                 counters): busy or polling in the idle loop, % of one CPU over the CPUs used"
            }
            Source::ProcStat => {
                "CPU burned = busy time from /proc/stat (tick-sampled; this machine has no \
                 cpuidle, so idle polling is not visible), % of one CPU over the CPUs used"
            }
            Source::None => "CPU burned could not be read here",
        }
    }
}

/// The counters at the start of a phase.
pub struct Meter {
    cpus: Vec<usize>,
    wall_ns: u64,
    residency: Option<IdleResidency>,
    stat: Option<CpuTimes>,
}

impl Meter {
    pub fn start(cpus: &[usize]) -> Meter {
        let residency = idle_residency(cpus);
        Meter {
            cpus: cpus.to_vec(),
            wall_ns: mono_ns(),
            stat: if residency.is_none() {
                cpu_times(cpus)
            } else {
                None
            },
            residency,
        }
    }

    pub fn source(&self) -> Source {
        match (&self.residency, &self.stat) {
            (Some(_), _) => Source::Residency,
            (None, Some(_)) => Source::ProcStat,
            _ => Source::None,
        }
    }

    /// (CPU-µs burned, wall µs) since the start.
    pub fn read(&self) -> Option<(f64, f64)> {
        let wall_us = mono_ns().saturating_sub(self.wall_ns) as f64 / 1e3;
        if let Some(r0) = self.residency {
            let r1 = idle_residency(&self.cpus)?;
            let halted = r1.halted_us.saturating_sub(r0.halted_us) as f64;
            let burned = (wall_us * self.cpus.len() as f64 - halted).max(0.0);
            return Some((burned, wall_us));
        }
        let s0 = self.stat?;
        let s1 = cpu_times(&self.cpus)?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let busy_us = s1.busy.saturating_sub(s0.busy) as f64 * 1e6 / hz;
        Some((busy_us, wall_us))
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
        if let Some((burned, wall)) = m.read() {
            assert!(wall > 0.0 && burned >= 0.0);
            assert!(burned <= wall * cpus.len() as f64 + 1.0);
        } else {
            assert_eq!(m.source(), Source::None);
        }
    }
}
