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

/// One value per window over every trial's record of a pattern.
fn per_window(recs: &[&Record], f: impl Fn(&Window) -> Option<f64>) -> Vec<f64> {
    recs.iter()
        .flat_map(|r| r.result.windows.iter())
        .filter_map(&f)
        .filter(|v| v.is_finite())
        .collect()
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
    fn windows(&mut self, id: &str, unit: Unit, values: &[f64], note: String, flags: &[String]) {
        if let Some(m) = Metric::from_values(id, unit, values, 1, &self.placement, note) {
            self.out.add(with_flags(m, flags));
        }
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
    let v = per_window(&recs, |w| {
        Some(w.completed as f64 / (w.length_ns as f64 / 1e9))
    });
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
    let p99 = per_window(&recs, |w| us_of(w.latency_p99_ns));
    e.windows(
        &sid::id(d, stat::BLOCK_P99),
        Unit::Us,
        &p99,
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
    let ach = per_window(&recs, |w| {
        Some(w.completed as f64 / (w.length_ns as f64 / 1e9))
    });
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

/// The open-loop point: latency from the planned send and from the actual send, the tail over
/// the whole step, the generator's own lag, throughput, the server's CPU and switches per
/// reply, errors and the memory per connection. One row per metric, in the order emitted.
fn rate(e: &mut Emit, records: &Records, d: &str) {
    let recs: Vec<&Record> = records.of(d, Pattern::Rate).collect();
    if recs.is_empty() {
        return;
    }
    let f = union_flags(recs.iter().copied(), e.ceiling);
    let (conns, offered) = (recs[0].connections, recs[0].offered);
    let lat = merged(&recs, |r| &r.result.latency);
    let svc = merged(&recs, |r| &r.result.service);
    let lag = merged(&recs, |r| &r.result.send_lag);
    let srv = merged(&recs, |r| &r.result.server_service);
    let ctx = format!(
        "open loop, Poisson arrivals (fixed seed) at {offered:.0}/s over {conns} long \
         connections, 1 KiB; latency from the planned send (no coordinated omission){}",
        saturated_note(&recs)
    );
    if let Some(why) = &recs[0].usage_unavailable {
        for s in [stat::CPU_PER_REQUEST, stat::SWITCHES_PER_REQUEST] {
            e.out.skip(&sid::id(d, s), why.clone());
        }
    }
    rate_latency(e, &recs, d, &ctx, (&lat, &lag), &f);
    rate_cost(e, &recs, d, &f);
    if let Some(m) = e.out.metric_mut(&sid::id(d, stat::RATE_P99)) {
        m.histograms = [
            (sid::histogram::LATENCY, &lat),
            (sid::histogram::SERVICE, &svc),
            (sid::histogram::SEND_LAG, &lag),
            (sid::histogram::SERVER_SERVICE, &srv),
        ]
        .into_iter()
        .filter_map(|(n, h)| serialize(n, h))
        .collect();
    }
    footprint(e, recs[0], d, "", &f);
}

/// One metric per row, in order: one value per window over `recs`, or one over the step.
fn emit_rows<'a>(
    e: &mut Emit,
    recs: &[&Record],
    d: &str,
    rows: impl IntoIterator<Item = (&'a str, Unit, Take<'a>, String)>,
    f: &[String],
) {
    for (statistic, unit, take, note) in rows {
        let id = sid::id(d, statistic);
        match take {
            Take::Windows(figure) => e.windows(&id, unit, &per_window(recs, figure), note, f),
            Take::Step(v) => e.single(&id, unit, v, note, f),
        }
    }
}

/// The open-loop point's latency: p50 and p99 per window from the planned send, p99 from the
/// actual send, p99.9 and the maximum over the step, and the generator's own send lag.
fn rate_latency(
    e: &mut Emit,
    recs: &[&Record],
    d: &str,
    ctx: &str,
    (lat, lag): (&Histogram<u64>, &Histogram<u64>),
    f: &[String],
) {
    let whole = |name: &str, q: f64| {
        format!(
            "{ctx}; one value per window (median of the windows' {name}); over the whole \
             step {name} = {:.1} us",
            quantile_us(lat, q).unwrap_or(f64::NAN)
        )
    };
    let p50 = |w: &Window| us_of(w.latency_p50_ns);
    let p99 = |w: &Window| us_of(w.latency_p99_ns);
    let svc_p99 = |w: &Window| us_of(w.service_p99_ns);
    let rows: [(&str, Unit, Take, String); 6] = [
        (
            stat::RATE_P50,
            Unit::Us,
            Take::Windows(&p50),
            whole("p50", 0.5),
        ),
        (
            stat::RATE_P99,
            Unit::Us,
            Take::Windows(&p99),
            whole("p99", 0.99),
        ),
        (
            stat::RATE_UNCORRECTED_P99,
            Unit::Us,
            Take::Windows(&svc_p99),
            "the same requests' p99 from their actual send (what a closed-loop tool would \
             print); beside rate.p99 it shows how much waiting the correction adds"
                .into(),
        ),
        (
            stat::RATE_P999,
            Unit::Us,
            Take::Step(quantile_us(lat, 0.999).unwrap_or(f64::NAN)),
            format!("{ctx}; p99.9 of the whole step ({} requests)", lat.len()),
        ),
        (
            stat::RATE_MAX,
            Unit::Us,
            Take::Step(lat.max() as f64 / 1e3),
            format!("{ctx}; the slowest request of the step"),
        ),
        (
            stat::RATE_SEND_LAG_P99,
            Unit::Us,
            Take::Step(quantile_us(lag, 0.99).unwrap_or(f64::NAN)),
            "the generator's own lag (actual send minus the later of the planned time and the \
             connection freeing): its health, not the server's"
                .into(),
        ),
    ];
    emit_rows(e, recs, d, rows, f);
}

/// The open-loop point's throughput, the server's CPU and switches per reply, and errors.
fn rate_cost(e: &mut Emit, recs: &[&Record], d: &str, f: &[String]) {
    let (conns, offered) = (recs[0].connections, recs[0].offered);
    let usage = recs[0].usage_unavailable.is_none();
    let achieved = |w: &Window| Some(w.completed as f64 / (w.length_ns as f64 / 1e9));
    let cpu = |w: &Window| {
        (w.completed > 0 && usage).then(|| w.usage.cpu_ns as f64 / w.completed as f64 / 1e3)
    };
    let switches = |w: &Window| {
        (w.completed > 0 && usage).then(|| w.usage.switches() as f64 / w.completed as f64)
    };
    let errors: u64 = recs.iter().map(|r| r.errors()).sum();
    let rows: [(&str, Unit, Take, String); 4] = [
        (
            stat::RATE_ACHIEVED,
            Unit::PerS,
            Take::Windows(&achieved),
            format!("replies per second; offered {offered:.0}/s"),
        ),
        (
            stat::CPU_PER_REQUEST,
            Unit::Us,
            Take::Windows(&cpu),
            format!(
                "server CPU time (user + system, its children included) per reply at the \
                 open-loop point: {}; one value per window{}",
                meter_text(d),
                recs[0]
                    .state
                    .as_ref()
                    .map_or(String::new(), |s| format!("; {s}"))
            ),
        ),
        (
            stat::SWITCHES_PER_REQUEST,
            Unit::Count,
            Take::Windows(&switches),
            "server context switches (voluntary + involuntary, children included) per reply \
             at the open-loop point; one value per window"
                .into(),
        ),
        (
            stat::ERRORS,
            Unit::Count,
            Take::Step(errors as f64),
            format!(
                "client-side failures while connecting {conns} connections and during the \
                 open-loop step ({}); address exhaustion counts as the client's",
                recs[0].result.failures.describe()
            ),
        ),
    ];
    emit_rows(e, recs, d, rows, f);
}

fn meter_text(d: &str) -> &'static str {
    match d {
        "go" => "the Go program's tasks' schedstat run time from /proc",
        _ => "this process's rusage minus the generator thread's, plus the server's children (their rusage slots, wait4 for the reaped)",
    }
}

fn footprint(e: &mut Emit, rec: &Record, d: &str, prefix: &str, f: &[String]) {
    let Some((before, after)) = rec.footprint else {
        return;
    };
    let held = rec.connections as u64 - rec.connect_failures.min(rec.connections as u64);
    if held == 0 {
        return;
    }
    let per = (after.bytes as f64 - before.bytes as f64) / held as f64 / 1024.0;
    e.single(
        &sid::id(d, &format!("{prefix}{}", stat::RSS_PER_CONNECTION)),
        Unit::KiB,
        per,
        format!(
            "memory grown per connection held: (after - before) / {held}, proportional set size \
             of the lab and the server's processes (smaps_rollup Pss), read with the \
             generator's own tables allocated and touched before, and freed heap trimmed; \
             {:.1} MiB before, {:.1} MiB after",
            before.bytes as f64 / 1048576.0,
            after.bytes as f64 / 1048576.0
        ),
        f,
    );
    e.single(
        &sid::id(d, &format!("{prefix}{}", stat::THREADS)),
        Unit::Threads,
        after.threads as f64,
        format!("threads the design runs while holding {held} connections"),
        f,
    );
    e.single(
        &sid::id(d, &format!("{prefix}{}", stat::PROCESSES)),
        Unit::Count,
        after.processes as f64,
        format!(
            "processes the design runs besides the lab while holding {held} connections (its \
             children, or its own program)"
        ),
        f,
    );
    e.single(
        &sid::id(d, &format!("{prefix}{}", stat::CONNECTIONS)),
        Unit::Count,
        held as f64,
        "connections made and served once before the step".into(),
        f,
    );
}

fn spin(e: &mut Emit, records: &Records, d: &str) {
    let recs: Vec<&Record> = records.of(d, Pattern::Spin).collect();
    if recs.is_empty() {
        return;
    }
    let f = union_flags(recs.iter().copied(), e.ceiling);
    let v = per_window(&recs, |w| us_of(w.latency_p99_ns));
    e.windows(
        &sid::id(d, stat::SPIN_P99),
        Unit::Us,
        &v,
        format!(
            "p99 latency from the planned send when every request spins the server's CPU, open \
             loop at {:.0}/s over {} connections; one value per window",
            recs[0].offered, recs[0].connections
        ),
        &f,
    );
}

/// The capacity search's figure and, when a capacity was found, the overload step's.
fn sweep(e: &mut Emit, records: &Records, d: &str) {
    if capacity(e, records, d) {
        overload(e, records, d);
    }
}

/// The capacity at the latency target from the search's probes and the open-loop point; or
/// why there is none (only a bound). Whether a capacity was found.
fn capacity(e: &mut Emit, records: &Records, d: &str) -> bool {
    let probes: Vec<&Record> = records
        .all
        .iter()
        .filter(|r| r.design == d && matches!(r.pattern, Pattern::Sweep(_)))
        .collect();
    if probes.is_empty() {
        return false;
    }
    // The search starts from the first trial's open-loop point: one of the rates tried.
    let point = records.of(d, Pattern::Rate).find(|r| r.trial == 0);
    let mut tried: Vec<&Record> = point.into_iter().chain(probes).collect();
    tried.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    let ok = |r: &Record| meets_target(&r.result);
    let passed = tried.iter().copied().rfind(|r| ok(r));
    // A rate missed when none of its probes (a miss is probed twice) met the target.
    let missed = passed.map_or(tried.first().copied(), |best| {
        tried.iter().copied().find(|r| {
            r.offered > best.offered && !tried.iter().any(|x| x.offered == r.offered && ok(x))
        })
    });
    let rates = tried
        .iter()
        .map(|r| format!("{:.0}{}", r.offered, if ok(r) { "" } else { " (missed)" }))
        .collect::<Vec<_>>()
        .join(", ");
    let target_ms = super::setup::SLO_P99_NS / 1_000_000;
    let Some(best) = passed else {
        // No rate met the target: there is no capacity figure, only a bound.
        let lowest = tried[0];
        e.out.skip(
            &sid::id(d, stat::CAPACITY),
            format!(
                "no offered rate tried met p99 <= {target_ms} ms with 99% of the planned \
                 requests answered (rates tried: {rates}/s over {} connections; at the lowest, \
                 {:.0}/s, p99 was {:.2} ms): the capacity at this target is below {:.0}/s here",
                lowest.connections,
                lowest.offered,
                lowest.result.latency.value_at_quantile(0.99) as f64 / 1e6,
                lowest.offered
            ),
        );
        return false;
    };
    // The figure is the passing step's; a missed step above it only bounds it, but a
    // generator that could not offer the load would make that bound doubtful.
    let mut f = flags(best, e.ceiling);
    let client_bound = Flag::ClientBound.name().to_string();
    let generator_bound = tried
        .iter()
        .any(|r| flags(r, e.ceiling).contains(&client_bound));
    if (missed.is_none() || generator_bound) && !f.contains(&client_bound) {
        f.push(client_bound);
    }
    e.single(
        &sid::id(d, stat::CAPACITY),
        Unit::PerS,
        best.offered,
        format!(
            "the highest offered rate with p99 <= {target_ms} ms and 99% of the planned \
             requests answered, open loop over {} connections, found by bisection from the \
             open-loop point ({:.0} ms probes after a warm-up, a probe certain to miss ended \
             early, a miss probed again unless the server fell behind: a stall of the host can \
             make one probe miss at any rate); rates tried: {rates}{}",
            best.connections,
            tried
                .iter()
                .find(|r| r.pattern != Pattern::Rate)
                .map_or(0.0, |r| r.result.measured_ns as f64 / 1e6),
            match missed {
                None => " (every rate passed, up to half the generator's ceiling: the \
                         capacity is at least this, limited by the generator)"
                    .to_string(),
                Some(m) => format!("; between {:.0}/s and {:.0}/s", best.offered, m.offered),
            }
        ),
        &f,
    );
    true
}

/// The overload step: goodput, p99, the share refused BUSY and the fairness over connections.
fn overload(e: &mut Emit, records: &Records, d: &str) {
    let recs: Vec<&Record> = records.of(d, Pattern::Overload).collect();
    if recs.is_empty() {
        return;
    }
    let r = recs[0];
    let f = union_flags(recs.iter().copied(), e.ceiling);
    let good = per_window(&recs, |w| {
        Some(w.completed as f64 / (w.length_ns as f64 / 1e9))
    });
    e.windows(
        &sid::id(d, stat::OVERLOAD_GOODPUT),
        Unit::PerS,
        &good,
        format!(
            "replies per second when offered {:.0}/s (1.5 x capacity)",
            r.offered
        ),
        &f,
    );
    let p99 = per_window(&recs, |w| us_of(w.latency_p99_ns));
    e.windows(
        &sid::id(d, stat::OVERLOAD_P99),
        Unit::Us,
        &p99,
        format!(
            "p99 from the planned send under overload{}",
            saturated_note(&recs)
        ),
        &f,
    );
    let sent = r.result.completed + r.result.rejected;
    e.single(
        &sid::id(d, stat::OVERLOAD_REJECTED),
        Unit::Percent,
        100.0 * r.result.rejected as f64 / sent.max(1) as f64,
        "share of requests answered BUSY (refused at once) under overload".into(),
        &f,
    );
    let per_conn: Vec<f64> = r.result.per_conn.iter().map(|&c| c as f64).collect();
    e.single(
        &sid::id(d, stat::OVERLOAD_JAIN),
        Unit::Index,
        jain_index(&per_conn),
        format!(
            "Jain's fairness index over replies per connection ({} connections) under overload",
            per_conn.len()
        ),
        &f,
    );
}

fn scale(e: &mut Emit, records: &Records, d: &str) {
    let Some(r) = records.of(d, Pattern::Scale).next() else {
        return;
    };
    let f = union_flags(std::iter::once(r), e.ceiling);
    let v = per_window(&[r], |w| us_of(w.latency_p99_ns));
    e.windows(
        &sid::id(d, stat::C10K_P99),
        Unit::Us,
        &v,
        format!(
            "{} long connections held open, each sending 1 request per second (open loop, \
             Poisson); p99 from the planned send, one value per window{}",
            r.connections,
            r.state.as_ref().map_or(String::new(), |s| format!("; {s}"))
        ),
        &f,
    );
    e.single(
        &sid::id(d, stat::C10K_ERRORS),
        Unit::Count,
        r.errors() as f64,
        format!(
            "client-side failures connecting and during the step ({})",
            r.result.failures.describe()
        ),
        &f,
    );
    e.single(
        &sid::id(d, stat::C10K_LISTEN_OVERFLOWS),
        Unit::Count,
        r.listen_overflows.unwrap_or(0) as f64,
        "TcpExt ListenOverflows + ListenDrops during the step (/proc/net/netstat, system-wide)"
            .into(),
        &f,
    );
    footprint(e, r, d, stat::C10K, &f);
}

/// CPU per request of every design against thread_per_client's, window by window.
fn ratios(e: &mut Emit, records: &Records, running: &[Running]) {
    let cpu = |w: &Window| (w.completed > 0).then(|| w.usage.cpu_ns as f64 / w.completed as f64);
    let p99 = |w: &Window| us_of(w.latency_p99_ns);
    for run in running {
        let d = run.info.name;
        if d != sid::THREAD_PER_CLIENT {
            ratio(
                e,
                records,
                d,
                sid::THREAD_PER_CLIENT,
                stat::CPU_PER_REQUEST,
                "CPU per request",
                &cpu,
            );
        }
    }
    // uthread's claim, measured: green threads cost what an event loop costs.
    if running.iter().any(|r| r.info.name == "green") {
        ratio(
            e,
            records,
            "green",
            "epoll",
            stat::CPU_PER_REQUEST,
            "CPU per request",
            &cpu,
        );
        ratio(
            e,
            records,
            "green",
            "epoll",
            stat::RATE_P99,
            "p99 latency",
            &p99,
        );
    }
}

/// `server.<d>.vs_<base>.<what>`: `d`'s figure over `base`'s, window by window of their
/// open-loop steps.
fn ratio(
    e: &mut Emit,
    records: &Records,
    d: &str,
    base: &str,
    what: &str,
    words: &str,
    f: &dyn Fn(&Window) -> Option<f64>,
) {
    let b_recs: Vec<&Record> = records.of(base, Pattern::Rate).collect();
    let d_recs: Vec<&Record> = records.of(d, Pattern::Rate).collect();
    let (b, v) = (per_window(&b_recs, f), per_window(&d_recs, f));
    let n = v.len().min(b.len());
    if n == 0 {
        return;
    }
    let r: Vec<f64> = (0..n).map(|i| v[i] / b[i]).collect();
    let flags = union_flags(
        d_recs.iter().copied().chain(b_recs.iter().copied()),
        e.ceiling,
    );
    let id = sid::id(d, &sid::vs_design(base, what));
    if let Some(mut m) = Metric::from_values(
        &id,
        Unit::Ratio,
        &r,
        1,
        &e.placement,
        format!(
            "server.{d}.{what} / server.{base}.{what}, window by window (window k of each \
             design's open-loop step, taken seconds apart); below 1: {d} has the lower {words}"
        ),
    ) {
        m.ratio_of = Some([sid::id(d, what), sid::id(base, what)]);
        e.out.add(with_flags(m, &flags));
    }
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

pub mod limits;
pub mod placement;
#[cfg(test)]
mod tests;
