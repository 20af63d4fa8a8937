//! Socket plumbing shared by the designs: listeners with an explicit backlog, accepting when
//! file descriptors run out, and the raw system calls the blocking designs use.
//!
//! Every function that a forked child calls (`recv`, `send_all`, `set_timeout`, `close`,
//! `Acceptor::accept`, `peer_is_loopback`) is a thin wrapper over async-signal-safe system
//! calls: no allocation, no lock.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::error::{Error, Result};
use crate::measure::spawn::fd_refused;

use super::protocol::{encode_error, ErrorCode, ERROR_FRAME_MAX};
use super::shared::{pin_to, Counter, Shared, ThreadMark};

/// How long accepting pauses after the process ran out of file descriptors.
pub const FD_BACKOFF: Duration = Duration::from_millis(50);

/// A listening socket: SO_REUSEADDR, the backlog asked for explicitly, non-blocking when an
/// event loop owns it. Never SO_REUSEPORT: a port held by a live listener is refused
/// (EADDRINUSE), never joined.
pub fn listen(addr: SocketAddr, backlog: i32, nonblocking: bool) -> Result<Socket> {
    let s = bound(addr)?;
    finish_listen(s, addr, backlog, nonblocking)
}

/// `n` listeners on one port, one per event loop (SO_REUSEPORT: the kernel spreads connections
/// over them). The first is bound without SO_REUSEPORT, so a port another live listener holds
/// (another threadlab server with SO_REUSEPORT among them) is refused rather than joined; only
/// then does it take SO_REUSEPORT, before listen(), and its siblings join it.
pub fn listen_group(
    addr: SocketAddr,
    backlog: i32,
    n: usize,
    nonblocking: bool,
) -> Result<Vec<Socket>> {
    let fail = |what: &str, e: io::Error| Error::Fail(format!("{what} {addr}: {e}"));
    let first = bound(addr)?;
    first
        .set_reuse_port(true)
        .map_err(|e| fail("SO_REUSEPORT on", e))?;
    let first = finish_listen(first, addr, backlog, nonblocking)?;
    let port = local_addr(&first)?;
    let mut all = vec![first];
    for _ in 1..n.max(1) {
        let s = new_socket(port)?;
        s.set_reuse_port(true)
            .map_err(|e| fail("SO_REUSEPORT on", e))?;
        s.bind(&port.into()).map_err(|e| bind_error(port, e))?;
        all.push(finish_listen(s, port, backlog, nonblocking)?);
    }
    Ok(all)
}

fn new_socket(addr: SocketAddr) -> Result<Socket> {
    let fail = |what: &str, e: io::Error| Error::Fail(format!("{what} {addr}: {e}"));
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| fd_refused(&format!("a socket for {addr}"), &e))?;
    s.set_reuse_address(true)
        .map_err(|e| fail("SO_REUSEADDR on", e))?;
    Ok(s)
}

/// A socket bound to `addr` alone (no SO_REUSEPORT yet).
fn bound(addr: SocketAddr) -> Result<Socket> {
    let s = new_socket(addr)?;
    s.bind(&addr.into()).map_err(|e| bind_error(addr, e))?;
    Ok(s)
}

/// The bind error in words that say what to do.
fn bind_error(addr: SocketAddr, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EADDRINUSE) => Error::Fail(format!(
            "cannot listen on {addr}: another program listens there already; stop it or choose \
             another port"
        )),
        Some(libc::EACCES) => Error::Fail(format!(
            "cannot listen on {addr}: ports below 1024 need privilege; choose a port of 1024 or \
             above"
        )),
        Some(libc::EADDRNOTAVAIL) => Error::Fail(format!(
            "cannot listen on {addr}: no interface of this machine has that address"
        )),
        _ => Error::Fail(format!("cannot bind {addr}: {e}")),
    }
}

fn finish_listen(s: Socket, addr: SocketAddr, backlog: i32, nonblocking: bool) -> Result<Socket> {
    let fail = |what: &str, e: io::Error| Error::Fail(format!("{what} {addr}: {e}"));
    s.listen(backlog).map_err(|e| fail("cannot listen on", e))?;
    s.set_nonblocking(nonblocking)
        .map_err(|e| fail("O_NONBLOCK on", e))?;
    Ok(s)
}

