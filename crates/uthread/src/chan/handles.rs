//! [`Sender`] and [`Receiver`], the handles to one channel, and the receiving iterators.

use super::error::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
use super::shared::{Chan, RecvFail, SendFail, Wait};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The two handles of a new channel.
pub(crate) fn pair<T>(c: Chan<T>) -> (Sender<T>, Receiver<T>) {
    let c = Arc::new(c);
    (
        Sender {
            chan: Arc::clone(&c),
        },
        Receiver { chan: c },
    )
}

/// The queries both handles answer alike, about the channel they share.
macro_rules! buffer_queries {
    () => {
        /// Values buffered now.
        pub fn len(&self) -> usize {
            self.chan.len()
        }

        /// `true` when nothing is buffered now.
        pub fn is_empty(&self) -> bool {
            self.len() == 0
        }

        /// The buffer's capacity (`Some(0)` for a rendezvous), `None` when unbounded.
        pub fn capacity(&self) -> Option<usize> {
            self.chan.capacity()
        }

        pub(crate) fn chan(&self) -> &Chan<T> {
            &self.chan
        }
    };
}

/// The sending side; clone it for more senders. The channel disconnects for receivers when the
/// last clone is dropped.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving side; clone it for more receivers (each value goes to one of them). The
/// channel disconnects for senders when the last clone is dropped.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Sender<T> {
    /// Sends `value`, waiting while the buffer is full (for a rendezvous: until a receiver
    /// takes it). Fails, giving the value back, when every receiver is gone.
    // Inlined, as `recv` and the receiving iterators: the operation inside is, so that a
    // caller's loop pays for the switch's register saves once (see `Chan::send`).
    #[inline]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.chan
            .send(value, Wait::Until(None))
            .map_err(|e| match e {
                SendFail::Disconnected(v) | SendFail::Full(v) | SendFail::Timeout(v) => {
                    SendError(v)
                }
            })
    }

    /// Sends `value` only if that needs no waiting: into the buffer, or to a parked receiver.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.send(value, Wait::Never).map_err(|e| match e {
            SendFail::Disconnected(v) => TrySendError::Disconnected(v),
            SendFail::Full(v) | SendFail::Timeout(v) => TrySendError::Full(v),
        })
    }

    /// [`send`](Self::send), waiting at most `timeout`.
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.send_deadline(value, Instant::now() + timeout)
    }

    /// [`send`](Self::send), waiting at most until `deadline`.
    pub fn send_deadline(&self, value: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        self.chan
            .send(value, Wait::Until(Some(deadline)))
            .map_err(|e| match e {
                SendFail::Disconnected(v) => SendTimeoutError::Disconnected(v),
                SendFail::Full(v) | SendFail::Timeout(v) => SendTimeoutError::Timeout(v),
            })
    }

    buffer_queries!();
}

impl<T> Receiver<T> {
    /// Receives a value, waiting while the channel is empty. Fails once every sender is gone
    /// and nothing is buffered.
    #[inline]
    pub fn recv(&self) -> Result<T, RecvError> {
        self.chan.recv(Wait::Until(None)).map_err(|_| RecvError)
    }

    /// Receives a value only if one is there (buffered, or offered by a parked sender).
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.chan.recv(Wait::Never).map_err(|e| match e {
            RecvFail::Disconnected => TryRecvError::Disconnected,
            RecvFail::Empty | RecvFail::Timeout => TryRecvError::Empty,
        })
    }

    /// [`recv`](Self::recv), waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_deadline(Instant::now() + timeout)
    }

    /// [`recv`](Self::recv), waiting at most until `deadline`.
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.chan
            .recv(Wait::Until(Some(deadline)))
            .map_err(|e| match e {
                RecvFail::Disconnected => RecvTimeoutError::Disconnected,
                RecvFail::Empty | RecvFail::Timeout => RecvTimeoutError::Timeout,
            })
    }

    /// Values as they arrive, until every sender is gone.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// The values there now, without waiting.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    buffer_queries!();
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        Sender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.add_receiver();
        Receiver {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.chan.drop_receiver();
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

/// Blocking iterator of [`Receiver::iter`].
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

/// Non-blocking iterator of [`Receiver::try_iter`].
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// Owning blocking iterator (`for v in rx`).
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}
