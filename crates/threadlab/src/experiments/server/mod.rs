//! `server`: the PThreads study's client/server model (section 5, Figs. 4 and 5) measured
//! again, beside the designs that came after it.
//!
//! Every design in `subjects::server::DESIGNS` is started in this process (on the server CPUs;
//! forked children and the Go program inherit them), then:
//!
//! 1. `study`: the study's one sequential client, short and long connections, on the same CPU
//!    and across CPUs, every design's rows interleaved round by round; Figs. 4 and 5 as series;
//! 2. `steps`: the event-driven generator (`loadgen`, pinned to the client CPU): its ceiling
//!    against the null server, then design by design (trial by trial: A B C, A B C ...)
//!    closed-loop peak, blocking work, and the open-loop point with many long connections and
//!    the memory each costs; `--full` adds spinning work, the rate sweep to the capacity at the
//!    latency target, an overload step, and 10,000 connections;
//! 3. `emit`, `verdict`: metrics with their validity flags, tables, the conclusion.
//!
//! With `--target HOST:PORT` (`ServerExperiment::remote`) the same client and generator measure
//! one server elsewhere (started by `threadlab serve`), its usage read through STATS.

use std::net::SocketAddr;

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Outcome};
use crate::measure::placement::PinGuard;
use crate::seeds;
use crate::subjects::server::{self, protocol, Counts, DesignInfo, Server, ServerConfig};

pub mod client;
mod emit;
pub mod loadgen;
mod meter;
mod setup;
mod steps;
mod study;
mod verdict;

pub use setup::{Cpus, NofileRaised};

/// A design's server, running.
pub struct Running {
    pub info: &'static DesignInfo,
    pub server: Box<dyn Server>,
    pub cfg: ServerConfig,
}

/// The experiment: the local designs, or one server elsewhere.
pub struct ServerExperiment {
    target: Option<SocketAddr>,
}

/// The registry's instance: every design, on this machine.
pub const LOCAL: ServerExperiment = ServerExperiment { target: None };

impl ServerExperiment {
    /// Measures the server at `target` (started with `threadlab serve`) instead of local ones.
    pub fn remote(target: SocketAddr) -> ServerExperiment {
        ServerExperiment {
            target: Some(target),
        }
    }
}

const INFO: Info = Info {
    name: "server",
    study: &seeds::PTHREADS_1999,
    measures: "the study's client/server model (Figs. 4-5: thread vs fork per client, short and long connections) beside thread-per-request, prefork, a pool, epoll, epoll per core, io_uring, Tokio and Go: open-loop latency without coordinated omission, CPU and memory per connection, blocking work",
    rough_secs: [3.0, 20.0, 240.0],
};

