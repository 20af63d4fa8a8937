//! `threadlab serve` as a user meets it: the designs its help lists, the addresses it takes,
//! the summary it prints, and the programs it runs for the Go design (a `go` that hangs, a port
//! the Go server cannot have). Deadlines are generous ("it hung"), never timings.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use threadlab::subjects::server::DESIGNS;

mod common;
use common::*;

/// `threadlab serve` started with `args`: the process, its first stderr line (the banner or
/// the error), and the rest of its stderr, read to the end on a thread (so it never blocks).
fn serve(args: &[&str]) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut child = threadlab()
        .arg("serve")
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let _ = err.read_line(&mut line);
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        rest
    });
    (child, line, rest)
}

/// Waits for `child` to end within `limit`, killing it if it does not: whether it ended.
fn ended_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: a signal to our own child process.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

#[test]
fn serve_help_lists_every_design_of_the_registry() {
    let o = run(&["serve", "--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    for d in DESIGNS {
        assert!(help.contains(d.name), "serve --help leaves out {}", d.name);
    }
    let o = run(&["serve", "--design", "nonesuch"]);
    assert_one_line_usage_error(&o, "green");
}

#[test]
fn serve_listens_on_a_host_name_and_refuses_one_that_does_not_resolve() {
    let (mut child, line, _) = serve(&["--design", "epoll", "--listen", "localhost:0"]);
    assert!(line.contains("listening on"), "{line}");
    signal(&child, libc::SIGTERM);
    let status = ended_within(&mut child, Duration::from_secs(10)).expect("serve hung");
    assert!(status.success(), "{status}");
    let o = run(&[
        "serve",
        "--design",
        "epoll",
        "--listen",
        "no-such-host.invalid:7878",
    ]);
    assert_one_line_usage_error(&o, "--listen");
}

#[test]
fn a_go_on_path_that_hangs_does_not_keep_serve_from_stopping() {
    let dir = scratch("hanging-go");
    let go = dir.join("go");
    std::fs::write(&go, "#!/bin/sh\nexec sleep 600\n").unwrap();
    std::fs::set_permissions(&go, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", dir.display());
    let mut c = threadlab();
    c.args(["serve", "--design", "go", "--listen", "127.0.0.1:0"])
        .env("PATH", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, libc::SIGTERM);
    let status = ended_within(&mut child, Duration::from_secs(5));
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let status = status.unwrap_or_else(|| panic!("serve ignored SIGTERM while `go` hung: {err}"));
    assert_eq!(status.code(), Some(143), "{err}");
    // No `sleep` left behind.
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_go_server_says_why_it_cannot_listen_and_counts_what_it_served() {
    let no_go = std::process::Command::new("go")
        .arg("version")
        .output()
        .map_or(true, |o| !o.status.success());
    if no_go {
        eprintln!("skipped: no Go toolchain");
        return;
    }
    // A port in use: Go's own words, not an empty first line.
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let o = run(&[
        "serve",
        "--design",
        "go",
        "--listen",
        &format!("127.0.0.1:{port}"),
    ]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("address already in use"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    drop(held);
    // Requests served are counted in the stop summary.
    let (mut child, line, rest) = serve(&["--design", "go", "--listen", "127.0.0.1:0"]);
    let addr: SocketAddr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    let pat = threadlab::subjects::server::protocol::pattern(4096);
    let mut ex = threadlab::experiments::server::client::Exchange::new(&pat, 64);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for seq in 1..=25 {
        ex.roundtrip(&mut s, seq, 9, false, (0, 0)).unwrap();
    }
    drop(s);
    signal(&child, libc::SIGINT);
    let status = ended_within(&mut child, Duration::from_secs(10)).expect("serve hung");
    let summary = rest.join().unwrap();
    assert!(status.success(), "{summary}");
    assert!(summary.contains("25 requests served"), "{summary}");
}
