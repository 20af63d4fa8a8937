//! The study's `server()` loop: blocking reads and writes on one connection, for the designs
//! that give each connection (or request) a thread or a process of its own.
//!
//! Async-signal-safe throughout (raw system calls, atomics in shared memory, a buffer passed
//! in), because forked children run it too.

use std::os::fd::RawFd;

use crate::measure::process::mono_ns;

use super::framing::{FrameBuf, FrameReader, Step};
use super::net::{self, peer_is_loopback, recv, send_all, set_timeout};
use super::protocol::{
    write_response, ErrorCode, Request, RequestKind, Response, KIND_RESPONSE, KIND_STATS,
    RESPONSE_HEADER, STATS_PAYLOAD,
};
use super::shared::{Counter, Shared};

/// How long a request's work runs between looks at the stop flag: a server stops within this
/// of being asked, even while frames whose work lasts up to a second (`MAX_WORK_US`) are served.
pub const WORK_SLICE_US: u32 = 20_000;

/// The work a request asks for before its reply: spin (burn CPU, wall-clock time) then block
/// (sleep: the way a thread waits for a slow disk or another service). Both end early when the
/// server is stopping (the reply is then never sent: the connection closes).
pub fn do_work(r: &Request, shared: &Shared) {
    spin_us(r.work_spin_us, shared);
    block_us(r.work_block_us, shared);
}

/// Busy-waits `us` microseconds of wall-clock time, or until the server stops.
pub fn spin_us(us: u32, shared: &Shared) {
    if us == 0 {
        return;
    }
    let end = mono_ns() + us as u64 * 1000;
    while mono_ns() < end && !shared.stopping() {
        std::hint::spin_loop();
    }
}

/// Sleeps `us` microseconds (nanosleep, resumed after signals) in slices of `WORK_SLICE_US`,
/// or until the server stops.
pub fn block_us(us: u32, shared: &Shared) {
    let mut left = us;
    while left > 0 && !shared.stopping() {
        let slice = left.min(WORK_SLICE_US);
        sleep_us(slice);
        left -= slice;
    }
}

fn sleep_us(us: u32) {
    let mut ts = libc::timespec {
        tv_sec: (us / 1_000_000) as libc::time_t,
        tv_nsec: (us % 1_000_000) as libc::c_long * 1000,
    };
    loop {
        let mut rem = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec pointers.
        if unsafe { libc::nanosleep(&ts, &mut rem) } == 0 {
            return;
        }
        if net::errno() != libc::EINTR {
            return;
        }
        ts = rem;
    }
}

/// Who is serving: the design's shared state, the worker id put in replies, and where a forked
/// child records its own CPU after each request.
pub struct Worker<'a> {
    pub shared: &'a Shared,
    pub id: u16,
    /// Called after each reply (forked children: store their rusage for the parent).
    pub after_reply: Option<&'a dyn Fn()>,
    /// Running in a forked child: only async-signal-safe work (STATS from the snapshot).
    pub in_child: bool,
    /// For a design that holds a fixed number of connections (prefork): whether every one is
    /// held while another waits to be accepted. Then this connection may not sit idle or
    /// half-sent for long (`CROWDED_IDLE`, `CROWDED_FRAME`): a few slow clients cannot keep
    /// everyone else out. Must be async-signal-safe (it runs in forked children).
    pub crowded: Option<&'a dyn Fn() -> bool>,
}

/// While the server is crowded: an idle connection is closed after this long, and a frame must
/// arrive whole within this long of its first byte.
pub const CROWDED_IDLE: std::time::Duration = std::time::Duration::from_millis(500);
pub const CROWDED_FRAME: std::time::Duration = std::time::Duration::from_millis(500);
/// How often a connection of such a design looks at whether the server is crowded.
const CROWD_CHECK_NS: u64 = 100_000_000;

/// Serve until the connection ends, or only the frames at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    Closed,
    /// Return after one reply (and any further frames already buffered): thread-per-request.
    OneFrame,
}

/// How a call to `serve` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The connection is finished (peer closed, reset, refused frame, timeout): close it.
    Closed,
    /// `Until::OneFrame` served a frame and the connection stays open.
    Open,
}

/// Sets the connection's send deadline (a slow reader cannot park the worker past it).
pub fn prepare(fd: RawFd, shared: &Shared) {
    set_timeout(
        fd,
        libc::SO_SNDTIMEO,
        shared.cfg.frame_deadline.as_nanos() as u64,
    );
}

