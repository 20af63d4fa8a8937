//! Drawing parts every section uses, the study sections and the server's alike: a chart's key,
//! a unit several metrics share, a metric as a bar, its flags as hover text.

use crate::measure::units::Unit;
use crate::report::html::svg::{Axis, Bar, Drawing, Line, LineChart, Reference};
use crate::report::html::Chart;
use crate::report::{fmt_value, fmt_with_unit};
use crate::results::{ExperimentResult, Metric, Series};

/// A key unique in the page: the experiment's name and the chart's, HTML-id safe.
pub fn key(e: &ExperimentResult, what: &str) -> String {
    crate::report::html::html_id(&format!("{}-{what}", e.name))
}

/// A chart of `e` keyed by `what`, its drawing named by its title.
pub fn chart_for(
    e: &ExperimentResult,
    what: &str,
    title: &str,
    drawing: &dyn Drawing,
    caption: String,
    numbers: Vec<Vec<String>>,
) -> Chart {
    Chart {
        key: key(e, what),
        title: title.into(),
        svg: drawing.draw(title),
        caption,
        numbers,
    }
}

/// Curves on the axes of series `s0`: each axis labelled "label (unit)" with `unit_name`
/// naming the unit, x a size axis when it is in bytes, y wide enough for the references.
pub fn series_chart(
    s0: &Series,
    unit_name: fn(Unit) -> String,
    lines: Vec<Line>,
    references: Vec<Reference>,
) -> LineChart {
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .chain(references.iter().map(|r| r.y))
        .collect();
    let x_label = format!("{} ({})", s0.x_label, unit_name(s0.x_unit));
    let y_label = format!("{} ({})", s0.y_label, unit_name(s0.y_unit));
    LineChart {
        x: if s0.x_unit == Unit::Bytes {
            Axis::bytes(x_label, &xs)
        } else {
            Axis::auto(x_label, &xs)
        },
        y: Axis::auto(y_label, &ys),
        lines,
        references,
        x_unit: unit_name(s0.x_unit),
        y_unit: unit_name(s0.y_unit),
        keys: Vec::new(),
        annotations: Vec::new(),
    }
}

/// A unit all `metrics` can be shown in: theirs when they share one, else for times the one
/// that keeps the typical value readable; None when they measure different things.
pub fn common_unit(metrics: &[&Metric]) -> Option<Unit> {
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

pub fn conv(v: f64, from: Unit, to: Unit) -> f64 {
    from.convert(v, to).unwrap_or(f64::NAN)
}

pub fn unit_label(u: Unit) -> String {
    match u {
        Unit::PerS => "per second".into(),
        Unit::Percent => "%".into(),
        u => u.as_str().to_string(),
    }
}

/// A metric's median as a bar with its quartiles as the whisker.
pub fn metric_bar(m: &Metric, to: Unit, who: &str) -> Bar {
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
pub fn flag_text(m: &Metric) -> Option<String> {
    (!m.flags.is_empty()).then(|| m.flags.join(", "))
}
