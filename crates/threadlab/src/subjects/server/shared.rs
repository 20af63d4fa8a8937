//! What every design's threads, loops and forked children share: the configuration, the stop
//! flag and the counters. The counters live in a MAP_SHARED page, so that a forked child's
//! increments are seen by the parent (and cost the same atomic add as a thread's).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::error::Result;
use crate::measure::process::SharedMap;

use super::protocol::{ErrorCode, ServerStats, DEFAULT_MAX_PAYLOAD};

/// How a server is set up. `ServerConfig::loopback()` gives the lab's defaults.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen; port 0 picks a free one.
    pub listen: SocketAddr,
    /// listen() backlog, asked for explicitly (std and mio use 128; nginx 511); the kernel caps
    /// it at net.core.somaxconn.
    pub backlog: i32,
    /// Payload cap: a longer request is refused from its header, before any allocation.
    pub max_payload: u32,
    /// The whole frame must arrive within this from its first byte (slowloris), and a reply
    /// must be taken by the client within it (slow reader).
    pub frame_deadline: Duration,
    /// A connection with no frame in progress is closed after this long.
    pub idle_timeout: Duration,
    /// Connections held at once; one more is accepted, answered BUSY and closed.
    pub max_connections: usize,
    /// CPUs the server's threads and processes are pinned to (empty: as inherited).
    pub cpus: Vec<usize>,
    /// Worker threads of the `pool` design (the throttle experiment's advice: physical cores).
    pub pool_workers: usize,
    /// Bounded queue of the `pool` design: a request finding it full is answered BUSY.
    pub pool_queue: usize,
    /// Processes of the `prefork` design (each holds one connection at a time).
    pub prefork_processes: usize,
    /// Stack of a thread-per-client or thread-per-request thread.
    pub thread_stack: usize,
    /// Answer STATS to peers that are not on loopback.
    pub allow_remote_stats: bool,
    /// Forked children answer STATS from a snapshot the parent refreshes every 20 ms (they
    /// cannot gather it themselves); off in the lab, which measures its children directly.
    pub stats_snapshots: bool,
}

impl ServerConfig {
    /// The lab's defaults on 127.0.0.1, any port.
    pub fn loopback() -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            backlog: 4096,
            max_payload: DEFAULT_MAX_PAYLOAD,
            frame_deadline: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 16_384,
            cpus: Vec::new(),
            pool_workers: 2,
            pool_queue: 256,
            prefork_processes: 64,
            thread_stack: 64 << 10,
            allow_remote_stats: false,
            stats_snapshots: false,
        }
    }
}

/// The counters, one per cache line of the shared page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Requests answered; the response's transaction number.
    Served = 0,
    /// Requests or connections answered BUSY.
    Rejected,
    TooLarge,
    BadFrame,
    Deadline,
    /// Connections the peer reset or cut mid-frame.
    Resets,
    Accepted,
    /// accept() found no file descriptor left (EMFILE/ENFILE).
    FdExhausted,
    ConnectionsOpen,
    /// Threads the design itself runs now (acceptors, loops, workers, per-client threads).
    ThreadsAlive,
    IdleClosed,
}

const COUNTERS: usize = 11;
/// The STATS snapshot for forked children: 13 words from this slot on.
const SNAPSHOT_AT: usize = 16;
const SHARED_WORDS: usize = SNAPSHOT_AT + 13;

/// A server's shared state.
pub struct Shared {
    pub cfg: ServerConfig,
    /// This design's id in responses.
    pub design: u8,
    map: SharedMap,
    stop: AtomicBool,
}

impl Shared {
    pub fn new(cfg: &ServerConfig, design: u8) -> Result<Shared> {
        Ok(Shared {
            cfg: cfg.clone(),
            design,
            map: SharedMap::new(SHARED_WORDS * 64)?,
            stop: AtomicBool::new(false),
        })
    }

    fn word(&self, c: Counter) -> &AtomicU64 {
        self.map.word(c as usize)
    }

    pub fn add(&self, c: Counter, n: u64) {
        self.word(c).fetch_add(n, Ordering::Relaxed);
    }

    pub fn sub(&self, c: Counter, n: u64) {
        self.word(c).fetch_sub(n, Ordering::Relaxed);
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.word(c).load(Ordering::Relaxed)
    }

