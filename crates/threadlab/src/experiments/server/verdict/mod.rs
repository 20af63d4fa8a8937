//! What the run says: the study's figures beside today's, one row per design, and the
//! conclusion, every sentence taken from this run's figures.

use crate::experiments::Outcome;
use crate::results::Table;
use crate::subjects::server::Model;

use super::records::{fell_behind, Pattern, Records};
use super::setup::{Cpus, Sizes};
use super::study::{ratio_id, row_id, FORK, THREAD};
use super::Running;

mod limits;
mod placement;

pub use placement::placement_table;

/// The study's Fig. 4 figures for a 1 KB short connection, ms.
const THEN_FORK_MS: f64 = 4.7;
const THEN_THREAD_MS: f64 = 4.0;

pub(super) fn us(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 1000.0 => format!("{:.2} ms", v / 1000.0),
        Some(v) if v >= 100.0 => format!("{v:.0} us"),
        Some(v) => format!("{v:.1} us"),
        None => "-".into(),
    }
}

fn x(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}

pub fn study_table(out: &Outcome, running: &[Running], cpus: &Cpus) -> Table {
    let mut t = Table::new(
        "server.study",
        "the study's pattern: one client, one request at a time, 1 KiB",
        &[
            "design",
            "short",
            "long (per request)",
            "short, same CPU",
            "long, same CPU",
            "1999 (Fig. 4, 1 KB short)",
        ],
    );
    for r in running {
        let d = r.info.name;
        t.row(vec![
            d.to_string(),
            us(out.median(&row_id(d, false, false, 1024))),
            us(out.median(&row_id(d, false, true, 1024))),
            us(out.median(&row_id(d, true, false, 1024))),
            us(out.median(&row_id(d, true, true, 1024))),
            match d {
                THREAD => format!("{THEN_THREAD_MS} ms"),
                FORK => format!("{THEN_FORK_MS} ms"),
                _ => "-".into(),
            },
        ]);
    }
    t.row(vec![
        "fork / thread".into(),
        x(out.median(&ratio_id(false, false, 1024))),
        x(out.median(&ratio_id(false, true, 1024))),
        x(out.median(&ratio_id(true, false, 1024))),
        x(out.median(&ratio_id(true, true, 1024))),
        format!("{:.2}x (4.7 / 4.0)", THEN_FORK_MS / THEN_THREAD_MS),
    ]);
    t.note = format!(
        "short: connect, one request, close (per connection, connect included); long: 50 \
         requests per connection, per request; medians of rows sampled interleaved; the study \
         ran client and server on different machines (Sun Ultra-1, 1999); here {} and {}",
        cpus.placement(cpus.client),
        cpus.placement(cpus.same_cpu())
    );
    t
}

pub fn designs_table(out: &Outcome, running: &[Running], records: &Records) -> Table {
    let mut t = Table::new(
        "server.designs",
        "each design at the open-loop point, its peak and blocking work",
        &[
            "design",
            "p50",
            "p99",
            "p99.9",
            "CPU/req",
            "switches/req",
            "KiB/conn",
            "threads",
            "procs",
            "peak/s",
            "block p99",
            "flags",
        ],
    );
    for r in running {
        let d = r.info.name;
        let m = |s: &str| out.median(&format!("server.{d}.{s}"));
        let mut flags: Vec<String> = Vec::new();
        for rec in records.all.iter().filter(|x| x.design == d) {
            for f in super::emit::flags(rec, records.ceiling) {
                let tagged = format!("{f}({})", short(rec.pattern));
                if !flags.contains(&tagged) {
                    flags.push(tagged);
                }
            }
        }
        t.row(vec![
            d.to_string(),
            us(m("rate.p50")),
            us(m("rate.p99")),
            us(m("rate.p999")),
            us(m("cpu_per_request")),
            m("switches_per_request").map_or("-".into(), |v| format!("{v:.2}")),
            m("rss_per_connection").map_or("-".into(), |v| format!("{v:.1}")),
            m("threads").map_or("-".into(), |v| format!("{v:.0}")),
            m("processes").map_or("-".into(), |v| format!("{v:.0}")),
            m("peak").map_or("-".into(), |v| format!("{v:.0}")),
            us(m("block.p99")),
            flags.join(" "),
        ]);
    }
    let rate = records.all.iter().find(|r| r.pattern == Pattern::Rate);
    t.note = rate.map_or(String::new(), |r| {
        format!(
            "open loop at {:.0}/s over {} long connections (1 KiB, Poisson arrivals): latency \
             from the planned send, CPU per request on the server side (children included), \
             memory per connection held; peak: closed loop; block p99: every request blocks \
             the server for the time in the note of server.<design>.block.p99",
            r.offered, r.connections
        )
    });
    t
}

