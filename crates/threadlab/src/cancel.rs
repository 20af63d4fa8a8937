//! Interruption: SIGINT, SIGTERM and SIGHUP set a flag that every measurement loop checks.
//!
//! Nothing is torn down from the signal handler on the first signal. It only records the
//! signal: the current measurement notices within milliseconds (batches poll the flag, long
//! batches inside their loops), helper threads are joined, child processes are killed and
//! reaped by their guards, the results finished so far are written, and the process exits with
//! 128 + the signal number (130, 143, 129).
//!
//! A second signal ends the process at once, from the handler, with only async-signal-safe
//! calls: it SIGKILLs the child processes registered by `ChildGuard` (the Go toolchain, a
//! probe, the Go peer) with everything they started (`proctree`), unlinks the
//! temporary files registered by `TempFileGuard` (a results file being written), writes back
//! the machine settings registered by `RestoreFileGuard` (a sysfs or /proc/sys value doctor
//! changed), and `_exit`s with 128 + the signal. Forked measurement partners die with the lab anyway
//! (PR_SET_PDEATHSIG).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// The signals that interrupt a run.
pub const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

#[derive(Clone, Debug, Default)]
pub struct Cancel {
    signal: Arc<AtomicI32>,
}

/// The installed token's flag, for the handler (which cannot reach an `Arc`).
static INSTALLED: AtomicUsize = AtomicUsize::new(0);

impl Cancel {
    /// A token no signal will ever set (tests, probes).
    pub fn never() -> Cancel {
        Cancel::default()
    }

    /// Installs handlers for SIGINT, SIGTERM and SIGHUP that set this token.
    pub fn install() -> Result<Cancel> {
        let cancel = Cancel::default();
        // The Arc is kept alive for the rest of the process: the handler reads it.
        let ptr = Arc::into_raw(Arc::clone(&cancel.signal)) as usize;
        INSTALLED.store(ptr, Ordering::SeqCst);
        for sig in SIGNALS {
            // SAFETY: `on_signal` only performs atomic loads and stores, kill, unlink and
            // _exit, all async-signal-safe; sa_mask blocks the other interrupting signals while
            // it runs, so it never interrupts itself.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                for other in SIGNALS {
                    libc::sigaddset(&mut sa.sa_mask, other);
                }
                if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                    return Err(Error::Fail(format!(
                        "cannot install a signal handler: {}",
                        std::io::Error::last_os_error()
                    )));
                }
            }
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

    /// The flag itself, for loops that poll it many times per batch.
    pub fn flag(&self) -> &AtomicI32 {
        &self.signal
    }

    /// The flag, shared, for code that outlives a borrow (green threads need 'static).
    pub fn shared_flag(&self) -> Arc<AtomicI32> {
        Arc::clone(&self.signal)
    }

    /// Used by tests to simulate an interruption.
    pub fn trigger(&self, sig: i32) {
        self.signal.store(sig, Ordering::SeqCst);
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    let ptr = INSTALLED.load(Ordering::SeqCst) as *const AtomicI32;
    if ptr.is_null() {
        return;
    }
    // SAFETY: INSTALLED holds a pointer from Arc::into_raw that is never released, so the
    // AtomicI32 lives for the rest of the process.
    let flag = unsafe { &*ptr };
    if flag
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        return; // the first signal: the run winds down on its own
    }
    // A second signal: end now, leaving no child and no temporary file behind.
    for slot in CHILDREN.iter() {
        let pid = slot.load(Ordering::SeqCst);
        if pid > 0 {
            // The pid is our own unreaped child (its guard clears the slot before reaping
            // it), so it cannot name another process. kill_tree is async-signal-safe and ends
            // what the child started too (the Go toolchain's compiler and linker).
            crate::proctree::kill_tree(pid);
        }
    }
    for slot in RESTORES.iter() {
        if slot.ready.load(Ordering::SeqCst) {
            // SAFETY: a ready slot holds a NUL-terminated path and `len` value bytes written
            // before `ready` was set; open, write and close are async-signal-safe.
            unsafe {
                let fd = libc::open(
                    slot.path.as_ptr() as *const libc::c_char,
                    libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
                );
                if fd >= 0 {
                    libc::write(fd, slot.value.as_ptr() as *const libc::c_void, slot.len);
                    libc::close(fd);
                }
            }
        }
    }
    for slot in TEMPS.iter() {
        if slot.ready.load(Ordering::SeqCst) {
            // SAFETY: a ready slot holds a NUL-terminated path written before `ready` was set
            // and not changed until it is cleared; unlink is async-signal-safe.
            unsafe {
                libc::unlink(slot.path.as_ptr() as *const libc::c_char);
            }
        }
    }
    // SAFETY: _exit is async-signal-safe and ends the process without running anything else.
    unsafe { libc::_exit(128 + sig) }
}

