//! Channels: rendezvous, bounded and unbounded; FIFO hand-off; disconnection from either side,
//! also while parked; timeouts and deadlines; green threads on one carrier, across a pool's
//! carriers, and plain OS threads on either end; `Select`; a parked sender whose runtime ends.
//! Tests assert outcomes and orders, never durations.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uthread::chan::{
    self, RecvError, RecvTimeoutError, Select, SendError, SendTimeoutError, TryRecvError,
    TrySendError,
};
use uthread::{JoinOutcome, Pool, Runtime};

#[test]
fn rendezvous_hands_each_value_to_a_waiting_receiver_in_order() {
    let log = uthread::run(|| {
        let (tx, rx) = chan::bounded::<u32>(0);
        assert_eq!(tx.capacity(), Some(0));
        // Nobody waits: a rendezvous send cannot complete without waiting.
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        let producer = uthread::spawn(move || {
            for i in 0..100 {
                tx.send(i).unwrap();
            }
        });
        let got: Vec<u32> = rx.iter().collect();
        producer.join();
        got
    });
    assert_eq!(log, (0..100).collect::<Vec<_>>());
}

#[test]
fn bounded_buffers_up_to_its_capacity_then_parks_the_sender() {
    uthread::run(|| {
        let (tx, rx) = chan::bounded::<u32>(3);
        for i in 0..3 {
            tx.try_send(i).unwrap();
        }
        assert_eq!(tx.try_send(9), Err(TrySendError::Full(9)));
        assert_eq!(rx.len(), 3);
        let sent = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&sent);
        let tx2 = tx.clone();
        let blocked = uthread::spawn(move || {
            tx2.send(3).unwrap(); // parks: the buffer is full
            s.fetch_add(1, Ordering::SeqCst);
        });
        uthread::yield_now();
        assert_eq!(
            sent.load(Ordering::SeqCst),
            0,
            "a full channel parks the sender"
        );
        // Taking one moves the parked sender's value into the buffer and wakes it.
        assert_eq!(rx.recv(), Ok(0));
        blocked.join();
        assert_eq!(sent.load(Ordering::SeqCst), 1);
        drop(tx);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    });
}

#[test]
fn unbounded_never_waits_and_keeps_order() {
    uthread::run(|| {
        let (tx, rx) = chan::unbounded();
        assert_eq!(tx.capacity(), None);
        for i in 0..10_000u32 {
            tx.try_send(i).unwrap();
        }
        assert_eq!(rx.try_recv(), Ok(0));
        drop(tx);
        let rest: Vec<u32> = rx.into_iter().collect();
        assert_eq!(rest, (1..10_000).collect::<Vec<_>>());
    });
}

#[test]
fn many_producers_and_consumers_see_every_value_once() {
    for cap in [0usize, 1, 7] {
        let seen = uthread::run(move || {
            let (tx, rx) = chan::bounded::<u64>(cap);
            let producers: Vec<_> = (0..4u64)
                .map(|p| {
                    let tx = tx.clone();
                    uthread::spawn(move || {
                        for i in 0..500 {
                            tx.send(p << 32 | i).unwrap();
                            if i % 7 == 0 {
                                uthread::yield_now();
                            }
                        }
                    })
                })
                .collect();
            drop(tx);
            let consumers: Vec<_> = (0..3)
                .map(|_| {
                    let rx = rx.clone();
                    uthread::spawn(move || rx.iter().collect::<Vec<u64>>())
                })
                .collect();
            drop(rx);
            producers.into_iter().for_each(|h| drop(h.join()));
            consumers
                .into_iter()
                .map(|h| h.join().finished().unwrap())
                .collect::<Vec<_>>()
        });
        let mut all = HashSet::new();
        for per in &seen {
            // One consumer receives one producer's values in the order they were sent.
            for p in 0..4u64 {
                let mine: Vec<u64> = per.iter().copied().filter(|v| v >> 32 == p).collect();
                assert!(
                    mine.windows(2).all(|w| w[0] < w[1]),
                    "cap {cap}: order kept"
                );
            }
            for &v in per {
                assert!(all.insert(v), "cap {cap}: {v:#x} received twice");
            }
        }
        assert_eq!(all.len(), 2000, "cap {cap}: every value received");
    }
}

