//! Pool balance: a burst of 100,000 short threads spawned from one carrier, and a fan-out/fan-in
//! tree, completion time on a 2-carrier uthread pool (stealing on and off), Tokio's
//! multi-thread scheduler with 2 workers and may with 2 workers, measured in the same run,
//! round by round. Run with `cargo run --release -p uthread --example balance`; a debug build
//! is refused. Go (GOMAXPROCS=2) is measured beside them by the lab (`threadlab run create`).
//!
//! may gives every coroutine a guarded stack (two kernel mappings), so it cannot hold 100,000
//! at once under the default `vm.max_map_count` (65,530): it runs in a second burst of
//! `SMALL_BURST`, measured with the others again, and in the tree, whose depth keeps every
//! runtime under that limit.
//!
//! Every runtime runs the same work: the burst's root spawns all its threads, then joins them in
//! order; each thread computes `work` (a dependent multiply-xorshift chain of `WORK_ITERS`
//! steps, about half a microsecond here) and returns it. The tree's root spawns two children,
//! each of which spawns two, down to depth `TREE_DEPTH`; leaves compute `work`, inner nodes
//! join their children. Time from before the first spawn to after the last join, taken inside
//! the root. Carriers and workers are pinned one per CPU (uthread `pin(true)`, Tokio through
//! `on_thread_start`, may `set_worker_pin`).

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use uthread::{Pool, Runtime};

const BURST: u64 = 100_000;
const SMALL_BURST: u64 = 25_000;
const TREE_DEPTH: u32 = 13;
const WORK_ITERS: u64 = 300;
const ROUNDS: usize = 9;

/// The body of every short thread: a dependent chain the compiler cannot fold.
#[inline(never)]
fn work(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..WORK_ITERS {
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        x ^= x >> 29;
    }
    x
}

fn expected_burst(n: u64) -> u64 {
    (0..n).map(work).fold(0, u64::wrapping_add)
}

fn green_pool(stealing: bool) -> Pool {
    Pool::builder()
        .carriers(2)
        .pin(true)
        .stealing(stealing)
        // 100,000 threads alive at once: small unguarded stacks, all kept for reuse.
        .runtime(
            Runtime::builder()
                .stack_size(16 * 1024)
                .guard_pages(false)
                .stack_pool(1 << 18),
        )
        .build()
        .expect("a 2-carrier pool")
}

fn green_burst(pool: &Pool, n: u64) -> (Duration, u64) {
    pool.spawn_on(0, move || {
        let t = Instant::now();
        let hs: Vec<_> = (0..n).map(|i| uthread::spawn(move || work(i))).collect();
        let sum = hs
            .into_iter()
            .map(|h| h.join().finished().unwrap())
            .fold(0, u64::wrapping_add);
        (t.elapsed(), sum)
    })
    .join()
    .finished()
    .unwrap()
}

fn green_node(depth: u32, seed: u64) -> u64 {
    if depth == 0 {
        return work(seed);
    }
    let a = uthread::spawn(move || green_node(depth - 1, seed * 2));
    let b = uthread::spawn(move || green_node(depth - 1, seed * 2 + 1));
    a.join()
        .finished()
        .unwrap()
        .wrapping_add(b.join().finished().unwrap())
}

fn green_tree(pool: &Pool) -> (Duration, u64) {
    pool.spawn_on(0, || {
        let t = Instant::now();
        let sum = green_node(TREE_DEPTH, 1);
        (t.elapsed(), sum)
    })
    .join()
    .finished()
    .unwrap()
}

fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; we add one CPU and apply it to the
    // calling thread (failure leaves it unpinned, which the output does not claim otherwise).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn tokio_rt() -> tokio::runtime::Runtime {
    let next = AtomicUsize::new(0);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || pin_to(next.fetch_add(1, Ordering::Relaxed) % 2))
        .build()
        .expect("a tokio runtime")
}

fn tokio_burst(rt: &tokio::runtime::Runtime, n: u64) -> (Duration, u64) {
    rt.block_on(async move {
        tokio::spawn(async move {
            let t = Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|i| tokio::spawn(async move { work(i) }))
                .collect();
            let mut sum = 0u64;
            for h in hs {
                sum = sum.wrapping_add(h.await.unwrap());
            }
            (t.elapsed(), sum)
        })
        .await
        .unwrap()
    })
}

fn tokio_node(depth: u32, seed: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            return work(seed);
        }
        let a = tokio::spawn(tokio_node(depth - 1, seed * 2));
        let b = tokio::spawn(tokio_node(depth - 1, seed * 2 + 1));
        a.await.unwrap().wrapping_add(b.await.unwrap())
    })
}

fn tokio_tree(rt: &tokio::runtime::Runtime) -> (Duration, u64) {
    rt.block_on(async {
        tokio::spawn(async {
            let t = Instant::now();
            let sum = tokio_node(TREE_DEPTH, 1).await;
            (t.elapsed(), sum)
        })
        .await
        .unwrap()
    })
}

