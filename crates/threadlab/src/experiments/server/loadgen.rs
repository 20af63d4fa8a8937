//! The load generator: one pinned thread, epoll, non-blocking sockets, no allocation per
//! request, every reply verified (header and every payload byte).
//!
//! Open loop (the default): requests follow a plan made in advance, a constant rate or Poisson
//! arrivals with a fixed seed, global rather than per connection. A planned request goes to the
//! next idle connection; when none is idle it waits in a FIFO with its clock already running.
//! Latency counts from the planned send time (wrk2's model: no coordinated omission), so a
//! server that stalls is charged for every request that should have gone out meanwhile. Beside
//! it: the uncorrected service time (actual send to reply) and the generator's own send lag
//! (actual send minus when it could have sent: the later of the planned time and the moment its
//! connection became free), which shows the generator's health.
//!
//! Closed loop (only for peak throughput, labelled so): each connection sends its next request
//! as soon as its reply is in.
//!
//! Waiting uses epoll_pwait2 (nanosecond timeouts) with a 1 ns timer slack; with a CPU of its
//! own the generator spins the last `spin` before a planned send instead of sleeping through a
//! timer's wake-up cost.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{IntoRawFd, RawFd};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;
use crate::subjects::server::evloop::Epoll;
use crate::subjects::server::protocol::{
    encode_request, parse_response, pattern_offset, ErrorCode, Request, KIND_ERROR, KIND_RESPONSE,
    REQUEST_HEADER, RESPONSE_HEADER,
};
use crate::subjects::server::usage::{rusage, Usage};

use super::client::{connect_failure, Failure, Sources, REPLY_TIMEOUT};

/// Highest latency a histogram records: 60 s.
const HIST_MAX_NS: u64 = 60_000_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

fn record(h: &mut Histogram<u64>, ns: u64) {
    let _ = h.record(ns.clamp(1, HIST_MAX_NS));
}

/// How requests are issued.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadMode {
    /// A planned schedule at `rate` requests per second.
    Open { rate: f64, arrivals: Arrivals },
    /// Back to back on every connection: peak throughput only.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    Constant,
    /// Exponential gaps from a seeded generator (the same plan every run).
    Poisson {
        seed: u64,
    },
}

/// One step: what to send, how, for how long.
#[derive(Debug, Clone)]
pub struct Plan {
    pub payload: u32,
    /// (spin_us, block_us) asked of the server per request.
    pub work: (u32, u32),
    pub mode: LoadMode,
    /// Requests planned before this is over are served but not recorded.
    pub warmup: Duration,
    pub measure: Duration,
    /// The measured period is cut into this many windows, each with its own histograms and
    /// server usage: the samples of the step's metrics.
    pub windows: usize,
    /// Spin instead of sleeping this long before a planned send (0 when sharing a CPU).
    pub spin: Duration,
}

/// Failures by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failures {
    pub connect: u64,
    pub addr_not_avail: u64,
    pub reset: u64,
    pub timeout: u64,
    pub verify: u64,
    /// Error frames other than BUSY.
    pub server_error: u64,
}

impl Failures {
    pub fn total(&self) -> u64 {
        self.connect
            + self.addr_not_avail
            + self.reset
            + self.timeout
            + self.verify
            + self.server_error
    }

    fn count(&mut self, f: &Failure) {
        match f {
            Failure::Connect(_) => self.connect += 1,
            Failure::AddrNotAvail => self.addr_not_avail += 1,
            Failure::Reset => self.reset += 1,
            Failure::Timeout => self.timeout += 1,
            Failure::Verify(_) => self.verify += 1,
            Failure::Refused(_) => self.server_error += 1,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "connect {}, no local address {}, reset {}, timeout {}, wrong reply {}, server error {}",
            self.connect, self.addr_not_avail, self.reset, self.timeout, self.verify, self.server_error
        )
    }
}

/// One window of the measured period. Its histograms are reduced to the figures the metrics
/// use when the step ends (the step's merged histograms are kept whole).
pub struct Window {
    /// Requests planned in this window, from planned send to reply: p50 and p99, ns (None
    /// when no request of the window completed).
    pub latency_p50_ns: Option<u64>,
    pub latency_p99_ns: Option<u64>,
    /// The same requests' p99 from their actual send (uncorrected), ns.
    pub service_p99_ns: Option<u64>,
    /// Replies that arrived in this window (by arrival time).
    pub completed: u64,
    /// Server usage over this window (from the caller's probe).
    pub usage: Usage,
    pub length_ns: u64,
}

