//! Unix-domain stream sockets: [`UnixStream`] and [`UnixListener`], shaped like
//! `std::os::unix::net`'s. Addresses are std's `SocketAddr`, read through a borrowed std view
//! of the descriptor.

use super::socket::{new_socket, Socket};
use super::tcp::fd_conversions;
use crate::poll::poller::{cvt, Dir};
use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// `path` as a `sockaddr_un` and its length.
fn sockaddr_un(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: all-zero bytes are a valid `sockaddr_un`.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&0) || bytes.len() >= a.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "uthread: a Unix socket path must be shorter than 108 bytes, without NUL",
        ));
    }
    for (d, s) in a.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let base = std::mem::offset_of!(libc::sockaddr_un, sun_path);
    Ok((a, (base + bytes.len() + 1) as libc::socklen_t))
}

/// Runs `f` on a std view of `fd` that never closes it (for std's address conversions).
fn with_std<R>(fd: RawFd, f: impl FnOnce(&std::os::unix::net::UnixStream) -> R) -> R {
    // SAFETY: the view borrows `fd`, which the caller keeps open for the call, and is never
    // dropped (ManuallyDrop), so it never closes it.
    let view = ManuallyDrop::new(unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) });
    f(&view)
}

/// A Unix-domain stream socket; reads and writes block only the calling green thread.
pub struct UnixStream {
    sock: Socket,
}

impl UnixStream {
    /// Connects to the socket at `path`.
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let (a, len) = sockaddr_un(path.as_ref())?;
        let sock = Socket::from_nonblocking(new_socket(libc::AF_UNIX, libc::SOCK_STREAM)?);
        // SAFETY: `a` is a valid address of `len` bytes.
        let r = unsafe {
            libc::connect(
                sock.raw(),
                &a as *const libc::sockaddr_un as *const libc::sockaddr,
                len,
            )
        };
        match cvt(r) {
            Ok(_) => {}
            // A full backlog: the kernel reports EAGAIN and the connect completes later.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINPROGRESS | libc::EAGAIN)) => {
                sock.finish_connect(None)?
            }
            Err(e) => return Err(e),
        }
        Ok(UnixStream { sock })
    }

    /// A connected pair (`socketpair`).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors; on success both are fresh and ours.
        unsafe {
            cvt(libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            ))?;
            let a = Socket::from_nonblocking(OwnedFd::from_raw_fd(fds[0]));
            let b = Socket::from_nonblocking(OwnedFd::from_raw_fd(fds[1]));
            Ok((UnixStream { sock: a }, UnixStream { sock: b }))
        }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), |s| s.local_addr())
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), |s| s.peer_addr())
    }

    /// Shuts down one or both directions; a green thread blocked on a shut direction fails at
    /// once with `ConnectionAborted` (see [`TcpStream::shutdown`](super::TcpStream::shutdown)).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }

    /// A timeout for each read call (`None`: wait forever; zero is an error).
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.sock.set_timeout(Dir::Read, d)
    }

    /// A timeout for each write call.
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

    /// An absolute deadline for reads (see [`TcpStream::set_read_deadline`](super::TcpStream::set_read_deadline)).
    pub fn set_read_deadline(&self, at: Option<Instant>) {
        self.sock.set_deadline(Dir::Read, at)
    }

    /// An absolute deadline for writes.
    pub fn set_write_deadline(&self, at: Option<Instant>) {
        self.sock.set_deadline(Dir::Write, at)
    }

    /// The pending socket error, taken.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.sock.take_error()
    }

    /// A second handle to the same socket (`dup`).
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        Ok(UnixStream {
            sock: self.sock.try_clone()?,
        })
    }

    /// Converts a std stream (made non-blocking here).
    pub fn from_std(s: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            sock: Socket::from_fd(s.into())?,
        })
    }
}

stream_io!(UnixStream);

/// A Unix-domain listening socket; `accept` blocks only the calling green thread.
pub struct UnixListener {
    sock: Socket,
}

impl UnixListener {
    /// Binds to `path` (which must not exist) with a backlog of 1024.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        let (a, len) = sockaddr_un(path.as_ref())?;
        let sock = Socket::from_nonblocking(new_socket(libc::AF_UNIX, libc::SOCK_STREAM)?);
        // SAFETY: `a` is a valid address of `len` bytes; listen on our own socket.
        unsafe {
            cvt(libc::bind(
                sock.raw(),
                &a as *const libc::sockaddr_un as *const libc::sockaddr,
                len,
            ))?;
            cvt(libc::listen(sock.raw(), 1024))?;
        }
        Ok(UnixListener { sock })
    }

    /// Waits for a connection and accepts it.
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let fd = self.sock.io(Dir::Read, |fd| {
            // SAFETY: accept4 without an address on our listening socket.
            cvt(unsafe {
                libc::accept4(
                    fd,
                    core::ptr::null_mut(),
                    core::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            })
        })?;
        // SAFETY: accept4 returned a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let s = UnixStream {
            sock: Socket::from_nonblocking(fd),
        };
        let addr = s.peer_addr()?;
        Ok((s, addr))
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), |s| s.local_addr())
    }
}

fd_conversions!(UnixStream, |sock| UnixStream { sock });
fd_conversions!(UnixListener, |sock| UnixListener { sock });

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("fd", &self.sock.raw())
            .finish()
    }
}

impl fmt::Debug for UnixListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixListener")
            .field("fd", &self.sock.raw())
            .finish()
    }
}
