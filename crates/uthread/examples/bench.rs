//! Micro-benchmarks of the runtime's hot paths. Run with
//! `cargo run --release -p uthread --example bench` (a debug build is refused).
//!
//! Each figure is the median of 7 samples after a warm-up; min and max are shown beside it.
//! The uthread yield and corosensei's switch are sampled in alternation, and their ratio is
//! taken per round.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uthread::{Builder, Mode, Runtime};

const SAMPLES: usize = 7;

fn report(name: &str, unit: &str, mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = xs[xs.len() / 2];
    println!(
        "{name:<44} {med:>10.2} {unit}   (min {:.2}, max {:.2}, n={})",
        xs[0],
        xs[xs.len() - 1],
        xs.len()
    );
    med
}

fn sample(mut f: impl FnMut() -> f64) -> Vec<f64> {
    f(); // warm-up
    (0..SAMPLES).map(|_| f()).collect()
}

/// ns per switch: two green threads yielding to each other.
fn yield_switch(rt: &Runtime, iters: u64) -> f64 {
    yield_pair(rt, iters, false)
}

/// ns per switch: two green threads yielding to each other, both keeping a floating-point
/// environment of their own (`Builder::own_fp_env`), so that every switch saves and loads one.
fn yield_switch_own_fp_env(rt: &Runtime, iters: u64) -> f64 {
    yield_pair(rt, iters, true)
}

fn yield_pair(rt: &Runtime, iters: u64, own_fp_env: bool) -> f64 {
    rt.block_on(|| {
        let side = move || {
            for _ in 0..iters {
                uthread::yield_now();
            }
        };
        let spawn = || Builder::new().own_fp_env(own_fp_env).spawn(side).unwrap();
        let (a, b) = (spawn(), spawn());
        // Let both start, then time the pure ping-pong: main is not runnable while joining.
        let t = Instant::now();
        a.join();
        b.join();
        t.elapsed().as_nanos() as f64 / (2 * iters) as f64
    })
}

/// ns per switch of a bare corosensei coroutine: `resume` into it and `suspend` back out, in
/// this process, as the floor a stackful switch can reach without a scheduler.
fn corosensei_switch(iters: u64) -> f64 {
    use corosensei::Coroutine;
    let mut co: Coroutine<(), (), ()> = Coroutine::new(|yielder, ()| loop {
        yielder.suspend(());
    });
    let t = Instant::now();
    for _ in 0..iters {
        black_box(co.resume(()));
    }
    let ns = t.elapsed().as_nanos() as f64 / (2 * iters) as f64;
    // Dropping a suspended coroutine unwinds its stack (corosensei's documented behaviour).
    drop(co);
    ns
}

/// The uthread yield and the corosensei switch measured in alternation, round by round, so
/// that both see the same state of a noisy host; returns (yield, corosensei, ratio) samples.
fn yield_vs_corosensei(rt: &Runtime, yields: u64, coro: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    yield_switch(rt, yields); // warm-up
    corosensei_switch(coro);
    let (mut ys, mut cs, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        let y = yield_switch(rt, yields);
        let c = corosensei_switch(coro);
        ys.push(y);
        cs.push(c);
        rs.push(y / c);
    }
    (ys, cs, rs)
}

/// ns per message: two green threads pass a value back and forth over two rendezvous
/// channels (`iters` round trips, two messages each).
fn chan_ping_pong(rt: &Runtime, iters: u64) -> f64 {
    rt.block_on(|| {
        let (ping_tx, ping_rx) = uthread::chan::bounded::<u64>(0);
        let (pong_tx, pong_rx) = uthread::chan::bounded::<u64>(0);
        let echo = uthread::spawn(move || {
            for v in ping_rx.iter() {
                pong_tx.send(v + 1).unwrap();
            }
        });
        let t = Instant::now();
        for i in 0..iters {
            ping_tx.send(i).unwrap();
            black_box(pong_rx.recv().unwrap());
        }
        let ns = t.elapsed().as_nanos() as f64 / (2 * iters) as f64;
        drop(ping_tx);
        echo.join();
        ns
    })
}

