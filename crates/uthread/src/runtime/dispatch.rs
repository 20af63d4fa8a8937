//! Dispatch: the switch between contexts and the bookkeeping around it. Choosing the next
//! context for a thread that stops running (after a poll of the reactor when one is due), the
//! first and last moments of every green thread (`thread_entry`, `exit_current`) and the
//! clean-up of a finished one by the context that runs after it (`finish_zombie`), and
//! spawning.
//!
//! Every function here runs on the carrier thread with the preempt count raised; those that
//! switch (`switch_to` and its callers) take the carrier-local state as a raw pointer, because
//! other contexts use it while this one is suspended.

use super::carrier::{
    carrier_ptr, current_carrier_ref, free_thread, Carrier, Group, Local, Remote,
};
use super::reactor::{make_runnable, poll, wake};
use super::stats::bump;
use super::steal::{self, shares};
use crate::arch::{self, FpEnv};
use crate::preempt::count as preempt;
use crate::preempt::timer;
use crate::race::{self, RacePoint};
use crate::sched;
use crate::stack;
use crate::sys;
use crate::tcb::{life, Mode, NewThread, RunState, SpawnOptions, Spawned, Thread};
use std::io;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

/// Polls when the countdown runs out or the inbox has news.
///
/// # Safety
/// Carrier thread, count raised.
#[inline(always)]
pub(super) unsafe fn poll_maybe(c: &Carrier, l: &mut Local) {
    l.poll_countdown -= 1;
    if l.poll_countdown == 0 || c.inbox_flag.load(Ordering::Relaxed) {
        // SAFETY: forwarded contract.
        unsafe { poll(c, l) }
    }
}

/// Next context for a thread that is giving up the carrier without staying runnable.
///
/// # Safety
/// Carrier thread, count raised.
pub(super) unsafe fn next_for_block(c: &Carrier, l: &mut Local) -> *mut Thread {
    // SAFETY: forwarded contract.
    unsafe { poll_maybe(c, l) };
    if !l.requests.is_empty() {
        return l.sched;
    }
    // SAFETY: queued threads are live.
    let t = unsafe { l.runq.pop() };
    if !t.is_null() {
        return t;
    }
    // SAFETY: forwarded contract. A pool carrier runs its own unstarted threads before it
    // goes to the scheduler context to look further.
    if unsafe { shares(l) && steal::take_own(c, l) > 0 } {
        // SAFETY: just made runnable; queued threads are live.
        return unsafe { l.runq.pop() };
    }
    l.sched
}

/// `next_for_block` with its commonest case inlined: the one runnable thread was queued into an
/// empty queue (kept aside, `RunQueue::take_lone`), no request waits for the scheduler context
/// and no poll falls due at this switch. Then it is that thread, as `next_for_block` would
/// find, without the call and the general pop; otherwise `next_for_block` itself. This is the
/// park of a channel ping-pong: the other side was just handed a value and made runnable.
///
/// # Safety
/// Carrier thread, count raised.
#[inline(always)]
pub(super) unsafe fn next_for_block_inline(c: &Carrier, l: &mut Local) -> *mut Thread {
    if l.poll_countdown > 1 && !c.inbox_flag.load(Ordering::Relaxed) && l.requests.is_empty() {
        let t = l.runq.take_lone();
        if !t.is_null() {
            // Counted towards the next poll, as `poll_maybe` would.
            l.poll_countdown -= 1;
            return t;
        }
    }
    // SAFETY: forwarded contract.
    unsafe { next_for_block(c, l) }
}

/// Whether a context that just made one thread runnable may switch to it without queuing it:
/// the run queue is empty, no request waits for the scheduler context and no poll falls due
/// at this switch, so `next_for_block` would pop that very thread. Counts the switch towards
/// the next poll, as `poll_maybe` would.
///
/// # Safety
/// Carrier thread, count raised.
#[inline(always)]
unsafe fn straight_to(c: &Carrier, l: &mut Local) -> bool {
    if l.runq.is_empty()
        && l.poll_countdown > 1
        && !c.inbox_flag.load(Ordering::Relaxed)
        && l.requests.is_empty()
    {
        l.poll_countdown -= 1;
        return true;
    }
    false
}

