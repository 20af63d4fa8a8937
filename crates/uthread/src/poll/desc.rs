//! Poll descriptors: what a descriptor shares between the green threads that wait on it, the
//! carriers whose pollers report it, and whoever shuts it down. Go's `pollDesc`, on atomics.
//!
//! # The waiter slots
//!
//! Each direction has one word: `NIL`, `READY` (the poller reported the direction since the
//! last waiter looked), or the address of the one green thread parked on it. The protocol:
//!
//! 1. A thread tries its system call first; only on `EAGAIN` does it look at the slot.
//! 2. `READY` -> `NIL` ([`take_ready`](PollDesc::take_ready)): something happened since the
//!    call failed; retry the call instead of parking.
//! 3. `NIL` -> the thread ([`prepare_park`](PollDesc::prepare_park)), then block. Whoever
//!    takes the thread out of the slot owns its one wake-up: the poller reporting the
//!    direction ([`unblock`](PollDesc::unblock) with `ready`, which leaves `READY` behind), a
//!    deadline firing ([`cancel_park`](PollDesc::cancel_park), a compare-and-swap on the thread
//!    itself), or a shutdown ([`unblock`](PollDesc::unblock) without `ready`). Exactly one of
//!    them succeeds, so a thread is woken exactly once per park and never later by a stale
//!    party.
//! 4. Woken, the thread swaps the slot back to `NIL` ([`finish_park`](PollDesc::finish_park)):
//!    `READY` means "retry the call"; otherwise it was a deadline or a shutdown, which the
//!    thread tells apart by the clock and the flags.
//!
//! A readiness report that nobody needed is harmless: it only makes the next waiter retry its
//! call once more. A report can never be lost: the kernel queues an edge for every change after
//! the registration, and a thread parks only after its own call found the descriptor not ready.
//!
//! # Lifetime
//!
//! Descriptors are allocated in blocks and never freed, only recycled (as Go does): an event
//! still queued in some epoll instance, or a deadline still pending, can therefore always be
//! read safely. Each event carries the descriptor's address tagged with its `seq` (bumped at
//! every release), so an event left over from a previous user is recognised and dropped.

use super::poller::{Dir, Poller};
use crate::preempt::count as preempt;
use crate::tcb::Thread;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Nobody waits and nothing was reported.
pub(crate) const NIL: usize = 0;
/// The poller reported the direction; nobody has looked since.
pub(crate) const READY: usize = 1;

/// `shutdown(Read)` was called on the descriptor: a parked reader fails.
pub(crate) const SHUT_READ: u32 = 1;
/// `shutdown(Write)` was called: a parked writer fails.
pub(crate) const SHUT_WRITE: u32 = 2;
/// Released, or closed because its waiter was abandoned: every waiter fails.
pub(crate) const CLOSED: u32 = 4;
/// The descriptor belongs to a uthread socket (closed when its waiter is abandoned); a
/// descriptor the user owns (`io::wait_readable`) is left alone.
pub(crate) const OWNED: u32 = 8;
/// The poller reported the read side hung up or in error (`EPOLLRDHUP`, `EPOLLHUP`,
/// `EPOLLERR`). Sticky: from then on a read returns at once (end of stream or the error)
/// without any further report, so a reader must never wait without trying its call first.
pub(crate) const READ_HUP: u32 = 16;
/// The same for the write side (`EPOLLHUP`, `EPOLLERR`).
pub(crate) const WRITE_HUP: u32 = 32;

const TAG_SHIFT: u32 = 48;
const ADDR_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// The shared state of one registered descriptor.
pub(crate) struct PollDesc {
    fd: AtomicI32,
    seq: AtomicU32,
    read_slot: AtomicUsize,
    write_slot: AtomicUsize,
    flags: AtomicU32,
    /// The poller this descriptor was last found registered with: the fast check of
    /// [`register`](Self::register). Always one of `pollers` (which keeps it alive) or null.
    last: AtomicPtr<Poller>,
    /// Every poller (carrier) the descriptor is registered with: the one of each carrier whose
    /// green threads have waited on it. Usually one.
    pollers: Mutex<Vec<Arc<Poller>>>,
}

impl PollDesc {
    const fn new() -> PollDesc {
        PollDesc {
            fd: AtomicI32::new(-1),
            seq: AtomicU32::new(0),
            read_slot: AtomicUsize::new(NIL),
            write_slot: AtomicUsize::new(NIL),
            flags: AtomicU32::new(CLOSED),
            last: AtomicPtr::new(core::ptr::null_mut()),
            pollers: Mutex::new(Vec::new()),
        }
    }

