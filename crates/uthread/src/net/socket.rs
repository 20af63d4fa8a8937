//! The socket core every `net` type is built on: a non-blocking descriptor, its poll
//! descriptor, read and write timeouts and deadlines, and the loop that turns a non-blocking
//! call into a blocking one.
//!
//! The loop: make the system call; on `EAGAIN` wait for the direction (`runtime::ops::wait_io`:
//! a green thread parks, any other caller blocks in `poll(2)`) and make it again. No clock is
//! read unless a timeout or deadline is set, and then only once the call would block.
//!
//! One system call is saved per exchange: a read (or write) that moved fewer bytes than asked
//! shows that the socket's receive queue was empty (or its send buffer full) at that moment, so
//! the next read of the same direction waits first instead of making a call that would only
//! return `EAGAIN`. Every byte that arrives afterwards makes the edge-triggered poller report
//! the socket again, so nothing is missed (epoll(7), "Q9"; Tokio's `PollEvented` and Netty's
//! epoll transport do the same). The exception is the end: once the peer's FIN (or an error)
//! has been reported, the next read returns at once and nothing is reported again, so after a
//! hang-up (`PollDesc::hung_up`) every call is tried first.

use crate::poll::desc::{PollDesc, SHUT_READ, SHUT_WRITE};
use crate::poll::poller::{cvt, Dir};
use crate::runtime::ops::wait_io;
use crate::runtime::reactor::wake;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::{size_of, ManuallyDrop};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A socket that waits like a blocking one but never blocks its carrier.
pub(crate) struct Socket {
    fd: OwnedFd,
    pd: &'static PollDesc,
    /// Per-call timeouts in ns (0: none), as `SO_RCVTIMEO`/`SO_SNDTIMEO` would be.
    timeout: [AtomicU64; 2],
    /// Absolute deadlines as ns after `epoch()`, plus one (0: none).
    deadline: [AtomicU64; 2],
    /// The last read (write) moved fewer bytes than asked: the direction is known not ready
    /// (module docs).
    drained: [AtomicBool; 2],
    /// A short transfer proves the direction not ready: TCP only. (A Unix-socket read also
    /// stops early at a message that carries descriptors or other credentials, with data
    /// left behind.)
    short_means_empty: bool,
}

fn idx(dir: Dir) -> usize {
    match dir {
        Dir::Read => 0,
        Dir::Write => 1,
    }
}

/// The origin deadlines are stored against.
fn epoch() -> Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    *E.get_or_init(Instant::now)
}

/// `-1` and errno as an `io::Error`, for calls returning `ssize_t`.
fn cvt_size(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn would_block(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EAGAIN)
}

