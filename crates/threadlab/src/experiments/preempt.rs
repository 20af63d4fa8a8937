//! `preempt`: what it costs to interrupt a running user-level thread, by the standard path (a
//! timer signal), by a thread-directed signal, and by the direct path (the running code polls a
//! flag), and what a preemptive green thread loses in throughput (Erlangen QuickThreads port on
//! Mach 3.0: standard path 24.42 ms, asynchronous software trap 0.19 ms, direct return from
//! interrupt "some processor cycles").

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{own_series, Axis, Ctx, Experiment, Info, Interleaved, Outcome};
use crate::measure::pair::CacheLine;
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::process::{mono_ns, thread_cpu_ns};
use crate::measure::sampler::Sampler;
use crate::measure::spawn::{green_runtime, spawn};
use crate::measure::units::{Direction, Unit};
use crate::results::Metric;
use crate::seeds;
use crate::sys::gettid;

pub struct Preempt;

/// The signal the experiment's own timer and tgkill use. Not SIGURG (uthread's) nor SIGINT or
/// SIGTERM (the lab's cancellation); the previous disposition is restored afterwards.
const SIGNAL: libc::c_int = libc::SIGUSR2;

/// Period of the fast timer whose cost `preempt.timer_signal` measures.
const TIMER_PERIOD: Duration = Duration::from_micros(250);

/// Quanta of the throughput-loss series.
const QUANTA_US: [u64; 5] = [100, 300, 1_000, 3_000, 10_000];

// Signal handlers cannot take arguments: the counters they update are statics. The experiment
// runs alone (the suite runs experiments one at a time), and every measurement resets them.
static SIGNALS: AtomicU64 = AtomicU64::new(0);
static HANDLER_NS: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_handler(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

extern "C" fn stamp_handler(_: libc::c_int) {
    // First thing: read the clock (clock_gettime is async-signal-safe).
    let now = mono_ns();
    let _ = HANDLER_NS.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// Installs a handler for SIGNAL and restores the previous one on drop.
struct HandlerGuard {
    previous: libc::sigaction,
}

impl HandlerGuard {
    fn install(handler: extern "C" fn(libc::c_int)) -> Result<HandlerGuard> {
        // SAFETY: sigaction is plain data; the handler only touches atomics and the clock, which
        // is async-signal-safe; SA_RESTART keeps interrupted system calls transparent.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(SIGNAL, &sa, &mut previous) != 0 {
                return Err(Error::os("sigaction"));
            }
            Ok(HandlerGuard { previous })
        }
    }
}

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        // SAFETY: restores the disposition the kernel gave us before install.
        unsafe {
            libc::sigaction(SIGNAL, &self.previous, std::ptr::null_mut());
        }
    }
}

/// A POSIX timer on CLOCK_MONOTONIC that sends SIGNAL to one thread (SIGEV_THREAD_ID: a
/// process-directed SIGEV_SIGNAL could land on any of the lab's threads).
struct ThreadTimer {
    id: libc::timer_t,
}

impl ThreadTimer {
    fn for_current_thread() -> Result<ThreadTimer> {
        // SAFETY: sigevent is plain data (zeroed, then the fields Linux reads are set); the
        // timer id is written by timer_create on success.
        unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = SIGNAL;
            sev.sigev_notify_thread_id = gettid();
            let mut id: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) != 0 {
                return Err(Error::os("timer_create"));
            }
            Ok(ThreadTimer { id })
        }
    }

    /// Arms the timer: first expiry at `first` (absolute monotonic ns, 0 disarms), then every
    /// `period` (zero: one shot).
    fn arm(&self, first_ns: u64, period: Duration) -> Result<()> {
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: ts(period.as_nanos() as u64),
            it_value: ts(first_ns),
        };
        // SAFETY: the timer id is live (owned by self); spec is a valid itimerspec.
        let rc = unsafe {
            libc::timer_settime(self.id, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(Error::os("timer_settime"));
        }
        Ok(())
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: deletes the timer this value created; no further signals are generated.
        unsafe {
            libc::timer_delete(self.id);
        }
    }
}

/// One unit of CPU-bound work (an LCG step the compiler cannot remove).
#[inline(always)]
fn work_step(x: u64, i: u64) -> u64 {
    std::hint::black_box(
        x.wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(i | 1),
    )
}

