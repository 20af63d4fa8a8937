//! Waiting on channels: the party that waits (a green thread or an OS thread), its claim word,
//! the nodes it leaves in channels' queues and the queues themselves.
//!
//! # The claim protocol
//!
//! A party that cannot complete an operation now puts one [`Node`] per channel it waits on
//! (one for `send`/`recv`, one per case for a `Select`) into that channel's queue, under the
//! channel's lock, and parks. Every node points to the party's one claim word
//! (`runtime::timers::claim`), which starts `WAITING`. Whoever moves it away from `WAITING`
//! owns the party's single wake-up:
//!
//! 1. a channel that completes one of the party's operations, under that channel's lock:
//!    `WAITING -> CLAIMED | case` (a compare-and-swap, or a plain store for a party that only
//!    this lock's holders can reach), then the value is moved, then `DONE | case` is stored,
//!    then the party is woken, after the lock is released;
//! 2. the party's deadline: `WAITING -> TIMED_OUT` (the carrier's timer for a green thread,
//!    the OS thread itself otherwise).
//!
//! A claim is never undone, so a party is woken exactly once per park, and never later by a
//! stale claimer. A node whose party was claimed elsewhere is stale: whoever meets it in a
//! queue unlinks it; the party unlinks whatever is left when it resumes.

use crate::preempt::count as preempt;
use crate::race::{self, RacePoint};
use crate::runtime::carrier::{context, Context};
use crate::runtime::reactor::{wake, wake_raised};
use crate::runtime::timers::claim;
use crate::tcb::Thread;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

pub(crate) use claim::{CASE, CLAIMED, DONE, TIMED_OUT, WAITING};

/// Who parks: a green thread (woken through its carrier) or an OS thread outside every
/// runtime (woken with `unpark`).
pub(crate) enum Who {
    Green(*mut Thread),
    Os(std::thread::Thread),
}

impl Who {
    /// The calling party, or `None` inside a `synchronize`/`queue` callback, which runs on the
    /// scheduler and must not block. Inlined: a green thread's park on a channel is a few
    /// dozen instructions, and a call with its frame was a measurable share of them.
    #[inline(always)]
    pub(crate) fn current() -> Option<Who> {
        match context() {
            Context::Green(t) => Some(Who::Green(t)),
            Context::Outside => Some(Who::os()),
            Context::Scheduler => None,
        }
    }

    #[cold]
    #[inline(never)]
    fn os() -> Who {
        Who::Os(std::thread::current())
    }
}

/// A party parked on one or more channels. Lives on the party's own stack for the park.
pub(crate) struct Party {
    pub(crate) word: AtomicU32,
    who: Who,
    /// Only the holders of one channel's lock can claim it (a single operation without a
    /// deadline), so the claim is a plain store.
    exclusive: bool,
}

/// The wake-up a claimer owes, taken while the party was still certainly alive and given
/// after the channel's lock is released.
#[must_use]
pub(crate) enum Wake {
    Green(*mut Thread),
    Os(std::thread::Thread),
}

impl Wake {
    #[cold]
    #[inline(never)]
    fn unpark(t: std::thread::Thread) {
        t.unpark();
    }

    pub(crate) fn wake(self) {
        match self {
            Wake::Green(t) => wake(t),
            Wake::Os(t) => t.unpark(),
        }
    }

    /// `wake` with the caller's preempt count raised already (a channel operation's own).
    /// Inlined, the OS thread's case out of line: a hand-over between green threads of one
    /// carrier is a load, a compare and a run-queue push, which a call would double.
    #[inline(always)]
    pub(crate) fn wake_raised(self) {
        debug_assert!(preempt::count() > 0);
        match self {
            // SAFETY: count raised (caller); the claim gave us this wake-up.
            Wake::Green(t) => unsafe { wake_raised(t) },
            Wake::Os(t) => Wake::unpark(t),
        }
    }
}

impl Party {
    pub(crate) fn new(who: Who, exclusive: bool) -> Party {
        Party {
            word: AtomicU32::new(WAITING),
            who,
            exclusive,
        }
    }

