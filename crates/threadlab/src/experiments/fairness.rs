//! `fairness`: who gets a contended lock, and what fairness costs (Delphi TThread articles,
//! "Thread synchronization in Windows XP and Vista").
//!
//! The article: Windows XP handed a released lock to the first waiter (FIFO); Vista and later let
//! a running thread barge in ahead of the sleeping waiter, trading fairness for throughput. The
//! author could not demonstrate the difference. Here T threads take one lock in a loop (a short
//! critical section, a short pause outside it) for a fixed time, and each lock is scored on
//! throughput and on how evenly the acquisitions were shared.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{own_series, Axis, Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::placement::{allowed_cpus, pin_current_thread};
use crate::measure::process::mono_ns;
use crate::measure::spawn::{spawn_scoped, start_called_off, StartGate};
use crate::measure::stats::{jain_index, Summary};
use crate::measure::units::{Direction, Unit};
use crate::results::{ids, Metric, Series, Table};
use crate::seeds;
use crate::subjects::locks::{
    BenchLock, FifoHandoffLock, McsLock, ParkingLotFairMutex, ParkingLotMutex, PthreadMutex,
    StdMutex, TicketLock,
};

pub struct Fairness;

/// The locks compared, in the order they are reported (ids use these names).
pub const LOCKS: &[&str] = &[
    "pthread",
    "std",
    "parking_lot",
    "parking_lot_fair",
    "ticket",
    "mcs",
    "fifo_handoff",
];

/// Target length of the critical section and of the pause outside it (busy arithmetic). Equal
/// lengths keep the lock heavily contended, where the locks' policies differ most.
pub const CRITICAL_SECTION_NS: f64 = 50.0;
pub const PAUSE_NS: f64 = 50.0;

/// One acquisition in this many has its wait timed (two clock reads, one inside the critical
/// section): timing every one would lengthen the critical section by a clock read each time.
pub const WAIT_SAMPLE_EVERY: u32 = 8;

/// What one run does.
#[derive(Debug, Clone)]
pub struct FairnessParams {
    pub threads: usize,
    pub duration: Duration,
    /// Work units inside the critical section and outside it (see `work`).
    pub critical_units: u32,
    pub pause_units: u32,
    /// Thread i is pinned to cpus[i % len]; empty: not pinned.
    pub cpus: Vec<usize>,
}

/// What one run found.
#[derive(Debug, Clone)]
pub struct FairnessRun {
    /// Acquisitions by each thread.
    pub per_thread: Vec<u64>,
    pub elapsed: Duration,
    /// Acquisitions whose previous holder was the same thread.
    pub reacquired: u64,
    /// Wait for the lock on the timed subset, in ns.
    pub wait_p99_ns: u64,
    pub wait_max_ns: u64,
    pub wait_samples: u64,
}

impl FairnessRun {
    pub fn total(&self) -> u64 {
        self.per_thread.iter().sum()
    }

    pub fn throughput_per_s(&self) -> f64 {
        self.total() as f64 / self.elapsed.as_secs_f64()
    }

    pub fn jain(&self) -> f64 {
        let v: Vec<f64> = self.per_thread.iter().map(|&n| n as f64).collect();
        jain_index(&v)
    }

    /// Most acquisitions by one thread over fewest (a starved thread counts as 1).
    pub fn max_over_min(&self) -> f64 {
        let max = self.per_thread.iter().copied().max().unwrap_or(0);
        let min = self.per_thread.iter().copied().min().unwrap_or(0);
        max as f64 / min.max(1) as f64
    }

    pub fn reacquired_pct(&self) -> f64 {
        100.0 * self.reacquired as f64 / self.total().max(1) as f64
    }
}

/// A unit of busy arithmetic that the compiler cannot remove or merge.
#[inline(never)]
pub fn work(units: u32) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..units {
        x = std::hint::black_box(
            x.wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(i as u64),
        );
    }
    x
}

