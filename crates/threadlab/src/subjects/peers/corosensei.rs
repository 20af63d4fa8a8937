//! corosensei's bare stackful coroutine: the batches `create.corosensei` and
//! `switch.corosensei.yield` time. It is no runtime (no scheduler, no run queue, no preemption,
//! no join handle): its rows are the floor a runtime's switch and spawn can approach, and the
//! reference peer's ratios over it say how far uthread's scheduler stands above that floor.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use corosensei::stack::{DefaultStack, Stack, StackPointer, STACK_ALIGNMENT};
use corosensei::Coroutine;

use super::{Peer, PeerInfo, Running};
use crate::cancel::Cancel;
use crate::error::{Error, Result};

pub struct Corosensei;

const INFO: PeerInfo = PeerInfo {
    name: "corosensei",
    title: "corosensei (bare switch, not a runtime)",
    one: "a bare corosensei coroutine",
    many: "bare corosensei coroutines",
    floor: true,
    slow_start: false,
    own_process: false,
    spawn: "a bare corosensei coroutine created and run, no scheduler, no run queue, no join \
            handle, not a runtime but the floor a runtime's spawn can approach: \
            Coroutine::with_stack on the one 1 MiB DefaultStack (mapped once per started \
            runtime, that is per trial, its top lowered by a different multiple of 16 bytes \
            at each start so that the trials sample where its frames fall beside the caller's \
            within a page; its one guard page is all the guard handling), resumed until it \
            returns a value, its stack taken back with into_stack for the next; per op = batch \
            time / n; timed in the calling thread, nothing subtracted",
    spawn_unpinned: None,
    yields: "a bare corosensei stackful-coroutine switch, no scheduler, no run queue, no \
             preemption, not a runtime but the floor a runtime's switch can approach: the \
             caller resumes one coroutine (corosensei 0.3, a 1 MiB DefaultStack made once per \
             started runtime, that is per trial, its top lowered as create.corosensei's is) \
             that suspends in a loop; a resume and a suspend are two switches, counted as \
             switch.green.yield counts its yields, so per switch = batch time / (2 x \
             resumes); nothing subtracted",
    chan: None,
    balance: None,
};

impl Peer for Corosensei {
    fn info(&self) -> &'static PeerInfo {
        &INFO
    }

    fn start(&self, _cancel: &Cancel) -> Result<Box<dyn Running>> {
        Ok(Box::new(Bare::new()?))
    }
}

/// A started "runtime": the coroutine the yield batches resume, and the stack every
/// spawn-and-run coroutine runs on, one after another.
struct Bare {
    yielder: Coroutine<(), (), (), Coloured>,
    /// None only while a spawn-and-run coroutine holds it.
    spare: Option<Coloured>,
}

/// A `DefaultStack` whose top is lowered by `offset` bytes, a multiple of 16 below a page.
///
/// Why: the lab's rows run on the main thread, whose stack the kernel starts at a random
/// 16-byte offset within a page for every process, while a `DefaultStack`'s top is page aligned.
/// Where the caller's frames fall within a page relative to the coroutine's is then one draw per
/// process, kept by every trial of a run. Some draws are slow: `create.corosensei` read 23.9-24.1
/// ns in 3 of 92 quick runs against 16.4-18.4 in the rest, every trial of those runs alike, and a
/// standalone loop read 21-25 ns only where the caller's stack pointer had the coroutine stack
/// top's offset within a page, and there not in every process (4 KiB aliasing of the two stacks'
/// stores and loads, likely; this VM exposes no counters to confirm it). With a new offset at
/// every start (every trial) the draw is made per trial: a slow one is one trial among the run's,
/// its spread, not the run's figure. uthread colours its own stacks for the same reason
/// (`uthread::stack`). The row's level moved with this type too (about 17 ns to 7 here), but
/// with every offset held at 0 it read the same 7 ns: that is the copy of the coroutine the
/// compiler makes for a stack one word larger, not the offsets (docs/compare.md).
struct Coloured {
    stack: DefaultStack,
    offset: usize,
}

/// How many 16-byte offsets a page holds: the colours `next_colour` cycles through.
const COLOURS: usize = 4096 / STACK_ALIGNMENT;

/// The offset for the next started runtime: successive starts step through all `COLOURS`
/// offsets of a page in an order (an odd stride) that puts consecutive trials far apart.
fn next_colour() -> usize {
    static STARTS: AtomicUsize = AtomicUsize::new(0);
    colour(STARTS.fetch_add(1, Ordering::Relaxed))
}

/// The `k`th start's offset.
fn colour(k: usize) -> usize {
    (k.wrapping_mul(89) % COLOURS) * STACK_ALIGNMENT
}

impl Coloured {
    fn new(bytes: usize) -> std::io::Result<Coloured> {
        Ok(Coloured {
            stack: DefaultStack::new(bytes)?,
            offset: next_colour(),
        })
    }
}

