//! The thread control block and the plain types around it: `Priority`, `Mode`, `JoinOutcome`,
//! the `life` word, and `Spawned`, the block as it sits on top of a thread's stack.
//!
//! Everything here is data and the transitions of one thread's own state; nothing switches,
//! queues or touches a carrier. So the run queue (`sched`) and the runtime build on it, and the
//! transitions can be tested alone (the tests at the end).

use crate::arch::FpEnv;
use crate::race::{self, RacePoint};
use crate::stack::Stack;
use crate::sys::invalid;
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

/// Scheduling class and priority, after the BeOS R4.5 scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Real-time class, `0..=127`: always runs before any time-sharing thread; higher first,
    /// FIFO among equals. A real-time thread that never blocks starves everything else.
    RealTime(u8),
    /// Time-sharing class, `1..=99`: lottery where one unit of priority doubles the chance of
    /// being picked. `TimeSharing(10)` is the default (BeOS's `B_NORMAL_PRIORITY`).
    TimeSharing(u8),
    /// Runs only when no real-time or time-sharing thread is runnable.
    Idle,
}

impl Default for Priority {
    fn default() -> Self {
        Priority::TimeSharing(10)
    }
}

impl Priority {
    #[inline]
    pub(crate) fn validate(self) -> io::Result<Self> {
        match self {
            Priority::RealTime(p) if p > 127 => Err(invalid("RealTime priority must be 0..=127")),
            Priority::TimeSharing(p) if !(1..=99).contains(&p) => {
                Err(invalid("TimeSharing priority must be 1..=99"))
            }
            p => Ok(p),
        }
    }
}

/// How a green thread gives up its carrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Runs until it yields, sleeps, blocks or finishes.
    #[default]
    Cooperative,
    /// Additionally interrupted by the carrier's timer once its quantum is used up (see the
    /// crate docs for the preemption safety model).
    Preemptive,
}

/// What became of a green thread; returned by [`JoinHandle::join`](crate::JoinHandle::join).
pub enum JoinOutcome<T> {
    /// The body ran to completion and returned this value.
    Finished(T),
    /// The body panicked; this is the panic payload.
    Panicked(Box<dyn Any + Send + 'static>),
    /// The body never ran: the thread was cancelled before it started (explicitly, or because
    /// it was still suspended when its runtime shut down).
    Cancelled,
    /// The runtime's `block_on` returned while the thread was blocked forever (a deadlock);
    /// its stack was leaked, not unwound.
    Abandoned,
}

impl<T> JoinOutcome<T> {
    /// The value if the body finished, otherwise `None`.
    pub fn finished(self) -> Option<T> {
        match self {
            JoinOutcome::Finished(v) => Some(v),
            _ => None,
        }
    }

    /// `true` for [`JoinOutcome::Finished`].
    pub fn is_finished(&self) -> bool {
        matches!(self, JoinOutcome::Finished(_))
    }

    /// Converts to a `std::thread::Result`-like value, re-raising nothing: `Cancelled` and
    /// `Abandoned` become an `Err` carrying a `&'static str` describing them.
    pub fn into_result(self) -> Result<T, Box<dyn Any + Send + 'static>> {
        match self {
            JoinOutcome::Finished(v) => Ok(v),
            JoinOutcome::Panicked(p) => Err(p),
            JoinOutcome::Cancelled => {
                Err(Box::new("uthread: thread was cancelled before it started"))
            }
            JoinOutcome::Abandoned => Err(Box::new(
                "uthread: thread was abandoned (blocked at shutdown)",
            )),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for JoinOutcome<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinOutcome::Finished(v) => f.debug_tuple("Finished").field(v).finish(),
            JoinOutcome::Panicked(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
                    .unwrap_or("<non-string payload>");
                f.debug_tuple("Panicked").field(&msg).finish()
            }
            JoinOutcome::Cancelled => f.write_str("Cancelled"),
            JoinOutcome::Abandoned => f.write_str("Abandoned"),
        }
    }
}

