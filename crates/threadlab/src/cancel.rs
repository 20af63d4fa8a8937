//! Interruption: SIGINT/SIGTERM set a flag that every measurement loop checks between batches.
//!
//! Nothing is torn down from the signal handler itself. The first signal asks the run to stop:
//! the current sample finishes (milliseconds), helper threads are joined, child processes are
//! killed and reaped by their guards, the results finished so far are written atomically, and the
//! process exits with 128 + the signal number. A second signal of the same kind terminates at once
//! (children still die: they carry PR_SET_PDEATHSIG).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

#[derive(Clone, Debug, Default)]
pub struct Cancel {
    signal: Arc<AtomicI32>,
}

impl Cancel {
    /// A token no signal will ever set (tests, probes).
    pub fn never() -> Cancel {
        Cancel::default()
    }

    /// Installs handlers for SIGINT and SIGTERM that set this token.
    pub fn install() -> Result<Cancel> {
        let cancel = Cancel::default();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // A second signal while the first is being honoured terminates immediately.
            let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, armed.clone())
                .map_err(|e| Error::Fail(format!("cannot install signal handler: {e}")))?;
            let token = cancel.signal.clone();
            // SAFETY: the closure only performs atomic stores, which are async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    token.store(sig, Ordering::SeqCst);
                    armed.store(true, Ordering::SeqCst);
                })
            }
            .map_err(|e| Error::Fail(format!("cannot install signal handler: {e}")))?;
        }
        Ok(cancel)
    }

    /// The signal that interrupted the run, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s),
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.signal().is_some()
    }

    /// Err(Cancelled) once a signal arrived; measurement loops call this between batches.
    pub fn check(&self) -> Result<()> {
        match self.signal() {
            None => Ok(()),
            Some(s) => Err(Error::Cancelled(s)),
        }
    }

    /// Used by tests to simulate an interruption.
    pub fn trigger(&self, sig: i32) {
        self.signal.store(sig, Ordering::SeqCst);
    }
}