/// Serves requests on a blocking socket: a whole frame must arrive within the frame deadline
/// from its first byte (SO_RCVTIMEO set to what is left before each read inside a frame), an
/// idle connection is closed after the idle timeout.
pub fn serve(
    fd: RawFd,
    buf: &mut dyn FrameBuf,
    reader: &mut FrameReader,
    w: &Worker,
    until: Until,
) -> Ended {
    let shared = w.shared;
    let cfg = &shared.cfg;
    let deadline_ns = cfg.frame_deadline.as_nanos() as u64;
    let idle_ns = cfg.idle_timeout.as_nanos() as u64;
    // The receive timeout in force; 0 = not set yet.
    let mut timeout_set = 0u64;
    let mut idle_since = mono_ns();
    let mut step = reader.check(buf, cfg.max_payload);
    loop {
        while step == Step::NeedMore {
            if shared.stopping() {
                return Ended::Closed;
            }
            let now = mono_ns();
            let crowded = w.crowded.is_some_and(|f| f());
            let left = if reader.in_frame() {
                let limit = if crowded {
                    deadline_ns.min(CROWDED_FRAME.as_nanos() as u64)
                } else {
                    deadline_ns
                };
                (reader.started_ns() + limit).saturating_sub(now)
            } else {
                let limit = if crowded {
                    idle_ns.min(CROWDED_IDLE.as_nanos() as u64)
                } else {
                    idle_ns
                };
                (idle_since + limit).saturating_sub(now)
            };
            if left == 0 {
                if reader.in_frame() {
                    step = Step::Refused(ErrorCode::Deadline, 0, 0);
                    break;
                }
                shared.add(Counter::IdleClosed, 1);
                return Ended::Closed;
            }
            let want = if w.crowded.is_some() {
                left.min(CROWD_CHECK_NS)
            } else {
                left
            };
            if want != timeout_set {
                set_timeout(fd, libc::SO_RCVTIMEO, want);
                timeout_set = want;
            }
            match recv(fd, reader.spare(buf)) {
                Ok(0) => {
                    if reader.in_frame() {
                        shared.add(Counter::Resets, 1);
                    }
                    return Ended::Closed;
                }
                Ok(n) => step = reader.advance(n, buf, mono_ns(), cfg.max_payload),
                // The timeout: the next round decides (deadline, idle, or crowded).
                Err(libc::EAGAIN) => {}
                Err(libc::ECONNRESET) | Err(libc::EPIPE) => {
                    shared.add(Counter::Resets, 1);
                    return Ended::Closed;
                }
                Err(_) => return Ended::Closed,
            }
        }
        match step {
            Step::NeedMore => unreachable!("the loop above ends only on another step"),
            Step::Refused(code, seq, tag) => {
                shared.count_refusal(code);
                net::send_error(fd, shared, code, seq, tag, w.id);
                return Ended::Closed;
            }
            Step::Frame(r) => {
                let started = reader.started_ns();
                if !reply(fd, buf, &r, started, w) {
                    return Ended::Closed;
                }
                if let Some(f) = w.after_reply {
                    f();
                }
                idle_since = mono_ns();
                reader.consume(buf, idle_since);
                if r.close_after() {
                    return Ended::Closed;
                }
                step = reader.check(buf, cfg.max_payload);
                if until == Until::OneFrame && step == Step::NeedMore && !reader.in_frame() {
                    return Ended::Open;
                }
            }
        }
    }
}

/// Answers one frame whose payload sits at `buf[40..]`; false when the connection must close.
fn reply(fd: RawFd, buf: &mut dyn FrameBuf, r: &Request, started_ns: u64, w: &Worker) -> bool {
    let shared = w.shared;
    match r.kind {
        RequestKind::Stats => {
            let allowed = shared.cfg.allow_remote_stats || peer_is_loopback(fd);
            let snapshot = if allowed {
                stats_payload(shared, w.in_child)
            } else {
                None
            };
            let Some(payload) = snapshot else {
                let code = ErrorCode::Forbidden;
                shared.count_refusal(code);
                net::send_error(fd, shared, code, r.seq, r.client_tag, w.id);
                return false;
            };
            let b = buf.bytes();
            b[RESPONSE_HEADER..RESPONSE_HEADER + STATS_PAYLOAD].copy_from_slice(&payload);
            write_response(
                b,
                &Response {
                    kind: KIND_STATS,
                    design: shared.design,
                    worker: w.id,
                    seq: r.seq,
                    payload_len: STATS_PAYLOAD as u32,
                    client_tag: r.client_tag,
                    service_ns: mono_ns().saturating_sub(started_ns),
                    txn: 0,
                },
            );
            send_reply(fd, &b[..RESPONSE_HEADER + STATS_PAYLOAD], shared)
        }
        RequestKind::Echo => {
            do_work(r, shared);
            let txn = shared.next_txn();
            let len = RESPONSE_HEADER + r.payload_len as usize;
            let b = buf.bytes();
            write_response(
                b,
                &Response {
                    kind: KIND_RESPONSE,
                    design: shared.design,
                    worker: w.id,
                    seq: r.seq,
                    payload_len: r.payload_len,
                    client_tag: r.client_tag,
                    service_ns: mono_ns().saturating_sub(started_ns),
                    txn,
                },
            );
            send_reply(fd, &b[..len], shared)
        }
    }
}

fn send_reply(fd: RawFd, bytes: &[u8], shared: &Shared) -> bool {
    match send_all(fd, bytes) {
        Ok(()) => true,
        Err(libc::EAGAIN) => {
            // The client did not take the reply within the frame deadline.
            shared.add(Counter::Deadline, 1);
            false
        }
        Err(libc::ECONNRESET) | Err(libc::EPIPE) => {
            shared.add(Counter::Resets, 1);
            false
        }
        Err(_) => false,
    }
}

/// The STATS payload a blocking worker answers with: threads of the lab or `serve` process
/// gather it live; forked children can only read the parent's snapshot (they may not allocate).
fn stats_payload(shared: &Shared, in_child: bool) -> Option<[u8; STATS_PAYLOAD]> {
    if in_child {
        return shared.snapshot();
    }
    Some(super::usage::live_stats(shared, None).encode())
}
