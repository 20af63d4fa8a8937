//! The fork/thread ratio then and now, and the first request of a connection against the rest.

use super::*;

/// fork_per_client over thread_per_client per pattern and size, both placements, beside the
/// study's 4.7 / 4.0 for a 1 KB short connection.
pub(super) fn fork_ratio(e: &ExperimentResult) -> Option<Chart> {
    // server.fork_per_client.vs_thread.[same_cpu.]<short|long>.<size>
    let mut cells: Vec<(bool, f64, String, bool, &Metric)> = Vec::new();
    for m in &e.metrics {
        let Some((same, long, size)) = sid::parse_fork_ratio(&m.id) else {
            continue;
        };
        let Some(bytes) = sid::size_bytes(size) else {
            continue;
        };
        cells.push((long, bytes, size.to_string(), same, m));
    }
    if cells.is_empty() {
        return None;
    }
    let mut groups_k: Vec<(bool, f64)> = cells.iter().map(|c| (c.0, c.1)).collect();
    groups_k.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    groups_k.dedup();
    let any_same = cells.iter().any(|c| c.3);
    let any_across = cells.iter().any(|c| !c.3);
    let mut series = vec![BarSeries::then(format!(
        "then ({})",
        seeds::PTHREADS_1999.label
    ))];
    if any_across {
        series.push(BarSeries::now("now, client on another CPU"));
    }
    if any_same {
        series.push(BarSeries::now("now, client on the server's CPU"));
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
            crate::report::html::svg::fmt_bytes(bytes)
        );
        let (a, s) = (find(false), find(true));
        let then = a.or(s).and_then(|m| m.historical.as_ref()).and_then(|h| {
            if !sources.contains(&h.source) {
                sources.push(h.source.clone());
            }
            h.unit.convert(h.value, Unit::Ratio)
        });
        let mut bars = vec![then.map(|t| crate::report::html::svg::Bar {
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
    let caption = format!(
        "Each ratio is fork_per_client's time over thread_per_client's, round by round of the \
         interleaved sampling (bars: medians; whiskers: quartiles). The study found {:.2}x for a \
         1 KB short connection (4.7 ms / 4.0 ms, Fig. 4) and that the two converge on long \
         connections (Fig. 5, no values given: the dashed line at 1).",
        4.7 / 4.0
    );
    let caption = then_and_flags(caption, &sources, &ms);
    Some(chart_for(e, "fork-ratio", title, &chart, caption, numbers))
}

/// One design's first request of a long connection and the rest, now and as the study
/// printed them.
struct FirstRest<'a> {
    first: &'a Metric,
    rest: &'a Metric,
    /// ", <size>" when the id names one.
    size: String,
    /// first ÷ rest today.
    now: f64,
    /// first ÷ rest then, with the study's two figures.
    then: Option<(f64, &'a Historical, &'a Historical)>,
}

/// Fig. 5's example ("10K ... took 1.469 us first time, but then ... around 0.45 us"): the
/// first request of a long connection over the rest, per design. The study printed "us"
/// beside Fig. 4's milliseconds, so only the ratio of its two figures is unambiguous.
pub(super) fn first_vs_rest(e: &ExperimentResult, designs: &[String]) -> Option<Chart> {
    let mut groups = Vec::new();
    let mut numbers = vec![vec![
        "design".to_string(),
        "first".into(),
        "the rest".into(),
        "first ÷ rest".into(),
        "then: first, rest".into(),
        "then: first ÷ rest".into(),
    ]];
    let mut pairs: Vec<FirstRest> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    let mut all = Vec::new();
    for d in designs {
        let Some(p) = first_rest(e, d) else {
            continue;
        };
        if let Some((_, a, _)) = p.then {
            if !sources.contains(&a.source) {
                sources.push(a.source.clone());
            }
        }
        all.push(p.now);
        all.extend(p.then.map(|t| t.0));
        groups.push(p.group(d));
        numbers.push(p.row(d));
        pairs.push(p);
    }
    let first = pairs.first()?;
    let chart = BarChart {
        y: Axis::auto("first request ÷ each later one", &all),
        series: vec![
            BarSeries::then(format!("then ({}, as printed)", seeds::PTHREADS_1999.label)),
            BarSeries::now("now"),
        ],
        groups,
        references: Vec::new(),
    };
    let title = "Fig. 5's example: the first request of a long connection against the rest";
    let caption = format!(
        "{} · {}. The study printed its example in \"us\" (1.469 first, then about 0.45) \
         beside Fig. 4's 4 ms per 1 KB connection, so its figures read as ms; their ratio does \
         not depend on the unit, and is what is drawn.",
        method(first.first, 300),
        method(first.rest, 200)
    );
    let firsts: Vec<&Metric> = pairs.iter().map(|p| p.first).collect();
    let caption = then_and_flags(caption, &sources, &firsts);
    Some(chart_for(
        e,
        "fig5-example",
        title,
        &chart,
        caption,
        numbers,
    ))
}

/// Design `d`'s first and later requests, when the file holds both and the rest took time.
fn first_rest<'a>(e: &'a ExperimentResult, d: &str) -> Option<FirstRest<'a>> {
    let (first, c) = e.metrics.iter().find_map(|m| {
        Connection::parse(&m.id)
            .filter(|c| c.design == d && c.statistic == stat::FIRST)
            .map(|c| (m, c))
    })?;
    let rest = e.metric(&c.with(stat::REST))?;
    let now = match rest.unit.convert(rest.median, first.unit) {
        Some(r) if r > 0.0 => first.median / r,
        _ => return None,
    };
    let then = match (&first.historical, &rest.historical) {
        (Some(a), Some(b)) => b
            .unit
            .convert(b.value, a.unit)
            .filter(|r| *r > 0.0)
            .map(|r| (a.value / r, a, b)),
        _ => None,
    };
    let size = sid::size_bytes(c.size).map_or(String::new(), |b| {
        format!(", {}", crate::report::html::svg::fmt_bytes(b))
    });
    Some(FirstRest {
        first,
        rest,
        size,
        now,
        then,
    })
}

impl FirstRest<'_> {
    /// The ratio then and now as two bars.
    fn group(&self, d: &str) -> BarGroup {
        let (first, rest, size, now) = (self.first, self.rest, &self.size, self.now);
        BarGroup {
            label: d.to_string(),
            bars: vec![
                self.then.map(|(r, a, b)| crate::report::html::svg::Bar {
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
                Some(crate::report::html::svg::Bar {
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
        }
    }

    fn row(&self, d: &str) -> Vec<String> {
        let (first, rest) = (self.first, self.rest);
        vec![
            d.to_string(),
            fmt_with_unit(first.median, first.unit),
            fmt_with_unit(rest.median, rest.unit),
            format!("{:.2}x", self.now),
            self.then.map_or("-".into(), |(_, a, b)| {
                format!(
                    "{}, {}",
                    fmt_with_unit(a.value, a.unit),
                    fmt_with_unit(b.value, b.unit)
                )
            }),
            self.then.map_or("-".into(), |(r, _, _)| format!("{r:.2}x")),
        ]
    }
}

/// A caption followed by the study's sources, when any, and the figures' flags.
fn then_and_flags(mut caption: String, sources: &[String], ms: &[&Metric]) -> String {
    if !sources.is_empty() {
        caption.push_str(&format!(" Then: {}.", sources.join("; ")));
    }
    caption.push_str(&flag_caption(ms));
    caption
}

// ---------------------------------------------------------------------------------------------
// The percentile spectrum.
