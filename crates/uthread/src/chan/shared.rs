//! The state one channel's senders and receivers share, its lock, and the operations on it:
//! what can be done at once (`try_*_locked`, also used by `Select`) and the blocking
//! operations built on them.
//!
//! The lock is a test-and-test-and-set spin lock, held for a few dozen instructions with the
//! preempt count raised, so on one carrier it is never contended, and across carriers or OS
//! threads it is brief. Every wake-up is given after it is released.

use super::wait::{Node, Party, Queue, Wake, Who, TIMED_OUT};
use crate::preempt::count as preempt;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How long an operation may wait.
#[derive(Clone, Copy)]
pub(crate) enum Wait {
    /// Not at all (`try_send`, `try_recv`).
    Never,
    /// Until the deadline, or for as long as it takes (`None`).
    Until(Option<Instant>),
}

/// Why a send did not happen; the value comes back.
pub(crate) enum SendFail<T> {
    Full(T),
    Disconnected(T),
    Timeout(T),
}

/// Why a receive found nothing.
pub(crate) enum RecvFail {
    Empty,
    Disconnected,
    Timeout,
}

/// What a send under the lock did.
pub(crate) enum TrySend<T> {
    /// Handed to a parked receiver (whose wake-up this is) or buffered.
    Sent(Option<Wake>),
    Full(T),
    Disconnected(T),
}

/// What a receive under the lock did.
pub(crate) enum TryRecv<T> {
    /// A value, and the wake-up of the parked sender whose value took its place or was taken.
    Got(T, Option<Wake>),
    Empty,
    Disconnected,
}

pub(crate) struct Spin(AtomicBool);

