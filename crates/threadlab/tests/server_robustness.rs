//! The servers are robust, and tested so: garbage, a length far beyond the cap, slowloris,
//! resets at random points, thousands of simultaneous connects, and running out of file
//! descriptors. Throughout, other clients keep being served, nothing panics, and when a server
//! is dropped it leaves no descriptor, thread or process behind.
//!
//! The tests share the process's descriptor and thread counts, so they run one at a time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use threadlab::experiments::server::client::{self, Exchange, Sources};
use threadlab::subjects::server::protocol::{
    encode_request, parse_response, pattern, ErrorCode, Request, KIND_ERROR, RESPONSE_HEADER,
};
use threadlab::subjects::server::{ServerConfig, DESIGNS};

#[path = "support/servers.rs"]
mod servers;
use servers::{serial, start};

fn config() -> ServerConfig {
    let mut cfg = ServerConfig::loopback();
    cfg.frame_deadline = Duration::from_millis(300);
    cfg.idle_timeout = Duration::from_secs(5);
    cfg.prefork_processes = 8;
    cfg.max_payload = 1 << 16;
    cfg
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The servers' threads in this process: every design names its threads `tl-…`, and a thread
/// it starts unnamed inherits its creator's name. The test harness's own threads (one per test
/// that is running or waiting for the serial lock) are left out: they come and go on their own.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("tl-"))
        })
        .count()
}

/// Our child processes (forked servers, the Go program).
fn children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut kids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(me) {
            kids.push(pid);
        }
    }
    kids
}

/// A normal client's transaction succeeds.
fn served(addr: SocketAddr, what: &str) {
    let pat = pattern(4096);
    let mut sources = Sources::for_target(addr);
    let mut s = client::connect(addr, &mut sources).unwrap_or_else(|f| panic!("{what}: {f}"));
    Exchange::new(&pat, 1024)
        .roundtrip(&mut s, 1, 42, false, (0, 0))
        .unwrap_or_else(|f| panic!("{what}: a normal client was not served: {f}"));
}

/// Reads until EOF, an error or `limit`; the error code if an error frame came first.
fn read_until_closed(s: &mut TcpStream, limit: Duration) -> (bool, Option<ErrorCode>) {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let end = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match s.read(&mut buf) {
            Ok(0) => return (true, error_code(&got)),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (true, error_code(&got)),
        }
    }
    (false, error_code(&got))
}

fn error_code(b: &[u8]) -> Option<ErrorCode> {
    if b.len() < RESPONSE_HEADER + 2 {
        return None;
    }
    let h = parse_response(b[..RESPONSE_HEADER].try_into().unwrap()).ok()?;
    (h.kind == KIND_ERROR)
        .then(|| ErrorCode::from_u16(u16::from_le_bytes([b[40], b[41]])))
        .flatten()
}