/// The `life` word of a thread: its lifecycle as seen by handles and joiners, in one atomic so
/// that the common spawn-run-join sequence needs no lock.
///
/// Writers: the thread's own carrier (start, finish), and the handle side (`resume`, `cancel`,
/// join registration, drop) from any OS thread. Handle-side writes are atomic read-modify-writes.
/// The carrier writes with a plain store only when a joiner is registered (`JOINER` or
/// `OS_JOINER`): the joiner then owns the handle (`join` takes it by value), so no other writer
/// can exist until the joiner has seen `DONE`.
pub(crate) mod life {
    /// Created with `start_suspended(true)`, not resumed yet.
    pub(crate) const SUSPENDED: u32 = 0;
    /// Runnable but its body has not started.
    pub(crate) const READY: u32 = 1;
    /// The body is running (or ran).
    pub(crate) const STARTED: u32 = 2;
    /// Finished, panicked, cancelled or abandoned: the result slot is final. Every other
    /// state ORed with `DONE` is `DONE`.
    pub(crate) const DONE: u32 = 3;
    /// Mask of the four states above.
    pub(crate) const STATE: u32 = 3;
    /// Cancelled before its body started: it will never run.
    pub(crate) const CANCEL: u32 = 1 << 2;
    /// A green thread waits in `join`; it is in `Thread::joiner`.
    pub(crate) const JOINER: u32 = 1 << 3;
    /// An OS thread outside any runtime waits in `join` (futex on this word).
    pub(crate) const OS_JOINER: u32 = 1 << 4;
    /// The `JoinHandle` was dropped.
    pub(crate) const HANDLE_GONE: u32 = 1 << 5;
    /// The runtime let go of the thread: it finished and no context runs on its stack. Set
    /// together with `DONE` or after it, never for an abandoned thread (leaked on purpose).
    pub(crate) const REAPED: u32 = 1 << 6;
}

/// Scheduler-side state (carrier-owned; only the carrier's OS thread touches it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RunState {
    /// Running or ready to run: a running thread keeps the state it had in the run queue, so
    /// that a yield stores nothing into either thread.
    Runnable,
    Blocked,
    Sleeping,
    /// Left blocked when its runtime shut down: never to be resumed.
    Abandoned,
    Exited,
}

pub(crate) struct VTable {
    /// Runs the body (or the cancellation path) and stores the outcome. Never unwinds.
    pub(crate) run: unsafe fn(*mut Thread),
    /// Drops what the control block owns (name, result, body), leaving the stack descriptor.
    drop_block: unsafe fn(*mut Thread),
}

/// What a thread is asked to be, as set through `Builder` (which wraps it) or by the runtime
/// for `block_on`'s main thread.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpawnOptions {
    pub(crate) name: Option<String>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) priority: Priority,
    pub(crate) mode: Mode,
    pub(crate) start_suspended: bool,
    /// The thread changes its floating-point environment and keeps its own (see
    /// `Builder::own_fp_env`).
    pub(crate) own_fp_env: bool,
    /// The thread runs on the carrier it was placed on (`Pool::spawn_on`), even on a pool
    /// carrier whose idle siblings take threads that have not started.
    pub(crate) placed: bool,
}

/// The address of the carrier that owns a thread. The control block sits below the runtime in
/// the crate's layers and never looks inside its carrier, so it keeps the address untyped;
/// only `runtime::carrier` turns it back into a carrier.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct CarrierAddr(*const ());

impl CarrierAddr {
    #[inline(always)]
    pub(crate) fn from_ptr(p: *const ()) -> CarrierAddr {
        CarrierAddr(p)
    }

    #[inline(always)]
    pub(crate) fn as_ptr(self) -> *const () {
        self.0
    }
}

/// The functions of a block that owns nothing and runs nothing (the scheduler pseudo-thread).
static NOOP: VTable = VTable {
    run: |_| {},
    drop_block: |_| {},
};

/// The fields of a new control block, named (a constructor with eight positional arguments is
/// easy to call with two of them swapped).
pub(crate) struct NewThread {
    pub(crate) carrier: CarrierAddr,
    pub(crate) priority: Priority,
    /// `sched::level_key(priority)`: the run queue's key, computed where the scheduler is known.
    pub(crate) level_key: u32,
    pub(crate) mode: Mode,
    pub(crate) own_fp_env: bool,
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    pub(crate) stack: Stack,
    /// Initial `life` word: `SUSPENDED` or `READY`.
    pub(crate) life: u32,
    /// Another carrier of its pool may take it before it starts (see `Thread::stealable`).
    pub(crate) stealable: bool,
}

