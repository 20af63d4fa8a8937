//! The study's client: one connection at a time, blocking, waiting for each reply before the
//! next request ("It waits for each reply from the server"). Every reply is verified: header
//! (magic, kind, seq, tag, length) and every payload byte. Also the STATS query and the
//! source-address spreading both generators use.

use std::io::{IoSlice, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::spawn::{fd_limit_hint, fd_refused, out_of_fds};
use crate::subjects::server::protocol::{
    encode_request, parse_response, pattern_offset, ErrorCode, Request, Response, ServerStats,
    FLAG_CLOSE_AFTER, KIND_ERROR, KIND_RESPONSE, KIND_STATS, RESPONSE_HEADER,
};

/// How long a reply may take before the client gives up on it.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a transaction failed, by the class the results count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// connect() failed (refused, timed out).
    Connect(String),
    /// No local address/port left (EADDRNOTAVAIL): the client's own limit, not the server's.
    AddrNotAvail,
    /// The connection was reset or closed mid-transaction.
    Reset,
    Timeout,
    /// The reply was not the echo of the request.
    Verify(String),
    /// The server answered with an error frame (BUSY is a refusal, not a failure).
    Refused(ErrorCode),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connect failed: {e}"),
            Failure::AddrNotAvail => f.write_str("no local address left (EADDRNOTAVAIL)"),
            Failure::Reset => f.write_str("connection reset or closed mid-transaction"),
            Failure::Timeout => f.write_str("no reply in time"),
            Failure::Verify(w) => write!(f, "wrong reply: {w}"),
            Failure::Refused(c) => write!(f, "refused by the server: {}", c.text()),
        }
    }
}

/// Source addresses for new connections. On IPv4 loopback they rotate over 127.0.0.0/8 (all
/// of it is loopback), bound with IP_BIND_ADDRESS_NO_PORT so the port is chosen at connect
/// time per (source, destination): short connections then never run out of ephemeral ports
/// however many sit in TIME_WAIT. Elsewhere the kernel chooses.
pub struct Sources {
    loopback: bool,
    next: u32,
}

impl Sources {
    pub fn for_target(addr: SocketAddr) -> Sources {
        let loopback = matches!(addr, SocketAddr::V4(a) if a.ip().is_loopback());
        Sources { loopback, next: 0 }
    }

    /// The next source address: 127.a.b.c with a in 1..=254, b any, c in 1..=254.
    fn next(&mut self) -> Option<Ipv4Addr> {
        if !self.loopback {
            return None;
        }
        let i = self.next;
        self.next = self.next.wrapping_add(1) % (254 * 256 * 254);
        let c = (i % 254 + 1) as u8;
        let b = ((i / 254) % 256) as u8;
        let a = ((i / (254 * 256)) % 254 + 1) as u8;
        Some(Ipv4Addr::new(127, a, b, c))
    }

    /// A TCP socket to `target`, bound to the next source address.
    pub fn socket(&mut self, target: SocketAddr) -> std::io::Result<Socket> {
        let s = Socket::new(
            Domain::for_address(target),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        s.set_tcp_nodelay(true)?;
        if let Some(ip) = self.next() {
            let one: libc::c_int = 1;
            // SAFETY: a valid int option of the right size on a socket we own.
            unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&s),
                    libc::IPPROTO_IP,
                    libc::IP_BIND_ADDRESS_NO_PORT,
                    &one as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
            s.bind(&SockAddr::from(SocketAddrV4::new(ip, 0)))?;
        }
        Ok(s)
    }
}

/// What a connect error counts as.
pub fn connect_failure(e: &std::io::Error) -> Failure {
    match e.raw_os_error() {
        Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => Failure::AddrNotAvail,
        _ if out_of_fds(e) => Failure::Connect(format!("{e}; {}", fd_limit_hint())),
        _ => Failure::Connect(e.to_string()),
    }
}