const SPIN_CHUNK: u64 = 8192;

/// Spins until this thread has used `window_ns` of CPU; returns (work steps, CPU ns used).
fn spin_for_cpu(window_ns: u64) -> (u64, u64) {
    let start = thread_cpu_ns();
    let mut x = 1u64;
    let mut steps = 0u64;
    loop {
        for i in 0..SPIN_CHUNK {
            x = work_step(x, i);
        }
        steps += SPIN_CHUNK;
        let used = thread_cpu_ns() - start;
        if used >= window_ns {
            std::hint::black_box(x);
            return (steps, used);
        }
    }
}

/// CPU time lost per signal: a window with the timer used `cpu_with_ns` for `steps_with` steps,
/// which take `steps_with / rate` without it (`rate` = steps per ns measured without a timer).
pub fn loss_per_signal_ns(
    rate_steps_per_ns: f64,
    steps_with: u64,
    cpu_with_ns: u64,
    signals: u64,
) -> Option<f64> {
    if signals == 0 || rate_steps_per_ns <= 0.0 {
        return None;
    }
    let needed = steps_with as f64 / rate_steps_per_ns;
    Some((cpu_with_ns as f64 - needed) / signals as f64)
}

/// Throughput loss in percent of a run that took `t_with` against a reference `t_ref`.
pub fn loss_percent(t_with: f64, t_ref: f64) -> f64 {
    (t_with / t_ref - 1.0) * 100.0
}

/// One sample of the timer-signal cost: a window without timer, one with a periodic timer, a
/// second without (the reference rate is the mean of the two, cancelling slow drift).
fn timer_loss_sample(window_ns: u64) -> Result<f64> {
    let timer = ThreadTimer::for_current_thread()?;
    let (s_a, c_a) = spin_for_cpu(window_ns);
    SIGNALS.store(0, Ordering::Relaxed);
    timer.arm(mono_ns() + TIMER_PERIOD.as_nanos() as u64, TIMER_PERIOD)?;
    let (s_w, c_w) = spin_for_cpu(window_ns);
    timer.arm(0, Duration::ZERO)?;
    let signals = SIGNALS.load(Ordering::Relaxed);
    let (s_b, c_b) = spin_for_cpu(window_ns);
    let rate = (s_a + s_b) as f64 / (c_a + c_b) as f64;
    loss_per_signal_ns(rate, s_w, c_w, signals)
        .ok_or_else(|| Error::Fail("the periodic timer delivered no signal".into()))
}

/// One sample of expiry-to-handler latency: mean over `shots` one-shot timers, each armed
/// 300 us ahead while this thread spins, in ns.
fn timer_latency_sample(shots: u32) -> Result<f64> {
    let timer = ThreadTimer::for_current_thread()?;
    let mut total = 0u64;
    for _ in 0..shots {
        HANDLER_NS.store(0, Ordering::Relaxed);
        let expiry = mono_ns() + 300_000;
        timer.arm(expiry, Duration::ZERO)?;
        let limit = expiry + 1_000_000_000;
        loop {
            let h = HANDLER_NS.load(Ordering::Relaxed);
            if h != 0 {
                total += h.saturating_sub(expiry);
                break;
            }
            if mono_ns() > limit {
                return Err(Error::Fail(
                    "a one-shot timer did not fire within 1 s".into(),
                ));
            }
            std::hint::spin_loop();
        }
    }
    Ok(total as f64 / shots as f64)
}

fn tgkill_self(pid: libc::pid_t, tid: libc::pid_t) {
    // SAFETY: sends SIGNAL to this very thread; its handler is installed by the caller.
    unsafe {
        libc::syscall(libc::SYS_tgkill, pid, tid, SIGNAL);
    }
}

/// One LCG chain: bound by the chain's latency. With `POLL`, a relaxed load of `flag` and a
/// branch at every iteration (the study's "direct path").
fn chain_loop<const POLL: bool>(n: u64, flag: &AtomicBool) -> Duration {
    let t = Instant::now();
    let mut x = 1u64;
    for i in 0..n {
        if POLL && flag.load(Ordering::Relaxed) {
            break;
        }
        x = work_step(x, i);
    }
    std::hint::black_box(x);
    t.elapsed()
}