fn spawn_join(rt: &Runtime, iters: u64) -> f64 {
    rt.block_on(|| {
        let t = Instant::now();
        for i in 0..iters {
            let h = uthread::spawn(move || black_box(i));
            black_box(h.join());
        }
        t.elapsed().as_nanos() as f64 / iters as f64
    })
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn live_threads(n: usize, stack: usize, guard: bool) -> Result<(f64, f64), String> {
    let rt = Runtime::builder()
        .guard_pages(guard)
        .stack_size(stack)
        .stack_pool(0)
        .build()
        .map_err(|e| e.to_string())?;
    let before = rss_bytes();
    rt.block_on(|| {
        let gate = Arc::new(uthread::Semaphore::new(0));
        let t = Instant::now();
        let mut hs = Vec::with_capacity(n);
        for _ in 0..n {
            let g = gate.clone();
            match Builder::new().spawn(move || g.acquire()) {
                Ok(h) => hs.push(h),
                Err(e) => {
                    // Release the ones we made, so nothing is left blocked (and leaked).
                    let made = hs.len();
                    for _ in 0..made {
                        gate.release();
                    }
                    for h in hs {
                        h.join();
                    }
                    return Err(format!("after {made} threads: {e}"));
                }
            }
        }
        // Let every thread start and block on the gate.
        uthread::yield_now();
        let spawn_ns = t.elapsed().as_nanos() as f64 / n as f64;
        let rss = rss_bytes().saturating_sub(before) as f64;
        for _ in 0..n {
            gate.release();
        }
        for h in hs {
            h.join();
        }
        Ok((rss, spawn_ns))
    })
}

extern "C" fn empty_handler(_: libc::c_int) {}

/// ns per bare signal round trip: tgkill to self, empty handler, sigreturn.
fn bare_signal(iters: u64) -> f64 {
    // SAFETY: installing a trivial handler for SIGUSR2, which this program does not otherwise use.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = empty_handler as *const () as usize;
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
    }
    // SAFETY: plain syscalls.
    let (pid, tid) = unsafe { (libc::getpid(), libc::syscall(libc::SYS_gettid)) };
    let t = Instant::now();
    for _ in 0..iters {
        // SAFETY: signal to our own thread; handler installed above.
        unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGUSR2) };
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// ns per iteration where each iteration raises the preemption signal and the handler switches
/// to the other preemptive thread (one signal + one in-handler switch + sigreturn later).
fn signal_switch(rt: &Runtime, iters: u64) -> f64 {
    let before = rt.stats().preemptions;
    let ns = rt.block_on(|| {
        let mk = || {
            Builder::new()
                .mode(Mode::Preemptive)
                .stack_size(64 * 1024)
                .spawn(move || {
                    for _ in 0..iters {
                        uthread::__private::raise_preempt_signal();
                    }
                })
        };
        let (a, b) = (mk().unwrap(), mk().unwrap());
        let t = Instant::now();
        a.join();
        b.join();
        t.elapsed().as_nanos() as f64 / (2 * iters) as f64
    });
    let got = rt.stats().preemptions - before;
    assert!(got >= iters, "expected in-handler switches, got {got}");
    ns
}

fn mutex_uncontended(rt: &Runtime, iters: u64) -> f64 {
    rt.block_on(|| {
        let m = uthread::Mutex::new(0u64);
        let t = Instant::now();
        for _ in 0..iters {
            *m.lock() += 1;
        }
        black_box(m.into_inner());
        t.elapsed().as_nanos() as f64 / iters as f64
    })
}

fn semaphore_pair(rt: &Runtime, iters: u64) -> f64 {
    rt.block_on(|| {
        let s = uthread::Semaphore::new(0);
        let t = Instant::now();
        for _ in 0..iters {
            s.release();
            s.acquire();
        }
        t.elapsed().as_nanos() as f64 / iters as f64
    })
}

