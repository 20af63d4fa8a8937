//! [`Pool`]: one carrier (an OS thread running a [`Runtime`](crate::Runtime)) per CPU, which
//! share the threads that have not started yet.
//!
//! # Placement, balance, and why a started thread never migrates
//!
//! A thread spawned on one of the pool's carriers (`uthread::spawn` in a pool thread, or
//! `pool.spawn(f)` from one) is queued on that carrier; one spawned from any other OS thread
//! goes to the pool's shared injector. An idle carrier takes threads that **have not started**
//! from the injector and from busy siblings (half of what a sibling has queued), so a burst
//! spawned on one carrier spreads over all of them (`runtime/steal.rs` has the protocol;
//! `PoolBuilder::stealing(false)` turns the taking from siblings off). `pool.spawn_on(i, f)`
//! places a thread on carrier `i` for good.
//!
//! Once started, a thread runs on its carrier until it finishes. Started green threads are not
//! moved between carriers, even when one carrier is busy and another idle, because a started
//! thread may hold state that belongs to its OS thread: thread-locals (`thread_local!`, and C
//! libraries' `__thread` variables such as `errno`), locks that are owned by an OS thread
//! (`std::sync::Mutex` guards, glibc's stdio locks), the signal mask,
//! `std::thread::current()`. Moving a thread between two of its instructions would silently
//! change all of those under it. (Go can migrate goroutines because its compiler controls what
//! code may do; Rust cannot.) A thread that has not started holds none of that, which is what
//! makes taking it safe. The price: long-lived threads whose loads turn out unequal once
//! started stay where they started.
//!
//! # Shutdown
//!
//! [`Pool::join`] waits until every thread spawned through the pool has finished, then stops
//! the carriers. [`Pool::shutdown`] (and dropping the pool) stops them at once: each carrier's
//! runtime then ends as `block_on` does, running its runnable and sleeping threads to
//! completion and abandoning the threads that are blocked (a thread parked on a socket gets
//! that socket closed). Spawning fails once either has begun.

use crate::runtime::block_on::RuntimeBuilder;
use crate::runtime::carrier::{carrier_ptr, Carrier, Group};
use crate::runtime::dispatch::{spawn_current, spawn_injected, spawn_remote};
use crate::runtime::handle::Handle;
use crate::runtime::stats::Stats;
use crate::sync::Semaphore;
use crate::thread::{Builder, JoinHandle};
use std::cell::Cell;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};

