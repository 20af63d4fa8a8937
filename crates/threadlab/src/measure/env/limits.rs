//! Limits on what an experiment may create or do: resource limits, system-wide ceilings on
//! threads and mappings, io_uring and seccomp, and whether real-time priority is permitted.

use crate::measure::sched::{probe_fifo, FifoRefusal};

use super::Rlimit;

fn rlimit_from(rl: libc::rlimit) -> Rlimit {
    // rlim_t is u64 on most Linux targets but not all, hence the conversion.
    #[allow(clippy::useless_conversion)]
    let conv = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            None
        } else {
            u64::try_from(v).ok()
        }
    };
    Rlimit {
        soft: conv(rl.rlim_cur),
        hard: conv(rl.rlim_max),
    }
}

/// getrlimit's resource argument: glibc declares it as an enum, other C libraries as an int.
#[cfg(target_env = "gnu")]
pub type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type Resource = libc::c_int;

/// One resource limit of this process; `None` when it cannot be read.
pub fn rlimit(resource: Resource) -> Option<Rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(resource, &mut rl) };
    (rc == 0).then(|| rlimit_from(rl))
}

/// Whether this process may use SCHED_FIFO (tried for real, on a throw-away thread), and if
/// not, why, in terms of what the user can change.
pub(super) fn probe_rt_priority(rtprio: Option<Rlimit>) -> (bool, Option<String>) {
    match probe_fifo() {
        Ok(()) => (true, None),
        Err(FifoRefusal::Denied { errno, .. }) => {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let euid = unsafe { libc::geteuid() };
            (false, Some(rt_failure_reason(errno, euid == 0, rtprio)))
        }
        Err(FifoRefusal::Probe(why)) => (false, Some(why)),
    }
}

/// System-wide ceilings under /proc/sys, each `None` when unreadable.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Ceilings {
    /// `vm.max_map_count`: every thread stack is a mapping (two with its guard page).
    pub(super) vm_max_map_count: Option<u64>,
    /// `kernel.threads-max`.
    pub(super) threads_max: Option<u64>,
    /// `kernel.pid_max`: every thread takes a pid.
    pub(super) pid_max: Option<u64>,
    /// `kernel.io_uring_disabled` (Linux 6.6 and later): 0 allowed, 1 only for the
    /// `kernel.io_uring_group`, 2 refused; `None` on kernels without the file.
    pub(super) io_uring_disabled: Option<u8>,
}

/// Reads the ceilings through `read`, which maps a path under /proc/sys to the file's text, so
/// that the same code runs on captured text in tests.
pub(super) fn ceilings(read: impl Fn(&str) -> Option<String>) -> Ceilings {
    fn num<T: std::str::FromStr>(text: Option<String>) -> Option<T> {
        text.and_then(|s| s.trim().parse().ok())
    }
    Ceilings {
        vm_max_map_count: num(read("vm/max_map_count")),
        threads_max: num(read("kernel/threads-max")),
        pid_max: num(read("kernel/pid_max")),
        io_uring_disabled: num(read("kernel/io_uring_disabled")),
    }
}

/// The seccomp mode from /proc/self/status: 0 none, 1 strict, 2 filter. A filter (a container
/// runtime's default profile, systemd's SystemCallFilter=) runs on every system call, which
/// syscall-bound figures then include. `None` on kernels built without seccomp.
pub(super) fn parse_seccomp_mode(status: &str) -> Option<u8> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp:"))
        .and_then(|v| v.trim().parse().ok())
}

fn rt_failure_reason(rc: i32, root: bool, rtprio: Option<Rlimit>) -> String {
    if rc == libc::EPERM {
        let soft = rtprio.map(|r| r.soft);
        match (root, soft) {
            (false, Some(Some(0))) => "EPERM: not root and RLIMIT_RTPRIO is 0".to_string(),
            (false, Some(Some(n))) => format!(
                "EPERM: not root; RLIMIT_RTPRIO is {n}, so the cgroup may have no RT runtime (cpu.rt_runtime_us = 0)"
            ),
            (false, _) => "EPERM: not root and lacking CAP_SYS_NICE".to_string(),
            (true, _) => "EPERM as root: CAP_SYS_NICE dropped (container?) or the cgroup has no RT runtime (cpu.rt_runtime_us = 0)".to_string(),
        }
    } else if rc == libc::EINVAL {
        "EINVAL: SCHED_FIFO priority 1 rejected".to_string()
    } else if rc == libc::ENOSYS {
        "ENOSYS: scheduling policies not supported here".to_string()
    } else {
        format!("pthread_setschedparam failed with error {rc}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_reasons() {
        let zero = Some(Rlimit {
            soft: Some(0),
            hard: Some(0),
        });
        assert_eq!(
            rt_failure_reason(libc::EPERM, false, zero),
            "EPERM: not root and RLIMIT_RTPRIO is 0"
        );
        assert!(rt_failure_reason(libc::EPERM, true, zero).starts_with("EPERM as root"));
        assert!(rt_failure_reason(libc::EINVAL, false, None).starts_with("EINVAL"));
    }

    #[test]
    fn ceilings_from_captured_text() {
        let files = [
            ("vm/max_map_count", "65530\n"),
            ("kernel/threads-max", "192730\n"),
            ("kernel/pid_max", "32768\n"),
            ("kernel/io_uring_disabled", "0\n"),
        ];
        let read = |p: &str| {
            files
                .iter()
                .find(|(k, _)| *k == p)
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(
            ceilings(read),
            Ceilings {
                vm_max_map_count: Some(65530),
                threads_max: Some(192_730),
                pid_max: Some(32768),
                io_uring_disabled: Some(0),
            }
        );
        // A kernel before 6.6 has no io_uring_disabled: absent, not 0.
        let old = ceilings(|p| (p != "kernel/io_uring_disabled").then(|| read(p)).flatten());
        assert_eq!(old.io_uring_disabled, None);
        assert_eq!(old.pid_max, Some(32768));
    }

    #[test]
    fn seccomp_from_status() {
        let host = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nNoNewPrivs:\t0\n\
Seccomp:\t0\nSeccomp_filters:\t0\nSpeculation_Store_Bypass:\tthread vulnerable\n";
        assert_eq!(parse_seccomp_mode(host), Some(0));
        let docker = "NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";
        assert_eq!(parse_seccomp_mode(docker), Some(2));
        assert_eq!(parse_seccomp_mode("Name:\tcat\n"), None);
    }
}