/// Nanoseconds per unit of `work` on this CPU (median of 5 timings of 200,000 units).
pub fn ns_per_work_unit() -> f64 {
    let mut v = Vec::with_capacity(5);
    for _ in 0..5 {
        let t = Instant::now();
        std::hint::black_box(work(200_000));
        v.push(t.elapsed().as_nanos() as f64 / 200_000.0);
    }
    Summary::from_samples(&v, 200_000).map_or(1.0, |s| s.median.max(0.01))
}

/// Per-thread tallies, written only by their thread.
struct ThreadTally {
    acquisitions: u64,
    reacquired: u64,
    waits: Histogram<u64>,
}

/// What the lock threads of one run share: the lock, the state it protects, the stop flag and
/// the start line. The previous holder's id (0 = none) and the counter are protected by the
/// lock; they are atomics with Relaxed accesses only so that this file needs no unsafe, and the
/// lock orders them.
struct Contended<L> {
    lock: L,
    last_holder: AtomicUsize,
    counter: AtomicU64,
    stop: AtomicBool,
    start: StartGate,
}

/// One lock thread: pinned (round-robin), it waits at the start line, then locks, works,
/// unlocks and pauses until told to stop, timing one acquisition in `WAIT_SAMPLE_EVERY`.
fn lock_thread<L: BenchLock>(
    c: &Contended<L>,
    p: &FairnessParams,
    i: usize,
) -> Result<ThreadTally> {
    let pinned = match p.cpus.get(i % p.cpus.len().max(1)) {
        Some(&cpu) => pin_current_thread(cpu),
        None => Ok(()),
    };
    let mut t = ThreadTally {
        acquisitions: 0,
        reacquired: 0,
        waits: Histogram::new_with_bounds(1, 60_000_000_000, 3)
            .expect("constant histogram bounds are valid"),
    };
    if !c.start.wait() {
        return Err(start_called_off());
    }
    pinned?;
    let me = i + 1;
    let mut tick = 0u32;
    while !c.stop.load(Ordering::Relaxed) {
        let timed = tick == 0;
        tick = (tick + 1) % WAIT_SAMPLE_EVERY;
        let asked = if timed { mono_ns() } else { 0 };
        let (got, again) = c.lock.with(|| {
            let got = if timed { mono_ns() } else { 0 };
            let again = c.last_holder.load(Ordering::Relaxed) == me;
            c.last_holder.store(me, Ordering::Relaxed);
            let n = c.counter.load(Ordering::Relaxed);
            std::hint::black_box(work(p.critical_units));
            c.counter.store(n + 1, Ordering::Relaxed);
            (got, again)
        });
        if timed {
            t.waits.saturating_record(got.saturating_sub(asked).max(1));
        }
        t.acquisitions += 1;
        t.reacquired += again as u64;
        std::hint::black_box(work(p.pause_units));
    }
    Ok(t)
}

/// The threads' tallies as one run: acquisitions per thread, re-takes, and the waits merged.
fn merge_tallies(tallies: Vec<Result<ThreadTally>>, elapsed: Duration) -> Result<FairnessRun> {
    let mut pin_error = None;
    let mut per_thread = Vec::with_capacity(tallies.len());
    let mut reacquired = 0;
    let mut waits = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| Error::Fail(format!("histogram: {e}")))?;
    for t in tallies {
        match t {
            Ok(t) => {
                per_thread.push(t.acquisitions);
                reacquired += t.reacquired;
                waits
                    .add(&t.waits)
                    .map_err(|e| Error::Fail(format!("histogram: {e}")))?;
            }
            Err(e) => pin_error = Some(e),
        }
    }
    if let Some(e) = pin_error {
        return Err(e);
    }
    Ok(FairnessRun {
        per_thread,
        elapsed,
        reacquired,
        wait_p99_ns: waits.value_at_quantile(0.99),
        wait_max_ns: waits.max(),
        wait_samples: waits.len(),
    })
}

