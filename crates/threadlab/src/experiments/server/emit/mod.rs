//! The generator's records turned into metrics (one sample per window, trials pooled), the
//! validity flags on each, the tables, and the serialized histograms kept in the results.

use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use crate::experiments::Outcome;
use crate::measure::stats::jain_index;
use crate::measure::units::Unit;
use crate::results::flag::{self, with_flags, Flag};
use crate::results::ids::server::{self as sid, stat};
use crate::results::{Metric, SerializedHistogram, Table, HDR_ENCODING};

use super::loadgen::{histogram, Window};
use super::records::{fell_behind, meets_target, Pattern, Placed, Record, Records};
use super::Running;
use capacity::{scale, spin, sweep};
use open_loop::{footprint, rate};
use ratios::ratios;

/// A step whose generator was busier than this share of the time may have held the load back.
pub const BUSY_LIMIT: f64 = 0.85;
/// Closed-loop throughput above this share of the generator's ceiling is flagged: the bar asks
/// for a ceiling at least twice the fastest design.
pub const CEILING_SHARE: f64 = 0.5;
/// Little's law must hold within this relative error.
pub const LITTLE_TOLERANCE: f64 = 0.10;

/// Why a record's figures should not be taken at face value.
pub fn flags(rec: &Record, ceiling: Option<f64>) -> Vec<String> {
    let r = &rec.result;
    let mut f = Vec::new();
    let lag_p99 = r.send_lag.value_at_quantile(0.99) as f64;
    let lat_p50 = r.latency.value_at_quantile(0.5) as f64;
    let open = !matches!(rec.pattern, Pattern::Peak | Pattern::Calibration);
    let over_ceiling = rec.pattern == Pattern::Peak
        && ceiling.is_some_and(|c| r.achieved_per_s() >= CEILING_SHARE * c);
    if rec.generator_busy() > BUSY_LIMIT
        || over_ceiling
        || (open && !r.send_lag.is_empty() && lag_p99 > (50_000f64).max(0.5 * lat_p50))
    {
        f.push(Flag::ClientBound);
    }
    if rec.listen_overflows.is_some_and(|n| n > 0) {
        f.push(Flag::ListenOverflow);
    }
    if r.little_mismatch().is_some_and(|m| m > LITTLE_TOLERANCE) {
        f.push(Flag::LittleLawMismatch);
    }
    if fell_behind(rec).is_some() {
        f.push(Flag::Saturated);
    }
    if rec.errors() > 0 {
        f.push(Flag::Errors);
    }
    flag::names(&f)
}

fn union_flags<'a>(recs: impl Iterator<Item = &'a Record>, ceiling: Option<f64>) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for r in recs {
        for f in flags(r, ceiling) {
            if !all.contains(&f) {
                all.push(f);
            }
        }
    }
    all
}

/// Values and the trial each came from (`Metric::trial_of`): a step's windows or attempts
/// share its server, connections and placement, so only trials replicate one another.
#[derive(Debug, Default, Clone, PartialEq)]
struct PerTrial {
    values: Vec<f64>,
    trial_of: Vec<u32>,
}

impl PerTrial {
    fn push(&mut self, trial: usize, v: f64) {
        if v.is_finite() {
            self.values.push(v);
            self.trial_of.push(trial as u32);
        }
    }
}

/// One value per window over every trial's record of a pattern.
fn per_window(recs: &[&Record], f: impl Fn(&Window) -> Option<f64>) -> PerTrial {
    let mut out = PerTrial::default();
    for r in recs {
        for v in r.result.windows.iter().filter_map(&f) {
            out.push(r.trial, v);
        }
    }
    out
}

/// One window's replies per second (by arrival time).
fn replies_per_s(w: &Window) -> Option<f64> {
    Some(w.completed as f64 / (w.length_ns as f64 / 1e9))
}

/// One window's p99 from the planned send, us.
fn p99_us(w: &Window) -> Option<f64> {
    us_of(w.latency_p99_ns)
}

fn us_of(ns: Option<u64>) -> Option<f64> {
    ns.map(|v| v as f64 / 1e3)
}

fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
}

fn merged(recs: &[&Record], pick: impl Fn(&Record) -> &Histogram<u64>) -> Histogram<u64> {
    let mut h = histogram();
    for r in recs {
        let _ = h.add(pick(r));
    }
    h
}

/// HdrHistogram V2 + DEFLATE, base64.
pub fn serialize(name: &str, h: &Histogram<u64>) -> Option<SerializedHistogram> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).ok()?;
    Some(SerializedHistogram {
        name: name.to_string(),
        unit: Unit::Ns,
        count: h.len(),
        encoding: HDR_ENCODING.into(),
        data: base64::engine::general_purpose::STANDARD.encode(buf),
    })
}

