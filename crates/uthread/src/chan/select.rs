//! [`Select`]: wait for the first of several channel operations, or a timeout (Go's `select`).
//!
//! Go's algorithm: lock every channel involved (each once, in address order, so that two
//! selects never wait for each other's locks), look at the cases from a random start and
//! complete the first that can be done at once; otherwise leave a node in every case's queue,
//! all pointing to one claim word, release the locks and park. The first channel to claim the
//! word completes its case (see `wait`); on waking, the locks are taken again to take the other
//! nodes out. While a select looks at its cases it has no node in any queue, so nobody can
//! claim it meanwhile, and a claim never has to be undone.

use super::error::{RecvError, SendError};
use super::handles::{Receiver, Sender};
use super::shared::{forbid_scheduler_block, Chan, Spin, TryRecv, TrySend};
use super::wait::{Node, Party, Wake, Who, CASE, TIMED_OUT};
use crate::preempt::count as preempt;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// One case, type-erased: its channel's lock and what to do under it.
trait Case<'a, R> {
    fn lock(&self) -> &'a Spin;
    /// Completes the operation if it can be done now; returns the wake-up owed to a parked
    /// counterpart, if any.
    ///
    /// # Safety
    /// The channel's lock held.
    unsafe fn try_now(&mut self) -> Option<Option<Wake>>;
    /// # Safety
    /// Lock held; `party` outlives the node's time in the queue; the case does not move.
    unsafe fn register(&mut self, party: *const Party, case: u32);
    /// # Safety
    /// Lock held.
    unsafe fn unregister(&mut self);
    /// Runs the case's closure with its outcome (the operation completed, by this select or by
    /// the party that claimed it).
    fn run(self: Box<Self>) -> R;
}

struct RecvCase<'a, T, F> {
    chan: &'a Chan<T>,
    /// Filled by a sender that claims us; left empty by a disconnection.
    slot: Option<T>,
    node: Option<Node<T>>,
    done_here: Option<Result<T, RecvError>>,
    f: F,
}

impl<'a, T, R, F: FnOnce(Result<T, RecvError>) -> R> Case<'a, R> for RecvCase<'a, T, F> {
    fn lock(&self) -> &'a Spin {
        &self.chan.lock
    }

    unsafe fn try_now(&mut self) -> Option<Option<Wake>> {
        // SAFETY: forwarded contract.
        match unsafe { self.chan.try_recv_locked() } {
            TryRecv::Got(v, wake) => {
                self.done_here = Some(Ok(v));
                Some(wake)
            }
            TryRecv::Disconnected => {
                self.done_here = Some(Err(RecvError));
                Some(None)
            }
            TryRecv::Empty => None,
        }
    }

    unsafe fn register(&mut self, party: *const Party, case: u32) {
        let node = self.node.insert(Node::new(party, case, &mut self.slot));
        // SAFETY: forwarded contract.
        unsafe { self.chan.state().recvq.push(node) };
    }

    unsafe fn unregister(&mut self) {
        if let Some(n) = &self.node {
            // SAFETY: forwarded contract.
            unsafe { self.chan.state().recvq.remove(n) };
        }
    }

    fn run(mut self: Box<Self>) -> R {
        let outcome = match self.done_here.take() {
            Some(r) => r,
            None => self.slot.take().ok_or(RecvError),
        };
        (self.f)(outcome)
    }
}

struct SendCase<'a, T, F> {
    chan: &'a Chan<T>,
    /// The value; taken by a receiver that claims us, left in place by a disconnection.
    slot: Option<T>,
    node: Option<Node<T>>,
    done_here: Option<Result<(), SendError<T>>>,
    f: F,
}

impl<'a, T, R, F: FnOnce(Result<(), SendError<T>>) -> R> Case<'a, R> for SendCase<'a, T, F> {
    fn lock(&self) -> &'a Spin {
        &self.chan.lock
    }

    unsafe fn try_now(&mut self) -> Option<Option<Wake>> {
        let v = self.slot.take()?;
        // SAFETY: forwarded contract.
        match unsafe { self.chan.try_send_locked(v) } {
            TrySend::Sent(wake) => {
                self.done_here = Some(Ok(()));
                Some(wake)
            }
            TrySend::Disconnected(v) => {
                self.done_here = Some(Err(SendError(v)));
                Some(None)
            }
            TrySend::Full(v) => {
                self.slot = Some(v);
                None
            }
        }
    }

    unsafe fn register(&mut self, party: *const Party, case: u32) {
        let node = self.node.insert(Node::new(party, case, &mut self.slot));
        // SAFETY: forwarded contract.
        unsafe { self.chan.state().sendq.push(node) };
    }

    unsafe fn unregister(&mut self) {
        if let Some(n) = &self.node {
            // SAFETY: forwarded contract.
            unsafe { self.chan.state().sendq.remove(n) };
        }
    }

    fn run(mut self: Box<Self>) -> R {
        let outcome = match self.done_here.take() {
            Some(r) => r,
            None => match self.slot.take() {
                None => Ok(()),
                Some(v) => Err(SendError(v)),
            },
        };
        (self.f)(outcome)
    }
}

/// What happens when nothing is ready.
enum Otherwise<'a, R> {
    /// Wait for as long as it takes.
    Wait,
    /// Wait until the deadline, then run the closure.
    Until(Instant, Box<dyn FnOnce() -> R + 'a>),
}

