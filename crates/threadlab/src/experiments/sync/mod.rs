//! `sync`: uncontended lock and semaphore costs, and the wake-up latency of a blocked thread
//! (PThreads 1999, section 4.3).

mod contended;

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Interleaved, Outcome, Probe};
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::probe::run_probe;
use crate::measure::process::{mono_ns, wait_until};
use crate::measure::sampler::Sampler;
use crate::measure::spawn::{spawn, spawn_scoped};
use crate::measure::stats::Summary;
use crate::measure::units::Unit;
use crate::seeds;
use crate::sys::{futex_wait, futex_wake, gettid, task_state};

pub struct SyncCosts;

/// A pthread mutex with a stable address (glibc mutexes must not move once used).
struct PthreadMutex(Box<UnsafeCell<libc::pthread_mutex_t>>);

impl PthreadMutex {
    fn new() -> PthreadMutex {
        PthreadMutex(Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)))
    }
}

impl Drop for PthreadMutex {
    fn drop(&mut self) {
        // SAFETY: the mutex is unlocked (every lock in this file is paired with an unlock).
        unsafe {
            libc::pthread_mutex_destroy(self.0.get());
        }
    }
}

/// Time of `n` lock+unlock pairs of a default (private, normal) pthread mutex.
fn pthread_mutex_pairs(m: &PthreadMutex, n: u64) -> Duration {
    let p = m.0.get();
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: p is an initialised mutex owned by this thread's caller for the whole loop.
        unsafe {
            libc::pthread_mutex_lock(std::hint::black_box(p));
            libc::pthread_mutex_unlock(p);
        }
    }
    t.elapsed()
}

/// `threadlab __probe mutex-single`: the mutex pair measured in a process that never created a
/// thread.
///
/// glibc skips the atomic instruction in pthread_mutex_lock while the process has never created
/// a thread, and the flag is never reset: so this must be measured in a process that never had a
/// second thread. threadlab re-executes itself, which is single-threaded until the probe ends,
/// and reads the summary (per-op ns) it prints as JSON.
pub const MUTEX_SINGLE_PROBE: Probe = Probe {
    name: "mutex-single",
    run: |mode, cpu| {
        pin_current_thread(cpu)?;
        let cancel = Cancel::never();
        let sampler = Sampler::new(mode.sampler_config(), &cancel);
        let m = PthreadMutex::new();
        let s = sampler.per_op_ns(|n| Ok(pthread_mutex_pairs(&m, n)))?;
        serde_json::to_string(&s).map_err(|e| Error::Fail(e.to_string()))
    },
};

fn single_thread_probe(ctx: &Ctx, cpu: usize) -> Result<Summary> {
    let text = run_probe(MUTEX_SINGLE_PROBE.name, ctx.mode, cpu, ctx.cancel)?;
    serde_json::from_str(text.trim())
        .map_err(|e| Error::Fail(format!("the single-thread probe printed no summary: {e}")))
}

/// A thread that only sleeps, so the process has more than one thread (the multi-threaded state).
struct Companion {
    stop: std::sync::mpsc::Sender<()>,
    handle: std::thread::JoinHandle<()>,
}

impl Companion {
    fn start() -> Result<Companion> {
        let (stop, rx) = std::sync::mpsc::channel::<()>();
        let handle = spawn("a sleeping companion thread", move || {
            let _ = rx.recv();
        })?;
        Ok(Companion { stop, handle })
    }
    fn stop(self) {
        drop(self.stop);
        let _ = self.handle.join();
    }
}

fn semaphore_pairs(n: u64) -> Result<Duration> {
    let sem = Box::new(UnsafeCell::new(unsafe {
        // SAFETY: sem_t is plain data; sem_init below initialises it.
        std::mem::zeroed::<libc::sem_t>()
    }));
    // SAFETY: sem points to writable, stable memory; pshared = 0 (threads of this process).
    if unsafe { libc::sem_init(sem.get(), 0, 0) } != 0 {
        return Err(Error::os("sem_init"));
    }
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: sem is initialised; post then wait never blocks (the count goes 0 -> 1 -> 0).
        unsafe {
            libc::sem_post(sem.get());
            libc::sem_wait(sem.get());
        }
    }
    let took = t.elapsed();
    // SAFETY: no thread waits on sem.
    unsafe {
        libc::sem_destroy(sem.get());
    }
    Ok(took)
}

