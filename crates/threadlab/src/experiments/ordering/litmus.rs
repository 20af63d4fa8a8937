//! The litmus tests themselves: the programs (MP, SB, LB, IRIW) under each ordering, what the
//! memory model and this CPU allow of them, and one run of a test: its threads pinned, meeting
//! before every iteration, every outcome counted.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::placement::pin_current_thread;
use crate::measure::spawn::spawn_scoped;

/// The litmus tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Litmus {
    /// Message passing: the article's K/L. W: x=1; y=1 || R: r1=y; r2=x. Relaxed: r1=1, r2=0.
    Mp,
    /// Store buffering: x=1; r1=y || y=1; r2=x. Relaxed: r1=0, r2=0.
    Sb,
    /// Load buffering: r1=x; y=1 || r2=y; x=1. Relaxed: r1=1, r2=1.
    Lb,
    /// Independent reads of independent writes: x=1 || y=1 || r1=x; r2=y || r3=y; r4=x.
    /// Relaxed: r1=1, r2=0, r3=1, r4=0 (the readers disagree on the order of the two writes).
    Iriw,
}

pub const LITMUS_TESTS: &[Litmus] = &[Litmus::Mp, Litmus::Sb, Litmus::Lb, Litmus::Iriw];

impl Litmus {
    pub fn name(self) -> &'static str {
        match self {
            Litmus::Mp => "mp",
            Litmus::Sb => "sb",
            Litmus::Lb => "lb",
            Litmus::Iriw => "iriw",
        }
    }

    pub fn threads(self) -> usize {
        match self {
            Litmus::Iriw => 4,
            _ => 2,
        }
    }

    /// Registers the test reads (outcomes are 2^registers).
    pub fn registers(self) -> usize {
        match self {
            Litmus::Iriw => 4,
            _ => 2,
        }
    }

    /// The outcome index of the relaxed (non-sequentially-consistent) result. Bit k of an
    /// outcome is register r(k+1): 1 = it read this iteration's store, 0 = an older value.
    pub fn relaxed_outcome(self) -> usize {
        match self {
            Litmus::Mp => 0b01,     // r1 (flag L) = 1, r2 (data K) = 0: the stale K
            Litmus::Sb => 0b00,     // r1 = 0, r2 = 0
            Litmus::Lb => 0b11,     // r1 = 1, r2 = 1
            Litmus::Iriw => 0b0101, // r1 = 1, r2 = 0, r3 = 1, r4 = 0
        }
    }

    pub(super) fn program(self) -> &'static str {
        match self {
            Litmus::Mp => "T0: x=1 (K); y=1 (L) || T1: r1=y (L); r2=x (K)",
            Litmus::Sb => "T0: x=1; r1=y || T1: y=1; r2=x",
            Litmus::Lb => "T0: r1=x; y=1 || T1: r2=y; x=1",
            Litmus::Iriw => "T0: x=1 || T1: y=1 || T2: r1=x; r2=y || T3: r3=y; r4=x",
        }
    }

    /// The relaxed outcome in a few words (no parentheses: the table cuts notes there).
    pub(super) fn relaxed_short(self) -> &'static str {
        match self {
            Litmus::Mp => "stale K, r1=1 r2=0",
            Litmus::Sb => "r1=0 r2=0",
            Litmus::Lb => "r1=1 r2=1",
            Litmus::Iriw => "r1=1 r2=0 r3=1 r4=0",
        }
    }

    pub(super) fn relaxed_text(self) -> &'static str {
        match self {
            Litmus::Mp => "r1=1 r2=0 (saw L = 1 but a stale K)",
            Litmus::Sb => "r1=0 r2=0 (each thread missed the other's store)",
            Litmus::Lb => "r1=1 r2=1 (each load saw a store that came after it)",
            Litmus::Iriw => "r1=1 r2=0 r3=1 r4=0 (the readers saw the writes in opposite orders)",
        }
    }
}