    /// The next transaction number (1, 2, ...): the study's "transaction information".
    pub fn next_txn(&self) -> u64 {
        self.word(Counter::Served).fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts a refused frame under its reason.
    pub fn count_refusal(&self, code: ErrorCode) {
        self.add(
            match code {
                ErrorCode::TooLarge => Counter::TooLarge,
                ErrorCode::Deadline => Counter::Deadline,
                ErrorCode::Busy => Counter::Rejected,
                ErrorCode::BadFrame | ErrorCode::Forbidden => Counter::BadFrame,
            },
            1,
        );
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The counters at this moment.
    pub fn counts(&self) -> Counts {
        Counts {
            served: self.get(Counter::Served),
            rejected: self.get(Counter::Rejected),
            errors: self.get(Counter::TooLarge)
                + self.get(Counter::BadFrame)
                + self.get(Counter::Deadline),
            deadlines: self.get(Counter::Deadline),
            resets: self.get(Counter::Resets),
            accepted: self.get(Counter::Accepted),
            fd_exhausted: self.get(Counter::FdExhausted),
            connections_open: self.get(Counter::ConnectionsOpen),
            threads_alive: self.get(Counter::ThreadsAlive),
            idle_closed: self.get(Counter::IdleClosed),
        }
    }

    /// Stores a STATS snapshot for forked children to answer with.
    pub fn store_snapshot(&self, s: &ServerStats) {
        let bytes = s.encode();
        for i in 0..13 {
            let v = u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            self.map.word(SNAPSHOT_AT + i).store(v, Ordering::Relaxed);
        }
    }

    /// The last snapshot (async-signal-safe: atomics only); None when snapshots are off.
    pub fn snapshot(&self) -> Option<[u8; super::protocol::STATS_PAYLOAD]> {
        if !self.cfg.stats_snapshots {
            return None;
        }
        let mut out = [0u8; super::protocol::STATS_PAYLOAD];
        for i in 0..13 {
            let v = self.map.word(SNAPSHOT_AT + i).load(Ordering::Relaxed);
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        Some(out)
    }
}

/// A reading of a server's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub served: u64,
    pub rejected: u64,
    /// Too large, bad frame and deadline refusals.
    pub errors: u64,
    pub deadlines: u64,
    pub resets: u64,
    pub accepted: u64,
    pub fd_exhausted: u64,
    pub connections_open: u64,
    pub threads_alive: u64,
    pub idle_closed: u64,
}

const _: () = assert!(COUNTERS <= SNAPSHOT_AT);

/// Counts a thread of the design while it lives.
pub struct ThreadMark<'a>(&'a Shared);

impl<'a> ThreadMark<'a> {
    pub fn new(s: &'a Shared) -> ThreadMark<'a> {
        s.add(Counter::ThreadsAlive, 1);
        ThreadMark(s)
    }
}

impl Drop for ThreadMark<'_> {
    fn drop(&mut self) {
        self.0.sub(Counter::ThreadsAlive, 1);
    }
}

/// Pins the calling thread to `cpus` (all of them; the scheduler picks among them); nothing
/// when `cpus` is empty. New threads and forked children inherit the mask.
pub fn pin_to(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: cpu_set_t is plain data, zeroed then filled with CPU numbers below its capacity
    // (CPU_SET ignores larger ones); the size passed is the set's own.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(crate::error::Error::os(&format!(
            "cannot pin a server thread to CPUs {cpus:?}"
        )));
    }
    Ok(())
}

/// The affinity mask for `cpus`, computed ahead so that a forked child can apply it with
/// `apply_cpu_set` (no allocation); None when `cpus` is empty (keep what is inherited).
pub fn cpu_set(cpus: &[usize]) -> Option<libc::cpu_set_t> {
    if cpus.is_empty() {
        return None;
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET ignores CPUs beyond its capacity.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        Some(set)
    }
}

/// Applies a mask from `cpu_set` to the calling thread (async-signal-safe).
pub fn apply_cpu_set(set: &Option<libc::cpu_set_t>) {
    if let Some(set) = set {
        // SAFETY: a valid set and its own size.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
        }
    }
}
