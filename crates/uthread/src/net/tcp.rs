//! TCP: [`TcpListener`] and [`TcpStream`], shaped like `std::net`'s.

use super::addr::{each_addr, RawAddr};
use super::socket::{getsockopt, new_socket, setsockopt, Socket};
use crate::poll::poller::{cvt, Dir};
use crate::runtime::ops::sleep;
use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How a [`TcpListener`] is set up: the listen backlog and the address-reuse options.
///
/// ```
/// use uthread::net::{ListenOptions, TcpListener};
/// let opts = ListenOptions::new().backlog(4096).reuse_port(true);
/// let a = TcpListener::bind_with("127.0.0.1:0", &opts).unwrap();
/// // A second listener on the same port: the kernel spreads connections between them.
/// let b = TcpListener::bind_with(a.local_addr().unwrap(), &opts).unwrap();
/// # drop((a, b));
/// ```
#[derive(Clone, Debug)]
pub struct ListenOptions {
    backlog: i32,
    reuse_address: bool,
    reuse_port: bool,
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            backlog: ListenOptions::DEFAULT_BACKLOG,
            reuse_address: true,
            reuse_port: false,
        }
    }
}

impl ListenOptions {
    /// The default backlog, 1024. std and mio use 128, which a burst of connections overflows
    /// (the kernel then drops SYNs, and clients retry after a second); the kernel caps it at
    /// `net.core.somaxconn` (4096 on recent kernels).
    pub const DEFAULT_BACKLOG: i32 = 1024;

    /// Backlog 1024, `SO_REUSEADDR` on (as std does), `SO_REUSEPORT` off.
    pub fn new() -> ListenOptions {
        ListenOptions::default()
    }

    /// The length of the queue of connections not yet accepted.
    pub fn backlog(mut self, n: i32) -> Self {
        self.backlog = n;
        self
    }

    /// `SO_REUSEADDR`: bind even while old connections on the port are in `TIME_WAIT`.
    pub fn reuse_address(mut self, on: bool) -> Self {
        self.reuse_address = on;
        self
    }

    /// `SO_REUSEPORT`: several listeners (one per carrier, say) may bind the same address; the
    /// kernel spreads incoming connections among them.
    pub fn reuse_port(mut self, on: bool) -> Self {
        self.reuse_port = on;
        self
    }
}

/// A TCP listening socket. `accept` blocks only the calling green thread.
///
/// When the process runs out of descriptors (`EMFILE`, `ENFILE`), `accept` does not spin: it
/// closes a spare descriptor it keeps for this, accepts the oldest pending connection and
/// closes it at once (its client sees the connection closed instead of waiting in the
/// backlog), reopens the spare, then sleeps (10 ms, doubling up to 160 ms while the shortage
/// lasts) before it returns the error. A loop that just calls `accept` again is therefore
/// paced, and recovers as soon as descriptors are free.
pub struct TcpListener {
    sock: Socket,
    spare: Mutex<Option<OwnedFd>>,
    shortage: AtomicU32,
}

/// Opens the spare descriptor a listener gives up when the process runs out of them.
fn open_spare() -> Option<OwnedFd> {
    // SAFETY: opening /dev/null; a non-negative result is a fresh descriptor we own.
    unsafe {
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    }
}

