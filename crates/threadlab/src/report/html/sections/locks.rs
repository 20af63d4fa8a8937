//! Lock fairness as distributions, and the memory-ordering litmus outcomes.

use super::*;

/// `fairness.<lock>.t<T>.<what>`: the locks and thread counts, in the order first seen.
pub(super) fn fairness_axes(e: &ExperimentResult) -> (Vec<String>, Vec<String>) {
    let mut locks: Vec<String> = Vec::new();
    let mut ts: Vec<String> = Vec::new();
    for (lock, threads, _) in e.metrics.iter().filter_map(|m| ids::fairness::parse(&m.id)) {
        if !locks.iter().any(|l| l == lock) {
            locks.push(lock.to_string());
        }
        if !ts.iter().any(|t| t == threads) {
            ts.push(threads.to_string());
        }
    }
    (locks, ts)
}

pub(super) fn fairness(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = series_charts(e, &|_| true);
    let (locks, ts) = fairness_axes(e);
    let rows = |what: &str, mark: Option<(&str, &str)>| -> Vec<DistInput> {
        let mut out = Vec::new();
        for t in &ts {
            for lock in &locks {
                let Some(metric) = e.metric(&ids::fairness::id(lock, t, what)) else {
                    continue;
                };
                let marks = mark
                    .and_then(|(w, name)| {
                        e.metric(&ids::fairness::id(lock, t, w))
                            .map(|x| vec![(x.median, name.to_string())])
                    })
                    .unwrap_or_default();
                out.push(DistInput {
                    label: format!("{lock} · {t} threads"),
                    metric,
                    marks,
                });
            }
        }
        out
    };
    let wait = rows(
        ids::fairness::WAIT_P99,
        Some((ids::fairness::WAIT_MAX, "longest wait (median of runs)")),
    );
    v.extend(distribution(
        e,
        "wait",
        "Waiting for the lock: p99 wait per run, longest wait marked",
        &wait,
        &locks,
    ));
    let jain = rows(ids::fairness::JAIN, None);
    v.extend(distribution(
        e,
        "jain",
        "Fairness: Jain's index per run (1 = every thread got an equal share)",
        &jain,
        &locks,
    ));
    v
}

pub(super) fn ordering(e: &ExperimentResult) -> Vec<Chart> {
    // ordering.<test>.<ordering>.relaxed_rate
    let mut tests: Vec<(String, String)> = Vec::new();
    let mut orders: Vec<(String, String)> = Vec::new();
    for (test, order) in e
        .metrics
        .iter()
        .filter_map(|m| ids::ordering::parse_relaxed_rate(&m.id))
    {
        if !tests.iter().any(|t| t.0 == test) {
            tests.push((test.to_string(), test.to_string()));
        }
        if !orders.iter().any(|o| o.0 == order) {
            orders.push((order.to_string(), order.to_string()));
        }
    }
    let allowed = e
        .tables
        .iter()
        .find(|t| t.id == ids::ordering::OUTCOMES_TABLE);
    let verdict = |test: &str, ord: &str| -> Option<String> {
        let t = allowed?;
        let col = t.header.iter().position(|h| h.starts_with("allowed"))?;
        let outcome = t.header.iter().position(|h| h == "relaxed outcome");
        let row = t.rows.iter().find(|r| {
            r.first().map(String::as_str) == Some(test) && r.get(1).map(String::as_str) == Some(ord)
        })?;
        Some(format!(
            "{}{}",
            row.get(col)?,
            outcome
                .and_then(|i| row.get(i))
                .map(|o| format!(" ({o})"))
                .unwrap_or_default()
        ))
    };
    let mut v: Vec<Chart> = grid(
        e,
        "outcomes",
        "Litmus tests: how often the relaxed outcome was seen",
        &tests,
        &orders,
        &|t, o| ids::ordering::relaxed_rate(t, o),
        Some(&verdict),
    )
    .into_iter()
    .collect();
    v.extend(series_charts(e, &|_| true));
    v
}
