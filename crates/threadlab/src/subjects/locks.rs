//! Locks written for the lab: a ticket lock (FIFO spinning), an MCS queue lock (FIFO spinning,
//! each waiter on its own cache line) and a FIFO hand-off blocking lock that behaves like
//! Windows XP's critical sections (a released lock goes to the first waiter; nobody barges).
//!
//! Plus `BenchLock`, one small interface over these and the system's locks (glibc's pthread
//! mutex, std's Mutex, parking_lot's Mutex and FairMutex), so that `fairness` and the contended
//! `sync` rows drive every lock through the same loop.
//!
//! The spinning locks spin for a bounded number of rounds and then call `sched_yield` on every
//! further check: when threads outnumber CPUs the next waiter in FIFO order may be preempted, and a
//! waiter that only spun would burn its whole time slice before that waiter could run.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::Arc;

use crate::sys::{futex_wait, futex_wake};

/// Busy-wait rounds before a spinning waiter starts yielding its CPU on every check.
pub const SPIN_ROUNDS_BEFORE_YIELD: u32 = 200;

/// One round of waiting: a CPU spin hint for the first rounds, `sched_yield` after that.
#[inline]
fn spin_then_yield(rounds: &mut u32) {
    if *rounds < SPIN_ROUNDS_BEFORE_YIELD {
        *rounds += 1;
        std::hint::spin_loop();
    } else {
        // SAFETY: sched_yield has no preconditions.
        unsafe {
            libc::sched_yield();
        }
    }
}

/// Keeps a value on its own cache line (128 bytes: adjacent-line prefetch pairs lines).
#[repr(align(128))]
#[derive(Default)]
struct CacheLine<T>(T);

/// Runs a closure under a lock. One interface over every lock the lab compares.
pub trait BenchLock: Send + Sync + Default {
    /// The lock's name in metric ids (`fairness.<name>.t<T>...`).
    const NAME: &'static str;
    /// What the lock does on contention, for notes and conclusions.
    const POLICY: &'static str;
    /// Runs `f` with the lock held; unlocks after, also when `f` panics.
    fn with<R>(&self, f: impl FnOnce() -> R) -> R;
}

// ----------------------------------------------------------------------------------------------
// Ticket lock

/// A ticket lock: each arrival takes the next ticket and waits until it is served. Strict FIFO.
pub struct TicketLock<T: ?Sized> {
    next_ticket: CacheLine<AtomicU32>,
    now_serving: CacheLine<AtomicU32>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `data` to one thread at a time, so sharing the lock is
// sharing a T between threads one at a time, which needs T: Send (as std's Mutex).
unsafe impl<T: ?Sized + Send> Sync for TicketLock<T> {}
// SAFETY: moving the lock moves the T it owns.
unsafe impl<T: ?Sized + Send> Send for TicketLock<T> {}

impl<T> TicketLock<T> {
    pub const fn new(value: T) -> TicketLock<T> {
        TicketLock {
            next_ticket: CacheLine(AtomicU32::new(0)),
            now_serving: CacheLine(AtomicU32::new(0)),
            data: UnsafeCell::new(value),
        }
    }

    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: Default> Default for TicketLock<T> {
    fn default() -> Self {
        TicketLock::new(T::default())
    }
}

impl<T: ?Sized> TicketLock<T> {
    pub fn lock(&self) -> TicketGuard<'_, T> {
        let ticket = self.next_ticket.0.fetch_add(1, Ordering::Relaxed);
        let mut rounds = 0;
        // Acquire: pairs with the Release in unlock, so the previous holder's writes are visible.
        while self.now_serving.0.load(Ordering::Acquire) != ticket {
            spin_then_yield(&mut rounds);
        }
        TicketGuard { lock: self }
    }

    /// Takes the lock only if it is free and nobody is queued.
    pub fn try_lock(&self) -> Option<TicketGuard<'_, T>> {
        let serving = self.now_serving.0.load(Ordering::Acquire);
        self.next_ticket
            .0
            .compare_exchange(
                serving,
                serving.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .ok()
            .map(|_| TicketGuard { lock: self })
    }