    /// Takes the party's wake-up for `case`, or `false` if someone else already has it.
    ///
    /// # Safety
    /// Under the lock of the channel whose queue holds the party's node for `case`.
    #[inline]
    pub(crate) unsafe fn claim(&self, case: u32) -> bool {
        if self.exclusive {
            self.word.store(CLAIMED | case, Ordering::Relaxed);
            return true;
        }
        self.word
            .compare_exchange(WAITING, CLAIMED | case, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Publishes that the claimed case is complete (its value moved) and returns the wake-up
    /// to give once the lock is released. After the store the party may return at any moment
    /// (an OS thread that sees it without sleeping), so everything needed is taken before.
    ///
    /// # Safety
    /// The caller claimed the party and holds the same lock.
    #[inline]
    pub(crate) unsafe fn finish(&self) -> Wake {
        race::pause(RacePoint::ChanClaimBeforeFinish);
        let wake = match &self.who {
            Who::Green(t) => Wake::Green(*t),
            Who::Os(t) => Wake::Os(t.clone()),
        };
        let w = self.word.load(Ordering::Relaxed);
        self.word.store((w & !CLAIMED) | DONE, Ordering::Release);
        wake
    }

    /// Parks until the party is claimed and done, or `deadline` passes. Returns the final word:
    /// `DONE | case`, or `TIMED_OUT`. A word claimed by another party while the caller was
    /// still registering is fine: that party's wake-up is on its way, and this takes it.
    ///
    /// A green thread must call it with the preempt count raised since before its nodes became
    /// visible to other parties (`runtime::ops::park_claim`).
    ///
    /// Inlined into the channel operation, the OS thread's wait out of line: for a green thread
    /// this is the block and its switch, and a frame of its own around them cost a call, six
    /// register saves and their restores on every park.
    #[inline(always)]
    pub(crate) fn park(&self, deadline: Option<Instant>) -> u32 {
        race::pause(RacePoint::ChanBeforePark);
        match &self.who {
            Who::Green(_) => {
                // SAFETY: a green thread, count raised since registration (caller); the word
                // lives on our stack until we return.
                unsafe { crate::runtime::ops::park_claim(&self.word, deadline) };
                self.word.load(Ordering::Acquire)
            }
            Who::Os(_) => self.park_os(deadline),
        }
    }

    #[inline(never)]
    fn park_os(&self, deadline: Option<Instant>) -> u32 {
        loop {
            let w = self.word.load(Ordering::Acquire);
            if w & DONE != 0 {
                return w;
            }
            if w == WAITING {
                if let Some(d) = deadline {
                    let now = Instant::now();
                    if now >= d {
                        if self
                            .word
                            .compare_exchange(
                                WAITING,
                                TIMED_OUT,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            )
                            .is_ok()
                        {
                            return TIMED_OUT;
                        }
                        continue;
                    }
                    std::thread::park_timeout(d - now);
                    continue;
                }
            }
            // Claimed and being completed, or waiting without a deadline: the claimer
            // unparks us after it stores DONE (an early return of park is re-checked).
            std::thread::park();
        }
    }
}

/// One party's place in one channel's queue. Lives on the party's stack (inside a boxed
/// `Select` case, or in the frame of `send`/`recv`); only touched under the channel's lock.
pub(crate) struct Node<T> {
    prev: Cell<*const Node<T>>,
    next: Cell<*const Node<T>>,
    linked: Cell<bool>,
    pub(crate) party: *const Party,
    /// The case this node stands for in the party's `Select` (0 for `send`/`recv`).
    pub(crate) case: u32,
    /// A receiver's empty slot that a sender fills, or a sender's value that a receiver takes.
    pub(crate) slot: *mut Option<T>,
}

impl<T> Node<T> {
    pub(crate) fn new(party: *const Party, case: u32, slot: *mut Option<T>) -> Node<T> {
        Node {
            prev: Cell::new(core::ptr::null()),
            next: Cell::new(core::ptr::null()),
            linked: Cell::new(false),
            party,
            case,
            slot,
        }
    }
}

/// A FIFO of parked parties' nodes, threaded through the nodes (no allocation).
pub(crate) struct Queue<T> {
    head: *const Node<T>,
    tail: *const Node<T>,
}

impl<T> Queue<T> {
    pub(crate) const fn new() -> Queue<T> {
        Queue {
            head: core::ptr::null(),
            tail: core::ptr::null(),
        }
    }

    /// # Safety
    /// Channel lock held; `n` is live and in no queue until it is unlinked.
    pub(crate) unsafe fn push(&mut self, n: *const Node<T>) {
        // SAFETY: forwarded contract; linked nodes are live (their parties unlink them before
        // leaving).
        unsafe {
            (*n).prev.set(self.tail);
            (*n).next.set(core::ptr::null());
            (*n).linked.set(true);
            if self.tail.is_null() {
                self.head = n;
            } else {
                (*self.tail).next.set(n);
            }
        }
        self.tail = n;
    }

    /// Unlinks `n` if it is still in this queue.
    ///
    /// # Safety
    /// Channel lock held; `n` is live and was pushed to this queue (if linked).
    pub(crate) unsafe fn remove(&mut self, n: *const Node<T>) {
        // SAFETY: forwarded contract.
        unsafe {
            if !(*n).linked.get() {
                return;
            }
            let (p, x) = ((*n).prev.get(), (*n).next.get());
            if p.is_null() {
                self.head = x;
            } else {
                (*p).next.set(x);
            }
            if x.is_null() {
                self.tail = p;
            } else {
                (*x).prev.set(p);
            }
            // Its own links are stale from here on; only `linked` is read before a new push
            // sets them.
            (*n).linked.set(false);
        }
    }

    /// Unlinks and claims the first node whose party can still be claimed, dropping stale
    /// ones on the way. Null when there is none.
    ///
    /// # Safety
    /// Channel lock held.
    #[inline]
    pub(crate) unsafe fn pop_claimed(&mut self) -> *const Node<T> {
        loop {
            let n = self.head;
            if n.is_null() {
                return n;
            }
            // SAFETY: linked nodes are live; we hold the lock (caller).
            unsafe {
                self.remove(n);
                if (*(*n).party).claim((*n).case) {
                    return n;
                }
            }
        }
    }

    /// Claims every node's party (those that can still be claimed) and returns their wake-ups,
    /// each after `each` has looked at the node (a disconnection).
    ///
    /// # Safety
    /// Channel lock held.
    pub(crate) unsafe fn claim_all(&mut self, mut each: impl FnMut(&Node<T>)) -> Vec<Wake> {
        let mut wakes = Vec::new();
        loop {
            // SAFETY: forwarded contract.
            let n = unsafe { self.pop_claimed() };
            if n.is_null() {
                return wakes;
            }
            // SAFETY: claimed just now: live until we finish it.
            unsafe {
                each(&*n);
                wakes.push((*(*n).party).finish());
            }
        }
    }
}
