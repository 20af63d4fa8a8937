//! Per-design bars: CPU per request, blocking-work p99, memory per connection, capacity.

use super::*;

pub(super) struct BarsSpec<'a> {
    pub(super) what: &'a str,
    pub(super) title: &'a str,
    /// (statistic after `server.<design>.`, series name)
    pub(super) series: &'a [(String, &'a str)],
    /// Further columns for the numbers: (statistic, header).
    pub(super) extra: &'a [(String, &'a str)],
    pub(super) references: Vec<Reference>,
}

/// What a bars chart draws: the series some design has, in one unit.
struct Drawn<'a> {
    e: &'a ExperimentResult,
    spec: &'a BarsSpec<'a>,
    /// The series some design has, as indices into `spec.series`.
    present: Vec<usize>,
    /// Those of them with more than one sample somewhere: a quartiles column each.
    spread: Vec<usize>,
    unit: Unit,
    log: bool,
}

/// One group per design, one bar per series, in a common unit, log when the values span
/// decades; flagged figures marked.
pub(super) fn design_bars(
    e: &ExperimentResult,
    designs: &[String],
    spec: &BarsSpec,
    flags_note: &dyn Fn(&[&Metric]) -> String,
) -> Option<Chart> {
    let present: Vec<usize> = (0..spec.series.len())
        .filter(|&i| {
            designs
                .iter()
                .any(|d| design_metric(e, d, &spec.series[i].0).is_some())
        })
        .collect();
    let ms: Vec<&Metric> = designs
        .iter()
        .flat_map(|d| {
            present
                .iter()
                .filter_map(move |&i| design_metric(e, d, &spec.series[i].0))
        })
        .collect();
    let unit = common_unit(&ms)?;
    let values: Vec<f64> = ms
        .iter()
        .map(|m| conv(m.median, m.unit, unit))
        .filter(|v| *v > 0.0)
        .collect();
    let log = crate::report::html::svg::spans_decades(&values);
    let spread: Vec<usize> = present
        .iter()
        .copied()
        .filter(|&i| {
            designs
                .iter()
                .any(|d| design_metric(e, d, &spec.series[i].0).is_some_and(|m| m.samples > 1))
        })
        .collect();
    let drawn = Drawn {
        e,
        spec,
        present,
        spread,
        unit,
        log,
    };
    let mut numbers = vec![drawn.header()];
    let mut groups = Vec::new();
    let mut left_out = Vec::new();
    for d in designs {
        if let Some((row, group)) = drawn.design(d, &mut left_out) {
            numbers.push(row);
            groups.push(group);
        }
    }
    if groups.is_empty() {
        return None;
    }
    let chart = drawn.chart(groups);
    let mut caption = drawn.caption(designs, &ms, &left_out);
    caption.push_str(&flags_note(&ms));
    Some(chart_for(
        e, spec.what, spec.title, &chart, caption, numbers,
    ))
}

impl Drawn<'_> {
    fn series(&self, i: usize) -> (&str, &str) {
        let (statistic, name) = &self.spec.series[i];
        (statistic, name)
    }

    /// The numbers' header: design, a median column per series, their quartiles, the
    /// extra columns, the flags.
    fn header(&self) -> Vec<String> {
        let mut header = vec!["design".to_string()];
        header.extend(
            self.present
                .iter()
                .map(|&i| format!("{} ({})", self.series(i).1, unit_label(self.unit))),
        );
        for &i in &self.spread {
            header.push(if self.present.len() > 1 {
                format!("{} quartiles", self.series(i).1)
            } else {
                "quartiles".into()
            });
        }
        header.extend(self.spec.extra.iter().map(|x| x.1.to_string()));
        header.push("flags".into());
        header
    }

    /// A design's row of numbers and its group of bars, None when it has none of the
    /// series; the ids of figures a log axis cannot draw go to `left_out`.
    fn design(&self, d: &str, left_out: &mut Vec<String>) -> Option<(Vec<String>, BarGroup)> {
        let (e, unit) = (self.e, self.unit);
        let found: Vec<Option<&Metric>> = self
            .present
            .iter()
            .map(|&i| design_metric(e, d, self.series(i).0))
            .collect();
        if found.iter().all(Option::is_none) {
            return None;
        }
        let mut row = vec![d.to_string()];
        let mut flags: Vec<String> = Vec::new();
        for m in found.iter() {
            row.push(m.map_or("-".into(), |m| fmt_value(conv(m.median, m.unit, unit))));
            for f in m.map(|m| m.flags.as_slice()).unwrap_or_default() {
                if !flags.contains(f) {
                    flags.push(f.clone());
                }
            }
            if let Some(m) = m.filter(|m| self.log && m.median <= 0.0) {
                left_out.push(m.id.clone());
            }
        }
        for &i in &self.spread {
            row.push(
                design_metric(e, d, self.series(i).0).map_or("-".into(), |m| {
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
        for (suffix, _) in self.spec.extra {
            row.push(design_metric(e, d, suffix).map_or("-".into(), fmt_metric));
        }
        row.push(flags.join(" "));
        let group = BarGroup {
            label: d.to_string(),
            bars: found
                .iter()
                .zip(&self.present)
                .map(|(m, &i)| {
                    m.map(|m| {
                        let mut b = metric_bar(m, unit, self.series(i).1);
                        b.flag = flag_text(m);
                        b
                    })
                })
                .collect(),
            note: None,
        };
        Some((row, group))
    }

    fn chart(&self, groups: Vec<BarGroup>) -> BarChart {
        let mut references = self.spec.references.clone();
        for r in references.iter_mut() {
            r.y = conv(r.y, Unit::Us, self.unit);
        }
        BarChart {
            y: Axis {
                label: unit_label(self.unit),
                scale: if self.log { Scale::Log } else { Scale::Linear },
            },
            series: self
                .present
                .iter()
                .map(|&i| BarSeries::now(self.series(i).1))
                .collect(),
            groups,
            references,
        }
    }

    /// How each series was measured, how to read the bars, and what the axis leaves out.
    fn caption(&self, designs: &[String], ms: &[&Metric], left_out: &[String]) -> String {
        let mut methods: Vec<String> = Vec::new();
        for &i in &self.present {
            if let Some(m) = designs
                .iter()
                .find_map(|d| design_metric(self.e, d, self.series(i).0))
            {
                let t = if self.present.len() > 1 {
                    format!("{}: {}", self.series(i).1, method(m, 300))
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
        if self.log {
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
            .filter_map(|m| ids::subject(&m.id))
            .collect();
        if !below.is_empty() && matches!(self.unit, Unit::Bytes | Unit::KiB | Unit::MiB) {
            caption.push_str(&format!(
                " Below zero ({}): memory fell between the two readings, other memory being \
                 freed meanwhile; the connections' own cost was too small to see.",
                below.join(", ")
            ));
        }
        caption
    }
}

/// The blocking work itself, read from the conclusion ("blocks for 1000 us"), in us.
pub(super) fn blocking_reference(e: &ExperimentResult) -> Vec<Reference> {
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