// SAFETY: `Stack` asks for a guard page below the usable memory, at least MIN_STACK_SIZE usable
// bytes, and a base and limit aligned to STACK_ALIGNMENT. The guard page and the limit are the
// DefaultStack's own. The base is its base less `offset`, which is a multiple of STACK_ALIGNMENT
// below 4096 (`next_colour`), so it stays aligned, inside the mapping, and leaves
// STACK_BYTES - 4096 usable bytes, far above MIN_STACK_SIZE (a test checks both).
unsafe impl Stack for Coloured {
    fn base(&self) -> StackPointer {
        let top = self.stack.base().get() - self.offset;
        StackPointer::new(top).expect("a stack top below its mapping's end is not null")
    }

    fn limit(&self) -> StackPointer {
        self.stack.limit()
    }
}

/// corosensei's default stack size (what `Coroutine::new` maps).
const STACK_BYTES: usize = 1 << 20;

impl Bare {
    fn new() -> Result<Bare> {
        let stack = |what: &str| {
            Coloured::new(STACK_BYTES).map_err(|e| {
                Error::Skip(format!(
                    "cannot map a 1 MiB stack for corosensei's {what} coroutine: {e} (raise \
                     `ulimit -v` or free memory)"
                ))
            })
        };
        // Dropping it suspended unwinds its stack (corosensei's documented behaviour): the
        // loop holds nothing to drop.
        let yielder = Coroutine::with_stack(stack("yield")?, |y, ()| loop {
            y.suspend(());
        });
        Ok(Bare {
            yielder,
            spare: Some(stack("spawn")?),
        })
    }
}

impl Running for Bare {
    fn spawn_join(&mut self, n: u64) -> Result<Duration> {
        let Some(mut stack) = self.spare.take() else {
            return Err(Error::Fail(
                "corosensei's spawn stack was not given back by the previous batch".into(),
            ));
        };
        let t = Instant::now();
        for i in 0..n {
            let mut co: Coroutine<u64, (), u64, Coloured> =
                Coroutine::with_stack(stack, |_, x| black_box(x));
            black_box(co.resume(i));
            // It returned at its first resume (it never suspends), so corosensei gives its
            // stack back for the next one.
            stack = co.into_stack();
        }
        let took = t.elapsed();
        self.spare = Some(stack);
        Ok(took)
    }

    fn yield_switch(&mut self, n: u64) -> Result<Duration> {
        let resumes = n.div_ceil(2).max(1);
        let t = Instant::now();
        for _ in 0..resumes {
            black_box(self.yielder.resume(()));
        }
        Ok(t.elapsed().mul_f64(n as f64 / (2 * resumes) as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_visit_every_offset_of_a_page_once_per_cycle() {
        let offsets: std::collections::BTreeSet<usize> = (0..COLOURS).map(colour).collect();
        assert_eq!(offsets.len(), COLOURS, "each of a page's 16-byte offsets once");
        assert!(offsets.iter().all(|o| o % STACK_ALIGNMENT == 0 && *o < 4096));
        assert_eq!(colour(COLOURS), colour(0), "then the cycle starts again");
        assert!(
            colour(1).abs_diff(colour(0)) >= 1024,
            "consecutive trials far apart within the page"
        );
    }

    #[test]
    fn a_coloured_stack_is_aligned_and_runs_a_coroutine_at_every_offset() {
        let mut coloured = Some(Coloured::new(STACK_BYTES).expect("a 1 MiB stack"));
        let (top, limit) = {
            let c = coloured.as_ref().unwrap();
            (c.stack.base().get(), c.stack.limit().get())
        };
        for k in 0..COLOURS {
            let mut stack = coloured.take().unwrap();
            stack.offset = colour(k);
            let base = stack.base().get();
            assert_eq!(base % STACK_ALIGNMENT, 0);
            assert!(base <= top && top - base < 4096, "inside the mapping's top page");
            assert!(base - limit >= STACK_BYTES - 4096, "the rest of the stack usable");
            // A frame deep enough to touch the page below the top runs and gives the stack back.
            let mut co: Coroutine<u64, (), u64, Coloured> = Coroutine::with_stack(stack, |_, x| {
                let pad = black_box([x as u8; 6000]);
                pad.iter().map(|&b| b as u64).sum()
            });
            let got = co.resume(1);
            assert!(matches!(got, corosensei::CoroutineResult::Return(6000)));
            coloured = Some(co.into_stack());
        }
    }

    #[test]
    fn successive_starts_put_their_stacks_at_different_offsets() {
        let a = Bare::new().expect("two 1 MiB stacks can be mapped");
        let b = Bare::new().expect("two 1 MiB stacks can be mapped");
        let offsets = [a.spare.as_ref().unwrap().offset, b.spare.as_ref().unwrap().offset];
        assert_ne!(offsets[0], offsets[1]);
    }

    #[test]
    fn batches_reuse_the_stacks_made_at_start() {
        let mut bare = Bare::new().expect("two 1 MiB stacks can be mapped");
        for _ in 0..3 {
            bare.spawn_join(5).expect("the spawn stack came back");
            assert!(bare.spare.is_some(), "the spawn stack is given back");
            bare.yield_switch(7).expect("a yield batch");
            // Still the one coroutine made at start, suspended in its loop.
            assert!(bare.yielder.started() && !bare.yielder.done());
        }
        bare.spare = None;
        assert!(
            matches!(bare.spawn_join(1), Err(Error::Fail(_))),
            "a missing stack is an error, not a panic"
        );
    }
}