/// Four independent LCG chains per iteration: the core's issue width bounds this loop, not one
/// chain's latency, so an instruction added to each iteration shows up in its time. With
/// `POLL`, the same check as `chain_loop`. The `black_box` per iteration (the same with and
/// without the check) keeps the compiler from vectorising one loop and not the other.
fn wide_loop<const POLL: bool>(n: u64, flag: &AtomicBool) -> Duration {
    let t = Instant::now();
    let mut v = [1u64, 2, 3, 4];
    for i in 0..n {
        if POLL && flag.load(Ordering::Relaxed) {
            break;
        }
        for (k, x) in v.iter_mut().enumerate() {
            *x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(i ^ k as u64);
        }
        v = std::hint::black_box(v);
    }
    std::hint::black_box(v);
    t.elapsed()
}

/// Records `id`: the per-iteration cost of the flag check in `with` against the same loop
/// without it (`without`), both sampled interleaved and subtracted round by round; `note`
/// gets the two medians (without, with) in ns per iteration.
fn check_cost(
    ctx: &Ctx,
    out: &mut Outcome,
    id: &str,
    placement: Placement,
    without: fn(u64, &AtomicBool) -> Duration,
    with: fn(u64, &AtomicBool) -> Duration,
    note: impl Fn(f64, f64) -> String,
) -> Result<()> {
    let flag = AtomicBool::new(false);
    let (base, poll) = (format!("{id}.without"), format!("{id}.with"));
    let mut group = Interleaved::new();
    group
        .input(&base, |n| Ok(without(n, &flag)))
        .input(&poll, |n| Ok(with(n, &flag)))
        .derived(
            id,
            Unit::Ns,
            placement,
            String::new(),
            &[&poll, &base],
            |v| v[0] - v[1],
        );
    let measured = group.measure(ctx, out)?;
    let (b, w) = (
        measured.median_ns(&base).unwrap_or(f64::NAN),
        measured.median_ns(&poll).unwrap_or(f64::NAN),
    );
    if let Some(m) = out.metric_mut(id) {
        m.note = note(b, w);
        // A cost near zero is as often below as above it: neither direction is better.
        m.direction = Direction::Neither;
    }
    Ok(())
}

/// Records `preempt.poll_flag.latency`: half the round trip of a flag ping-pong with a partner
/// spinning on another CPU. A fresh flag and partner every trial, and the two CPUs' distance
/// read before each: which physical cores the host gives the pair decides this figure (23 ns
/// and 200 ns in runs of one build), so the spread must span partners and placements.
fn flag_latency(ctx: &Ctx, out: &mut Outcome, cpus: (usize, usize)) -> Result<()> {
    let _pin = PinGuard::pin(cpus.0)?;
    let mut group = Interleaved::new();
    group.row_fresh(
        "preempt.poll_flag.latency",
        Unit::Ns,
        Placement::CrossCpu(cpus.0, cpus.1),
        "time from a store to a flag on one CPU until code polling it on another CPU sees it: \
         half the round trip of a flag ping-pong (both spin; cache-line transfer each way); a \
         fresh flag and partner thread each trial; nothing subtracted",
        move || FlagPair::start(cpus.1).map(|mut pair| move |n| pair.batch(n)),
    );
    group.measure(ctx, out)?;
    Ok(())
}

/// The flag a ping-pong passes, on a line of its own, and the partner spinning on it.
struct FlagPair {
    turn: std::sync::Arc<CacheLine<AtomicU32>>,
    partner: Option<std::thread::JoinHandle<Result<()>>>,
}

impl FlagPair {
    const STOP: u32 = u32::MAX;

    fn start(cpu: usize) -> Result<FlagPair> {
        let turn = std::sync::Arc::new(CacheLine(AtomicU32::new(0)));
        let t = turn.clone();
        let partner = spawn("the polling partner", move || -> Result<()> {
            pin_current_thread(cpu)?;
            loop {
                let v = t.0.load(Ordering::Acquire);
                if v == Self::STOP {
                    return Ok(());
                }
                if v % 2 == 1 {
                    t.0.store(v + 1, Ordering::Release);
                }
                std::hint::spin_loop();
            }
        })?;
        Ok(FlagPair {
            turn,
            partner: Some(partner),
        })
    }

