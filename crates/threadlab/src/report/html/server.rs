//! The server experiment's section: the PThreads study's Figs. 4 and 5 redrawn beside today's
//! designs, the fork/thread ratio then and now, the latency percentile spectrum at the
//! open-loop point (from the stored HdrHistograms), and per design the server CPU per request,
//! the blocking-work p99, the memory per connection and the capacity at the latency target.
//!
//! Designs are whatever `server.<design>.…` ids the file holds, in the order first seen, the
//! study's two (thread_per_client, fork_per_client) first: a design added later (`green`)
//! appears in every chart with no change here. Every figure carrying flags (`client_bound`,
//! `saturated`, ...) is drawn marked, and its flags are named on hover and in the numbers.

use base64::Engine;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use super::sections::{common_unit, conv, flag_text, key, metric_bar, unit_label};
use super::svg::{
    nines, Annotation, Axis, BarChart, BarGroup, BarSeries, Dash, Key, Line, LineChart, Marker,
    Reference, Scale, THEN,
};
use super::Chart;
use crate::measure::units::Unit;
use crate::report::{fmt_value, fmt_with_unit};
use crate::results::{ExperimentResult, Metric, SerializedHistogram};
use crate::seeds;

/// The two servers the study compared, drawn bold in its figures.
pub const THREAD: &str = "thread_per_client";
pub const FORK: &str = "fork_per_client";

/// The encoding `SerializedHistogram::encoding` names for HdrHistogram V2 + DEFLATE, base64.
pub const HDR_ENCODING: &str = "hdr-v2-deflate-base64";

/// A serialized histogram larger than this (base64 characters) is not decoded: the server
/// experiment's are a few kilobytes, and a page must not stall on a hostile file.
const MAX_ENCODED: usize = 8 << 20;

/// The server experiment's charts, in the order the section shows them.
pub fn charts(e: &ExperimentResult) -> Vec<Chart> {
    let designs = designs(e);
    if designs.is_empty() {
        return Vec::new();
    }
    let mut v = Vec::new();
    v.extend(figure(e, &designs, false));
    v.extend(figure(e, &designs, true));
    v.extend(fork_ratio(e));
    v.extend(first_vs_rest(e, &designs));
    v.extend(spectrum(e, &designs));
    let flags_note = |ms: &[&Metric]| flag_caption(ms);
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "cpu",
            title: "Server CPU per request at the open-loop point",
            series: &[("cpu_per_request", "server CPU per reply")],
            extra: &[
                ("switches_per_request", "switches per reply"),
                (
                    "vs_thread_per_client.cpu_per_request",
                    "÷ thread_per_client",
                ),
            ],
            references: Vec::new(),
        },
        &flags_note,
    ));
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "block",
            title: "Blocking work: p99 latency when every request blocks the server",
            series: &[("block.p99", "p99 from the planned send")],
            extra: &[("block.achieved", "replies per second")],
            references: blocking_reference(e),
        },
        &flags_note,
    ));
    let conns = |suffix: &str| {
        designs
            .iter()
            .find_map(|d| e.metric(&format!("server.{d}.{suffix}")))
            .map(|m| format!(" ({} connections)", fmt_num(m.median)))
            .unwrap_or_default()
    };
    let (open, scale) = (
        format!("at the open-loop point{}", conns("connections")),
        format!("at connection scale{}", conns("c10k.connections")),
    );
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "memory",
            title: "Memory per connection held",
            series: &[
                ("rss_per_connection", open.as_str()),
                ("c10k.rss_per_connection", scale.as_str()),
            ],
            extra: &[("threads", "threads"), ("processes", "processes")],
            references: Vec::new(),
        },
        &flags_note,
    ));
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "capacity",
            title: "Capacity at the latency target, and goodput offered 1.5 x that",
            series: &[
                ("capacity", "capacity (p99 within the target)"),
                ("overload.goodput", "goodput offered 1.5 x capacity"),
            ],
            extra: &[
                ("overload.p99", "p99 overloaded"),
                ("overload.rejected", "answered BUSY"),
            ],
            references: Vec::new(),
        },
        &flags_note,
    ));
    v
}

// ---------------------------------------------------------------------------------------------
// Designs and ids.

/// The designs of the file: the second segment of every `server.<design>.<…>` id (not the
/// generator's), the study's two first, the others in the order first seen.
pub fn designs(e: &ExperimentResult) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for m in &e.metrics {
        let mut p = m.id.split('.');
        if p.next() != Some("server") {
            continue;
        }
        let (Some(d), Some(_)) = (p.next(), p.next()) else {
            continue;
        };
        if d != "generator" && !d.is_empty() && !v.iter().any(|x| x == d) {
            v.push(d.to_string());
        }
    }
    let study = |d: &String| match d.as_str() {
        THREAD => 0,
        FORK => 1,
        _ => 2,
    };
    v.sort_by_key(study); // stable: the others keep their order
    v
}

/// The metric `server.<design>.<suffix>`.
pub fn design_metric<'a>(
    e: &'a ExperimentResult,
    design: &str,
    suffix: &str,
) -> Option<&'a Metric> {
    e.metric(&format!("server.{design}.{suffix}"))
}

/// "64b" -> 64, "1kib" -> 1024, "2mib" -> 2 MiB.
fn parse_size(s: &str) -> Option<f64> {
    let (num, mult) = if let Some(n) = s.strip_suffix("kib") {
        (n, 1024.0)
    } else if let Some(n) = s.strip_suffix("mib") {
        (n, 1024.0 * 1024.0)
    } else if let Some(n) = s.strip_suffix('b') {
        (n, 1.0)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|n| n * mult)
}

/// One of the study's rows: `server.<design>[.same_cpu].<short|long>.<size>.mean`.
struct StudyRow<'a> {
    design: usize,
    same_cpu: bool,
    bytes: f64,
    metric: &'a Metric,
}

fn study_rows<'a>(e: &'a ExperimentResult, designs: &[String], long: bool) -> Vec<StudyRow<'a>> {
    let kind = if long { "long" } else { "short" };
    let mut rows = Vec::new();
    for m in &e.metrics {
        let p: Vec<&str> = m.id.split('.').collect();
        let (d, same, rest) = match p.as_slice() {
            ["server", d, "same_cpu", rest @ ..] => (*d, true, rest),
            ["server", d, rest @ ..] => (*d, false, rest),
            _ => continue,
        };
        let [k, size, "mean"] = rest else { continue };
        if *k != kind {
            continue;
        }
        let (Some(design), Some(bytes)) = (designs.iter().position(|x| x == d), parse_size(size))
        else {
            continue;
        };
        rows.push(StudyRow {
            design,
            same_cpu: same,
            bytes,
            metric: m,
        });
    }
    rows
}

