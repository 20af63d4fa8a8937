//! Charts as inline SVG, drawn by hand: axes with nice ticks (linear, decimal log or binary log
//! for sizes), curves, grouped bars, sample distributions and ratio intervals.
//!
//! No dependencies and no network: the SVG sits inside the HTML page, styled by the page's CSS
//! classes (so a dark or printed page recolours it), and every text it carries is escaped.
//! The output is deterministic: the same data gives the same bytes. Every point and bar has a
//! `<title>` with its numbers, shown on hover.

use std::fmt::Write;

/// Escapes text for HTML and SVG, text or attribute. `/` and `=` are escaped too, so no text
/// from a results file can spell a URL (`//`) or look like an attribute (`src=`) in the page.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '/' => out.push_str("&#47;"),
            '=' => out.push_str("&#61;"),
            // Control characters other than tab and newline are not valid in HTML text.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// How an axis is scaled and its ticks labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Decades: 1, 10, 100 (with 2 and 5 between when the range is short).
    Log,
    /// Sizes in bytes: powers of two, labelled 1K, 64K, 1M.
    LogBytes,
    /// Percentiles on a "nines" axis: the data is already -log10(1 - q) (`nines`), ticks are
    /// labelled 50, 90, 99, 99.9, 99.99 ... (each nine one step further).
    Nines,
}

/// An axis: its label (with the unit) and its scale.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
}

/// Data spanning at least this ratio (max / min, all positive) is drawn on a log scale.
pub const LOG_SPAN: f64 = 30.0;

impl Axis {
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
        }
    }

    /// Log when the values are all positive and span `LOG_SPAN` or more, linear otherwise.
    pub fn auto(label: impl Into<String>, values: &[f64]) -> Axis {
        Axis {
            label: label.into(),
            scale: if spans_decades(values) {
                Scale::Log
            } else {
                Scale::Linear
            },
        }
    }

    /// A size axis in bytes: binary log when it spans decades.
    pub fn bytes(label: impl Into<String>, values: &[f64]) -> Axis {
        Axis {
            label: label.into(),
            scale: if spans_decades(values) {
                Scale::LogBytes
            } else {
                Scale::Linear
            },
        }
    }

    /// A percentile axis: x = `nines(q)`, labelled in percent.
    pub fn nines(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Nines,
        }
    }

    fn is_log(&self) -> bool {
        matches!(self.scale, Scale::Log | Scale::LogBytes)
    }
}

/// Where a quantile q (0 <= q < 1) sits on a nines axis: -log10(1 - q); p50 = 0.301, p90 = 1,
/// p99 = 2, p99.9 = 3.
pub fn nines(q: f64) -> f64 {
    -(1.0 - q).max(1e-12).log10()
}

/// The percentile a nines-axis position stands for, as a label: "50", "90", "99.9".
pub fn fmt_percentile(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    // Enough decimals to tell 99.99 from 99.9, no float dust.
    let decimals = (x.ceil() as i64 - 2).clamp(0, 9) as usize + 1;
    let s = format!("{p:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// All finite and positive, and max / min >= `LOG_SPAN`.
pub fn spans_decades(values: &[f64]) -> bool {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() || finite.iter().any(|&v| v <= 0.0) {
        return false;
    }
    let (lo, hi) = min_max(&finite);
    hi / lo >= LOG_SPAN
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .filter(|x| x.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// Maps data to pixels along one axis.
#[derive(Debug, Clone)]
struct Mapper {
    lo: f64,
    hi: f64,
    log: bool,
    px0: f64,
    px1: f64,
    ticks: Vec<f64>,
    bytes: bool,
    nines: bool,
}

impl Mapper {
    /// Domain and ticks for `values` on `scale`; `zero` includes 0 in a linear domain (bars).
    fn new(values: &[f64], scale: Scale, zero: bool, px0: f64, px1: f64) -> Mapper {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if scale == Scale::Nines {
            return Mapper::nines(&finite, px0, px1);
        }
        let log = scale != Scale::Linear && finite.iter().all(|&v| v > 0.0) && !finite.is_empty();
        let (mut lo, mut hi) = if finite.is_empty() {
            (0.0, 1.0)
        } else {
            min_max(&finite)
        };
        let (lo, hi, ticks) = if log {
            // Bars grow from the bottom of a log axis: one starting just above a decade would
            // be invisible, so the axis starts a decade lower when the smallest value is within
            // 2.5x of it.
            if zero && (lo / 10f64.powf(lo.log10().floor())) < 2.5 {
                lo /= 10.0;
            }
            if scale == Scale::LogBytes {
                binary_log_ticks(lo, hi)
            } else {
                decade_ticks(lo, hi)
            }
        } else {
            if zero {
                lo = lo.min(0.0);
                hi = hi.max(0.0);
            }
            let integers = !finite.is_empty() && finite.iter().all(|v| *v == v.trunc());
            let (mut a, b, t) = linear_ticks(lo, hi, 5, integers);
            // Data that is never negative keeps a floor of zero, even when it is all zero.
            if a < 0.0 && finite.iter().all(|v| *v >= 0.0) {
                a = 0.0;
            }
            (a, b, t.into_iter().filter(|x| *x >= a).collect())
        };
        Mapper {
            lo,
            hi,
            log,
            px0,
            px1,
            ticks,
            bytes: scale == Scale::LogBytes && log,
            nines: false,
        }
    }

    /// A percentile axis from p50 (or below, when the data is) to the next whole nine above
    /// the data, at least p99; ticks at p50 and every nine.
    fn nines(finite: &[f64], px0: f64, px1: f64) -> Mapper {
        let p50 = nines(0.5);
        let lo_data = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi_data = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = if lo_data.is_finite() && lo_data < p50 - 1e-9 {
            0.0
        } else {
            p50
        };
        let hi = if hi_data.is_finite() {
            hi_data.ceil().clamp(2.0, 12.0)
        } else {
            2.0
        };
        let mut ticks = vec![lo];
        if lo < p50 {
            ticks.push(p50);
        }
        let mut k = 1.0;
        while k <= hi + 1e-9 {
            ticks.push(k);
            k += 1.0;
        }
        Mapper {
            lo,
            hi,
            log: false,
            px0,
            px1,
            ticks,
            bytes: false,
            nines: true,
        }
    }

    fn map(&self, v: f64) -> f64 {
        let t = if self.log {
            let v = v.max(self.lo);
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        let t = if t.is_finite() {
            t.clamp(-0.05, 1.05)
        } else {
            0.0
        };
        self.px0 + t * (self.px1 - self.px0)
    }

    /// Where bars start: 0 on a linear axis, the bottom of a log one.
    fn base(&self) -> f64 {
        if self.log {
            self.map(self.lo)
        } else {
            self.map(0.0_f64.clamp(self.lo, self.hi))
        }
    }

    fn label(&self, v: f64) -> String {
        if self.nines {
            fmt_percentile(v)
        } else if self.bytes {
            fmt_bytes(v)
        } else {
            fmt_tick(v)
        }
    }
}

/// Heckbert's "nice numbers": 1, 2, 5 or 10 times a power of ten.
fn nice_num(x: f64, round: bool) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return 1.0;
    }
    let exp = x.log10().floor();
    let f = x / 10f64.powf(exp);
    let nf = if round {
        if f < 1.5 {
            1.0
        } else if f < 3.0 {
            2.0
        } else if f < 7.0 {
            5.0
        } else {
            10.0
        }
    } else if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nf * 10f64.powf(exp)
}

/// A nice domain covering lo..hi and its ticks, about `target` of them; whole numbers only
/// when `integers` (thread counts).
fn linear_ticks(lo: f64, hi: f64, target: usize, integers: bool) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = (lo, hi);
    if hi.is_nan() || lo.is_nan() || hi <= lo {
        // One value (or none): a range around it.
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.5 };
        lo -= pad;
        hi += pad;
        if lo < 0.0 && hi > 0.0 && lo.abs() > hi {
            lo = 0.0;
        }
    }
    let mut step = nice_num(nice_num(hi - lo, false) / (target.max(2) - 1) as f64, true);
    if integers {
        step = step.max(1.0);
    }
    let start = (lo / step).floor() * step;
    let end = (hi / step).ceil() * step;
    let mut ticks = Vec::new();
    let mut t = start;
    while t <= end + step * 0.5 && ticks.len() < 50 {
        // Snap away the float dust (0.30000000000000004).
        ticks.push((t / step).round() * step);
        t += step;
    }
    (start, end, ticks)
}

/// Decades covering lo..hi; with 2 and 5 between when there are fewer than three.
fn decade_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let mut a = lo.log10().floor();
    let mut b = hi.log10().ceil();
    if b <= a {
        b = a + 1.0;
    }
    // Keep the chart readable whatever the data: at most 12 decades.
    if b - a > 12.0 {
        a = b - 12.0;
    }
    let decades = (b - a) as i32;
    let every = if decades > 6 { 2 } else { 1 };
    let mut ticks = Vec::new();
    for k in 0..=decades {
        let d = 10f64.powf(a + k as f64);
        if k % every == 0 {
            ticks.push(d);
        }
        if decades < 3 && k < decades {
            ticks.push(2.0 * d);
            ticks.push(5.0 * d);
        }
    }
    (10f64.powf(a), 10f64.powf(b), ticks)
}