/// A new socket of `family` and `ty`, non-blocking and close-on-exec.
pub(crate) fn new_socket(family: libc::c_int, ty: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain system call; a non-negative result is a fresh descriptor we own.
    unsafe {
        let fd = cvt(libc::socket(
            family,
            ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Makes `fd` non-blocking (descriptors handed in by the user may be blocking).
pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on a descriptor the caller owns; no memory is passed.
    unsafe {
        let flags = cvt(libc::fcntl(fd, libc::F_GETFL))?;
        let new = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if new != flags {
            cvt(libc::fcntl(fd, libc::F_SETFL, new))?;
        }
    }
    Ok(())
}

/// Sets a socket option of type `T`.
pub(crate) fn setsockopt<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: T,
) -> io::Result<()> {
    // SAFETY: `value` is a live `T` whose size is passed with it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Reads a socket option of type `T` (a plain integer or C struct).
pub(crate) fn getsockopt<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<T> {
    // SAFETY: the options read here are plain integers or C structs, valid when zeroed.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut value as *mut T as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(value)
}

impl Socket {
    /// Takes ownership of a non-blocking descriptor.
    pub(crate) fn from_nonblocking(fd: OwnedFd) -> Socket {
        let pd = PollDesc::acquire(fd.as_raw_fd(), true);
        Socket {
            fd,
            pd,
            timeout: [AtomicU64::new(0), AtomicU64::new(0)],
            deadline: [AtomicU64::new(0), AtomicU64::new(0)],
            drained: [AtomicBool::new(false), AtomicBool::new(false)],
            short_means_empty: false,
        }
    }

    /// Marks a TCP socket: a short transfer then proves its direction not ready.
    pub(crate) fn tcp(mut self) -> Socket {
        self.short_means_empty = true;
        self
    }

    /// Takes ownership of any descriptor, making it non-blocking.
    pub(crate) fn from_fd(fd: OwnedFd) -> io::Result<Socket> {
        set_nonblocking(fd.as_raw_fd(), true)?;
        Ok(Socket::from_nonblocking(fd))
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Deregisters and gives up the descriptor (still non-blocking).
    pub(crate) fn into_fd(self) -> OwnedFd {
        let me = ManuallyDrop::new(self);
        me.pd.release();
        // SAFETY: `me` is never dropped, so the descriptor is moved out exactly once.
        unsafe { std::ptr::read(&me.fd) }
    }

    /// A second socket on the same open file (`dup`), with its own registration and the same
    /// timeouts.
    pub(crate) fn try_clone(&self) -> io::Result<Socket> {
        // SAFETY: F_DUPFD_CLOEXEC returns a fresh descriptor we own, or -1.
        let fd = unsafe {
            OwnedFd::from_raw_fd(cvt(libc::fcntl(self.raw(), libc::F_DUPFD_CLOEXEC, 0))?)
        };
        let mut s = Socket::from_nonblocking(fd);
        s.short_means_empty = self.short_means_empty;
        for i in 0..2 {
            s.timeout[i].store(self.timeout[i].load(Ordering::Relaxed), Ordering::Relaxed);
            s.deadline[i].store(self.deadline[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        Ok(s)
    }

    /// When a wait in `dir` that starts now must end: the earlier of the per-call timeout and
    /// the absolute deadline.
    fn deadline_for(&self, dir: Dir) -> Option<Instant> {
        let t = self.timeout[idx(dir)].load(Ordering::Relaxed);
        let d = self.deadline[idx(dir)].load(Ordering::Relaxed);
        let by_timeout = (t != 0).then(|| Instant::now() + Duration::from_nanos(t));
        let by_deadline = (d != 0).then(|| epoch() + Duration::from_nanos(d - 1));
        match (by_timeout, by_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs `op` until it does not fail with `EAGAIN`, waiting for `dir` in between.
    #[inline]
    pub(crate) fn io<T>(&self, dir: Dir, op: impl FnMut(RawFd) -> io::Result<T>) -> io::Result<T> {
        self.io_loop(dir, false, op)
    }

    /// `io` for a transfer of `len` bytes: waits first when the last transfer in `dir` showed
    /// the direction not ready, and records whether this one does (module docs).
    #[inline]
    fn transfer(
        &self,
        dir: Dir,
        len: usize,
        op: impl FnMut(RawFd) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let drained = &self.drained[idx(dir)];
        let wait_first = len != 0 && drained.load(Ordering::Relaxed) && !self.pd.hung_up(dir);
        let r = self.io_loop(dir, wait_first, op);
        if let Ok(n) = r {
            drained.store(
                self.short_means_empty && n != 0 && n < len,
                Ordering::Relaxed,
            );
        }
        r
    }

    #[inline]
    fn io_loop<T>(
        &self,
        dir: Dir,
        mut wait_first: bool,
        mut op: impl FnMut(RawFd) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut deadline = None;
        loop {
            if !wait_first {
                match op(self.raw()) {
                    Err(e) if would_block(&e) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => return r,
                }
            }
            wait_first = false;
            let d = *deadline.get_or_insert_with(|| self.deadline_for(dir));
            wait_io(self.pd, dir, d, true)?;
        }
    }

    /// Waits for `dir` once (after a call returned `EAGAIN` or `EINPROGRESS`), with the
    /// direction's timeout and deadline or the explicit `deadline`.
    pub(crate) fn wait(&self, dir: Dir, deadline: Option<Instant>) -> io::Result<()> {
        let d = deadline.or_else(|| self.deadline_for(dir));
        wait_io(self.pd, dir, d, true)
    }

    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.transfer(Dir::Read, buf.len(), |fd| {
            // SAFETY: `buf` is writable for its length.
            cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) })
        })
    }

    pub(crate) fn read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let n = bufs.len().min(1024);
        let len = bufs[..n].iter().map(|b| b.len()).sum();
        let n = n as libc::c_int;
        self.transfer(Dir::Read, len, |fd| {
            // SAFETY: `IoSliceMut` is ABI-compatible with `iovec`; each is writable.
            cvt_size(unsafe { libc::readv(fd, bufs.as_mut_ptr() as *const libc::iovec, n) })
        })
    }

    pub(crate) fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io(Dir::Read, |fd| {
            // SAFETY: `buf` is writable for its length.
            cvt_size(unsafe {
                libc::recv(
                    fd,
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_PEEK,
                )
            })
        })
    }

    /// `send` with `MSG_NOSIGNAL`: a closed peer is an `EPIPE` error, never a `SIGPIPE`.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.transfer(Dir::Write, buf.len(), |fd| {
            // SAFETY: `buf` is readable for its length.
            cvt_size(unsafe {
                libc::send(
                    fd,
                    buf.as_ptr() as *const libc::c_void,
                    buf.len(),
                    libc::MSG_NOSIGNAL,
                )
            })
        })
    }

    /// `sendmsg` with `MSG_NOSIGNAL`.
    pub(crate) fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let len = bufs[..bufs.len().min(1024)].iter().map(|b| b.len()).sum();
        self.transfer(Dir::Write, len, |fd| {
            // SAFETY: a zeroed msghdr is valid (no name, no control data); `IoSlice` is
            // ABI-compatible with `iovec` and each is readable.
            cvt_size(unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
                msg.msg_iovlen = bufs.len().min(1024);
                libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL)
            })
        })
    }

    /// Shuts down one or both directions. A green thread waiting on a shut direction at that
    /// moment fails with `ConnectionAborted` (a later read returns end of stream, as std's).
    pub(crate) fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let (bits, how) = match how {
            Shutdown::Read => (SHUT_READ, libc::SHUT_RD),
            Shutdown::Write => (SHUT_WRITE, libc::SHUT_WR),
            Shutdown::Both => (SHUT_READ | SHUT_WRITE, libc::SHUT_RDWR),
        };
        // Waiters first, so that they fail rather than see the end of stream the kernel
        // reports next.
        for t in self.pd.shut(bits) {
            if !t.is_null() {
                wake(t);
            }
        }
        // SAFETY: shutdown on our own descriptor.
        cvt(unsafe { libc::shutdown(self.raw(), how) }).map(drop)
    }

    pub(crate) fn set_timeout(&self, dir: Dir, d: Option<Duration>) -> io::Result<()> {
        let ns = match d {
            None => 0,
            Some(d) if d.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "uthread: cannot set a 0 duration timeout",
                ))
            }
            Some(d) => d.as_nanos().clamp(1, u64::MAX as u128) as u64,
        };
        self.timeout[idx(dir)].store(ns, Ordering::Relaxed);
        Ok(())
    }

    pub(crate) fn timeout(&self, dir: Dir) -> Option<Duration> {
        match self.timeout[idx(dir)].load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    pub(crate) fn set_deadline(&self, dir: Dir, at: Option<Instant>) {
        let v = match at {
            None => 0,
            Some(at) => {
                let ns = at.saturating_duration_since(epoch()).as_nanos();
                ns.min(u64::MAX as u128 - 1) as u64 + 1
            }
        };
        self.deadline[idx(dir)].store(v, Ordering::Relaxed);
    }

    pub(crate) fn deadline(&self, dir: Dir) -> Option<Instant> {
        match self.deadline[idx(dir)].load(Ordering::Relaxed) {
            0 => None,
            v => Some(epoch() + Duration::from_nanos(v - 1)),
        }
    }

    /// The pending socket error (`SO_ERROR`), taken.
    pub(crate) fn take_error(&self) -> io::Result<Option<io::Error>> {
        let e: libc::c_int = getsockopt(self.raw(), libc::SOL_SOCKET, libc::SO_ERROR)?;
        Ok((e != 0).then(|| io::Error::from_raw_os_error(e)))
    }

    /// `SO_LINGER`: `Some(0)` makes closing reset the connection.
    pub(crate) fn set_linger(&self, d: Option<Duration>) -> io::Result<()> {
        let l = libc::linger {
            l_onoff: libc::c_int::from(d.is_some()),
            l_linger: d.map_or(0, |d| d.as_secs().min(i32::MAX as u64) as libc::c_int),
        };
        setsockopt(self.raw(), libc::SOL_SOCKET, libc::SO_LINGER, l)
    }

    pub(crate) fn linger(&self) -> io::Result<Option<Duration>> {
        let l: libc::linger = getsockopt(self.raw(), libc::SOL_SOCKET, libc::SO_LINGER)?;
        Ok((l.l_onoff != 0).then(|| Duration::from_secs(l.l_linger as u64)))
    }

    /// Completes a non-blocking `connect` that returned `EINPROGRESS`: waits until the socket
    /// is writable, then reads the outcome.
    pub(crate) fn finish_connect(&self, deadline: Option<Instant>) -> io::Result<()> {
        loop {
            self.wait(Dir::Write, deadline)?;
            if let Some(e) = self.take_error()? {
                return Err(e);
            }
            // Writable without an error: connected, unless the wake-up was early.
            let mut raw = super::addr::RawAddr::empty();
            // SAFETY: `raw` is writable storage of the length passed.
            let r = unsafe { libc::getpeername(self.raw(), raw.as_mut_ptr(), &mut raw.len) };
            match cvt(r) {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // Deregister while the descriptor is still open; `fd` closes it right after.
        self.pd.release();
    }
}

impl IntoRawFd for Socket {
    fn into_raw_fd(self) -> RawFd {
        self.into_fd().into_raw_fd()
    }
}