/// The ordering used for every access of a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Relaxed loads and stores.
    Relaxed,
    /// Release stores, Acquire loads.
    AcqRel,
    /// SeqCst loads and stores.
    SeqCst,
    /// Relaxed loads and stores with a SeqCst fence between a thread's two accesses.
    Fence,
}

pub const ORDERS: &[Order] = &[Order::Relaxed, Order::AcqRel, Order::SeqCst, Order::Fence];

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Relaxed => "relaxed",
            Order::AcqRel => "acqrel",
            Order::SeqCst => "seqcst",
            Order::Fence => "fence",
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            Order::Relaxed => "Relaxed loads and stores",
            Order::AcqRel => "Release stores and Acquire loads",
            Order::SeqCst => "SeqCst loads and stores",
            Order::Fence => {
                "Relaxed accesses with fence(SeqCst) between each thread's two accesses"
            }
        }
    }
}

/// Whether the Rust (C++20) memory model forbids the test's relaxed outcome with this ordering.
pub fn forbids(test: Litmus, order: Order) -> bool {
    match order {
        Order::Relaxed => false,
        // Release/Acquire orders a message (MP) and a load before a store (LB), but not a store
        // before a later load (SB), and it does not make all threads agree on the order of
        // independent writes (IRIW).
        Order::AcqRel => matches!(test, Litmus::Mp | Litmus::Lb),
        Order::SeqCst | Order::Fence => true,
    }
}

/// This CPU architecture's hardware memory model, and which relaxed outcomes it allows.
pub fn hardware_model() -> (&'static str, &'static [Litmus]) {
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        (
            "x86-TSO (total store order: each CPU's stores leave through a FIFO store buffer, so a later load may pass an earlier store to another address; nothing else is reordered, and stores become visible to all CPUs at once)",
            &[Litmus::Sb],
        )
    } else if cfg!(target_arch = "aarch64") {
        (
            "ARMv8 (weakly ordered but other-multi-copy-atomic: loads and stores to different addresses may be reordered, stores become visible to all other CPUs at once)",
            &[Litmus::Mp, Litmus::Sb, Litmus::Lb],
        )
    } else if cfg!(target_arch = "riscv64") {
        (
            "RVWMO (RISC-V weak memory ordering, multi-copy atomic)",
            &[Litmus::Mp, Litmus::Sb, Litmus::Lb],
        )
    } else if cfg!(target_arch = "powerpc64") {
        (
            "POWER (weakly ordered and not multi-copy atomic)",
            &[Litmus::Mp, Litmus::Sb, Litmus::Lb, Litmus::Iriw],
        )
    } else {
        ("unknown to threadlab", &[])
    }
}

/// Counts of every outcome of one litmus test run.
#[derive(Debug, Clone)]
pub struct LitmusResult {
    pub test: Litmus,
    pub order: Order,
    pub iterations: u64,
    /// counts[outcome], outcome bits as in `Litmus::relaxed_outcome`.
    pub counts: Vec<u64>,
    pub elapsed: Duration,
}

impl LitmusResult {
    pub fn relaxed(&self) -> u64 {
        self.counts[self.test.relaxed_outcome()]
    }

    pub fn relaxed_pct(&self) -> f64 {
        100.0 * self.relaxed() as f64 / self.iterations.max(1) as f64
    }

    /// The relaxed outcome appeared although the ordering forbids it (a bug in the compiler, the
    /// CPU or this code).
    pub fn forbidden_seen(&self) -> bool {
        forbids(self.test, self.order) && self.relaxed() > 0
    }

    /// "r1r2=00: 123, 01: 4, ..." with registers in order r1, r2, ...
    pub fn outcomes_text(&self) -> String {
        let regs = self.test.registers();
        let names: String = (1..=regs).map(|k| format!("r{k}")).collect();
        let parts: Vec<String> = self
            .counts
            .iter()
            .enumerate()
            .map(|(o, n)| {
                let bits: String = (0..regs)
                    .map(|k| if o >> k & 1 == 1 { '1' } else { '0' })
                    .collect();
                format!("{bits}: {n}")
            })
            .collect();
        format!("{names} = {}", parts.join(", "))
    }
}