fn short(p: Pattern) -> &'static str {
    match p {
        Pattern::Calibration => "calibration",
        Pattern::Peak => "peak",
        Pattern::Rate => "rate",
        Pattern::Block => "block",
        Pattern::Spin => "spin",
        Pattern::Sweep(_) => "sweep",
        Pattern::Overload => "overload",
        Pattern::Scale => "c10k",
    }
}

/// The design with the smallest median of `metric` among `running` (filtered by `keep`).
pub(super) fn best<'a>(
    out: &Outcome,
    running: &'a [Running],
    metric: &str,
    keep: impl Fn(&Running) -> bool,
) -> Option<(&'a str, f64)> {
    running
        .iter()
        .filter(|r| keep(r))
        .filter_map(|r| {
            out.median(&format!("server.{}.{metric}", r.info.name))
                .map(|v| (r.info.name, v))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// The experiment's conclusion: the study's comparison, many connections, blocking work, slow
/// clients, what to choose here, and the caveats.
pub fn conclusion(
    out: &Outcome,
    running: &[Running],
    records: &Records,
    cpus: &Cpus,
    sizes: &Sizes,
) -> String {
    let mut s = String::new();
    study(&mut s, out, sizes);
    // Many connections, in the default placement when it was measured.
    many_connections(&mut s, out, running, records);
    blocking(&mut s, out, running, records, sizes);
    s.push_str(&limits::sentence(records));
    what_to_choose(&mut s, out, running, records, sizes);
    let flagged = records
        .all
        .iter()
        .any(|r| !super::emit::flags(r, records.ceiling).is_empty());
    if flagged {
        s.push_str(
            " Figures flagged in the table (client_bound, listen_overflow, saturated, errors, \
             little_law_mismatch) are shown, not hidden: read them with their flag.",
        );
    }
    if !cpus.apart {
        s.push_str(" Only one CPU is allowed: client and servers shared it.");
    }
    s
}

/// The study's comparison: fork against thread per client on short and long connections, and
/// what a CPU's wake-up adds to a request-reply.
fn study(s: &mut String, out: &Outcome, sizes: &Sizes) {
    let then = THEN_FORK_MS / THEN_THREAD_MS;
    // 1. The study's comparison.
    let (ts, fs) = (
        out.median(&row_id(THREAD, false, false, 1024)),
        out.median(&row_id(FORK, false, false, 1024)),
    );
    if let (Some(ts), Some(fs)) = (ts, fs) {
        let r = out.median(&ratio_id(false, false, 1024)).unwrap_or(fs / ts);
        s.push_str(&format!(
            "The study's short 1 KiB connection: thread_per_client {} and fork_per_client {} \
             across CPUs, fork/thread {r:.2}x today against 4.7/4.0 = {then:.2}x in 1999: {}. ",
            us(Some(ts)),
            us(Some(fs)),
            if r > 1.0 {
                "forking per client is still the slower way to start serving a connection, and \
                 relatively more so now that a loopback round trip is tens of microseconds while \
                 a fork, even of a small process, still costs hundreds"
            } else {
                "here forking was not slower, unlike in 1999"
            }
        ));
    }
    if let Some(rl) = out.median(&ratio_id(false, true, 1024)) {
        let per = sizes.long_requests as f64;
        let detail = match (ts, fs, out.median(&row_id(THREAD, false, true, 1024))) {
            (Some(ts), Some(fs), Some(r)) => format!(
                ": the fork (about {} more than a thread, from the short rows) is paid once per \
                 connection, and {per:.0} requests of {} each amortise it to {:.0}% of their \
                 time, where 50 requests of 4 ms hid 0.7 ms in 1999 (0.35%); the network got \
                 faster than process creation",
                us(Some(fs - ts)),
                us(Some(r)),
                (fs - ts) / (per * r) * 100.0
            ),
            _ => String::new(),
        };
        s.push_str(&format!(
            "On long connections ({per:.0} requests) the ratio is {rl:.2}x{}. ",
            if (rl - 1.0).abs() <= 0.15 {
                ": the two converge, as in Fig. 5: once the connection is set up, a process and \
                 a thread serve it at the same cost"
                    .to_string()
            } else {
                format!(", not within 15% of each other here{detail}")
            }
        ));
    }
    if let (Some(same), Some(cross)) = (
        out.median(&row_id(THREAD, true, true, 1024)),
        out.median(&row_id(THREAD, false, true, 1024)),
    ) {
        s.push_str(&format!(
            "A request-reply costs {} with client and server on one CPU and {} across CPUs: \
             the difference is this machine's cost of waking a CPU that went idle (see \
             cpuidle_driver in the environment: haltpoll on KVM guests), paid by every design \
             alike; it is a finding about the machine, not about threads against processes. ",
            us(Some(same)),
            us(Some(cross)),
        ));
    }
}

/// The open-loop point over many connections, and the memory each connection holds.
fn many_connections(s: &mut String, out: &Outcome, running: &[Running], records: &Records) {
    if let Some(rate) = records.all.iter().find(|r| r.pattern == Pattern::Rate) {
        s.push_str(&placement::many_connections(out, running, rate));
        if let Some((low, v)) = best(out, running, "rss_per_connection", |_| true) {
            let tpc = out.median(&format!("server.{THREAD}.rss_per_connection"));
            s.push_str(&format!(
                "Memory per connection held: {low} {v:.1} KiB{}. ",
                tpc.map_or(String::new(), |t| format!(", thread_per_client {t:.1} KiB"))
            ));
        }
    }
}

/// Which designs kept p99 near the work itself when each request blocks, and which did not.
fn blocking(s: &mut String, out: &Outcome, running: &[Running], records: &Records, sizes: &Sizes) {
    let block = records.all.iter().find(|r| r.pattern == Pattern::Block);
    if let Some(b) = block {
        let limit_us = 10.0 * sizes.block_us as f64;
        let mut coped = Vec::new();
        let mut ruined = Vec::new();
        for r in running {
            let d = r.info.name;
            let sat = records
                .of(d, Pattern::Block)
                .any(|x| fell_behind(x).is_some());
            match out.median(&format!("server.{d}.block.p99")) {
                Some(p) if !sat && p <= limit_us => coped.push(format!("{d} {}", us(Some(p)))),
                Some(p) => ruined.push(format!("{d} {}", us(Some(p)))),
                None => {}
            }
        }
        s.push_str(&format!(
            "When each request blocks for {} us ({:.0}/s over {} connections), p99 stays near \
             the work itself for {} and runs away for {}: a blocking call stalls every \
             connection of an event loop, while threads, a pool and runtimes that wait without \
             holding a thread cope. ",
            sizes.block_us,
            b.offered,
            b.connections,
            if coped.is_empty() {
                "none".into()
            } else {
                coped.join(", ")
            },
            if ruined.is_empty() {
                "none".into()
            } else {
                ruined.join(", ")
            }
        ));
    }
}

/// What to choose on this machine: for few short connections, many long ones, and blocking
/// work in the handler.
fn what_to_choose(
    s: &mut String,
    out: &Outcome,
    running: &[Running],
    records: &Records,
    sizes: &Sizes,
) {
    let few = best(out, running, "short.1kib.mean", |_| true);
    let many = placement::best_placed(out, running, "cpu_per_request", |r| {
        matches!(r.info.model, Model::EventLoop | Model::Runtime)
    });
    let limit_us = 10.0 * sizes.block_us as f64;
    let copes = |r: &Running| {
        !records
            .of(r.info.name, Pattern::Block)
            .any(|x| fell_behind(x).is_some())
            && out
                .median(&format!("server.{}.block.p99", r.info.name))
                .is_some_and(|p| p <= limit_us)
    };
    let blocking = best(out, running, "block.p99", copes);
    let blocking_cheap = best(out, running, "cpu_per_request", copes);
    s.push_str("What to choose on this machine: ");
    let mut advice = Vec::new();
    if let Some((d, v)) = few {
        advice.push(format!(
            "few short connections: {d} ({} per connection; any design that does not fork per \
             connection is close)",
            us(Some(v))
        ));
    }
    if let Some((d, v, unpinned)) = many {
        advice.push(format!(
            "many long connections without blocking work: {d} ({} CPU per request{})",
            us(Some(v)),
            if unpinned {
                placement::pinned_beside(out, d, "cpu_per_request")
            } else {
                String::new()
            }
        ));
    }
    if let Some((d, v)) = blocking {
        advice.push(format!(
            "blocking work in the handler: a design that waits without stalling the others \
             (lowest p99 here {d}, {}{})",
            us(Some(v)),
            match blocking_cheap {
                Some((c, cpu)) if c != d => format!(
                    "; of those, {c} also spent the least CPU per request at the open-loop point, \
                     {}",
                    us(Some(cpu))
                ),
                _ => String::new(),
            }
        ));
    }
    s.push_str(&advice.join("; "));
    s.push('.');
}
