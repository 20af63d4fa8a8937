//! The operations behind the public API that involve the running green thread: yield, block,
//! sleep, waiting on a descriptor, join, `synchronize` and `queue`, and the queries `stats`,
//! `current_name` and `current_id`.

use super::carrier::{carrier_ptr, context, Carrier, Context, Request, POLL_EVERY};
use super::dispatch::{
    next_for_block, next_for_block_inline, resume_without_switch, switch_setting_count, switch_to,
    switch_uniform,
};
use super::reactor::{poll, wake};
use super::stats::{bump, Stats};
use super::timers::{claim, Waiter};
use crate::poll::desc::{closed_error, PollDesc, READY};
use crate::poll::poller::{poll_blocking, Dir};
use crate::preempt::count as preempt;
use crate::race::{self, RacePoint};
use crate::sys;
use crate::tcb::{life, Mode, RunState, Thread};
use std::io;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Blocks the running green thread until someone calls `wake` on it.
///
/// # Safety
/// Called from a green thread (not the scheduler) with the count raised, after the thread was
/// registered somewhere a waker will find it.
///
/// Always inlined: join's wait loop and a channel's park need it inlined, and left to the
/// heuristics it was not (a spawn + run + join took 18 instructions more, a channel message 9
/// once the switch's rare paths became calls to cold functions; callgrind).
#[inline(always)]
pub(crate) unsafe fn block_current() {
    let c = carrier_ptr();
    // SAFETY: green thread => CARRIER is set; count is raised (caller).
    unsafe {
        let c = &*c;
        let l = c.local();
        let cur = (*l).current;
        (*cur).state.set(RunState::Blocked);
        let next = next_for_block_inline(c, &mut *l);
        if next == cur {
            (*cur).state.set(RunState::Runnable);
            return;
        }
        switch_to(c, l, cur, next, false);
    }
}

/// Parks the running green thread on channels until its claim word (`timers::claim`) is
/// claimed and it is woken: by the channel that claimed it, or by its deadline's timer, which
/// claims it as `TIMED_OUT`. `claimed_elsewhere` says the word was already claimed by another
/// party while the caller registered, whose wake-up is then on its way: it is taken here, so
/// that it cannot hit the thread later while it waits for something else.
///
/// # Safety
/// Called from a green thread with the count raised; `word` lives until this returns, and every
/// party that can claim it finds the thread (it is registered on the channels).
///
/// Inlined, with the deadline's timer out of line: a park without a deadline is the block
/// alone, on the path of every channel hand-over between green threads.
#[inline(always)]
pub(crate) unsafe fn park_claim(word: &AtomicU32, deadline: Option<Instant>) {
    match deadline {
        // SAFETY: forwarded contract. Exactly one wake-up comes per claim, so one block takes
        // it.
        None => unsafe { block_current() },
        // SAFETY: forwarded contract.
        Some(d) => unsafe { park_claim_until(word, d) },
    }
    debug_assert!(word.load(Ordering::Acquire) & claim::DONE != 0);
}

/// `park_claim` with a deadline: the timer that claims the word as timed out is set first
/// (unless someone claimed it already) and taken out after the wake-up.
///
/// # Safety
/// As `park_claim`.
#[inline(never)]
unsafe fn park_claim_until(word: &AtomicU32, deadline: Instant) {
    let c = carrier_ptr();
    // SAFETY: green thread => CARRIER is set; count raised (caller).
    unsafe {
        let l = (*c).local();
        let cur = (*l).current;
        let key = (word.load(Ordering::Acquire) == claim::WAITING).then(|| {
            (*l).timers.insert(
                deadline,
                Waiter::Claim {
                    thread: cur,
                    word: word as *const AtomicU32,
                },
            )
        });
        // Exactly one wake-up comes per claim, so one block takes it.
        block_current();
        if let Some(k) = key {
            (*(*c).local()).timers.remove(k);
        }
    }
}

