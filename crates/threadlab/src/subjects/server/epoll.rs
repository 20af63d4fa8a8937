//! `epoll`: one thread, non-blocking sockets, level-triggered epoll and a state machine per
//! connection (`evloop::run_loop`): the C10K readiness design.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use socket2::Socket;

use crate::cancel::Cancel;
use crate::error::{Error, Result};

use super::evloop::{run_loop, Waker};
use super::net::{self, Acceptor};
use super::shared::{pin_to, ServerConfig, Shared, ThreadMark};
use super::{unbounded, Counts, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "epoll",
    id: 6,
    model: Model::EventLoop,
    summary:
        "one thread, non-blocking sockets, level-triggered epoll, a state machine per connection",
    start,
    holds: unbounded,
};

/// Loops, each with its listener, run on threads of their own.
pub(super) struct Loops {
    pub shared: Arc<Shared>,
    pub wakers: Vec<Arc<Waker>>,
    pub threads: Vec<JoinHandle<()>>,
    pub _listeners: Vec<Socket>,
    pub addr: SocketAddr,
    pub design: &'static DesignInfo,
}

impl Loops {
    /// Starts one loop per listener; loop i runs on `cpus_of(i)`.
    pub fn start(
        design: &'static DesignInfo,
        cfg: &ServerConfig,
        listeners: Vec<Socket>,
        cpus_of: impl Fn(usize) -> Vec<usize>,
    ) -> Result<Loops> {
        let addr = net::local_addr(&listeners[0])?;
        let shared = Arc::new(Shared::new(cfg, design.id)?);
        let mut loops = Loops {
            shared: shared.clone(),
            wakers: Vec::new(),
            threads: Vec::new(),
            _listeners: Vec::new(),
            addr,
            design,
        };
        for (i, l) in listeners.into_iter().enumerate() {
            let waker = Arc::new(Waker::new()?);
            let acceptor = Acceptor::new(net::raw(&l));
            let (shared, w, cpus) = (shared.clone(), waker.clone(), cpus_of(i));
            let h = std::thread::Builder::new()
                .name(format!("tl-{}-{i}", design.name))
                .spawn(move || {
                    if pin_to(&cpus).is_err() {
                        return;
                    }
                    let _mark = ThreadMark::new(&shared);
                    let _ = run_loop(&shared, &acceptor, &w, i as u16 + 1);
                })
                .map_err(|e| Error::Fail(format!("cannot start an event loop thread: {e}")))?;
            loops.wakers.push(waker);
            loops.threads.push(h);
            loops._listeners.push(l);
        }
        Ok(loops)
    }
}

impl Server for Loops {
    fn info(&self) -> &'static DesignInfo {
        self.design
    }
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    fn counts(&self) -> Counts {
        self.shared.counts()
    }
}

impl Drop for Loops {
    fn drop(&mut self) {
        self.shared.request_stop();
        for w in &self.wakers {
            w.wake();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, true)?;
    let cpus = cfg.cpus.clone();
    Ok(Box::new(Loops::start(
        &DESIGN,
        cfg,
        vec![listener],
        |_| cpus.clone(),
    )?))
}
