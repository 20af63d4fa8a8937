//! `epoll`: one thread, non-blocking sockets, level-triggered epoll and a state machine per
//! connection (`evloop::run_loop`): the C10K readiness design.

use crate::cancel::Cancel;
use crate::error::Result;

use super::evloop::{run_loop, Waker};
use super::net::{self, Acceptor};
use super::running::start_loops;
use super::shared::{ServerConfig, Shared};
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "epoll",
    id: 6,
    model: Model::EventLoop,
    summary:
        "one thread, non-blocking sockets, level-triggered epoll, a state machine per connection",
    start,
    holds: unbounded,
};

/// One epoll loop on `listener` (also each loop of `epoll_per_core`).
pub(super) fn epoll_loop(shared: &Shared, listener: std::os::fd::RawFd, w: &Waker, worker: u16) {
    let _ = run_loop(shared, &Acceptor::new(listener), w, worker);
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, true)?;
    let cpus = cfg.cpus.clone();
    start_loops(&DESIGN, cfg, vec![listener], |_| cpus.clone(), epoll_loop)
}