/// Yields from a green thread to the next runnable one (see the crate docs for the order);
/// outside a runtime, yields the OS thread.
///
/// Inlined into the caller on purpose: the common case is a run-queue rotation and one
/// context switch, and inlining it lets the caller's own prologue preserve the registers the
/// switch clobbers, once, instead of a call frame doing it on every yield.
#[inline(always)]
pub fn yield_now() {
    let c = carrier_ptr();
    if c.is_null() {
        yield_outside_runtime();
        return;
    }
    // The count this thread runs with, set back with one store at the end whatever happened
    // in between (by the switch itself when there is one).
    let count = preempt::raise();
    // SAFETY: CARRIER is set, so this is the carrier thread; the count is raised.
    unsafe {
        let c = &*c;
        let l = c.local();
        let cur = (*l).current;
        // Remote work (inbox) and requests are seen when the countdown runs out; `queue`
        // cuts it short (see `POLL_EVERY`). A yield from the scheduler context (a callback,
        // or a destructor the runtime runs for a finished thread) is a no-op: the rotation
        // gives the scheduler pseudo-thread back (`sched::NEVER_QUEUED`), and so does the
        // slow path.
        (*l).poll_countdown -= 1;
        if (*l).poll_countdown == 0 || std::thread::panicking() {
            yield_slow(c);
        } else {
            // A running thread is already `Runnable` (see `RunState`). The usual case, a
            // queue of threads of the yielding one's level, rotates and switches without a
            // look at floating-point environments (`RunQueue::is_uniform_at`); every other
            // case goes out of line, so that this one falls through.
            if (*l).runq.is_uniform_at((*cur).level_key) {
                let next = (*l).runq.rotate_uniform(cur);
                switch_uniform(c, l, cur, next, count);
                return;
            }
            let next = (*l).runq.rotate_slow(cur);
            if next != cur {
                switch_setting_count(c, l, cur, next, count);
                return;
            }
            // Out of line, so that the switch falls through.
            stay(c, cur);
        }
    }
    preempt::restore(count);
}

/// A yield that found nothing else runnable.
///
/// # Safety
/// As `resume_without_switch`.
#[cold]
#[inline(never)]
unsafe fn stay(c: &Carrier, cur: *mut Thread) {
    // SAFETY: forwarded contract.
    unsafe { resume_without_switch(c, cur) }
}

#[cold]
#[inline(never)]
fn yield_outside_runtime() {
    std::thread::yield_now();
}

/// Every yield that is not a plain rotation: the scheduler context or an unwinding OS thread
/// (no-ops: another green thread would see this OS thread's `panicking()`), a poll of the inbox
/// and sleepers, pending `synchronize`/`queue` requests.
///
/// # Safety
/// Carrier thread, count raised.
#[cold]
#[inline(never)]
unsafe fn yield_slow(c: &Carrier) {
    // SAFETY: carrier thread, count raised (caller).
    unsafe {
        let l = c.local();
        let cur = (*l).current;
        let poll_due = (*l).poll_countdown == 0 || c.inbox_flag.load(Ordering::Relaxed);
        if cur == (*l).sched || std::thread::panicking() {
            if (*l).poll_countdown == 0 {
                // The scheduler polls in its own loop; an unwinding thread polls later.
                (*l).poll_countdown = POLL_EVERY;
            }
            return;
        }
        if poll_due {
            poll(c, &mut *l);
        }
        let next = if (*l).requests.is_empty() {
            (*l).runq.rotate(cur)
        } else {
            (*l).runq.push(cur);
            (*l).sched
        };
        if next == cur {
            resume_without_switch(c, cur);
            return;
        }
        switch_to(c, l, cur, next, false);
    }
}

/// A deferred preemption is being taken at a safe point.
pub(crate) fn yield_for_preemption() {
    let c = carrier_ptr();
    if c.is_null() {
        return;
    }
    // SAFETY: carrier thread.
    unsafe {
        let cur = (*(*c).local()).current;
        if cur == (*(*c).local()).sched || (*cur).mode != Mode::Preemptive {
            return;
        }
        bump(&(*c).stats.pending_preemptions_taken);
    }
    yield_now();
}

/// Puts the running green thread to sleep for `d` (at least). Outside a green thread, sleeps
/// the OS thread.
pub fn sleep(d: Duration) {
    match context() {
        Context::Green(cur) => {
            let deadline = Instant::now() + d;
            let c = carrier_ptr();
            preempt::disable();
            // SAFETY: green thread on its carrier, count raised.
            unsafe {
                let l = &mut *(*c).local();
                l.timers.insert(deadline, Waiter::Sleep(cur));
                (*cur).state.set(RunState::Sleeping);
                let next = next_for_block(&*c, l);
                if next != cur {
                    switch_to(&*c, l, cur, next, false);
                }
            }
            preempt::enable();
        }
        _ => std::thread::sleep(d),
    }
}

