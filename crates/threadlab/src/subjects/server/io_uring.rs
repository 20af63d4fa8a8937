//! `io_uring`: one ring per server CPU, each on a pinned thread with its own SO_REUSEPORT
//! listener; accept, recv and send are submitted as completions, never waited on with epoll.
//! Probed at start: where the kernel or a seccomp policy refuses io_uring (Docker's default
//! profile, `kernel.io_uring_disabled`), the design is skipped with the reason.
//!
//! A connection has at most one operation in flight (recv while reading a frame, send while
//! its reply goes out), so its buffer is never freed under the kernel: a connection that must
//! close while an operation is in flight is shut down, and freed when that completion arrives.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;

use super::evloop::{note_expiry, Conn, Waker};
use super::framing::Step;
use super::net::{self, Acceptor};
use super::running::{per_core, start_loops};
use super::shared::{Counter, ServerConfig, Shared};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "io_uring",
    id: 8,
    model: Model::EventLoop,
    summary: "one io_uring per server CPU (accept, recv, send as completions), each pinned with its own SO_REUSEPORT listener",
    start,
    holds: unbounded,
};

const OP_ACCEPT: u64 = 1;
const OP_RECV: u64 = 2;
const OP_SEND: u64 = 3;
const OP_WAKE: u64 = 4;
const OP_TICK: u64 = 5;
const OP_RESUME: u64 = 6;
/// The slot field of operations that belong to no connection.
const NO_CONN: u64 = 0xff_ffff;

fn ud(slot: u64, op: u64) -> u64 {
    (slot << 8) | op
}

/// Whether io_uring can run here, with what this design uses; the reason when not.
pub fn probe() -> std::result::Result<(), String> {
    let ring = IoUring::new(8).map_err(|e| {
        let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
            .map(|s| format!("kernel.io_uring_disabled = {}", s.trim()))
            .unwrap_or_else(|_| "no kernel.io_uring_disabled sysctl".into());
        let seccomp = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
            })
            .unwrap_or_else(|| "unknown".into());
        format!("io_uring_setup refused: {e} ({disabled}; seccomp mode {seccomp})")
    })?;
    let mut p = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut p)
        .map_err(|e| format!("io_uring opcode probe failed: {e}"))?;
    for (code, name) in [
        (opcode::Accept::CODE, "ACCEPT"),
        (opcode::Recv::CODE, "RECV"),
        (opcode::Send::CODE, "SEND"),
        (opcode::Read::CODE, "READ"),
        (opcode::Timeout::CODE, "TIMEOUT"),
    ] {
        if !p.is_supported(code) {
            return Err(format!("this kernel's io_uring lacks IORING_OP_{name}"));
        }
    }
    Ok(())
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    probe().map_err(Error::Skip)?;
    let cpus = per_core(cfg);
    let listeners = net::listen_group(cfg.listen, cfg.backlog, cpus.len(), false)?;
    start_loops(
        &DESIGN,
        cfg,
        listeners,
        |i| cpus[i].into_iter().collect(),
        ring_loop,
    )
}

/// One ring on `listener`, until the stop.
fn ring_loop(shared: &Shared, listener: RawFd, waker: &Waker, worker: u16) {
    if let Ok(mut r) = Ring::new(shared, listener, waker, worker) {
        r.run();
    }
}

/// A connection and whether the kernel holds an operation on it.
struct UConn {
    conn: Conn,
    in_flight: bool,
    closing: bool,
}

struct Ring<'a> {
    ring: IoUring,
    shared: &'a Shared,
    acceptor: Acceptor,
    waker: &'a Waker,
    worker: u16,
    conns: Vec<Option<UConn>>,
    free: Vec<usize>,
    live: usize,
    wake_buf: Box<[u8; 8]>,
    tick: Box<types::Timespec>,
    pause: Box<types::Timespec>,
    tick_armed: bool,
}