/// A blocking connection.
pub fn connect(
    target: SocketAddr,
    sources: &mut Sources,
) -> std::result::Result<TcpStream, Failure> {
    let s = sources.socket(target).map_err(|e| connect_failure(&e))?;
    s.connect_timeout(&target.into(), REPLY_TIMEOUT)
        .map_err(|e| connect_failure(&e))?;
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(REPLY_TIMEOUT))
        .and_then(|_| s.set_write_timeout(Some(REPLY_TIMEOUT)))
        .map_err(|e| Failure::Connect(e.to_string()))?;
    Ok(s)
}

/// One deadline for a whole exchange (the request out, the whole reply in), not per read: a
/// server that trickles a byte at a time cannot hold the client past `REPLY_TIMEOUT`. The
/// socket's own timeouts are `REPLY_TIMEOUT` (set at connect); they are shortened only once
/// the time left is less, so a normal exchange makes no extra system call.
pub struct Deadline {
    end: Instant,
    /// The timeout the socket has now (both directions).
    set: Duration,
}

impl Deadline {
    pub fn start() -> Deadline {
        Deadline {
            end: Instant::now() + REPLY_TIMEOUT,
            set: REPLY_TIMEOUT,
        }
    }

    /// Before each read or write: Timeout once the deadline has passed, and the socket's
    /// timeouts cut to what is left.
    fn arm(&mut self, s: &TcpStream) -> std::result::Result<(), Failure> {
        let left = self.end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Timeout);
        }
        if left + Duration::from_millis(20) < self.set {
            self.set = left;
            let _ = s.set_read_timeout(Some(left));
            let _ = s.set_write_timeout(Some(left));
        }
        Ok(())
    }

    /// Puts the socket's timeouts back for the next exchange.
    fn finish(&mut self, s: &TcpStream) {
        if self.set != REPLY_TIMEOUT {
            let _ = s.set_read_timeout(Some(REPLY_TIMEOUT));
            let _ = s.set_write_timeout(Some(REPLY_TIMEOUT));
            self.set = REPLY_TIMEOUT;
        }
    }
}

/// One echo transaction's buffers, made once: the request header is rewritten per request,
/// the payload comes straight from the shared pattern, the reply lands in `reply`.
pub struct Exchange<'p> {
    pattern: &'p [u8],
    size: usize,
    reply: Vec<u8>,
}

impl<'p> Exchange<'p> {
    pub fn new(pattern: &'p [u8], size: usize) -> Exchange<'p> {
        Exchange {
            pattern,
            size,
            reply: vec![0; RESPONSE_HEADER + size.max(128)],
        }
    }

    /// Sends request `seq` and waits for its verified echo; the reply's header.
    pub fn roundtrip(
        &mut self,
        s: &mut TcpStream,
        seq: u32,
        tag: u64,
        close_after: bool,
        work: (u32, u32),
    ) -> std::result::Result<Response, Failure> {
        let mut r = Request::echo(seq, self.size as u32, tag);
        if close_after {
            r.flags |= FLAG_CLOSE_AFTER;
        }
        (r.work_spin_us, r.work_block_us) = work;
        let header = encode_request(&r);
        let off = pattern_offset(tag, seq);
        let payload = &self.pattern[off..off + self.size];
        let mut dl = Deadline::start();
        let got = self.exchange(s, &header, payload, &mut dl, seq, tag);
        dl.finish(s);
        let h = got?;
        let got = &self.reply[RESPONSE_HEADER..RESPONSE_HEADER + self.size];
        if got != payload {
            let at = got
                .iter()
                .zip(payload)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(Failure::Verify(format!("payload differs at byte {at}")));
        }
        Ok(h)
    }
}

impl Exchange<'_> {
    /// The request out and the whole reply in, within one deadline; the reply's header.
    fn exchange(
        &mut self,
        s: &mut TcpStream,
        header: &[u8],
        payload: &[u8],
        dl: &mut Deadline,
        seq: u32,
        tag: u64,
    ) -> std::result::Result<Response, Failure> {
        write_all_vectored(s, header, payload, dl)?;
        let h = read_header(s, &mut self.reply, dl)?;
        if h.kind == KIND_ERROR {
            return Err(read_error(s, &h, &mut self.reply, dl));
        }
        check_header(&h, KIND_RESPONSE, seq, tag, self.size)?;
        read_exact(
            s,
            &mut self.reply[RESPONSE_HEADER..RESPONSE_HEADER + self.size],
            dl,
        )?;
        Ok(h)
    }
}

