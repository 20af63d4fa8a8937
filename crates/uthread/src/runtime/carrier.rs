//! The carrier: the state of one runtime, the carrier pointer that says which runtime the
//! calling OS thread is running (called `CARRIER` below; a word of the preempt count's
//! thread-local block, `preempt::count::carrier_word`), and the carrier's own bookkeeping that
//! never switches (stacks and ids for new threads, registering them, the timer, the inbox).
//!
//! `Local` is touched only by the OS thread inside `block_on` for this carrier, and only with
//! the preempt count raised (or from the tick handler when the count was zero): that is the
//! precondition the `unsafe fn`s of `runtime/` state as "carrier thread, count raised".

use super::stats::{bump, StatCounters, Stats};
use super::timers::Timers;
use crate::arch::FpEnv;
use crate::poll::poller::{Event, Poller, NO_EVENT};
use crate::preempt::count as preempt;
use crate::preempt::timer::Timer;
use crate::sched::{RunQueue, SharedQueue};
use crate::stack::{self, Stack, StackPool};
use crate::tcb::{CarrierAddr, Mode, RunState, Thread};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::io;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// A runtime's settings, fixed when it is built.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) quantum: Duration,
    pub(super) guard_pages: bool,
    pub(super) stack_size: usize,
    pub(super) main_stack_size: usize,
    pub(super) main_own_fp_env: bool,
    pub(super) pool_max: usize,
}

/// A unit of work for the scheduler context (`synchronize`, `queue`, remote calls).
pub(super) struct Request {
    pub(super) call: unsafe fn(*mut ()),
    pub(super) data: *mut (),
}

/// Work another OS thread hands to this carrier through its inbox.
pub(super) enum Remote {
    Wake(*mut Thread),
    Call(Box<dyn FnOnce() + Send>),
    /// A thread built on another OS thread for this carrier (`Pool::spawn`): registered and
    /// made runnable (or left suspended, `true`) when the carrier takes it from the inbox.
    Adopt(*mut Thread, bool),
}

// SAFETY: `Wake` and `Adopt` carry thread pointers that only the owning carrier dereferences
// (threads are live while blocked or not yet adopted); `Call` is Send by its bound.
unsafe impl Send for Remote {}

/// Carrier-local state: only the OS thread currently inside `block_on` touches it, and only with
/// the preempt count raised (or from the tick handler when it was zero).
pub(super) struct Local {
    pub(super) current: *mut Thread,
    pub(super) sched: *mut Thread,
    pub(super) runq: RunQueue,
    /// Sleeping threads and descriptor waits with a deadline (`timers.rs`).
    pub(super) timers: Timers,
    /// Green threads of this carrier parked on a descriptor (`ops::wait_io`).
    pub(super) io_waiters: usize,
    /// The buffer `epoll_wait` fills (`reactor::netpoll`).
    pub(super) events: Box<[Event]>,
    /// Switches between two looks at the poller while threads keep running: `POLL_EVERY`, or
    /// fewer when that many switches took longer than `POLL_INTERVAL` (`reactor::poll`).
    pub(super) poll_every: u32,
    /// When the poller was last looked at (only kept while threads wait on descriptors).
    pub(super) last_netpoll: Option<Instant>,
    pub(super) zombie: *mut Thread,
    /// Something for the next resumed context to do (a zombie to finish, the signal mask to
    /// unblock): one flag so that the common switch checks one byte.
    pub(super) resume_work: bool,
    /// `exit_current` already made the zombie's (same-carrier) joiner runnable.
    pub(super) zombie_joiner_woken: bool,
    /// The OS thread's signal mask still blocks the tick because a switch was made inside the
    /// handler; the next context resumed outside a handler must unblock it.
    pub(super) sig_blocked: bool,
    pub(super) requests: VecDeque<Request>,
    pub(super) pool: StackPool,
    pub(super) all_head: *mut Thread,
    pub(super) alive: usize,
    pub(super) preemptive_alive: usize,
    /// Green threads of this carrier blocked joining a thread of another runtime (that
    /// runtime is inside `block_on`, as it always is while a thread is not done, and will
    /// finish or abandon the thread, waking the joiner), or waiting for a helper OS thread
    /// (`io::blocking`): wake-ups that are sure to come, so these waits are not a deadlock.
    pub(super) remote_joins: usize,
    pub(super) errno: *mut libc::c_int,
    /// The carrier's floating-point environment, read when `block_on` starts: the one every
    /// thread that did not declare its own runs in (see `dispatch::hand_over_fp_env`).
    pub(super) default_fp_env: FpEnv,
    pub(super) poll_countdown: u32,
    pub(super) timer: Option<Timer>,
    pub(super) timer_armed: bool,
    pub(super) timer_error: bool,
    pub(super) id_next: u64,
    pub(super) id_end: u64,
    /// Some thread was abandoned: the carrier must never be freed (see `Thread::carrier`).
    pub(super) abandoned_any: bool,
    /// The pool this carrier belongs to and its index there (`runtime::steal`), set before
    /// its first `block_on`.
    pub(super) group: Option<(Arc<Group>, usize)>,
}

