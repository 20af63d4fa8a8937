//! Units as a type. A metric's unit decides how its samples are converted from what the sampler
//! measured (nanoseconds per operation), how it is printed, which units it can be compared with,
//! and by default which direction is better. The JSON keeps the unit strings of schema 1.

use serde::{Deserialize, Serialize};

/// Every unit a metric or series may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Unit {
    #[serde(rename = "ns")]
    Ns,
    #[serde(rename = "us")]
    Us,
    #[serde(rename = "ms")]
    Ms,
    #[serde(rename = "s")]
    S,
    #[serde(rename = "GB/s")]
    GbPerS,
    #[serde(rename = "%")]
    Percent,
    #[serde(rename = "count")]
    Count,
    /// A dimensionless quotient of two figures (a then/now, a green/kernel ratio).
    #[serde(rename = "ratio")]
    Ratio,
    #[serde(rename = "per_s")]
    PerS,
    /// The Mac study's scores: time relative to a reference thread (1.00 = as fast).
    #[serde(rename = "score")]
    Score,
    /// An index such as Jain's fairness index (0..1).
    #[serde(rename = "index")]
    Index,
    #[serde(rename = "threads")]
    Threads,
    #[serde(rename = "bytes")]
    Bytes,
    #[serde(rename = "KiB")]
    KiB,
    #[serde(rename = "MiB")]
    MiB,
}

/// Which way a change of a metric is an improvement, for comparisons between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    LowerIsBetter,
    HigherIsBetter,
    /// Neither: a count, a share, a recommended size; a change is a change, not a regression.
    Neither,
}

impl Unit {
    pub const ALL: [Unit; 15] = [
        Unit::Ns,
        Unit::Us,
        Unit::Ms,
        Unit::S,
        Unit::GbPerS,
        Unit::Percent,
        Unit::Count,
        Unit::Ratio,
        Unit::PerS,
        Unit::Score,
        Unit::Index,
        Unit::Threads,
        Unit::Bytes,
        Unit::KiB,
        Unit::MiB,
    ];

    /// The string the results file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::GbPerS => "GB/s",
            Unit::Percent => "%",
            Unit::Count => "count",
            Unit::Ratio => "ratio",
            Unit::PerS => "per_s",
            Unit::Score => "score",
            Unit::Index => "index",
            Unit::Threads => "threads",
            Unit::Bytes => "bytes",
            Unit::KiB => "KiB",
            Unit::MiB => "MiB",
        }
    }

    pub fn parse(s: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.as_str() == s)
    }

    /// Nanoseconds in one of this unit, for time units.
    fn ns_per_unit(self) -> Option<f64> {
        match self {
            Unit::Ns => Some(1.0),
            Unit::Us => Some(1e3),
            Unit::Ms => Some(1e6),
            Unit::S => Some(1e9),
            _ => None,
        }
    }

    fn bytes_per_unit(self) -> Option<f64> {
        match self {
            Unit::Bytes => Some(1.0),
            Unit::KiB => Some(1024.0),
            Unit::MiB => Some(1024.0 * 1024.0),
            _ => None,
        }
    }

    pub fn is_time(self) -> bool {
        self.ns_per_unit().is_some()
    }

    /// A duration in nanoseconds expressed in this unit. Panics for a unit that is not a time:
    /// that is a programming error in an experiment, caught by its tiny-run test.
    pub fn from_ns(self, ns: f64) -> f64 {
        let per = self
            .ns_per_unit()
            .unwrap_or_else(|| panic!("{} is not a unit of time", self.as_str()));
        ns / per
    }

    /// A value in this unit converted to `to`, when both measure the same dimension.
    pub fn convert(self, value: f64, to: Unit) -> Option<f64> {
        if self == to {
            return Some(value);
        }
        if let (Some(a), Some(b)) = (self.ns_per_unit(), to.ns_per_unit()) {
            return Some(value * a / b);
        }
        if let (Some(a), Some(b)) = (self.bytes_per_unit(), to.bytes_per_unit()) {
            return Some(value * a / b);
        }
        None
    }

    /// The direction a metric in this unit has unless it says otherwise: less time is better,
    /// more throughput is better, anything else is neither.
    pub fn default_direction(self) -> Direction {
        match self {
            Unit::Ns | Unit::Us | Unit::Ms | Unit::S => Direction::LowerIsBetter,
            Unit::GbPerS | Unit::PerS => Direction::HigherIsBetter,
            _ => Direction::Neither,
        }
    }

    /// Units printed without a space and a suffix ("12.3" for a count, "3.00%" for a percent).
    pub fn suffix(self) -> Option<&'static str> {
        match self {
            Unit::Percent => Some("%"),
            Unit::Count | Unit::Ratio | Unit::Score | Unit::Index | Unit::Threads => None,
            Unit::PerS => Some("/s"),
            _ => Some(""),
        }
    }
}

