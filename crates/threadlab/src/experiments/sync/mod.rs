//! `sync`: uncontended lock and semaphore costs, and the wake-up latency of a blocked thread
//! (PThreads 1999, section 4.3).

mod contended;

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Mode, Outcome};
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::process::{mono_ns, wait_until};
use crate::measure::sampler::Sampler;
use crate::measure::stats::Summary;
use crate::results::Metric;
use crate::seeds;
use crate::sys::{futex_wait, futex_wake, gettid, task_state};

pub struct Sync;

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

/// Measures the mutex pair in this process; used in-process and by the single-thread probe.
pub fn measure_pthread_mutex(sampler: &Sampler) -> Result<Summary> {
    let m = PthreadMutex::new();
    sampler.per_op_ns(|n| Ok(pthread_mutex_pairs(&m, n)))
}

/// Runs the single-threaded mutex measurement in a fresh copy of this program.
///
/// glibc skips the atomic instruction in pthread_mutex_lock while the process has never created
/// a thread, and the flag is never reset: so this must be measured in a process that never had a
/// second thread. threadlab re-executes itself (`threadlab __probe mutex-single`), which is
/// single-threaded, and reads the summary it prints as JSON.
fn single_thread_probe(mode: Mode, cpu: usize) -> Result<Summary> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Skip(format!("cannot find threadlab's own executable: {e}")))?;
    let out = std::process::Command::new(exe)
        .args([
            "__probe",
            "mutex-single",
            "--mode",
            mode.name(),
            "--cpu",
            &cpu.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::Skip(format!("cannot re-run threadlab for the probe: {e}")))?;
    if !out.status.success() {
        return Err(Error::Fail(format!(
            "the single-thread probe failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::Fail(format!("the single-thread probe printed no summary: {e}")))
}

/// A thread that only sleeps, so the process has more than one thread (the multi-threaded state).
struct Companion {
    stop: std::sync::mpsc::Sender<()>,
    handle: std::thread::JoinHandle<()>,
}

impl Companion {
    fn start() -> Companion {
        let (stop, rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        Companion { stop, handle }
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
        let waiter = s.spawn(|| -> Result<()> {
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
        });
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

impl Experiment for Sync {
    fn name(&self) -> &'static str {
        "sync"
    }
    fn study(&self) -> &'static str {
        seeds::PTHREADS_1999
    }
    fn measures(&self) -> &'static str {
        "uncontended mutex and semaphore pairs (multi- and single-threaded process), and futex wake-up latency on the same and different CPUs"
    }
    fn rough_duration(&self, mode: Mode) -> Duration {
        Duration::from_secs(mode.pick(1, 4, 25))
    }

    fn run(&self, ctx: &Ctx) -> Result<Outcome> {
        let cpu = home_cpu();
        let placement = Placement::SameCpu(cpu).to_string();
        let sampler = ctx.sampler();
        let mut out = Outcome::default();

        {
            let _pin = PinGuard::pin(cpu)?;
            let companion = Companion::start();

            ctx.step("sync.mutex")?;
            let s = measure_pthread_mutex(&sampler)?;
            out.metrics.push(
                Metric::from_summary(
                    "sync.mutex",
                    "ns",
                    &s,
                    &placement,
                    "pthread_mutex_lock + unlock of a default mutex, never contended, in a process \
                     with more than one thread (a second thread sleeps), so glibc uses its atomic \
                     path; loop overhead (~1 ns) not subtracted",
                )
                .with_historical(seeds::historical("sync.mutex")),
            );

            ctx.step("sync.mutex.std")?;
            let m = std::sync::Mutex::new(0u64);
            let s = sampler.per_op_ns(|n| {
                let t = Instant::now();
                for _ in 0..n {
                    *std::hint::black_box(&m)
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) += 1;
                }
                Ok(t.elapsed())
            })?;
            out.metrics.push(Metric::from_summary(
                "sync.mutex.std",
                "ns",
                &s,
                &placement,
                "std::sync::Mutex lock + increment + unlock (a futex word and a poison flag), \
                 never contended, multi-threaded process",
            ));

            ctx.step("sync.semaphore")?;
            let s = sampler.per_op_ns(semaphore_pairs)?;
            out.metrics.push(
                Metric::from_summary(
                    "sync.semaphore",
                    "ns",
                    &s,
                    &placement,
                    "sem_post + sem_wait of an unnamed POSIX semaphore (count 0 -> 1 -> 0, never \
                     blocks), multi-threaded process",
                )
                .with_historical(seeds::historical("sync.semaphore")),
            );
            companion.stop();
        }

        ctx.step("sync.mutex.single_thread")?;
        match single_thread_probe(ctx.mode, cpu) {
            Ok(s) => out.metrics.push(
                Metric::from_summary(
                    "sync.mutex.single_thread",
                    "ns",
                    &s,
                    &placement,
                    "pthread_mutex_lock + unlock in a process that has never created a thread \
                     (threadlab re-runs itself for this): glibc then takes its single-thread \
                     shortcut without atomic instructions",
                )
                .with_historical(seeds::historical("sync.mutex.single_thread")),
            ),
            Err(Error::Skip(r)) => out.skip("sync.mutex.single_thread", r),
            Err(e) => return Err(e),
        }

        // Each wake costs a procfs read and two hand-offs, ~20-60 us in all.
        let wakes = ctx.mode.pick(20, 200, 200);
        ctx.step("sync.wake.same_cpu")?;
        let s = wake_latency(&sampler, wakes, cpu, cpu)?;
        out.metrics.push(Metric::from_summary(
            "sync.wake.same_cpu",
            "us",
            &s.map(|ns| ns / 1e3),
            &placement,
            "from just before FUTEX_WAKE to the waiter running, both threads on one CPU: includes \
             the wake syscall, the waker blocking (it waits for the waiter's reply) and the switch; \
             the waiter was verified asleep (procfs state S) before each wake",
        ));

        match cpu_pair() {
            Some((a, b)) => {
                ctx.step("sync.wake.cross_cpu")?;
                let s = wake_latency(&sampler, wakes, a, b)?;
                out.metrics.push(Metric::from_summary(
                    "sync.wake.cross_cpu",
                    "us",
                    &s.map(|ns| ns / 1e3),
                    &Placement::CrossCpu(a, b).to_string(),
                    "from just before FUTEX_WAKE to the waiter running on another CPU that was idle: \
                     includes the wake syscall, the inter-processor interrupt and the idle CPU's \
                     exit from its idle state (see cpuidle in the environment)",
                ));
            }
            None => out.skip("sync.wake.cross_cpu", "this process may use only one CPU"),
        }

        contended::contended_metrics(ctx, &mut out)?;

        let get = |id: &str| out.metrics.iter().find(|m| m.id == id).map(|m| m.median);
        let ratio = get("sync.mutex").zip(get("sync.mutex.single_thread"));
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
        Ok(out)
    }
}
