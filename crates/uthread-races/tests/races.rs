//! Interleavings of the cross-thread lifecycle protocol that are nanoseconds wide in normal
//! runs, forced here by the runtime's race-delay hooks (`uthread::__private::set_race_delay`):
//! each test opens one window with a delay and lets another OS thread act inside it. The delays
//! are process-wide, so the tests of this file run one at a time. They assert outcomes only.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use std::time::Instant;
use uthread::__private::{set_race_delay, RacePoint};
use uthread::chan;
use uthread::net::{TcpListener, TcpStream};
use uthread::{Builder, JoinHandle, JoinOutcome, Runtime, Semaphore};

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the file's lock and a delay at one point; clears the delay when dropped (also when
/// the test fails), so the next test starts clean.
struct Window {
    point: RacePoint,
    _serial: std::sync::MutexGuard<'static, ()>,
}

fn open(point: RacePoint, d: Duration) -> Window {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    set_race_delay(point, d);
    Window {
        point,
        _serial: serial,
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        set_race_delay(self.point, Duration::ZERO);
    }
}

/// Runs `f` on a new OS thread inside its own runtime; returns the handle it sends out. The
/// runtime's main thread then sleeps for `main_sleeps`: the delays are process-wide and hit
/// every thread that passes their point, so a test whose window must be taken by the spawned
/// thread keeps the main thread out of the way until then.
fn owner<T: Send + 'static>(
    main_sleeps: Duration,
    f: impl FnOnce() -> JoinHandle<T> + Send + 'static,
) -> (JoinHandle<T>, std::thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let os = std::thread::spawn(move || {
        uthread::run(move || {
            tx.send(f()).unwrap();
            uthread::sleep(main_sleeps);
        });
    });
    (rx.recv().unwrap(), os)
}

/// A green thread of another runtime registers as joiner while the carrier is finishing the
/// thread (after it read the `life` word, before it published DONE). The carrier must find the
/// joiner through the word it then reads, not through what it read before.
#[test]
fn joiner_registers_while_the_thread_is_finished() {
    let _w = open(RacePoint::FinishBeforePublish, Duration::from_millis(150));
    let (h, os) = owner(Duration::from_millis(400), || {
        uthread::spawn(|| {
            uthread::sleep(Duration::from_millis(20));
            5u32
        })
    });
    let got = uthread::run(move || {
        uthread::spawn(move || {
            // The owner is inside its 150 ms window from ~20 ms on.
            uthread::sleep(Duration::from_millis(60));
            h.join()
        })
        .join()
        .finished()
        .unwrap()
    });
    assert!(matches!(got, JoinOutcome::Finished(5)));
    os.join().unwrap();
}

/// A joiner on another runtime registers, then the thread finishes and sends the wake-up
/// before the joiner looks at DONE. The joiner must still take that wake-up in `join`; left
/// over, it would later make a semaphore acquire return without a permit.
#[test]
fn cross_runtime_joiner_takes_its_wake_up() {
    let _w = open(RacePoint::JoinAfterRegister, Duration::from_millis(150));
    let (h, os) = owner(Duration::ZERO, || {
        uthread::spawn(|| {
            uthread::sleep(Duration::from_millis(30));
            1u32
        })
    });
    let released = Arc::new(AtomicBool::new(false));
    let (r1, r2) = (released.clone(), released.clone());
    let (got, acquired_after_release) = uthread::run(move || {
        let sem = Arc::new(Semaphore::new(0));
        let s2 = sem.clone();
        let joiner = uthread::spawn(move || {
            let got = h.join(); // registers at once, then the 150 ms window
            sem.acquire();
            (got, r1.load(Ordering::SeqCst))
        });
        let releaser = uthread::spawn(move || {
            uthread::sleep(Duration::from_millis(400));
            r2.store(true, Ordering::SeqCst);
            s2.release();
        });
        let out = joiner.join().finished().unwrap();
        releaser.join();
        out
    });
    assert!(matches!(got, JoinOutcome::Finished(1)));
    assert!(
        acquired_after_release,
        "acquire returned before the permit was released: a stale wake-up"
    );
    assert!(released.load(Ordering::SeqCst));
    os.join().unwrap();
}

static YIELDING_DROPS: AtomicUsize = AtomicUsize::new(0);

struct YieldsInDrop;