/// `next_for_block` for an exiting thread whose joiner (or null) is to be made runnable: when
/// nothing else could be picked, the joiner is returned without the run queue's push and pop.
///
/// # Safety
/// Carrier thread, count raised; `joiner` is null or a blocked thread of this carrier.
#[inline(always)]
unsafe fn next_after_exit(c: &Carrier, l: &mut Local, joiner: *mut Thread) -> *mut Thread {
    // SAFETY: forwarded contract.
    unsafe {
        if !joiner.is_null() {
            if straight_to(c, l) {
                // What `make_runnable` and `next_for_block` would have done, without the queue.
                (*joiner).state.set(RunState::Runnable);
                return joiner;
            }
            make_runnable(l, joiner);
        }
        next_for_block(c, l)
    }
}

/// Switches from `cur` (the running context) to `next` and returns when `cur` is resumed.
///
/// # Safety
/// Carrier thread, count raised, `cur == l.current`, `next` live, suspended and not `cur`.
#[inline(always)]
pub(super) unsafe fn switch_to(
    c: &Carrier,
    l: *mut Local,
    cur: *mut Thread,
    next: *mut Thread,
    in_handler: bool,
) {
    // SAFETY: forwarded contract.
    unsafe { switch(c, l, cur, next, in_handler, None, true) }
}

/// `switch_to` for a caller that knows the preempt count it must find again (the yield, which
/// read it before raising it): `count` is stored back unconditionally on resumption, kept
/// across the switch in one word with errno.
///
/// # Safety
/// As `switch_to`; `count` is the caller's count before the runtime call raised it.
#[inline(always)]
pub(super) unsafe fn switch_setting_count(
    c: &Carrier,
    l: *mut Local,
    cur: *mut Thread,
    next: *mut Thread,
    count: u32,
) {
    // SAFETY: forwarded contract.
    unsafe { switch(c, l, cur, next, false, Some(count), true) }
}

/// `switch_setting_count` for a yield that took the run queue's uniform rotation
/// (`RunQueue::is_uniform_at`), which implies that neither thread declared a floating-point
/// environment: the switch does not look.
///
/// # Safety
/// As `switch_setting_count`; neither `cur` nor `next` has `own_fp_env`.
#[inline(always)]
pub(super) unsafe fn switch_uniform(
    c: &Carrier,
    l: *mut Local,
    cur: *mut Thread,
    next: *mut Thread,
    count: u32,
) {
    // SAFETY: forwarded contract.
    unsafe {
        debug_assert!(!(*cur).own_fp_env && !(*next).own_fp_env);
        switch(c, l, cur, next, false, Some(count), false)
    }
}

