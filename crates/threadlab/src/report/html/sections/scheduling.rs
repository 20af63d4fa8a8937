//! Scheduling: preemption's lost throughput, the semaphore throttle's curve, priority shares against their models, BeOS latencies, cooperative vs preemptive.

use super::*;
use crate::report::html::parts::key;
use crate::results::ids::{latency, preempt, priority, throttle};

pub(super) fn preempt(e: &ExperimentResult) -> Vec<Chart> {
    let mut v: Vec<Chart> = then_now(
        e,
        &all_with_history(e),
        "then-now",
        "One timer interruption, then (Mach 3.0) and now",
    )
    .into_iter()
    .collect();
    v.extend(series_charts(e, &|_| true));
    if let Some(c) = v
        .iter_mut()
        .find(|c| c.key == key(e, preempt::THROUGHPUT_LOSS))
    {
        c.title = "Throughput lost vs quantum (preemptive against cooperative)".into();
    }
    v.extend(bars(
        e,
        "paths",
        "The ways to interrupt a thread today",
        &id_refs(
            &[
                preempt::TIMER_SIGNAL,
                preempt::TIMER_LATENCY,
                preempt::SIGNAL_ROUNDTRIP,
                preempt::GREEN_SWITCH,
                preempt::POLL_FLAG_LATENCY,
                preempt::POLL_FLAG,
                preempt::POLL_FLAG_CHAIN,
            ]
            .map(preempt::id),
        ),
    ));
    v
}

pub(super) fn throttle(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    let curve = |scheduler: &str| {
        let id = throttle::of(scheduler, throttle::TIME_VS_N);
        e.series.iter().find(|s| s.id == id)
    };
    let (kernel, green) = (curve(throttle::KERNEL), curve(throttle::UTHREAD));
    if let Some(k) = kernel {
        v.extend(throttle_curve(k, green));
    }
    v.extend(then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Best N and the cost of no throttle, then and now",
    ));
    v.extend(series_charts(e, &|s| {
        !ids::ends_in(&s.id, throttle::TIME_VS_N)
    }));
    v
}

/// The semaphore throttle: time per N relative to the fastest N, study beside today (the
/// study summed 1,500 times more numbers, so seconds cannot be set side by side).
pub(super) fn throttle_curve(k: &Series, green: Option<&Series>) -> Option<Chart> {
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

pub(super) fn priority(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    let table = |name: &str| {
        let id = priority::id(name);
        e.tables.iter().find(|t| t.id == id)
    };
    if let Some(t) = table(priority::NICE_SHARES) {
        v.extend(table_bars(
            t,
            "nice-shares",
            "CPU share of the first thread: measured against the kernel's and BeOS's models",
            &[(1, false), (2, false), (3, true)],
            "share of one CPU (%)",
            false,
        ));
    }
    if let Some(t) = table(priority::UTHREAD_SHARES) {
        v.extend(table_bars(
            t,
            "uthread-shares",
            "uthread's lottery scheduler against its 2^p model",
            &[(1, false), (2, false)],
            "share of one carrier (%)",
            false,
        ));
    }
    if let Some(t) = table(priority::FRAMES) {
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
    let interruptions = priority::id(priority::FRAMES_INTERRUPTIONS);
    v.extend(series_charts(e, &|s| s.id != interruptions));
    v
}

pub(super) fn latency(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = Vec::new();
    let gaps = latency::id(latency::GAPS);
    if let Some(t) = e.tables.iter().find(|t| t.id == gaps) {
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
        .filter_map(|m| {
            Some(DistInput {
                label: latency::wakeup_case(&m.id)?.to_string(),
                metric: m,
                marks: Vec::new(),
            })
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

pub(super) fn coop(e: &ExperimentResult) -> Vec<Chart> {
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
