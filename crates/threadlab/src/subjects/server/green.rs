//! `green`: a uthread green thread per connection on a pool of carriers, one per server CPU
//! (pinned), blocking-style reads and writes on non-blocking sockets (uthread's netpoller: a
//! read that would block parks the green thread on the fd and the carrier runs another; an
//! idle carrier waits in epoll_wait). This is the design Capriccio and "Why Events Are A Bad
//! Idea" argued for: the code of thread_per_client, the cost of an event loop.
//!
//! Blocking work is a `uthread::sleep`, which parks the green thread as an I/O wait would; a
//! real blocking system call (a file read, DNS) would hold the whole carrier instead, which
//! uthread's README says to move to `uthread::io::blocking`.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::placement::PinGuard;
use crate::measure::process::mono_ns;

use super::blocking::{spin_us, WORK_SLICE_US};
use super::framing::{new_buffer, FrameReader, Step};
use super::net;
use super::protocol::{ErrorCode, RequestKind};
use super::reply::{next_frame, prepare, refusal, Prepared, Written};
use super::running::{Core, Running};
use super::shared::{Counter, ServerConfig, Shared};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "green",
    id: 11,
    model: Model::Runtime,
    summary: "uthread: a green thread per connection on a pool of carriers (one per server CPU, pinned), blocking-style calls on non-blocking sockets; blocking work parks the green thread",
    start,
    holds: unbounded,
};

/// Stack of a connection's green thread: the serving loop keeps its buffer on the heap.
const STACK: usize = 64 * 1024;

struct Green {
    pool: std::sync::Mutex<Option<uthread::Pool>>,
    shared: Arc<Shared>,
    conns: Arc<Conns>,
    carriers: u64,
}

impl Core for Green {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wake(&self) {
        // Every parked thread wakes with an error and returns, closing its socket; then the
        // pool has no thread left and its carriers stop.
        self.conns.shut_all();
    }
    fn finish(&self) {
        let pool = self.pool.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(pool) = pool {
            pool.join();
        }
        self.shared.sub(Counter::ThreadsAlive, self.carriers);
    }
}

/// The listener and the open connections, by descriptor, so stopping can shut them down: every
/// parked green thread then wakes with an error and ends on its own, closing its socket
/// (uthread would otherwise abandon parked threads and keep their descriptor numbers).
#[derive(Default)]
struct Conns {
    listener: std::sync::atomic::AtomicI32,
    open: std::sync::Mutex<std::collections::HashSet<RawFd>>,
}

impl Conns {
    fn shut_all(&self) {
        let l = self.listener.load(std::sync::atomic::Ordering::Acquire);
        // SAFETY: shutdown only changes the state of a socket we own (the listener lives in
        // the acceptor until it returns, which this call makes it do); no memory is touched.
        unsafe {
            libc::shutdown(l, libc::SHUT_RDWR);
        }
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for &fd in open.iter() {
            // SAFETY: as above; a descriptor leaves `open` before its stream closes it, so
            // every number here is still that connection's socket.
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
        }
    }
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let socket = net::listen(cfg.listen, cfg.backlog, true)?;
    let addr = net::local_addr(&socket)?;
    let std_listener: std::net::TcpListener = socket.into();
    let listener = uthread::net::TcpListener::from_std(std_listener)
        .map_err(|e| Error::Fail(format!("cannot hand the listener to uthread: {e}")))?;
    let shared = Arc::new(Shared::new(cfg, DESIGN.id)?);
    let carriers = cfg.cpus.len().max(1);
    // The pool pins carrier i to the i-th CPU its builder may use: build it from a thread
    // allowed only the server's CPUs.
    let pool = {
        let _only = if cfg.cpus.is_empty() {
            None
        } else {
            Some(PinGuard::pin_set(&cfg.cpus)?)
        };
        uthread::Pool::builder()
            .carriers(carriers)
            .pin(!cfg.cpus.is_empty())
            .name("tl-green")
            .runtime(uthread::Runtime::builder().stack_size(STACK))
            .build()
            .map_err(|e| Error::Skip(format!("cannot start uthread's carriers: {e}")))?
    };
    shared.add(Counter::ThreadsAlive, carriers as u64);
    let conns = Arc::new(Conns::default());
    conns
        .listener
        .store(listener.as_raw_fd(), std::sync::atomic::Ordering::Release);
    let handle = pool.handle();
    let (s, c) = (shared.clone(), conns.clone());
    // The acceptor is a green thread too; each connection goes to the least-loaded carrier.
    pool.spawn_on(0, move || accept_loop(listener, s, c, handle));
    let green = Green {
        pool: std::sync::Mutex::new(Some(pool)),
        shared,
        conns,
        carriers: carriers as u64,
    };
    Ok(Running::new(&DESIGN, addr, green).boxed())
}

