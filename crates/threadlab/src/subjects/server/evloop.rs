//! The event-driven parts: epoll plumbing, a slab of connections addressed by generation-checked
//! tokens, a non-blocking connection (read, reply, write, deadlines), and the loop of the
//! `epoll` and `epoll_per_core` designs.
//!
//! The loop is the C10K "readiness" design: one thread, level-triggered epoll, a state machine
//! per connection (reading a frame, or writing its reply; never reading the next frame while a
//! reply is unsent, so each connection holds at most one frame's buffer). Work a request asks
//! for runs inline: a blocking request stalls every connection of the loop, which is the point
//! the blocking-work pattern makes.

use std::borrow::Borrow;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::measure::process::mono_ns;

use super::blocking::do_work;
use super::framing::{new_buffer, FrameReader, Step};
use super::net::{self, Acceptor};
use super::protocol::{encode_error, ErrorCode, Request, RequestKind, ERROR_FRAME_MAX};
use super::reply::write_reply;
use super::shared::{Counter, Shared};

/// Token of the listening socket in an epoll set.
pub const LISTENER: u64 = u64::MAX;
/// Token of the eventfd that wakes a loop (stop, returned connections).
pub const WAKE: u64 = u64::MAX - 1;
/// How often deadlines and idle connections are checked while there are connections.
pub const SWEEP: Duration = Duration::from_millis(100);

/// An epoll instance, closed on drop.
pub struct Epoll(pub RawFd);

impl Epoll {
    pub fn new() -> Result<Epoll> {
        // SAFETY: no preconditions.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(Error::os("epoll_create1"));
        }
        Ok(Epoll(fd))
    }

    pub fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> bool {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid event for the duration of the call.
        unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) == 0 }
    }

    /// Waits for events; `timeout_ms` -1 = forever. Returns how many were stored.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: events is valid for writes of its length.
        let n = unsafe {
            libc::epoll_wait(
                self.0,
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                timeout_ms,
            )
        };
        n.max(0) as usize
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        net::close(self.0);
    }
}

/// A non-blocking eventfd that wakes a loop.
pub struct Waker(pub RawFd);

impl Waker {
    pub fn new() -> Result<Waker> {
        // SAFETY: no preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::os("eventfd"));
        }
        Ok(Waker(fd))
    }

    pub fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a valid buffer.
        unsafe {
            libc::write(self.0, one.as_ptr().cast(), 8);
        }
    }

    pub fn drain(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reads 8 bytes into a valid buffer.
        unsafe {
            libc::read(self.0, b.as_mut_ptr().cast(), 8);
        }
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        net::close(self.0);
    }
}

/// Connections by token: slot index in the low 32 bits, the slot's generation in the high
/// ones, so a stale event for a closed connection never reaches the one that reused its slot.
pub struct Slab<T> {
    items: Vec<Option<T>>,
    gens: Vec<u32>,
    free: Vec<usize>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    pub fn insert(&mut self, t: T) -> u64 {
        let i = match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(t);
                i
            }
            None => {
                self.items.push(Some(t));
                self.gens.push(0);
                self.items.len() - 1
            }
        };
        self.len += 1;
        ((self.gens[i] as u64) << 32) | i as u64
    }

    fn index(&self, token: u64) -> Option<usize> {
        let i = (token & 0xffff_ffff) as usize;
        (i < self.items.len() && self.gens[i] as u64 == token >> 32).then_some(i)
    }

    pub fn get_mut(&mut self, token: u64) -> Option<&mut T> {
        let i = self.index(token)?;
        self.items[i].as_mut()
    }

    /// Takes the value out but keeps the slot (and token) reserved: `put_back` returns it.
    pub fn take(&mut self, token: u64) -> Option<T> {
        let i = self.index(token)?;
        self.items[i].take()
    }

    pub fn put_back(&mut self, token: u64, t: T) {
        if let Some(i) = self.index(token) {
            self.items[i] = Some(t);
        }
    }

    /// Frees the slot (its value, if still there, is returned).
    pub fn remove(&mut self, token: u64) -> Option<T> {
        let i = self.index(token)?;
        let t = self.items[i].take();
        self.gens[i] = self.gens[i].wrapping_add(1);
        self.free.push(i);
        self.len -= 1;
        t
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tokens of the slots holding a value.
    pub fn tokens(&self) -> Vec<u64> {
        self.items
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_some())
            .map(|(i, _)| ((self.gens[i] as u64) << 32) | i as u64)
            .collect()
    }
}

/// What a read gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    Step(Step),
    WouldBlock,
    /// The peer closed or reset: close without a reply.
    Gone,
}

