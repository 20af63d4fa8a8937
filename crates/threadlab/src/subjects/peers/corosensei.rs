//! corosensei's bare stackful coroutine: the batches `create.corosensei` and
//! `switch.corosensei.yield` time. It is no runtime (no scheduler, no run queue, no preemption,
//! no join handle): its rows are the floor a runtime's switch and spawn can approach, and the
//! reference peer's ratios over it say how far uthread's scheduler stands above that floor.

use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
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
            runtime; its one guard page is all the guard handling), resumed until it returns a value, its stack \
            taken back with into_stack for the next; per op = batch time / n; timed in the \
            calling thread, nothing subtracted",
    spawn_unpinned: None,
    yields: "a bare corosensei stackful-coroutine switch, no scheduler, no run queue, no \
             preemption, not a runtime but the floor a runtime's switch can approach: the \
             caller resumes one coroutine (corosensei 0.3, a 1 MiB DefaultStack made once per \
             started runtime) that suspends in a loop; a resume and a suspend are two switches, \
             counted as switch.green.yield counts its yields, so per switch = batch time / \
             (2 x resumes); nothing subtracted",
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
    yielder: Coroutine<(), (), (), DefaultStack>,
    /// None only while a spawn-and-run coroutine holds it.
    spare: Option<DefaultStack>,
}

/// corosensei's default stack size (what `Coroutine::new` maps).
const STACK_BYTES: usize = 1 << 20;

impl Bare {
    fn new() -> Result<Bare> {
        let stack = |what: &str| {
            DefaultStack::new(STACK_BYTES).map_err(|e| {
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
            let mut co: Coroutine<u64, (), u64, DefaultStack> =
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