impl TcpListener {
    /// Binds to `addr` with the default [`ListenOptions`] (backlog 1024, `SO_REUSEADDR`).
    /// Name resolution blocks the calling OS thread, as in std.
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        TcpListener::bind_with(addr, &ListenOptions::default())
    }

    /// Binds to `addr` with the given options.
    pub fn bind_with<A: ToSocketAddrs>(addr: A, opts: &ListenOptions) -> io::Result<TcpListener> {
        each_addr(addr, |a| {
            let raw = RawAddr::from(a);
            let fd = new_socket(raw.family(), libc::SOCK_STREAM)?;
            let s = fd.as_raw_fd();
            if opts.reuse_address {
                setsockopt(s, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1 as libc::c_int)?;
            }
            if opts.reuse_port {
                setsockopt(s, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1 as libc::c_int)?;
            }
            // SAFETY: `raw` holds a valid address of `raw.len` bytes.
            cvt(unsafe { libc::bind(s, raw.as_ptr(), raw.len) })?;
            // SAFETY: listen on our own socket.
            cvt(unsafe { libc::listen(s, opts.backlog) })?;
            Ok(TcpListener::from_socket(Socket::from_nonblocking(fd)))
        })
    }

    fn from_socket(sock: Socket) -> TcpListener {
        TcpListener {
            sock,
            spare: Mutex::new(open_spare()),
            shortage: AtomicU32::new(0),
        }
    }

    /// Waits for a connection and accepts it. With an accept timeout set
    /// ([`set_accept_timeout`](Self::set_accept_timeout)), fails with `TimedOut` when none
    /// came in time.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            let mut raw = RawAddr::empty();
            let r = self.sock.io(Dir::Read, |fd| {
                // SAFETY: `raw` is writable storage of the length passed.
                cvt(unsafe {
                    libc::accept4(
                        fd,
                        raw.as_mut_ptr(),
                        &mut raw.len,
                        libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    )
                })
            });
            match r {
                Ok(fd) => {
                    self.shortage.store(0, Ordering::Relaxed);
                    // SAFETY: accept4 returned a fresh descriptor we own.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                    let stream = TcpStream {
                        sock: Socket::from_nonblocking(fd).tcp(),
                    };
                    return Ok((stream, SocketAddr::try_from(&raw)?));
                }
                // The client gave up before we got to it: take the next one, as Go does.
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                    self.out_of_descriptors();
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `EMFILE`/`ENFILE`: shed one pending connection with the spare descriptor, then pause
    /// (see the type's docs).
    #[cold]
    fn out_of_descriptors(&self) {
        // An OS lock: not to be held by a preemptible green thread.
        crate::preempt::critical_section(|| {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            if spare.take().is_some() {
                // SAFETY: accept4 on our listening socket without an address; the result, if
                // any, is a fresh descriptor we close at once.
                unsafe {
                    let fd = libc::accept4(
                        self.sock.raw(),
                        core::ptr::null_mut(),
                        core::ptr::null_mut(),
                        libc::SOCK_CLOEXEC,
                    );
                    if fd >= 0 {
                        drop(OwnedFd::from_raw_fd(fd));
                    }
                }
                *spare = open_spare();
            }
        });
        let n = self.shortage.fetch_add(1, Ordering::Relaxed).min(4);
        sleep(Duration::from_millis(10 << n));
    }

    /// An iterator over incoming connections (endless; each item is `accept`'s result without
    /// the address).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address the listener is bound to (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(self.sock.raw())
    }

    /// A timeout for each `accept` call (`None`: wait forever; zero is an error).
    pub fn set_accept_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.sock.set_timeout(Dir::Read, d)
    }

    /// The timeout set by [`set_accept_timeout`](Self::set_accept_timeout).
    pub fn accept_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.sock.timeout(Dir::Read))
    }

    /// `IP_TTL` for accepted connections.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        setsockopt(
            self.sock.raw(),
            libc::IPPROTO_IP,
            libc::IP_TTL,
            ttl as libc::c_int,
        )
    }

    /// The pending socket error, taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.take_error()
    }

    /// Converts a std listener (made non-blocking here).
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener::from_socket(Socket::from_fd(l.into())?))
    }

    /// Converts to a std listener, blocking again.
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        let fd = self.sock.into_fd();
        super::socket::set_nonblocking(fd.as_raw_fd(), false)?;
        Ok(fd.into())
    }
}

/// The iterator of [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: `raw` is writable storage of the length passed.
    cvt(unsafe { libc::getsockname(fd, raw.as_mut_ptr(), &mut raw.len) })?;
    SocketAddr::try_from(&raw)
}

fn peer_addr(fd: RawFd) -> io::Result<SocketAddr> {
    let mut raw = RawAddr::empty();
    // SAFETY: as above.
    cvt(unsafe { libc::getpeername(fd, raw.as_mut_ptr(), &mut raw.len) })?;
    SocketAddr::try_from(&raw)
}

/// A TCP connection. Reads and writes block only the calling green thread (outside a runtime,
/// the calling OS thread). Errors are std's: a reset or a closed peer is an `io::Error`
/// (`ConnectionReset`, `BrokenPipe`), never a `SIGPIPE`; a timeout or deadline gives
/// `TimedOut`. `&TcpStream` reads and writes too, so one green thread may read while another
/// writes.
pub struct TcpStream {
    sock: Socket,
}

