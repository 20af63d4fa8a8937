//! `tokio`: a peer in the same run. Tokio's multi-thread scheduler with one worker per server
//! CPU (each pinned), a task per connection reading frames with the same parser as the other
//! Rust designs. Blocking work is awaited (`tokio::time::sleep`), as an async program waits
//! for slow I/O; spinning work runs on the worker.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;

use super::blocking::spin_us;
use super::framing::{new_buffer, FrameReader, Step};
use super::net::{self, Acceptor};
use super::protocol::{encode_error, ErrorCode, RequestKind, ERROR_FRAME_MAX};
use super::reply::{next_frame, prepare, refusal, Prepared, Written};
use super::running::{Core, Running};
use super::shared::{pin_to, Counter, ServerConfig, Shared};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "tokio",
    id: 9,
    model: Model::Runtime,
    summary: "Tokio multi-thread scheduler, one worker per server CPU, a task per connection; blocking work awaited",
    start,
    holds: unbounded,
};

struct Tokio {
    rt: std::sync::Mutex<Option<tokio::runtime::Runtime>>,
    shared: Arc<Shared>,
}

impl Core for Tokio {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn finish(&self) {
        let rt = self.rt.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(rt) = rt {
            // Tasks still running are dropped: their sockets close.
            rt.shutdown_timeout(Duration::from_millis(500));
        }
    }
}

thread_local! {
    /// This worker's id in replies (its thread id), read once per thread.
    static WORKER: u16 = crate::sys::gettid() as u16;
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, true)?;
    let addr = net::local_addr(&listener)?;
    let shared = Arc::new(Shared::new(cfg, DESIGN.id)?);
    let cpus = cfg.cpus.clone();
    let (up, down) = (shared.clone(), shared.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus.len().max(1))
        .enable_io()
        .enable_time()
        .thread_name("tl-tokio")
        .on_thread_start(move || {
            let _ = pin_to(&cpus);
            up.add(Counter::ThreadsAlive, 1);
        })
        .on_thread_stop(move || down.sub(Counter::ThreadsAlive, 1))
        .build()
        .map_err(|e| Error::Fail(format!("cannot build the Tokio runtime: {e}")))?;
    let std_listener: std::net::TcpListener = listener.into();
    let s = shared.clone();
    // Stopping shuts the runtime down, which drops this task and every connection's.
    rt.spawn(async move { accept_loop(std_listener, s).await });
    let tokio = Tokio {
        rt: std::sync::Mutex::new(Some(rt)),
        shared,
    };
    Ok(Running::new(&DESIGN, addr, tokio).boxed())
}

async fn accept_loop(l: std::net::TcpListener, shared: Arc<Shared>) {
    let reserve = Acceptor::new(std::os::fd::AsRawFd::as_raw_fd(&l));
    let Ok(listener) = tokio::net::TcpListener::from_std(l) else {
        return;
    };
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                shared.add(Counter::Accepted, 1);
                if shared.get(Counter::ConnectionsOpen) >= shared.cfg.max_connections as u64 {
                    let mut f = [0u8; ERROR_FRAME_MAX];
                    let n = encode_error(&mut f, ErrorCode::Busy, 0, 0, shared.design, 0);
                    let _ = stream.try_write(&f[..n]);
                    shared.add(Counter::Rejected, 1);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                shared.add(Counter::ConnectionsOpen, 1);
                tokio::spawn(serve(stream, shared.clone()));
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                // Out of descriptors: drop one pending connection with the reserve, pause.
                let _ = reserve.accept(&shared);
                tokio::time::sleep(net::FD_BACKOFF).await;
            }
            Err(_) => {}
        }
    }
}

/// Keeps the open-connection count right however the task ends (a runtime shutting down drops
/// it mid-await).
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.sub(Counter::ConnectionsOpen, 1);
    }
}

async fn serve(mut s: tokio::net::TcpStream, shared: Arc<Shared>) {
    let _open = Open(shared.clone());
    let cfg = &shared.cfg;
    let deadline = cfg.frame_deadline;
    let mut buf = new_buffer();
    let mut reader = FrameReader::new();
    loop {
        let mut step = reader.check(&mut buf, cfg.max_payload);
        while step == Step::NeedMore {
            let wait = reader.read_wait(deadline, cfg.idle_timeout);
            let read = tokio::time::timeout(wait, s.read(reader.spare(&mut buf))).await;
            match read {
                Ok(Ok(0)) => {
                    if reader.in_frame() {
                        shared.add(Counter::Resets, 1);
                    }
                    return;
                }
                Ok(Ok(n)) => step = reader.advance(n, &mut buf, mono_ns(), cfg.max_payload),
                Ok(Err(e)) => {
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                    ) {
                        shared.add(Counter::Resets, 1);
                    }
                    return;
                }
                Err(_) if reader.in_frame() => {
                    step = Step::Refused(ErrorCode::Deadline, 0, 0);
                }
                Err(_) => {
                    shared.add(Counter::IdleClosed, 1);
                    return;
                }
            }
        }
        let worker = WORKER.with(|w| *w);
        let prepared = match step {
            Step::NeedMore => unreachable!("the loop above ends only on another step"),
            Step::Refused(code, seq, tag) => {
                Prepared::Refuse(refusal(code, seq, tag, &shared, worker))
            }
            Step::Frame(r) => {
                if r.kind == RequestKind::Echo {
                    spin_us(r.work_spin_us, &shared);
                    if r.work_block_us > 0 {
                        tokio::time::sleep(Duration::from_micros(r.work_block_us as u64)).await;
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
                let _ = tokio::time::timeout(deadline, s.write_all(f.as_bytes())).await;
                return;
            }
        };
        let written = match tokio::time::timeout(deadline, s.write_all(&buf[..len])).await {
            Ok(Ok(())) => Written::Whole,
            Ok(Err(_)) => Written::Failed,
            Err(_) => Written::TimedOut,
        };
        if !next_frame(written, close, &mut reader, &mut buf, &shared) {
            return;
        }
    }
}