/// The thread control block. Lives at the start of a `Spawned<T, F>`, which lives in the top
/// bytes of the thread's own stack (a page reserved above the usable part): spawning maps or
/// reuses one stack and allocates nothing else. `repr(C)` with the fields a switch touches
/// first, in one cache line, `sp` at offset 0.
#[repr(C)]
pub(crate) struct Thread {
    // ---- carrier-owned (only touched by the owning carrier's OS thread) ----
    /// Saved stack pointer while suspended.
    pub(crate) sp: UnsafeCell<usize>,
    /// Intrusive link for the run queue or one wait queue (a thread is in at most one).
    pub(crate) next: Cell<*mut Thread>,
    pub(crate) state: Cell<RunState>,
    pub(crate) mode: Mode,
    /// Declared with `Builder::own_fp_env`: every switch out of the thread saves its
    /// floating-point environment into `fp_env` and every switch into it loads it back. The
    /// others run in their carrier's environment, and a switch between two of them leaves it
    /// alone.
    pub(crate) own_fp_env: bool,
    /// `sched::level_key(priority)`, kept so that a yield compares one word.
    pub(crate) level_key: u32,
    pub(crate) start_tick: Cell<u64>,
    /// Intrusive doubly-linked list of all live threads of the carrier.
    pub(crate) all_prev: Cell<*mut Thread>,
    pub(crate) all_next: Cell<*mut Thread>,
    /// The thread's own floating-point environment while it is switched out (meaningful only
    /// with `own_fp_env`); starts as the carrier's.
    pub(crate) fp_env: Cell<FpEnv>,
    // ---- immutable after creation ----
    pub(crate) priority: Priority,
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// The stack this thread runs on, whose top bytes hold this block. Moved out only when the
    /// block is freed; empty for the scheduler pseudo-thread.
    pub(crate) stack: ManuallyDrop<Stack>,
    /// Owning carrier. Outlives the thread while the thread can still be woken: `block_on`
    /// returns only when its threads are finished or abandoned, and a runtime that abandoned
    /// threads leaks its carrier instead of freeing it. Changes only for a `stealable` thread,
    /// once, when a carrier takes it from a queue of unstarted threads (`runtime::steal`),
    /// before anything that reads it can run: see `stealable`.
    pub(crate) carrier: Cell<CarrierAddr>,
    /// Queued, before it starts, where other carriers of a pool may take it (a pool carrier's
    /// unstarted threads, or the pool's injector). Its `carrier` may change until it starts,
    /// so joiners never take the same-carrier shortcut for it (they would compare against a
    /// carrier being rewritten).
    pub(crate) stealable: bool,
    vtable: &'static VTable,
    // ---- shared between carriers / OS threads ----
    /// See [`life`].
    pub(crate) life: AtomicU32,
    /// The green thread blocked in `join` (valid while `JOINER` is set and `DONE` is not).
    pub(crate) joiner: Cell<*mut Thread>,
    /// The poll descriptor (`poll::desc::PollDesc`, kept untyped: the control block sits below
    /// the reactor) this thread is parked on, or null. Carrier-owned: the runtime closes the
    /// socket of a thread it abandons while parked.
    pub(crate) io_wait: Cell<*const ()>,
}

impl Thread {
    /// The scheduler pseudo-thread of a carrier: it only ever holds a saved stack pointer. It
    /// is never queued; the runtime gives it a run-queue key that says so.
    pub(crate) fn scheduler(carrier: CarrierAddr) -> Thread {
        Thread::new(
            NewThread {
                carrier,
                priority: Priority::default(),
                level_key: 0,
                mode: Mode::Cooperative,
                own_fp_env: false,
                id: 0,
                name: None,
                stack: Stack::empty(),
                life: life::STARTED,
                stealable: false,
            },
            &NOOP,
        )
    }

    #[inline(always)]
    fn new(n: NewThread, vtable: &'static VTable) -> Thread {
        Thread {
            sp: UnsafeCell::new(0),
            next: Cell::new(null_mut()),
            state: Cell::new(RunState::Runnable),
            mode: n.mode,
            own_fp_env: n.own_fp_env,
            level_key: n.level_key,
            start_tick: Cell::new(0),
            all_prev: Cell::new(null_mut()),
            all_next: Cell::new(null_mut()),
            fp_env: Cell::new(FpEnv::PROCESS_DEFAULT),
            priority: n.priority,
            id: n.id,
            name: n.name,
            stack: ManuallyDrop::new(n.stack),
            carrier: Cell::new(n.carrier),
            stealable: n.stealable,
            vtable,
            life: AtomicU32::new(n.life),
            joiner: Cell::new(null_mut()),
            io_wait: Cell::new(core::ptr::null()),
        }
    }

