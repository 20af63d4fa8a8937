//! `ordering`: memory-ordering litmus tests on real hardware (Delphi TThread articles,
//! "Atomic Operations and Memory Ordering").
//!
//! The article: thread A writes K := 5 then L := 1; thread B reads L then K, and may see L = 1
//! with a stale K unless memory ordering is enforced. That is the message-passing test (MP).
//! Beside it: store buffering (SB), load buffering (LB) and, with four CPUs, independent reads of
//! independent writes (IRIW). Each runs millions of times with four choices of ordering, the
//! threads pinned to different CPUs, and every outcome is counted.
//!
//! Method (after litmus7's per-iteration synchronisation): the threads meet before every
//! iteration by each publishing its iteration number and spinning until the others have
//! published theirs; then each runs its two accesses at once, so the accesses race within a few
//! hundred nanoseconds. Iteration i stores the value i, so "saw the store" means "read i" and
//! any smaller value is the initial state of that iteration: no variable needs resetting.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::placement::{allowed_cpus, cpu_pair, pin_current_thread};
use crate::measure::spawn::spawn_scoped;
use crate::measure::stats::Summary;
use crate::measure::units::Unit;
use crate::results::{ids, Metric, Table};
use crate::seeds;

pub struct MemoryOrdering;

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

    fn program(self) -> &'static str {
        match self {
            Litmus::Mp => "T0: x=1 (K); y=1 (L) || T1: r1=y (L); r2=x (K)",
            Litmus::Sb => "T0: x=1; r1=y || T1: y=1; r2=x",
            Litmus::Lb => "T0: r1=x; y=1 || T1: r2=y; x=1",
            Litmus::Iriw => "T0: x=1 || T1: y=1 || T2: r1=x; r2=y || T3: r3=y; r4=x",
        }
    }

    /// The relaxed outcome in a few words (no parentheses: the table cuts notes there).
    fn relaxed_short(self) -> &'static str {
        match self {
            Litmus::Mp => "stale K, r1=1 r2=0",
            Litmus::Sb => "r1=0 r2=0",
            Litmus::Lb => "r1=1 r2=1",
            Litmus::Iriw => "r1=1 r2=0 r3=1 r4=0",
        }
    }

    fn relaxed_text(self) -> &'static str {
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

    fn describe(self) -> &'static str {
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

/// How many runs of how many iterations each (test, ordering) pair gets.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Runs wanted, and the fewest kept when the time budget runs out.
    reps: usize,
    min_reps: usize,
    iterations: u64,
    /// Past this, no further run starts once `min_reps` are in (SB and LB cost 4-10x more per
    /// iteration than MP, since both threads write a line the other reads, and vary with noise).
    /// Runs after the first are shortened, down to a tenth of `iterations`, so that `min_reps`
    /// fit in it: an iteration costs about four times more when the host runs the two vCPUs
    /// on different core complexes (a cache line's round trip 370-440 ns instead of 45-50),
    /// and the quick suite's ordering took 8.0-8.5 s then against 2.1 s otherwise; with the
    /// budget at 300 ms and the runs shortened, 4.2-4.6 s at about 250 ns an iteration.
    /// `--full`'s took 47.0 s at about 280 ns an iteration with 4 s a pair.
    budget: Duration,
}

impl Plan {
    /// Iterations for the next run of a pair, given the runs so far and the time they took:
    /// `iterations` while the remaining runs of `min_reps` fit in the budget at the rate seen,
    /// fewer (never under a tenth) when they would not.
    fn next_iterations(&self, done: &[LitmusResult], spent: Duration) -> u64 {
        let done_iters: u64 = done.iter().map(|r| r.iterations).sum();
        let left_runs = self.min_reps.saturating_sub(done.len());
        if done_iters == 0 || left_runs == 0 {
            return self.iterations;
        }
        let ns_per_iter = spent.as_nanos() as f64 / done_iters as f64;
        let left = self.budget.saturating_sub(spent).as_nanos() as f64;
        let fit = (left / left_runs as f64 / ns_per_iter.max(1e-3)) as u64;
        fit.clamp((self.iterations / 10).max(1), self.iterations)
    }
}

