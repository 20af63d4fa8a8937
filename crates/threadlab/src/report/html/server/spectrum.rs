//! The latency percentile spectrum at the open-loop point, from the stored HdrHistograms.

use super::*;

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
pub(super) const QUANTILES: [f64; 13] = [
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
            what: format!("p{}", crate::report::html::svg::fmt_percentile(nines(q))),
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
pub(super) struct DesignSpectrum {
    pub(super) design: usize,
    pub(super) corrected: Vec<SpectrumPoint>,
    pub(super) uncorrected: Vec<SpectrumPoint>,
    pub(super) requests: Option<u64>,
    pub(super) from_histograms: bool,
    pub(super) flags: Vec<String>,
    pub(super) max: Option<f64>,
    /// p50, p90, p99, p99.9 for the table (a histogram gives each whatever its count; the
    /// metrics give p50, p99, p99.9).
    pub(super) table: [Option<f64>; 4],
    pub(super) uncorrected_p99: Option<f64>,
}

/// The table's percentiles.
pub(super) const TABLE_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

pub(super) fn named<'a>(m: &'a Metric, name: &str) -> Option<&'a SerializedHistogram> {
    m.histograms.iter().find(|h| h.name == name)
}

pub(super) fn design_spectrum(e: &ExperimentResult, di: usize, d: &str) -> Option<DesignSpectrum> {
    let p99 = design_metric(e, d, stat::RATE_P99);
    let flags = p99.map(|m| m.flags.clone()).unwrap_or_default();
    // From the stored histograms: the corrected one is required, the uncorrected optional.
    if let Some((m, hl)) = p99.and_then(|m| Some((m, named(m, sid::histogram::LATENCY)?))) {
        if let Some(lat) = decode(hl) {
            let us = |h: &Histogram<u64>, unit: Unit, q: f64| {
                (!h.is_empty())
                    .then(|| unit.convert(h.value_at_quantile(q) as f64, Unit::Us))
                    .flatten()
            };
            let corrected = spectrum_points(&lat, hl.unit, Unit::Us);
            let service =
                named(m, sid::histogram::SERVICE).and_then(|hs| Some((decode(hs)?, hs.unit)));
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
    let point = |statistic: &str, q: f64, what: &str| {
        design_metric(e, d, statistic).and_then(|m| {
            Some(SpectrumPoint {
                x: nines(q),
                value: m.unit.convert(m.median, Unit::Us)?,
                what: what.into(),
            })
        })
    };
    let corrected: Vec<SpectrumPoint> = [
        point(stat::RATE_P50, 0.5, "p50"),
        point(stat::RATE_P99, 0.99, "p99"),
        point(stat::RATE_P999, 0.999, "p99.9"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if corrected.is_empty() {
        return None;
    }
    let value = |statistic: &str| {
        design_metric(e, d, statistic).and_then(|m| m.unit.convert(m.median, Unit::Us))
    };
    Some(DesignSpectrum {
        design: di,
        corrected,
        uncorrected: point(stat::RATE_UNCORRECTED_P99, 0.99, "p99")
            .into_iter()
            .collect(),
        requests: None,
        from_histograms: false,
        flags,
        max: value(stat::RATE_MAX),
        table: [
            value(stat::RATE_P50),
            None,
            value(stat::RATE_P99),
            value(stat::RATE_P999),
        ],
        uncorrected_p99: value(stat::RATE_UNCORRECTED_P99),
    })
}

/// The latency percentile spectrum at the open-loop point, one curve per design, corrected
/// (from the planned send) solid and uncorrected (from the actual send) dotted.
pub(super) fn spectrum(e: &ExperimentResult, designs: &[String]) -> Option<Chart> {
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
        lines.extend(spectrum_lines(s, d));
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
    let chart = LineChart {
        x: Axis::nines("percentile (nines: each step one more 9)"),
        y: Axis {
            label: "latency (us)".into(),
            scale: if crate::report::html::svg::spans_decades(&ys) {
                Scale::Log
            } else {
                Scale::Linear
            },
        },
        lines,
        references: Vec::new(),
        x_unit: "percentile".into(),
        y_unit: "us".into(),
        keys: solid_dotted_keys(
            Some("solid, filled: from the planned send (corrected)".into()),
            Some("dotted, hollow: from the actual send (uncorrected)".into()),
        ),
        annotations: Vec::new(),
    };
    let title = "Latency percentile spectrum at the open-loop point";
    let caption = spectrum_caption(e, designs, &all);
    Some(chart_for(e, "spectrum", title, &chart, caption, numbers))
}

/// A design's curves: from the planned send, listed, and from the actual send, dotted.
fn spectrum_lines(s: &DesignSpectrum, d: &str) -> Vec<Line> {
    let name = if s.flags.is_empty() {
        d.to_string()
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
    [
        (&s.corrected, true, "from the planned send"),
        (&s.uncorrected, false, "from the actual send (uncorrected)"),
    ]
    .into_iter()
    .filter(|(pts, _, _)| !pts.is_empty())
    .map(|(pts, corrected, how)| Line {
        name: name.clone(),
        points: pts.iter().map(|p| (p.x, p.value)).collect(),
        colour: s.design,
        marker: Marker::nth(s.design),
        dash: if corrected { Dash::Solid } else { Dash::Dotted },
        hollow: !corrected,
        unlisted: !corrected,
        titles: pts.iter().map(|p| title(p, how)).collect(),
        ..Line::default()
    })
    .collect()
}

/// How the curves were made (from histograms or from metrics, per design), how to read
/// them, and the open-loop figures' flags.
fn spectrum_caption(e: &ExperimentResult, designs: &[String], all: &[DesignSpectrum]) -> String {
    let rep = designs
        .iter()
        .find_map(|d| design_metric(e, d, stat::RATE_P99))
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
        .filter_map(|d| design_metric(e, d, stat::RATE_P99))
        .collect();
    let f = flag_caption(&flagged);
    if let Some(rest) = f.split_once("(named on hover and in the table): ") {
        caption.push_str(&format!(" Flags: {}", rest.1));
    }
    caption
}

// ---------------------------------------------------------------------------------------------
// Bars per design.
