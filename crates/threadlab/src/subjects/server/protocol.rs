//! The wire protocol every server design speaks: a small binary, length-prefixed echo that
//! carries the PThreads study's "transaction information" (the server "adds some transaction
//! information and writes the resulting data back").
//!
//! All integers are little-endian.
//!
//! ```text
//! request (32-byte header + N payload bytes)
//!    0  u32  magic "TLB1"
//!    4  u8   kind: 1 = REQUEST (echo), 4 = STATS
//!    5  u8   flags: bit 0 CLOSE_AFTER (the server closes after replying: a short connection)
//!    6  u16  reserved, 0
//!    8  u32  seq
//!   12  u32  payload_len N        (the server rejects N > its cap before allocating anything)
//!   16  u32  work_spin_us         (the server busy-spins this long before replying)
//!   20  u32  work_block_us        (the server blocks this long: the design's own way to wait)
//!   24  u64  client_tag           (opaque, echoed)
//!
//! response (40-byte header + N payload bytes)
//!    0  u32  magic "TLB1"
//!    4  u8   kind: 2 = RESPONSE, 3 = ERROR, 4 = STATS
//!    5  u8   design id (subjects::server::DESIGNS)
//!    6  u16  worker id (thread, process, loop or task serving it, mod 65536)
//!    8  u32  seq (echoed)
//!   12  u32  payload_len (RESPONSE: N echoed; ERROR: 2-byte code + UTF-8 text; STATS: 104)
//!   16  u64  client_tag (echoed)
//!   24  u64  server_service_ns    (first byte of the request read -> reply written, server clock)
//!   32  u64  server_txn           (the server's transaction counter)
//! ```
//!
//! Error codes: 1 too large, 2 bad frame (magic, kind, reserved bits, work fields), 3 deadline
//! (the whole frame did not arrive in time), 4 busy (queue full or connection cap: the request
//! was refused, not lost), 5 forbidden (STATS from a non-loopback peer without permission).
//!
//! Nothing here allocates: parsing reads fixed-size arrays, encoding writes into them.

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"TLB1";
pub const REQUEST_HEADER: usize = 32;
pub const RESPONSE_HEADER: usize = 40;
/// Default cap on a request's payload: 1 MiB (nginx's client_max_body_size).
pub const DEFAULT_MAX_PAYLOAD: u32 = 1 << 20;
/// Work fields above this (1 s) are a bad frame: a request may not park a worker for longer.
pub const MAX_WORK_US: u32 = 1_000_000;

pub const KIND_REQUEST: u8 = 1;
pub const KIND_RESPONSE: u8 = 2;
pub const KIND_ERROR: u8 = 3;
pub const KIND_STATS: u8 = 4;

/// Request flag: close the connection after the reply (the study's short connection).
pub const FLAG_CLOSE_AFTER: u8 = 1;
const KNOWN_FLAGS: u8 = FLAG_CLOSE_AFTER;

/// Why a frame is refused; each maps to the error code the server replies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    TooLarge = 1,
    BadFrame = 2,
    Deadline = 3,
    Busy = 4,
    Forbidden = 5,
}

impl ErrorCode {
    pub fn from_u16(v: u16) -> Option<ErrorCode> {
        Some(match v {
            1 => ErrorCode::TooLarge,
            2 => ErrorCode::BadFrame,
            3 => ErrorCode::Deadline,
            4 => ErrorCode::Busy,
            5 => ErrorCode::Forbidden,
            _ => return None,
        })
    }

    /// The short text sent in the error frame.
    pub fn text(self) -> &'static str {
        match self {
            ErrorCode::TooLarge => "payload over the server's cap",
            ErrorCode::BadFrame => "bad frame",
            ErrorCode::Deadline => "frame deadline passed",
            ErrorCode::Busy => "busy",
            ErrorCode::Forbidden => "stats are served to loopback peers only",
        }
    }
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Echo,
    Stats,
}

/// A parsed request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub kind: RequestKind,
    pub flags: u8,
    pub seq: u32,
    pub payload_len: u32,
    pub work_spin_us: u32,
    pub work_block_us: u32,
    pub client_tag: u64,
}

impl Request {
    pub fn echo(seq: u32, payload_len: u32, client_tag: u64) -> Request {
        Request {
            kind: RequestKind::Echo,
            flags: 0,
            seq,
            payload_len,
            work_spin_us: 0,
            work_block_us: 0,
            client_tag,
        }
    }