    /// # Safety
    /// `t` must be a live thread.
    pub(crate) unsafe fn run(t: *mut Thread) {
        // SAFETY: live (caller).
        unsafe { ((*t).vtable.run)(t) }
    }

    /// Takes a thread apart once both the runtime and its handle have let go of it: drops what
    /// the block owns and returns the stack the block lives on, with its carrier, for the
    /// runtime to recycle (`runtime::carrier::free_thread`).
    ///
    /// # Safety
    /// The caller observed the other side's release (`REAPED` or `HANDLE_GONE`) and holds the
    /// last reference; no context runs on the thread's stack. The block must not be read
    /// afterwards.
    pub(crate) unsafe fn dismantle(t: *mut Thread) -> (Stack, CarrierAddr) {
        // SAFETY: last reference (caller): nothing else reads the block any more. The stack
        // descriptor is moved out before the block is dropped; the memory it lives in stays
        // mapped until the caller recycles the returned stack.
        unsafe {
            let stack = ManuallyDrop::take(&mut (*t).stack);
            let carrier = (*t).carrier.get();
            ((*t).vtable.drop_block)(t);
            (stack, carrier)
        }
    }

    /// Handle-side release, called once when the `JoinHandle` is dropped. Returns `true` when
    /// the runtime had already let go, so that the caller now holds the last reference and must
    /// free the thread.
    ///
    /// # Safety
    /// `t` is live and the caller is its handle, giving up its reference.
    pub(crate) unsafe fn release_handle(t: *mut Thread) -> bool {
        // SAFETY: the handle's reference keeps `t` live until we give it up here. Once REAPED
        // is visible the runtime never touches `t` again, so we are the last holder and can
        // free without announcing HANDLE_GONE (no locked instruction in the usual case: a
        // thread joined and then dropped).
        unsafe {
            let l = &(*t).life;
            l.load(Ordering::Acquire) & life::REAPED != 0
                || l.fetch_or(life::HANDLE_GONE, Ordering::AcqRel) & life::REAPED != 0
        }
    }

