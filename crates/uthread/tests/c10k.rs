//! 10,000 concurrent loopback connections, each echoed by its own green thread on one carrier.
//!
//! The clients live in a child process (this test binary re-executed), so that each process
//! needs only ~10,000 descriptors. Both raise their soft `RLIMIT_NOFILE` to the hard limit
//! first, as Go's runtime does; if that is still too low the test is skipped with the reason
//! printed. The test asserts structure (every connection accepted, echoed twice, zero errors)
//! and prints the server's resident-memory growth per connection; it asserts no timing.
//!
//! `UTHREAD_C10K_CONNS` changes the number of connections (default 10,000).

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::io::{BufRead, Read, Write};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use uthread::net::{TcpListener, TcpStream};
use uthread::{Builder, Runtime, Semaphore};

const CHILD_ENV: &str = "UTHREAD_C10K_CHILD";
const MSG: usize = 64;

fn conns() -> usize {
    std::env::var("UTHREAD_C10K_CONNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000)
}

/// Raises the soft descriptor limit to the hard one; returns the soft limit now in force.
fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid rlimit struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        }
        r.rlim_cur
    }
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The message client `k` sends in round `r`.
fn message(k: usize, r: u8) -> [u8; MSG] {
    let mut m = [0u8; MSG];
    for (i, b) in m.iter_mut().enumerate() {
        *b = (k as u8) ^ (k >> 8) as u8 ^ (i as u8) ^ r.wrapping_mul(101);
    }
    m
}

/// The client process: `n` connections, one green thread each. Round 1 once all are
/// connected, "ready" on stdout, then round 2 when stdin says "go", then close.
fn client(port: u16, n: usize) {
    raise_nofile();
    let errors = Arc::new(AtomicUsize::new(0));
    let echoed = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder().stack_size(32 * 1024).build().unwrap();
    rt.block_on(|| {
        // Connect in waves, so that the server's backlog never overflows (an overflow costs a
        // one-second SYN retry, not an error, but slows the test).
        let connecting = Arc::new(Semaphore::new(256));
        let round1 = Arc::new(Semaphore::new(0));
        let go = Arc::new(Semaphore::new(0));
        let hs: Vec<_> = (0..n)
            .map(|k| {
                let (connecting, round1, go) = (connecting.clone(), round1.clone(), go.clone());
                let (errors, echoed) = (errors.clone(), echoed.clone());
                Builder::new()
                    .spawn(move || {
                        let attempt = || -> std::io::Result<()> {
                            connecting.acquire();
                            let c = TcpStream::connect(("127.0.0.1", port));
                            connecting.release();
                            let mut c = c?;
                            c.set_nodelay(true)?;
                            for r in 0..2u8 {
                                if r == 1 {
                                    round1.release();
                                    go.acquire();
                                }
                                let m = message(k, r);
                                c.write_all(&m)?;
                                let mut back = [0u8; MSG];
                                c.read_exact(&mut back)?;
                                if back != m {
                                    return Err(std::io::Error::other("wrong echo"));
                                }
                                echoed.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(())
                        };
                        if let Err(e) = attempt() {
                            if errors.fetch_add(1, Ordering::Relaxed) < 5 {
                                uthread::synchronize(|| eprintln!("client {k}: {e}"));
                            }
                            round1.release();
                        }
                    })
                    .unwrap()
            })
            .collect();
        for _ in 0..n {
            round1.acquire();
        }
        println!("ready");
        std::io::stdout().flush().unwrap();
        // Wait for "go" without blocking the carrier.
        let stdin = std::io::stdin();
        uthread::io::wait_readable(stdin.as_fd(), None).unwrap();
        let mut line = String::new();
        stdin.lock().read_line(&mut line).unwrap();
        for _ in 0..n {
            go.release();
        }
        for h in hs {
            h.join();
        }
    });
    println!(
        "errors={} echoed={}",
        errors.load(Ordering::Relaxed),
        echoed.load(Ordering::Relaxed)
    );
}

/// Entry point of the child process (a no-op in a normal test run).
#[test]
fn c10k_child_entry() {
    if let Ok(port) = std::env::var(CHILD_ENV) {
        client(port.parse().unwrap(), conns());
    }
}

#[test]
fn ten_thousand_connections_echoed_by_green_threads() {
    let n = conns();
    let need = n as u64 + 256;
    let limit = raise_nofile();
    if limit < need {
        eprintln!(
            "SKIPPED: {n} connections need about {need} descriptors per process, but \
             RLIMIT_NOFILE is {limit} even after raising the soft limit to the hard one \
             (raise the hard limit, e.g. `ulimit -Hn {need}` or LimitNOFILE= in systemd)"
        );
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let rt = Runtime::builder().stack_size(32 * 1024).build().unwrap();
    let (rss_before, rss_peak, served, errors, child_report) = rt.block_on(move || {
        // Warm up the paths a connection takes, then measure from here.
        drop(uthread::spawn(|| ()).join());
        let rss_before = rss_bytes();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "c10k_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut to_child = child.stdin.take().unwrap();
        let errors = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let mut handlers = Vec::with_capacity(n);
        for _ in 0..n {
            let (mut s, _) = listener.accept().unwrap();
            let (errors, served) = (errors.clone(), served.clone());
            handlers.push(uthread::spawn(move || {
                let mut buf = [0u8; 256];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => return,
                        Ok(k) => {
                            if s.write_all(&buf[..k]).is_err() {
                                errors.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                            served.fetch_add(k, Ordering::Relaxed);
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                }
            }));
        }
        // Every connection is accepted and has a green thread; wait for round 1, then
        // measure with all of them parked in `read`.
        // One `read` per readiness, so the carrier never blocks on the pipe (the child's test
        // harness prints its own text, partial lines included, around ours).
        let mut seen = String::new();
        while !seen.contains("ready\n") {
            uthread::io::wait_readable(out.as_fd(), None).unwrap();
            let mut chunk = [0u8; 512];
            let k = out.read(&mut chunk).unwrap();
            assert!(k > 0, "the client ended early: {seen}");
            seen.push_str(&String::from_utf8_lossy(&chunk[..k]));
        }
        let rss_peak = rss_bytes();
        to_child.write_all(b"go\n").unwrap();
        for h in handlers {
            h.join();
        }
        let mut report = String::new();
        out.read_to_string(&mut report).unwrap();
        assert!(child.wait().unwrap().success(), "client failed: {report}");
        let report = report
            .lines()
            .find(|l| l.starts_with("errors="))
            .unwrap_or("no report")
            .to_string();
        (
            rss_before,
            rss_peak,
            served.load(Ordering::Relaxed),
            errors.load(Ordering::Relaxed),
            report,
        )
    });
    let growth = rss_peak.saturating_sub(rss_before);
    eprintln!(
        "c10k: {n} connections, {served} bytes echoed, {errors} server errors; client: {}; \
         server RSS +{:.1} MiB = {:.1} KiB per connection (bar: 20 KiB); {:?}",
        child_report.trim(),
        growth as f64 / (1 << 20) as f64,
        growth as f64 / n as f64 / 1024.0,
        rt.stats()
    );
    assert_eq!(errors, 0);
    assert_eq!(served, n * MSG * 2);
    assert!(
        child_report.contains(&format!("errors=0 echoed={}", 2 * n)),
        "{child_report}"
    );
}
