//! Run queue and scheduling policy, modelled on the BeOS R4.5 scheduler (Be Newsletter 4-45):
//!
//! * **real-time** threads always run first: the highest real-time priority wins, FIFO among
//!   equals, and a real-time thread keeps the carrier until it blocks or yields;
//! * **time-sharing** threads (priorities 1..=99) are picked by lottery: each thread holds
//!   weight `2^p`, so one unit of priority doubles the chance of being picked. Weights are
//!   normalised to the highest priority present (`2^(p - p_max)`) so nothing overflows;
//! * **idle** threads run only when nothing else is runnable.
//!
//! Queues are intrusive singly-linked FIFOs threaded through `Thread::next`, so queueing never
//! allocates (the signal handler may call into this module).

use crate::tcb::{Priority, Thread};
use core::ptr::null_mut;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A FIFO threaded through `Thread::next`. Invariant: a thread in no queue has a null `next`
/// (threads are created so, and every way out of a queue nulls it), so that pushing stores
/// nothing into the pushed thread and a yield between two threads (a queue of one) stores
/// nothing into either.
#[derive(Clone, Copy)]
pub(crate) struct Fifo {
    head: *mut Thread,
    tail: *mut Thread,
}

impl Fifo {
    pub(crate) const fn new() -> Self {
        Fifo {
            head: null_mut(),
            tail: null_mut(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// # Safety
    /// `t` must be a live thread that is in no queue (so its `next` is null).
    #[inline(always)]
    pub(crate) unsafe fn push(&mut self, t: *mut Thread) {
        // SAFETY: `t` is live and unlinked (caller); `tail` is live while linked.
        unsafe {
            debug_assert!((*t).next.get().is_null());
            if self.tail.is_null() {
                self.head = t;
            } else {
                (*self.tail).next.set(t);
            }
        }
        self.tail = t;
    }

    /// `push(t)` then `pop()` in one step, for a queue known to be non-empty (a yield with
    /// others waiting): the head is never null, so there is nothing to check but whether it was
    /// alone. Returns the old head.
    ///
    /// # Safety
    /// The queue is non-empty; `t` is live and in no queue; linked threads are live.
    #[inline(always)]
    pub(crate) unsafe fn rotate(&mut self, t: *mut Thread) -> *mut Thread {
        let head = self.head;
        // SAFETY: forwarded contract (head non-null and live, t live and unlinked, so its
        // `next` is null already).
        unsafe {
            debug_assert!((*t).next.get().is_null());
            let next = (*head).next.get();
            if next.is_null() {
                // `head` was alone: its `next` is null already.
                self.head = t;
            } else {
                (*head).next.set(null_mut());
                self.head = next;
                (*self.tail).next.set(t);
            }
        }
        self.tail = t;
        head
    }

    /// # Safety
    /// All linked threads must be live.
    #[inline(always)]
    pub(crate) unsafe fn pop(&mut self) -> *mut Thread {
        let t = self.head;
        if !t.is_null() {
            // SAFETY: linked threads are live (caller).
            unsafe {
                self.head = (*t).next.get();
                (*t).next.set(null_mut());
            }
            if self.head.is_null() {
                self.tail = null_mut();
            }
        }
        t
    }
}

const RT_LEVELS: usize = 128;
/// Time-sharing priorities are 1..=99; the arrays have 128 entries (like the bitmap) so that an
/// index taken from the bitmap needs no bounds check on the hot path.
const TS_LEVELS: usize = 128;

/// 128-bit occupancy bitmap kept as two `u64` words and always read and written at full word
/// width: a `u128` let the compiler narrow `|=` into a 32-bit store that the next 64-bit load
/// could not forward from, a ~10-cycle stall on every yield.
#[derive(Clone, Copy, Default)]
struct Bits([u64; 2]);

impl Bits {
    #[inline(always)]
    fn set(&mut self, p: usize) {
        let w = &mut self.0[(p >> 6) & 1];
        // SAFETY: `w` is a valid, aligned, exclusive reference. Volatile keeps the store 64 bits
        // wide (see the type docs).
        unsafe { core::ptr::write_volatile(w, *w | (1u64 << (p & 63))) };
    }
    #[inline(always)]
    fn clear(&mut self, p: usize) {
        let w = &mut self.0[(p >> 6) & 1];
        // SAFETY: as in `set`.
        unsafe { core::ptr::write_volatile(w, *w & !(1u64 << (p & 63))) };
    }
    #[inline(always)]
    fn any(&self) -> bool {
        (self.0[0] | self.0[1]) != 0
    }
    /// Highest set bit; the set must not be empty. Word arithmetic (not `u128`), which
    /// compiles to one `lzcnt` and a select.
    #[inline(always)]
    fn highest(&self) -> usize {
        let [lo, hi] = self.0;
        if hi != 0 {
            127 - hi.leading_zeros() as usize
        } else {
            63 - lo.leading_zeros() as usize
        }
    }
    /// The only set bit if exactly one is set, else `None`; the set must not be empty.
    #[inline(always)]
    fn single(&self) -> Option<usize> {
        let [lo, hi] = self.0;
        if hi == 0 {
            if lo & lo.wrapping_sub(1) == 0 {
                return Some(lo.trailing_zeros() as usize);
            }
        } else if lo == 0 && hi & hi.wrapping_sub(1) == 0 {
            return Some(64 + hi.trailing_zeros() as usize);
        }
        None
    }
    #[inline(always)]
    fn as_u128(&self) -> u128 {
        (self.0[1] as u128) << 64 | self.0[0] as u128
    }
}

/// `RunQueue::uniform` when the queued threads do not all share one time-sharing level.
const MIXED: u32 = u32::MAX;

/// Added to `RunQueue::uniform` while the queue's one thread is kept aside (`RunQueue::lone`):
/// above every key, so no thread's key matches it and every push and rotation beside that
/// thread takes the slow path, which puts it back in its FIFO.
const LONE: u32 = 0x1000;

/// The run-queue key of the scheduler pseudo-thread, which is never queued: above every
/// level, so a yield from the scheduler context never takes the FIFO fast path, and
/// `rotate` gives it back instead of queuing it. This spares every yield a look at whether
/// it comes from the scheduler context.
pub(crate) const NEVER_QUEUED: u32 = 0x300;

/// Added to the key of a time-sharing thread that keeps a floating-point environment of its
/// own (`Builder::own_fp_env`): it then never makes the queue uniform, so a yield that takes
/// the FIFO fast path knows, without looking at either thread, that neither declared one and
/// that the switch has no environment to hand over.
const OWN_FP_ENV: u32 = 0x400;

/// A thread's run-queue key: its time-sharing level (1..=99), or a value above every level
/// for the other classes and for threads with their own floating-point environment, which
/// never take the FIFO fast path.
pub(crate) fn level_key(p: Priority, own_fp_env: bool) -> u32 {
    match p {
        Priority::TimeSharing(p) if own_fp_env => OWN_FP_ENV | p as u32,
        Priority::TimeSharing(p) => p as u32,
        Priority::RealTime(p) => 0x100 + p as u32,
        Priority::Idle => 0x200,
    }
}

pub(crate) struct RunQueue {
    /// The time-sharing level of every queued thread when there is at least one and they all
    /// share one (then the next pick is plain FIFO and a yield is a rotation), else `MIXED`.
    /// Conservative: once mixed it stays so until the queue empties. While it is uniform, only
    /// that level's FIFO and `len` are kept: the bitmaps and `ts_count` (which only the mixed
    /// picks read) are brought up to date when the queue turns mixed, so the common push, pop
    /// and yield touch one FIFO and one counter.
    uniform: u32,
    /// That level's FIFO while the queue is uniform (its entry in `ts` is empty meanwhile, and
    /// takes it over when the queue turns mixed): at a fixed place, so the yield's rotation
    /// does not compute the level's entry. Empty while the queue is mixed.
    hot: Fifo,
    rt_bits: Bits,
    rt: [Fifo; RT_LEVELS],
    ts_bits: Bits,
    ts: [Fifo; TS_LEVELS],
    ts_count: [u32; TS_LEVELS],
    idle: Fifo,
    /// The queue's only thread, when a push found the queue empty (and the thread plain
    /// time-sharing): kept here rather than in its level's FIFO, with `len` 1 and `uniform` its
    /// level with `LONE` added. Invariant: non-null only then; a push of a second thread moves
    /// it into its FIFO first (`push_slow`), so the order is the FIFO's, and a yield beside it
    /// takes the slow rotation, which does that push. Why: a green thread
    /// handing a value to a parked one and then parking itself (a channel ping-pong) empties
    /// and refills the queue on every message, and this spares that push and pop their list
    /// work, and the block its call to the general pick ([`take_lone`](Self::take_lone)).
    lone: *mut Thread,
    len: usize,
    rng: u64,
}

impl RunQueue {
    /// No thread is queued.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn new(seed: u64) -> Self {
        RunQueue {
            uniform: MIXED,
            hot: Fifo::new(),
            rt_bits: Bits([0; 2]),
            rt: [Fifo::new(); RT_LEVELS],
            ts_bits: Bits([0; 2]),
            ts: [Fifo::new(); TS_LEVELS],
            ts_count: [0; TS_LEVELS],
            idle: Fifo::new(),
            lone: null_mut(),
            len: 0,
            rng: seed | 1,
        }
    }

    /// # Safety
    /// `t` must be a live thread of this carrier that is in no queue.
    #[inline(always)]
    pub(crate) unsafe fn push(&mut self, t: *mut Thread) {
        // SAFETY: forwarded contract.
        let key = unsafe { (*t).level_key };
        if self.uniform == key {
            // Uniform: the FIFO of its level and the length are all that is kept.
            self.len += 1;
            // SAFETY: forwarded contract; `key` is a time-sharing level (< 0x100).
            unsafe { self.hot.push(t) };
            return;
        }
        if self.len == 0 && key < 0x100 {
            // Alone: kept aside (see `lone`).
            self.uniform = key | LONE;
            self.len = 1;
            self.lone = t;
            return;
        }
        // SAFETY: forwarded contract.
        unsafe { self.push_slow(t) }
    }

    /// `push` beside a thread kept aside, or when the queue is, or turns, mixed.
    ///
    /// # Safety
    /// As [`push`](Self::push).
    #[inline(never)]
    unsafe fn push_slow(&mut self, t: *mut Thread) {
        let lone = self.lone;
        if !lone.is_null() {
            // A second thread: the first goes into its level's FIFO, ahead of it.
            self.lone = null_mut();
            self.uniform &= !LONE;
            // SAFETY: forwarded contract: `lone` is live and in no FIFO.
            unsafe { self.hot.push(lone) };
            // SAFETY: forwarded contract.
            if unsafe { (*t).level_key } == self.uniform {
                self.len += 1;
                // SAFETY: forwarded contract.
                unsafe { self.hot.push(t) };
                return;
            }
        }
        if self.uniform != MIXED {
            // Turning mixed: account for the uniform level's threads, which were not counted.
            let u = self.uniform as usize & (TS_LEVELS - 1);
            self.ts[u] = core::mem::replace(&mut self.hot, Fifo::new());
            self.ts_count[u] = self.len as u32;
            self.ts_bits.set(u);
            self.uniform = MIXED;
        }
        self.len += 1;
        // SAFETY: forwarded contract.
        unsafe {
            match (*t).priority {
                Priority::TimeSharing(p) => {
                    let p = p as usize & (TS_LEVELS - 1);
                    self.ts_bits.set(p);
                    self.ts_count[p] += 1;
                    self.ts[p].push(t);
                }
                Priority::RealTime(p) => {
                    let p = p as usize & (RT_LEVELS - 1);
                    self.rt_bits.set(p);
                    self.rt[p].push(t);
                }
                Priority::Idle => self.idle.push(t),
            }
        }
    }

    /// Removes and returns the next thread to run, or null when empty. Inlined: the common
    /// cases (empty, one time-sharing level) are a few instructions; real-time picks and the
    /// lottery are out of line.
    ///
    /// # Safety
    /// All queued threads must be live.
    #[inline(always)]
    pub(crate) unsafe fn pop(&mut self) -> *mut Thread {
        if self.len == 0 {
            return null_mut();
        }
        // SAFETY: queued threads are live (caller).
        unsafe {
            if self.uniform != MIXED {
                // Every queued thread is time-sharing at this level: FIFO, uncounted.
                self.len -= 1;
                let t = if self.lone.is_null() {
                    self.hot.pop()
                } else {
                    // Alone: `len` is 0 now, and `uniform` is set back below.
                    core::mem::replace(&mut self.lone, null_mut())
                };
                if self.len == 0 {
                    self.uniform = MIXED;
                }
                return t;
            }
            if self.rt_bits.any() {
                return self.pop_real_time();
            }
            if self.ts_bits.any() {
                let p = match self.ts_bits.single() {
                    Some(p) => p,
                    None => self.lottery(),
                };
                return self.pop_time_sharing(p);
            }
            self.len -= 1;
            self.idle.pop()
        }
    }

    /// # Safety
    /// Level `p` (< 128) is non-empty; queued threads are live.
    #[inline(always)]
    unsafe fn pop_time_sharing(&mut self, p: usize) -> *mut Thread {
        self.len -= 1;
        let p = p & (TS_LEVELS - 1);
        // SAFETY: forwarded contract.
        let t = unsafe { self.ts[p].pop() };
        self.ts_count[p] -= 1;
        if self.ts[p].is_empty() {
            self.ts_bits.clear(p);
        }
        t
    }

    /// # Safety
    /// Some real-time level is non-empty; queued threads are live.
    #[inline(never)]
    unsafe fn pop_real_time(&mut self) -> *mut Thread {
        self.len -= 1;
        let p = self.rt_bits.highest() & (RT_LEVELS - 1);
        // SAFETY: forwarded contract.
        let t = unsafe { self.rt[p].pop() };
        if self.rt[p].is_empty() {
            self.rt_bits.clear(p);
        }
        t
    }

    /// The yield fast path: `push(cur)` then `pop()`, done as one rotation when the answer
    /// cannot depend on a lottery: every queued thread shares `cur`'s time-sharing level (then
    /// the pick is plain FIFO). Returns `cur` itself when nothing else is runnable. Otherwise
    /// falls back to the general push and pop.
    ///
    /// # Safety
    /// `cur` must be a live thread of this carrier that is in no queue; all queued threads must
    /// be live.
    #[inline(always)]
    pub(crate) unsafe fn rotate(&mut self, cur: *mut Thread) -> *mut Thread {
        // SAFETY: forwarded contract.
        unsafe {
            if self.is_uniform_at((*cur).level_key) {
                return self.rotate_uniform(cur);
            }
            self.rotate_slow(cur)
        }
    }

    /// Whether every queued thread has run-queue key `key`, a time-sharing level without an
    /// own floating-point environment, and at least one is queued: then a yield from a thread
    /// with that key is [`rotate_uniform`](Self::rotate_uniform), and the thread it returns
    /// differs from the yielding one and, like it, declared no floating-point environment.
    #[inline(always)]
    pub(crate) fn is_uniform_at(&self, key: u32) -> bool {
        self.uniform == key
    }

    /// `rotate` when [`is_uniform_at`](Self::is_uniform_at)`(cur's key)`: same level only,
    /// so FIFO order is the whole policy (a thread kept aside makes the queue not uniform).
    ///
    /// # Safety
    /// As [`rotate`](Self::rotate), and `is_uniform_at((*cur).level_key)`.
    #[inline(always)]
    pub(crate) unsafe fn rotate_uniform(&mut self, cur: *mut Thread) -> *mut Thread {
        // SAFETY: forwarded contract.
        unsafe { self.hot.rotate(cur) }
    }

    /// Takes the queue's only thread when it is kept aside (see `lone`), else returns null and
    /// changes nothing: what `pop` would return in that case, without its other cases.
    #[inline(always)]
    pub(crate) fn take_lone(&mut self) -> *mut Thread {
        let t = self.lone;
        if !t.is_null() {
            self.lone = null_mut();
            self.len = 0;
            self.uniform = MIXED;
        }
        t
    }

    /// Cold, so that the caller's fast path runs straight on into its switch: on the yield
    /// path a taken branch costs more than the instructions it skips (see the README).
    ///
    /// # Safety
    /// As [`rotate`](Self::rotate).
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn rotate_slow(&mut self, cur: *mut Thread) -> *mut Thread {
        // SAFETY: forwarded contract.
        unsafe {
            if self.len == 0 || (*cur).level_key == NEVER_QUEUED {
                return cur;
            }
            self.push(cur);
            self.pop()
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: cheap, good enough for a lottery.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Picks a time-sharing level with probability proportional to `count(p) * 2^(p - p_max)`.
    #[cold]
    #[inline(never)]
    fn lottery(&mut self) -> usize {
        let ts_bits = self.ts_bits.as_u128();
        let pmax = 127 - ts_bits.leading_zeros() as i32;
        let mut total = 0.0f64;
        let mut bits = ts_bits;
        while bits != 0 {
            let p = bits.trailing_zeros() as i32;
            bits &= bits - 1;
            total += self.ts_count[p as usize] as f64 * 2f64.powi(p - pmax);
        }
        // 53 random bits -> uniform in [0, 1).
        let r = (self.next_random() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) * total;
        let mut acc = 0.0f64;
        let mut bits = ts_bits;
        let mut last = pmax as usize;
        while bits != 0 {
            let p = 127 - bits.leading_zeros() as i32;
            bits &= !(1u128 << p);
            acc += self.ts_count[p as usize] as f64 * 2f64.powi(p - pmax);
            last = p as usize;
            if r < acc {
                return last;
            }
        }
        last
    }
}

/// Threads that have not started, in FIFO order, shared between OS threads: a pool carrier's
/// own new threads, which its idle siblings may take (`runtime::steal`), and a pool's injector
/// (threads spawned from outside the pool). A spin lock held for a few instructions (a batch
/// taken: one move per thread); `len` may be read without it, to look before locking.
pub(crate) struct SharedQueue {
    lock: AtomicBool,
    queue: UnsafeCell<VecDeque<*mut Thread>>,
    len: AtomicUsize,
}

// SAFETY: `queue` is only touched under `lock`; the threads it holds have not started and are
// touched by nobody else until taken out.
unsafe impl Sync for SharedQueue {}
// SAFETY: as above.
unsafe impl Send for SharedQueue {}

impl SharedQueue {
    pub(crate) fn new() -> SharedQueue {
        SharedQueue {
            lock: AtomicBool::new(false),
            queue: UnsafeCell::new(VecDeque::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// How many threads wait here. SeqCst: a carrier going idle reads it after announcing so,
    /// and a pusher reads the idle announcement after storing it (`runtime::steal`).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::SeqCst)
    }

    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<*mut Thread>) -> R) -> R {
        while self.lock.swap(true, Ordering::Acquire) {
            while self.lock.load(Ordering::Relaxed) {
                core::hint::spin_loop();
            }
        }
        // SAFETY: the lock makes the access exclusive.
        let q = unsafe { &mut *self.queue.get() };
        let r = f(q);
        self.len.store(q.len(), Ordering::SeqCst);
        self.lock.store(false, Ordering::Release);
        r
    }

    /// Appends `t`. The caller's preempt count is raised (a green thread must not be switched
    /// out holding the lock).
    pub(crate) fn push(&self, t: *mut Thread) {
        self.with(|q| q.push_back(t));
    }

    /// Takes up to `max` threads from the front, passing each to `f` with the lock held (no
    /// allocation; `f` must not block). Count raised, as for `push`. Returns how many.
    pub(crate) fn take(&self, max: usize, f: impl FnMut(*mut Thread)) -> usize {
        self.with(|q| {
            let n = max.min(q.len());
            q.drain(..n).for_each(f);
            n
        })
    }

    /// Takes half of what is queued (rounded up), at most `max`, from the back (the newest
    /// first), as `take` does.
    pub(crate) fn take_newest_half(&self, max: usize, mut f: impl FnMut(*mut Thread)) -> usize {
        self.with(|q| {
            let n = q.len().div_ceil(2).min(max);
            for _ in 0..n {
                if let Some(t) = q.pop_back() {
                    f(t);
                }
            }
            n
        })
    }

    /// Takes half of what is queued (rounded up), at most `max`, as `take` does.
    pub(crate) fn take_half(&self, max: usize, f: impl FnMut(*mut Thread)) -> usize {
        self.with(|q| {
            let n = q.len().div_ceil(2).min(max);
            q.drain(..n).for_each(f);
            n
        })
    }
}

#[cfg(test)]
mod tests;
