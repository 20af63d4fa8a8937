//! The patterns driven by the load generator: the generator's own ceiling, closed-loop peak,
//! the open-loop point with many long connections (with the memory each connection costs),
//! blocking work, and in `--full` spinning work, the rate sweep to the capacity at the latency
//! target, one overload step and 10,000 connections. Each design is visited in turn, trial by
//! trial (A B C, A B C ...); its records become metrics afterwards.

use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::Result;

use super::loadgen::{listen_counters, Arrivals, Generator, LoadMode, Plan, StepResult, Window};
use super::meter::{Footprint, Meter};
use super::records::{fell_behind, Pattern, Placed, Record, Records};
use super::setup::{trim_heap, Cpus, NofileRaised, Sizes};
use super::Running;
use crate::measure::placement::PinGuard;
use crate::subjects::server::Server;

/// The closed-loop peak's plan: 1 KiB requests, no work.
fn peak_plan(sizes: &Sizes, spin: Duration) -> Plan {
    Plan {
        payload: 1024,
        work: (0, 0),
        mode: LoadMode::Closed,
        warmup: sizes.peak_warm,
        measure: sizes.peak_measure,
        windows: sizes.windows,
        spin,
        give_up_above_ns: None,
    }
}

/// An open-loop plan of 1 KiB requests with no work: Poisson arrivals at `rate` from `seed`.
fn open_plan(
    (rate, seed): (f64, u64),
    (warmup, measure): (Duration, Duration),
    windows: usize,
    spin: Duration,
) -> Plan {
    Plan {
        payload: 1024,
        work: (0, 0),
        mode: LoadMode::Open {
            rate,
            arrivals: Arrivals::Poisson { seed },
        },
        warmup,
        measure,
        windows,
        spin,
        give_up_above_ns: None,
    }
}

/// Long connections made and served once, with the memory they cost.
struct Held<'s, 'p> {
    gen: Generator<'p>,
    meter: Meter<'s>,
    /// Memory before the connections (freed heap trimmed first) and after.
    footprint: (Footprint, Footprint),
    /// Connections that could not be made.
    failed: u64,
}

/// Makes `n` connections to `server` (design `id`), reading the memory before and after.
fn hold<'s, 'p>(
    server: &'s dyn Server,
    id: u8,
    pattern: &'p [u8],
    n: usize,
    cancel: &Cancel,
    name: &str,
) -> Result<Held<'s, 'p>> {
    let mut gen = Generator::new(server.local_addr(), Some(id), pattern, n)?;
    let mut meter = Meter::for_server(server);
    trim_heap();
    let before = meter.footprint();
    let failed = (n - gen.connect(n, cancel)?) as u64;
    super::loadgen::require_live(&gen, name)?;
    let after = meter.footprint();
    Ok(Held {
        gen,
        meter,
        footprint: (before, after),
        failed,
    })
}

/// ListenOverflows + ListenDrops since `before` (system-wide), when both reads succeeded.
fn overflows_since(before: Option<(u64, u64)>) -> Option<u64> {
    match (before, listen_counters()) {
        (Some(a), Some(b)) => Some((b.0 + b.1).saturating_sub(a.0 + a.1)),
        _ => None,
    }
}

fn spin_for(cpus: &Cpus) -> Duration {
    if cpus.apart {
        Duration::from_micros(50)
    } else {
        Duration::ZERO
    }
}

/// The generator's ceiling: closed loop against the null server (the `epoll` design: a single
/// loop doing nothing but the echo), replies per second of the generator's own CPU.
pub fn calibrate(
    cancel: &Cancel,
    null: &Running,
    cpus: &Cpus,
    sizes: &Sizes,
    pattern: &[u8],
    records: &mut Records,
) -> Result<()> {
    let mut gen = Generator::new(
        null.server.local_addr(),
        Some(null.info.id),
        pattern,
        sizes.peak_conns,
    )?;
    let failures = sizes.peak_conns - gen.connect(sizes.peak_conns, cancel)?;
    super::loadgen::require_live(&gen, "calibrating the generator")?;
    let plan = peak_plan(sizes, spin_for(cpus));
    let mut meter = Meter::for_server(null.server.as_ref());
    let result = gen.run(&plan, cancel, &mut || meter.usage())?;
    let per_cpu_s = result.completed as f64 / (result.generator_cpu_ns.max(1) as f64 / 1e9);
    records.ceiling = Some(per_cpu_s);
    records.all.push(Record {
        design: null.info.name,
        pattern: Pattern::Calibration,
        trial: 0,
        offered: 0.0,
        connections: sizes.peak_conns,
        result,
        listen_overflows: None,
        footprint: None,
        connect_failures: failures as u64,
        usage_unavailable: None,
        state: None,
        placed: Placed::Pinned,
    });
    Ok(())
}