/// Child processes the second signal must kill (pids; 0 = free).
static CHILDREN: [AtomicI32; 32] = [const { AtomicI32::new(0) }; 32];

/// Registers a child process for the second-signal cleanup while it lives; unregister (drop)
/// before reaping it, so the handler never kills a reused pid.
pub struct ChildGuard(Option<usize>);

impl ChildGuard {
    pub fn register(pid: i32) -> ChildGuard {
        for (i, slot) in CHILDREN.iter().enumerate() {
            if slot
                .compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return ChildGuard(Some(i));
            }
        }
        // Full: the first signal still ends this child through its owner.
        ChildGuard(None)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            CHILDREN[i].store(0, Ordering::SeqCst);
        }
    }
}

/// A temporary file path the second signal must remove.
struct TempSlot {
    taken: AtomicBool,
    ready: AtomicBool,
    path: [u8; 4096],
}

static TEMPS: [TempSlotCell; 4] = [const { TempSlotCell::new() }; 4];

/// A `TempSlot` behind an UnsafeCell-like wrapper with a const constructor.
struct TempSlotCell(std::cell::UnsafeCell<TempSlot>);

// SAFETY: see TempSlot: the taken/ready protocol orders every access to the path bytes.
unsafe impl Sync for TempSlotCell {}

impl TempSlotCell {
    const fn new() -> TempSlotCell {
        TempSlotCell(std::cell::UnsafeCell::new(TempSlot {
            taken: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            path: [0; 4096],
        }))
    }
}

impl std::ops::Deref for TempSlotCell {
    type Target = TempSlot;
    fn deref(&self) -> &TempSlot {
        // SAFETY: shared access to the atomics is always fine; the path bytes are only read
        // under the protocol described on TempSlot.
        unsafe { &*self.0.get() }
    }
}

/// Registers a temporary file for the second-signal cleanup while it may exist.
pub struct TempFileGuard(Option<usize>);

impl TempFileGuard {
    pub fn register(path: &Path) -> TempFileGuard {
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return TempFileGuard(None);
        };
        let bytes = c.as_bytes_with_nul();
        if bytes.len() > 4096 {
            return TempFileGuard(None);
        }
        for (i, slot) in TEMPS.iter().enumerate() {
            if slot
                .taken
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // SAFETY: this thread owns the slot (taken) and `ready` is false, so neither
                // the handler nor another thread reads or writes the bytes meanwhile.
                unsafe {
                    let p = (*TEMPS[i].0.get()).path.as_mut_ptr();
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
                }
                slot.ready.store(true, Ordering::SeqCst);
                return TempFileGuard(Some(i));
            }
        }
        TempFileGuard(None)
    }
}

impl Drop for TempFileGuard {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            TEMPS[i].ready.store(false, Ordering::SeqCst);
            TEMPS[i].taken.store(false, Ordering::SeqCst);
        }
    }
}

/// A file (a sysfs or /proc/sys setting) the second signal must write a value back into.
struct RestoreSlot {
    taken: AtomicBool,
    ready: AtomicBool,
    path: [u8; 512],
    value: [u8; 256],
    len: usize,
}

