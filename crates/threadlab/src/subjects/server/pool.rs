//! `pool`: the study's producer/consumer (master/slave) server, SEDA's bounded stage. A
//! dispatcher thread reads whole frames with epoll and puts each on a bounded queue; a fixed
//! pool of worker threads (sized by the throttle experiment's advice: the physical cores among
//! the allowed CPUs) does the work and writes the reply, then hands the connection back. A
//! frame that finds the queue full is answered BUSY at once: refused, not lost or delayed.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;

use super::evloop::{
    set_nonblocking, sweep, AcceptPause, Conn, Epoll, ReadOutcome, Slab, Waker, WriteOutcome,
    LISTENER, SWEEP, WAKE,
};
use super::framing::Step;
use super::net::{self, Acceptor};
use super::protocol::{ErrorCode, Request};
use super::running::{Core, Running};
use super::shared::{pin_to, Counter, ServerConfig, Shared, ThreadMark};
use super::thread_per_client::wait_threads;
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "pool",
    id: 5,
    model: Model::ThreadPool,
    summary: "the study's producer/consumer: an epoll dispatcher reads frames onto a bounded queue served by a fixed pool of worker threads (one per physical core); a full queue is answered BUSY",
    start,
    holds: unbounded,
};

const ARM: u32 = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
const ARM_OUT: u32 = (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32;

/// A connection with a complete frame, on its way to a worker.
struct Job {
    token: u64,
    conn: Box<Conn>,
    req: Request,
}

/// A connection coming back from a worker; `keep` false when it must be closed.
struct Returned {
    token: u64,
    conn: Box<Conn>,
    keep: bool,
}

struct Inner {
    shared: Shared,
    acceptor: Acceptor,
    waker: Waker,
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
    returned: Mutex<Vec<Returned>>,
}

impl Core for Inner {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wake(&self) {
        self.waker.wake();
        self.ready.notify_all();
    }
    fn finish(&self) {
        wait_threads(&self.shared, std::time::Duration::from_secs(1));
        // Connections still queued or coming back are closed with their Conn.
        self.queue.lock().expect("not poisoned").clear();
        self.returned.lock().expect("not poisoned").clear();
    }
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, true)?;
    let inner = Inner {
        shared: Shared::new(cfg, DESIGN.id)?,
        acceptor: Acceptor::new(net::raw(&listener)),
        waker: Waker::new()?,
        queue: Mutex::new(VecDeque::with_capacity(cfg.pool_queue)),
        ready: Condvar::new(),
        returned: Mutex::new(Vec::new()),
    };
    let mut running = Running::on(&DESIGN, vec![listener], inner)?;
    for w in 0..cfg.pool_workers.max(1) {
        running.spawn(format!("tl-pool-{w}"), "a pool worker", move |me| {
            worker(&me, w as u16 + 1)
        })?;
    }
    running.spawn("tl-pool-dispatch".into(), "the pool dispatcher", |me| {
        // Nothing to report an error to: the counters stop moving and the client sees errors.
        let _ = dispatch(&me);
    })?;
    Ok(running.boxed())
}

fn dispatch(inner: &Inner) -> Result<()> {
    let shared = &inner.shared;
    pin_to(&shared.cfg.cpus)?;
    let _mark = ThreadMark::new(shared);
    let ep = Epoll::new()?;
    if !ep.ctl(
        libc::EPOLL_CTL_ADD,
        inner.acceptor.fd(),
        libc::EPOLLIN as u32,
        LISTENER,
    ) || !ep.ctl(
        libc::EPOLL_CTL_ADD,
        inner.waker.0,
        libc::EPOLLIN as u32,
        WAKE,
    ) {
        return Err(Error::os("epoll_ctl ADD"));
    }
    // Connections owned by the dispatcher; a slot whose value is out is with a worker.
    let mut conns: Slab<Box<Conn>> = Slab::default();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut pause = AcceptPause::default();
    let mut next_sweep = 0u64;
    loop {
        let timeout = if pause.is_on() {
            50
        } else if conns.is_empty() {
            -1
        } else {
            SWEEP.as_millis() as i32
        };
        let n = ep.wait(&mut events, timeout);
        for ev in &events[..n] {
            match ev.u64 {
                LISTENER => {
                    if accept_some(inner, &ep, &mut conns) {
                        pause.start(&ep, inner.acceptor.fd());
                    }
                }
                WAKE => {
                    inner.waker.drain();
                    let back: Vec<Returned> =
                        std::mem::take(&mut *inner.returned.lock().expect("not poisoned"));
                    for r in back {
                        if !r.keep {
                            conns.remove(r.token);
                            shared.sub(Counter::ConnectionsOpen, 1);
                            drop(r.conn);
                            continue;
                        }
                        let mut c = r.conn;
                        if c.writing() {
                            // The client did not take the whole reply at once: the dispatcher
                            // finishes it on EPOLLOUT, the worker is free for others.
                            let fd = c.fd;
                            conns.put_back(r.token, c);
                            ep.ctl(libc::EPOLL_CTL_MOD, fd, ARM_OUT, r.token);
                            continue;
                        }
                        let step = c.reader.check(&mut c.buf, shared.cfg.max_payload);
                        conns.put_back(r.token, c);
                        on_step(inner, &ep, &mut conns, r.token, step);
                    }
                }
                token => {
                    let Some(c) = conns.get_mut(token) else {
                        continue;
                    };
                    if c.writing() {
                        finish_write(inner, &ep, &mut conns, token);
                        continue;
                    }
                    match c.read_some(shared) {
                        ReadOutcome::WouldBlock => {
                            ep.ctl(libc::EPOLL_CTL_MOD, c.fd, ARM, token);
                        }
                        ReadOutcome::Gone => {
                            conns.remove(token);
                            shared.sub(Counter::ConnectionsOpen, 1);
                        }
                        ReadOutcome::Step(step) => on_step(inner, &ep, &mut conns, token, step),
                    }
                }
            }
        }
        if shared.stopping() {
            shared.sub(Counter::ConnectionsOpen, conns.len() as u64);
            return Ok(());
        }
        let now = mono_ns();
        pause.end_when_over(&ep, inner.acceptor.fd(), now);
        sweep(&mut conns, &mut next_sweep, now, 0, shared);
    }
}

