//! What the host and the kernel took from the lab while it measured: steal time per CPU (the
//! hypervisor running something else on a vCPU, from /proc/stat) and the run delay of the lab's
//! own threads (time runnable but waiting for a CPU, from /proc/self/task/*/schedstat).
//!
//! The sampler reads both around every trial: a trial during which the host stole time from a
//! CPU it used is set aside, and the run delay its threads suffered is added to the
//! experiment's `HostLog`, which the runner records with the experiment.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// USER_HZ: the unit of /proc/stat's counters on every Linux ABI the lab runs on.
pub const TICK_MS: f64 = 10.0;

/// Steal ticks per CPU from /proc/stat's text: (cpu, steal ticks).
pub fn parse_steal(stat: &str) -> Vec<(usize, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
            // user nice system idle iowait irq softirq steal
            let steal = f.nth(7)?.parse::<u64>().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

/// Steal ticks per CPU now; empty where /proc/stat cannot be read.
pub fn steal_ticks() -> Vec<(usize, u64)> {
    parse_steal(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// Steal ticks that `cpus` gained between two readings.
pub fn steal_between(before: &[(usize, u64)], after: &[(usize, u64)], cpus: &[usize]) -> u64 {
    cpus.iter()
        .map(|c| {
            let of = |r: &[(usize, u64)]| r.iter().find(|(cpu, _)| cpu == c).map(|x| x.1);
            match (of(before), of(after)) {
                (Some(b), Some(a)) => a.saturating_sub(b),
                _ => 0,
            }
        })
        .sum()
}

/// The run delay (ns spent runnable, waiting for a CPU) of every thread of this process now,
/// keyed by thread id. Threads that ended are gone from the listing, so callers difference two
/// readings taken while the threads of interest are alive.
pub fn run_delays() -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: u32 = e.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(e.path().join("schedstat")).ok()?;
        Some((tid, parse_schedstat_delay(&text)?))
    })
    .collect()
}

/// The second field of a schedstat line: "run_ns delay_ns timeslices".
pub fn parse_schedstat_delay(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Run delay added between two readings; a thread absent from `before` started in between
/// and counts from zero.
pub fn delay_between(before: &[(u32, u64)], after: &[(u32, u64)]) -> u64 {
    after
        .iter()
        .map(|(tid, a)| {
            let b = before.iter().find(|(t, _)| t == tid).map_or(0, |x| x.1);
            a.saturating_sub(b)
        })
        .sum()
}

/// What the sampler saw of the host during one experiment (one attempt), summed over its
/// trials. Shared by reference with the sampler through the experiment's context.
#[derive(Debug, Default)]
pub struct HostLog {
    trials: AtomicU64,
    steal_trials: AtomicU64,
    disturbed_trials: AtomicU64,
    run_delay_ns: AtomicU64,
    trial_ns: AtomicU64,
}

impl HostLog {
    pub fn record_trial(&self, wall_ns: u64, run_delay_ns: u64) {
        self.trials.fetch_add(1, Ordering::Relaxed);
        self.trial_ns.fetch_add(wall_ns, Ordering::Relaxed);
        self.run_delay_ns.fetch_add(run_delay_ns, Ordering::Relaxed);
    }

    pub fn record_set_aside(&self, steal: usize, disturbed: usize) {
        self.steal_trials.fetch_add(steal as u64, Ordering::Relaxed);
        self.disturbed_trials
            .fetch_add(disturbed as u64, Ordering::Relaxed);
    }

    /// The totals, with the steal the runner read around the experiment.
    pub fn activity(&self, steal_ms: Vec<(usize, f64)>) -> HostActivity {
        HostActivity {
            steal_ms,
            trials: self.trials.load(Ordering::Relaxed) as usize,
            trials_set_aside_steal: self.steal_trials.load(Ordering::Relaxed) as usize,
            trials_set_aside_disturbed: self.disturbed_trials.load(Ordering::Relaxed) as usize,
            run_delay_ms: self.run_delay_ns.load(Ordering::Relaxed) as f64 / 1e6,
            trial_ms: self.trial_ns.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

/// The host's share of one experiment, as the results file records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HostActivity {
    /// Steal time per CPU during the experiment, ms (/proc/stat, 10 ms resolution).
    pub steal_ms: Vec<(usize, f64)>,
    /// Trials the sampler ran.
    pub trials: usize,
    /// Trials set aside because the host stole time from a CPU they used.
    pub trials_set_aside_steal: usize,
    /// Trials set aside because a reference read beside them was slow, or because most of
    /// their group's one-CPU rows read slow in them (`TrialLog::slowed`).
    pub trials_set_aside_disturbed: usize,
    /// Run delay of the lab's threads during those trials (runnable, waiting for a CPU), ms.
    pub run_delay_ms: f64,
    /// Wall time of those trials, ms.
    pub trial_ms: f64,
}

impl HostActivity {
    pub fn steal_total_ms(&self) -> f64 {
        self.steal_ms.iter().map(|x| x.1).sum()
    }
}

/// Steal per CPU between two readings, ms.
pub fn steal_ms(before: &[(usize, u64)], after: &[(usize, u64)]) -> Vec<(usize, f64)> {
    after
        .iter()
        .map(|&(cpu, a)| {
            let b = before.iter().find(|x| x.0 == cpu).map_or(a, |x| x.1);
            (cpu, a.saturating_sub(b) as f64 * TICK_MS)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_counter_of_each_cpu_line() {
        let stat = "cpu  10 0 5 100 2 0 0 9 0 0\ncpu0 5 0 2 50 1 0 0 4 0 0\ncpu1 5 0 3 50 1 0 0 5 0 0\nintr 1\n";
        assert_eq!(parse_steal(stat), vec![(0, 4), (1, 5)]);
        let later = [(0, 4), (1, 8)];
        assert_eq!(steal_between(&parse_steal(stat), &later, &[0]), 0);
        assert_eq!(steal_between(&parse_steal(stat), &later, &[0, 1]), 3);
        assert_eq!(
            steal_ms(&parse_steal(stat), &later),
            vec![(0, 0.0), (1, 30.0)]
        );
    }

    #[test]
    fn run_delay_counts_new_threads_from_zero() {
        assert_eq!(parse_schedstat_delay("855035 2836399 2\n"), Some(2_836_399));
        assert_eq!(parse_schedstat_delay("garbage"), None);
        let before = [(1, 100), (2, 50)];
        let after = [(1, 150), (3, 20)];
        assert_eq!(delay_between(&before, &after), 70);
    }

    #[test]
    fn this_process_reads_its_own_threads() {
        let d = run_delays();
        assert!(d.iter().any(|(tid, _)| *tid == crate::sys::gettid() as u32));
    }
}
