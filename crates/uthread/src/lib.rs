//! # uthread — user-level threads for Linux x86-64
//!
//! Green threads multiplexed on the OS thread that calls [`Runtime::block_on`] (M:1):
//!
//! * context switch in assembly keeping rsp, rbx and rbp (r12-r15 are declared clobbered), no
//!   system call and no allocation per switch; the floating-point environment (MXCSR, x87
//!   control word) is switched only for threads that declare one ([`Builder::own_fp_env`]);
//! * stacks from `mmap`, lazily committed, with an optional `PROT_NONE` guard page, pooled for
//!   reuse; an overflow into the guard page is reported by thread name, then the process aborts;
//! * per-thread scheduling mode: [`Mode::Cooperative`] or [`Mode::Preemptive`] (a thread-directed
//!   POSIX timer interrupts preemptive threads after their quantum);
//! * BeOS-style priorities: real-time first, time-sharing lottery with weight `2^p`, idle last;
//! * [`Semaphore`] (FIFO hand-off), [`Mutex`], [`Condvar`], [`Throttle`], [`synchronize`] and
//!   [`queue`] (run code on the runtime owner's context), [`critical_section`];
//! * [`chan`]: bounded (rendezvous at capacity 0) and unbounded MPMC channels and
//!   [`chan::Select`], parking only the green thread, usable with OS threads too.
//!
//! ```no_run
//! let total = uthread::run(|| {
//!     let handles: Vec<_> = (0..4u64)
//!         .map(|i| uthread::spawn(move || { uthread::yield_now(); i * i }))
//!         .collect();
//!     handles.into_iter().map(|h| h.join().finished().unwrap()).sum::<u64>()
//! });
//! assert_eq!(total, 14);
//! ```
//!
//! See the README for the scheduling model, the preemption safety model and the limits.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
compile_error!(
    "uthread supports x86_64 Linux only for now; an aarch64 port adds src/arch/aarch64.rs with \
     the same items as src/arch/x86_64.rs"
);

// Modules in layers, lowest first; each uses only modules listed before it (and the runtime's
// files follow the order in `runtime/mod.rs`). `tests/layering.rs` checks the order.
mod arch;
mod race;
mod stack;
mod sys;

mod tcb;

mod sched;

mod preempt;

// Below the runtime: the reactor's kernel side (epoll) and the poll descriptors.
mod poll;

mod runtime;

mod sync;
mod thread;

pub mod chan;

pub mod io;
pub mod net;
mod pool;

pub use pool::{Pool, PoolBuilder, PoolHandle};
pub use preempt::{
    critical_section, preempt_point, preempt_safe_alloc_installed, PreemptGuard, PreemptSafeAlloc,
    PREEMPT_SIGNAL,
};
pub use runtime::{
    current_id, current_name, queue, run, sleep, stats, synchronize, yield_now, Closed, Handle,
    RunError, Runtime, RuntimeBuilder, Stats,
};
pub use stack::MIN_STACK_SIZE;
pub use sync::{Condvar, Mutex, MutexGuard, Semaphore, Throttle};
pub use tcb::{JoinOutcome, Mode, Priority};
pub use thread::{spawn, Builder, JoinHandle};

/// Test and benchmark hooks; not part of the stable API.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "race-hooks")]
    pub use crate::race::{set_delay as set_race_delay, RacePoint};

    /// Whether this build carries the test-only race-delay hooks (feature `race-hooks`), whose
    /// loads and branches sit in the spawn, join and wake paths: a program that measures
    /// uthread says so when it does.
    pub const RACE_HOOKS: bool = cfg!(feature = "race-hooks");

    /// Sends the preemption signal to the calling OS thread right now, so the handler runs
    /// synchronously (used to measure the cost of a signal-driven switch). The running thread
    /// is treated as having used its quantum.
    pub fn raise_preempt_signal() {
        crate::runtime::tick::force_quantum_expired();
        // SAFETY: tgkill to our own thread with our own signal; the handler is installed.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                libc::getpid(),
                crate::sys::gettid(),
                crate::preempt::PREEMPT_SIGNAL,
            );
        }
    }

    /// Floor of the context switch on this machine: two bare contexts ping-ponging with the
    /// assembly `switch` only (no scheduler). Returns ns per switch.
    pub fn raw_switch_ns(iters: u64) -> f64 {
        use crate::{arch, stack};
        use std::cell::Cell;
        struct Pair {
            main_sp: Cell<usize>,
            co_sp: Cell<usize>,
            iters: u64,
        }
        unsafe extern "C" fn co(arg: usize) -> ! {
            // SAFETY: `arg` is the `Pair` on the caller's stack, alive until we switch back last.
            let p = unsafe { &*(arg as *const Pair) };
            loop {
                // SAFETY: main_sp was saved by the switch that entered us.
                unsafe { arch::switch(p.co_sp.as_ptr(), p.main_sp.get(), 0) };
            }
        }
        let stack = match stack::Stack::new(64 * 1024, false) {
            Ok(s) => s,
            Err(_) => return f64::NAN,
        };
        let p = Pair {
            main_sp: Cell::new(0),
            co_sp: Cell::new(0),
            iters,
        };
        // SAFETY: fresh mapped stack; `co` never returns.
        p.co_sp
            .set(unsafe { arch::init_stack(stack.top(), co, &p as *const Pair as usize) });
        let t = std::time::Instant::now();
        for _ in 0..p.iters {
            // SAFETY: co_sp is a suspended context on `stack`, which outlives the loop.
            unsafe { arch::switch(p.main_sp.as_ptr(), p.co_sp.get(), 0) };
        }
        t.elapsed().as_nanos() as f64 / (2 * iters) as f64
    }
}
