//! uthread, this workspace's green threads: the batches `create.green` and `switch.green.yield`
//! time.

use std::time::{Duration, Instant};

/// `n` times: spawn a green thread that returns at once, then join it.
pub fn spawn_join_batch(rt: &uthread::Runtime, n: u64) -> Duration {
    rt.block_on(move || {
        let t = Instant::now();
        for i in 0..n {
            let h = uthread::spawn(move || std::hint::black_box(i));
            std::hint::black_box(h.join());
        }
        t.elapsed()
    })
}

/// Two green threads alternate `yield_now`, `n` switches in all.
pub fn yield_batch(rt: &uthread::Runtime, n: u64) -> Duration {
    let per_side = n.div_ceil(2).max(1);
    let took = rt.block_on(move || {
        let side = move || {
            for _ in 0..per_side {
                uthread::yield_now();
            }
        };
        let a = uthread::spawn(side);
        let b = uthread::spawn(side);
        let t = Instant::now();
        a.join();
        b.join();
        t.elapsed()
    });
    took.mul_f64(n as f64 / (2 * per_side) as f64)
}
