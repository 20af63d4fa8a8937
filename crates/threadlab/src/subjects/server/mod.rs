//! Server designs measured by the `server` experiment (and served by `threadlab serve`): one
//! file each, all speaking `protocol`, listed in `DESIGNS`.
//!
//! Adding a design: write its file with a `pub const DESIGN: DesignInfo` whose `start` returns a
//! running `Server` (`running::Running` over the design's state, or `running::start_loops` for
//! an event loop per listener), and add its name to `designs!` below (one line: the module and
//! its place in `DESIGNS`). The experiment measures every design in the list and
//! `threadlab serve --design` offers it; nothing else changes (its metric ids are
//! `server.<name>.…`, documented by pattern).
//!
//! Shared parts: `running` (start-up and stop), `protocol` (the frames), `framing` (reading
//! frames out of a stream), `net`
//! (listeners, accepting when descriptors run out), `blocking` (the study's per-connection
//! loop), `evloop` (epoll, the non-blocking connection), `children` (forked processes, reaped
//! and accounted), `shared` (configuration, counters), `usage` (CPU, memory, STATS).

use std::net::SocketAddr;

use crate::cancel::Cancel;
use crate::error::Result;

pub mod blocking;
pub mod child;
pub mod children;
pub mod evloop;
pub mod framing;
pub mod net;
pub mod protocol;
pub mod reply;
pub mod running;
pub mod shared;
pub mod usage;

pub use shared::{Counts, ServerConfig, Shared};
pub use usage::{ChildUsage, Usage};

/// How a design gives connections something to run on: what the conclusion groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// A kernel thread per connection or per request.
    Threads,
    /// A process per connection, or a fixed set of processes.
    Processes,
    /// A fixed pool of kernel threads behind a bounded queue.
    ThreadPool,
    /// Event loops on non-blocking sockets (readiness or completion).
    EventLoop,
    /// A runtime's tasks or green threads (Tokio, goroutines, uthread).
    Runtime,
}

/// A design, as data: what the experiment and `threadlab serve` know of it.
pub struct DesignInfo {
    /// The id segment in metric ids and the `--design` value.
    pub name: &'static str,
    /// Carried in every response header.
    pub id: u8,
    pub model: Model,
    /// One line: how it serves.
    pub summary: &'static str,
    /// Starts it, listening on `cfg.listen`; `Err(Skip)` with the reason when it cannot run
    /// here (no toolchain, io_uring refused, ...).
    pub start: fn(&ServerConfig, &Cancel) -> Result<Box<dyn Server>>,
    /// Connections it can hold at once by its nature (prefork: one per process); None when
    /// only the configured cap bounds it.
    pub holds: fn(&ServerConfig) -> Option<usize>,
}

impl std::fmt::Debug for DesignInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Any number of connections, up to the cap.
pub fn unbounded(_: &ServerConfig) -> Option<usize> {
    None
}

/// A running server. Dropping it stops it: threads joined, children killed and reaped,
/// descriptors closed.
pub trait Server: Send {
    fn info(&self) -> &'static DesignInfo;
    fn local_addr(&self) -> SocketAddr;
    /// The counters (served, refused, connections open, the design's threads alive).
    fn counts(&self) -> Counts;
    /// CPU and switches of its child processes (fork designs), live and reaped.
    fn children(&self) -> Option<ChildUsage> {
        None
    }
    /// Its pid when it runs as another program on this host (its usage is read from /proc).
    fn program_pid(&self) -> Option<libc::pid_t> {
        None
    }
    /// It runs on another host (`threadlab run server --target`): usage only through STATS.
    fn is_remote(&self) -> bool {
        false
    }
}

/// The design registry: each name is a module of this folder (declared here) whose `DESIGN`
/// joins `DESIGNS`, so that adding a design is its file and one line below.
macro_rules! designs {
    ($($design:ident),* $(,)?) => {
        $(pub mod $design;)*
        /// Every design, in the order the experiment measures them.
        pub const DESIGNS: &[&DesignInfo] = &[$(&$design::DESIGN),*];
    };
}

designs!(
    thread_per_client,
    thread_per_request,
    fork_per_client,
    prefork,
    pool,
    epoll,
    epoll_per_core,
    io_uring,
    green,
    tokio,
    go,
);

pub fn find(name: &str) -> Option<&'static DesignInfo> {
    DESIGNS.iter().copied().find(|d| d.name == name)
}

/// The design that sent a response, by the id in its header.
pub fn by_id(id: u8) -> Option<&'static DesignInfo> {
    DESIGNS.iter().copied().find(|d| d.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_are_unique() {
        for (i, a) in DESIGNS.iter().enumerate() {
            for b in &DESIGNS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.id, b.id);
            }
            assert!(!a.name.contains('.'), "{} would split a metric id", a.name);
            assert_eq!(find(a.name).map(|d| d.id), Some(a.id));
            assert_eq!(by_id(a.id).map(|d| d.name), Some(a.name));
        }
    }
}