/// Whether a design's closed-loop peak or CPU per request at the open-loop point (in either
/// placement) is not yet known to `sizes.precision_pct`: the half-width of the
/// distribution-free 95% interval of the median of their windows, over the trials so far.
/// Steps that fell behind their plan are left out: more of them would not make them precise.
/// The open-loop p99 is not asked: on a VM whose host takes a CPU for a few milliseconds
/// now and then, a share of its windows hold such a stall whatever the number of trials.
pub fn imprecise(records: &Records, design: &str, sizes: &Sizes) -> bool {
    use crate::measure::stats::median_ci_pct;
    let windows = |pattern: Pattern, placed: Placed, f: &dyn Fn(&Window) -> Option<f64>| {
        records
            .of_placed(design, pattern, placed)
            .filter(|r| fell_behind(r).is_none())
            .flat_map(|r| r.result.windows.iter())
            .filter_map(f)
            .collect::<Vec<f64>>()
    };
    let cpu = |w: &Window| (w.completed > 0).then(|| w.usage.cpu_ns as f64 / w.completed as f64);
    let peak = |w: &Window| Some(w.completed as f64);
    [Placed::Pinned, Placed::Unpinned]
        .into_iter()
        .any(|placed| {
            [
                windows(Pattern::Rate, placed, &cpu),
                windows(Pattern::Peak, placed, &peak),
            ]
            .iter()
            .any(|v| median_ci_pct(v).is_some_and(|ci| ci > sizes.precision_pct))
        })
}

/// What every step of the generator shares: how to stop, where client and servers run, the
/// sizes of the suite, the payload pattern, and where progress goes.
pub struct StepCtx<'a> {
    pub cancel: &'a Cancel,
    pub cpus: &'a Cpus,
    pub sizes: &'a Sizes,
    pub pattern: &'a [u8],
    pub step: &'a dyn Fn(&str) -> Result<()>,
}

/// One design's visit in one placement in one trial, as its steps see it.
struct Visit<'a> {
    r: &'a Running,
    trial: usize,
    placed: Placed,
    /// The generator's spin before each planned send (none when it shares the CPUs).
    spin: Duration,
    /// Added to the progress line: the placement, when not pinned.
    how: &'static str,
}

impl Visit<'_> {
    fn pinned(&self) -> bool {
        self.placed == Placed::Pinned
    }

    /// Whether the design holds `n` connections at once; when it does not, the pattern (its
    /// pinned or default-placement key) is noted as not run, `why` told what the design holds.
    fn holds(
        &self,
        n: usize,
        (pinned, unpinned): (&'static str, &'static str),
        records: &mut Records,
        why: impl FnOnce(usize) -> String,
    ) -> bool {
        let Some(h) = (self.r.info.holds)(&self.r.cfg).filter(|h| *h < n) else {
            return true;
        };
        let pattern = if self.pinned() { pinned } else { unpinned };
        records.skip(self.r.info.name, pattern, why(h));
        false
    }

    fn record(
        &self,
        pattern: Pattern,
        offered: f64,
        conns: usize,
        result: StepResult,
        failed: u64,
    ) -> Record {
        let mut rec = record(
            self.r.info.name,
            pattern,
            self.trial,
            offered,
            conns,
            result,
            failed,
        );
        rec.placed = self.placed;
        rec
    }
}

/// One design's visit in one trial: peak and blocking work on a few connections, then the
/// open-loop point on many (and in full mode spinning work, and in the first trial the search
/// for the capacity and the overload step). In the default placement only the headline
/// patterns run: peak and the open-loop point.
pub fn visit(
    cx: &StepCtx,
    r: &Running,
    trial: usize,
    placed: Placed,
    records: &mut Records,
) -> Result<()> {
    let pinned = placed == Placed::Pinned;
    // Unpinned, the generator shares the CPUs with the server: spinning would take the
    // server's time.
    let (spin, _free, how) = if pinned {
        (spin_for(cx.cpus), None, "")
    } else {
        (
            Duration::ZERO,
            Some(PinGuard::pin_set(&cx.cpus.all)?),
            ", default placement",
        )
    };
    let v = Visit {
        r,
        trial,
        placed,
        spin,
        how,
    };
    let overflow_before = listen_counters();
    let state = (r.info.model == crate::subjects::server::Model::Processes).then(|| {
        format!(
            "each child is a fork of the lab, then {} mappings and {:.0} MiB resident",
            std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count()),
            crate::subjects::server::usage::rss_bytes(None) as f64 / 1048576.0
        )
    });
    let mut made: Vec<Record> = Vec::new();
    let (few, many) = (
        cx.sizes.peak_conns.max(cx.sizes.block_conns),
        cx.sizes.rate_conns,
    );
    let few_held = v.holds(few, ("peak", "peak.unpinned"), records, |h| {
        format!("holds {h} connections at once, the pattern keeps {few}")
    });
    if few_held {
        few_connections(cx, &v, few, &mut made)?;
    }
    let name = r.info.name;
    let many_held = v.holds(many, ("rate", "rate.unpinned"), records, |h| {
        format!(
            "a {name} server holds at most {h} connections at once (one per process); this \
             pattern keeps {many} open"
        )
    });
    if many_held {
        many_connections(cx, &v, records, &mut made)?;
    }
    let overflow = overflows_since(overflow_before);
    quiesce(r, cx.cancel)?;
    let unavailable = Meter::for_server(r.server.as_ref())
        .unavailable()
        .map(str::to_string);
    for mut m in made {
        m.listen_overflows = overflow;
        m.usage_unavailable = unavailable.clone();
        m.state = state.clone();
        records.all.push(m);
    }
    Ok(())
}

