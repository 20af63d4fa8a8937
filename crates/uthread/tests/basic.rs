//! Core semantics: spawn/join, outcomes, suspended start, cancel, sync primitives.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::sync::Arc;
use uthread::{Builder, JoinOutcome, Runtime};

#[test]
fn spawn_join_returns_value() {
    let v = uthread::run(|| {
        let hs: Vec<_> = (0..10u64).map(|i| uthread::spawn(move || i * 2)).collect();
        hs.into_iter()
            .map(|h| h.join().finished().unwrap())
            .sum::<u64>()
    });
    assert_eq!(v, 90);
}

#[test]
fn yield_interleaves_fifo() {
    let order = uthread::run(|| {
        let log = Arc::new(uthread::Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..3)
            .map(|i| {
                let log = log.clone();
                uthread::spawn(move || {
                    for step in 0..3 {
                        log.lock().push((i, step));
                        uthread::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join();
        }
        let v = log.lock().clone();
        v
    });
    let expect: Vec<_> = (0..3).flat_map(|s| (0..3).map(move |i| (i, s))).collect();
    assert_eq!(order, expect);
}

#[test]
fn panic_is_reported_not_propagated() {
    uthread::run(|| {
        let h = Builder::new()
            .name("boom")
            .spawn(|| -> u32 { panic!("kaboom") })
            .unwrap();
        match h.join() {
            JoinOutcome::Panicked(p) => assert_eq!(*p.downcast_ref::<&str>().unwrap(), "kaboom"),
            other => panic!("unexpected {other:?}"),
        }
    });
}

#[test]
fn start_suspended_cancel_and_resume() {
    uthread::run(|| {
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r2 = ran.clone();
        let h = Builder::new()
            .start_suspended(true)
            .spawn(move || r2.store(true, std::sync::atomic::Ordering::SeqCst))
            .unwrap();
        uthread::yield_now();
        assert!(
            !ran.load(std::sync::atomic::Ordering::SeqCst),
            "suspended thread must not run"
        );
        assert!(h.cancel());
        assert!(matches!(h.join(), JoinOutcome::Cancelled));
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));

        let h = Builder::new().start_suspended(true).spawn(|| 7).unwrap();
        assert!(h.resume());
        assert!(!h.resume());
        assert!(matches!(h.join(), JoinOutcome::Finished(7)));

        // Not suspended, but not started yet: cancel still wins.
        let h = uthread::spawn(|| 1);
        assert!(h.cancel());
        assert!(matches!(h.join(), JoinOutcome::Cancelled));

        // Already started: cancel refuses and the body completes.
        let h = uthread::spawn(|| {
            uthread::yield_now();
            2
        });
        uthread::yield_now();
        assert!(!h.cancel());
        assert!(matches!(h.join(), JoinOutcome::Finished(2)));
    });
}

#[test]
fn suspended_at_shutdown_is_cancelled() {
    let rt = Runtime::new();
    let h = rt.block_on(|| Builder::new().start_suspended(true).spawn(|| 5).unwrap());
    assert!(matches!(h.join(), JoinOutcome::Cancelled));
}

#[test]
fn detached_threads_run_to_completion() {
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c2 = counter.clone();
    uthread::run(move || {
        for _ in 0..100 {
            let c = c2.clone();
            uthread::spawn(move || {
                uthread::sleep(std::time::Duration::from_millis(1));
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 100);
}

#[test]
fn runtime_is_reusable_and_counts() {
    let rt = Runtime::builder().stack_size(32 * 1024).build().unwrap();
    for round in 0..5u64 {
        let v = rt.block_on(|| uthread::spawn(move || round + 1).join().finished().unwrap());
        assert_eq!(v, round + 1);
    }
    let s = rt.stats();
    assert_eq!(s.threads_spawned, 10);
    assert_eq!(s.threads_finished, 10);
    assert!(s.stacks_mapped <= 3, "stacks should be pooled: {s:?}");
}

#[test]
fn deadlock_is_an_error() {
    let rt = Runtime::new();
    let r = rt.try_block_on(|| {
        let s = uthread::Semaphore::new(0);
        s.acquire();
    });
    assert!(matches!(r, Err(uthread::RunError::Deadlock)));
    // Still usable afterwards.
    assert_eq!(rt.block_on(|| 3), 3);
}

#[test]
fn nested_block_on_is_refused() {
    uthread::run(|| {
        let r = Runtime::new().try_block_on(|| ());
        assert!(matches!(r, Err(uthread::RunError::Nested)));
    });
}

#[test]
fn invalid_parameters_are_errors() {
    assert!(Runtime::builder()
        .quantum(std::time::Duration::from_micros(10))
        .build()
        .is_err());
    assert!(Runtime::builder()
        .quantum(std::time::Duration::from_secs(1))
        .build()
        .is_err());
    assert!(
        Builder::new().spawn(|| ()).is_err(),
        "spawn outside a runtime"
    );
    uthread::run(|| {
        assert!(Builder::new()
            .priority(uthread::Priority::TimeSharing(0))
            .spawn(|| ())
            .is_err());
        assert!(Builder::new()
            .priority(uthread::Priority::TimeSharing(100))
            .spawn(|| ())
            .is_err());
        assert!(Builder::new()
            .priority(uthread::Priority::RealTime(200))
            .spawn(|| ())
            .is_err());
        assert!(
            Builder::new().stack_size(usize::MAX).spawn(|| ()).is_err(),
            "a stack size too large to map"
        );
    });
    let unguarded = Runtime::builder().guard_pages(false).build().unwrap();
    unguarded.block_on(|| {
        assert!(Builder::new().stack_size(usize::MAX).spawn(|| ()).is_err());
    });
}

#[test]
fn join_from_outside_the_runtime() {
    let rt = Runtime::new();
    let h = rt.block_on(|| uthread::spawn(|| 11));
    assert!(h.is_finished());
    assert!(matches!(h.join(), JoinOutcome::Finished(11)));
}

#[test]
fn many_live_threads_small_stacks() {
    fn rss() -> u64 {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        s.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
    }
    const N: usize = 20_000;
    let rt = Runtime::builder()
        .guard_pages(false)
        .stack_size(16 * 1024)
        .stack_pool(0)
        .build()
        .unwrap();
    let before = rss();
    let (done, grew) = rt.block_on(|| {
        let gate = Arc::new(uthread::Semaphore::new(0));
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let g = gate.clone();
                uthread::spawn(move || {
                    g.acquire();
                    i
                })
            })
            .collect();
        uthread::yield_now(); // all N now started and blocked
        let grew = rss().saturating_sub(before);
        for _ in 0..N {
            gate.release();
        }
        (
            hs.into_iter().filter_map(|h| h.join().finished()).count(),
            grew,
        )
    });
    assert_eq!(done, N);
    // Lazily committed stacks: about one page each, far below the 16 KiB reserved.
    assert!(
        grew < (N as u64) * 12 * 1024,
        "RSS grew by {grew} bytes for {N} threads"
    );
}