thread_local! {
    /// On a pool's carrier OS thread: (the pool's id, the carrier's index).
    static HERE: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

static NEXT_POOL_ID: AtomicUsize = AtomicUsize::new(1);

/// Configures a [`Pool`].
#[derive(Clone, Debug, Default)]
pub struct PoolBuilder {
    carriers: Option<usize>,
    pin: bool,
    no_stealing: bool,
    runtime: RuntimeBuilder,
    name: Option<String>,
}

impl PoolBuilder {
    /// How many carriers (default: one per CPU this process may run on, `sched_getaffinity`).
    pub fn carriers(mut self, n: usize) -> Self {
        self.carriers = Some(n.max(1));
        self
    }

    /// Pins carrier `i` to the `i`-th allowed CPU (modulo their number). Default off: the
    /// kernel places the carriers.
    pub fn pin(mut self, on: bool) -> Self {
        self.pin = on;
        self
    }

    /// Whether an idle carrier takes threads that have not started from busy siblings (default
    /// `true`). Off, each carrier runs the threads spawned on it (threads spawned from outside
    /// the pool still go to whichever carrier takes them from the injector first).
    pub fn stealing(mut self, on: bool) -> Self {
        self.no_stealing = !on;
        self
    }

    /// The settings of every carrier's runtime (quantum, stack size, guard pages, stack pool).
    pub fn runtime(mut self, b: RuntimeBuilder) -> Self {
        self.runtime = b;
        self
    }

    /// A prefix for the carriers' OS thread names (`{name}-{i}`; default `uthread-pool`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Starts the carriers. Fails if an OS thread cannot be started, a runtime setting is
    /// invalid, or pinning is asked for and refused.
    pub fn build(self) -> io::Result<Pool> {
        let cpus = allowed_cpus();
        let n = self.carriers.unwrap_or(cpus.len().max(1));
        let id = NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed);
        let name = self.name.unwrap_or_else(|| "uthread-pool".into());
        let mut slots = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        let mut failure = None;
        let group = Arc::new(Group::new(!self.no_stealing));
        for i in 0..n {
            let (tx, rx) = mpsc::channel();
            let stop = Arc::new(Semaphore::new(0));
            let stop2 = Arc::clone(&stop);
            let rb = self.runtime.clone();
            let cpu = self
                .pin
                .then(|| cpus.get(i % cpus.len().max(1)).copied())
                .flatten();
            let g = Arc::clone(&group);
            let spawned = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || carrier_main(id, i, cpu, rb, g, stop2, tx));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            match rx.recv() {
                Ok(Ok(handle)) => slots.push(Slot {
                    handle,
                    stop,
                    load: AtomicUsize::new(0),
                }),
                Ok(Err(e)) => {
                    failure = Some(e);
                    break;
                }
                Err(_) => {
                    failure = Some(io::Error::other("uthread: a pool carrier died at start"));
                    break;
                }
            }
        }
        let carriers: Vec<&Arc<Carrier>> = slots.iter().map(|s| s.handle.carrier()).collect();
        group.set_carriers(&carriers);
        let pool = Pool {
            shared: Arc::new(Shared {
                id,
                slots,
                group,
                closing: AtomicBool::new(false),
                inflight: AtomicUsize::new(0),
                live: AtomicUsize::new(0),
                idle_lock: Mutex::new(()),
                idle: Condvar::new(),
            }),
            threads,
        };
        match failure {
            Some(e) => Err(e), // dropping `pool` stops the carriers that did start
            None => Ok(pool),
        }
    }
}

/// The body of a carrier's OS thread: pin, build the runtime, report its handle, run until
/// told to stop.
fn carrier_main(
    pool: usize,
    index: usize,
    cpu: Option<usize>,
    rb: RuntimeBuilder,
    group: Arc<Group>,
    stop: Arc<Semaphore>,
    tx: mpsc::Sender<io::Result<Handle>>,
) {
    if let Some(cpu) = cpu {
        if let Err(e) = pin_to(cpu) {
            let _ = tx.send(Err(e));
            return;
        }
    }
    let rt = match rb.build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = tx.send(Err(e));
            return;
        }
    };
    // Its descriptors now, so a process out of them hears why (EMFILE) from `build`.
    if let Err(e) = rt.prepare() {
        let _ = tx.send(Err(e));
        return;
    }
    rt.join_group(group, index);
    HERE.with(|h| h.set(Some((pool, index))));
    let handle = rt.handle();
    let r = rt.try_block_on(move || {
        // The handle is sent from inside, so the poller exists before anyone spawns here.
        let _ = tx.send(Ok(handle));
        stop.acquire();
    });
    HERE.with(|h| h.set(None));
    if let Err(e) = r {
        eprintln!("uthread: pool carrier {index} ended with an error: {e}");
    }
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; we add one CPU and apply it to the
    // calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

struct Slot {
    /// Keeps the carrier's runtime waiting for work (never a deadlock) and reaches its inbox.
    handle: Handle,
    stop: Arc<Semaphore>,
    /// Threads spawned through the pool that started here and have not finished.
    load: AtomicUsize,
}

struct Shared {
    id: usize,
    slots: Vec<Slot>,
    /// What the carriers share to balance unstarted threads (the injector among it).
    group: Arc<Group>,
    closing: AtomicBool,
    /// Spawns that passed the `closing` check and have not yet reached their carrier's inbox.
    inflight: AtomicUsize,
    /// Threads spawned through the pool and not finished.
    live: AtomicUsize,
    idle_lock: Mutex<()>,
    idle: Condvar,
}

