//! The kernel side of the reactor: one epoll instance per carrier with an eventfd in it, and the
//! `poll(2)` fallback for callers outside any runtime.
//!
//! A leaf: it knows descriptors and tokens, nothing of threads or carriers. Each socket is
//! added once, edge-triggered, for both directions (`EPOLLIN | EPOLLOUT | EPOLLRDHUP |
//! EPOLLET`), with its poll descriptor's tagged address as the token (`poll::desc`); the eventfd
//! sits in the same set, level-triggered, under token 0, so that another OS thread can end a
//! carrier's `epoll_wait` by writing to it ([`Poller::notify`]).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The eventfd's token. Descriptor tokens are addresses, never 0.
pub(crate) const NOTIFY_TOKEN: u64 = 0;

/// One readiness event as the kernel reports it.
pub(crate) type Event = libc::epoll_event;

/// An empty event, to size the buffer `wait` fills.
pub(crate) const NO_EVENT: Event = libc::epoll_event { events: 0, u64: 0 };

/// Event bits that make a reader retry: data, end of stream, hang-up or an error.
pub(crate) const READ_BITS: u32 =
    (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Event bits of a hang-up or an error, which stay true once reported.
pub(crate) const HANGUP_BITS: u32 = (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Event bits that make a writer retry: room, hang-up or an error.
pub(crate) const WRITE_BITS: u32 = (libc::EPOLLOUT | libc::EPOLLHUP | libc::EPOLLERR) as u32;

/// Which side of a descriptor a thread waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// The result of a failed libc call as an `io::Error` (`-1` means failure, as for most calls).
pub(crate) fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An epoll instance and the eventfd that interrupts a wait on it.
pub(crate) struct Poller {
    epfd: OwnedFd,
    evfd: OwnedFd,
    /// `epoll_pwait2` (nanosecond timeouts, Linux 5.11) failed with `ENOSYS`: round timeouts up
    /// to milliseconds for `epoll_wait` instead.
    no_pwait2: AtomicBool,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("epfd", &self.epfd.as_raw_fd())
            .field("evfd", &self.evfd.as_raw_fd())
            .finish()
    }
}

impl Poller {
    /// A new epoll instance with its eventfd registered (two descriptors, close-on-exec).
    pub(crate) fn new() -> io::Result<Poller> {
        // SAFETY: plain system calls; each result is checked before it is wrapped, and each
        // wrapped descriptor is fresh and owned by nobody else.
        let (epfd, evfd) = unsafe {
            let ep = cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))?;
            let epfd = OwnedFd::from_raw_fd(ep);
            let ev = cvt(libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK))?;
            (epfd, OwnedFd::from_raw_fd(ev))
        };
        let p = Poller {
            epfd,
            evfd,
            no_pwait2: AtomicBool::new(false),
        };
        p.ctl(
            libc::EPOLL_CTL_ADD,
            p.evfd.as_raw_fd(),
            libc::EPOLLIN as u32,
            NOTIFY_TOKEN,
        )?;
        Ok(p)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid event for the duration of the call; the kernel validates
        // both descriptors.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Adds `fd` for both directions, edge-triggered: one registration for its whole life.
    pub(crate) fn add_edge(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Adds `fd` for one direction, reported once (for descriptors the user owns, which are
    /// registered for one wait only: `io::wait_readable`).
    pub(crate) fn add_oneshot(&self, fd: RawFd, dir: Dir, token: u64) -> io::Result<()> {
        let interest = match dir {
            Dir::Read => libc::EPOLLIN | libc::EPOLLRDHUP,
            Dir::Write => libc::EPOLLOUT,
        };
        self.ctl(
            libc::EPOLL_CTL_ADD,
            fd,
            (interest | libc::EPOLLONESHOT) as u32,
            token,
        )
    }

    /// Removes `fd` (an error if it is not registered, which callers may ignore).
    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for events at most `timeout` (`None`: until one arrives; zero: just look) and
    /// returns how many were written to the front of `events`. A signal ending the wait early
    /// (`EINTR`: the preemption tick) counts as no event.
    pub(crate) fn wait(&self, events: &mut [Event], timeout: Option<Duration>) -> usize {
        let max = events.len().min(i32::MAX as usize) as libc::c_int;
        let ep = self.epfd.as_raw_fd();
        let r = match timeout {
            Some(d) if !d.is_zero() && !self.no_pwait2.load(Ordering::Relaxed) => {
                let ts = crate::sys::timespec(d);
                // SAFETY: `events` is writable for `max` entries; `ts` lives across the call;
                // a null signal mask leaves the mask alone.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        ep,
                        events.as_mut_ptr(),
                        max,
                        &ts as *const libc::timespec,
                        core::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                } as libc::c_int;
                if r == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                    self.no_pwait2.store(true, Ordering::Relaxed);
                    return self.wait(events, timeout);
                }
                r
            }
            _ => {
                let ms = timeout.map_or(-1, ms_rounded_up);
                // SAFETY: `events` is writable for `max` entries.
                unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), max, ms) }
            }
        };
        r.max(0) as usize
    }

    /// Ends a current or the next `wait` on this poller, from any OS thread.
    pub(crate) fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. It can only fail with EAGAIN
        // when the counter is at its maximum, and then the eventfd is readable anyway.
        unsafe {
            libc::write(
                self.evfd.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
    }

    /// Resets the eventfd after its event was reported (it is level-triggered).
    pub(crate) fn drain(&self) {
        let mut n: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd (EAGAIN when
        // already drained, which is fine).
        unsafe {
            libc::read(
                self.evfd.as_raw_fd(),
                &mut n as *mut u64 as *mut libc::c_void,
                8,
            );
        }
    }
}

/// A duration as `epoll_wait`/`poll` milliseconds, rounded up so that a wait never ends before
/// its deadline (which would spin), and capped at `i32::MAX`.
fn ms_rounded_up(d: Duration) -> libc::c_int {
    let ms = d.as_nanos().div_ceil(1_000_000);
    ms.min(i32::MAX as u128) as libc::c_int
}

/// Blocks the calling OS thread until `fd` is ready for `dir` or `deadline` passes, with
/// `poll(2)`: how descriptors are waited for outside any runtime (and in `synchronize`
/// callbacks, which run outside every green thread). Returns `Ok(true)` when ready (errors and
/// hang-ups count as ready: the retried call reports them), `Ok(false)` at the deadline.
pub(crate) fn poll_blocking(fd: RawFd, dir: Dir, deadline: Option<Instant>) -> io::Result<bool> {
    let events = match dir {
        Dir::Read => libc::POLLIN | libc::POLLRDHUP,
        Dir::Write => libc::POLLOUT,
    };
    loop {
        // A deadline already passed still gets one look (timeout 0).
        let ms = deadline.map_or(-1, |d| {
            ms_rounded_up(d.saturating_duration_since(Instant::now()))
        });
        let mut p = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        match r {
            -1 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            0 if deadline.is_some_and(|d| Instant::now() >= d) => return Ok(false),
            0 => {} // woke a little early: the rounding is up, so this is rare
            _ => return Ok(true),
        }
    }
}