    /// Threads holding or waiting for the lock (a snapshot).
    pub fn queued(&self) -> u32 {
        let next = self.next_ticket.0.load(Ordering::Relaxed);
        next.wrapping_sub(self.now_serving.0.load(Ordering::Relaxed))
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

pub struct TicketGuard<'a, T: ?Sized> {
    lock: &'a TicketLock<T>,
}

impl<T: ?Sized> Drop for TicketGuard<'_, T> {
    fn drop(&mut self) {
        // Only the holder writes now_serving, so a load + store is enough (no read-modify-write).
        let serving = self.lock.now_serving.0.load(Ordering::Relaxed);
        self.lock
            .now_serving
            .0
            .store(serving.wrapping_add(1), Ordering::Release);
    }
}

impl<T: ?Sized> Deref for TicketGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for TicketGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and &mut self makes
        // this the only reference through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl BenchLock for TicketLock<()> {
    const NAME: &'static str = "ticket";
    const POLICY: &'static str = "FIFO, spinning (then sched_yield)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.lock();
        f()
    }
}

// ----------------------------------------------------------------------------------------------
// MCS queue lock

/// One waiter's queue entry: it spins on its own `locked` flag, not on a shared word.
#[repr(align(128))]
struct McsNode {
    next: AtomicPtr<McsNode>,
    locked: AtomicBool,
}

/// The Mellor-Crummey & Scott queue lock: FIFO, and each waiter spins on its own cache line, so
/// a hand-off moves one line from the releaser to the next waiter instead of all waiters' lines.
///
/// The queue node lives on the stack of `with`, which is why the lock is used through a closure:
/// a guard that could be leaked (mem::forget) would leave a dangling node in the queue.
pub struct McsLock<T: ?Sized> {
    tail: CacheLine<AtomicPtr<McsNode>>,
    data: UnsafeCell<T>,
}

// SAFETY: as TicketLock: the lock gives one thread at a time access to the T.
unsafe impl<T: ?Sized + Send> Sync for McsLock<T> {}
// SAFETY: moving the lock moves the T it owns; no node is queued while the lock can be moved
// (nodes are queued only during `with`, which borrows the lock).
unsafe impl<T: ?Sized + Send> Send for McsLock<T> {}

impl<T> McsLock<T> {
    pub const fn new(value: T) -> McsLock<T> {
        McsLock {
            tail: CacheLine(AtomicPtr::new(ptr::null_mut())),
            data: UnsafeCell::new(value),
        }
    }

    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: Default> Default for McsLock<T> {
    fn default() -> Self {
        McsLock::new(T::default())
    }
}

/// Releases the MCS lock when dropped (also when the critical section panics).
struct McsRelease<'a, T: ?Sized> {
    lock: &'a McsLock<T>,
    node: &'a McsNode,
}

impl<T: ?Sized> Drop for McsRelease<'_, T> {
    fn drop(&mut self) {
        self.lock.release(self.node);
    }
}

impl<T: ?Sized> McsLock<T> {
    /// Runs `f` with exclusive access to the protected value.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let node = McsNode {
            next: AtomicPtr::new(ptr::null_mut()),
            locked: AtomicBool::new(true),
        };
        self.acquire(&node);
        // `node` cannot move or die before `_release` drops: `_release` borrows it.
        let _release = McsRelease {
            lock: self,
            node: &node,
        };
        // SAFETY: acquire returned, so this thread holds the lock until `_release` drops.
        f(unsafe { &mut *self.data.get() })
    }

    /// Whether some thread holds the lock (a snapshot).
    pub fn is_locked(&self) -> bool {
        !self.tail.0.load(Ordering::Relaxed).is_null()
    }

    fn acquire(&self, node: &McsNode) {
        let me = node as *const McsNode as *mut McsNode;
        // AcqRel: Acquire pairs with the previous tail's release (CAS to null in `release`);
        // Release publishes our initialised node to the thread that will link behind us.
        let prev = self.tail.0.swap(me, Ordering::AcqRel);
        if prev.is_null() {
            return;
        }
        // SAFETY: `prev` is the node of the thread just ahead of us. It cannot have left `with`:
        // its release finds the tail no longer pointing at its node (it points at ours), so it
        // waits until we store its `next` below before it returns and its node goes away.
        unsafe {
            (*prev).next.store(me, Ordering::Release);
        }
        let mut rounds = 0;
        // Acquire: pairs with the predecessor's Release store of `false`: its critical section's
        // writes are visible to ours.
        while node.locked.load(Ordering::Acquire) {
            spin_then_yield(&mut rounds);
        }
    }

    fn release(&self, node: &McsNode) {
        let me = node as *const McsNode as *mut McsNode;
        let mut next = node.next.load(Ordering::Acquire);
        if next.is_null() {
            // No known successor: if we are still the tail, the lock becomes free.
            if self
                .tail
                .0
                .compare_exchange(me, ptr::null_mut(), Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // A successor swapped itself in but has not linked yet (it may be preempted there).
            let mut rounds = 0;
            loop {
                next = node.next.load(Ordering::Acquire);
                if !next.is_null() {
                    break;
                }
                spin_then_yield(&mut rounds);
            }
        }
        // SAFETY: `next` is the node of the waiter behind us, which spins in `acquire` until this
        // store and so is alive now; we do not touch it after the store (it may leave at once).
        unsafe {
            (*next).locked.store(false, Ordering::Release);
        }
    }
}