    pub fn stats(seq: u32) -> Request {
        Request {
            kind: RequestKind::Stats,
            flags: 0,
            seq,
            payload_len: 0,
            work_spin_us: 0,
            work_block_us: 0,
            client_tag: 0,
        }
    }

    pub fn close_after(&self) -> bool {
        self.flags & FLAG_CLOSE_AFTER != 0
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses a request header. `max_payload` is the server's cap: a larger length is refused here,
/// before the caller allocates anything for it.
pub fn parse_request(h: &[u8; REQUEST_HEADER], max_payload: u32) -> Result<Request, ErrorCode> {
    if h[0..4] != MAGIC {
        return Err(ErrorCode::BadFrame);
    }
    let kind = match h[4] {
        KIND_REQUEST => RequestKind::Echo,
        KIND_STATS => RequestKind::Stats,
        _ => return Err(ErrorCode::BadFrame),
    };
    let flags = h[5];
    if flags & !KNOWN_FLAGS != 0 || u16_at(h, 6) != 0 {
        return Err(ErrorCode::BadFrame);
    }
    let r = Request {
        kind,
        flags,
        seq: u32_at(h, 8),
        payload_len: u32_at(h, 12),
        work_spin_us: u32_at(h, 16),
        work_block_us: u32_at(h, 20),
        client_tag: u64_at(h, 24),
    };
    if r.work_spin_us > MAX_WORK_US || r.work_block_us > MAX_WORK_US {
        return Err(ErrorCode::BadFrame);
    }
    if kind == RequestKind::Stats && r.payload_len != 0 {
        return Err(ErrorCode::BadFrame);
    }
    if r.payload_len > max_payload {
        return Err(ErrorCode::TooLarge);
    }
    Ok(r)
}

pub fn encode_request(r: &Request) -> [u8; REQUEST_HEADER] {
    let mut h = [0u8; REQUEST_HEADER];
    h[0..4].copy_from_slice(&MAGIC);
    h[4] = match r.kind {
        RequestKind::Echo => KIND_REQUEST,
        RequestKind::Stats => KIND_STATS,
    };
    h[5] = r.flags;
    h[8..12].copy_from_slice(&r.seq.to_le_bytes());
    h[12..16].copy_from_slice(&r.payload_len.to_le_bytes());
    h[16..20].copy_from_slice(&r.work_spin_us.to_le_bytes());
    h[20..24].copy_from_slice(&r.work_block_us.to_le_bytes());
    h[24..32].copy_from_slice(&r.client_tag.to_le_bytes());
    h
}

/// A response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub kind: u8,
    pub design: u8,
    pub worker: u16,
    pub seq: u32,
    pub payload_len: u32,
    pub client_tag: u64,
    pub service_ns: u64,
    pub txn: u64,
}

pub fn encode_response(r: &Response) -> [u8; RESPONSE_HEADER] {
    let mut h = [0u8; RESPONSE_HEADER];
    write_response(&mut h, r);
    h
}

/// Writes a response header into the first 40 bytes of `out`.
pub fn write_response(out: &mut [u8], r: &Response) {
    out[0..4].copy_from_slice(&MAGIC);
    out[4] = r.kind;
    out[5] = r.design;
    out[6..8].copy_from_slice(&r.worker.to_le_bytes());
    out[8..12].copy_from_slice(&r.seq.to_le_bytes());
    out[12..16].copy_from_slice(&r.payload_len.to_le_bytes());
    out[16..24].copy_from_slice(&r.client_tag.to_le_bytes());
    out[24..32].copy_from_slice(&r.service_ns.to_le_bytes());
    out[32..40].copy_from_slice(&r.txn.to_le_bytes());
}

/// Parses a response header (the client side). Err when the magic or the kind is wrong.
pub fn parse_response(h: &[u8; RESPONSE_HEADER]) -> Result<Response, ErrorCode> {
    if h[0..4] != MAGIC || !matches!(h[4], KIND_RESPONSE | KIND_ERROR | KIND_STATS) {
        return Err(ErrorCode::BadFrame);
    }
    Ok(Response {
        kind: h[4],
        design: h[5],
        worker: u16_at(h, 6),
        seq: u32_at(h, 8),
        payload_len: u32_at(h, 12),
        client_tag: u64_at(h, 16),
        service_ns: u64_at(h, 24),
        txn: u64_at(h, 32),
    })
}

/// Longest error text sent.
const ERROR_TEXT_MAX: usize = 64;
/// Room for a whole error frame.
pub const ERROR_FRAME_MAX: usize = RESPONSE_HEADER + 2 + ERROR_TEXT_MAX;

/// Writes a whole error frame (header, code, text) into `out`; returns its length.
pub fn encode_error(
    out: &mut [u8; ERROR_FRAME_MAX],
    code: ErrorCode,
    seq: u32,
    client_tag: u64,
    design: u8,
    worker: u16,
) -> usize {
    let text = code.text().as_bytes();
    let text = &text[..text.len().min(ERROR_TEXT_MAX)];
    let payload_len = 2 + text.len();
    write_response(
        &mut out[..],
        &Response {
            kind: KIND_ERROR,
            design,
            worker,
            seq,
            payload_len: payload_len as u32,
            client_tag,
            service_ns: 0,
            txn: 0,
        },
    );
    out[RESPONSE_HEADER..RESPONSE_HEADER + 2].copy_from_slice(&(code as u16).to_le_bytes());
    out[RESPONSE_HEADER + 2..RESPONSE_HEADER + payload_len].copy_from_slice(text);
    RESPONSE_HEADER + payload_len
}

/// A server's view of itself, sent as the payload of a STATS reply (13 little-endian u64s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerStats {
    /// User and system CPU of the serving process itself (getrusage RUSAGE_SELF), ns.
    pub cpu_user_ns: u64,
    pub cpu_sys_ns: u64,
    /// CPU of its child processes, live and reaped (fork designs), ns.
    pub children_cpu_ns: u64,
    /// Resident memory of the process and its live children, bytes.
    pub rss_bytes: u64,
    pub threads: u64,
    /// The process itself plus live children.
    pub processes: u64,
    pub open_fds: u64,
    /// Requests answered (the transaction counter).
    pub served: u64,
    /// Requests or connections refused with a BUSY frame.
    pub rejected: u64,
    /// Bad frames, oversize frames and deadlines.
    pub errors: u64,
    /// Voluntary and involuntary context switches, process and children.
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub connections_open: u64,
}

