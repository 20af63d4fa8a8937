//! The reactor: every way a parked green thread becomes runnable again. A wake-up on this
//! carrier or from another OS thread (through the inbox), a timer falling due (a sleep or a
//! descriptor deadline), or the poller reporting a descriptor (Go's netpoller).
//!
//! # When the poller is looked at
//!
//! 1. When nothing is runnable, the scheduler context blocks in `epoll_wait` with the next
//!    timer's deadline as its timeout (`owner::run`). Another OS thread that hands the carrier
//!    work writes the poller's eventfd to end that wait (`Carrier::notify`).
//! 2. While threads keep running and some wait on descriptors, [`poll`] looks without blocking
//!    every `poll_every` switches: `POLL_EVERY` (64), halved whenever that many switches took
//!    longer than `POLL_INTERVAL` (1 ms) and doubled back when they were quick. The yield path
//!    itself only counts down (`ops::yield_now`); the clock is read here, at most once per
//!    poll, and only while threads wait on descriptors.
//! 3. A thread that blocks looks at the inbox at once if it has news (`dispatch::poll_maybe`).
//!
//! Everything here runs on the carrier thread with the preempt count raised: the carrier-local
//! state (run queue, timers, event buffer) is never touched by a preempted thread.

use super::carrier::{carrier_ptr, Carrier, Local, Remote, Request, POLL_EVERY, POLL_INTERVAL};
use super::stats::bump;
use super::steal::{self, shares};
use super::timers::{claim, Waiter};
use crate::poll::desc::{PollDesc, READ_HUP, WRITE_HUP};
use crate::poll::poller::{Dir, HANGUP_BITS, NOTIFY_TOKEN, READ_BITS, WRITE_BITS};
use crate::preempt::count as preempt;
use crate::race::{self, RacePoint};
use crate::tcb::{RunState, Thread};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// # Safety
/// Carrier thread, count raised, `t` a live thread of this carrier.
#[inline]
pub(super) unsafe fn make_runnable(l: &mut Local, t: *mut Thread) {
    // SAFETY: forwarded contract.
    unsafe {
        if (*t).state.get() == RunState::Blocked {
            (*t).state.set(RunState::Runnable);
            l.runq.push(t);
        }
    }
}

/// Makes a blocked (or suspended) thread runnable, wherever its carrier is.
pub(crate) fn wake(t: *mut Thread) {
    preempt::disable();
    // SAFETY: count raised; forwarded contract.
    unsafe { wake_raised(t) };
    preempt::enable();
}

/// `wake` for a caller that has raised the preempt count already (a channel handing over a
/// value): the count's two stores are not repeated.
///
/// # Safety
/// The caller's preempt count is raised; `t` is live and its wake-up is the caller's to give.
#[inline]
pub(crate) unsafe fn wake_raised(t: *mut Thread) {
    let here = carrier_ptr();
    // SAFETY: `t` is live (blocked threads are owned by their carrier; callers hold it).
    unsafe {
        let tc = Carrier::at((*t).carrier.get());
        if here == tc {
            make_runnable(&mut *(*here).local(), t);
        } else {
            (*tc).push_remote(Remote::Wake(t));
        }
    }
}

/// Wakes `t` from inside this carrier's runtime (count raised): directly if it is ours, else
/// through its carrier's inbox.
///
/// # Safety
/// Carrier thread of `c`, count raised; `t` is live and its wake-up is the caller's to give.
unsafe fn wake_from_here(c: &Carrier, l: &mut Local, t: *mut Thread) {
    // SAFETY: forwarded contract.
    unsafe {
        let tc = Carrier::at((*t).carrier.get());
        if std::ptr::eq(tc, c) {
            make_runnable(l, t);
        } else {
            (*tc).push_remote(Remote::Wake(t));
        }
    }
}

/// Drains the inbox, looks at the poller if threads wait on descriptors (without blocking),
/// and fires due timers.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn poll(c: &Carrier, l: &mut Local) {
    // SAFETY: forwarded contract.
    unsafe { poll_with(c, l, true) }
}

/// `poll` without the look at the poller, for the scheduler context: it blocks in the poller
/// right after when nothing is runnable, and lets the running threads' polls look otherwise.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn poll_without_io(c: &Carrier, l: &mut Local) {
    // SAFETY: forwarded contract.
    unsafe { poll_with(c, l, false) }
}

/// # Safety
/// Carrier thread, count raised.
#[inline]
unsafe fn poll_with(c: &Carrier, l: &mut Local, io: bool) {
    l.poll_countdown = l.poll_every;
    if c.inbox_flag.load(Ordering::Acquire) {
        // SAFETY: forwarded contract.
        unsafe { drain_inbox(c, l) };
    }
    // SAFETY: forwarded contract.
    if unsafe { shares(l) } {
        // SAFETY: forwarded contract.
        unsafe { steal::take_own(c, l) };
    }
    let mut now = None;
    if io && l.io_waiters > 0 {
        let t = Instant::now();
        adapt_poll_interval(l, t);
        now = Some(t);
        // SAFETY: forwarded contract.
        unsafe { netpoll(c, l, Some(Duration::ZERO)) };
    }
    if !l.timers.is_empty() {
        // SAFETY: forwarded contract.
        unsafe { fire_timers(l, now.unwrap_or_else(Instant::now)) };
    }
}