/// A value on its own cache line (128 bytes: adjacent-line prefetch pairs lines).
#[repr(align(128))]
#[derive(Default)]
struct CacheLine<T>(T);

/// Memory the threads of a test share.
#[derive(Default)]
struct Shared {
    x: CacheLine<AtomicU64>,
    y: CacheLine<AtomicU64>,
    /// Iteration each thread has reached (the per-iteration barrier), one line each.
    arrived: [CacheLine<AtomicU64>; 4],
    abort: AtomicBool,
}

/// One thread's part of one iteration: its accesses, returning its register bits in place.
type Body = fn(&Shared, u64) -> usize;

/// The orderings a test's accesses use, as constants so that each body compiles to plain
/// instructions with nothing between a thread's two accesses but the ordering's own fence.
trait Model {
    const STORE: Ordering;
    const LOAD: Ordering;
    const FENCE: bool;
}

struct RelaxedM;
struct AcqRelM;
struct SeqCstM;
struct FenceM;

impl Model for RelaxedM {
    const STORE: Ordering = Ordering::Relaxed;
    const LOAD: Ordering = Ordering::Relaxed;
    const FENCE: bool = false;
}
impl Model for AcqRelM {
    const STORE: Ordering = Ordering::Release;
    const LOAD: Ordering = Ordering::Acquire;
    const FENCE: bool = false;
}
impl Model for SeqCstM {
    const STORE: Ordering = Ordering::SeqCst;
    const LOAD: Ordering = Ordering::SeqCst;
    const FENCE: bool = false;
}
impl Model for FenceM {
    const STORE: Ordering = Ordering::Relaxed;
    const LOAD: Ordering = Ordering::Relaxed;
    const FENCE: bool = true;
}

#[inline(always)]
fn between<M: Model>() {
    if M::FENCE {
        fence(Ordering::SeqCst);
    }
}

#[inline(always)]
fn saw(v: u64, i: u64) -> usize {
    (v == i) as usize
}

// The bodies. Register bits: r1 = bit 0, r2 = bit 1, r3 = bit 2, r4 = bit 3.
fn mp_writer<M: Model>(s: &Shared, i: u64) -> usize {
    s.x.0.store(i, M::STORE); // K := 5
    between::<M>();
    s.y.0.store(i, M::STORE); // L := 1
    0
}
fn mp_reader<M: Model>(s: &Shared, i: u64) -> usize {
    let r1 = s.y.0.load(M::LOAD); // if L = 1 ...
    between::<M>();
    let r2 = s.x.0.load(M::LOAD); // ... then read K
    saw(r1, i) | saw(r2, i) << 1
}
fn sb_0<M: Model>(s: &Shared, i: u64) -> usize {
    s.x.0.store(i, M::STORE);
    between::<M>();
    saw(s.y.0.load(M::LOAD), i)
}
fn sb_1<M: Model>(s: &Shared, i: u64) -> usize {
    s.y.0.store(i, M::STORE);
    between::<M>();
    saw(s.x.0.load(M::LOAD), i) << 1
}
fn lb_0<M: Model>(s: &Shared, i: u64) -> usize {
    let r1 = s.x.0.load(M::LOAD);
    between::<M>();
    s.y.0.store(i, M::STORE);
    saw(r1, i)
}
fn lb_1<M: Model>(s: &Shared, i: u64) -> usize {
    let r2 = s.y.0.load(M::LOAD);
    between::<M>();
    s.x.0.store(i, M::STORE);
    saw(r2, i) << 1
}
fn iriw_wx<M: Model>(s: &Shared, i: u64) -> usize {
    s.x.0.store(i, M::STORE);
    0
}
fn iriw_wy<M: Model>(s: &Shared, i: u64) -> usize {
    s.y.0.store(i, M::STORE);
    0
}
fn iriw_r0<M: Model>(s: &Shared, i: u64) -> usize {
    let r1 = s.x.0.load(M::LOAD);
    between::<M>();
    let r2 = s.y.0.load(M::LOAD);
    saw(r1, i) | saw(r2, i) << 1
}
fn iriw_r1<M: Model>(s: &Shared, i: u64) -> usize {
    let r3 = s.y.0.load(M::LOAD);
    between::<M>();
    let r4 = s.x.0.load(M::LOAD);
    (saw(r3, i) << 2) | (saw(r4, i) << 3)
}