/// Preemption stress throughput: k preemptive spinners for `d`.
fn preempt_rate(d: Duration) -> (u64, u64, f64) {
    let rt = Runtime::builder()
        .quantum(Duration::from_micros(100))
        .build()
        .unwrap();
    let work = Arc::new(AtomicU64::new(0));
    let w = work.clone();
    rt.block_on(move || {
        let end = Instant::now() + d;
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let w = w.clone();
                Builder::new()
                    .mode(Mode::Preemptive)
                    .spawn(move || {
                        let mut n = 0u64;
                        while Instant::now() < end {
                            n = black_box(n + 1);
                        }
                        w.fetch_add(n, Ordering::Relaxed);
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join();
        }
    });
    let s = rt.stats();
    (s.preemptions, s.timer_ticks, d.as_secs_f64())
}

fn main() {
    if cfg!(debug_assertions) {
        eprintln!("refusing to benchmark a debug build: use `cargo run --release -p uthread --example bench`");
        std::process::exit(2);
    }
    let rt = Runtime::new();
    // One row alone, for profilers: `UTHREAD_BENCH_ONLY=raw|yield|yield_fp|coro|chan|spawn`, optionally with
    // `UTHREAD_BENCH_ITERS=n` loop iterations per sample. Under callgrind, two runs that differ
    // only in `n` give the instructions of one iteration as the difference of their totals
    // divided by the difference of iterations (setup and warm-up cancel out).
    let only_iters = |default: u64| {
        std::env::var("UTHREAD_BENCH_ITERS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    if std::env::var("UTHREAD_BENCH_ONLY").as_deref() == Ok("raw") {
        let n = only_iters(5_000_000);
        report(
            "raw asm switch floor (no scheduler)",
            "ns/switch",
            sample(|| uthread::__private::raw_switch_ns(n)),
        );
        return;
    }
    if std::env::var("UTHREAD_BENCH_ONLY").as_deref() == Ok("yield") {
        let n = only_iters(20_000_000);
        report(
            "cooperative yield switch (2 threads)",
            "ns/switch",
            sample(|| yield_switch(&rt, n)),
        );
        return;
    }
    if std::env::var("UTHREAD_BENCH_ONLY").as_deref() == Ok("yield_fp") {
        let n = only_iters(20_000_000);
        report(
            "cooperative yield switch, both own_fp_env",
            "ns/switch",
            sample(|| yield_switch_own_fp_env(&rt, n)),
        );
        return;
    }
    if std::env::var("UTHREAD_BENCH_ONLY").as_deref() == Ok("coro") {
        let n = only_iters(20_000_000);
        report(
            "corosensei resume/suspend",
            "ns/switch",
            sample(|| corosensei_switch(n)),
        );
        return;
    }
    if std::env::var("UTHREAD_BENCH_ONLY").as_deref() == Ok("chan") {
        let n = only_iters(2_000_000);
        report(
            "channel ping-pong, one carrier (per message)",
            "ns",
            sample(|| chan_ping_pong(&rt, n)),
        );
        return;
    }
    if std::env::var("UTHREAD_BENCH_ONLY").as_deref() == Ok("spawn") {
        let n = only_iters(2_000_000);
        report(
            "spawn + run + join (pooled stack)",
            "ns",
            sample(|| spawn_join(&rt, n)),
        );
        return;
    }
    println!("uthread micro-benchmarks (median of {SAMPLES})");
    report(
        "raw asm switch floor (no scheduler)",
        "ns/switch",
        sample(|| uthread::__private::raw_switch_ns(5_000_000)),
    );
    let (ys, cs, rs) = yield_vs_corosensei(&rt, 2_000_000, 5_000_000);
    let y = report("cooperative yield switch (2 threads)", "ns/switch", ys);
    report("corosensei resume/suspend (same process)", "ns/switch", cs);
    let ratio = report("  ratio yield / corosensei, per round", "x", rs);
    report(
        "cooperative yield switch, both own_fp_env",
        "ns/switch",
        sample(|| yield_switch_own_fp_env(&rt, 2_000_000)),
    );
    let s = report(
        "spawn + run + join (pooled stack)",
        "ns",
        sample(|| spawn_join(&rt, 200_000)),
    );
    let ch = report(
        "channel ping-pong, one carrier (per message)",
        "ns",
        sample(|| chan_ping_pong(&rt, 1_000_000)),
    );
    report(
        "mutex lock+unlock, uncontended",
        "ns",
        sample(|| mutex_uncontended(&rt, 2_000_000)),
    );
    report(
        "semaphore release+acquire, one thread",
        "ns",
        sample(|| semaphore_pair(&rt, 2_000_000)),
    );
    let bare = report(
        "bare signal round trip (tgkill, empty handler)",
        "ns",
        sample(|| bare_signal(200_000)),
    );
    let sig = report(
        "signal-driven preemptive switch",
        "ns/switch",
        sample(|| signal_switch(&rt, 100_000)),
    );
    println!("  ratio signal switch / bare signal: {:.2}", sig / bare);
    for (n, stack, guard) in [
        (100_000usize, 16 * 1024, false),
        (100_000, 8 * 1024, false),
        (30_000, 16 * 1024, true),
        // Past vm.max_map_count / 2 guarded stacks: expected to fail with an explanation.
        (40_000, 16 * 1024, true),
    ] {
        match live_threads(n, stack, guard) {
            Ok((rss, ns)) => println!(
                "{n} live threads, {} KiB stacks, guard {}: RSS +{:.1} MiB ({:.0} B/thread), spawn {:.0} ns/thread",
                stack / 1024,
                if guard { "on" } else { "off" },
                rss / (1 << 20) as f64,
                rss / n as f64,
                ns
            ),
            Err(e) => println!("{n} live threads, {} KiB stacks, guard {guard}: FAILED {e}", stack / 1024),
        }
    }
    let (p, ticks, secs) = preempt_rate(Duration::from_millis(500));
    println!(
        "preemption, 4 spinners, 100 µs quantum: {p} preemptions / {ticks} ticks in {secs:.1} s"
    );
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    // The lab's bars (its rows are the ones that count: `threadlab run switch create`).
    println!(
        "targets: yield <= 3 ns ({}), yield within 2.5x a corosensei switch ({}), spawn+join <= \
         35 ns ({}), channel message <= 20 ns ({})",
        met(y <= 3.0),
        met(ratio <= 2.5),
        met(s <= 35.0),
        met(ch <= 20.0)
    );
}
