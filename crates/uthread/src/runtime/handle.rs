//! `Handle`: how other OS threads hand work to a runtime's owner context, through the
//! carrier's inbox.

use super::carrier::{carrier_ptr, Carrier, Remote};
use super::ops::synchronize;
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

/// Lets other OS threads hand work to a runtime's owner context. While any `Handle` exists the
/// runtime waits for remote work instead of reporting a deadlock when all its threads block.
pub struct Handle {
    carrier: Arc<Carrier>,
}

impl Handle {
    /// A new handle to `carrier`, counted so that the carrier waits for remote work instead
    /// of reporting a deadlock while any handle exists.
    pub(super) fn new(carrier: &Arc<Carrier>) -> Handle {
        carrier.handles.fetch_add(1, Ordering::SeqCst);
        Handle {
            carrier: Arc::clone(carrier),
        }
    }
}

impl Handle {
    /// The runtime's carrier (for `Pool`, which spawns on it from other OS threads).
    pub(crate) fn carrier(&self) -> &Arc<Carrier> {
        &self.carrier
    }
}

impl Clone for Handle {
    fn clone(&self) -> Self {
        Handle::new(&self.carrier)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.carrier.handles.fetch_sub(1, Ordering::SeqCst);
        // An idle carrier may now have to report a deadlock.
        self.carrier.notify();
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Handle")
    }
}

/// The runtime was dropped before it ran the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("uthread: the runtime was dropped before running the request")
    }
}

impl std::error::Error for Closed {}

impl Handle {
    /// Queues `f` to run on the runtime owner's context (during the current or next `block_on`).
    pub fn queue<F>(&self, f: F)
    where
        F: FnOnce() + Send + 'static,
    {
        self.carrier.push_remote(Remote::Call(Box::new(f)));
    }

    /// Runs `f` on the runtime owner's context and waits for the result. Called from one of
    /// the runtime's own green threads it behaves like [`synchronize`].
    pub fn synchronize<F, R>(&self, f: F) -> Result<R, Closed>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        if carrier_ptr() == Arc::as_ptr(&self.carrier) {
            return Ok(synchronize(f));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.carrier.push_remote(Remote::Call(Box::new(move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r);
        })));
        match rx.recv() {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(p)) => resume_unwind(p),
            Err(_) => Err(Closed),
        }
    }
}