impl BenchLock for McsLock<()> {
    const NAME: &'static str = "mcs";
    const POLICY: &'static str =
        "FIFO queue, each waiter spinning on its own line (then sched_yield)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        McsLock::with(self, |_| f())
    }
}

// ----------------------------------------------------------------------------------------------
// FIFO hand-off blocking lock (Windows XP style)

/// A blocked waiter's wake-up word: 0 while waiting, 1 once the lock was handed to it.
#[derive(Default)]
struct Waiter {
    granted: AtomicU32,
}

thread_local! {
    /// Each thread's reusable wait entry (a thread waits for at most one lock at a time).
    static WAITER: Arc<Waiter> = Arc::new(Waiter::default());
}

#[derive(Default)]
struct HandoffState {
    held: bool,
    queue: VecDeque<Arc<Waiter>>,
}

/// A blocking lock with Windows XP's policy: a thread that finds the lock taken queues and
/// sleeps; unlock never frees the lock while someone waits but passes it straight to the first
/// waiter and wakes it. A running thread cannot barge in ahead of a sleeping one, so every
/// contended hand-off costs a wake-up, during which nobody runs the critical section.
pub struct FifoHandoffLock<T: ?Sized> {
    state: parking_lot::Mutex<HandoffState>,
    data: UnsafeCell<T>,
}

// SAFETY: as TicketLock: the lock gives one thread at a time access to the T.
unsafe impl<T: ?Sized + Send> Sync for FifoHandoffLock<T> {}
// SAFETY: moving the lock moves the T it owns.
unsafe impl<T: ?Sized + Send> Send for FifoHandoffLock<T> {}

impl<T> FifoHandoffLock<T> {
    pub fn new(value: T) -> FifoHandoffLock<T> {
        FifoHandoffLock {
            state: parking_lot::Mutex::new(HandoffState::default()),
            data: UnsafeCell::new(value),
        }
    }

    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: Default> Default for FifoHandoffLock<T> {
    fn default() -> Self {
        FifoHandoffLock::new(T::default())
    }
}

impl<T: ?Sized> FifoHandoffLock<T> {
    pub fn lock(&self) -> HandoffGuard<'_, T> {
        let mut st = self.state.lock();
        if !st.held {
            st.held = true;
            return HandoffGuard { lock: self };
        }
        let me = WAITER
            .try_with(Arc::clone)
            .unwrap_or_else(|_| Arc::new(Waiter::default()));
        // Reset under the state lock: only a waiter that is queued can be granted the lock.
        me.granted.store(0, Ordering::Relaxed);
        st.queue.push_back(Arc::clone(&me));
        drop(st);
        // Acquire: pairs with the Release in unlock, so the previous holder's writes are visible.
        while me.granted.load(Ordering::Acquire) == 0 {
            futex_wait(&me.granted, 0, false);
        }
        HandoffGuard { lock: self }
    }

    /// Threads waiting (not counting the holder), a snapshot.
    pub fn waiting(&self) -> usize {
        self.state.lock().queue.len()
    }

    fn unlock(&self) {
        let mut st = self.state.lock();
        match st.queue.pop_front() {
            Some(next) => {
                // Ownership passes to `next`: `held` stays true, nobody can take the lock between.
                next.granted.store(1, Ordering::Release);
                drop(st);
                futex_wake(&next.granted, 1, false);
            }
            None => st.held = false,
        }
    }
}

pub struct HandoffGuard<'a, T: ?Sized> {
    lock: &'a FifoHandoffLock<T>,
}

impl<T: ?Sized> Drop for HandoffGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