/// A number for the tables: whole numbers without decimals (16 connections, 3 threads).
fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else {
        fmt_value(v)
    }
}

/// A metric's median with its unit, whole counts without decimals.
fn fmt_metric(m: &Metric) -> String {
    match m.unit {
        Unit::Count | Unit::Threads => fmt_num(m.median),
        u => fmt_with_unit(m.median, u),
    }
}

/// A metric's method without its flags prefix, cut at the first "; " (and to `max` chars).
fn method(m: &Metric, max: usize) -> String {
    let note = super::note_body(m);
    let cut = note.split("; ").next().unwrap_or(note).trim();
    if cut.chars().count() <= max {
        cut.to_string()
    } else {
        format!(
            "{}…",
            cut.chars().take(max - 1).collect::<String>().trim_end()
        )
    }
}

/// What each flag means, for captions and the first things to know.
pub fn flag_meaning(flag: &str) -> &'static str {
    match flag {
        "client_bound" => {
            "the load generator may have held the load back (busy, lagging its plan, or near \
             its own ceiling)"
        }
        "listen_overflow" => "the kernel's accept queue overflowed during the step",
        "saturated" => {
            "the server fell behind the plan: the step was cut short or under 97% of the \
             planned requests were answered"
        }
        "errors" => "the client saw failures (connect, reset, a wrong reply)",
        "little_law_mismatch" => {
            "throughput x latency did not match the requests in flight (Little's law) within 10%"
        }
        _ => "see the metric's note",
    }
}

/// The caption's sentence on flags, naming only those present on the chart's metrics.
fn flag_caption(ms: &[&Metric]) -> String {
    let mut flags: Vec<&str> = Vec::new();
    for m in ms {
        for f in &m.flags {
            if !flags.contains(&f.as_str()) {
                flags.push(f);
            }
        }
    }
    if flags.is_empty() {
        return String::new();
    }
    format!(
        " Pale bars with a dashed outline and a ! above carry flags (named on hover and in the \
         table): {}.",
        flags
            .iter()
            .map(|f| format!("{f}: {}", flag_meaning(f)))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

// ---------------------------------------------------------------------------------------------
// Figs. 4 and 5.

fn placement_of<'a>(rows: &[StudyRow<'a>], same: bool) -> Option<&'a str> {
    rows.iter()
        .find(|r| r.same_cpu == same)
        .map(|r| r.metric.placement.as_str())
}