/// Powers of two covering lo..hi, ticks every 2^k with k chosen for at most ~8 ticks.
fn binary_log_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let a = lo.log2().floor();
    let mut b = hi.log2().ceil();
    if b <= a {
        b = a + 1.0;
    }
    let span = (b - a) as i32;
    let step = ((span + 7) / 8).max(1);
    let mut ticks = Vec::new();
    let mut k = 0;
    while k <= span {
        ticks.push(2f64.powf(a + k as f64));
        k += step;
    }
    (2f64.powf(a), 2f64.powf(b), ticks)
}

/// A tick label: short, no float dust ("0.5", "20", "5k", "2M").
pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{}G", trim(format!("{:.1}", v / 1e9)))
    } else if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else if a >= 1e-3 {
        trim(format!("{v:.4}"))
    } else {
        format!("{v:.0e}")
    }
}

/// A size: "512", "4K", "64M".
pub fn fmt_bytes(v: f64) -> String {
    let b = v.max(0.0);
    let (div, suffix) = if b >= (1u64 << 30) as f64 {
        ((1u64 << 30) as f64, "G")
    } else if b >= (1u64 << 20) as f64 {
        ((1u64 << 20) as f64, "M")
    } else if b >= 1024.0 {
        (1024.0, "K")
    } else {
        (1.0, "")
    };
    let x = b / div;
    if (x - x.round()).abs() < 1e-9 {
        format!("{}{suffix}", x.round())
    } else {
        format!("{x:.1}{suffix}")
    }
}

