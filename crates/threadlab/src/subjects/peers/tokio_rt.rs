//! Tokio's current-thread scheduler: the batches `create.tokio`, `switch.tokio.yield` and
//! `switch.tokio.chan` time.

use std::time::{Duration, Instant};

use super::{round_trips, Peer, PeerInfo, Running};
use crate::cancel::Cancel;
use crate::error::{Error, Result};

pub struct Tokio;

const INFO: PeerInfo = PeerInfo {
    name: "tokio",
    title: "Tokio",
    one: "a Tokio task",
    many: "Tokio tasks",
    slow_start: false,
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
};

impl Peer for Tokio {
    fn info(&self) -> &'static PeerInfo {
        &INFO
    }

    fn start(&self, _cancel: &Cancel) -> Result<Box<dyn Running>> {
        Ok(Box::new(runtime()?))
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

pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| Error::Fail(format!("cannot build a tokio current_thread runtime: {e}")))
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
