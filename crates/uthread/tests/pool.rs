//! `Pool`: spawns from outside through the injector, bursts spread by idle carriers taking
//! unstarted threads (and not with stealing off, nor for placed threads), no migration once
//! started, joins from inside and outside, shutdown, and a sharded echo server. Tests assert
//! outcomes, never durations.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use uthread::net::{ListenOptions, TcpListener, TcpStream};
use uthread::{Builder, JoinOutcome, Mode, Pool, Semaphore};

fn os_tid() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

#[test]
fn threads_spawned_from_outside_start_on_some_carrier_and_never_move() {
    let pool = Pool::builder().carriers(2).build().unwrap();
    assert_eq!(pool.carriers(), 2);
    assert_eq!(pool.current_carrier(), None);
    let ph = pool.handle();
    let gate = Arc::new(Semaphore::new(0));
    let hs: Vec<_> = (0..20)
        .map(|i| {
            let ph = ph.clone();
            let gate = Arc::clone(&gate);
            pool.spawn_with(
                Builder::new().mode(if i % 2 == 0 {
                    Mode::Cooperative
                } else {
                    Mode::Preemptive
                }),
                None,
                move || {
                    let carrier = ph.current_carrier().unwrap();
                    let tid = os_tid();
                    gate.acquire();
                    // Yields, sleeps and socket waits never move a thread to another OS
                    // thread.
                    for k in 0..20 {
                        match k % 3 {
                            0 => uthread::yield_now(),
                            1 => uthread::sleep(Duration::from_micros(50)),
                            _ => {
                                let (mut a, mut b) = uthread::net::UnixStream::pair().unwrap();
                                let r = uthread::spawn(move || {
                                    let mut x = [0u8; 1];
                                    b.read_exact(&mut x).unwrap();
                                    x[0]
                                });
                                uthread::sleep(Duration::from_micros(20));
                                a.write_all(&[k]).unwrap();
                                assert_eq!(r.join().finished(), Some(k));
                            }
                        }
                        assert_eq!(os_tid(), tid);
                        assert_eq!(ph.current_carrier(), Some(carrier));
                    }
                    carrier
                },
            )
            .unwrap()
        })
        .collect();
    // All 20 start (then block on the gate), each counted on the carrier that took it from
    // the injector.
    let started = || pool.loads().iter().sum::<usize>();
    while started() < 20 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let loads = pool.loads();
    for _ in 0..20 {
        gate.release();
    }
    let mut per = [0usize; 2];
    for h in hs {
        per[h.join().finished().unwrap()] += 1;
    }
    assert_eq!(per.to_vec(), loads);
    assert_eq!(pool.loads(), vec![0, 0]);
    pool.join();
}

#[test]
fn join_from_inside_and_outside_and_spawn_on() {
    let pool = Pool::builder().carriers(2).pin(true).build().unwrap();
    let ph = pool.handle();
    let outer = pool.spawn_on(0, move || {
        assert_eq!(ph.current_carrier(), Some(0));
        // Spawned onto the other carrier from a green thread, joined from here.
        let inner = ph.spawn_on(1, {
            let ph = ph.clone();
            move || ph.current_carrier().unwrap() * 100 + 7
        });
        let same = ph.spawn_on(0, || 5);
        inner.join().finished().unwrap() + same.join().finished().unwrap()
    });
    assert_eq!(outer.join().finished(), Some(112));
    // Panics are outcomes, as with `spawn`.
    let p = pool.spawn(|| -> u32 { panic!("boom") });
    assert!(matches!(p.join(), JoinOutcome::Panicked(_)));
    pool.join();
}

#[test]
fn join_waits_for_threads_spawned_by_pool_threads() {
    let pool = Pool::builder().carriers(2).build().unwrap();
    let ph = pool.handle();
    let done = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&done);
    drop(pool.spawn(move || {
        for _ in 0..10 {
            let d = Arc::clone(&d);
            drop(ph.spawn(move || {
                uthread::sleep(Duration::from_millis(2));
                d.fetch_add(1, Ordering::SeqCst);
            }));
        }
    }));
    pool.join();
    assert_eq!(done.load(Ordering::SeqCst), 10);
}

#[test]
fn shutdown_abandons_blocked_threads_and_refuses_new_ones() {
    let pool = Pool::builder().carriers(2).build().unwrap();
    let ph = pool.handle();
    let never = Arc::new(Semaphore::new(0));
    let blocked: Vec<_> = (0..4)
        .map(|_| {
            let n = Arc::clone(&never);
            pool.spawn(move || n.acquire())
        })
        .collect();
    let sleeper = pool.spawn(|| {
        uthread::sleep(Duration::from_millis(10));
        1
    });
    // Let them all start.
    std::thread::sleep(Duration::from_millis(5));
    pool.shutdown();
    // Running and sleeping threads finish; blocked ones are abandoned.
    assert_eq!(sleeper.join().finished(), Some(1));
    for h in blocked {
        assert!(matches!(h.join(), JoinOutcome::Abandoned));
    }
    let e = ph.spawn_with(Builder::new(), None, || ()).unwrap_err();
    assert!(e.to_string().contains("shutting down"), "{e}");
}