/// Runs T threads on lock `L` for the given duration; Err(Cancelled) if interrupted.
pub fn run_once<L: BenchLock>(p: &FairnessParams, cancel: &Cancel) -> Result<FairnessRun> {
    let c = Contended {
        lock: L::default(),
        last_holder: AtomicUsize::new(0),
        counter: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        start: StartGate::new(p.threads + 1),
    };
    let mut elapsed = Duration::ZERO;
    let mut cancelled = None;
    let mut refused = None;

    let tallies: Vec<Result<ThreadTally>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(p.threads);
        for i in 0..p.threads {
            let c = &c;
            match spawn_scoped(s, "a lock thread", move || lock_thread(c, p, i)) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the threads waiting at the start line, then report the refusal.
                    c.start.abort();
                    refused = Some(e);
                    break;
                }
            }
        }
        if refused.is_some() {
            return Vec::new();
        }
        c.start.wait();
        let t0 = Instant::now();
        while t0.elapsed() < p.duration {
            if let Err(e) = cancel.check() {
                cancelled = Some(e);
                break;
            }
            std::thread::sleep(
                (p.duration - t0.elapsed().min(p.duration)).min(Duration::from_millis(10)),
            );
        }
        c.stop.store(true, Ordering::Relaxed);
        elapsed = t0.elapsed();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Fail("a lock thread panicked".into())))
            })
            .collect()
    });
    if let Some(e) = refused.or(cancelled) {
        return Err(e);
    }
    let run = merge_tallies(tallies, elapsed)?;
    if c.counter.load(Ordering::Relaxed) != run.total() {
        return Err(Error::Fail(format!(
            "lock {} lost updates: {} increments for {} acquisitions",
            L::NAME,
            c.counter.load(Ordering::Relaxed),
            run.total()
        )));
    }
    Ok(run)
}

/// Runs lock `name` once (dispatch from the name to the type).
pub fn run_named(name: &str, p: &FairnessParams, cancel: &Cancel) -> Result<FairnessRun> {
    match name {
        "pthread" => run_once::<PthreadMutex>(p, cancel),
        "std" => run_once::<StdMutex>(p, cancel),
        "parking_lot" => run_once::<ParkingLotMutex>(p, cancel),
        "parking_lot_fair" => run_once::<ParkingLotFairMutex>(p, cancel),
        "ticket" => run_once::<TicketLock<()>>(p, cancel),
        "mcs" => run_once::<McsLock<()>>(p, cancel),
        "fifo_handoff" => run_once::<FifoHandoffLock<()>>(p, cancel),
        other => Err(Error::Fail(format!("unknown lock {other}"))),
    }
}

fn policy(name: &str) -> &'static str {
    match name {
        "pthread" => PthreadMutex::POLICY,
        "std" => StdMutex::POLICY,
        "parking_lot" => ParkingLotMutex::POLICY,
        "parking_lot_fair" => ParkingLotFairMutex::POLICY,
        "ticket" => TicketLock::<()>::POLICY,
        "mcs" => McsLock::<()>::POLICY,
        "fifo_handoff" => FifoHandoffLock::<()>::POLICY,
        _ => "",
    }
}

/// Thread counts: 2, the CPU count and twice the CPU count (distinct, at least 2).
pub fn thread_counts(cpus: usize) -> Vec<usize> {
    let mut ts = vec![2, cpus, 2 * cpus];
    ts.retain(|&t| t >= 2);
    ts.sort_unstable();
    ts.dedup();
    ts
}