/// A coordinate with one decimal: enough for a screen, short in the file.
fn c(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

const W: f64 = 640.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 30.0;

/// The frame every chart shares: the svg element, legend, axes, grid and labels.
struct Frame {
    out: String,
    height: f64,
    bottom: f64,
    /// Where the plot starts: below the legend.
    top: f64,
}

impl Frame {
    fn new(height: f64, bottom: f64, aria: &str) -> Frame {
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">",
            c(W),
            c(height),
            esc(aria)
        );
        Frame {
            out,
            height,
            bottom,
            top: TOP,
        }
    }

    /// The extra height a legend of `rows` rows needs beyond the two the top margin holds.
    fn legend_extra(rows: usize) -> f64 {
        14.0 * rows.saturating_sub(2) as f64
    }

    fn plot_bottom(&self) -> f64 {
        self.height - self.bottom
    }

    /// Legend entries in rows above the plot.
    fn legend(&mut self, items: &[Key]) {
        let mut x = LEFT;
        let mut y = 12.0;
        for k in items {
            let text_w = k.name.chars().count() as f64 * 6.2 + 30.0;
            if x + text_w > W - RIGHT && x > LEFT {
                x = LEFT;
                y += 14.0;
            }
            let class = colour_class(k.colour);
            let _ = write!(
                self.out,
                "<line class=\"{class} ln{}{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
                k.dash.class(),
                if k.light { " light" } else { "" },
                c(x),
                c(y - 3.5),
                c(x + 16.0),
                c(y - 3.5),
            );
            if let Some((marker, hollow)) = k.marker {
                self.out
                    .push_str(&marker.svg(x + 8.0, y - 3.5, &class, hollow, k.light, None));
            }
            let _ = write!(
                self.out,
                "<text class=\"lg\" x=\"{}\" y=\"{}\">{}</text>",
                c(x + 20.0),
                c(y),
                esc(&k.name)
            );
            x += text_w;
        }
    }

    /// How far down the legend of `items` reaches, so the plot can start below it.
    fn legend_rows(items: &[Key]) -> usize {
        let mut x = LEFT;
        let mut rows = usize::from(!items.is_empty());
        for k in items {
            let text_w = k.name.chars().count() as f64 * 6.2 + 30.0;
            if x + text_w > W - RIGHT && x > LEFT {
                x = LEFT;
                rows += 1;
            }
            x += text_w;
        }
        rows
    }

    fn y_axis(&mut self, m: &Mapper, label: &str) {
        for &t in &m.ticks {
            let y = m.map(t);
            let _ = write!(
                self.out,
                "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                c(LEFT),
                c(y),
                c(W - RIGHT),
                c(y),
                c(LEFT - 4.0),
                c(y + 3.5),
                esc(&m.label(t))
            );
        }
        let mid = (self.top + self.plot_bottom()) / 2.0;
        let _ = write!(
            self.out,
            "<text class=\"al\" transform=\"translate(12 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            c(mid),
            esc(label)
        );
        let _ = write!(
            self.out,
            "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            c(LEFT),
            c(self.top),
            c(LEFT),
            c(self.plot_bottom())
        );
    }

    fn x_axis_numeric(&mut self, m: &Mapper, label: &str) {
        let yb = self.plot_bottom();
        for &t in &m.ticks {
            let x = m.map(t);
            let _ = write!(
                self.out,
                "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                c(x),
                c(self.top),
                c(x),
                c(yb),
                c(x),
                c(yb + 13.0),
                esc(&m.label(t))
            );
        }
        self.x_label(label);
    }

    fn x_label(&mut self, label: &str) {
        let yb = self.plot_bottom();
        let _ = write!(
            self.out,
            "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"al\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c(LEFT),
            c(yb),
            c(W - RIGHT),
            c(yb),
            c((LEFT + W - RIGHT) / 2.0),
            c(self.height - 4.0),
            esc(label)
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// Colours in the page's palette (Okabe & Ito's, safe for colour-blind readers); "then" is
/// drawn in the neutral `then` class.
pub const PALETTE: usize = 8;

/// The colour index that stands for the neutral "then" class.
pub const THEN: usize = usize::MAX;

fn colour_class(colour: usize) -> String {
    if colour == THEN {
        "then".to_string()
    } else {
        format!("s{}", colour % PALETTE)
    }
}

/// How a line is stroked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dash {
    #[default]
    Solid,
    /// Long dashes: the study's curves.
    Dashed,
    /// Short dots: a second condition of the same subject (another placement, uncorrected).
    Dotted,
}

impl Dash {
    fn class(self) -> &'static str {
        match self {
            Dash::Solid => "",
            Dash::Dashed => " dash",
            Dash::Dotted => " dotted",
        }
    }
}

/// The shape drawn at each point of a line: with colours repeating after `PALETTE`, the
/// shape tells the ninth curve from the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Marker {
    #[default]
    Circle,
    Square,
    Triangle,
    Diamond,
}

impl Marker {
    /// The marker of the i-th subject: a new shape each time the colours come round again.
    pub fn nth(i: usize) -> Marker {
        [
            Marker::Circle,
            Marker::Square,
            Marker::Triangle,
            Marker::Diamond,
        ][(i / PALETTE) % 4]
    }

    /// The marker at (x, y) in `class`; hollow ones are outlined, light ones smaller and pale.
    fn svg(
        self,
        x: f64,
        y: f64,
        class: &str,
        hollow: bool,
        light: bool,
        title: Option<&str>,
    ) -> String {
        let r = if light { 2.4 } else { 3.2 };
        let cls = format!(
            "{class} {}{}",
            if hollow { "hollow" } else { "pt" },
            if light { " light" } else { "" }
        );
        let inner = title.map_or(String::new(), |t| format!("<title>{}</title>", esc(t)));
        let close = |tag: &str| {
            if inner.is_empty() {
                "/>".to_string()
            } else {
                format!(">{inner}</{tag}>")
            }
        };
        match self {
            Marker::Circle => format!(
                "<circle class=\"{cls}\" cx=\"{}\" cy=\"{}\" r=\"{}\"{}",
                c(x),
                c(y),
                c(r),
                close("circle")
            ),
            Marker::Square => format!(
                "<rect class=\"{cls}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"{}",
                c(x - r * 0.9),
                c(y - r * 0.9),
                c(r * 1.8),
                c(r * 1.8),
                close("rect")
            ),
            Marker::Triangle => format!(
                "<path class=\"{cls}\" d=\"M{} {}L{} {}H{}Z\"{}",
                c(x),
                c(y - r * 1.2),
                c(x + r * 1.1),
                c(y + r * 0.8),
                c(x - r * 1.1),
                close("path")
            ),
            Marker::Diamond => format!(
                "<path class=\"{cls}\" d=\"M{} {}L{} {}L{} {}L{} {}Z\"{}",
                c(x),
                c(y - r * 1.2),
                c(x + r * 1.2),
                c(y),
                c(x),
                c(y + r * 1.2),
                c(x - r * 1.2),
                c(y),
                close("path")
            ),
        }
    }
}

/// One entry of a legend: a line sample (and a marker) and its name.
#[derive(Debug, Clone, Default)]
pub struct Key {
    pub name: String,
    /// A palette index, or `THEN`.
    pub colour: usize,
    pub dash: Dash,
    pub light: bool,
    /// The point marker shown on the sample, hollow or filled.
    pub marker: Option<(Marker, bool)>,
}

