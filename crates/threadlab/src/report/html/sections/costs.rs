//! The PThreads and Mac studies' cost tables: creation (Fig. 1), synchronisation, context switches, shared memory (Fig. 2).

use super::*;

pub(super) fn create(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    if let Some(s) = e.series.iter().find(|s| s.id == "create.thread.vs_count") {
        // The study's text gives its Fig. 1 only as an average, flat from ~1,000 threads on,
        // over 1..100,000 (Kothari & Claypool 1999, section 4.1): drawn as that level.
        let reference = e
            .metric("create.thread")
            .and_then(|m| m.historical.as_ref())
            .and_then(|h| {
                Some(Reference {
                    name: format!(
                        "{}: {} flat from ~1,000 (the text gives no other point)",
                        seeds::label_of(&h.source),
                        fmt_with_unit(h.value, h.unit)
                    ),
                    y: h.unit.convert(h.value, s.y_unit)?,
                    x_from: Some(1_000.0),
                    x_to: Some(100_000.0),
                })
            });
        v.push(curve_chart(
            e,
            "fig1",
            "Fig. 1: creation time vs number of threads created",
            &[s],
            reference.into_iter().collect(),
        ));
    }
    v.extend(then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Creation and destruction, then and now",
    ));
    v.extend(bars(
        e,
        "today",
        "What starting a unit of work costs today",
        &[
            "create.thread",
            "create.thread.std",
            "destroy.thread",
            "create.green",
            "create.tokio",
            "create.go",
            "create.process.fork",
            "destroy.process",
            "create.process.spawn",
        ],
    ));
    v.extend(series_charts(e, &|s| s.id != "create.thread.vs_count"));
    v
}

pub(super) fn sync(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Lock and semaphore pairs, then and now",
    )
    .into_iter()
    .collect::<Vec<_>>();
    v.extend(bars(
        e,
        "uncontended",
        "Uncontended pairs and wake-ups",
        &[
            "sync.mutex",
            "sync.mutex.single_thread",
            "sync.mutex.std",
            "sync.semaphore",
            "sync.wake.same_cpu",
            "sync.wake.cross_cpu",
        ],
    ));
    let locks: Vec<(String, String)> = [
        ("mutex", "pthread"),
        ("mutex.std", "std"),
        ("parking_lot", "parking_lot"),
        ("ticket", "ticket"),
    ]
    .iter()
    .map(|(k, l)| (k.to_string(), l.to_string()))
    .collect();
    v.extend(grid(
        e,
        "contended",
        "Two threads hammering one lock: one CPU or two",
        &locks,
        &[
            ("same_cpu".into(), "same CPU".into()),
            ("cross_cpu".into(), "two CPUs".into()),
        ],
        &|lock, p| format!("sync.{lock}.contended.{p}"),
        None,
    ));
    v.extend(series_charts(e, &|_| true));
    v
}

pub(super) fn switch(e: &ExperimentResult) -> Vec<Chart> {
    let mut v: Vec<Chart> = then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Context switches, then and now",
    )
    .into_iter()
    .collect();
    let kinds: Vec<(String, String)> = [
        "thread.yield",
        "thread.futex",
        "process.yield",
        "process.futex",
        "process.pipe",
    ]
    .iter()
    .map(|k| (k.to_string(), k.to_string()))
    .collect();
    v.extend(grid(
        e,
        "kernel",
        "Kernel switches on one CPU, hand-offs across two",
        &kinds,
        &[
            (String::new(), "same CPU (a switch)".into()),
            (".cross_cpu".into(), "two CPUs (a hand-off)".into()),
        ],
        &|kind, suffix| format!("switch.{kind}{suffix}"),
        None,
    ));
    v.extend(bars(
        e,
        "user-level",
        "Yielding between user-level threads and tasks, beside kernel threads",
        &[
            "switch.green.yield",
            "switch.tokio.yield",
            "switch.go.yield",
            "switch.thread.yield",
        ],
    ));
    v.extend(series_charts(e, &|_| true));
    v
}

pub(super) fn shm(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = series_charts(e, &|_| true);
    for c in v.iter_mut() {
        if c.key.ends_with("read_time") {
            c.title = format!("Fig. 2: {}", c.title);
            c.caption.push_str(
                " The study's Fig. 2 has no values in its text (only that processes were slower \
                 than threads), so only today's curves are drawn.",
            );
        }
    }
    v.extend(bars(
        e,
        "sizes",
        "Reading what another thread or process just wrote",
        &e.metrics.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
    ));
    v
}
