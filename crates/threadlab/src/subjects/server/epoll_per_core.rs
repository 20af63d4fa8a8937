//! `epoll_per_core`: one `epoll` loop per server CPU, each pinned to its CPU with a listener of
//! its own on the same port (SO_REUSEPORT: the kernel spreads connections over them), so no
//! loop shares a connection or a lock with another (thread-per-core without io_uring).

use crate::cancel::Cancel;
use crate::error::Result;

use super::epoll::epoll_loop;
use super::net;
use super::running::{per_core, start_loops};
use super::shared::ServerConfig;
use super::{unbounded, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "epoll_per_core",
    id: 7,
    model: Model::EventLoop,
    summary: "one epoll loop per server CPU, each pinned, each with its own SO_REUSEPORT listener on the same port",
    start,
    holds: unbounded,
};

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let cpus = per_core(cfg);
    let listeners = net::listen_group(cfg.listen, cfg.backlog, cpus.len(), true)?;
    start_loops(
        &DESIGN,
        cfg,
        listeners,
        |i| cpus[i].into_iter().collect(),
        epoll_loop,
    )
}