/// Rule 2 of the module docs: fewer switches between polls when switches are slow.
fn adapt_poll_interval(l: &mut Local, now: Instant) {
    if let Some(last) = l.last_netpoll {
        let since = now.saturating_duration_since(last);
        if since > POLL_INTERVAL {
            l.poll_every = (l.poll_every / 2).max(1);
        } else if since < POLL_INTERVAL / 4 && l.poll_every < POLL_EVERY {
            l.poll_every = (l.poll_every * 2).min(POLL_EVERY);
        }
        l.poll_countdown = l.poll_every;
    }
    l.last_netpoll = Some(now);
}

/// # Safety
/// Carrier thread, count raised.
unsafe fn drain_inbox(c: &Carrier, l: &mut Local) {
    c.inbox_flag.store(false, Ordering::SeqCst);
    let items = match c.inbox.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    for r in items {
        match r {
            // SAFETY: threads in the inbox are blocked threads of this carrier (live).
            Remote::Wake(t) => unsafe { make_runnable(l, t) },
            // SAFETY: built for this carrier by `spawn_remote`, in no queue; count raised.
            Remote::Adopt(t, suspended) => unsafe { c.adopt(t, suspended) },
            Remote::Call(f) => {
                let data = Box::into_raw(Box::new(f)) as *mut ();
                l.requests.push_back(Request {
                    call: run_remote_call,
                    data,
                });
            }
        }
    }
}

/// Runs a `Handle` call taken from the inbox, on the owner's stack; a panic is discarded.
///
/// # Safety
/// `data` is a request's data made by `drain_inbox`, run once.
unsafe fn run_remote_call(data: *mut ()) {
    // SAFETY: `data` came from Box::into_raw(Box<Box<dyn FnOnce() + Send>>) in `drain_inbox`.
    let f = unsafe { Box::from_raw(data as *mut Box<dyn FnOnce() + Send>) };
    let _ = catch_unwind(AssertUnwindSafe(f));
}

/// Wakes the threads whose timers are due at `now`.
///
/// # Safety
/// Carrier thread, count raised.
unsafe fn fire_timers(l: &mut Local, now: Instant) {
    while let Some(w) = l.timers.pop_due(now) {
        match w {
            // SAFETY: a sleeping thread is a live thread of this carrier; only its timer
            // wakes it, and its entry is the only one.
            Waiter::Sleep(t) => unsafe {
                if (*t).state.get() == RunState::Sleeping {
                    (*t).state.set(RunState::Runnable);
                    l.runq.push(t);
                }
            },
            Waiter::Io { thread, pd, dir } => {
                // The entry exists only while `thread` is parked (it removes it when it
                // resumes), so `thread` is live. Taking it out of the slot gives us its
                // wake-up; failing means the poller or a shutdown took it and wakes it.
                if pd.cancel_park(dir, thread) {
                    // SAFETY: as above; a thread parked on this carrier's timer is ours.
                    unsafe { make_runnable(l, thread) };
                }
            }
            // SAFETY: the entry exists only while `thread` is parked on channels (it removes
            // it when it resumes), so `thread` and its claim word are live. Winning the claim
            // gives us its wake-up; losing means a channel claimed it and wakes it.
            Waiter::Claim { thread, word } => unsafe {
                if claim_timed_out(&*word) {
                    make_runnable(l, thread);
                }
            },
        }
    }
}

/// Claims a channel party's word for its deadline. A claim in progress (`CLAIMED`) is final:
/// the claimer completes it and sends the wake-up.
fn claim_timed_out(word: &std::sync::atomic::AtomicU32) -> bool {
    word.compare_exchange(
        claim::WAITING,
        claim::TIMED_OUT,
        Ordering::AcqRel,
        Ordering::Acquire,
    )
    .is_ok()
}

/// Looks at the poller, blocking at most `timeout` (`None`: until something arrives), and
/// wakes the threads parked on what it reports (this carrier's directly, others' through
/// their inboxes). Returns how many events it handled.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn netpoll(c: &Carrier, l: &mut Local, timeout: Option<Duration>) -> usize {
    let Some(poller) = c.poller.get() else {
        return 0;
    };
    if timeout != Some(Duration::ZERO) {
        bump(&c.stats.netpoll_blocking);
    }
    bump(&c.stats.netpolls);
    let n = poller.wait(&mut l.events, timeout);
    race::pause(RacePoint::NetpollBeforeDispatch);
    for i in 0..n {
        let ev = l.events[i];
        let (bits, token) = (ev.events, ev.u64);
        if token == NOTIFY_TOKEN {
            poller.drain();
            continue;
        }
        // SAFETY: every other token in this poller was made by `PollDesc::token`.
        let Some(pd) = (unsafe { PollDesc::from_token(token) }) else {
            continue; // left over from the entry's previous user
        };
        bump(&c.stats.io_events);
        if bits & HANGUP_BITS != 0 {
            let mut hup = READ_HUP;
            if bits & (libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                hup |= WRITE_HUP;
            }
            pd.note_hangup(hup);
        }
        if bits & READ_BITS != 0 {
            let t = pd.unblock(Dir::Read, true);
            if !t.is_null() {
                // SAFETY: we took `t` out of the slot, so its wake-up is ours; parked
                // threads are live.
                unsafe { wake_from_here(c, l, t) };
            }
        }
        if bits & WRITE_BITS != 0 {
            let t = pd.unblock(Dir::Write, true);
            if !t.is_null() {
                // SAFETY: as above.
                unsafe { wake_from_here(c, l, t) };
            }
        }
    }
    n
}