fn write_all_vectored(
    s: &mut TcpStream,
    header: &[u8],
    payload: &[u8],
    dl: &mut Deadline,
) -> std::result::Result<(), Failure> {
    use std::io::Write;
    let total = header.len() + payload.len();
    let mut done = 0;
    while done < total {
        dl.arm(s)?;
        let n = if done < header.len() {
            s.write_vectored(&[IoSlice::new(&header[done..]), IoSlice::new(payload)])
        } else {
            s.write(&payload[done - header.len()..])
        }
        .map_err(|e| io_failure(&e))?;
        if n == 0 {
            return Err(Failure::Reset);
        }
        done += n;
    }
    Ok(())
}

fn io_failure(e: &std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Failure::Timeout,
        _ => Failure::Reset,
    }
}

/// Fills `buf`, within the exchange's deadline.
fn read_exact(
    s: &mut TcpStream,
    buf: &mut [u8],
    dl: &mut Deadline,
) -> std::result::Result<(), Failure> {
    let mut done = 0;
    while done < buf.len() {
        dl.arm(s)?;
        match s.read(&mut buf[done..]) {
            Ok(0) => return Err(Failure::Reset),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_failure(&e)),
        }
    }
    Ok(())
}

fn read_header(
    s: &mut TcpStream,
    buf: &mut [u8],
    dl: &mut Deadline,
) -> std::result::Result<Response, Failure> {
    read_exact(s, &mut buf[..RESPONSE_HEADER], dl)?;
    let h: &[u8; RESPONSE_HEADER] = buf[..RESPONSE_HEADER].try_into().expect("40 bytes");
    parse_response(h).map_err(|_| Failure::Verify("bad magic or kind in the reply".into()))
}

/// The error code of an error frame whose header was read.
fn read_error(s: &mut TcpStream, h: &Response, buf: &mut [u8], dl: &mut Deadline) -> Failure {
    let n = (h.payload_len as usize).min(buf.len() - RESPONSE_HEADER);
    if n < 2 || read_exact(s, &mut buf[RESPONSE_HEADER..RESPONSE_HEADER + n], dl).is_err() {
        return Failure::Verify("a truncated error frame".into());
    }
    match ErrorCode::from_u16(u16::from_le_bytes([buf[40], buf[41]])) {
        Some(c) => Failure::Refused(c),
        None => Failure::Verify("an unknown error code".into()),
    }
}

/// Checks a reply header against the request it answers.
pub fn check_header(
    h: &Response,
    kind: u8,
    seq: u32,
    tag: u64,
    len: usize,
) -> std::result::Result<(), Failure> {
    if h.kind != kind {
        return Err(Failure::Verify(format!(
            "kind {} instead of {kind}",
            h.kind
        )));
    }
    if h.seq != seq || h.client_tag != tag {
        return Err(Failure::Verify(format!(
            "seq/tag {}/{} instead of {seq}/{tag}",
            h.seq, h.client_tag
        )));
    }
    if h.payload_len as usize != len {
        return Err(Failure::Verify(format!(
            "length {} instead of {len}",
            h.payload_len
        )));
    }
    Ok(())
}

/// Asks a server for its STATS over `s` (a control connection).
pub fn stats(s: &mut TcpStream, seq: u32) -> std::result::Result<ServerStats, Failure> {
    let mut dl = Deadline::start();
    let got = stats_exchange(s, seq, &mut dl);
    dl.finish(s);
    got
}

