//! Balance without migration: the carriers of a pool share threads that have **not started**.
//!
//! A started thread never moves (the README says why: thread-locals, OS-held locks, the signal
//! mask). A thread that has not started holds none of that, so a pool lets its carriers trade
//! those:
//!
//! 1. A thread spawned on a pool carrier (`spawn`, or `Pool::spawn` from one of its green
//!    threads) is not made runnable there at once: it goes to the carrier's queue of unstarted
//!    threads (`Carrier::fresh`), and the next poll (at the next yield or block) moves the
//!    newest half of them, at most `OWN_BATCH`, into the run queue; thieves take the oldest.
//!    The rest stays where others can take it: a thread that spawns two children and joins the
//!    first runs the second and leaves the first to an idle sibling. Newest first keeps the
//!    carrier depth-first in a fan-out (Cilk's and Tokio's choice): fewer threads alive at
//!    once, their stacks still in cache (a depth-13 tree on two carriers: 7.95 ms oldest
//!    first, 5.62 ms newest first, medians of 9, `examples/balance.rs`).
//! 2. A thread spawned from an OS thread outside the pool goes to the pool's injector.
//! 3. A carrier with nothing to run takes, before it idles: a batch of its own unstarted
//!    threads; else a batch from the injector; else half of a sibling's unstarted threads
//!    (at most `STEAL_MAX`), looking at the siblings in turn from the next one. Taking a
//!    thread rewrites its carrier and registers it there; from then on it is that carrier's.
//! 4. Whoever queues a thread where an idle carrier could take it wakes one idle carrier
//!    (its poller's eventfd). The carrier announces that it idles, then looks at the queues
//!    once more; the queuer stores the queue's length, then looks at the idle count (both in
//!    SeqCst), so one of them always sees the other and no thread waits while a carrier
//!    sleeps.
//! 5. A carrier also takes a batch from the injector at each periodic poll, so that threads
//!    spawned from outside are not starved by a carrier that never runs dry.
//! 6. Before it idles in its poller, a pool carrier with nothing to run spins for up to
//!    `SPIN_BEFORE_IDLE`, looking at its inbox and the queues, without announcing that it
//!    idles: work handed over meanwhile costs neither side a system call (an eventfd write
//!    and an `epoll_wait` return), which would otherwise dominate fan-out/fan-in workloads
//!    whose joins cross carriers.
//!
//! With stealing turned off (`PoolBuilder::stealing(false)`), steps 3's look at the siblings and
//! 4's wake-ups for a carrier's own queue are skipped: each carrier runs what it spawned.
//! Threads placed explicitly (`Pool::spawn_on`) and suspended threads never enter these
//! queues.

use super::carrier::{Carrier, Group, Local};
use crate::tcb::Thread;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Unstarted threads of its own a carrier moves into its run queue at once.
const OWN_BATCH: usize = 32;
/// Threads a carrier takes from the injector at once.
const INJECT_BATCH: usize = 32;
/// The most a carrier steals from a sibling at once (half of what the sibling has queued).
const STEAL_MAX: usize = 256;
/// How long a pool carrier with nothing to run looks for work before it idles in its poller.
const SPIN_BEFORE_IDLE: Duration = Duration::from_micros(25);

/// Whether this carrier belongs to a pool, so that its unstarted threads are shared.
///
/// # Safety
/// Carrier thread, count raised.
#[inline(always)]
pub(super) unsafe fn shares(l: &Local) -> bool {
    l.group.is_some()
}

/// Queues a new thread of this pool carrier where it or an idle sibling will take it, and has
/// the next yield or block poll (which moves a batch into the run queue).
///
/// # Safety
/// Carrier thread, count raised; `t` is new, unstarted, stealable and in no queue.
pub(super) unsafe fn push_fresh(c: &Carrier, l: &mut Local, t: *mut Thread) {
    c.fresh.push(t);
    l.poll_countdown = 1;
    if let Some((g, _)) = &l.group {
        if g.stealing {
            wake_idle(g);
        }
    }
}

/// Queues a thread built outside the pool in its injector and wakes an idle carrier.
/// The caller's preempt count is raised (it may be a green thread of another runtime).
pub(super) fn inject(g: &Group, t: *mut Thread) {
    g.injector.push(t);
    wake_idle(g);
}

/// Wakes one idle carrier of the group, if any.
fn wake_idle(g: &Group) {
    if g.idle.load(Ordering::SeqCst) == 0 {
        return;
    }
    let Some(carriers) = g.carriers.get() else {
        return;
    };
    for c in carriers.iter().filter_map(|w| w.upgrade()) {
        if c.idle.load(Ordering::SeqCst) {
            c.notify();
            return;
        }
    }
}

