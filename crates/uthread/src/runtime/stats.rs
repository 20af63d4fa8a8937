//! Counters of a runtime: the live ones the carrier bumps, and the `Stats` snapshot users read.

use std::sync::atomic::{AtomicU64, Ordering};

/// Increments a counter that only this OS thread writes (plain load + store: no locked
/// instruction, and safe against our own signal handler which restores what it changes).
#[inline(always)]
pub(crate) fn bump(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// The live counters of one carrier: atomics so that `Runtime::stats` may read them from any
/// OS thread, written only by the carrier's own.
#[derive(Default)]
pub(crate) struct StatCounters {
    pub(crate) context_switches: AtomicU64,
    pub(crate) preemptions: AtomicU64,
    pub(crate) deferred_preemptions: AtomicU64,
    pub(crate) pending_preemptions_taken: AtomicU64,
    pub(crate) timer_ticks: AtomicU64,
    pub(crate) threads_spawned: AtomicU64,
    pub(crate) threads_finished: AtomicU64,
    pub(crate) synchronize_calls: AtomicU64,
    pub(crate) queue_calls: AtomicU64,
    pub(crate) stacks_mapped: AtomicU64,
    pub(crate) io_waits: AtomicU64,
    pub(crate) netpolls: AtomicU64,
    pub(crate) netpoll_blocking: AtomicU64,
    pub(crate) io_events: AtomicU64,
}

/// Counters of one runtime, accumulated over all its `block_on` calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Green-to-green (or green-to-scheduler) context switches.
    pub context_switches: u64,
    /// Switches made from the timer signal handler (true preemptions).
    pub preemptions: u64,
    /// Timer ticks that found a preemptive thread over its quantum but could not switch (inside
    /// a critical section, the runtime, the allocator, or no `PreemptSafeAlloc`).
    pub deferred_preemptions: u64,
    /// Deferred preemptions later taken at a safe point.
    pub pending_preemptions_taken: u64,
    /// Timer signals received.
    pub timer_ticks: u64,
    /// Green threads spawned (including each `block_on`'s main thread).
    pub threads_spawned: u64,
    /// Green threads that finished (including panicked and cancelled ones).
    pub threads_finished: u64,
    /// `synchronize` requests served.
    pub synchronize_calls: u64,
    /// `queue` requests served.
    pub queue_calls: u64,
    /// Stacks freshly mapped (the others came from the pool).
    pub stacks_mapped: u64,
    /// Stacks currently in the pool.
    pub stacks_pooled: u64,
    /// Times a green thread parked on a descriptor (its system call found it not ready).
    pub io_waits: u64,
    /// Looks at the carrier's poller (`epoll_wait` calls), blocking or not.
    pub netpolls: u64,
    /// Of those, the ones where the carrier had nothing to run and blocked.
    pub netpoll_blocking: u64,
    /// Descriptor readiness events the poller reported.
    pub io_events: u64,
}

impl StatCounters {
    /// The counters as plain numbers; `stacks_pooled` is the carrier's to fill in.
    pub(crate) fn snapshot(&self) -> Stats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            context_switches: l(&self.context_switches),
            preemptions: l(&self.preemptions),
            deferred_preemptions: l(&self.deferred_preemptions),
            pending_preemptions_taken: l(&self.pending_preemptions_taken),
            timer_ticks: l(&self.timer_ticks),
            threads_spawned: l(&self.threads_spawned),
            threads_finished: l(&self.threads_finished),
            synchronize_calls: l(&self.synchronize_calls),
            queue_calls: l(&self.queue_calls),
            stacks_mapped: l(&self.stacks_mapped),
            stacks_pooled: 0,
            io_waits: l(&self.io_waits),
            netpolls: l(&self.netpolls),
            netpoll_blocking: l(&self.netpoll_blocking),
            io_events: l(&self.io_events),
        }
    }
}