impl<T: ?Sized> Deref for HandoffGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for HandoffGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and &mut self makes
        // this the only reference through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl BenchLock for FifoHandoffLock<()> {
    const NAME: &'static str = "fifo_handoff";
    const POLICY: &'static str =
        "FIFO, blocking, direct hand-off to the first sleeper (Windows XP)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.lock();
        f()
    }
}

// ----------------------------------------------------------------------------------------------
// The system's locks behind BenchLock

/// glibc's default pthread mutex (barging: a releaser clears the lock word and wakes one waiter;
/// whoever reaches the word first, often the releaser itself, takes it).
pub struct PthreadMutex {
    // Boxed: a pthread mutex must not move once it has been used.
    m: Box<UnsafeCell<libc::pthread_mutex_t>>,
}

// SAFETY: a pthread mutex is made to be shared between threads; the box gives it a fixed address.
unsafe impl Send for PthreadMutex {}
// SAFETY: as above: every operation on it goes through pthread calls that synchronise.
unsafe impl Sync for PthreadMutex {}

impl Default for PthreadMutex {
    fn default() -> Self {
        PthreadMutex {
            m: Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER)),
        }
    }
}

impl Drop for PthreadMutex {
    fn drop(&mut self) {
        // SAFETY: &mut self: no thread holds or waits for the mutex (every lock in `with` is
        // paired with an unlock), so destroying it is allowed.
        unsafe {
            libc::pthread_mutex_destroy(self.m.get());
        }
    }
}

/// Unlocks a pthread mutex when dropped (also when the critical section panics).
struct PthreadUnlock<'a>(&'a PthreadMutex);

impl Drop for PthreadUnlock<'_> {
    fn drop(&mut self) {
        // SAFETY: created right after this thread locked the mutex.
        unsafe {
            libc::pthread_mutex_unlock(self.0.m.get());
        }
    }
}

impl BenchLock for PthreadMutex {
    const NAME: &'static str = "pthread";
    const POLICY: &'static str = "barging (glibc: spin-free futex lock, waiters woken to race)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: the mutex is initialised and lives at a fixed address; a normal mutex locked
        // here is unlocked by the same thread when `_unlock` drops.
        let rc = unsafe { libc::pthread_mutex_lock(self.m.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed");
        let _unlock = PthreadUnlock(self);
        f()
    }
}

/// std::sync::Mutex (on Linux a futex lock that lets a running thread barge in).
#[derive(Default)]
pub struct StdMutex(std::sync::Mutex<()>);

impl BenchLock for StdMutex {
    const NAME: &'static str = "std";
    const POLICY: &'static str = "barging (futex, brief spin, waiters woken to race)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

/// parking_lot::Mutex: barging, with "eventual fairness" (a fair hand-off about every 0.5 ms).
#[derive(Default)]
pub struct ParkingLotMutex(parking_lot::Mutex<()>);

impl BenchLock for ParkingLotMutex {
    const NAME: &'static str = "parking_lot";
    const POLICY: &'static str =
        "barging with eventual fairness (a forced fair hand-off about every 0.5 ms)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.0.lock();
        f()
    }
}

/// parking_lot::FairMutex: every unlock hands the lock to the next parked waiter.
#[derive(Default)]
pub struct ParkingLotFairMutex(parking_lot::FairMutex<()>);

impl BenchLock for ParkingLotFairMutex {
    const NAME: &'static str = "parking_lot_fair";
    const POLICY: &'static str = "fair hand-off to the next parked waiter (after a brief spin)";
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.0.lock();
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// A counter with no synchronisation of its own: lost updates show a broken lock.
    struct Racy(UnsafeCell<u64>);
    // SAFETY: only touched under the lock being tested (that is what the tests check).
    unsafe impl Sync for Racy {}

    impl Racy {
        fn ptr(&self) -> *mut u64 {
            self.0.get()
        }
    }

    const THREADS: usize = 6;
    const ROUNDS: u64 = 20_000;

