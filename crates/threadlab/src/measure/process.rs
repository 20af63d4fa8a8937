//! Child processes and memory shared with them, made safe to interrupt.
//!
//! A forked child of a process that may have other threads can only do async-signal-safe work
//! (POSIX): the children here touch atomics in a MAP_SHARED mapping and make raw system calls,
//! nothing else (no allocation, no locks, no Rust std I/O). They die with the parent
//! (PR_SET_PDEATHSIG), take SIGINT/SIGTERM with the default action, and a `Child` guard kills and
//! reaps them if the measuring code returns early, so an interrupted run leaves no process behind.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::error::{Error, Result};

/// An anonymous MAP_SHARED mapping: visible to children forked after it was made.
pub struct SharedMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value (unmapped once, on drop), with no
// tie to the thread that made it.
unsafe impl Send for SharedMap {}
// SAFETY: all access from several threads goes through atomics or through raw byte copies that
// the experiments order with atomics.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    pub fn new(len: usize) -> Result<SharedMap> {
        let len = len.max(1);
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::os(&format!(
                "cannot map {len} bytes of shared memory"
            )));
        }
        Ok(SharedMap {
            ptr: NonNull::new(p.cast()).expect("mmap returned null without MAP_FAILED"),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The `i`-th cache line's first 32-bit word, for futexes shared between processes.
    pub fn word32(&self, i: usize) -> &AtomicU32 {
        let off = i * 64;
        assert!(
            off + 4 <= self.len,
            "shared word {i} is outside the mapping"
        );
        // SAFETY: as for word(): in bounds, aligned, valid initial value.
        unsafe { &*(self.ptr.as_ptr().add(off) as *const AtomicU32) }
    }

    /// The `i`-th 64-byte-aligned atomic word slot (each on its own cache line).
    pub fn word(&self, i: usize) -> &AtomicU64 {
        let off = i * 64;
        assert!(
            off + 8 <= self.len,
            "shared word {i} is outside the mapping"
        );
        // SAFETY: in bounds (checked), 64-byte aligned (mmap is page aligned), and AtomicU64 has
        // the layout of u64; the zero-filled mapping is a valid initial value.
        unsafe { &*(self.ptr.as_ptr().add(off) as *const AtomicU64) }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what new() mapped; no reference outlives self.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A forked child that is killed and reaped when dropped unless it was waited for.
pub struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Waits for the child to exit; Err if it did not exit with status 0.
    pub fn wait(mut self) -> Result<()> {
        let status = wait_pid(self.pid)?;
        self.reaped = true;
        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
            Ok(())
        } else {
            Err(Error::Fail(format!(
                "child process {} ended abnormally (wait status {status:#x})",
                self.pid
            )))
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: the pid is our unreaped child, so it cannot have been reused.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
            let _ = wait_pid(self.pid);
        }
    }
}

/// waitpid, retried on EINTR.
pub fn wait_pid(pid: libc::pid_t) -> Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(status);
        }
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(Error::os("waitpid"));
        }
    }
}

/// Forks a child that runs `body` and then `_exit(0)`.
///
/// # Safety
/// `body` runs in a child forked from a possibly multi-threaded process: it must be
/// async-signal-safe. It may read and write atomics and plain memory (including SharedMap), and
/// make raw system calls (sched_yield, read, write, clock_gettime, futex); it must not allocate,
/// lock, print, or unwind. It must return (or `_exit`) on its own.
pub unsafe fn fork_child(pin_cpu: Option<usize>, body: impl FnOnce()) -> Result<Child> {
    let parent = libc::getpid();
    let pid = libc::fork();
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EAGAIN) {
            return Err(crate::measure::spawn::thread_refused(
                "a child process (fork)",
                &e,
            ));
        }
        return Err(Error::Fail(format!("fork: {e}")));
    }
    if pid == 0 {
        // In the child: only async-signal-safe calls from here to _exit.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        // The parent's handlers would only set a flag in the child's copy of memory. A signal
        // sent to the whole process group (a terminal's Ctrl-C or hang-up, `kill -- -PGID`)
        // reaches the child too: it ignores all three interrupting signals and lets the parent
        // finish its batch and kill it, so the parent never waits on a partner that vanished (a
        // pipe or futex hand-off would block for good). It still ends with the parent
        // (PR_SET_PDEATHSIG above) and when the parent kills or drops it.
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = libc::SIG_IGN;
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
        if let Some(cpu) = pin_cpu {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        body();
        libc::_exit(0);
    }
    Ok(Child { pid, reaped: false })
}

