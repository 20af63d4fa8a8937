//! `coop`: the Mac experiment (Oddone, "Preempting the Mac", MacTech 13(1), 1997). A CPU-bound
//! job with a fixed amount of work and a checksum, scored as its time over the time of the same
//! job run without ever yielding (= 1.00), under cooperative yielding (every 1/3 s as in the
//! study, every 1 ms, every 4096 iterations), preemption, in the foreground and the background,
//! and the balance test (the main thread busy-waits beside the worker: an even split is 2.0).
//!
//! Two substrates: uthread with one carrier pinned to one CPU (the Mac's single-CPU world), and
//! kernel threads pinned to one CPU. Linux analogues of the Mac's terms:
//! * main event loop: a thread that checks for events (a zero-timeout poll()) and, when idle,
//!   yields to the worker (uthread) or blocks in poll() for up to one 60 Hz frame (kernel);
//! * background: the job at a lower priority (uthread TimeSharing(9), kernel nice 10) beside a
//!   foreground application that renders 60 frames/s, each frame 1 ms of CPU (6% load).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Outcome};
use crate::measure::placement::{home_cpu, pin_current_thread, Placement};
use crate::measure::sched::pin_and_nice;
use crate::measure::spawn::{green_runtime, spawn_scoped};
use crate::measure::stats::Summary;
use crate::measure::units::{Direction, Unit};
use crate::results::{Metric, Table};
use crate::seeds;
use crate::sys;

pub struct Coop;

/// Iterations per chunk: the study's unwise count-based yield interval.
pub const CHUNK: u64 = 4096;
const SEED: u64 = 0x9E37_79B9_7F4A_7C15;
/// A time-based yielder reads the clock every this many chunks (~100 µs), not every chunk.
const CLOCK_EVERY_CHUNKS: u64 = 16;
const FRAME: Duration = Duration::from_micros(16_667);
const FRAME_WORK: Duration = Duration::from_millis(1);

/// `iters` steps of a dependent integer recurrence (multiply, add, xor-shift, rotate): the
/// Dhrystone-like unit of work; the result is the checksum.
#[inline]
pub fn job_steps(mut s: u64, iters: u64) -> u64 {
    for _ in 0..iters {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s ^= s >> 29;
        s = s.rotate_left(7);
    }
    s
}

/// When the job gives the CPU away.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum YieldPolicy {
    Never,
    /// Time-based: every `Duration` (the study: 20 ticks = 1/3 s).
    Every(Duration),
    /// Count-based: every CHUNK iterations.
    EveryChunk,
    /// Preemptive uthread: only a safe point for a deferred preemption (no yield of its own).
    PreemptPoint,
}

/// Runs the job in `chunks` chunks, calling `yield_fn` as the policy says. Returns
/// (checksum, yields made).
/// The job stops early (with a wrong checksum, which the caller never compares once the run
/// is interrupted) when `interrupted` is set: a --full job lasts seconds, an interruption must
/// act within one. One relaxed load per chunk of 4096 steps.
pub fn run_job(
    chunks: u64,
    policy: YieldPolicy,
    yield_fn: &dyn Fn(),
    interrupted: &AtomicI32,
) -> (u64, u64) {
    let mut s = SEED;
    let mut yields = 0u64;
    let mut next = Instant::now();
    for c in 0..chunks {
        s = job_steps(s, CHUNK);
        if interrupted.load(Ordering::Relaxed) != 0 {
            break;
        }
        match policy {
            YieldPolicy::Never => {}
            YieldPolicy::EveryChunk => {
                yield_fn();
                yields += 1;
            }
            YieldPolicy::Every(period) => {
                if c % CLOCK_EVERY_CHUNKS == 0 {
                    let now = Instant::now();
                    if now >= next + period {
                        yield_fn();
                        yields += 1;
                        next = Instant::now();
                    }
                }
            }
            YieldPolicy::PreemptPoint => uthread::preempt_point(),
        }
    }
    (s, yields)
}

/// The reference checksum, computed in one go.
pub fn reference_checksum(chunks: u64) -> u64 {
    job_steps(SEED, chunks * CHUNK)
}