/// A few connections: peak (closed loop), and pinned, blocking work and (full) spinning work.
fn few_connections(cx: &StepCtx, v: &Visit, few: usize, made: &mut Vec<Record>) -> Result<()> {
    let (r, sizes, cancel) = (v.r, cx.sizes, cx.cancel);
    let name = r.info.name;
    (cx.step)(&format!(
        "{name}: closed-loop peak, {} connections{}",
        sizes.peak_conns, v.how
    ))?;
    let mut gen = Generator::new(r.server.local_addr(), Some(r.info.id), cx.pattern, few)?;
    let failed = (few - gen.connect(few, cancel)?) as u64;
    super::loadgen::require_live(&gen, name)?;
    let mut meter = Meter::for_server(r.server.as_ref());
    let peak = peak_plan(sizes, v.spin);
    let result = gen.run(&peak, cancel, &mut || meter.usage())?;
    made.push(v.record(Pattern::Peak, 0.0, few, result, failed));
    if !v.pinned() {
        return Ok(());
    }
    (cx.step)(&format!(
        "{name}: {} us of blocking work per request at {:.0}/s",
        sizes.block_us, sizes.block_rate
    ))?;
    let block = Plan {
        work: (0, sizes.block_us),
        mode: LoadMode::Open {
            rate: sizes.block_rate,
            arrivals: Arrivals::Constant,
        },
        warmup: sizes.block_warm,
        measure: sizes.block_measure,
        ..peak.clone()
    };
    let result = gen.run(&block, cancel, &mut || meter.usage())?;
    made.push(v.record(Pattern::Block, sizes.block_rate, few, result, 0));
    if let Some((spin_us, rate)) = sizes.spin {
        (cx.step)(&format!(
            "{name}: {spin_us} us of spinning work per request"
        ))?;
        let spinning = Plan {
            work: (spin_us, 0),
            mode: LoadMode::Open {
                rate,
                arrivals: Arrivals::Constant,
            },
            ..block.clone()
        };
        let result = gen.run(&spinning, cancel, &mut || meter.usage())?;
        made.push(v.record(Pattern::Spin, rate, few, result, 0));
    }
    Ok(())
}

/// Many long connections at a fixed offered rate, with the memory per connection; in the
/// first trial, pinned, the capacity search and the overload step on the same connections.
fn many_connections(
    cx: &StepCtx,
    v: &Visit,
    records: &Records,
    made: &mut Vec<Record>,
) -> Result<()> {
    let (r, sizes, cancel) = (v.r, cx.sizes, cx.cancel);
    let name = r.info.name;
    let many = sizes.rate_conns;
    (cx.step)(&format!(
        "{name}: {many} long connections, open loop at {:.0}/s{}",
        sizes.rate, v.how
    ))?;
    let Held {
        mut gen,
        mut meter,
        footprint,
        failed,
    } = hold(r.server.as_ref(), r.info.id, cx.pattern, many, cancel, name)?;
    let plan = open_plan(
        (sizes.rate, 0x7e57 + v.trial as u64),
        (sizes.rate_warm, sizes.rate_measure),
        sizes.windows,
        v.spin,
    );
    let result = gen.run(&plan, cancel, &mut || meter.usage())?;
    let mut rec = v.record(Pattern::Rate, sizes.rate, many, result, failed);
    rec.footprint = Some(footprint);
    let (true, 0, Some(search), Some(ceiling)) =
        (v.pinned(), v.trial, &sizes.capacity, records.ceiling)
    else {
        made.push(rec);
        return Ok(());
    };
    let mut probe = super::capacity::Prober {
        gen: &mut gen,
        meter: &mut meter,
        plan: &plan,
        cancel,
        step: cx.step,
        name,
        made: Vec::new(),
    };
    let cap = super::capacity::search(&mut probe, &rec, ceiling, search)?;
    if let (Some(cap), Some((factor, len))) = (cap, sizes.overload) {
        probe.at(
            cap * factor,
            0x0e7,
            search.warm,
            len,
            Pattern::Overload,
            None,
        )?;
    }
    let probes = std::mem::take(&mut probe.made);
    made.push(rec);
    made.extend(
        probes
            .into_iter()
            .map(|(pattern, offered, result)| v.record(pattern, offered, many, result, 0)),
    );
    Ok(())
}

