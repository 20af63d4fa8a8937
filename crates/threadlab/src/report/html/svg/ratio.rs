//! Ratio charts: a point estimate with its interval per row, on a log axis around 1.

use std::fmt::Write;

use super::*;

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
    let left = Frame::row_labels_end(rows.iter().map(|r| r.label.as_str()), 40, 5.8);
    let mut f = Frame::with_rows(rows.len(), row_h, left, aria);
    let span = ratio_span(rows);
    let mx = Mapper {
        lo: 1.0 / span,
        hi: span,
        log: true,
        px0: left,
        px1: W - RIGHT,
        ticks: ratio_ticks(span),
        bytes: false,
        nines: false,
    };
    ratio_axis(&mut f, &mx);
    f.x_title(axis_label);
    for (i, r) in rows.iter().enumerate() {
        let y = Frame::row_y(i, row_h);
        f.row_label(y, &r.label);
        ratio_row(&mut f, &mx, y, r);
    }
    f.finish()
}

/// How far the axis reaches each way from 1: symmetric on the log scale, wide enough for
/// every interval.
fn ratio_span(rows: &[RatioRow]) -> f64 {
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
    span.min(1e3) * 1.05
}

/// The ticks, labelled as factors: 1 first, then the others nearest to it, each at least
/// 44 px from every tick kept.
fn ratio_axis(f: &mut Frame, mx: &Mapper) {
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
        let class = if t == 1.0 { "axis" } else { "grid" };
        let label = if t >= 1.0 {
            fmt_tick(t)
        } else {
            let s = format!("{t:.2}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        };
        f.x_tick(class, mx.map(t), &format!("{label}x"));
    }
}

/// One row: its noise band, its interval and its point, coloured by its verdict.
fn ratio_row(f: &mut Frame, mx: &Mapper, y: f64, r: &RatioRow) {
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

pub(super) fn ratio_ticks(span: f64) -> Vec<f64> {
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