/// Repetitions and duration of each (lock, T) run in this mode. The shares are of one run's
/// window, and a shorter window reads less fair: the ticket and MCS locks' 4-thread max/min
/// share read 1.11-1.36x over 500 ms, 1.37-2.01x over 200 ms and 1.78-2.81x over 100 ms, in
/// alternated `--full` runs (2026-11-26). So `--full` keeps the 500 ms runs it had before it
/// was cut to ten minutes, 5 of them instead of 11.
fn plan(mode: Mode) -> (usize, Duration) {
    mode.pick(
        (2, Duration::from_millis(20)),
        (5, Duration::from_millis(100)),
        (5, Duration::from_millis(500)),
    )
}

fn placement_name(cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    format!("round_robin({})", list.join(","))
}

fn summary(v: &[f64], batch: u64) -> Result<Summary> {
    Summary::from_samples(v, batch).ok_or_else(|| Error::Fail("no finite samples".into()))
}

/// Medians per (lock, T), for the conclusion.
struct Medians {
    lock: &'static str,
    threads: usize,
    throughput: f64,
    jain: f64,
    reacquired_pct: f64,
    wait_p99_us: f64,
    wait_max_us: f64,
}

fn fmt_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.1} M/s", per_s / 1e6)
    } else {
        format!("{:.0} k/s", per_s / 1e3)
    }
}

fn conclusion(m: &[Medians], ncpu: usize) -> String {
    let at = |lock: &str, t: usize| m.iter().find(|x| x.lock == lock && x.threads == t);
    let t_low = m.iter().map(|x| x.threads).min().unwrap_or(2);
    let t_high = m.iter().map(|x| x.threads).max().unwrap_or(2);
    let mut s = String::new();

    let mut row: Vec<&Medians> = m.iter().filter(|x| x.threads == t_low).collect();
    row.sort_by(|a, b| b.throughput.total_cmp(&a.throughput));
    s.push_str(&format!(
        "At {t_low} threads on {ncpu} CPU(s), fastest first (acquisitions/s, Jain index, share re-taken by the releaser): "
    ));
    let parts: Vec<String> = row
        .iter()
        .map(|x| {
            format!(
                "{} {} (Jain {:.3}, {:.0}% re-taken)",
                x.lock,
                fmt_rate(x.throughput),
                x.jain,
                x.reacquired_pct
            )
        })
        .collect();
    s.push_str(&parts.join("; "));
    s.push_str(". ");

    if let (Some(xp), Some(bar)) = (at("fifo_handoff", t_low), at("pthread", t_low)) {
        s.push_str(&format!(
            "The study's claim, measured: Windows XP handed a released lock to the first waiter, Vista and later let a running thread barge in for throughput (the article's author could not demonstrate the difference). Here the XP-style FIFO hand-off lock manages {} and glibc's barging mutex {} ({:.0}x): the barging releaser re-took the lock {:.0}% of the time instead of waiting for a sleeping waiter to wake (FIFO hand-off: {:.0}%). ",
            fmt_rate(xp.throughput),
            fmt_rate(bar.throughput),
            bar.throughput / xp.throughput.max(1.0),
            bar.reacquired_pct,
            xp.reacquired_pct,
        ));
        let t_top = t_high;
        if let (Some(xp4), Some(bar4)) = (at("fifo_handoff", t_top), at("pthread", t_top)) {
            let unfairer = bar4.jain < xp4.jain - 0.002 || bar4.wait_max_us > 2.0 * xp4.wait_max_us;
            s.push_str(&format!(
                "The price in fairness, at {t_top} threads: Jain {:.3} and longest wait {:.0} us for the barging mutex, Jain {:.3} and {:.0} us for the FIFO hand-off{} ",
                bar4.jain,
                bar4.wait_max_us,
                xp4.jain,
                xp4.wait_max_us,
                if unfairer {
                    ": barging lets a waiter be passed over again and again, which shows in the tail more than in the average share."
                } else {
                    "; on this run the barging lock was not measurably less fair, so its throughput came for free."
                }
            ));
        }
    }

    if t_high > ncpu {
        for lock in ["ticket", "mcs"] {
            if let (Some(lo), Some(hi)) = (at(lock, t_low.max(ncpu.min(t_high))), at(lock, t_high))
            {
                s.push_str(&format!(
                    "FIFO spinning with more threads than CPUs: {lock} goes from {} at {} threads to {} at {t_high} (p99 wait {:.0} us), because the next waiter in line is often not running and everyone waits for it to be scheduled. ",
                    fmt_rate(lo.throughput),
                    lo.threads,
                    fmt_rate(hi.throughput),
                    hi.wait_p99_us
                ));
            }
        }
    }

    let best = row.first().map(|x| x.lock).unwrap_or("parking_lot");
    s.push_str(&format!(
        "Which lock: for throughput, a barging lock (here {best} was fastest; std's Mutex or parking_lot's Mutex are the sensible defaults, and parking_lot's eventual fairness bounds starvation to about 0.5 ms). For strict turn-taking with no more threads than CPUs, a ticket or MCS lock (MCS scales better with many waiters). When threads may outnumber CPUs, never a FIFO spin lock; use parking_lot's FairMutex or a FIFO blocking lock, and accept a wake-up per hand-off."
    ));
    s
}

