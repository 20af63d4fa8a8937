//! The carrier: one OS thread (the caller of `block_on`) multiplexing green threads (M:1).
//!
//! Green threads switch directly to one another (one `switch` per yield). The OS thread's own
//! stack runs the *scheduler context*, entered only to idle (nothing runnable), to service
//! `synchronize`/`queue` requests (so they run on the runtime owner's stack, outside any green
//! thread), and to shut down.

use crate::arch;
use crate::guard::{self, AltStack};
use crate::preempt::{self, Timer, CARRIER};
use crate::race::{self, RacePoint};
use crate::sched::RunQueue;
use crate::stack::{self, Stack, StackPool};
use crate::thread::{self, life, Builder, JoinOutcome, Mode, RunState, Thread};
use std::cell::UnsafeCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Increments a counter that only this OS thread writes (plain load + store: no locked
/// instruction, and safe against our own signal handler which restores what it changes).
#[inline(always)]
pub(crate) fn bump(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

#[derive(Default)]
pub(crate) struct StatCounters {
    pub(crate) context_switches: AtomicU64,
    pub(crate) preemptions: AtomicU64,
    pub(crate) deferred_preemptions: AtomicU64,
    pub(crate) pending_preemptions_taken: AtomicU64,
    pub(crate) timer_ticks: AtomicU64,
    pub(crate) threads_spawned: AtomicU64,
    pub(crate) threads_finished: AtomicU64,
    pub(crate) synchronize_calls: AtomicU64,
    pub(crate) queue_calls: AtomicU64,
    pub(crate) stacks_mapped: AtomicU64,
}

/// Counters of one runtime, accumulated over all its `block_on` calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Green-to-green (or green-to-scheduler) context switches.
    pub context_switches: u64,
    /// Switches made from the timer signal handler (true preemptions).
    pub preemptions: u64,
    /// Timer ticks that found a preemptive thread over its quantum but could not switch (inside
    /// a critical section, the runtime, the allocator, or no `PreemptSafeAlloc`).
    pub deferred_preemptions: u64,
    /// Deferred preemptions later taken at a safe point.
    pub pending_preemptions_taken: u64,
    /// Timer signals received.
    pub timer_ticks: u64,
    /// Green threads spawned (including each `block_on`'s main thread).
    pub threads_spawned: u64,
    /// Green threads that finished (including panicked and cancelled ones).
    pub threads_finished: u64,
    /// `synchronize` requests served.
    pub synchronize_calls: u64,
    /// `queue` requests served.
    pub queue_calls: u64,
    /// Stacks freshly mapped (the others came from the pool).
    pub stacks_mapped: u64,
    /// Stacks currently in the pool.
    pub stacks_pooled: u64,
}

impl StatCounters {
    fn snapshot(&self) -> Stats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            context_switches: l(&self.context_switches),
            preemptions: l(&self.preemptions),
            deferred_preemptions: l(&self.deferred_preemptions),
            pending_preemptions_taken: l(&self.pending_preemptions_taken),
            timer_ticks: l(&self.timer_ticks),
            threads_spawned: l(&self.threads_spawned),
            threads_finished: l(&self.threads_finished),
            synchronize_calls: l(&self.synchronize_calls),
            queue_calls: l(&self.queue_calls),
            stacks_mapped: l(&self.stacks_mapped),
            stacks_pooled: 0,
        }
    }
}

#[derive(Clone, Debug)]
struct Config {
    quantum: Duration,
    guard_pages: bool,
    stack_size: usize,
    main_stack_size: usize,
    pool_max: usize,
}

/// A unit of work for the scheduler context (`synchronize`, `queue`, remote calls).
struct Request {
    call: unsafe fn(*mut ()),
    data: *mut (),
}

enum Remote {
    Wake(*mut Thread),
    Call(Box<dyn FnOnce() + Send>),
}

// SAFETY: `Wake` carries a thread pointer that is only dereferenced by the owning carrier
// (threads are live while blocked); `Call` is Send by its bound.
unsafe impl Send for Remote {}

