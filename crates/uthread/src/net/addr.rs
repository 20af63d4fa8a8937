//! Socket addresses between std's types and the kernel's `sockaddr` structures.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// A kernel socket address, large enough for any family.
#[derive(Clone, Copy)]
pub(crate) struct RawAddr {
    pub(crate) storage: libc::sockaddr_storage,
    pub(crate) len: libc::socklen_t,
}

impl RawAddr {
    /// Zeroed storage of full length, for the kernel to fill (`accept4`, `getsockname`).
    pub(crate) fn empty() -> RawAddr {
        RawAddr {
            // SAFETY: all-zero bytes are a valid `sockaddr_storage` (plain integers).
            storage: unsafe { std::mem::zeroed() },
            len: size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    pub(crate) fn as_ptr(&self) -> *const libc::sockaddr {
        &self.storage as *const libc::sockaddr_storage as *const libc::sockaddr
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::sockaddr {
        &mut self.storage as *mut libc::sockaddr_storage as *mut libc::sockaddr
    }

    /// The address family (`AF_INET`, `AF_INET6`) as `socket(2)` wants it.
    pub(crate) fn family(&self) -> libc::c_int {
        libc::c_int::from(self.storage.ss_family)
    }
}

impl From<&SocketAddr> for RawAddr {
    fn from(addr: &SocketAddr) -> RawAddr {
        let mut raw = RawAddr::empty();
        match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in`.
                unsafe { std::ptr::write(raw.as_mut_ptr() as *mut libc::sockaddr_in, sin) };
                raw.len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in6`.
                unsafe { std::ptr::write(raw.as_mut_ptr() as *mut libc::sockaddr_in6, sin6) };
                raw.len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            }
        }
        raw
    }
}

impl TryFrom<&RawAddr> for SocketAddr {
    type Error = io::Error;

    fn try_from(raw: &RawAddr) -> io::Result<SocketAddr> {
        match raw.family() {
            libc::AF_INET if raw.len as usize >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: the kernel wrote an AF_INET address of at least this size; the
                // storage is aligned for it.
                let sin = unsafe { &*(raw.as_ptr() as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 if raw.len as usize >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for AF_INET6.
                let sin6 = unsafe { &*(raw.as_ptr() as *const libc::sockaddr_in6) };
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            f => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("uthread: not an internet socket address (family {f})"),
            )),
        }
    }
}

/// Resolves `addr` and tries `f` on each address in turn, returning the first success or the
/// last error (as std's `connect` and `bind` do). Name resolution blocks the calling OS thread.
pub(crate) fn each_addr<A, T>(
    addr: A,
    mut f: impl FnMut(&SocketAddr) -> io::Result<T>,
) -> io::Result<T>
where
    A: std::net::ToSocketAddrs,
{
    let mut last = None;
    // Name resolution may run C code that allocates with malloc directly (getaddrinfo): not
    // in a preemptible state (see the README's preemption safety model).
    let addrs = crate::preempt::critical_section(|| addr.to_socket_addrs())?;
    for a in addrs {
        match f(&a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "uthread: the address resolved to nothing",
        )
    }))
}

#[cfg(test)]
mod tests;
