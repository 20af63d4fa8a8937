//! Lock fairness as distributions, and the memory-ordering litmus outcomes.

use super::*;

/// `fairness.<lock>.t<T>.<what>`: the locks and thread counts, in the order first seen.
pub(super) fn fairness_axes(e: &ExperimentResult) -> (Vec<String>, Vec<String>) {
    let mut locks: Vec<String> = Vec::new();
    let mut ts: Vec<String> = Vec::new();
    for m in &e.metrics {
        let parts: Vec<&str> = m.id.split('.').collect();
        if parts.len() == 4 && parts[0] == "fairness" && parts[2].starts_with('t') {
            if !locks.iter().any(|l| l == parts[1]) {
                locks.push(parts[1].to_string());
            }
            if !ts.iter().any(|t| t == parts[2]) {
                ts.push(parts[2].to_string());
            }
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
                let Some(metric) = e.metric(&format!("fairness.{lock}.{t}.{what}")) else {
                    continue;
                };
                let marks = mark
                    .and_then(|(w, name)| {
                        e.metric(&format!("fairness.{lock}.{t}.{w}"))
                            .map(|x| vec![(x.median, name.to_string())])
                    })
                    .unwrap_or_default();
                out.push(DistInput {
                    label: format!("{lock} · {} threads", &t[1..]),
                    metric,
                    marks,
                });
            }
        }
        out
    };
    let wait = rows(
        "wait_p99",
        Some(("wait_max", "longest wait (median of runs)")),
    );
    v.extend(distribution(
        e,
        "wait",
        "Waiting for the lock: p99 wait per run, longest wait marked",
        &wait,
        &locks,
    ));
    let jain = rows("jain", None);
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
    for m in &e.metrics {
        let p: Vec<&str> = m.id.split('.').collect();
        if p.len() == 4 && p[3] == "relaxed_rate" {
            if !tests.iter().any(|t| t.0 == p[1]) {
                tests.push((p[1].to_string(), p[1].to_string()));
            }
            if !orders.iter().any(|o| o.0 == p[2]) {
                orders.push((p[2].to_string(), p[2].to_string()));
            }
        }
    }
    let allowed = e.tables.iter().find(|t| t.id == "ordering.outcomes");
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
        &|t, o| format!("ordering.{t}.{o}.relaxed_rate"),
        Some(&verdict),
    )
    .into_iter()
    .collect();
    v.extend(series_charts(e, &|_| true));
    v
}
