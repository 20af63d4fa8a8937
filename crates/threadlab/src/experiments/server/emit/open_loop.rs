//! The open-loop point's figures (`server.<design>.rate.…`): latency from the planned and the
//! actual send, the tail, the generator's lag, throughput, the server's CPU and switches per
//! reply, errors and memory per connection.

use super::*;

/// The open-loop point: latency from the planned send and from the actual send, the tail over
/// the whole step, the generator's own lag, throughput, the server's CPU and switches per
/// reply, errors and the memory per connection. One row per metric, in the order emitted.
pub(super) fn rate(e: &mut Emit, records: &Records, d: &str) {
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
    let p99 = p99_us;
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
    let achieved = replies_per_s;
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

pub(super) fn footprint(e: &mut Emit, rec: &Record, d: &str, prefix: &str, f: &[String]) {
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