fn bodies_for<M: Model>(test: Litmus) -> Vec<Body> {
    match test {
        Litmus::Mp => vec![mp_writer::<M>, mp_reader::<M>],
        Litmus::Sb => vec![sb_0::<M>, sb_1::<M>],
        Litmus::Lb => vec![lb_0::<M>, lb_1::<M>],
        Litmus::Iriw => vec![iriw_wx::<M>, iriw_wy::<M>, iriw_r0::<M>, iriw_r1::<M>],
    }
}

fn bodies(test: Litmus, order: Order) -> Vec<Body> {
    match order {
        Order::Relaxed => bodies_for::<RelaxedM>(test),
        Order::AcqRel => bodies_for::<AcqRelM>(test),
        Order::SeqCst => bodies_for::<SeqCstM>(test),
        Order::Fence => bodies_for::<FenceM>(test),
    }
}

/// Spin rounds before a waiting thread starts yielding (so a run on fewer CPUs than threads,
/// as in tests on a 1-CPU machine, still makes progress).
const SPIN_ROUNDS_BEFORE_YIELD: u32 = 20_000;

/// Most units of arithmetic a thread runs between the barrier and its accesses.
pub const JITTER_UNITS: u64 = 64;

/// A pseudo-random 0..JITTER_UNITS units of dependent arithmetic (~0.5 ns each), different per
/// iteration and thread. Without it the threads settle into a lock-step in which one thread's
/// store has usually drained before the other's load, and SB's relaxed outcome becomes ~50x
/// rarer; with it the two threads' accesses meet at varied offsets, as in litmus7's runs.
#[inline(always)]
fn jitter(i: u64, me: usize) {
    let mut x = i
        .wrapping_add(me as u64 * 0x632b_e59b_d9b4_e019)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    let mut y = 0u64;
    for _ in 0..x % JITTER_UNITS {
        y = std::hint::black_box(y + 1);
    }
}

/// Runs one thread's iterations; returns its register bits, one byte per iteration.
fn thread_loop(
    s: &Shared,
    me: usize,
    threads: usize,
    body: Body,
    iterations: u64,
    cancel: &Cancel,
) -> Vec<u8> {
    let mut regs = Vec::with_capacity(iterations as usize);
    for i in 1..=iterations {
        // Thread 0 watches for Ctrl-C every ~10 ms of iterations; the others notice the abort
        // flag while they wait for it at the barrier.
        if me == 0 && i % 16_384 == 0 && cancel.is_cancelled() {
            s.abort.store(true, Ordering::Relaxed);
            return regs;
        }
        // Per-iteration barrier: publish our iteration, wait until every other thread has
        // published it too. Release/Acquire: iteration i-1's accesses happen before iteration i's.
        s.arrived[me].0.store(i, Ordering::Release);
        for other in 0..threads {
            if other == me {
                continue;
            }
            let mut rounds = 0u32;
            while s.arrived[other].0.load(Ordering::Acquire) < i {
                if rounds < SPIN_ROUNDS_BEFORE_YIELD {
                    rounds += 1;
                    std::hint::spin_loop();
                } else {
                    if s.abort.load(Ordering::Relaxed) {
                        return regs;
                    }
                    std::thread::yield_now();
                }
            }
        }
        jitter(i, me);
        regs.push(body(s, i) as u8);
    }
    regs
}

