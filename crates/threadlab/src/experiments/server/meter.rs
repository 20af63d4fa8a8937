//! What a server costs, measured from the outside of its code: CPU time and context switches
//! (read at window boundaries by the generator's thread), and memory, threads and processes.
//!
//! - A server in the lab's process: the process's rusage (every thread, ended ones included)
//!   minus the generator thread's own, plus its forked children (their rusage from the slots
//!   they update after each reply, and wait4's for the reaped). The other, idle servers of the
//!   run add nothing measurable (they sleep in accept, epoll_wait or a condition variable).
//! - A server that is a child program (Go, or a `threadlab serve` child): its tasks' schedstat
//!   run time (ns) and context switches from /proc, read without asking the program anything.
//!   A task that ends between two readings keeps what it had used at the last reading (its
//!   use after that reading is not seen; the programs measured keep their threads for the
//!   whole step).
//! - A server on another host (`--target`): the STATS frame, over a control connection.

use std::net::TcpStream;

use crate::subjects::server::usage::{pss_bytes, rusage, Usage};
use crate::subjects::server::Server;

use super::client;

pub enum Meter<'a> {
    InProcess(&'a dyn Server),
    Program(Tasks),
    Stats {
        conn: TcpStream,
        seq: u32,
    },
    /// A remote server that does not answer STATS to us: why.
    Unavailable(String),
}

/// Memory, threads and processes a server holds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Footprint {
    /// Proportional set size of the lab and the server's children (in-process), of the program,
    /// or the remote server's resident size.
    pub bytes: u64,
    /// Threads the design runs (acceptors, loops, workers, per-connection threads).
    pub threads: u64,
    /// Processes the design runs besides the lab's own (children, or the program).
    pub processes: u64,
}

impl<'a> Meter<'a> {
    pub fn for_server(s: &'a dyn Server) -> Meter<'a> {
        if s.is_remote() {
            return Meter::remote(s.local_addr());
        }
        match s.program_pid() {
            Some(pid) => Meter::Program(Tasks::new(pid)),
            None => Meter::InProcess(s),
        }
    }

    /// A STATS control connection to a server elsewhere, checked once.
    pub fn remote(addr: std::net::SocketAddr) -> Meter<'a> {
        let mut sources = client::Sources::for_target(addr);
        let mut conn = match client::connect(addr, &mut sources) {
            Ok(c) => c,
            Err(f) => return Meter::Unavailable(format!("no control connection: {f}")),
        };
        match client::stats(&mut conn, 1) {
            Ok(_) => Meter::Stats { conn, seq: 1 },
            Err(f) => Meter::Unavailable(format!(
                "the server does not answer STATS ({f}); start it with --allow-remote-stats \
                 to measure its CPU and memory from another host"
            )),
        }
    }

    /// Why usage cannot be measured, if it cannot.
    pub fn unavailable(&self) -> Option<&str> {
        match self {
            Meter::Unavailable(why) => Some(why),
            _ => None,
        }
    }

    /// CPU and switches so far; read on the generator's thread (which is subtracted).
    pub fn usage(&mut self) -> Usage {
        match self {
            Meter::InProcess(s) => {
                let own = rusage(libc::RUSAGE_SELF).since(rusage(libc::RUSAGE_THREAD));
                match s.children() {
                    Some(c) => own.plus(c.usage),
                    None => own,
                }
            }
            Meter::Program(tasks) => tasks.usage(),
            Meter::Stats { conn, seq } => {
                *seq = seq.wrapping_add(1);
                client::stats(conn, *seq)
                    .map(|s| Usage {
                        cpu_ns: s.cpu_ns(),
                        voluntary: s.voluntary_switches,
                        involuntary: s.involuntary_switches,
                    })
                    .unwrap_or_default()
            }
            Meter::Unavailable(_) => Usage::default(),
        }
    }