/// The main event loop's check for events: a zero-timeout poll() (a system call, as
/// WaitNextEvent was a trap).
fn poll_events() {
    // SAFETY: no descriptors, zero timeout: returns at once.
    unsafe { libc::poll(std::ptr::null_mut(), 0, 0) };
}

/// Busy for `d` (a foreground frame's work).
fn busy(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// One worker run: (seconds, checksum, yields).
type JobRun = (f64, u64, u64);

#[derive(Debug, Clone, Copy)]
struct UMode {
    id: &'static str,
    worker: uthread::Mode,
    policy: YieldPolicy,
    background: bool,
    balance: bool,
    /// Runs the long job, which holds the study's 1/3 s yield once; the others run the short
    /// one (`Jobs`).
    long: bool,
    mac: Option<&'static str>,
    what: &'static str,
}

const U_MODES: &[UMode] = &[
    UMode {
        id: "coop_fg_333ms",
        worker: uthread::Mode::Cooperative,
        policy: YieldPolicy::Every(Duration::from_millis(333)),
        background: false,
        balance: false,
        long: true,
        mac: Some("coop_fg"),
        what: "cooperative worker yielding every 1/3 s (the study's 20 ticks); main loop polls and yields when idle",
    },
    UMode {
        id: "coop_fg_1ms",
        worker: uthread::Mode::Cooperative,
        policy: YieldPolicy::Every(Duration::from_millis(1)),
        background: false,
        balance: false,
        long: false,
        mac: None,
        what: "cooperative worker yielding every 1 ms; main loop polls and yields when idle",
    },
    UMode {
        id: "coop_fg_every4096",
        worker: uthread::Mode::Cooperative,
        policy: YieldPolicy::EveryChunk,
        background: false,
        balance: false,
        long: false,
        mac: None,
        what: "cooperative worker yielding every 4096 iterations (count-based); main loop polls and yields when idle",
    },
    UMode {
        id: "coop_bg_333ms",
        worker: uthread::Mode::Cooperative,
        policy: YieldPolicy::Every(Duration::from_millis(333)),
        background: true,
        balance: false,
        long: true,
        mac: Some("coop_bg"),
        what: "background: cooperative worker at TimeSharing(9) yielding every 1/3 s beside a foreground app at TimeSharing(10) (1 ms of CPU per 60 Hz frame)",
    },
    UMode {
        id: "preempt_fg",
        worker: uthread::Mode::Preemptive,
        policy: YieldPolicy::PreemptPoint,
        background: false,
        balance: false,
        long: false,
        mac: Some("preempt_fg"),
        what: "preemptive worker (3 ms quantum) that never yields; main loop polls and yields when idle",
    },
    UMode {
        id: "preempt_bg",
        worker: uthread::Mode::Preemptive,
        policy: YieldPolicy::PreemptPoint,
        background: true,
        balance: false,
        long: false,
        mac: Some("preempt_bg"),
        what: "background: preemptive worker at TimeSharing(9) beside a foreground app at TimeSharing(10) (1 ms of CPU per 60 Hz frame)",
    },
    UMode {
        id: "balance",
        worker: uthread::Mode::Preemptive,
        policy: YieldPolicy::PreemptPoint,
        background: false,
        balance: true,
        long: false,
        mac: None,
        what: "balance: preemptive worker beside a preemptive main thread busy-waiting until it is done (even split = 2.0)",
    },
];

/// One uthread run on a carrier pinned to `cpu`. `mode = None` is the never-yielding baseline.
fn run_uthread(
    cpu: usize,
    chunks: u64,
    mode: Option<UMode>,
    interrupted: &Arc<AtomicI32>,
) -> Result<JobRun> {
    std::thread::scope(|s| {
        spawn_scoped(s, "the carrier thread", move || -> Result<JobRun> {
            pin_current_thread(cpu)?;
            let rt = green_runtime(uthread::Runtime::new())?;
            let r = rt.block_on(move || {
                let done = Arc::new(AtomicBool::new(false));
                let (wmode, policy, prio) = match mode {
                    None => (uthread::Mode::Cooperative, YieldPolicy::Never, 10),
                    Some(m) => (m.worker, m.policy, if m.background { 9 } else { 10 }),
                };
                let d = Arc::clone(&done);
                let interrupted = Arc::clone(interrupted);
                let worker = uthread::Builder::new()
                    .name("job")
                    .mode(wmode)
                    .priority(uthread::Priority::TimeSharing(prio))
                    .spawn(move || {
                        let t = Instant::now();
                        let (sum, yields) =
                            run_job(chunks, policy, &uthread::yield_now, &interrupted);
                        let secs = t.elapsed().as_secs_f64();
                        d.store(true, Ordering::Release);
                        (secs, sum, yields)
                    })
                    .ok()?;
                let mut helpers = Vec::new();
                if mode.is_some_and(|m| m.background) {
                    let d = Arc::clone(&done);
                    helpers.push(
                        uthread::Builder::new()
                            .name("foreground app")
                            .priority(uthread::Priority::TimeSharing(10))
                            .spawn(move || {
                                let mut frame = Instant::now();
                                while !d.load(Ordering::Acquire) {
                                    busy(FRAME_WORK);
                                    frame += FRAME;
                                    let now = Instant::now();
                                    if frame > now {
                                        uthread::sleep(frame - now);
                                    } else {
                                        frame = now;
                                    }
                                }
                            })
                            .ok()?,
                    );
                }
                if mode.is_some_and(|m| m.balance) {
                    let d = Arc::clone(&done);
                    helpers.push(
                        uthread::Builder::new()
                            .name("busy main")
                            .mode(uthread::Mode::Preemptive)
                            .spawn(move || {
                                while !d.load(Ordering::Acquire) {
                                    for _ in 0..1024 {
                                        std::hint::spin_loop();
                                    }
                                    uthread::preempt_point();
                                }
                            })
                            .ok()?,
                    );
                } else {
                    // The main event loop: check for events, yield to the worker when idle.
                    while !done.load(Ordering::Acquire) {
                        poll_events();
                        uthread::yield_now();
                    }
                }
                let r = worker.join().finished();
                for h in helpers {
                    h.join();
                }
                r
            });
            r.ok_or_else(|| Error::Fail("uthread job did not finish".into()))
        })?
        .join()
        .unwrap_or_else(|_| Err(Error::Fail("uthread carrier panicked".into())))
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum KMode {
    Baseline,
    /// sched_yield every 4096 iterations beside an event loop blocked in poll().
    CoopEvery4096,
    /// Never yields beside an event loop blocked in poll() (wakes at 60 Hz).
    PreemptFg,
    /// nice 10 beside a foreground app at nice 0 (1 ms per 60 Hz frame).
    PreemptBg,
    /// Beside a main thread busy-waiting until the job is done.
    Balance,
}

const K_MODES: &[(KMode, &str, Option<&str>, &str)] = &[
    (
        KMode::CoopEvery4096,
        "coop_fg_every4096",
        None,
        "sched_yield() every 4096 iterations beside an event-loop thread blocked in poll() (16 ms timeout)",
    ),
    (
        KMode::PreemptFg,
        "preempt_fg",
        Some("preempt_fg"),
        "never yields, beside an event-loop thread blocked in poll() (16 ms timeout): the normal Linux program",
    ),
    (
        KMode::PreemptBg,
        "preempt_bg",
        Some("preempt_bg"),
        "background: the job at nice 10 beside a foreground app at nice 0 (1 ms of CPU per 60 Hz frame)",
    ),
    (
        KMode::Balance,
        "balance",
        None,
        "balance: beside a main thread at the same nice busy-waiting until the job is done (even split = 2.0)",
    ),
];

/// One kernel-thread run, every thread pinned to `cpu`.
fn run_kernel(cpu: usize, chunks: u64, mode: KMode, interrupted: &AtomicI32) -> Result<JobRun> {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let done = &done;
        let helper = match mode {
            KMode::Baseline => None,
            KMode::CoopEvery4096 | KMode::PreemptFg => Some(spawn_scoped(
                s,
                "the event-loop thread",
                move || -> Result<()> {
                    pin_current_thread(cpu)?;
                    while !done.load(Ordering::Acquire) {
                        // SAFETY: no descriptors; blocks for up to one frame.
                        unsafe { libc::poll(std::ptr::null_mut(), 0, 16) };
                    }
                    Ok(())
                },
            )?),
            KMode::PreemptBg => Some(spawn_scoped(
                s,
                "the foreground thread",
                move || -> Result<()> {
                    pin_and_nice(cpu, 0)?;
                    let mut frame = Instant::now();
                    while !done.load(Ordering::Acquire) {
                        busy(FRAME_WORK);
                        frame += FRAME;
                        let now = Instant::now();
                        if frame > now {
                            std::thread::sleep(frame - now);
                        } else {
                            frame = now;
                        }
                    }
                    Ok(())
                },
            )?),
            KMode::Balance => Some(spawn_scoped(
                s,
                "the busy main thread",
                move || -> Result<()> {
                    pin_current_thread(cpu)?;
                    while !done.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                    Ok(())
                },
            )?),
        };
        let worker = spawn_scoped(s, "the job thread", move || -> Result<JobRun> {
            let r = pin_and_nice(cpu, if mode == KMode::PreemptBg { 10 } else { 0 }).map(|_| {
                let policy = if mode == KMode::CoopEvery4096 {
                    YieldPolicy::EveryChunk
                } else {
                    YieldPolicy::Never
                };
                let t = Instant::now();
                let (sum, yields) = run_job(chunks, policy, &sys::sched_yield, interrupted);
                (t.elapsed().as_secs_f64(), sum, yields)
            });
            done.store(true, Ordering::Release);
            r
        })
        .inspect_err(|_| done.store(true, Ordering::Release))?;
        let r = worker
            .join()
            .unwrap_or_else(|_| Err(Error::Fail("job thread panicked".into())));
        done.store(true, Ordering::Release);
        if let Some(h) = helper {
            h.join()
                .unwrap_or_else(|_| Err(Error::Fail("helper thread panicked".into())))?;
        }
        r
    })
}

/// Seconds per chunk of the never-yielding job on this machine: the fastest of three timings of
/// a batch of at least 20 ms (a preempted timing would overestimate a chunk).
fn calibrate() -> f64 {
    let mut n: u64 = 64;
    let time = |n: u64| {
        let t = Instant::now();
        std::hint::black_box(job_steps(SEED, n * CHUNK));
        t.elapsed()
    };
    while time(n) < Duration::from_millis(20) && n < (1 << 30) {
        n *= 2;
    }
    let best = (0..3)
        .map(|_| time(n))
        .min()
        .unwrap_or(Duration::from_millis(20));
    best.as_secs_f64() / n as f64
}

/// Chunks that make the never-yielding job take about `target` at `per_chunk` seconds each.
fn chunks_for(per_chunk: f64, target: Duration) -> u64 {
    ((target.as_secs_f64() / per_chunk.max(1e-12)) as u64).max(16)
}

/// The quick suite's job lengths (`Jobs`): the long one just over the study's 1/3 s.
const QUICK_LONG_JOB: Duration = Duration::from_millis(350);
const QUICK_SHORT_JOB: Duration = Duration::from_millis(175);

/// The two lengths of the job, in chunks. The long one lasts just over the study's 1/3 s, so
/// that a mode yielding every 1/3 s yields once per job. Every other mode pays per yield, per
/// quantum or per frame, a rate that a job half as long measures as well, so those run the
/// short one, against a baseline of the same length. Three quick runs with one length for all
/// and three with two: every score's ratio of medians 0.988-1.015 (95% intervals within
/// 0.96-1.04), and the experiment 11.8-12.1 s against 8.2-8.3 s.
#[derive(Debug, Clone, Copy)]
struct Jobs {
    long: u64,
    short: u64,
}

const INFO: Info = Info {
    name: "coop",
    study: &seeds::MAC_1997,
    measures: "a CPU-bound job's time relative to never yielding: cooperative (1/3 s, 1 ms, every 4096 iterations), preemptive, foreground/background, balance; uthread on one carrier and kernel threads on one CPU",
    rough_secs: [0.5, 8.3, 49.0],
};

impl Experiment for Coop {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpu = home_cpu();
        let (long, short) = ctx.mode.pick(
            (Duration::from_millis(15), Duration::from_millis(15)),
            (QUICK_LONG_JOB, QUICK_SHORT_JOB),
            (Duration::from_millis(1000), Duration::from_millis(1000)),
        );
        let reps = ctx.mode.pick(1, 2, 3);
        ctx.step("coop calibration")?;
        let per_chunk = calibrate();
        let jobs = Jobs {
            long: chunks_for(per_chunk, long),
            short: chunks_for(per_chunk, short),
        };
        let expect_long = reference_checksum(jobs.long);
        let expect_short = if jobs.short == jobs.long {
            expect_long
        } else {
            reference_checksum(jobs.short)
        };
        let flag = ctx.cancel.shared_flag();
        let check = |what: &str, want: u64, r: &JobRun| -> Result<()> {
            // An interrupted job stopped early: say so, not that its checksum is wrong.
            ctx.cancel.check()?;
            if r.1 != want {
                return Err(Error::Fail(format!(
                    "{what}: checksum {:#x} differs from the reference {want:#x}",
                    r.1
                )));
            }
            Ok(())
        };

        let u_names: Vec<&str> = U_MODES.iter().map(|m| m.id).collect();
        let k_names: Vec<&str> = K_MODES.iter().map(|m| m.1).collect();
        // Where both lengths are one (tiny, --full), every mode runs in the long set and the
        // short set, holding none, runs nothing.
        let split = jobs.short != jobs.long;
        let of_length = |long: bool| -> Vec<usize> {
            (0..U_MODES.len())
                .filter(|&i| if split { U_MODES[i].long == long } else { long })
                .collect()
        };
        let mut u_long = Scores::new(U_MODES.len(), of_length(true), jobs.long, expect_long);
        let mut u_short = Scores::new(U_MODES.len(), of_length(false), jobs.short, expect_short);
        let kernel_modes = (0..K_MODES.len()).collect();
        let mut kernel = Scores::new(K_MODES.len(), kernel_modes, jobs.short, expect_short);
        for rep in 0..reps {
            ctx.step(&format!("coop.uthread rep {}", rep + 1))?;
            for u in [&mut u_long, &mut u_short] {
                let chunks = u.chunks;
                u.rep(ctx, "uthread baseline", &u_names, &check, |m| {
                    run_uthread(cpu, chunks, m.map(|i| U_MODES[i]), &flag)
                })?;
            }
            ctx.step(&format!("coop.kernel rep {}", rep + 1))?;
            kernel.rep(ctx, "kernel baseline", &k_names, &check, |m| {
                run_kernel(
                    cpu,
                    jobs.short,
                    m.map_or(KMode::Baseline, |i| K_MODES[i].0),
                    &flag,
                )
            })?;
        }
        let found = Found {
            cpu,
            reps,
            u_long,
            u_short,
            kernel,
        };
        let medians = found.metrics(out)?;
        out.tables.push(found.table(&medians));
        out.conclusion = Some(found.conclusion(&medians));
        Ok(())
    }
}

/// The scores of the modes that run one job length on one substrate: per mode, each rep's ratio
/// to that rep's baseline (the same job never yielding); the last rep's yields per mode; each
/// rep's baseline.
struct Scores {
    /// The modes (indices into the substrate's list) this holds.
    modes: Vec<usize>,
    /// The job's length, chunks of 4096 iterations, and the checksum every run of it must give.
    chunks: u64,
    expect: u64,
    /// Per mode of the substrate's list; empty for a mode this does not hold.
    scores: Vec<Vec<f64>>,
    yields: Vec<u64>,
    baselines: Vec<f64>,
    /// The last rep's closing baseline: the next rep opens with it rather than running
    /// another (the two would be back to back).
    last: Option<JobRun>,
}

impl Scores {
    fn new(all: usize, modes: Vec<usize>, chunks: u64, expect: u64) -> Scores {
        Scores {
            modes,
            chunks,
            expect,
            scores: vec![Vec::new(); all],
            yields: vec![0u64; all],
            baselines: Vec::new(),
            last: None,
        }
    }

    /// One rep: the baseline (`run(None)`), each of its modes (`run(Some(i))`), the baseline
    /// again. The baseline is run before and after the modes and averaged, so that a drift in
    /// the machine's load during the rep does not bias every score one way; a rep after the
    /// first opens with the previous rep's closing baseline.
    fn rep(
        &mut self,
        ctx: &Ctx,
        baseline: &str,
        names: &[&str],
        check: &dyn Fn(&str, u64, &JobRun) -> Result<()>,
        run: impl Fn(Option<usize>) -> Result<JobRun>,
    ) -> Result<()> {
        if self.modes.is_empty() {
            return Ok(());
        }
        let before = match self.last.take() {
            Some(b) => b,
            None => {
                let b = run(None)?;
                check(baseline, self.expect, &b)?;
                b
            }
        };
        let mut times = Vec::new();
        for &i in &self.modes {
            ctx.cancel.check()?;
            let r = run(Some(i))?;
            check(names[i], self.expect, &r)?;
            times.push((i, r.0));
            self.yields[i] = r.2;
        }
        let after = run(None)?;
        check(baseline, self.expect, &after)?;
        let base = (before.0 + after.0) / 2.0;
        self.baselines.push(base);
        self.last = Some(after);
        for (i, t) in times {
            self.scores[i].push(t / base);
        }
        Ok(())
    }

    fn holds(&self, i: usize) -> bool {
        self.modes.contains(&i)
    }

    fn base_median(&self) -> f64 {
        Summary::from_samples(&self.baselines, 1).map_or(f64::NAN, |s| s.median)
    }

    fn summary(&self, i: usize) -> Result<Summary> {
        Summary::from_samples(&self.scores[i], 1)
            .ok_or_else(|| Error::Fail("no coop samples".into()))
    }
}

/// Both substrates' scores and what their notes name.
struct Found {
    cpu: usize,
    reps: usize,
    /// uthread's modes that run the long job, and those that run the short one.
    u_long: Scores,
    u_short: Scores,
    kernel: Scores,
}

/// Each score's median by metric id, for the table and the conclusion.
type Medians = Vec<(String, f64)>;

fn median_of(medians: &Medians, id: &str) -> Option<f64> {
    medians.iter().find(|m| m.0 == id).map(|m| m.1)
}

/// The Mac models' range of a score column ("-" for a column the Mac did not have).
fn mac_range(col: &str) -> String {
    let idx = match col {
        "coop_fg" => 1,
        "coop_bg" => 2,
        "preempt_fg" => 3,
        "preempt_bg" => 4,
        _ => return "-".into(),
    };
    let vals: Vec<f64> = seeds::MAC_SCORES
        .iter()
        .map(|r| [r.1, r.2, r.3, r.4][idx - 1])
        .collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(0.0, f64::max);
    format!("{lo:.3}..{hi:.3}")
}

impl Found {
    /// The scores that hold uthread mode `i`.
    fn uthread(&self, i: usize) -> &Scores {
        if self.u_long.holds(i) {
            &self.u_long
        } else {
            &self.u_short
        }
    }

    /// One score metric per mode and substrate; their medians.
    fn metrics(&self, out: &mut Outcome) -> Result<Medians> {
        let cpu = self.cpu;
        let mut medians: Medians = Vec::new();
        for (i, m) in U_MODES.iter().enumerate() {
            let held = self.uthread(i);
            let (base, chunks) = (held.base_median(), held.chunks);
            let s = held.summary(i)?;
            let id = format!("coop.score.{}", m.id);
            medians.push((id.clone(), s.median));
            let yields = held.yields[i];
            let yields_per_s = yields as f64 / (base * s.median);
            out.add(
                Metric::from_summary(
                    &id,
                    Unit::Score,
                    &s,
                    format!("one uthread carrier on CPU {cpu}"),
                    format!(
                        "{}; time / time of the same job never yielding (mean of runs before and after the modes, {base:.3} s, {chunks} x \
                         4096 iterations, checksum verified); {} yields ({yields_per_s:.0}/s)",
                        m.what, yields
                    ),
                )
                .with_direction(score_direction(&id)),
            );
        }
        let (base_k, chunks_k) = (self.kernel.base_median(), self.kernel.chunks);
        for (i, m) in K_MODES.iter().enumerate() {
            let s = self.kernel.summary(i)?;
            let id = format!("coop.score.kernel.{}", m.1);
            medians.push((id.clone(), s.median));
            out.add(
                Metric::from_summary(
                    &id,
                    Unit::Score,
                    &s,
                    Placement::SameCpu(cpu),
                    format!(
                        "kernel threads pinned to CPU {cpu}: {}; time / time of the job alone \
                         never yielding ({base_k:.3} s, {chunks_k} x 4096 iterations); {} yields",
                        m.3, self.kernel.yields[i]
                    ),
                )
                .with_direction(score_direction(&id)),
            );
        }
        Ok(medians)
    }

    /// Today's scores on both substrates beside the Mac's.
    fn table(&self, medians: &Medians) -> Table {
        let mut table = Table::new(
            "coop.scores",
            "Scores: time relative to the same job never yielding (1.00)",
            &[
                "mode",
                "uthread",
                "kernel",
                "Mac (Quadra 700 32-bit)",
                "Mac range (9 models)",
            ],
        );
        let lengths = if self.u_short.modes.is_empty() {
            format!("{:.2} s", self.u_long.base_median())
        } else {
            format!(
                "{:.2} s on uthread for the modes yielding every 1/3 s, {:.2} s for the others",
                self.u_long.base_median(),
                self.u_short.base_median()
            )
        };
        table.note = format!(
            "median of {} runs; 1.00 = the job never yielding ({lengths}); Mac figures from {}",
            self.reps,
            seeds::MAC_1997.citation
        );
        let get = |id: &str| median_of(medians, id);
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        for m in U_MODES {
            let k = get(&format!("coop.score.kernel.{}", m.id));
            let col = m.mac.unwrap_or("");
            let mac = seeds::historical(&format!("coop.score.{}", m.id))
                .map_or("-".to_string(), |h| format!("{:.3}", h.value));
            table.row(vec![
                m.id.to_string(),
                fmt(get(&format!("coop.score.{}", m.id))),
                fmt(k),
                mac,
                if m.id == "balance" {
                    "2.0 = even".to_string()
                } else {
                    mac_range(col)
                },
            ]);
        }
        table
    }

    /// What yielding on time, on a count and preemption cost, and which to choose.
    fn conclusion(&self, medians: &Medians) -> String {
        let get = |id: &str| median_of(medians, id).unwrap_or(f64::NAN);
        let every4096 = get("coop.score.coop_fg_every4096");
        let k4096 = get("coop.score.kernel.coop_fg_every4096");
        let balance = get("coop.score.balance");
        let kbalance = get("coop.score.kernel.balance");
        let pfg = get("coop.score.preempt_fg");
        let t333 = get("coop.score.coop_fg_333ms");
        let t1ms = get("coop.score.coop_fg_1ms");
        let kbg = get("coop.score.kernel.preempt_bg");
        let i4096 = U_MODES
            .iter()
            .position(|m| m.id == "coop_fg_every4096")
            .unwrap_or(0);
        let held = self.uthread(i4096);
        let rate = held.yields[i4096] as f64 / (held.base_median() * every4096);
        format!(
            "Yielding on a time basis scores {t333:.3} at 1/3 s and {t1ms:.3} at 1 ms: next to \
             nothing. Yielding every 4096 iterations scores {every4096:.3} on uthread and {k4096:.3} \
             with sched_yield: the count fixes the work between yields, not the time, so this \
             machine yields {rate:.0} times a second and pays an event-loop turn (a poll() system \
             call) each time; the faster the CPU, the more it pays, which is why the study calls \
             it unwise. Preemption scores {pfg:.3} on uthread (3 ms quantum), where the Macs lost \
             8-130%: a timer tick and a switch are cheap now. In the background the job loses what \
             the 6% foreground load takes, and on kernel threads ({kbg:.3}) at nice 10 it also \
             gives way to every other job on the machine. The balance test splits the CPU evenly \
             on uthread's lottery ({balance:.2}) and on Linux's fair scheduler ({kbalance:.2}); the \
             study found the Mac's main thread slightly favoured. Choose preemptive threads for \
             CPU-bound jobs; if you must yield cooperatively, yield on time, not on a count."
        )
    }
}

/// A score is a cost (lower is better) except the balance test's, where 2.0 is the even split.
fn score_direction(id: &str) -> Direction {
    if id.ends_with(".balance") {
        Direction::Neither
    } else {
        Direction::LowerIsBetter
    }
}

#[cfg(test)]
mod tests;
