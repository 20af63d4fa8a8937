//! Distribution charts: every sample of a row as a dot, with its median and marks.

use std::fmt::Write;

use super::*;

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
        let left = Frame::row_labels_end(self.rows.iter().map(|r| r.label.as_str()), 30, 6.0);
        let mut f = Frame::with_rows(self.rows.len(), row_h, left, aria);
        let all: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| r.values.iter().copied().chain(r.marks.iter().map(|m| m.0)))
            .collect();
        let mx = Mapper::new(&all, self.x.scale, !self.x.is_log(), left, W - RIGHT);
        f.x_axis_numeric(&mx, &self.x.label);
        for (i, r) in self.rows.iter().enumerate() {
            let y = Frame::row_y(i, row_h);
            f.row_label(y, &r.label);
            self.samples(&mut f, &mx, y, r);
            self.marks(&mut f, &mx, y, r);
        }
        f.finish()
    }

    /// A row's samples as dots over their quartile box and median line.
    fn samples(&self, f: &mut Frame, mx: &Mapper, y: f64, r: &DistRow) {
        let class = format!("s{}", r.colour % PALETTE);
        let mut v: Vec<f64> = r
            .values
            .iter()
            .copied()
            .filter(|x| x.is_finite() && (!mx.log || *x > 0.0))
            .collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return;
        }
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

    /// A row's marks (a model's value, a worst case) as diamonds.
    fn marks(&self, f: &mut Frame, mx: &Mapper, y: f64, r: &DistRow) {
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
}
