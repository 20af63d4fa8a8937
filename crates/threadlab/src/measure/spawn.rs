//! Starting threads, pipes and other things a resource limit can refuse, so that a refusal
//! becomes a skip that names the limit (`ulimit -u`, `ulimit -n`, kernel.threads-max, a
//! cgroup's pids.max) instead of a panic or an internal error.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{Scope, ScopedJoinHandle};

use crate::error::Error;
use crate::measure::env::{rlimit, Resource, Rlimit};

/// Starts a scoped thread; if the system refuses, `Err(Skip)` says which limit to raise.
pub fn spawn_scoped<'scope, T: Send + 'scope>(
    s: &'scope Scope<'scope, '_>,
    what: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> crate::error::Result<ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new()
        .spawn_scoped(s, f)
        .map_err(|e| thread_refused(what, &e))
}

/// Starts a detached thread, with the same refusal as `spawn_scoped`.
pub fn spawn<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> crate::error::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .spawn(f)
        .map_err(|e| thread_refused(what, &e))
}

/// The skip for a thread the system would not start.
pub fn thread_refused(what: &str, e: &std::io::Error) -> Error {
    Error::Skip(format!(
        "cannot start {what}: {e}; the limit on threads or processes is in the way \
         (RLIMIT_NPROC soft {}, kernel.threads-max, or the cgroup's pids.max): raise it with \
         `ulimit -u` or run on a machine that allows more threads",
        rlimit_text(libc::RLIMIT_NPROC)
    ))
}

/// The skip for a file descriptor (pipe, socket, file) the system would not give.
pub fn fd_refused(what: &str, e: &std::io::Error) -> Error {
    if out_of_fds(e) {
        Error::Skip(fd_limit_text(&format!("cannot open {what}"), e))
    } else {
        Error::Fail(format!("cannot open {what}: {e}"))
    }
}

/// The skip for something that would not start, a program or a pool (`doing` says which,
/// "cannot start ..."): out of descriptors names `ulimit -n`; anything else (a CPU it may not
/// use, a thread refused) is said as it is.
pub fn start_refused(doing: &str, e: &std::io::Error) -> Error {
    if out_of_fds(e) {
        Error::Skip(fd_limit_text(doing, e))
    } else {
        Error::Skip(format!("{doing}: {e}"))
    }
}

/// Whether `e` says this process (EMFILE) or the system (ENFILE) is out of descriptors.
pub fn out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// What to do about it: the limit, and how to raise it.
pub fn fd_limit_hint() -> String {
    format!(
        "the limit on open files is in the way (RLIMIT_NOFILE soft {}): raise it with `ulimit -n`",
        rlimit_text(libc::RLIMIT_NOFILE)
    )
}

fn fd_limit_text(doing: &str, e: &std::io::Error) -> String {
    format!("{doing}: {e}; {}", fd_limit_hint())
}

/// A uthread runtime with its descriptors (the carrier's poller) already open, so that a
/// process out of descriptors gets a skip that names `ulimit -n` instead of a panic of
/// `block_on`.
pub fn green_runtime(rt: uthread::Runtime) -> crate::error::Result<uthread::Runtime> {
    rt.prepare()
        .map_err(|e| fd_refused("a uthread runtime's poller (an epoll and an eventfd)", &e))?;
    Ok(rt)
}

/// A start line for threads that must begin together, which (unlike `std::sync::Barrier`)
/// can be called off: when a later thread cannot be started, the ones already waiting are
/// released with `false` instead of waiting forever, and the scope can end.
pub struct StartGate {
    arrived: AtomicUsize,
    parties: usize,
    aborted: AtomicBool,
}

impl StartGate {
    pub fn new(parties: usize) -> StartGate {
        StartGate {
            arrived: AtomicUsize::new(0),
            parties,
            aborted: AtomicBool::new(false),
        }
    }

    /// Arrives and waits for all parties; false when the start was called off. Waits by
    /// yielding, so parties pinned to one CPU all get to arrive.
    pub fn wait(&self) -> bool {
        self.wait_unless(|| false)
    }

    /// As `wait`, but also gives up (`false`, and calls the start off for the others) as soon
    /// as `stop` says so: a real-time party yielding here can keep fair-class parties pinned to
    /// its CPU from arriving until real-time throttling steps in, and an interruption must not
    /// wait for that.
    pub fn wait_unless(&self, stop: impl Fn() -> bool) -> bool {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        loop {
            if self.aborted.load(Ordering::Acquire) {
                return false;
            }
            if self.arrived.load(Ordering::Acquire) >= self.parties {
                return true;
            }
            if stop() {
                self.abort();
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// Calls the start off: every waiting and later party gets `false`.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
    }
}

/// What a thread returns when its start was called off (the caller reports the real reason).
pub fn start_called_off() -> Error {
    Error::Skip("the start was called off because another thread could not be started".into())
}

/// A process limit's soft value as text ("unlimited", "20").
fn rlimit_text(resource: Resource) -> String {
    match rlimit(resource) {
        None => "unknown".into(),
        Some(Rlimit { soft: None, .. }) => "unlimited".into(),
        Some(Rlimit { soft: Some(v), .. }) => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_limit() {
        let e = thread_refused("a worker", &std::io::Error::from_raw_os_error(libc::EAGAIN));
        assert!(matches!(&e, Error::Skip(m) if m.contains("ulimit -u") && m.contains("a worker")));
        let e = fd_refused("a pipe", &std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(matches!(&e, Error::Skip(m) if m.contains("ulimit -n")));
        let e = fd_refused("a pipe", &std::io::Error::from_raw_os_error(libc::EIO));
        assert!(matches!(e, Error::Fail(_)));
    }

    #[test]
    fn a_called_off_start_releases_the_waiting_threads() {
        let gate = StartGate::new(3);
        let released = std::thread::scope(|s| {
            let h = spawn_scoped(s, "a waiter", || gate.wait()).unwrap();
            // The third party never comes: call the start off instead of hanging.
            std::thread::sleep(std::time::Duration::from_millis(10));
            gate.abort();
            h.join().unwrap()
        });
        assert!(!released);
        let gate = StartGate::new(2);
        let both = std::thread::scope(|s| {
            let h = spawn_scoped(s, "a waiter", || gate.wait()).unwrap();
            let me = gate.wait();
            me && h.join().unwrap()
        });
        assert!(both);
    }

    #[test]
    fn scoped_threads_start_and_join() {
        let v = std::thread::scope(|s| {
            let h = spawn_scoped(s, "a test thread", || 41 + 1).unwrap();
            h.join().unwrap()
        });
        assert_eq!(v, 42);
    }
}
