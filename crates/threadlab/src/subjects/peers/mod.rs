//! Peer runtimes measured beside the kernel's threads in the same run, interleaved with them:
//! uthread (this workspace's green threads), Tokio's current-thread scheduler and Go's
//! goroutines. `create` and `switch` put their rows in one interleaved group with the kernel
//! rows, so all are sampled the same way (warm-up, calibrated batches, >= 7 rounds).
//! The switch experiment's channel rows (`experiments/switch/channels.rs`) and the create
//! experiment's burst rows on two CPUs (`experiments/create/balance.rs`) measure groups of
//! their own, with the same sampler, from these runtimes.
//!
//! Adding a peer: one file here with a type that implements `Peer`, and one line in
//! `REGISTRY`. `create` and `switch` measure every peer listed (its ids are
//! `results::ids::peer`'s), each read against the reference peer, uthread, round by round.

use std::cell::RefCell;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};

pub mod go;
pub mod green;
pub mod tokio_rt;

/// Every peer runtime the experiments measure, in the order of their rows. The first is the
/// reference the others are read against.
pub const REGISTRY: &[&dyn Peer] = &[&green::Uthread, &tokio_rt::Tokio, &go::Go];

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
    /// Whether starting it takes long enough (a build) to be announced as a step of its own.
    pub slow_start: bool,
    /// The note of its `create.<name>` row: a unit of work started and waited for.
    pub spawn: &'static str,
    /// The note of its `create.<name>.unpinned` row, where the default placement can change
    /// its figure; None: no such row.
    pub spawn_unpinned: Option<&'static str>,
    /// The note of its `switch.<name>.yield` row: two units of work alternate.
    pub yields: &'static str,
    /// The note of its `switch.<name>.chan` row, where it has channels; None: no such row.
    pub chan: Option<&'static str>,
}

/// A peer runtime: what it is, and starting it.
pub trait Peer: Sync {
    fn info(&self) -> &'static PeerInfo;

    /// Starts the runtime on the calling thread, whose CPU mask whatever it starts inherits.
    /// `Err(Skip)` with the true reason when it cannot run here (no Go toolchain, say);
    /// `Err(Cancelled)` when a signal stopped the start.
    fn start(&self, cancel: &Cancel) -> Result<Box<dyn Running>>;
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
    pub running: RefCell<Box<dyn Running>>,
}

/// Starts every registered peer for one group of rows, in registry order. `announce` is told
/// of a slow start before it begins; a peer that cannot run here is left out and `skipped`
/// gets its reason; any other error ends the start.
pub fn start_all(
    cancel: &Cancel,
    mut announce: impl FnMut(&PeerInfo) -> Result<()>,
    mut skipped: impl FnMut(&PeerInfo, String),
) -> Result<Vec<Started>> {
    let mut started = Vec::new();
    for peer in REGISTRY {
        let info = peer.info();
        if info.slow_start {
            announce(info)?;
        }
        match peer.start(cancel) {
            Ok(running) => started.push(Started {
                info,
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
                }
                Err(Error::Skip(reason)) => assert!(!reason.is_empty(), "{}", info.name),
                Err(e) => panic!("{}: {e}", info.name),
            }
        }
    }
}
