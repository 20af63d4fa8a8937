//! Pool balance, the `create` experiment's burst and tree rows: a burst of 100,000 short
//! threads spawned from one worker of a 2-worker runtime, until the last is joined, and a
//! fan-out/fan-in tree (each inner thread spawns two and joins them, leaves do the work), on a
//! uthread Pool (idle carriers taking unstarted threads, and with that turned off), Tokio's
//! multi-thread scheduler and Go with GOMAXPROCS=2, interleaved round by round. uthread's
//! `examples/balance.rs` adds may.
//!
//! Every runtime runs the same work: the burst's root spawns all its threads, then joins them;
//! each computes `work` (a dependent multiply-xorshift chain of `WORK_STEPS` steps, about half
//! a microsecond) and returns it. Time from before the first spawn to after the last join,
//! taken inside the root. Carriers and workers are pinned one per CPU.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Interleaved, Outcome};
use crate::measure::placement::{cpu_pair, pin_current_thread, PinGuard};
use crate::measure::units::Unit;
use crate::subjects::peers::go::{GoBench, GoPeer};

/// Steps of every thread's work (Go's `WorkSteps`).
const WORK_STEPS: u64 = 300;

#[inline(never)]
fn work(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..WORK_STEPS {
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        x ^= x >> 29;
    }
    x
}

/// A 2-carrier uthread pool pinned one carrier per CPU of the creating thread's mask, with
/// small unguarded stacks (100,000 threads alive at once) all kept for reuse.
fn green_pool(stealing: bool) -> Result<uthread::Pool> {
    uthread::Pool::builder()
        .carriers(2)
        .pin(true)
        .stealing(stealing)
        .runtime(
            uthread::Runtime::builder()
                .stack_size(16 * 1024)
                .guard_pages(false)
                .stack_pool(1 << 18),
        )
        .build()
        .map_err(|e| Error::Skip(format!("cannot start a 2-carrier uthread pool: {e}")))
}

/// `n` bursts of `size` threads on `pool`, each rooted on carrier 0.
fn green_bursts(pool: &uthread::Pool, size: u64, n: u64) -> Duration {
    (0..n)
        .map(|_| {
            pool.spawn_on(0, move || {
                let t = Instant::now();
                let hs: Vec<_> = (0..size).map(|i| uthread::spawn(move || work(i))).collect();
                let sum = hs
                    .into_iter()
                    .filter_map(|h| h.join().finished())
                    .fold(0u64, u64::wrapping_add);
                std::hint::black_box(sum);
                t.elapsed()
            })
            .join()
            .finished()
            .unwrap_or_default()
        })
        .sum()
}

fn green_node(depth: u32, seed: u64) -> u64 {
    if depth == 0 {
        return work(seed);
    }
    let a = uthread::spawn(move || green_node(depth - 1, seed * 2));
    let b = uthread::spawn(move || green_node(depth - 1, seed * 2 + 1));
    let a = a.join().finished().unwrap_or_default();
    a.wrapping_add(b.join().finished().unwrap_or_default())
}

/// `n` trees of depth `depth` on `pool`, each rooted on carrier 0.
fn green_trees(pool: &uthread::Pool, depth: u32, n: u64) -> Duration {
    (0..n)
        .map(|_| {
            pool.spawn_on(0, move || {
                let t = Instant::now();
                std::hint::black_box(green_node(depth, 1));
                t.elapsed()
            })
            .join()
            .finished()
            .unwrap_or_default()
        })
        .sum()
}

fn tokio_node(depth: u32, seed: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            return work(seed);
        }
        let a = tokio::spawn(tokio_node(depth - 1, seed * 2));
        let b = tokio::spawn(tokio_node(depth - 1, seed * 2 + 1));
        let a = a.await.unwrap_or_default();
        a.wrapping_add(b.await.unwrap_or_default())
    })
}

/// `n` trees of depth `depth` of tasks, each rooted in a task on one worker.
fn tokio_trees(rt: &tokio::runtime::Runtime, depth: u32, n: u64) -> Duration {
    (0..n)
        .map(|_| {
            rt.block_on(async move {
                tokio::spawn(async move {
                    let t = Instant::now();
                    std::hint::black_box(tokio_node(depth, 1).await);
                    t.elapsed()
                })
                .await
                .unwrap_or_default()
            })
        })
        .sum()
}

fn tokio_multi_thread(first: usize, second: usize) -> Result<tokio::runtime::Runtime> {
    let next = AtomicUsize::new(0);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || {
            let cpu = if next.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
                first
            } else {
                second
            };
            let _ = pin_current_thread(cpu);
        })
        .build()
        .map_err(|e| Error::Fail(format!("cannot build a tokio multi-thread runtime: {e}")))
}