fn accept_some(inner: &Inner, ep: &Epoll, conns: &mut Slab<Box<Conn>>) -> bool {
    let shared = &inner.shared;
    inner.acceptor.accept_batch(shared, |fd| {
        set_nonblocking(fd);
        let token = conns.insert(Box::new(Conn::new(fd)));
        if !ep.ctl(libc::EPOLL_CTL_ADD, fd, ARM, token) {
            conns.remove(token);
            return;
        }
        shared.add(Counter::ConnectionsOpen, 1);
    })
}

/// What the dispatcher does with a connection's bytes: wait for more (re-arm), hand a whole
/// frame to the pool, or answer BUSY / an error itself.
fn on_step(inner: &Inner, ep: &Epoll, conns: &mut Slab<Box<Conn>>, token: u64, step: Step) {
    let shared = &inner.shared;
    let mut step = step;
    loop {
        match step {
            Step::NeedMore => {
                if let Some(c) = conns.get_mut(token) {
                    ep.ctl(libc::EPOLL_CTL_MOD, c.fd, ARM, token);
                }
                return;
            }
            Step::Refused(code, seq, tag) => {
                if let Some(mut c) = conns.remove(token) {
                    c.prepare_error(code, seq, tag, 0, shared);
                    let _ = c.write_some(shared);
                    shared.sub(Counter::ConnectionsOpen, 1);
                }
                return;
            }
            Step::Frame(req) => {
                let mut q = inner.queue.lock().expect("not poisoned");
                if q.len() < shared.cfg.pool_queue {
                    let Some(conn) = conns.take(token) else {
                        return;
                    };
                    q.push_back(Job { token, conn, req });
                    drop(q);
                    inner.ready.notify_one();
                    return;
                }
                drop(q);
                // Full: refuse this request at once and go on reading the connection.
                let Some(c) = conns.get_mut(token) else {
                    return;
                };
                c.prepare_error(ErrorCode::Busy, req.seq, req.client_tag, 0, shared);
                if c.write_some(shared) != WriteOutcome::Done || !c.finish_reply() {
                    conns.remove(token);
                    shared.sub(Counter::ConnectionsOpen, 1);
                    return;
                }
                step = c.reader.check(&mut c.buf, shared.cfg.max_payload);
            }
        }
    }
}

/// Goes on with a reply a worker could not send whole (the socket's buffer was full).
fn finish_write(inner: &Inner, ep: &Epoll, conns: &mut Slab<Box<Conn>>, token: u64) {
    let shared = &inner.shared;
    let Some(c) = conns.get_mut(token) else {
        return;
    };
    match c.write_some(shared) {
        WriteOutcome::WouldBlock => {
            ep.ctl(libc::EPOLL_CTL_MOD, c.fd, ARM_OUT, token);
        }
        WriteOutcome::Done if c.finish_reply() => {
            let step = c.reader.check(&mut c.buf, shared.cfg.max_payload);
            on_step(inner, ep, conns, token, step);
        }
        WriteOutcome::Done | WriteOutcome::Failed => {
            conns.remove(token);
            shared.sub(Counter::ConnectionsOpen, 1);
        }
    }
}

fn worker(inner: &Inner, id: u16) {
    let shared = &inner.shared;
    if pin_to(&shared.cfg.cpus).is_err() {
        return;
    }
    let _mark = ThreadMark::new(shared);
    loop {
        let job = {
            let mut q = inner.queue.lock().expect("not poisoned");
            loop {
                if shared.stopping() {
                    return;
                }
                if let Some(j) = q.pop_front() {
                    break j;
                }
                q = inner.ready.wait(q).expect("not poisoned");
            }
        };
        let Job {
            token,
            mut conn,
            req,
        } = job;
        conn.prepare_reply(&req, id, shared);
        // One non-blocking attempt: a client that does not read its replies never holds a
        // worker; what is left goes back to the dispatcher with the connection.
        let keep = match conn.write_some(shared) {
            WriteOutcome::Done => conn.finish_reply(),
            WriteOutcome::WouldBlock => true,
            WriteOutcome::Failed => false,
        };
        inner
            .returned
            .lock()
            .expect("not poisoned")
            .push(Returned { token, conn, keep });
        inner.waker.wake();
    }
}
