//! Peer runtimes measured beside the kernel's threads in the same run, interleaved with them:
//! uthread (this workspace's green threads), Tokio's current-thread scheduler and Go's
//! goroutines, and corosensei's bare coroutine as the floor they are read against (no runtime:
//! no scheduler, so `PeerInfo::floor`). `create` and `switch` put their rows in one interleaved group with the kernel
//! rows, so all are sampled the same way (warm-up, calibrated batches, >= 7 rounds).
//! The switch experiment's channel rows (`experiments/switch/channels.rs`) and the create
//! experiment's burst rows on two CPUs (`experiments/create/balance.rs`) measure groups of
//! their own, with the same sampler, from these runtimes.
//!
//! Adding a peer: one file here with a type that implements `Peer`, and one line
//! (`module::Type`) in the `peers!` list below, which declares the module and registers it in
//! `REGISTRY`. `create` and `switch` measure every peer listed (its ids are
//! `results::ids::peer`'s), each read against the reference peer, uthread, round by round.

use std::cell::RefCell;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};

/// Declares each peer's module and lists its `Peer` in `REGISTRY`: a peer is one line.
macro_rules! peers {
    ($($module:ident :: $peer:ident),* $(,)?) => {
        $(pub mod $module;)*
        /// Every peer runtime the experiments measure, in the order of their rows.
        pub const REGISTRY: &[&dyn Peer] = &[$(&$module::$peer),*];
    };
}

peers!(
    // The reference the others are read against, first: uthread, this workspace's runtime.
    green::Uthread,
    tokio_rt::Tokio,
    go::Go,
    // Last: no runtime but the floor the others' switches are read against.
    corosensei::Corosensei,
);

/// What a peer runtime is called and what its rows say it measured.
pub struct PeerInfo {
    /// Its segment in metric ids (`create.<name>`, `switch.<name>.yield`, ...).
    pub name: &'static str,
    /// Its name in progress lines ("Go").
    pub title: &'static str,
    /// One of its units of work and several, for the ratio rows' notes ("a goroutine",
    /// "goroutines").
    pub one: &'static str,
    pub many: &'static str,
    /// Whether it is no runtime but the floor a runtime can approach: a bare stackful switch
    /// with no scheduler, run queue or preemption. Its ratio rows read below 1 (the reference
    /// costs more), and no conclusion or advice offers it as a runtime to choose.
    pub floor: bool,
    /// Whether starting it takes long enough (a build) to be announced as a step of its own.
    pub slow_start: bool,
    /// Whether it runs in a process of its own (Go's program), whose threads may still run
    /// after its batch: its rows are placed where that disturbs the fewest others.
    pub own_process: bool,
    /// The note of its `create.<name>` row: a unit of work started and waited for.
    pub spawn: &'static str,
    /// The note of its `create.<name>.unpinned` row, where the default placement can change
    /// its figure; None: no such row.
    pub spawn_unpinned: Option<&'static str>,
    /// The note of its `switch.<name>.yield` row: two units of work alternate.
    pub yields: &'static str,
    /// The note of its `switch.<name>.chan` row, where it has channels; None: no such row.
    pub chan: Option<&'static str>,
    /// What its pool-balance rows on two CPUs (`create.<name>.burst`, `create.<name>.tree`)
    /// run on; None: no such rows. The reference peer's own balance rows (a uthread Pool with
    /// stealing on and off) are written out in `experiments/create/balance.rs`.
    pub balance: Option<BalanceNotes>,
}

/// The runtime named in a peer's pool-balance rows' notes, each followed by what the row runs.
pub struct BalanceNotes {
    /// Before "; <the burst>": "tokio multi-thread runtime, 2 workers: tokio::spawn".
    pub burst: &'static str,
    /// Before ": <the tree>": "tokio multi-thread runtime, 2 workers".
    pub tree: &'static str,
}

/// A peer runtime: what it is, and starting it.
pub trait Peer: Sync {
    fn info(&self) -> &'static PeerInfo;