/// One curve of a line chart.
#[derive(Debug, Clone, Default)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// A historical curve (drawn dashed, in the neutral colour).
    pub then: bool,
    pub colour: usize,
    pub dash: Dash,
    /// Drawn thin and pale: context beside the curves the chart is about.
    pub light: bool,
    pub marker: Marker,
    /// Outlined markers (a second condition of the same subject).
    pub hollow: bool,
    /// Left out of the legend (the chart explains it with its own keys).
    pub unlisted: bool,
    /// Hover text per point, when given for every point; otherwise the name and numbers.
    pub titles: Vec<String>,
}

/// A horizontal reference: a value the study gives without a curve, from `x_from` on.
#[derive(Debug, Clone)]
pub struct Reference {
    pub name: String,
    pub y: f64,
    pub x_from: Option<f64>,
    pub x_to: Option<f64>,
}

/// A single figure marked on a chart with its label beside it (a study's one stated point).
#[derive(Debug, Clone)]
pub struct Annotation {
    pub x: f64,
    pub y: f64,
    pub text: String,
    pub title: String,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
    pub references: Vec<Reference>,
    /// Formats a point's numbers for its hover title: (x, y) -> text.
    pub x_unit: String,
    pub y_unit: String,
    /// Legend entries beyond the lines' own (what a dotted line or a hollow marker means).
    pub keys: Vec<Key>,
    /// Single figures marked in the neutral colour with their labels (the study's points).
    pub annotations: Vec<Annotation>,
}

impl LineChart {
    pub fn svg(&self, aria: &str) -> String {
        let mut legend: Vec<Key> = self
            .lines
            .iter()
            .filter(|l| !l.unlisted)
            .map(|l| Key {
                name: l.name.clone(),
                colour: if l.then { THEN } else { l.colour },
                dash: if l.then { Dash::Dashed } else { l.dash },
                light: l.light,
                marker: (!l.then).then_some((l.marker, l.hollow)),
            })
            .chain(self.references.iter().map(|r| Key {
                name: r.name.clone(),
                colour: THEN,
                dash: Dash::Dashed,
                ..Key::default()
            }))
            .collect();
        legend.extend(self.keys.iter().cloned());
        let extra = Frame::legend_extra(Frame::legend_rows(&legend));
        let mut f = Frame::new(300.0 + extra, 40.0, aria);
        f.top = TOP + extra;
        f.legend(&legend);
        let xs: Vec<f64> = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .chain(
                self.references
                    .iter()
                    .flat_map(|r| r.x_from.into_iter().chain(r.x_to)),
            )
            .chain(self.annotations.iter().map(|a| a.x))
            .collect();
        let ys: Vec<f64> = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .chain(self.references.iter().map(|r| r.y))
            .chain(self.annotations.iter().map(|a| a.y))
            .collect();
        let mx = Mapper::new(&xs, self.x.scale, false, LEFT, W - RIGHT);
        let my = Mapper::new(&ys, self.y.scale, !self.y.is_log(), f.plot_bottom(), f.top);
        f.y_axis(&my, &self.y.label);
        f.x_axis_numeric(&mx, &self.x.label);
        for r in &self.references {
            let x0 = mx.map(r.x_from.unwrap_or(mx.lo));
            let x1 = mx.map(r.x_to.unwrap_or(mx.hi));
            let y = my.map(r.y);
            let _ = write!(
                f.out,
                "<line class=\"then ln dash\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"><title>{}</title></line>",
                c(x0),
                c(y),
                c(x1),
                c(y),
                esc(&format!("{}: {} {}", r.name, fmt_tick(r.y), self.y_unit))
            );
        }
        // Light curves first, so the ones the chart is about are drawn over them.
        let mut order: Vec<&Line> = self.lines.iter().filter(|l| l.light).collect();
        order.extend(self.lines.iter().filter(|l| !l.light));
        for l in order {
            let class = colour_class(if l.then { THEN } else { l.colour });
            let titled = l.titles.len() == l.points.len();
            let pts: Vec<(f64, f64, Option<&str>)> = l
                .points
                .iter()
                .enumerate()
                .map(|(i, p)| (p.0, p.1, titled.then(|| l.titles[i].as_str())))
                .filter(|(x, y, _)| x.is_finite() && y.is_finite())
                .filter(|(x, y, _)| (!mx.log || *x > 0.0) && (!my.log || *y > 0.0))
                .collect();
            if pts.len() > 1 {
                let path: Vec<String> = pts
                    .iter()
                    .map(|(x, y, _)| format!("{},{}", c(mx.map(*x)), c(my.map(*y))))
                    .collect();
                let dash = if l.then { " dash" } else { l.dash.class() };
                let _ = write!(
                    f.out,
                    "<polyline class=\"{class} ln{dash}{}\" points=\"{}\"/>",
                    if l.light { " light" } else { "" },
                    path.join(" ")
                );
            }
            for (x, y, title) in &pts {
                let text = match title {
                    Some(t) => t.to_string(),
                    None => format!(
                        "{}: {} {} at {} {}",
                        l.name,
                        crate::report::fmt_value(*y),
                        self.y_unit,
                        mx.label(*x),
                        self.x_unit
                    ),
                };
                f.out.push_str(&l.marker.svg(
                    mx.map(*x),
                    my.map(*y),
                    &class,
                    l.hollow,
                    l.light,
                    Some(&text),
                ));
            }
        }
        annotate(&mut f, &mx, &my, &self.annotations);
        f.finish()
    }
}