/// `n` bursts of `size` tasks, each rooted in a task on one worker.
fn tokio_bursts(rt: &tokio::runtime::Runtime, size: u64, n: u64) -> Duration {
    (0..n)
        .map(|_| {
            rt.block_on(async move {
                tokio::spawn(async move {
                    let t = Instant::now();
                    let hs: Vec<_> = (0..size)
                        .map(|i| tokio::spawn(async move { work(i) }))
                        .collect();
                    let mut sum = 0u64;
                    for h in hs {
                        sum = sum.wrapping_add(h.await.unwrap_or_default());
                    }
                    std::hint::black_box(sum);
                    t.elapsed()
                })
                .await
                .unwrap_or_default()
            })
        })
        .sum()
}

/// What the rows measure, shared by every row: the runtimes and the Go program.
struct Subjects {
    stealing: uthread::Pool,
    no_stealing: uthread::Pool,
    tokio: tokio::runtime::Runtime,
    /// One Go program serves both the burst and the tree rows, which the sampler calls one at
    /// a time.
    go: RefCell<Option<GoPeer>>,
    placement: String,
    size: u64,
    depth: u32,
}

impl Subjects {
    /// `n` batches of `bench` with argument `arg` in the Go program.
    fn go_batch(&self, bench: GoBench, arg: u64, n: u64) -> Result<Duration> {
        let mut peer = self.go.borrow_mut();
        let Some(peer) = peer.as_mut() else {
            return Err(Error::Skip("the Go peer program is not running".into()));
        };
        let mut took = Duration::ZERO;
        for _ in 0..n {
            took += peer.batch(bench, arg)?;
        }
        Ok(took)
    }
}

fn burst_rows<'a>(group: &mut Interleaved<'a>, s: &'a Subjects) {
    let what = format!(
        "a burst of {} threads, each computing a {WORK_STEPS}-step multiply-xorshift chain \
         (~0.5 us), spawned one after another by one root thread, then joined in order; per \
         burst, from the first spawn to the last join, timed inside the root",
        s.size
    );
    let p = &s.placement;
    group
        .row_fixed(
            "create.green.burst",
            Unit::Ms,
            p,
            format!(
                "uthread Pool, 2 carriers, idle carriers taking unstarted threads (the default): \
                 {what}; the root runs on carrier 0 (uthread::spawn), 16 KiB unguarded pooled \
                 stacks"
            ),
            1,
            |n| Ok(green_bursts(&s.stealing, s.size, n)),
        )
        .row_fixed(
            "create.green.burst.no_steal",
            Unit::Ms,
            p,
            format!(
                "the same Pool with stealing(false): every thread of the burst runs on the \
                 carrier that spawned it; {what}"
            ),
            1,
            |n| Ok(green_bursts(&s.no_stealing, s.size, n)),
        )
        .row_fixed(
            "create.tokio.burst",
            Unit::Ms,
            p,
            format!("tokio multi-thread runtime, 2 workers: tokio::spawn; {what}"),
            1,
            |n| Ok(tokio_bursts(&s.tokio, s.size, n)),
        );
    if s.go.borrow().is_some() {
        group.row_fixed(
            "create.go.burst",
            Unit::Ms,
            p,
            format!(
                "Go, GOMAXPROCS=2 (the program allowed on both CPUs, not pinned per P): \
                 goroutines and a WaitGroup; {what}"
            ),
            1,
            |n| s.go_batch(GoBench::Burst, s.size, n),
        );
    }
}

fn tree_rows<'a>(group: &mut Interleaved<'a>, s: &'a Subjects) {
    let tree = format!(
        "a fan-out/fan-in tree of depth {} ({} threads): each inner thread spawns two \
         children and joins them, each leaf computes the same chain; per tree, timed inside the \
         root",
        s.depth,
        (1u64 << (s.depth + 1)) - 1
    );
    let p = &s.placement;
    group
        .row_fixed(
            "create.green.tree",
            Unit::Ms,
            p,
            format!("uthread Pool, 2 carriers, stealing on: {tree}"),
            1,
            |n| Ok(green_trees(&s.stealing, s.depth, n)),
        )
        .row_fixed(
            "create.green.tree.no_steal",
            Unit::Ms,
            p,
            format!("the same Pool with stealing(false): {tree}"),
            1,
            |n| Ok(green_trees(&s.no_stealing, s.depth, n)),
        )
        .row_fixed(
            "create.tokio.tree",
            Unit::Ms,
            p,
            format!("tokio multi-thread runtime, 2 workers: {tree}"),
            1,
            |n| Ok(tokio_trees(&s.tokio, s.depth, n)),
        );
    if s.go.borrow().is_some() {
        group.row_fixed(
            "create.go.tree",
            Unit::Ms,
            p,
            format!("Go, GOMAXPROCS=2, a WaitGroup per inner goroutine: {tree}"),
            1,
            |n| s.go_batch(GoBench::Tree, u64::from(s.depth), n),
        );
    }
}

