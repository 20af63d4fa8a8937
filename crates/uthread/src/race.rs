//! Test hooks that widen the windows of the cross-thread lifecycle protocol, so that tests can
//! force the interleavings they are about (`crates/uthread-races/tests/races.rs`) instead of hoping for them. They
//! exist only with the test-only `race-hooks` feature (the uthread-races crate turns it on); in
//! every other build `pause` is empty, so no measured path carries them.

#[cfg(feature = "race-hooks")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "race-hooks")]
use std::time::Duration;

/// Where a delay can be inserted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RacePoint {
    /// In `finish_zombie`, after reading the finished thread's `life` word and before
    /// publishing `DONE`: a joiner elsewhere may register meanwhile.
    FinishBeforePublish = 0,
    /// In `join` across runtimes, after registering as joiner and before checking `DONE`:
    /// the thread may finish and send the wake-up meanwhile.
    JoinAfterRegister = 1,
    /// At a thread's end, after checking whether its handle is gone and before storing the
    /// result: the handle may be dropped on another OS thread meanwhile.
    ResultBeforeStore = 2,
    /// In `resume`/`cancel`, after taking the thread out of SUSPENDED and before sending its
    /// wake-up: its carrier may decide to shut down meanwhile.
    WakeAfterLeaveSuspended = 3,
    /// In the reactor, after `epoll_wait` returned and before its events are handled: a
    /// descriptor may be released, recycled or shut down meanwhile on another OS thread.
    NetpollBeforeDispatch = 4,
    /// In a descriptor wait, after the thread looked at the shutdown flags and before it
    /// enters the waiter slot: a shutdown on another OS thread may find the slot empty.
    ParkBeforeSlot = 5,
    /// On a channel, after a party left its nodes in the queues and released the lock, before
    /// it parks: another OS thread may claim it and send its wake-up meanwhile.
    ChanBeforePark = 6,
    /// On a channel, after a claimer claimed a parked party and before it published the case
    /// done: the party's deadline may pass meanwhile.
    ChanClaimBeforeFinish = 7,
}

#[cfg(feature = "race-hooks")]
static DELAYS_NS: [AtomicU64; 8] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

/// Sets the delay at `point` for the whole process (zero turns it off).
#[cfg(feature = "race-hooks")]
pub fn set_delay(point: RacePoint, d: Duration) {
    DELAYS_NS[point as usize].store(d.as_nanos() as u64, Ordering::Relaxed);
}

/// Sleeps the OS thread for the delay set at `point`, if any. The carrier stops on purpose:
/// the other party of the race is another OS thread.
#[cfg(feature = "race-hooks")]
#[inline(always)]
pub(crate) fn pause(point: RacePoint) {
    let ns = DELAYS_NS[point as usize].load(Ordering::Relaxed);
    if ns != 0 {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

/// Without the `race-hooks` feature the hooks compile to nothing.
#[cfg(not(feature = "race-hooks"))]
#[inline(always)]
pub(crate) fn pause(_point: RacePoint) {}