/// The annotations' points as neutral diamonds, each label beside its point, moved apart
/// vertically so that labels of nearby points do not overlap.
fn annotate(f: &mut Frame, mx: &Mapper, my: &Mapper, notes: &[Annotation]) {
    let mut placed: Vec<(f64, f64, &Annotation)> = notes
        .iter()
        .filter(|a| a.x.is_finite() && a.y.is_finite())
        .filter(|a| (!mx.log || a.x > 0.0) && (!my.log || a.y > 0.0))
        .map(|a| (mx.map(a.x), my.map(a.y), a))
        .collect();
    placed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut label_y: Vec<f64> = placed.iter().map(|p| p.1 + 3.5).collect();
    for i in 1..label_y.len() {
        if label_y[i] - label_y[i - 1] < 12.0 {
            label_y[i] = label_y[i - 1] + 12.0;
        }
    }
    for ((x, y, a), ly) in placed.iter().zip(label_y) {
        let right = *x < W - RIGHT - 160.0;
        let _ = write!(
            f.out,
            "<path class=\"then mark-then\" d=\"M{} {}l4.5 4.5l-4.5 4.5l-4.5 -4.5z\"><title>{}</title></path><text class=\"nt\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>",
            c(*x),
            c(y - 4.5),
            esc(&a.title),
            c(if right { x + 8.0 } else { x - 8.0 }),
            c(ly),
            if right { "start" } else { "end" },
            esc(&a.text)
        );
    }
}

/// One bar: its value, an optional range drawn as a whisker (IQR, or a study's range), the
/// text shown on hover.
#[derive(Debug, Clone)]
pub struct Bar {
    pub value: f64,
    pub range: Option<(f64, f64)>,
    pub title: String,
    /// Why the figure should not be taken at face value (its flags): the bar is drawn pale
    /// with a dashed outline and a "!" mark above it, and the text is added to its hover.
    pub flag: Option<String>,
}

/// Bars side by side for one label; `None` leaves a gap where a series has no value.
#[derive(Debug, Clone)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Option<Bar>>,
    /// Written above the group, e.g. "then/now 12x".
    pub note: Option<String>,
}

/// A series of bars: its name and whether it is the study's ("then", drawn neutral).
#[derive(Debug, Clone)]
pub struct BarSeries {
    pub name: String,
    pub then: bool,
}

#[derive(Debug, Clone)]
pub struct BarChart {
    pub y: Axis,
    pub series: Vec<BarSeries>,
    pub groups: Vec<BarGroup>,
    /// Horizontal lines across the plot (a study's figure, the work itself), dashed and
    /// neutral, named in the legend.
    pub references: Vec<Reference>,
}

impl BarChart {
    pub fn svg(&self, aria: &str) -> String {
        let n_groups = self.groups.len().max(1) as f64;
        let slot = (W - LEFT - RIGHT) / n_groups;
        let longest = self
            .groups
            .iter()
            .map(|g| g.label.chars().count())
            .max()
            .unwrap_or(0) as f64;
        // Labels that do not fit under their group are turned; the chart grows to hold them.
        let turned = longest * 6.0 > slot - 4.0;
        let bottom = if turned {
            (longest.min(28.0) * 4.6 + 30.0).max(44.0)
        } else {
            44.0
        };
        let mut colour = 0;
        let legend: Vec<Key> = self
            .series
            .iter()
            .map(|s| {
                let k = if s.then { THEN } else { colour };
                if !s.then {
                    colour += 1;
                }
                Key {
                    name: s.name.clone(),
                    colour: k,
                    ..Key::default()
                }
            })
            .collect();
        // The series' keys index the bars' colours; the references' keys follow them.
        let mut keys = if self.series.len() > 1 {
            legend.clone()
        } else {
            Vec::new()
        };
        keys.extend(self.references.iter().map(|r| Key {
            name: r.name.clone(),
            colour: THEN,
            dash: Dash::Dashed,
            ..Key::default()
        }));
        let shown = !keys.is_empty();
        let extra = if shown {
            Frame::legend_extra(Frame::legend_rows(&keys))
        } else {
            0.0
        };
        let mut f = Frame::new(260.0 + bottom + extra, bottom, aria);
        f.top = TOP + extra;
        if shown {
            f.legend(&keys);
        }
        let values: Vec<f64> = self
            .groups
            .iter()
            .flat_map(|g| g.bars.iter().flatten())
            .flat_map(|b| {
                std::iter::once(b.value).chain(b.range.into_iter().flat_map(|(lo, hi)| [lo, hi]))
            })
            .chain(self.references.iter().map(|r| r.y))
            .collect();
        let my = Mapper::new(&values, self.y.scale, true, f.plot_bottom(), f.top + 10.0);
        f.y_axis(&my, &self.y.label);
        let ns = self.series.len().max(1) as f64;
        let bar_w = ((slot * 0.8) / ns).min(40.0);
        let base = my.base();
        let yb = f.plot_bottom();
        for (gi, g) in self.groups.iter().enumerate() {
            let x0 = LEFT + slot * gi as f64 + (slot - bar_w * ns) / 2.0;
            let mut top = yb;
            for (si, bar) in g.bars.iter().enumerate() {
                let Some(b) = bar else { continue };
                let class = match legend.get(si) {
                    Some(k) => colour_class(k.colour),
                    None => "s0".to_string(),
                };
                let x = x0 + bar_w * si as f64;
                let drawable = b.value.is_finite() && (!my.log || b.value > 0.0);
                let y = if drawable { my.map(b.value) } else { base };
                let (y_top, h) = if y < base {
                    (y, base - y)
                } else {
                    (base, y - base)
                };
                top = top.min(y_top);
                let title = match &b.flag {
                    Some(flag) => format!("{}; flagged: {flag}", b.title),
                    None => b.title.clone(),
                };
                let _ = write!(
                    f.out,
                    "<rect class=\"{class} {}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
                    if b.flag.is_some() { "flagged" } else { "bar" },
                    c(x + 1.0),
                    c(y_top),
                    c((bar_w - 2.0).max(1.0)),
                    c(h.max(if drawable { 0.5 } else { 0.0 })),
                    esc(&title)
                );
                if let Some((lo, hi)) = b.range {
                    if lo.is_finite() && hi.is_finite() && (!my.log || lo > 0.0) {
                        let xm = x + bar_w / 2.0;
                        let (ylo, yhi) = (my.map(lo), my.map(hi));
                        top = top.min(yhi);
                        let _ = write!(
                            f.out,
                            "<path class=\"wh\" d=\"M{} {}V{}M{} {}H{}M{} {}H{}\"/>",
                            c(xm),
                            c(ylo),
                            c(yhi),
                            c(xm - 3.0),
                            c(ylo),
                            c(xm + 3.0),
                            c(xm - 3.0),
                            c(yhi),
                            c(xm + 3.0)
                        );
                    }
                }
                if b.flag.is_some() {
                    // A warning mark above the bar (and its whisker), with the flags on hover.
                    let xm = x + bar_w / 2.0;
                    let ym = (top.min(y_top) - 3.0).max(f.top + 9.0);
                    let _ = write!(
                        f.out,
                        "<g class=\"flagmark\"><path d=\"M{} {}l5.5 9.5h-11z\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">!</text><title>{}</title></g>",
                        c(xm),
                        c(ym - 9.5),
                        c(xm),
                        c(ym - 1.2),
                        esc(&title)
                    );
                    top = top.min(ym - 10.0);
                }
            }
            let xm = LEFT + slot * (gi as f64 + 0.5);
            if let Some(note) = &g.note {
                let _ = write!(
                    f.out,
                    "<text class=\"nt\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    c(xm),
                    c((top - 4.0).max(f.top + 2.0)),
                    esc(note)
                );
            }
            if turned {
                let _ = write!(
                    f.out,
                    "<text class=\"tk\" transform=\"translate({} {}) rotate(-35)\" text-anchor=\"end\">{}</text>",
                    c(xm + 3.0),
                    c(yb + 10.0),
                    esc(&g.label)
                );
            } else {
                let _ = write!(
                    f.out,
                    "<text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    c(xm),
                    c(yb + 13.0),
                    esc(&g.label)
                );
            }
        }
        for r in &self.references {
            if !r.y.is_finite() || (my.log && r.y <= 0.0) {
                continue;
            }
            let y = my.map(r.y);
            let _ = write!(
                f.out,
                "<line class=\"then ln dash\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"><title>{}</title></line>",
                c(LEFT),
                c(y),
                c(W - RIGHT),
                c(y),
                esc(&r.name),
            );
        }
        let _ = write!(
            f.out,
            "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            c(LEFT),
            c(yb),
            c(W - RIGHT),
            c(yb)
        );
        f.finish()
    }
}