    /// `n` round trips; half their time.
    fn batch(&mut self, n: u64) -> Result<Duration> {
        let turn = &self.turn.0;
        let t0 = Instant::now();
        for _ in 0..n {
            let t = turn.load(Ordering::Relaxed);
            let next = if t >= Self::STOP - 2 { 1 } else { t + 1 };
            turn.store(next, Ordering::Release);
            let deadline = Instant::now() + Duration::from_secs(5);
            let mut spins = 0u32;
            while turn.load(Ordering::Acquire) != next + 1 {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins % 65_536 == 0 && Instant::now() > deadline {
                    return Err(Error::Fail("the polling partner stopped answering".into()));
                }
            }
        }
        Ok(t0.elapsed() / 2)
    }
}

impl Drop for FlagPair {
    /// Stops and joins the partner: a trial's threads end with it.
    fn drop(&mut self) {
        self.turn.0.store(Self::STOP, Ordering::Release);
        if let Some(p) = self.partner.take() {
            let _ = p.join();
        }
    }
}

/// Time per signal-driven preemptive switch in uthread: two Preemptive threads on one carrier,
/// each raising the runtime's preemption signal with tgkill; the handler switches to the other.
fn green_switch_batch(rt: &uthread::Runtime, n: u64) -> Result<Duration> {
    let per_side = n.div_ceil(2).max(1);
    let before = rt.stats().preemptions;
    let took = rt.block_on(move || {
        let side = move || {
            for _ in 0..per_side {
                uthread::__private::raise_preempt_signal();
            }
        };
        let mk = || {
            uthread::Builder::new()
                .mode(uthread::Mode::Preemptive)
                .stack_size(64 * 1024)
                .spawn(side)
        };
        let (a, b) = (mk()?, mk()?);
        let t = Instant::now();
        a.join();
        b.join();
        Ok::<_, std::io::Error>(t.elapsed())
    })?;
    let switched = rt.stats().preemptions - before;
    if switched < per_side {
        return Err(Error::Fail(format!(
            "expected in-handler switches, got {switched} for {per_side} signals per thread"
        )));
    }
    Ok(took.mul_f64(n as f64 / (2 * per_side) as f64))
}

/// CPU ns a fixed job of `steps` takes in a green thread of `mode` on a runtime with quantum `q`.
fn green_job_cpu_ns(q: Duration, mode: uthread::Mode, steps: u64) -> Result<u64> {
    let rt = uthread::Runtime::builder()
        .quantum(q)
        .build()
        .map_err(|e| Error::Fail(format!("uthread runtime with quantum {q:?}: {e}")))?;
    let rt = green_runtime(rt)?;
    rt.block_on(move || {
        let h = uthread::Builder::new()
            .mode(mode)
            .stack_size(64 * 1024)
            .spawn(move || {
                // The carrier's CPU clock, read inside the job: excludes spawn and timer set-up,
                // includes every signal delivery and handler run.
                let t = thread_cpu_ns();
                let mut x = 1u64;
                for i in 0..steps {
                    x = work_step(x, i);
                }
                std::hint::black_box(x);
                thread_cpu_ns() - t
            })?;
        h.join()
            .finished()
            .ok_or_else(|| std::io::Error::other("the job thread did not finish"))
    })
    .map_err(|e| Error::Fail(format!("green job: {e}")))
}

/// UINTR (x86 user interrupts): CPU flag and kernel support. Returns why it cannot be used.
fn uintr_unavailable_reason() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == "uintr"))
        })
        .unwrap_or(false);
    let kernel = std::fs::read_to_string("/proc/kallsyms")
        .map(|s| s.contains("uintr_register_handler"))
        .unwrap_or(false);
    match (cpu, kernel) {
        (false, _) => "the CPU does not report the uintr flag (Sapphire Rapids and later Intel \
                       server parts have it), and mainline Linux has no UINTR system calls (the \
                       2021 RFC patches were never merged)"
            .into(),
        (true, false) => "the CPU has uintr but this kernel has no UINTR system calls \
                          (uintr_register_handler is not in mainline Linux; it needs the RFC \
                          patch series)"
            .into(),
        (true, true) => "CPU and kernel support UINTR, but the lab does not drive it yet".into(),
    }
}

