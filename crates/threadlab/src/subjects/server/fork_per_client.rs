//! `fork_per_client`: the study's traditional "heavy-weight" server. An acceptor thread blocks
//! in accept() and forks a process per connection; the child runs the blocking `server()` loop
//! and exits when the client leaves, and is reaped (wait4, its CPU counted) by `Children`.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::Result;

use super::blocking::{self, Until, Worker};
use super::children::{ChildSlot, Children};
use super::framing::{FrameReader, MappedBuf};
use super::net::{self, Acceptor};
use super::protocol::RESPONSE_HEADER;
use super::running::{Core, Running};
use super::shared::{Counter, ServerConfig, Shared};
use super::usage::{live_stats, ChildUsage};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "fork_per_client",
    id: 3,
    model: Model::Processes,
    summary: "the study's heavy-weight server: an acceptor forks a process per connection, which runs the blocking server() loop, exits, and is reaped",
    start,
    holds: unbounded,
};

/// At most this many children at once, whatever the connection cap.
const MAX_CHILDREN: usize = 4096;

pub(super) struct Inner {
    pub shared: Shared,
    pub acceptor: Acceptor,
    pub children: Arc<Children>,
    /// A thread of this process blocks in accept() on the listener (fork_per_client's acceptor;
    /// prefork's children accept in their own processes): stopping shuts the listener down.
    pub accepts_here: bool,
}

impl Core for Inner {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wake(&self) {
        if self.accepts_here {
            net::shutdown(self.acceptor.fd());
        }
    }
    fn finish(&self) {
        self.children.shutdown();
    }
    fn children(&self) -> Option<ChildUsage> {
        Some(self.children.usage())
    }
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, false)?;
    let inner = Inner {
        shared: Shared::new(cfg, DESIGN.id)?,
        acceptor: Acceptor::new(net::raw(&listener)),
        children: Children::new(cfg.max_connections.min(MAX_CHILDREN))?,
        accepts_here: true,
    };
    let running = Running::with_thread(
        &DESIGN,
        listener,
        inner,
        "tl-fork-accept",
        "the acceptor thread",
        |me| accept_loop(&me),
    )?;
    with_snapshots(running, cfg)
}

/// The running server, with a thread refreshing the STATS snapshot its children answer with
/// when `cfg.stats_snapshots` asks for one.
pub(super) fn with_snapshots(
    mut running: Running<Inner>,
    cfg: &ServerConfig,
) -> Result<Box<dyn Server>> {
    if cfg.stats_snapshots {
        running.spawn(
            "tl-fork-stats".into(),
            "the stats thread",
            refresh_snapshots,
        )?;
    }
    Ok(running.boxed())
}

/// Refreshes the STATS snapshot the children answer with, every 20 ms, until the stop.
fn refresh_snapshots(inner: Arc<Inner>) {
    while !inner.shared.stopping() {
        let kids = inner.children.usage();
        inner
            .shared
            .store_snapshot(&live_stats(&inner.shared, Some(&kids)));
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn accept_loop(inner: &Inner) {
    let shared = &inner.shared;
    inner.acceptor.run_blocking(shared, false, |fd| {
        // SAFETY: the child only runs `serve_in_child`: raw system calls, atomics in shared
        // memory and a mapped buffer (no allocation, no lock).
        let forked = unsafe {
            inner
                .children
                .fork(&[fd], |slot| serve_in_child(fd, shared, slot))
        };
        match forked {
            Ok(Some(_)) => net::close(fd),
            // Out of child slots or fork failed (RLIMIT_NPROC, memory): refuse.
            Ok(None) | Err(_) => inner.acceptor.refuse(fd, shared),
        }
    });
}

/// Serves one connection in a forked child until it ends.
pub(super) fn serve_in_child(fd: RawFd, shared: &Shared, slot: &ChildSlot) {
    shared.add(Counter::ConnectionsOpen, 1);
    serve_conn_in_child(fd, shared, slot, None, None);
    shared.sub(Counter::ConnectionsOpen, 1);
    net::close(fd);
}

/// The blocking loop in a child, with a mapped buffer (`buf`, or a fresh one).
pub(super) fn serve_conn_in_child(
    fd: RawFd,
    shared: &Shared,
    slot: &ChildSlot,
    buf: Option<&mut MappedBuf>,
    crowded: Option<&dyn Fn() -> bool>,
) {
    blocking::prepare(fd, shared);
    let mut own;
    let buf = match buf {
        Some(b) => b,
        None => {
            let Some(b) = MappedBuf::new(RESPONSE_HEADER + shared.cfg.max_payload as usize) else {
                return;
            };
            own = b;
            &mut own
        }
    };
    let mut reader = FrameReader::new();
    let record = || slot.record();
    let w = Worker {
        shared,
        // SAFETY: getpid has no preconditions.
        id: unsafe { libc::getpid() } as u16,
        after_reply: Some(&record),
        in_child: true,
        crowded,
    };
    blocking::serve(fd, buf, &mut reader, &w, Until::Closed);
}