/// # Safety
/// As `switch_to`; with `count_after`, as `switch_setting_count`; without `fp_env_possible`,
/// as `switch_uniform`.
#[inline(always)]
unsafe fn switch(
    c: &Carrier,
    l: *mut Local,
    cur: *mut Thread,
    next: *mut Thread,
    in_handler: bool,
    count_after: Option<u32>,
    fp_env_possible: bool,
) {
    // SAFETY: forwarded contract; `l` stays valid (the carrier outlives every switch).
    unsafe {
        // What this context must find again when it is resumed: its errno and preempt count,
        // packed in one word, so that keeping them across the switch costs one register (or
        // one store). The empty block keeps the compiler from splitting the word again, which
        // in a caller's loop cost a second spill.
        let count = count_after.unwrap_or_else(preempt::count);
        let mut saved = (*(*l).errno as u32 as u64) << 32 | count as u64;
        // (SAFETY: the block is empty: it reads and writes nothing but the register it is
        // given, which it leaves as it was.)
        core::arch::asm!(
            "/* {0} */",
            inout(reg) saved,
            options(pure, nomem, nostack, preserves_flags)
        );
        // `start_tick` is only read by the tick handler, to spare a thread switched in by the
        // handler at this very tick (a second, forced signal); one switched in anywhere else
        // has an older value and is preempted at the next tick, as it would be with a fresh
        // one. So only the handler's switch stores it.
        if in_handler && (*next).mode == Mode::Preemptive {
            (*next).start_tick.set(c.ticks.load(Ordering::Relaxed));
        }
        (*l).current = next;
        preempt::clear_pending();
        bump(&c.stats.context_switches);
        // Between two threads that keep the carrier's floating-point environment there is
        // nothing to do: it is already theirs. `in_handler` is a constant at every call site.
        if in_handler || fp_env_possible && ((*cur).own_fp_env | (*next).own_fp_env) {
            hand_over_fp_env(l, cur, next, in_handler);
        }
        // ---- resumed as `cur` ----
        // The carrier's state comes back from the context that switched here, in a register:
        // every context resumed by this switch belongs to the same carrier (a started thread
        // never changes carrier; a fresh one starts in `thread_entry`, which ignores it), so it
        // holds the same pointer. Kept across the switch instead, it would cost a store and a
        // load; found through the thread-local, a chain of loads from the new stack.
        let l = arch::switch((*cur).sp.get(), *(*next).sp.get(), l as usize) as *mut Local;
        debug_assert_eq!(
            l,
            (*carrier_ptr()).local(),
            "resumed by another carrier's context"
        );
        after_resume(l, in_handler);
        // Both are usually what the context that switched here left (the count raised once by
        // the runtime call, errno untouched): stores only when they differ, because a yield's
        // time on this machine follows its stores, not its instructions (see the README).
        // Out of line when they differ, so that the usual case falls through.
        let (errno, count) = ((saved >> 32) as i32, saved as u32);
        if count_after.is_some() {
            preempt::restore(count);
        } else if preempt::count() != count {
            preempt::set_count_cold(count);
        }
        let e = (*l).errno;
        if *e != errno {
            restore_errno(e, errno);
        }
    }
}

/// # Safety
/// `e` is the carrier thread's errno.
#[cold]
#[inline(never)]
unsafe fn restore_errno(e: *mut libc::c_int, v: i32) {
    // SAFETY: forwarded contract.
    unsafe { *e = v }
}

/// Gives `next` its floating-point environment before the switch to it: its own if it
/// declared one (`own_fp_env`), else the carrier's (`Local::default_fp_env`). The environment
/// that was live is first saved as `cur`'s own when `cur` declared one, except inside the tick
/// handler:
///
/// * the kernel starts a signal handler in the initial FP state (MXCSR 0x1F80, x87 control word
///   0x037F), not in the interrupted thread's; that one is in the signal frame on the thread's
///   stack, and `sigreturn` restores it when the thread is resumed (always inside its handler,
///   where it was switched out), so there is nothing to save: what is live is the kernel's,
///   not the thread's;
/// * for the same reason, in the handler the live environment is not the carrier's even when
///   neither thread declared one, so it is always loaded there: `next` may be resumed at a
///   cooperative switch point, where nothing else would restore it. (A `next` resumed inside
///   its own handler gets its interrupted environment back from `sigreturn` regardless.)
///
/// Not inlined, and cold so that the switches that skip it fall through: only threads that
/// declared an environment, and preemptions, pay for it.
///
/// # Safety
/// Carrier thread, count raised; `cur` is the running context and `next` a live one.
#[cold]
#[inline(never)]
unsafe fn hand_over_fp_env(l: *mut Local, cur: *mut Thread, next: *mut Thread, in_handler: bool) {
    // SAFETY: forwarded contract: both threads are live and only this OS thread touches their
    // carrier-owned fields.
    unsafe {
        if (*cur).own_fp_env && !in_handler {
            (*cur).fp_env.set(FpEnv::current());
        }
        let env = if (*next).own_fp_env {
            (*next).fp_env.get()
        } else {
            (*l).default_fp_env
        };
        env.load();
    }
}

/// Bookkeeping every context does right after being resumed.
///
/// # Safety
/// Carrier thread, count raised.
#[inline(always)]
unsafe fn after_resume(l: *mut Local, in_handler: bool) {
    // SAFETY: forwarded contract.
    unsafe {
        if (*l).resume_work {
            resume_work(l, in_handler);
        }
    }
}