/// An echo server with one `SO_REUSEPORT` listener per carrier, each accepting onto its own
/// carrier, against client green threads on the same pool.
#[test]
fn sharded_echo_server() {
    let pool = Pool::builder().carriers(2).build().unwrap();
    let opts = ListenOptions::new().reuse_port(true);
    let first = TcpListener::bind_with("127.0.0.1:0", &opts).unwrap();
    let addr = first.local_addr().unwrap();
    let mut listeners = vec![Some(first)];
    listeners.push(Some(TcpListener::bind_with(addr, &opts).unwrap()));
    const CONNS: usize = 40;
    let accepted = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let servers: Vec<_> = (0..2)
        .map(|i| {
            let l = listeners[i].take().unwrap();
            let accepted = Arc::clone(&accepted);
            pool.spawn_on(i, move || loop {
                l.set_accept_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                match l.accept() {
                    Ok((mut s, _)) => {
                        accepted[i].fetch_add(1, Ordering::Relaxed);
                        uthread::spawn(move || {
                            s.set_nodelay(true).unwrap();
                            let mut buf = [0u8; 512];
                            loop {
                                match s.read(&mut buf) {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => s.write_all(&buf[..n]).unwrap(),
                                }
                            }
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return,
                    Err(e) => panic!("{e}"),
                }
            })
        })
        .collect();
    let clients: Vec<_> = (0..CONNS)
        .map(|k| {
            pool.spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_nodelay(true).unwrap();
                for i in 0..20u8 {
                    let msg = [k as u8, i, 3, 4, 5];
                    c.write_all(&msg).unwrap();
                    let mut back = [0u8; 5];
                    c.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg);
                }
            })
        })
        .collect();
    for c in clients {
        assert!(c.join().is_finished());
    }
    for s in servers {
        s.join();
    }
    let total: usize = accepted.iter().map(|a| a.load(Ordering::Relaxed)).sum();
    assert_eq!(total, CONNS);
    eprintln!(
        "accepted per carrier: {} / {}",
        accepted[0].load(Ordering::Relaxed),
        accepted[1].load(Ordering::Relaxed)
    );
    pool.join();
}

/// A pool thread on carrier 0 spawns a burst and keeps its carrier busy: the idle carrier 1
/// takes unstarted threads of the burst (with stealing on), and every thread finishes on the
/// carrier it started on.
fn burst_on_carrier_0(stealing: bool, placed: bool) -> [usize; 2] {
    let pool = Pool::builder()
        .carriers(2)
        .stealing(stealing)
        .build()
        .unwrap();
    let ph = pool.handle();
    let on_1 = Arc::new(AtomicUsize::new(0));
    let o = Arc::clone(&on_1);
    let spawner = pool.spawn_on(0, move || {
        let hs: Vec<_> = (0..200)
            .map(|_| {
                let (ph2, o) = (ph.clone(), Arc::clone(&o));
                let body = move || {
                    let (start, tid) = (ph2.current_carrier().unwrap(), os_tid());
                    if start == 1 {
                        o.fetch_add(1, Ordering::SeqCst);
                    }
                    uthread::yield_now();
                    uthread::sleep(Duration::from_micros(10));
                    assert_eq!(ph2.current_carrier(), Some(start), "a started thread moved");
                    assert_eq!(os_tid(), tid);
                    start
                };
                if placed {
                    ph.spawn_on(0, body)
                } else {
                    uthread::spawn(body)
                }
            })
            .collect();
        // Keep carrier 0 busy without yielding: with stealing on, until carrier 1 has taken
        // some; off (or placed), a while, to give it the chance it must not take.
        let t = std::time::Instant::now();
        let wait = if stealing && !placed {
            Duration::from_secs(10)
        } else {
            Duration::from_millis(30)
        };
        while o.load(Ordering::SeqCst) == 0 && t.elapsed() < wait {
            std::hint::spin_loop();
        }
        let mut per = [0usize; 2];
        for h in hs {
            per[h.join().finished().unwrap()] += 1;
        }
        per
    });
    let per = spawner.join().finished().unwrap();
    pool.join();
    assert_eq!(per[0] + per[1], 200);
    per
}

#[test]
fn an_idle_carrier_takes_unstarted_threads_of_a_burst() {
    let per = burst_on_carrier_0(true, false);
    assert!(per[1] > 0, "carrier 1 took none of the burst: {per:?}");
}

#[test]
fn with_stealing_off_a_burst_stays_on_its_carrier() {
    assert_eq!(burst_on_carrier_0(false, false), [200, 0]);
}

#[test]
fn threads_placed_with_spawn_on_are_never_taken() {
    assert_eq!(burst_on_carrier_0(true, true), [200, 0]);
}

/// Fan-out and fan-in: a binary tree of threads, each node spawning two children on its
/// carrier and joining them; carriers take unstarted nodes from each other at every level.
#[test]
fn a_fan_out_tree_completes_with_every_node_joined() {
    fn node(depth: u32, ph: uthread::PoolHandle, seen: Arc<[AtomicUsize; 2]>) -> u64 {
        seen[ph.current_carrier().unwrap()].fetch_add(1, Ordering::Relaxed);
        if depth == 0 {
            return 1;
        }
        let kids: Vec<_> = (0..2)
            .map(|_| {
                let (ph, seen) = (ph.clone(), Arc::clone(&seen));
                uthread::spawn(move || node(depth - 1, ph, seen))
            })
            .collect();
        kids.into_iter().map(|k| k.join().finished().unwrap()).sum()
    }
    let pool = Pool::builder().carriers(2).build().unwrap();
    let seen = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let (ph, s) = (pool.handle(), Arc::clone(&seen));
    let leaves = pool.spawn(move || node(10, ph, s)).join().finished();
    pool.join();
    assert_eq!(leaves, Some(1024));
    let total: usize = seen.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    assert_eq!(total, 2047);
}