/// A program run by the lab (the Go toolchain, the Go peer, a probe: `std::process::Child`)
/// that is ended with all its descendants, and reaped, when this guard is dropped: an error, an
/// interruption or a panic never leaves it running. While it lives it is registered with the
/// interruption handler, which kills it if a second signal ends the lab at once.
///
/// Its stderr, when piped, is drained as it comes and kept (`stderr()`): every error about the
/// program quotes what it said.
pub struct Supervised {
    pub child: std::process::Child,
    what: String,
    registered: Option<crate::cancel::ChildGuard>,
    stderr: crate::measure::child_output::StderrLog,
}

impl Supervised {
    pub fn spawn(cmd: &mut std::process::Command, what: &str) -> std::io::Result<Supervised> {
        let mut child = cmd.spawn()?;
        // `registered` is Some while the child may still run: it doubles as "not yet reaped".
        let registered = Some(crate::cancel::ChildGuard::register(child.id() as i32));
        let stderr = match child.stderr.take() {
            Some(e) => crate::measure::child_output::StderrLog::drain(e),
            None => Default::default(),
        };
        Ok(Supervised {
            child,
            what: what.to_string(),
            registered,
            stderr,
        })
    }

    /// What the program said on stderr (when it was piped).
    pub fn stderr(&self) -> &crate::measure::child_output::StderrLog {
        &self.stderr
    }