/// The carriers of one pool, as they see each other to balance work (`runtime::steal`): each
/// one's queue of unstarted threads (`Carrier::fresh`), and the pool's injector, where threads
/// spawned from outside the pool wait for the first carrier free to take them.
pub(crate) struct Group {
    /// Set once every carrier has started; weak, so that a carrier and its group do not keep
    /// each other alive.
    pub(super) carriers: OnceLock<Box<[Weak<Carrier>]>>,
    pub(super) injector: SharedQueue,
    /// Whether idle carriers take unstarted threads from their siblings.
    pub(super) stealing: bool,
    /// Carriers idle in their poller now: a thread queued where they could take it wakes one.
    pub(super) idle: AtomicUsize,
}

impl Group {
    pub(crate) fn new(stealing: bool) -> Group {
        Group {
            carriers: OnceLock::new(),
            injector: SharedQueue::new(),
            stealing,
            idle: AtomicUsize::new(0),
        }
    }

    /// Records the pool's carriers, once they have all started.
    pub(crate) fn set_carriers(&self, carriers: &[&Arc<Carrier>]) {
        let _ = self
            .carriers
            .set(carriers.iter().map(|c| Arc::downgrade(c)).collect());
    }
}

/// One runtime's state: carrier-local scheduling state plus what other OS threads may touch
/// (the inbox, the poller and the idle flag that say how to wake it, the handle count, the
/// counters).
///
/// `repr(C)` with `local` first, so that the carrier and its local state share one address:
/// the yield, inlined into a caller's loop where the switch leaves only two registers free,
/// then keeps one pointer for both instead of two.
#[repr(C)]
pub(crate) struct Carrier {
    pub(super) local: UnsafeCell<Local>,
    pub(super) inbox: Mutex<Vec<Remote>>,
    pub(super) inbox_flag: AtomicBool,
    /// On a pool's carrier: threads spawned here that have not started, which idle siblings
    /// may take (`runtime::steal`). Empty on any other runtime.
    pub(super) fresh: SharedQueue,
    /// The carrier's epoll instance and eventfd, created by the first `block_on`.
    pub(super) poller: OnceLock<Arc<Poller>>,
    /// The scheduler context is about to block, or blocks, in `epoll_wait`: whoever hands it
    /// work clears the flag and writes the eventfd (`notify`).
    pub(super) idle: AtomicBool,
    pub(super) handles: AtomicUsize,
    pub(super) running: AtomicBool,
    pub(super) ticks: AtomicU64,
    pub(super) stats: StatCounters,
    pub(super) config: Config,
}

// SAFETY: `local` is only accessed by the OS thread that is inside `block_on` for this carrier
// (enforced by the CARRIER thread-local being set only there); everything else is atomics or a
// Mutex.
unsafe impl Sync for Carrier {}
// SAFETY: as above; the raw pointers in `local` are owned by the carrier.
unsafe impl Send for Carrier {}

static NEXT_THREAD_ID: AtomicU64 = AtomicU64::new(1);

/// Switches between two polls of the inbox (remote wake-ups, `Handle` calls), the timers and,
/// while threads wait on descriptors, the poller. A carrier whose threads keep running sees
/// remote work and I/O within this many switches; a thread that blocks polls at once when the
/// inbox has news.
pub(super) const POLL_EVERY: u32 = 64;
/// The longest a carrier whose threads keep running should go without looking at its poller
/// while threads wait on descriptors: the interval shrinks below `POLL_EVERY` switches when
/// switches are slow (`reactor::poll`).
pub(super) const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// How many events one `epoll_wait` returns at most.
const EVENTS: usize = 256;
const ID_BLOCK: u64 = 1024;

/// The carrier of the calling OS thread, or null outside `block_on`. Kept in the same
/// thread-local block as the preempt count (`preempt::count::carrier_word`), which every yield
/// touches too.
#[inline(always)]
pub(crate) fn carrier_ptr() -> *const Carrier {
    preempt::carrier_word() as *const Carrier
}

/// Makes the calling OS thread the carrier of `c` (non-null), or no carrier (null). Only
/// `block_on` calls it, on entry and on exit.
pub(super) fn set_carrier(c: *const Carrier) {
    preempt::set_carrier_word(c as *const ());
}

/// The carrier of the calling OS thread, if it is inside `block_on`. The reference is only
/// used on this OS thread while `block_on` runs (it is not `'static` in truth; callers never
/// keep it past the current runtime call).
#[inline]
pub(crate) fn current_carrier_ref<'a>() -> Option<&'a Carrier> {
    let c = carrier_ptr();
    // SAFETY: CARRIER points into an Arc<Carrier> kept alive by the running block_on.
    unsafe { c.as_ref() }
}