/// One carrier per CPU, sharing the threads that have not started (see the module docs for the
/// placement, and for why a started thread never migrates).
///
/// ```
/// let pool = uthread::Pool::builder().carriers(2).build().unwrap();
/// let hs: Vec<_> = (0..8u64).map(|i| pool.spawn(move || i * i)).collect();
/// let sum: u64 = hs.into_iter().map(|h| h.join().finished().unwrap()).sum();
/// assert_eq!(sum, 140);
/// pool.join();
/// ```
pub struct Pool {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Spawns onto a [`Pool`] from anywhere (clone it into green threads); it does not keep the
/// pool's carriers running.
#[derive(Clone)]
pub struct PoolHandle {
    shared: Arc<Shared>,
}

/// The spawning calls and queries `Pool` and `PoolHandle` share, over their `shared` state.
macro_rules! spawn_api {
    () => {
        /// Spawns `f`: queued on the calling carrier when called from one of the pool's green
        /// threads, else in the pool's injector; an idle carrier may take it until it starts.
        ///
        /// # Panics
        /// If the pool is shutting down or the stack cannot be mapped ([`spawn_with`] returns the
        /// error instead).
        ///
        /// [`spawn_with`]: Pool::spawn_with
        pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
        where
            F: FnOnce() -> T + Send + 'static,
            T: Send + 'static,
        {
            self.shared
                .spawn(Builder::new(), None, f)
                .unwrap_or_else(|e| panic!("{e}"))
        }

        /// Spawns `f` on carrier `index` (modulo the number of carriers), e.g. one accept loop per
        /// carrier. Panics as [`spawn`](Pool::spawn) does.
        pub fn spawn_on<F, T>(&self, index: usize, f: F) -> JoinHandle<T>
        where
            F: FnOnce() -> T + Send + 'static,
            T: Send + 'static,
        {
            self.shared
                .spawn(Builder::new(), Some(index), f)
                .unwrap_or_else(|e| panic!("{e}"))
        }

        /// Spawns `f` with `builder`'s settings, on carrier `on` (for good) or as [`spawn`] does.
        ///
        /// [`spawn`]: Pool::spawn
        pub fn spawn_with<F, T>(
            &self,
            builder: Builder,
            on: Option<usize>,
            f: F,
        ) -> io::Result<JoinHandle<T>>
        where
            F: FnOnce() -> T + Send + 'static,
            T: Send + 'static,
        {
            self.shared.spawn(builder, on, f)
        }

        /// The number of carriers.
        pub fn carriers(&self) -> usize {
            self.shared.slots.len()
        }

        /// The index of the carrier the caller runs on, if it runs on one of this pool's.
        pub fn current_carrier(&self) -> Option<usize> {
            self.shared.current_carrier()
        }

        /// Threads spawned through the pool that have started on each carrier and not finished
        /// (threads still queued are in no carrier's count).
        pub fn loads(&self) -> Vec<usize> {
            self.shared.loads()
        }
    };
}

impl Pool {
    /// A pool with one carrier per allowed CPU, default runtime settings, not pinned.
    pub fn new() -> io::Result<Pool> {
        Pool::builder().build()
    }

    /// Starts configuring a pool.
    pub fn builder() -> PoolBuilder {
        PoolBuilder::default()
    }