/// Connection scale (full): `n` long connections at 1 request per second each, held while the
/// step runs; memory, threads and processes per connection.
pub fn scale(
    cx: &StepCtx,
    r: &Running,
    (n, len): (usize, Duration),
    nofile: &mut NofileRaised,
    records: &mut Records,
) -> Result<()> {
    let (cancel, cpus, pattern) = (cx.cancel, cx.cpus, cx.pattern);
    let name = r.info.name;
    if let Some(h) = (r.info.holds)(&r.cfg) {
        if h < n {
            records.skipped.push((
                name,
                "c10k",
                format!("holds at most {h} connections at once"),
            ));
            return Ok(());
        }
    }
    if r.info.model == crate::subjects::server::Model::Processes {
        records.skipped.push((
            name,
            "c10k",
            format!(
                "{n} forked copies of the lab are not attempted (memory and pid limits); its \
                 memory per connection is measured at the open-loop point"
            ),
        ));
        return Ok(());
    }
    // Both ends of every connection live in this process for in-process designs; when that
    // does not fit under the descriptor limit, the design is served by a `threadlab serve`
    // child process (the lab then holds only the client ends).
    let in_process = r.server.program_pid().is_none() && !r.server.is_remote();
    let both = (2 * n + 512) as u64;
    let one = (n + 512) as u64;
    let mut child = None;
    let mut state = None;
    let fits = if in_process {
        nofile.make_room(both)
    } else {
        nofile.make_room(one)
    };
    if !fits {
        if in_process && nofile.make_room(one) {
            child = Some(crate::subjects::server::child::spawn(
                r.info, &r.cfg, cancel,
            )?);
            state = Some(format!(
                "served by a `threadlab serve` child process: both ends of {n} connections \
                 ({both} descriptors) do not fit under RLIMIT_NOFILE {} in one process",
                nofile.soft
            ));
        } else {
            records.skipped.push((
                name,
                "c10k",
                format!(
                    "needs {one} file descriptors per process; RLIMIT_NOFILE is {} (hard {}) \
                     and cannot be raised without privilege",
                    nofile.soft, nofile.hard
                ),
            ));
            return Ok(());
        }
    }
    let server: &dyn crate::subjects::server::Server = match &child {
        Some(c) => c.as_ref(),
        None => r.server.as_ref(),
    };
    if child.is_none() && r.cfg.max_connections < n {
        records.skipped.push((
            name,
            "c10k",
            format!(
                "the server's connection cap ({}) was set from the descriptor limit at start",
                r.cfg.max_connections
            ),
        ));
        return Ok(());
    }
    super::client::wait_listening(server.local_addr(), cancel)?;
    let overflow_before = listen_counters();
    let Held {
        mut gen,
        mut meter,
        footprint,
        failed,
    } = hold(server, r.info.id, pattern, n, cancel, name)?;
    let plan = open_plan((n as f64, 0xc10c), (len / 4, len), 7, spin_for(cpus));
    let result = gen.run(&plan, cancel, &mut || meter.usage())?;
    let mut rec = record(name, Pattern::Scale, 0, n as f64, n, result, failed);
    rec.footprint = Some(footprint);
    rec.state = state;
    rec.listen_overflows = overflows_since(overflow_before);
    records.all.push(rec);
    Ok(())
}

/// Waits (up to 10 s) until the server has let go of the visit's connections: closed, and
/// their forked children exited and reaped, so that the next design is not measured while
/// this one tears down a thousand processes.
pub fn quiesce(r: &Running, cancel: &Cancel) -> Result<()> {
    let resting = (r.info.holds)(&r.cfg).unwrap_or(0) as u64;
    // A program's counts come from a STATS request, whose own connection is open while it
    // is answered.
    let asking = r.server.program_pid().is_some() as u64;
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < end {
        cancel.check()?;
        let open = r.server.counts().connections_open;
        let live = r.server.children().map_or(0, |c| c.live);
        if open <= asking && live <= resting {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn record(
    design: &'static str,
    pattern: Pattern,
    trial: usize,
    offered: f64,
    connections: usize,
    result: StepResult,
    connect_failures: u64,
) -> Record {
    Record {
        design,
        pattern,
        trial,
        offered,
        connections,
        result,
        listen_overflows: None,
        footprint: None,
        connect_failures,
        usage_unavailable: None,
        state: None,
        placed: Placed::Pinned,
    }
}
