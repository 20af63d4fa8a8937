//! Go's goroutines: `bench.go`, built at run time with the local toolchain and driven batch by
//! batch over a pipe, so its rows are sampled by the lab's own sampler, interleaved with the
//! others (see bench.go for the protocol).

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::Supervised;
use crate::measure::spawn::start_refused;
use crate::subjects::go_build::{build, Built};

use super::{BalanceNotes, Peer, PeerInfo, Running};

const GO_PROGRAM: &str = include_str!("bench.go");

pub struct Go;

const INFO: PeerInfo = PeerInfo {
    name: "go",
    title: "Go",
    one: "a goroutine",
    many: "goroutines",
    floor: false,
    slow_start: true,
    own_process: true,
    spawn: "Go, GOMAXPROCS=1: `go` of a goroutine that calls wg.Done(), then wg.Wait(), one at a \
            time; the Go program (built at run time, inheriting the CPU) times each batch and the \
            lab's sampler asks for them, interleaved with the other rows; a runtime.GC() after each \
            batch, untimed, so no collection runs on into the next row; nothing subtracted",
    spawn_unpinned: None,
    yields: "Go, GOMAXPROCS=1: two goroutines alternate runtime.Gosched(); per switch = batch \
             time / number of Gosched calls; the Go program (built at run time, on the same CPU) \
             times each batch and the lab's sampler asks for them, interleaved with the other \
             rows; a runtime.GC() after each batch, untimed; nothing subtracted",
    chan: Some(
        "Go, GOMAXPROCS=1: two goroutines pass a value back and forth over two unbuffered \
         channels; per message; the Go program (built at run time, on the same CPU) times each \
         batch, interleaved with the other rows; a runtime.GC() after each batch, untimed, so \
         no collection runs on into the next row's batch",
    ),
    balance: Some(BalanceNotes {
        burst: "Go, GOMAXPROCS=2 (the program allowed on both CPUs, not pinned per P): \
                goroutines and a WaitGroup",
        tree: "Go, GOMAXPROCS=2, a WaitGroup per inner goroutine",
    }),
};

impl Peer for Go {
    fn info(&self) -> &'static PeerInfo {
        &INFO
    }

    fn start(&self, cancel: &Cancel) -> Result<Box<dyn Running>> {
        Ok(Box::new(GoPeer::start(cancel, PROGRAMS)?))
    }

    /// One program: its burst and tree batches set GOMAXPROCS=2 themselves, on the CPUs it
    /// inherits.
    fn start_on_two(&self, cancel: &Cancel, _cpus: (usize, usize)) -> Result<Box<dyn Running>> {
        Ok(Box::new(GoPeer::start(cancel, 1)?))
    }
}

/// How many copies of the program a group's rows run in, taken in turn trial by trial
/// (`Running::use_program`).
///
/// Why: a Go program's `yield` batches fall at two levels, about 55 and 75-80 ns per switch,
/// and in the lab a program tends to stay at one. Run back to back outside the lab, 11 of 12
/// programs moved between the two from batch to batch; in the lab, where a collection and
/// seconds of other rows follow each batch, the four trials of one program read 79.2-86.8 ns
/// and the other two programs' 55.2-61.1 in the same run, and with one program per group whole
/// runs read 65.0-98.8 ns (5 of 92 quick runs, against 56.4-61.1 from the 10th to the 90th
/// percentile). With three, a run's median is a slow level only when two of its three programs
/// keep one. Two idle programs beside the lab did not move `create.thread.unpinned` (38.6-39.9
/// us with them, 39.8-40.9 without, alternated three times), unlike a program started at every
/// trial (docs/compare.md).
pub const PROGRAMS: usize = 3;

impl Running for GoPeer {
    fn spawn_join(&mut self, n: u64) -> Result<Duration> {
        self.batch(GoBench::Spawn, n)
    }

    fn yield_switch(&mut self, n: u64) -> Result<Duration> {
        self.batch(GoBench::Yield, n)
    }

    fn chan(&mut self, n: u64) -> Result<Duration> {
        self.batch(GoBench::Chan, n)
    }

    fn burst(&mut self, size: u64, n: u64) -> Result<Duration> {
        self.batches(GoBench::Burst, size, n)
    }

    fn tree(&mut self, depth: u32, n: u64) -> Result<Duration> {
        self.batches(GoBench::Tree, u64::from(depth), n)
    }

    fn programs(&self) -> usize {
        self.programs.len()
    }

    fn use_program(&mut self, k: usize) {
        self.current = k % self.programs.len();
    }
}

/// Which goroutine batch to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoBench {
    Spawn,
    Yield,
    /// Ping-pong over unbuffered channels, per message.
    Chan,
    /// One burst of `n` goroutines with GOMAXPROCS=2 (`n` is the burst's size).
    Burst,
    /// One fan-out/fan-in tree of depth `n` with GOMAXPROCS=2.
    Tree,
}

impl GoBench {
    fn word(self) -> &'static str {
        match self {
            GoBench::Spawn => "spawn",
            GoBench::Yield => "yield",
            GoBench::Chan => "chan",
            GoBench::Burst => "burst",
            GoBench::Tree => "tree",
        }
    }
}

