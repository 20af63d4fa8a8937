//! The preempt-disable count of the running green thread, the pending-preemption flag, and
//! everything built on them: [`PreemptGuard`], [`critical_section`], [`preempt_point`] and the
//! allocator wrapper [`PreemptSafeAlloc`].
//!
//! A leaf: the count is per OS thread and knows nothing of carriers. When the count returns to
//! zero with a preemption pending, the running thread must yield, and that yield lives in the
//! runtime above; it is reached through one function pointer the runtime registers
//! ([`on_pending`]). Why a non-zero count makes preemption safe is in `runtime/tick.rs`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{compiler_fence, AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

/// The per-OS-thread words a yield touches, in one thread-local. One, not three, because of
/// what the compiler may do with a loop of yields in the caller (`yield_now` is inlined there):
/// take each thread-local's address out of the loop, and with the switch clobbering all but
/// two registers, keep those addresses on the stack, reloading each after every switch
/// (a load that waits for the new stack pointer, then the load of the word itself). With one
/// block there is one address to reload.
struct Words {
    /// Preempt-disable depth of the running green thread (saved/restored per thread on
    /// switch). Atomic only so that the signal handler's accesses are not data races;
    /// same-thread Relaxed load/store compiles to plain moves.
    count: AtomicU32,
    /// A preemption was requested while the count was non-zero.
    pending: AtomicBool,
    /// The runtime's carrier on this OS thread (untyped: the carrier is a layer above; see
    /// `runtime::carrier::carrier_ptr`).
    carrier: Cell<*const ()>,
}

thread_local! {
    static WORDS: Words = const {
        Words {
            count: AtomicU32::new(0),
            pending: AtomicBool::new(false),
            carrier: Cell::new(core::ptr::null()),
        }
    };
}

/// The word the runtime keeps its carrier pointer in (null outside `block_on`).
#[inline(always)]
pub(crate) fn carrier_word() -> *const () {
    WORDS.with(|w| w.carrier.get())
}

/// Sets the carrier word (the runtime, on entering and leaving `block_on`).
#[inline(always)]
pub(crate) fn set_carrier_word(p: *const ()) {
    WORDS.with(|w| w.carrier.set(p));
}

/// Set by [`PreemptSafeAlloc`] the first time it is used.
static SAFE_ALLOC_INSTALLED: AtomicBool = AtomicBool::new(false);

#[inline(always)]
pub(crate) fn count() -> u32 {
    WORDS.with(|w| w.count.load(Ordering::Relaxed))
}

#[inline(always)]
pub(crate) fn set_count(v: u32) {
    WORDS.with(|w| w.count.store(v, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
}

#[inline(always)]
pub(crate) fn disable() {
    WORDS.with(|w| {
        w.count
            .store(w.count.load(Ordering::Relaxed) + 1, Ordering::Relaxed)
    });
    // Keep the compiler from moving protected accesses above the increment: the handler (on
    // this same OS thread) must see the count before it can see half-done runtime state.
    compiler_fence(Ordering::SeqCst);
}

/// Raises the count like [`disable`] and returns the value it had, for [`restore`]: a caller
/// that switches contexts in between (the yield) then sets its own count back with one store,
/// instead of the switch restoring it and a decrement following.
#[inline(always)]
pub(crate) fn raise() -> u32 {
    let v = count();
    WORDS.with(|w| w.count.store(v + 1, Ordering::Relaxed));
    compiler_fence(Ordering::SeqCst);
    v
}

/// Sets the count back to what [`raise`] returned, without taking a pending preemption (as
/// [`enable_no_yield`]).
#[inline(always)]
pub(crate) fn restore(v: u32) {
    compiler_fence(Ordering::SeqCst);
    WORDS.with(|w| w.count.store(v, Ordering::Relaxed));
}

/// Decrements without taking a pending preemption. Returns the new count.
#[inline(always)]
pub(crate) fn enable_no_yield() -> u32 {
    compiler_fence(Ordering::SeqCst);
    WORDS.with(|w| {
        let v = w.count.load(Ordering::Relaxed);
        debug_assert!(v > 0, "uthread: preempt count underflow");
        let v = v.wrapping_sub(1);
        w.count.store(v, Ordering::Relaxed);
        v
    })
}

#[inline(always)]
pub(crate) fn enable() {
    if enable_no_yield() == 0 && WORDS.with(|w| w.pending.load(Ordering::Relaxed)) {
        take_pending();
    }
}

/// Clears the flag; a load when it is clear already (the usual case), not a store. The store
/// is out of line so that the common case falls through: on every switch, a taken branch
/// costs more than the instructions it skips (see the README).
#[inline(always)]
pub(crate) fn clear_pending() {
    if WORDS.with(|w| w.pending.load(Ordering::Relaxed)) {
        clear_set_pending();
    }
}

#[cold]
#[inline(never)]
fn clear_set_pending() {
    WORDS.with(|w| w.pending.store(false, Ordering::Relaxed));
}

/// `set_count` out of line, for a switch that finds the count changed (rare: the count is
/// usually the one the runtime call raised on either side).
#[cold]
#[inline(never)]
pub(crate) fn set_count_cold(v: u32) {
    set_count(v);
}

/// Where a pending preemption is taken: the runtime's yield, which sits above this module.
/// Registered once by the runtime before any carrier runs ([`on_pending`]).
static TAKE_PENDING: OnceLock<fn()> = OnceLock::new();

/// Registers the function that takes a pending preemption (a yield of the running green
/// thread). The first registration wins; the runtime registers the same function every time.
pub(crate) fn on_pending(take: fn()) {
    TAKE_PENDING.get_or_init(|| take);
}

/// The one call from this leaf up into the runtime, through the registered function. Cold: a
/// preemption is pending only after a tick found the thread in a critical section, so the
/// indirection costs nothing on any hot path.
#[cold]
fn take_pending() {
    clear_pending();
    if let Some(take) = TAKE_PENDING.get() {
        take();
    }
}

/// Marks a preemption as pending (from the tick handler). Returns `false` if one already was.
#[inline(always)]
pub(crate) fn set_pending() -> bool {
    WORDS.with(|w| {
        if w.pending.load(Ordering::Relaxed) {
            false
        } else {
            w.pending.store(true, Ordering::Relaxed);
            true
        }
    })
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
    if WORDS.with(|w| w.pending.load(Ordering::Relaxed)) && count() == 0 {
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