/// One row of a distribution chart: every sample as a dot, the quartile box and median line,
/// and optional marks (a model's value, a worst case) as diamonds.
#[derive(Debug, Clone)]
pub struct DistRow {
    pub label: String,
    pub values: Vec<f64>,
    pub colour: usize,
    pub marks: Vec<(f64, String)>,
}

/// Distributions of samples, one row each, the value along x.
#[derive(Debug, Clone)]
pub struct DistChart {
    pub x: Axis,
    pub rows: Vec<DistRow>,
    pub unit: String,
}

impl DistChart {
    pub fn svg(&self, aria: &str) -> String {
        let row_h = 18.0;
        let label_w = self
            .rows
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0)
            .min(30) as f64
            * 6.0
            + 12.0;
        let left = label_w.max(LEFT);
        let height = TOP + row_h * self.rows.len().max(1) as f64 + 40.0;
        let mut f = Frame::new(height, 40.0, aria);
        let all: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| r.values.iter().copied().chain(r.marks.iter().map(|m| m.0)))
            .collect();
        let mx = Mapper::new(&all, self.x.scale, !self.x.is_log(), left, W - RIGHT);
        let yb = f.plot_bottom();
        for &t in &mx.ticks {
            let x = mx.map(t);
            let _ = write!(
                f.out,
                "<line class=\"grid\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                c(x),
                c(TOP),
                c(x),
                c(yb),
                c(x),
                c(yb + 13.0),
                esc(&mx.label(t))
            );
        }
        let _ = write!(
            f.out,
            "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"al\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c(left),
            c(yb),
            c(W - RIGHT),
            c(yb),
            c((left + W - RIGHT) / 2.0),
            c(height - 4.0),
            esc(&self.x.label)
        );
        for (i, r) in self.rows.iter().enumerate() {
            let y = TOP + row_h * (i as f64 + 0.5);
            let class = format!("s{}", r.colour % PALETTE);
            let _ = write!(
                f.out,
                "<text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                c(left - 6.0),
                c(y + 3.5),
                esc(&r.label)
            );
            let mut v: Vec<f64> = r
                .values
                .iter()
                .copied()
                .filter(|x| x.is_finite() && (!mx.log || *x > 0.0))
                .collect();
            v.sort_by(f64::total_cmp);
            if !v.is_empty() {
                let q = |p: f64| crate::measure::stats::quantile_sorted(&v, p);
                let (q1, med, q3) = (q(0.25), q(0.5), q(0.75));
                let _ = write!(
                    f.out,
                    "<rect class=\"{class} box\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect><line class=\"med\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
                    c(mx.map(q1)),
                    c(y - 6.0),
                    c((mx.map(q3) - mx.map(q1)).max(1.0)),
                    c(12.0),
                    esc(&format!(
                        "{}: median {} {}, quartiles {} .. {}, {} samples",
                        r.label,
                        crate::report::fmt_value(med),
                        self.unit,
                        crate::report::fmt_value(q1),
                        crate::report::fmt_value(q3),
                        v.len()
                    )),
                    c(mx.map(med)),
                    c(y - 7.0),
                    c(mx.map(med)),
                    c(y + 7.0)
                );
                // Many samples: dots without titles keep the file small; the box has the numbers.
                let titled = v.len() <= 40;
                for x in &v {
                    if titled {
                        let _ = write!(
                            f.out,
                            "<circle class=\"{class} dot\" cx=\"{}\" cy=\"{}\" r=\"2.2\"><title>{} {}</title></circle>",
                            c(mx.map(*x)),
                            c(y),
                            crate::report::fmt_value(*x),
                            esc(&self.unit)
                        );
                    } else {
                        let _ = write!(
                            f.out,
                            "<circle class=\"{class} dot\" cx=\"{}\" cy=\"{}\" r=\"1.6\"/>",
                            c(mx.map(*x)),
                            c(y)
                        );
                    }
                }
            }
            for (x, what) in &r.marks {
                if !x.is_finite() || (mx.log && *x <= 0.0) {
                    continue;
                }
                let xm = mx.map(*x);
                let _ = write!(
                    f.out,
                    "<path class=\"mark\" d=\"M{} {}l4 4l-4 4l-4 -4z\"><title>{}</title></path>",
                    c(xm),
                    c(y - 4.0),
                    esc(&format!(
                        "{}: {what} {} {}",
                        r.label,
                        crate::report::fmt_value(*x),
                        self.unit
                    ))
                );
            }
        }
        f.finish()
    }
}