/// The running Go peer: one build, started as one or more programs; batches are asked for one
/// at a time, of the program `use_program` chose. Dropping it ends the programs and removes the
/// build folder.
pub struct GoPeer {
    // Field order is drop order: the programs end before their folder is removed.
    programs: Vec<GoProgram>,
    current: usize,
    _built: std::sync::Arc<Built>,
}

/// One running copy of the program.
struct GoProgram {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    process: Supervised,
}

impl GoPeer {
    /// Builds bench.go and starts it `programs` times (at least once) with GOMAXPROCS=1.
    /// `Err(Skip)` when there is no usable Go toolchain, with what was found; a build
    /// interrupted by a signal is `Err(Cancelled)`.
    pub fn start(cancel: &Cancel, programs: usize) -> Result<GoPeer> {
        let built = build(
            GO_PROGRAM,
            "threadlabpeer",
            "peer",
            "the Go peer program",
            cancel,
        )?;
        let programs = (0..programs.max(1))
            .map(|_| GoProgram::start(&built))
            .collect::<Result<Vec<_>>>()?;
        Ok(GoPeer {
            programs,
            current: 0,
            _built: built,
        })
    }

    /// Runs one batch of `n` operations in the current program; the time it measured itself.
    pub fn batch(&mut self, bench: GoBench, n: u64) -> Result<Duration> {
        self.programs[self.current].batch(bench, n)
    }

    /// `n` batches of `bench`, each of argument `arg` (a burst's size, a tree's depth).
    fn batches(&mut self, bench: GoBench, arg: u64, n: u64) -> Result<Duration> {
        let mut took = Duration::ZERO;
        for _ in 0..n {
            took += self.batch(bench, arg)?;
        }
        Ok(took)
    }
}

impl GoProgram {
    fn start(built: &Built) -> Result<GoProgram> {
        let mut run = Command::new(&built.exe);
        run.env("GOMAXPROCS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut process = Supervised::spawn(&mut run, "the Go peer program")
            .map_err(|e| start_refused("cannot start the Go peer program", &e))?;
        let stdin = process.child.stdin.take().expect("stdin was piped");
        let stdout = BufReader::new(process.child.stdout.take().expect("stdout was piped"));
        Ok(GoProgram {
            stdin,
            stdout,
            process,
        })
    }

    /// One batch of `n` operations; the time the program measured itself. A program that a
    /// terminal's signal ended (it shares the lab's process group) is `Cancelled`, not a
    /// failure: the same signal reaches the lab an instant later.
    fn batch(&mut self, bench: GoBench, n: u64) -> Result<Duration> {
        let sent = writeln!(self.stdin, "{} {n}", bench.word()).and_then(|_| self.stdin.flush());
        if let Err(e) = sent {
            return Err(self.lost(format!("the Go peer program stopped answering: {e}")));
        }
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err(self.lost("the Go peer program ended unexpectedly".into())),
            Ok(_) => parse_ns(&line).map(Duration::from_nanos),
            Err(e) => Err(self.lost(format!("the Go peer program stopped answering: {e}"))),
        }
    }

    /// The error for a peer that went away: `Cancelled` when an interrupting signal ended it,
    /// otherwise `what` with its exit status.
    fn lost(&mut self, what: String) -> Error {
        use std::os::unix::process::ExitStatusExt;
        // It closed its pipes; give it a moment to finish exiting so its status says why.
        let status = self.process.exit_within(Duration::from_millis(200));
        match status {
            Some(s)
                if s.signal()
                    .is_some_and(|g| crate::cancel::SIGNALS.contains(&g)) =>
            {
                Error::Cancelled(s.signal().unwrap_or(libc::SIGTERM))
            }
            Some(s) => Error::Fail(format!("{what} ({s})")),
            None => Error::Fail(format!("{what} (still running)")),
        }
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
        match GoPeer::start(&cancel, PROGRAMS) {
            Ok(mut peer) => {
                assert_eq!(peer.programs(), PROGRAMS);
                let pids: std::collections::BTreeSet<u32> =
                    peer.programs.iter().map(|p| p.process.child.id()).collect();
                assert_eq!(pids.len(), PROGRAMS, "as many processes as programs");
                for k in 0..PROGRAMS + 1 {
                    peer.use_program(k);
                    assert_eq!(peer.current, k % PROGRAMS, "taken in turn, round and round");
                    let spawn = peer.batch(GoBench::Spawn, 100).unwrap();
                    let yields = peer.batch(GoBench::Yield, 100).unwrap();
                    let chans = peer.batch(GoBench::Chan, 100).unwrap();
                    assert!(
                        spawn > Duration::ZERO
                            && yields > Duration::ZERO
                            && chans > Duration::ZERO
                    );
                }
            }
            Err(Error::Skip(reason)) => assert!(!reason.is_empty()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn an_interrupted_build_is_cancelled_not_failed() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGTERM);
        match GoPeer::start(&cancel, 1) {
            Err(Error::Cancelled(s)) => assert_eq!(s, libc::SIGTERM),
            // No toolchain: skipped before any build starts.
            Err(Error::Skip(_)) => {}
            Ok(_) => panic!("a build started under a pending signal must stop"),
            Err(e) => panic!("{e}"),
        }
    }
}