/// Above this magnitude numbers are printed in scientific notation: a value from a results
/// file may be anything up to 1.8e308, and no figure may print as a 309-digit integer.
pub const FIXED_MAX: f64 = 1e12;

/// A number with `decimals` decimals, or in scientific notation (4 significant digits) beyond
/// `FIXED_MAX`: a width bounded whatever the value. For every number printed from a results
/// file where a fixed number of decimals is wanted ("{:.1}%").
pub fn fmt_fixed(v: f64, decimals: usize) -> String {
    if v.is_finite() && v.abs() >= FIXED_MAX {
        format!("{v:.3e}")
    } else {
        format!("{v:.decimals$}")
    }
}

/// "12.5% more time" or "12.5% less time" for a change of +12.5% or -12.5%: a signed change in
/// time as words (the throttle's "running all 64 at once" against its best N).
pub fn fmt_more_or_less_time(pct: f64) -> String {
    let more = if pct < 0.0 { "less" } else { "more" };
    format!("{}% {more} time", fmt_fixed(pct.abs(), 1))
}

/// A value with about four significant digits, trimmed for reading; at most about 16
/// characters whatever the value.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !v.is_finite() || a >= FIXED_MAX {
        fmt_fixed(v, 0)
    } else if a >= 10_000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// "12.3 ns" etc.; percentages without a space, counts and ratios bare, "x" after a ratio.
pub fn fmt_with_unit(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Percent => format!("{}%", fmt_value(v)),
        Unit::Ratio => format!("{}x", fmt_value(v)),
        // A whole number of threads or events is written whole: a pool of 3, not of 3.00.
        Unit::Count | Unit::Threads if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
        Unit::Count | Unit::Score | Unit::Index | Unit::Threads => fmt_value(v),
        Unit::PerS => format!("{}/s", fmt_value(v)),
        u => format!("{} {u}", fmt_value(v)),
    }
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_those_of_schema_1() {
        for (u, s) in [
            (Unit::Ns, "\"ns\""),
            (Unit::Us, "\"us\""),
            (Unit::GbPerS, "\"GB/s\""),
            (Unit::Percent, "\"%\""),
            (Unit::PerS, "\"per_s\""),
        ] {
            assert_eq!(serde_json::to_string(&u).unwrap(), s);
            assert_eq!(serde_json::from_str::<Unit>(s).unwrap(), u);
        }
        for u in Unit::ALL {
            assert_eq!(Unit::parse(u.as_str()), Some(u));
        }
    }

    #[test]
    fn time_conversions() {
        assert_eq!(Unit::Us.from_ns(1500.0), 1.5);
        assert_eq!(Unit::Ms.from_ns(2e6), 2.0);
        assert_eq!(Unit::Ns.from_ns(7.0), 7.0);
        assert_eq!(Unit::Ms.convert(24.42, Unit::Us), Some(24420.0));
        assert_eq!(Unit::Us.convert(1.0, Unit::Count), None);
        assert_eq!(Unit::MiB.convert(1.0, Unit::KiB), Some(1024.0));
    }

    #[test]
    #[should_panic(expected = "not a unit of time")]
    fn a_count_is_not_converted_from_ns() {
        Unit::Count.from_ns(1.0);
    }

    #[test]
    fn directions() {
        assert_eq!(Unit::Us.default_direction(), Direction::LowerIsBetter);
        assert_eq!(Unit::PerS.default_direction(), Direction::HigherIsBetter);
        assert_eq!(Unit::Count.default_direction(), Direction::Neither);
    }
}