/// # Safety
/// Carrier thread, count raised.
#[cold]
#[inline(never)]
unsafe fn resume_work(l: *mut Local, in_handler: bool) {
    // SAFETY: forwarded contract.
    unsafe {
        (*l).resume_work = false;
        if !(*l).zombie.is_null() {
            let z = (*l).zombie;
            (*l).zombie = null_mut();
            finish_zombie(&mut *l, z);
        }
        if in_handler {
            // Our own sigreturn restores the pre-signal mask.
            (*l).sig_blocked = false;
        } else if (*l).sig_blocked {
            (*l).sig_blocked = false;
            timer::unblock_signal();
        }
    }
}

/// Publishes that `z` is done, wakes whoever waits for it, and lets go of it; frees it when
/// its handle is already gone. Runs on the carrier right after the switch away from `z`, so
/// nothing runs on `z`'s stack any more when anyone can see `REAPED`.
///
/// # Safety
/// `z` exited on this carrier and no context runs on its stack.
unsafe fn finish_zombie(l: &mut Local, z: *mut Thread) {
    // SAFETY: `z` is live: the runtime's reference is only given up below.
    unsafe {
        unlink_all(l, z);
        let joiner_woken = core::mem::replace(&mut l.zombie_joiner_woken, false);
        let lw = &(*z).life;
        let cur = lw.load(Ordering::Acquire);
        if cur & life::HANDLE_GONE != 0 {
            // Detached: no handle, so nobody else can ever look at `z`.
            free_thread(z);
            return;
        }
        if cur & life::JOINER != 0 && joiner_woken {
            // The usual spawn + join: the joiner on this carrier owns the handle (no other
            // writer exists) and is already runnable. One plain store publishes the outcome
            // and hands `z` to the handle, which frees it after `join`.
            lw.store(cur | life::DONE | life::REAPED, Ordering::Release);
            return;
        }
        // Someone elsewhere may be looking: publish DONE, wake, and only then let go, so that
        // `z` is still ours while we wake its waiters.
        race::pause(RacePoint::FinishBeforePublish);
        let old = if cur & (life::JOINER | life::OS_JOINER) != 0 {
            lw.store(cur | life::DONE, Ordering::Release);
            cur
        } else {
            lw.fetch_or(life::DONE, Ordering::AcqRel)
        };
        if old & life::JOINER != 0 {
            // Read only now: `joiner` is written before the Release RMW that set JOINER, which
            // `old` (or `cur`) has observed; before that it may be null or being written.
            wake((*z).joiner.get());
        }
        if old & life::OS_JOINER != 0 {
            sys::futex_wake(lw, i32::MAX);
        }
        if lw.fetch_or(life::REAPED, Ordering::AcqRel) & life::HANDLE_GONE != 0 {
            free_thread(z);
        }
    }
}

unsafe fn unlink_all(l: &mut Local, t: *mut Thread) {
    // SAFETY: `t` and its neighbours in the all-list are live.
    unsafe {
        let p = (*t).all_prev.get();
        let n = (*t).all_next.get();
        if p.is_null() {
            l.all_head = n;
        } else {
            (*p).all_next.set(n);
        }
        if !n.is_null() {
            (*n).all_prev.set(p);
        }
        // `t`'s own links are left as they are: it leaves the carrier for good (it is being
        // finished), and nothing walks the list from it.
    }
}

/// First Rust code of every green thread (called by the arch start stub).
unsafe extern "C" fn thread_entry(arg: usize) -> ! {
    let t = arg as *mut Thread;
    let c = carrier_ptr();
    // SAFETY: a thread only starts by a switch from its own carrier, inside block_on, so
    // CARRIER is set; `t` was passed by init_stack and is live.
    unsafe {
        let l = (*c).local();
        after_resume(l, false);
        preempt::clear_pending();
        preempt::set_count(0);
        *(*l).errno = 0;
        Thread::run(t);
        exit_current(&*c, t)
    }
}