fn stats_exchange(
    s: &mut TcpStream,
    seq: u32,
    dl: &mut Deadline,
) -> std::result::Result<ServerStats, Failure> {
    write_all_vectored(s, &encode_request(&Request::stats(seq)), &[], dl)?;
    let mut buf = vec![0u8; RESPONSE_HEADER + 128];
    let h = read_header(s, &mut buf, dl)?;
    if h.kind == KIND_ERROR {
        return Err(read_error(s, &h, &mut buf, dl));
    }
    check_header(&h, KIND_STATS, seq, 0, h.payload_len as usize)?;
    let n = h.payload_len as usize;
    if n > 128 {
        return Err(Failure::Verify("an oversized STATS payload".into()));
    }
    read_exact(s, &mut buf[RESPONSE_HEADER..RESPONSE_HEADER + n], dl)?;
    ServerStats::decode(&buf[RESPONSE_HEADER..RESPONSE_HEADER + n])
        .ok_or_else(|| Failure::Verify("a STATS payload of the wrong size".into()))
}

/// The study's short connection, `n` times: connect, one request (CLOSE_AFTER), the verified
/// reply, close. Returns the total time, connect included (the study's 4 ms includes it).
pub fn short_batch(
    target: SocketAddr,
    sources: &mut Sources,
    ex: &mut Exchange,
    n: u64,
    next_seq: &mut u32,
) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..n {
        *next_seq = next_seq.wrapping_add(1);
        let mut s = connect(target, sources).map_err(fail)?;
        ex.roundtrip(&mut s, *next_seq, *next_seq as u64, true, (0, 0))
            .map_err(fail)?;
    }
    Ok(t.elapsed())
}

/// The study's long connection: connect, `per_conn` requests one after another, close; `n`
/// such connections. Returns the total time and the time of every connection's first
/// transaction (connect included) and of the rest.
pub fn long_batch(
    target: SocketAddr,
    sources: &mut Sources,
    ex: &mut Exchange,
    n: u64,
    per_conn: u32,
    next_seq: &mut u32,
) -> Result<(Duration, Duration, Duration)> {
    let t = Instant::now();
    let (mut first, mut rest) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..n {
        let c = Instant::now();
        let mut s = connect(target, sources).map_err(fail)?;
        for k in 0..per_conn {
            *next_seq = next_seq.wrapping_add(1);
            ex.roundtrip(&mut s, *next_seq, *next_seq as u64, false, (0, 0))
                .map_err(fail)?;
            if k == 0 {
                first += c.elapsed();
            }
        }
        rest += c.elapsed();
    }
    let took = t.elapsed();
    Ok((took, first, rest.saturating_sub(first)))
}

/// A failed transaction in the study pattern ends that row, which is then reported skipped
/// with what went wrong; the other rows go on.
fn fail(f: Failure) -> Error {
    Error::Skip(format!("a transaction failed: {f}"))
}

/// Waits until `addr` accepts connections (a server just started), up to 5 s.
pub fn wait_listening(addr: SocketAddr, cancel: &Cancel) -> Result<()> {
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        cancel.check()?;
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(_) => return Ok(()),
            // The client's own socket was refused: no server could be reached from here.
            Err(e) if out_of_fds(&e) => {
                return Err(fd_refused("a socket to the server", &e));
            }
            Err(_) => {}
        }
        if Instant::now() > end {
            return Err(Error::Fail(format!("nothing listens on {addr}")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_rotate_over_loopback() {
        let mut s = Sources::for_target("127.0.0.1:80".parse().unwrap());
        let a = s.next().unwrap();
        let b = s.next().unwrap();
        assert_ne!(a, b);
        assert!(a.is_loopback() && b.is_loopback());
        for _ in 0..100_000 {
            let ip = s.next().unwrap();
            let o = ip.octets();
            assert!(o[0] == 127 && o[1] >= 1 && o[3] >= 1 && o[3] <= 254);
        }
        let mut remote = Sources::for_target("10.0.0.1:80".parse().unwrap());
        assert_eq!(remote.next(), None);
    }
}
