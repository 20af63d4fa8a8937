//! What serving costs: CPU time and context switches (getrusage), resident memory, threads,
//! processes and descriptors, for STATS replies and for the experiment's accounting.

use super::protocol::ServerStats;
use super::shared::Shared;

/// CPU time and context switches, summed over whatever was asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

impl Usage {
    pub fn from_rusage(ru: &libc::rusage) -> Usage {
        let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        Usage {
            cpu_ns: tv(ru.ru_utime) + tv(ru.ru_stime),
            voluntary: ru.ru_nvcsw as u64,
            involuntary: ru.ru_nivcsw as u64,
        }
    }

    pub fn plus(self, o: Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns + o.cpu_ns,
            voluntary: self.voluntary + o.voluntary,
            involuntary: self.involuntary + o.involuntary,
        }
    }

    /// `self - earlier`, never below zero.
    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary: self.voluntary.saturating_sub(earlier.voluntary),
            involuntary: self.involuntary.saturating_sub(earlier.involuntary),
        }
    }

    pub fn switches(&self) -> u64 {
        self.voluntary + self.involuntary
    }
}

/// getrusage(`who`): RUSAGE_SELF (every thread of the process, ended ones included),
/// RUSAGE_THREAD (the caller) or RUSAGE_CHILDREN (reaped children).
pub fn rusage(who: libc::c_int) -> Usage {
    // SAFETY: ru is a valid out pointer; `who` is one of the documented values.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        Usage::from_rusage(&ru)
    }
}

/// Usage of the server's child processes (fork designs): live and reaped, with the live pids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildUsage {
    pub usage: Usage,
    pub live: u64,
    pub pids: Vec<libc::pid_t>,
}

/// Resident bytes of a process (statm), 0 when it cannot be read.
pub fn rss_bytes(pid: Option<libc::pid_t>) -> u64 {
    let path = match pid {
        Some(p) => format!("/proc/{p}/statm"),
        None => "/proc/self/statm".to_string(),
    };
    let pages: u64 = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    pages * page_size()
}

/// Proportional set size (shared pages divided among their sharers), from smaps_rollup: the
/// fair way to add up a parent and its forked children.
pub fn pss_bytes(pid: Option<libc::pid_t>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/smaps_rollup"),
        None => "/proc/self/smaps_rollup".to_string(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(4096) as u64
}

/// Open descriptors of this process.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count().saturating_sub(1) as u64)
        .unwrap_or(0)
}

/// This process's threads.
pub fn threads() -> u64 {
    crate::sys::thread_count() as u64
}

/// A STATS reply gathered now: this process (all its threads: in the lab that includes the
/// load generator, which the lab subtracts itself) plus `children`.
pub fn live_stats(shared: &Shared, children: Option<&ChildUsage>) -> ServerStats {
    // SAFETY: ru is a valid out pointer.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let own = Usage::from_rusage(&ru);
    let kids = children.cloned().unwrap_or_default();
    let kids_rss: u64 = kids.pids.iter().map(|&p| rss_bytes(Some(p))).sum();
    let c = shared.counts();
    ServerStats {
        cpu_user_ns: tv(ru.ru_utime),
        cpu_sys_ns: tv(ru.ru_stime),
        children_cpu_ns: kids.usage.cpu_ns,
        rss_bytes: rss_bytes(None) + kids_rss,
        threads: threads(),
        processes: 1 + kids.live,
        open_fds: open_fds(),
        served: c.served,
        rejected: c.rejected,
        errors: c.errors,
        voluntary_switches: own.voluntary + kids.usage.voluntary,
        involuntary_switches: own.involuntary + kids.usage.involuntary,
        connections_open: c.connections_open,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_usage_moves_and_memory_is_seen() {
        let a = rusage(libc::RUSAGE_THREAD);
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let b = rusage(libc::RUSAGE_THREAD);
        assert!(b.since(a).cpu_ns > 0);
        assert_eq!(a.since(b).cpu_ns, 0, "never negative");
        assert!(rss_bytes(None) > 0);
        assert!(pss_bytes(None).unwrap_or(1) > 0);
        assert!(open_fds() >= 3);
    }
}
