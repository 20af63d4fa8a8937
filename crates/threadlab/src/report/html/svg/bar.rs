//! Grouped bar charts, with ranges and then-vs-now pairs.

use std::fmt::Write;

use super::*;

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

impl BarSeries {
    /// The study's series, drawn neutral.
    pub fn then(name: impl Into<String>) -> BarSeries {
        BarSeries {
            name: name.into(),
            then: true,
        }
    }

    /// A series measured now, drawn in the palette.
    pub fn now(name: impl Into<String>) -> BarSeries {
        BarSeries {
            name: name.into(),
            then: false,
        }
    }
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

/// Where a bar chart's groups and bars go.
struct Layout {
    /// The width each group has.
    slot: f64,
    bar_w: f64,
    /// Group labels too long to fit under their group are turned.
    turned: bool,
    /// Room under the plot for the group labels.
    bottom: f64,
}

impl BarChart {
    pub fn svg(&self, aria: &str) -> String {
        let layout = self.layout();
        let (legend, keys) = self.keys();
        let extra = if keys.is_empty() {
            0.0
        } else {
            Frame::legend_extra(Frame::legend_rows(&keys))
        };
        let mut f = Frame::new(260.0 + layout.bottom + extra, layout.bottom, aria);
        f.top = TOP + extra;
        if !keys.is_empty() {
            f.legend(&keys);
        }
        let my = Mapper::new(
            &self.values(),
            self.y.scale,
            true,
            f.plot_bottom(),
            f.top + 10.0,
        );
        f.y_axis(&my, &self.y.label);
        let ns = self.series.len().max(1) as f64;
        for (gi, g) in self.groups.iter().enumerate() {
            let x0 = LEFT + layout.slot * gi as f64 + (layout.slot - layout.bar_w * ns) / 2.0;
            let mut top = f.plot_bottom();
            for (si, bar) in g.bars.iter().enumerate() {
                let Some(b) = bar else { continue };
                let class = match legend.get(si) {
                    Some(k) => colour_class(k.colour),
                    None => "s0".to_string(),
                };
                let x = x0 + layout.bar_w * si as f64;
                top = draw_bar(&mut f, &my, &class, x, layout.bar_w, b, top);
            }
            group_label(&mut f, &layout, gi, g, top);
        }
        for r in &self.references {
            if !r.y.is_finite() || (my.log && r.y <= 0.0) {
                continue;
            }
            f.reference(LEFT, W - RIGHT, my.map(r.y), &r.name);
        }
        let yb = f.plot_bottom();
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

    fn layout(&self) -> Layout {
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
        let ns = self.series.len().max(1) as f64;
        Layout {
            slot,
            bar_w: ((slot * 0.8) / ns).min(40.0),
            turned,
            bottom,
        }
    }

    /// The series' keys, which index the bars' colours, and the keys the legend shows: the
    /// series' when there are several, then the references'.
    fn keys(&self) -> (Vec<Key>, Vec<Key>) {
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
        (legend, keys)
    }

    /// Every value the y axis must hold: bars, their ranges and the references.
    fn values(&self) -> Vec<f64> {
        self.groups
            .iter()
            .flat_map(|g| g.bars.iter().flatten())
            .flat_map(|b| {
                std::iter::once(b.value).chain(b.range.into_iter().flat_map(|(lo, hi)| [lo, hi]))
            })
            .chain(self.references.iter().map(|r| r.y))
            .collect()
    }
}

/// One bar at x with its whisker and, when flagged, its warning mark above the group's `top`
/// so far; returns how high the group now reaches, so its note goes above it.
fn draw_bar(f: &mut Frame, my: &Mapper, class: &str, x: f64, bar_w: f64, b: &Bar, top: f64) -> f64 {
    let base = my.base();
    let drawable = b.value.is_finite() && (!my.log || b.value > 0.0);
    let y = if drawable { my.map(b.value) } else { base };
    let (y_top, h) = if y < base {
        (y, base - y)
    } else {
        (base, y - base)
    };
    let mut top = top.min(y_top);
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
    let xm = x + bar_w / 2.0;
    if let Some((lo, hi)) = b.range {
        if lo.is_finite() && hi.is_finite() && (!my.log || lo > 0.0) {
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
        let ym = (top - 3.0).max(f.top + 9.0);
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
    top
}

/// A group's note above its highest bar and its label under the plot, turned when long.
fn group_label(f: &mut Frame, layout: &Layout, gi: usize, g: &BarGroup, top: f64) {
    let xm = LEFT + layout.slot * (gi as f64 + 0.5);
    let yb = f.plot_bottom();
    if let Some(note) = &g.note {
        let _ = write!(
            f.out,
            "<text class=\"nt\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            c(xm),
            c((top - 4.0).max(f.top + 2.0)),
            esc(note)
        );
    }
    if layout.turned {
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
