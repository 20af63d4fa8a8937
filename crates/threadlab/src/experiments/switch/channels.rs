//! Channel ping-pong, per message: every registered peer's channels on one CPU (uthread's
//! between two green threads of one carrier, Tokio's mpsc, Go's unbuffered channels: their
//! batches are in `subjects::peers`), uthread's across two carriers and with a plain OS thread,
//! and crossbeam between OS threads, all in one interleaved group (the `switch` experiment's
//! channel rows), with ratio rows taken round by round.
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
use crate::measure::spawn::{green_runtime, start_refused};
use crate::measure::units::Unit;
use crate::results::flag::Flag;
use crate::results::ids;
use crate::subjects::peers::{self, echo_each, round_trips, PeerInfo, Started};

/// Two green threads on two carriers of `pool` (pinned one per CPU), rendezvous channels.
pub fn green_cross_carrier(pool: &uthread::Pool, n: u64) -> Duration {
    let (rounds, scale) = round_trips(n);
    let (ping_tx, ping_rx) = uthread::chan::bounded::<u64>(0);
    let (pong_tx, pong_rx) = uthread::chan::bounded::<u64>(0);
    let echo = pool.spawn_on(1, move || {
        echo_each(ping_rx.iter(), |v| pong_tx.send(v).is_ok())
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
        let rt = green_runtime(uthread::Runtime::new())?;
        // The green side waits on an OS thread: the handle keeps its runtime from taking that
        // for a deadlock.
        let keep = rt.handle();
        let (ping, ping_rx) = uthread::chan::bounded::<u64>(0);
        let (pong_tx, pong) = uthread::chan::bounded::<u64>(0);
        let echo = Echo::start(os_cpu, move || {
            echo_each(ping_rx.iter(), |v| pong_tx.send(v).is_ok())
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
            echo_each(ping_rx.iter(), |v| pong_tx.send(v).is_ok())
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

/// The subjects of the rows across two CPUs, made while the measuring thread may use both.
struct CrossCpu {
    pool: uthread::Pool,
    crossbeam: Crossbeam,
    green_os: GreenToOs,
    placement: Placement,
}

/// Rows on the measuring thread's CPU: the channels of the peers that run in this process,
/// crossbeam's between OS threads, then the channels of the peers in a process of their own.
/// A peer's own process keeps running threads for a while after its batch (Go's idle Ps spin
/// before they park), and crossbeam's futex hand-offs on the same CPU read differently right
/// after it (bimodal, 3 and 8 us, against 8 us after Tokio's batch in the same runs), so
/// such a peer's batch comes last in a round, before the next round's first row.
fn same_cpu_rows<'a>(
    group: &mut Interleaved<'a>,
    same: Placement,
    started: &'a [Started],
    crossbeam: &'a Crossbeam,
    cancel: &'a crate::cancel::Cancel,
) {
    let (in_process, own_process): (Vec<&Started>, Vec<&Started>) =
        started.iter().partition(|p| !p.info.own_process);
    for peer in in_process {
        chan_row(group, same, peer, cancel);
    }
    group.row(
        "switch.crossbeam.chan",
        Unit::Ns,
        same,
        "two OS threads on one CPU pass a value back and forth over two crossbeam_channel \
         zero-capacity channels; per message (each a futex wake-up and a kernel switch)",
        |n| Ok(crossbeam.batch(n)),
    );
    for peer in own_process {
        chan_row(group, same, peer, cancel);
    }
}

/// A started peer's channel row, where it has channels.
fn chan_row<'a>(
    group: &mut Interleaved<'a>,
    same: Placement,
    peer: &'a Started,
    cancel: &'a crate::cancel::Cancel,
) {
    let Some(note) = peer.info.chan else {
        return;
    };
    let id = ids::peer::chan(peer.info.name);
    group.peer_row(peer, cancel, (&id, same, note), |r, n| r.chan(n));
}

/// Rows across two CPUs: two carriers of a pool, a green thread and an OS thread, crossbeam.
///
/// Across CPUs each hand-over finds the other side still spinning or already asleep (a
/// carrier spins briefly before it sleeps, crossbeam backs off before it parks), a race whose
/// regime can outlast a run: in 24 quick runs this week with the two vCPUs close (a cache
/// line's round trip about 45 ns), two carriers read 179-226 ns a message while most runs'
/// trials agreed within 2-8%, and in two runs the trials split in two (one read 118 ns); in two
/// runs whose trials met the vCPUs 313-325 ns apart it read 858 and 1000 ns. The two pairs'
/// rows and their ratio carry `race`.
///
/// A green thread and an OS thread: each message wakes a party asleep on the other CPU (the OS
/// thread in a futex, the carrier in epoll_wait), so in a guest (`guest`) each one waits for the
/// host to bring back an idle vCPU, and the row carries `idle_vcpu` as the pipe rows across two
/// CPUs do. In back-to-back quick runs of one build on a 2-vCPU KVM guest it read 18.0 us and
/// 27.7 us a message (+53%) beside `switch.process.pipe.cross_cpu` 14.4 and 21.5 us; over 21
/// earlier A/A pairs its medians ranged 17.4-35.5 us, two pairs called it faster (24.6% and
/// 17.1%) and one unstable (+80.6%).
fn cross_cpu_rows<'a>(group: &mut Interleaved<'a>, c: &'a CrossCpu, guest: bool) {
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
        .flag(Flag::Race)
        .row(
            "switch.green.chan.os_thread",
            Unit::Ns,
            c.placement,
            "a green thread (its carrier on the first CPU) and a plain OS thread (on the \
             second) over uthread rendezvous channels: the OS thread blocks in park/unpark \
             (futex), the green thread parks on its carrier, which idles in epoll_wait; per \
             message",
            |n| Ok(c.green_os.batch(n)),
        );
    if guest {
        group.flag(Flag::IdleVcpu);
    }
    group
        .row(
            "switch.crossbeam.chan.cross_cpu",
            Unit::Ns,
            c.placement,
            "two OS threads on two CPUs over crossbeam_channel zero-capacity channels; per \
             message",
            |n| Ok(c.crossbeam.batch(n)),
        )
        .flag(Flag::Race);
}

/// Ratio rows, per round: the reference peer's message over each other peer's and over
/// crossbeam's between OS threads.
fn ratio_rows(group: &mut Interleaved<'_>, cross: bool) {
    let reference = peers::reference();
    let base = ids::peer::chan(reference.name);
    // The order the results file has always had: the peers in a process of their own first.
    let (own_process, in_process): (Vec<&PeerInfo>, Vec<&PeerInfo>) = peers::others()
        .filter(|p| p.chan.is_some())
        .partition(|p| p.own_process);
    for other in own_process.into_iter().chain(in_process) {
        group.ratio(
            &ids::ratio(&base, other.name),
            &ids::peer::chan(other.name),
            &base,
            format!(
                "how many times cheaper a message between {} is than between {}",
                reference.many, other.many
            ),
        );
    }
    group.ratio(
        &ids::ratio(&base, "crossbeam"),
        "switch.crossbeam.chan",
        &base,
        format!(
            "how many times cheaper a message between {} is than between OS threads on one CPU",
            reference.many
        ),
    );
    if cross {
        group
            .ratio(
                "switch.green.chan.cross_carrier.vs_crossbeam",
                "switch.crossbeam.chan.cross_cpu",
                "switch.green.chan.cross_carrier",
                "two carriers against two OS threads, each pair on two CPUs",
            )
            .flag(Flag::Race);
    }
}

/// The channel rows of the `switch` experiment, measured interleaved: same CPU (the peers'
/// channels, crossbeam's OS threads) and across two CPUs (two carriers, a
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
                .map_err(|e| start_refused("cannot start a 2-carrier uthread pool", &e))?;
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
    let crossbeam_same = Crossbeam::start(home)?;
    // Only the peers that have channels: the others would be started for nothing.
    let started = peers::start_each(
        peers::REGISTRY
            .iter()
            .copied()
            .filter(|p| p.info().chan.is_some()),
        |p| p.start(ctx.cancel),
        |p| {
            ctx.step(&format!(
                "starting the {} peer for the channel rows",
                p.title
            ))
        },
        |p, reason| out.skip(&ids::peer::chan(p.name), reason),
    )?;
    let mut group = Interleaved::new();
    same_cpu_rows(
        &mut group,
        Placement::SameCpu(home),
        &started,
        &crossbeam_same,
        ctx.cancel,
    );
    match &cross {
        Some(c) => cross_cpu_rows(&mut group, c, ctx.env.is_guest()),
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
    drop(started);
    if let Some(c) = cross {
        let CrossCpu { pool, .. } = c;
        pool.join();
    }
    Ok(())
}