fn accept_loop(
    listener: uthread::net::TcpListener,
    shared: Arc<Shared>,
    conns: Arc<Conns>,
    pool: uthread::PoolHandle,
) {
    while !shared.stopping() {
        match listener.accept() {
            Ok(_) if shared.stopping() => return,
            Ok((stream, _)) => {
                shared.add(Counter::Accepted, 1);
                if shared.get(Counter::ConnectionsOpen) >= shared.cfg.max_connections as u64 {
                    let f = refusal(ErrorCode::Busy, 0, 0, &shared, 0);
                    let _ = (&stream).write(f.as_bytes());
                    shared.add(Counter::Rejected, 1);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                shared.add(Counter::ConnectionsOpen, 1);
                let fd = stream.as_raw_fd();
                conns
                    .open
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(fd);
                let (s, c) = (shared.clone(), conns.clone());
                pool.spawn(move || serve(stream, s, c));
            }
            // uthread's listener sheds a pending connection with its spare descriptor and
            // backs off by itself when descriptors run out; count it as the others do.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                shared.add(Counter::FdExhausted, 1);
            }
            Err(_) => {}
        }
    }
}

/// Keeps the open-connection count and set right however the thread ends; dropped before the
/// stream, so a descriptor leaves the set before its number can be reused.
struct Open(Arc<Shared>, Arc<Conns>, RawFd);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.sub(Counter::ConnectionsOpen, 1);
        self.1
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.2);
    }
}

fn serve(mut s: uthread::net::TcpStream, shared: Arc<Shared>, conns: Arc<Conns>) {
    let _open = Open(shared.clone(), conns, s.as_raw_fd());
    let cfg = &shared.cfg;
    let deadline = cfg.frame_deadline;
    let worker = uthread::current_id().unwrap_or(0) as u16;
    let mut buf = new_buffer();
    let mut reader = FrameReader::new();
    loop {
        let mut step = reader.check(&mut buf, cfg.max_payload);
        while step == Step::NeedMore {
            let until = reader.read_wait(deadline, cfg.idle_timeout);
            s.set_read_deadline(Some(Instant::now() + until));
            match s.read(reader.spare(&mut buf)) {
                Ok(0) => {
                    if reader.in_frame() {
                        shared.add(Counter::Resets, 1);
                    }
                    return;
                }
                Ok(n) => step = reader.advance(n, &mut buf, mono_ns(), cfg.max_payload),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    if reader.in_frame() {
                        step = Step::Refused(ErrorCode::Deadline, 0, 0);
                    } else {
                        shared.add(Counter::IdleClosed, 1);
                        return;
                    }
                }
                Err(e) => {
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                    ) {
                        shared.add(Counter::Resets, 1);
                    }
                    return;
                }
            }
        }
        s.set_write_deadline(Some(Instant::now() + deadline));
        let prepared = match step {
            Step::NeedMore => unreachable!("the loop above ends only on another step"),
            Step::Refused(code, seq, tag) => {
                Prepared::Refuse(refusal(code, seq, tag, &shared, worker))
            }
            Step::Frame(r) => {
                if r.kind == RequestKind::Echo {
                    spin_us(r.work_spin_us, &shared);
                    // In slices, so that a stop is seen while the work lasts (up to 1 s).
                    let mut left = r.work_block_us;
                    while left > 0 && !shared.stopping() {
                        let slice = left.min(WORK_SLICE_US);
                        uthread::sleep(Duration::from_micros(slice as u64));
                        left -= slice;
                    }
                }
                // Asked only of a stats request, the one kind that needs it (as the blocking
                // and event-loop designs do): an echo costs no getpeername.
                let loopback = r.kind == RequestKind::Stats
                    && s.peer_addr().is_ok_and(|a| net::is_loopback(a.ip()));
                prepare(&r, reader.started_ns(), &mut buf, &shared, worker, loopback)
            }
        };
        let (len, close) = match prepared {
            Prepared::Reply { len, close } => (len, close),
            Prepared::Refuse(f) => {
                let _ = s.write_all(f.as_bytes());
                return;
            }
        };
        let written = match s.write_all(&buf[..len]) {
            Ok(()) => Written::Whole,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Written::TimedOut,
            Err(_) => Written::Failed,
        };
        if !next_frame(written, close, &mut reader, &mut buf, &shared) {
            return;
        }
    }
}
