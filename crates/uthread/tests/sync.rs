//! Synchronisation primitives, synchronize/queue, and the priority scheduler.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use uthread::{Builder, Condvar, Mutex, Priority, Runtime, Semaphore, Throttle};

#[test]
fn semaphore_wakes_fifo() {
    let order = uthread::run(|| {
        let sem = Arc::new(Semaphore::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let (sem, log) = (sem.clone(), log.clone());
                uthread::spawn(move || {
                    sem.acquire();
                    log.lock().push(i);
                })
            })
            .collect();
        // Let all eight queue up (in spawn order), then release one permit at a time, with a
        // yielding barger competing for each.
        uthread::yield_now();
        let barger_got = Arc::new(AtomicUsize::new(0));
        for _ in 0..8 {
            sem.release();
            let (s, b) = (sem.clone(), barger_got.clone());
            uthread::spawn(move || {
                if s.try_acquire() {
                    b.fetch_add(1, Ordering::SeqCst);
                }
            });
            uthread::yield_now();
        }
        for h in hs {
            h.join();
        }
        assert_eq!(
            barger_got.load(Ordering::SeqCst),
            0,
            "a released permit was stolen from a waiter"
        );
        let v = log.lock().clone();
        v
    });
    assert_eq!(order, (0..8).collect::<Vec<_>>());
}

#[test]
fn condvar_producer_consumer() {
    let sum = uthread::run(|| {
        let q = Arc::new((Mutex::new(Vec::<u64>::new()), Condvar::new()));
        let consumer = {
            let q = q.clone();
            uthread::spawn(move || {
                let mut sum = 0;
                let mut got = 0;
                while got < 1000 {
                    let mut g = q.1.wait_while(q.0.lock(), |v| v.is_empty());
                    while let Some(x) = g.pop() {
                        sum += x;
                        got += 1;
                    }
                }
                sum
            })
        };
        for i in 0..1000u64 {
            q.0.lock().push(i);
            q.1.notify_one();
            if i % 7 == 0 {
                uthread::yield_now();
            }
        }
        consumer.join().finished().unwrap()
    });
    assert_eq!(sum, 999 * 1000 / 2);
}

#[test]
fn throttle_limits_concurrency() {
    uthread::run(|| {
        let t = Arc::new(Throttle::new(3));
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..20)
            .map(|_| {
                let (t, running, peak) = (t.clone(), running.clone(), peak.clone());
                uthread::spawn(move || {
                    t.run(|| {
                        let n = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        uthread::sleep(Duration::from_millis(1));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                })
            })
            .collect();
        for h in hs {
            h.join();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn synchronize_runs_on_the_owner_and_returns() {
    uthread::run(|| {
        let h = Builder::new()
            .name("worker")
            .spawn(|| {
                assert_eq!(uthread::current_name().as_deref(), Some("worker"));
                // Inside synchronize we are on the runtime owner, not in a green thread.
                let (name, v) = uthread::synchronize(|| (uthread::current_name(), 6 * 7));
                assert_eq!(name, None);
                v
            })
            .unwrap();
        assert_eq!(h.join().finished(), Some(42));
        // A panic inside synchronize reaches the caller.
        let h = uthread::spawn(|| {
            uthread::synchronize(|| panic!("in owner"));
        });
        assert!(matches!(h.join(), uthread::JoinOutcome::Panicked(_)));
    });
}

#[test]
fn queue_runs_later_in_fifo_order() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let l2 = log.clone();
    uthread::run(move || {
        for i in 0..5 {
            let l = l2.clone();
            uthread::queue(move || l.borrow_mut().push(i));
        }
        l2.borrow_mut().push(100); // queue() returned at once
        uthread::yield_now(); // gives the owner a chance to run them
        l2.borrow_mut().push(200);
    });
    assert_eq!(*log.borrow(), vec![100, 0, 1, 2, 3, 4, 200]);
}

#[test]
fn handle_from_another_os_thread() {
    let rt = Runtime::new();
    let handle = rt.handle();
    let got = rt.block_on(move || {
        let sem = Arc::new(Semaphore::new(0));
        let s2 = sem.clone();
        let os = std::thread::spawn(move || {
            let v = handle
                .synchronize(|| uthread::current_id().is_none())
                .unwrap();
            s2.release(); // wakes a green thread from a plain OS thread
            v
        });
        sem.acquire();
        os.join().unwrap()
    });
    assert!(got);
}

/// Counts how often each of several always-runnable threads gets picked.
fn pick_counts(prios: &[Priority], picks: usize) -> Vec<usize> {
    uthread::run(|| {
        let total = Arc::new(AtomicUsize::new(0));
        let counts: Vec<_> = prios
            .iter()
            .map(|_| Arc::new(AtomicUsize::new(0)))
            .collect();
        let hs: Vec<_> = prios
            .iter()
            .zip(&counts)
            .map(|(&p, c)| {
                let (c, total) = (c.clone(), total.clone());
                Builder::new()
                    .priority(p)
                    .spawn(move || {
                        while total.fetch_add(1, Ordering::SeqCst) < picks {
                            c.fetch_add(1, Ordering::SeqCst);
                            uthread::yield_now();
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join();
        }
        counts.iter().map(|c| c.load(Ordering::SeqCst)).collect()
    })
}

#[test]
fn time_sharing_lottery_doubles_per_unit() {
    let c = pick_counts(
        &[
            Priority::TimeSharing(10),
            Priority::TimeSharing(11),
            Priority::TimeSharing(12),
        ],
        70_000,
    );
    // Expected shares 1:2:4. Wide tolerance: this is a random lottery.
    let r1 = c[1] as f64 / c[0] as f64;
    let r2 = c[2] as f64 / c[1] as f64;
    assert!(
        (1.6..2.5).contains(&r1) && (1.6..2.5).contains(&r2),
        "counts {c:?}"
    );
}

#[test]
fn real_time_runs_first_and_idle_last() {
    uthread::run(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mk = |p: Priority, tag: &'static str| {
            let log = log.clone();
            Builder::new()
                .priority(p)
                .spawn(move || log.lock().push(tag))
                .unwrap()
        };
        let hs = vec![
            mk(Priority::Idle, "idle"),
            mk(Priority::TimeSharing(50), "ts"),
            mk(Priority::RealTime(5), "rt5"),
            mk(Priority::RealTime(9), "rt9"),
        ];
        for h in hs {
            h.join();
        }
        let v = log.lock().clone();
        assert_eq!(v, vec!["rt9", "rt5", "ts", "idle"]);
    });
}
