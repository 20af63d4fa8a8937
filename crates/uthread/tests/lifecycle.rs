//! The thread lifecycle across OS threads: cancel racing the start, joins from another runtime
//! or from a plain OS thread, handles dropped elsewhere, stack recycling, control blocks larger
//! than a page. Each test checks what must hold on any machine (outcomes, counts), never time.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use uthread::{Builder, JoinHandle, JoinOutcome, Runtime, Semaphore};

/// A foreign OS thread cancels threads while the carrier is starting them. Whatever the
/// interleaving, `cancel() == true` must mean the body never ran and `join` says `Cancelled`,
/// and `false` must mean it ran to completion.
#[test]
fn cancel_from_another_os_thread_races_the_start() {
    const N: usize = 3000;
    let ran = Arc::new(AtomicUsize::new(0));
    let (to_canceller, inbox) = mpsc::channel::<JoinHandle<usize>>();
    let (back, results) = mpsc::channel::<(JoinHandle<usize>, bool)>();
    let canceller = std::thread::spawn(move || {
        for h in inbox {
            let cancelled = h.cancel();
            back.send((h, cancelled)).unwrap();
        }
    });
    let ran2 = ran.clone();
    let (finished, cancelled) = uthread::run(move || {
        for i in 0..N {
            let r = ran2.clone();
            let h = uthread::spawn(move || {
                r.fetch_add(1, Ordering::SeqCst);
                i
            });
            to_canceller.send(h).unwrap();
            if i % 3 == 0 {
                uthread::yield_now(); // let some threads start while their cancel is in flight
            }
        }
        drop(to_canceller);
        let (mut finished, mut cancelled) = (0, 0);
        for _ in 0..N {
            // Blocking the carrier here is fine: the canceller does not need it.
            let (h, was_cancelled) = results.recv().unwrap();
            match (h.join(), was_cancelled) {
                (JoinOutcome::Cancelled, true) => cancelled += 1,
                (JoinOutcome::Finished(_), false) => finished += 1,
                (outcome, c) => panic!("cancel() returned {c} but join gave {outcome:?}"),
            }
        }
        (finished, cancelled)
    });
    canceller.join().unwrap();
    assert_eq!(finished + cancelled, N);
    assert_eq!(ran.load(Ordering::SeqCst), finished, "a cancelled body ran");
}

/// A green thread of one runtime joins a thread of another runtime on another OS thread. The
/// joining runtime holds no `Handle`, yet must not call the wait a deadlock.
#[test]
fn join_a_thread_of_another_runtime() {
    let (tx, rx) = mpsc::channel::<JoinHandle<u64>>();
    let owner = std::thread::spawn(move || {
        uthread::run(move || {
            let h = uthread::spawn(|| {
                uthread::sleep(Duration::from_millis(30));
                42
            });
            tx.send(h).unwrap();
            // Returns at once; the runtime keeps running the sleeping thread.
        })
    });
    let h = rx.recv().unwrap();
    let got = Runtime::new()
        .try_block_on(move || {
            let joiner = uthread::spawn(move || h.join());
            joiner.join().finished().unwrap()
        })
        .expect("a join on another runtime's thread is not a deadlock");
    assert!(matches!(got, JoinOutcome::Finished(42)));
    owner.join().unwrap();
}

/// An OS thread outside any runtime joins a thread while it is still running elsewhere.
#[test]
fn os_thread_joins_a_running_thread() {
    let (tx, rx) = mpsc::channel::<JoinHandle<&'static str>>();
    let owner = std::thread::spawn(move || {
        uthread::run(move || {
            let h = uthread::spawn(|| {
                uthread::sleep(Duration::from_millis(30));
                "done"
            });
            tx.send(h).unwrap();
        })
    });
    let h = rx.recv().unwrap();
    assert!(matches!(h.join(), JoinOutcome::Finished("done")));
    owner.join().unwrap();
}

/// Handles dropped on another OS thread: after the thread finished (the stack is unmapped
/// there, not put in the owner's pool), and before it finished (the owner recycles it into its
/// pool when the thread ends).
#[test]
fn handles_dropped_on_another_os_thread() {
    let rt = Runtime::new();
    // Warm the pool so that the counts below only move by what this test does.
    rt.block_on(|| uthread::spawn(|| ()).join());

    // The returned handle owns its finished thread's stack until it is dropped.
    let finished = rt.block_on(|| uthread::spawn(|| vec![1u8; 100]));
    let pooled = rt.stats().stacks_pooled;
    std::thread::spawn(move || drop(finished)).join().unwrap();
    assert_eq!(
        rt.stats().stacks_pooled,
        pooled,
        "a stack freed on a foreign thread must not enter the owner's pool"
    );

    let mapped = rt.stats().stacks_mapped;
    let gate = Arc::new(Semaphore::new(0));
    let g2 = gate.clone();
    let value = rt.block_on(move || {
        let h = uthread::spawn(move || {
            g2.acquire();
            7
        });
        uthread::yield_now(); // it starts and blocks
        std::thread::spawn(move || drop(h)).join().unwrap();
        gate.release();
        uthread::yield_now(); // it finishes; its handle is gone, so the carrier frees it
        3
    });
    assert_eq!(value, 3);
    let s = rt.stats();
    assert_eq!(s.threads_finished, s.threads_spawned);
    // Every stack this round used (pooled or freshly mapped) is back in the pool, including the
    // one of the thread whose handle was dropped elsewhere.
    assert_eq!(
        s.stacks_pooled,
        pooled + (s.stacks_mapped - mapped),
        "a stack was not recycled"
    );
}

