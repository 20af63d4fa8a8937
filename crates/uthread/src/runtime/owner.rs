//! The owner context: what the OS thread inside `block_on` runs on its own stack, outside every
//! green thread. It is entered only when no green thread should run: to serve
//! `synchronize`/`queue` requests, to idle (in `epoll_wait` until the next timer is due, a
//! descriptor is ready, or another OS thread hands over work), to tell the end of the run from
//! a deadlock, and to shut down (cancel what is still suspended, abandon what is blocked
//! forever, closing the sockets they waited on).

use super::carrier::{Carrier, Local};
use super::dispatch::switch_to;
use super::reactor::{make_runnable, netpoll, poll_without_io, wake};
use super::steal;
use crate::poll::desc::PollDesc;
use crate::sched::RunQueue;
use crate::sys;
use crate::tcb::{life, Mode, RunState, Thread};
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The scheduler loop, run on the owner's stack until every thread is done, or blocked for
/// good while `main` is not (a deadlock: returns `true`).
///
/// # Safety
/// On `c`'s carrier thread, in the scheduler context, count raised.
pub(super) unsafe fn run(c: &Carrier, main: &Thread) -> bool {
    let l = c.local();
    // SAFETY: carrier thread, scheduler context, count raised throughout (user callbacks
    // run inside it; preemption never applies to the scheduler context).
    unsafe {
        loop {
            while let Some(req) = (*l).requests.pop_front() {
                (req.call)(req.data);
            }
            poll_without_io(c, &mut *l);
            if !(*l).requests.is_empty() {
                continue;
            }
            let t = (*l).runq.pop();
            if !t.is_null() {
                if (*l).preemptive_alive > 0 {
                    c.ensure_timer(&mut *l);
                }
                switch_to(c, l, (*l).sched, t, false);
                continue;
            }
            // Nothing runnable: a pool carrier looks for unstarted threads it may take.
            if steal::shares(&*l) && steal::find_work(c, &mut *l) > 0 {
                continue;
            }
            if (*l).alive == 0 {
                return false;
            }
            let main_done = main.is_done();
            let timed = !(*l).timers.is_empty();
            if main_done && !timed && cancel_suspended(&mut *l) {
                continue;
            }
            // Wake-ups that are sure to come: a join of another runtime's thread, or a
            // resume/cancel made on another OS thread whose wake-up has not arrived yet.
            // Waiting for them is neither the end nor a deadlock. (The all-list walk runs
            // only here, with nothing runnable and no timer pending.) While `main` runs, a
            // thread waiting on a descriptor may be woken by the outside world too; once
            // `main` is done, such a thread counts as blocked forever unless a timer or one
            // of the above keeps the runtime going.
            let expected = (*l).remote_joins > 0 || (!timed && wakes_in_flight(&*l));
            if main_done && !timed && !expected {
                return false;
            }
            let expected = expected || (!main_done && (*l).io_waiters > 0);
            let timeout = (*l)
                .timers
                .next_deadline()
                .map(|when| when.saturating_duration_since(Instant::now()));
            if steal::shares(&*l) && steal::spin_for_work(c, &*l, timeout) {
                continue;
            }
            Carrier::disarm_timer(&mut *l);
            // Announce the idle wait, then look once more at what could end it (see
            // `Carrier::notify`: whoever changes one of these after our look sees `idle`).
            c.idle.store(true, Ordering::SeqCst);
            steal::set_idle(&*l, true);
            if timeout.is_none() && c.handles.load(Ordering::SeqCst) == 0 && !expected {
                steal::set_idle(&*l, false);
                c.idle.store(false, Ordering::Relaxed);
                return true; // blocked forever: deadlock (main is not done here)
            }
            if !c.inbox_flag.load(Ordering::SeqCst)
                && timeout != Some(Duration::ZERO)
                && !steal::work_queued(c, &*l)
            {
                netpoll(c, &mut *l, timeout);
            }
            steal::set_idle(&*l, false);
            c.idle.store(false, Ordering::Relaxed);
        }
    }
}