/// The error of a wait whose deadline passed.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "uthread: the deadline passed before the descriptor was ready",
    )
}

/// Waits until the descriptor of `pd` may be ready for `dir`, or `deadline` passes. `Ok(())`
/// means "retry the call that returned `EAGAIN`" (which may find it not ready again: then wait
/// again). Fails with `TimedOut` at the deadline, with `ConnectionAborted` when the descriptor
/// is shut down (that direction) or closed meanwhile.
///
/// A green thread parks (`register`: after registering `pd` with its carrier's poller, once
/// per carrier); any other caller (an OS thread outside every runtime, a `synchronize`
/// callback) blocks its OS thread in `poll(2)`.
pub(crate) fn wait_io(
    pd: &'static PollDesc,
    dir: Dir,
    deadline: Option<Instant>,
    register: bool,
) -> io::Result<()> {
    match context() {
        Context::Green(cur) => {
            let c = carrier_ptr();
            preempt::disable();
            // SAFETY: a green thread runs on its carrier (CARRIER is set), count raised.
            let r = unsafe { park_io(&*c, cur, pd, dir, deadline, register) };
            preempt::enable();
            match r {
                Err(Parked::Other) => {
                    // Another green thread already waits on this direction (two readers of one
                    // stream): take turns by polling, rarely; the caller retries its call.
                    sleep(Duration::from_micros(500));
                    Ok(())
                }
                Err(Parked::Failed(e)) => Err(e),
                Ok(()) => Ok(()),
            }
        }
        _ => {
            if pd.closed_for(dir) {
                return Err(closed_error());
            }
            if !poll_blocking(pd.fd(), dir, deadline)? {
                return Err(timed_out());
            }
            if pd.closed_for(dir) {
                return Err(closed_error());
            }
            Ok(())
        }
    }
}

/// Why a park did not end in "retry the call".
enum Parked {
    Failed(io::Error),
    /// The slot holds another thread.
    Other,
}

impl From<io::Error> for Parked {
    fn from(e: io::Error) -> Parked {
        Parked::Failed(e)
    }
}

/// The protocol of `poll::desc` (steps 2 to 4) for the running green thread `cur`.
///
/// # Safety
/// `cur` is the running green thread of carrier `c`, on `c`'s OS thread, count raised.
unsafe fn park_io(
    c: &Carrier,
    cur: *mut Thread,
    pd: &'static PollDesc,
    dir: Dir,
    deadline: Option<Instant>,
    register: bool,
) -> Result<(), Parked> {
    if register {
        let poller = c
            .poller()
            .ok_or_else(|| io::Error::other("uthread: the runtime has no poller"))?;
        pd.register(poller)?;
    }
    loop {
        if pd.take_ready(dir) {
            return Ok(());
        }
        if pd.closed_for(dir) {
            return Err(closed_error().into());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timed_out().into());
        }
        race::pause(RacePoint::ParkBeforeSlot);
        match pd.prepare_park(dir, cur) {
            Ok(()) => break,
            Err(READY) => continue,
            Err(_) => return Err(Parked::Other),
        }
    }
    // A shutdown between our look at the flags and our entering the slot may have found the
    // slot empty: look again now that we are in it (both sides use SeqCst, see `PollDesc::shut`).
    if pd.closed_for(dir) && pd.cancel_park(dir, cur) {
        return Err(closed_error().into());
    }
    // SAFETY: carrier thread, count raised (caller); `cur` is live (it is running).
    unsafe {
        let l = &mut *c.local();
        let key = deadline.map(|d| {
            l.timers.insert(
                d,
                Waiter::Io {
                    thread: cur,
                    pd,
                    dir,
                },
            )
        });
        (*cur).io_wait.set(pd as *const PollDesc as *const ());
        l.io_waiters += 1;
        bump(&c.stats.io_waits);
        // We are in the slot: whoever takes us out wakes us, exactly once.
        block_current();
        let l = &mut *c.local();
        l.io_waiters -= 1;
        (*cur).io_wait.set(core::ptr::null());
        if let Some(k) = key {
            l.timers.remove(k);
        }
    }
    let ready = pd.finish_park(dir);
    // A shutdown wins over readiness: the kernel reports the shut-down direction as ready
    // (end of stream) too, and may do so before the shutdown's own wake-up arrives.
    if pd.closed_for(dir) {
        return Err(closed_error().into());
    }
    if ready {
        return Ok(());
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(timed_out().into());
    }
    Ok(())
}