impl Drop for YieldsInDrop {
    fn drop(&mut self) {
        uthread::yield_now();
        YIELDING_DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

/// The handle is dropped on another OS thread after the thread checked for it and before it
/// stored its result, so the runtime drops the result itself, from the scheduler context. A
/// yield in that destructor must be harmless there.
#[test]
fn result_dropped_by_the_runtime_may_yield() {
    let _w = open(RacePoint::ResultBeforeStore, Duration::from_millis(150));
    let before = YIELDING_DROPS.load(Ordering::SeqCst);
    let rt = Runtime::new();
    rt.block_on(|| {
        let h = uthread::spawn(|| YieldsInDrop);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(40));
            drop(h);
        });
        // The thread runs while main sleeps (main's own end would take the window first):
        // it checks its handle, waits 150 ms, stores its result and ends with nothing else
        // runnable, so the scheduler context frees it.
        uthread::sleep(Duration::from_millis(400));
    });
    assert_eq!(YIELDING_DROPS.load(Ordering::SeqCst), before + 1);
    assert_eq!(
        rt.block_on(|| uthread::spawn(|| 2).join().finished()),
        Some(2)
    );
}

/// `block_on`'s closure returns while one of its threads waits to join a thread of another
/// runtime: the runtime waits for that join instead of abandoning the joiner, and afterwards
/// still reports a real deadlock.
#[test]
fn a_pending_cross_runtime_join_is_waited_for() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (h, os) = owner(Duration::ZERO, || {
        uthread::spawn(|| {
            uthread::sleep(Duration::from_millis(50));
            7u32
        })
    });
    let slot = Arc::new(Mutex::new(None));
    let s2 = slot.clone();
    let rt = Runtime::new();
    rt.block_on(move || {
        drop(uthread::spawn(move || *s2.lock().unwrap() = Some(h.join())));
    });
    assert!(matches!(
        slot.lock().unwrap().take(),
        Some(JoinOutcome::Finished(7))
    ));
    os.join().unwrap();

    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(Duration::from_secs(20)).is_err() {
            eprintln!("try_block_on did not report a deadlock within 20 s: it hangs");
            std::process::exit(3);
        }
    });
    let r = rt.try_block_on(|| Semaphore::new(0).acquire());
    done_tx.send(()).unwrap();
    watchdog.join().unwrap();
    assert!(matches!(r, Err(uthread::RunError::Deadlock)));
}

/// `cancel` on another OS thread takes a suspended thread out of SUSPENDED, and its carrier
/// reaches the end of `block_on` before the wake-up arrives. `cancel` said `true`, so `join`
/// must say `Cancelled`, not `Abandoned`.
#[test]
fn cancel_racing_shutdown_is_honoured() {
    let _w = open(
        RacePoint::WakeAfterLeaveSuspended,
        Duration::from_millis(150),
    );
    let (to_canceller, inbox) = mpsc::channel::<JoinHandle<u8>>();
    let (about_to_cancel, ready) = mpsc::channel::<()>();
    let canceller = std::thread::spawn(move || {
        let h = inbox.recv().unwrap();
        about_to_cancel.send(()).unwrap();
        let cancelled = h.cancel(); // CAS, then a 150 ms window before the wake-up
        (cancelled, h)
    });
    let rt = Runtime::new();
    rt.block_on(move || {
        let h = Builder::new().start_suspended(true).spawn(|| 9u8).unwrap();
        to_canceller.send(h).unwrap();
        ready.recv().unwrap();
        // Blocks the carrier on purpose: when it returns, the cancel is inside its window.
        std::thread::sleep(Duration::from_millis(30));
    });
    let (cancelled, h) = canceller.join().unwrap();
    assert!(cancelled);
    assert!(matches!(h.join(), JoinOutcome::Cancelled));
}

/// A shutdown on another OS thread lands after a reader looked at the shutdown flags and
/// before it entered the waiter slot, so the shutdown finds nobody to wake. The reader must
/// still fail, not wait forever.
#[test]
fn shutdown_between_the_flag_check_and_the_slot() {
    let _w = open(RacePoint::ParkBeforeSlot, Duration::from_millis(150));
    let (tx, rx) = mpsc::channel::<Arc<TcpStream>>();
    let killer = std::thread::spawn(move || {
        let s = rx.recv().unwrap();
        // The reader is inside its 150 ms window by now.
        std::thread::sleep(Duration::from_millis(50));
        s.shutdown(Shutdown::Read).unwrap();
    });
    let r = uthread::run(move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let s = Arc::new(l.accept().unwrap().0);
        tx.send(Arc::clone(&s)).unwrap();
        let mut buf = [0u8; 4];
        (&*s).read(&mut buf)
    });
    killer.join().unwrap();
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionAborted);
}

