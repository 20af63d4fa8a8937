//! Go's goroutines: `bench.go`, built at run time with the local toolchain and driven batch by
//! batch over a pipe, so its rows are sampled by the lab's own sampler, interleaved with the
//! others (see bench.go for the protocol).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::Supervised;

const GO_PROGRAM: &str = include_str!("bench.go");

/// How long a build may take (a cold Go cache compiles the runtime: about 15 s here).
const BUILD_LIMIT: Duration = Duration::from_secs(300);

/// Which goroutine batch to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoBench {
    Spawn,
    Yield,
}

impl GoBench {
    fn word(self) -> &'static str {
        match self {
            GoBench::Spawn => "spawn",
            GoBench::Yield => "yield",
        }
    }
}

/// A folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The running Go peer: batches are asked for one at a time. Dropping it ends the program and
/// removes its build folder.
pub struct GoPeer {
    // Field order is drop order: the program ends before its folder is removed.
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    process: Supervised,
    _dir: TempDir,
}

impl GoPeer {
    /// Builds bench.go and starts it with GOMAXPROCS=1. `Err(Skip)` when there is no usable Go
    /// toolchain, with what was found; a build interrupted by a signal is `Err(Cancelled)`.
    pub fn start(cancel: &Cancel) -> Result<GoPeer> {
        check_toolchain()?;
        let dir =
            TempDir(std::env::temp_dir().join(format!("threadlab-go-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir.0);
        std::fs::create_dir_all(&dir.0).map_err(|e| {
            Error::Skip(format!(
                "cannot make a build folder for the Go peer in {}: {e}",
                dir.0.display()
            ))
        })?;
        std::fs::write(dir.0.join("go.mod"), "module threadlabpeer\n\ngo 1.21\n")?;
        std::fs::write(dir.0.join("main.go"), GO_PROGRAM)?;
        let exe = dir.0.join("peer");
        let mut build = go_command(&dir.0);
        build
            .arg("build")
            .arg("-o")
            .arg(&exe)
            .arg(".")
            .current_dir(&dir.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut builder = Supervised::spawn(&mut build, "`go build` of the Go peer")
            .map_err(|e| Error::Skip(format!("cannot run `go build`: {e}")))?;
        let status = builder.wait(cancel, BUILD_LIMIT)?;
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = builder.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(Error::Skip(format!(
                "`go build` of the peer program failed ({status}): {}",
                err.trim()
            )));
        }
        let mut run = Command::new(&exe);
        run.env("GOMAXPROCS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut process = Supervised::spawn(&mut run, "the Go peer program")
            .map_err(|e| Error::Skip(format!("cannot start the Go peer program: {e}")))?;
        let stdin = process.child.stdin.take().expect("stdin was piped");
        let stdout = BufReader::new(process.child.stdout.take().expect("stdout was piped"));
        Ok(GoPeer {
            stdin,
            stdout,
            process,
            _dir: dir,
        })
    }

    /// Runs one batch of `n` operations in the Go program; the time it measured itself.
    pub fn batch(&mut self, bench: GoBench, n: u64) -> Result<Duration> {
        let lost =
            |e: std::io::Error| Error::Fail(format!("the Go peer program stopped answering: {e}"));
        writeln!(self.stdin, "{} {n}", bench.word()).map_err(lost)?;
        self.stdin.flush().map_err(lost)?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line).map_err(lost)? == 0 {
            let status = self.process.child.try_wait().ok().flatten();
            return Err(Error::Fail(format!(
                "the Go peer program ended unexpectedly ({})",
                status.map_or("still running".to_string(), |s| s.to_string())
            )));
        }
        parse_ns(&line).map(Duration::from_nanos)
    }
}

/// One answer of the Go peer: the batch's time in whole nanoseconds.
pub fn parse_ns(line: &str) -> Result<u64> {
    line.trim().parse::<u64>().map_err(|_| {
        Error::Fail(format!(
            "unexpected answer from the Go peer program: {line:?}"
        ))
    })
}

/// `go version` works, or the reason it does not, in words that name what was found.
fn check_toolchain() -> Result<()> {
    match Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(Error::Skip(format!(
            "`go version` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Skip(
            "no Go toolchain on PATH (install Go >= 1.21 to measure goroutines)".into(),
        )),
        Err(e) => Err(Error::Skip(format!("cannot run `go version`: {e}"))),
    }
}

/// `go` with a self-contained, offline environment: the local toolchain only, module mode, and
/// a cache and GOPATH in `dir` when the user's are missing or not writable (no HOME under some
/// CI runners; another user's HOME when run with changed credentials), so the build does not
/// fail for a reason that has nothing to do with Go.
fn go_command(dir: &Path) -> Command {
    let mut c = Command::new("go");
    c.env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "on")
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cache_home = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cache")));
    if std::env::var_os("GOCACHE").is_none()
        && !cache_home.is_some_and(|d| usable_dir(&d.join("go-build")))
    {
        c.env("GOCACHE", dir.join("cache"));
    }
    if std::env::var_os("GOPATH").is_none() && !home.is_some_and(|h| usable_dir(&h.join("go"))) {
        c.env("GOPATH", dir.join("gopath"));
    }
    c
}

/// The folder exists (or can be made) and this process may write in it.
fn usable_dir(d: &Path) -> bool {
    if std::fs::create_dir_all(d).is_err() {
        return false;
    }
    let Ok(c) = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_whole_nanoseconds() {
        assert_eq!(parse_ns("12345\n").unwrap(), 12345);
        assert!(parse_ns("").is_err());
        assert!(parse_ns("1.5").is_err());
        assert!(parse_ns("ns 10").is_err());
    }

    #[test]
    fn the_go_peer_runs_batches_or_is_skipped_with_a_reason() {
        let cancel = Cancel::never();
        match GoPeer::start(&cancel) {
            Ok(mut peer) => {
                let spawn = peer.batch(GoBench::Spawn, 100).unwrap();
                let yields = peer.batch(GoBench::Yield, 100).unwrap();
                assert!(spawn > Duration::ZERO && yields > Duration::ZERO);
            }
            Err(Error::Skip(reason)) => assert!(!reason.is_empty()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn an_interrupted_build_is_cancelled_not_failed() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGTERM);
        match GoPeer::start(&cancel) {
            Err(Error::Cancelled(s)) => assert_eq!(s, libc::SIGTERM),
            // No toolchain: skipped before any build starts.
            Err(Error::Skip(_)) => {}
            Ok(_) => panic!("a build started under a pending signal must stop"),
            Err(e) => panic!("{e}"),
        }
    }
}