/// What a step measured.
pub struct StepResult {
    pub windows: Vec<Window>,
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    pub send_lag: Histogram<u64>,
    /// Service time as the server measured it (first request byte to reply write).
    pub server_service: Histogram<u64>,
    /// Replies that arrived during the measured period.
    pub completed: u64,
    pub measured_ns: u64,
    pub failures: Failures,
    /// BUSY replies: refused, not lost.
    pub rejected: u64,
    /// Replies per connection over the measured period (fairness).
    pub per_conn: Vec<u64>,
    /// Distinct worker ids seen in replies (threads, processes, loops).
    pub workers: usize,
    /// The generator thread's CPU over the measured period, and the part spent spinning.
    pub generator_cpu_ns: u64,
    pub generator_spin_ns: u64,
    /// Time-averaged requests in flight over the measured period (Little's law's L).
    pub mean_in_flight: f64,
    /// Why the step was cut short (the backlog or the lag grew without bound).
    pub saturated: Option<String>,
    /// Planned requests that never went out (saturated): recorded with their wait so far.
    pub unsent: u64,
    /// Requests planned within the measured period (open loop).
    pub planned: u64,
    pub server_usage: Usage,
}

impl StepResult {
    pub fn achieved_per_s(&self) -> f64 {
        self.completed as f64 / (self.measured_ns as f64 / 1e9)
    }

    /// Little's law, L = X * W, with W the mean service time: the generator's own bookkeeping
    /// agrees with itself (the-benchmarker's p50 that was really the generator's stall fails
    /// this). Relative mismatch.
    pub fn little_mismatch(&self) -> Option<f64> {
        if self.service.is_empty() || self.mean_in_flight <= 0.0 {
            return None;
        }
        let l = self.achieved_per_s() * self.service.mean() / 1e9;
        Some((l - self.mean_in_flight).abs() / self.mean_in_flight)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Connecting,
    Idle,
    Sending,
    Receiving,
    Dead,
}

struct GConn {
    fd: RawFd,
    st: St,
    tag: u64,
    seq: u32,
    planned_ns: u64,
    sent_ns: u64,
    free_since_ns: u64,
    hdr: [u8; REQUEST_HEADER],
    out_done: usize,
    in_hdr: [u8; RESPONSE_HEADER],
    in_got: usize,
    /// Reply payload length announced by its header (once read).
    reply_len: usize,
    reply_kind: u8,
    error_code: [u8; 2],
    completed: u64,
    connect_started_ns: u64,
    /// The last reply was BUSY from a server that closes after it: EOF is then a refusal.
    refused_last: bool,
}

/// A pool of client connections to one server.
pub struct Generator<'p> {
    target: SocketAddr,
    expect_design: Option<u8>,
    pattern: &'p [u8],
    conns: Vec<GConn>,
    idle: Vec<u32>,
    fifo: VecDeque<u64>,
    ep: Epoll,
    events: Vec<libc::epoll_event>,
    scratch: Vec<u8>,
    sources: Sources,
    workers_seen: Vec<u64>,
    pwait2: bool,
    /// Connections not dead (kept as a count: the run loop asks every round).
    alive: usize,
    pub failures: Failures,
}

/// Backlog of planned requests (per connection) beyond which a step is saturated.
const BACKLOG_PER_CONN: usize = 10;
/// A planned request waiting longer than this to be sent saturates the step.
const MAX_LAG_NS: u64 = 1_000_000_000;