    /// Starts the runtime on the calling thread, whose CPU mask whatever it starts inherits.
    /// `Err(Skip)` with the true reason when it cannot run here (no Go toolchain, say);
    /// `Err(Cancelled)` when a signal stopped the start.
    fn start(&self, cancel: &Cancel) -> Result<Box<dyn Running>>;

    /// Starts the runtime for the pool-balance rows: two workers, one per CPU of `cpus` where
    /// the runtime pins its workers. Called only for a peer whose `PeerInfo::balance` is set.
    fn start_on_two(&self, cancel: &Cancel, cpus: (usize, usize)) -> Result<Box<dyn Running>> {
        let _ = (cancel, cpus);
        Err(Error::Skip(
            "this peer runtime has no pool-balance rows".into(),
        ))
    }
}

/// A started peer runtime. Every batch is timed by the runtime itself and runs `n` operations;
/// nothing is subtracted.
pub trait Running {
    /// `n` times: start a unit of work that returns at once, then wait for it to end.
    fn spawn_join(&mut self, n: u64) -> Result<Duration>;

    /// Two units of work alternate giving up the CPU, `n` switches in all.
    fn yield_switch(&mut self, n: u64) -> Result<Duration>;

    /// `n` messages passed back and forth between two units of work over the runtime's own
    /// channels. Called only for a peer whose `PeerInfo::chan` is set.
    fn chan(&mut self, n: u64) -> Result<Duration> {
        let _ = n;
        Err(Error::Fail("this peer runtime has no channel row".into()))
    }

    /// `n` bursts of `size` units of work, each computing `work`, spawned one after another by
    /// one root unit on one worker, then joined in order; timed inside the root, from the
    /// first spawn to the last join. Called only on a runtime `Peer::start_on_two` started.
    fn burst(&mut self, size: u64, n: u64) -> Result<Duration> {
        let _ = (size, n);
        Err(Error::Fail(
            "this peer runtime has no pool-balance rows".into(),
        ))
    }

    /// `n` fan-out/fan-in trees of depth `depth`: each inner unit spawns two and joins them,
    /// each leaf computes `work`; timed inside the root. As `burst`.
    fn tree(&mut self, depth: u32, n: u64) -> Result<Duration> {
        let _ = (depth, n);
        Err(Error::Fail(
            "this peer runtime has no pool-balance rows".into(),
        ))
    }

    /// How many programs of its own the peer runs batches in (Go's: `go::PROGRAMS`); one for a
    /// runtime in this process.
    fn programs(&self) -> usize {
        1
    }

    /// Runs the batches that follow in program `k` modulo `programs()`: a row of such a peer
    /// names its trial's program before every batch (`Interleaved::peer_row`).
    fn use_program(&mut self, k: usize) {
        let _ = k;
    }
}

/// Steps of the work every unit of a pool-balance burst or tree computes (bench.go's
/// `WorkSteps`).
pub const WORK_STEPS: u64 = 300;

/// The work of a pool-balance unit: a dependent multiply-xorshift chain of `WORK_STEPS` steps
/// (about half a microsecond), which the compiler cannot fold.
#[inline(never)]
pub fn work(seed: u64) -> u64 {
    (0..WORK_STEPS).fold(seed | 1, |x, _| {
        let x = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        x ^ (x >> 29)
    })
}

/// The peer the others are read against: uthread.
pub fn reference() -> &'static PeerInfo {
    REGISTRY[0].info()
}

/// The registered peers but the reference, in registry order.
pub fn others() -> impl Iterator<Item = &'static PeerInfo> {
    REGISTRY.iter().skip(1).map(|p| p.info())
}

/// Round trips for `n` messages (at least one), and the factor that scales their time to `n`:
/// a channel batch passes a value back and forth, one message each way per round trip.
pub fn round_trips(n: u64) -> (u64, f64) {
    let r = n.div_ceil(2).max(1);
    (r, n as f64 / (2 * r) as f64)
}

