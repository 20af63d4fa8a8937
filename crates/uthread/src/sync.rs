//! Blocking primitives for green threads: counting `Semaphore` (FIFO hand-off), `Mutex<T>`
//! (FIFO hand-off, no poisoning), `Condvar`, and `Throttle`.
//!
//! Waiting blocks only the calling green thread. Wake-ups hand the permit or the lock directly
//! to the first waiter, so a running thread cannot barge in ahead of it (the Windows XP
//! behaviour of the Delphi study, not Vista's). Releasing works from anywhere, including other
//! runtimes' threads and plain OS threads; waiting from a plain OS thread (outside any
//! runtime) falls back to polling with `std::thread::yield_now`.

use crate::preempt::count as preempt;
use crate::runtime::carrier::{context, Context};
use crate::runtime::ops::block_current;
use crate::runtime::reactor::wake;
use crate::sched::Fifo;
use crate::tcb::Thread;
use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A tiny test-and-test-and-set spin lock. Only held with preemption disabled and for a few
/// instructions, so on one carrier it is never contended; across OS threads it is brief.
pub(crate) struct RawLock(AtomicBool);

impl RawLock {
    pub(crate) const fn new() -> Self {
        RawLock(AtomicBool::new(false))
    }

    /// Runs `f` with the lock held and preemption disabled.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        preempt::disable();
        while self.0.swap(true, Ordering::Acquire) {
            while self.0.load(Ordering::Relaxed) {
                core::hint::spin_loop();
            }
        }
        let r = f();
        self.0.store(false, Ordering::Release);
        preempt::enable_no_yield();
        r
    }
}

/// A FIFO of blocked threads, protected by the owner's `RawLock`.
struct WaitQueue(UnsafeCell<Fifo>);

impl WaitQueue {
    const fn new() -> Self {
        WaitQueue(UnsafeCell::new(Fifo::new()))
    }

    /// # Safety
    /// Owner's lock held; `t` live and in no queue.
    unsafe fn push(&self, t: *mut Thread) {
        // SAFETY: exclusive under the lock (caller).
        unsafe { (*self.0.get()).push(t) }
    }

    /// # Safety
    /// Owner's lock held.
    unsafe fn pop(&self) -> *mut Thread {
        // SAFETY: exclusive under the lock; queued threads are blocked, hence live.
        unsafe { (*self.0.get()).pop() }
    }

    /// # Safety
    /// Owner's lock held.
    unsafe fn is_empty(&self) -> bool {
        // SAFETY: exclusive under the lock.
        unsafe { (*self.0.get()).is_empty() }
    }
}

fn forbid_scheduler_block(what: &str) -> ! {
    panic!(
        "uthread: {what} would block inside a synchronize()/queue() callback; callbacks run on \
         the scheduler, not in a green thread, so nothing could ever wake them"
    )
}

/// A counting semaphore with FIFO wake-up: `release` hands the permit to the longest waiter.
pub struct Semaphore {
    lock: RawLock,
    permits: UnsafeCell<usize>,
    waiters: WaitQueue,
}

// SAFETY: all interior state is accessed under `lock`; waiters are woken through
// `reactor::wake`, which routes to the waiter's own carrier.
unsafe impl Send for Semaphore {}
// SAFETY: as above.
unsafe impl Sync for Semaphore {}

impl Semaphore {
    /// A semaphore holding `permits` permits.
    pub const fn new(permits: usize) -> Semaphore {
        Semaphore {
            lock: RawLock::new(),
            permits: UnsafeCell::new(permits),
            waiters: WaitQueue::new(),
        }
    }

    /// Takes a permit if one is free and nobody is queued.
    pub fn try_acquire(&self) -> bool {
        self.lock.with(|| {
            // SAFETY: under `lock`.
            unsafe {
                if *self.permits.get() > 0 && self.waiters.is_empty() {
                    *self.permits.get() -= 1;
                    true
                } else {
                    false
                }
            }
        })
    }

