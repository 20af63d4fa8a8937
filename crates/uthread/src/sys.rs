//! The operating-system calls the runtime shares: futex wait and wake, installing a signal
//! handler, and the small conversions around them.
//!
//! A leaf: it knows nothing of threads or carriers, so every layer above may use it.

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// An `InvalidInput` error whose message names the crate, for rejected parameters.
pub(crate) fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("uthread: {msg}"))
}

/// A duration as the kernel's `timespec` (timer intervals, futex timeouts).
pub(crate) fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// The one futex call both operations go through. Private futexes: every word waited on lives
/// in this process.
fn futex(word: &AtomicU32, op: libc::c_int, val: u32, timeout: *const libc::timespec) {
    // SAFETY: the word is a valid, aligned u32 for the whole call (it is borrowed); WAIT reads
    // it and `timeout`, which is null or points at a live timespec (callers); WAKE ignores the
    // timeout argument. Neither operation writes user memory. The result is not needed: a
    // wait that returns early (EINTR, EAGAIN, timeout) is re-checked by every caller.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op | libc::FUTEX_PRIVATE_FLAG,
            val,
            timeout,
        );
    }
}

/// Wakes up to `n` OS threads waiting on `word`.
pub(crate) fn futex_wake(word: &AtomicU32, n: i32) {
    futex(word, libc::FUTEX_WAKE, n as u32, core::ptr::null());
}

/// Sleeps while `word == expected`, at most `timeout` (forever if `None`). Returns on a wake,
/// a changed word, a signal or the timeout alike: callers re-check their condition.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(timespec);
    let tsp = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    futex(word, libc::FUTEX_WAIT, expected, tsp);
}

/// Installs `handler` for `sig` with `flags`; while it runs, the kernel blocks `sig` (unless
/// `SA_NODEFER`) and, with `block_all`, every other signal too. Returns the previous action, or
/// `None` if the kernel refused.
///
/// # Safety
/// `handler` is `SIG_DFL`, `SIG_IGN`, or a function with the signature `flags` implies
/// (three arguments with `SA_SIGINFO`) that is async-signal-safe.
pub(crate) unsafe fn install_sigaction(
    sig: libc::c_int,
    handler: libc::sighandler_t,
    flags: libc::c_int,
    block_all: bool,
) -> Option<libc::sigaction> {
    // SAFETY: zeroed sigaction and sigset_t are valid starting points; we fill handler, flags
    // and the mask. The handler's soundness is the caller's contract.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = flags;
        if block_all {
            libc::sigfillset(&mut sa.sa_mask);
        } else {
            libc::sigemptyset(&mut sa.sa_mask);
        }
        let mut old: libc::sigaction = core::mem::zeroed();
        (libc::sigaction(sig, &sa, &mut old) == 0).then_some(old)
    }
}

/// The calling OS thread's kernel id.
pub(crate) fn gettid() -> libc::pid_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// The calling OS thread's `errno` slot.
pub(crate) fn errno_location() -> *mut libc::c_int {
    // SAFETY: __errno_location has no preconditions and is async-signal-safe.
    unsafe { libc::__errno_location() }
}
