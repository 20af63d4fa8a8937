//! Axes: scales, the mapping from data to pixels, nice ticks and number labels.

// Tick labels are shared with the text comparison, so the formatter lives in report/.
pub use crate::report::fmt_tick;

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

    pub(super) fn is_log(&self) -> bool {
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

pub(super) fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .filter(|x| x.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// Maps data to pixels along one axis.
#[derive(Debug, Clone)]
pub(super) struct Mapper {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) log: bool,
    pub(super) px0: f64,
    pub(super) px1: f64,
    pub(super) ticks: Vec<f64>,
    pub(super) bytes: bool,
    pub(super) nines: bool,
}

impl Mapper {
    /// Domain and ticks for `values` on `scale`; `zero` includes 0 in a linear domain (bars).
    pub(super) fn new(values: &[f64], scale: Scale, zero: bool, px0: f64, px1: f64) -> Mapper {
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
    pub(super) fn nines(finite: &[f64], px0: f64, px1: f64) -> Mapper {
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

    pub(super) fn map(&self, v: f64) -> f64 {
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
    pub(super) fn base(&self) -> f64 {
        if self.log {
            self.map(self.lo)
        } else {
            self.map(0.0_f64.clamp(self.lo, self.hi))
        }
    }

    pub(super) fn label(&self, v: f64) -> String {
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
pub(super) fn nice_num(x: f64, round: bool) -> f64 {
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
pub(super) fn linear_ticks(
    lo: f64,
    hi: f64,
    target: usize,
    integers: bool,
) -> (f64, f64, Vec<f64>) {
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
pub(super) fn decade_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
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
pub(super) fn binary_log_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
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
    if !x.is_finite() || x >= crate::measure::units::FIXED_MAX {
        format!("{}{suffix}", crate::measure::units::fmt_fixed(x, 0))
    } else if (x - x.round()).abs() < 1e-9 {
        format!("{}{suffix}", x.round())
    } else {
        format!("{x:.1}{suffix}")
    }
}
