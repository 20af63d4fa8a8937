//! Waiting for descriptors the caller owns, and running blocking calls off the carrier (the
//! reactor's lower layers, the poller and the poll descriptors, are in `crate::poll`).
//!
//! Sockets should use [`crate::net`], whose types register their descriptor once and wait on it
//! without any extra system call. [`wait_readable`] and [`wait_writable`] are for other
//! descriptors (a pipe, an eventfd, a timerfd, a device): they block only the calling green
//! thread. Each wait that has to park registers the descriptor with the carrier's poller for
//! that one wait (`EPOLLONESHOT`) and removes it afterwards: two `epoll_ctl` calls, after a
//! `poll(2)` that finds a descriptor that is already ready without any of that. Outside a
//! runtime they block the OS thread in `poll(2)`.
//!
//! Calls that block and have no descriptor to wait on (a file read, name resolution, a C
//! library's own I/O) block the whole carrier; [`blocking`] runs one on a helper OS thread
//! while only the calling green thread waits.
//!
//! ```
//! use std::io::Write;
//! use std::os::fd::AsFd;
//! use std::os::unix::net::UnixStream;
//!
//! uthread::run(|| {
//!     let (mut a, b) = UnixStream::pair().unwrap(); // blocking std sockets, owned by us
//!     let waiter = uthread::spawn(move || {
//!         uthread::io::wait_readable(b.as_fd(), None).unwrap();
//!         b
//!     });
//!     a.write_all(b"x").unwrap();
//!     waiter.join();
//! });
//! ```

use crate::poll::desc::PollDesc;
use crate::poll::poller::{cvt, poll_blocking, Dir};
use crate::runtime::carrier::{context, current_carrier_ref, Context};
use crate::runtime::ops::{timed_out, wait_io, with_remote_wake_expected};
use crate::sync::{Mutex, Semaphore};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Waits until `fd` is readable (or at end of file, or in error), blocking only the calling
/// green thread. Fails with `TimedOut` once `deadline` has passed.
pub fn wait_readable(fd: impl AsFd, deadline: Option<Instant>) -> io::Result<()> {
    wait(fd.as_fd(), Dir::Read, deadline)
}

/// Waits until `fd` is writable (or in error), blocking only the calling green thread. Fails
/// with `TimedOut` once `deadline` has passed.
pub fn wait_writable(fd: impl AsFd, deadline: Option<Instant>) -> io::Result<()> {
    wait(fd.as_fd(), Dir::Write, deadline)
}

fn wait(fd: BorrowedFd<'_>, dir: Dir, deadline: Option<Instant>) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // Already ready: no registration needed.
    if poll_blocking(raw, dir, Some(Instant::now()))? {
        return Ok(());
    }
    let poller = match context() {
        Context::Green(_) => current_carrier_ref().and_then(|c| c.poller().cloned()),
        _ => None,
    };
    let Some(poller) = poller else {
        return if poll_blocking(raw, dir, deadline)? {
            Ok(())
        } else {
            Err(timed_out())
        };
    };
    let pd = PollDesc::acquire(raw, false);
    // The descriptor may already be in this poller (a uthread socket's own descriptor, or
    // another green thread waiting on it): register a duplicate then, which epoll tells apart.
    let mut dup: Option<OwnedFd> = None;
    let registered = match poller.add_oneshot(raw, dir, pd.token()) {
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            // SAFETY: F_DUPFD_CLOEXEC returns a fresh descriptor we own, or -1.
            cvt(unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 0) }).and_then(|d| {
                // SAFETY: as above.
                let d = unsafe { OwnedFd::from_raw_fd(d) };
                let r = poller.add_oneshot(d.as_raw_fd(), dir, pd.token());
                dup = Some(d);
                r
            })
        }
        r => r,
    };
    let r = registered.and_then(|()| wait_io(pd, dir, deadline, false));
    let _ = poller.delete(dup.as_ref().map_or(raw, |d| d.as_raw_fd()));
    pd.release();
    r
}

/// Runs `f` on a new OS thread and parks only the calling green thread until it returns; the
/// other green threads of its carrier keep running. For calls that would otherwise block the
/// whole carrier: reading a file, resolving a host name, a C library's blocking I/O. A panic
/// in `f` is re-raised here. Outside a runtime (and in `synchronize` callbacks), `f` simply
/// runs on the calling thread.
///
/// Each call starts an OS thread (tens of microseconds): batch small calls, or keep a worker
/// thread of your own for frequent ones.
///
/// ```
/// use std::net::ToSocketAddrs;
/// uthread::run(|| {
///     let addrs = uthread::io::blocking(|| ("localhost", 80).to_socket_addrs());
///     assert!(addrs.unwrap().next().is_some());
/// });
/// ```
pub fn blocking<F, R>(f: F) -> R
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    if !matches!(context(), Context::Green(_)) {
        return f();
    }
    let done = Arc::new(Semaphore::new(0));
    let slot = Arc::new(Mutex::new(None));
    let (d, s) = (Arc::clone(&done), Arc::clone(&slot));
    let helper = std::thread::Builder::new()
        .name("uthread-blocking".into())
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            *s.lock() = Some(r);
            d.release();
        });
    let r = match helper {
        Ok(_) => {
            // The release comes from the helper thread: not a deadlock while we wait.
            with_remote_wake_expected(|| done.acquire());
            slot.lock().take()
        }
        Err(e) => panic!("uthread: io::blocking could not start an OS thread: {e}"),
    };
    match r {
        Some(Ok(v)) => v,
        Some(Err(p)) => resume_unwind(p),
        None => unreachable!("uthread: the helper thread released without a result"),
    }
}
