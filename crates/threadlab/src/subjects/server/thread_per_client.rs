//! `thread_per_client`: the study's multi-threaded server. An acceptor thread blocks in
//! accept(); each connection gets a thread of its own (64 KiB stack) running the blocking
//! `server()` loop until the client leaves.

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::Result;

use super::blocking::{self, Until, Worker};
use super::framing::{new_buffer, FrameReader};
use super::net::{self, Acceptor};
use super::running::{Core, Running};
use super::shared::{Counter, ServerConfig, Shared, ThreadMark};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "thread_per_client",
    id: 1,
    model: Model::Threads,
    summary: "the study's MT server: an acceptor thread, then one kernel thread per connection running the blocking server() loop",
    start,
    holds: unbounded,
};

/// The connections being served, so that stopping can shut them down (their threads then
/// return from recv at once).
#[derive(Default)]
pub struct LiveConns(Mutex<HashSet<RawFd>>);

impl LiveConns {
    pub fn add(&self, fd: RawFd) {
        self.0.lock().expect("not poisoned").insert(fd);
    }

    /// Forgets and closes `fd` (under the lock, so `shutdown_all` never touches a reused fd).
    pub fn close(&self, fd: RawFd) {
        let mut set = self.0.lock().expect("not poisoned");
        set.remove(&fd);
        net::close(fd);
    }

    pub fn shutdown_all(&self) {
        for &fd in self.0.lock().expect("not poisoned").iter() {
            net::shutdown(fd);
        }
    }
}

struct Inner {
    shared: Shared,
    acceptor: Acceptor,
    conns: LiveConns,
}

impl Core for Inner {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wake(&self) {
        // A blocked accept() returns EINVAL once its listener is shut down.
        net::shutdown(self.acceptor.fd());
    }
    fn finish(&self) {
        self.conns.shutdown_all();
        wait_threads(&self.shared, Duration::from_secs(3));
    }
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, false)?;
    let inner = Inner {
        shared: Shared::new(cfg, DESIGN.id)?,
        acceptor: Acceptor::new(net::raw(&listener)),
        conns: LiveConns::default(),
    };
    let running = Running::with_thread(
        &DESIGN,
        listener,
        inner,
        "tl-tpc-accept",
        "the acceptor thread",
        |me| accept_loop(&me),
    )?;
    Ok(running.boxed())
}

fn accept_loop(inner: &Arc<Inner>) {
    let shared = &inner.shared;
    inner.acceptor.run_blocking(shared, true, |fd| {
        inner.conns.add(fd);
        shared.add(Counter::ConnectionsOpen, 1);
        let me = inner.clone();
        let spawned = std::thread::Builder::new()
            .stack_size(shared.cfg.thread_stack)
            .spawn(move || serve_client(&me, fd));
        if spawned.is_err() {
            // Out of threads (RLIMIT_NPROC, memory): refuse like a full server.
            inner.shared.sub(Counter::ConnectionsOpen, 1);
            net::send_error(fd, shared, super::protocol::ErrorCode::Busy, 0, 0, 0);
            shared.add(Counter::Rejected, 1);
            inner.conns.close(fd);
        }
    });
}

fn serve_client(inner: &Inner, fd: RawFd) {
    let shared = &inner.shared;
    let _mark = ThreadMark::new(shared);
    blocking::prepare(fd, shared);
    let mut buf = new_buffer();
    let mut reader = FrameReader::new();
    let w = Worker {
        shared,
        id: crate::sys::gettid() as u16,
        after_reply: None,
        in_child: false,
        crowded: None,
    };
    blocking::serve(fd, &mut buf, &mut reader, &w, Until::Closed);
    shared.sub(Counter::ConnectionsOpen, 1);
    inner.conns.close(fd);
}

/// Waits until the design's threads are gone (they finish the request at hand: at most the
/// longest work a request may ask for, 1 s), for `limit` at most.
pub fn wait_threads(shared: &Shared, limit: Duration) {
    let end = Instant::now() + limit;
    while shared.get(Counter::ThreadsAlive) > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
}