const INFO: Info = Info {
    name: "fairness",
    study: &seeds::DELPHI_2010S,
    measures: "throughput and fairness of 7 locks with 2, N and 2N threads contending",
    rough_secs: [0.6, 7.0, 36.0],
};

impl Experiment for Fairness {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpus = allowed_cpus();
        let (reps, duration) = plan(ctx.mode);
        let ns_unit = ns_per_work_unit();
        let critical_units = (CRITICAL_SECTION_NS / ns_unit).round().max(1.0) as u32;
        let pause_units = (PAUSE_NS / ns_unit).round().max(1.0) as u32;
        let mut medians = Vec::new();

        for &threads in &thread_counts(cpus.len()) {
            let p = FairnessParams {
                threads,
                duration,
                critical_units,
                pause_units,
                cpus: cpus.clone(),
            };
            let runs = interleaved_runs(ctx, &p, reps)?;
            let placement = placement_name(&cpus[..threads.min(cpus.len())]);
            for (k, lock) in LOCKS.iter().enumerate() {
                medians.push(lock_metrics(out, lock, &p, reps, &placement, &runs[k])?);
            }
        }

        for &threads in &thread_counts(cpus.len()) {
            out.tables.push(threads_table(threads, &medians));
        }
        for lock in LOCKS {
            out.series
                .push(throughput_series(lock, &medians, cpus.len()));
        }
        out.conclusion = Some(conclusion(&medians, cpus.len()));
        Ok(())
    }
}

/// runs[lock][rep] at one thread count; repetitions interleave the locks so slow drift hits
/// all alike.
fn interleaved_runs(ctx: &Ctx, p: &FairnessParams, reps: usize) -> Result<Vec<Vec<FairnessRun>>> {
    let mut runs: Vec<Vec<FairnessRun>> = vec![Vec::new(); LOCKS.len()];
    for _ in 0..reps {
        for (k, lock) in LOCKS.iter().enumerate() {
            ctx.step(&format!("fairness.{lock}.t{}", p.threads))?;
            runs[k].push(run_named(lock, p, ctx.cancel)?);
        }
    }
    Ok(runs)
}

/// One figure of a lock at a thread count: which value of each run, its unit and note.
struct LockFigure {
    what: &'static str,
    unit: Unit,
    value: fn(&FairnessRun) -> f64,
    direction: Option<Direction>,
    note: String,
}

