//! A loopback request round trip: a client thread writes 64 bytes to a server thread over a
//! TCP connection on 127.0.0.1 and reads its 64-byte reply; both block in the kernel between
//! messages, so each round trip wakes the server and then the client.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::thread::ScopedJoinHandle;
use std::time::Duration;

use super::threads::{elapsed_since, prepare};
use super::{PhaseValues, Setup};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::placement::Placement;
use crate::measure::process::mono_ns;
use crate::measure::spawn::{fd_refused, spawn_scoped};

const MESSAGE: usize = 64;
const WARMUP: u64 = 8;

/// The client's CPU (where the setup puts the measuring thread) and the server's (the
/// partner's); None where the kernel places it.
fn cpus_of(setup: &Setup) -> (Option<usize>, Option<usize>) {
    match setup.placement {
        Placement::Unpinned => (None, None),
        Placement::SameCpu(c) => (Some(c), Some(c)),
        Placement::CrossCpu(a, b) => (Some(a), Some(b)),
    }
}

/// A listener on a free loopback port, and its address.
fn loopback_listener() -> Result<(TcpListener, SocketAddr)> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| fd_refused("a loopback listener", &e))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// The echo server's thread: placed on `cpu`, it accepts one connection and hands every
/// message to `reply` (which writes it back) until the client closes the connection, which
/// ends the phase.
fn echo_server(
    listener: &TcpListener,
    cpu: Option<usize>,
    busy: Option<u32>,
    mut reply: impl FnMut(&mut TcpStream, &[u8]) -> Result<()>,
) -> Result<()> {
    prepare(cpu, None, false)?;
    let (mut conn, _) = listener.accept()?;
    conn.set_nodelay(true)?;
    if let Some(us) = busy {
        set_busy_poll(&conn, us)?;
    }
    let mut buf = [0u8; MESSAGE];
    loop {
        match conn.read_exact(&mut buf) {
            Ok(()) => reply(&mut conn, &buf)?,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Joins the echo client, then the server (Err: the server panicked). A client that never
/// connected leaves the server in accept: shutting the listener down ends that accept (with
/// EINVAL, also one not yet entered) without a descriptor, which a client refused for lack of
/// descriptors would not get. One that did connect was shut down already.
fn join_echo<C, S>(
    client: Result<ScopedJoinHandle<'_, Result<C>>>,
    server: ScopedJoinHandle<'_, Result<S>>,
    listener: &TcpListener,
) -> Result<(Result<C>, Result<S>)> {
    let client = client.and_then(|h| {
        h.join()
            .map_err(|_| Error::Fail("the echo client panicked".into()))?
    });
    if client.is_err() {
        // SAFETY: shutdown on the listener's descriptor, open for as long as `listener` is
        // borrowed here; it changes the socket's state only, and the server thread's accept on
        // the same descriptor returns EINVAL from then on.
        unsafe {
            libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
    let served = server
        .join()
        .map_err(|_| Error::Fail("the echo server panicked".into()))?;
    Ok((client, served))
}

/// Sets SO_BUSY_POLL (µs) on a socket: a blocking read first spins on the device queue for
/// that long before it sleeps.
fn set_busy_poll(s: &impl AsRawFd, us: u32) -> std::io::Result<()> {
    let v: libc::c_int = us as libc::c_int;
    // SAFETY: a valid socket fd and a pointer to an int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BUSY_POLL,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Why SO_BUSY_POLL cannot be used here, if it cannot (raising it above net.core.busy_read
/// needs CAP_NET_ADMIN on some kernels; a kernel without CONFIG_NET_RX_BUSY_POLL refuses it).
pub fn busy_poll_refusal(us: u32) -> Option<String> {
    let l = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => return Some(format!("no loopback socket to try it on: {e}")),
    };
    set_busy_poll(&l, us)
        .err()
        .map(|e| format!("setsockopt(SO_BUSY_POLL, {us}) was refused: {e}"))
}

/// Mean round trip (µs) of 64-byte request/reply pairs; the client runs where the setup puts
/// the measuring thread, the server where it puts the partner.
pub fn round_trips(setup: &Setup, length: Duration, cancel: &Cancel) -> Result<PhaseValues> {
    let (client_cpu, server_cpu) = cpus_of(setup);
    let (listener, addr) = loopback_listener()?;
    let listener = &listener;
    let busy = setup.busy_poll_us;
    std::thread::scope(|s| {
        let server = spawn_scoped(s, "the echo server thread", move || -> Result<()> {
            echo_server(listener, server_cpu, busy, |conn, buf| {
                Ok(conn.write_all(buf)?)
            })
        })?;
        let client = spawn_scoped(s, "the echo client thread", || -> Result<(u64, u64)> {
            let mut conn =
                TcpStream::connect(addr).map_err(|e| fd_refused("a loopback connection", &e))?;
            prepare(client_cpu, setup.timer_slack_ns, setup.fifo)?;
            conn.set_nodelay(true)?;
            // A server that died must not leave the client blocked for good.
            conn.set_read_timeout(Some(Duration::from_secs(2)))?;
            if let Some(us) = busy {
                set_busy_poll(&conn, us)?;
            }
            let r = exchange(&mut conn, length, cancel);
            let _ = conn.shutdown(Shutdown::Both);
            r
        });
        let (client, served) = join_echo(client, server, listener)?;
        let (ns, trips) = client?;
        served?;
        if trips == 0 {
            return Err(Error::Fail("the phase ended before a round trip".into()));
        }
        Ok(PhaseValues {
            values: vec![ns as f64 / trips as f64 / 1e3],
            ops: trips,
            huge_backed_pct: None,
        })
    })
}

/// Stamps of one traced round trip: the client before its write, the server after its read
/// and before its write, the client after its read.
pub type TripStamps = [u64; 4];

/// `trips` round trips as in `round_trips`, each stamped on both sides, with the client's
/// and the server's thread ids: for matching against the kernel's tracepoints.
pub fn round_trips_stamped(
    setup: &Setup,
    trips: usize,
    cancel: &Cancel,
) -> Result<(i32, i32, Vec<TripStamps>)> {
    let (client_cpu, server_cpu) = cpus_of(setup);
    let (listener, addr) = loopback_listener()?;
    let listener = &listener;
    std::thread::scope(|s| {
        let server = spawn_scoped(
            s,
            "the echo server thread",
            move || -> Result<(i32, Vec<[u64; 2]>)> {
                let mut stamps = Vec::with_capacity(trips + WARMUP as usize);
                echo_server(listener, server_cpu, None, |conn, buf| {
                    let got = mono_ns();
                    let send = mono_ns();
                    conn.write_all(buf)?;
                    stamps.push([got, send]);
                    Ok(())
                })?;
                Ok((crate::sys::gettid(), stamps))
            },
        )?;
        let client = spawn_scoped(
            s,
            "the echo client thread",
            || -> Result<(i32, Vec<[u64; 2]>)> {
                let mut conn = TcpStream::connect(addr)
                    .map_err(|e| fd_refused("a loopback connection", &e))?;
                let r = (|| {
                    prepare(client_cpu, None, false)?;
                    conn.set_nodelay(true)?;
                    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
                    let mut buf = [7u8; MESSAGE];
                    let mut stamps = Vec::with_capacity(trips + WARMUP as usize);
                    for _ in 0..trips + WARMUP as usize {
                        cancel.check()?;
                        let sent = mono_ns();
                        conn.write_all(&buf)?;
                        conn.read_exact(&mut buf)?;
                        stamps.push([sent, mono_ns()]);
                    }
                    Ok((crate::sys::gettid(), stamps))
                })();
                let _ = conn.shutdown(Shutdown::Both);
                r
            },
        );
        let (client, server) = join_echo(client, server, listener)?;
        let (ctid, c) = client?;
        let (stid, sv) = server?;
        let both = c
            .iter()
            .zip(&sv)
            .skip(WARMUP as usize)
            .map(|(c, s)| [c[0], s[0], s[1], c[1]])
            .collect();
        Ok((ctid, stid, both))
    })
}

/// Round trips for `length` after a warm-up: (ns, round trips).
fn exchange(conn: &mut TcpStream, length: Duration, cancel: &Cancel) -> Result<(u64, u64)> {
    let mut buf = [7u8; MESSAGE];
    let mut trip = |buf: &mut [u8; MESSAGE]| -> Result<()> {
        conn.write_all(buf)?;
        conn.read_exact(buf)?;
        Ok(())
    };
    for _ in 0..WARMUP {
        trip(&mut buf)?;
    }
    let start = mono_ns();
    let mut trips = 0u64;
    while elapsed_since(start) < length {
        cancel.check()?;
        for _ in 0..16 {
            trip(&mut buf)?;
        }
        trips += 16;
    }
    Ok((mono_ns() - start, trips))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::doctor::figures::Setup;

    #[test]
    fn an_echo_phase_measures_round_trips() {
        let cpus = crate::measure::placement::allowed_cpus();
        let s = Setup::base(cpus[0], *cpus.last().unwrap());
        let v = round_trips(&s, Duration::from_millis(10), &Cancel::never()).unwrap();
        assert!(v.values[0] > 0.0 && v.ops >= 16, "{v:?}");
    }

    /// A client refused before it connected (as for lack of descriptors, when no connection
    /// could wake the server either) must not leave the server waiting in accept for good.
    #[test]
    fn a_client_that_never_connected_ends_the_server() {
        let (listener, _addr) = loopback_listener().unwrap();
        let listener = &listener;
        std::thread::scope(|s| {
            let server = spawn_scoped(s, "the echo server thread", move || -> Result<()> {
                echo_server(listener, None, None, |_, _| Ok(()))
            })
            .unwrap();
            let client: Result<ScopedJoinHandle<'_, Result<()>>> =
                Err(Error::Skip("refused".into()));
            let (client, served) = join_echo(client, server, listener).unwrap();
            assert!(matches!(client, Err(Error::Skip(_))));
            assert!(served.is_err(), "the server's accept returned a connection");
        });
    }
}