impl TcpStream {
    /// Connects to `addr`, trying each resolved address in turn.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        each_addr(addr, |a| TcpStream::connect_addr(a, None))
    }

    /// Connects to `addr`, failing with `TimedOut` after `timeout` (zero is an error).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "uthread: cannot set a 0 duration timeout",
            ));
        }
        TcpStream::connect_addr(addr, Some(Instant::now() + timeout))
    }

    fn connect_addr(addr: &SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
        let raw = RawAddr::from(addr);
        let sock = Socket::from_nonblocking(new_socket(raw.family(), libc::SOCK_STREAM)?).tcp();
        // SAFETY: `raw` holds a valid address of `raw.len` bytes.
        match cvt(unsafe { libc::connect(sock.raw(), raw.as_ptr(), raw.len) }) {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINPROGRESS | libc::EINTR)) => {
                sock.finish_connect(deadline)?;
            }
            Err(e) => return Err(e),
        }
        Ok(TcpStream { sock })
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        peer_addr(self.sock.raw())
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        local_addr(self.sock.raw())
    }

    /// Shuts down the read, write or both directions. A green thread blocked on a direction
    /// that is shut down fails at once with `ConnectionAborted`; afterwards reads return end
    /// of stream and writes fail with `BrokenPipe`, as with std.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }

    /// `TCP_NODELAY`: send small writes at once instead of coalescing them (Nagle).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        setsockopt(
            self.sock.raw(),
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            libc::c_int::from(on),
        )
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        let v: libc::c_int = getsockopt(self.sock.raw(), libc::IPPROTO_TCP, libc::TCP_NODELAY)?;
        Ok(v != 0)
    }

    /// `SO_LINGER`. `Some(Duration::ZERO)` makes dropping the stream reset the connection
    /// (`RST`) instead of closing it in order.
    pub fn set_linger(&self, d: Option<Duration>) -> io::Result<()> {
        self.sock.set_linger(d)
    }

    /// The `SO_LINGER` setting.
    pub fn linger(&self) -> io::Result<Option<Duration>> {
        self.sock.linger()
    }

    /// `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        setsockopt(
            self.sock.raw(),
            libc::IPPROTO_IP,
            libc::IP_TTL,
            ttl as libc::c_int,
        )
    }

    /// The `IP_TTL` setting.
    pub fn ttl(&self) -> io::Result<u32> {
        let v: libc::c_int = getsockopt(self.sock.raw(), libc::IPPROTO_IP, libc::IP_TTL)?;
        Ok(v as u32)
    }

    /// A timeout for each read call (`None`: wait forever; zero is an error): a read that
    /// waits longer fails with `TimedOut`.
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.sock.set_timeout(Dir::Read, d)
    }

    /// A timeout for each write call, as [`set_read_timeout`](Self::set_read_timeout).
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.sock.set_timeout(Dir::Write, d)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.sock.timeout(Dir::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.sock.timeout(Dir::Write))
    }

    /// An absolute deadline for reads (Go's `SetReadDeadline`): every read that would wait
    /// past it fails with `TimedOut`, until it is moved or cleared. Unlike a per-call timeout,
    /// it bounds a whole exchange (a frame read in many pieces, a slow client).
    pub fn set_read_deadline(&self, at: Option<Instant>) {
        self.sock.set_deadline(Dir::Read, at)
    }

    /// An absolute deadline for writes, as [`set_read_deadline`](Self::set_read_deadline).
    pub fn set_write_deadline(&self, at: Option<Instant>) {
        self.sock.set_deadline(Dir::Write, at)
    }

    /// The read deadline.
    pub fn read_deadline(&self) -> Option<Instant> {
        self.sock.deadline(Dir::Read)
    }

    /// The write deadline.
    pub fn write_deadline(&self) -> Option<Instant> {
        self.sock.deadline(Dir::Write)
    }

    /// Reads without consuming (`MSG_PEEK`).
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.peek(buf)
    }

    /// The pending socket error, taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.take_error()
    }

    /// A second handle to the same connection (`dup`), with the same timeouts, e.g. for a
    /// reader and a writer thread.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(TcpStream {
            sock: self.sock.try_clone()?,
        })
    }

    /// Converts a std stream (made non-blocking here).
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            sock: Socket::from_fd(s.into())?.tcp(),
        })
    }

    /// Converts to a std stream, blocking again.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        let fd = self.sock.into_fd();
        super::socket::set_nonblocking(fd.as_raw_fd(), false)?;
        Ok(fd.into())
    }
}

stream_io!(TcpStream);

macro_rules! fd_conversions {
    ($t:ident, $wrap:expr) => {
        impl AsRawFd for $t {
            fn as_raw_fd(&self) -> RawFd {
                self.sock.raw()
            }
        }

        impl AsFd for $t {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.sock.fd().as_fd()
            }
        }

        /// Takes ownership of the descriptor and makes it non-blocking.
        impl FromRawFd for $t {
            unsafe fn from_raw_fd(fd: RawFd) -> $t {
                // SAFETY: the caller hands over an open descriptor it owns.
                $t::from(unsafe { OwnedFd::from_raw_fd(fd) })
            }
        }

        /// Deregisters the descriptor and gives it up (it stays non-blocking).
        impl IntoRawFd for $t {
            fn into_raw_fd(self) -> RawFd {
                self.sock.into_raw_fd()
            }
        }

        /// Takes ownership of the descriptor and makes it non-blocking. Panics only if that
        /// fails, which needs an invalid descriptor.
        impl From<OwnedFd> for $t {
            fn from(fd: OwnedFd) -> $t {
                let sock = Socket::from_fd(fd).expect("uthread: fcntl(O_NONBLOCK) on an owned fd");
                $wrap(sock)
            }
        }

        /// Deregisters the descriptor and gives it up (it stays non-blocking).
        impl From<$t> for OwnedFd {
            fn from(s: $t) -> OwnedFd {
                s.sock.into_fd()
            }
        }
    };
}

fd_conversions!(TcpStream, |sock: Socket| TcpStream { sock: sock.tcp() });
fd_conversions!(TcpListener, TcpListener::from_socket);
pub(crate) use fd_conversions;

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpStream");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        if let Ok(a) = self.peer_addr() {
            d.field("peer", &a);
        }
        d.field("fd", &self.sock.raw()).finish()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("TcpListener");
        if let Ok(a) = self.local_addr() {
            d.field("addr", &a);
        }
        d.field("fd", &self.sock.raw()).finish()
    }
}