    /// Runs `cmd` to its end (stdin closed, stdout and stderr piped), within `limit` and until
    /// `cancel`: its exit status, stdout (a short answer: read once it ended) and stderr.
    pub fn run_to_end(
        cmd: &mut std::process::Command,
        what: &str,
        cancel: &crate::cancel::Cancel,
        limit: std::time::Duration,
    ) -> std::io::Result<Result<(std::process::ExitStatus, String, String)>> {
        use std::process::Stdio;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut p = Supervised::spawn(cmd, what)?;
        Ok(p.wait(cancel, limit).map(|status| {
            let mut out = String::new();
            if let Some(mut o) = p.child.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut o, &mut out);
            }
            p.stderr.wait_closed(std::time::Duration::from_millis(200));
            (status, out, p.stderr.text())
        }))
    }

    /// Whether the child has ended, without reaping it; when it has, it is unregistered
    /// first, so the handler can never kill a pid the kernel gave to another process.
    fn ended(&mut self) -> bool {
        if self.registered.is_none() {
            return true;
        }
        let pid = self.child.id() as libc::id_t;
        // SAFETY: siginfo_t is plain data that waitid fills; WNOWAIT leaves the child
        // waitable, WNOHANG makes it return at once.
        let (rc, si_pid) = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            (rc, info.si_pid())
        };
        // ECHILD: already reaped (through `child`), so certainly ended.
        let exited = (rc == 0 && si_pid != 0)
            || (rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD));
        if exited {
            self.registered = None;
        }
        exited
    }

    /// Its exit status if it ends within `limit` (reaped, after it is unregistered), else
    /// `None` and it keeps running.
    pub fn exit_within(&mut self, limit: std::time::Duration) -> Option<std::process::ExitStatus> {
        let end = std::time::Instant::now() + limit;
        loop {
            if self.ended() {
                return self.child.wait().ok();
            }
            if std::time::Instant::now() >= end {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Waits for the program to end, checking `cancel` every 10 ms and giving up after
    /// `limit`; on either it is killed (with its descendants) and reaped.
    pub fn wait(
        &mut self,
        cancel: &crate::cancel::Cancel,
        limit: std::time::Duration,
    ) -> Result<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if self.ended() {
                return Ok(self.child.wait()?);
            }
            if cancel.is_cancelled() {
                self.kill();
                cancel.check()?;
            }
            if std::time::Instant::now() > deadline {
                self.kill();
                let said = self.stderr.text();
                return Err(Error::Fail(format!(
                    "{} ran for over {} s and was stopped{}",
                    self.what,
                    limit.as_secs_f64(),
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(" (it said: {said})")
                    }
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Ends the program and its descendants at once (SIGKILL) and reaps it. The tree is found
    /// and stopped before anything is killed (`proctree::kill_tree`): a grandchild whose parent
    /// died first would be an orphan of init, out of reach.
    pub fn kill(&mut self) {
        if self.registered.is_some() {
            // Not reaped (registered), so the pid still names our child.
            crate::proctree::kill_tree(self.child.id() as libc::pid_t);
        }
        let _ = self.child.kill();
        while !self.ended() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _ = self.child.wait();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if self.ended() {
            // Reaps it if `wait` did not (a no-op when it did).
            let _ = self.child.try_wait();
        } else {
            self.kill();
        }
    }
}

/// A clock read with a raw clock_gettime, in ns (async-signal-safe; usable in a forked child).
#[inline]
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer; the callers pass clocks Linux always provides.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The monotonic clock, in ns.
#[inline]
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `deadline_ns`. A signal may end the sleep
/// early: callers measure their wake-up against the deadline, so an early one shows as such.
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid absolute CLOCK_MONOTONIC time; with TIMER_ABSTIME no remainder is
    // written, so the null remainder pointer is never dereferenced.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        );
    }
}

/// CPU time of the calling OS thread, in ns (user + system).
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Spins until `done()` holds, yielding the CPU after a short spin so that a partner pinned to
/// the same CPU (or a 1-CPU machine) can run. Gives up with Err after `limit_ns`.
pub fn wait_until(mut done: impl FnMut() -> bool, limit_ns: u64) -> Result<()> {
    let start = mono_ns();
    let mut spins = 0u32;
    while !done() {
        spins += 1;
        if spins < 200 {
            std::hint::spin_loop();
        } else {
            // SAFETY: sched_yield has no preconditions.
            unsafe {
                libc::sched_yield();
            }
            if spins % 1024 == 0 && mono_ns() - start > limit_ns {
                return Err(Error::Fail(
                    "a partner thread or process stopped responding".into(),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn child_sees_shared_memory_and_exits_cleanly() {
        let map = SharedMap::new(4096).unwrap();
        let w = map.word(0);
        // SAFETY: the body only stores to an atomic in the shared mapping.
        let child = unsafe { fork_child(None, || w.store(42, Ordering::SeqCst)) }.unwrap();
        child.wait().unwrap();
        assert_eq!(map.word(0).load(Ordering::SeqCst), 42);
    }

    #[test]
    fn dropping_a_child_kills_and_reaps_it() {
        let map = SharedMap::new(4096).unwrap();
        let w = map.word(1);
        // SAFETY: the body only loads an atomic and calls sched_yield.
        let child = unsafe {
            fork_child(None, || {
                while w.load(Ordering::SeqCst) == 0 {
                    libc::sched_yield();
                }
            })
        }
        .unwrap();
        let pid = child.pid();
        drop(child);
        // The pid is reaped: waiting again finds no such child.
        // SAFETY: a null status pointer is allowed (the status is not wanted); WNOHANG never
        // blocks, and a pid that is no longer our child is an error return, not undefined.
        let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
        assert_eq!(rc, -1);
    }
}