struct Emit<'a> {
    out: &'a mut Outcome,
    placement: String,
    ceiling: Option<f64>,
}

impl Emit<'_> {
    fn windows(&mut self, id: &str, unit: Unit, v: &PerTrial, note: String, flags: &[String]) {
        if let Some(m) = Metric::from_values(id, unit, &v.values, 1, &self.placement, note) {
            let m = m.with_trial_of(v.trial_of.clone());
            self.out.add(with_flags(m, flags));
        }
    }

    /// One p99 from the planned send per window of `recs`, us.
    fn p99_windows(&mut self, id: &str, recs: &[&Record], note: String, flags: &[String]) {
        self.windows(id, Unit::Us, &per_window(recs, p99_us), note, flags);
    }

    fn single(&mut self, id: &str, unit: Unit, v: f64, note: String, flags: &[String]) {
        if v.is_finite() {
            let m = Metric::single(id, unit, v, &self.placement, note);
            self.out.add(with_flags(m, flags));
        }
    }
}

/// Every metric of the generator-driven patterns.
pub fn metrics(out: &mut Outcome, records: &Records, running: &[Running], placement: &str) {
    let mut e = Emit {
        out,
        placement: placement.to_string(),
        ceiling: records.ceiling,
    };
    if let Some(cal) = records
        .all
        .iter()
        .find(|r| r.pattern == Pattern::Calibration)
    {
        let r = &cal.result;
        let per_req_us = r.generator_cpu_ns as f64 / r.completed.max(1) as f64 / 1e3;
        let f = union_flags(std::iter::once(cal), None);
        e.single(
            &sid::id(sid::GENERATOR, stat::GENERATOR_CEILING),
            Unit::PerS,
            records.ceiling.unwrap_or(f64::NAN),
            format!(
                "replies the generator verifies per second of its own CPU: closed loop, {} \
                 connections, 1 KiB, against the null server ({}: a single loop that only \
                 echoes), {} replies over {:.0} ms; a design whose closed-loop peak reaches half \
                 of this is flagged client_bound",
                cal.connections,
                cal.design,
                r.completed,
                r.measured_ns as f64 / 1e6
            ),
            &f,
        );
        e.single(
            &sid::id(sid::GENERATOR, stat::CPU_PER_REQUEST),
            Unit::Us,
            per_req_us,
            "the generator thread's CPU per verified reply in the same calibration (writev, \
             recv, epoll, verification)"
                .into(),
            &f,
        );
    }
    for run in running {
        let d = run.info.name;
        peak(&mut e, records, d);
        block(&mut e, records, d);
        rate(&mut e, records, d);
        spin(&mut e, records, d);
        sweep(&mut e, records, d);
        scale(&mut e, records, d);
    }
    ratios(&mut e, records, running);
    for (d, pattern, why) in &records.skipped {
        for id in skipped_ids(d, pattern) {
            e.out.skip(&id, why.clone());
        }
    }
}

/// The ids a pattern would have given a design.
pub fn skipped_ids(d: &str, pattern: &str) -> Vec<String> {
    match pattern {
        "unpinned" => return placement::ids(d),
        "peak.unpinned" | "rate.unpinned" => {
            let peak = pattern == "peak.unpinned";
            return placement::ids(d)
                .into_iter()
                .filter(|id| id.contains(".peak.") == peak)
                .collect();
        }
        "limits" => return limits::ids(d),
        _ => {}
    }
    let ids: &[&str] = match pattern {
        "peak" => &[stat::PEAK, stat::BLOCK_P99, stat::BLOCK_ACHIEVED],
        "rate" => &[
            stat::RATE_P99,
            stat::CPU_PER_REQUEST,
            stat::RSS_PER_CONNECTION,
        ],
        "c10k" => &[
            stat::C10K_RSS_PER_CONNECTION,
            stat::C10K_P99,
            stat::C10K_ERRORS,
        ],
        _ => &[stat::PEAK, stat::RATE_P99, stat::CPU_PER_REQUEST],
    };
    ids.iter().map(|s| sid::id(d, s)).collect()
}