/// What a write gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Done,
    WouldBlock,
    Failed,
}

/// A non-blocking connection.
pub struct Conn {
    pub fd: RawFd,
    pub buf: Vec<u8>,
    pub reader: FrameReader,
    /// Bytes of the reply at the start of `buf`, and how many have left.
    pub out_len: usize,
    pub out_done: usize,
    /// Close once the reply is out (a refusal, or CLOSE_AFTER).
    pub close_after: bool,
    /// When the current reply started going out (write deadline), 0 when none.
    pub write_started_ns: u64,
    /// Last activity, for the idle timeout.
    pub last_active_ns: u64,
}

impl Conn {
    pub fn new(fd: RawFd) -> Conn {
        Conn {
            fd,
            buf: new_buffer(),
            reader: FrameReader::new(),
            out_len: 0,
            out_done: 0,
            close_after: false,
            write_started_ns: 0,
            last_active_ns: mono_ns(),
        }
    }

    pub fn writing(&self) -> bool {
        self.out_done < self.out_len
    }

    /// One read into the free part of the buffer.
    pub fn read_some(&mut self, shared: &Shared) -> ReadOutcome {
        let spare = self.reader.spare(&mut self.buf);
        match net::recv(self.fd, spare) {
            Ok(0) => {
                if self.reader.in_frame() {
                    shared.add(Counter::Resets, 1);
                }
                ReadOutcome::Gone
            }
            Ok(n) => {
                let now = mono_ns();
                self.last_active_ns = now;
                ReadOutcome::Step(self.reader.advance(
                    n,
                    &mut self.buf,
                    now,
                    shared.cfg.max_payload,
                ))
            }
            Err(libc::EAGAIN) => ReadOutcome::WouldBlock,
            Err(libc::ECONNRESET) | Err(libc::EPIPE) => {
                shared.add(Counter::Resets, 1);
                ReadOutcome::Gone
            }
            Err(_) => ReadOutcome::Gone,
        }
    }

    /// Does the work a frame asks for and lays its reply out at the start of the buffer.
    /// STATS is answered only to loopback peers or when allowed.
    pub fn prepare_reply(&mut self, r: &Request, worker: u16, shared: &Shared) {
        if r.kind == RequestKind::Stats
            && !(shared.cfg.allow_remote_stats || net::peer_is_loopback(self.fd))
        {
            self.prepare_error(ErrorCode::Forbidden, r.seq, r.client_tag, worker, shared);
            return;
        }
        if r.kind == RequestKind::Echo {
            do_work(r, shared);
        }
        let len = write_reply(r, self.reader.started_ns(), &mut self.buf, shared, worker);
        self.start_write(len, r.close_after());
    }

    /// Lays out an error frame and marks the connection to close after it.
    pub fn prepare_error(
        &mut self,
        code: ErrorCode,
        seq: u32,
        tag: u64,
        worker: u16,
        shared: &Shared,
    ) {
        shared.count_refusal(code);
        let mut frame = [0u8; ERROR_FRAME_MAX];
        let n = encode_error(&mut frame, code, seq, tag, shared.design, worker);
        self.buf[..n].copy_from_slice(&frame[..n]);
        self.start_write(n, code != ErrorCode::Busy);
    }

    fn start_write(&mut self, len: usize, close_after: bool) {
        self.out_len = len;
        self.out_done = 0;
        self.close_after = close_after;
        self.write_started_ns = mono_ns();
    }

    /// Writes what it can of the reply.
    pub fn write_some(&mut self, shared: &Shared) -> WriteOutcome {
        while self.out_done < self.out_len {
            match net::send(self.fd, &self.buf[self.out_done..self.out_len]) {
                Ok(n) => self.out_done += n,
                Err(libc::EAGAIN) => return WriteOutcome::WouldBlock,
                Err(libc::ECONNRESET) | Err(libc::EPIPE) => {
                    shared.add(Counter::Resets, 1);
                    return WriteOutcome::Failed;
                }
                Err(_) => return WriteOutcome::Failed,
            }
        }
        self.write_started_ns = 0;
        self.last_active_ns = mono_ns();
        WriteOutcome::Done
    }

    /// After a reply went out: drop the frame it answered. False when the connection must
    /// close now.
    pub fn finish_reply(&mut self) -> bool {
        self.out_len = 0;
        self.out_done = 0;
        if self.close_after {
            return false;
        }
        self.reader.consume(&mut self.buf, mono_ns());
        true
    }

