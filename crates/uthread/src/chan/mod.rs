//! Channels: bounded (a capacity of 0 is a rendezvous), and unbounded, with any number of
//! senders and receivers (MPMC), and [`Select`] over several of them with a timeout.
//!
//! A send or receive that must wait parks only the calling green thread; the channel works the
//! same between green threads of one carrier, of different carriers (a [`Pool`](crate::Pool)'s,
//! or separate runtimes) and with plain OS threads on either end, which block their OS thread.
//!
//! Semantics follow `std::sync::mpsc` (whose error types are reused): when every [`Sender`] is
//! gone, receivers get what is still buffered, then [`RecvError`]; when every [`Receiver`] is
//! gone, a send fails at once with its value in [`SendError`] (senders parked at that moment
//! get theirs back too) and the buffered values are dropped. `try_`, `_timeout` and `_deadline`
//! forms never wait past their limit. Values are handed directly from a parked sender to a
//! receiver and back (no buffer slot needed), and waiters are served in FIFO order.
//!
//! ```
//! let total = uthread::run(|| {
//!     let (tx, rx) = uthread::chan::bounded(4);
//!     let producers: Vec<_> = (0..3u64)
//!         .map(|p| {
//!             let tx = tx.clone();
//!             uthread::spawn(move || (0..100).for_each(|i| tx.send(p * 1000 + i).unwrap()))
//!         })
//!         .collect();
//!     drop(tx); // the loop below ends when the producers' clones are gone
//!     let sum: u64 = rx.iter().sum();
//!     producers.into_iter().for_each(|h| drop(h.join()));
//!     sum
//! });
//! assert_eq!(total, 3 * 4950 + 100 * (1000 + 2000));
//! ```
//!
//! A green thread parked on a channel that only an OS thread or another runtime will serve is,
//! to its own runtime, blocked like one waiting on a [`Semaphore`](crate::Semaphore): keep a
//! [`Handle`](crate::Handle) alive meanwhile, or give the wait a deadline, so that the runtime
//! waits instead of reporting a deadlock (a [`Pool`](crate::Pool)'s carriers always wait).

mod error;
mod handles;
mod select;
mod shared;
mod wait;

pub use error::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
pub use handles::{IntoIter, Iter, Receiver, Sender, TryIter};
pub use select::Select;

use shared::Chan;

/// A channel whose buffer holds at most `cap` values; with `cap == 0` every send waits for a
/// receiver to take its value (a rendezvous, Go's unbuffered channel).
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    pair(Chan::new(cap))
}

/// A channel whose sends never wait (the buffer grows as needed).
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    pair(Chan::new(usize::MAX))
}

fn pair<T>(c: Chan<T>) -> (Sender<T>, Receiver<T>) {
    handles::pair(c)
}