/// Carrier-local state: only the OS thread currently inside `block_on` touches it, and only with
/// the preempt count raised (or from the tick handler when it was zero).
struct Local {
    current: *mut Thread,
    sched: *mut Thread,
    runq: RunQueue,
    sleepers: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    sleep_seq: u64,
    zombie: *mut Thread,
    /// Something for the next resumed context to do (a zombie to finish, the signal mask to
    /// unblock): one flag so that the common switch checks one byte.
    resume_work: bool,
    /// `exit_current` already made the zombie's (same-carrier) joiner runnable.
    zombie_joiner_woken: bool,
    /// The OS thread's signal mask still blocks the tick because a switch was made inside the
    /// handler; the next context resumed outside a handler must unblock it.
    sig_blocked: bool,
    requests: VecDeque<Request>,
    pool: StackPool,
    all_head: *mut Thread,
    alive: usize,
    preemptive_alive: usize,
    /// Green threads of this carrier blocked joining a thread of another runtime: that runtime
    /// is inside `block_on` (a thread not done always is) and will finish or abandon the
    /// thread, waking the joiner, so these waits are not a deadlock.
    remote_joins: usize,
    errno: *mut libc::c_int,
    poll_countdown: u32,
    timer: Option<Timer>,
    timer_armed: bool,
    timer_error: bool,
    id_next: u64,
    id_end: u64,
    /// Some thread was abandoned: the carrier must never be freed (see `Thread::carrier`).
    abandoned_any: bool,
}

pub(crate) struct Carrier {
    local: UnsafeCell<Local>,
    inbox: Mutex<Vec<Remote>>,
    inbox_flag: AtomicBool,
    futex: AtomicU32,
    handles: AtomicUsize,
    running: AtomicBool,
    pub(crate) ticks: AtomicU64,
    pub(crate) stats: StatCounters,
    config: Config,
}

// SAFETY: `local` is only accessed by the OS thread that is inside `block_on` for this carrier
// (enforced by the CARRIER thread-local being set only there); everything else is atomics or a
// Mutex.
unsafe impl Sync for Carrier {}
// SAFETY: as above; the raw pointers in `local` are owned by the carrier.
unsafe impl Send for Carrier {}

static NEXT_THREAD_ID: AtomicU64 = AtomicU64::new(1);

/// Yields between two polls of the inbox (remote wake-ups, `Handle` calls) and the sleepers.
/// A thread that blocks or sleeps polls at once; one that only yields sees remote work within
/// this many yields of the carrier.
const POLL_EVERY: u32 = 64;
const ID_BLOCK: u64 = 1024;

/// The carrier of the calling OS thread, if it is inside `block_on`. The reference is only
/// used on this OS thread while `block_on` runs (it is not `'static` in truth; callers never
/// keep it past the current runtime call).
#[inline]
pub(crate) fn current_carrier_ref<'a>() -> Option<&'a Carrier> {
    let c = CARRIER.with(|c| c.get());
    // SAFETY: CARRIER points into an Arc<Carrier> kept alive by the running block_on.
    unsafe { c.as_ref() }
}

#[inline(always)]
fn carrier_ptr() -> *const Carrier {
    CARRIER.with(|c| c.get())
}

impl Carrier {
    #[inline(always)]
    fn local(&self) -> *mut Local {
        self.local.get()
    }

    /// A stack for a new thread with `reserve` extra bytes on top for its control block, and
    /// a process-unique id. Ids come from the global counter in blocks, so that spawning costs
    /// no atomic read-modify-write.
    ///
    /// # Safety
    /// On this carrier's thread, count raised.
    #[inline]
    pub(crate) unsafe fn take_stack(
        &self,
        size: Option<usize>,
        reserve: usize,
    ) -> io::Result<(Stack, u64)> {
        let size = stack::round_stack_size(size.unwrap_or(self.config.stack_size));
        let mapping = size.saturating_add(reserve);
        // SAFETY: forwarded contract.
        unsafe {
            let l = &mut *self.local();
            match l.pool.get(mapping, self.config.guard_pages) {
                Ok((stack, fresh)) => {
                    if fresh {
                        bump(&self.stats.stacks_mapped);
                    }
                    if l.id_next == l.id_end {
                        l.id_next = NEXT_THREAD_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
                        l.id_end = l.id_next + ID_BLOCK;
                    }
                    l.id_next += 1;
                    Ok((stack, l.id_next - 1))
                }
                Err(e) => Err(e),
            }
        }
    }

    /// Registers a freshly built thread and makes it runnable (or leaves it suspended).
    ///
    /// # Safety
    /// `t` is a new, fully initialised thread of this carrier in no queue; called on the carrier
    /// with the count raised.
    #[inline]
    pub(crate) unsafe fn adopt(&self, t: *mut Thread, suspended: bool) {
        // SAFETY: carrier thread with the count raised; `t` is live and unlinked.
        unsafe {
            let l = &mut *self.local();
            (*t).all_next.set(l.all_head);
            if !l.all_head.is_null() {
                (*l.all_head).all_prev.set(t);
            }
            l.all_head = t;
            l.alive += 1;
            if (*t).mode == Mode::Preemptive {
                l.preemptive_alive += 1;
                self.ensure_timer(l);
            }
            bump(&self.stats.threads_spawned);
            if suspended {
                (*t).state.set(RunState::Blocked);
            } else {
                (*t).state.set(RunState::Runnable);
                l.runq.push(t);
            }
        }
    }

