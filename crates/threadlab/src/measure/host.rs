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
///
/// Once, in a CI run of the unit tests (beside tests that start and end threads all the time),
/// the calling thread was missing from a reading. Which part failed the run did not say: a
/// listing of /proc/self/task may be cut short when the thread the kernel's walk stands on ends
/// (the next read then resumes by position), or a read may be refused. So the listing is read
/// twice and merged, and the calling thread (the sampler's) is read by its own id whatever the
/// listings held; `delay_between` keeps a thread missing from the first reading from bringing
/// in its whole life's delay.
pub fn run_delays() -> Vec<(u32, u64)> {
    let mut tids = std::collections::BTreeSet::new();
    for _ in 0..2 {
        if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
            tids.extend(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()));
        }
    }
    tids.insert(crate::sys::gettid() as u32);
    tids.into_iter()
        .filter_map(|tid| {
            let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
            Some((tid, parse_schedstat_delay(&text)?))
        })
        .collect()
}

/// The second field of a schedstat line: "run_ns delay_ns timeslices".
pub fn parse_schedstat_delay(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Run delay added between two readings `wall_ns` apart; a thread absent from `before` started
/// in between and counts from zero, up to `wall_ns`: a thread that started in between cannot
/// have waited longer than that, and one that a listing missed would otherwise bring its whole
/// life's delay into the trial.
pub fn delay_between(before: &[(u32, u64)], after: &[(u32, u64)], wall_ns: u64) -> u64 {
    after
        .iter()
        .map(|(tid, a)| match before.iter().find(|(t, _)| t == tid) {
            Some(&(_, b)) => a.saturating_sub(b),
            None => (*a).min(wall_ns),
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
        assert_eq!(delay_between(&before, &after, 1_000), 70);
        // A thread new to `after` cannot have waited longer than the time between.
        let after = [(1, 150), (3, 5_000_000)];
        assert_eq!(delay_between(&before, &after, 1_000), 1_050);
    }

    #[test]
    fn this_process_reads_its_own_threads() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{mpsc, Arc};
        // Threads alive throughout are found by the listing (not only the caller, read by its
        // own id), while other threads start and end beside them all the time.
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let done_rx = Arc::new(std::sync::Mutex::new(done_rx));
        let (tid_tx, tid_rx) = mpsc::channel();
        let others: Vec<_> = (0..8)
            .map(|_| {
                let (tid_tx, done_rx) = (tid_tx.clone(), Arc::clone(&done_rx));
                std::thread::spawn(move || {
                    tid_tx.send(crate::sys::gettid() as u32).unwrap();
                    let _ = done_rx.lock().map(|rx| rx.recv());
                })
            })
            .collect();
        let other_tids: Vec<u32> = (0..8).map(|_| tid_rx.recv().unwrap()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..4)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::spawn(|| {}).join().unwrap();
                    }
                })
            })
            .collect();
        let mut missed = 0;
        for _ in 0..2_000 {
            let d = run_delays();
            assert!(d.iter().any(|(tid, _)| *tid == crate::sys::gettid() as u32));
            missed += other_tids
                .iter()
                .filter(|t| !d.iter().any(|(tid, _)| tid == *t))
                .count();
        }
        stop.store(true, Ordering::Relaxed);
        churn.into_iter().for_each(|c| c.join().unwrap());
        for _ in &others {
            done_tx.send(()).unwrap();
        }
        others.into_iter().for_each(|o| o.join().unwrap());
        // A rare miss is what the merging makes rarer, not impossible; a listing that lost
        // other threads as a rule would miss most of these 16,000.
        assert!(
            missed * 100 <= 2_000 * 8,
            "{missed} misses of threads alive throughout"
        );
    }
}
