//! The runtime: one OS thread (the caller of `block_on`) multiplexing green threads (M:1).
//!
//! Green threads switch directly to one another (one `switch` per yield). The OS thread's own
//! stack runs the *scheduler context* (`owner`), entered only to idle, to serve
//! `synchronize`/`queue` requests and to shut down.
//!
//! The files form layers; each uses only those listed before it (`tests/layering.rs` checks):
//! `stats` (counters), `timers` (sleeps and deadlines, by due time), `carrier` (the state and
//! the `CARRIER` thread-local), `guard` (stack-overflow reports), `steal` (a pool's carriers
//! sharing unstarted threads), `reactor` (wake-ups: the inbox, timers, the poller), `dispatch`
//! (the switch and its bookkeeping), `tick` (the preemption signal handler), `ops` (yield,
//! block, sleep, wait on a descriptor, join, synchronize, queue), `owner` (the scheduler
//! context's loop, its idle wait in the poller, and shutdown), `handle` (`Handle`), `block_on`
//! (`Runtime`, `RuntimeBuilder`). The reactor's kernel side and the poll descriptors sit below
//! the runtime, in `crate::poll`; the waits users call sit above it, in `crate::io` and
//! `crate::net`.

pub(crate) mod block_on;
pub(crate) mod carrier;
pub(crate) mod dispatch;
pub(crate) mod guard;
pub(crate) mod handle;
pub(crate) mod ops;
pub(crate) mod owner;
pub(crate) mod reactor;
pub(crate) mod stats;
pub(crate) mod steal;
pub(crate) mod tick;
pub(crate) mod timers;

pub use block_on::{run, RunError, Runtime, RuntimeBuilder};
pub use handle::{Closed, Handle};
pub use ops::{current_id, current_name, queue, sleep, stats, synchronize, yield_now};
pub use stats::Stats;
