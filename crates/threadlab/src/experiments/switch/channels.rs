//! Channel ping-pong, per message: uthread's channels between two green threads of one carrier,
//! across two carriers and with a plain OS thread, beside Tokio's mpsc, Go's unbuffered
//! channels and crossbeam between OS threads, all in one interleaved group (the `switch`
//! experiment's channel rows), with ratio rows taken round by round.
//!
//! Every row passes a value back and forth over two channels: one message is one value sent
//! and received; a batch of `n` messages is `n / 2` round trips, timed by the side that starts
//! each round trip, scaled to `n`. Nothing is subtracted.

use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Interleaved, Outcome};
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::units::Unit;
use crate::subjects::peers::go::{GoBench, GoPeer};
use crate::subjects::peers::tokio_rt;

/// Round trips for `n` messages (at least one), and the factor that scales their time to `n`.
fn round_trips(n: u64) -> (u64, f64) {
    let r = n.div_ceil(2).max(1);
    (r, n as f64 / (2 * r) as f64)
}

/// Two green threads of one carrier over rendezvous channels (capacity 0, Go's unbuffered).
pub fn green_same_carrier(rt: &uthread::Runtime, n: u64) -> Duration {
    let (rounds, scale) = round_trips(n);
    let took = rt.block_on(move || {
        let (ping_tx, ping_rx) = uthread::chan::bounded::<u64>(0);
        let (pong_tx, pong_rx) = uthread::chan::bounded::<u64>(0);
        let echo = uthread::spawn(move || {
            for v in ping_rx.iter() {
                if pong_tx.send(v + 1).is_err() {
                    break;
                }
            }
        });
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

/// Two green threads on two carriers of `pool` (pinned one per CPU), rendezvous channels.
pub fn green_cross_carrier(pool: &uthread::Pool, n: u64) -> Duration {
    let (rounds, scale) = round_trips(n);
    let (ping_tx, ping_rx) = uthread::chan::bounded::<u64>(0);
    let (pong_tx, pong_rx) = uthread::chan::bounded::<u64>(0);
    let echo = pool.spawn_on(1, move || {
        for v in ping_rx.iter() {
            if pong_tx.send(v + 1).is_err() {
                break;
            }
        }
    });
    let took = pool
        .spawn_on(0, move || {
            let t = Instant::now();
            for i in 0..rounds {
                let _ = ping_tx.send(i);
                let _ = pong_rx.recv();
            }
            t.elapsed()
        })
        .join()
        .finished()
        .unwrap_or_default();
    echo.join();
    took.mul_f64(scale)
}

/// An OS thread that echoes what it receives, over whichever channel pair it is given.
struct Echo {
    thread: Option<JoinHandle<()>>,
}

impl Echo {
    /// Starts the echo on its own OS thread pinned to `cpu`; it ends when `serve` returns.
    fn start(cpu: usize, serve: impl FnOnce() + Send + 'static) -> Result<Echo> {
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("threadlab-echo".into())
            .spawn(move || {
                let pinned = pin_current_thread(cpu);
                let ok = pinned.is_ok();
                let _ = ready_tx.send(pinned);
                if ok {
                    serve();
                }
            })
            .map_err(|e| Error::Skip(format!("cannot start an echo thread: {e}")))?;
        let echo = Echo {
            thread: Some(thread),
        };
        ready_rx
            .recv()
            .map_err(|_| Error::Fail("the echo thread died at start".into()))??;
        Ok(echo)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        // The owner drops its channel ends first, which ends `serve`.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A green thread (on the measuring OS thread's runtime) and a plain OS thread, over uthread's
/// rendezvous channels: the OS thread blocks its OS thread, the green thread parks.
pub struct GreenToOs {
    rt: uthread::Runtime,
    _keep_waiting: uthread::Handle,
    ping: Option<uthread::chan::Sender<u64>>,
    pong: uthread::chan::Receiver<u64>,
    _echo: Echo,
}

impl GreenToOs {
    pub fn start(os_cpu: usize) -> Result<GreenToOs> {
        let rt = uthread::Runtime::new();
        // The green side waits on an OS thread: the handle keeps its runtime from taking that
        // for a deadlock.
        let keep = rt.handle();
        let (ping, ping_rx) = uthread::chan::bounded::<u64>(0);
        let (pong_tx, pong) = uthread::chan::bounded::<u64>(0);
        let echo = Echo::start(os_cpu, move || {
            for v in ping_rx.iter() {
                if pong_tx.send(v + 1).is_err() {
                    break;
                }
            }
        })?;
        Ok(GreenToOs {
            rt,
            _keep_waiting: keep,
            ping: Some(ping),
            pong,
            _echo: echo,
        })
    }

    pub fn batch(&self, n: u64) -> Duration {
        let (rounds, scale) = round_trips(n);
        let (ping, pong) = (self.ping.as_ref().cloned(), &self.pong);
        let took = self.rt.block_on(move || {
            let t = Instant::now();
            if let Some(ping) = ping {
                for i in 0..rounds {
                    let _ = ping.send(i);
                    let _ = pong.recv();
                }
            }
            t.elapsed()
        });
        took.mul_f64(scale)
    }
}

impl Drop for GreenToOs {
    fn drop(&mut self) {
        // Disconnects the echo's receive loop before `_echo` joins it.
        self.ping = None;
    }
}

/// Two OS threads over crossbeam's zero-capacity channels: the measuring thread and an echo
/// thread pinned to `echo_cpu`.
pub struct Crossbeam {
    ping: Option<crossbeam_channel::Sender<u64>>,
    pong: crossbeam_channel::Receiver<u64>,
    _echo: Echo,
}

impl Crossbeam {
    pub fn start(echo_cpu: usize) -> Result<Crossbeam> {
        let (ping, ping_rx) = crossbeam_channel::bounded::<u64>(0);
        let (pong_tx, pong) = crossbeam_channel::bounded::<u64>(0);
        let echo = Echo::start(echo_cpu, move || {
            for v in ping_rx.iter() {
                if pong_tx.send(v + 1).is_err() {
                    break;
                }
            }
        })?;
        Ok(Crossbeam {
            ping: Some(ping),
            pong,
            _echo: echo,
        })
    }

    pub fn batch(&self, n: u64) -> Duration {
        let (rounds, scale) = round_trips(n);
        let t = Instant::now();
        if let Some(ping) = &self.ping {
            for i in 0..rounds {
                let _ = ping.send(i);
                let _ = self.pong.recv();
            }
        }
        t.elapsed().mul_f64(scale)
    }
}

impl Drop for Crossbeam {
    fn drop(&mut self) {
        self.ping = None;
    }
}

/// Two tasks of a Tokio current-thread runtime over `tokio::sync::mpsc` channels of capacity 1
/// (its smallest).
pub fn tokio_mpsc(rt: &tokio::runtime::Runtime, n: u64) -> Duration {
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

/// The subjects of the rows across two CPUs, made while the measuring thread may use both.
struct CrossCpu {
    pool: uthread::Pool,
    crossbeam: Crossbeam,
    green_os: GreenToOs,
    placement: Placement,
}

/// Rows on the measuring thread's CPU: green threads of one carrier, Tokio, Go, crossbeam.
fn same_cpu_rows<'a>(
    group: &mut Interleaved<'a>,
    same: Placement,
    green_rt: &'a uthread::Runtime,
    tokio: &'a tokio::runtime::Runtime,
    crossbeam: &'a Crossbeam,
    go: Option<&'a mut GoPeer>,
) {
    group
        .row(
            "switch.green.chan",
            Unit::Ns,
            same,
            "two uthread green threads of one carrier pass a value back and forth over two \
             rendezvous channels (uthread::chan::bounded(0)); per message (one send received) = \
             batch time / messages; each receive parks the receiver and the send hands the value \
             over and makes it runnable; nothing subtracted",
            |n| Ok(green_same_carrier(green_rt, n)),
        )
        .row(
            "switch.tokio.chan",
            Unit::Ns,
            same,
            "two tasks of a tokio current_thread runtime pass a value back and forth over two \
             tokio::sync::mpsc channels of capacity 1; per message; nothing subtracted",
            |n| Ok(tokio_mpsc(tokio, n)),
        )
        .row(
            "switch.crossbeam.chan",
            Unit::Ns,
            same,
            "two OS threads on one CPU pass a value back and forth over two crossbeam_channel \
             zero-capacity channels; per message (each a futex wake-up and a kernel switch)",
            |n| Ok(crossbeam.batch(n)),
        );
    if let Some(go) = go {
        group.row(
            "switch.go.chan",
            Unit::Ns,
            same,
            "Go, GOMAXPROCS=1: two goroutines pass a value back and forth over two unbuffered \
             channels; per message; the Go program (built at run time, on the same CPU) times \
             each batch, interleaved with the other rows",
            |n| go.batch(GoBench::Chan, n),
        );
    }
}

/// Rows across two CPUs: two carriers of a pool, a green thread and an OS thread, crossbeam.
fn cross_cpu_rows<'a>(group: &mut Interleaved<'a>, c: &'a CrossCpu) {
    group
        .row(
            "switch.green.chan.cross_carrier",
            Unit::Ns,
            c.placement,
            "two green threads on the two carriers of a uthread Pool pinned one per CPU, \
             rendezvous channels; per message: each hand-over wakes the other carrier through \
             its inbox (it spins briefly before it sleeps, so usually without a system call)",
            |n| Ok(green_cross_carrier(&c.pool, n)),
        )
        .row(
            "switch.green.chan.os_thread",
            Unit::Ns,
            c.placement,
            "a green thread (its carrier on the first CPU) and a plain OS thread (on the \
             second) over uthread rendezvous channels: the OS thread blocks in park/unpark \
             (futex), the green thread parks on its carrier, which idles in epoll_wait; per \
             message",
            |n| Ok(c.green_os.batch(n)),
        )
        .row(
            "switch.crossbeam.chan.cross_cpu",
            Unit::Ns,
            c.placement,
            "two OS threads on two CPUs over crossbeam_channel zero-capacity channels; per \
             message",
            |n| Ok(c.crossbeam.batch(n)),
        );
}

/// Ratio rows, per round.
fn ratio_rows(group: &mut Interleaved<'_>, cross: bool) {
    group
        .ratio(
            "switch.green.chan.vs_go",
            "switch.go.chan",
            "switch.green.chan",
            "how many times cheaper a message between green threads is than between goroutines",
        )
        .ratio(
            "switch.green.chan.vs_tokio",
            "switch.tokio.chan",
            "switch.green.chan",
            "how many times cheaper a message between green threads is than between Tokio tasks",
        )
        .ratio(
            "switch.green.chan.vs_crossbeam",
            "switch.crossbeam.chan",
            "switch.green.chan",
            "how many times cheaper a message between green threads is than between OS threads \
             on one CPU",
        );
    if cross {
        group.ratio(
            "switch.green.chan.cross_carrier.vs_crossbeam",
            "switch.crossbeam.chan.cross_cpu",
            "switch.green.chan.cross_carrier",
            "two carriers against two OS threads, each pair on two CPUs",
        );
    }
}

/// The channel rows of the `switch` experiment, measured interleaved: same CPU (green threads
/// of one carrier, Tokio, Go, crossbeam's OS threads) and across two CPUs (two carriers, a
/// green thread and an OS thread, crossbeam's OS threads). Called unpinned; pins what it
/// measures itself.
pub fn measure(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let home = home_cpu();
    // The pool's carriers pin themselves to the CPUs the creating thread may use: made here,
    // before the measuring thread is pinned; the echo threads pin themselves.
    let cross = match cpu_pair() {
        Some((a, b)) => {
            let _both = PinGuard::pin_set(&[a, b])?;
            let pool = uthread::Pool::builder()
                .carriers(2)
                .pin(true)
                .build()
                .map_err(|e| Error::Skip(format!("cannot start a 2-carrier pool: {e}")))?;
            Some(CrossCpu {
                pool,
                crossbeam: Crossbeam::start(b)?,
                green_os: GreenToOs::start(b)?,
                placement: Placement::CrossCpu(a, b),
            })
        }
        None => None,
    };
    let _pin = PinGuard::pin(home)?;
    let green_rt = uthread::Runtime::new();
    let tokio = tokio_rt::runtime()?;
    let crossbeam_same = Crossbeam::start(home)?;
    ctx.step("starting the Go peer for the channel rows")?;
    let mut go = match GoPeer::start(ctx.cancel) {
        Ok(peer) => Some(peer),
        Err(Error::Skip(reason)) => {
            out.skip("switch.go.chan", reason);
            None
        }
        Err(e) => return Err(e),
    };
    let mut group = Interleaved::new();
    same_cpu_rows(
        &mut group,
        Placement::SameCpu(home),
        &green_rt,
        &tokio,
        &crossbeam_same,
        go.as_mut(),
    );
    match &cross {
        Some(c) => cross_cpu_rows(&mut group, c),
        None => {
            for id in [
                "switch.green.chan.cross_carrier",
                "switch.green.chan.os_thread",
                "switch.crossbeam.chan.cross_cpu",
            ] {
                out.skip(id, "this process may use only one CPU");
            }
        }
    }
    ratio_rows(&mut group, cross.is_some());
    group.measure(ctx, out)?;
    drop(go);
    if let Some(c) = cross {
        let CrossCpu { pool, .. } = c;
        pool.join();
    }
    Ok(())
}
