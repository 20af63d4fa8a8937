//! Ratios between designs (`server.<design>.vs_<base>.…`), window by window of their open-loop
//! steps.

use super::*;

/// CPU per request of every design against thread_per_client's, window by window.
pub(super) fn ratios(e: &mut Emit, records: &Records, running: &[Running]) {
    let cpu = |w: &Window| (w.completed > 0).then(|| w.usage.cpu_ns as f64 / w.completed as f64);
    let p99 = p99_us;
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
    let n = v.values.len().min(b.values.len());
    if n == 0 {
        return;
    }
    // Window k of each design's step: the trial is d's (both visit each trial in turn).
    let mut r = PerTrial::default();
    for i in 0..n {
        r.push(v.trial_of[i] as usize, v.values[i] / b.values[i]);
    }
    let flags = union_flags(
        d_recs.iter().copied().chain(b_recs.iter().copied()),
        e.ceiling,
    );
    let id = sid::id(d, &sid::vs_design(base, what));
    if let Some(mut m) = Metric::from_values(
        &id,
        Unit::Ratio,
        &r.values,
        1,
        &e.placement,
        format!(
            "server.{d}.{what} / server.{base}.{what}, window by window (window k of each \
             design's open-loop step, taken seconds apart); below 1: {d} has the lower {words}"
        ),
    ) {
        m.ratio_of = Some([sid::id(d, what), sid::id(base, what)]);
        e.out.add(with_flags(m.with_trial_of(r.trial_of), &flags));
    }
}
