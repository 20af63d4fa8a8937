//! `prefork` (Apache's prefork model): N processes forked at start, each blocking in accept()
//! on the shared listener and serving one connection at a time with the blocking `server()`
//! loop. It holds at most N connections at once.
//!
//! Its limit, by nature: N connections. So that N slow clients cannot keep everyone out, while
//! all N are held and another connection waits, a held connection that is idle for
//! `CROWDED_IDLE` or half-sent for `CROWDED_FRAME` is closed (its process then takes the
//! waiting one), and a connection that still waits `TURNSTILE_WAIT` is answered BUSY by the
//! parent: refused, never left in silence.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};

use super::children::Children;
use super::fork_per_client::{serve_conn_in_child, with_snapshots, Inner};
use super::framing::MappedBuf;
use super::net::{self, Accepted, Acceptor};
use super::protocol::RESPONSE_HEADER;
use super::running::Running;
use super::shared::{apply_cpu_set, cpu_set, Counter, ServerConfig, Shared, ThreadMark};
use super::{DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "prefork",
    id: 4,
    model: Model::Processes,
    summary: "N processes forked at start block in accept() on one listener, each serving one connection at a time (Apache prefork)",
    start,
    holds: |cfg| Some(cfg.prefork_processes),
};

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, false)?;
    let n = cfg.prefork_processes.max(1);
    let lfd = net::raw(&listener);
    let inner = Inner {
        shared: Shared::new(cfg, DESIGN.id)?,
        acceptor: Acceptor::new(lfd),
        children: Children::new(n)?,
        accepts_here: false,
    };
    // From here on, a failure stops (kills and reaps) the processes already forked.
    let mut running = Running::on(&DESIGN, vec![listener], inner)?;
    let inner = running.core().clone();
    let mask = cpu_set(&cfg.cpus);
    for _ in 0..n {
        let shared = &inner.shared;
        // SAFETY: the child runs `process_loop`: raw system calls (accept4, recv, send,
        // sched_setaffinity, nanosleep), atomics in shared memory and a mapped buffer.
        let forked = unsafe {
            inner.children.fork(&[lfd], |slot| {
                apply_cpu_set(&mask);
                let Some(mut buf) =
                    MappedBuf::new(RESPONSE_HEADER + shared.cfg.max_payload as usize)
                else {
                    return;
                };
                let acceptor = Acceptor::new(lfd);
                let crowded = || crowded(shared, n, lfd);
                loop {
                    match acceptor.accept(shared) {
                        Accepted::Conn(fd) => {
                            shared.add(Counter::ConnectionsOpen, 1);
                            serve_conn_in_child(fd, shared, slot, Some(&mut buf), Some(&crowded));
                            shared.sub(Counter::ConnectionsOpen, 1);
                            net::close(fd);
                        }
                        Accepted::Exhausted => net::backoff(shared, net::FD_BACKOFF),
                        Accepted::Closed => return,
                        Accepted::WouldBlock | Accepted::Retry => {}
                    }
                }
            })
        };
        match forked {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                return Err(Error::Skip(format!(
                    "cannot fork the prefork processes: {e}"
                )));
            }
        }
    }
    running.spawn(
        "tl-prefork-turnstile".into(),
        "the prefork turnstile thread",
        move |me| turnstile(&me, lfd, n),
    )?;
    with_snapshots(running, cfg)
}

/// Every process holds a connection and another waits in the listen queue (poll, so it is
/// async-signal-safe: the children call it).
fn crowded(shared: &Shared, processes: usize, listener: RawFd) -> bool {
    shared.get(Counter::ConnectionsOpen) >= processes as u64 && pending(listener, 0)
}

/// A connection waits to be accepted on `listener` (within `wait_ms`).
fn pending(listener: RawFd, wait_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: listener,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, wait_ms) == 1 && p.revents & libc::POLLIN != 0 }
}

/// How long a connection may wait while every process stays busy before it is answered BUSY.
pub const TURNSTILE_WAIT: Duration = Duration::from_millis(700);

/// The parent's watch over the listen queue: while every process holds a connection and the
/// holders stay busy (idle or half-sent ones give way within `CROWDED_IDLE`/`CROWDED_FRAME`),
/// a waiting connection is answered BUSY after `TURNSTILE_WAIT` instead of waiting in silence.
fn turnstile(inner: &Inner, listener: RawFd, processes: usize) {
    let shared = &inner.shared;
    let _mark = ThreadMark::new(shared);
    let mut full_since: Option<Instant> = None;
    while !shared.stopping() {
        if !pending(listener, 50) {
            full_since = None;
            continue;
        }
        if shared.get(Counter::ConnectionsOpen) < processes as u64 {
            // A process is about to accept it.
            full_since = None;
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let since = *full_since.get_or_insert_with(Instant::now);
        if since.elapsed() < TURNSTILE_WAIT {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        // SAFETY: null address pointers are allowed; a non-blocking accept.
        let fd = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        if fd >= 0 {
            shared.add(Counter::Accepted, 1);
            inner.acceptor.refuse(fd, shared);
        }
    }
}