    /// A handle that spawns onto this pool from any OS thread or green thread.
    pub fn handle(&self) -> PoolHandle {
        PoolHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    spawn_api!();

    /// Each carrier's counters.
    pub fn stats(&self) -> Vec<Stats> {
        self.shared
            .slots
            .iter()
            .map(|s| s.handle.carrier().stats_snapshot())
            .collect()
    }

    /// Waits until every thread spawned through the pool has finished (threads they spawn
    /// through the pool included), then stops the carriers and waits for their OS threads.
    ///
    /// # Panics
    /// When called on one of the pool's own carriers: it would wait for itself.
    pub fn join(self) {
        assert!(
            self.shared.current_carrier().is_none(),
            "uthread: Pool::join called on one of the pool's own carriers would wait for \
             itself; join from outside the pool, or use shutdown"
        );
        self.shared.wait_idle();
        // Drop stops the carriers.
    }

    /// Stops the carriers now: each runs its runnable and sleeping threads to completion and
    /// abandons the blocked ones (module docs), then its OS thread ends; waits for that.
    pub fn shutdown(self) {}

    fn stop(&mut self) {
        let s = &self.shared;
        s.closing.store(true, Ordering::SeqCst);
        // Let spawns that got in before the flag reach their carrier's inbox.
        while s.inflight.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        for slot in &s.slots {
            slot.stop.release();
        }
        if s.current_carrier().is_some() {
            // Dropped on one of its own carriers: that OS thread cannot wait for itself.
            // The carriers still stop; their OS threads are detached.
            self.threads.clear();
            return;
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

impl PoolHandle {
    spawn_api!();
}

/// Counts a pool thread in on the carrier where it starts, and out when its body ends
/// (normally, by a panic, or unrun when it is cancelled).
struct Finished {
    shared: Arc<Shared>,
    started_on: Cell<Option<usize>>,
}

impl Finished {
    fn start(self) -> Finished {
        let here = self.shared.current_carrier();
        if let Some(i) = here {
            self.shared.slots[i].load.fetch_add(1, Ordering::Relaxed);
        }
        self.started_on.set(here);
        self
    }
}

impl Drop for Finished {
    fn drop(&mut self) {
        let s = &self.shared;
        if let Some(i) = self.started_on.get() {
            s.slots[i].load.fetch_sub(1, Ordering::Relaxed);
        }
        s.count_out();
    }
}

impl Shared {
    fn current_carrier(&self) -> Option<usize> {
        match HERE.with(|h| h.get()) {
            Some((pool, i)) if pool == self.id => Some(i),
            _ => None,
        }
    }

    fn loads(&self) -> Vec<usize> {
        self.slots
            .iter()
            .map(|s| s.load.load(Ordering::Relaxed))
            .collect()
    }

    fn count_out(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            // An OS lock taken from a green thread: not preemptible meanwhile.
            crate::preempt::critical_section(|| {
                let _g = self.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
                self.idle.notify_all();
            });
        }
    }

    fn wait_idle(&self) {
        let mut g = self.idle_lock.lock().unwrap_or_else(|p| p.into_inner());
        while self.live.load(Ordering::Acquire) != 0 {
            g = self.idle.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn spawn<F, T>(
        self: &Arc<Self>,
        builder: Builder,
        on: Option<usize>,
        f: F,
    ) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // Not preemptible until the thread has reached its carrier's inbox: `stop` waits
        // for `inflight` to drop to zero, possibly on this very carrier.
        let _no_preemption = crate::preempt::PreemptGuard::new();
        self.inflight.fetch_add(1, Ordering::SeqCst);
        if self.closing.load(Ordering::SeqCst) {
            self.inflight.fetch_sub(1, Ordering::SeqCst);
            return Err(io::Error::other(
                "uthread: the pool is shutting down; it accepts no new threads",
            ));
        }
        self.live.fetch_add(1, Ordering::AcqRel);
        let guard = Finished {
            shared: Arc::clone(self),
            started_on: Cell::new(None),
        };
        let body = move || {
            let _counted = guard.start();
            f()
        };
        let mut opts = builder.into_options();
        let r = match on {
            Some(i) => {
                // Placed for good: never queued where another carrier could take it.
                opts.placed = true;
                let target: &Carrier = self.slots[i % self.slots.len()].handle.carrier();
                if std::ptr::eq(carrier_ptr(), target) {
                    spawn_current(opts, body)
                } else {
                    spawn_remote(target, opts, body)
                }
            }
            None if self.current_carrier().is_some() => spawn_current(opts, body),
            None => spawn_injected(&self.group, self.slots[0].handle.carrier(), opts, body),
        };
        self.inflight.fetch_sub(1, Ordering::SeqCst);
        // On failure the body was dropped unrun, and its guard counted the thread out.
        r.map(JoinHandle::from_raw)
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("carriers", &self.carriers())
            .field("loads", &self.loads())
            .finish()
    }
}

impl fmt::Debug for PoolHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolHandle")
            .field("carriers", &self.carriers())
            .finish()
    }
}