fn ratio_rows(group: &mut Interleaved<'_>) {
    for (kind, what) in [("burst", "a burst"), ("tree", "a tree")] {
        group
            .ratio(
                &format!("create.green.{kind}.vs_no_steal"),
                &format!("create.green.{kind}.no_steal"),
                &format!("create.green.{kind}"),
                format!(
                    "how many times faster {what} rooted on one carrier completes when idle \
                     carriers take unstarted threads"
                ),
            )
            .ratio(
                &format!("create.green.{kind}.vs_tokio"),
                &format!("create.tokio.{kind}"),
                &format!("create.green.{kind}"),
                "Tokio's time over uthread's (above 1: uthread faster)",
            )
            .ratio(
                &format!("create.green.{kind}.vs_go"),
                &format!("create.go.{kind}"),
                &format!("create.green.{kind}"),
                "Go's time over uthread's (above 1: uthread faster)",
            );
    }
}

/// The burst and tree rows, interleaved, into `out`. Called before the experiment pins its
/// thread to one CPU: the runtimes here need two.
/// What the balance probe prints: its metrics and the ones it could not take.
#[derive(serde::Serialize, serde::Deserialize)]
struct Measured {
    metrics: Vec<crate::results::Metric>,
    skipped: Vec<crate::results::SkippedMetric>,
}

/// `threadlab __probe balance`: the balance rows in a process of their own. Their pools, Tokio
/// workers and the malloc arenas those threads make stay mapped after the rows end (VmSize
/// 290 -> 490 MB, page tables 92 -> 140 KiB), and every fork measured afterwards in the same
/// process copies them: a create experiment measured again after this one read fork +35%.
pub const BALANCE_PROBE: crate::experiments::Probe = crate::experiments::Probe {
    name: "balance",
    run: |mode, _cpu| {
        let cancel = crate::cancel::Cancel::never();
        let env = crate::measure::env::capture();
        let host = crate::measure::host::HostLog::default();
        let ctx = Ctx {
            mode,
            cancel: &cancel,
            progress: &|_| {},
            env: &env,
            host: &host,
            budget_scale: 1.0,
        };
        let mut out = Outcome::default();
        measure(&ctx, &mut out)?;
        serde_json::to_string(&Measured {
            metrics: out.metrics,
            skipped: out.skipped,
        })
        .map_err(|e| Error::Fail(e.to_string()))
    },
};

/// The balance rows, measured in a fresh process (`BALANCE_PROBE`) and recorded in `out`.
pub fn measure_in_child(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    ctx.step("pool balance: bursts and trees (in a process of their own)")?;
    let text = crate::measure::probe::run_probe(
        BALANCE_PROBE.name,
        ctx.mode,
        crate::measure::placement::home_cpu(),
        ctx.cancel,
    )?;
    let m: Measured = serde_json::from_str(text.trim())
        .map_err(|e| Error::Fail(format!("the balance probe printed no results: {e}")))?;
    out.metrics.extend(m.metrics);
    out.skipped.extend(m.skipped);
    Ok(())
}

pub fn measure(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let ids = [
        "create.green.burst",
        "create.green.burst.no_steal",
        "create.tokio.burst",
        "create.go.burst",
        "create.green.tree",
        "create.green.tree.no_steal",
        "create.tokio.tree",
        "create.go.tree",
    ];
    let Some((a, b)) = cpu_pair() else {
        for id in ids {
            out.skip(id, "this process may use only one CPU");
        }
        return Ok(());
    };
    let _both = PinGuard::pin_set(&[a, b])?;
    ctx.step("starting the Go peer for the burst and tree rows")?;
    let go = match GoPeer::start(ctx.cancel) {
        Ok(peer) => Some(peer),
        Err(Error::Skip(reason)) => {
            out.skip("create.go.burst", reason.clone());
            out.skip("create.go.tree", reason);
            None
        }
        Err(e) => return Err(e),
    };
    let s = Subjects {
        stealing: green_pool(true)?,
        no_stealing: green_pool(false)?,
        tokio: tokio_multi_thread(a, b)?,
        go: RefCell::new(go),
        placement: format!("cpus({a},{b}), one worker pinned per CPU"),
        // 100,000 threads per burst and a depth-15 tree (65,535 threads) in the full suite;
        // a fifth of that in the quick one (each trial runs every row four times, so 100,000
        // would cost the quick suite some 12 s), fewer still in the tiny runs that check
        // structure.
        size: ctx.mode.pick(10_000, 20_000, 100_000),
        depth: ctx.mode.pick(10, 13, 15),
    };
    let mut group = Interleaved::new();
    burst_rows(&mut group, &s);
    tree_rows(&mut group, &s);
    ratio_rows(&mut group);
    group.measure(ctx, out)?;
    let Subjects {
        stealing,
        no_stealing,
        go,
        ..
    } = s;
    drop(go);
    stealing.join();
    no_stealing.join();
    Ok(())
}