pub const STATS_PAYLOAD: usize = 13 * 8;

impl ServerStats {
    fn fields(&self) -> [u64; 13] {
        [
            self.cpu_user_ns,
            self.cpu_sys_ns,
            self.children_cpu_ns,
            self.rss_bytes,
            self.threads,
            self.processes,
            self.open_fds,
            self.served,
            self.rejected,
            self.errors,
            self.voluntary_switches,
            self.involuntary_switches,
            self.connections_open,
        ]
    }

    pub fn encode(&self) -> [u8; STATS_PAYLOAD] {
        let mut out = [0u8; STATS_PAYLOAD];
        for (i, v) in self.fields().iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    pub fn decode(b: &[u8]) -> Option<ServerStats> {
        if b.len() != STATS_PAYLOAD {
            return None;
        }
        let f = |i: usize| u64_at(b, i * 8);
        Some(ServerStats {
            cpu_user_ns: f(0),
            cpu_sys_ns: f(1),
            children_cpu_ns: f(2),
            rss_bytes: f(3),
            threads: f(4),
            processes: f(5),
            open_fds: f(6),
            served: f(7),
            rejected: f(8),
            errors: f(9),
            voluntary_switches: f(10),
            involuntary_switches: f(11),
            connections_open: f(12),
        })
    }

    /// All CPU the server used, its children included, ns.
    pub fn cpu_ns(&self) -> u64 {
        self.cpu_user_ns + self.cpu_sys_ns + self.children_cpu_ns
    }
}

/// The payload pattern: a fixed pseudo-random byte sequence. A request for (tag, seq) carries
/// `PATTERN[offset(tag, seq) ..][.. len]`, so an echo that swapped, shifted or corrupted bytes is
/// caught by comparing with the same slice, and no payload is ever built per request.
pub const PATTERN_SLACK: usize = 251;

pub fn pattern_offset(client_tag: u64, seq: u32) -> usize {
    ((client_tag.wrapping_mul(7)).wrapping_add(seq as u64) % PATTERN_SLACK as u64) as usize
}

/// A pattern buffer long enough for payloads up to `max_payload` at every offset.
pub fn pattern(max_payload: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..max_payload + PATTERN_SLACK)
        .map(|_| {
            // xorshift64*: deterministic, no dependency
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips() {
        let r = Request {
            kind: RequestKind::Echo,
            flags: FLAG_CLOSE_AFTER,
            seq: 7,
            payload_len: 1024,
            work_spin_us: 3,
            work_block_us: 1000,
            client_tag: 0xdead_beef_0000_0001,
        };
        let h = encode_request(&r);
        assert_eq!(&h[0..4], b"TLB1");
        assert_eq!(parse_request(&h, DEFAULT_MAX_PAYLOAD), Ok(r));
        assert!(r.close_after());
        let s = Request::stats(9);
        assert_eq!(
            parse_request(&encode_request(&s), DEFAULT_MAX_PAYLOAD),
            Ok(s)
        );
    }

    #[test]
    fn refusals_have_their_codes() {
        let ok = encode_request(&Request::echo(1, 100, 2));
        let mut bad = ok;
        bad[0] = b'X';
        assert_eq!(parse_request(&bad, 1000), Err(ErrorCode::BadFrame));
        let mut bad = ok;
        bad[4] = 9;
        assert_eq!(parse_request(&bad, 1000), Err(ErrorCode::BadFrame));
        let mut bad = ok;
        bad[5] = 0x80;
        assert_eq!(parse_request(&bad, 1000), Err(ErrorCode::BadFrame));
        let mut bad = ok;
        bad[6] = 1;
        assert_eq!(parse_request(&bad, 1000), Err(ErrorCode::BadFrame));
        // Too large is decided from the header alone, before anything is allocated.
        assert_eq!(parse_request(&ok, 99), Err(ErrorCode::TooLarge));
        let huge = encode_request(&Request::echo(1, u32::MAX, 2));
        assert_eq!(
            parse_request(&huge, DEFAULT_MAX_PAYLOAD),
            Err(ErrorCode::TooLarge)
        );
        let mut r = Request::echo(1, 0, 0);
        r.work_block_us = MAX_WORK_US + 1;
        assert_eq!(
            parse_request(&encode_request(&r), 10),
            Err(ErrorCode::BadFrame)
        );
        let mut s = Request::stats(1);
        s.payload_len = 1;
        assert_eq!(
            parse_request(&encode_request(&s), 10),
            Err(ErrorCode::BadFrame)
        );
    }

    #[test]
    fn responses_and_errors_round_trip() {
        let r = Response {
            kind: KIND_RESPONSE,
            design: 3,
            worker: 65535,
            seq: 11,
            payload_len: 64,
            client_tag: 5,
            service_ns: 12345,
            txn: 99,
        };
        assert_eq!(parse_response(&encode_response(&r)), Ok(r));
        let mut buf = [0u8; ERROR_FRAME_MAX];
        let n = encode_error(&mut buf, ErrorCode::Busy, 4, 8, 2, 1);
        let h = parse_response(buf[..RESPONSE_HEADER].try_into().unwrap()).unwrap();
        assert_eq!(h.kind, KIND_ERROR);
        assert_eq!(n, RESPONSE_HEADER + h.payload_len as usize);
        assert_eq!(
            ErrorCode::from_u16(u16::from_le_bytes([buf[40], buf[41]])),
            Some(ErrorCode::Busy)
        );
        assert_eq!(&buf[42..n], b"busy");
        let mut bad = encode_response(&r);
        bad[4] = KIND_REQUEST;
        assert!(parse_response(&bad).is_err());
    }

    #[test]
    fn stats_round_trip() {
        let s = ServerStats {
            cpu_user_ns: 1,
            cpu_sys_ns: 2,
            children_cpu_ns: 3,
            rss_bytes: 4,
            threads: 5,
            processes: 6,
            open_fds: 7,
            served: 8,
            rejected: 9,
            errors: 10,
            voluntary_switches: 11,
            involuntary_switches: 12,
            connections_open: 13,
        };
        assert_eq!(ServerStats::decode(&s.encode()), Some(s));
        assert_eq!(s.cpu_ns(), 6);
        assert_eq!(ServerStats::decode(&[0; 3]), None);
    }

    #[test]
    fn the_pattern_differs_between_requests() {
        let p = pattern(1024);
        assert_eq!(p.len(), 1024 + PATTERN_SLACK);
        assert_eq!(p, pattern(1024), "deterministic");
        let a = pattern_offset(1, 1);
        let b = pattern_offset(1, 2);
        assert_ne!(p[a..a + 64], p[b..b + 64]);
    }
}