/// Response time against request size, one curve per design and placement: Fig. 4 (short
/// connections) or Fig. 5 (long), the study's stated points beside them.
fn figure(e: &ExperimentResult, designs: &[String], long: bool) -> Option<Chart> {
    let rows = study_rows(e, designs, long);
    if rows.is_empty() {
        return None;
    }
    let unit = common_unit(&rows.iter().map(|r| r.metric).collect::<Vec<_>>())?;
    let mut sizes: Vec<f64> = rows.iter().map(|r| r.bytes).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let mut lines = Vec::new();
    let mut numbers = vec![std::iter::once("design, client".to_string())
        .chain(sizes.iter().map(|b| super::svg::fmt_bytes(*b)))
        .collect::<Vec<_>>()];
    let (across, same) = (placement_of(&rows, false), placement_of(&rows, true));
    for (di, d) in designs.iter().enumerate() {
        for same_cpu in [false, true] {
            let mut pts: Vec<&StudyRow> = rows
                .iter()
                .filter(|r| r.design == di && r.same_cpu == same_cpu)
                .collect();
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.bytes.total_cmp(&b.bytes));
            let where_ = if same_cpu { "same CPU" } else { "another CPU" };
            let study = d == THREAD || d == FORK;
            let listed_apart = rows.iter().any(|r| r.design == di && !r.same_cpu);
            lines.push(Line {
                name: d.clone(),
                points: pts
                    .iter()
                    .map(|r| (r.bytes, conv(r.metric.median, r.metric.unit, unit)))
                    .collect(),
                colour: di,
                marker: Marker::nth(di),
                dash: if same_cpu { Dash::Dotted } else { Dash::Solid },
                hollow: same_cpu,
                light: !study,
                // The legend names each design once; the keys say what dotted means.
                unlisted: same_cpu && listed_apart,
                titles: pts
                    .iter()
                    .map(|r| {
                        let m = r.metric;
                        format!(
                            "{d}, client on {where_} ({}), {}: median {}, quartiles {} .. {}, {} samples",
                            m.placement,
                            super::svg::fmt_bytes(r.bytes),
                            fmt_with_unit(conv(m.median, m.unit, unit), unit),
                            fmt_value(conv(m.q1, m.unit, unit)),
                            fmt_value(conv(m.q3, m.unit, unit)),
                            m.samples
                        )
                    })
                    .collect(),
                ..Line::default()
            });
            let mut row = vec![format!("{d}, {where_}")];
            for b in &sizes {
                row.push(pts.iter().find(|r| r.bytes == *b).map_or("-".into(), |r| {
                    fmt_value(conv(r.metric.median, r.metric.unit, unit))
                }));
            }
            numbers.push(row);
        }
    }
    // The study's points: Fig. 4's series carry them with their size; otherwise the metric's
    // own historical figure at the metric's size.
    let mut annotations = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    if !long {
        for (di, d) in designs.iter().enumerate() {
            let series = e.series.iter().find(|s| {
                s.id.starts_with("server.fig4.") && s.id.rsplit('.').next() == Some(d.as_str())
            });
            // (x, the figure in the chart's unit, its source, the figure as the study gave it)
            let from_series = series.and_then(|s| {
                let h = s.historical.as_ref()?;
                let (x, y) = (*h.x.first()?, *h.y.first()?);
                Some((x, h.y_unit.convert(y, unit)?, h.source.clone(), y, h.y_unit))
            });
            let from_metric = || {
                rows.iter()
                    .filter(|r| r.design == di && !r.same_cpu)
                    .find_map(|r| {
                        let h = r.metric.historical.as_ref()?;
                        Some((
                            r.bytes,
                            h.unit.convert(h.value, unit)?,
                            h.source.clone(),
                            h.value,
                            h.unit,
                        ))
                    })
            };
            let Some((x, y, source, value, vunit)) = from_series.or_else(from_metric) else {
                continue;
            };
            let label = seeds::label_of(&source);
            annotations.push(Annotation {
                x,
                y,
                text: format!("{label}: {d} {}", fmt_with_unit(value, vunit)),
                title: format!(
                    "{d}: {} at {} bytes ({source})",
                    fmt_with_unit(value, vunit),
                    fmt_value(x)
                ),
            });
            let mut row = vec![format!("{d}, {label}")];
            for b in &sizes {
                row.push(if (b - x).abs() / x < 0.05 {
                    fmt_value(y)
                } else {
                    "-".into()
                });
            }
            numbers.push(row);
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
    }
    let mut keys = Vec::new();
    if let Some(p) = across {
        keys.push(Key {
            name: format!("solid: client on another CPU ({p})"),
            colour: THEN,
            marker: Some((Marker::Circle, false)),
            ..Key::default()
        });
    }
    if let Some(p) = same {
        keys.push(Key {
            name: format!("dotted, hollow: client on the server's CPU ({p})"),
            colour: THEN,
            dash: Dash::Dotted,
            marker: Some((Marker::Circle, true)),
            ..Key::default()
        });
    }
    let xs: Vec<f64> = rows
        .iter()
        .map(|r| r.bytes)
        .chain(annotations.iter().map(|a| a.x))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(annotations.iter().map(|a| a.y))
        .collect();
    let (title, what, y_label) = if long {
        (
            "Fig. 5 redrawn: time per request on a long connection vs request size",
            "fig5",
            format!("time per request, long connection ({})", unit_label(unit)),
        )
    } else {
        (
            "Fig. 4 redrawn: time per short connection vs request size, then and now",
            "fig4",
            format!("time per short connection ({})", unit_label(unit)),
        )
    };
    let chart = LineChart {
        // Sizes are powers of two: a binary log axis whatever their span.
        x: Axis {
            label: "request size (bytes, log scale)".into(),
            scale: if xs.iter().all(|x| *x > 0.0) {
                Scale::LogBytes
            } else {
                Scale::Linear
            },
        },
        y: Axis::auto(y_label, &ys),
        lines,
        references: Vec::new(),
        x_unit: "bytes".into(),
        y_unit: unit_label(unit),
        keys,
        annotations,
    };
    // How it was measured: the first design's note (the study's thread server when present),
    // which every design shares but for its name.
    let rep = rows
        .iter()
        .find(|r| r.design == 0 && !r.same_cpu)
        .or(rows.first())
        .map(|r| r.metric)?;
    let samples = rows.iter().map(|r| r.metric.samples).max().unwrap_or(0);
    let mut caption = format!(
        "How measured (every design alike): {}. Points: medians of up to {samples} samples, \
         every design's rows sampled interleaved round by round; hover for quartiles. {} and {} \
         (the study's two servers) are drawn bold, the other designs pale.",
        super::note_body(rep).trim_end_matches('.'),
        THREAD,
        FORK
    );
    if across.is_some() && same.is_some() {
        caption.push_str(
            " Solid lines, filled markers: the client on another CPU than the server (the study \
             used two machines); dotted lines, hollow markers: on the server's CPU.",
        );
    }
    if long {
        caption.push_str(
            " The study gives no values for Fig. 5, only that the thread and fork servers \
             converge once a connection carries many requests; the fork/thread ratio chart \
             below puts that beside today's.",
        );
    } else if !sources.is_empty() {
        caption.push_str(&format!(
            " Grey diamonds: the study's figures; its text states only this one point of Fig. \
             4 ({}).",
            sources.join("; ")
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

// ---------------------------------------------------------------------------------------------
// fork / thread.

/// fork_per_client over thread_per_client per pattern and size, both placements, beside the
/// study's 4.7 / 4.0 for a 1 KB short connection.
fn fork_ratio(e: &ExperimentResult) -> Option<Chart> {
    // server.fork_per_client.vs_thread.[same_cpu.]<short|long>.<size>
    let mut cells: Vec<(bool, f64, String, bool, &Metric)> = Vec::new();
    for m in &e.metrics {
        let Some(rest) = m.id.strip_prefix("server.fork_per_client.vs_thread.") else {
            continue;
        };
        let (same, rest) = match rest.strip_prefix("same_cpu.") {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let Some((kind, size)) = rest.split_once('.') else {
            continue;
        };
        let (Some(bytes), true) = (parse_size(size), kind == "short" || kind == "long") else {
            continue;
        };
        cells.push((kind == "long", bytes, size.to_string(), same, m));
    }
    if cells.is_empty() {
        return None;
    }
    let mut groups_k: Vec<(bool, f64)> = cells.iter().map(|c| (c.0, c.1)).collect();
    groups_k.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    groups_k.dedup();
    let any_same = cells.iter().any(|c| c.3);
    let any_across = cells.iter().any(|c| !c.3);
    let mut series = vec![BarSeries {
        name: format!("then ({})", seeds::PTHREADS_1999.label),
        then: true,
    }];
    if any_across {
        series.push(BarSeries {
            name: "now, client on another CPU".into(),
            then: false,
        });
    }
    if any_same {
        series.push(BarSeries {
            name: "now, client on the server's CPU".into(),
            then: false,
        });
    }
    let mut numbers = vec![vec![
        "connection".to_string(),
        "then".into(),
        "now, another CPU".into(),
        "now, same CPU".into(),
    ]];
    let mut groups = Vec::new();
    let mut sources = Vec::new();
    for (long, bytes) in groups_k {
        let find = |same: bool| {
            cells
                .iter()
                .find(|c| c.0 == long && c.1 == bytes && c.3 == same)
                .map(|c| c.4)
        };
        let label = format!(
            "{} {}",
            if long { "long" } else { "short" },
            super::svg::fmt_bytes(bytes)
        );
        let (a, s) = (find(false), find(true));
        let then = a.or(s).and_then(|m| m.historical.as_ref()).and_then(|h| {
            if !sources.contains(&h.source) {
                sources.push(h.source.clone());
            }
            h.unit.convert(h.value, Unit::Ratio)
        });
        let mut bars = vec![then.map(|t| super::svg::Bar {
            value: t,
            range: None,
            title: format!("{label}: {t:.3} ({})", seeds::PTHREADS_1999.label),
            flag: None,
        })];
        if any_across {
            bars.push(a.map(|m| metric_bar(m, Unit::Ratio, "another CPU")));
        }
        if any_same {
            bars.push(s.map(|m| metric_bar(m, Unit::Ratio, "same CPU")));
        }
        numbers.push(vec![
            label.clone(),
            then.map_or("-".into(), |t| format!("{t:.3}x")),
            a.map_or("-".into(), |m| fmt_with_unit(m.median, m.unit)),
            s.map_or("-".into(), |m| fmt_with_unit(m.median, m.unit)),
        ]);
        groups.push(BarGroup {
            label,
            bars,
            note: None,
        });
    }
    let all: Vec<f64> = cells.iter().map(|c| c.4.median).collect();
    let chart = BarChart {
        y: Axis::auto("fork_per_client ÷ thread_per_client", &all),
        series,
        groups,
        references: vec![Reference {
            name: "1 = forking costs nothing more".into(),
            y: 1.0,
            x_from: None,
            x_to: None,
        }],
    };
    let title = "Fork per client over thread per client, then and now";
    let ms: Vec<&Metric> = cells.iter().map(|c| c.4).collect();
    let mut caption = format!(
        "Each ratio is fork_per_client's time over thread_per_client's, round by round of the \
         interleaved sampling (bars: medians; whiskers: quartiles). The study found {:.2}x for a \
         1 KB short connection (4.7 ms / 4.0 ms, Fig. 4) and that the two converge on long \
         connections (Fig. 5, no values given: the dashed line at 1).",
        4.7 / 4.0
    );
    if !sources.is_empty() {
        caption.push_str(&format!(" Then: {}.", sources.join("; ")));
    }
    caption.push_str(&flag_caption(&ms));
    Some(Chart {
        key: key(e, "fork-ratio"),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

/// Fig. 5's example ("10K ... took 1.469 us first time, but then ... around 0.45 us"): the
/// first request of a long connection over the rest, per design. The study printed "us"
/// beside Fig. 4's milliseconds, so only the ratio of its two figures is unambiguous.
fn first_vs_rest(e: &ExperimentResult, designs: &[String]) -> Option<Chart> {
    let mut groups = Vec::new();
    let mut numbers = vec![vec![
        "design".to_string(),
        "first".into(),
        "the rest".into(),
        "first ÷ rest".into(),
        "then: first, rest".into(),
        "then: first ÷ rest".into(),
    ]];
    let mut firsts: Vec<&Metric> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    let mut all = Vec::new();
    for d in designs {
        let prefix = format!("server.{d}.");
        let Some(first) = e
            .metrics
            .iter()
            .find(|m| m.id.starts_with(&prefix) && m.id.ends_with(".first"))
        else {
            continue;
        };
        let Some(rest) = e.metric(&format!("{}.rest", first.id.trim_end_matches(".first"))) else {
            continue;
        };
        let now = match rest.unit.convert(rest.median, first.unit) {
            Some(r) if r > 0.0 => first.median / r,
            _ => continue,
        };
        let then = match (&first.historical, &rest.historical) {
            (Some(a), Some(b)) => b
                .unit
                .convert(b.value, a.unit)
                .filter(|r| *r > 0.0)
                .map(|r| (a.value / r, a, b)),
            _ => None,
        };
        if let Some((_, a, _)) = then {
            if !sources.contains(&a.source) {
                sources.push(a.source.clone());
            }
        }
        all.push(now);
        all.extend(then.map(|t| t.0));
        firsts.push(first);
        let size = first
            .id
            .split('.')
            .find_map(parse_size)
            .map_or(String::new(), |b| format!(", {}", super::svg::fmt_bytes(b)));
        groups.push(BarGroup {
            label: d.clone(),
            bars: vec![
                then.map(|(r, a, b)| super::svg::Bar {
                    value: r,
                    range: None,
                    title: format!(
                        "{d}{size}, {}: first {} then {} as printed, {r:.2}x",
                        seeds::label_of(&a.source),
                        fmt_with_unit(a.value, a.unit),
                        fmt_with_unit(b.value, b.unit)
                    ),
                    flag: None,
                }),
                Some(super::svg::Bar {
                    value: now,
                    range: None,
                    title: format!(
                        "{d}{size}, now: first {} (median of {}), the rest {} per request, {now:.2}x",
                        fmt_with_unit(first.median, first.unit),
                        first.samples,
                        fmt_with_unit(rest.median, rest.unit)
                    ),
                    flag: flag_text(first).or_else(|| flag_text(rest)),
                }),
            ],
            note: None,
        });
        numbers.push(vec![
            d.clone(),
            fmt_with_unit(first.median, first.unit),
            fmt_with_unit(rest.median, rest.unit),
            format!("{now:.2}x"),
            then.map_or("-".into(), |(_, a, b)| {
                format!(
                    "{}, {}",
                    fmt_with_unit(a.value, a.unit),
                    fmt_with_unit(b.value, b.unit)
                )
            }),
            then.map_or("-".into(), |(r, _, _)| format!("{r:.2}x")),
        ]);
    }
    if groups.is_empty() {
        return None;
    }
    let chart = BarChart {
        y: Axis::auto("first request ÷ each later one", &all),
        series: vec![
            BarSeries {
                name: format!("then ({}, as printed)", seeds::PTHREADS_1999.label),
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
    let title = "Fig. 5's example: the first request of a long connection against the rest";
    let mut caption = format!(
        "{} · {}. The study printed its example in \"us\" (1.469 first, then about 0.45) \
         beside Fig. 4's 4 ms per 1 KB connection, so its figures read as ms; their ratio does \
         not depend on the unit, and is what is drawn.",
        method(firsts[0], 300),
        e.metric(&format!("{}.rest", firsts[0].id.trim_end_matches(".first")))
            .map(|m| method(m, 200))
            .unwrap_or_default()
    );
    if !sources.is_empty() {
        caption.push_str(&format!(" Then: {}.", sources.join("; ")));
    }
    caption.push_str(&flag_caption(&firsts));
    Some(Chart {
        key: key(e, "fig5-example"),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

// ---------------------------------------------------------------------------------------------
// The percentile spectrum.

/// Decodes a stored histogram (HdrHistogram V2 + DEFLATE, base64); None when the encoding is
/// another, the text is not base64 or the bytes are not a histogram.
pub fn decode(h: &SerializedHistogram) -> Option<Histogram<u64>> {
    if h.encoding != HDR_ENCODING || h.data.len() > MAX_ENCODED {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(h.data.as_bytes())
        .ok()?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).ok()
}

/// The percentiles a spectrum is drawn at, as far as the number of values supports.
const QUANTILES: [f64; 13] = [
    0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 0.999995, 0.999999,
];

/// A point of a spectrum: its place on the nines axis, the value, what it is ("p99.9").
#[derive(Debug, Clone, PartialEq)]
pub struct SpectrumPoint {
    pub x: f64,
    pub value: f64,
    pub what: String,
}

/// The percentile spectrum of a histogram in `to`: every listed quantile up to 1 - 1/n (the
/// largest n values can tell apart), then the maximum at 1 - 1/n.
pub fn spectrum_points(h: &Histogram<u64>, from: Unit, to: Unit) -> Vec<SpectrumPoint> {
    let n = h.len();
    if n == 0 {
        return Vec::new();
    }
    let v = |raw: u64| from.convert(raw as f64, to).unwrap_or(f64::NAN);
    let top = 1.0 - 1.0 / n as f64;
    let mut pts: Vec<SpectrumPoint> = QUANTILES
        .iter()
        .filter(|q| **q <= top + 1e-12 || (n == 1 && **q == 0.5))
        .map(|&q| SpectrumPoint {
            x: nines(q),
            value: v(h.value_at_quantile(q)),
            what: format!("p{}", super::svg::fmt_percentile(nines(q))),
        })
        .collect();
    let x_max = nines(top.max(0.5));
    if pts.last().map_or(true, |p| x_max > p.x + 0.05) {
        pts.push(SpectrumPoint {
            x: x_max,
            value: v(h.max()),
            what: "max".into(),
        });
    } else if let Some(last) = pts.last_mut() {
        // The top listed quantile sits where the maximum would: show the maximum there.
        last.value = v(h.max());
        last.what = "max".into();
    }
    pts
}

/// One design's spectrum: from its histograms, or its percentile metrics when it has none.
struct DesignSpectrum {
    design: usize,
    corrected: Vec<SpectrumPoint>,
    uncorrected: Vec<SpectrumPoint>,
    requests: Option<u64>,
    from_histograms: bool,
    flags: Vec<String>,
    max: Option<f64>,
    /// p50, p90, p99, p99.9 for the table (a histogram gives each whatever its count; the
    /// metrics give p50, p99, p99.9).
    table: [Option<f64>; 4],
    uncorrected_p99: Option<f64>,
}

/// The table's percentiles.
const TABLE_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

fn named<'a>(m: &'a Metric, name: &str) -> Option<&'a SerializedHistogram> {
    m.histograms.iter().find(|h| h.name == name)
}

fn design_spectrum(e: &ExperimentResult, di: usize, d: &str) -> Option<DesignSpectrum> {
    let p99 = design_metric(e, d, "rate.p99");
    let flags = p99.map(|m| m.flags.clone()).unwrap_or_default();
    // From the stored histograms: the corrected one is required, the uncorrected optional.
    if let Some((m, hl)) = p99.and_then(|m| Some((m, named(m, "latency")?))) {
        if let Some(lat) = decode(hl) {
            let us = |h: &Histogram<u64>, unit: Unit, q: f64| {
                (!h.is_empty())
                    .then(|| unit.convert(h.value_at_quantile(q) as f64, Unit::Us))
                    .flatten()
            };
            let corrected = spectrum_points(&lat, hl.unit, Unit::Us);
            let service = named(m, "service").and_then(|hs| Some((decode(hs)?, hs.unit)));
            let uncorrected = service
                .as_ref()
                .map(|(h, u)| spectrum_points(h, *u, Unit::Us))
                .unwrap_or_default();
            if !corrected.is_empty() {
                return Some(DesignSpectrum {
                    design: di,
                    max: hl.unit.convert(lat.max() as f64, Unit::Us),
                    table: TABLE_QUANTILES.map(|q| us(&lat, hl.unit, q)),
                    uncorrected_p99: service.as_ref().and_then(|(h, u)| us(h, *u, 0.99)),
                    corrected,
                    uncorrected,
                    requests: Some(lat.len()),
                    from_histograms: true,
                    flags,
                });
            }
        }
    }
    // From the metrics: p50, p99, p99.9 (and the uncorrected p99).
    let point = |suffix: &str, q: f64, what: &str| {
        design_metric(e, d, suffix).and_then(|m| {
            Some(SpectrumPoint {
                x: nines(q),
                value: m.unit.convert(m.median, Unit::Us)?,
                what: what.into(),
            })
        })
    };
    let corrected: Vec<SpectrumPoint> = [
        point("rate.p50", 0.5, "p50"),
        point("rate.p99", 0.99, "p99"),
        point("rate.p999", 0.999, "p99.9"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if corrected.is_empty() {
        return None;
    }
    let value =
        |suffix: &str| design_metric(e, d, suffix).and_then(|m| m.unit.convert(m.median, Unit::Us));
    Some(DesignSpectrum {
        design: di,
        corrected,
        uncorrected: point("rate.uncorrected_p99", 0.99, "p99")
            .into_iter()
            .collect(),
        requests: None,
        from_histograms: false,
        flags,
        max: value("rate.max"),
        table: [
            value("rate.p50"),
            None,
            value("rate.p99"),
            value("rate.p999"),
        ],
        uncorrected_p99: value("rate.uncorrected_p99"),
    })
}

/// The latency percentile spectrum at the open-loop point, one curve per design, corrected
/// (from the planned send) solid and uncorrected (from the actual send) dotted.
fn spectrum(e: &ExperimentResult, designs: &[String]) -> Option<Chart> {
    let all: Vec<DesignSpectrum> = designs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| design_spectrum(e, i, d))
        .collect();
    if all.is_empty() {
        return None;
    }
    let mut lines = Vec::new();
    let mut numbers = vec![vec![
        "design".to_string(),
        "p50 (us)".into(),
        "p90".into(),
        "p99".into(),
        "p99.9".into(),
        "max".into(),
        "p99 uncorrected".into(),
        "requests".into(),
        "flags".into(),
    ]];
    for s in &all {
        let d = &designs[s.design];
        let name = if s.flags.is_empty() {
            d.clone()
        } else {
            format!("{d} (!)")
        };
        let title = |p: &SpectrumPoint, how: &str| {
            format!(
                "{d}, {how}: {} {} us{}{}",
                p.what,
                fmt_value(p.value),
                s.requests
                    .map_or(String::new(), |n| format!(" ({n} requests)")),
                if s.flags.is_empty() {
                    String::new()
                } else {
                    format!("; flagged: {}", s.flags.join(", "))
                }
            )
        };
        for (pts, corrected) in [(&s.corrected, true), (&s.uncorrected, false)] {
            if pts.is_empty() {
                continue;
            }
            let how = if corrected {
                "from the planned send"
            } else {
                "from the actual send (uncorrected)"
            };
            lines.push(Line {
                name: name.clone(),
                points: pts.iter().map(|p| (p.x, p.value)).collect(),
                colour: s.design,
                marker: Marker::nth(s.design),
                dash: if corrected { Dash::Solid } else { Dash::Dotted },
                hollow: !corrected,
                unlisted: !corrected,
                titles: pts.iter().map(|p| title(p, how)).collect(),
                ..Line::default()
            });
        }
        let cell = |v: Option<f64>| v.map_or("-".into(), fmt_value);
        numbers.push(vec![
            d.clone(),
            cell(s.table[0]),
            cell(s.table[1]),
            cell(s.table[2]),
            cell(s.table[3]),
            cell(s.max),
            cell(s.uncorrected_p99),
            s.requests.map_or("-".into(), |n| n.to_string()),
            s.flags.join(" "),
        ]);
    }
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .collect();
    let keys = vec![
        Key {
            name: "solid, filled: from the planned send (corrected)".into(),
            colour: THEN,
            marker: Some((Marker::Circle, false)),
            ..Key::default()
        },
        Key {
            name: "dotted, hollow: from the actual send (uncorrected)".into(),
            colour: THEN,
            dash: Dash::Dotted,
            marker: Some((Marker::Circle, true)),
            ..Key::default()
        },
    ];
    let chart = LineChart {
        x: Axis::nines("percentile (nines: each step one more 9)"),
        y: Axis {
            label: "latency (us)".into(),
            scale: if super::svg::spans_decades(&ys) {
                Scale::Log
            } else {
                Scale::Linear
            },
        },
        lines,
        references: Vec::new(),
        x_unit: "percentile".into(),
        y_unit: "us".into(),
        keys,
        annotations: Vec::new(),
    };
    let title = "Latency percentile spectrum at the open-loop point";
    let rep = designs
        .iter()
        .find_map(|d| design_metric(e, d, "rate.p99"))
        .map(|m| method(m, 260))
        .unwrap_or_default();
    let from_h: Vec<&str> = all
        .iter()
        .filter(|s| s.from_histograms)
        .map(|s| designs[s.design].as_str())
        .collect();
    let from_m: Vec<&str> = all
        .iter()
        .filter(|s| !s.from_histograms)
        .map(|s| designs[s.design].as_str())
        .collect();
    let mut caption = format!("{rep}. ");
    if !from_h.is_empty() {
        caption.push_str(
            "Curves computed from the HdrHistograms stored with each design's rate.p99 \
             (V2 + DEFLATE, decoded here): the whole step, trials pooled, at every percentile \
             the request count can tell apart (up to 1 - 1/n), then the maximum; the table \
             gives p99 and p99.9 whatever the count (with few requests they are the largest \
             values). ",
        );
    }
    if !from_m.is_empty() {
        caption.push_str(&format!(
            "{}: no histogram in the file, so the points are its rate.p50, rate.p99 (medians \
             over windows) and rate.p999 metrics, and rate.uncorrected_p99. ",
            from_m.join(", ")
        ));
    }
    caption.push_str(
        "Solid: latency from each request's planned send time, which counts the wait a late \
         schedule causes (no coordinated omission); dotted: from its actual send, what a \
         closed-loop tool would report. x: percentile on a nines axis (50, 90, 99, 99.9 ...). \
         (!) after a design: its open-loop figures carry flags (in the table).",
    );
    let flagged: Vec<&Metric> = designs
        .iter()
        .filter_map(|d| design_metric(e, d, "rate.p99"))
        .collect();
    let f = flag_caption(&flagged);
    if let Some(rest) = f.split_once("(named on hover and in the table): ") {
        caption.push_str(&format!(" Flags: {}", rest.1));
    }
    Some(Chart {
        key: key(e, "spectrum"),
        title: title.into(),
        svg: chart.svg(title),
        caption,
        numbers,
    })
}

// ---------------------------------------------------------------------------------------------
// Bars per design.

struct BarsSpec<'a> {
    what: &'a str,
    title: &'a str,
    /// (metric suffix after `server.<design>.`, series name)
    series: &'a [(&'a str, &'a str)],
    /// Further columns for the numbers: (suffix, header).
    extra: &'a [(&'a str, &'a str)],
    references: Vec<Reference>,
}

/// One group per design, one bar per series, in a common unit, log when the values span
/// decades; flagged figures marked.
fn design_bars(
    e: &ExperimentResult,
    designs: &[String],
    spec: &BarsSpec,
    flags_note: &dyn Fn(&[&Metric]) -> String,
) -> Option<Chart> {
    let present: Vec<usize> = (0..spec.series.len())
        .filter(|&i| {
            designs
                .iter()
                .any(|d| design_metric(e, d, spec.series[i].0).is_some())
        })
        .collect();
    let ms: Vec<&Metric> = designs
        .iter()
        .flat_map(|d| {
            present
                .iter()
                .filter_map(move |&i| design_metric(e, d, spec.series[i].0))
        })
        .collect();
    let unit = common_unit(&ms)?;
    let values: Vec<f64> = ms
        .iter()
        .map(|m| conv(m.median, m.unit, unit))
        .filter(|v| *v > 0.0)
        .collect();
    let log = super::svg::spans_decades(&values);
    let mut header = vec!["design".to_string()];
    header.extend(
        present
            .iter()
            .map(|&i| format!("{} ({})", spec.series[i].1, unit_label(unit))),
    );
    // A quartiles column for each series whose metrics have more than one sample.
    let spread: Vec<usize> = present
        .iter()
        .copied()
        .filter(|&i| {
            designs
                .iter()
                .any(|d| design_metric(e, d, spec.series[i].0).is_some_and(|m| m.samples > 1))
        })
        .collect();
    for &i in &spread {
        header.push(if present.len() > 1 {
            format!("{} quartiles", spec.series[i].1)
        } else {
            "quartiles".into()
        });
    }
    header.extend(spec.extra.iter().map(|x| x.1.to_string()));
    header.push("flags".into());
    let mut numbers = vec![header];
    let mut groups = Vec::new();
    let mut left_out = Vec::new();
    for d in designs {
        let found: Vec<Option<&Metric>> = present
            .iter()
            .map(|&i| design_metric(e, d, spec.series[i].0))
            .collect();
        if found.iter().all(Option::is_none) {
            continue;
        }
        let mut row = vec![d.clone()];
        let mut flags: Vec<String> = Vec::new();
        for m in found.iter() {
            row.push(m.map_or("-".into(), |m| fmt_value(conv(m.median, m.unit, unit))));
            for f in m.map(|m| m.flags.as_slice()).unwrap_or_default() {
                if !flags.contains(f) {
                    flags.push(f.clone());
                }
            }
            if let Some(m) = m.filter(|m| log && m.median <= 0.0) {
                left_out.push(m.id.clone());
            }
        }
        for &i in &spread {
            row.push(
                design_metric(e, d, spec.series[i].0).map_or("-".into(), |m| {
                    if m.samples > 1 {
                        format!(
                            "{} .. {}",
                            fmt_value(conv(m.q1, m.unit, unit)),
                            fmt_value(conv(m.q3, m.unit, unit))
                        )
                    } else {
                        "one value".into()
                    }
                }),
            );
        }
        for (suffix, _) in spec.extra {
            row.push(design_metric(e, d, suffix).map_or("-".into(), fmt_metric));
        }
        row.push(flags.join(" "));
        numbers.push(row);
        groups.push(BarGroup {
            label: d.clone(),
            bars: found
                .iter()
                .zip(&present)
                .map(|(m, &i)| {
                    m.map(|m| {
                        let mut b = metric_bar(m, unit, spec.series[i].1);
                        b.flag = flag_text(m);
                        b
                    })
                })
                .collect(),
            note: None,
        });
    }
    if groups.is_empty() {
        return None;
    }
    let mut references = spec.references.clone();
    for r in references.iter_mut() {
        r.y = conv(r.y, Unit::Us, unit);
    }
    let chart = BarChart {
        y: Axis {
            label: unit_label(unit),
            scale: if log { Scale::Log } else { Scale::Linear },
        },
        series: present
            .iter()
            .map(|&i| BarSeries {
                name: spec.series[i].1.to_string(),
                then: false,
            })
            .collect(),
        groups,
        references,
    };
    let mut methods: Vec<String> = Vec::new();
    for &i in &present {
        if let Some(m) = designs
            .iter()
            .find_map(|d| design_metric(e, d, spec.series[i].0))
        {
            let t = if present.len() > 1 {
                format!("{}: {}", spec.series[i].1, method(m, 300))
            } else {
                method(m, 300)
            };
            if !methods.contains(&t) {
                methods.push(t);
            }
        }
    }
    let mut caption = format!(
        "{}. Bars: medians{}.",
        methods.join(" · "),
        if ms.iter().any(|m| m.samples > 1) {
            " (of the step's windows); whiskers: quartiles"
        } else {
            ""
        }
    );
    if log {
        caption.push_str(" Log axis: the designs span decades.");
    }
    if !left_out.is_empty() {
        caption.push_str(&format!(
            " Not drawn on this log axis (zero or below): {}.",
            left_out.join(", ")
        ));
    }
    let below: Vec<&str> = ms
        .iter()
        .filter(|m| m.median < 0.0)
        .filter_map(|m| m.id.split('.').nth(1))
        .collect();
    if !below.is_empty() && matches!(unit, Unit::Bytes | Unit::KiB | Unit::MiB) {
        caption.push_str(&format!(
            " Below zero ({}): memory fell between the two readings, other memory being \
             freed meanwhile; the connections' own cost was too small to see.",
            below.join(", ")
        ));
    }
    caption.push_str(&flags_note(&ms));
    Some(Chart {
        key: key(e, spec.what),
        title: spec.title.into(),
        svg: chart.svg(spec.title),
        caption,
        numbers,
    })
}

/// The blocking work itself, read from the conclusion ("blocks for 1000 us"), in us.
fn blocking_reference(e: &ExperimentResult) -> Vec<Reference> {
    let Some(c) = e.conclusion.as_deref() else {
        return Vec::new();
    };
    let Some(i) = c.find("blocks for ") else {
        return Vec::new();
    };
    let rest = &c[i + "blocks for ".len()..];
    let num: String = rest
        .chars()
        .take_while(|ch| ch.is_ascii_digit() || *ch == '.')
        .collect();
    let Ok(us) = num.parse::<f64>() else {
        return Vec::new();
    };
    if !rest[num.len()..].starts_with(" us") || us <= 0.0 {
        return Vec::new();
    }
    vec![Reference {
        name: format!(
            "the work itself: {}",
            if us >= 1000.0 {
                format!("{} ms", fmt_num(us / 1000.0))
            } else {
                format!("{} us", fmt_num(us))
            }
        ),
        y: us,
        x_from: None,
        x_to: None,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Historical, Status};
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

    fn encoded(name: &str, values_ns: &[u64]) -> SerializedHistogram {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in values_ns {
            h.record(*v).unwrap();
        }
        let mut buf = Vec::new();
        V2DeflateSerializer::new().serialize(&h, &mut buf).unwrap();
        SerializedHistogram {
            name: name.into(),
            unit: Unit::Ns,
            count: h.len(),
            encoding: HDR_ENCODING.into(),
            data: base64::engine::general_purpose::STANDARD.encode(buf),
        }
    }

    #[test]
    fn stored_histograms_decode_and_bad_ones_do_not() {
        let values: Vec<u64> = (1..=10_000).map(|i| i * 1_000).collect();
        let s = encoded("latency", &values);
        let h = decode(&s).expect("decodes");
        assert_eq!(h.len(), 10_000);
        assert!((h.value_at_quantile(0.5) as f64 / 5_000_000.0 - 1.0).abs() < 0.01);
        let mut other = s.clone();
        other.encoding = "hdr-v3".into();
        assert!(decode(&other).is_none());
        let mut junk = s.clone();
        junk.data = "not base64 at all!".into();
        assert!(decode(&junk).is_none());
        junk.data = base64::engine::general_purpose::STANDARD.encode(b"not a histogram");
        assert!(decode(&junk).is_none());
    }

    #[test]
    fn a_spectrum_goes_as_far_as_the_count_allows_then_the_maximum() {
        let values: Vec<u64> = (1..=10_000).map(|i| i * 1_000).collect();
        let h = decode(&encoded("latency", &values)).unwrap();
        let pts = spectrum_points(&h, Unit::Ns, Unit::Us);
        let whats: Vec<&str> = pts.iter().map(|p| p.what.as_str()).collect();
        // 10,000 values tell apart up to p99.99 (1 - 1/n), where the maximum is drawn.
        assert_eq!(
            whats,
            ["p50", "p75", "p90", "p95", "p99", "p99.5", "p99.9", "p99.95", "max"]
        );
        assert!((pts[0].value - 5_000.0).abs() / 5_000.0 < 0.01, "{pts:?}");
        assert!((pts.last().unwrap().value - 10_000.0).abs() / 10_000.0 < 0.01);
        assert!((pts.last().unwrap().x - 4.0).abs() < 1e-9);
        assert!(pts
            .windows(2)
            .all(|w| w[0].x < w[1].x && w[0].value <= w[1].value));
        // Few values: p50 and the maximum; none: nothing.
        let few = decode(&encoded("latency", &[1_000, 2_000, 3_000])).unwrap();
        let pts = spectrum_points(&few, Unit::Ns, Unit::Us);
        assert_eq!(pts.first().unwrap().what, "p50");
        assert_eq!(pts.last().unwrap().what, "max");
        let empty = Histogram::<u64>::new(3).unwrap();
        assert!(spectrum_points(&empty, Unit::Ns, Unit::Us).is_empty());
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64b"), Some(64.0));
        assert_eq!(parse_size("16kib"), Some(16384.0));
        assert_eq!(parse_size("1mib"), Some(1048576.0));
        assert_eq!(parse_size("mean"), None);
    }

    fn metric(id: &str, unit: Unit, v: f64) -> Metric {
        Metric::from_values(
            id,
            unit,
            &[v * 0.9, v, v * 1.1],
            1,
            "cross_cpu(0,1)",
            "n; more",
        )
        .unwrap()
    }

    /// A server experiment with the study's two designs, epoll and a later `green`.
    fn experiment() -> ExperimentResult {
        let mut metrics = Vec::new();
        for (d, f) in [
            ("epoll", 1.0),
            ("green", 0.8),
            ("thread_per_client", 1.5),
            ("fork_per_client", 4.0),
        ] {
            for (same, size) in [("", "1kib"), ("", "16kib"), ("same_cpu.", "1kib")] {
                for (kind, base) in [("short", 100.0), ("long", 30.0)] {
                    metrics.push(metric(
                        &format!("server.{d}.{same}{kind}.{size}.mean"),
                        Unit::Us,
                        base * f,
                    ));
                }
            }
            let mut p99 = metric(&format!("server.{d}.rate.p99"), Unit::Us, 90.0 * f);
            p99.histograms = vec![
                encoded("latency", &[50_000, 60_000, 70_000, 80_000, 900_000]),
                encoded("service", &[40_000, 50_000, 60_000, 100_000]),
            ];
            metrics.push(p99);
            for (s, u, v) in [
                ("cpu_per_request", Unit::Us, 30.0 * f),
                ("block.p99", Unit::Us, 1200.0 * f),
                ("rss_per_connection", Unit::KiB, 2.0 * f),
                ("capacity", Unit::PerS, 1000.0 / f),
            ] {
                metrics.push(metric(&format!("server.{d}.{s}"), u, v));
            }
        }
        metrics[0].historical = None;
        let fork = metrics
            .iter_mut()
            .find(|m| m.id == "server.fork_per_client.short.1kib.mean")
            .unwrap();
        fork.historical = Some(Historical {
            value: 4.7,
            unit: Unit::Ms,
            source: seeds::PTHREADS_1999.citation.into(),
        });
        let mut flagged = metric("server.green.cpu_per_request", Unit::Us, 20.0);
        flagged.flags = vec!["client_bound".into()];
        flagged.note = format!("[client_bound] {}", flagged.note);
        metrics.retain(|m| m.id != flagged.id);
        metrics.push(flagged);
        metrics.push(metric("server.generator.ceiling", Unit::PerS, 1e5));
        ExperimentResult {
            name: "server".into(),
            study: "s".into(),
            study_label: "l".into(),
            status: Status::Ok,
            reason: None,
            wall_s: 1.0,
            metrics,
            series: vec![],
            skipped_metrics: vec![],
            tables: vec![],
            conclusion: Some("When each request blocks for 1000 us (400/s), ...".into()),
            attempts: vec![],
            drift_note: None,
        }
    }

    #[test]
    fn designs_are_generic_with_the_studys_two_first() {
        let e = experiment();
        assert_eq!(
            designs(&e),
            ["thread_per_client", "fork_per_client", "epoll", "green"]
        );
    }

    #[test]
    fn every_chart_shows_every_design_and_marks_flags() {
        let e = experiment();
        let c = charts(&e);
        let keys: Vec<&str> = c.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "server-fig4",
                "server-fig5",
                "server-spectrum",
                "server-cpu",
                "server-block",
                "server-memory",
                "server-capacity"
            ]
        );
        for chart in &c {
            for d in ["thread_per_client", "fork_per_client", "epoll", "green"] {
                assert!(
                    chart.numbers.iter().any(|r| r[0].starts_with(d)),
                    "{} lacks {d}",
                    chart.key
                );
            }
            assert!(!chart.caption.is_empty(), "{}", chart.key);
            assert!(chart.svg.starts_with("<svg") && chart.svg.ends_with("</svg>"));
        }
        // Fig. 4 has the study's point beside today's, and log axes.
        assert!(c[0].svg.contains("Ultra-1 1999: fork_per_client 4.70 ms"));
        assert!(c[0].caption.contains("Grey diamonds"));
        // The spectrum comes from the histograms: 5 values give p50, p75 and the maximum.
        assert!(c[2].caption.contains("HdrHistograms"));
        assert!(c[2].svg.contains("epoll, from the planned send: p75"));
        assert!(c[2].svg.contains("from the actual send (uncorrected)"));
        assert_eq!(c[2].numbers[3][7], "5", "{:?}", c[2].numbers);
        // The flagged bar is marked, its flag named on hover and in the table.
        assert!(c[3].svg.contains("flagged: client_bound"));
        assert!(c[3].svg.contains("class=\"flagmark\""));
        let green = c[3].numbers.iter().find(|r| r[0] == "green").unwrap();
        assert_eq!(green.last().unwrap(), "client_bound");
        assert!(c[3].caption.contains("client_bound: the load generator"));
        // The blocking chart draws the work itself.
        assert!(c[4].svg.contains("the work itself: 1 ms"));
    }

    #[test]
    fn without_histograms_the_spectrum_rests_on_the_percentile_metrics() {
        let mut e = experiment();
        for m in e.metrics.iter_mut() {
            m.histograms.clear();
        }
        let d = "epoll";
        e.metrics
            .push(metric(&format!("server.{d}.rate.p50"), Unit::Us, 40.0));
        e.metrics
            .push(metric(&format!("server.{d}.rate.p999"), Unit::Us, 400.0));
        let c = charts(&e);
        let s = c.iter().find(|c| c.key == "server-spectrum").unwrap();
        assert!(!s.caption.contains("HdrHistograms"));
        assert!(s.caption.contains("no histogram in the file"));
        let row = s.numbers.iter().find(|r| r[0] == "epoll").unwrap();
        assert_eq!(&row[1..5], ["40.00", "-", "90.00", "400.0"]);
    }
}