    fn ensure_timer(&self, l: &mut Local) {
        if l.timer_armed || l.timer_error {
            return;
        }
        if l.timer.is_none() {
            match Timer::for_current_thread(self.config.quantum) {
                Ok(t) => l.timer = Some(t),
                Err(e) => {
                    // Preemption degrades to cooperative; say so once.
                    l.timer_error = true;
                    eprintln!("uthread: cannot create the preemption timer ({e}); preemptive threads will run cooperatively");
                    return;
                }
            }
        }
        if let Some(t) = &l.timer {
            t.arm(true);
            l.timer_armed = true;
        }
    }

    fn disarm_timer(l: &mut Local) {
        if l.timer_armed {
            if let Some(t) = &l.timer {
                t.arm(false);
            }
            l.timer_armed = false;
        }
    }

    fn push_remote(&self, r: Remote) {
        match self.inbox.lock() {
            Ok(mut g) => g.push(r),
            Err(p) => p.into_inner().push(r),
        }
        self.inbox_flag.store(true, Ordering::SeqCst);
        self.futex.store(1, Ordering::SeqCst);
        futex_wake(&self.futex, 1);
    }
}

fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned u32; no memory is written.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(thread::timespec);
    let tsp = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a valid, aligned u32 with an optional relative timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            tsp,
        );
    }
}

/// Takes back the stack of a freed thread: into `carrier`'s pool when called on that carrier
/// (inside its `block_on`), else unmapped (any OS thread may drop the last handle).
pub(crate) fn recycle_stack(carrier: *const Carrier, stack: Stack) {
    if !std::ptr::eq(carrier_ptr(), carrier) {
        drop(stack);
        return;
    }
    preempt::disable();
    // SAFETY: CARRIER == carrier: we are its carrier thread, inside block_on, count raised.
    unsafe { (*(*carrier).local()).pool.put(stack) };
    preempt::enable_no_yield();
}

// ---------------------------------------------------------------------------------------------
// Queue maintenance (all with the preempt count raised, on the carrier thread)
// ---------------------------------------------------------------------------------------------

/// # Safety
/// Carrier thread, count raised, `t` a live thread of this carrier.
unsafe fn make_runnable(l: &mut Local, t: *mut Thread) {
    // SAFETY: forwarded contract.
    unsafe {
        if (*t).state.get() == RunState::Blocked {
            (*t).state.set(RunState::Runnable);
            l.runq.push(t);
        }
    }
}