impl<'p> Generator<'p> {
    /// Room for `capacity` connections, allocated (and touched) now, before any connection:
    /// the caller reads the server's memory after this, so the generator's own tables are not
    /// counted as the server's.
    pub fn new(
        target: SocketAddr,
        expect_design: Option<u8>,
        pattern: &'p [u8],
        capacity: usize,
    ) -> Result<Generator<'p>> {
        let mut g = Generator {
            target,
            expect_design,
            pattern,
            conns: Vec::with_capacity(capacity),
            idle: Vec::with_capacity(capacity),
            fifo: VecDeque::with_capacity(capacity * BACKLOG_PER_CONN + 1),
            ep: Epoll::new()?,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
            scratch: vec![0u8; 1 << 16],
            sources: Sources::for_target(target),
            workers_seen: vec![0u64; 65_536 / 64],
            pwait2: true,
            alive: 0,
            failures: Failures::default(),
        };
        // Touch the FIFO's pages so they are resident before the baseline.
        for _ in 0..g.fifo.capacity() {
            g.fifo.push_back(0);
        }
        g.fifo.clear();
        Ok(g)
    }

    pub fn live(&self) -> usize {
        self.alive
    }

    /// Opens `n` more connections, at most 128 connecting at once (a burst of SYNs larger than
    /// the backlog would overflow it), each then served one request so that the server has
    /// set up whatever it keeps per connection (a thread, a process, a task). Failures are
    /// counted; Ok with the connections that made it.
    pub fn connect(&mut self, n: usize, cancel: &Cancel) -> Result<usize> {
        let first = self.conns.len();
        let mut started = 0;
        let mut pending = 0;
        let deadline = mono_ns() + 30_000_000_000;
        while (started < n || pending > 0) && mono_ns() < deadline {
            cancel.check()?;
            while started < n && pending < 128 {
                started += 1;
                if self.start_connect() {
                    pending += 1;
                }
            }
            let got = self.wait(Some(10_000_000));
            for i in 0..got {
                let ev = self.events[i];
                let ci = ev.u64 as usize;
                if self.conns[ci].st != St::Connecting {
                    continue;
                }
                pending -= 1;
                self.finish_connect(ci);
            }
            // Connections that never answered.
            let now = mono_ns();
            for ci in first..self.conns.len() {
                let c = &self.conns[ci];
                if c.st == St::Connecting
                    && now > c.connect_started_ns + REPLY_TIMEOUT.as_nanos() as u64
                {
                    pending -= 1;
                    self.kill(ci, Some(Failure::Timeout));
                }
            }
        }
        // Hello: one verified request on each new connection, closed loop.
        let hello = Plan {
            payload: 16,
            work: (0, 0),
            mode: LoadMode::Closed,
            warmup: Duration::ZERO,
            measure: Duration::ZERO,
            windows: 1,
            spin: Duration::ZERO,
        };
        let ids: Vec<u32> = (first..self.conns.len())
            .filter(|&i| self.conns[i].st == St::Idle)
            .map(|i| i as u32)
            .collect();
        for &ci in &ids {
            self.send(ci as usize, mono_ns(), &hello);
        }
        let end = mono_ns() + 10_000_000_000;
        while ids
            .iter()
            .any(|&ci| matches!(self.conns[ci as usize].st, St::Sending | St::Receiving))
            && mono_ns() < end
        {
            cancel.check()?;
            let got = self.wait(Some(10_000_000));
            for i in 0..got {
                let ev = self.events[i];
                self.on_event(ev.u64 as usize, ev.events, &hello, &mut None);
            }
        }
        for &ci in &ids {
            if matches!(self.conns[ci as usize].st, St::Sending | St::Receiving) {
                self.kill(ci as usize, Some(Failure::Timeout));
            }
        }
        self.idle = (0..self.conns.len() as u32)
            .filter(|&i| self.conns[i as usize].st == St::Idle)
            .collect();
        Ok(self.live())
    }

    fn start_connect(&mut self) -> bool {
        let ci = self.conns.len();
        let mut c = GConn {
            fd: -1,
            st: St::Dead,
            tag: ((ci as u64) << 32) | 0x5eed,
            seq: 0,
            planned_ns: 0,
            sent_ns: 0,
            free_since_ns: 0,
            hdr: [0; REQUEST_HEADER],
            out_done: 0,
            in_hdr: [0; RESPONSE_HEADER],
            in_got: 0,
            reply_len: 0,
            reply_kind: 0,
            error_code: [0; 2],
            completed: 0,
            connect_started_ns: mono_ns(),
            refused_last: false,
        };
        let sock = match self.sources.socket(self.target) {
            Ok(s) => s,
            Err(e) => {
                self.failures.count(&connect_failure(&e));
                self.conns.push(c);
                return false;
            }
        };
        let _ = sock.set_nonblocking(true);
        let r = sock.connect(&self.target.into());
        let fd = sock.into_raw_fd();
        c.fd = fd;
        match r {
            Ok(()) => c.st = St::Idle,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => c.st = St::Connecting,
            Err(e) => {
                self.failures.count(&connect_failure(&e));
                // SAFETY: closes the descriptor we just took from the socket.
                unsafe { libc::close(fd) };
                c.fd = -1;
                self.conns.push(c);
                return false;
            }
        }
        let interest = if c.st == St::Connecting {
            libc::EPOLLOUT as u32
        } else {
            libc::EPOLLIN as u32
        };
        let connecting = c.st == St::Connecting;
        self.alive += 1;
        self.conns.push(c);
        self.ep.ctl(libc::EPOLL_CTL_ADD, fd, interest, ci as u64);
        connecting
    }

    fn finish_connect(&mut self, ci: usize) {
        let fd = self.conns[ci].fd;
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: valid out pointers of the right size.
        unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut err as *mut _ as *mut libc::c_void,
                &mut len,
            );
        }
        if err != 0 {
            let e = std::io::Error::from_raw_os_error(err);
            self.kill(ci, Some(connect_failure(&e)));
            return;
        }
        self.conns[ci].st = St::Idle;
        self.ep
            .ctl(libc::EPOLL_CTL_MOD, fd, libc::EPOLLIN as u32, ci as u64);
    }

    fn kill(&mut self, ci: usize, why: Option<Failure>) {
        if let Some(f) = &why {
            self.failures.count(f);
        }
        let c = &mut self.conns[ci];
        if c.fd >= 0 {
            // SAFETY: closes a descriptor this connection owns; epoll forgets it.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
        if c.st != St::Dead {
            self.alive -= 1;
        }
        c.st = St::Dead;
    }

    /// Waits for events up to `timeout_ns` (None = forever, 0 = poll); how many arrived.
    fn wait(&mut self, timeout_ns: Option<u64>) -> usize {
        let n = self.events.len() as libc::c_int;
        let rc = match timeout_ns {
            None => self.ep_wait(-1),
            Some(0) => self.ep_wait(0),
            Some(ns) if self.pwait2 => {
                let ts = libc::timespec {
                    tv_sec: (ns / 1_000_000_000) as libc::time_t,
                    tv_nsec: (ns % 1_000_000_000) as libc::c_long,
                };
                // SAFETY: events is valid for `n` entries; ts is a valid timeout; no sigmask.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_epoll_pwait2,
                        self.ep.0,
                        self.events.as_mut_ptr(),
                        n,
                        &ts as *const libc::timespec,
                        std::ptr::null::<libc::sigset_t>(),
                        0usize,
                    )
                };
                if rc < 0 && crate::subjects::server::net::errno() == libc::ENOSYS {
                    self.pwait2 = false;
                    return self.wait(timeout_ns);
                }
                rc as i32
            }
            Some(ns) => self.ep_wait(ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32),
        };
        rc.max(0) as usize
    }

    fn ep_wait(&mut self, ms: i32) -> i32 {
        // SAFETY: events is valid for its length.
        unsafe {
            libc::epoll_wait(
                self.ep.0,
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                ms,
            )
        }
    }

    /// Sends the next request on an idle connection.
    fn send(&mut self, ci: usize, planned_ns: u64, plan: &Plan) {
        let now = mono_ns();
        let c = &mut self.conns[ci];
        c.seq = c.seq.wrapping_add(1);
        let mut r = Request::echo(c.seq, plan.payload, c.tag);
        (r.work_spin_us, r.work_block_us) = plan.work;
        c.hdr = encode_request(&r);
        c.planned_ns = planned_ns;
        c.sent_ns = now;
        c.out_done = 0;
        c.in_got = 0;
        c.reply_len = 0;
        c.st = St::Sending;
        self.write_some(ci, plan);
    }

    fn write_some(&mut self, ci: usize, plan: &Plan) {
        let len = plan.payload as usize;
        let c = &mut self.conns[ci];
        let off = pattern_offset(c.tag, c.seq);
        let payload = &self.pattern[off..off + len];
        let total = REQUEST_HEADER + len;
        let mut failed = false;
        while c.out_done < total {
            let (a, b): (&[u8], &[u8]) = if c.out_done < REQUEST_HEADER {
                (&c.hdr[c.out_done..], payload)
            } else {
                (&payload[c.out_done - REQUEST_HEADER..], &[])
            };
            let iov = [
                libc::iovec {
                    iov_base: a.as_ptr() as *mut libc::c_void,
                    iov_len: a.len(),
                },
                libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                },
            ];
            // SAFETY: both iovecs point into live buffers of the given lengths.
            let n = unsafe { libc::writev(c.fd, iov.as_ptr(), 2) };
            if n > 0 {
                c.out_done += n as usize;
                continue;
            }
            let e = crate::subjects::server::net::errno();
            if n < 0 && e == libc::EAGAIN {
                // Wait for room: the rare partial write of a large request.
                self.ep.ctl(
                    libc::EPOLL_CTL_MOD,
                    c.fd,
                    (libc::EPOLLIN | libc::EPOLLOUT) as u32,
                    ci as u64,
                );
                return;
            }
            if n < 0 && e == libc::EINTR {
                continue;
            }
            failed = true;
            break;
        }
        if failed {
            self.kill(ci, Some(Failure::Reset));
        } else if c.st == St::Sending {
            c.st = St::Receiving;
        }
    }

    /// Handles readiness of connection `ci`; `done` receives the reply's timing when one
    /// completes.
    fn on_event(&mut self, ci: usize, flags: u32, plan: &Plan, done: &mut Option<Done>) {
        let st = self.conns[ci].st;
        if st == St::Sending && flags & libc::EPOLLOUT as u32 != 0 {
            self.write_some(ci, plan);
            if self.conns[ci].st == St::Receiving {
                self.ep.ctl(
                    libc::EPOLL_CTL_MOD,
                    self.conns[ci].fd,
                    libc::EPOLLIN as u32,
                    ci as u64,
                );
            }
        }
        let st = self.conns[ci].st;
        if flags & (libc::EPOLLIN | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
            return;
        }
        match st {
            St::Receiving | St::Sending => self.read_reply(ci, plan, done),
            St::Idle => {
                // Nothing is expected: EOF (the server closed an idle connection) or garbage.
                let mut b = [0u8; 64];
                // SAFETY: reads into a valid local buffer.
                let n = unsafe { libc::recv(self.conns[ci].fd, b.as_mut_ptr().cast(), 64, 0) };
                if n == 0 {
                    let refused = self.conns[ci].refused_last;
                    self.kill(ci, (!refused).then_some(Failure::Reset));
                } else if n > 0 {
                    self.kill(ci, Some(Failure::Verify("bytes nobody asked for".into())));
                }
            }
            St::Connecting | St::Dead => {}
        }
    }

    fn read_reply(&mut self, ci: usize, plan: &Plan, done: &mut Option<Done>) {
        let expect = plan.payload as usize;
        loop {
            let c = &self.conns[ci];
            let want = if c.in_got < RESPONSE_HEADER {
                RESPONSE_HEADER + expect - c.in_got
            } else {
                RESPONSE_HEADER + c.reply_len - c.in_got
            };
            let want = want.min(self.scratch.len());
            // SAFETY: scratch is valid for `want` bytes.
            let n = unsafe { libc::recv(c.fd, self.scratch.as_mut_ptr().cast(), want, 0) };
            if n < 0 {
                let e = crate::subjects::server::net::errno();
                if e == libc::EAGAIN || e == libc::EINTR {
                    return;
                }
                self.kill(ci, Some(Failure::Reset));
                return;
            }
            if n == 0 {
                self.kill(ci, Some(Failure::Reset));
                return;
            }
            let n = n as usize;
            if let Err(f) = self.take_bytes(ci, n, plan) {
                self.kill(ci, Some(f));
                return;
            }
            let c = &self.conns[ci];
            if c.in_got >= RESPONSE_HEADER && c.in_got == RESPONSE_HEADER + c.reply_len {
                self.complete(ci, done);
                return;
            }
            if n < want {
                return;
            }
        }
    }

    /// Consumes `n` bytes just read into `scratch`: header bytes, then payload checked against
    /// the request's own slice of the pattern.
    fn take_bytes(&mut self, ci: usize, n: usize, plan: &Plan) -> std::result::Result<(), Failure> {
        let pattern = self.pattern;
        let c = &mut self.conns[ci];
        let mut at = 0;
        if c.in_got < RESPONSE_HEADER {
            let k = (RESPONSE_HEADER - c.in_got).min(n);
            c.in_hdr[c.in_got..c.in_got + k].copy_from_slice(&self.scratch[..k]);
            c.in_got += k;
            at = k;
            if c.in_got == RESPONSE_HEADER {
                let h = parse_response(&c.in_hdr)
                    .map_err(|_| Failure::Verify("bad magic or kind".into()))?;
                // An error frame with seq and tag 0 refuses the connection itself (a server
                // over its connection cap, or out of descriptors), not this request.
                let refusal = h.kind == KIND_ERROR && h.seq == 0 && h.client_tag == 0;
                if !refusal && (h.seq != c.seq || h.client_tag != c.tag) {
                    return Err(Failure::Verify(format!(
                        "seq {} for {}, tag {:#x} for {:#x}",
                        h.seq, c.seq, h.client_tag, c.tag
                    )));
                }
                c.reply_kind = h.kind;
                match h.kind {
                    KIND_RESPONSE => {
                        if h.payload_len != plan.payload {
                            return Err(Failure::Verify(format!(
                                "length {} for {}",
                                h.payload_len, plan.payload
                            )));
                        }
                        if let Some(d) = self.expect_design {
                            if h.design != d {
                                return Err(Failure::Verify(format!(
                                    "design {} answered, {d} expected",
                                    h.design
                                )));
                            }
                        }
                    }
                    KIND_ERROR if (2..=256).contains(&h.payload_len) => {}
                    _ => return Err(Failure::Verify(format!("reply kind {}", h.kind))),
                }
                c.reply_len = h.payload_len as usize;
                let w = h.worker as usize;
                self.workers_seen[w / 64] |= 1 << (w % 64);
            }
        }
        let body = &self.scratch[at..n];
        if body.is_empty() {
            return Ok(());
        }
        let pos = c.in_got - RESPONSE_HEADER;
        if pos + body.len() > c.reply_len {
            return Err(Failure::Verify("a reply longer than announced".into()));
        }
        if c.reply_kind == KIND_ERROR {
            for (i, &b) in body.iter().enumerate() {
                if pos + i < 2 {
                    c.error_code[pos + i] = b;
                }
            }
        } else {
            let off = pattern_offset(c.tag, c.seq) + pos;
            if body != &pattern[off..off + body.len()] {
                return Err(Failure::Verify(format!(
                    "payload differs from the request near byte {pos}"
                )));
            }
        }
        c.in_got += body.len();
        Ok(())
    }

    fn complete(&mut self, ci: usize, done: &mut Option<Done>) {
        let now = mono_ns();
        let c = &mut self.conns[ci];
        let refused = c.reply_kind == KIND_ERROR;
        let code = ErrorCode::from_u16(u16::from_le_bytes(c.error_code));
        c.st = St::Idle;
        let free_since = c.free_since_ns;
        c.free_since_ns = now;
        c.refused_last = refused && code == Some(ErrorCode::Busy);
        let server_ns = u64::from_le_bytes(c.in_hdr[24..32].try_into().expect("8 bytes"));
        *done = Some(Done {
            conn: ci,
            planned_ns: c.planned_ns,
            sent_ns: c.sent_ns,
            ready_ns: free_since.max(c.planned_ns),
            now_ns: now,
            server_ns,
            outcome: match (refused, code) {
                (false, _) => Outcome::Reply,
                (true, Some(ErrorCode::Busy)) => Outcome::Busy,
                (true, _) => Outcome::Error,
            },
        });
    }

    /// Runs one step on the live connections. `usage` is read at the end of the warm-up and
    /// at every window boundary (the server's CPU and switches, as the caller measures them).
    pub fn run(
        &mut self,
        plan: &Plan,
        cancel: &Cancel,
        usage: &mut dyn FnMut() -> Usage,
    ) -> Result<StepResult> {
        let windows = plan.windows.max(1);
        let mut win_latency: Vec<Histogram<u64>> = (0..windows).map(|_| histogram()).collect();
        let mut win_service: Vec<Histogram<u64>> = (0..windows).map(|_| histogram()).collect();
        let mut win_completed = vec![0u64; windows];
        let mut latency = histogram();
        let mut service = histogram();
        let mut send_lag = histogram();
        let mut server_service = histogram();
        let mut per_conn_start: Vec<u64> = self.conns.iter().map(|c| c.completed).collect();
        self.workers_seen.iter_mut().for_each(|w| *w = 0);
        let failures_before = self.failures;
        let mut rejected = 0u64;
        let slack = TimerSlack::set(1);

        let t0 = mono_ns() + 1_000_000;
        let warm_end = t0 + plan.warmup.as_nanos() as u64;
        let end = warm_end + plan.measure.as_nanos() as u64;
        let wlen = ((end - warm_end) / windows as u64).max(1);
        let drain_end = end + REPLY_TIMEOUT.as_nanos() as u64;
        let window_of = |t: u64| -> Option<usize> {
            (t >= warm_end && t < end).then(|| (((t - warm_end) / wlen) as usize).min(windows - 1))
        };
        let mut gap: Box<dyn FnMut() -> u64> = match plan.mode {
            LoadMode::Open { rate, arrivals } => {
                let mean = 1e9 / rate.max(1e-3);
                match arrivals {
                    Arrivals::Constant => {
                        // Accumulate in f64 so that a rate whose gap is not whole ns stays exact.
                        let mut acc = 0f64;
                        let mut last = 0u64;
                        Box::new(move || {
                            acc += mean;
                            let next = acc as u64;
                            let g = next - last;
                            last = next;
                            g
                        })
                    }
                    Arrivals::Poisson { seed } => {
                        let mut s = seed | 1;
                        Box::new(move || {
                            s ^= s << 13;
                            s ^= s >> 7;
                            s ^= s << 17;
                            let u = ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                            (-u.ln() * mean) as u64
                        })
                    }
                }
            }
            LoadMode::Closed => Box::new(|| 0),
        };
        let open = matches!(plan.mode, LoadMode::Open { .. });
        let mut next_planned = t0;
        let mut planning = true;
        let mut saturated: Option<String> = None;
        let mut boundary = 0usize; // next usage sample: warm_end + boundary * wlen
        let mut usage_at: Vec<Usage> = Vec::with_capacity(windows + 1);
        // Both ends start at the step's start: a step that never reaches its measured period
        // then shows no generator time, rather than the thread's whole life.
        let mut gen_cpu_at = [rusage(libc::RUSAGE_THREAD).cpu_ns; 2];
        let mut end_read = false;
        let mut spin_ns = 0u64;
        let mut in_flight = 0u64;
        let mut area = 0f64; // integral of in_flight over the measured period, ns
        let mut last_change = warm_end;
        let mut next_sweep = mono_ns();
        let spin = plan.spin.as_nanos() as u64;
        let mut done: Option<Done> = None;
        let mut unsent = 0u64;
        let mut planned_in_period = 0u64;

        loop {
            let now = mono_ns();
            while boundary <= windows && now >= warm_end + boundary as u64 * wlen {
                if boundary == 0 {
                    gen_cpu_at[0] = rusage(libc::RUSAGE_THREAD).cpu_ns;
                    per_conn_start = self.conns.iter().map(|c| c.completed).collect();
                    last_change = now.max(warm_end);
                }
                if boundary == windows {
                    gen_cpu_at[1] = rusage(libc::RUSAGE_THREAD).cpu_ns;
                    end_read = true;
                    let t = now.min(end);
                    area += in_flight as f64 * t.saturating_sub(last_change) as f64;
                    last_change = u64::MAX;
                }
                usage_at.push(usage());
                boundary += 1;
            }
            // Plan.
            if open && planning {
                while next_planned <= now && next_planned < end {
                    if next_planned >= warm_end {
                        planned_in_period += 1;
                    }
                    self.fifo.push_back(next_planned);
                    next_planned += gap().max(1);
                }
                if next_planned >= end {
                    planning = false;
                }
                let backlog = self.fifo.len();
                let oldest = self.fifo.front().map_or(0, |&t| now.saturating_sub(t));
                if backlog > BACKLOG_PER_CONN * self.conns.len().max(1) || oldest > MAX_LAG_NS {
                    saturated = Some(format!(
                        "the server fell behind the plan: {backlog} requests waiting for a free \
                         connection, the oldest for {:.0} ms; step stopped",
                        oldest as f64 / 1e6
                    ));
                    planning = false;
                }
            }
            // Dispatch.
            // Closed loop issues only until the end; open loop drains its FIFO past it.
            let issuing = open || now < end;
            while issuing && !self.idle.is_empty() {
                let planned = if open {
                    match self.fifo.front() {
                        Some(&t) if saturated.is_none() => t,
                        _ => break,
                    }
                } else {
                    now
                };
                let Some(ci) = self.idle.pop() else { break };
                if self.conns[ci as usize].st != St::Idle {
                    continue;
                }
                if open {
                    self.fifo.pop_front();
                }
                self.send(ci as usize, planned, plan);
                if self.conns[ci as usize].st == St::Dead {
                    continue;
                }
                // In flight from its actual send: the same instant its service time counts from.
                let sent = self.conns[ci as usize].sent_ns;
                if last_change != u64::MAX && sent >= warm_end {
                    area += in_flight as f64 * sent.saturating_sub(last_change) as f64;
                    last_change = sent;
                }
                in_flight += 1;
            }
            let finished_plan = if open {
                !planning && (self.fifo.is_empty() || saturated.is_some())
            } else {
                now >= end
            };
            if finished_plan && in_flight == 0 && boundary > windows {
                break;
            }
            if now > drain_end || self.live() == 0 {
                break;
            }
            cancel.check()?;
            // Wait until the next planned send, window boundary or sweep.
            let mut until = next_sweep;
            if open && planning && !self.idle.is_empty() {
                until = until.min(next_planned);
            }
            if boundary <= windows {
                until = until.min(warm_end + boundary as u64 * wlen);
            }
            if !open && now < end && !self.idle.is_empty() {
                until = now;
            }
            let wait = until.saturating_sub(mono_ns());
            let got = if wait == 0 {
                self.wait(Some(0))
            } else if wait <= spin {
                let got = self.wait(Some(0));
                if got == 0 {
                    // The whole idle round counts as spinning: its poll and its bookkeeping.
                    spin_ns += mono_ns() - now;
                }
                got
            } else {
                self.wait(Some(wait - spin))
            };
            for i in 0..got {
                let ev = self.events[i];
                let ci = ev.u64 as usize;
                let was_live = matches!(self.conns[ci].st, St::Sending | St::Receiving);
                self.on_event(ci, ev.events, plan, &mut done);
                if let Some(d) = done.take() {
                    let t = d.now_ns;
                    if last_change != u64::MAX && t >= warm_end {
                        area += in_flight as f64 * t.saturating_sub(last_change) as f64;
                        last_change = t;
                    }
                    in_flight -= 1;
                    self.idle.push(d.conn as u32);
                    match d.outcome {
                        Outcome::Reply => {}
                        Outcome::Busy => {
                            if window_of(d.planned_ns).is_some() {
                                rejected += 1;
                            }
                            continue;
                        }
                        Outcome::Error => {
                            self.failures.server_error += 1;
                            continue;
                        }
                    }
                    let lat = d.now_ns - d.planned_ns;
                    let svc = d.now_ns - d.sent_ns;
                    if let Some(w) = window_of(d.planned_ns) {
                        record(&mut win_latency[w], lat);
                        record(&mut win_service[w], svc);
                        record(&mut latency, lat);
                        record(&mut service, svc);
                        record(&mut send_lag, d.sent_ns.saturating_sub(d.ready_ns));
                        record(&mut server_service, d.server_ns);
                    }
                    if let Some(w) = window_of(d.now_ns) {
                        win_completed[w] += 1;
                        self.conns[d.conn].completed += 1;
                    }
                } else if was_live && self.conns[ci].st == St::Dead {
                    in_flight -= 1;
                }
            }
            let now = mono_ns();
            if now >= next_sweep {
                next_sweep = now + 10_000_000;
                let limit = REPLY_TIMEOUT.as_nanos() as u64;
                for ci in 0..self.conns.len() {
                    let c = &self.conns[ci];
                    if matches!(c.st, St::Sending | St::Receiving) && now > c.sent_ns + limit {
                        self.kill(ci, Some(Failure::Timeout));
                        in_flight -= 1;
                    }
                }
            }
        }
        drop(slack);
        // Requests planned but never sent (a saturated step): charged with their wait so far.
        let stop = mono_ns();
        for &t in &self.fifo {
            if window_of(t).is_some() {
                record(&mut latency, stop - t);
                unsent += 1;
            }
        }
        self.fifo.clear();
        // Connections still waiting for a reply at the drain limit.
        for ci in 0..self.conns.len() {
            if matches!(self.conns[ci].st, St::Sending | St::Receiving) {
                self.kill(ci, Some(Failure::Timeout));
            }
        }
        self.idle = (0..self.conns.len() as u32)
            .filter(|&i| self.conns[i as usize].st == St::Idle)
            .collect();
        while usage_at.len() < windows + 1 {
            usage_at.push(usage());
        }
        if !end_read {
            gen_cpu_at[1] = rusage(libc::RUSAGE_THREAD).cpu_ns;
        }
        let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        let win: Vec<Window> = (0..windows)
            .map(|k| Window {
                latency_p50_ns: q(&win_latency[k], 0.5),
                latency_p99_ns: q(&win_latency[k], 0.99),
                service_p99_ns: q(&win_service[k], 0.99),
                completed: win_completed[k],
                usage: usage_at[k + 1].since(usage_at[k]),
                length_ns: wlen,
            })
            .collect();
        drop((win_latency, win_service));
        let measured_ns = end - warm_end;
        let completed = win.iter().map(|w| w.completed).sum();
        let per_conn = self
            .conns
            .iter()
            .zip(&per_conn_start)
            .filter(|(c, _)| c.st != St::Dead || c.completed > 0)
            .map(|(c, s)| c.completed - s)
            .collect();
        let mut failures = self.failures;
        failures.connect -= failures_before.connect;
        failures.addr_not_avail -= failures_before.addr_not_avail;
        failures.reset -= failures_before.reset;
        failures.timeout -= failures_before.timeout;
        failures.verify -= failures_before.verify;
        failures.server_error -= failures_before.server_error;
        Ok(StepResult {
            server_usage: usage_at[windows].since(usage_at[0]),
            windows: win,
            latency,
            service,
            send_lag,
            server_service,
            completed,
            measured_ns,
            failures,
            rejected,
            per_conn,
            workers: self
                .workers_seen
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum(),
            generator_cpu_ns: gen_cpu_at[1].saturating_sub(gen_cpu_at[0]),
            generator_spin_ns: spin_ns,
            mean_in_flight: area / measured_ns.max(1) as f64,
            saturated,
            unsent,
            planned: planned_in_period,
        })
    }
}

