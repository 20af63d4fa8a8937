//! Test hooks that widen the windows of the cross-thread lifecycle protocol, so that tests can
//! force the interleavings they are about (`tests/races.rs`) instead of hoping for them. Off
//! unless a test sets a delay; each hook is one relaxed load on a path that is already slow
//! (a thread's end, a join across runtimes, publishing a result nobody waits for yet).

use std::sync::atomic::{AtomicU64, Ordering};
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
}

static DELAYS_NS: [AtomicU64; 4] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

/// Sets the delay at `point` for the whole process (zero turns it off).
pub fn set_delay(point: RacePoint, d: Duration) {
    DELAYS_NS[point as usize].store(d.as_nanos() as u64, Ordering::Relaxed);
}

/// Sleeps the OS thread for the delay set at `point`, if any. The carrier stops on purpose:
/// the other party of the race is another OS thread.
#[inline(always)]
pub(crate) fn pause(point: RacePoint) {
    let ns = DELAYS_NS[point as usize].load(Ordering::Relaxed);
    if ns != 0 {
        pause_slow(ns);
    }
}

#[cold]
#[inline(never)]
fn pause_slow(ns: u64) {
    std::thread::sleep(Duration::from_nanos(ns));
}
