//! Green threads: the thread control block, `Builder`, `JoinHandle` and `JoinOutcome`.

use crate::runtime::{self, Carrier};
use crate::stack::Stack;
use crate::sync::RawLock;
use std::any::Any;
use std::cell::{Cell, UnsafeCell};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
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

/// Lifecycle as seen by handles (protected by `Thread::life_lock`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Life {
    /// Created with `start_suspended(true)`, not resumed yet.
    Suspended,
    /// Runnable but its body has not started.
    Ready,
    /// The body is running (or ran).
    Started,
    /// Finished, panicked, cancelled or abandoned; the result slot is final.
    Done,
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
    /// Frees the allocation that holds the thread.
    pub(crate) free: unsafe fn(*mut Thread),
}

/// The thread control block. Lives at the start of a `Spawned<T, F>` allocation.
pub(crate) struct Thread {
    // ---- carrier-owned (only touched by the owning carrier's OS thread) ----
    /// Saved stack pointer while suspended.
    pub(crate) sp: UnsafeCell<usize>,
    /// Intrusive link for the run queue or one wait queue (a thread is in at most one).
    pub(crate) next: Cell<*mut Thread>,
    /// Intrusive doubly-linked list of all live threads of the carrier.
    pub(crate) all_prev: Cell<*mut Thread>,
    pub(crate) all_next: Cell<*mut Thread>,
    pub(crate) state: Cell<RunState>,
    pub(crate) start_tick: Cell<u64>,
    pub(crate) stack: UnsafeCell<Option<Stack>>,
    // ---- immutable after creation ----
    pub(crate) priority: Priority,
    pub(crate) mode: Mode,
    pub(crate) id: u64,
    pub(crate) name: Option<String>,
    /// Guard page `[lo, hi)` and usable size, for the overflow report.
    pub(crate) guard: (usize, usize),
    pub(crate) stack_size: usize,
    /// Owning carrier. Outlives the thread while the thread can still be woken: `block_on`
    /// returns only when its threads are finished or abandoned, and a runtime that abandoned
    /// threads leaks its carrier instead of freeing it.
    pub(crate) carrier: *const Carrier,
    vtable: &'static VTable,
    // ---- shared between carriers / OS threads ----
    /// References held (the runtime's and the handle's); fixed at creation and only ever
    /// given up, never taken again (`Thread::release` relies on this).
    pub(crate) refs: AtomicUsize,
    pub(crate) life_lock: RawLock,
    pub(crate) life: UnsafeCell<Life>,
    pub(crate) cancel: Cell<bool>,
    /// Green thread blocked in `join` (protected by `life_lock`).
    pub(crate) joiner: Cell<*mut Thread>,
    /// 0 until the thread is `Done`; an OS thread joining from outside waits on it (futex).
    pub(crate) done: AtomicU32,
    pub(crate) os_joiners: AtomicU32,
    /// Created with `start_suspended(true)`: only then can `resume` have work to do, so other
    /// threads' joins skip the lock.
    created_suspended: bool,
}

impl Thread {
    /// The scheduler pseudo-thread of a carrier: it only ever holds a saved stack pointer.
    pub(crate) fn scheduler(carrier: *const Carrier) -> Thread {
        static NOOP: VTable = VTable {
            run: |_| {},
            free: |_| {},
        };
        Thread::header(
            carrier,
            Priority::default(),
            Mode::Cooperative,
            0,
            None,
            &NOOP,
        )
    }

    fn header(
        carrier: *const Carrier,
        priority: Priority,
        mode: Mode,
        id: u64,
        name: Option<String>,
        vtable: &'static VTable,
    ) -> Thread {
        Thread {
            sp: UnsafeCell::new(0),
            next: Cell::new(null_mut()),
            all_prev: Cell::new(null_mut()),
            all_next: Cell::new(null_mut()),
            state: Cell::new(RunState::Running),
            start_tick: Cell::new(0),
            stack: UnsafeCell::new(None),
            priority,
            mode,
            id,
            name,
            guard: (0, 0),
            stack_size: 0,
            carrier,
            vtable,
            refs: AtomicUsize::new(1),
            life_lock: RawLock::new(),
            life: UnsafeCell::new(Life::Ready),
            cancel: Cell::new(false),
            joiner: Cell::new(null_mut()),
            done: AtomicU32::new(0),
            os_joiners: AtomicU32::new(0),
            created_suspended: false,
        }
    }

    /// # Safety
    /// `t` must be a live thread.
    pub(crate) unsafe fn run(t: *mut Thread) {
        // SAFETY: live (caller).
        unsafe { ((*t).vtable.run)(t) }
    }

    /// Drops one reference; frees the thread when it was the last.
    ///
    /// # Safety
    /// The caller owns one reference to the live thread `t` and gives it up.
    pub(crate) unsafe fn release(t: *mut Thread) {
        // SAFETY: the caller's reference keeps `t` live until this decrement. References are
        // only ever given up, never taken (the count is fixed at creation), so observing 1
        // means the caller holds the last one: no other holder exists that could still touch
        // `t`, and the Acquire load synchronises with the Release half of every earlier
        // `fetch_sub`, exactly as the final `fetch_sub` would. That skips one locked
        // instruction in the common case (the second of the two releases).
        unsafe {
            if (*t).refs.load(Ordering::Acquire) == 1
                || (*t).refs.fetch_sub(1, Ordering::AcqRel) == 1
            {
                ((*t).vtable.free)(t);
            }
        }
    }

