//! Preemption: the per-carrier timer signal, the preempt-disable count, safe points, critical
//! sections and the allocator wrapper that makes in-handler switching sound.
//!
//! # Safety model
//!
//! Each carrier (the OS thread inside `block_on`) owns a POSIX timer created with
//! `SIGEV_THREAD_ID`, so its signal (`SIGURG`) is delivered to that OS thread only, once per
//! quantum. The handler runs on the interrupted green thread's own stack (no `SA_ONSTACK`), so
//! the kernel's signal frame (saved registers, FPU state, signal mask) lives on that stack.
//!
//! The handler switches to another green thread **only** when all of these hold:
//! 1. the interrupted thread is `Mode::Preemptive` and has used its quantum;
//! 2. the preempt-disable count is zero: the thread is not inside the runtime, a
//!    [`critical_section`] / [`PreemptGuard`], or (with [`PreemptSafeAlloc`]) the allocator;
//! 3. [`PreemptSafeAlloc`] is the process's global allocator (observed via a flag it sets on
//!    first use). Without it the thread could be inside `malloc` holding the arena lock, and the
//!    next green thread on the same OS thread would deadlock on it;
//! 4. the OS thread is not unwinding a panic (`std::thread::panicking()` is per OS thread).
//!
//! Otherwise it sets a *pending* flag; the thread then yields at the next safe point: when the
//! count drops back to zero (end of a critical section or runtime call), at
//! [`preempt_point`], or at the next tick that finds the conditions met.
//!
//! Switching inside the handler is sound because the handler's frame and the kernel's
//! `sigreturn` frame stay on the preempted thread's stack, untouched, until that thread is
//! resumed; it then returns from the handler normally, on the same stack, and `sigreturn`
//! restores exactly the interrupted state. The handler itself only touches runtime state that
//! condition 2 guarantees nobody was modifying. `errno` is saved at handler entry and restored
//! at exit; each switch additionally saves and restores `errno` and the preempt count per
//! thread.
//!
//! The signal mask: while the handler runs, the kernel blocks `SIGURG` on the OS thread. A thread
//! resumed by returning from its own handler gets its mask back from `sigreturn`. A thread that
//! had been suspended cooperatively (or a new thread) would inherit the blocked mask, so the
//! runtime records "switched away inside the handler" per carrier and unblocks the signal with
//! one `pthread_sigmask` in that case only: cooperative yields never make a system call.

use crate::runtime::{self, Carrier};
use crate::thread::Mode;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, Ordering};
use std::sync::Once;
use std::time::Duration;

/// The signal used for preemption ticks. `SIGURG` is ignored by default, so a stray one (after
/// the handler has nothing to do) is harmless; Go's runtime made the same choice.
pub const PREEMPT_SIGNAL: libc::c_int = libc::SIGURG;

thread_local! {
    /// Preempt-disable depth of the running green thread (saved/restored per thread on switch).
    /// Atomic only so that the signal handler's accesses are not data races; same-thread
    /// Relaxed load/store compiles to plain moves.
    static COUNT: AtomicU32 = const { AtomicU32::new(0) };
    /// A preemption was requested while the count was non-zero.
    static PENDING: AtomicBool = const { AtomicBool::new(false) };
    /// Non-null while this OS thread is a carrier (inside `block_on`).
    pub(crate) static CARRIER: Cell<*const Carrier> = const { Cell::new(core::ptr::null()) };
}

/// Set by [`PreemptSafeAlloc`] the first time it is used.
static SAFE_ALLOC_INSTALLED: AtomicBool = AtomicBool::new(false);

#[inline(always)]
pub(crate) fn count() -> u32 {
    COUNT.with(|c| c.load(Ordering::Relaxed))
}