    /// Many threads increment a non-atomic counter with a read, a pause and a write-back: any
    /// overlap of two critical sections loses an increment.
    fn hammer<L: BenchLock>() {
        let lock = L::default();
        let counter = Racy(UnsafeCell::new(0));
        let inside = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for i in 0..ROUNDS {
                        lock.with(|| {
                            assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0, "two holders");
                            // SAFETY: the lock under test serialises this access.
                            unsafe {
                                let v = std::ptr::read_volatile(counter.ptr());
                                if i % 64 == 0 {
                                    std::thread::yield_now();
                                }
                                std::ptr::write_volatile(counter.ptr(), v + 1);
                            }
                            inside.fetch_sub(1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(
            counter.0.into_inner(),
            THREADS as u64 * ROUNDS,
            "{}",
            L::NAME
        );
    }

    #[test]
    fn ticket_lock_excludes() {
        hammer::<TicketLock<()>>();
    }

    #[test]
    fn mcs_lock_excludes() {
        hammer::<McsLock<()>>();
    }

    #[test]
    fn fifo_handoff_lock_excludes() {
        hammer::<FifoHandoffLock<()>>();
    }

    #[test]
    fn system_locks_exclude() {
        hammer::<PthreadMutex>();
        hammer::<StdMutex>();
        hammer::<ParkingLotMutex>();
        hammer::<ParkingLotFairMutex>();
    }

    #[test]
    fn data_carrying_locks_protect_their_value() {
        let t = TicketLock::new(0u64);
        let m = McsLock::new(0u64);
        let h = FifoHandoffLock::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..5_000 {
                        *t.lock() += 1;
                        m.with(|v| *v += 1);
                        *h.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(t.into_inner(), 20_000);
        assert_eq!(m.into_inner(), 20_000);
        assert_eq!(h.into_inner(), 20_000);
    }

    #[test]
    fn ticket_lock_try_lock_fails_while_held() {
        let t = TicketLock::new(());
        let g = t.lock();
        assert!(t.try_lock().is_none());
        drop(g);
        assert!(t.try_lock().is_some());
        assert_eq!(t.queued(), 0);
    }

    /// Waits (with a generous limit) until `cond` holds; panics if it never does.
    fn eventually(mut cond: impl FnMut() -> bool) {
        for _ in 0..20_000 {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        panic!("condition never became true");
    }

    #[test]
    fn ticket_lock_serves_in_arrival_order() {
        let lock = TicketLock::new(Vec::new());
        std::thread::scope(|s| {
            let held = lock.lock();
            for k in 0..5usize {
                let lock = &lock;
                s.spawn(move || lock.lock().push(k));
                // Thread k has its ticket before thread k + 1 starts.
                eventually(|| lock.queued() == k as u32 + 2);
            }
            drop(held);
        });
        assert_eq!(lock.into_inner(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn mcs_lock_serves_in_arrival_order() {
        let lock = McsLock::new(Vec::new());
        let arrived = AtomicUsize::new(0);
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            let (lock, arrived) = (&lock, &arrived);
            // The holder keeps the lock until told to release it.
            s.spawn(move || {
                lock.with(|_| {
                    arrived.store(1, Ordering::SeqCst);
                    release_rx.recv().unwrap();
                })
            });
            eventually(|| arrived.load(Ordering::SeqCst) == 1);
            for k in 0..5usize {
                let before = lock.tail.0.load(Ordering::SeqCst);
                s.spawn(move || lock.with(|v| v.push(k)));
                // Thread k has swapped itself into the tail before thread k + 1 starts.
                eventually(|| lock.tail.0.load(Ordering::SeqCst) != before);
            }
            release_tx.send(()).unwrap();
        });
        assert!(!lock.is_locked());
        assert_eq!(lock.into_inner(), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn fifo_handoff_lock_serves_in_arrival_order_without_barging() {
        let lock = FifoHandoffLock::new(Vec::new());
        std::thread::scope(|s| {
            let held = lock.lock();
            for k in 0..5usize {
                let lock = &lock;
                s.spawn(move || lock.lock().push(k));
                eventually(|| lock.waiting() == k + 1);
            }
            // The releaser tries to take the lock straight back: it must queue behind all five.
            drop(held);
            lock.lock().push(99);
        });
        assert_eq!(lock.into_inner(), vec![0, 1, 2, 3, 4, 99]);
    }

    #[test]
    fn a_panic_in_the_critical_section_releases_the_lock() {
        let m = McsLock::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            m.with(|_| panic!("inside"));
        }));
        assert!(r.is_err());
        assert!(!m.is_locked());
        m.with(|v| *v += 1);
        let p = PthreadMutex::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            p.with(|| panic!("inside"));
        }));
        assert!(r.is_err());
        p.with(|| ());
    }
}
