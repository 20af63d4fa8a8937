//! `sync`: uncontended lock and semaphore costs, and the wake-up latency of a blocked thread
//! (PThreads 1999, section 4.3).

mod contended;

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Interleaved, Outcome, Probe};
use crate::measure::placement::{
    cpu_pair, home_cpu, pin_current_thread, place_current_thread, PinGuard, Placement,
};
use crate::measure::probe::run_probe;
use crate::measure::process::{mono_ns, wait_until};
use crate::measure::sampler::Sampler;
use crate::measure::spawn::spawn;
use crate::measure::stats::{Summary, MIN_TRIALS};
use crate::measure::units::Unit;
use crate::results::flag::{add_flag, Flag};
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
    // SAFETY: sem_t is plain data, for which all-zero bytes are a valid value; sem_init below
    // initialises it before any other use.
    let sem = Box::new(UnsafeCell::new(unsafe {
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
#[derive(Default)]
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
    /// The waiter could not be placed where asked.
    failed: AtomicBool,
    /// The CPU the waiter ran on when it woke last (read after its timestamp).
    woke_on: AtomicI32,
    /// Tests only: a pause between the waiter's check of `stop` and its FUTEX_WAIT, which
    /// widens the window a lost wake-up would need (0: none).
    pause_before_wait_ms: AtomicU64,
}

/// A waiting thread, made fresh for one trial: it blocks in FUTEX_WAIT until woken, stamps the
/// latency and blocks again; stopped and joined when this is dropped.
///
/// Wake-up latency: from just before the waker's FUTEX_WAKE to the waiter's first instruction
/// after its FUTEX_WAIT returns. Before each wake the waker checks in procfs that the waiter is
/// really asleep ('S'), so every sample is the wake-up of a blocked thread, never of one still
/// on its way to sleep. That check is outside the timed span.
struct Waiter {
    sh: Arc<WakeShared>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// Where the waking (measuring) thread runs during a batch. The waker is the measuring
    /// thread itself, as in a program whose main thread wakes a worker: a fresh waker woken
    /// by the measuring thread for each batch (`Driver`) drew the waiter onto its own CPU in
    /// every batch (2.4 us, against 20-23 us for the C loop in scripts/agreement).
    waker_cpus: Vec<usize>,
}

impl Waiter {
    fn start(waker_cpus: Vec<usize>, waiter_cpus: Vec<usize>) -> Result<Waiter> {
        Waiter::start_with(waker_cpus, waiter_cpus, WakeShared::default())
    }

    fn start_with(
        waker_cpus: Vec<usize>,
        waiter_cpus: Vec<usize>,
        shared: WakeShared,
    ) -> Result<Waiter> {
        let sh = Arc::new(shared);
        let wsh = Arc::clone(&sh);
        let handle = spawn("the waiting thread", move || {
            if place_current_thread(&waiter_cpus).is_err() {
                wsh.failed.store(true, Ordering::Release);
                return;
            }
            wsh.waiter_tid.store(gettid(), Ordering::Release);
            loop {
                // Drop sets `stop` and then makes `go` non-zero, so a FUTEX_WAIT that starts
                // after the last check returns at once instead of sleeping through the wake.
                while wsh.go.load(Ordering::Acquire) == 0 {
                    if wsh.stop.load(Ordering::Acquire) {
                        return;
                    }
                    let pause = wsh.pause_before_wait_ms.load(Ordering::Relaxed);
                    if pause > 0 {
                        std::thread::sleep(Duration::from_millis(pause));
                    }
                    futex_wait(&wsh.go, 0, false);
                }
                if wsh.stop.load(Ordering::Acquire) {
                    return;
                }
                let woke = mono_ns();
                wsh.total_ns.fetch_add(
                    woke.saturating_sub(wsh.stamp.load(Ordering::Acquire)),
                    Ordering::AcqRel,
                );
                // SAFETY: no preconditions; -1 where the kernel cannot say.
                wsh.woke_on
                    .store(unsafe { libc::sched_getcpu() }, Ordering::Release);
                wsh.go.store(0, Ordering::Release);
                wsh.back.store(1, Ordering::Release);
                futex_wake(&wsh.back, 1, false);
            }
        })?;
        let w = Waiter {
            sh,
            handle: Some(handle),
            waker_cpus,
        };
        wait_until(
            || w.sh.waiter_tid.load(Ordering::Acquire) != 0 || w.sh.failed.load(Ordering::Acquire),
            5_000_000_000,
        )?;
        if w.sh.failed.load(Ordering::Acquire) {
            return Err(Error::Skip("cannot place the waiting thread".into()));
        }
        Ok(w)
    }

    /// Sum of `n` wake-up latencies, woken from the waker thread, and whether most of them
    /// woke the waiter on the waker's own CPU.
    fn batch(&self, n: u64) -> Result<(Duration, bool)> {
        let _pin = PinGuard::pin_set(&self.waker_cpus)?;
        wake_batch(&self.sh, n)
    }
}

/// `n` wake-ups of the waiting thread: the sum of their latencies, and whether most woke it
/// on the waker's CPU.
fn wake_batch(sh: &WakeShared, n: u64) -> Result<(Duration, bool)> {
    let mut same = 0u64;
    let tid = sh.waiter_tid.load(Ordering::Acquire);
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
        // SAFETY: no preconditions.
        let here = unsafe { libc::sched_getcpu() };
        sh.stamp.store(mono_ns(), Ordering::Release);
        sh.go.store(1, Ordering::Release);
        futex_wake(&sh.go, 1, false);
        while sh.back.load(Ordering::Acquire) == 0 {
            futex_wait(&sh.back, 0, false);
        }
        same += u64::from(sh.woke_on.load(Ordering::Acquire) == here);
    }
    Ok((
        Duration::from_nanos(sh.total_ns.load(Ordering::Acquire)),
        2 * same > n,
    ))
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.sh.stop.store(true, Ordering::Release);
        // Non-zero: a waiter between its check of `stop` and its FUTEX_WAIT(go, 0) does not
        // sleep; one asleep already is woken and sees `stop`.
        self.sh.go.store(2, Ordering::Release);
        futex_wake(&self.sh.go, 1, false);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// One wake-up row: its id, placement, where the waker and the waiter may run, and its note.
struct WakeRow {
    id: &'static str,
    placement: Placement,
    waker: Vec<usize>,
    waiter: Vec<usize>,
    note: &'static str,
}

/// Adds `row` to `group`, a fresh waiting thread each trial; `together` receives where the
/// kernel woke the waiter in each batch (on the waker's CPU or not).
fn add_wake_row<'a>(
    group: &mut Interleaved<'a>,
    together: &'a Cell<Option<bool>>,
    guest: bool,
    wakes: u64,
    row: WakeRow,
) {
    let WakeRow {
        id,
        placement,
        waker,
        waiter,
        note,
    } = row;
    let placed_by_kernel = placement == Placement::Unpinned;
    group
        .row_fresh(id, Unit::Us, placement, note.to_string(), move || {
            let w = Waiter::start(waker.clone(), waiter.clone())?;
            Ok(move |n: u64| {
                let (took, same) = w.batch(n)?;
                together.set(Some(same));
                Ok(took)
            })
        })
        .fixed_batch(wakes);
    if placed_by_kernel {
        group.colocation(move || together.get());
    }
    if guest && matches!(placement, Placement::CrossCpu(..)) {
        group.flag(Flag::IdleVcpu);
    }
}

/// The wake-up rows: same CPU and two CPUs in one group, their trials interleaved with a fresh
/// waiting thread each; then, in a group of its own right after them, where the kernel puts
/// the two threads.
///
/// The default placement is not interleaved with the pinned rows: a measuring thread that wakes
/// the three rows' waiters in turn made the kernel wake the unpinned row's waiter on the
/// waker's own CPU. On a 2-vCPU Intel Xeon guest, in 33 trials of three `run sync` it woke
/// there in most of them and read 2.2-5.7 us, against 29-57 us for the C loop that wakes one
/// thread (`futex_wake.c -1 -1`), whose waiter the kernel woke on the idle CPU. A C copy of the
/// interleaving woke on the waker's CPU in 99-100% of the wakes of 20 of 20 trials; the same
/// loop with the unpinned row alone, after the pinned rows' trials, in 0-64% (most trials 0%),
/// 22-53 us, as the C loop.
fn wake_group(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    // Each wake costs a procfs read and two hand-offs, ~20-60 us in all.
    let wakes = ctx.mode.pick(20, 200, 200);
    let home = home_cpu();
    let all = ctx.env.allowed_cpus.clone();
    // Where the kernel woke each row's waiter (on the waker's CPU or not), per batch.
    let [same, cross, unplaced]: [Cell<Option<bool>>; 3] = Default::default();
    // In a guest, the wake-up of an idle CPU is the host's to serve (an interrupt to a vCPU
    // that halted: halt polling, the host's own run queue), and how fast it serves it moves
    // from run to run: in 22 quick runs of this week's builds on a 2-vCPU KVM guest, the runs'
    // medians of sync.wake.cross_cpu spread 22% (10th to 90th percentile) and of
    // sync.wake.unpinned 17%, while each run's trials agreed within about 5%.
    let guest = ctx.env.is_guest();
    let mut pinned = Interleaved::new();
    let row = WakeRow {
        id: "sync.wake.same_cpu",
        placement: Placement::SameCpu(home),
        waker: vec![home],
        waiter: vec![home],
        note: "from just before FUTEX_WAKE to the waiter running, both threads on one CPU: \
               includes the wake syscall, the waker blocking (it waits for the waiter's reply) \
               and the switch; the waiter was verified asleep (procfs state S) before each \
               wake; a fresh waiting thread each trial; counterpart: \
               scripts/agreement/futex_wake.c 0 0 (docs/agreement.md)",
    };
    add_wake_row(&mut pinned, &same, guest, wakes, row);
    match cpu_pair() {
        Some((a, b)) => {
            let row = WakeRow {
                id: "sync.wake.cross_cpu",
                placement: Placement::CrossCpu(a, b),
                waker: vec![a],
                waiter: vec![b],
                note: "from just before FUTEX_WAKE to the waiter running on another CPU that \
                       was idle: includes the wake syscall, the inter-processor interrupt and \
                       the idle CPU's exit from its idle state (see cpuidle in the \
                       environment); a fresh waiting thread each trial; counterpart: \
                       scripts/agreement/futex_wake.c 0 1 (docs/agreement.md)",
            };
            add_wake_row(&mut pinned, &cross, guest, wakes, row);
        }
        None => out.skip("sync.wake.cross_cpu", "this process may use only one CPU"),
    }
    pinned.measure(ctx, out)?;
    if all.len() > 1 {
        let mut unpinned = Interleaved::new();
        let row = WakeRow {
            id: "sync.wake.unpinned",
            placement: Placement::Unpinned,
            waker: all.clone(),
            waiter: all.clone(),
            note: "from just before FUTEX_WAKE to the waiter running, neither thread pinned: \
                   the kernel chooses where the woken thread runs (wake-affine: often the \
                   waker's CPU, sometimes the idle one), as it does for a program that sets no \
                   affinity; the waiter was verified asleep before each wake; a fresh waiting \
                   thread each trial; the waker is the measuring thread with its pin lifted for \
                   the batch; measured right after the pinned rows, not interleaved with them \
                   (a waker that wakes other threads in turn drew the waiter onto its own \
                   CPU); counterpart: scripts/agreement/futex_wake.c -1 -1 (docs/agreement.md)",
        };
        add_wake_row(&mut unpinned, &unplaced, guest, wakes, row);
        unpinned.measure(ctx, out)?;
    } else {
        out.skip("sync.wake.unpinned", "this process may use only one CPU");
    }
    // The unpinned row only where the kernel woke the waiter on the other CPU, which is known
    // after measuring: on the waker's own (colocated), no idle CPU is woken, and compare's
    // placement rule covers a run that changed between the two.
    if let Some(m) = out.metric_mut("sync.wake.unpinned").filter(|_| guest) {
        let together = m.trials.as_ref().and_then(|t| t.colocated_median());
        if together.map_or(true, |share| share < 0.5) {
            add_flag(m, Flag::IdleVcpu);
        }
    }
    Ok(())
}

const INFO: Info = Info {
    name: "sync",
    study: &seeds::PTHREADS_1999,
    measures: "uncontended mutex and semaphore pairs (multi- and single-threaded process), and futex wake-up latency on the same and different CPUs",
    rough_secs: [1.0, 5.0, 22.0],
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
                     path; loop overhead (~1 ns) not subtracted; counterpart: \
                     scripts/agreement/mutex_pair.c (docs/agreement.md)",
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
        let first = match single_thread_probe(ctx, cpu) {
            Ok(s) => Ok(s),
            Err(Error::Skip(r)) => Err(r),
            Err(e) => return Err(e),
        };

        wake_group(ctx, out)?;

        contended::contended_metrics(ctx, out)?;

        let second = match first {
            Ok(a) => {
                ctx.step("sync.mutex.single_thread, again")?;
                single_thread_probe(ctx, cpu).map(|b| (a, b))
            }
            Err(r) => Err(Error::Skip(r)),
        };
        match second {
            Ok((a, b)) => {
                let s = Summary::pooled(&[a, b]).ok_or_else(|| {
                    Error::Fail("the single-thread probe printed no trials".into())
                })?;
                out.add_ns(
                    "sync.mutex.single_thread",
                    Unit::Ns,
                    &s,
                    placement,
                    format!(
                        "pthread_mutex_lock + unlock in a process that has never created a \
                         thread (threadlab re-runs itself for this, so it cannot be interleaved \
                         with the rows above): glibc then takes its single-thread shortcut \
                         without atomic instructions. Measured in two such processes, one before \
                         the wake-up and contended rows and one after them, their trials pooled: \
                         on a 2-vCPU guest one process's trials agreed within 2-3% while \
                         processes a few seconds apart read 4.9, 5.3 or 6.3 ns, so one process \
                         alone would hide that move from the spread; the trials of both are then \
                         judged against the best machine reading beside either, and only the \
                         quiet ones kept where at least {MIN_TRIALS} are"
                    ),
                )?;
            }
            Err(Error::Skip(r)) => out.skip("sync.mutex.single_thread", r),
            Err(e) => return Err(e),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread and fails if it has not finished within `secs`: a lost wake-up
    /// shows as a hang, which this turns into a failure.
    fn within(secs: u64, f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            f();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(secs))
            .expect("hung: a thread was not woken to stop");
    }

    #[test]
    fn a_waiter_stopped_at_any_moment_ends() {
        // Dropping right after start races the waiter's check of `stop` against its first
        // FUTEX_WAIT; thousands of times covers every interleaving the scheduler produces.
        within(60, || {
            let cpu = home_cpu();
            for i in 0..3000u64 {
                let w = Waiter::start(vec![cpu], vec![cpu]).unwrap();
                if i % 3 == 0 {
                    w.batch(1).unwrap();
                }
                drop(w);
            }
        });
    }

    #[test]
    fn a_stop_that_lands_between_the_check_and_the_wait_is_not_lost() {
        // The waiter pauses 20 ms after finding `stop` unset, so the drop below lands in that
        // window every time: with a wake that only flips `stop`, the waiter would then sleep
        // forever in FUTEX_WAIT(go, 0).
        within(30, || {
            let cpu = home_cpu();
            for _ in 0..5 {
                let shared = WakeShared::default();
                shared.pause_before_wait_ms.store(20, Ordering::Relaxed);
                let w = Waiter::start_with(vec![cpu], vec![cpu], shared).unwrap();
                std::thread::sleep(Duration::from_millis(5));
                drop(w);
            }
        });
    }

    #[test]
    fn a_waiter_reports_positive_latencies() {
        let cpu = home_cpu();
        let w = Waiter::start(vec![cpu], vec![cpu]).unwrap();
        let (d, _) = w.batch(5).unwrap();
        assert!(d > Duration::ZERO);
    }
}
