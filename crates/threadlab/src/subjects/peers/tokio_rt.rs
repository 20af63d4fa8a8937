//! Tokio's current-thread scheduler: the batches `create.tokio`, `switch.tokio.yield` and
//! `switch.tokio.chan` time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{round_trips, work, BalanceNotes, Peer, PeerInfo, Running};
use crate::cancel::Cancel;
use crate::error::Result;
use crate::measure::spawn::fd_refused;
use crate::measure::placement::pin_current_thread;

pub struct Tokio;

const INFO: PeerInfo = PeerInfo {
    name: "tokio",
    title: "Tokio",
    one: "a Tokio task",
    many: "Tokio tasks",
    floor: false,
    slow_start: false,
    own_process: false,
    spawn: "tokio current_thread runtime: tokio::spawn of an empty async block, then .await on \
            its JoinHandle, one at a time; timed inside block_on, nothing subtracted",
    spawn_unpinned: None,
    yields: "two tasks on a tokio current_thread runtime alternate \
             tokio::task::yield_now().await; per switch = batch time / number of yields \
             (includes the waker and run-queue work, nothing subtracted)",
    chan: Some(
        "two tasks of a tokio current_thread runtime pass a value back and forth over two \
         tokio::sync::mpsc channels of capacity 1; per message; nothing subtracted",
    ),
    balance: Some(BalanceNotes {
        burst: "tokio multi-thread runtime, 2 workers: tokio::spawn",
        tree: "tokio multi-thread runtime, 2 workers",
    }),
};

impl Peer for Tokio {
    fn info(&self) -> &'static PeerInfo {
        &INFO
    }

    fn start(&self, _cancel: &Cancel) -> Result<Box<dyn Running>> {
        Ok(Box::new(runtime()?))
    }

    fn start_on_two(&self, _cancel: &Cancel, cpus: (usize, usize)) -> Result<Box<dyn Running>> {
        Ok(Box::new(TwoWorkers(multi_thread(cpus.0, cpus.1)?)))
    }
}

impl Running for tokio::runtime::Runtime {
    fn spawn_join(&mut self, n: u64) -> Result<Duration> {
        Ok(spawn_join_batch(self, n))
    }

    fn yield_switch(&mut self, n: u64) -> Result<Duration> {
        Ok(yield_batch(self, n))
    }

    fn chan(&mut self, n: u64) -> Result<Duration> {
        Ok(mpsc_batch(self, n))
    }
}

/// A multi-thread runtime of two workers, for the pool-balance rows.
struct TwoWorkers(tokio::runtime::Runtime);

impl Running for TwoWorkers {
    fn spawn_join(&mut self, n: u64) -> Result<Duration> {
        Ok(spawn_join_batch(&self.0, n))
    }

    fn yield_switch(&mut self, n: u64) -> Result<Duration> {
        Ok(yield_batch(&self.0, n))
    }

    fn burst(&mut self, size: u64, n: u64) -> Result<Duration> {
        Ok(bursts(&self.0, size, n))
    }

    fn tree(&mut self, depth: u32, n: u64) -> Result<Duration> {
        Ok(trees(&self.0, depth, n))
    }
}

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| fd_refused("a tokio current_thread runtime's descriptors", &e))
}

/// `n` times: tokio::spawn of an empty task, then await its JoinHandle.
pub fn spawn_join_batch(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    rt.block_on(async move {
        let t = Instant::now();
        for i in 0..n {
            let h = tokio::spawn(async move { std::hint::black_box(i) });
            let _ = std::hint::black_box(h.await);
        }
        t.elapsed()
    })
}

/// Two tasks alternate `yield_now().await`, `n` switches in all.
pub fn yield_batch(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    let per_side = n.div_ceil(2).max(1);
    let took = rt.block_on(async move {
        let side = move || async move {
            for _ in 0..per_side {
                tokio::task::yield_now().await;
            }
        };
        let a = tokio::spawn(side());
        let b = tokio::spawn(side());
        let t = Instant::now();
        let _ = a.await;
        let _ = b.await;
        t.elapsed()
    });
    took.mul_f64(n as f64 / (2 * per_side) as f64)
}

/// Two tasks over `tokio::sync::mpsc` channels of capacity 1 (its smallest), `n` messages.
pub fn mpsc_batch(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
    let (rounds, scale) = round_trips(n);
    let took = rt.block_on(async move {
        let (ping_tx, mut ping_rx) = tokio::sync::mpsc::channel::<u64>(1);
        let (pong_tx, mut pong_rx) = tokio::sync::mpsc::channel::<u64>(1);
        let echo = tokio::spawn(async move {
            while let Some(v) = ping_rx.recv().await {
                if pong_tx.send(v + 1).await.is_err() {
                    break;
                }
            }
        });
        let t = Instant::now();
        for i in 0..rounds {
            let _ = ping_tx.send(i).await;
            let _ = pong_rx.recv().await;
        }
        let took = t.elapsed();
        drop(ping_tx);
        let _ = echo.await;
        took
    });
    took.mul_f64(scale)
}

/// A multi-thread runtime of two workers, the first started pinned to `first`, the second to
/// `second`.
fn multi_thread(first: usize, second: usize) -> Result<tokio::runtime::Runtime> {
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
        .map_err(|e| fd_refused("a tokio multi-thread runtime's descriptors", &e))
}

/// Awaits every task in order; the wrapping sum of what they returned (0 for one that failed).
async fn join_sum(tasks: impl IntoIterator<Item = tokio::task::JoinHandle<u64>>) -> u64 {
    let mut sum = 0u64;
    for t in tasks {
        sum = sum.wrapping_add(t.await.unwrap_or_default());
    }
    sum
}

/// `n` times: a task spawned onto the runtime runs `root` and returns the time it took.
fn rooted<F>(rt: &tokio::runtime::Runtime, n: u64, root: impl Fn() -> F) -> Duration
where
    F: Future<Output = Duration> + Send + 'static,
{
    (0..n)
        .map(|_| rt.block_on(async { tokio::spawn(root()).await.unwrap_or_default() }))
        .sum()
}

/// `n` bursts of `size` tasks, each rooted in a task on one worker.
fn bursts(rt: &tokio::runtime::Runtime, size: u64, n: u64) -> Duration {
    rooted(rt, n, || async move {
        let t = Instant::now();
        let tasks: Vec<_> = (0..size)
            .map(|i| tokio::spawn(async move { work(i) }))
            .collect();
        std::hint::black_box(join_sum(tasks).await);
        t.elapsed()
    })
}

fn node(depth: u32, seed: u64) -> Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            return work(seed);
        }
        let children = [seed * 2, seed * 2 + 1].map(|s| tokio::spawn(node(depth - 1, s)));
        // The two children in an array, as two handles on the stack: no allocation per node.
        join_sum(children).await
    })
}

/// `n` trees of depth `depth` of tasks, each rooted in a task on one worker.
fn trees(rt: &tokio::runtime::Runtime, depth: u32, n: u64) -> Duration {
    rooted(rt, n, || async move {
        let t = Instant::now();
        std::hint::black_box(node(depth, 1).await);
        t.elapsed()
    })
}