    /// Why this connection should be closed at `now`, if it should: a frame or a reply past
    /// its deadline, or idle too long.
    pub fn expired(&self, now: u64, shared: &Shared) -> Option<Expiry> {
        let deadline = shared.cfg.frame_deadline.as_nanos() as u64;
        if self.write_started_ns != 0 && now > self.write_started_ns + deadline {
            return Some(Expiry::Write);
        }
        if self.reader.in_frame() && !self.writing() && now > self.reader.started_ns() + deadline {
            return Some(Expiry::Frame);
        }
        let idle = shared.cfg.idle_timeout.as_nanos() as u64;
        if !self.reader.in_frame() && !self.writing() && now > self.last_active_ns + idle {
            return Some(Expiry::Idle);
        }
        None
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        net::close(self.fd);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    Frame,
    Write,
    Idle,
}

/// Accepting paused after the process ran out of descriptors: the listener leaves the epoll set
/// for `FD_BACKOFF`, then comes back.
#[derive(Default)]
pub struct AcceptPause {
    /// When accepting resumes; 0 while it is not paused.
    pub until_ns: u64,
}

impl AcceptPause {
    pub fn start(&mut self, ep: &Epoll, listener: RawFd) {
        ep.ctl(libc::EPOLL_CTL_DEL, listener, 0, 0);
        self.until_ns = mono_ns() + net::FD_BACKOFF.as_nanos() as u64;
    }

    pub fn is_on(&self) -> bool {
        self.until_ns != 0
    }

    /// Puts the listener back once the pause is over.
    pub fn end_when_over(&mut self, ep: &Epoll, listener: RawFd, now: u64) {
        if self.until_ns != 0 && now >= self.until_ns {
            self.until_ns = 0;
            ep.ctl(
                libc::EPOLL_CTL_ADD,
                listener,
                libc::EPOLLIN as u32,
                LISTENER,
            );
        }
    }
}

/// Every `SWEEP` (when `now` reaches `next_sweep`): closes the connections past a deadline or
/// idle too long, counting each.
pub fn sweep<C: Borrow<Conn>>(
    conns: &mut Slab<C>,
    next_sweep: &mut u64,
    now: u64,
    worker: u16,
    shared: &Shared,
) {
    if now < *next_sweep {
        return;
    }
    *next_sweep = now + SWEEP.as_nanos() as u64;
    for t in conns.tokens() {
        let why = conns
            .get_mut(t)
            .and_then(|c| <C as Borrow<Conn>>::borrow(c).expired(now, shared));
        if let Some(why) = why {
            if let Some(c) = conns.remove(t) {
                note_expiry(c.borrow(), why, worker, shared);
                shared.sub(Counter::ConnectionsOpen, 1);
            }
        }
    }
}

/// Counts an expiry and, for a frame past its deadline, tries to tell the client.
pub fn note_expiry(c: &Conn, why: Expiry, worker: u16, shared: &Shared) {
    match why {
        Expiry::Frame => {
            shared.count_refusal(ErrorCode::Deadline);
            net::send_error(c.fd, shared, ErrorCode::Deadline, 0, 0, worker);
        }
        Expiry::Write => shared.add(Counter::Deadline, 1),
        Expiry::Idle => shared.add(Counter::IdleClosed, 1),
    }
}

/// Sets O_NONBLOCK on an accepted socket.
pub fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own, no pointers.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

/// One `epoll` loop: accepts from `acceptor` and serves its connections until the server stops.
pub fn run_loop(shared: &Shared, acceptor: &Acceptor, waker: &Waker, worker: u16) -> Result<()> {
    let ep = Epoll::new()?;
    if !ep.ctl(
        libc::EPOLL_CTL_ADD,
        acceptor.fd(),
        libc::EPOLLIN as u32,
        LISTENER,
    ) || !ep.ctl(libc::EPOLL_CTL_ADD, waker.0, libc::EPOLLIN as u32, WAKE)
    {
        return Err(Error::os("epoll_ctl ADD of the listener"));
    }
    let mut conns: Slab<Conn> = Slab::default();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut pause = AcceptPause::default();
    let mut next_sweep = 0u64;
    loop {
        let now = mono_ns();
        let mut timeout = -1i32;
        if !conns.is_empty() {
            timeout = (next_sweep.saturating_sub(now) / 1_000_000).min(100) as i32;
        }
        if pause.is_on() {
            let left = (pause.until_ns.saturating_sub(now) / 1_000_000) as i32;
            timeout = if timeout < 0 { left } else { timeout.min(left) };
        }
        let n = ep.wait(&mut events, timeout);
        for ev in &events[..n] {
            // Each event may run a frame's work inline: the flag is looked at before each one,
            // not once per batch, so a stop waits for one slice of work, not a whole batch.
            if shared.stopping() {
                break;
            }
            let (flags, token) = (ev.events, ev.u64);
            match token {
                LISTENER => {
                    if accept_some(shared, acceptor, &ep, &mut conns) {
                        pause.start(&ep, acceptor.fd());
                    }
                }
                WAKE => {
                    waker.drain();
                }
                _ => {
                    let Some(c) = conns.get_mut(token) else {
                        continue;
                    };
                    if !drive(c, flags, worker, shared, &ep, token) {
                        conns.remove(token);
                        shared.sub(Counter::ConnectionsOpen, 1);
                    }
                }
            }
        }
        if shared.stopping() {
            shared.sub(Counter::ConnectionsOpen, conns.len() as u64);
            return Ok(());
        }
        let now = mono_ns();
        pause.end_when_over(&ep, acceptor.fd(), now);
        sweep(&mut conns, &mut next_sweep, now, worker, shared);
    }
}

/// Accepts what is pending (at most 64, to stay fair to the connections); true when the
/// process ran out of descriptors and accepting must pause.
fn accept_some(shared: &Shared, acceptor: &Acceptor, ep: &Epoll, conns: &mut Slab<Conn>) -> bool {
    acceptor.accept_batch(shared, |fd| {
        set_nonblocking(fd);
        let token = conns.insert(Conn::new(fd));
        if !ep.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token) {
            conns.remove(token);
            return;
        }
        shared.add(Counter::ConnectionsOpen, 1);
    })
}