impl Drop for Generator<'_> {
    fn drop(&mut self) {
        for c in &mut self.conns {
            if c.fd >= 0 {
                // SAFETY: closes descriptors the generator owns.
                unsafe { libc::close(c.fd) };
                c.fd = -1;
            }
        }
    }
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Reply,
    Busy,
    /// An error frame other than BUSY.
    Error,
}

/// A finished transaction's times.
struct Done {
    conn: usize,
    planned_ns: u64,
    sent_ns: u64,
    /// When it could have been sent: the later of its planned time and its connection freeing.
    ready_ns: u64,
    now_ns: u64,
    server_ns: u64,
    outcome: Outcome,
}

/// The calling thread's timer slack set for as long as this lives (the default 50 us would
/// make every timed wait late by up to that much).
struct TimerSlack(libc::c_ulong);

impl TimerSlack {
    fn set(ns: libc::c_ulong) -> TimerSlack {
        // SAFETY: prctl with PR_GET/SET_TIMERSLACK has no memory arguments.
        unsafe {
            let old = libc::prctl(libc::PR_GET_TIMERSLACK) as libc::c_ulong;
            libc::prctl(libc::PR_SET_TIMERSLACK, ns);
            TimerSlack(old)
        }
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, self.0);
        }
    }
}

/// Reads /proc/net/netstat's TcpExt counters the experiment checks: (ListenOverflows,
/// ListenDrops). None when the file cannot be read (a namespace may hide it).
pub fn listen_counters() -> Option<(u64, u64)> {
    parse_listen_counters(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

pub fn parse_listen_counters(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |name: &str| -> Option<u64> {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse().ok()
    };
    Some((get("ListenOverflows")?, get("ListenDrops")?))
}

/// Fails the experiment when the generator cannot be trusted at all (every connection died).
pub fn require_live(g: &Generator, what: &str) -> Result<()> {
    if g.live() == 0 {
        return Err(Error::Fail(format!(
            "{what}: no connection to the server survived ({})",
            g.failures.describe()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_counters_are_read_by_name() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops TW\n\
                    TcpExt: 0 7 9 3\n\
                    IpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(parse_listen_counters(text), Some((7, 9)));
        assert_eq!(parse_listen_counters("IpExt: a\nIpExt: 1\n"), None);
        if std::path::Path::new("/proc/net/netstat").exists() {
            assert!(listen_counters().is_some());
        }
    }
}
