//! Which charts each experiment's section draws: a registry of one function per experiment,
//! and the generic charts every experiment gets when it has no function of its own (its series
//! as curves, grouped by what they plot; its figures then and now; its metrics as bars).
//!
//! Adding an experiment's charts is one function `fn(&ExperimentResult) -> Vec<Chart>` and one
//! line in `REGISTRY`. The helpers below (curves, then/now bars, grids of bars, distributions,
//! bars from an experiment's own table) do the drawing; a function only picks what to show.

use std::collections::BTreeSet;

use super::svg::{
    Axis, Bar, BarChart, BarGroup, BarSeries, DistChart, DistRow, Line, LineChart, Marker,
    Reference, Scale,
};
use super::Chart;
use crate::measure::units::Unit;
use crate::report::{fmt_value, fmt_with_unit, short_note};
use crate::results::{ExperimentResult, Metric, Series, Table};
use crate::seeds;

type ChartsFn = fn(&ExperimentResult) -> Vec<Chart>;

/// Experiments whose sections redraw a study's figures; any other gets `generic`.
const REGISTRY: &[(&str, ChartsFn)] = &[
    ("create", create),
    ("sync", sync),
    ("switch", switch),
    ("shm", shm),
    ("fairness", fairness),
    ("ordering", ordering),
    ("preempt", preempt),
    ("throttle", throttle),
    ("priority", priority),
    ("latency", latency),
    ("coop", coop),
    ("server", super::server::charts),
];

/// The charts of one experiment's section: its own function's, or the generic ones when it
/// has none (or when that function finds nothing it knows in the file).
pub fn charts(e: &ExperimentResult) -> Vec<Chart> {
    let own = REGISTRY
        .iter()
        .find(|(name, _)| *name == e.name)
        .map(|(_, f)| f(e))
        .unwrap_or_default();
    if own.is_empty() {
        generic(e)
    } else {
        own
    }
}

/// Series as curves, study figures then and now, and every metric as bars by unit.
pub fn generic(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = series_charts(e, &|_| true);
    v.extend(then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Then and now",
    ));
    v.extend(metric_bars_by_unit(e, &|m| m.ratio_of.is_none()));
    v
}

// ---------------------------------------------------------------------------------------------
// One function per experiment.

