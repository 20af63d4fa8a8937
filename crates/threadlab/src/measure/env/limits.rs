//! Per-process limits: resource limits and whether real-time priority is permitted.

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
pub(super) type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub(super) type Resource = libc::c_int;

/// One resource limit of this process; `None` when it cannot be read.
pub(super) fn rlimit(resource: Resource) -> Option<Rlimit> {
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
}
