//! `server`: the PThreads study's client/server model (section 5, Figs. 4 and 5) measured
//! again, beside the designs that came after it.
//!
//! Every design in `subjects::server::DESIGNS` is started in this process (on the server CPUs;
//! forked children and the Go program inherit them), and with two CPUs or more a second time
//! in the default placement (allowed on every CPU, as a program runs), then:
//!
//! 1. `study`: the study's one sequential client, short and long connections, on the same CPU
//!    and across CPUs, every design's rows interleaved round by round; Figs. 4 and 5 as series;
//! 2. `steps`: the event-driven generator (`loadgen`, pinned to the client CPU): its ceiling
//!    against the null server, then design by design (trial by trial: A B C, A B C ...)
//!    closed-loop peak, blocking work, and the open-loop point with many long connections and
//!    the memory each costs, each visit followed at once by the same design's default-placement
//!    server with the generator unpinned (peak and the open-loop point); in the first trial the
//!    `limits` step (misbehaving connections beside a well-behaved client); `--full` adds
//!    spinning work, the search for the capacity at the latency target (`capacity`), an
//!    overload step, and 10,000 connections;
//! 3. `emit`, `verdict`: metrics with their validity flags, tables, the conclusion.
//!
//! With `--target HOST:PORT` (`ServerExperiment::remote`) the same client and generator measure
//! one server elsewhere (started by `threadlab serve`), its usage read through STATS.

use std::net::SocketAddr;

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Outcome};
use crate::measure::placement::PinGuard;
use crate::seeds;
use crate::subjects::server::{self, protocol, DesignInfo, Server, ServerConfig};

mod capacity;
pub mod client;
mod emit;
mod limits;
pub mod loadgen;
mod meter;
mod records;
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
    measures: "the study's client/server model (Figs. 4-5: thread vs fork per client, short and long connections) beside thread-per-request, prefork, a pool, epoll, epoll per core, io_uring, Tokio and Go: open-loop latency without coordinated omission, CPU and memory per connection, blocking work, pinned and in the default placement, and a well-behaved client beside misbehaving ones",
    rough_secs: [5.0, 26.0, 183.0],
};

impl Experiment for ServerExperiment {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let sizes = setup::Sizes::for_mode(ctx.mode);
        let mut nofile = setup::NofileRaised::raise();
        let mut cpus = Cpus::pick(&ctx.env.allowed_cpus);
        let pattern = protocol::pattern(1 << 16);
        let mut running = Vec::new();
        let mut free = Vec::new();
        let mut not_running: Vec<(&'static DesignInfo, String)> = Vec::new();
        match self.target {
            Some(target) => {
                cpus.remote = Some(target);
                running.push(remote_server(target, ctx)?);
            }
            None => {
                let cfg = setup::server_config(&cpus, ctx.env, nofile.soft);
                running = start_all(ctx, &cfg, "", &mut not_running)?;
                if cpus.can_unpin() {
                    let cfg = setup::server_config_unpinned(&cpus, ctx.env, nofile.soft);
                    let mut failed = Vec::new();
                    free = start_all(ctx, &cfg, " (default placement)", &mut failed)?;
                    // A design that did not start pinned either is skipped once, below.
                    let started = |name: &str| running.iter().any(|r| r.info.name == name);
                    for (d, why) in failed.into_iter().filter(|(d, _)| started(d.name)) {
                        for id in emit::placement::ids(d.name) {
                            out.skip(&id, format!("not started in the default placement: {why}"));
                        }
                    }
                }
            }
        }

        study::measure(ctx, out, &running, &cpus, &sizes, &pattern)?;

        let mut records = records::Records::default();
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
            let cx = steps::StepCtx {
                cancel: ctx.cancel,
                cpus: &cpus,
                sizes: &sizes,
                pattern: &pattern,
                step: &step,
            };
            trials(ctx, &running, &free, &cx, &mut records)?;
            if let Some((n, len)) = sizes.scale {
                for r in &running {
                    ctx.step(&format!("{}: {n} connections held", r.info.name))?;
                    match steps::scale(&cx, r, (n, len), &mut nofile, &mut records) {
                        Ok(()) => {}
                        Err(Error::Cancelled(s)) => return Err(Error::Cancelled(s)),
                        Err(e) => records.skip(r.info.name, "c10k", e.to_string()),
                    }
                }
            }
            Ok(())
        })();
        let placement = cpus.placement(cpus.client);
        emit::metrics(out, &records, &running, &placement);
        emit::placement::metrics(out, &records, &free);
        emit::limits::metrics(out, &records, &placement);
        if free.is_empty() {
            let why = if cpus.remote.is_some() {
                "the server runs on another host: where its threads run is that host's choice"
            } else {
                "this process may use only one CPU: client and servers share it in either \
                 placement"
            };
            for r in &running {
                for id in emit::placement::ids(r.info.name) {
                    out.skip(&id, why);
                }
            }
        }
        if let Err(e) = stepped {
            drop((running, free, nofile));
            return Err(e);
        }
        for (d, why) in &not_running {
            let ids = emit::skipped_ids(d.name, "all")
                .into_iter()
                .chain(emit::placement::ids(d.name))
                .chain(emit::limits::ids(d.name));
            for id in ids {
                out.skip(&id, why.clone());
            }
            out.skip(&study::row_id(d.name, false, false, 1024), why.clone());
        }
        out.tables.push(verdict::study_table(out, &running, &cpus));
        out.tables
            .push(verdict::designs_table(out, &running, &records));
        if !free.is_empty() {
            out.tables
                .push(verdict::placement_table(out, &running, &cpus));
        }
        out.tables.push(emit::limits::table(&records));
        out.tables.push(emit::validity_table(&records));
        out.conclusion = Some(verdict::conclusion(out, &running, &records, &cpus, &sizes));
        // Servers stop (threads joined, children reaped) before the descriptor limit returns.
        drop((running, free, nofile));
        Ok(())
    }
}

