//! Sockets whose blocking calls block only the calling green thread: [`TcpListener`],
//! [`TcpStream`], [`UnixListener`], [`UnixStream`], with the API of `std::net` and
//! `std::os::unix::net`.
//!
//! Every socket is non-blocking underneath. A call is made at once; if it would block
//! (`EAGAIN`), the green thread parks on the socket and its carrier runs other threads until
//! the carrier's poller (epoll, edge-triggered, the socket registered once per carrier) reports
//! the socket ready, a deadline passes, or the socket is shut down. Outside any runtime the
//! same calls block the OS thread in `poll(2)`, so these types work anywhere.
//!
//! ```
//! use std::io::{Read, Write};
//! use uthread::net::{TcpListener, TcpStream};
//!
//! uthread::run(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = uthread::spawn(move || {
//!         let (mut s, _) = listener.accept().unwrap();
//!         let mut buf = [0u8; 5];
//!         s.read_exact(&mut buf).unwrap();
//!         s.write_all(&buf).unwrap();
//!     });
//!     let mut c = TcpStream::connect(addr).unwrap();
//!     c.write_all(b"hello").unwrap();
//!     let mut back = [0u8; 5];
//!     c.read_exact(&mut back).unwrap();
//!     assert_eq!(&back, b"hello");
//!     server.join();
//! });
//! ```
//!
//! Name resolution (`ToSocketAddrs` with a host name) still blocks the carrier, as any other
//! blocking call does; see the README's "I/O" section.

/// `Read` and `Write` for a stream type and for a shared reference to it (std's streams have
/// both), each call going to its `sock`. Defined before the modules that use it.
macro_rules! stream_io {
    ($t:ident) => {
        stream_io!(@one $t);
        stream_io!(@one &$t);
    };
    (@one $($t:tt)+) => {
        impl std::io::Read for $($t)+ {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.sock.read(buf)
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                self.sock.read_vectored(bufs)
            }
        }

        impl std::io::Write for $($t)+ {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.sock.write(buf)
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                self.sock.write_vectored(bufs)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
    };
}

pub(crate) mod addr;
pub(crate) mod socket;
mod tcp;
mod unix;

pub use tcp::{Incoming, ListenOptions, TcpListener, TcpStream};
pub use unix::{UnixListener, UnixStream};