fn plan(mode: Mode) -> Plan {
    mode.pick(
        Plan {
            reps: 2,
            min_reps: 2,
            iterations: 20_000,
            budget: Duration::from_millis(100),
        },
        Plan {
            reps: 5,
            min_reps: 3,
            iterations: 500_000,
            budget: Duration::from_millis(300),
        },
        Plan {
            reps: 7,
            min_reps: 5,
            iterations: 2_000_000,
            budget: Duration::from_secs(2),
        },
    )
}

/// What the test and ordering say about the relaxed outcome, for notes.
fn verdict(test: Litmus, order: Order, hw_allows: bool) -> String {
    let lang = if forbids(test, order) {
        "the Rust/C++ memory model forbids it with this ordering, so any count above 0 is a bug"
    } else {
        "the Rust/C++ memory model allows it with this ordering (so does the compiler, which may reorder or merge these accesses)"
    };
    let hw = if hw_allows {
        "this CPU's hardware model allows it for plain accesses"
    } else {
        "this CPU's hardware model never shows it, whatever the ordering, as long as the compiler keeps the program order"
    };
    format!("{lang}; {hw}")
}

const INFO: Info = Info {
    name: "ordering",
    study: &seeds::DELPHI_2010S,
    measures: "relaxed outcomes of the MP (K/L), SB, LB and IRIW litmus tests under four orderings",
    rough_secs: [0.3, 4.0, 13.0],
};

impl Experiment for MemoryOrdering {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpus = allowed_cpus();
        let Some((a, b)) = cpu_pair() else {
            return Err(Error::Skip(
                "litmus tests need two CPUs: this process may use only one".into(),
            ));
        };
        let (model, hw_allowed) = hardware_model();
        let method = Method {
            plan: plan(ctx.mode),
            model,
            hw_allowed,
        };
        let mut lines = Vec::new();
        let mut violations = Vec::new();

        for &test in LITMUS_TESTS {
            let test_cpus: Vec<usize> = if test.threads() == 2 {
                vec![a, b]
            } else {
                cpus.iter().copied().take(test.threads()).collect()
            };
            let placement = if test_cpus.len() == 2 {
                format!("cross_cpu({a},{b})")
            } else {
                let l: Vec<String> = test_cpus.iter().map(|c| c.to_string()).collect();
                format!("cpus({})", l.join(","))
            };
            for &order in ORDERS {
                let id = ids::ordering::stem(test.name(), order.name());
                if test_cpus.len() < test.threads() {
                    let why = format!(
                        "{} needs {} CPUs, one per thread; this process may use {}",
                        test.name(),
                        test.threads(),
                        cpus.len()
                    );
                    out.skip(&format!("{id}.relaxed_outcomes"), why.clone());
                    out.skip(&ids::ordering::relaxed_rate(test.name(), order.name()), why);
                    continue;
                }
                ctx.step(&id)?;
                let runs = method.runs(ctx, test, order, &test_cpus)?;
                let total = sum_of(&runs);
                method.emit(out, test, order, &placement, &runs, &total)?;
                if total.forbidden_seen() {
                    violations.push(format!("{id} ({} times)", total.relaxed()));
                }
                lines.push((test, order, total));
            }
        }
        out.tables.push(outcomes_table(model, &lines));
        out.conclusion = Some(conclusion(model, &lines, &violations));
        Ok(())
    }
}

/// How every (test, ordering) pair is run and described: the plan and the hardware's model.
struct Method {
    plan: Plan,
    model: &'static str,
    hw_allowed: &'static [Litmus],
}

impl Method {
    /// The runs of one pair: up to `plan.reps`, no new run past the budget once `min_reps` are in.
    fn runs(
        &self,
        ctx: &Ctx,
        test: Litmus,
        order: Order,
        test_cpus: &[usize],
    ) -> Result<Vec<LitmusResult>> {
        let plan = &self.plan;
        let mut runs = Vec::with_capacity(plan.reps);
        let started = Instant::now();
        while runs.len() < plan.reps
            && (runs.len() < plan.min_reps || started.elapsed() < plan.budget)
        {
            ctx.cancel.check()?;
            let iterations = plan.next_iterations(&runs, started.elapsed());
            runs.push(run_litmus(test, order, iterations, test_cpus, ctx.cancel)?);
        }
        Ok(runs)
    }

