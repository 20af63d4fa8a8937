//! Green threads: the thread control block, `Builder`, `JoinHandle` and `JoinOutcome`.

use crate::preempt;
use crate::race::{self, RacePoint};
use crate::runtime::{self, Carrier};
use crate::stack::{self, Stack};
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

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
    fn validate(self) -> io::Result<Self> {
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

/// What became of a green thread; returned by [`JoinHandle::join`].
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

pub(crate) fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("uthread: {msg}"))
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
    Running,
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
    /// `sched::level_key(priority)`, kept so that a yield compares one word.
    pub(crate) level_key: u32,
    pub(crate) start_tick: Cell<u64>,
    /// Intrusive doubly-linked list of all live threads of the carrier.
    pub(crate) all_prev: Cell<*mut Thread>,
    pub(crate) all_next: Cell<*mut Thread>,
    // ---- immutable after creation ----
    pub(crate) priority: Priority,
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// The stack this thread runs on, whose top bytes hold this block. Moved out only when the
    /// block is freed; empty for the scheduler pseudo-thread.
    pub(crate) stack: ManuallyDrop<Stack>,
    /// Owning carrier. Outlives the thread while the thread can still be woken: `block_on`
    /// returns only when its threads are finished or abandoned, and a runtime that abandoned
    /// threads leaks its carrier instead of freeing it.
    pub(crate) carrier: *const Carrier,
    vtable: &'static VTable,
    // ---- shared between carriers / OS threads ----
    /// See [`life`].
    pub(crate) life: AtomicU32,
    /// The green thread blocked in `join` (valid while `JOINER` is set and `DONE` is not).
    pub(crate) joiner: Cell<*mut Thread>,
}

impl Thread {
    /// The scheduler pseudo-thread of a carrier: it only ever holds a saved stack pointer.
    pub(crate) fn scheduler(carrier: *const Carrier) -> Thread {
        static NOOP: VTable = VTable {
            run: |_| {},
            drop_block: |_| {},
        };
        let t = Thread::new(
            carrier,
            Priority::default(),
            Mode::Cooperative,
            0,
            None,
            Stack::empty(),
            &NOOP,
            life::STARTED,
        );
        t.state.set(RunState::Running);
        t
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn new(
        carrier: *const Carrier,
        priority: Priority,
        mode: Mode,
        id: u64,
        name: Option<String>,
        stack: Stack,
        vtable: &'static VTable,
        life: u32,
    ) -> Thread {
        Thread {
            sp: UnsafeCell::new(0),
            next: Cell::new(null_mut()),
            state: Cell::new(RunState::Runnable),
            mode,
            level_key: crate::sched::level_key(priority),
            start_tick: Cell::new(0),
            all_prev: Cell::new(null_mut()),
            all_next: Cell::new(null_mut()),
            priority,
            id,
            name,
            stack: ManuallyDrop::new(stack),
            carrier,
            vtable,
            life: AtomicU32::new(life),
            joiner: Cell::new(null_mut()),
        }
    }

    /// # Safety
    /// `t` must be a live thread.
    pub(crate) unsafe fn run(t: *mut Thread) {
        // SAFETY: live (caller).
        unsafe { ((*t).vtable.run)(t) }
    }

    /// Frees a thread that both the runtime and its handle have let go of: drops what the
    /// block owns, then recycles the stack the block lives on (into the pool when called on
    /// the owning carrier, else unmapped).
    ///
    /// # Safety
    /// The caller observed the other side's release (`REAPED` or `HANDLE_GONE`) and holds the
    /// last reference; no context runs on the thread's stack.
    pub(crate) unsafe fn free(t: *mut Thread) {
        // SAFETY: last reference (caller): nothing else reads the block any more. The stack
        // descriptor is moved out before the block is dropped and before the memory it lives
        // in is recycled.
        unsafe {
            let stack = ManuallyDrop::take(&mut (*t).stack);
            let carrier = (*t).carrier;
            ((*t).vtable.drop_block)(t);
            runtime::recycle_stack(carrier, stack);
        }
    }

    /// Handle-side release: called once when the `JoinHandle` is dropped.
    ///
    /// # Safety
    /// `t` is live and the caller is its handle, giving up its reference.
    pub(crate) unsafe fn release_handle(t: *mut Thread) {
        // SAFETY: the handle's reference keeps `t` live until we give it up here. Once REAPED
        // is visible the runtime never touches `t` again, so we are the last holder and can
        // free without announcing HANDLE_GONE (no locked instruction in the usual case: a
        // thread joined and then dropped).
        unsafe {
            let l = &(*t).life;
            if l.load(Ordering::Acquire) & life::REAPED != 0
                || l.fetch_or(life::HANDLE_GONE, Ordering::AcqRel) & life::REAPED != 0
            {
                Thread::free(t);
            }
        }
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
struct Spawned<T, F> {
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
        // SAFETY: `t` heads a `Spawned<T, F>` (it was created by `spawn_inner::<T, F>`); only the
        // thread itself touches `body` and, before `DONE` is published, `result`.
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

/// Spawn parameters, in the manner of `std::thread::Builder`.
///
/// Unlike Delphi's `TThread`, every parameter can be set (including the stack size), a thread
/// starts running unless `start_suspended(true)` is asked for, and a thread that was not
/// cancelled before it started always runs its body.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    priority: Priority,
    mode: Mode,
    start_suspended: bool,
}

impl Builder {
    /// Default settings: unnamed, runtime's default stack size, `TimeSharing(10)`,
    /// cooperative, started at once.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown in stack-overflow reports and `current_name`).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Usable stack size in bytes (rounded up to pages; at least 8 KiB). Preemptive threads
    /// need room for a signal frame (up to ~3.5 KiB with AVX-512): prefer >= 16 KiB.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = Some(bytes);
        self
    }

    /// Scheduling class and priority.
    pub fn priority(mut self, p: Priority) -> Builder {
        self.priority = p;
        self
    }

    /// Cooperative or preemptive.
    pub fn mode(mut self, m: Mode) -> Builder {
        self.mode = m;
        self
    }

    /// If `true`, the thread does not run until [`JoinHandle::resume`] (or `join`) is called.
    pub fn start_suspended(mut self, yes: bool) -> Builder {
        self.start_suspended = yes;
        self
    }

    /// Spawns on the current runtime. Fails when called outside a runtime, on an invalid
    /// priority, or when the stack cannot be mapped.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let carrier = runtime::current_carrier_ref().ok_or_else(|| {
            io::Error::other(
                "uthread: spawn called outside a runtime; call it inside Runtime::block_on",
            )
        })?;
        spawn_inner(carrier, self, f)
    }
}

