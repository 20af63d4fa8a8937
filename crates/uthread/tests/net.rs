//! Sockets behind blocking calls: echo, deadlines, shutdown from another thread, resets,
//! half-close, use outside a runtime, descriptors the user owns, two readers of one stream,
//! and the abandoning of a thread parked on a socket. Tests assert outcomes, never durations.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uthread::net::{TcpListener, TcpStream, UnixStream};
use uthread::{JoinOutcome, Runtime};

fn listener() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// An echo loop: what it reads it writes back, until end of stream.
fn echo(mut s: TcpStream) -> usize {
    s.set_nodelay(true).unwrap();
    let mut buf = [0u8; 1024];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            return total;
        }
        s.write_all(&buf[..n]).unwrap();
        total += n;
    }
}

#[test]
fn echo_between_green_threads() {
    let rt = Runtime::new();
    let total = rt.block_on(|| {
        let (l, addr) = listener();
        let server = uthread::spawn(move || {
            (0..4)
                .map(|_| {
                    let (s, _) = l.accept().unwrap();
                    uthread::spawn(move || echo(s))
                })
                .collect::<Vec<_>>()
        });
        let clients: Vec<_> = (0..4u8)
            .map(|k| {
                uthread::spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    c.set_nodelay(true).unwrap();
                    let mut sum = 0usize;
                    for i in 0..100u32 {
                        let msg = vec![k ^ i as u8; 1 + (i as usize * 37) % 3000];
                        c.write_all(&msg).unwrap();
                        let mut back = vec![0u8; msg.len()];
                        c.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg);
                        sum += back.len();
                    }
                    sum
                })
            })
            .collect();
        let sent: usize = clients
            .into_iter()
            .map(|h| h.join().finished().unwrap())
            .sum();
        let echoed: usize = server
            .join()
            .finished()
            .unwrap()
            .into_iter()
            .map(|h| h.join().finished().unwrap())
            .sum();
        assert_eq!(sent, echoed);
        sent
    });
    assert!(total > 0);
    let s = rt.stats();
    assert!(s.io_waits > 0 && s.io_events > 0, "{s:?}");
}

#[test]
fn read_timeout_and_deadline_fire() {
    uthread::run(|| {
        let (l, addr) = listener();
        let _c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        // A per-call timeout.
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut buf = [0u8; 8];
        let e = (&s).read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        // An absolute deadline, earlier than the timeout: it wins.
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.set_read_deadline(Some(Instant::now() + Duration::from_millis(10)));
        let e = (&s).read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        // A deadline in the past fails without waiting; clearing it restores blocking.
        s.set_read_deadline(Some(Instant::now()));
        assert_eq!((&s).read(&mut buf).unwrap_err().kind(), ErrorKind::TimedOut);
        assert!(s.read_deadline().is_some());
        s.set_read_deadline(None);
        assert_eq!(s.read_timeout().unwrap(), Some(Duration::from_secs(60)));
        assert!(s.set_read_timeout(Some(Duration::ZERO)).is_err());
        // Accept has one too.
        l.set_accept_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        assert_eq!(l.accept().unwrap_err().kind(), ErrorKind::TimedOut);
    });
}

#[test]
fn data_that_comes_after_a_timeout_is_read_next_time() {
    uthread::run(|| {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let writer = uthread::spawn(move || {
            for i in 0..200u32 {
                if i % 3 == 0 {
                    uthread::sleep(Duration::from_micros(700));
                }
                c.write_all(&i.to_le_bytes()).unwrap();
            }
        });
        // Readiness and deadlines race many times: every byte arrives once, in order.
        let mut got = Vec::new();
        let mut timeouts = 0;
        while got.len() < 800 {
            let mut buf = [0u8; 64];
            match (&s).read(&mut buf) {
                Ok(0) => panic!("unexpected end of stream"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::TimedOut => timeouts += 1,
                Err(e) => panic!("{e}"),
            }
        }
        writer.join();
        let want: Vec<u8> = (0..200u32).flat_map(|i| i.to_le_bytes()).collect();
        assert_eq!(got, want);
        eprintln!("{timeouts} timeouts interleaved with the data");
    });
}

/// A green thread blocked in `read` fails when another green thread shuts the stream down;
/// later reads see end of stream, as with std.
#[test]
fn shutdown_wakes_a_blocked_reader_with_an_error() {
    for how in [Shutdown::Read, Shutdown::Both] {
        uthread::run(move || {
            let (l, addr) = listener();
            let _c = TcpStream::connect(addr).unwrap();
            let s = Arc::new(l.accept().unwrap().0);
            let s2 = Arc::clone(&s);
            let reader = uthread::spawn(move || {
                let mut buf = [0u8; 8];
                (&*s2).read(&mut buf)
            });
            // Let the reader park.
            uthread::sleep(Duration::from_millis(5));
            s.shutdown(how).unwrap();
            let r = reader.join().finished().unwrap();
            assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionAborted);
            let mut buf = [0u8; 8];
            assert_eq!((&*s).read(&mut buf).unwrap(), 0);
        });
    }
}