/// Drains the inbox and wakes due sleepers.
///
/// # Safety
/// Carrier thread, count raised.
unsafe fn poll(c: &Carrier, l: &mut Local) {
    l.poll_countdown = POLL_EVERY;
    if c.inbox_flag.load(Ordering::Acquire) {
        c.inbox_flag.store(false, Ordering::SeqCst);
        let items = match c.inbox.lock() {
            Ok(mut g) => std::mem::take(&mut *g),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        for r in items {
            match r {
                // SAFETY: threads in the inbox are blocked threads of this carrier (live).
                Remote::Wake(t) => unsafe { make_runnable(l, t) },
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
    if !l.sleepers.is_empty() {
        let now = Instant::now();
        while let Some(Reverse((when, _, t))) = l.sleepers.peek().copied() {
            if when > now {
                break;
            }
            l.sleepers.pop();
            let t = t as *mut Thread;
            // SAFETY: sleeping threads are live threads of this carrier.
            unsafe {
                if (*t).state.get() == RunState::Sleeping {
                    (*t).state.set(RunState::Runnable);
                    l.runq.push(t);
                }
            }
        }
    }
}

unsafe fn run_remote_call(data: *mut ()) {
    // SAFETY: `data` came from Box::into_raw(Box<Box<dyn FnOnce() + Send>>) in `poll`.
    let f = unsafe { Box::from_raw(data as *mut Box<dyn FnOnce() + Send>) };
    let _ = catch_unwind(AssertUnwindSafe(f));
}

#[inline(always)]
unsafe fn poll_maybe(c: &Carrier, l: &mut Local) {
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
unsafe fn next_for_block(c: &Carrier, l: &mut Local) -> *mut Thread {
    // SAFETY: forwarded contract.
    unsafe { poll_maybe(c, l) };
    if !l.requests.is_empty() {
        return l.sched;
    }
    // SAFETY: queued threads are live.
    let t = unsafe { l.runq.pop() };
    if t.is_null() {
        l.sched
    } else {
        t
    }
}

/// Switches from `cur` (the running context) to `next` and returns when `cur` is resumed.
///
/// # Safety
/// Carrier thread, count raised, `cur == l.current`, `next` live, suspended and not `cur`.
#[inline(always)]
unsafe fn switch_to(
    c: &Carrier,
    l: *mut Local,
    cur: *mut Thread,
    next: *mut Thread,
    in_handler: bool,
) {
    // SAFETY: forwarded contract; `l` stays valid (the carrier outlives every switch).
    unsafe {
        let errno = (*l).errno;
        let saved_errno = *errno;
        let saved_count = preempt::count();
        (*next).state.set(RunState::Running);
        // Only the tick handler reads `start_tick`, and only for preemptive threads (`mode` is
        // immutable), so cooperative threads skip the load and store.
        if (*next).mode == Mode::Preemptive {
            (*next).start_tick.set(c.ticks.load(Ordering::Relaxed));
        }
        (*l).current = next;
        preempt::clear_pending();
        bump(&c.stats.context_switches);
        arch::switch((*cur).sp.get(), *(*next).sp.get());
        // ---- resumed as `cur` ----
        after_resume(l, in_handler);
        preempt::set_count(saved_count);
        *errno = saved_errno;
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
            preempt::unblock_signal();
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
            Thread::free(z);
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
            futex_wake(lw, i32::MAX);
        }
        if lw.fetch_or(life::REAPED, Ordering::AcqRel) & life::HANDLE_GONE != 0 {
            Thread::free(z);
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
        (*t).all_prev.set(null_mut());
        (*t).all_next.set(null_mut());
    }
}

// ---------------------------------------------------------------------------------------------
// Entry and exit of green threads
// ---------------------------------------------------------------------------------------------

/// First Rust code of every green thread (called by the arch start stub).
pub(crate) unsafe extern "C" fn thread_entry(arg: usize) -> ! {
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
unsafe fn exit_current(c: &Carrier, t: *mut Thread) -> ! {
    preempt::set_count(1);
    // SAFETY: `t` is the running thread of carrier `c` (we are on its stack).
    unsafe {
        let l = c.local();
        if (*t).life.load(Ordering::Acquire) & life::JOINER != 0 {
            let j = (*t).joiner.get();
            if std::ptr::eq((*j).carrier, c) {
                make_runnable(&mut *l, j);
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
        let next = next_for_block(c, &mut *l);
        // The next context finishes us in after_resume; we never come back.
        switch_to(c, l, t, next, false);
    }
    // SAFETY: unreachable: nothing ever switches back to an exited thread.
    unsafe { libc::abort() }
}

// ---------------------------------------------------------------------------------------------
// Operations used by the public API
// ---------------------------------------------------------------------------------------------

/// Makes a blocked (or suspended) thread runnable, wherever its carrier is.
pub(crate) fn wake(t: *mut Thread) {
    preempt::disable();
    let here = carrier_ptr();
    // SAFETY: `t` is live (blocked threads are owned by their carrier; callers hold it).
    unsafe {
        let tc = (*t).carrier;
        if here == tc {
            make_runnable(&mut *(*here).local(), t);
        } else {
            (*tc).push_remote(Remote::Wake(t));
        }
    }
    preempt::enable();
}

/// What the caller is: a green thread, the scheduler context, or an OS thread outside any runtime.
pub(crate) enum Context {
    Green(*mut Thread),
    Scheduler,
    Outside,
}

pub(crate) fn context() -> Context {
    let c = carrier_ptr();
    if c.is_null() {
        return Context::Outside;
    }
    // SAFETY: CARRIER set means we are its carrier thread; reading `current` is a plain load of
    // a field only this thread writes.
    unsafe {
        let l = (*c).local();
        let cur = (*l).current;
        if cur == (*l).sched {
            Context::Scheduler
        } else {
            Context::Green(cur)
        }
    }
}

/// Blocks the running green thread until someone calls `wake` on it.
///
/// # Safety
/// Called from a green thread (not the scheduler) with the count raised, after the thread was
/// registered somewhere a waker will find it.
pub(crate) unsafe fn block_current() {
    let c = carrier_ptr();
    // SAFETY: green thread => CARRIER is set; count is raised (caller).
    unsafe {
        let c = &*c;
        let l = c.local();
        let cur = (*l).current;
        (*cur).state.set(RunState::Blocked);
        let next = next_for_block(c, &mut *l);
        if next == cur {
            (*cur).state.set(RunState::Running);
            return;
        }
        switch_to(c, l, cur, next, false);
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
    preempt::disable();
    // SAFETY: CARRIER is set, so this is the carrier thread; the count is raised.
    unsafe {
        let c = &*c;
        let l = c.local();
        let cur = (*l).current;
        // Remote work (inbox) and requests are seen when the countdown runs out; `queue`
        // cuts it short (see `POLL_EVERY`). A yield from the scheduler context (a callback,
        // or a destructor the runtime runs for a finished thread) is a no-op on the slow path.
        (*l).poll_countdown -= 1;
        if cur == (*l).sched || (*l).poll_countdown == 0 || std::thread::panicking() {
            yield_slow(c);
        } else {
            debug_assert!(cur != (*l).sched);
            (*cur).state.set(RunState::Runnable);
            let next = (*l).runq.rotate(cur);
            if next == cur {
                resume_without_switch(c, cur);
            } else {
                switch_to(c, l, cur, next, false);
            }
        }
    }
    preempt::enable_no_yield();
}

#[cold]
#[inline(never)]
fn yield_outside_runtime() {
    std::thread::yield_now();
}

/// The running thread stays on the carrier: a yield found nothing else runnable.
///
/// # Safety
/// Carrier thread, count raised, `cur` the running green thread.
#[inline(always)]
unsafe fn resume_without_switch(c: &Carrier, cur: *mut Thread) {
    // SAFETY: forwarded contract.
    unsafe {
        (*cur).state.set(RunState::Running);
        (*cur).start_tick.set(c.ticks.load(Ordering::Relaxed));
    }
    preempt::clear_pending();
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
        (*cur).state.set(RunState::Runnable);
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

/// Scheduling facts the tick handler needs: `None` for the scheduler context.
///
/// # Safety
/// Carrier thread.
pub(crate) unsafe fn current_sched_info(c: &Carrier) -> Option<(Mode, u64)> {
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

pub(crate) struct StackInfo<'a> {
    pub(crate) guard: (usize, usize),
    pub(crate) name: &'a str,
    pub(crate) id: u64,
    pub(crate) stack_size: usize,
}

/// The running green thread's stack facts, for the overflow report.
///
/// # Safety
/// Carrier thread.
pub(crate) unsafe fn current_stack_info(c: &Carrier) -> Option<StackInfo<'_>> {
    // SAFETY: see current_sched_info.
    unsafe {
        let l = c.local();
        let cur = core::ptr::read_volatile(&(*l).current);
        if cur.is_null() || cur == (*l).sched {
            return None;
        }
        Some(StackInfo {
            guard: (*cur).stack.guard_range(),
            name: (*cur).display_name(),
            id: (*cur).id,
            stack_size: (*cur).usable_stack(),
        })
    }
}

/// Switches away from a preempted thread, inside the tick handler.
///
/// # Safety
/// Tick handler on the carrier thread, count was zero and is now raised, allocator wrapper
/// installed.
pub(crate) unsafe fn preempt_from_handler(c: &Carrier) {
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
            (*cur).state.set(RunState::Running);
            (*cur).start_tick.set(c.ticks.load(Ordering::Relaxed));
            return;
        }
        bump(&c.stats.preemptions);
        (*l).sig_blocked = true;
        (*l).resume_work = true;
        switch_to(c, l, cur, next, true);
    }
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
                l.sleep_seq += 1;
                l.sleepers
                    .push(Reverse((deadline, l.sleep_seq, cur as usize)));
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
            let same_carrier = unsafe { std::ptr::eq((*cur).carrier, th.carrier) };
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
                let local = unsafe { (*(*cur).carrier).local() };
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
                futex_wait(lw, v, Some(Duration::from_millis(100)));
                v = lw.load(Ordering::Acquire);
            }
        }
    }
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

impl Carrier {
    fn stats_snapshot(&self) -> Stats {
        let mut s = self.stats.snapshot();
        if !self.running.load(Ordering::Relaxed) || std::ptr::eq(carrier_ptr(), self) {
            preempt::disable();
            // SAFETY: either nobody runs this carrier (no concurrent access besides handles,
            // which do not touch `local`) or we are its carrier thread with the count raised.
            s.stacks_pooled = unsafe { (*self.local()).pool.pooled() } as u64;
            preempt::enable();
        }
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------

/// Errors of [`Runtime::try_block_on`].
#[derive(Debug)]
pub enum RunError {
    /// Every green thread was blocked with nothing sleeping and no [`Handle`] alive: the main
    /// closure could never finish.
    Deadlock,
    /// `block_on` was called from inside a runtime.
    Nested,
    /// Setting up the carrier failed (stack mapping, etc.).
    Io(io::Error),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Deadlock => f.write_str(
                "uthread: deadlock: every green thread is blocked, none is sleeping, and no \
                 Handle can wake one",
            ),
            RunError::Nested => f.write_str(
                "uthread: block_on called from inside a runtime; spawn a green thread instead",
            ),
            RunError::Io(e) => write!(f, "uthread: runtime setup failed: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// Configures a [`Runtime`].
#[derive(Clone, Debug)]
pub struct RuntimeBuilder {
    config: Config,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            config: Config {
                quantum: Duration::from_millis(3),
                guard_pages: true,
                stack_size: 256 * 1024,
                main_stack_size: 2 * 1024 * 1024,
                pool_max: 1024,
            },
        }
    }
}

impl RuntimeBuilder {
    /// Time slice of preemptive threads, 100 µs ..= 100 ms (default 3 ms, BeOS's quantum).
    pub fn quantum(mut self, q: Duration) -> Self {
        self.config.quantum = q;
        self
    }

    /// Whether stacks get a `PROT_NONE` guard page (default `true`). Each guarded stack costs
    /// two kernel mappings against `vm.max_map_count`.
    pub fn guard_pages(mut self, on: bool) -> Self {
        self.config.guard_pages = on;
        self
    }

    /// Default usable stack size of spawned threads (default 256 KiB, lazily committed).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.config.stack_size = bytes;
        self
    }

    /// Stack size of the green thread that runs the `block_on` closure (default 2 MiB).
    pub fn main_stack_size(mut self, bytes: usize) -> Self {
        self.config.main_stack_size = bytes;
        self
    }

    /// Maximum number of finished threads' stacks kept for reuse (default 1024).
    pub fn stack_pool(mut self, max_stacks: usize) -> Self {
        self.config.pool_max = max_stacks;
        self
    }

    /// Builds the runtime; fails on an out-of-range quantum.
    pub fn build(self) -> io::Result<Runtime> {
        let q = self.config.quantum;
        if q < Duration::from_micros(100) || q > Duration::from_millis(100) {
            return Err(thread::invalid("quantum must be between 100 µs and 100 ms"));
        }
        let seed = Instant::now().elapsed().as_nanos() as u64 ^ 0x9E37_79B9_7F4A_7C15;
        let carrier = Arc::new(Carrier {
            local: UnsafeCell::new(Local {
                current: null_mut(),
                sched: null_mut(),
                runq: RunQueue::new(seed),
                sleepers: BinaryHeap::new(),
                sleep_seq: 0,
                zombie: null_mut(),
                resume_work: false,
                zombie_joiner_woken: false,
                sig_blocked: false,
                requests: VecDeque::new(),
                pool: StackPool::new(self.config.pool_max),
                all_head: null_mut(),
                alive: 0,
                preemptive_alive: 0,
                remote_joins: 0,
                errno: null_mut(),
                poll_countdown: POLL_EVERY,
                timer: None,
                timer_armed: false,
                timer_error: false,
                id_next: 0,
                id_end: 0,
                abandoned_any: false,
            }),
            inbox: Mutex::new(Vec::new()),
            inbox_flag: AtomicBool::new(false),
            futex: AtomicU32::new(0),
            handles: AtomicUsize::new(0),
            running: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            stats: StatCounters::default(),
            config: self.config,
        });
        Ok(Runtime {
            carrier,
            _not_send: PhantomData,
        })
    }
}

/// An M:1 green-thread runtime: `block_on` turns the calling OS thread into the carrier.
/// Reusable: call `block_on` as often as needed; stacks stay pooled between calls.
pub struct Runtime {
    carrier: Arc<Carrier>,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.carrier.config)
            .finish()
    }
}

impl Runtime {
    /// A runtime with default settings.
    pub fn new() -> Runtime {
        match RuntimeBuilder::default().build() {
            Ok(rt) => rt,
            Err(e) => unreachable!("default configuration is valid: {e}"),
        }
    }

    /// Starts configuring a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Counters accumulated over all `block_on` calls.
    pub fn stats(&self) -> Stats {
        self.carrier.stats_snapshot()
    }

    /// A handle other OS threads can use to run code on this runtime's owner context.
    pub fn handle(&self) -> Handle {
        self.carrier.handles.fetch_add(1, Ordering::SeqCst);
        Handle {
            carrier: Arc::clone(&self.carrier),
        }
    }

    /// Runs `f` as the main green thread on the calling OS thread, scheduling every green
    /// thread until `f` has returned and all runnable or sleeping threads have finished.
    /// Threads still suspended then are cancelled; threads blocked forever are abandoned.
    ///
    /// # Panics
    /// Re-raises a panic of `f`; panics on deadlock or nesting (see [`try_block_on`]).
    ///
    /// [`try_block_on`]: Runtime::try_block_on
    pub fn block_on<F, R>(&self, f: F) -> R
    where
        F: FnOnce() -> R,
    {
        match self.try_block_on(f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`block_on`](Runtime::block_on) but reports deadlock, nesting and setup failures as
    /// errors. A panic of `f` is still re-raised.
    pub fn try_block_on<F, R>(&self, f: F) -> Result<R, RunError>
    where
        F: FnOnce() -> R,
    {
        if !carrier_ptr().is_null() {
            return Err(RunError::Nested);
        }
        preempt::install_handler();
        guard::install_handler();
        let _alt = AltStack::ensure();
        let c: &Carrier = &self.carrier;
        let saved_count = preempt::count();
        preempt::set_count(1);
        let mut sched = Box::new(Thread::scheduler(Arc::as_ptr(&self.carrier)));
        // SAFETY: no other OS thread is inside block_on for this carrier (Runtime is !Send and
        // !Sync, and nesting was refused above).
        unsafe {
            let l = &mut *c.local();
            l.sched = &mut *sched;
            l.current = l.sched;
            l.errno = libc::__errno_location();
            l.sig_blocked = false;
        }
        CARRIER.with(|p| p.set(Arc::as_ptr(&self.carrier)));
        c.running.store(true, Ordering::SeqCst);
        c.inbox_flag.store(true, Ordering::SeqCst); // pick up anything queued while stopped

        let main = thread::spawn_inner(
            &self.carrier,
            Builder::new()
                .name("main")
                .stack_size(c.config.main_stack_size),
            f,
        );
        let outcome = match main {
            Ok(main) => {
                // SAFETY: we are the carrier thread with the count raised, in the scheduler context.
                let deadlock = unsafe { self.schedule(&main) };
                // SAFETY: as above.
                unsafe { self.abandon_all(&mut *c.local()) };
                // Joined here, on the carrier, so that the main stack goes back to the pool.
                let joined = main.join();
                if deadlock {
                    Err(RunError::Deadlock)
                } else {
                    Ok(joined)
                }
            }
            Err(e) => Err(RunError::Io(e)),
        };
        // ---- teardown ----
        // SAFETY: scheduler context on the carrier thread, count raised.
        unsafe {
            let l = &mut *c.local();
            self.abandon_all(l);
            Carrier::disarm_timer(l);
            l.timer = None;
            l.timer_error = false;
            l.current = null_mut();
            l.sched = null_mut();
        }
        c.running.store(false, Ordering::SeqCst);
        CARRIER.with(|p| p.set(core::ptr::null()));
        preempt::set_count(saved_count);
        preempt::clear_pending();
        drop(sched);
        match outcome {
            Ok(JoinOutcome::Finished(r)) => Ok(r),
            Ok(JoinOutcome::Panicked(p)) => resume_unwind(p),
            Ok(JoinOutcome::Cancelled | JoinOutcome::Abandoned) => Err(RunError::Deadlock),
            Err(e) => Err(e),
        }
    }

    /// The scheduler loop. Returns `true` on deadlock.
    unsafe fn schedule<T>(&self, main: &thread::JoinHandle<T>) -> bool {
        let c: &Carrier = &self.carrier;
        let l = c.local();
        // SAFETY: carrier thread, scheduler context, count raised throughout (user callbacks
        // run inside it; preemption never applies to the scheduler context).
        unsafe {
            loop {
                while let Some(req) = (*l).requests.pop_front() {
                    (req.call)(req.data);
                }
                poll(c, &mut *l);
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
                // Nothing runnable.
                if (*l).alive == 0 {
                    return false;
                }
                let main_done = main.is_finished();
                let sleeping = !(*l).sleepers.is_empty();
                if main_done && !sleeping && self.cancel_suspended(&mut *l) {
                    continue;
                }
                // Wake-ups that are sure to come: a join of another runtime's thread, or a
                // resume/cancel made on another OS thread whose wake-up has not arrived yet.
                // Waiting for them is neither the end nor a deadlock. (The all-list walk runs
                // only here, with nothing runnable and nothing sleeping.)
                let expected = (*l).remote_joins > 0 || (!sleeping && Self::wakes_in_flight(&*l));
                if main_done && !sleeping && !expected {
                    return false;
                }
                Carrier::disarm_timer(&mut *l);
                let timeout = (*l)
                    .sleepers
                    .peek()
                    .map(|Reverse((when, _, _))| when.saturating_duration_since(Instant::now()));
                if timeout.is_none() && c.handles.load(Ordering::SeqCst) == 0 && !expected {
                    return true; // blocked forever: deadlock (main is not done here)
                }
                c.futex.store(0, Ordering::SeqCst);
                if !c.inbox_flag.load(Ordering::SeqCst) && timeout != Some(Duration::ZERO) {
                    futex_wait(&c.futex, 0, timeout);
                }
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
    unsafe fn cancel_suspended(&self, l: &mut Local) -> bool {
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

    /// Marks every remaining (blocked-forever) thread abandoned and leaks it.
    unsafe fn abandon_all(&self, l: &mut Local) {
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
                let old = th.life.fetch_or(life::DONE, Ordering::AcqRel);
                if old & life::JOINER != 0 {
                    // Read after the RMW that observed JOINER (see finish_zombie).
                    let joiner = th.joiner.get();
                    if !std::ptr::eq((*joiner).carrier, th.carrier) {
                        wake(joiner);
                    }
                }
                if old & life::OS_JOINER != 0 {
                    futex_wake(&th.life, i32::MAX);
                }
                if th.mode == Mode::Preemptive {
                    l.preemptive_alive -= 1;
                }
                l.alive -= 1;
                t = next;
            }
            l.all_head = null_mut();
            l.runq = RunQueue::new(0x5EED);
            l.sleepers.clear();
            // Abandoned joiners never get to count themselves out.
            l.remote_joins = 0;
        }
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Unmap pooled stacks now (leaked threads may keep the carrier itself alive) and fail
        // pending remote requests (their senders drop, so `Handle::synchronize` returns Err).
        preempt::disable();
        // SAFETY: not running (block_on has returned), so nobody else touches `local`.
        unsafe {
            let l = &mut *self.carrier.local();
            l.pool = StackPool::new(0);
            l.requests.clear();
            if l.abandoned_any {
                // Abandoned threads point at the carrier and may still be "woken" by
                // primitives; keep it alive forever (a bounded leak, documented).
                std::mem::forget(Arc::clone(&self.carrier));
            }
        }
        preempt::enable();
        let items = match self.carrier.inbox.lock() {
            Ok(mut g) => std::mem::take(&mut *g),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        drop(items);
    }
}

/// Runs `f` on a fresh default runtime (see [`Runtime::block_on`]).
pub fn run<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    Runtime::new().block_on(f)
}

/// Lets other OS threads hand work to a runtime's owner context. While any `Handle` exists the
/// runtime waits for remote work instead of reporting a deadlock when all its threads block.
pub struct Handle {
    carrier: Arc<Carrier>,
}

impl Clone for Handle {
    fn clone(&self) -> Self {
        self.carrier.handles.fetch_add(1, Ordering::SeqCst);
        Handle {
            carrier: Arc::clone(&self.carrier),
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.carrier.handles.fetch_sub(1, Ordering::SeqCst);
        self.carrier.futex.store(1, Ordering::SeqCst);
        futex_wake(&self.carrier.futex, 1);
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Handle")
    }
}

/// The runtime was dropped before it ran the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("uthread: the runtime was dropped before running the request")
    }
}

impl std::error::Error for Closed {}

impl Handle {
    /// Queues `f` to run on the runtime owner's context (during the current or next `block_on`).
    pub fn queue<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.carrier.push_remote(Remote::Call(Box::new(f)));
    }

    /// Runs `f` on the runtime owner's context and waits for the result. Called from one of
    /// the runtime's own green threads it behaves like [`synchronize`].
    pub fn synchronize<F, R>(&self, f: F) -> Result<R, Closed>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        if carrier_ptr() == Arc::as_ptr(&self.carrier) {
            return Ok(synchronize(f));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.carrier.push_remote(Remote::Call(Box::new(move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r);
        })));
        match rx.recv() {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(p)) => resume_unwind(p),
            Err(_) => Err(Closed),
        }
    }
}