impl Carrier {
    /// A carrier that is not running yet; `seed` seeds the lottery.
    pub(super) fn new(config: Config, seed: u64) -> Carrier {
        Carrier {
            local: UnsafeCell::new(Local {
                current: null_mut(),
                sched: null_mut(),
                runq: RunQueue::new(seed),
                timers: Timers::new(),
                io_waiters: 0,
                events: vec![NO_EVENT; EVENTS].into_boxed_slice(),
                poll_every: POLL_EVERY,
                last_netpoll: None,
                zombie: null_mut(),
                resume_work: false,
                zombie_joiner_woken: false,
                sig_blocked: false,
                requests: VecDeque::new(),
                pool: StackPool::new(config.pool_max),
                all_head: null_mut(),
                alive: 0,
                preemptive_alive: 0,
                remote_joins: 0,
                errno: null_mut(),
                default_fp_env: FpEnv::PROCESS_DEFAULT,
                poll_countdown: POLL_EVERY,
                timer: None,
                timer_armed: false,
                timer_error: false,
                id_next: 0,
                id_end: 0,
                abandoned_any: false,
                group: None,
            }),
            inbox: Mutex::new(Vec::new()),
            inbox_flag: AtomicBool::new(false),
            fresh: SharedQueue::new(),
            poller: OnceLock::new(),
            idle: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            running: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            stats: StatCounters::default(),
            config,
        }
    }

    #[inline(always)]
    pub(super) fn local(&self) -> *mut Local {
        self.local.get()
    }

    /// This carrier's address as threads record it.
    #[inline(always)]
    pub(crate) fn addr(&self) -> CarrierAddr {
        CarrierAddr::from_ptr(self as *const Carrier as *const ())
    }

    /// The carrier a thread recorded. Dereferencing it is sound while the thread can still be
    /// woken (see `Thread::carrier`).
    #[inline(always)]
    pub(crate) fn at(a: CarrierAddr) -> *const Carrier {
        a.as_ptr() as *const Carrier
    }

    /// A stack for a new thread with `reserve` extra bytes on top for its control block, and
    /// a process-unique id. Ids come from the global counter in blocks, so that spawning costs
    /// no atomic read-modify-write.
    ///
    /// # Safety
    /// On this carrier's thread, count raised.
    #[inline]
    pub(super) unsafe fn take_stack(
        &self,
        size: Option<usize>,
        reserve: usize,
    ) -> io::Result<(Stack, u64)> {
        // SAFETY: forwarded contract.
        unsafe { self.take_stack_as(&self.config, size, reserve) }
    }

