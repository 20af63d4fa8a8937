//! Tokio's current-thread scheduler: the batches `create.tokio` and `switch.tokio.yield` time.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

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
