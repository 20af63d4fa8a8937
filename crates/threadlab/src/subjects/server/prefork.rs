//! `prefork` (Apache's prefork model): N processes forked at start, each blocking in accept()
//! on the shared listener and serving one connection at a time with the blocking `server()`
//! loop. It holds at most N connections at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use socket2::Socket;

use crate::cancel::Cancel;
use crate::error::{Error, Result};

use super::children::Children;
use super::fork_per_client::{serve_conn_in_child, start_snapshots, Inner};
use super::framing::MappedBuf;
use super::net::{self, Accepted, Acceptor};
use super::protocol::RESPONSE_HEADER;
use super::shared::{apply_cpu_set, cpu_set, Counter, ServerConfig, Shared};
use super::usage::ChildUsage;
use super::{Counts, DesignInfo, Model, Server};

pub const DESIGN: DesignInfo = DesignInfo {
    name: "prefork",
    id: 4,
    model: Model::Processes,
    summary: "N processes forked at start block in accept() on one listener, each serving one connection at a time (Apache prefork)",
    start,
    holds: |cfg| Some(cfg.prefork_processes),
};

struct Prefork {
    inner: Arc<Inner>,
    _listener: Socket,
    addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
}

fn start(cfg: &ServerConfig, _cancel: &Cancel) -> Result<Box<dyn Server>> {
    let listener = net::listen(cfg.listen, cfg.backlog, false, false)?;
    let addr = net::local_addr(&listener)?;
    let n = cfg.prefork_processes.max(1);
    let inner = Arc::new(Inner {
        shared: Shared::new(cfg, DESIGN.id)?,
        acceptor: Acceptor::new(net::raw(&listener)),
        children: Children::new(n)?,
    });
    let lfd = net::raw(&listener);
    let mask = cpu_set(&cfg.cpus);
    for i in 0..n {
        let shared = &inner.shared;
        // SAFETY: the child runs `process_loop`: raw system calls (accept4, recv, send,
        // sched_setaffinity, nanosleep), atomics in shared memory and a mapped buffer.
        let forked = unsafe {
            inner.children.fork(&[lfd], |slot| {
                apply_cpu_set(&mask);
                let Some(mut buf) =
                    MappedBuf::new(RESPONSE_HEADER + shared.cfg.max_payload as usize)
                else {
                    return;
                };
                let acceptor = Acceptor::new(lfd);
                loop {
                    match acceptor.accept(shared) {
                        Accepted::Conn(fd) => {
                            shared.add(Counter::ConnectionsOpen, 1);
                            let _ = i;
                            serve_conn_in_child(fd, shared, slot, Some(&mut buf));
                            shared.sub(Counter::ConnectionsOpen, 1);
                            net::close(fd);
                        }
                        Accepted::Exhausted => net::backoff(shared, net::FD_BACKOFF),
                        Accepted::Closed => return,
                        Accepted::WouldBlock | Accepted::Retry => {}
                    }
                }
            })
        };
        match forked {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                inner.children.shutdown();
                return Err(Error::Skip(format!(
                    "cannot fork the prefork processes: {e}"
                )));
            }
        }
    }
    let mut threads = Vec::new();
    if cfg.stats_snapshots {
        threads.push(start_snapshots(inner.clone())?);
    }
    Ok(Box::new(Prefork {
        inner,
        _listener: listener,
        addr,
        threads,
    }))
}

impl Server for Prefork {
    fn info(&self) -> &'static DesignInfo {
        &DESIGN
    }
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    fn counts(&self) -> Counts {
        self.inner.shared.counts()
    }
    fn children(&self) -> Option<ChildUsage> {
        Some(self.inner.children.usage())
    }
}

impl Drop for Prefork {
    fn drop(&mut self) {
        self.inner.shared.request_stop();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        self.inner.children.shutdown();
    }
}