const INFO: Info = Info {
    name: "preempt",
    study: &seeds::ERLANGEN_MACH,
    measures: "cost of interrupting a running thread: timer signal (loss per signal, expiry latency), tgkill round trip, polled flag (per check, cross-CPU latency), uthread's signal-driven switch, throughput loss vs quantum",
    rough_secs: [1.0, 5.0, 15.0],
};

impl Experiment for Preempt {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpu = home_cpu();
        let sampler = ctx.sampler();
        timer_signal(ctx, &sampler, out, cpu)?;
        signal_and_switch(ctx, out, cpu)?;
        timer_latency(ctx, &sampler, out, cpu)?;
        poll_flag(ctx, out, cpu)?;
        match cpu_pair() {
            Some(pair) => flag_latency(ctx, out, pair)?,
            None => out.skip(
                "preempt.poll_flag.latency",
                "this process may use only one CPU",
            ),
        }
        throughput_loss(ctx, &sampler, out, cpu)?;
        out.skip("preempt.uintr", uintr_unavailable_reason());
        out.conclusion = conclusion(out);
        Ok(())
    }
}

/// The standard path: what a POSIX timer signal costs the spin loop it interrupts.
fn timer_signal(ctx: &Ctx, sampler: &Sampler, out: &mut Outcome, cpu: usize) -> Result<()> {
    let placement = Placement::SameCpu(cpu);
    let window_ns = ctx.mode.pick(2_000_000u64, 20_000_000, 50_000_000);
    let _pin = PinGuard::pin(cpu)?;
    let _handler = HandlerGuard::install(count_handler)?;

    ctx.step("preempt.timer_signal")?;
    let s = sampler.repeat(|| timer_loss_sample(window_ns), 1)?;
    out.add_ns(
        "preempt.timer_signal",
        Unit::Us,
        &s,
        placement,
        format!(
            "standard path: a POSIX timer (timer_create CLOCK_MONOTONIC, \
                 SIGEV_THREAD_ID to this thread) every {} us interrupts a spin loop; \
                 per signal = (thread CPU time used - CPU time the same work takes \
                 without the timer) / signals; reference rate = mean of windows before \
                 and after; {} ms CPU windows; includes timer interrupt, signal \
                 delivery, a counting handler, sigreturn and cache/TLB disturbance",
            TIMER_PERIOD.as_micros(),
            window_ns / 1_000_000
        ),
    )?;
    Ok(())
}

/// The signal round trip and uthread's signal-driven switch are read against each other
/// (bar: the switch <= 1.5x the bare signal), so they are sampled interleaved.
fn signal_and_switch(ctx: &Ctx, out: &mut Outcome, cpu: usize) -> Result<()> {
    let placement = Placement::SameCpu(cpu);
    let _pin = PinGuard::pin(cpu)?;
    let _handler = HandlerGuard::install(count_handler)?;
    // SAFETY: getpid has no preconditions.
    let (pid, tid) = (unsafe { libc::getpid() }, gettid());
    let rt = green_runtime(uthread::Runtime::new())?;
    let mut group = Interleaved::new();
    group.row(
        "preempt.signal_roundtrip",
        Unit::Ns,
        placement,
        "thread-directed signal: tgkill to the calling thread, delivered on the syscall's \
         return, a handler that increments a counter, sigreturn; per round trip, \
         calibrated batches; nothing subtracted; the study's figure is its asynchronous \
         software trap",
        |n| {
            let t = Instant::now();
            for _ in 0..n {
                tgkill_self(pid, tid);
            }
            Ok(t.elapsed())
        },
    );
    if uthread::preempt_safe_alloc_installed() {
        group
            .row(
                "preempt.green_switch",
                Unit::Ns,
                placement,
                "uthread's full preemptive switch: two Mode::Preemptive green threads on \
                 one carrier each raise the runtime's preemption signal (tgkill to self, \
                 the same path as preempt.signal_roundtrip) and the handler switches to \
                 the other thread; per switch, nothing subtracted (bar <= 1.5x the bare \
                 signal round trip, see preempt.green_switch.vs_signal)",
                |n| green_switch_batch(&rt, n),
            )
            .ratio(
                "preempt.green_switch.vs_signal",
                "preempt.green_switch",
                "preempt.signal_roundtrip",
                "what a signal-driven green switch costs over the bare signal round trip",
            );
    } else {
        out.skip(
            "preempt.green_switch",
            "uthread::PreemptSafeAlloc is not the global allocator of this binary, so \
             uthread defers every preemption to a safe point instead of switching in the \
             signal handler",
        );
    }
    group.measure(ctx, out)?;
    Ok(())
}