/// Runs `iterations` iterations of a litmus test. Thread k is pinned to cpus[k % len] (not
/// pinned when `cpus` is empty). Err(Cancelled) if `cancel` is set before or during the run.
pub fn run_litmus(
    test: Litmus,
    order: Order,
    iterations: u64,
    cpus: &[usize],
    cancel: &Cancel,
) -> Result<LitmusResult> {
    cancel.check()?;
    let threads = test.threads();
    let shared = Shared::default();
    let bodies = bodies(test, order);
    let t0 = Instant::now();
    let results: Vec<Result<Vec<u8>>> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(bodies.len());
        for (me, &body) in bodies.iter().enumerate() {
            let shared = &shared;
            let cpu = (!cpus.is_empty()).then(|| cpus[me % cpus.len()]);
            let spawned = spawn_scoped(scope, "a litmus thread", move || -> Result<Vec<u8>> {
                if let Some(cpu) = cpu {
                    if let Err(e) = pin_current_thread(cpu) {
                        shared.abort.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
                Ok(thread_loop(shared, me, threads, body, iterations, cancel))
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The threads already started wait for this one at every iteration: the
                    // abort flag releases them.
                    shared.abort.store(true, Ordering::Relaxed);
                    return vec![Err(e)];
                }
            }
        }
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    shared.abort.store(true, Ordering::Relaxed);
                    Err(Error::Fail("a litmus thread panicked".into()))
                })
            })
            .collect()
    });
    let elapsed = t0.elapsed();
    cancel.check()?;
    let regs: Vec<Vec<u8>> = results.into_iter().collect::<Result<_>>()?;
    if regs.iter().any(|r| r.len() as u64 != iterations) {
        return Err(Error::Fail("a litmus thread stopped early".into()));
    }
    let mut counts = vec![0u64; 1 << test.registers()];
    for i in 0..iterations as usize {
        let outcome = regs.iter().fold(0usize, |acc, r| acc | r[i] as usize);
        counts[outcome] += 1;
    }
    Ok(LitmusResult {
        test,
        order,
        iterations,
        counts,
        elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_counts_add_up() {
        let cancel = Cancel::never();
        for &test in &[Litmus::Mp, Litmus::Sb, Litmus::Lb] {
            let r = run_litmus(test, Order::Relaxed, 2_000, &[], &cancel).unwrap();
            assert_eq!(r.counts.len(), 4);
            assert_eq!(r.counts.iter().sum::<u64>(), 2_000);
        }
    }

    #[test]
    fn forbidden_table_matches_the_memory_model() {
        for &t in LITMUS_TESTS {
            assert!(!forbids(t, Order::Relaxed));
            assert!(forbids(t, Order::SeqCst));
            assert!(forbids(t, Order::Fence));
        }
        assert!(forbids(Litmus::Mp, Order::AcqRel));
        assert!(forbids(Litmus::Lb, Order::AcqRel));
        assert!(!forbids(Litmus::Sb, Order::AcqRel));
        assert!(!forbids(Litmus::Iriw, Order::AcqRel));
    }

    #[test]
    fn outcome_text_lists_every_outcome() {
        let r = LitmusResult {
            test: Litmus::Sb,
            order: Order::Relaxed,
            iterations: 10,
            counts: vec![1, 2, 3, 4],
            elapsed: Duration::ZERO,
        };
        assert_eq!(r.outcomes_text(), "r1r2 = 00: 1, 10: 2, 01: 3, 11: 4");
        assert_eq!(r.relaxed(), 1);
    }

    #[test]
    fn a_cancelled_run_does_not_start() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGINT);
        assert!(matches!(
            run_litmus(Litmus::Sb, Order::SeqCst, 1_000_000_000, &[], &cancel),
            Err(Error::Cancelled(_))
        ));
    }
}