/// The same from a plain OS thread: the wake-up crosses into the carrier's `epoll_wait`.
#[test]
fn shutdown_from_os_thread_reaches_carrier_in_epoll_wait() {
    let (tx, rx) = std::sync::mpsc::channel::<Arc<TcpStream>>();
    let killer = std::thread::spawn(move || {
        let s = rx.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s.shutdown(Shutdown::Read).unwrap();
    });
    let rt = Runtime::new();
    let r = rt.block_on(move || {
        let (l, addr) = listener();
        let _c = TcpStream::connect(addr).unwrap();
        let s = Arc::new(l.accept().unwrap().0);
        tx.send(Arc::clone(&s)).unwrap();
        let mut buf = [0u8; 8];
        (&*s).read(&mut buf)
    });
    killer.join().unwrap();
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionAborted);
    assert!(rt.stats().netpoll_blocking > 0);
}

/// `SO_LINGER 0` resets the connection: the other side's read and write are errors (never a
/// `SIGPIPE`, which would kill the test process).
#[test]
fn resets_are_errors() {
    uthread::run(|| {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_linger(Some(Duration::ZERO)).unwrap();
        assert_eq!(s.linger().unwrap(), Some(Duration::ZERO));
        drop(s);
        let mut buf = [0u8; 8];
        let e = c.read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
        // Writing to a reset connection: EPIPE as an error.
        let mut errors = 0;
        for _ in 0..3 {
            if c.write_all(b"after the reset").is_err() {
                errors += 1;
            }
        }
        assert!(errors > 0);
    });
}

#[test]
fn writing_to_a_closed_peer_is_broken_pipe_not_sigpipe() {
    uthread::run(|| {
        let (l, addr) = listener();
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        drop(s);
        let chunk = vec![7u8; 64 * 1024];
        let mut r = Ok(());
        for _ in 0..100 {
            r = (&c).write_all(&chunk);
            if r.is_err() {
                break;
            }
        }
        let e = r.unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
            "{e:?}"
        );
    });
}

/// Half-close: the client shuts down its write side after the request; the server reads to
/// end of stream, replies, and the client reads the reply.
#[test]
fn half_close() {
    uthread::run(|| {
        let (l, addr) = listener();
        let server = uthread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = Vec::new();
            s.read_to_end(&mut req).unwrap();
            s.write_all(&req.iter().rev().copied().collect::<Vec<_>>())
                .unwrap();
            req.len()
        });
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"abcdef").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        assert!(c.write_all(b"x").is_err());
        let mut reply = String::new();
        c.read_to_string(&mut reply).unwrap();
        assert_eq!(reply, "fedcba");
        assert_eq!(server.join().finished(), Some(6));
    });
}

/// The same types block the OS thread outside any runtime, and talk to green threads.
#[test]
fn works_outside_a_runtime() {
    let (l, addr) = listener();
    let os_server = std::thread::spawn(move || {
        let (s, peer) = l.accept().unwrap();
        assert!(peer.ip().is_loopback());
        s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!((&s).read(&mut buf).unwrap_err().kind(), ErrorKind::TimedOut);
        s.set_read_timeout(None).unwrap();
        echo(s)
    });
    let n = uthread::run(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_nodelay(true).unwrap();
        // Long enough for the server's 10 ms read timeout to fire first.
        uthread::sleep(Duration::from_millis(30));
        c.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"ping");
        4
    });
    assert_eq!(os_server.join().unwrap(), n);
}