/// Leaves the carrier for good. The next context publishes the outcome (`finish_zombie`); a
/// joiner on this carrier is made runnable now so that it can be that next context.
///
/// Inlined into `thread_entry`, which the start stub enters by a jump: a thread then leaves
/// no call without its return on the return-address stack when it switches away for good,
/// and the returns of the context resumed after it are predicted right. Not in unoptimised
/// builds: there the inlined locals keep their own slots and grow the first frame of every
/// thread by some 700 bytes (which `tests/lifecycle.rs`'s 5 KiB closure on a 64 KiB stack,
/// copied several times over by unoptimised code, does not have to spare).
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline(never))]
unsafe fn exit_current(c: &Carrier, t: *mut Thread) -> ! {
    preempt::set_count(1);
    // SAFETY: `t` is the running thread of carrier `c` (we are on its stack).
    unsafe {
        let l = c.local();
        let mut joiner = null_mut();
        if (*t).life.load(Ordering::Acquire) & life::JOINER != 0 {
            let j = (*t).joiner.get();
            if (*j).carrier.get() == c.addr() {
                if (*j).state.get() == RunState::Blocked {
                    joiner = j;
                }
                (*l).zombie_joiner_woken = true;
            }
        }
        (*l).alive -= 1;
        if (*t).mode == Mode::Preemptive {
            (*l).preemptive_alive -= 1;
        }
        (*t).state.set(RunState::Exited);
        (*l).zombie = t;
        (*l).resume_work = true;
        bump(&c.stats.threads_finished);
        let next = next_after_exit(c, &mut *l, joiner);
        // The next context finishes us in after_resume; we never come back.
        switch_to(c, l, t, next, false);
    }
    // SAFETY: unreachable: nothing ever switches back to an exited thread.
    unsafe { libc::abort() }
}

/// The running thread stays on the carrier: a yield found nothing else runnable.
///
/// # Safety
/// Carrier thread, count raised, `cur` the running green thread.
#[inline(always)]
pub(super) unsafe fn resume_without_switch(_c: &Carrier, _cur: *mut Thread) {
    preempt::clear_pending();
}

/// Spawns a thread on the calling OS thread's carrier and returns it with the handle's
/// reference, which the caller must give up exactly once (`carrier::release_handle`). No
/// `Send` bound: `block_on`'s main thread never leaves the calling OS thread; `Builder::spawn`
/// adds the bounds.
#[inline(always)]
pub(crate) fn spawn_current<F, T>(opts: SpawnOptions, f: F) -> io::Result<*mut Thread>
where
    F: FnOnce() -> T,
{
    let carrier = current_carrier_ref().ok_or_else(|| {
        io::Error::other(
            "uthread: spawn called outside a runtime; call it inside Runtime::block_on",
        )
    })?;
    let priority = opts.priority.validate()?;
    let (block, align, reserve) = block_layout::<T, F>();
    preempt::disable();
    // SAFETY: on the carrier (it is the calling OS thread's), count raised.
    let taken = unsafe { carrier.take_stack(opts.stack_size, reserve) };
    let (stack, id) = match taken {
        Ok(x) => x,
        Err(e) => {
            preempt::enable();
            return Err(e);
        }
    };
    let suspended = opts.start_suspended;
    // SAFETY: a stack that is ours with `reserve` bytes on top, laid out for `Spawned<T, F>`.
    unsafe {
        let l = &mut *carrier.local();
        let shared = !suspended && !opts.placed && shares(l);
        let t = build::<T, F>(carrier, stack, id, block, align, priority, opts, f, shared);
        // `t` is a fully initialised thread of this carrier, in no queue; count raised.
        if shared {
            steal::push_fresh(carrier, l, t);
        } else {
            carrier.adopt(t, suspended);
        }
        preempt::enable();
        Ok(t)
    }
}