/// How late a one-shot timer's handler runs after the programmed expiry.
fn timer_latency(ctx: &Ctx, sampler: &Sampler, out: &mut Outcome, cpu: usize) -> Result<()> {
    let placement = Placement::SameCpu(cpu);
    let _pin = PinGuard::pin(cpu)?;
    let _handler = HandlerGuard::install(stamp_handler)?;
    ctx.step("preempt.timer_latency")?;
    let shots = ctx.mode.pick(5, 20, 50);
    let s = sampler.repeat(|| timer_latency_sample(shots), shots as u64)?;
    out.add_ns(
        "preempt.timer_latency",
        Unit::Us,
        &s,
        placement,
        format!(
            "one-shot absolute timer (CLOCK_MONOTONIC, SIGEV_THREAD_ID) armed 300 us \
             ahead while the thread spins; from the programmed expiry to the handler's \
             first clock read; mean of {shots} shots per sample; on a VM this includes \
             the hypervisor's timer emulation"
        ),
    )?;
    Ok(())
}

/// The direct path: what a polled flag costs per check, in a busy loop and in a chain-bound one.
fn poll_flag(ctx: &Ctx, out: &mut Outcome, cpu: usize) -> Result<()> {
    let placement = Placement::SameCpu(cpu);
    let _pin = PinGuard::pin(cpu)?;
    ctx.step("preempt.poll_flag")?;
    // Where a check costs issue slots: a throughput-bound loop.
    check_cost(
        ctx,
        out,
        "preempt.poll_flag",
        placement,
        wide_loop::<false>,
        wide_loop::<true>,
        |b, with| {
            format!(
                "direct path: a relaxed atomic load + branch at every iteration of a \
                 throughput-bound loop (four independent multiply-add chains), minus the \
                 same loop without the check, both sampled interleaved and subtracted \
                 round by round ({b:.2} ns per iteration without, {with:.2} ns with): \
                 what a poll at each loop back-edge costs when the core is busy"
            )
        },
    )?;
    // Where it hides: a loop bound by one dependency chain.
    check_cost(
        ctx,
        out,
        "preempt.poll_flag.chain",
        placement,
        chain_loop::<false>,
        chain_loop::<true>,
        |b, with| {
            format!(
                "the same check in a loop bound by one dependency chain (an LCG step per \
                 iteration), minus that loop without it, interleaved ({b:.2} ns per \
                 iteration without, {with:.2} ns with): the check runs in the chain's \
                 shadow, so about 0, and as often slightly negative as positive"
            )
        },
    )?;
    Ok(())
}

/// Throughput loss: a fixed job in a Preemptive thread alone, against the same job in a
/// Cooperative thread (never interrupted), for each quantum.
fn throughput_loss(ctx: &Ctx, sampler: &Sampler, out: &mut Outcome, cpu: usize) -> Result<()> {
    let placement = Placement::SameCpu(cpu);
    let _pin = PinGuard::pin(cpu)?;
    ctx.step("preempt.throughput_loss")?;
    let job_ns = ctx.mode.pick(2_000_000u64, 30_000_000, 100_000_000);
    let probe = 1_000_000u64;
    let probe_ns = green_job_cpu_ns(Duration::from_millis(3), uthread::Mode::Cooperative, probe)?;
    let steps = (probe as f64 * job_ns as f64 / probe_ns.max(1) as f64).ceil() as u64;
    let mut ys = Vec::new();
    let mut at_10ms = None;
    for q_us in QUANTA_US {
        ctx.cancel.check()?;
        let q = Duration::from_micros(q_us);
        let s = sampler.repeat(
            || {
                let coop = green_job_cpu_ns(q, uthread::Mode::Cooperative, steps)?;
                let pre = green_job_cpu_ns(q, uthread::Mode::Preemptive, steps)?;
                Ok(loss_percent(pre as f64, coop as f64))
            },
            1,
        )?;
        ys.push(s.median);
        if q_us == 10_000 {
            at_10ms = Some(s);
        }
    }
    let method = format!(
        "a fixed CPU-bound job (~{} ms) alone on a carrier in a Mode::Preemptive \
         uthread with quantum q (the timer fires every q) vs the same job in a \
         Mode::Cooperative one; loss% = (t_q / t_coop - 1) * 100 with t = the carrier's \
         thread CPU time read inside the job; paired runs, median of the samples; \
         small negative values are noise",
        job_ns / 1_000_000
    );
    out.series.push(own_series(
        "preempt.throughput_loss".into(),
        Axis {
            label: "quantum",
            unit: Unit::Us,
            values: QUANTA_US.iter().map(|&q| q as f64).collect(),
        },
        Axis {
            label: "throughput loss",
            unit: Unit::Percent,
            values: ys,
        },
        method.clone(),
    ));
    if let Some(s) = at_10ms {
        out.add(
            Metric::from_summary(
                "preempt.loss_at_10ms",
                Unit::Percent,
                &s,
                placement,
                format!("{method}; q = 10 ms (bar <= 2%)"),
            )
            .with_direction(Direction::LowerIsBetter),
        );
    }
    Ok(())
}