/// Spawns without `Send` bounds. Used for the main context of `block_on`, which never leaves
/// the calling OS thread and is cooperative.
pub(crate) fn spawn_inner<F, T>(carrier: &Carrier, b: Builder, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T,
{
    let priority = b.priority.validate()?;
    let block = core::mem::size_of::<Spawned<T, F>>();
    let align = core::mem::align_of::<Spawned<T, F>>().max(16);
    let reserve = stack::block_reserve(block, align);
    preempt::disable();
    // SAFETY: on the carrier (spawn requires CARRIER == carrier), count raised.
    let taken = unsafe { carrier.take_stack(b.stack_size, reserve) };
    let (stack, id) = match taken {
        Ok(x) => x,
        Err(e) => {
            preempt::enable();
            return Err(e);
        }
    };
    let at = (stack.top() - block) & !(align - 1);
    let t = at as *mut Spawned<T, F>;
    let initial = if b.start_suspended {
        life::SUSPENDED
    } else {
        life::READY
    };
    // SAFETY: [at, at + block) lies in the reserved top pages of a stack that is ours, mapped
    // and used by nobody (fresh, or from the pool); `at` is aligned for `Spawned<T, F>`. The
    // thread's own frames start below `at` (init_stack writes only below its `top`).
    unsafe {
        core::ptr::write(
            t,
            Spawned {
                header: Thread::new(
                    carrier,
                    priority,
                    b.mode,
                    id,
                    b.name,
                    stack,
                    &VTableFor::<T, F>::VTABLE,
                    initial,
                ),
                result: UnsafeCell::new(None),
                body: UnsafeCell::new(Some(f)),
            },
        );
        let t = t as *mut Thread;
        *(*t).sp.get() = crate::arch::init_stack(at & !15, runtime::thread_entry, t as usize);
        // SAFETY: `t` is a fully initialised thread of this carrier, in no queue; count raised.
        carrier.adopt(t, b.start_suspended);
        preempt::enable();
        Ok(JoinHandle {
            t,
            _marker: PhantomData,
        })
    }
}

/// Spawns a green thread with default settings on the current runtime.
///
/// # Panics
/// Outside a runtime, or if the stack cannot be mapped (use [`Builder::spawn`] to get the
/// error instead).
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match Builder::new().spawn(f) {
        Ok(h) => h,
        Err(e) => panic!("{e}"),
    }
}