/// Runs `f` on the runtime owner's context (the OS thread that called `block_on`, on its own
/// stack, outside any green thread) and waits for its result; other green threads keep running
/// meanwhile. A panic in `f` is re-raised in the caller. Outside a green thread `f` simply runs
/// here. `f` must not block on uthread primitives (it does not run in a green thread).
pub fn synchronize<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    let Context::Green(cur) = context() else {
        return f();
    };
    struct Call<F, R> {
        f: Option<F>,
        result: Option<std::thread::Result<R>>,
        waiter: *mut Thread,
    }
    unsafe fn run<F: FnOnce() -> R, R>(p: *mut ()) {
        // SAFETY: `p` points to the `Call` on the blocked caller's stack, which stays put until
        // the caller is woken below.
        let call = unsafe { &mut *(p as *mut Call<F, R>) };
        if let Some(f) = call.f.take() {
            call.result = Some(catch_unwind(AssertUnwindSafe(f)));
        }
        wake(call.waiter);
    }
    let mut call = Call {
        f: Some(f),
        result: None,
        waiter: cur,
    };
    let c = carrier_ptr();
    preempt::disable();
    // SAFETY: green thread on its carrier, count raised; `call` outlives the request because we
    // block until `run` wakes us (the scheduler serves every request before shutting down).
    unsafe {
        let l = &mut *(*c).local();
        l.requests.push_back(Request {
            call: run::<F, R>,
            data: &mut call as *mut Call<F, R> as *mut (),
        });
        bump(&(*c).stats.synchronize_calls);
        block_current();
    }
    preempt::enable();
    match call.result {
        Some(Ok(r)) => r,
        Some(Err(p)) => resume_unwind(p),
        None => unreachable!("uthread: synchronize request was not served"),
    }
}

/// Queues `f` to run later on the runtime owner's context (like Delphi's `TThread.Queue`) and
/// returns at once. Requests run in FIFO order, before the runtime idles or shuts down. A panic
/// in `f` is caught and discarded. Outside any runtime, `f` runs immediately.
pub fn queue<F>(f: F)
where
    F: FnOnce() + 'static,
{
    let c = carrier_ptr();
    if c.is_null() {
        f();
        return;
    }
    unsafe fn run<F: FnOnce()>(p: *mut ()) {
        // SAFETY: `p` came from Box::into_raw(Box<F>) below.
        let f = unsafe { Box::from_raw(p as *mut F) };
        let _ = catch_unwind(AssertUnwindSafe(*f));
    }
    let data = Box::into_raw(Box::new(f)) as *mut ();
    preempt::disable();
    // SAFETY: carrier thread, count raised.
    unsafe {
        let l = &mut *(*c).local();
        l.requests.push_back(Request {
            call: run::<F>,
            data,
        });
        // Serve it at the next yield rather than after up to POLL_EVERY of them.
        l.poll_countdown = 1;
        bump(&(*c).stats.queue_calls);
    }
    preempt::enable();
}