/// Shared state of the wake-up measurement.
struct WakeShared {
    /// The futex the waiter blocks on: 1 = go.
    go: AtomicU32,
    /// The futex the waker blocks on until the waiter has taken its stamp: 1 = done.
    back: AtomicU32,
    /// Clock read by the waker just before FUTEX_WAKE.
    stamp: AtomicU64,
    /// Sum of waiter-side latencies in the current batch.
    total_ns: AtomicU64,
    waiter_tid: AtomicI32,
    stop: AtomicBool,
}

/// Wake-up latency of a thread blocked in FUTEX_WAIT: from just before the waker's FUTEX_WAKE to
/// the waiter's first instruction after its FUTEX_WAIT returns.
///
/// Before each wake the waker checks in procfs that the waiter is really asleep ('S'), so every
/// sample is the wake-up of a blocked thread, never of one still on its way to sleep. That check
/// is outside the timed span.
fn wake_latency(
    sampler: &Sampler,
    wakes_per_sample: u64,
    waker_cpu: usize,
    waiter_cpu: usize,
) -> Result<Summary> {
    let sh = WakeShared {
        go: AtomicU32::new(0),
        back: AtomicU32::new(0),
        stamp: AtomicU64::new(0),
        total_ns: AtomicU64::new(0),
        waiter_tid: AtomicI32::new(0),
        stop: AtomicBool::new(false),
    };
    let _pin = PinGuard::pin(waker_cpu)?;
    std::thread::scope(|s| {
        let waiter = spawn_scoped(s, "the waiting thread", || -> Result<()> {
            pin_current_thread(waiter_cpu)?;
            sh.waiter_tid.store(gettid(), Ordering::Release);
            loop {
                while sh.go.load(Ordering::Acquire) == 0 {
                    if sh.stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    futex_wait(&sh.go, 0, false);
                }
                let woke = mono_ns();
                sh.total_ns.fetch_add(
                    woke.saturating_sub(sh.stamp.load(Ordering::Acquire)),
                    Ordering::AcqRel,
                );
                sh.go.store(0, Ordering::Release);
                sh.back.store(1, Ordering::Release);
                futex_wake(&sh.back, 1, false);
            }
        })?;
        let result = (|| {
            wait_until(|| sh.waiter_tid.load(Ordering::Acquire) != 0, 5_000_000_000)?;
            let tid = sh.waiter_tid.load(Ordering::Acquire);
            sampler.per_op_ns_fixed(wakes_per_sample, |n| {
                sh.total_ns.store(0, Ordering::Release);
                for _ in 0..n {
                    // Until the waiter is asleep in the kernel, let it run.
                    let mut tries = 0u32;
                    while task_state(tid) != Some('S') {
                        crate::sys::sched_yield();
                        tries += 1;
                        if tries > 100_000 {
                            return Err(Error::Fail("the waiting thread never blocked".into()));
                        }
                    }
                    sh.back.store(0, Ordering::Release);
                    sh.stamp.store(mono_ns(), Ordering::Release);
                    sh.go.store(1, Ordering::Release);
                    futex_wake(&sh.go, 1, false);
                    while sh.back.load(Ordering::Acquire) == 0 {
                        futex_wait(&sh.back, 0, false);
                    }
                }
                Ok(Duration::from_nanos(sh.total_ns.load(Ordering::Acquire)))
            })
        })();
        sh.stop.store(true, Ordering::Release);
        sh.go.store(0, Ordering::Release);
        // The waiter may be asleep with go == 0: wake it so it sees stop.
        futex_wake(&sh.go, 1, false);
        let waited = waiter
            .join()
            .map_err(|_| Error::Fail("the waiting thread panicked".into()))?;
        waited?;
        result
    })
}

const INFO: Info = Info {
    name: "sync",
    study: &seeds::PTHREADS_1999,
    measures: "uncontended mutex and semaphore pairs (multi- and single-threaded process), and futex wake-up latency on the same and different CPUs",
    rough_secs: [1.0, 4.0, 25.0],
};

impl Experiment for SyncCosts {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpu = home_cpu();
        let placement = Placement::SameCpu(cpu);