    /// Takes a permit, blocking the green thread (FIFO) until one is handed over.
    pub fn acquire(&self) {
        match context() {
            Context::Green(cur) => {
                preempt::disable();
                let got = self.lock.with(|| {
                    // SAFETY: under `lock`; `cur` is the running (live) thread.
                    unsafe {
                        if *self.permits.get() > 0 && self.waiters.is_empty() {
                            *self.permits.get() -= 1;
                            true
                        } else {
                            self.waiters.push(cur);
                            false
                        }
                    }
                });
                if !got {
                    // SAFETY: queued above; `release` wakes us with the permit.
                    unsafe { block_current() };
                }
                preempt::enable();
            }
            Context::Scheduler => {
                if !self.try_acquire() {
                    forbid_scheduler_block("Semaphore::acquire");
                }
            }
            Context::Outside => {
                while !self.try_acquire() {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Returns a permit: to the first waiter if any, else to the pool.
    pub fn release(&self) {
        let w = self.lock.with(|| {
            // SAFETY: under `lock`.
            unsafe {
                let w = self.waiters.pop();
                if w.is_null() {
                    *self.permits.get() += 1;
                }
                w
            }
        });
        if !w.is_null() {
            wake(w);
        }
    }

    /// Free permits right now (racy by nature; for diagnostics).
    pub fn available(&self) -> usize {
        // SAFETY: under `lock`.
        self.lock.with(|| unsafe { *self.permits.get() })
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available", &self.available())
            .finish()
    }
}

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A mutual-exclusion lock for green threads with FIFO hand-off. Uncontended lock/unlock is
/// one compare-and-swap each. Not poisoned by panics.
pub struct Mutex<T: ?Sized> {
    state: AtomicU32,
    lock: RawLock,
    waiters: WaitQueue,
    data: UnsafeCell<T>,
}

// SAFETY: like std::sync::Mutex: access to `data` is serialised by the lock protocol.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Proof of holding a [`Mutex`]; unlocks on drop.
pub struct MutexGuard<'a, T: ?Sized> {
    m: &'a Mutex<T>,
    _not_send: core::marker::PhantomData<*const ()>,
}

// SAFETY: sharing a guard only shares `&T`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            state: AtomicU32::new(UNLOCKED),
            lock: RawLock::new(),
            waiters: WaitQueue::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex, returning the data.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks if free, without waiting.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| MutexGuard {
                m: self,
                _not_send: core::marker::PhantomData,
            })
    }

    /// Locks, blocking the green thread (FIFO) while another holds it.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        self.lock_slow();
        MutexGuard {
            m: self,
            _not_send: core::marker::PhantomData,
        }
    }

    #[cold]
    fn lock_slow(&self) {
        match context() {
            Context::Green(cur) => {
                preempt::disable();
                let queued = self.lock.with(|| loop {
                    match self.state.load(Ordering::Relaxed) {
                        UNLOCKED => {
                            if self
                                .state
                                .compare_exchange(
                                    UNLOCKED,
                                    LOCKED,
                                    Ordering::Acquire,
                                    Ordering::Relaxed,
                                )
                                .is_ok()
                            {
                                return false;
                            }
                        }
                        s => {
                            if s == CONTENDED
                                || self
                                    .state
                                    .compare_exchange(
                                        LOCKED,
                                        CONTENDED,
                                        Ordering::Relaxed,
                                        Ordering::Relaxed,
                                    )
                                    .is_ok()
                            {
                                // SAFETY: under `lock`; `cur` is live.
                                unsafe { self.waiters.push(cur) };
                                return true;
                            }
                        }
                    }
                });
                if queued {
                    // SAFETY: queued above; `unlock` hands us the lock and wakes us.
                    unsafe { block_current() };
                    std::sync::atomic::fence(Ordering::Acquire);
                }
                preempt::enable();
            }
            Context::Scheduler => forbid_scheduler_block("Mutex::lock"),
            Context::Outside => loop {
                if self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
                std::thread::yield_now();
            },
        }
    }

    /// Releases the lock, handing it to the first waiter if there is one.
    fn unlock(&self) {
        if self
            .state
            .compare_exchange(LOCKED, UNLOCKED, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        let w = self.lock.with(|| {
            // SAFETY: under `lock`.
            unsafe {
                let w = self.waiters.pop();
                if w.is_null() {
                    self.state.store(UNLOCKED, Ordering::Release);
                } else if self.waiters.is_empty() {
                    self.state.store(LOCKED, Ordering::Release);
                } else {
                    std::sync::atomic::fence(Ordering::Release);
                }
                w
            }
        });
        if !w.is_null() {
            wake(w);
        }
    }

    /// Mutable access without locking (the borrow proves exclusivity).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex")
            .field("locked", &(self.state.load(Ordering::Relaxed) != UNLOCKED))
            .finish()
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves we hold the lock.
        unsafe { &*self.m.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard proves we hold the lock exclusively.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.m.unlock();
    }
}