fn may_burst(n: u64) -> (Duration, u64) {
    may::go!(move || {
        let t = Instant::now();
        let hs: Vec<_> = (0..n).map(|i| may::go!(move || work(i))).collect();
        let sum = hs
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold(0, u64::wrapping_add);
        (t.elapsed(), sum)
    })
    .join()
    .unwrap()
}

fn may_node(depth: u32, seed: u64) -> u64 {
    if depth == 0 {
        return work(seed);
    }
    let a = may::go!(move || may_node(depth - 1, seed * 2));
    let b = may::go!(move || may_node(depth - 1, seed * 2 + 1));
    a.join().unwrap().wrapping_add(b.join().unwrap())
}

fn may_tree() -> (Duration, u64) {
    may::go!(|| {
        let t = Instant::now();
        let sum = may_node(TREE_DEPTH, 1);
        (t.elapsed(), sum)
    })
    .join()
    .unwrap()
}

fn report(name: &str, unit: &str, mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let med = xs[xs.len() / 2];
    println!(
        "{name:<52} {med:>9.2} {unit}   (min {:.2}, max {:.2}, n={})",
        xs[0],
        xs[xs.len() - 1],
        xs.len()
    );
    med
}

type Subject<'a> = (&'static str, Box<dyn Fn() -> (Duration, u64) + 'a>);

/// Runs every subject once per round, in turn, after one warm-up round; checks each result
/// against `expect` and returns the milliseconds per subject, round by round.
fn interleave(subjects: &[Subject], expect: u64) -> Vec<Vec<f64>> {
    let mut ms = vec![Vec::new(); subjects.len()];
    for round in 0..=ROUNDS {
        for (i, (name, run)) in subjects.iter().enumerate() {
            let (took, sum) = run();
            assert_eq!(sum, expect, "{name}: wrong result");
            if round > 0 {
                ms[i].push(took.as_secs_f64() * 1e3);
            }
        }
    }
    ms
}

fn per_round_ratio(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// Each subject's median and spread, then every other subject's time over the stealing pool's,
/// per round.
fn summarise(subjects: &[Subject], ms: &[Vec<f64>]) {
    for ((name, _), xs) in subjects.iter().zip(ms) {
        report(&format!("  {name}"), "ms", xs.clone());
    }
    for ((name, _), xs) in subjects.iter().zip(ms).skip(1) {
        report(
            &format!("  {name} / stealing, per round"),
            "x",
            per_round_ratio(xs, &ms[0]),
        );
    }
}

fn main() {
    if cfg!(debug_assertions) {
        eprintln!("refusing to benchmark a debug build: use `cargo run --release -p uthread --example balance`");
        std::process::exit(2);
    }
    // may keeps finished coroutines (with their stacks) for reuse up to the pool capacity:
    // as many as its burst, like uthread's stack pool below (more would not fit the map count).
    let may_config = may::config();
    may_config
        .set_workers(2)
        .set_pool_capacity(SMALL_BURST as usize + 1000);
    may_config.set_worker_pin(true);
    let stealing = green_pool(true);
    let no_stealing = green_pool(false);
    let tokio = tokio_rt();
    let which = std::env::var("UTHREAD_BALANCE_ONLY").unwrap_or_default();
    println!(
        "pool balance, 2 carriers/workers pinned to CPUs 0 and 1, median of {ROUNDS} interleaved rounds"
    );
    if which.is_empty() || which == "burst" {
        for (n, with_may) in [(BURST, false), (SMALL_BURST, true)] {
            let mut subjects: Vec<Subject> = vec![
                (
                    "uthread pool, stealing",
                    Box::new(|| green_burst(&stealing, n)),
                ),
                (
                    "uthread pool, stealing off",
                    Box::new(|| green_burst(&no_stealing, n)),
                ),
                ("tokio multi-thread", Box::new(|| tokio_burst(&tokio, n))),
            ];
            if with_may {
                subjects.push(("may", Box::new(move || may_burst(n))));
            }
            let ms = interleave(&subjects, expected_burst(n));
            println!(
                "burst of {n} threads spawned from one carrier ({WORK_ITERS}-step work each):"
            );
            summarise(&subjects, &ms);
        }
    }
    if which.is_empty() || which == "tree" {
        let expect = green_tree(&stealing).1;
        let subjects: Vec<Subject> = vec![
            ("uthread pool, stealing", Box::new(|| green_tree(&stealing))),
            (
                "uthread pool, stealing off",
                Box::new(|| green_tree(&no_stealing)),
            ),
            ("tokio multi-thread", Box::new(|| tokio_tree(&tokio))),
            ("may", Box::new(may_tree)),
        ];
        let ms = interleave(&subjects, expect);
        println!(
            "fan-out/fan-in tree of depth {TREE_DEPTH} ({} threads, leaves do the work):",
            (1u64 << (TREE_DEPTH + 1)) - 1
        );
        summarise(&subjects, &ms);
    }
    stealing.join();
    no_stealing.join();
}
