//! Building a reply once a whole frame is in, shared by the designs that drive a connection
//! from a runtime's task or green thread (tokio, green): the request's work is done by the
//! caller (each runtime waits its own way), then this writes the response or the refusal.
//! The event loops' connections (`evloop::Conn`) lay their responses out with `write_reply`.

use super::framing::FrameReader;
use super::protocol::{
    encode_error, write_response, ErrorCode, Request, RequestKind, Response, ERROR_FRAME_MAX,
    KIND_RESPONSE, KIND_STATS, RESPONSE_HEADER, STATS_PAYLOAD,
};
use super::shared::{Counter, Shared};
use super::usage::live_stats;
use crate::measure::process::mono_ns;

/// An error frame ready to send.
pub struct ErrorFrame {
    bytes: [u8; ERROR_FRAME_MAX],
    len: usize,
}

impl ErrorFrame {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// What to send for a request.
pub enum Prepared {
    /// `buf[..len]` holds the response; close the connection after it when `close`.
    Reply { len: usize, close: bool },
    /// Send this error frame and close.
    Refuse(ErrorFrame),
}

/// A refusal (counted) as an error frame.
pub fn refusal(code: ErrorCode, seq: u32, tag: u64, shared: &Shared, worker: u16) -> ErrorFrame {
    shared.count_refusal(code);
    let mut bytes = [0u8; ERROR_FRAME_MAX];
    let len = encode_error(&mut bytes, code, seq, tag, shared.design, worker);
    ErrorFrame { bytes, len }
}

/// The response to `r`, whose first byte arrived at `started_ns`, written into `buf` (which
/// holds its payload at `RESPONSE_HEADER`). An echo's work must already be done.
pub fn prepare(
    r: &Request,
    started_ns: u64,
    buf: &mut [u8],
    shared: &Shared,
    worker: u16,
    peer_is_loopback: bool,
) -> Prepared {
    if r.kind == RequestKind::Stats && !(shared.cfg.allow_remote_stats || peer_is_loopback) {
        return Prepared::Refuse(refusal(
            ErrorCode::Forbidden,
            r.seq,
            r.client_tag,
            shared,
            worker,
        ));
    }
    Prepared::Reply {
        len: write_reply(r, started_ns, buf, shared, worker),
        close: r.close_after(),
    }
}

/// Lays out the response to `r` at the start of `buf` (an echo's payload is already in place
/// after the header; a STATS payload is written here) and returns its length. An echo's work
/// must already be done; whether the peer may have STATS is the caller's to decide.
pub fn write_reply(
    r: &Request,
    started_ns: u64,
    buf: &mut [u8],
    shared: &Shared,
    worker: u16,
) -> usize {
    let (kind, payload_len, txn) = match r.kind {
        RequestKind::Stats => {
            let payload = live_stats(shared, None).encode();
            buf[RESPONSE_HEADER..RESPONSE_HEADER + STATS_PAYLOAD].copy_from_slice(&payload);
            (KIND_STATS, STATS_PAYLOAD as u32, 0)
        }
        RequestKind::Echo => (KIND_RESPONSE, r.payload_len, shared.next_txn()),
    };
    write_response(
        buf,
        &Response {
            kind,
            design: shared.design,
            worker,
            seq: r.seq,
            payload_len,
            client_tag: r.client_tag,
            service_ns: mono_ns().saturating_sub(started_ns),
            txn,
        },
    );
    RESPONSE_HEADER + payload_len as usize
}

/// How a reply's write ended.
pub enum Written {
    Whole,
    /// It ran past the frame deadline (a client that does not read).
    TimedOut,
    Failed,
}

/// After a reply's write: true when the connection goes on to its next frame (consumed from
/// `buf`); a write past the deadline counts `Deadline`, another failure `Resets`.
pub fn next_frame(
    w: Written,
    close: bool,
    reader: &mut FrameReader,
    buf: &mut Vec<u8>,
    shared: &Shared,
) -> bool {
    match w {
        Written::Whole if close => false,
        Written::Whole => {
            reader.consume(buf, mono_ns());
            true
        }
        Written::TimedOut => {
            shared.add(Counter::Deadline, 1);
            false
        }
        Written::Failed => {
            shared.add(Counter::Resets, 1);
            false
        }
    }
}
