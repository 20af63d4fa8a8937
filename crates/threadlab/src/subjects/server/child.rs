//! A design served by a `threadlab serve` child process instead of the lab's own: for the
//! connection-scale step, where both ends of 10,000 connections in one process would need more
//! descriptors than RLIMIT_NOFILE allows without privilege. Ended (and reaped, with its
//! descendants) when dropped.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::Supervised;
use crate::measure::spawn::start_refused;

use super::shared::{cpu_set, ServerConfig};
use super::{Counts, DesignInfo, Server};

/// A server this process does not run: a `threadlab serve` child (its process, ended when
/// dropped), or a server on another host (`threadlab run server --target`).
struct Elsewhere {
    info: &'static DesignInfo,
    addr: SocketAddr,
    process: Option<Supervised>,
}

/// The server at `addr` on another host, known by the design it answers as.
pub fn remote(info: &'static DesignInfo, addr: SocketAddr) -> Box<dyn Server> {
    Box::new(Elsewhere {
        info,
        addr,
        process: None,
    })
}

/// Starts `threadlab serve --design <design>` on loopback, pinned to `cfg.cpus`.
pub fn spawn(
    design: &'static DesignInfo,
    cfg: &ServerConfig,
    cancel: &Cancel,
) -> Result<Box<dyn Server>> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Skip(format!("cannot find threadlab's own executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "--design", design.name, "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(mask) = cpu_set(&cfg.cpus) {
        // SAFETY: the hook runs between fork and exec and only calls sched_setaffinity, which
        // is async-signal-safe, on a mask computed before the fork.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask);
                Ok(())
            });
        }
    }
    let process = Supervised::spawn(
        &mut cmd,
        &format!("threadlab serve --design {}", design.name),
    )
    .map_err(|e| start_refused("cannot start `threadlab serve`", &e))?;
    let line = process
        .stderr()
        .first_line(cancel, Duration::from_secs(10))?
        .ok_or_else(|| {
            let said = process.stderr().text();
            Error::Fail(format!(
                "`threadlab serve --design {}` did not start{}",
                design.name,
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            ))
        })?;
    let addr = parse_listening(&line)?;
    Ok(Box::new(Elsewhere {
        info: design,
        addr,
        process: Some(process),
    }))
}

/// "threadlab serve: epoll listening on 127.0.0.1:4000 (...)" -> the address.
pub fn parse_listening(line: &str) -> Result<SocketAddr> {
    line.split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| Error::Fail(format!("`threadlab serve` said: {}", line.trim())))
}

impl Server for Elsewhere {
    fn info(&self) -> &'static DesignInfo {
        self.info
    }
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    fn counts(&self) -> Counts {
        Counts::default()
    }
    fn program_pid(&self) -> Option<libc::pid_t> {
        self.process.as_ref().map(|p| p.child.id() as libc::pid_t)
    }
    fn is_remote(&self) -> bool {
        self.process.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serve_banner_gives_the_address() {
        let l =
            "threadlab serve: epoll listening on 127.0.0.1:4000 (one thread); Ctrl-C stops it\n";
        assert_eq!(
            parse_listening(l).unwrap(),
            "127.0.0.1:4000".parse().unwrap()
        );
        assert!(parse_listening("threadlab: unknown design").is_err());
    }
}