    /// One pair's two metrics: the relaxed outcomes over every run, and their rate per run.
    fn emit(
        &self,
        out: &mut Outcome,
        test: Litmus,
        order: Order,
        placement: &str,
        runs: &[LitmusResult],
        total: &LitmusResult,
    ) -> Result<()> {
        let (plan, model) = (&self.plan, self.model);
        let (fewest, most) = runs.iter().fold((u64::MAX, 0), |(lo, hi), r| {
            (lo.min(r.iterations), hi.max(r.iterations))
        });
        let per_run = if fewest == most {
            format!("{most}")
        } else {
            format!("{fewest}-{most}")
        };
        let id = ids::ordering::stem(test.name(), order.name());
        let reps = runs.len();
        let hw = self.hw_allowed.contains(&test);
        let short = format!(
            "{}, {}",
            test.relaxed_short(),
            if forbids(test, order) {
                "forbidden by this ordering"
            } else {
                "allowed by this ordering"
            }
        );
        let note = format!(
            "{short}; program {} with {}. Relaxed outcome {}: {}. All outcomes over {} iterations ({reps} runs of {per_run}: up to {} runs of {}, no new run past {} ms once {} are in, later runs shortened to fit; 1 = read this iteration's store, 0 = an older value): {}. Method: threads pinned one per CPU; before every iteration each thread publishes its iteration number and spins until the others have (litmus7-style per-iteration sync), then runs 0-{} units of pseudo-random arithmetic so the accesses meet at varied offsets; {:.0} ns per iteration here; iteration i stores the value i, so no reset is needed. Hardware model: {model}.",
            test.program(),
            order.describe(),
            test.relaxed_text(),
            verdict(test, order, hw),
            total.iterations,
            plan.reps,
            plan.iterations,
            plan.budget.as_millis(),
            plan.min_reps,
            total.outcomes_text(),
            JITTER_UNITS - 1,
            total.elapsed.as_nanos() as f64 / total.iterations.max(1) as f64,
        );
        out.add(Metric::single(
            &format!("{id}.relaxed_outcomes"),
            Unit::Count,
            total.relaxed() as f64,
            placement,
            note.clone(),
        ));
        let rates: Vec<f64> = runs.iter().map(|r| r.relaxed_pct()).collect();
        let s = Summary::from_samples(&rates, most)
            .ok_or_else(|| Error::Fail("no finite rates".into()))?;
        out.add(Metric::from_summary(
            &ids::ordering::relaxed_rate(test.name(), order.name()),
            Unit::Percent,
            &s,
            placement,
            format!(
                "Share of iterations with {} over {reps} runs; {note}",
                test.relaxed_short()
            ),
        ));
        Ok(())
    }
}

/// Every run's counts added up (runs is never empty: at least `min_reps` are taken).
fn sum_of(runs: &[LitmusResult]) -> LitmusResult {
    let mut total = runs[0].clone();
    for r in &runs[1..] {
        total.iterations += r.iterations;
        total.elapsed += r.elapsed;
        for (t, n) in total.counts.iter_mut().zip(&r.counts) {
            *t += n;
        }
    }
    total
}

/// Every pair's relaxed outcomes, with whether the ordering allows them.
fn outcomes_table(model: &str, lines: &[(Litmus, Order, LitmusResult)]) -> Table {
    let mut table = Table::new(
        ids::ordering::OUTCOMES_TABLE,
        "Relaxed outcomes per test and ordering",
        &[
            "test",
            "ordering",
            "relaxed outcome",
            "seen",
            "iterations",
            "rate",
            "allowed?",
        ],
    );
    table.note = format!("hardware model: {model}");
    for (test, order, r) in lines {
        table.row(vec![
            test.name().to_string(),
            order.name().to_string(),
            test.relaxed_short().to_string(),
            r.relaxed().to_string(),
            r.iterations.to_string(),
            format!("{:.3}%", r.relaxed_pct()),
            if forbids(*test, *order) {
                "forbidden".to_string()
            } else {
                "allowed".to_string()
            },
        ]);
    }
    table
}

