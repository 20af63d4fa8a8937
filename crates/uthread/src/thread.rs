//! The spawning API: `Builder`, `spawn` and `JoinHandle`. The control block they act on is in
//! `tcb.rs`; the runtime does the work.

use crate::race::{self, RacePoint};
use crate::runtime::carrier::release_handle;
use crate::runtime::dispatch::spawn_current;
use crate::runtime::ops::wait_done;
use crate::runtime::reactor::wake;
use crate::tcb::{life, take_result, JoinOutcome, Mode, Priority, SpawnOptions, Thread};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::Ordering;

/// Spawn parameters, in the manner of `std::thread::Builder`.
///
/// Unlike Delphi's `TThread`, every parameter can be set (including the stack size), a thread
/// starts running unless `start_suspended(true)` is asked for, and a thread that was not
/// cancelled before it started always runs its body.
#[derive(Clone, Debug, Default)]
pub struct Builder {
    opts: SpawnOptions,
}

impl Builder {
    /// Default settings: unnamed, runtime's default stack size, `TimeSharing(10)`,
    /// cooperative, started at once.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the thread (shown in stack-overflow reports and `current_name`).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.opts.name = Some(name.into());
        self
    }

    /// Usable stack size in bytes (rounded up to pages; at least 8 KiB). Preemptive threads
    /// need room for a signal frame (up to ~3.5 KiB with AVX-512): prefer >= 16 KiB.
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.opts.stack_size = Some(bytes);
        self
    }

    /// Scheduling class and priority.
    pub fn priority(mut self, p: Priority) -> Builder {
        self.opts.priority = p;
        self
    }

    /// Cooperative or preemptive.
    pub fn mode(mut self, m: Mode) -> Builder {
        self.opts.mode = m;
        self
    }

    /// If `true`, the thread does not run until [`JoinHandle::resume`] (or `join`) is called.
    pub fn start_suspended(mut self, yes: bool) -> Builder {
        self.opts.start_suspended = yes;
        self
    }

    /// Whether the thread keeps a floating-point environment of its own (default `false`).
    ///
    /// The floating-point environment is MXCSR (SSE rounding mode, exception masks and flags,
    /// flush-to-zero, denormals-are-zero) and the x87 control word (x87 rounding, precision).
    /// By default a green thread runs in its carrier's environment, the one the OS thread had
    /// when it entered `block_on`, and a switch between two such threads does not touch it,
    /// which is most of what keeps a switch cheap. Such a thread must leave the environment as
    /// it found it whenever it may be switched out: a thread that calls `fesetround`, changes
    /// MXCSR (rounding, FTZ/DAZ, exception masks) or the x87 precision without declaring it
    /// leaks the change to every other thread of its carrier, the runtime's own context
    /// included.
    ///
    /// With `own_fp_env(true)` the thread starts in the carrier's environment and may change
    /// it freely: every switch out of it (yield, block, sleep, preemption, exit) saves its
    /// environment and gives the next thread that one's own, or the carrier's; every switch
    /// into it restores its own. Those switches cost a few nanoseconds more (reading MXCSR is
    /// slow); switches between threads that did not declare one cost nothing extra. Also
    /// declare it for a thread that reads the exception flags (`fetestexcept`): other threads'
    /// flags are not kept apart.
    pub fn own_fp_env(mut self, yes: bool) -> Builder {
        self.opts.own_fp_env = yes;
        self
    }

    /// The settings, for spawners other than `spawn` (`Pool`).
    pub(crate) fn into_options(self) -> SpawnOptions {
        self.opts
    }

    /// Spawns on the current runtime. Fails when called outside a runtime, on an invalid
    /// priority, or when the stack cannot be mapped.
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let t = spawn_current(self.opts, f)?;
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
// (`reactor::wake`); the result is read only after `DONE` was observed with Acquire. So the
// handle may move between OS threads as long as the result type may; freeing from a foreign
// OS thread unmaps the stack instead of touching the owner's pool.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only allows resume/cancel/is_finished, which are synchronised as above.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// The handle of `t`, a thread spawned returning `T`, holding the handle's reference.
    pub(crate) fn from_raw(t: *mut Thread) -> JoinHandle<T> {
        JoinHandle {
            t,
            _marker: PhantomData,
        }
    }

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
        self.thread().is_done()
    }

    /// Starts a thread created with `start_suspended(true)`. Returns `true` if this call
    /// started it, `false` if it was not suspended (already started, cancelled or done).
    pub fn resume(&self) -> bool {
        if self.thread().leave_suspended(false) {
            race::pause(RacePoint::WakeAfterLeaveSuspended);
            wake(self.t);
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
            wake(self.t);
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
                        wake(self.t);
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
        wait_done(self.t);
        // SAFETY: the thread was spawned returning `T`; `DONE` was observed with Acquire, so
        // the result slot is final; the handle is its only reader.
        unsafe { take_result::<T>(self.t) }.unwrap_or(JoinOutcome::Abandoned)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: we own the handle's reference and give it up.
        unsafe { release_handle(self.t) }
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
