//! Waiting for descriptors the caller owns, and the reactor's lower layers.
//!
//! Sockets should use [`crate::net`], whose types register their descriptor once and wait on it
//! without any extra system call. [`wait_readable`] and [`wait_writable`] are for other
//! descriptors (a pipe, an eventfd, a timerfd, a device): they block only the calling green
//! thread. Each wait that has to park registers the descriptor with the carrier's poller for
//! that one wait (`EPOLLONESHOT`) and removes it afterwards: two `epoll_ctl` calls, after a
//! `poll(2)` that finds a descriptor that is already ready without any of that. Outside a
//! runtime they block the OS thread in `poll(2)`.
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

pub(crate) mod desc;
pub(crate) mod poller;

use crate::runtime::carrier::{context, current_carrier_ref, Context};
use crate::runtime::ops::{timed_out, wait_io};
use desc::PollDesc;
use poller::{cvt, poll_blocking, Dir};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
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