/// `true` if some thread left SUSPENDED (resumed or cancelled from another OS thread) but
/// its wake-up has not been taken from the inbox yet: it is about to become runnable.
unsafe fn wakes_in_flight(l: &Local) -> bool {
    let mut t = l.all_head;
    // SAFETY: all-list members are live threads of this carrier.
    unsafe {
        while !t.is_null() {
            let th = &*t;
            if th.state.get() == RunState::Blocked
                && th.life.load(Ordering::Acquire) & life::STATE == life::READY
            {
                return true;
            }
            t = th.all_next.get();
        }
    }
    false
}

/// Cancels threads still suspended at shutdown (they run their cancellation path).
/// Returns `true` if any was found.
unsafe fn cancel_suspended(l: &mut Local) -> bool {
    let mut found = false;
    let mut t = l.all_head;
    // SAFETY: all-list members are live threads of this carrier.
    unsafe {
        while !t.is_null() {
            let th = &*t;
            if th.leave_suspended(true) {
                make_runnable(l, t);
                found = true;
            }
            t = th.all_next.get();
        }
    }
    found
}

/// Marks every remaining (blocked-forever) thread abandoned and leaks it. A thread parked on
/// a socket gets the socket closed (`PollDesc::abandon`): its stack, where the socket object
/// lives, is never unwound.
pub(super) unsafe fn abandon_all(l: &mut Local) {
    let mut t = l.all_head;
    // SAFETY: all-list members are live threads of this carrier; abandoned threads keep
    // their stack (with their control block) forever: `REAPED` is never set for them, so
    // their handles never free them, and pointers to them held by synchronisation
    // primitives stay valid; `make_runnable` ignores them.
    unsafe {
        while !t.is_null() {
            let th = &*t;
            let next = th.all_next.get();
            l.abandoned_any = true;
            th.state.set(RunState::Abandoned);
            let pd = th.io_wait.get() as *const PollDesc;
            if !pd.is_null() {
                // Other threads parked on the same socket (of other runtimes) fail; those of
                // this one are being abandoned too, and `wake` ignores them.
                for w in (*pd).abandon() {
                    if !w.is_null() && w != t {
                        wake(w);
                    }
                }
                l.io_waiters -= 1;
            }
            let old = th.life.fetch_or(life::DONE, Ordering::AcqRel);
            if old & life::JOINER != 0 {
                // Read after the RMW that observed JOINER (see finish_zombie).
                let joiner = th.joiner.get();
                if (*joiner).carrier.get() != th.carrier.get() {
                    wake(joiner);
                }
            }
            if old & life::OS_JOINER != 0 {
                sys::futex_wake(&th.life, i32::MAX);
            }
            if th.mode == Mode::Preemptive {
                l.preemptive_alive -= 1;
            }
            l.alive -= 1;
            t = next;
        }
        l.all_head = null_mut();
        l.runq = RunQueue::new(0x5EED);
        l.timers.clear();
        // Abandoned joiners never get to count themselves out.
        l.remote_joins = 0;
    }
}

/// A thread handed to this carrier (`Remote::Adopt`) that never got to it because the runtime
/// is being dropped: published as abandoned, its waiters woken, its stack leaked like any
/// abandoned thread's.
///
/// # Safety
/// `t` was built for this carrier and never adopted; `l` is the carrier's state, not running.
pub(super) unsafe fn abandon_unadopted(l: &mut Local, t: *mut Thread) {
    // SAFETY: `t` is live (its stack is leaked from here on); see `abandon_all`.
    unsafe {
        let th = &*t;
        l.abandoned_any = true;
        th.state.set(RunState::Abandoned);
        let old = th.life.fetch_or(life::DONE, Ordering::AcqRel);
        if old & life::JOINER != 0 {
            wake(th.joiner.get());
        }
        if old & life::OS_JOINER != 0 {
            sys::futex_wake(&th.life, i32::MAX);
        }
    }
}