/// Starts every design with `cfg`; the ones that cannot run here go to `not_running`.
fn start_all(
    ctx: &Ctx,
    cfg: &ServerConfig,
    how: &str,
    not_running: &mut Vec<(&'static DesignInfo, String)>,
) -> Result<Vec<Running>> {
    let mut running = Vec::new();
    for d in server::DESIGNS {
        ctx.step(&format!("starting the {} server{how}", d.name))?;
        match (d.start)(cfg, ctx.cancel) {
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
    Ok(running)
}

/// The generator's patterns, trial by trial: every design once per trial (A B C, A B C ...),
/// each visit pinned then, right after, in the default placement, so the two are measured in
/// the same minute; in the first trial, the limits step follows a design's visits. After
/// `sizes.trials`, only the designs whose headline figures are not yet known to
/// `sizes.precision_pct` are visited again, up to `sizes.max_trials`.
///
/// The process designs take all their trials first: a fork copies the lab's address space,
/// which the thread designs' cached stacks (about two mappings per thread) inflate once they
/// have run (a fork then costs 25 ms instead of 1.5, and a visit that forks 1,000 children
/// half a minute); their notes give the lab's mappings at the time.
fn trials(
    ctx: &Ctx,
    running: &[Running],
    free: &[Running],
    cx: &steps::StepCtx,
    records: &mut records::Records,
) -> Result<()> {
    let (sizes, pattern) = (cx.sizes, cx.pattern);
    let forks = |r: &&Running| r.info.model == server::Model::Processes;
    let groups: [Vec<&Running>; 2] = [
        running.iter().filter(forks).collect(),
        running.iter().filter(|r| !forks(r)).collect(),
    ];
    for group in groups {
        for trial in 0..sizes.max_trials.max(sizes.trials) {
            let due: Vec<&Running> = group
                .iter()
                .copied()
                .filter(|r| trial < sizes.trials || steps::imprecise(records, r.info.name, sizes))
                .collect();
            for r in due {
                let twin = free.iter().find(|f| f.info.name == r.info.name);
                let visits = [
                    (Some(r), records::Placed::Pinned),
                    (twin, records::Placed::Unpinned),
                ];
                for (server, placed) in visits {
                    let Some(server) = server else { continue };
                    let p = steps::visit(cx, server, trial, placed, records);
                    match p {
                        Ok(()) => {}
                        Err(Error::Cancelled(s)) => return Err(Error::Cancelled(s)),
                        Err(e) => records.skip(r.info.name, placed.pattern_key(), e.to_string()),
                    }
                }
                if trial == 0 {
                    slow_clients(ctx, r, sizes, pattern, records)?;
                }
            }
        }
    }
    Ok(())
}

/// The limits step of one design, in the first trial right after its visits: the forking
/// designs then fork a lab no larger than at their other steps.
fn slow_clients(
    ctx: &Ctx,
    r: &Running,
    sizes: &setup::Sizes,
    pattern: &[u8],
    records: &mut records::Records,
) -> Result<()> {
    ctx.step(&format!(
        "{}: misbehaving clients beside a well-behaved one",
        r.info.name
    ))?;
    match limits::measure(ctx.cancel, r, &sizes.limits, pattern) {
        Ok(rec) => records.limits.push(rec),
        Err(Error::Cancelled(s)) => return Err(Error::Cancelled(s)),
        Err(e) => records.skip(r.info.name, "limits", e.to_string()),
    }
    steps::quiesce(r, ctx.cancel)?;
    Ok(())
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
        server: server::child::remote(info, target),
        cfg: ServerConfig::loopback(),
    })
}