/// Waits for the first of several channel operations to complete (or a timeout), then runs
/// that case's closure and returns what it returns. Every case's closure gets the operation's
/// outcome: a received value or [`RecvError`] (all senders gone), `Ok(())` for a sent value or
/// [`SendError`] with the value (all receivers gone). A disconnected channel's case is ready at
/// once, as a closed channel's is in Go.
///
/// ```
/// use std::time::Duration;
/// use uthread::chan::{self, Select};
/// uthread::run(|| {
///     let (tx_a, rx_a) = chan::bounded::<u32>(0);
///     let (tx_b, rx_b) = chan::bounded::<&str>(0);
///     let sender = uthread::spawn(move || tx_b.send("b").unwrap());
///     let got = Select::new()
///         .recv(&rx_a, |r| format!("a: {r:?}"))
///         .recv(&rx_b, |r| format!("b: {r:?}"))
///         .timeout(Duration::from_secs(1), || "timed out".to_string())
///         .wait();
///     assert_eq!(got, "b: Ok(\"b\")");
///     sender.join();
///     drop(tx_a);
/// });
/// ```
///
/// When several cases are ready, one is picked at random. Cases may name the same channel
/// more than once.
pub struct Select<'a, R> {
    cases: Vec<Box<dyn Case<'a, R> + 'a>>,
    otherwise: Otherwise<'a, R>,
}

impl<'a, R> Default for Select<'a, R> {
    fn default() -> Self {
        Select::new()
    }
}

impl<'a, R> Select<'a, R> {
    /// A select with no cases yet; without [`timeout`](Self::timeout) or
    /// [`deadline`](Self::deadline) it waits as long as it takes.
    pub fn new() -> Self {
        Select {
            cases: Vec::new(),
            otherwise: Otherwise::Wait,
        }
    }

    /// A case that receives from `rx`.
    pub fn recv<T: 'a>(
        mut self,
        rx: &'a Receiver<T>,
        f: impl FnOnce(Result<T, RecvError>) -> R + 'a,
    ) -> Self {
        self.cases.push(Box::new(RecvCase {
            chan: rx.chan(),
            slot: None,
            node: None,
            done_here: None,
            f,
        }));
        self
    }

    /// A case that sends `value` on `tx`. If another case completes, the value is dropped with
    /// the select.
    pub fn send<T: 'a>(
        mut self,
        tx: &'a Sender<T>,
        value: T,
        f: impl FnOnce(Result<(), SendError<T>>) -> R + 'a,
    ) -> Self {
        self.cases.push(Box::new(SendCase {
            chan: tx.chan(),
            slot: Some(value),
            node: None,
            done_here: None,
            f,
        }));
        self
    }

    /// Gives up after `d` and runs `f` instead (`Duration::ZERO`: only look, Go's `default`).
    pub fn timeout(self, d: Duration, f: impl FnOnce() -> R + 'a) -> Self {
        self.deadline(Instant::now() + d, f)
    }

    /// Gives up at `at` and runs `f` instead.
    pub fn deadline(mut self, at: Instant, f: impl FnOnce() -> R + 'a) -> Self {
        self.otherwise = Otherwise::Until(at, Box::new(f));
        self
    }

    /// Waits for the first case (or the timeout) and returns what its closure returns.
    ///
    /// # Panics
    /// With no case and no timeout (it would wait forever), and when it would block inside a
    /// `synchronize`/`queue` callback.
    pub fn wait(mut self) -> R {
        let deadline = match &self.otherwise {
            Otherwise::Wait => None,
            Otherwise::Until(at, _) => Some(*at),
        };
        assert!(
            !self.cases.is_empty() || deadline.is_some(),
            "uthread: Select::wait with no case and no timeout would wait forever"
        );
        let mut locks: Vec<&'a Spin> = self.cases.iter().map(|c| c.lock()).collect();
        locks.sort_by_key(|l| *l as *const Spin);
        locks.dedup_by_key(|l| *l as *const Spin);
        preempt::disable();
        lock_all(&locks);
        let n = self.cases.len();
        let start = if n > 1 { random_below(n) } else { 0 };
        for k in 0..n {
            let i = (start + k) % n;
            // SAFETY: every case's lock is held.
            if let Some(wake) = unsafe { self.cases[i].try_now() } {
                unlock_all(&locks);
                if let Some(w) = wake {
                    w.wake_raised();
                }
                preempt::enable();
                return self.cases.swap_remove(i).run();
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            unlock_all(&locks);
            preempt::enable();
            return self.timed_out();
        }
        let Some(who) = Who::current() else {
            unlock_all(&locks);
            preempt::enable();
            forbid_scheduler_block("select");
        };
        let party = Party::new(who, false);
        for (i, case) in self.cases.iter_mut().enumerate() {
            // SAFETY: locks held; `party` lives until after every node is unregistered below;
            // the cases are boxed, so their nodes do not move.
            unsafe { case.register(&party, i as u32) };
        }
        unlock_all(&locks);
        let word = party.park(deadline);
        lock_all(&locks);
        for case in self.cases.iter_mut() {
            // SAFETY: locks held.
            unsafe { case.unregister() };
        }
        unlock_all(&locks);
        preempt::enable();
        if word == TIMED_OUT {
            return self.timed_out();
        }
        self.cases.swap_remove((word & CASE) as usize).run()
    }

    fn timed_out(self) -> R {
        match self.otherwise {
            Otherwise::Until(_, f) => f(),
            Otherwise::Wait => unreachable!("uthread: a select without a deadline timed out"),
        }
    }
}

fn lock_all(locks: &[&Spin]) {
    locks.iter().for_each(|l| l.lock());
}

fn unlock_all(locks: &[&Spin]) {
    locks.iter().rev().for_each(|l| l.unlock());
}

/// A cheap per-OS-thread random index, so that a select whose cases are all ready does not
/// always favour the first.
fn random_below(n: usize) -> usize {
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            x = (s as *const Cell<u64> as u64) | 1;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        ((x >> 32) as usize) % n
    })
}