#[test]
fn dropping_the_last_sender_wakes_parked_receivers_with_an_error() {
    uthread::run(|| {
        let (tx, rx) = chan::bounded::<u8>(0);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let rx = rx.clone();
                uthread::spawn(move || rx.recv())
            })
            .collect();
        uthread::yield_now(); // all three park
        let tx2 = tx.clone();
        drop(tx);
        uthread::yield_now();
        assert!(waiters.iter().all(|h| !h.is_finished()), "a sender is left");
        drop(tx2);
        for h in waiters {
            assert_eq!(h.join().finished(), Some(Err(RecvError)));
        }
    });
}

#[test]
fn dropping_the_last_receiver_returns_parked_senders_values_and_drops_the_buffer() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&drops);
    uthread::run(move || {
        let (tx, rx) = chan::bounded(2);
        tx.send(Counted(d.clone())).unwrap();
        tx.send(Counted(d.clone())).unwrap();
        let tx2 = tx.clone();
        let d2 = d.clone();
        let parked = uthread::spawn(move || match tx2.send(Counted(d2)) {
            Err(SendError(v)) => {
                drop(v);
                true
            }
            Ok(()) => false,
        });
        uthread::yield_now();
        drop(rx);
        assert_eq!(
            d.load(Ordering::SeqCst),
            2,
            "the two buffered values dropped"
        );
        assert_eq!(
            parked.join().finished(),
            Some(true),
            "the parked value came back"
        );
        assert!(matches!(tx.send(Counted(d.clone())), Err(SendError(_))));
    });
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}

#[test]
fn timeouts_and_deadlines_end_waits_and_give_values_back() {
    uthread::run(|| {
        let (tx, rx) = chan::bounded::<u32>(0);
        let t = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(20)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(t.elapsed() >= Duration::from_millis(20));
        assert_eq!(
            tx.send_timeout(5, Duration::from_millis(5)),
            Err(SendTimeoutError::Timeout(5))
        );
        // A deadline already passed does not wait.
        assert_eq!(
            rx.recv_deadline(Instant::now()),
            Err(RecvTimeoutError::Timeout)
        );
        // A value arriving before the deadline is taken.
        let tx2 = tx.clone();
        let s = uthread::spawn(move || {
            uthread::sleep(Duration::from_millis(2));
            tx2.send(7).unwrap();
        });
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(7));
        s.join();
        drop(tx);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Err(RecvTimeoutError::Disconnected)
        );
    });
}

