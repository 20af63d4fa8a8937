//! What every in-process design does the same way at start and at stop, written once: its
//! listeners, its state behind an `Arc` shared with its threads, threads started by name, the
//! `Server` a caller holds, and the stop (flag up, threads woken and joined, what they leave
//! closed). A design supplies its state (a `Core`) and its threads' bodies; event-loop designs
//! (one loop per listener) only the loop.
//!
//! Nothing here is on a request's path: it runs at start and at stop.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::thread::JoinHandle;

use socket2::Socket;

use crate::error::{Error, Result};

use super::evloop::Waker;
use super::net;
use super::shared::{pin_to, ServerConfig, Shared, ThreadMark};
use super::usage::ChildUsage;
use super::{Counts, DesignInfo, Server};

/// A design's state, shared by its threads, and what stopping it takes beyond the common part.
pub trait Core: Send + Sync + 'static {
    fn shared(&self) -> &Shared;
    /// Called once the stop flag is up: makes the design's threads see it (wakes a loop, shuts
    /// down a listener a thread blocks on).
    fn wake(&self) {}
    /// Called once its threads have returned: ends what they leave behind (connections,
    /// children, queued work).
    fn finish(&self) {}
    /// CPU and switches of its child processes (fork designs).
    fn children(&self) -> Option<ChildUsage> {
        None
    }
}

/// A design running in this process. Dropping it stops it (also when its start fails half way:
/// the threads already started are stopped and joined).
pub struct Running<C: Core> {
    core: Arc<C>,
    design: &'static DesignInfo,
    addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
    _listeners: Vec<Socket>,
}

impl<C: Core> Running<C> {
    /// A design reached at `addr` whose listeners live elsewhere (in a runtime).
    pub fn new(design: &'static DesignInfo, addr: SocketAddr, core: C) -> Running<C> {
        Running {
            core: Arc::new(core),
            design,
            addr,
            threads: Vec::new(),
            _listeners: Vec::new(),
        }
    }

    /// A design listening on `listeners` (kept open until it stops; the first gives the
    /// address).
    pub fn on(design: &'static DesignInfo, listeners: Vec<Socket>, core: C) -> Result<Running<C>> {
        let addr = net::local_addr(&listeners[0])?;
        let mut r = Running::new(design, addr, core);
        r._listeners = listeners;
        Ok(r)
    }

    /// A design with one listener and one thread of its own (its acceptor, its dispatcher).
    pub fn with_thread(
        design: &'static DesignInfo,
        listener: Socket,
        core: C,
        name: &str,
        what: &str,
        body: impl FnOnce(Arc<C>) + Send + 'static,
    ) -> Result<Running<C>> {
        let mut r = Running::on(design, vec![listener], core)?;
        r.spawn(name.into(), what, body)?;
        Ok(r)
    }

    pub fn core(&self) -> &Arc<C> {
        &self.core
    }

    /// Starts a thread named `name` running `body` with the design's state; `what` names it in
    /// the error ("the acceptor thread").
    pub fn spawn(
        &mut self,
        name: String,
        what: &str,
        body: impl FnOnce(Arc<C>) + Send + 'static,
    ) -> Result<()> {
        let core = self.core.clone();
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(move || body(core))
            .map_err(|e| Error::Fail(format!("cannot start {what}: {e}")))?;
        self.threads.push(h);
        Ok(())
    }

    /// Keeps a thread started elsewhere, joined at stop with the others.
    pub fn adopt(&mut self, h: JoinHandle<()>) {
        self.threads.push(h);
    }

    pub fn boxed(self) -> Box<dyn Server> {
        Box::new(self)
    }
}

impl<C: Core> Server for Running<C> {
    fn info(&self) -> &'static DesignInfo {
        self.design
    }
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    fn counts(&self) -> Counts {
        self.core.shared().counts()
    }
    fn children(&self) -> Option<ChildUsage> {
        self.core.children()
    }
}

impl<C: Core> Drop for Running<C> {
    fn drop(&mut self) {
        self.core.shared().request_stop();
        self.core.wake();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        self.core.finish();
    }
}

/// The state of event loops, one per listener, each with its waker.
pub struct Loops {
    pub shared: Shared,
    pub wakers: Vec<Waker>,
}

impl Core for Loops {
    fn shared(&self) -> &Shared {
        &self.shared
    }
    fn wake(&self) {
        for w in &self.wakers {
            w.wake();
        }
    }
}

/// One loop a thread runs: the design's state, its listener, its waker, its worker id.
pub type LoopBody = fn(&Shared, RawFd, &Waker, u16);

/// Starts one thread per listener running `body`; loop i runs on `cpus_of(i)` and has worker
/// id i + 1.
pub fn start_loops(
    design: &'static DesignInfo,
    cfg: &ServerConfig,
    listeners: Vec<Socket>,
    cpus_of: impl Fn(usize) -> Vec<usize>,
    body: LoopBody,
) -> Result<Box<dyn Server>> {
    let fds: Vec<RawFd> = listeners.iter().map(net::raw).collect();
    let wakers = fds.iter().map(|_| Waker::new()).collect::<Result<_>>()?;
    let core = Loops {
        shared: Shared::new(cfg, design.id)?,
        wakers,
    };
    let mut running = Running::on(design, listeners, core)?;
    for (i, lfd) in fds.into_iter().enumerate() {
        let cpus = cpus_of(i);
        running.spawn(
            format!("tl-{}-{i}", design.name),
            "an event loop thread",
            move |core| {
                if pin_to(&cpus).is_err() {
                    return;
                }
                let _mark = ThreadMark::new(&core.shared);
                body(&core.shared, lfd, &core.wakers[i], i as u16 + 1);
            },
        )?;
    }
    Ok(running.boxed())
}

/// The CPUs of each per-core loop: one loop per server CPU, or one unpinned loop when the
/// server has no CPUs of its own.
pub fn per_core(cfg: &ServerConfig) -> Vec<Option<usize>> {
    if cfg.cpus.is_empty() {
        vec![None]
    } else {
        cfg.cpus.iter().map(|&c| Some(c)).collect()
    }
}