/// The six figures of one lock at one thread count, from its runs; their medians.
fn lock_metrics(
    out: &mut Outcome,
    lock: &'static str,
    p: &FairnessParams,
    reps: usize,
    placement: &str,
    r: &[FairnessRun],
) -> Result<Medians> {
    let (threads, critical_units, pause_units) = (p.threads, p.critical_units, p.pause_units);
    let acquisitions: u64 = r.iter().map(|x| x.total()).sum();
    let timed: u64 = r.iter().map(|x| x.wait_samples).sum();
    let base = format!(
        "{threads} threads pinned round-robin to CPUs {}, each looping: lock, critical section of ~{CRITICAL_SECTION_NS:.0} ns of arithmetic ({critical_units} units), unlock, pause of ~{PAUSE_NS:.0} ns ({pause_units} units). Lock policy: {}. Spread over {reps} runs of {} ms each; the shares are of one run's window, and a shorter run reads less fair, so figures from runs of another length (the quick suite's 100 ms, --full's 500 ms) are not comparable; {acquisitions} acquisitions in all.",
        placement,
        policy(lock),
        p.duration.as_millis(),
    );
    let wait_note = format!(
        "Wait = from just before lock() to the first instruction inside the critical section, monotonic clock, timed on 1 acquisition in {WAIT_SAMPLE_EVERY} per thread ({timed} timed) so that clock reads do not lengthen every critical section; per-run value from an HDR histogram (3 significant digits)."
    );
    let figures = [
        LockFigure {
            what: ids::fairness::THROUGHPUT,
            unit: Unit::PerS,
            value: |x| x.throughput_per_s(),
            direction: None,
            note: format!("Acquisitions/s, all threads together; {base}"),
        },
        LockFigure {
            what: ids::fairness::JAIN,
            unit: Unit::Index,
            value: |x| x.jain(),
            direction: Some(Direction::HigherIsBetter),
            note: format!("Jain index over acquisitions per thread; 1 = equal shares, 1/{threads} = one thread took all. {base}"),
        },
        LockFigure {
            what: ids::fairness::MAX_MIN,
            unit: Unit::Ratio,
            value: |x| x.max_over_min(),
            direction: Some(Direction::LowerIsBetter),
            note: format!("Most acquisitions by one thread / fewest; a thread with none counts as 1. {base}"),
        },
        LockFigure {
            what: ids::fairness::WAIT_P99,
            unit: Unit::Us,
            value: |x| x.wait_p99_ns as f64 / 1e3,
            direction: None,
            note: format!("p99 wait for the lock, sampled; {wait_note} {base}"),
        },
        LockFigure {
            what: ids::fairness::WAIT_MAX,
            unit: Unit::Us,
            value: |x| x.wait_max_ns as f64 / 1e3,
            direction: None,
            note: format!("Longest sampled wait for the lock; {wait_note} {base}"),
        },
        LockFigure {
            what: ids::fairness::BARGING,
            unit: Unit::Percent,
            value: |x| x.reacquired_pct(),
            direction: None,
            note: format!("Share re-taken by the thread that just released it; it released, paused ~{PAUSE_NS:.0} ns and came back first. Under contention a FIFO lock keeps this near 0; it also counts re-takes when nobody was waiting. {base}"),
        },
    ];
    // Every summary before any metric: a run without finite samples adds none of the six.
    let summaries = figures
        .iter()
        .map(|f| summary(&r.iter().map(f.value).collect::<Vec<_>>(), 1))
        .collect::<Result<Vec<_>>>()?;
    for (f, s) in figures.into_iter().zip(&summaries) {
        let m = Metric::from_summary(
            &ids::fairness::id(lock, threads, f.what),
            f.unit,
            s,
            placement,
            f.note,
        );
        out.add(match f.direction {
            Some(d) => m.with_direction(d),
            None => m,
        });
    }
    Ok(Medians {
        lock,
        threads,
        throughput: summaries[0].median,
        jain: summaries[1].median,
        reacquired_pct: summaries[5].median,
        wait_p99_us: summaries[3].median,
        wait_max_us: summaries[4].median,
    })
}