/// The far side of a channel ping-pong: sends back each value received plus one, until the
/// values end or a send fails (the other side is gone).
pub fn echo_each(received: impl Iterator<Item = u64>, mut send: impl FnMut(u64) -> bool) {
    for v in received {
        if !send(v + 1) {
            break;
        }
    }
}

/// A peer started for one group of rows; its rows borrow it one batch at a time.
pub struct Started {
    pub info: &'static PeerInfo,
    /// The peer itself, for rows that start it afresh for every trial.
    pub peer: &'static dyn Peer,
    pub running: RefCell<Box<dyn Running>>,
}

impl Started {
    /// Whether a row may start this peer afresh for every trial: it runs in this process and
    /// starts in well under a millisecond (uthread's and Tokio's runtimes, not Go's program).
    pub fn restartable(&self) -> bool {
        !self.info.own_process && !self.info.slow_start
    }
}

/// Starts every registered peer for one group of rows, in registry order. `announce` is told
/// of a slow start before it begins; a peer that cannot run here is left out and `skipped`
/// gets its reason; any other error ends the start.
pub fn start_all(
    cancel: &Cancel,
    announce: impl FnMut(&PeerInfo) -> Result<()>,
    skipped: impl FnMut(&PeerInfo, String),
) -> Result<Vec<Started>> {
    start_each(
        REGISTRY.iter().copied(),
        |p| p.start(cancel),
        announce,
        skipped,
    )
}

/// As `start_all`, for `peers`, each started by `start`.
pub fn start_each(
    peers: impl Iterator<Item = &'static dyn Peer>,
    start: impl Fn(&'static dyn Peer) -> Result<Box<dyn Running>>,
    mut announce: impl FnMut(&PeerInfo) -> Result<()>,
    mut skipped: impl FnMut(&PeerInfo, String),
) -> Result<Vec<Started>> {
    let mut started = Vec::new();
    for peer in peers {
        let info = peer.info();
        if info.slow_start {
            announce(info)?;
        }
        match start(peer) {
            Ok(running) => started.push(Started {
                info,
                peer,
                running: RefCell::new(running),
            }),
            Err(Error::Skip(reason)) => skipped(info, reason),
            Err(e) => return Err(e),
        }
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_names_are_distinct_id_segments() {
        let names: Vec<&str> = REGISTRY.iter().map(|p| p.info().name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(
                !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "peer name {n:?} is not one id segment"
            );
            assert!(!names[..i].contains(n), "two peers are named {n}");
        }
        assert_eq!(reference().name, "green", "uthread is the reference peer");
    }

    #[test]
    fn every_peer_runs_its_batches_or_is_skipped_with_a_reason() {
        let cancel = Cancel::never();
        for peer in REGISTRY {
            let info = peer.info();
            match peer.start(&cancel) {
                Ok(mut running) => {
                    assert!(running.spawn_join(10).is_ok(), "{}: spawn", info.name);
                    assert!(running.yield_switch(10).is_ok(), "{}: yield", info.name);
                    if info.chan.is_some() {
                        assert!(running.chan(10).is_ok(), "{}: chan", info.name);
                    }
                    let pair = crate::measure::placement::cpu_pair();
                    let Some(pair) = pair.filter(|_| info.balance.is_some()) else {
                        continue;
                    };
                    match peer.start_on_two(&cancel, pair) {
                        Ok(mut two) => {
                            assert!(two.burst(100, 1).is_ok(), "{}: burst", info.name);
                            assert!(two.tree(3, 1).is_ok(), "{}: tree", info.name);
                        }
                        Err(Error::Skip(reason)) => assert!(!reason.is_empty(), "{}", info.name),
                        Err(e) => panic!("{}: {e}", info.name),
                    }
                }
                Err(Error::Skip(reason)) => assert!(!reason.is_empty(), "{}", info.name),
                Err(e) => panic!("{}: {e}", info.name),
            }
        }
    }
}
