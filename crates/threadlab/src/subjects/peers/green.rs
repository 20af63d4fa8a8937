//! uthread, this workspace's green threads: the batches `create.green`, `switch.green.yield`
//! and `switch.green.chan` time, on one carrier (the calling OS thread).

use std::time::{Duration, Instant};

use super::{echo_each, round_trips, Peer, PeerInfo, Running};
use crate::cancel::Cancel;
use crate::error::Result;
use crate::measure::spawn::green_runtime;

pub struct Uthread;

const INFO: PeerInfo = PeerInfo {
    name: "green",
    title: "uthread",
    one: "a green thread",
    many: "green threads",
    floor: false,
    slow_start: false,
    own_process: false,
    spawn: "uthread::spawn of a closure returning at once + join, one carrier (M:1), default \
            runtime: 256 KiB guarded stacks from the runtime's pool (reused after warm-up), the \
            thread's control block in a page on top of its stack, no heap allocation; timed \
            inside block_on, nothing subtracted",
    spawn_unpinned: Some(
        "uthread::spawn + join as create.green, with the carrier (the calling OS thread) not \
         pinned: all green threads still run on that one carrier, so only the kernel moving the \
         carrier between CPUs can change the figure",
    ),
    yields: "two uthread green threads on one carrier alternate uthread::yield_now (no system \
             call); per switch = batch time / number of yields; the spawner is blocked in join \
             meanwhile; nothing subtracted",
    chan: Some(
        "two uthread green threads of one carrier pass a value back and forth over two \
         rendezvous channels (uthread::chan::bounded(0)); per message (one send received) = \
         batch time / messages; each receive parks the receiver and the send hands the value \
         over and makes it runnable; nothing subtracted",
    ),
    balance: None,
};

impl Peer for Uthread {
    fn info(&self) -> &'static PeerInfo {
        &INFO
    }

    fn start(&self, _cancel: &Cancel) -> Result<Box<dyn Running>> {
        Ok(Box::new(green_runtime(uthread::Runtime::new())?))
    }
}

impl Running for uthread::Runtime {
    fn spawn_join(&mut self, n: u64) -> Result<Duration> {
        Ok(spawn_join_batch(self, n))
    }

    fn yield_switch(&mut self, n: u64) -> Result<Duration> {
        Ok(yield_batch(self, n))
    }

    fn chan(&mut self, n: u64) -> Result<Duration> {
        Ok(chan_batch(self, n))
    }
}

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

/// Two green threads of one carrier over rendezvous channels (capacity 0, Go's unbuffered),
/// `n` messages.
pub fn chan_batch(rt: &uthread::Runtime, n: u64) -> Duration {
    let (rounds, scale) = round_trips(n);
    let took = rt.block_on(move || {
        let (ping_tx, ping_rx) = uthread::chan::bounded::<u64>(0);
        let (pong_tx, pong_rx) = uthread::chan::bounded::<u64>(0);
        let echo = uthread::spawn(move || echo_each(ping_rx.iter(), |v| pong_tx.send(v).is_ok()));
        let t = Instant::now();
        for i in 0..rounds {
            let _ = ping_tx.send(i);
            let _ = pong_rx.recv();
        }
        let took = t.elapsed();
        drop(ping_tx);
        echo.join();
        took
    });
    took.mul_f64(scale)
}
