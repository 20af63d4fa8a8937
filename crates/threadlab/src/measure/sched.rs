//! The calling thread's scheduling: SCHED_FIFO and nice levels, as the priority, latency and
//! coop experiments set them, and whether real-time priority is permitted at all (which the
//! environment records).
//!
//! Every setter acts on the calling thread only: Linux keeps policy and nice per thread, and the
//! experiments give different threads of one process different priorities.

use std::fmt;

use crate::error::{Error, Result};
use crate::measure::placement::pin_current_thread;

/// Why the calling thread could not be made SCHED_FIFO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FifoRefusal {
    /// The kernel refused priority `priority` with `errno` (EPERM without CAP_SYS_NICE or a
    /// high enough RLIMIT_RTPRIO, or when the cgroup has no real-time runtime).
    Denied { priority: i32, errno: i32 },
    /// The throw-away thread that tries it could not be spawned or panicked.
    Probe(String),
}

impl fmt::Display for FifoRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FifoRefusal::Denied { priority, errno } => write!(
                f,
                "pthread_setschedparam(SCHED_FIFO, {priority}) failed: {} (needs CAP_SYS_NICE or RLIMIT_RTPRIO)",
                std::io::Error::from_raw_os_error(*errno)
            ),
            FifoRefusal::Probe(why) => f.write_str(why),
        }
    }
}

/// Makes the calling thread SCHED_FIFO at `priority`.
///
/// `pthread_setschedparam` rather than `sched_setscheduler(0, ...)`: both reach the same system
/// call for this thread under glibc, but musl's `sched_setscheduler` always fails with ENOSYS,
/// and the pthread call returns its error instead of leaving it in `errno`.
fn set_fifo(priority: i32) -> std::result::Result<(), FifoRefusal> {
    // SAFETY: sched_param is a plain C struct; all-zero bytes is a valid value.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: pthread_self() is this live thread, and `param` is valid for the call.
    let rc = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(FifoRefusal::Denied {
            priority,
            errno: rc,
        })
    }
}

/// Makes the calling thread SCHED_FIFO at `prio`; Err(reason) when not permitted.
pub fn try_set_fifo(prio: i32) -> std::result::Result<(), String> {
    set_fifo(prio).map_err(|r| r.to_string())
}

/// The highest SCHED_FIFO priority (99 on Linux).
pub fn max_fifo_priority() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::sched_get_priority_max(libc::SCHED_FIFO) }
}

/// Tries SCHED_FIFO priority 1 on a fresh thread, which exits right after, so that the caller's
/// own policy never changes.
pub fn probe_fifo() -> std::result::Result<(), FifoRefusal> {
    let spawned = std::thread::Builder::new()
        .name("threadlab-rt-probe".to_string())
        .spawn(|| set_fifo(1));
    match spawned {
        Ok(handle) => handle
            .join()
            .unwrap_or_else(|_| Err(FifoRefusal::Probe("probe thread panicked".to_string()))),
        Err(e) => Err(FifoRefusal::Probe(format!(
            "could not spawn probe thread: {e}"
        ))),
    }
}

/// Whether this process may use SCHED_FIFO, checked on a throw-away thread.
pub fn fifo_permitted() -> std::result::Result<(), String> {
    probe_fifo().map_err(|r| r.to_string())
}

/// Sets the nice level of the calling thread only (setpriority on its tid).
pub fn set_nice(nice: i32) -> Result<()> {
    let tid = crate::sys::gettid();
    // SAFETY: plain system call on our own tid; no pointers.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc != 0 {
        return Err(Error::os(&format!("setpriority(nice {nice})")));
    }
    Ok(())
}

/// Pins the calling thread to `cpu` and sets its nice level. Callers that wait on a barrier
/// after it hold the result until they have passed the barrier, so that one failing thread
/// does not leave the others waiting.
pub fn pin_and_nice(cpu: usize, nice: i32) -> Result<()> {
    pin_current_thread(cpu)?;
    set_nice(nice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_call_and_the_fix() {
        let r = FifoRefusal::Denied {
            priority: 99,
            errno: libc::EPERM,
        };
        let text = r.to_string();
        assert!(text.starts_with("pthread_setschedparam(SCHED_FIFO, 99) failed"));
        assert!(text.contains("CAP_SYS_NICE"));
        assert_eq!(FifoRefusal::Probe("x".into()).to_string(), "x");
    }

    #[test]
    fn the_probe_answers_without_touching_the_caller() {
        // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
        let before = unsafe { libc::sched_getscheduler(0) };
        let _ = probe_fifo();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, before);
        assert!(max_fifo_priority() >= 1);
    }
}