    /// Thread name for messages.
    pub(crate) fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unnamed>")
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
        free: Self::free,
    };

    unsafe fn run(t: *mut Thread) {
        let s = t as *mut Spawned<T, F>;
        // SAFETY: `t` heads a `Spawned<T, F>` (it was created by `spawn_inner::<T, F>`); only the
        // thread itself touches `body` and, before `Done` is published, `result`.
        unsafe {
            let body = (*(*s).body.get()).take();
            let outcome = (*t).life_lock.with(|| {
                if (*t).cancel.get() {
                    false
                } else {
                    *(*t).life.get() = Life::Started;
                    true
                }
            });
            let outcome = match (outcome, body) {
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
            *(*s).result.get() = Some(outcome);
        }
    }

    unsafe fn free(t: *mut Thread) {
        // SAFETY: created by `Box::into_raw(Box<Spawned<T, F>>)` in `spawn_inner`; last reference.
        unsafe { drop(Box::from_raw(t as *mut Spawned<T, F>)) }
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
    let (stack, stack_size) = carrier.get_stack(b.stack_size)?;
    let id = carrier.next_thread_id();
    let mut header = Thread::header(
        carrier,
        priority,
        b.mode,
        id,
        b.name,
        &VTableFor::<T, F>::VTABLE,
    );
    header.guard = stack.guard_range();
    header.stack_size = stack_size;
    header.refs = AtomicUsize::new(2); // one for the runtime ("alive"), one for the handle
    header.created_suspended = b.start_suspended;
    header.life = UnsafeCell::new(if b.start_suspended {
        Life::Suspended
    } else {
        Life::Ready
    });
    let top = stack.top();
    header.stack = UnsafeCell::new(Some(stack));
    let boxed = Box::new(Spawned::<T, F> {
        header,
        result: UnsafeCell::new(None),
        body: UnsafeCell::new(Some(f)),
    });
    let t = Box::into_raw(boxed) as *mut Thread;
    // SAFETY: the stack is ours, mapped, page aligned, and much larger than 128 bytes.
    unsafe {
        *(*t).sp.get() = crate::arch::init_stack(top, runtime::thread_entry, t as usize);
    }
    // SAFETY: `t` is a fully initialised thread of this carrier, in no queue.
    unsafe { carrier.adopt(t, b.start_suspended) };
    Ok(JoinHandle {
        t,
        _marker: PhantomData,
    })
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

// SAFETY: every operation on the handle either goes through the thread's `life_lock` / atomics
// or hands the work to the owning carrier (`runtime::wake`), so the handle may move between
// OS threads as long as the result type may.
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
        self.thread().done.load(Ordering::Acquire) != 0
    }

    /// Starts a thread created with `start_suspended(true)`. Returns `true` if this call
    /// started it, `false` if it was not suspended (already started, cancelled or done).
    pub fn resume(&self) -> bool {
        let t = self.thread();
        let was = t.life_lock.with(|| {
            // SAFETY: `life` is protected by `life_lock`, which we hold.
            let life = unsafe { &mut *t.life.get() };
            if *life == Life::Suspended {
                *life = Life::Ready;
                true
            } else {
                false
            }
        });
        if was {
            runtime::wake(self.t);
        }
        was
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
        let (cancelled, was_suspended) = t.life_lock.with(|| {
            // SAFETY: `life` and `cancel` are protected by `life_lock`, which we hold.
            let life = unsafe { &mut *t.life.get() };
            match *life {
                Life::Suspended => {
                    t.cancel.set(true);
                    *life = Life::Ready;
                    (true, true)
                }
                Life::Ready => {
                    t.cancel.set(true);
                    (true, false)
                }
                Life::Started | Life::Done => (false, false),
            }
        });
        if was_suspended {
            // Let it run its (cheap) cancellation path so the outcome gets published.
            runtime::wake(self.t);
        }
        cancelled
    }

    /// Waits for the thread and returns what became of it. Joining a thread that is still
    /// suspended starts it (cancel it first if it must not run).
    ///
    /// From a green thread this blocks only the caller; from an OS thread outside any runtime
    /// it blocks that OS thread.
    pub fn join(self) -> JoinOutcome<T> {
        if self.thread().created_suspended {
            self.resume();
        }
        runtime::wait_done(self.t);
        // SAFETY: `done` was observed non-zero with Acquire, so the result slot is final and no
        // one else accesses it; the handle is the only reader. The prefix cast is valid because
        // both structs are repr(C) with identical leading fields.
        let r = unsafe { (*(*(self.t as *const SpawnedHead<T>)).result.get()).take() };
        r.unwrap_or(JoinOutcome::Abandoned)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { Thread::release(self.t) }
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