fn create(e: &ExperimentResult) -> Vec<Chart> {
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

fn sync(e: &ExperimentResult) -> Vec<Chart> {
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

fn switch(e: &ExperimentResult) -> Vec<Chart> {
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

fn shm(e: &ExperimentResult) -> Vec<Chart> {
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

/// `fairness.<lock>.t<T>.<what>`: the locks and thread counts, in the order first seen.
fn fairness_axes(e: &ExperimentResult) -> (Vec<String>, Vec<String>) {
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

fn fairness(e: &ExperimentResult) -> Vec<Chart> {
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

fn ordering(e: &ExperimentResult) -> Vec<Chart> {
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

fn preempt(e: &ExperimentResult) -> Vec<Chart> {
    let mut v: Vec<Chart> = then_now(
        e,
        &all_with_history(e),
        "then-now",
        "One timer interruption, then (Mach 3.0) and now",
    )
    .into_iter()
    .collect();
    v.extend(series_charts(e, &|_| true));
    if let Some(c) = v.iter_mut().find(|c| c.key.ends_with("throughput_loss")) {
        c.title = "Throughput lost vs quantum (preemptive against cooperative)".into();
    }
    v.extend(bars(
        e,
        "paths",
        "The ways to interrupt a thread today",
        &[
            "preempt.timer_signal",
            "preempt.timer_latency",
            "preempt.signal_roundtrip",
            "preempt.green_switch",
            "preempt.poll_flag.latency",
            "preempt.poll_flag",
            "preempt.poll_flag.chain",
        ],
    ));
    v
}

fn throttle(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    let kernel = e
        .series
        .iter()
        .find(|s| s.id == "throttle.kernel.time_vs_n");
    let green = e
        .series
        .iter()
        .find(|s| s.id == "throttle.uthread.time_vs_n");
    if let Some(k) = kernel {
        v.extend(throttle_curve(k, green));
    }
    v.extend(then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Best N and the cost of no throttle, then and now",
    ));
    v.extend(series_charts(e, &|s| !s.id.ends_with(".time_vs_n")));
    v
}

/// The semaphore throttle: time per N relative to the fastest N, study beside today (the
/// study summed 1,500 times more numbers, so seconds cannot be set side by side).
fn throttle_curve(k: &Series, green: Option<&Series>) -> Option<Chart> {
    let rel = |x: &[f64], y: &[f64]| -> Vec<(f64, f64, f64)> {
        let best = y
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        x.iter()
            .zip(y)
            .map(|(x, y)| (*x, *y, y / best))
            .filter(|t| t.2.is_finite())
            .collect()
    };
    let now = rel(&k.x, &k.y);
    if now.is_empty() {
        return None;
    }
    let then = k
        .historical
        .as_ref()
        .map(|h| rel(&h.x, &h.y))
        .unwrap_or_default();
    let ut = green.map(|g| rel(&g.x, &g.y)).unwrap_or_default();
    let ns: BTreeSet<i64> = now.iter().map(|t| t.0 as i64).collect();
    let at = |v: &[(f64, f64, f64)], n: i64| v.iter().find(|t| t.0 as i64 == n).copied();
    let label = |n: i64| {
        if n == 65 {
            "unthrottled".to_string()
        } else {
            n.to_string()
        }
    };
    let mut groups = Vec::new();
    let mut numbers = vec![vec![
        "N".to_string(),
        "study s".into(),
        "study ÷ best".into(),
        "kernel s".into(),
        "kernel ÷ best".into(),
        "uthread s".into(),
        "uthread ÷ best".into(),
    ]];
    for n in ns {
        let (t, kn, u) = (at(&then, n), at(&now, n), at(&ut, n));
        let bar = |v: Option<(f64, f64, f64)>, who: &str| {
            v.map(|(_, s, r)| Bar {
                value: r,
                range: None,
                title: format!(
                    "{who}, N = {}: {} s, {:.2}x the fastest N",
                    label(n),
                    fmt_value(s),
                    r
                ),
                flag: None,
            })
        };
        let note = match (t, kn) {
            (Some(t), Some(k)) if k.2 > 0.0 => Some(format!("{:.2}", t.2 / k.2)),
            _ => None,
        };
        groups.push(BarGroup {
            label: label(n),
            bars: vec![
                bar(t, "study"),
                bar(kn, "kernel threads"),
                bar(u, "uthread"),
            ],
            note,
        });
        let cell = |v: Option<(f64, f64, f64)>| -> [String; 2] {
            v.map(|(_, s, r)| [fmt_value(s), format!("{r:.2}")])
                .unwrap_or_else(|| ["-".into(), "-".into()])
        };
        let mut row = vec![label(n)];
        for c in [cell(t), cell(kn), cell(u)] {
            row.extend(c);
        }
        numbers.push(row);
    }
    let chart = BarChart {
        y: Axis::linear("time ÷ the fastest N's time"),
        series: vec![
            BarSeries {
                name: "Core i3 2010s (study)".into(),
                then: true,
            },
            BarSeries {
                name: "kernel threads".into(),
                then: false,
            },
            BarSeries {
                name: "uthread".into(),
                then: false,
            },
        ],
        groups,
        references: Vec::new(),
    };
    let title = "The semaphore throttle: time per N admitted at once, then and now";
    Some(Chart {
        key: "throttle-curve".into(),
        title: title.into(),
        svg: chart.svg(title),
        caption: format!(
            "{} Each curve is divided by its own fastest N; the number above a group is the \
             study's relative time over today's kernel threads' (then/now).{}",
            k.note,
            k.historical
                .as_ref()
                .map(|h| format!(" Study: {}.", h.source))
                .unwrap_or_default()
        ),
        numbers,
    })
}

fn priority(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    if let Some(t) = e.tables.iter().find(|t| t.id == "priority.nice_shares") {
        v.extend(table_bars(
            t,
            "nice-shares",
            "CPU share of the first thread: measured against the kernel's and BeOS's models",
            &[(1, false), (2, false), (3, true)],
            "share of one CPU (%)",
            false,
        ));
    }
    if let Some(t) = e.tables.iter().find(|t| t.id == "priority.uthread_shares") {
        v.extend(table_bars(
            t,
            "uthread-shares",
            "uthread's lottery scheduler against its 2^p model",
            &[(1, false), (2, false)],
            "share of one carrier (%)",
            false,
        ));
    }
    if let Some(t) = e.tables.iter().find(|t| t.id == "priority.frames") {
        v.extend(table_bars(
            t,
            "frames",
            "Interruptions per 60 fps frame beside a low-priority spinner",
            &[(1, false), (2, false), (3, true)],
            "frames (%)",
            false,
        ));
    }
    if v.is_empty() {
        v.extend(metric_bars_by_unit(e, &|_| true));
    }
    v.extend(series_charts(e, &|s| {
        s.id != "priority.frames.interruptions"
    }));
    v
}

fn latency(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    if let Some(t) = e.tables.iter().find(|t| t.id == "latency.gaps") {
        let col = |name: &str| t.header.iter().position(|h| h.starts_with(name));
        if let (Some(per), Some(beos)) = (col("per 256M"), col("BeOS gaps")) {
            v.extend(table_bars(
                t,
                "gaps",
                "Gaps over the threshold per 256 million clock reads: BeOS then, Linux now",
                &[(beos, true), (per, false)],
                "gaps per 256M samples",
                true,
            ));
        }
        if let (Some(longest), Some(beos)) = (col("longest"), col("BeOS longest")) {
            v.extend(table_bars(
                t,
                "longest",
                "The longest gap a clock-reading thread saw: BeOS then, Linux now",
                &[(beos, true), (longest, false)],
                "longest gap (us)",
                true,
            ));
        }
    }
    if v.is_empty() {
        v.extend(then_now(
            e,
            &all_with_history(e),
            "then-now",
            "BeOS then, Linux now",
        ));
    }
    let wake: Vec<DistInput> = e
        .metrics
        .iter()
        .filter(|m| m.id.starts_with("latency.wakeup."))
        .map(|m| {
            let label =
                m.id.trim_start_matches("latency.wakeup.")
                    .trim_end_matches(".lateness")
                    .to_string();
            DistInput {
                label,
                metric: m,
                marks: Vec::new(),
            }
        })
        .collect();
    v.extend(distribution(
        e,
        "wakeup",
        "Wake-up lateness of 1 ms absolute sleeps (cyclictest's method), every sample",
        &wake,
        &[],
    ));
    v.extend(series_charts(e, &|_| true));
    v
}

fn coop(e: &ExperimentResult) -> Vec<Chart> {
    let modes = [
        ("coop_fg_333ms", Some(1)),
        ("coop_fg_1ms", None),
        ("coop_fg_every4096", None),
        ("coop_bg_333ms", Some(2)),
        ("preempt_fg", Some(3)),
        ("preempt_bg", Some(4)),
        ("balance", None),
    ];
    let mac = |col: usize| -> Option<(f64, (f64, f64))> {
        let pick = |r: &(&str, f64, f64, f64, f64)| [r.1, r.2, r.3, r.4][col - 1];
        let quadra = seeds::MAC_SCORES
            .iter()
            .find(|r| r.0 == seeds::MAC_REFERENCE)?;
        let lo = seeds::MAC_SCORES
            .iter()
            .map(pick)
            .fold(f64::INFINITY, f64::min);
        let hi = seeds::MAC_SCORES
            .iter()
            .map(pick)
            .fold(f64::NEG_INFINITY, f64::max);
        Some((pick(quadra), (lo, hi)))
    };
    let mut groups = Vec::new();
    let mut numbers = vec![vec![
        "mode".to_string(),
        format!("Mac ({})", seeds::MAC_REFERENCE),
        "Mac range (9 models)".into(),
        "uthread".into(),
        "kernel".into(),
        "then/now (uthread)".into(),
    ]];
    let mut notes = BTreeSet::new();
    for (mode, col) in modes {
        let u = e.metric(&format!("coop.score.{mode}"));
        let k = e.metric(&format!("coop.score.kernel.{mode}"));
        if u.is_none() && k.is_none() {
            continue;
        }
        for m in [u, k].into_iter().flatten() {
            notes.insert(short_note(&m.note, 200));
        }
        let then = col.and_then(mac);
        let ratio = match (then, u) {
            (Some((t, _)), Some(u)) if u.median > 0.0 => Some(t / u.median),
            _ => None,
        };
        groups.push(BarGroup {
            label: mode.to_string(),
            bars: vec![
                then.map(|(v, r)| Bar {
                    value: v,
                    range: Some(r),
                    title: format!(
                        "{mode}: {} {v:.3} (9 Macs: {:.3} .. {:.3})",
                        seeds::MAC_REFERENCE,
                        r.0,
                        r.1
                    ),
                    flag: None,
                }),
                u.map(|m| metric_bar(m, m.unit, "uthread")),
                k.map(|m| metric_bar(m, m.unit, "kernel")),
            ],
            note: ratio.map(|r| format!("{r:.2}")),
        });
        numbers.push(vec![
            mode.to_string(),
            then.map_or("-".into(), |t| format!("{:.3}", t.0)),
            then.map_or("-".into(), |t| format!("{:.3} .. {:.3}", t.1 .0, t.1 .1)),
            u.map_or("-".into(), |m| format!("{:.3}", m.median)),
            k.map_or("-".into(), |m| format!("{:.3}", m.median)),
            ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        ]);
    }
    let mut v = Vec::new();
    if !groups.is_empty() {
        let title = "The Mac Thread Manager scores, then and now (1.00 = the job never yielding)";
        let chart = BarChart {
            y: Axis::linear("score (time ÷ time never yielding)"),
            series: vec![
                BarSeries {
                    name: format!("Mac 1997 ({}; whisker: 9 models)", seeds::MAC_REFERENCE),
                    then: true,
                },
                BarSeries {
                    name: "uthread, one carrier".into(),
                    then: false,
                },
                BarSeries {
                    name: "kernel threads, one CPU".into(),
                    then: false,
                },
            ],
            groups,
            references: Vec::new(),
        };
        v.push(Chart {
            key: "coop-scores".into(),
            title: title.into(),
            svg: chart.svg(title),
            caption: format!(
                "{} The number above a group is the Mac's score over uthread's (then/now). \
                 Study: {}.",
                notes.into_iter().collect::<Vec<_>>().join(" · "),
                seeds::MAC_1997.citation
            ),
            numbers,
        });
    }
    v.extend(series_charts(e, &|_| true));
    v
}

// ---------------------------------------------------------------------------------------------
// Helpers: each builds one chart (or none when the file has nothing for it).

fn all_with_history(e: &ExperimentResult) -> Vec<&str> {
    e.metrics
        .iter()
        .filter(|m| m.historical.is_some())
        .map(|m| m.id.as_str())
        .collect()
}

/// A key unique in the page: the experiment's name and the chart's, HTML-id safe.
pub(super) fn key(e: &ExperimentResult, what: &str) -> String {
    super::html_id(&format!("{}-{what}", e.name))
}

/// A label for a metric inside its experiment's section: the id without the experiment.
fn short_id<'a>(e: &ExperimentResult, id: &'a str) -> &'a str {
    id.strip_prefix(e.name.as_str())
        .and_then(|s| s.strip_prefix('.'))
        .unwrap_or(id)
}

/// A unit all `metrics` can be shown in: theirs when they share one, else for times the one
/// that keeps the typical value readable; None when they measure different things.
pub(super) fn common_unit(metrics: &[&Metric]) -> Option<Unit> {
    let first = metrics.first()?.unit;
    if metrics.iter().all(|m| m.unit == first) {
        return Some(first);
    }
    if metrics.iter().all(|m| m.unit.is_time()) {
        let mut ns: Vec<f64> = metrics
            .iter()
            .filter_map(|m| m.unit.convert(m.median.abs(), Unit::Ns))
            .collect();
        ns.sort_by(f64::total_cmp);
        let typical = ns.get(ns.len() / 2).copied().unwrap_or(1.0);
        return Some(if typical < 1e3 {
            Unit::Ns
        } else if typical < 1e6 {
            Unit::Us
        } else if typical < 1e9 {
            Unit::Ms
        } else {
            Unit::S
        });
    }
    None
}

pub(super) fn conv(v: f64, from: Unit, to: Unit) -> f64 {
    from.convert(v, to).unwrap_or(f64::NAN)
}

pub(super) fn unit_label(u: Unit) -> String {
    match u {
        Unit::PerS => "per second".into(),
        Unit::Percent => "%".into(),
        u => u.as_str().to_string(),
    }
}

/// A metric's median as a bar with its quartiles as the whisker.
pub(super) fn metric_bar(m: &Metric, to: Unit, who: &str) -> Bar {
    let who = if who.is_empty() {
        String::new()
    } else {
        format!(" ({who})")
    };
    Bar {
        value: conv(m.median, m.unit, to),
        range: (m.samples > 1).then(|| (conv(m.q1, m.unit, to), conv(m.q3, m.unit, to))),
        title: format!(
            "{}{who}: median {}, quartiles {} .. {}, {} samples, {}",
            m.id,
            fmt_with_unit(conv(m.median, m.unit, to), to),
            fmt_value(conv(m.q1, m.unit, to)),
            fmt_value(conv(m.q3, m.unit, to)),
            m.samples,
            m.placement
        ),
        flag: flag_text(m),
    }
}

/// A metric's flags as hover text, None when it has none.
pub(super) fn flag_text(m: &Metric) -> Option<String> {
    (!m.flags.is_empty()).then(|| m.flags.join(", "))
}

/// The distinct first clauses of the metrics' notes: how they were measured.
fn caption_of(metrics: &[&Metric]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for m in metrics {
        let s = short_note(&m.note, 220);
        if !s.is_empty() && !seen.contains(&s) {
            seen.push(s);
        }
    }
    let mut out = String::new();
    for (i, s) in seen.iter().enumerate().take(6) {
        if i > 0 {
            out.push_str(" · ");
        }
        out.push_str(s);
    }
    if seen.len() > 6 {
        out.push_str(" · (the other methods are in the table below)");
    }
    if !out.is_empty() {
        out.push('.');
    }
    out
}

/// Bars of the listed metrics that are in the file, in a common unit, with quartile
/// whiskers. Metrics at or below zero cannot be drawn on a log axis: they are left to the table.
fn bars(e: &ExperimentResult, what: &str, title: &str, ids: &[&str]) -> Option<Chart> {
    let ms: Vec<&Metric> = ids.iter().filter_map(|id| e.metric(id)).collect();
    let unit = common_unit(&ms)?;
    let values: Vec<f64> = ms.iter().map(|m| conv(m.median, m.unit, unit)).collect();
    let log = super::svg::spans_decades(
        &values
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .collect::<Vec<_>>(),
    );
    let shown: Vec<&Metric> = ms
        .iter()
        .copied()
        .filter(|m| !log || m.median > 0.0)
        .collect();
    if shown.is_empty() {
        return None;
    }
    let left_out: Vec<&str> = ms
        .iter()
        .filter(|m| log && m.median <= 0.0)
        .map(|m| m.id.as_str())
        .collect();
    let chart = BarChart {
        y: Axis {
            label: unit_label(unit),
            scale: if log { Scale::Log } else { Scale::Linear },
        },
        series: vec![BarSeries {
            name: "now".into(),
            then: false,
        }],
        groups: shown
            .iter()
            .map(|m| BarGroup {
                label: short_id(e, &m.id).to_string(),
                bars: vec![Some(metric_bar(m, unit, ""))],
                note: None,
            })
            .collect(),
        references: Vec::new(),
    };
    let mut numbers = vec![vec![
        "metric".to_string(),
        format!("median ({})", unit_label(unit)),
        "quartiles".into(),
        "samples".into(),
    ]];
    for m in &ms {
        numbers.push(vec![
            short_id(e, &m.id).to_string(),
            fmt_value(conv(m.median, m.unit, unit)),
            format!(
                "{} .. {}",
                fmt_value(conv(m.q1, m.unit, unit)),
                fmt_value(conv(m.q3, m.unit, unit))
            ),
            m.samples.to_string(),
        ]);
    }
    let mut caption = caption_of(&ms);
    caption.push_str(" Bars: medians; whiskers: quartiles.");
    if !left_out.is_empty() {
        caption.push_str(&format!(
            " Not drawn on this log axis (zero or below): {}.",
            left_out.join(", ")
        ));
    }
    Some(Chart {
        key: key(e, what),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

/// Every metric (that passes `keep`) as bars, one chart per unit, at most 16 bars a chart.
fn metric_bars_by_unit(e: &ExperimentResult, keep: &dyn Fn(&Metric) -> bool) -> Vec<Chart> {
    let mut units: Vec<Unit> = Vec::new();
    for m in e.metrics.iter().filter(|m| keep(m)) {
        if !units.contains(&m.unit) {
            units.push(m.unit);
        }
    }
    let mut v = Vec::new();
    for u in units {
        let ids: Vec<&str> = e
            .metrics
            .iter()
            .filter(|m| keep(m) && m.unit == u)
            .map(|m| m.id.as_str())
            .collect();
        for (i, chunk) in ids.chunks(16).enumerate() {
            let part = if ids.len() > 16 {
                format!(" ({}/{})", i + 1, ids.len().div_ceil(16))
            } else {
                String::new()
            };
            v.extend(bars(
                e,
                &format!("metrics-{}-{i}", u.as_str()),
                &format!("Metrics in {}{part}", unit_label(u)),
                chunk,
            ));
        }
    }
    v
}

/// The study's figures beside today's: two bars per metric, the then/now ratio above.
pub(super) fn then_now(
    e: &ExperimentResult,
    ids: &[&str],
    what: &str,
    title: &str,
) -> Option<Chart> {
    let ms: Vec<&Metric> = ids
        .iter()
        .filter_map(|id| e.metric(id))
        .filter(|m| m.historical.is_some())
        .collect();
    let unit = common_unit(&ms)?;
    let mut groups = Vec::new();
    let mut numbers = vec![vec![
        "metric".to_string(),
        "then".into(),
        "now".into(),
        "then/now".into(),
    ]];
    let mut sources = BTreeSet::new();
    let mut all = Vec::new();
    for m in &ms {
        let h = m.historical.as_ref()?;
        let then = h.unit.convert(h.value, unit);
        sources.insert(h.source.clone());
        let ratio = m.ratio_then_now();
        all.extend(then);
        all.push(conv(m.median, m.unit, unit));
        groups.push(BarGroup {
            label: short_id(e, &m.id).to_string(),
            bars: vec![
                then.map(|t| Bar {
                    value: t,
                    range: None,
                    title: format!(
                        "{}: {} ({})",
                        m.id,
                        fmt_with_unit(h.value, h.unit),
                        seeds::label_of(&h.source)
                    ),
                    flag: None,
                }),
                Some(metric_bar(m, unit, "now")),
            ],
            note: ratio.map(|r| format!("{}x", fmt_value(r))),
        });
        numbers.push(vec![
            short_id(e, &m.id).to_string(),
            format!(
                "{} ({})",
                fmt_with_unit(h.value, h.unit),
                seeds::label_of(&h.source)
            ),
            fmt_with_unit(m.median, m.unit),
            ratio.map_or("-".into(), |r| format!("{}x", fmt_value(r))),
        ]);
    }
    if groups.is_empty() {
        return None;
    }
    let labels: BTreeSet<String> = sources.iter().map(|s| seeds::label_of(s)).collect();
    let chart = BarChart {
        y: Axis::auto(unit_label(unit), &all),
        series: vec![
            BarSeries {
                name: format!(
                    "then ({})",
                    labels.into_iter().collect::<Vec<_>>().join(", ")
                ),
                then: true,
            },
            BarSeries {
                name: "now".into(),
                then: false,
            },
        ],
        groups,
        references: Vec::new(),
    };
    let mut caption = caption_of(&ms);
    caption.push_str(&format!(
        " The number above each pair is then ÷ now. Then: {}.",
        sources.into_iter().collect::<Vec<_>>().join("; ")
    ));
    Some(Chart {
        key: key(e, what),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

/// Bars on a grid: one group per row key, one bar per column key, `id(row, col)` naming the
/// metric; `verdict(row, col)` adds to a bar's hover text.
#[allow(clippy::type_complexity)]
fn grid(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    rows: &[(String, String)],
    cols: &[(String, String)],
    id: &dyn Fn(&str, &str) -> String,
    verdict: Option<&dyn Fn(&str, &str) -> Option<String>>,
) -> Option<Chart> {
    let mut ms: Vec<&Metric> = Vec::new();
    for (r, _) in rows {
        for (c, _) in cols {
            ms.extend(e.metric(&id(r, c)));
        }
    }
    let unit = common_unit(&ms)?;
    let mut numbers = vec![std::iter::once(String::new())
        .chain(cols.iter().map(|c| c.1.clone()))
        .collect::<Vec<_>>()];
    let mut groups = Vec::new();
    let mut all = Vec::new();
    for (r, rl) in rows {
        let mut row = vec![rl.clone()];
        let bars: Vec<Option<Bar>> = cols
            .iter()
            .map(|(c, cl)| {
                let m = e.metric(&id(r, c));
                row.push(m.map_or("-".into(), |m| fmt_with_unit(m.median, m.unit)));
                m.map(|m| {
                    all.push(conv(m.median, m.unit, unit));
                    let mut b = metric_bar(m, unit, cl);
                    if let Some(v) = verdict.and_then(|f| f(r, c)) {
                        b.title.push_str(&format!("; {v}"));
                    }
                    b
                })
            })
            .collect();
        if bars.iter().any(|b| b.is_some()) {
            groups.push(BarGroup {
                label: rl.clone(),
                bars,
                note: None,
            });
            numbers.push(row);
        }
    }
    let positive: Vec<f64> = all.iter().copied().filter(|v| *v > 0.0).collect();
    let log = positive.len() == all.len() && super::svg::spans_decades(&positive);
    let chart = BarChart {
        y: Axis {
            label: unit_label(unit),
            scale: if log { Scale::Log } else { Scale::Linear },
        },
        series: cols
            .iter()
            .map(|c| BarSeries {
                name: c.1.clone(),
                then: false,
            })
            .collect(),
        groups,
        references: Vec::new(),
    };
    let mut caption = caption_of(&ms);
    caption.push_str(" Bars: medians; whiskers: quartiles.");
    Some(Chart {
        key: key(e, what),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

/// Every sample of each metric as a dot, with its quartile box; `colour_by` names the row
/// groups that share a colour (a lock keeps its colour across thread counts).
/// One row of a distribution chart: its label, the metric whose samples it draws, and values
/// to mark beside them (in the metric's unit).
struct DistInput<'a> {
    label: String,
    metric: &'a Metric,
    marks: Vec<(f64, String)>,
}

fn distribution(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    rows: &[DistInput],
    colour_by: &[String],
) -> Option<Chart> {
    let ms: Vec<&Metric> = rows.iter().map(|r| r.metric).collect();
    let unit = common_unit(&ms)?;
    let all: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            r.metric
                .values
                .iter()
                .map(|v| conv(*v, r.metric.unit, unit))
        })
        .collect();
    let colour = |label: &str| {
        colour_by
            .iter()
            .position(|c| label.starts_with(c.as_str()) && label[c.len()..].starts_with(' '))
            .unwrap_or(0)
    };
    let chart = DistChart {
        x: Axis::auto(unit_label(unit), &all),
        rows: rows
            .iter()
            .enumerate()
            .map(
                |(
                    i,
                    DistInput {
                        label,
                        metric: m,
                        marks,
                    },
                )| DistRow {
                    label: label.clone(),
                    values: m.values.iter().map(|v| conv(*v, m.unit, unit)).collect(),
                    colour: if colour_by.is_empty() {
                        i
                    } else {
                        colour(label)
                    },
                    marks: marks
                        .iter()
                        .map(|(v, name)| (conv(*v, m.unit, unit), name.clone()))
                        .collect(),
                },
            )
            .collect(),
        unit: unit_label(unit),
    };
    let mut numbers = vec![vec![
        String::new(),
        "median".into(),
        "quartiles".into(),
        "min .. max".into(),
        "samples".into(),
    ]];
    for DistInput {
        label,
        metric: m,
        marks,
    } in rows
    {
        let mut median = fmt_with_unit(m.median, m.unit);
        for (v, name) in marks {
            median.push_str(&format!(" ({name}: {})", fmt_with_unit(*v, m.unit)));
        }
        numbers.push(vec![
            label.clone(),
            median,
            format!("{} .. {}", fmt_value(m.q1), fmt_value(m.q3)),
            format!("{} .. {}", fmt_value(m.min), fmt_value(m.max)),
            m.samples.to_string(),
        ]);
    }
    let mut caption = caption_of(&ms);
    caption.push_str(" Dots: samples; box: quartiles; line: median; diamond: marked value.");
    Some(Chart {
        key: key(e, what),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

/// The leading number of a table cell ("57.7%", "1044.9 us", "0.733"); None for "-".
fn cell_number(s: &str) -> Option<f64> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|(i, ch)| {
            !(ch.is_ascii_digit() || *ch == '.' || ((*ch == '-' || *ch == '+') && *i == 0))
        })
        .map_or(t.len(), |(i, _)| i);
    t[..end].parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Bars from an experiment's own table: the first column labels the groups, `cols` are
/// (column index, is the study's figure). The column headers name the series. With
/// `then_now`, the study's value over today's first value is written above each group.
fn table_bars(
    t: &Table,
    what: &str,
    title: &str,
    cols: &[(usize, bool)],
    y_label: &str,
    then_now: bool,
) -> Option<Chart> {
    let mut groups = Vec::new();
    let mut all = Vec::new();
    let mut ratios = Vec::new();
    for row in &t.rows {
        let label = row.first()?.clone();
        let value = |then: bool| {
            cols.iter()
                .find(|c| c.1 == then)
                .and_then(|(i, _)| cell_number(row.get(*i)?))
        };
        let ratio = match (value(true), value(false)) {
            (Some(a), Some(b)) if then_now && a > 0.0 && b > 0.0 => Some(a / b),
            _ => None,
        };
        ratios.push(ratio);
        let bars: Vec<Option<Bar>> = cols
            .iter()
            .map(|(i, _)| {
                let v = cell_number(row.get(*i)?)?;
                all.push(v);
                Some(Bar {
                    value: v,
                    range: None,
                    title: format!("{label}: {} {}", t.header.get(*i)?, row.get(*i)?),
                    flag: None,
                })
            })
            .collect();
        if bars.iter().any(|b| b.is_some()) {
            groups.push(BarGroup {
                label,
                bars,
                note: ratio.map(|r| format!("{}x", fmt_value(r))),
            });
        }
    }
    if groups.is_empty() {
        return None;
    }
    let chart = BarChart {
        y: Axis::auto(y_label, &all),
        series: cols
            .iter()
            .map(|(i, then)| BarSeries {
                name: t.header.get(*i).cloned().unwrap_or_default(),
                then: *then,
            })
            .collect(),
        groups,
        references: Vec::new(),
    };
    let mut header: Vec<String> = std::iter::once(t.header.first().cloned().unwrap_or_default())
        .chain(
            cols.iter()
                .map(|(i, _)| t.header.get(*i).cloned().unwrap_or_default()),
        )
        .collect();
    if then_now {
        header.push("then/now".into());
    }
    let mut numbers = vec![header];
    for (row, ratio) in t.rows.iter().zip(&ratios) {
        let mut cells: Vec<String> = std::iter::once(row.first().cloned().unwrap_or_default())
            .chain(
                cols.iter()
                    .map(|(i, _)| row.get(*i).cloned().unwrap_or_default()),
            )
            .collect();
        if then_now {
            cells.push(ratio.map_or("-".into(), |r| format!("{}x", fmt_value(r))));
        }
        numbers.push(cells);
    }
    let mut caption = t.title.clone();
    if !t.note.is_empty() {
        caption.push_str(&format!(" ({})", t.note));
    }
    caption.push('.');
    if then_now {
        caption.push_str(" The number above a group is then ÷ now.");
    }
    Some(Chart {
        key: super::html_id(&format!("{}-{what}", t.id.split('.').next().unwrap_or("t"))),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

/// The series that pass `keep`, one chart per group: series that share their id's last segment
/// and both units are drawn together (`shm.thread.read_time` beside `shm.process.read_time`,
/// one `server.<design>.…` curve per design). Each series' study curve, when it has one in a
/// comparable unit, is drawn dashed beside it.
pub fn series_charts(e: &ExperimentResult, keep: &dyn Fn(&Series) -> bool) -> Vec<Chart> {
    let mut groups: Vec<(String, Vec<&Series>)> = Vec::new();
    for s in e.series.iter().filter(|s| keep(s)) {
        let last = s.id.rsplit('.').next().unwrap_or(&s.id).to_string();
        let k = format!("{last}|{}|{}", s.x_unit, s.y_unit);
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1.push(s),
            None => groups.push((k, vec![s])),
        }
    }
    groups
        .into_iter()
        .map(|(_, ss)| {
            let last = ss[0].id.rsplit('.').next().unwrap_or(&ss[0].id).to_string();
            let title = format!("{} vs {}", ss[0].y_label, ss[0].x_label);
            curve_chart(e, &last, &capitalise(&title), &ss, Vec::new())
        })
        .collect()
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The name of a series inside its group: its id without the experiment and the last segment.
fn series_name(s: &Series) -> String {
    let parts: Vec<&str> = s.id.split('.').collect();
    if parts.len() > 2 {
        parts[1..parts.len() - 1].join(".")
    } else {
        s.y_label.clone()
    }
}

/// Curves of series sharing units, with their study curves and references.
fn curve_chart(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    ss: &[&Series],
    references: Vec<Reference>,
) -> Chart {
    let s0 = ss[0];
    let mut lines = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    let mut seen_then: Vec<(Vec<u64>, Vec<u64>)> = Vec::new();
    for (i, s) in ss.iter().enumerate() {
        lines.push(Line {
            name: series_name(s),
            points: s.x.iter().copied().zip(s.y.iter().copied()).collect(),
            then: false,
            colour: i,
            marker: Marker::nth(i),
            ..Line::default()
        });
        if !s.note.is_empty() && !notes.contains(&s.note) {
            notes.push(s.note.clone());
        }
        if let Some(h) = &s.historical {
            // The same study curve attached to several series is drawn once.
            let sig = (
                h.x.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                h.y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            );
            if seen_then.contains(&sig) {
                continue;
            }
            seen_then.push(sig);
            if let Some(pts) =
                h.x.iter()
                    .zip(&h.y)
                    .map(|(x, y)| h.y_unit.convert(*y, s.y_unit).map(|y| (*x, y)))
                    .collect::<Option<Vec<_>>>()
            {
                lines.push(Line {
                    name: format!("then: {}", seeds::label_of(&h.source)),
                    points: pts,
                    then: true,
                    colour: 0,
                    ..Line::default()
                });
                sources.push(h.source.clone());
            }
        }
    }
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(references.iter().map(|r| r.y))
        .collect();
    let x_label = format!("{} ({})", s0.x_label, unit_label(s0.x_unit));
    let y_label = format!("{} ({})", s0.y_label, unit_label(s0.y_unit));
    let chart = LineChart {
        x: if s0.x_unit == Unit::Bytes {
            Axis::bytes(x_label, &xs)
        } else {
            Axis::auto(x_label, &xs)
        },
        y: Axis::auto(y_label, &ys),
        lines,
        references,
        x_unit: unit_label(s0.x_unit),
        y_unit: unit_label(s0.y_unit),
        keys: Vec::new(),
        annotations: Vec::new(),
    };
    // Numbers: x down the side, one column per curve.
    let mut xs_sorted: Vec<f64> = ss.iter().flat_map(|s| s.x.iter().copied()).collect();
    xs_sorted.sort_by(f64::total_cmp);
    xs_sorted.dedup();
    let mut numbers = vec![std::iter::once(unit_label(s0.x_unit))
        .chain(chart.lines.iter().map(|l| l.name.clone()))
        .collect::<Vec<_>>()];
    for x in &xs_sorted {
        let xl = if s0.x_unit == Unit::Bytes {
            super::svg::fmt_bytes(*x)
        } else if *x == x.trunc() && x.abs() < 1e15 {
            format!("{}", *x as i64)
        } else {
            fmt_value(*x)
        };
        let mut row = vec![xl];
        for l in &chart.lines {
            row.push(
                l.points
                    .iter()
                    .find(|p| p.0 == *x)
                    .map_or("-".into(), |p| fmt_value(p.1)),
            );
        }
        numbers.push(row);
    }
    let mut caption = notes.join(" · ");
    if !sources.is_empty() {
        caption.push_str(&format!(" · Then: {}.", sources.join("; ")));
    }
    Chart {
        key: key(e, what),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_cells_give_their_leading_number() {
        assert_eq!(cell_number("57.7%"), Some(57.7));
        assert_eq!(cell_number("1044.9 us"), Some(1044.9));
        assert_eq!(cell_number("-"), None);
        assert_eq!(cell_number("-3.5"), Some(-3.5));
        assert_eq!(cell_number("5+"), Some(5.0));
        assert_eq!(cell_number(""), None);
    }

    #[test]
    fn an_experiment_its_function_knows_nothing_of_gets_the_generic_charts() {
        // A server experiment of other ids than the server function draws (an older or a
        // hand-made file): its series as curves, one per design, and its metrics as bars.
        let series = |design: &str, y: f64| Series {
            id: format!("server.{design}.response_vs_size"),
            x_label: "request size".into(),
            x_unit: Unit::Bytes,
            y_label: "response time".into(),
            y_unit: Unit::Us,
            x: vec![1024.0, 65536.0, 1048576.0],
            y: vec![y, y * 2.0, y * 40.0],
            note: "n".into(),
            historical: None,
        };
        let e = ExperimentResult {
            name: "server".into(),
            study: "s".into(),
            study_label: "l".into(),
            status: crate::results::Status::Ok,
            reason: None,
            wall_s: 1.0,
            metrics: vec![Metric::single(
                "server.epoll.p99_us",
                Unit::Us,
                5.0,
                "p",
                "n",
            )],
            series: vec![series("epoll", 10.0), series("thread_per_client", 12.0)],
            skipped_metrics: vec![],
            tables: vec![],
            conclusion: None,
            attempts: vec![],
            drift_note: None,
        };
        let c = charts(&e);
        assert_eq!(c.len(), 2, "one chart of curves, one of metrics");
        assert!(c[0].svg.contains(">epoll<") && c[0].svg.contains(">thread_per_client<"));
        assert_eq!(c[0].numbers[0], ["bytes", "epoll", "thread_per_client"]);
    }

    #[test]
    fn every_time_unit_mix_has_a_common_unit() {
        let a = Metric::single("a", Unit::Ns, 5.0, "p", "n");
        let b = Metric::single("b", Unit::Us, 20.0, "p", "n");
        let a2 = Metric::single("a2", Unit::Ns, 7.0, "p", "n");
        assert_eq!(common_unit(&[&a, &a2, &b]), Some(Unit::Ns));
        assert_eq!(common_unit(&[&b, &b, &a]), Some(Unit::Us));
        let c = Metric::single("c", Unit::Percent, 5.0, "p", "n");
        assert_eq!(common_unit(&[&a, &c]), None);
        assert_eq!(common_unit(&[]), None);
    }
}