fn conclusion(
    model: &str,
    lines: &[(Litmus, Order, LitmusResult)],
    violations: &[String],
) -> String {
    let mut s = format!("This CPU's memory model: {model}. ");
    let seen: Vec<String> = lines
        .iter()
        .filter(|(_, _, r)| r.relaxed() > 0)
        .map(|(t, o, r)| {
            format!(
                "{} with {}: {} in {} ({:.3}%)",
                t.name(),
                o.name(),
                r.relaxed(),
                r.iterations,
                r.relaxed_pct()
            )
        })
        .collect();
    if seen.is_empty() {
        s.push_str("No relaxed outcome appeared in any test. ");
    } else {
        s.push_str(&format!("Relaxed outcomes seen: {}. ", seen.join("; ")));
    }
    if violations.is_empty() {
        s.push_str("None appeared where the ordering forbids it (SeqCst and fences forbid all four; Release/Acquire forbids MP and LB). ");
    } else {
        s.push_str(&format!(
            "FORBIDDEN OUTCOMES APPEARED: {}: a compiler, CPU or threadlab bug; please report it. ",
            violations.join(", ")
        ));
    }
    if let Some((_, _, mp)) = lines
        .iter()
        .find(|(t, o, _)| *t == Litmus::Mp && *o == Order::Relaxed)
    {
        s.push_str(&format!(
            "The study's claim (a thread that sees L = 1 may still read a stale K): with Relaxed accesses this machine showed the stale K {} times in {} tries. ",
            mp.relaxed(),
            mp.iterations
        ));
        if mp.relaxed() == 0 && cfg!(target_arch = "x86_64") {
            s.push_str("x86 hardware keeps stores in order and loads in order, so on this CPU the claim only bites if the compiler reorders the accesses, which Relaxed permits; on ARM the same code shows stale values. ");
        }
    }
    s.push_str("What to use: Release on the store of a flag and Acquire on its load whenever a flag publishes data (the article's K/L, a ready flag, a pointer to a new object): it costs nothing extra on x86 and little on ARM. SeqCst (or a SeqCst fence) only when two threads each write one variable and read the other's (Dekker-style, SB): there Release/Acquire is not enough, on x86 too. Relaxed only for counters and statistics that publish nothing. Or, as the article says, take a lock: it orders everything inside it.");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_runs_shrink_to_fit_the_budget_when_iterations_cost_more() {
        let plan = Plan {
            reps: 5,
            min_reps: 3,
            iterations: 500_000,
            budget: Duration::from_millis(300),
        };
        let run = |iterations: u64| LitmusResult {
            test: Litmus::Sb,
            order: Order::Relaxed,
            iterations,
            counts: vec![iterations, 0, 0, 0],
            elapsed: Duration::ZERO,
        };
        // The first run is always whole.
        assert_eq!(plan.next_iterations(&[], Duration::ZERO), 500_000);
        // 90 ns an iteration: two more whole runs fit in what is left.
        let near = [run(500_000)];
        assert_eq!(
            plan.next_iterations(&near, Duration::from_millis(45)),
            500_000
        );
        // 350 ns an iteration (the vCPUs far apart): 125 ms left for two runs, 178,571 each.
        let far = plan.next_iterations(&near, Duration::from_millis(175));
        assert!((170_000..=180_000).contains(&far), "{far}");
        // Over budget already: a tenth, never less.
        assert_eq!(plan.next_iterations(&near, Duration::from_secs(2)), 50_000);
        // Past min_reps, runs are whole again (the budget alone stops them).
        let three = [run(500_000), run(178_000), run(178_000)];
        assert_eq!(
            plan.next_iterations(&three, Duration::from_millis(300)),
            500_000
        );
    }

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