#[test]
fn std_conversions_and_raw_fds() {
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_l.local_addr().unwrap();
    let l = TcpListener::from_std(std_l).unwrap();
    uthread::run(move || {
        let c = TcpStream::from_std(std::net::TcpStream::connect(addr).unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(c.peer_addr().unwrap(), addr);
        assert_eq!(s.local_addr().unwrap(), addr);
        // Through a raw descriptor and back.
        let fd: OwnedFd = s.into();
        // SAFETY: `fd` is an open socket we own; ownership passes to the stream.
        let mut s = unsafe { TcpStream::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(fd)) };
        let mut c2 = c.try_clone().unwrap();
        drop(c);
        c2.write_all(b"via clone").unwrap();
        let mut b = [0u8; 9];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"via clone");
        // Back to a blocking std stream.
        let mut std_s = s.into_std().unwrap();
        c2.write_all(b"!").unwrap();
        let mut one = [0u8; 1];
        std_s.read_exact(&mut one).unwrap();
        assert_eq!(&one, b"!");
    });
}

#[test]
fn unix_streams() {
    let dir = std::env::temp_dir().join(format!("uthread-unix-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let path = dir.clone();
    uthread::run(move || {
        let l = uthread::net::UnixListener::bind(&path).unwrap();
        let p2 = path.clone();
        let client = uthread::spawn(move || {
            let mut c = UnixStream::connect(&p2).unwrap();
            c.write_all(b"over unix").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut back = String::new();
            c.read_to_string(&mut back).unwrap();
            back
        });
        let (mut s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        s.write_all(&got).unwrap();
        drop(s);
        assert_eq!(client.join().finished().unwrap(), "over unix");
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(b"pair").unwrap();
        let mut four = [0u8; 4];
        b.read_exact(&mut four).unwrap();
        assert_eq!(&four, b"pair");
    });
    let _ = std::fs::remove_file(&dir);
}

/// `io::wait_readable` on descriptors the user owns: a pipe and an eventfd, from green threads
/// and outside; with a deadline; and on a socket's own descriptor (already registered).
#[test]
fn waiting_on_descriptors_the_user_owns() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: fresh descriptors from pipe2.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let r = Arc::new(r);
    let woke = Arc::new(AtomicUsize::new(0));
    uthread::run({
        let r = Arc::clone(&r);
        let woke = Arc::clone(&woke);
        move || {
            let early = Instant::now() + Duration::from_millis(5);
            assert_eq!(
                uthread::io::wait_readable(r.as_fd(), Some(early))
                    .unwrap_err()
                    .kind(),
                ErrorKind::TimedOut
            );
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let r = Arc::clone(&r);
                    let woke = Arc::clone(&woke);
                    uthread::spawn(move || {
                        uthread::io::wait_readable(r.as_fd(), None).unwrap();
                        woke.fetch_add(1, Ordering::Relaxed);
                    })
                })
                .collect();
            uthread::sleep(Duration::from_millis(5));
            assert_eq!(woke.load(Ordering::Relaxed), 0);
            uthread::io::wait_writable(w.as_fd(), None).unwrap();
            // SAFETY: writes one byte from a live buffer to our pipe.
            assert_eq!(
                unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) },
                1
            );
            for h in waiters {
                h.join();
            }
            // A socket's own, already registered descriptor.
            let (l, addr) = listener();
            let mut c = TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().unwrap();
            let s = Arc::new(s);
            let s2 = Arc::clone(&s);
            let w = uthread::spawn(move || uthread::io::wait_readable(s2.as_fd(), None));
            uthread::sleep(Duration::from_millis(2));
            c.write_all(b"x").unwrap();
            w.join().finished().unwrap().unwrap();
        }
    });
    assert_eq!(woke.load(Ordering::Relaxed), 3);
    // Outside a runtime: poll(2).
    uthread::io::wait_readable(r.as_fd(), None).unwrap();
}