impl<'a> Ring<'a> {
    fn new(shared: &'a Shared, listener: RawFd, waker: &'a Waker, worker: u16) -> Result<Ring<'a>> {
        let ring = IoUring::builder()
            .setup_cqsize(4096)
            .build(256)
            .map_err(|e| Error::Fail(format!("io_uring_setup: {e}")))?;
        Ok(Ring {
            ring,
            shared,
            acceptor: Acceptor::new(listener),
            waker,
            worker,
            conns: Vec::new(),
            free: Vec::new(),
            live: 0,
            wake_buf: Box::new([0; 8]),
            tick: Box::new(types::Timespec::new().nsec(super::evloop::SWEEP.as_nanos() as u32)),
            pause: Box::new(types::Timespec::new().nsec(net::FD_BACKOFF.as_nanos() as u32)),
            tick_armed: false,
        })
    }

    /// Queues an entry, submitting first when the queue is full.
    fn push(&mut self, e: io_uring::squeue::Entry) {
        loop {
            // SAFETY: every buffer an entry points to (a connection's buffer, the wake buffer,
            // the timespecs) stays alive and unmoved until its completion is reaped: buffers
            // are heap-allocated and freed only once no operation on them is in flight.
            let pushed = unsafe { self.ring.submission().push(&e) };
            if pushed.is_ok() {
                return;
            }
            let _ = self.ring.submit();
        }
    }

    fn arm_accept(&mut self) {
        let e = opcode::Accept::new(
            types::Fd(self.acceptor.fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
        .user_data(ud(NO_CONN, OP_ACCEPT));
        self.push(e);
    }

    fn arm_wake(&mut self) {
        let e = opcode::Read::new(types::Fd(self.waker.0), self.wake_buf.as_mut_ptr(), 8)
            .build()
            .user_data(ud(NO_CONN, OP_WAKE));
        self.push(e);
    }

    fn arm_tick(&mut self) {
        if self.tick_armed {
            return;
        }
        let e = opcode::Timeout::new(&*self.tick as *const types::Timespec)
            .build()
            .user_data(ud(NO_CONN, OP_TICK));
        self.push(e);
        self.tick_armed = true;
    }

    fn recv(&mut self, slot: usize) {
        let Some(u) = self.conns[slot].as_mut() else {
            return;
        };
        let spare = u.conn.reader.spare(&mut u.conn.buf);
        let e = opcode::Recv::new(types::Fd(u.conn.fd), spare.as_mut_ptr(), spare.len() as u32)
            .build()
            .user_data(ud(slot as u64, OP_RECV));
        u.in_flight = true;
        self.push(e);
    }

    fn send(&mut self, slot: usize) {
        let Some(u) = self.conns[slot].as_mut() else {
            return;
        };
        let c = &u.conn;
        let e = opcode::Send::new(
            types::Fd(c.fd),
            c.buf[c.out_done..].as_ptr(),
            (c.out_len - c.out_done) as u32,
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(ud(slot as u64, OP_SEND));
        u.in_flight = true;
        self.push(e);
    }

    /// Closes a connection now, or once its operation completes.
    fn close(&mut self, slot: usize) {
        let Some(u) = self.conns[slot].as_mut() else {
            return;
        };
        if u.in_flight {
            u.closing = true;
            net::shutdown(u.conn.fd);
            return;
        }
        self.conns[slot] = None;
        self.free.push(slot);
        self.live -= 1;
        self.shared.sub(Counter::ConnectionsOpen, 1);
    }

    fn run(&mut self) {
        self.arm_accept();
        self.arm_wake();
        let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(512);
        loop {
            if self.ring.submit_and_wait(1).is_err() {
                // EINTR: go round.
            }
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            for &(data, res) in &cqes {
                let (slot, op) = ((data >> 8) as usize, data & 0xff);
                // A completion may run a frame's work inline: once stopping, the rest of the
                // batch is only accounted (nothing the kernel holds), not served.
                if self.shared.stopping() {
                    self.settle(slot, op);
                    continue;
                }
                match op {
                    OP_ACCEPT => self.on_accept(res),
                    OP_RESUME | OP_WAKE if self.shared.stopping() => {}
                    OP_RESUME => self.arm_accept(),
                    OP_WAKE => self.arm_wake(),
                    OP_TICK => {
                        self.tick_armed = false;
                        self.sweep();
                    }
                    OP_RECV => self.on_recv(slot, res),
                    OP_SEND => self.on_send(slot, res),
                    _ => {}
                }
            }
            if self.shared.stopping() {
                self.drain();
                return;
            }
        }
    }

    fn on_accept(&mut self, res: i32) {
        let shared = self.shared;
        if self.shared.stopping() {
            return;
        }
        if res >= 0 {
            let fd = res;
            net::set_nodelay(fd);
            shared.add(Counter::Accepted, 1);
            if shared.get(Counter::ConnectionsOpen) >= shared.cfg.max_connections as u64 {
                self.acceptor.refuse(fd, shared);
            } else {
                shared.add(Counter::ConnectionsOpen, 1);
                let u = UConn {
                    conn: Conn::new(fd),
                    in_flight: false,
                    closing: false,
                };
                let slot = match self.free.pop() {
                    Some(s) => {
                        self.conns[s] = Some(u);
                        s
                    }
                    None => {
                        self.conns.push(Some(u));
                        self.conns.len() - 1
                    }
                };
                self.live += 1;
                self.recv(slot);
                self.arm_tick();
            }
            self.arm_accept();
        } else if -res == libc::EMFILE || -res == libc::ENFILE {
            shared.add(Counter::FdExhausted, 1);
            // Drop one pending connection with the reserve descriptor (if one is pending: the
            // listener blocks), then resume accepting after the back-off.
            let mut p = libc::pollfd {
                fd: self.acceptor.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no wait.
            if unsafe { libc::poll(&mut p, 1, 0) } > 0 {
                let _ = self.acceptor.accept(shared);
            }
            let e = opcode::Timeout::new(&*self.pause as *const types::Timespec)
                .build()
                .user_data(ud(NO_CONN, OP_RESUME));
            self.push(e);
        } else {
            self.arm_accept();
        }
    }

    fn on_recv(&mut self, slot: usize, res: i32) {
        let shared = self.shared;
        let Some(u) = self.conns.get_mut(slot).and_then(|u| u.as_mut()) else {
            return;
        };
        u.in_flight = false;
        if u.closing {
            self.close(slot);
            return;
        }
        if res <= 0 {
            if res == -libc::ECONNRESET || (res == 0 && u.conn.reader.in_frame()) {
                shared.add(Counter::Resets, 1);
            }
            self.close(slot);
            return;
        }
        u.conn.last_active_ns = mono_ns();
        let step = u.conn.reader.advance(
            res as usize,
            &mut u.conn.buf,
            mono_ns(),
            shared.cfg.max_payload,
        );
        self.on_step(slot, step);
    }

    fn on_step(&mut self, slot: usize, step: Step) {
        let shared = self.shared;
        let worker = self.worker;
        let Some(u) = self.conns[slot].as_mut() else {
            return;
        };
        match step {
            Step::NeedMore => self.recv(slot),
            Step::Refused(code, seq, tag) => {
                u.conn.prepare_error(code, seq, tag, worker, shared);
                self.send(slot);
            }
            Step::Frame(r) => {
                u.conn.prepare_reply(&r, worker, shared);
                self.send(slot);
            }
        }
    }

    fn on_send(&mut self, slot: usize, res: i32) {
        let shared = self.shared;
        let Some(u) = self.conns.get_mut(slot).and_then(|u| u.as_mut()) else {
            return;
        };
        u.in_flight = false;
        if u.closing || res < 0 {
            if res == -libc::ECONNRESET || res == -libc::EPIPE {
                shared.add(Counter::Resets, 1);
            }
            self.close(slot);
            return;
        }
        u.conn.out_done += res as usize;
        if u.conn.writing() {
            self.send(slot);
            return;
        }
        u.conn.write_started_ns = 0;
        u.conn.last_active_ns = mono_ns();
        if !u.conn.finish_reply() {
            self.close(slot);
            return;
        }
        let step = u.conn.reader.check(&mut u.conn.buf, shared.cfg.max_payload);
        self.on_step(slot, step);
    }

    fn sweep(&mut self) {
        let now = mono_ns();
        for slot in 0..self.conns.len() {
            let Some(u) = self.conns[slot].as_ref() else {
                continue;
            };
            if u.closing {
                continue;
            }
            if let Some(why) = u.conn.expired(now, self.shared) {
                note_expiry(&u.conn, why, self.worker, self.shared);
                self.close(slot);
            }
        }
        if self.live > 0 && !self.shared.stopping() {
            self.arm_tick();
        }
    }

    /// Stopping: shut every connection down so its operation completes, cancel nothing else
    /// (accept and the timers complete or are torn down with the ring), and wait up to a
    /// second for the connections' completions before their buffers are freed.
    /// A completion that arrived while stopping: its operation is no longer in flight.
    fn settle(&mut self, slot: usize, op: u64) {
        if op == OP_RECV || op == OP_SEND {
            if let Some(Some(u)) = self.conns.get_mut(slot) {
                u.in_flight = false;
            }
        }
    }

    fn drain(&mut self) {
        for slot in 0..self.conns.len() {
            if self.conns[slot].is_some() {
                self.close(slot);
            }
        }
        net::shutdown(self.acceptor.fd());
        let end = Instant::now() + Duration::from_secs(1);
        while self.conns.iter().flatten().any(|u| u.in_flight) && Instant::now() < end {
            let ts = types::Timespec::new().nsec(10_000_000);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            let done: Vec<(u64, i32)> = self
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (data, _) in done {
                let (slot, op) = ((data >> 8) as usize, data & 0xff);
                if op == OP_RECV || op == OP_SEND {
                    self.settle(slot, op);
                    self.close(slot);
                }
            }
        }
        // Buffers the kernel may still write to are leaked rather than freed under it.
        for u in self.conns.drain(..).flatten() {
            if u.in_flight {
                std::mem::forget(u);
            }
        }
    }
}
