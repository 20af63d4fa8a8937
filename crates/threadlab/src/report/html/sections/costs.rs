//! The PThreads and Mac studies' cost tables: creation (Fig. 1), synchronisation, context switches, shared memory (Fig. 2).

use super::*;
use crate::report::html::parts::key;
use crate::results::ids::peer;
use crate::results::ids::{create, placed, shm, switch, sync, CROSS_CPU, SAME_CPU};
use crate::subjects::peers::REGISTRY;

/// Ids as the chart helpers take them.
pub(super) fn id_refs(ids: &[String]) -> Vec<&str> {
    ids.iter().map(String::as_str).collect()
}

pub(super) fn create(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    let vs_count = create::thread_vs_count();
    if let Some(s) = e.series.iter().find(|s| s.id == vs_count) {
        // The study's text gives its Fig. 1 only as an average, flat from ~1,000 threads on,
        // over 1..100,000 (Kothari & Claypool 1999, section 4.1): drawn as that level.
        let reference = e
            .metric(&create::id(create::THREAD))
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
    // Kernel threads, then every registered peer runtime, then processes.
    let today: Vec<String> = [
        create::id(create::THREAD),
        create::id(create::THREAD_STD),
        create::destroy(create::THREAD),
    ]
    .into_iter()
    .chain(REGISTRY.iter().map(|p| peer::spawn(p.info().name)))
    .chain([
        create::id(create::FORK),
        create::destroy(create::PROCESS),
        create::id(create::SPAWN),
    ])
    .collect();
    v.extend(
        bars(
            e,
            "today",
            "What starting a unit of work costs today",
            &id_refs(&today),
        )
        .map(with_floor_caption),
    );
    v.extend(series_charts(e, &|s| s.id != vs_count));
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
        &id_refs(&[
            sync::id(sync::MUTEX),
            sync::id(sync::MUTEX_SINGLE_THREAD),
            sync::id(sync::MUTEX_STD),
            sync::id(sync::SEMAPHORE),
            placed(&sync::id(sync::WAKE), SAME_CPU),
            placed(&sync::id(sync::WAKE), CROSS_CPU),
        ]),
    ));
    let locks: Vec<(String, String)> = [
        (sync::MUTEX, "pthread"),
        (sync::MUTEX_STD, "std"),
        (sync::PARKING_LOT, "parking_lot"),
        (sync::TICKET, "ticket"),
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
            (SAME_CPU.into(), "same CPU".into()),
            (CROSS_CPU.into(), "two CPUs".into()),
        ],
        &|lock, p| sync::contended(lock, p),
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
    // A kind is who switches and how, as the id writes it (`thread.yield`).
    let kinds: Vec<(String, String)> = [
        (switch::THREAD, switch::YIELD),
        (switch::THREAD, switch::FUTEX),
        (switch::PROCESS, switch::YIELD),
        (switch::PROCESS, switch::FUTEX),
        (switch::PROCESS, switch::PIPE),
    ]
    .iter()
    .map(|(who, how)| {
        let kind = ids::within(switch::EXPERIMENT, &switch::id(who, how)).to_string();
        (kind.clone(), kind)
    })
    .collect();
    v.extend(grid(
        e,
        "kernel",
        "Kernel switches on one CPU, hand-offs across two",
        &kinds,
        &[
            (String::new(), "same CPU (a switch)".into()),
            (CROSS_CPU.into(), "two CPUs (a hand-off)".into()),
        ],
        &|kind, placement| {
            let id = switch::subject(kind);
            if placement.is_empty() {
                id
            } else {
                placed(&id, placement)
            }
        },
        None,
    ));
    v.extend(
        bars(
            e,
            "user-level",
            "Yielding between user-level threads and tasks, beside kernel threads and the \
             bare-switch floor",
            &id_refs(
                &REGISTRY
                    .iter()
                    .map(|p| peer::yields(p.info().name))
                    .chain([switch::id(switch::THREAD, switch::YIELD)])
                    .collect::<Vec<_>>(),
            ),
        )
        .map(with_floor_caption),
    );
    v.extend(series_charts(e, &|_| true));
    v
}

/// A peer chart's caption, told which of its bars are no runtime to choose but the floor a
/// runtime can approach (a bare switch, no scheduler).
fn with_floor_caption(mut chart: Chart) -> Chart {
    for p in REGISTRY.iter().map(|p| p.info()).filter(|p| p.floor) {
        chart.caption.push_str(&format!(
            " {} is not a runtime to choose: a bare stackful-coroutine switch with no scheduler, \
             run queue or preemption, drawn as the floor a runtime's figures can approach.",
            p.name
        ));
    }
    chart
}

pub(super) fn shm(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = series_charts(e, &|_| true);
    for c in v.iter_mut() {
        // The series are charted by their last segment: both readers' curves in one chart.
        if c.key == key(e, shm::READ_TIME) {
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