/// Advances one connection on its readiness; false when it must be closed.
fn drive(c: &mut Conn, flags: u32, worker: u16, shared: &Shared, ep: &Epoll, token: u64) -> bool {
    if c.writing() {
        if flags & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
            return true;
        }
        return match c.write_some(shared) {
            WriteOutcome::Done => {
                if !c.finish_reply() {
                    return false;
                }
                ep.ctl(libc::EPOLL_CTL_MOD, c.fd, libc::EPOLLIN as u32, token);
                serve_buffered(c, worker, shared, ep, token)
            }
            WriteOutcome::WouldBlock => true,
            WriteOutcome::Failed => false,
        };
    }
    match c.read_some(shared) {
        ReadOutcome::WouldBlock => true,
        ReadOutcome::Gone => false,
        ReadOutcome::Step(step) => answer(c, step, worker, shared, ep, token),
    }
}

/// Serves frames already in the buffer (a client that pipelined), after a reply went out.
fn serve_buffered(c: &mut Conn, worker: u16, shared: &Shared, ep: &Epoll, token: u64) -> bool {
    let step = c.reader.check(&mut c.buf, shared.cfg.max_payload);
    answer(c, step, worker, shared, ep, token)
}

/// Answers the frames the connection holds: replies go out at once when the socket takes them,
/// otherwise the connection waits for EPOLLOUT.
fn answer(
    c: &mut Conn,
    mut step: Step,
    worker: u16,
    shared: &Shared,
    ep: &Epoll,
    token: u64,
) -> bool {
    loop {
        match step {
            Step::NeedMore => return true,
            Step::Refused(code, seq, tag) => {
                c.prepare_error(code, seq, tag, worker, shared);
                let _ = c.write_some(shared);
                return false;
            }
            // Pipelined frames are answered one after another inline; a stop ends the run.
            Step::Frame(_) if shared.stopping() => return false,
            Step::Frame(r) => {
                c.prepare_reply(&r, worker, shared);
                match c.write_some(shared) {
                    WriteOutcome::Done => {
                        if !c.finish_reply() {
                            return false;
                        }
                        step = c.reader.check(&mut c.buf, shared.cfg.max_payload);
                    }
                    WriteOutcome::WouldBlock => {
                        ep.ctl(libc::EPOLL_CTL_MOD, c.fd, libc::EPOLLOUT as u32, token);
                        return true;
                    }
                    WriteOutcome::Failed => return false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_tokens_go_stale_when_a_slot_is_reused() {
        let mut s: Slab<u32> = Slab::default();
        let a = s.insert(1);
        let b = s.insert(2);
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(a), Some(1));
        let c = s.insert(3);
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "slot reused");
        assert_ne!(c, a);
        assert!(s.get_mut(a).is_none(), "the old token is stale");
        assert_eq!(s.get_mut(c), Some(&mut 3));
        let v = s.take(b).unwrap();
        assert!(s.get_mut(b).is_none());
        s.put_back(b, v + 10);
        assert_eq!(s.get_mut(b), Some(&mut 12));
        assert_eq!(s.tokens().len(), 2);
    }
}
