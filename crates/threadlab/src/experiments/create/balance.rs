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

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Interleaved, Outcome};
use crate::measure::placement::{cpu_pair, PinGuard};
use crate::measure::spawn::start_refused;
use crate::measure::units::Unit;
use crate::results::ids;
use crate::subjects::peers::{self, work, Started, WORK_STEPS};

/// A 2-carrier uthread pool pinned one carrier per CPU of the creating thread's mask, with
/// small unguarded stacks (100,000 threads alive at once) all kept for reuse.
fn green_pool(stealing: bool) -> Result<uthread::Pool> {
    let stacks = uthread::Runtime::builder()
        .stack_pool(1 << 18)
        .guard_pages(false)
        .stack_size(16 * 1024);
    uthread::Pool::builder()
        .runtime(stacks)
        .stealing(stealing)
        .pin(true)
        .carriers(2)
        .build()
        .map_err(|e| start_refused("cannot start a 2-carrier uthread pool", &e))
}

/// Joins every thread in order; the wrapping sum of what they returned (0 for one that did
/// not finish).
fn join_sum(threads: impl IntoIterator<Item = uthread::JoinHandle<u64>>) -> u64 {
    threads
        .into_iter()
        .filter_map(|h| h.join().finished())
        .fold(0, u64::wrapping_add)
}

/// `n` times: a thread spawned on carrier 0 of `pool` runs `root` and returns the time it took.
fn rooted(
    pool: &uthread::Pool,
    n: u64,
    root: impl Fn() -> Duration + Send + Clone + 'static,
) -> Duration {
    (0..n)
        .map(|_| {
            pool.spawn_on(0, root.clone())
                .join()
                .finished()
                .unwrap_or_default()
        })
        .sum()
}

/// `n` bursts of `size` threads on `pool`, each rooted on carrier 0.
fn green_bursts(pool: &uthread::Pool, size: u64, n: u64) -> Duration {
    rooted(pool, n, move || {
        let t = Instant::now();
        // Every thread is spawned before the first join.
        let threads: Vec<_> = (0..size).map(|i| uthread::spawn(move || work(i))).collect();
        std::hint::black_box(join_sum(threads));
        t.elapsed()
    })
}

fn green_node(depth: u32, seed: u64) -> u64 {
    if depth == 0 {
        return work(seed);
    }
    join_sum([seed * 2, seed * 2 + 1].map(|s| uthread::spawn(move || green_node(depth - 1, s))))
}

/// `n` trees of depth `depth` on `pool`, each rooted on carrier 0.
fn green_trees(pool: &uthread::Pool, depth: u32, n: u64) -> Duration {
    rooted(pool, n, move || {
        let t = Instant::now();
        std::hint::black_box(green_node(depth, 1));
        t.elapsed()
    })
}

/// What the rows measure, shared by every row: the reference's two pools and the other peers
/// that have balance rows.
struct Subjects {
    stealing: uthread::Pool,
    no_stealing: uthread::Pool,
    others: Vec<Started>,
    placement: String,
    size: u64,
    depth: u32,
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
        );
    for peer in &s.others {
        let Some(notes) = &peer.info.balance else {
            continue;
        };
        let running = &peer.running;
        group.row_fixed(
            &ids::peer::balance(peer.info.name, ids::peer::BURST),
            Unit::Ms,
            p,
            format!("{}; {what}", notes.burst),
            1,
            move |n| running.borrow_mut().burst(s.size, n),
        );
        group.one_program(peer);
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
        );
    for peer in &s.others {
        let Some(notes) = &peer.info.balance else {
            continue;
        };
        let running = &peer.running;
        group.row_fixed(
            &ids::peer::balance(peer.info.name, ids::peer::TREE),
            Unit::Ms,
            p,
            format!("{}: {tree}", notes.tree),
            1,
            move |n| running.borrow_mut().tree(s.depth, n),
        );
        group.one_program(peer);
    }
}

fn ratio_rows(group: &mut Interleaved<'_>) {
    let reference = peers::reference().name;
    for (kind, what) in [(ids::peer::BURST, "a burst"), (ids::peer::TREE, "a tree")] {
        let base = ids::peer::balance(reference, kind);
        group.ratio(
            &ids::ratio(&base, "no_steal"),
            &format!("{base}.no_steal"),
            &base,
            format!(
                "how many times faster {what} rooted on one carrier completes when idle \
                 carriers take unstarted threads"
            ),
        );
        for other in peers::others().filter(|p| p.balance.is_some()) {
            group.ratio(
                &ids::ratio(&base, other.name),
                &ids::peer::balance(other.name, kind),
                &base,
                format!(
                    "{}'s time over uthread's (above 1: uthread faster)",
                    other.title
                ),
            );
        }
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
        let alone = crate::experiments::Standalone::new();
        let ctx = alone.ctx(mode);
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
    let text = match crate::measure::probe::run_probe(
        BALANCE_PROBE.name,
        ctx.mode,
        crate::measure::placement::home_cpu(),
        ctx.cancel,
    ) {
        Err(Error::Skip(why)) => {
            skip_all(out, &why);
            return Ok(());
        }
        r => r?,
    };
    let m: Measured = serde_json::from_str(text.trim())
        .map_err(|e| Error::Fail(format!("the balance probe printed no results: {e}")))?;
    out.metrics.extend(m.metrics);
    out.skipped.extend(m.skipped);
    Ok(())
}

/// Every balance row skipped, for `why`.
fn skip_all(out: &mut Outcome, why: &str) {
    for kind in [ids::peer::BURST, ids::peer::TREE] {
        let reference = ids::peer::balance(peers::reference().name, kind);
        out.skip(&reference, why);
        out.skip(&format!("{reference}.no_steal"), why);
        for other in peers::others().filter(|p| p.balance.is_some()) {
            out.skip(&ids::peer::balance(other.name, kind), why);
        }
    }
}

pub fn measure(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let Some((a, b)) = cpu_pair() else {
        skip_all(out, "this process may use only one CPU");
        return Ok(());
    };
    let _both = PinGuard::pin_set(&[a, b])?;
    let others = peers::start_each(
        peers::REGISTRY
            .iter()
            .copied()
            .skip(1)
            .filter(|p| p.info().balance.is_some()),
        |p| p.start_on_two(ctx.cancel, (a, b)),
        |p| {
            ctx.step(&format!(
                "starting the {} peer for the burst and tree rows",
                p.title
            ))
        },
        |p, reason| {
            out.skip(
                &ids::peer::balance(p.name, ids::peer::BURST),
                reason.clone(),
            );
            out.skip(&ids::peer::balance(p.name, ids::peer::TREE), reason);
        },
    )?;
    let s = Subjects {
        stealing: green_pool(true)?,
        no_stealing: green_pool(false)?,
        others,
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
        others,
        ..
    } = s;
    drop(others);
    stealing.join();
    no_stealing.join();
    Ok(())
}
