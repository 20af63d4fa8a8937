//! `go`: a peer in the same run. `echo.go` (a goroutine per connection on Go's netpoller) is
//! built at run time with the local toolchain and started as a child program pinned to the
//! server CPUs with GOMAXPROCS = their number; skipped with the reason when there is no Go.
//! Its CPU, memory and threads are known through the protocol's STATS frame.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::Supervised;
use crate::subjects::go_build::{build, Built};

use super::shared::{cpu_set, ServerConfig};
use super::{unbounded, Counts, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "go",
    id: 10,
    model: Model::Runtime,
    summary: "Go, a goroutine per connection on the netpoller (GOMAXPROCS = server CPUs); built at run time, a child program",
    start,
    holds: unbounded,
};

const PROGRAM: &str = include_str!("echo.go");
const START_LIMIT: Duration = Duration::from_secs(10);

struct GoServer {
    // Field order is drop order: stdin closes (the program exits on EOF), then the guard kills
    // and reaps whatever is left, then the build folder goes.
    _stdin: ChildStdin,
    process: Supervised,
    _built: Built,
    addr: SocketAddr,
}

fn start(cfg: &ServerConfig, cancel: &Cancel) -> Result<Box<dyn Server>> {
    let built = build(
        PROGRAM,
        "threadlabserver",
        "server",
        "the Go server",
        cancel,
    )?;

    let mut run = Command::new(&built.exe);
    run.args([
        "-listen",
        &cfg.listen.to_string(),
        "-max-payload",
        &cfg.max_payload.to_string(),
        "-deadline-ms",
        &cfg.frame_deadline.as_millis().to_string(),
        "-idle-ms",
        &cfg.idle_timeout.as_millis().to_string(),
        "-design-id",
        &DESIGN.id.to_string(),
        "-max-conns",
        &cfg.max_connections.to_string(),
    ]);
    if cfg.allow_remote_stats {
        run.arg("-allow-remote-stats");
    }
    run.env("GOMAXPROCS", cfg.cpus.len().max(1).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(mask) = cpu_set(&cfg.cpus) {
        // SAFETY: the hook runs between fork and exec and only calls sched_setaffinity, which
        // is async-signal-safe, on a mask computed before the fork.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut run, move || {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask);
                Ok(())
            });
        }
    }
    let mut process = Supervised::spawn(&mut run, "the Go server")
        .map_err(|e| Error::Skip(format!("cannot start the Go server: {e}")))?;
    let stdin = process.child.stdin.take().expect("stdin was piped");
    let stdout = process.child.stdout.take().expect("stdout was piped");
    // The first line says where it listens; read it on a helper thread so that a program that
    // never prints cannot hang the lab.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let began = Instant::now();
    let line = loop {
        cancel.check()?;
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(l) => break l,
            Err(mpsc::RecvTimeoutError::Timeout) if began.elapsed() < START_LIMIT => {}
            Err(_) => {
                return Err(Error::Fail(
                    "the Go server did not say where it listens".into(),
                ))
            }
        }
    };
    let addr = parse_listening(&line)?;
    Ok(Box::new(GoServer {
        _stdin: stdin,
        process,
        _built: built,
        addr,
    }))
}

/// "listening 127.0.0.1:41234" -> the address.
pub fn parse_listening(line: &str) -> Result<SocketAddr> {
    line.trim()
        .strip_prefix("listening ")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            Error::Fail(format!(
                "unexpected first line from the Go server: {line:?}"
            ))
        })
}

impl Server for GoServer {
    fn info(&self) -> &'static DesignInfo {
        &DESIGN
    }
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// The program keeps its own counters; read them with STATS.
    fn counts(&self) -> Counts {
        Counts::default()
    }
    fn program_pid(&self) -> Option<libc::pid_t> {
        Some(self.process.child.id() as libc::pid_t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_gives_the_address() {
        assert_eq!(
            parse_listening("listening 127.0.0.1:4000\n").unwrap(),
            "127.0.0.1:4000".parse().unwrap()
        );
        assert!(parse_listening("hello").is_err());
        assert!(parse_listening("listening nowhere").is_err());
    }
}
