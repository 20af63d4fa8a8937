//! What else wants the CPUs: load average and runnable tasks, read at the start and end of a run.

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LoadAvg {
    pub(super) avg: [f64; 3],
    /// Currently runnable scheduling entities, including the reader.
    pub(super) running: u64,
    pub(super) total: u64,
}

/// Parses /proc/loadavg, e.g. "0.12 0.04 0.01 1/84 4417".
pub(super) fn parse_loadavg(s: &str) -> Option<LoadAvg> {
    let mut it = s.split_whitespace();
    let mut avg = [0.0; 3];
    for slot in &mut avg {
        let v: f64 = it.next()?.parse().ok()?;
        if !v.is_finite() {
            return None;
        }
        *slot = v;
    }
    let (r, t) = it.next()?.split_once('/')?;
    Some(LoadAvg {
        avg,
        running: r.parse().ok()?,
        total: t.parse().ok()?,
    })
}

/// The `procs_running` line of /proc/stat.
pub(super) fn parse_procs_running(s: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let rest = l.strip_prefix("procs_running")?;
        rest.trim().parse().ok()
    })
}

/// Time the CPUs spent so far by kind, USER_HZ ticks, summed over the `cpuN` lines of
/// /proc/stat whose N is in `cpus` (all when empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// idle + iowait: for the scheduler, which counts a polling idle CPU as idle.
    pub idle: u64,
    /// Time the hypervisor ran something else while this guest wanted the CPU.
    pub steal: u64,
}

impl CpuTimes {
    pub fn total(&self) -> u64 {
        self.busy + self.idle + self.steal
    }
}

pub(super) fn parse_cpu_times(stat: &str, cpus: &[usize]) -> Option<CpuTimes> {
    let mut t = CpuTimes::default();
    let mut any = false;
    for l in stat.lines() {
        let mut f = l.split_whitespace();
        let Some(cpu) = f.next().and_then(|c| c.strip_prefix("cpu")) else {
            continue;
        };
        let Ok(n) = cpu.parse::<usize>() else {
            continue; // the all-CPU line
        };
        if !cpus.is_empty() && !cpus.contains(&n) {
            continue;
        }
        let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        t.busy += at(0) + at(1) + at(2) + at(5) + at(6);
        t.idle += at(3) + at(4);
        t.steal += at(7);
        any = true;
    }
    any.then_some(t)
}

/// The load now: the load averages, the runnable tasks besides the reader, and the kernel's
/// count of running processes (/proc/loadavg and /proc/stat).
pub(super) fn load_now() -> (Option<[f64; 3]>, Option<u64>, Option<u64>) {
    let load = super::read("/proc/loadavg")
        .as_deref()
        .and_then(parse_loadavg);
    let procs_running = super::read("/proc/stat")
        .as_deref()
        .and_then(parse_procs_running);
    (
        load.as_ref().map(|l| l.avg),
        load.map(|l| l.running.saturating_sub(1)),
        procs_running,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadavg() {
        let l = parse_loadavg("0.12 0.04 0.01 1/84 4417\n").unwrap();
        assert_eq!(l.avg, [0.12, 0.04, 0.01]);
        assert_eq!((l.running, l.total), (1, 84));
        let l = parse_loadavg("12.50 8.25 3.00 17/1234 99999").unwrap();
        assert_eq!(l.avg, [12.5, 8.25, 3.0]);
        assert_eq!(l.running, 17);
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("0.1 0.2"), None);
        assert_eq!(parse_loadavg("0.1 0.2 0.3 x"), None);
        assert_eq!(parse_loadavg("nan 0.2 0.3 1/2 3"), None);
    }

    #[test]
    fn cpu_times_by_kind() {
        let stat = "cpu  10 0 5 100 2 0 0 3 0 0\ncpu0 5 1 2 50 1 1 1 2 0 0\n\
                    cpu1 5 0 3 50 1 0 0 1 0 0\nintr 1\n";
        let all = parse_cpu_times(stat, &[]).unwrap();
        assert_eq!((all.busy, all.idle, all.steal), (18, 102, 3));
        let one = parse_cpu_times(stat, &[1]).unwrap();
        assert_eq!((one.busy, one.idle, one.steal), (8, 51, 1));
        assert_eq!(one.total(), 60);
        assert_eq!(parse_cpu_times(stat, &[7]), None);
    }

    #[test]
    fn procs_running() {
        let stat =
            "cpu  1 2 3 4\nctxt 123\nbtime 1\nprocesses 4417\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(parse_procs_running(stat), Some(3));
        assert_eq!(parse_procs_running("cpu 1 2 3"), None);
    }
}