    /// `take_stack` for a thread of another carrier, whose configuration (`config`) decides
    /// its size and guard page (`Pool::spawn` onto another carrier).
    ///
    /// # Safety
    /// On this carrier's thread, count raised.
    #[inline(always)]
    pub(super) unsafe fn take_stack_as(
        &self,
        config: &Config,
        size: Option<usize>,
        reserve: usize,
    ) -> io::Result<(Stack, u64)> {
        let size = stack::round_stack_size(size.unwrap_or(config.stack_size));
        let mapping = size.saturating_add(reserve);
        // SAFETY: forwarded contract.
        unsafe {
            let l = &mut *self.local();
            match l.pool.get(mapping, config.guard_pages) {
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

    /// A freshly mapped stack and an id for a thread of this carrier built on an OS thread
    /// that is no carrier (no pool to take from).
    pub(super) fn fresh_stack(
        &self,
        size: Option<usize>,
        reserve: usize,
    ) -> io::Result<(Stack, u64)> {
        let size = stack::round_stack_size(size.unwrap_or(self.config.stack_size));
        let stack = Stack::new(size.saturating_add(reserve), self.config.guard_pages)?;
        Ok((stack, NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed)))
    }

    /// Registers a freshly built thread and makes it runnable (or leaves it suspended).
    ///
    /// # Safety
    /// `t` is a new, fully initialised thread of this carrier in no queue; called on the carrier
    /// with the count raised.
    #[inline]
    pub(super) unsafe fn adopt(&self, t: *mut Thread, suspended: bool) {
        // SAFETY: carrier thread with the count raised; `t` is live and unlinked.
        unsafe {
            let l = &mut *self.local();
            (*t).all_next.set(l.all_head);
            if !l.all_head.is_null() {
                (*l.all_head).all_prev.set(t);
            }
            l.all_head = t;
            l.alive += 1;
            if (*t).own_fp_env {
                // A new thread starts in the carrier's environment.
                (*t).fp_env.set(l.default_fp_env);
            }
            if (*t).mode == Mode::Preemptive {
                l.preemptive_alive += 1;
                self.ensure_timer(l);
            }
            bump(&self.stats.threads_spawned);
            if suspended {
                (*t).state.set(RunState::Blocked);
            } else {
                // A new thread is `Runnable` already.
                l.runq.push(t);
            }
        }
    }

    pub(super) fn ensure_timer(&self, l: &mut Local) {
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

    pub(super) fn disarm_timer(l: &mut Local) {
        if l.timer_armed {
            if let Some(t) = &l.timer {
                t.arm(false);
            }
            l.timer_armed = false;
        }
    }

    /// Hands `r` to this carrier from any OS thread and wakes it if it idles.
    pub(super) fn push_remote(&self, r: Remote) {
        // The inbox lock is an OS lock: the caller (a `Handle` call from a preemptive green
        // thread of another runtime, say) must not be switched out while holding it, or the
        // next green thread of its carrier that hands this carrier work would block the whole
        // OS thread on it.
        preempt::disable();
        match self.inbox.lock() {
            Ok(mut g) => g.push(r),
            Err(p) => p.into_inner().push(r),
        }
        preempt::enable_no_yield();
        self.inbox_flag.store(true, Ordering::SeqCst);
        self.notify();
    }

    /// Ends the scheduler context's `epoll_wait` if it idles there (or is about to). A busy
    /// carrier is not interrupted: it sees the inbox within `POLL_EVERY` switches, so a remote
    /// wake-up costs a system call only when the carrier sleeps.
    ///
    /// The idle side stores `idle` and then reads what it would wait for (the inbox flag, the
    /// handle count); this side changes one of those and then swaps `idle`. Both in SeqCst:
    /// at least one of them sees the other's write, so a wake-up is never lost.
    pub(crate) fn notify(&self) {
        if self.idle.swap(false, Ordering::SeqCst) {
            if let Some(p) = self.poller.get() {
                p.notify();
            }
        }
    }

    /// The carrier's poller (created by the first `block_on`).
    pub(crate) fn poller(&self) -> Option<&Arc<Poller>> {
        self.poller.get()
    }

    /// Counters, with the pool size when it can be read safely.
    pub(crate) fn stats_snapshot(&self) -> Stats {
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

/// Takes back the stack of a freed thread: into the pool of the carrier the caller runs on
/// (the thread's own, or another: a thread of a pool may have run on a carrier other than the
/// one that joins it, and a stack carries nothing of its carrier), else unmapped (any OS thread
/// may drop the last handle).
fn recycle_stack(stack: Stack) {
    let here = carrier_ptr();
    if here.is_null() {
        drop(stack);
        return;
    }
    preempt::disable();
    // SAFETY: CARRIER is set: we are its carrier thread, inside block_on, count raised.
    unsafe { (*(*here).local()).pool.put(stack) };
    preempt::enable_no_yield();
}

/// Frees a thread that both the runtime and its handle have let go of: drops what the block
/// owns, then recycles the stack the block lives on (into the pool when called on the owning
/// carrier, else unmapped).
///
/// # Safety
/// As `Thread::dismantle`: the caller holds the last reference and no context runs on the
/// thread's stack.
pub(crate) unsafe fn free_thread(t: *mut Thread) {
    // SAFETY: forwarded contract.
    let (stack, _carrier) = unsafe { Thread::dismantle(t) };
    recycle_stack(stack);
}

/// What a `JoinHandle` does when dropped: gives up its reference and frees the thread if the
/// runtime already let go of it.
///
/// # Safety
/// `t` is live and the caller is its handle, giving up its reference.
pub(crate) unsafe fn release_handle(t: *mut Thread) {
    // SAFETY: forwarded contract; `true` means we now hold the last reference.
    unsafe {
        if Thread::release_handle(t) {
            free_thread(t);
        }
    }
}

/// What the caller is: a green thread, the scheduler context, or an OS thread outside any runtime.
pub(crate) enum Context {
    Green(*mut Thread),
    Scheduler,
    Outside,
}

#[inline(always)]
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

/// The running green thread's stack facts, for the overflow report.
pub(crate) struct StackInfo<'a> {
    pub(crate) guard: (usize, usize),
    pub(crate) name: &'a str,
    pub(crate) id: u64,
    pub(crate) stack_size: usize,
}

/// The running green thread's stack facts, for the overflow report; `None` outside a green
/// thread. Callable from a signal handler on any OS thread.
pub(crate) fn current_stack_info<'a>() -> Option<StackInfo<'a>> {
    let c = carrier_ptr();
    if c.is_null() {
        return None;
    }
    // SAFETY: non-null CARRIER means this OS thread is inside block_on (carrier alive).
    // `current` is only written with the count raised and is a single word; a fault handler
    // reads it whatever the count, and the thread it names is live while it runs.
    unsafe {
        let l = (*c).local();
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