fn peak(e: &mut Emit, records: &Records, d: &str) {
    let recs: Vec<&Record> = records.of(d, Pattern::Peak).collect();
    if recs.is_empty() {
        return;
    }
    let f = union_flags(recs.iter().copied(), e.ceiling);
    let v = per_window(&recs, replies_per_s);
    e.windows(
        &sid::id(d, stat::PEAK),
        Unit::PerS,
        &v,
        format!(
            "closed loop (each of {} connections sends its next 1 KiB request as soon as its \
             reply is in): peak throughput only, labelled so; one value per window; closed-loop \
             latency is not comparable and not reported",
            recs[0].connections
        ),
        &f,
    );
}

fn block(e: &mut Emit, records: &Records, d: &str) {
    let recs: Vec<&Record> = records.of(d, Pattern::Block).collect();
    if recs.is_empty() {
        return;
    }
    let f = union_flags(recs.iter().copied(), e.ceiling);
    e.p99_windows(
        &sid::id(d, stat::BLOCK_P99),
        &recs,
        format!(
            "p99 latency from the planned send when every request blocks the server (sleeps: a \
             thread in nanosleep, an event loop stalled in it, Tokio and Go awaiting a timer), \
             open loop at {:.0}/s over {} connections; one value per window{}",
            recs[0].offered,
            recs[0].connections,
            saturated_note(&recs)
        ),
        &f,
    );
    let ach = per_window(&recs, replies_per_s);
    e.windows(
        &sid::id(d, stat::BLOCK_ACHIEVED),
        Unit::PerS,
        &ach,
        format!(
            "replies per second in the same blocking-work step (offered {:.0}/s)",
            recs[0].offered
        ),
        &f,
    );
}

fn saturated_note(recs: &[&Record]) -> String {
    recs.iter()
        .find_map(|r| fell_behind(r))
        .map(|s| format!("; {s}"))
        .unwrap_or_default()
}

/// How a figure of a step is taken: one value per window, or one over the whole step.
enum Take<'a> {
    Windows(&'a dyn Fn(&Window) -> Option<f64>),
    Step(f64),
}

/// Per design and pattern: what the generator saw, so a reader can judge each figure.
pub fn validity_table(records: &Records) -> Table {
    let mut t = Table::new(
        "server.validity",
        "the generator's checks, per design and pattern",
        &[
            "design",
            "pattern",
            "trial",
            "conns",
            "offered/s",
            "achieved/s",
            "gen busy",
            "send lag p99",
            "Little",
            "listen ovf",
            "errors",
            "busy",
            "workers",
            "flags",
        ],
    );
    for r in &records.all {
        let res = &r.result;
        t.row(vec![
            r.design.to_string(),
            format!(
                "{}{}",
                match r.pattern {
                    Pattern::Calibration => "calibration".into(),
                    Pattern::Peak => "peak (closed)".into(),
                    Pattern::Rate => "open loop".into(),
                    Pattern::Block => "blocking work".into(),
                    Pattern::Spin => "spinning work".into(),
                    Pattern::Sweep(x) => format!("capacity probe {x:.0}"),
                    Pattern::Overload => "overload".into(),
                    Pattern::Scale => "c10k".into(),
                },
                if r.placed == Placed::Unpinned {
                    ", default placement"
                } else {
                    ""
                }
            ),
            (r.trial + 1).to_string(),
            r.connections.to_string(),
            if r.offered > 0.0 {
                format!("{:.0}", r.offered)
            } else {
                "closed".into()
            },
            format!("{:.0}", res.achieved_per_s()),
            format!("{:.0}%", r.generator_busy() * 100.0),
            format!(
                "{:.1} us",
                res.send_lag.value_at_quantile(0.99) as f64 / 1e3
            ),
            res.little_mismatch()
                .map_or("-".into(), |m| format!("{:.1}%", m * 100.0)),
            r.listen_overflows.map_or("-".into(), |n| n.to_string()),
            r.errors().to_string(),
            res.rejected.to_string(),
            res.workers.to_string(),
            flags(r, records.ceiling).join(" "),
        ]);
    }
    t.note = format!(
        "gen busy: the generator thread's CPU over the measured time, spinning excluded \
         (client_bound above {:.0}%); send lag: actual send minus when it could have gone; \
         Little: |X * W - L| / L with W the mean service time and L the time-averaged requests \
         in flight (flagged above {:.0}%); listen ovf: TcpExt ListenOverflows + ListenDrops \
         during the design's visit (system-wide); busy: BUSY replies (refused, not lost); \
         workers: distinct worker ids in replies",
        BUSY_LIMIT * 100.0,
        LITTLE_TOLERANCE * 100.0
    );
    t
}

mod capacity;
pub mod limits;
mod open_loop;
pub mod placement;
mod ratios;
#[cfg(test)]
mod tests;