/// A `RestoreSlot` with a const constructor, shared with the handler.
struct RestoreSlotCell(std::cell::UnsafeCell<RestoreSlot>);

// SAFETY: as TempSlotCell: the taken/ready protocol orders every access to path, value, len.
unsafe impl Sync for RestoreSlotCell {}

impl RestoreSlotCell {
    const fn new() -> RestoreSlotCell {
        RestoreSlotCell(std::cell::UnsafeCell::new(RestoreSlot {
            taken: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            path: [0; 512],
            value: [0; 256],
            len: 0,
        }))
    }
}

impl std::ops::Deref for RestoreSlotCell {
    type Target = RestoreSlot;
    fn deref(&self) -> &RestoreSlot {
        // SAFETY: see TempSlotCell's Deref.
        unsafe { &*self.0.get() }
    }
}

static RESTORES: [RestoreSlotCell; 8] = [const { RestoreSlotCell::new() }; 8];

/// Registers a setting's original value for the second-signal cleanup: while the guard lives,
/// a second signal writes `value` into `path` before the process ends. Register before
/// changing the setting, drop after restoring it. Err when the path or value is too long or
/// every slot is taken (the caller must not change the setting then).
pub struct RestoreFileGuard(usize);

impl RestoreFileGuard {
    pub fn register(path: &Path, value: &[u8]) -> Result<RestoreFileGuard> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::Fail(format!("{} has a NUL byte", path.display())))?;
        let bytes = c.as_bytes_with_nul();
        if bytes.len() > 512 || value.len() > 256 {
            return Err(Error::Fail(format!(
                "{}: path or value too long to restore from a signal handler",
                path.display()
            )));
        }
        for (i, slot) in RESTORES.iter().enumerate() {
            if slot
                .taken
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                // SAFETY: this thread owns the slot (taken) and `ready` is false, so neither
                // the handler nor another thread reads or writes it meanwhile.
                unsafe {
                    let s = &mut *RESTORES[i].0.get();
                    s.path[..bytes.len()].copy_from_slice(bytes);
                    s.value[..value.len()].copy_from_slice(value);
                    s.len = value.len();
                }
                slot.ready.store(true, Ordering::SeqCst);
                return Ok(RestoreFileGuard(i));
            }
        }
        Err(Error::Fail(
            "too many machine settings changed at once to restore them from a signal handler"
                .into(),
        ))
    }
}

impl Drop for RestoreFileGuard {
    fn drop(&mut self) {
        RESTORES[self.0].ready.store(false, Ordering::SeqCst);
        RESTORES[self.0].taken.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triggered_token_stops_checks() {
        let c = Cancel::never();
        assert!(c.check().is_ok());
        c.trigger(libc::SIGHUP);
        assert!(matches!(c.check(), Err(Error::Cancelled(libc::SIGHUP))));
        assert_eq!(c.flag().load(Ordering::Relaxed), libc::SIGHUP);
    }

    #[test]
    fn guards_take_and_free_their_slots() {
        let n = || {
            CHILDREN
                .iter()
                .filter(|s| s.load(Ordering::SeqCst) != 0)
                .count()
        };
        let before = n();
        let g = ChildGuard::register(999_999);
        assert_eq!(n(), before + 1);
        drop(g);
        assert_eq!(n(), before);
        let r = RestoreFileGuard::register(Path::new("/tmp/setting"), b"0\n").unwrap();
        let i = r.0;
        assert!(RESTORES[i].ready.load(Ordering::SeqCst));
        assert_eq!(RESTORES[i].len, 2);
        drop(r);
        assert!(!RESTORES[i].taken.load(Ordering::SeqCst));
        assert!(RestoreFileGuard::register(Path::new("/tmp/x"), &[b'1'; 257]).is_err());
        let t = TempFileGuard::register(Path::new("/tmp/x"));
        let i = t.0.unwrap();
        assert!(TEMPS[i].ready.load(Ordering::SeqCst));
        drop(t);
        assert!(!TEMPS[i].taken.load(Ordering::SeqCst));
    }
}