/// A carrier's `epoll_wait` returns an event for a socket, and before the carrier handles it
/// the socket is dropped on another OS thread and its poll descriptor recycled for a new
/// socket. The stale event must be recognised (its tag no longer matches) and ignored: no
/// wake-up, no readiness, and the new socket works normally.
#[test]
fn a_stale_event_for_a_recycled_descriptor_is_ignored() {
    let _w = open(RacePoint::NetpollBeforeDispatch, Duration::from_millis(200));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (to_os, from_rt) = mpsc::channel::<(TcpStream, std::net::TcpStream)>();
    let gate = Arc::new(Semaphore::new(0));
    let rt = Runtime::new();
    let handle = rt.handle();
    let os = std::thread::spawn({
        let gate = Arc::clone(&gate);
        move || {
            let (registered, mut peer) = from_rt.recv().unwrap();
            // The carrier now idles in epoll_wait; this write makes it return with an event
            // for `registered`, and the hook holds it there for 200 ms.
            std::thread::sleep(Duration::from_millis(30));
            peer.write_all(b"x").unwrap();
            std::thread::sleep(Duration::from_millis(50));
            drop(registered); // released: its descriptor goes back to the cache...
            let c = TcpStream::connect(addr).unwrap(); // ...and is reused at once
            let mut s = l.accept().unwrap().0;
            let mut c2 = c.try_clone().unwrap();
            c2.write_all(b"fresh").unwrap();
            let mut five = [0u8; 5];
            s.read_exact(&mut five).unwrap();
            assert_eq!(&five, b"fresh");
            std::thread::sleep(Duration::from_millis(200));
            gate.release();
            drop(handle);
        }
    });
    let before = rt.block_on(move || {
        // The peer is a std socket, registered nowhere: the only socket this carrier's poller
        // holds is `b`.
        let l2 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l2.local_addr().unwrap()).unwrap();
        let b = TcpStream::from_std(l2.accept().unwrap().0).unwrap();
        // Register `b` with this carrier's poller by waiting on it once.
        b.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        assert_eq!(
            (&b).read(&mut [0u8; 1]).unwrap_err().kind(),
            ErrorKind::TimedOut
        );
        let before = uthread::stats().unwrap().io_events;
        to_os.send((b, a)).unwrap();
        gate.acquire();
        before
    });
    os.join().unwrap();
    // From then on the only descriptor event this carrier saw was the stale one: not counted.
    assert_eq!(rt.stats().io_events, before, "{:?}", rt.stats());
}

/// A channel claims a parked green receiver and sends its wake-up from another OS thread while
/// the receiver sits between leaving its node in the queue and parking. The park must take that
/// wake-up: returning early because the value is already there would leave it to hit the
/// thread later, while it waits for something else (here a semaphore, which would then let it
/// through without a permit).
#[test]
fn a_channel_wake_up_that_arrives_before_the_park_is_taken_by_it() {
    let _w = open(RacePoint::ChanBeforePark, Duration::from_millis(100));
    let rt = Runtime::new();
    let handle = rt.handle();
    let (tx, rx) = chan::bounded::<u32>(0);
    let gate = Arc::new(Semaphore::new(0));
    let progressed = Arc::new(AtomicBool::new(false));
    let (g, p) = (Arc::clone(&gate), Arc::clone(&progressed));
    let os = std::thread::spawn(move || {
        // The receiver registers at once and then waits 100 ms before parking: send inside.
        std::thread::sleep(Duration::from_millis(30));
        tx.send(7).unwrap();
        std::thread::sleep(Duration::from_millis(250));
        let early = p.load(Ordering::SeqCst);
        g.release();
        early
    });
    let got = rt.block_on(move || {
        let v = rx.recv().unwrap();
        gate.acquire();
        progressed.store(true, Ordering::SeqCst);
        v
    });
    drop(handle);
    assert_eq!(got, 7);
    assert!(
        !os.join().unwrap(),
        "a stale wake-up let the semaphore's waiter through"
    );
}

/// A sender claims a parked receiver and is still moving the value when the receiver's
/// deadline passes. The claim wins: the receiver gets the value (for an OS thread and for a
/// green thread, whose deadline is its carrier's timer), never a timeout with the value lost.
#[test]
fn a_deadline_passing_while_a_claimer_moves_the_value_loses_to_the_claim() {
    let _w = open(RacePoint::ChanClaimBeforeFinish, Duration::from_millis(100));
    let deliver = |tx: chan::Sender<u32>| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            tx.send(9).unwrap();
        })
    };
    // An OS thread receives.
    let (tx, rx) = chan::bounded::<u32>(0);
    let s = deliver(tx);
    let t = Instant::now();
    assert_eq!(rx.recv_timeout(Duration::from_millis(20)), Ok(9));
    assert!(
        t.elapsed() >= Duration::from_millis(100),
        "the claim was slowed"
    );
    s.join().unwrap();
    // A green thread receives.
    let rt = Runtime::new();
    let handle = rt.handle();
    let (tx, rx) = chan::bounded::<u32>(0);
    let s = deliver(tx);
    let got = rt.block_on(move || rx.recv_timeout(Duration::from_millis(20)));
    drop(handle);
    s.join().unwrap();
    assert_eq!(got, Ok(9));
}
