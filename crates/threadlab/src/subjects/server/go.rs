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
use crate::measure::spawn::start_refused;
use crate::subjects::go_build::{build, Built};

use super::protocol::{
    encode_request, parse_response, Request, ServerStats, KIND_STATS, RESPONSE_HEADER,
    STATS_PAYLOAD,
};
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
    _built: std::sync::Arc<Built>,
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
        .stderr(Stdio::piped());
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
        .map_err(|e| start_refused("cannot start the Go server", &e))?;
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
            Ok(l) if !l.is_empty() => break l,
            // It closed stdout without a word: it ended; its stderr says why.
            Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(go_server_failed(&mut process, "ended before it listened"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) if began.elapsed() < START_LIMIT => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(go_server_failed(
                    &mut process,
                    "did not say where it listens within 10 s",
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

/// Why the Go server did not start, with what it said on stderr (a port in use, a privileged
/// port: Go's own words).
fn go_server_failed(process: &mut Supervised, what: &str) -> Error {
    let _ = process.exit_within(Duration::from_millis(500));
    process.stderr().wait_closed(Duration::from_millis(200));
    let said = process.stderr().text();
    Error::Fail(format!(
        "the Go server {what}{}",
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    ))
}

/// One STATS exchange with a server of this host listening on `addr` (a wildcard address is
/// reached through loopback), within a second.
pub fn ask_stats(addr: SocketAddr) -> Option<ServerStats> {
    use std::io::{Read, Write};
    let mut to = addr;
    if to.ip().is_unspecified() {
        to.set_ip(match to {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let limit = Duration::from_secs(1);
    let mut s = std::net::TcpStream::connect_timeout(&to, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.set_write_timeout(Some(limit)).ok()?;
    s.write_all(&encode_request(&Request::stats(0))).ok()?;
    let mut reply = [0u8; RESPONSE_HEADER + STATS_PAYLOAD];
    s.read_exact(&mut reply).ok()?;
    let h = parse_response(reply[..RESPONSE_HEADER].try_into().ok()?).ok()?;
    if h.kind != KIND_STATS {
        return None;
    }
    ServerStats::decode(&reply[RESPONSE_HEADER..])
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
    /// The program keeps its own counters: read with a STATS request (zero when it does not
    /// answer within a second).
    fn counts(&self) -> Counts {
        ask_stats(self.addr)
            .map(|s| Counts {
                served: s.served,
                rejected: s.rejected,
                errors: s.errors,
                connections_open: s.connections_open,
                threads_alive: s.threads,
                ..Counts::default()
            })
            .unwrap_or_default()
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