#[inline(always)]
pub(crate) fn set_count(v: u32) {
    COUNT.with(|c| c.store(v, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
}

#[inline(always)]
pub(crate) fn disable() {
    COUNT.with(|c| c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed));
    // Keep the compiler from moving protected accesses above the increment: the handler (on
    // this same OS thread) must see the count before it can see half-done runtime state.
    compiler_fence(Ordering::SeqCst);
}

/// Decrements without taking a pending preemption. Returns the new count.
#[inline(always)]
pub(crate) fn enable_no_yield() -> u32 {
    compiler_fence(Ordering::SeqCst);
    COUNT.with(|c| {
        let v = c.load(Ordering::Relaxed);
        debug_assert!(v > 0, "uthread: preempt count underflow");
        let v = v.wrapping_sub(1);
        c.store(v, Ordering::Relaxed);
        v
    })
}

#[inline(always)]
pub(crate) fn enable() {
    if enable_no_yield() == 0 && PENDING.with(|p| p.load(Ordering::Relaxed)) {
        take_pending();
    }
}

#[inline(always)]
pub(crate) fn clear_pending() {
    PENDING.with(|p| p.store(false, Ordering::Relaxed));
}

#[cold]
fn take_pending() {
    clear_pending();
    runtime::yield_for_preemption();
}

/// RAII preempt-disable: while one is alive, the running green thread is not preempted by the
/// timer (it can still yield or block explicitly). This is the Thread Manager's critical region:
/// it stops preemption of green threads only, not OS interrupts or other OS threads.
/// A preemption that falls due meanwhile is taken when the last guard is dropped.
pub struct PreemptGuard {
    _not_send: core::marker::PhantomData<*const ()>,
}

impl PreemptGuard {
    /// Disables preemption until the guard is dropped. Nests.
    #[inline]
    pub fn new() -> PreemptGuard {
        disable();
        PreemptGuard {
            _not_send: core::marker::PhantomData,
        }
    }
}

impl Default for PreemptGuard {
    fn default() -> Self {
        PreemptGuard::new()
    }
}

impl Drop for PreemptGuard {
    #[inline]
    fn drop(&mut self) {
        enable();
    }
}

/// Runs `f` with preemption disabled (see [`PreemptGuard`]). Use it around code that must not
/// be interleaved with other green threads of the same carrier: OS-thread-keyed locks
/// (`std::sync::Mutex`, stdout/stderr), thread-locals, C libraries that allocate.
pub fn critical_section<R>(f: impl FnOnce() -> R) -> R {
    let _g = PreemptGuard::new();
    f()
}

/// Safe point: if a preemption is pending for the running green thread, yield now. Cheap (one
/// thread-local load) when nothing is pending. Preemptive threads that run without
/// [`PreemptSafeAlloc`] are only preempted here and at runtime calls.
#[inline]
pub fn preempt_point() {
    if PENDING.with(|p| p.load(Ordering::Relaxed)) && count() == 0 {
        take_pending();
    }
}

/// `true` once [`PreemptSafeAlloc`] has served an allocation in this process, i.e. timer
/// preemption may switch threads inside the signal handler.
pub fn preempt_safe_alloc_installed() -> bool {
    SAFE_ALLOC_INSTALLED.load(Ordering::Relaxed)
}

/// A global-allocator wrapper that disables preemption around every allocator call, so a green
/// thread is never switched away while holding the allocator's lock.
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();
/// fn main() {}
/// ```
///
/// Cost: two thread-local stores per allocation. Allocations made directly by C code (for
/// example inside `getaddrinfo`) bypass it: wrap such calls in [`critical_section`].
pub struct PreemptSafeAlloc<A = System> {
    inner: A,
}

impl PreemptSafeAlloc<System> {
    /// Wraps the system allocator.
    pub const fn system() -> Self {
        PreemptSafeAlloc { inner: System }
    }
}

impl<A> PreemptSafeAlloc<A> {
    /// Wraps any allocator.
    pub const fn new(inner: A) -> Self {
        PreemptSafeAlloc { inner }
    }
}

#[inline(always)]
fn mark_installed() {
    if !SAFE_ALLOC_INSTALLED.load(Ordering::Relaxed) {
        SAFE_ALLOC_INSTALLED.store(true, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to the inner allocator unchanged; the count bookkeeping neither
// allocates nor unwinds. Pending preemptions are not taken here (no switch inside alloc): the
// next tick or safe point takes them.
unsafe impl<A: GlobalAlloc> GlobalAlloc for PreemptSafeAlloc<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        mark_installed();
        disable();
        // SAFETY: forwarded contract.
        let p = unsafe { self.inner.alloc(layout) };
        enable_no_yield();
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        disable();
        // SAFETY: forwarded contract.
        unsafe { self.inner.dealloc(ptr, layout) };
        enable_no_yield();
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        mark_installed();
        disable();
        // SAFETY: forwarded contract.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        enable_no_yield();
        p
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        disable();
        // SAFETY: forwarded contract.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        enable_no_yield();
        p
    }
}

// ---------------------------------------------------------------------------------------------
// Signal handler and timer
// ---------------------------------------------------------------------------------------------

pub(crate) fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction is a valid starting point; we fill handler, flags and an
        // empty mask. No SA_ONSTACK: the handler must run on the green thread's own stack.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_tick as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(PREEMPT_SIGNAL, &sa, core::ptr::null_mut());
        }
    });
}

extern "C" fn on_tick(_sig: libc::c_int, _info: *mut libc::siginfo_t, _uctx: *mut libc::c_void) {
    // SAFETY: __errno_location is async-signal-safe and returns this OS thread's errno.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: valid pointer for this thread (above).
    let saved_errno = unsafe { *errno };
    let c = CARRIER.with(|c| c.get());
    if !c.is_null() {
        // SAFETY: CARRIER is non-null only while this OS thread is inside `block_on`, which
        // keeps the carrier alive.
        unsafe { tick(&*c) };
    }
    // SAFETY: as above.
    unsafe { *errno = saved_errno };
}

/// # Safety
/// Called from the tick handler on the carrier's OS thread.
unsafe fn tick(c: &Carrier) {
    runtime::bump(&c.ticks);
    runtime::bump(&c.stats.timer_ticks);
    // SAFETY: we are the carrier's tick handler (caller).
    let Some((mode, started)) = (unsafe { runtime::current_sched_info(c) }) else {
        return; // scheduler context, or a non-green context: nothing to preempt
    };
    if mode != Mode::Preemptive {
        return;
    }
    let ticks = c.ticks.load(Ordering::Relaxed);
    if ticks.wrapping_sub(started) < 1 {
        return;
    }
    if count() != 0 || !preempt_safe_alloc_installed() || std::thread::panicking() {
        if !PENDING.with(|p| p.load(Ordering::Relaxed)) {
            PENDING.with(|p| p.store(true, Ordering::Relaxed));
            runtime::bump(&c.stats.deferred_preemptions);
        }
        return;
    }
    disable();
    // SAFETY: count was zero, so no runtime state is mid-update on this OS thread, the thread
    // is not in the allocator (wrapper installed), and not unwinding (checked above).
    unsafe { runtime::preempt_from_handler(c) };
    enable_no_yield();
}

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
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::c_int;
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
            crate::thread::timespec(self.quantum)
        } else {
            crate::thread::timespec(Duration::ZERO)
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