/// One row of a ratio chart: a point estimate with its interval, and the band within which a
/// change counts as noise.
#[derive(Debug, Clone)]
pub struct RatioRow {
    pub label: String,
    pub ratio: f64,
    pub ci: Option<(f64, f64)>,
    /// The noise band as a ratio, e.g. 1.05 draws 1/1.05 .. 1.05.
    pub band: f64,
    /// 0 = no change, 1 = worse, 2 = better, 3 = changed without a direction.
    pub verdict: u8,
    pub title: String,
}

/// B / A per metric on a log axis centred on 1 (a forest plot).
pub fn ratio_chart(rows: &[RatioRow], axis_label: &str, aria: &str) -> String {
    let row_h = 16.0;
    let label_w = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .min(40) as f64
        * 5.8
        + 12.0;
    let left = label_w.max(LEFT);
    let height = TOP + row_h * rows.len().max(1) as f64 + 40.0;
    let mut f = Frame::new(height, 40.0, aria);
    // Symmetric on the log scale around 1, wide enough for every interval.
    let mut span: f64 = 1.25;
    for r in rows {
        for v in [
            Some(r.ratio),
            r.ci.map(|x| x.0),
            r.ci.map(|x| x.1),
            Some(r.band),
        ]
        .into_iter()
        .flatten()
        {
            if v.is_finite() && v > 0.0 {
                span = span.max(v).max(1.0 / v);
            }
        }
    }
    let span = span.min(1e3) * 1.05;
    let lo = 1.0 / span;
    let mx = Mapper {
        lo,
        hi: span,
        log: true,
        px0: left,
        px1: W - RIGHT,
        ticks: ratio_ticks(span),
        bytes: false,
        nines: false,
    };
    let yb = f.plot_bottom();
    // 1 first, then the others nearest to it, each at least 44 px from every tick kept.
    let mut order = mx.ticks.clone();
    order.sort_by(|a, b| a.ln().abs().total_cmp(&b.ln().abs()));
    let mut kept: Vec<f64> = Vec::new();
    for t in order {
        let x = mx.map(t);
        if kept.iter().all(|k| (mx.map(*k) - x).abs() >= 44.0) {
            kept.push(t);
        }
    }
    for t in kept {
        let x = mx.map(t);
        let class = if t == 1.0 { "axis" } else { "grid" };
        let label = if t >= 1.0 {
            fmt_tick(t)
        } else {
            let s = format!("{t:.2}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        let _ = write!(
            f.out,
            "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}x</text>",
            c(x),
            c(TOP),
            c(x),
            c(yb),
            c(x),
            c(yb + 13.0)
        );
    }
    let _ = write!(
        f.out,
        "<text class=\"al\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        c((left + W - RIGHT) / 2.0),
        c(height - 4.0),
        esc(axis_label)
    );
    for (i, r) in rows.iter().enumerate() {
        let y = TOP + row_h * (i as f64 + 0.5);
        let _ = write!(
            f.out,
            "<text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            c(left - 6.0),
            c(y + 3.5),
            esc(&r.label)
        );
        if r.band.is_finite() && r.band > 1.0 {
            let (x0, x1) = (mx.map(1.0 / r.band), mx.map(r.band));
            let _ = write!(
                f.out,
                "<rect class=\"band\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
                c(x0),
                c(y - 6.0),
                c(x1 - x0),
                c(12.0)
            );
        }
        let class = match r.verdict {
            1 => "worse",
            2 => "better",
            3 => "changed",
            _ => "same",
        };
        if let Some((a, b)) = r.ci {
            if a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite() {
                let _ = write!(
                    f.out,
                    "<line class=\"{class} ci\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
                    c(mx.map(a)),
                    c(y),
                    c(mx.map(b)),
                    c(y)
                );
            }
        }
        if r.ratio.is_finite() && r.ratio > 0.0 {
            let _ = write!(
                f.out,
                "<circle class=\"{class} pt\" cx=\"{}\" cy=\"{}\" r=\"3.5\"><title>{}</title></circle>",
                c(mx.map(r.ratio)),
                c(y),
                esc(&r.title)
            );
        }
    }
    f.finish()
}

fn ratio_ticks(span: f64) -> Vec<f64> {
    let candidates = [
        1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0, 300.0, 1000.0,
    ];
    let mut up: Vec<f64> = candidates.iter().copied().filter(|&t| t <= span).collect();
    // About four ticks each side.
    while up.len() > 5 {
        up = up
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, t)| *t)
            .collect();
    }
    let mut ticks: Vec<f64> = up
        .iter()
        .rev()
        .filter(|&&t| t > 1.0)
        .map(|t| 1.0 / t)
        .collect();
    ticks.extend(up);
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup_and_no_url() {
        let s = esc("<script>alert('x')</script> & \"https://example.com\"");
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('"') && !s.contains('\''));
        assert!(!s.contains("//"), "{s}");
        assert_eq!(esc("a\u{1}b"), "a b");
    }

    #[test]
    fn ticks_are_nice_and_cover_the_data() {
        let (lo, hi, t) = linear_ticks(0.0, 7.3, 5, false);
        assert_eq!((lo, hi), (0.0, 8.0));
        assert_eq!(t, vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        let (lo, hi, t) = decade_ticks(3.0, 45_000.0);
        assert_eq!((lo, hi), (1.0, 100_000.0));
        assert_eq!(t.len(), 6);
        let (lo, hi, _) = binary_log_ticks(1024.0, 64.0 * 1024.0 * 1024.0);
        assert_eq!((lo, hi), (1024.0, 67_108_864.0));
        let (_, _, t) = linear_ticks(2.0, 4.0, 5, true);
        assert_eq!(t, vec![2.0, 3.0, 4.0]);
        let m = Mapper::new(&[0.0, 0.0], Scale::Linear, true, 0.0, 100.0);
        assert_eq!(m.lo, 0.0);
        // One value or none: still a range, never a division by zero.
        let (lo, hi, _) = linear_ticks(5.0, 5.0, 5, false);
        assert!(lo < 5.0 && hi > 5.0);
        let m = Mapper::new(&[], Scale::Log, true, 0.0, 100.0);
        assert!(m.map(1.0).is_finite());
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(fmt_tick(20_000.0), "20k");
        assert_eq!(fmt_tick(0.5), "0.5");
        assert_eq!(fmt_tick(2_000_000.0), "2M");
        assert_eq!(fmt_tick(0.30000000000000004), "0.3");
        assert_eq!(fmt_bytes(65536.0), "64K");
        assert_eq!(fmt_bytes(64.0 * 1024.0 * 1024.0), "64M");
        assert_eq!(fmt_bytes(512.0), "512");
    }

    #[test]
    fn the_nines_axis_is_labelled_in_percent() {
        assert_eq!(fmt_percentile(nines(0.5)), "50");
        assert_eq!(fmt_percentile(nines(0.9)), "90");
        assert_eq!(fmt_percentile(nines(0.99)), "99");
        assert_eq!(fmt_percentile(nines(0.999)), "99.9");
        assert_eq!(fmt_percentile(nines(0.9999)), "99.99");
        let m = Mapper::new(&[nines(0.5), nines(0.998)], Scale::Nines, false, 0.0, 100.0);
        let labels: Vec<String> = m.ticks.iter().map(|t| m.label(*t)).collect();
        assert_eq!(labels, ["50", "90", "99", "99.9"]);
        assert_eq!(m.map(nines(0.5)), 0.0);
        assert_eq!(m.map(3.0), 100.0);
    }

    #[test]
    fn flagged_bars_and_hollow_markers_are_drawn_as_such() {
        let bars = BarChart {
            y: Axis::linear("y"),
            series: vec![BarSeries {
                name: "now".into(),
                then: false,
            }],
            groups: vec![BarGroup {
                label: "g".into(),
                bars: vec![Some(Bar {
                    value: 2.0,
                    range: Some((1.0, 3.0)),
                    title: "t".into(),
                    flag: Some("client_bound".into()),
                })],
                note: None,
            }],
            references: vec![Reference {
                name: "the work itself".into(),
                y: 1.0,
                x_from: None,
                x_to: None,
            }],
        };
        let s = bars.svg("b");
        assert!(s.contains("class=\"s0 flagged\"") && s.contains("flagmark"));
        assert!(s.contains("t; flagged: client_bound"));
        assert!(
            s.contains(">the work itself</text>"),
            "the reference is in the legend"
        );
        let line = LineChart {
            x: Axis::nines("p"),
            y: Axis::auto("y", &[1.0, 2.0]),
            lines: vec![Line {
                name: "a".into(),
                points: vec![(nines(0.5), 1.0), (nines(0.99), 2.0)],
                dash: Dash::Dotted,
                hollow: true,
                marker: Marker::Square,
                titles: vec!["first".into(), "second".into()],
                ..Line::default()
            }],
            references: vec![],
            x_unit: "".into(),
            y_unit: "".into(),
            keys: vec![],
            annotations: vec![Annotation {
                x: nines(0.9),
                y: 1.5,
                text: "then".into(),
                title: "the study".into(),
            }],
        };
        let s = line.svg("l");
        assert!(s.contains("ln dotted") && s.contains("<rect class=\"s0 hollow\""));
        assert!(s.contains("<title>second</title>") && s.contains(">then</text>"));
    }

    #[test]
    fn log_scale_only_for_positive_data_spanning_decades() {
        assert!(spans_decades(&[1.0, 100.0]));
        assert!(!spans_decades(&[1.0, 10.0]));
        assert!(!spans_decades(&[0.0, 100.0]));
        assert!(!spans_decades(&[]));
    }

    #[test]
    fn charts_survive_odd_data() {
        let line = LineChart {
            x: Axis::auto("x", &[0.0, 1.0]),
            y: Axis {
                label: "y".into(),
                scale: Scale::Log,
            },
            lines: vec![
                Line {
                    name: "<b>".into(),
                    points: vec![(0.0, -1.0), (1.0, 0.0), (2.0, 1e300)],
                    then: false,
                    colour: 3,
                    ..Line::default()
                },
                Line {
                    name: "empty".into(),
                    points: vec![],
                    then: true,
                    colour: 0,
                    ..Line::default()
                },
            ],
            references: vec![],
            x_unit: "u".into(),
            y_unit: "u".into(),
            keys: vec![],
            annotations: vec![],
        };
        let s = line.svg("a");
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
        let bars = BarChart {
            y: Axis::auto("y", &[]),
            series: vec![],
            groups: vec![BarGroup {
                label: "g".into(),
                bars: vec![
                    None,
                    Some(Bar {
                        value: f64::NAN,
                        range: Some((f64::NAN, 1.0)),
                        title: "t".into(),
                        flag: Some("client_bound".into()),
                    }),
                ],
                note: Some("n".into()),
            }],
            references: vec![Reference {
                name: "r".into(),
                y: f64::NAN,
                x_from: None,
                x_to: None,
            }],
        };
        let s = bars.svg("b");
        assert!(!s.contains("NaN"), "{s}");
        let d = DistChart {
            x: Axis::auto("x", &[1.0, 1000.0]),
            rows: vec![DistRow {
                label: "r".into(),
                values: vec![],
                colour: 0,
                marks: vec![(f64::INFINITY, "m".into())],
            }],
            unit: "us".into(),
        };
        assert!(!d.svg("d").contains("NaN"));
        let r = ratio_chart(
            &[RatioRow {
                label: "m".into(),
                ratio: 0.0,
                ci: Some((f64::NAN, 2.0)),
                band: 1.05,
                verdict: 1,
                title: "t".into(),
            }],
            "B / A",
            "r",
        );
        assert!(!r.contains("NaN"));
    }
}
