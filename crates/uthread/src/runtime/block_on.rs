//! What a user builds and enters: [`Runtime`] with its [`RuntimeBuilder`], `block_on` (which
//! turns the calling OS thread into the carrier for the duration of the call), [`RunError`]
//! and [`run`].

use super::carrier::{carrier_ptr, release_handle, set_carrier, Carrier, Config, Remote};
use super::guard::{self, AltStack};
use super::handle::Handle;
use super::stats::Stats;
use super::{dispatch, ops, owner, tick};
use crate::arch::FpEnv;
use crate::poll::poller::Poller;
use crate::preempt::count as preempt;
use crate::stack::StackPool;
use crate::sys;
use crate::tcb::{take_result, JoinOutcome, SpawnOptions, Thread};
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::resume_unwind;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
                main_own_fp_env: false,
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

    /// Whether the green thread that runs the `block_on` closure keeps a floating-point
    /// environment of its own, as [`Builder::own_fp_env`](crate::Builder::own_fp_env) does for
    /// spawned threads (default `false`: it runs in the carrier's, like every thread that does
    /// not declare one, and must leave it unchanged).
    pub fn main_own_fp_env(mut self, yes: bool) -> Self {
        self.config.main_own_fp_env = yes;
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
            return Err(sys::invalid("quantum must be between 100 µs and 100 ms"));
        }
        let seed = Instant::now().elapsed().as_nanos() as u64 ^ 0x9E37_79B9_7F4A_7C15;
        Ok(Runtime {
            carrier: Arc::new(Carrier::new(self.config, seed)),
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

    /// Makes this (not yet running) runtime carrier `index` of a pool's group.
    pub(crate) fn join_group(&self, group: Arc<super::carrier::Group>, index: usize) {
        preempt::disable();
        // SAFETY: not running (only `Pool` calls this, before the carrier's `block_on`), so
        // nobody else touches `local`.
        unsafe { super::steal::join_group(&mut *self.carrier.local(), group, index) };
        preempt::enable();
    }

    /// Opens now the file descriptors the first `block_on` would open (the carrier's poller), so
    /// that a process short of descriptors (`ulimit -n`) learns it here, as an error, rather
    /// than from a panic of `block_on`. Does nothing once they are open.
    ///
    /// # Errors
    /// The poller's `epoll_create1` or `eventfd` failed (EMFILE when out of descriptors).
    pub fn prepare(&self) -> io::Result<()> {
        if c_poller_missing(&self.carrier) {
            let p = Poller::new()?;
            let _ = self.carrier.poller.set(Arc::new(p));
        }
        Ok(())
    }

    /// A handle other OS threads can use to run code on this runtime's owner context.
    pub fn handle(&self) -> Handle {
        Handle::new(&self.carrier)
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
        self.prepare().map_err(RunError::Io)?;
        tick::install_handler();
        guard::install_handler();
        preempt::on_pending(ops::yield_for_preemption);
        let _alt = AltStack::ensure();
        let c: &Carrier = &self.carrier;
        let saved_count = preempt::count();
        preempt::set_count(1);
        let mut sched = Box::new(Thread::scheduler(c.addr()));
        // Never queued: a yield from the scheduler context finds itself given back.
        sched.level_key = crate::sched::NEVER_QUEUED;
        // SAFETY: no other OS thread is inside block_on for this carrier (Runtime is !Send and
        // !Sync, and nesting was refused above).
        unsafe {
            let l = &mut *c.local();
            l.sched = &mut *sched;
            l.current = l.sched;
            l.errno = sys::errno_location();
            l.sig_blocked = false;
            // The environment every thread that does not declare its own runs in.
            l.default_fp_env = FpEnv::current();
        }
        set_carrier(c);
        c.running.store(true, Ordering::SeqCst);
        c.inbox_flag.store(true, Ordering::SeqCst); // pick up anything queued while stopped

        let main = dispatch::spawn_current(
            SpawnOptions {
                name: Some("main".into()),
                stack_size: Some(c.config.main_stack_size),
                own_fp_env: c.config.main_own_fp_env,
                ..SpawnOptions::default()
            },
            f,
        );
        let outcome = match main {
            Ok(main) => {
                let main = MainThread::<R>::new(main);
                // SAFETY: we are the carrier thread with the count raised, in the scheduler
                // context; the main thread is live (we hold its reference).
                let deadlock = unsafe { owner::run(c, &*main.t) };
                // SAFETY: as above.
                unsafe { owner::abandon_all(&mut *c.local()) };
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
            owner::abandon_all(l);
            Carrier::disarm_timer(l);
            l.timer = None;
            l.timer_error = false;
            l.current = null_mut();
            l.sched = null_mut();
            // The scheduler context already runs in this environment unless a `synchronize` or
            // `queue` callback changed it; the caller gets back the one it came in with.
            l.default_fp_env.load();
        }
        c.running.store(false, Ordering::SeqCst);
        set_carrier(core::ptr::null());
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
}

/// The carrier's poller is created by `prepare` or, failing that, the first `block_on` (so that
/// building a runtime never fails for lack of descriptors).
fn c_poller_missing(c: &Carrier) -> bool {
    c.poller.get().is_none()
}

/// `block_on`'s reference to its main thread, given up like a dropped `JoinHandle` (also if
/// anything unwinds before the join).
struct MainThread<R> {
    t: *mut Thread,
    _result: PhantomData<R>,
}

impl<R> MainThread<R> {
    fn new(t: *mut Thread) -> Self {
        MainThread {
            t,
            _result: PhantomData,
        }
    }

    /// Waits for the main thread (it is done or abandoned once the scheduler loop returned)
    /// and takes its outcome.
    fn join(self) -> JoinOutcome<R> {
        ops::wait_done(self.t);
        // SAFETY: `t` was spawned returning `R`, `DONE` was observed with Acquire by
        // `wait_done`, and we hold its only handle.
        unsafe { take_result::<R>(self.t) }.unwrap_or(JoinOutcome::Abandoned)
    }
}

impl<R> Drop for MainThread<R> {
    fn drop(&mut self) {
        // SAFETY: we hold the handle's reference and give it up, once.
        unsafe { release_handle(self.t) }
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
        }
        let items = match self.carrier.inbox.lock() {
            Ok(mut g) => std::mem::take(&mut *g),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        for item in items {
            if let Remote::Adopt(t, _) = item {
                // SAFETY: built for this carrier and never adopted; not running (above).
                unsafe { owner::abandon_unadopted(&mut *self.carrier.local(), t) };
            }
        }
        let mut unstarted = Vec::new();
        self.carrier.fresh.take(usize::MAX, |t| unstarted.push(t));
        for t in unstarted {
            // SAFETY: queued here and never adopted (nobody can take it any more: the
            // carrier's pool stopped before its runtime is dropped); not running.
            unsafe { owner::abandon_unadopted(&mut *self.carrier.local(), t) };
        }
        // SAFETY: as above.
        if unsafe { (*self.carrier.local()).abandoned_any } {
            // Abandoned threads point at the carrier and may still be "woken" by
            // primitives; keep it alive forever (a bounded leak, documented).
            std::mem::forget(Arc::clone(&self.carrier));
        }
        preempt::enable();
    }
}

/// Runs `f` on a fresh default runtime (see [`Runtime::block_on`]).
pub fn run<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    Runtime::new().block_on(f)
}