/// Registers `t`, taken from a queue of unstarted threads, on this carrier and makes it
/// runnable.
///
/// # Safety
/// Carrier thread, count raised; `t` was taken out of a queue (so nobody else holds it as
/// queued) and has not started.
unsafe fn adopt_taken(c: &Carrier, t: *mut Thread) {
    // SAFETY: forwarded contract: until this carrier switches to it, nothing reads `carrier`
    // for a stealable thread but joiners, which skip the same-carrier shortcut for it.
    unsafe {
        (*t).carrier.set(c.addr());
        c.adopt(t, false);
    }
}

/// Moves up to `OWN_BATCH` of this carrier's unstarted threads into its run queue, and, every
/// poll, a batch from the injector. Returns how many it took.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn take_own(c: &Carrier, l: &mut Local) -> usize {
    // SAFETY: forwarded contract; each thread was taken out of its queue just now and has
    // not started.
    let adopt = |t| unsafe { adopt_taken(c, t) };
    let mut n = 0;
    if c.fresh.len() > 0 {
        n += c.fresh.take_newest_half(OWN_BATCH, adopt);
    }
    if let Some((g, _)) = &l.group {
        if g.injector.len() > 0 {
            n += g.injector.take(INJECT_BATCH, adopt);
        }
    }
    n
}

/// For a carrier with nothing to run: its own unstarted threads, else the injector's, else
/// half a sibling's. Returns how many it took.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn find_work(c: &Carrier, l: &mut Local) -> usize {
    // SAFETY: forwarded contract.
    let n = unsafe { take_own(c, l) };
    if n > 0 {
        return n;
    }
    let Some((g, me)) = l.group.clone() else {
        return 0;
    };
    if !g.stealing {
        return 0;
    }
    let Some(carriers) = g.carriers.get() else {
        return 0;
    };
    for k in 1..carriers.len() {
        let Some(victim) = carriers[(me + k) % carriers.len()].upgrade() else {
            continue;
        };
        if victim.fresh.len() > 0 {
            // SAFETY: taken out of the victim's queue just now; unstarted.
            let n = victim
                .fresh
                .take_half(STEAL_MAX, |t| unsafe { adopt_taken(c, t) });
            if n > 0 {
                return n;
            }
        }
    }
    0
}

/// Whether work this carrier could take is queued anywhere (its own, the injector, or with
/// stealing on, a sibling's): read after the carrier announced that it idles.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn work_queued(c: &Carrier, l: &Local) -> bool {
    if c.fresh.len() > 0 {
        return true;
    }
    let Some((g, _)) = &l.group else {
        return false;
    };
    if g.injector.len() > 0 {
        return true;
    }
    g.stealing
        && g.carriers.get().is_some_and(|cs| {
            cs.iter()
                .filter_map(|w| w.upgrade())
                .any(|s| s.fresh.len() > 0)
        })
}

/// Spins for up to `SPIN_BEFORE_IDLE` (or `timeout`, if shorter) while nothing is handed to
/// this carrier; `true` as soon as something is (its inbox, or a queue it may take from).
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn spin_for_work(c: &Carrier, l: &Local, timeout: Option<Duration>) -> bool {
    let Some((g, me)) = &l.group else {
        return false;
    };
    let limit = timeout.map_or(SPIN_BEFORE_IDLE, |t| t.min(SPIN_BEFORE_IDLE));
    let siblings: Vec<Arc<Carrier>> = match g.carriers.get() {
        Some(cs) if g.stealing => cs
            .iter()
            .enumerate()
            .filter(|(i, _)| i != me)
            .filter_map(|(_, w)| w.upgrade())
            .collect(),
        _ => Vec::new(),
    };
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if c.inbox_flag.load(Ordering::Relaxed)
                || c.fresh.len() > 0
                || g.injector.len() > 0
                || siblings.iter().any(|s| s.fresh.len() > 0)
            {
                return true;
            }
            core::hint::spin_loop();
        }
        if start.elapsed() >= limit {
            return false;
        }
    }
}

/// Counts this carrier in or out of its group's idle carriers around its idle wait.
///
/// # Safety
/// Carrier thread.
pub(super) unsafe fn set_idle(l: &Local, idle: bool) {
    if let Some((g, _)) = &l.group {
        if idle {
            g.idle.fetch_add(1, Ordering::SeqCst);
        } else {
            g.idle.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Joins this (not running) carrier to a pool's group as carrier `index`.
pub(super) fn join_group(l: &mut Local, g: Arc<Group>, index: usize) {
    l.group = Some((g, index));
}
