//! `thread_per_request` (the study's section 2): a dispatcher thread watches every connection
//! with epoll; when one becomes readable it spawns a thread that reads that request, serves it
//! with blocking I/O, hands the connection back and exits. For short connections this is
//! `thread_per_client`; for long ones every request pays a thread's creation and exit.

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;

use super::blocking::{self, Ended, Until, Worker};
use super::evloop::{AcceptPause, Epoll, Slab, Waker, LISTENER, WAKE};
use super::framing::{new_buffer, FrameReader};
use super::net::{self, Acceptor};
use super::running::{Core, Running};
use super::shared::{pin_to, Counter, ServerConfig, Shared, ThreadMark};
use super::thread_per_client::{wait_threads, LiveConns};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "thread_per_request",
    id: 2,
    model: Model::Threads,
    summary: "an epoll dispatcher spawns a kernel thread per request; the thread serves it with blocking I/O, re-arms the connection and exits",
    start,
    holds: unbounded,
};

/// A connection waiting for its next request.
struct Parked {
    fd: RawFd,
    buf: Vec<u8>,
    reader: FrameReader,
    idle_since_ns: u64,
}

struct Inner {
    shared: Shared,
    acceptor: Acceptor,
    ep: Epoll,
    waker: Waker,
    /// Parked connections; a slot whose value is out belongs to a request thread.
    parked: Mutex<Slab<Parked>>,
    /// Every connection, parked or being served (for shutdown).
    conns: LiveConns,
}

const ARM: u32 = (libc::EPOLLIN | libc::EPOLLONESHOT | libc::EPOLLRDHUP) as u32;

impl Core for Inner {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wake(&self) {
        self.waker.wake();
    }
    fn finish(&self) {
        self.conns.shutdown_all();
        wait_threads(&self.shared, Duration::from_secs(3));
        let mut parked = self.parked.lock().expect("not poisoned");
        for t in parked.tokens() {
            if let Some(p) = parked.remove(t) {
                self.shared.sub(Counter::ConnectionsOpen, 1);
                self.conns.close(p.fd);
            }
        }
    }
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, true)?;
    let inner = Inner {
        shared: Shared::new(cfg, DESIGN.id)?,
        acceptor: Acceptor::new(net::raw(&listener)),
        ep: Epoll::new()?,
        waker: Waker::new()?,
        parked: Mutex::new(Slab::default()),
        conns: LiveConns::default(),
    };
    if !inner.ep.ctl(
        libc::EPOLL_CTL_ADD,
        inner.acceptor.fd(),
        libc::EPOLLIN as u32,
        LISTENER,
    ) || !inner.ep.ctl(
        libc::EPOLL_CTL_ADD,
        inner.waker.0,
        libc::EPOLLIN as u32,
        WAKE,
    ) {
        return Err(Error::os("epoll_ctl ADD"));
    }
    let running = Running::with_thread(
        &DESIGN,
        listener,
        inner,
        "tl-tpr-dispatch",
        "the dispatcher thread",
        |me| dispatch(&me),
    )?;
    Ok(running.boxed())
}

fn dispatch(inner: &Arc<Inner>) {
    let shared = &inner.shared;
    if pin_to(&shared.cfg.cpus).is_err() {
        return;
    }
    let _mark = ThreadMark::new(shared);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut pause = AcceptPause::default();
    loop {
        let busy = !inner.parked.lock().expect("not poisoned").is_empty();
        let timeout = match (busy, pause.is_on()) {
            (_, true) => 50,
            (true, _) => 1000,
            (false, _) => -1,
        };
        let n = inner.ep.wait(&mut events, timeout);
        for ev in &events[..n] {
            match ev.u64 {
                LISTENER => {
                    if accept_some(inner) {
                        pause.start(&inner.ep, inner.acceptor.fd());
                    }
                }
                WAKE => inner.waker.drain(),
                token => {
                    let taken = inner.parked.lock().expect("not poisoned").take(token);
                    if let Some(p) = taken {
                        spawn_request(inner, token, p);
                    }
                }
            }
        }
        if shared.stopping() {
            return;
        }
        let now = mono_ns();
        pause.end_when_over(&inner.ep, inner.acceptor.fd(), now);
        close_idle(inner, now);
    }
}

fn accept_some(inner: &Inner) -> bool {
    let shared = &inner.shared;
    inner.acceptor.accept_batch(shared, |fd| {
        blocking::prepare(fd, shared);
        inner.conns.add(fd);
        shared.add(Counter::ConnectionsOpen, 1);
        let mut parked = inner.parked.lock().expect("not poisoned");
        let token = parked.insert(Parked {
            fd,
            buf: new_buffer(),
            reader: FrameReader::new(),
            idle_since_ns: mono_ns(),
        });
        if !inner.ep.ctl(libc::EPOLL_CTL_ADD, fd, ARM, token) {
            parked.remove(token);
            shared.sub(Counter::ConnectionsOpen, 1);
            inner.conns.close(fd);
        }
    })
}

fn spawn_request(inner: &Arc<Inner>, token: u64, p: Parked) {
    let me = inner.clone();
    let fd = p.fd;
    // The connection travels with the thread and comes back into the slot it left.
    let spawned = std::thread::Builder::new()
        .stack_size(inner.shared.cfg.thread_stack)
        .spawn(move || serve_request(&me, token, p));
    if spawned.is_err() {
        // Out of threads: refuse like a full server (the closure, and its buffer, are gone).
        let shared = &inner.shared;
        net::send_error(fd, shared, super::protocol::ErrorCode::Busy, 0, 0, 0);
        shared.add(Counter::Rejected, 1);
        finish(inner, token, fd);
    }
}

fn serve_request(inner: &Inner, token: u64, mut p: Parked) {
    let shared = &inner.shared;
    let _mark = ThreadMark::new(shared);
    let w = Worker {
        shared,
        id: crate::sys::gettid() as u16,
        after_reply: None,
        in_child: false,
        crowded: None,
    };
    match blocking::serve(p.fd, &mut p.buf, &mut p.reader, &w, Until::OneFrame) {
        Ended::Open if !shared.stopping() => {
            p.idle_since_ns = mono_ns();
            let fd = p.fd;
            // Back in the slab first, then re-armed: the next event finds it there.
            inner
                .parked
                .lock()
                .expect("not poisoned")
                .put_back(token, p);
            if !inner.ep.ctl(libc::EPOLL_CTL_MOD, fd, ARM, token) {
                let p = inner.parked.lock().expect("not poisoned").take(token);
                if let Some(p) = p {
                    finish(inner, token, p.fd);
                }
            }
        }
        _ => finish(inner, token, p.fd),
    }
}

fn finish(inner: &Inner, token: u64, fd: RawFd) {
    inner.parked.lock().expect("not poisoned").remove(token);
    inner.shared.sub(Counter::ConnectionsOpen, 1);
    inner.conns.close(fd);
}

fn close_idle(inner: &Inner, now: u64) {
    let idle = inner.shared.cfg.idle_timeout.as_nanos() as u64;
    let mut parked = inner.parked.lock().expect("not poisoned");
    for t in parked.tokens() {
        let expired = parked
            .get_mut(t)
            .is_some_and(|p| now > p.idle_since_ns + idle);
        if expired {
            if let Some(p) = parked.remove(t) {
                inner.shared.add(Counter::IdleClosed, 1);
                inner.shared.sub(Counter::ConnectionsOpen, 1);
                inner.conns.close(p.fd);
            }
        }
    }
}
