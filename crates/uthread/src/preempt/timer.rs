//! The per-carrier preemption timer: a POSIX timer whose expirations arrive as
//! [`PREEMPT_SIGNAL`] at one OS thread, and the signal-mask repair a switch made inside the
//! signal handler needs. The handler itself is in `runtime/tick.rs`.

use crate::sys;
use std::time::Duration;

/// The signal used for preemption ticks. `SIGURG` is ignored by default, so a stray one (after
/// the handler has nothing to do) is harmless; Go's runtime made the same choice.
pub const PREEMPT_SIGNAL: libc::c_int = libc::SIGURG;

/// Unblocks the preemption signal for the OS thread (after a switch made inside the handler
/// resumed a thread that was not itself suspended in the handler).
pub(crate) fn unblock_signal() {
    // SAFETY: plain sigset manipulation on a local set; pthread_sigmask affects this thread only.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, PREEMPT_SIGNAL);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut());
    }
}

/// A POSIX timer whose expirations are delivered to one OS thread.
pub(crate) struct Timer {
    id: libc::timer_t,
    quantum: Duration,
}

impl Timer {
    /// Creates (disarmed) a timer targeting the calling OS thread.
    pub(crate) fn for_current_thread(quantum: Duration) -> std::io::Result<Timer> {
        let tid = sys::gettid();
        // SAFETY: zeroed sigevent is valid; we set the documented fields for SIGEV_THREAD_ID.
        let mut sev: libc::sigevent = unsafe { core::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = PREEMPT_SIGNAL;
        sev.sigev_notify_thread_id = tid;
        let mut id: libc::timer_t = core::ptr::null_mut();
        // SAFETY: valid pointers to a sigevent and an out-parameter.
        let r = unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Timer { id, quantum })
    }

    pub(crate) fn arm(&self, on: bool) {
        let q = if on {
            sys::timespec(self.quantum)
        } else {
            sys::timespec(Duration::ZERO)
        };
        let spec = libc::itimerspec {
            it_interval: q,
            it_value: q,
        };
        // SAFETY: `id` is a live timer we created; `spec` is valid.
        unsafe {
            libc::timer_settime(self.id, 0, &spec, core::ptr::null_mut());
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: `id` is a live timer we created; deleting it also disarms it.
        unsafe {
            libc::timer_delete(self.id);
        }
    }
}