/// Owns the right to join a green thread. Dropping it detaches the thread.
pub struct JoinHandle<T> {
    t: *mut Thread,
    _marker: PhantomData<T>,
}

// SAFETY: every operation on the handle goes through the thread's atomic `life` word (read-
// modify-writes from the handle side, see `life`) or hands the work to the owning carrier
// (`runtime::wake`); the result is read only after `DONE` was observed with Acquire. So the
// handle may move between OS threads as long as the result type may; freeing from a foreign
// OS thread unmaps the stack instead of touching the owner's pool.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only allows resume/cancel/is_finished, which are synchronised as above.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    fn thread(&self) -> &Thread {
        // SAFETY: the handle holds a reference, so the thread is live.
        unsafe { &*self.t }
    }

    /// The thread's name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.thread().name.as_deref()
    }

    /// A process-unique id.
    pub fn id(&self) -> u64 {
        self.thread().id
    }

    /// `true` once the outcome is known (finished, panicked, cancelled or abandoned).
    pub fn is_finished(&self) -> bool {
        self.thread().life.load(Ordering::Acquire) & life::STATE == life::DONE
    }

    /// Starts a thread created with `start_suspended(true)`. Returns `true` if this call
    /// started it, `false` if it was not suspended (already started, cancelled or done).
    pub fn resume(&self) -> bool {
        if self.thread().leave_suspended(false) {
            race::pause(RacePoint::WakeAfterLeaveSuspended);
            runtime::wake(self.t);
            true
        } else {
            false
        }
    }

    /// Alias of [`resume`](Self::resume).
    pub fn start(&self) -> bool {
        self.resume()
    }

    /// Cancels the thread if its body has not started yet; it then never runs and `join`
    /// returns [`JoinOutcome::Cancelled`]. Returns `false` if the body already started (a
    /// running body is never interrupted) or the thread is done.
    pub fn cancel(&self) -> bool {
        let t = self.thread();
        if t.leave_suspended(true) {
            race::pause(RacePoint::WakeAfterLeaveSuspended);
            // Let it run its (cheap) cancellation path so the outcome gets published.
            runtime::wake(self.t);
            return true;
        }
        let mut cur = t.life.load(Ordering::Acquire);
        loop {
            match cur & life::STATE {
                life::READY if cur & life::CANCEL != 0 => return true,
                life::READY => match t.life.compare_exchange_weak(
                    cur,
                    cur | life::CANCEL,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return true,
                    Err(now) => cur = now,
                },
                // A suspended thread was resumed meanwhile by another handle user: retry.
                life::SUSPENDED => {
                    if t.leave_suspended(true) {
                        runtime::wake(self.t);
                        return true;
                    }
                    cur = t.life.load(Ordering::Acquire);
                }
                _ => return false,
            }
        }
    }

    /// Waits for the thread and returns what became of it. Joining a thread that is still
    /// suspended starts it (cancel it first if it must not run).
    ///
    /// From a green thread this blocks only the caller; from an OS thread outside any runtime
    /// it blocks that OS thread.
    pub fn join(self) -> JoinOutcome<T> {
        runtime::wait_done(self.t);
        // SAFETY: `DONE` was observed with Acquire, so the result slot is final and nobody else
        // accesses it; the handle is its only reader. The prefix cast is valid because both
        // structs are repr(C) with identical leading fields.
        let r = unsafe { (*(*(self.t as *const SpawnedHead<T>)).result.get()).take() };
        r.unwrap_or(JoinOutcome::Abandoned)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: we own the handle's reference and give it up.
        unsafe { Thread::release_handle(self.t) }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Converts a quantum to the timer's `timespec`.
pub(crate) fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}
