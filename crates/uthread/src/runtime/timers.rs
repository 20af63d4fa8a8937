//! The carrier's one timer structure: every green thread waiting with a deadline, whether it
//! sleeps or waits on a descriptor, ordered by when it is due.
//!
//! An ordered map rather than a heap because a descriptor wait usually ends before its
//! deadline (the data came), and the waiter then removes its entry at once: nothing stale is
//! left behind to grow the structure or to fire at a thread that has moved on. Only the
//! owning carrier touches it, with the preempt count raised.

use crate::poll::desc::PollDesc;
use crate::poll::poller::Dir;
use crate::tcb::Thread;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU32;
use std::time::Instant;

/// The claim word of a party waiting on channels (`chan::wait`): whoever moves it away from
/// `WAITING` with a compare-and-swap owns the party's one wake-up. A deadline's timer claims it
/// as `TIMED_OUT`; the channels claim it with the case they complete.
pub(crate) mod claim {
    /// Nobody has claimed the party yet.
    pub(crate) const WAITING: u32 = 0;
    /// Claimed for a case (in the low bits); the claimer is still moving the value.
    pub(crate) const CLAIMED: u32 = 1 << 31;
    /// The claimer is done: the case (low bits) completed, or the deadline passed.
    pub(crate) const DONE: u32 = 1 << 30;
    /// The case bits of a claimed word.
    pub(crate) const CASE: u32 = DONE - 1;
    /// What the deadline's timer stores: done, for no case.
    pub(crate) const TIMED_OUT: u32 = DONE | CASE;
}

/// What is due when a timer fires.
#[derive(Clone, Copy)]
pub(crate) enum Waiter {
    /// A thread in `sleep`.
    Sleep(*mut Thread),
    /// A thread parked on a descriptor with a deadline.
    Io {
        thread: *mut Thread,
        pd: &'static PollDesc,
        dir: Dir,
    },
    /// A thread parked on channels with a deadline: fires by claiming `word` (see [`claim`]);
    /// the word lives on the parked thread's stack, which it leaves only after removing this
    /// entry.
    Claim {
        thread: *mut Thread,
        word: *const AtomicU32,
    },
}

/// Names one entry, for its removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerKey(Instant, u64);

/// Entries by deadline; ties in insertion order.
pub(crate) struct Timers {
    map: BTreeMap<TimerKey, Waiter>,
    seq: u64,
}

impl Timers {
    pub(crate) const fn new() -> Timers {
        Timers {
            map: BTreeMap::new(),
            seq: 0,
        }
    }

    pub(crate) fn insert(&mut self, at: Instant, w: Waiter) -> TimerKey {
        self.seq += 1;
        let key = TimerKey(at, self.seq);
        self.map.insert(key, w);
        key
    }

    /// Removes an entry if it is still there (it is gone once it fired).
    pub(crate) fn remove(&mut self, key: TimerKey) {
        self.map.remove(&key);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// When the earliest entry is due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.map.first_key_value().map(|(k, _)| k.0)
    }

    /// Takes the earliest entry if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Waiter> {
        match self.map.first_entry() {
            Some(e) if e.key().0 <= now => Some(e.remove()),
            _ => None,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
    }
}