/// Spawns a thread into a pool's injector from an OS thread outside the pool (`Pool::spawn`):
/// built here on a stack from the calling carrier's pool (or freshly mapped outside any
/// runtime) with `home`'s settings, taken and registered by the first carrier of the pool free
/// to run it (`runtime::steal`). Returns it with the handle's reference, like `spawn_current`.
pub(crate) fn spawn_injected<F, T>(
    group: &Group,
    home: &Carrier,
    opts: SpawnOptions,
    f: F,
) -> io::Result<*mut Thread>
where
    F: FnOnce() -> T + Send,
{
    if opts.start_suspended {
        // A suspended thread is woken where it is registered: give it a carrier now.
        return spawn_remote(home, opts, f);
    }
    let priority = opts.priority.validate()?;
    let (block, align, reserve) = block_layout::<T, F>();
    preempt::disable();
    let taken = match current_carrier_ref() {
        // SAFETY: on the calling carrier's thread, count raised.
        Some(here) => unsafe { here.take_stack_as(&home.config, opts.stack_size, reserve) },
        None => home.fresh_stack(opts.stack_size, reserve),
    };
    let r = taken.map(|(stack, id)| {
        // SAFETY: as in `spawn_current`; the carrier that takes it rewrites its carrier.
        let t = unsafe { build::<T, F>(home, stack, id, block, align, priority, opts, f, true) };
        steal::inject(group, t);
        t
    });
    preempt::enable();
    r
}

/// Spawns a thread on `target`, a carrier other than the caller's (`Pool::spawn`): the thread
/// is built here, on a stack from the calling carrier's pool (or freshly mapped outside any
/// runtime), and handed to `target` through its inbox, which registers it and makes it
/// runnable. Returns it with the handle's reference, like `spawn_current`.
pub(crate) fn spawn_remote<F, T>(
    target: &Carrier,
    opts: SpawnOptions,
    f: F,
) -> io::Result<*mut Thread>
where
    F: FnOnce() -> T + Send,
{
    let priority = opts.priority.validate()?;
    let (block, align, reserve) = block_layout::<T, F>();
    preempt::disable();
    let taken = match current_carrier_ref() {
        // SAFETY: on the calling carrier's thread, count raised.
        Some(here) => unsafe { here.take_stack_as(&target.config, opts.stack_size, reserve) },
        None => target.fresh_stack(opts.stack_size, reserve),
    };
    let r = taken.map(|(stack, id)| {
        let suspended = opts.start_suspended;
        // SAFETY: as in `spawn_current`; the thread is `target`'s, which alone will run it.
        let t = unsafe { build::<T, F>(target, stack, id, block, align, priority, opts, f, false) };
        target.push_remote(Remote::Adopt(t, suspended));
        t
    });
    preempt::enable();
    r
}

/// Size, alignment and the reserve above the stack of a `Spawned<T, F>` control block.
#[inline(always)]
fn block_layout<T, F>() -> (usize, usize, usize) {
    let block = core::mem::size_of::<Spawned<T, F>>();
    let align = core::mem::align_of::<Spawned<T, F>>().max(16);
    (block, align, stack::block_reserve(block, align))
}

/// Writes a new thread of `carrier` on top of `stack` and prepares its first switch.
///
/// # Safety
/// `stack` is ours, mapped and used by nobody (fresh, or from a pool), with at least the
/// reserve of `block_layout::<T, F>()` on top.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn build<T, F>(
    carrier: &Carrier,
    stack: stack::Stack,
    id: u64,
    block: usize,
    align: usize,
    priority: crate::tcb::Priority,
    opts: SpawnOptions,
    f: F,
    stealable: bool,
) -> *mut Thread
where
    F: FnOnce() -> T,
{
    // Staggered by the thread's colour (`stack::colour_offset`), which `block_reserve` leaves
    // room for.
    let at = (stack.top() - block - stack::colour_offset(id)) & !(align - 1);
    let initial = if opts.start_suspended {
        life::SUSPENDED
    } else {
        life::READY
    };
    // SAFETY: [at, at + block) lies in the reserved top pages of the stack (caller); `at` is
    // aligned for `Spawned<T, F>`. The thread's own frames start below `at` (init_stack writes
    // only below its `top`).
    unsafe {
        let t = Spawned::<T, F>::write(
            at as *mut Spawned<T, F>,
            NewThread {
                carrier: carrier.addr(),
                priority,
                level_key: sched::level_key(priority, opts.own_fp_env),
                mode: opts.mode,
                own_fp_env: opts.own_fp_env,
                id,
                name: opts.name,
                stack,
                life: initial,
                stealable,
            },
            f,
        );
        *(*t).sp.get() = arch::init_stack(at & !15, thread_entry, t as usize);
        t
    }
}
