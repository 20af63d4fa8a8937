//! The preemption tick: the timer signal's handler, which switches to another green thread
//! inside the handler when that is safe, and the scheduling facts it reads.
//!
//! # Safety model
//!
//! Each carrier (the OS thread inside `block_on`) owns a POSIX timer created with
//! `SIGEV_THREAD_ID`, so its signal (`SIGURG`) is delivered to that OS thread only, once per
//! quantum. The handler runs on the interrupted green thread's own stack (no `SA_ONSTACK`), so
//! the kernel's signal frame (saved registers, FPU state, signal mask) lives on that stack.
//!
//! The handler switches to another green thread **only** when all of these hold:
//! 1. the interrupted thread is `Mode::Preemptive` and has used its quantum;
//! 2. the preempt-disable count is zero: the thread is not inside the runtime, a
//!    [`critical_section`](crate::critical_section) / [`PreemptGuard`](crate::PreemptGuard),
//!    or (with [`PreemptSafeAlloc`](crate::PreemptSafeAlloc)) the allocator;
//! 3. [`PreemptSafeAlloc`](crate::PreemptSafeAlloc) is the process's global allocator (observed
//!    via a flag it sets on first use). Without it the thread could be inside `malloc` holding
//!    the arena lock, and the next green thread on the same OS thread would deadlock on it;
//! 4. the OS thread is not unwinding a panic (`std::thread::panicking()` is per OS thread).
//!
//! Otherwise it sets a *pending* flag; the thread then yields at the next safe point: when the
//! count drops back to zero (end of a critical section or runtime call), at
//! [`preempt_point`](crate::preempt_point), or at the next tick that finds the conditions met.
//!
//! Switching inside the handler is sound because the handler's frame and the kernel's
//! `sigreturn` frame stay on the preempted thread's stack, untouched, until that thread is
//! resumed; it then returns from the handler normally, on the same stack, and `sigreturn`
//! restores exactly the interrupted state. The handler itself only touches runtime state that
//! condition 2 guarantees nobody was modifying. `errno` is saved at handler entry and restored
//! at exit; each switch additionally saves and restores `errno` and the preempt count per
//! thread.
//!
//! The signal mask: while the handler runs, the kernel blocks `SIGURG` on the OS thread. A thread
//! resumed by returning from its own handler gets its mask back from `sigreturn`. A thread that
//! had been suspended cooperatively (or a new thread) would inherit the blocked mask, so the
//! runtime records "switched away inside the handler" per carrier and unblocks the signal with
//! one `pthread_sigmask` in that case only: cooperative yields never make a system call.

use super::carrier::{carrier_ptr, Carrier};
use super::dispatch::{poll_maybe, switch_to};
use super::stats::bump;
use crate::preempt::count as preempt;
use crate::preempt::timer::PREEMPT_SIGNAL;
use crate::sys;
use crate::tcb::{Mode, RunState};
use std::sync::atomic::Ordering;
use std::sync::Once;

/// Installs the tick handler, once per process. No `SA_ONSTACK`: the handler must run on the
/// interrupted green thread's own stack (module docs).
pub(super) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `on_tick` has the SA_SIGINFO signature and is async-signal-safe: it touches
        // only this OS thread's runtime state, under the conditions of the module docs.
        unsafe {
            sys::install_sigaction(
                PREEMPT_SIGNAL,
                on_tick as *const () as libc::sighandler_t,
                libc::SA_SIGINFO | libc::SA_RESTART,
                false,
            );
        }
    });
}

extern "C" fn on_tick(_sig: libc::c_int, _info: *mut libc::siginfo_t, _uctx: *mut libc::c_void) {
    let errno = sys::errno_location();
    // SAFETY: valid pointer for this thread (above).
    let saved_errno = unsafe { *errno };
    let c = carrier_ptr();
    if !c.is_null() {
        // SAFETY: CARRIER is non-null only while this OS thread is inside `block_on`, which
        // keeps the carrier alive.
        unsafe { tick(&*c) };
    }
    // SAFETY: as above.
    unsafe { *errno = saved_errno };
}

/// # Safety
/// Called from the tick handler on the carrier's OS thread.
unsafe fn tick(c: &Carrier) {
    bump(&c.ticks);
    bump(&c.stats.timer_ticks);
    // SAFETY: we are the carrier's tick handler (caller).
    let Some((mode, started)) = (unsafe { current_sched_info(c) }) else {
        return; // scheduler context, or a non-green context: nothing to preempt
    };
    if mode != Mode::Preemptive {
        return;
    }
    let ticks = c.ticks.load(Ordering::Relaxed);
    if ticks.wrapping_sub(started) < 1 {
        return;
    }
    if preempt::count() != 0 || !preempt::preempt_safe_alloc_installed() || std::thread::panicking()
    {
        if preempt::set_pending() {
            bump(&c.stats.deferred_preemptions);
        }
        return;
    }
    preempt::disable();
    // SAFETY: count was zero, so no runtime state is mid-update on this OS thread, the thread
    // is not in the allocator (wrapper installed), and not unwinding (checked above).
    unsafe { preempt_from_handler(c) };
    preempt::enable_no_yield();
}

/// Scheduling facts the tick handler needs: `None` for the scheduler context.
///
/// # Safety
/// Carrier thread.
unsafe fn current_sched_info(c: &Carrier) -> Option<(Mode, u64)> {
    // SAFETY: `current` is only written with the count raised and is a single word; the handler
    // reads it whatever the count.
    unsafe {
        let l = c.local();
        let cur = core::ptr::read_volatile(&(*l).current);
        if cur.is_null() || cur == (*l).sched {
            return None;
        }
        Some(((*cur).mode, (*cur).start_tick.get()))
    }
}

/// Switches away from a preempted thread, inside the tick handler.
///
/// # Safety
/// Tick handler on the carrier thread, count was zero and is now raised, allocator wrapper
/// installed.
unsafe fn preempt_from_handler(c: &Carrier) {
    // SAFETY: forwarded contract: no runtime state is mid-update.
    unsafe {
        let l = c.local();
        let cur = (*l).current;
        poll_maybe(c, &mut *l);
        (*cur).state.set(RunState::Runnable);
        (*l).runq.push(cur);
        let next = if (*l).requests.is_empty() {
            (*l).runq.pop()
        } else {
            (*l).sched
        };
        if next == cur {
            (*cur).start_tick.set(c.ticks.load(Ordering::Relaxed));
            return;
        }
        bump(&c.stats.preemptions);
        (*l).sig_blocked = true;
        (*l).resume_work = true;
        switch_to(c, l, cur, next, true);
    }
}

/// Makes the running thread look as if it had used its quantum (benchmark hook).
pub(crate) fn force_quantum_expired() {
    let c = carrier_ptr();
    if c.is_null() {
        return;
    }
    // SAFETY: carrier thread; `start_tick` of the running thread is only read by the handler.
    unsafe {
        let cur = (*(*c).local()).current;
        if cur != (*(*c).local()).sched {
            (*cur)
                .start_tick
                .set((*c).ticks.load(Ordering::Relaxed).wrapping_sub(1));
        }
    }
}