/// Stacks of finished threads, joined or detached, are reused: a steady spawn/join loop and
/// repeated rounds of detached threads map no new stacks.
#[test]
fn stacks_are_recycled() {
    let rt = Runtime::builder().stack_pool(256).build().unwrap();
    rt.block_on(|| {
        for i in 0..10_000u32 {
            assert_eq!(uthread::spawn(move || i).join().finished(), Some(i));
        }
    });
    let mapped = rt.stats().stacks_mapped;
    assert!(mapped <= 3, "spawn/join in a loop mapped {mapped} stacks");

    let round = |rt: &Runtime| {
        let done = Arc::new(AtomicUsize::new(0));
        let d2 = done.clone();
        rt.block_on(move || {
            for _ in 0..100 {
                let d = d2.clone();
                drop(uthread::spawn(move || {
                    uthread::yield_now();
                    d.fetch_add(1, Ordering::SeqCst);
                }));
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), 100);
    };
    round(&rt);
    let after_first = rt.stats().stacks_mapped;
    round(&rt);
    round(&rt);
    assert_eq!(
        rt.stats().stacks_mapped,
        after_first,
        "detached threads' stacks were not reused"
    );
}

/// Recurses until `want` bytes of stack lie between `start` and the current frame; returns a
/// value that depends on every frame (so none is optimised away).
fn dig(start: usize, want: usize) -> usize {
    let buf = std::hint::black_box([1u8; 256]);
    let here = &buf as *const _ as usize;
    if start.saturating_sub(here) >= want {
        buf[0] as usize
    } else {
        dig(start, want) + buf[255] as usize
    }
}

/// A closure bigger than a page makes a control block bigger than a page (more than one page
/// reserved on top of the stack); the thread runs and returns normally.
#[test]
fn control_block_larger_than_a_page() {
    let big = [3u64; 640]; // 5 KiB captured by value
    let got = uthread::run(move || {
        Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || big.iter().sum::<u64>())
            .unwrap()
            .join()
            .finished()
            .unwrap()
    });
    assert_eq!(got, 3 * 640);
}

/// The control block lives above the stack the thread asked for, not inside it: a thread can
/// use nearly all of its requested size (an overflow would abort the test process).
#[test]
fn requested_stack_is_usable() {
    let frames = uthread::run(|| {
        Builder::new()
            .stack_size(32 * 1024)
            .spawn(|| {
                let top = 0u8;
                dig(&top as *const u8 as usize, 28 * 1024)
            })
            .unwrap()
            .join()
            .finished()
            .unwrap()
    });
    assert!(frames > 1);
}

/// A thread abandoned at shutdown (blocked forever) releases a plain OS thread that was
/// already waiting in `join`, with `Abandoned`.
#[test]
fn abandoned_thread_releases_an_os_joiner() {
    let (tx, rx) = mpsc::channel::<JoinHandle<()>>();
    let joiner = std::thread::spawn(move || rx.recv().unwrap().join());
    let rt = Runtime::new();
    let r = rt.try_block_on(move || {
        let never = Arc::new(Semaphore::new(0));
        let n2 = never.clone();
        tx.send(uthread::spawn(move || n2.acquire())).unwrap();
        never.acquire(); // main blocks too: deadlock, every thread is abandoned
    });
    assert!(matches!(r, Err(uthread::RunError::Deadlock)));
    assert!(matches!(joiner.join().unwrap(), JoinOutcome::Abandoned));
}

/// A closure and a result aligned to a page: the control block holding them is placed at that
/// alignment on top of the stack, and both arrive intact. (The stack is large because every
/// move of a page-aligned value realigns its frame: a debug build overflows 64 KiB here, as a
/// `std::thread` would.)
#[test]
fn over_aligned_closure_and_result() {
    #[derive(Clone, Copy, PartialEq, Debug)]
    #[repr(align(4096))]
    struct Page([u64; 4]);
    let input = Page([1, 2, 3, 4]);
    let got = uthread::run(move || {
        Builder::new()
            .stack_size(1024 * 1024)
            .spawn(move || {
                assert_eq!(&input as *const Page as usize % 4096, 0);
                Page(input.0.map(|x| x * 10))
            })
            .unwrap()
            .join()
            .finished()
            .unwrap()
    });
    assert_eq!(got, Page([10, 20, 30, 40]));
}