fn conclusion(out: &Outcome) -> Option<String> {
    let get = |id: &str| out.median(id);
    let timer_us = get("preempt.timer_signal")?;
    let rt_ns = get("preempt.signal_roundtrip")?;
    let poll = out
        .metric("preempt.poll_flag")
        .map_or("an unmeasured amount".to_string(), |m| m.check_cost_words());
    let chain = get("preempt.poll_flag.chain")
        .map(|c| {
            if c.abs() < 0.05 {
                " and nothing measurable in one bound by a dependency chain".to_string()
            } else {
                format!(" and {c:.2} ns in one bound by a dependency chain")
            }
        })
        .unwrap_or_default();
    let lat_us = get("preempt.timer_latency");
    let green = get("preempt.green_switch")
        .map(|g| {
            format!(
                " A full preemptive green switch costs {g:.0} ns ({:.2}x a bare signal, taken \
                 round by round).",
                get("preempt.green_switch.vs_signal").unwrap_or(g / rt_ns)
            )
        })
        .unwrap_or_default();
    let loss = out
        .metric("preempt.loss_at_10ms")
        .map(|l| {
            format!(
                " At a 10 ms quantum a preemptive thread loses {}.",
                l.loss_words()
            )
        })
        .unwrap_or_default();
    Some(format!(
        "The standard path (timer signal) now costs {timer_us:.1} us per interruption against \
         24.42 ms on Mach 3.0 (~{:.0}x less); a thread-directed signal round trip is {:.1} us \
         (Erlangen's asynchronous trap: 0.19 ms){}; the direct path, a polled flag, costs \
         {poll} per check in a busy loop{chain} (the study: \"some processor \
         cycles\").{green}{loss} \
         A runtime should poll a flag at safe points (loop back-edges, calls) where it can, and \
         use one thread-directed timer signal per carrier at a 1-10 ms quantum as the fallback \
         for code that never reaches one: at that rate the signal path costs well under 1%.",
        24_420.0 / timer_us.max(1e-9),
        rt_ns / 1e3,
        lat_us
            .map(|l| format!("; a timer's expiry reaches the handler after {l:.1} us"))
            .unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_per_signal_arithmetic() {
        // 1 step per ns without the timer; 1,000 steps took 1,100 ns with 10 signals: 10 ns each.
        assert_eq!(loss_per_signal_ns(1.0, 1_000, 1_100, 10), Some(10.0));
        assert_eq!(loss_per_signal_ns(1.0, 1_000, 1_100, 0), None);
        assert_eq!(loss_per_signal_ns(0.0, 1_000, 1_100, 3), None);
    }

    #[test]
    fn loss_percent_arithmetic() {
        assert!((loss_percent(102.0, 100.0) - 2.0).abs() < 1e-9);
        assert!(loss_percent(99.0, 100.0) < 0.0);
        assert_eq!(loss_percent(100.0, 100.0), 0.0);
    }

    #[test]
    fn uintr_reason_is_explained() {
        assert!(!uintr_unavailable_reason().is_empty());
    }

    #[test]
    fn quanta_are_within_uthreads_range() {
        for q in QUANTA_US {
            assert!((100..=100_000).contains(&q));
        }
    }
}
