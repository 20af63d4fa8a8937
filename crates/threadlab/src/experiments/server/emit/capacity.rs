//! The spin step, the capacity search and the overload step after it, and the many-connections
//! (c10k) step.

use super::*;

pub(super) fn spin(e: &mut Emit, records: &Records, d: &str) {
    let recs: Vec<&Record> = records.of(d, Pattern::Spin).collect();
    if recs.is_empty() {
        return;
    }
    let f = union_flags(recs.iter().copied(), e.ceiling);
    e.p99_windows(
        &sid::id(d, stat::SPIN_P99),
        &recs,
        format!(
            "p99 latency from the planned send when every request spins the server's CPU, open \
             loop at {:.0}/s over {} connections; one value per window",
            recs[0].offered, recs[0].connections
        ),
        &f,
    );
}

/// The capacity search's figure and, when a capacity was found, the overload step's.
pub(super) fn sweep(e: &mut Emit, records: &Records, d: &str) {
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
    let target_ms = super::super::setup::SLO_P99_NS / 1_000_000;
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
    let good = per_window(&recs, replies_per_s);
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
    e.p99_windows(
        &sid::id(d, stat::OVERLOAD_P99),
        &recs,
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

pub(super) fn scale(e: &mut Emit, records: &Records, d: &str) {
    let Some(r) = records.of(d, Pattern::Scale).next() else {
        return;
    };
    let f = union_flags(std::iter::once(r), e.ceiling);
    e.p99_windows(
        &sid::id(d, stat::C10K_P99),
        &[r],
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