impl Experiment for ServerExperiment {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let sizes = setup::Sizes::for_mode(ctx.mode);
        let mut nofile = setup::NofileRaised::raise();
        let mut cpus = Cpus::pick();
        let pattern = protocol::pattern(1 << 16);
        let mut running = Vec::new();
        let mut not_running: Vec<(&'static DesignInfo, String)> = Vec::new();
        match self.target {
            Some(target) => {
                cpus.remote = Some(target);
                running.push(remote_server(target, ctx)?);
            }
            None => {
                let cfg = setup::server_config(&cpus, ctx.env, nofile.soft);
                for d in server::DESIGNS {
                    ctx.step(&format!("starting the {} server", d.name))?;
                    match (d.start)(&cfg, ctx.cancel) {
                        Ok(s) => {
                            client::wait_listening(s.local_addr(), ctx.cancel)?;
                            running.push(Running {
                                info: d,
                                server: s,
                                cfg: cfg.clone(),
                            });
                        }
                        Err(Error::Skip(why)) => not_running.push((d, why)),
                        Err(Error::Cancelled(s)) => return Err(Error::Cancelled(s)),
                        Err(e) => not_running.push((d, format!("could not start: {e}"))),
                    }
                }
            }
        }

        study::measure(ctx, out, &running, &cpus, &sizes, &pattern)?;

        let mut records = steps::Records::default();
        // An interruption ends the steps, but what they finished is still turned into metrics.
        let stepped = (|| -> Result<()> {
            let _pin = PinGuard::pin(cpus.client)?;
            let null = running
                .iter()
                .find(|r| r.info.name == "epoll")
                .or(running.first());
            if let Some(null) = null {
                ctx.step("the generator's ceiling against the null server")?;
                steps::calibrate(ctx.cancel, null, &cpus, &sizes, &pattern, &mut records)?;
            }
            let step = |what: &str| ctx.step(what);
            // Process designs first: a fork copies the lab's address space, which the thread
            // designs' cached stacks (about two mappings per thread) would otherwise inflate by
            // the time their turn came; their note gives the lab's mappings at the time.
            let mut order: Vec<&Running> = running.iter().collect();
            order.sort_by_key(|r| r.info.model != server::Model::Processes);
            for trial in 0..sizes.trials {
                for r in order.iter().copied() {
                    match steps::visit(
                        ctx.cancel,
                        r,
                        &cpus,
                        &sizes,
                        &pattern,
                        trial,
                        &mut records,
                        &step,
                    ) {
                        Ok(()) => {}
                        Err(Error::Cancelled(s)) => return Err(Error::Cancelled(s)),
                        Err(e) => records.skipped.push((r.info.name, "all", e.to_string())),
                    }
                }
            }
            if let Some((n, len)) = sizes.scale {
                for r in &running {
                    ctx.step(&format!("{}: {n} connections held", r.info.name))?;
                    match steps::scale(
                        ctx.cancel,
                        r,
                        &cpus,
                        n,
                        len,
                        &pattern,
                        &mut nofile,
                        &mut records,
                    ) {
                        Ok(()) => {}
                        Err(Error::Cancelled(s)) => return Err(Error::Cancelled(s)),
                        Err(e) => records.skipped.push((r.info.name, "c10k", e.to_string())),
                    }
                }
            }
            Ok(())
        })();
        let placement = cpus.placement(cpus.client);
        emit::metrics(out, &records, &running, &placement);
        if let Err(e) = stepped {
            drop(running);
            drop(nofile);
            return Err(e);
        }
        for (d, why) in &not_running {
            for id in emit::skipped_ids(d.name, "all") {
                out.skip(&id, why.clone());
            }
            out.skip(&study::row_id(d.name, false, false, 1024), why.clone());
        }
        let study_table = verdict::study_table(out, &running, &cpus);
        out.tables.push(study_table);
        let designs_table = verdict::designs_table(out, &running, &records);
        out.tables.push(designs_table);
        out.tables.push(emit::validity_table(&records));
        out.conclusion = Some(verdict::conclusion(out, &running, &records, &cpus, &sizes));
        // Servers stop (threads joined, children reaped) before the descriptor limit returns.
        drop(running);
        drop(nofile);
        Ok(())
    }
}

/// A server on another host, known by the design id in its first reply.
struct Remote {
    info: &'static DesignInfo,
    addr: SocketAddr,
}

impl Server for Remote {
    fn info(&self) -> &'static DesignInfo {
        self.info
    }
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    fn counts(&self) -> Counts {
        Counts::default()
    }
    fn is_remote(&self) -> bool {
        true
    }
}

fn remote_server(target: SocketAddr, ctx: &Ctx) -> Result<Running> {
    ctx.step(&format!("asking {target} which design it runs"))?;
    let pattern = protocol::pattern(64);
    let mut sources = client::Sources::for_target(target);
    let mut s = client::connect(target, &mut sources)
        .map_err(|f| Error::Skip(format!("cannot reach the server at {target}: {f}")))?;
    let h = client::Exchange::new(&pattern, 16)
        .roundtrip(&mut s, 1, 1, false, (0, 0))
        .map_err(|f| Error::Skip(format!("{target} does not speak the lab's protocol: {f}")))?;
    let info = server::by_id(h.design).ok_or_else(|| {
        Error::Skip(format!(
            "{target} answers as design {}, which this threadlab does not know",
            h.design
        ))
    })?;
    Ok(Running {
        info,
        server: Box::new(Remote { info, addr: target }),
        cfg: ServerConfig::loopback(),
    })
}
