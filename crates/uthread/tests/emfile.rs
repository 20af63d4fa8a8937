//! Out of descriptors in `accept` (`EMFILE`): the listener must not busy-loop.
//!
//! Descriptor limits are per process, so the server runs in a child process (this test binary
//! re-executed) with `RLIMIT_NOFILE` = 64, and the clients in the parent. The child's accept
//! loop is the naive one (`loop { match accept() { .. } }`): it keeps every connection it
//! accepts, so it soon runs out, and then keeps calling `accept` for one second. A busy loop
//! would return `EMFILE` hundreds of thousands of times in that second; the listener's pause
//! (10 ms doubling to 160 ms) allows about a dozen. Then the child frees its connections and
//! must accept again. The test asserts counts, not durations.
//!
//! A runtime's own descriptors (its poller) are refused the same way: `prepare` and
//! `try_block_on` must say so as an error, and work once descriptors are free again.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use uthread::net::TcpListener;

const CHILD_ENV: &str = "UTHREAD_EMFILE_CHILD";
const PREPARE_ENV: &str = "UTHREAD_EMFILE_PREPARE_CHILD";
const CLIENTS: usize = 200;

/// RLIMIT_NOFILE 64 (soft and hard), for the child process that calls it.
fn limit_descriptors_to_64() {
    // SAFETY: setrlimit with a valid rlimit struct, in this (child) process only.
    unsafe {
        let r = libc::rlimit {
            rlim_cur: 64,
            rlim_max: 64,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
    }
}

fn server() {
    limit_descriptors_to_64();
    uthread::run(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        println!("port={}", l.local_addr().unwrap().port());
        let mut held = Vec::new();
        let (mut emfile, mut other) = (0u64, 0u64);
        let mut window_end = None;
        // The naive loop, for one second past the first EMFILE.
        while window_end.map_or(true, |end| Instant::now() < end) {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                    emfile += 1;
                    window_end.get_or_insert_with(|| Instant::now() + Duration::from_secs(1));
                }
                Err(_) => other += 1,
            }
        }
        let held_at_limit = held.len();
        // Descriptors are free again: accepting works again.
        held.clear();
        l.set_accept_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut after = 0;
        while after < 10 {
            match l.accept() {
                Ok((s, _)) => {
                    after += 1;
                    held.push(s);
                }
                Err(e) => {
                    println!("after recovery: {e}");
                    break;
                }
            }
        }
        println!("report emfile={emfile} other={other} held={held_at_limit} after={after}");
    });
}

/// Entry point of the child process (a no-op in a normal test run).
#[test]
fn emfile_child_entry() {
    if std::env::var(CHILD_ENV).is_ok() {
        server();
    }
}

#[test]
fn emfile_in_accept_does_not_busy_loop() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "emfile_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let port: u16 = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child ended early");
        if let Some(p) = line.trim().split("port=").nth(1) {
            break p.parse().unwrap();
        }
    };
    // More clients than the child has descriptors; connections wait in the backlog.
    let clients: Vec<_> = (0..CLIENTS)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "child failed:\n{rest}");
    let report = rest
        .lines()
        .find_map(|l| l.split("report ").nth(1))
        .unwrap_or_else(|| panic!("no report:\n{rest}"))
        .to_string();
    let field = |name: &str| -> u64 {
        report
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in {report}"))
    };
    eprintln!("emfile: {report}; {} clients connected", clients.len());
    assert!(field("emfile") > 0, "the limit was never hit: {report}");
    // A busy loop returns EMFILE ~10^5 times a second here; the paced one ~a dozen.
    assert!(field("emfile") < 100, "accept spun on EMFILE: {report}");
    assert_eq!(field("after"), 10, "accept did not recover: {report}");
    assert!(field("held") > 0);
}

/// In the child: every descriptor up to the limit taken, then a runtime asked to start.
fn runtime_without_descriptors() {
    limit_descriptors_to_64();
    let mut held = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("open /dev/null: {e}"),
        }
    }
    let rt = uthread::Runtime::new();
    let prepared = rt.prepare().map_err(|e| e.raw_os_error());
    let entered = match rt.try_block_on(|| 7) {
        Err(uthread::RunError::Io(e)) => format!("io:{}", e.raw_os_error().unwrap_or(0)),
        Err(e) => format!("other:{e}"),
        Ok(v) => format!("ran:{v}"),
    };
    // Descriptors free again: the same runtime starts.
    held.truncate(held.len().saturating_sub(4));
    let again = rt.prepare().is_ok();
    let ran = rt.block_on(|| 7);
    println!(
        "report prepared={prepared:?} entered={entered} again={again} ran={ran} emfile={}",
        libc::EMFILE
    );
}

/// Entry point of the second child process (a no-op in a normal test run).
#[test]
fn prepare_child_entry() {
    if std::env::var(PREPARE_ENV).is_ok() {
        runtime_without_descriptors();
    }
}

#[test]
fn a_runtime_short_of_descriptors_says_so_and_starts_later() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "prepare_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PREPARE_ENV, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{text}");
    let report = text
        .lines()
        .find_map(|l| l.split("report ").nth(1))
        .unwrap_or_else(|| panic!("no report:\n{text}"));
    let e = libc::EMFILE;
    assert!(
        report.contains(&format!("prepared=Err(Some({e}))")),
        "{report}"
    );
    assert!(report.contains(&format!("entered=io:{e} ")), "{report}");
    assert!(report.contains("again=true ran=7"), "{report}");
}