/// Closes with RST instead of FIN.
fn reset(s: TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid linger of the right size on a socket we own.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

#[test]
fn bad_frames_slowloris_and_resets_leave_other_clients_served_and_nothing_behind() {
    let _one = serial();
    // Servers of an earlier test may still be winding down their threads.
    let settle = Instant::now() + Duration::from_secs(3);
    while threads() > 0 && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(10));
    }
    let base_fds = fds();
    let base_threads = threads();
    for d in DESIGNS {
        let cfg = config();
        let Some(server) = start(d, &cfg) else {
            continue;
        };
        let addr = server.local_addr();
        let name = d.name;
        // The leak check below sees this design's threads (it counts them by name; a new
        // thread takes its name a moment after it starts).
        if server.program_pid().is_none() {
            let end = Instant::now() + Duration::from_secs(5);
            while threads() <= base_threads && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(
                threads() > base_threads,
                "{name}: no thread named tl-… seen"
            );
        }

        // Garbage: refused (an error frame or a close), never a crash.
        let mut g = TcpStream::connect(addr).unwrap();
        g.write_all(b"GET / HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n")
            .unwrap();
        let (closed, code) = read_until_closed(&mut g, Duration::from_secs(2));
        assert!(closed, "{name}: garbage did not close the connection");
        assert_eq!(code, Some(ErrorCode::BadFrame), "{name}: garbage");

        // A length far beyond the cap: refused from the header, before any allocation.
        let mut big = TcpStream::connect(addr).unwrap();
        big.write_all(&encode_request(&Request::echo(9, u32::MAX, 1)))
            .unwrap();
        let (closed, code) = read_until_closed(&mut big, Duration::from_secs(2));
        assert!(closed, "{name}: an oversized frame did not close");
        assert_eq!(code, Some(ErrorCode::TooLarge), "{name}: oversized");
        served(addr, &format!("{name} after bad frames"));

        // Slowloris: a byte every 100 ms never completes a frame within the 300 ms deadline;
        // meanwhile a normal client is served.
        let mut slow: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let frame = encode_request(&Request::echo(1, 100, 1));
        let t = Instant::now();
        let mut cut = vec![false; slow.len()];
        for k in 0..12 {
            for (i, s) in slow.iter_mut().enumerate() {
                if !cut[i] && s.write_all(&frame[k..k + 1]).is_err() {
                    cut[i] = true;
                }
            }
            if k == 3 {
                served(addr, &format!("{name} during slowloris"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for (i, s) in slow.iter_mut().enumerate() {
            if !cut[i] {
                let (closed, _) = read_until_closed(s, Duration::from_secs(2));
                assert!(closed, "{name}: a slow client was not cut off");
            }
        }
        assert!(t.elapsed() < Duration::from_secs(5), "{name}");
        drop(slow);

        // Resets at random points: mid-header, mid-payload, before reading the reply.
        let pat = pattern(70_000);
        for (k, cut_at) in [5usize, 40, 1000, 32 + 65_000].into_iter().enumerate() {
            let mut s = TcpStream::connect(addr).unwrap();
            let mut bytes = encode_request(&Request::echo(k as u32, 65_000, 3)).to_vec();
            bytes.extend_from_slice(&pat[..65_000]);
            let _ = s.write_all(&bytes[..cut_at]);
            reset(s);
        }
        served(addr, &format!("{name} after resets"));

        drop(server);
    }
    // Everything the servers opened is closed and every thread and child is gone.
    let end = Instant::now() + Duration::from_secs(3);
    while (fds() != base_fds || threads() > base_threads) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fds(), base_fds, "descriptors left open");
    assert!(
        threads() <= base_threads,
        "threads left: {} > {base_threads}",
        threads()
    );
    assert_eq!(children(), Vec::<i32>::new(), "child processes left");
}

#[test]
fn thousands_of_simultaneous_connects_are_all_served_with_an_explicit_backlog() {
    let _one = serial();
    const N: usize = 2000;
    let mut nofile = threadlab::experiments::server::NofileRaised::raise();
    if !nofile.make_room((2 * N + 256) as u64) {
        eprintln!("skipped: RLIMIT_NOFILE too low for {N} connections in one process");
        return;
    }
    for name in ["thread_per_client", "pool", "epoll", "io_uring", "tokio"] {
        let d = DESIGNS.iter().find(|d| d.name == name).unwrap();
        let Some(server) = start(d, &config()) else {
            continue;
        };
        let addr = server.local_addr();
        // All at once: non-blocking connects, then every one waits for its handshake.
        let socks: Vec<socket2::Socket> = (0..N)
            .map(|_| {
                let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .unwrap();
                s.set_nonblocking(true).unwrap();
                let _ = s.connect(&addr.into());
                s
            })
            .collect();
        let pat = pattern(64);
        let mut ex = Exchange::new(&pat, 16);
        for (i, s) in socks.into_iter().enumerate() {
            s.set_nonblocking(false).unwrap();
            let mut t: TcpStream = s.into();
            t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            ex.roundtrip(&mut t, i as u32, 7, true, (0, 0))
                .unwrap_or_else(|f| panic!("{name}: connection {i} of {N}: {f}"));
        }
        drop(server);
    }
}

#[test]
fn running_out_of_descriptors_backs_off_without_spinning_and_service_resumes() {
    let _one = serial();
    let exe = env!("CARGO_BIN_EXE_threadlab");
    for name in [
        "thread_per_client",
        "thread_per_request",
        "pool",
        "epoll",
        "io_uring",
        "tokio",
    ] {
        // A server process allowed 48 descriptors in all.
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--design", name, "--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe; the struct is built before the fork.
        unsafe {
            let rl = libc::rlimit {
                rlim_cur: 48,
                rlim_max: 48,
            };
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let mut err = child.stderr.take().unwrap();
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while err.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        let line = String::from_utf8_lossy(&line).to_string();
        if line.contains("cannot run here") || !line.contains("listening on") {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("{name}: skipped ({line})");
            continue;
        }
        let addr: SocketAddr = line
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {line}"));
        // Hold more connections than it has descriptors (the kernel completes the handshakes
        // into the backlog; the server accepts what it can).
        let pat = pattern(64);
        let held: Vec<TcpStream> = (0..120)
            .filter_map(|_| TcpStream::connect(addr).ok())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        // Exhausted: the server must not spin.
        let cpu = |pid: u32| -> f64 {
            let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let f: Vec<f64> = s
                .rsplit_once(')')
                .map(|(_, r)| {
                    r.split_whitespace()
                        .skip(11)
                        .take(2)
                        .filter_map(|v| v.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            // SAFETY: sysconf has no preconditions.
            f.iter().sum::<f64>() / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
        };
        let c0 = cpu(child.id());
        std::thread::sleep(Duration::from_millis(1000));
        let spent = cpu(child.id()) - c0;
        assert!(
            spent < 0.5,
            "{name}: {spent:.2} s of CPU in 1 s while out of descriptors: a busy loop"
        );
        // Descriptors come back: service resumes within a second or so.
        drop(held);
        let end = Instant::now() + Duration::from_secs(3);
        let mut ok = false;
        while Instant::now() < end && !ok {
            if let Ok(mut s) = client::connect(addr, &mut Sources::for_target(addr)) {
                ok = Exchange::new(&pat, 16)
                    .roundtrip(&mut s, 1, 2, false, (0, 0))
                    .is_ok();
            }
            if !ok {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // SAFETY: SIGINT to our own child: it stops like on Ctrl-C.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
        let status = child.wait().unwrap();
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        assert!(
            ok,
            "{name}: service did not resume after descriptors returned"
        );
        assert!(
            status.success(),
            "{name}: serve ended with {status}: {rest}"
        );
        let exhausted: u64 = rest
            .split(" times out of descriptors")
            .next()
            .and_then(|s| s.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            exhausted > 0,
            "{name}: never ran out of descriptors: {rest}"
        );
        eprintln!(
            "{name}: {spent:.2} s of CPU in 1 s out of descriptors; {}",
            rest.trim()
        );
    }
}