/// Two green threads reading one stream at once (the second takes turns); every byte is read
/// exactly once.
#[test]
fn two_readers_of_one_stream() {
    uthread::run(|| {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let s = Arc::new(l.accept().unwrap().0);
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let s = Arc::clone(&s);
                uthread::spawn(move || {
                    let mut n = 0;
                    let mut buf = [0u8; 3];
                    loop {
                        match (&*s).read(&mut buf) {
                            Ok(0) => return n,
                            Ok(k) => n += k,
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for _ in 0..50 {
            uthread::sleep(Duration::from_micros(200));
            c.write_all(b"0123456789").unwrap();
        }
        drop(c);
        let total: usize = readers
            .into_iter()
            .map(|h| h.join().finished().unwrap())
            .sum();
        assert_eq!(total, 500);
    });
}

/// A clone of a stream (a `dup`) dropped while a reader waits on the original: the original
/// stays registered and its reader gets the data.
#[test]
fn dropping_a_clone_leaves_the_original_parked_reader_alone() {
    uthread::run(|| {
        let (l, addr) = listener();
        let mut c = TcpStream::connect(addr).unwrap();
        let s = l.accept().unwrap().0;
        let clone = s.try_clone().unwrap();
        let reader = uthread::spawn(move || {
            let mut buf = [0u8; 5];
            (&s).read_exact(&mut buf).map(|()| buf)
        });
        uthread::sleep(Duration::from_millis(2));
        // Wait on the clone too, then drop it: its registration goes, not the original's.
        clone
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        assert!((&clone).read(&mut [0u8; 1]).is_err());
        drop(clone);
        c.write_all(b"later").unwrap();
        assert_eq!(&reader.join().finished().unwrap().unwrap(), b"later");
    });
}

/// A thread parked on a socket when its runtime ends is `Abandoned`, and the socket is closed:
/// the peer sees the connection end.
#[test]
fn a_thread_parked_on_a_socket_at_the_end_is_abandoned_and_its_socket_closed() {
    let (l, addr) = listener();
    let peer = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 8];
        // End of stream (or a reset): the socket of the abandoned reader was closed.
        match c.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                assert_ne!(e.kind(), ErrorKind::WouldBlock, "not closed: {e}");
                0
            }
        }
    });
    let rt = Runtime::new();
    let h = rt.block_on(move || {
        let (s, _) = l.accept().unwrap();
        uthread::spawn(move || {
            let mut buf = [0u8; 8];
            let _ = (&s).read(&mut buf);
            unreachable!("nothing ever arrives");
        })
    });
    assert!(matches!(h.join(), JoinOutcome::Abandoned));
    assert_eq!(peer.join().unwrap(), 0);
}

/// After a short read (which proves the receive queue empty, so the next read waits first),
/// the end of the stream or a reset must still end the next read: they are reported once and
/// stay true, so the reader must not wait for another report.
#[test]
fn a_short_read_then_end_or_reset_does_not_hang() {
    for reset in [false, true] {
        uthread::run(move || {
            let (l, addr) = listener();
            let mut c = TcpStream::connect(addr).unwrap();
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // The reader parks first (so the socket is registered), then the data and the end
            // arrive together: one report, consumed by the wake-up before the short read.
            let reader = uthread::spawn(move || {
                let mut buf = [0u8; 1024];
                let mut got = Vec::new();
                loop {
                    match (&s).read(&mut buf) {
                        Ok(0) => return Ok(got),
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) => return Err(e),
                    }
                }
            });
            uthread::sleep(Duration::from_millis(5));
            if reset {
                c.set_linger(Some(Duration::ZERO)).unwrap();
            }
            c.write_all(b"abc").unwrap();
            drop(c);
            match reader.join().finished().unwrap() {
                Ok(got) => assert_eq!(got, b"abc"),
                Err(e) => {
                    assert!(reset, "{e}");
                    assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
                }
            }
        });
    }
}

/// `io::blocking` runs a blocking call on a helper OS thread: the carrier's other green threads
/// keep running meanwhile, the result comes back, a panic is re-raised, and a lone waiting
/// main thread is not taken for a deadlock.
#[test]
fn blocking_calls_run_off_the_carrier() {
    uthread::run(|| {
        let ticks = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker = {
            let (ticks, stop) = (Arc::clone(&ticks), Arc::clone(&stop));
            uthread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    ticks.fetch_add(1, Ordering::Relaxed);
                    uthread::sleep(Duration::from_micros(200));
                }
            })
        };
        let before = ticks.load(Ordering::Relaxed);
        let t2 = Arc::clone(&ticks);
        let during = uthread::io::blocking(move || {
            std::thread::sleep(Duration::from_millis(30));
            t2.load(Ordering::Relaxed)
        });
        assert!(
            during > before,
            "the carrier stood still: {before} -> {during}"
        );
        stop.store(true, Ordering::Relaxed);
        ticker.join();
        let r = std::panic::catch_unwind(|| uthread::io::blocking(|| -> u8 { panic!("inside") }));
        assert!(r.is_err());
        // Nothing else runs now: waiting for the helper is not a deadlock.
        assert_eq!(uthread::io::blocking(|| 7), 7);
    });
    // Outside a runtime it just runs.
    assert_eq!(uthread::io::blocking(|| 8), 8);
}