        {
            let _pin = PinGuard::pin(cpu)?;
            let companion = Companion::start()?;
            let pthread = PthreadMutex::new();
            let std_mutex = std::sync::Mutex::new(0u64);
            let mut group = Interleaved::new();
            group
                .row(
                    "sync.mutex",
                    Unit::Ns,
                    placement,
                    "pthread_mutex_lock + unlock of a default mutex, never contended, in a process \
                     with more than one thread (a second thread sleeps), so glibc uses its atomic \
                     path; loop overhead (~1 ns) not subtracted",
                    |n| Ok(pthread_mutex_pairs(&pthread, n)),
                )
                .row(
                    "sync.mutex.std",
                    Unit::Ns,
                    placement,
                    "std::sync::Mutex lock + increment + unlock (a futex word and a poison flag), \
                     never contended, multi-threaded process",
                    |n| {
                        let t = Instant::now();
                        for _ in 0..n {
                            *std::hint::black_box(&std_mutex)
                                .lock()
                                .unwrap_or_else(|e| e.into_inner()) += 1;
                        }
                        Ok(t.elapsed())
                    },
                )
                .row(
                    "sync.semaphore",
                    Unit::Ns,
                    placement,
                    "sem_post + sem_wait of an unnamed POSIX semaphore (count 0 -> 1 -> 0, never \
                     blocks), multi-threaded process",
                    semaphore_pairs,
                );
            group.measure(ctx, out)?;
            companion.stop();
        }

        ctx.step("sync.mutex.single_thread")?;
        match single_thread_probe(ctx, cpu) {
            Ok(s) => {
                out.add_ns(
                    "sync.mutex.single_thread",
                    Unit::Ns,
                    &s,
                    placement,
                    "pthread_mutex_lock + unlock in a process that has never created a thread \
                     (threadlab re-runs itself for this, so it cannot be interleaved with the \
                     rows above): glibc then takes its single-thread shortcut without atomic \
                     instructions",
                )?;
            }
            Err(Error::Skip(r)) => out.skip("sync.mutex.single_thread", r),
            Err(e) => return Err(e),
        }

        // Each wake costs a procfs read and two hand-offs, ~20-60 us in all.
        let wakes = ctx.mode.pick(20, 200, 200);
        let sampler = ctx.sampler();
        ctx.step("sync.wake.same_cpu")?;
        let s = wake_latency(&sampler, wakes, cpu, cpu)?;
        out.add_ns(
            "sync.wake.same_cpu",
            Unit::Us,
            &s,
            placement,
            "from just before FUTEX_WAKE to the waiter running, both threads on one CPU: includes \
             the wake syscall, the waker blocking (it waits for the waiter's reply) and the switch; \
             the waiter was verified asleep (procfs state S) before each wake",
        )?;

        match cpu_pair() {
            Some((a, b)) => {
                ctx.step("sync.wake.cross_cpu")?;
                let s = wake_latency(&sampler, wakes, a, b)?;
                out.add_ns(
                    "sync.wake.cross_cpu",
                    Unit::Us,
                    &s,
                    Placement::CrossCpu(a, b),
                    "from just before FUTEX_WAKE to the waiter running on another CPU that was \
                     idle: includes the wake syscall, the inter-processor interrupt and the idle \
                     CPU's exit from its idle state (see cpuidle in the environment)",
                )?;
            }
            None => out.skip("sync.wake.cross_cpu", "this process may use only one CPU"),
        }

        contended::contended_metrics(ctx, out)?;
        out.explain_modes(
            &ctx.idle_wakeup_modes(),
            "on one CPU nothing waits for an idle CPU, so two clusters here are two phases of the \
             host (see the drift references and the experiment's attempts)",
        );

        let ratio = out
            .median("sync.mutex")
            .zip(out.median("sync.mutex.single_thread"));
        out.conclusion = Some(match ratio {
            Some((multi, single)) => format!(
                "An uncontended mutex pair costs {multi:.1} ns ({single:.1} ns before the process's \
                 first thread, when glibc skips the atomic): locking is cheap until it is \
                 contended, and the real cost of blocking is the wake-up (see sync.wake)."
            ),
            None => "An uncontended mutex pair costs a few ns; the cost of blocking is the \
                     wake-up (see sync.wake)."
                .into(),
        });
        Ok(())
    }
}
