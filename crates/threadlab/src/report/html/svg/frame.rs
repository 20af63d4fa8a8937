//! The frame every chart shares (svg element, legend, axes, grid) and the palette, dashes and markers.

use std::fmt::Write;

use super::*;

/// A coordinate with one decimal: enough for a screen, short in the file.
pub(super) fn c(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

pub(super) const W: f64 = 640.0;
pub(super) const LEFT: f64 = 62.0;
pub(super) const RIGHT: f64 = 14.0;
pub(super) const TOP: f64 = 30.0;

/// The frame every chart shares: the svg element, legend, axes, grid and labels.
pub(super) struct Frame {
    pub(super) out: String,
    pub(super) height: f64,
    pub(super) bottom: f64,
    /// Where the plot starts: below the legend.
    pub(super) top: f64,
    /// Where the plot starts on the left: after the row labels of a chart with rows.
    pub(super) left: f64,
}

impl Frame {
    pub(super) fn new(height: f64, bottom: f64, aria: &str) -> Frame {
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
            left: LEFT,
        }
    }

    /// A frame of `rows` rows `row_h` high, their labels left of `left`, the value along x.
    pub(super) fn with_rows(rows: usize, row_h: f64, left: f64, aria: &str) -> Frame {
        let height = TOP + row_h * rows.max(1) as f64 + 40.0;
        let mut f = Frame::new(height, 40.0, aria);
        f.left = left;
        f
    }

    /// Where the labels of rows end: room for the longest (up to `cap` characters of
    /// `char_w` pixels), never less than the usual margin.
    pub(super) fn row_labels_end<'a>(
        labels: impl Iterator<Item = &'a str>,
        cap: usize,
        char_w: f64,
    ) -> f64 {
        let longest = labels.map(|l| l.chars().count()).max().unwrap_or(0);
        (longest.min(cap) as f64 * char_w + 12.0).max(LEFT)
    }

    /// The middle of row `i` of a frame made `with_rows`.
    pub(super) fn row_y(i: usize, row_h: f64) -> f64 {
        TOP + row_h * (i as f64 + 0.5)
    }

    /// A row's label, right-aligned before the plot.
    pub(super) fn row_label(&mut self, y: f64, label: &str) {
        let _ = write!(
            self.out,
            "<text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            c(self.left - 6.0),
            c(y + 3.5),
            esc(label)
        );
    }

    /// The extra height a legend of `rows` rows needs beyond the two the top margin holds.
    pub(super) fn legend_extra(rows: usize) -> f64 {
        14.0 * rows.saturating_sub(2) as f64
    }

    pub(super) fn plot_bottom(&self) -> f64 {
        self.height - self.bottom
    }

    /// Where each legend entry goes: left to right, a new row when the next does not fit.
    fn legend_places(items: &[Key]) -> Vec<(f64, f64)> {
        let mut x = LEFT;
        let mut y = 12.0;
        let mut places = Vec::with_capacity(items.len());
        for k in items {
            let text_w = k.name.chars().count() as f64 * 6.2 + 30.0;
            if x + text_w > W - RIGHT && x > LEFT {
                x = LEFT;
                y += 14.0;
            }
            places.push((x, y));
            x += text_w;
        }
        places
    }

    /// Legend entries in rows above the plot.
    pub(super) fn legend(&mut self, items: &[Key]) {
        for (k, (x, y)) in items.iter().zip(Frame::legend_places(items)) {
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
        }
    }

    /// How far down the legend of `items` reaches, so the plot can start below it.
    pub(super) fn legend_rows(items: &[Key]) -> usize {
        Frame::legend_places(items)
            .last()
            .map_or(0, |&(_, y)| ((y - 12.0) / 14.0).round() as usize + 1)
    }

    pub(super) fn y_axis(&mut self, m: &Mapper, label: &str) {
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

    pub(super) fn x_axis_numeric(&mut self, m: &Mapper, label: &str) {
        for &t in &m.ticks {
            self.x_tick("grid", m.map(t), &m.label(t));
        }
        self.x_label(label);
    }

    /// A vertical line in `class` across the plot at x, labelled below it.
    pub(super) fn x_tick(&mut self, class: &str, x: f64, label: &str) {
        let yb = self.plot_bottom();
        let _ = write!(
            self.out,
            "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/><text class=\"tk\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c(x),
            c(self.top),
            c(x),
            c(yb),
            c(x),
            c(yb + 13.0),
            esc(label)
        );
    }

    pub(super) fn x_label(&mut self, label: &str) {
        let yb = self.plot_bottom();
        let _ = write!(
            self.out,
            "<line class=\"axis\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            c(self.left),
            c(yb),
            c(W - RIGHT),
            c(yb),
        );
        self.x_title(label);
    }

    /// The x axis's title, centred under the plot.
    pub(super) fn x_title(&mut self, label: &str) {
        let _ = write!(
            self.out,
            "<text class=\"al\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c((self.left + W - RIGHT) / 2.0),
            c(self.height - 4.0),
            esc(label)
        );
    }

    /// A horizontal line across the plot in the study's colour, dashed, named on hover: a
    /// figure given without a curve.
    pub(super) fn reference(&mut self, x0: f64, x1: f64, y: f64, title: &str) {
        let _ = write!(
            self.out,
            "<line class=\"then ln dash\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"><title>{}</title></line>",
            c(x0),
            c(y),
            c(x1),
            c(y),
            esc(title),
        );
    }

    pub(super) fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// Colours in the page's palette (Okabe & Ito's, safe for colour-blind readers); "then" is
/// drawn in the neutral `then` class.
pub const PALETTE: usize = 8;

/// The colour index that stands for the neutral "then" class.
pub const THEN: usize = usize::MAX;

pub(super) fn colour_class(colour: usize) -> String {
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
    pub(super) fn class(self) -> &'static str {
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
    pub(super) fn svg(
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
            Marker::Triangle | Marker::Diamond => {
                let steps: &[(char, f64, Option<f64>)] = if self == Marker::Triangle {
                    &[('L', 1.1, Some(0.8)), ('H', -1.1, None)]
                } else {
                    &[
                        ('L', 1.2, Some(0.0)),
                        ('L', 0.0, Some(1.2)),
                        ('L', -1.2, Some(0.0)),
                    ]
                };
                format!(
                    "<path class=\"{cls}\" d=\"{}\"{}",
                    outline(x, y, r, steps),
                    close("path")
                )
            }
        }
    }
}

/// A closed outline from the top of a marker at (x, y) of radius r: each step a command and
/// its offsets in radii (`H` takes x alone).
fn outline(x: f64, y: f64, r: f64, steps: &[(char, f64, Option<f64>)]) -> String {
    let mut d = format!("M{} {}", c(x), c(y - r * 1.2));
    for &(command, dx, dy) in steps {
        d.push(command);
        d.push_str(&c(x + r * dx));
        if let Some(dy) = dy {
            d.push(' ');
            d.push_str(&c(y + r * dy));
        }
    }
    d.push('Z');
    d
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