/// The locks side by side at one thread count.
fn threads_table(threads: usize, medians: &[Medians]) -> Table {
    let mut t = Table::new(
        &format!("fairness.t{threads}"),
        &format!("{threads} threads on one lock (medians of the runs)"),
        &[
            "lock",
            "acquisitions/s",
            "Jain",
            "p99 wait",
            "longest wait",
            "re-taken",
        ],
    );
    t.note =
        "Jain 1 = equal shares; re-taken = share the releaser took again at once (barging)".into();
    for m in medians.iter().filter(|m| m.threads == threads) {
        t.row(vec![
            m.lock.to_string(),
            fmt_rate(m.throughput),
            format!("{:.3}", m.jain),
            format!("{:.1} us", m.wait_p99_us),
            format!("{:.0} us", m.wait_max_us),
            format!("{:.0}%", m.reacquired_pct),
        ]);
    }
    t
}

/// One lock's throughput over the thread counts.
fn throughput_series(lock: &str, medians: &[Medians], ncpu: usize) -> Series {
    let pts: Vec<&Medians> = medians.iter().filter(|m| m.lock == lock).collect();
    own_series(
        format!("fairness.{lock}.throughput_vs_threads"),
        Axis {
            label: "contending threads",
            unit: Unit::Threads,
            values: pts.iter().map(|m| m.threads as f64).collect(),
        },
        Axis {
            label: "acquisitions per second (median)",
            unit: Unit::PerS,
            values: pts.iter().map(|m| m.throughput).collect(),
        },
        format!(
            "{lock}: {}; threads pinned round-robin over {ncpu} CPU(s).",
            policy(lock)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(threads: usize) -> FairnessParams {
        FairnessParams {
            threads,
            duration: Duration::from_millis(30),
            critical_units: 10,
            pause_units: 20,
            cpus: Vec::new(),
        }
    }

    #[test]
    fn every_lock_runs_and_counts_consistently() {
        let cancel = Cancel::never();
        for lock in LOCKS {
            let r = run_named(lock, &params(3), &cancel).unwrap();
            assert_eq!(r.per_thread.len(), 3, "{lock}");
            assert!(r.total() > 0, "{lock}");
            assert!(r.reacquired <= r.total());
            assert!(
                r.wait_samples > 0 && r.wait_p99_ns <= r.wait_max_ns,
                "{lock}"
            );
            let j = r.jain();
            assert!(
                (1.0 / 3.0 - 1e-9..=1.0 + 1e-9).contains(&j),
                "{lock} jain {j}"
            );
            assert!(r.max_over_min() >= 1.0);
        }
    }

    #[test]
    fn cancellation_ends_a_run_promptly() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGINT);
        let mut p = params(2);
        p.duration = Duration::from_secs(30);
        let t = Instant::now();
        let r = run_named("ticket", &p, &cancel);
        assert!(matches!(r, Err(Error::Cancelled(_))));
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn thread_counts_are_distinct_and_at_least_two() {
        assert_eq!(thread_counts(1), vec![2]);
        assert_eq!(thread_counts(2), vec![2, 4]);
        assert_eq!(thread_counts(8), vec![2, 8, 16]);
    }

    #[test]
    fn conclusion_names_the_study_claim_and_a_choice() {
        let m = vec![
            Medians {
                lock: "pthread",
                threads: 2,
                throughput: 9e6,
                jain: 0.8,
                reacquired_pct: 70.0,
                wait_p99_us: 1.0,
                wait_max_us: 900.0,
            },
            Medians {
                lock: "fifo_handoff",
                threads: 2,
                throughput: 3e5,
                jain: 1.0,
                reacquired_pct: 1.0,
                wait_p99_us: 9.0,
                wait_max_us: 50.0,
            },
        ];
        let c = conclusion(&m, 2);
        assert!(c.contains("XP") && c.contains("barg") && c.contains("Which lock"));
        assert!(
            c.contains("passed over"),
            "the tail of the barging lock is named: {c}"
        );
    }
}
