//! The generator's connections: their states, the table of them, connecting, and waiting for events.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum St {
    Connecting,
    Idle,
    Sending,
    Receiving,
    Dead,
}

pub(super) struct GConn {
    pub(super) fd: RawFd,
    pub(super) st: St,
    pub(super) tag: u64,
    pub(super) seq: u32,
    pub(super) planned_ns: u64,
    pub(super) sent_ns: u64,
    pub(super) free_since_ns: u64,
    pub(super) hdr: [u8; REQUEST_HEADER],
    pub(super) out_done: usize,
    pub(super) in_hdr: [u8; RESPONSE_HEADER],
    pub(super) in_got: usize,
    /// Reply payload length announced by its header (once read).
    pub(super) reply_len: usize,
    pub(super) reply_kind: u8,
    pub(super) error_code: [u8; 2],
    pub(super) completed: u64,
    pub(super) connect_started_ns: u64,
    /// The last reply was BUSY from a server that closes after it: EOF is then a refusal.
    pub(super) refused_last: bool,
}

/// A pool of client connections to one server.
pub struct Generator<'p> {
    pub(super) target: SocketAddr,
    pub(super) expect_design: Option<u8>,
    pub(super) pattern: &'p [u8],
    pub(super) conns: Vec<GConn>,
    pub(super) idle: Vec<u32>,
    pub(super) fifo: VecDeque<u64>,
    pub(super) ep: Epoll,
    pub(super) events: Vec<libc::epoll_event>,
    pub(super) scratch: Vec<u8>,
    pub(super) sources: Sources,
    pub(super) workers_seen: Vec<u64>,
    pub(super) pwait2: bool,
    /// Connections not dead (kept as a count: the run loop asks every round).
    pub(super) alive: usize,
    pub failures: Failures,
}

/// Backlog of planned requests (per connection) beyond which a step is saturated.
pub(super) const BACKLOG_PER_CONN: usize = 10;
/// A planned request waiting longer than this to be sent saturates the step.
pub(super) const MAX_LAG_NS: u64 = 1_000_000_000;

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
            give_up_above_ns: None,
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

    pub(super) fn start_connect(&mut self) -> bool {
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

    pub(super) fn finish_connect(&mut self, ci: usize) {
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

    pub(super) fn kill(&mut self, ci: usize, why: Option<Failure>) {
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
    pub(super) fn wait(&mut self, timeout_ns: Option<u64>) -> usize {
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

    pub(super) fn ep_wait(&mut self, ms: i32) -> i32 {
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
}