/// A condition variable for [`Mutex`]. Waiters are woken in FIFO order.
pub struct Condvar {
    lock: RawLock,
    waiters: WaitQueue,
}

// SAFETY: interior state only under `lock`.
unsafe impl Send for Condvar {}
// SAFETY: as above.
unsafe impl Sync for Condvar {}

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Condvar {
        Condvar {
            lock: RawLock::new(),
            waiters: WaitQueue::new(),
        }
    }

    /// Atomically unlocks `guard`'s mutex and waits for a notification, then relocks. As with
    /// any condition variable, re-check the predicate in a loop (or use [`wait_while`]).
    ///
    /// [`wait_while`]: Condvar::wait_while
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let m = guard.m;
        match context() {
            Context::Green(cur) => {
                preempt::disable();
                // SAFETY: under `lock`; `cur` is live.
                self.lock.with(|| unsafe { self.waiters.push(cur) });
                // Unlock only after queueing: a notify in between finds us (no lost wake-up).
                drop(guard);
                // SAFETY: queued above; notify wakes us.
                unsafe { block_current() };
                preempt::enable();
                m.lock()
            }
            Context::Scheduler => forbid_scheduler_block("Condvar::wait"),
            Context::Outside => {
                // No green thread to park: release, let others run, relock (a spurious wake-up).
                drop(guard);
                std::thread::yield_now();
                m.lock()
            }
        }
    }

    /// Waits until `cond` returns `false`.
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut cond: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        while cond(&mut guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// Wakes the longest waiter, if any.
    pub fn notify_one(&self) {
        // SAFETY: under `lock`.
        let w = self.lock.with(|| unsafe { self.waiters.pop() });
        if !w.is_null() {
            wake(w);
        }
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        loop {
            // SAFETY: under `lock`.
            let w = self.lock.with(|| unsafe { self.waiters.pop() });
            if w.is_null() {
                break;
            }
            wake(w);
        }
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Condvar")
    }
}

/// Admits at most `n` bodies at once (the Delphi study's semaphore throttle).
#[derive(Debug)]
pub struct Throttle {
    sem: Semaphore,
    limit: usize,
}

impl Throttle {
    /// At most `limit` bodies run at once (`limit` of 0 is treated as 1).
    pub const fn new(limit: usize) -> Throttle {
        let limit = if limit == 0 { 1 } else { limit };
        Throttle {
            sem: Semaphore::new(limit),
            limit,
        }
    }

    /// The configured limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Waits for a slot (FIFO), runs `f`, frees the slot (also if `f` panics).
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Slot<'a>(&'a Semaphore);
        impl Drop for Slot<'_> {
            fn drop(&mut self) {
                self.0.release();
            }
        }
        self.sem.acquire();
        let _slot = Slot(&self.sem);
        f()
    }
}