    /// `true` once the outcome is known (finished, panicked, cancelled or abandoned).
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.life.load(Ordering::Acquire) & life::STATE == life::DONE
    }

    /// The start transition, on the thread's carrier just before its body would run: `true`
    /// to run the body, `false` if it was cancelled (it then never runs).
    #[inline(always)]
    fn begin(&self) -> bool {
        let mut cur = self.life.load(Ordering::Acquire);
        if cur & (life::JOINER | life::OS_JOINER) != 0 {
            // A joiner owns the handle: nobody else can cancel now (see `life`).
            if cur & life::CANCEL != 0 {
                return false;
            }
            self.life
                .store((cur & !life::STATE) | life::STARTED, Ordering::Relaxed);
            return true;
        }
        // A handle may be cancelling right now on another OS thread: decide atomically.
        loop {
            if cur & life::CANCEL != 0 {
                return false;
            }
            match self.life.compare_exchange_weak(
                cur,
                (cur & !life::STATE) | life::STARTED,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// `SUSPENDED -> READY`, optionally also marking it cancelled. Returns `true` if this call
    /// made the transition (the caller must then make the thread runnable).
    pub(crate) fn leave_suspended(&self, cancel: bool) -> bool {
        let mut cur = self.life.load(Ordering::Acquire);
        loop {
            if cur & life::STATE != life::SUSPENDED {
                return false;
            }
            let mut new = (cur & !life::STATE) | life::READY;
            if cancel {
                new |= life::CANCEL;
            }
            match self
                .life
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Thread name for messages.
    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unnamed>")
    }

    /// Usable stack bytes below the control block (what the body can use).
    pub(crate) fn usable_stack(&self) -> usize {
        (self as *const Thread as usize).saturating_sub(self.stack.bottom())
    }
}

/// A spawned thread: control block, result slot, body. `repr(C)` so that `SpawnedHead<T>` is a
/// layout prefix of `Spawned<T, F>` for every `F` (the handle knows `T` but not `F`).
#[repr(C)]
pub(crate) struct Spawned<T, F> {
    header: Thread,
    result: UnsafeCell<Option<JoinOutcome<T>>>,
    body: UnsafeCell<Option<F>>,
}

#[repr(C)]
struct SpawnedHead<T> {
    header: Thread,
    result: UnsafeCell<Option<JoinOutcome<T>>>,
}

struct VTableFor<T, F>(PhantomData<(T, F)>);

impl<T, F: FnOnce() -> T> VTableFor<T, F> {
    const VTABLE: VTable = VTable {
        run: Self::run,
        drop_block: Self::drop_block,
    };

    unsafe fn run(t: *mut Thread) {
        let s = t as *mut Spawned<T, F>;
        // SAFETY: `t` heads a `Spawned<T, F>` (it was created by `Spawned::<T, F>::write`);
        // only the thread itself touches `body` and, before `DONE` is published, `result`.
        unsafe {
            let body = (*(*s).body.get()).take();
            let outcome = match ((*t).begin(), body) {
                (true, Some(f)) => match catch_unwind(AssertUnwindSafe(f)) {
                    Ok(v) => JoinOutcome::Finished(v),
                    Err(p) => JoinOutcome::Panicked(p),
                },
                (_, body) => {
                    // Dropping the body may run user destructors: keep a panic in them from
                    // crossing the assembly frame.
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(body)));
                    JoinOutcome::Cancelled
                }
            };
            if (*t).life.load(Ordering::Acquire) & life::HANDLE_GONE != 0 {
                // Detached: nobody will read the outcome. Drop it here, in the thread's own
                // context, where its destructor may yield, block or panic like any user code,
                // rather than later inside the runtime (finish_zombie frees the block).
                let _ = catch_unwind(AssertUnwindSafe(move || drop(outcome)));
                return;
            }
            race::pause(RacePoint::ResultBeforeStore);
            core::ptr::write((*s).result.get(), Some(outcome));
        }
    }

    unsafe fn drop_block(t: *mut Thread) {
        // SAFETY: `t` heads a live `Spawned<T, F>` whose stack descriptor was moved out (it is
        // a ManuallyDrop, so dropping the rest leaves it alone); last reference. An outcome
        // still in the block (a handle dropped on another OS thread just as the thread
        // finished) may run a user destructor here, inside the runtime: a panic in it must not
        // unwind through the runtime's frames, so it is caught and discarded.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            core::ptr::drop_in_place(t as *mut Spawned<T, F>)
        }));
    }
}

impl<T, F: FnOnce() -> T> Spawned<T, F> {
    /// Writes a new thread's control block, an empty result slot and its body at `at`, and
    /// returns the thread.
    ///
    /// # Safety
    /// `[at, at + size_of::<Self>())` is writable memory that nothing else uses (the reserved
    /// top of `n.stack`), and `at` is aligned for `Self`.
    #[inline(always)]
    pub(crate) unsafe fn write(at: *mut Self, n: NewThread, body: F) -> *mut Thread {
        // SAFETY: forwarded contract.
        unsafe {
            core::ptr::write(
                at,
                Spawned {
                    header: Thread::new(n, &VTableFor::<T, F>::VTABLE),
                    result: UnsafeCell::new(None),
                    body: UnsafeCell::new(Some(body)),
                },
            );
        }
        at as *mut Thread
    }
}

/// Takes the outcome out of a finished thread's result slot (`None` for an abandoned thread,
/// which never stored one).
///
/// # Safety
/// `t` heads a `Spawned<T, _>` (was spawned returning `T`), `DONE` was observed with Acquire,
/// and the caller holds the thread's handle, the slot's only reader.
#[inline(always)]
pub(crate) unsafe fn take_result<T>(t: *mut Thread) -> Option<JoinOutcome<T>> {
    // SAFETY: forwarded contract. The prefix cast is valid because both structs are repr(C)
    // with identical leading fields.
    unsafe { (*(*(t as *const SpawnedHead<T>)).result.get()).take() }
}

#[cfg(test)]
impl Thread {
    /// A control block on its own, on no stack and of no carrier, for unit tests of the code
    /// that links, queues and transitions threads.
    pub(crate) fn for_test(priority: Priority, level_key: u32, life: u32) -> Thread {
        Thread::new(
            NewThread {
                carrier: CarrierAddr::from_ptr(core::ptr::null()),
                priority,
                level_key,
                mode: Mode::Cooperative,
                own_fp_env: false,
                id: 0,
                name: None,
                stack: Stack::empty(),
                life,
                stealable: false,
            },
            &NOOP,
        )
    }
}

#[cfg(test)]
mod tests;