    pub fn footprint(&mut self) -> Footprint {
        match self {
            Meter::InProcess(s) => {
                let kids = s.children().unwrap_or_default();
                let bytes = pss_bytes(None).unwrap_or(0)
                    + kids
                        .pids
                        .iter()
                        .map(|&p| pss_bytes(Some(p)).unwrap_or(0))
                        .sum::<u64>();
                Footprint {
                    bytes,
                    threads: s.counts().threads_alive,
                    processes: kids.live,
                }
            }
            Meter::Program(Tasks { pid, .. }) => Footprint {
                bytes: pss_bytes(Some(*pid)).unwrap_or(0),
                threads: std::fs::read_dir(format!("/proc/{pid}/task"))
                    .map(|d| d.count() as u64)
                    .unwrap_or(0),
                processes: 1,
            },
            Meter::Stats { conn, seq } => {
                *seq = seq.wrapping_add(1);
                client::stats(conn, *seq)
                    .map(|s| Footprint {
                        bytes: s.rss_bytes,
                        threads: s.threads,
                        processes: s.processes,
                    })
                    .unwrap_or_default()
            }
            Meter::Unavailable(_) => Footprint::default(),
        }
    }
}

/// A program's tasks, with each one's last reading, so that the sum never goes back when a
/// task ends.
pub struct Tasks {
    pid: libc::pid_t,
    /// Task id -> its usage at the last reading.
    seen: std::collections::HashMap<u64, Usage>,
    /// What tasks that have ended, or whose id a new task took, had used when last read.
    ended: Usage,
}

impl Tasks {
    pub fn new(pid: libc::pid_t) -> Tasks {
        Tasks {
            pid,
            seen: std::collections::HashMap::new(),
            ended: Usage::default(),
        }
    }

    /// CPU (sum of the tasks' schedstat run time, ns) and context switches so far.
    pub fn usage(&mut self) -> Usage {
        let now = live_tasks(self.pid);
        for (tid, last) in &self.seen {
            match now.get(tid) {
                // A counter that went back belongs to a new task that took an ended one's id.
                Some(u) if u.cpu_ns >= last.cpu_ns => {}
                _ => self.ended = self.ended.plus(*last),
            }
        }
        self.seen = now;
        self.seen
            .values()
            .fold(self.ended, |total, u| total.plus(*u))
    }
}

/// Each live task's schedstat run time and context switches.
fn live_tasks(pid: libc::pid_t) -> std::collections::HashMap<u64, Usage> {
    let mut out = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let p = t.path();
        let mut u = Usage::default();
        // A task that ends while it is read is left for the next reading to account.
        let Ok(s) = std::fs::read_to_string(p.join("schedstat")) else {
            continue;
        };
        u.cpu_ns = s
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let Ok(s) = std::fs::read_to_string(p.join("status")) else {
            continue;
        };
        for l in s.lines() {
            let num = |v: &str| v.trim().parse::<u64>().unwrap_or(0);
            if let Some(v) = l.strip_prefix("voluntary_ctxt_switches:") {
                u.voluntary = num(v);
            } else if let Some(v) = l.strip_prefix("nonvoluntary_ctxt_switches:") {
                u.involuntary = num(v);
            }
        }
        out.insert(tid, u);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_measured_through_proc() {
        // This test process stands in for a program: its CPU moves as it spins, while the
        // harness's other test threads come and go.
        let mut tasks = Tasks::new(std::process::id() as libc::pid_t);
        let a = tasks.usage();
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let b = tasks.usage();
        assert!(b.cpu_ns > a.cpu_ns, "{a:?} {b:?}");
        assert!(b.voluntary + b.involuntary > 0);
    }

    #[test]
    fn a_task_that_ends_keeps_what_it_used() {
        let mut tasks = Tasks::new(std::process::id() as libc::pid_t);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let spinner = std::thread::spawn(move || {
            // 50 ms of its own CPU time, however long the machine makes that take.
            let t = crate::measure::process::thread_cpu_ns();
            while crate::measure::process::thread_cpu_ns() - t < 50_000_000 {
                std::hint::spin_loop();
            }
            ready_tx.send(()).unwrap();
            rx.recv().unwrap();
        });
        ready_rx.recv().unwrap();
        // The spinner's 50 ms is read while it lives...
        let with = tasks.usage();
        tx.send(()).unwrap();
        spinner.join().unwrap();
        // ...and still counted once it has ended.
        let after = tasks.usage();
        assert!(with.cpu_ns >= 40_000_000, "{with:?}");
        assert!(after.cpu_ns >= with.cpu_ns, "{with:?} {after:?}");
    }
}
