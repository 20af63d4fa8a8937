//! Line charts: curves with markers, reference lines and annotations.

use std::fmt::Write;

use super::*;

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
        let legend = self.legend();
        let extra = Frame::legend_extra(Frame::legend_rows(&legend));
        let mut f = Frame::new(300.0 + extra, 40.0, aria);
        f.top = TOP + extra;
        f.legend(&legend);
        let (xs, ys) = self.extent();
        let mx = Mapper::new(&xs, self.x.scale, false, LEFT, W - RIGHT);
        let my = Mapper::new(&ys, self.y.scale, !self.y.is_log(), f.plot_bottom(), f.top);
        f.y_axis(&my, &self.y.label);
        f.x_axis_numeric(&mx, &self.x.label);
        for r in &self.references {
            let x0 = mx.map(r.x_from.unwrap_or(mx.lo));
            let x1 = mx.map(r.x_to.unwrap_or(mx.hi));
            let title = format!("{}: {} {}", r.name, fmt_tick(r.y), self.y_unit);
            f.reference(x0, x1, my.map(r.y), &title);
        }
        // Light curves first, so the ones the chart is about are drawn over them.
        let mut order: Vec<&Line> = self.lines.iter().filter(|l| l.light).collect();
        order.extend(self.lines.iter().filter(|l| !l.light));
        for l in order {
            self.curve(&mut f, &mx, &my, l);
        }
        annotate(&mut f, &mx, &my, &self.annotations);
        f.finish()
    }

    /// The listed lines' keys, the references' and the chart's own.
    fn legend(&self) -> Vec<Key> {
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
        legend
    }

    /// Every x and every y the axes must hold: points, references and annotations.
    fn extent(&self) -> (Vec<f64>, Vec<f64>) {
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
        (xs, ys)
    }

    /// One curve: its polyline and a marker with hover text at each drawable point.
    fn curve(&self, f: &mut Frame, mx: &Mapper, my: &Mapper, l: &Line) {
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
}

/// The annotations' points as neutral diamonds, each label beside its point, moved apart
/// vertically so that labels of nearby points do not overlap.
pub(super) fn annotate(f: &mut Frame, mx: &Mapper, my: &Mapper, notes: &[Annotation]) {
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