/// The address a socket is bound to.
pub fn local_addr(s: &Socket) -> Result<SocketAddr> {
    s.local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or_else(|| Error::Fail("a listener has no inet address".into()))
}

/// errno of the last failed call.
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// TCP_NODELAY: every design sets it on accepted sockets (Go does by default), so replies are
/// never held back by Nagle's algorithm.
pub fn set_nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: a valid int option value of the right size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// SO_RCVTIMEO or SO_SNDTIMEO; `ns` = 0 means "wait forever", so at least 1 us is set.
pub fn set_timeout(fd: RawFd, option: libc::c_int, ns: u64) {
    let us = (ns / 1000).max(1);
    let tv = libc::timeval {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_usec: (us % 1_000_000) as libc::suseconds_t,
    };
    // SAFETY: a valid timeval of the right size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            &tv as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
}

/// recv, retried on EINTR; Err(errno).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> std::result::Result<usize, i32> {
    loop {
        // SAFETY: buf is valid for writes of its length.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

/// send with MSG_NOSIGNAL (no SIGPIPE), once; Err(errno).
pub fn send(fd: RawFd, buf: &[u8]) -> std::result::Result<usize, i32> {
    loop {
        // SAFETY: buf is valid for reads of its length.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
}

/// Sends all of `buf` on a blocking socket (SO_SNDTIMEO bounds each wait); Err(errno).
pub fn send_all(fd: RawFd, mut buf: &[u8]) -> std::result::Result<(), i32> {
    while !buf.is_empty() {
        let n = send(fd, buf)?;
        buf = &buf[n..];
    }
    Ok(())
}

pub fn close(fd: RawFd) {
    // SAFETY: closes a descriptor the caller owns and never uses again.
    unsafe {
        libc::close(fd);
    }
}

/// Ends both directions of a socket: a thread blocked reading it returns at once.
pub fn shutdown(fd: RawFd) {
    // SAFETY: shutdown has no memory preconditions; on a closed fd it fails harmlessly.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// Best-effort error frame: one non-blocking send; a peer that does not take it is closed
/// anyway.
pub fn send_error(fd: RawFd, shared: &Shared, code: ErrorCode, seq: u32, tag: u64, worker: u16) {
    let mut frame = [0u8; ERROR_FRAME_MAX];
    let n = encode_error(&mut frame, code, seq, tag, shared.design, worker);
    // SAFETY: frame is valid for reads of n bytes.
    unsafe {
        libc::send(
            fd,
            frame.as_ptr().cast(),
            n,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        );
    }
}

/// Loopback: 127.0.0.0/8, ::1, or an IPv4-mapped loopback address (how a v4 client reaches a
/// server listening on `[::]`).
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether the peer of `fd` is on loopback (127.0.0.0/8 or ::1, or v4-mapped loopback).
pub fn peer_is_loopback(fd: RawFd) -> bool {
    // SAFETY: storage is large enough for any address; len tells the kernel its size.
    unsafe {
        let mut ss: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getpeername(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) != 0 {
            return false;
        }
        match ss.ss_family as libc::c_int {
            libc::AF_INET => {
                let sin = &*(&ss as *const _ as *const libc::sockaddr_in);
                u32::from_be(sin.sin_addr.s_addr) >> 24 == 127
            }
            libc::AF_INET6 => {
                let sin6 = &*(&ss as *const _ as *const libc::sockaddr_in6);
                is_loopback(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
            }
            _ => false,
        }
    }
}

/// What one accept() gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Accepted {
    /// A connection (TCP_NODELAY set, close-on-exec).
    Conn(RawFd),
    /// Nothing pending (non-blocking listener).
    WouldBlock,
    /// The process is out of file descriptors: one pending connection was accepted with the
    /// reserve descriptor and closed at once; pause accepting for `FD_BACKOFF`.
    Exhausted,
    /// The listener was shut down: stop.
    Closed,
    /// A connection failed before it was accepted (reset in the queue...): try again.
    Retry,
}

/// Accepts connections, keeping one spare descriptor (/dev/null) for the moment the process
/// runs out: without it, a level-triggered loop or a blocking acceptor would spin on EMFILE
/// while the pending connection stays in the queue (tokio#3529, wai#928).
pub struct Acceptor {
    listener: RawFd,
    reserve: AtomicI32,
}

impl Acceptor {
    pub fn new(listener: RawFd) -> Acceptor {
        Acceptor {
            listener,
            reserve: AtomicI32::new(open_reserve()),
        }
    }

    pub fn fd(&self) -> RawFd {
        self.listener
    }

    pub fn accept(&self, shared: &Shared) -> Accepted {
        let fd = accept4(self.listener);
        if fd >= 0 {
            set_nodelay(fd);
            shared.add(Counter::Accepted, 1);
            return Accepted::Conn(fd);
        }
        match errno() {
            libc::EAGAIN => Accepted::WouldBlock,
            libc::EMFILE | libc::ENFILE => {
                shared.add(Counter::FdExhausted, 1);
                let spare = self.reserve.swap(-1, Ordering::SeqCst);
                if spare >= 0 {
                    close(spare);
                    let fd = accept4(self.listener);
                    if fd >= 0 {
                        send_error(fd, shared, ErrorCode::Busy, 0, 0, 0);
                        shared.add(Counter::Rejected, 1);
                        close(fd);
                    }
                    self.reserve.store(open_reserve(), Ordering::SeqCst);
                }
                Accepted::Exhausted
            }
            libc::EINVAL | libc::EBADF | libc::ENOTSOCK => Accepted::Closed,
            _ => Accepted::Retry,
        }
    }

    /// Refuses a connection over the server's cap: a BUSY frame, then close.
    pub fn refuse(&self, fd: RawFd, shared: &Shared) {
        send_error(fd, shared, ErrorCode::Busy, 0, 0, 0);
        shared.add(Counter::Rejected, 1);
        close(fd);
    }

    /// Whether `fd` fits under the connection cap; refused (BUSY, closed) when it does not.
    fn admit(&self, fd: RawFd, shared: &Shared) -> bool {
        if shared.get(Counter::ConnectionsOpen) >= shared.cfg.max_connections as u64 {
            self.refuse(fd, shared);
            return false;
        }
        true
    }

    /// An event loop's turn at its non-blocking listener: up to 64 pending connections (so
    /// that its other connections are not kept waiting), those over the cap refused, the
    /// others given to `take`. True when descriptors ran out: pause accepting for
    /// `FD_BACKOFF`.
    pub fn accept_batch(&self, shared: &Shared, mut take: impl FnMut(RawFd)) -> bool {
        for _ in 0..64 {
            match self.accept(shared) {
                Accepted::Conn(fd) => {
                    if self.admit(fd, shared) {
                        take(fd);
                    }
                }
                Accepted::Exhausted => return true,
                Accepted::WouldBlock | Accepted::Closed => return false,
                Accepted::Retry => {}
            }
        }
        false
    }

    /// A thread blocking in accept() until the stop (or until its listener is shut down):
    /// pinned to the server's CPUs first (the threads and processes it starts inherit the
    /// mask) and counted while it runs; each connection goes to `serve`, refused first when
    /// `capped` and over the cap; out of descriptors, it pauses for `FD_BACKOFF`.
    pub fn run_blocking(&self, shared: &Shared, capped: bool, mut serve: impl FnMut(RawFd)) {
        if pin_to(&shared.cfg.cpus).is_err() {
            return;
        }
        let _mark = ThreadMark::new(shared);
        while !shared.stopping() {
            match self.accept(shared) {
                Accepted::Conn(fd) => {
                    if !capped || self.admit(fd, shared) {
                        serve(fd);
                    }
                }
                Accepted::Exhausted => backoff(shared, FD_BACKOFF),
                Accepted::Closed => return,
                Accepted::WouldBlock | Accepted::Retry => {}
            }
        }
    }
}

/// accept4 without the peer's address, close-on-exec; -1 with errno set on failure.
fn accept4(listener: RawFd) -> RawFd {
    // SAFETY: null address pointers are allowed; flags are valid.
    unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        let r = self.reserve.swap(-1, Ordering::SeqCst);
        if r >= 0 {
            close(r);
        }
    }
}

fn open_reserve() -> RawFd {
    // SAFETY: a NUL-terminated path; open is async-signal-safe.
    unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) }
}

/// The fd of a socket2 socket, for the raw calls above.
pub fn raw(s: &Socket) -> RawFd {
    s.as_raw_fd()
}

/// Sleeps up to `d`, waking early when the server stops (checked every 10 ms).
pub fn backoff(shared: &Shared, d: Duration) {
    let end = std::time::Instant::now() + d;
    while !shared.stopping() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10).min(d));
    }
}