#[test]
fn timeouts_racing_hand_offs_lose_and_duplicate_nothing() {
    // An OS thread offers values with short send timeouts while a green thread takes them with
    // short receive timeouts: each value is either received once or returned to its sender.
    let rt = Runtime::new();
    let handle = rt.handle();
    let (tx, rx) = chan::bounded::<u64>(0);
    let offered = 20_000u64;
    let os = std::thread::spawn(move || {
        let mut returned = Vec::new();
        for i in 0..offered {
            if let Err(SendTimeoutError::Timeout(v)) = tx.send_timeout(i, Duration::from_micros(30))
            {
                returned.push(v);
            }
        }
        returned
    });
    let received = rt.block_on(move || {
        let mut got = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_micros(20)) {
                Ok(v) => got.push(v),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return got,
            }
        }
    });
    drop(handle);
    let returned = os.join().unwrap();
    let mut all: Vec<u64> = received.iter().chain(&returned).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..offered).collect::<Vec<_>>());
    assert!(received.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn os_threads_and_green_threads_talk_both_ways() {
    let rt = Runtime::new();
    let handle = rt.handle(); // the green side waits on an OS thread: keep the runtime waiting
    let (to_green, from_os) = chan::bounded::<u32>(0);
    let (to_os, from_green) = chan::bounded::<u32>(1);
    let os = std::thread::spawn(move || {
        let mut sum = 0;
        for i in 0..2_000 {
            to_green.send(i).unwrap();
            sum += from_green.recv().unwrap();
        }
        drop(to_green);
        assert_eq!(from_green.recv(), Err(RecvError));
        sum
    });
    rt.block_on(move || {
        let echo = uthread::spawn(move || {
            for v in from_os.iter() {
                to_os.send(v * 2).unwrap();
            }
        });
        echo.join();
    });
    drop(handle);
    assert_eq!(os.join().unwrap(), 2 * (0..2_000).sum::<u32>());
}

#[test]
fn os_threads_on_both_ends_block_their_own_thread() {
    let (tx, rx) = chan::bounded::<u32>(0);
    let t = std::thread::spawn(move || (0..1000).map(|_| rx.recv().unwrap()).sum::<u32>());
    for i in 0..1000 {
        tx.send(i).unwrap();
    }
    assert_eq!(t.join().unwrap(), (0..1000).sum::<u32>());
}

#[test]
fn green_threads_on_different_carriers_exchange_values() {
    let pool = Pool::builder().carriers(2).build().unwrap();
    let (ping_tx, ping_rx) = chan::bounded::<u64>(0);
    let (pong_tx, pong_rx) = chan::unbounded::<u64>();
    let ph = pool.handle();
    let a = pool.spawn_on(0, move || {
        let here = ph.current_carrier();
        let mut sum = 0;
        for i in 0..5_000 {
            ping_tx.send(i).unwrap();
            sum += pong_rx.recv().unwrap();
        }
        (here, sum)
    });
    let ph = pool.handle();
    let b = pool.spawn_on(1, move || {
        let here = ph.current_carrier();
        for v in ping_rx.iter() {
            pong_tx.send(v + 1).unwrap();
        }
        here
    });
    let (here_a, sum) = a.join().finished().unwrap();
    assert_eq!(b.join().finished().unwrap(), Some(1));
    assert_eq!(here_a, Some(0));
    assert_eq!(sum, (1..=5_000).sum::<u64>());
    pool.join();
}

#[test]
fn select_takes_the_ready_case_or_times_out() {
    uthread::run(|| {
        let (tx_a, rx_a) = chan::bounded::<u32>(1);
        let (tx_b, rx_b) = chan::bounded::<u32>(1);
        // Nothing ready, zero timeout: Go's `default`.
        let r = Select::new()
            .recv(&rx_a, |_| "a")
            .recv(&rx_b, |_| "b")
            .timeout(Duration::ZERO, || "none")
            .wait();
        assert_eq!(r, "none");
        tx_b.send(2).unwrap();
        let r = Select::new()
            .recv(&rx_a, |r| ("a", r))
            .recv(&rx_b, |r| ("b", r))
            .wait();
        assert_eq!(r, ("b", Ok(2)));
        // A send case completes into the buffer.
        let r = Select::new()
            .recv(&rx_a, |_| "recv")
            .send(&tx_a, 9, |r| {
                r.unwrap();
                "sent"
            })
            .wait();
        assert_eq!(r, "sent");
        assert_eq!(rx_a.try_recv(), Ok(9));
        // Nothing ready: the timeout fires after waiting.
        let t = Instant::now();
        let r = Select::new()
            .recv(&rx_a, |_| false)
            .timeout(Duration::from_millis(10), || true)
            .wait();
        assert!(r && t.elapsed() >= Duration::from_millis(10));
        // A disconnected channel's case is ready at once.
        drop(tx_a);
        let r = Select::new()
            .recv(&rx_a, |r| r)
            .recv(&rx_b, |_| Ok(0))
            .wait();
        assert_eq!(r, Err(RecvError));
    });
}

#[test]
fn a_parked_select_is_completed_by_exactly_one_case() {
    // Several senders race to complete one parked select: exactly one value is taken per
    // select, and the others stay in their channels (or their senders) for the next round.
    let rounds = 2_000;
    let taken = uthread::run(move || {
        let chans: Vec<_> = (0..3).map(|_| chan::bounded::<u32>(0)).collect();
        let senders: Vec<_> = chans
            .iter()
            .enumerate()
            .map(|(k, (tx, _))| {
                let tx = tx.clone();
                uthread::spawn(move || {
                    let mut sent = 0;
                    while tx.send(k as u32).is_ok() {
                        sent += 1;
                    }
                    sent
                })
            })
            .collect();
        let mut per = [0u32; 3];
        for _ in 0..rounds {
            let k = Select::new()
                .recv(&chans[0].1, |r| r.unwrap())
                .recv(&chans[1].1, |r| r.unwrap())
                .recv(&chans[2].1, |r| r.unwrap())
                .wait();
            per[k as usize] += 1;
        }
        let (txs, rxs): (Vec<_>, Vec<_>) = chans.into_iter().unzip();
        drop(txs);
        drop(rxs);
        let sent: Vec<u32> = senders
            .into_iter()
            .map(|h| h.join().finished().unwrap())
            .collect();
        (per, sent)
    });
    let (per, sent) = taken;
    assert_eq!(per.iter().sum::<u32>(), rounds);
    assert_eq!(
        per,
        [sent[0], sent[1], sent[2]],
        "every completed send was selected once"
    );
}

#[test]
fn select_between_os_threads_and_green_threads() {
    let rt = Runtime::new();
    let handle = rt.handle();
    let (tx, rx) = chan::bounded::<u32>(0);
    let (quit_tx, quit_rx) = chan::bounded::<()>(0);
    let os = std::thread::spawn(move || {
        for i in 0..500 {
            tx.send(i).unwrap();
        }
        quit_tx.send(()).unwrap();
    });
    let sum = rt.block_on(move || {
        let mut sum = 0;
        loop {
            let more = Select::new()
                .recv(&rx, |r| {
                    sum += r.unwrap();
                    true
                })
                .recv(&quit_rx, |_| false)
                .wait();
            if !more {
                return sum;
            }
        }
    });
    drop(handle);
    os.join().unwrap();
    assert_eq!(sum, (0..500).sum::<u32>());
}

#[test]
fn a_select_on_an_os_thread_times_out_and_then_receives() {
    let (tx, rx) = chan::bounded::<u32>(0);
    let r = Select::new()
        .recv(&rx, |r| r.ok())
        .timeout(Duration::from_millis(5), || None)
        .wait();
    assert_eq!(r, None);
    let t = std::thread::spawn(move || tx.send(3).unwrap());
    let r = Select::new()
        .recv(&rx, |r| r.ok())
        .timeout(Duration::from_secs(10), || None)
        .wait();
    assert_eq!(r, Some(3));
    t.join().unwrap();
}

#[test]
fn a_parked_senders_runtime_ending_abandons_it_and_the_receiver_gets_its_value() {
    let (tx, rx) = chan::bounded::<u32>(1);
    let (handle_tx, handle_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::new();
        rt.block_on(move || {
            let h = uthread::spawn(move || {
                tx.send(1).unwrap();
                tx.send(2).unwrap(); // parks: the buffer is full and nobody receives here
                unreachable!("the runtime ends while this send is parked");
            });
            handle_tx.send(h).unwrap();
        });
    })
    .join()
    .unwrap();
    let h = handle_rx.recv().unwrap();
    assert!(matches!(h.join(), JoinOutcome::Abandoned));
    // The abandoned sender's stack (with its Sender and value) is leaked, not unwound: the
    // buffered value and the parked one are still delivered, and the channel never
    // disconnects.
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.recv(), Ok(2));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(20)),
        Err(RecvTimeoutError::Timeout)
    );
}

#[test]
fn a_blocking_receive_inside_a_synchronize_callback_panics_and_try_recv_works() {
    uthread::run(|| {
        let (tx, rx) = chan::bounded::<u32>(1);
        tx.send(4).unwrap();
        let got = uthread::synchronize(|| rx.try_recv());
        assert_eq!(got, Ok(4));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            uthread::synchronize(|| rx.recv())
        }));
        let msg = r.unwrap_err();
        let msg = msg
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        assert!(msg.contains("synchronize"), "{msg}");
    });
}