/// Waits until thread `t` is done (green: block; OS thread: futex). Starts it first if it is
/// still suspended.
pub(crate) fn wait_done(t: *mut Thread) {
    // SAFETY: the caller (a JoinHandle, consumed by join) holds a reference to `t`.
    let th = unsafe { &*t };
    let lw = &th.life;
    let cur = lw.load(Ordering::Acquire);
    if cur & life::STATE == life::DONE {
        return;
    }
    if cur & life::STATE == life::SUSPENDED && th.leave_suspended(false) {
        wake(t);
    }
    match context() {
        Context::Green(cur) => {
            preempt::disable();
            th.joiner.set(cur);
            // SAFETY: `cur` is the running green thread of this carrier (live).
            let same_carrier = unsafe { !th.stealable && (*cur).carrier.get() == th.carrier.get() };
            let done = if same_carrier {
                // `t` cannot run while we do (one carrier) and `join` owns the handle: no
                // other writer exists, so no locked instruction is needed.
                let v = lw.load(Ordering::Relaxed);
                if v & life::STATE != life::DONE {
                    lw.store(v | life::JOINER, Ordering::Relaxed);
                }
                v & life::STATE == life::DONE
            } else {
                let v = lw.fetch_or(life::JOINER, Ordering::AcqRel);
                race::pause(RacePoint::JoinAfterRegister);
                v & life::STATE == life::DONE
            };
            // Registered while `t` was not done: exactly one wake-up is on its way (from
            // exit_current, finish_zombie or abandon_all), so block at least once to take it,
            // even if DONE is already visible. Returning without blocking would leave that
            // wake-up to hit this thread later, while it waits for something else (a mutex
            // or semaphore would then return without the hand-off). The wake cannot be
            // consumed before we are Blocked: the carrier takes remote wake-ups only inside
            // the runtime, and the count is raised until block_current marks us.
            if !done {
                // SAFETY: `cur` runs on its carrier (this OS thread, inside block_on), whose
                // local state only this thread touches, with the count raised.
                let local = unsafe { (*Carrier::at((*cur).carrier.get())).local() };
                if !same_carrier {
                    // SAFETY: as above.
                    unsafe { (*local).remote_joins += 1 };
                }
                loop {
                    // SAFETY: registered as joiner; whoever finishes `t` wakes us.
                    unsafe { block_current() };
                    if lw.load(Ordering::Acquire) & life::STATE == life::DONE {
                        break;
                    }
                }
                if !same_carrier {
                    // SAFETY: as above.
                    unsafe { (*local).remote_joins -= 1 };
                }
            }
            preempt::enable();
        }
        Context::Scheduler => {
            if lw.load(Ordering::Acquire) & life::STATE != life::DONE {
                panic!(
                    "uthread: join() inside a synchronize()/queue() callback would deadlock: \
                     callbacks run on the scheduler, not in a green thread"
                );
            }
        }
        Context::Outside => {
            let mut v = lw.fetch_or(life::OS_JOINER, Ordering::AcqRel) | life::OS_JOINER;
            while v & life::STATE != life::DONE {
                sys::futex_wait(lw, v, Some(Duration::from_millis(100)));
                v = lw.load(Ordering::Acquire);
            }
        }
    }
}

/// Runs `f` while the calling green thread's runtime counts one wake-up that is sure to come
/// from another OS thread (so that blocking meanwhile is not taken for a deadlock). Outside a
/// green thread, just runs `f`.
pub(crate) fn with_remote_wake_expected<R>(f: impl FnOnce() -> R) -> R {
    let Context::Green(cur) = context() else {
        return f();
    };
    // SAFETY: `cur` runs on its carrier, this OS thread; its local state is touched with the
    // count raised, and the thread never migrates, so the same carrier is there afterwards.
    let local = unsafe { (*Carrier::at((*cur).carrier.get())).local() };
    preempt::disable();
    // SAFETY: as above.
    unsafe { (*local).remote_joins += 1 };
    preempt::enable();
    let r = f();
    preempt::disable();
    // SAFETY: as above.
    unsafe { (*local).remote_joins -= 1 };
    preempt::enable();
    r
}

/// Counters of the runtime the caller runs in, or `None` outside a runtime.
pub fn stats() -> Option<Stats> {
    let c = carrier_ptr();
    if c.is_null() {
        return None;
    }
    // SAFETY: carrier alive while CARRIER is set.
    Some(unsafe { (*c).stats_snapshot() })
}

/// Name of the running green thread (`None` if unnamed or not in a green thread).
pub fn current_name() -> Option<String> {
    match context() {
        // SAFETY: the running thread is live.
        Context::Green(t) => unsafe { (*t).name.clone() },
        _ => None,
    }
}

/// Id of the running green thread (`None` outside green threads).
pub fn current_id() -> Option<u64> {
    match context() {
        // SAFETY: the running thread is live.
        Context::Green(t) => Some(unsafe { (*t).id }),
        _ => None,
    }
}