impl Spin {
    /// Takes the lock. The caller has raised the preempt count: a green thread never holds it
    /// while switched out.
    #[inline]
    pub(crate) fn lock(&self) {
        while self.0.swap(true, Ordering::Acquire) {
            while self.0.load(Ordering::Relaxed) {
                core::hint::spin_loop();
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Fields only touched under the lock.
pub(crate) struct State<T> {
    buf: VecDeque<T>,
    /// Values the buffer may hold: 0 for a rendezvous channel, `usize::MAX` for unbounded.
    cap: usize,
    senders: usize,
    receivers: usize,
    pub(crate) recvq: Queue<T>,
    pub(crate) sendq: Queue<T>,
}

pub(crate) struct Chan<T> {
    pub(crate) lock: Spin,
    state: UnsafeCell<State<T>>,
}

// SAFETY: `state` is only touched under `lock`; values of `T` cross threads through it, hence
// `T: Send`. The raw pointers in the queues name parked parties, which stay alive while linked.
unsafe impl<T: Send> Send for Chan<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Chan<T> {}

impl<T> Chan<T> {
    /// A channel with one sender and one receiver handle.
    pub(crate) fn new(cap: usize) -> Chan<T> {
        Chan {
            lock: Spin(AtomicBool::new(false)),
            state: UnsafeCell::new(State {
                buf: VecDeque::with_capacity(cap.min(64)),
                cap,
                senders: 1,
                receivers: 1,
                recvq: Queue::new(),
                sendq: Queue::new(),
            }),
        }
    }

    /// # Safety
    /// `lock` held, and the reference dropped before it is released.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn state(&self) -> &mut State<T> {
        // SAFETY: forwarded contract: the lock makes the access exclusive.
        unsafe { &mut *self.state.get() }
    }

    /// Runs `f` on the state with the lock held and the count raised.
    fn locked<R>(&self, f: impl FnOnce(&mut State<T>) -> R) -> R {
        preempt::disable();
        self.lock.lock();
        // SAFETY: lock held for the reference's life.
        let r = f(unsafe { self.state() });
        self.lock.unlock();
        preempt::enable();
        r
    }

    /// A sender handle more (`Sender::clone`).
    pub(crate) fn add_sender(&self) {
        self.locked(|s| s.senders += 1);
    }

    /// A receiver handle more (`Receiver::clone`).
    pub(crate) fn add_receiver(&self) {
        self.locked(|s| s.receivers += 1);
    }

    /// A sender handle less. The last one wakes every parked receiver: they find their slot
    /// empty and report the disconnection.
    pub(crate) fn drop_sender(&self) {
        let wakes = self.locked(|s| {
            s.senders -= 1;
            if s.senders == 0 {
                // SAFETY: lock held.
                unsafe { s.recvq.claim_all(|_| {}) }
            } else {
                Vec::new()
            }
        });
        wakes.into_iter().for_each(Wake::wake);
    }

    /// A receiver handle less. The last one wakes every parked sender (they find their value
    /// still in their slot and return it in the error) and drops the buffered values, after
    /// the lock is released: their destructors are user code.
    pub(crate) fn drop_receiver(&self) {
        let (wakes, buffered) = self.locked(|s| {
            s.receivers -= 1;
            if s.receivers == 0 {
                // SAFETY: lock held.
                let wakes = unsafe { s.sendq.claim_all(|_| {}) };
                (wakes, std::mem::take(&mut s.buf))
            } else {
                (Vec::new(), VecDeque::new())
            }
        });
        wakes.into_iter().for_each(Wake::wake);
        drop(buffered);
    }

    /// Values buffered now (racy by nature).
    pub(crate) fn len(&self) -> usize {
        self.locked(|s| s.buf.len())
    }

    /// The buffer's capacity: `None` for an unbounded channel.
    pub(crate) fn capacity(&self) -> Option<usize> {
        self.locked(|s| (s.cap != usize::MAX).then_some(s.cap))
    }

    /// Sends `v` if that can be done without waiting.
    ///
    /// # Safety
    /// `lock` held.
    #[inline(always)]
    pub(crate) unsafe fn try_send_locked(&self, v: T) -> TrySend<T> {
        // SAFETY: forwarded contract.
        let s = unsafe { self.state() };
        if s.receivers == 0 {
            return TrySend::Disconnected(v);
        }
        // SAFETY: lock held; a claimed node's slot is ours to fill until we finish it.
        unsafe {
            let n = s.recvq.pop_claimed();
            if !n.is_null() {
                *(*n).slot = Some(v);
                return TrySend::Sent(Some((*(*n).party).finish()));
            }
        }
        if s.buf.len() < s.cap {
            s.buf.push_back(v);
            return TrySend::Sent(None);
        }
        TrySend::Full(v)
    }

    /// Receives a value if that can be done without waiting: from the buffer (refilled from
    /// the first parked sender), or straight from a parked sender (rendezvous).
    ///
    /// # Safety
    /// `lock` held.
    #[inline(always)]
    pub(crate) unsafe fn try_recv_locked(&self) -> TryRecv<T> {
        // SAFETY: forwarded contract.
        let s = unsafe { self.state() };
        // SAFETY: lock held; a claimed node's value is ours to take until we finish it.
        unsafe {
            if let Some(v) = s.buf.pop_front() {
                let n = s.sendq.pop_claimed();
                if n.is_null() {
                    return TryRecv::Got(v, None);
                }
                if let Some(w) = (*(*n).slot).take() {
                    s.buf.push_back(w);
                }
                return TryRecv::Got(v, Some((*(*n).party).finish()));
            }
            let n = s.sendq.pop_claimed();
            if !n.is_null() {
                let v = (*(*n).slot).take();
                let wake = (*(*n).party).finish();
                return match v {
                    Some(v) => TryRecv::Got(v, Some(wake)),
                    // A sender's node always carries its value (unreachable in practice).
                    None => {
                        wake.wake();
                        TryRecv::Empty
                    }
                };
            }
        }
        if s.senders == 0 {
            TryRecv::Disconnected
        } else {
            TryRecv::Empty
        }
    }

    /// Sends `v`, parking the caller (green thread or OS thread) while the buffer is full or,
    /// for a rendezvous channel, until a receiver takes it.
    ///
    /// Inlined (as `recv`) into the caller, whose own prologue then preserves the registers the
    /// park's switch clobbers, once, instead of a frame here doing it on every operation; the
    /// deadline's timer and an OS thread's wait stay out of line.
    #[inline(always)]
    pub(crate) fn send(&self, v: T, wait: Wait) -> Result<(), SendFail<T>> {
        preempt::disable();
        self.lock.lock();
        // SAFETY: lock held.
        let v = match unsafe { self.try_send_locked(v) } {
            TrySend::Sent(wake) => {
                self.lock.unlock();
                if let Some(w) = wake {
                    w.wake_raised();
                }
                preempt::enable();
                return Ok(());
            }
            TrySend::Disconnected(v) => return Err(self.leave(SendFail::Disconnected(v))),
            TrySend::Full(v) => v,
        };
        let deadline = match wait {
            Wait::Never => return Err(self.leave(SendFail::Full(v))),
            Wait::Until(d) => d,
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(self.leave(SendFail::Timeout(v)));
        }
        let Some(who) = Who::current() else {
            self.leave(());
            forbid_scheduler_block("send");
        };
        let party = Party::new(who, deadline.is_none());
        let mut slot = Some(v);
        let node = Node::new(&party, 0, &mut slot);
        // SAFETY: lock held; `node` outlives its time in the queue (unlinked by a claimer or
        // below before this frame ends).
        unsafe { self.state().sendq.push(&node) };
        self.lock.unlock();
        let word = party.park(deadline);
        if word == TIMED_OUT {
            self.lock.lock();
            // SAFETY: lock held; nobody claimed us, so the node may still be linked.
            unsafe { self.state().sendq.remove(&node) };
            self.lock.unlock();
        }
        preempt::enable();
        match slot.take() {
            None => Ok(()),
            Some(v) if word == TIMED_OUT => Err(SendFail::Timeout(v)),
            Some(v) => Err(SendFail::Disconnected(v)),
        }
    }

    /// Receives a value, parking the caller while the channel is empty and senders remain.
    /// Inlined, as `send`.
    #[inline(always)]
    pub(crate) fn recv(&self, wait: Wait) -> Result<T, RecvFail> {
        preempt::disable();
        self.lock.lock();
        // SAFETY: lock held.
        match unsafe { self.try_recv_locked() } {
            TryRecv::Got(v, wake) => {
                self.lock.unlock();
                if let Some(w) = wake {
                    w.wake_raised();
                }
                preempt::enable();
                return Ok(v);
            }
            TryRecv::Disconnected => return Err(self.leave(RecvFail::Disconnected)),
            TryRecv::Empty => {}
        }
        let deadline = match wait {
            Wait::Never => return Err(self.leave(RecvFail::Empty)),
            Wait::Until(d) => d,
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(self.leave(RecvFail::Timeout));
        }
        let Some(who) = Who::current() else {
            self.leave(());
            forbid_scheduler_block("recv");
        };
        let party = Party::new(who, deadline.is_none());
        let mut slot = None;
        let node = Node::new(&party, 0, &mut slot);
        // SAFETY: as in `send`.
        unsafe { self.state().recvq.push(&node) };
        self.lock.unlock();
        let word = party.park(deadline);
        if word == TIMED_OUT {
            self.lock.lock();
            // SAFETY: as in `send`.
            unsafe { self.state().recvq.remove(&node) };
            self.lock.unlock();
        }
        preempt::enable();
        match slot.take() {
            Some(v) => Ok(v),
            None if word == TIMED_OUT => Err(RecvFail::Timeout),
            None => Err(RecvFail::Disconnected),
        }
    }

    /// Releases the lock and the count, passing `r` through.
    #[inline]
    fn leave<R>(&self, r: R) -> R {
        self.lock.unlock();
        preempt::enable();
        r
    }
}

/// A blocking channel operation inside a `synchronize`/`queue` callback: those run on the
/// scheduler, where nothing could ever wake them.
pub(crate) fn forbid_scheduler_block(what: &str) -> ! {
    panic!(
        "uthread: a channel {what} would block inside a synchronize()/queue() callback; \
         callbacks run on the scheduler, not in a green thread, so nothing could wake them \
         (use try_{what})"
    )
}