    /// A descriptor from the cache, set up for `fd`; `owned` if a uthread socket owns `fd`.
    pub(crate) fn acquire(fd: RawFd, owned: bool) -> &'static PollDesc {
        // The cache's lock is an OS lock: a preemptive green thread must not be switched out
        // while it holds it (another one of its carrier would block the whole carrier on it).
        preempt::disable();
        let pd = cache_pop();
        preempt::enable();
        pd.fd.store(fd, Ordering::Relaxed);
        pd.read_slot.store(NIL, Ordering::Relaxed);
        pd.write_slot.store(NIL, Ordering::Relaxed);
        pd.flags
            .store(if owned { OWNED } else { 0 }, Ordering::Release);
        pd
    }

    /// Deregisters the descriptor from every poller, fails any waiter, and returns it to the
    /// cache. The caller closes `fd` afterwards (or hands it out, `into_raw_fd`).
    pub(crate) fn release(&'static self) {
        // OS locks inside, as in `acquire`.
        preempt::disable();
        self.release_raised();
        preempt::enable();
    }

    fn release_raised(&'static self) {
        self.flags.fetch_or(CLOSED, Ordering::SeqCst);
        let fd = self.fd.load(Ordering::Relaxed);
        {
            let mut pollers = lock(&self.pollers);
            for p in pollers.drain(..) {
                // Closing would remove it too, but not while a `dup` of it lives, and not for
                // `into_raw_fd`: remove it explicitly.
                let _ = p.delete(fd);
            }
            self.last.store(core::ptr::null_mut(), Ordering::Release);
        }
        // No thread can be parked here (its borrow of the socket would keep it alive), but
        // leave nothing behind for the next user.
        self.seq.fetch_add(1, Ordering::AcqRel);
        self.read_slot.store(NIL, Ordering::Release);
        self.write_slot.store(NIL, Ordering::Release);
        self.fd.store(-1, Ordering::Relaxed);
        cache_push(self);
    }

    /// The descriptor this entry is for.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.load(Ordering::Relaxed)
    }

    /// The epoll token: the address tagged with the low bits of `seq`.
    pub(crate) fn token(&self) -> u64 {
        let addr = self as *const PollDesc as u64;
        debug_assert_eq!(addr & !ADDR_MASK, 0, "user addresses fit in 48 bits");
        addr | (u64::from(self.seq.load(Ordering::Acquire) & 0xFFFF) << TAG_SHIFT)
    }

    /// The descriptor an event's token names, unless the event is left over from a previous
    /// user of the entry.
    ///
    /// # Safety
    /// `token` came from [`token`](Self::token) (every token in a poller does, except
    /// `NOTIFY_TOKEN`, which the caller filters out).
    pub(crate) unsafe fn from_token(token: u64) -> Option<&'static PollDesc> {
        let p = (token & ADDR_MASK) as *const PollDesc;
        // SAFETY: entries are never freed (module docs), so the address stays valid.
        let pd = unsafe { &*p };
        let tag = (token >> TAG_SHIFT) as u32;
        (pd.seq.load(Ordering::Acquire) & 0xFFFF == tag).then_some(pd)
    }

    /// Registers the descriptor with `poller` unless it already is: once per carrier that
    /// waits on it, for both directions, edge-triggered. Called with the preempt count raised
    /// (the list of pollers is behind an OS lock).
    pub(crate) fn register(&self, poller: &Arc<Poller>) -> io::Result<()> {
        let want = Arc::as_ptr(poller) as *mut Poller;
        if self.last.load(Ordering::Acquire) == want {
            return Ok(());
        }
        let mut pollers = lock(&self.pollers);
        if !pollers.iter().any(|p| Arc::ptr_eq(p, poller)) {
            if self.flags.load(Ordering::Acquire) & CLOSED != 0 {
                return Err(closed_error());
            }
            match poller.add_edge(self.fd(), self.token()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
            pollers.push(Arc::clone(poller));
        }
        self.last.store(want, Ordering::Release);
        Ok(())
    }

    fn slot(&self, dir: Dir) -> &AtomicUsize {
        match dir {
            Dir::Read => &self.read_slot,
            Dir::Write => &self.write_slot,
        }
    }

    /// Step 2 of the protocol: consumes a pending readiness report.
    #[inline]
    pub(crate) fn take_ready(&self, dir: Dir) -> bool {
        self.slot(dir)
            .compare_exchange(READY, NIL, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Step 3: puts `t` in the slot. Fails with what the slot held instead: `READY` (retry the
    /// call) or another thread already parked there.
    #[inline]
    pub(crate) fn prepare_park(&self, dir: Dir, t: *mut Thread) -> Result<(), usize> {
        self.slot(dir)
            .compare_exchange(NIL, t as usize, Ordering::SeqCst, Ordering::Acquire)
            .map(drop)
    }

    /// A deadline fired: takes `t` out of the slot if it is still parked there. `true` means
    /// the caller now owns `t`'s wake-up.
    #[inline]
    pub(crate) fn cancel_park(&self, dir: Dir, t: *mut Thread) -> bool {
        self.slot(dir)
            .compare_exchange(t as usize, NIL, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Step 4: clears the slot after waking; `true` if a readiness report was left in it.
    #[inline]
    pub(crate) fn finish_park(&self, dir: Dir) -> bool {
        self.slot(dir).swap(NIL, Ordering::AcqRel) == READY
    }

    /// The poller reported `dir` (`ready`), or the descriptor is being shut down: takes the
    /// parked thread out of the slot, if any, and returns it (the caller must wake it). With
    /// `ready` the slot is left `READY`.
    #[inline]
    pub(crate) fn unblock(&self, dir: Dir, ready: bool) -> *mut Thread {
        let slot = self.slot(dir);
        let mut old = slot.load(Ordering::Acquire);
        loop {
            if old == READY || (old == NIL && !ready) {
                return core::ptr::null_mut();
            }
            let new = if ready { READY } else { NIL };
            match slot.compare_exchange_weak(old, new, Ordering::SeqCst, Ordering::Acquire) {
                Ok(_) if old == NIL => return core::ptr::null_mut(),
                Ok(_) => return old as *mut Thread,
                Err(now) => old = now,
            }
        }
    }

    /// Whether a waiter for `dir` must fail instead of parking: the descriptor was released or
    /// abandoned, or that direction was shut down here.
    #[inline]
    pub(crate) fn closed_for(&self, dir: Dir) -> bool {
        let shut = match dir {
            Dir::Read => SHUT_READ,
            Dir::Write => SHUT_WRITE,
        };
        self.flags.load(Ordering::SeqCst) & (CLOSED | shut) != 0
    }

    /// Records a hang-up or error the poller reported (`READ_HUP`, `WRITE_HUP`), before the
    /// waiters are woken.
    #[inline]
    pub(crate) fn note_hangup(&self, bits: u32) {
        if self.flags.load(Ordering::Relaxed) & bits != bits {
            self.flags.fetch_or(bits, Ordering::SeqCst);
        }
    }

    /// Whether the poller reported `dir` hung up or in error (see `READ_HUP`).
    #[inline]
    pub(crate) fn hung_up(&self, dir: Dir) -> bool {
        let bit = match dir {
            Dir::Read => READ_HUP,
            Dir::Write => WRITE_HUP,
        };
        self.flags.load(Ordering::SeqCst) & bit != 0
    }

    /// Marks directions shut down (or the whole descriptor closed) and takes the threads
    /// parked on them, which the caller must wake: they fail instead of retrying.
    pub(crate) fn shut(&self, bits: u32) -> [*mut Thread; 2] {
        self.flags.fetch_or(bits, Ordering::SeqCst);
        let mut woken = [core::ptr::null_mut(); 2];
        if bits & (SHUT_READ | CLOSED) != 0 {
            woken[0] = self.unblock(Dir::Read, false);
        }
        if bits & (SHUT_WRITE | CLOSED) != 0 {
            woken[1] = self.unblock(Dir::Write, false);
        }
        woken
    }

    /// The runtime abandoned a thread parked here: fail every other waiter and, if a uthread
    /// socket owns the descriptor, close the connection. The socket object lives on the
    /// abandoned thread's stack, which is never unwound, so it can never close the descriptor
    /// itself; its number is pointed at an inert placeholder (`dup2`), so that it is never
    /// reused for another file while that object still names it. Returns the other waiters.
    pub(crate) fn abandon(&self) -> [*mut Thread; 2] {
        let prev = self.flags.fetch_or(CLOSED, Ordering::SeqCst);
        if prev & OWNED != 0 && prev & CLOSED == 0 {
            let fd = self.fd();
            // SAFETY: `fd` is the open socket of a uthread socket object that can no longer
            // run (see above). `shutdown` ends the connection in both directions; `dup2`
            // atomically replaces the file behind the number, which drops the socket's last
            // reference (unless the user duplicated it) and with it its epoll registrations.
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
                if let Some(p) = placeholder() {
                    libc::dup2(p, fd);
                }
            }
        }
        [
            self.unblock(Dir::Read, false),
            self.unblock(Dir::Write, false),
        ]
    }
}

/// The error a waiter gets when its descriptor is closed or shut down under it.
pub(crate) fn closed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "uthread: the socket was shut down or closed while this green thread waited on it",
    )
}

/// A descriptor whose reads, writes and polls all fail (`O_PATH`), put in place of an
/// abandoned socket.
fn placeholder() -> Option<RawFd> {
    static P: OnceLock<Option<RawFd>> = OnceLock::new();
    *P.get_or_init(|| {
        // SAFETY: opening the root directory as a path-only descriptor; checked below.
        let fd = unsafe { libc::open(c"/".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        (fd >= 0).then_some(fd)
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Free entries. Allocated `BLOCK` at a time and leaked on purpose (module docs).
static CACHE: Mutex<Vec<&'static PollDesc>> = Mutex::new(Vec::new());
const BLOCK: usize = 64;

fn cache_pop() -> &'static PollDesc {
    let mut free = lock(&CACHE);
    if let Some(pd) = free.pop() {
        return pd;
    }
    let block: &'static [PollDesc] =
        Box::leak((0..BLOCK).map(|_| PollDesc::new()).collect::<Box<[_]>>());
    free.extend(block[1..].iter());
    &block[0]
}

fn cache_push(pd: &'static PollDesc) {
    lock(&CACHE).push(pd);
}
