//! Output: the terminal table, and the JSON, CSV, Markdown, HTML and Prometheus files (one
//! `export::Exporter` each); the comparison of runs. Exporters read only `RunResults`; none of
//! them runs anything.

pub mod advice;
pub mod compare;
pub mod doctor;
pub mod env;
pub mod export;
pub mod html;
pub mod output;
pub mod server_facts;
pub mod summary;
pub mod table;
pub mod terminal;
pub mod warnings;

pub use export::Format;

use std::path::Path;

use crate::error::Result;
use crate::measure::env::Environment;
use crate::measure::units::Unit;
use crate::results::{ExperimentResult, Metric};

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
    } else if !v.is_finite() || a >= crate::measure::units::FIXED_MAX {
        crate::measure::units::fmt_fixed(v, 0)
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

/// Fails early, before any measurement, if `path` cannot be written (see output.rs).
pub fn check_writable(path: &Path) -> Result<()> {
    output::check_one("output", path).map(|_| ())
}

/// Writes `contents` to `path`: in place through a temporary file and a rename for a regular
/// file, directly for a device, FIFO or stream (see output.rs). A reader never sees a
/// half-written file and nothing but a regular file is ever replaced.
pub fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    output::write_checked("output", path, contents.as_bytes())
}

/// The machine in one line, for reports that show runs side by side (`compare`).
pub fn machine_text(env: &Environment) -> String {
    env::one_line(env)
}

pub use crate::measure::units::{fmt_value, fmt_with_unit};

/// A time in ns in the unit that keeps it short.
pub fn readable_ns(ns: f64) -> String {
    let unit = if ns < 1e3 {
        Unit::Ns
    } else if ns < 1e6 {
        Unit::Us
    } else if ns < 1e9 {
        Unit::Ms
    } else {
        Unit::S
    };
    fmt_with_unit(Unit::Ns.convert(ns, unit).unwrap_or(ns), unit)
}

/// The figure shown as "now": the median, or both modes with their shares when the samples
/// fall in two clusters.
pub fn fmt_now(m: &Metric) -> String {
    match &m.modes {
        Some(modes) if modes.len() == 2 => format!(
            "{} ({:.0}%) | {} ({:.0}%)",
            fmt_with_unit(modes[0].median, m.unit),
            modes[0].share * 100.0,
            fmt_with_unit(modes[1].median, m.unit),
            modes[1].share * 100.0
        ),
        _ => fmt_with_unit(m.median, m.unit),
    }
}

/// The spread shown beside a median: half the IQR relative to the median, "noisy" past 10%,
/// "bimodal" when the samples fall in two clusters, and "busy host" when every trial was kept
/// although most were taken while the host was slowing the CPU (the trials then agree with
/// each other and not with the next run).
pub fn fmt_spread(m: &Metric) -> String {
    let spread = spread_only(m);
    if m.trials.as_ref().is_some_and(|t| t.disturbed_throughout()) {
        format!("{spread} busy host")
    } else {
        spread
    }
}

fn spread_only(m: &Metric) -> String {
    if m.samples <= 1 {
        return "-".into();
    }
    if m.modes.is_some() {
        // The IQR of two clusters is the distance between them, not a spread: say what it is.
        return "bimodal".into();
    }
    let base = match m.half_iqr_pct() {
        Some(p) => format!("±{}%", crate::measure::units::fmt_fixed(p, 1)),
        None => format!("iqr {}", fmt_value(m.q3 - m.q1)),
    };
    if m.noisy {
        format!("{base} noisy")
    } else {
        base
    }
}

/// The historical figure and the then/now ratio as the tables show them ("-" when none).
pub fn fmt_then(m: &Metric) -> (String, String) {
    match &m.historical {
        Some(h) => (
            format!(
                "{} ({})",
                fmt_with_unit(h.value, h.unit),
                crate::seeds::label_of(&h.source)
            ),
            m.ratio_then_now()
                .map(|r| format!("{}x", fmt_value(r)))
                .unwrap_or_else(|| "-".into()),
        ),
        None => ("-".into(), "-".into()),
    }
}

/// How an experiment's attempts went, for its heading: None when it ran once.
pub fn fmt_attempts(e: &ExperimentResult) -> Option<String> {
    if !e.remeasured() && e.drift_note.is_none() {
        return None;
    }
    let kept = e.attempts.iter().position(|a| a.kept).map_or(0, |i| i + 1);
    let drifts: Vec<String> = e
        .attempts
        .iter()
        .map(|a| format!("{}%", crate::measure::units::fmt_fixed(a.drift_pct, 1)))
        .collect();
    let mut s = if e.remeasured() {
        format!(
            "re-measured: {} attempts (drift {}), kept #{kept}",
            e.attempts.len(),
            drifts.join(", ")
        )
    } else {
        format!("drift {}", drifts.join(", "))
    };
    if let Some(n) = &e.drift_note {
        s.push_str(&format!("; {n}"));
    }
    Some(s)
}

/// The first clause of a note, for the table; the whole note is in the files.
pub fn short_note(note: &str, max: usize) -> String {
    // Clause ends: "; ", ": " and " (" (so "std::thread" and "f(x)" stay whole).
    let end = ["; ", ": ", " ("]
        .iter()
        .filter_map(|p| note.find(p))
        .min()
        .unwrap_or(note.len());
    let cut = note[..end].trim_end_matches([',', ' ', ';']);
    if cut.chars().count() <= max {
        cut.to_string()
    } else {
        let s: String = cut.chars().take(max.saturating_sub(1)).collect();
        format!("{}…", s.trim_end())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn values_keep_about_four_digits() {
        assert_eq!(fmt_value(12345.6), "12346");
        assert_eq!(fmt_value(123.456), "123.5");
        assert_eq!(fmt_value(1.23456), "1.23");
        assert_eq!(fmt_value(0.123456), "0.123");
        assert_eq!(fmt_value(0.0), "0");
        assert_eq!(fmt_with_unit(3.0, Unit::Percent), "3.00%");
        assert_eq!(fmt_with_unit(3.0, Unit::Ns), "3.00 ns");
        assert_eq!(fmt_with_unit(104.0, Unit::Ratio), "104.0x");
    }

    #[test]
    fn a_figure_taken_while_the_host_was_busy_throughout_says_so_beside_its_spread() {
        let mut m = Metric::from_values("x", Unit::Ns, &[4.7, 4.71, 4.72], 1, "p", "n").unwrap();
        let log = crate::measure::stats::TrialLog::for_test;
        // All 12 kept, 12 beside a slow reading: too few quiet ones to set any aside.
        m.trials = Some(log(12, 12, 12));
        assert!(
            fmt_spread(&m).ends_with("% busy host"),
            "{}",
            fmt_spread(&m)
        );
        // The disturbed ones set aside: the kept trials are quiet.
        m.trials = Some(log(12, 9, 3));
        assert!(!fmt_spread(&m).contains("busy"), "{}", fmt_spread(&m));
        // A few disturbed among all kept: the spread says the rest.
        m.trials = Some(log(12, 12, 5));
        assert!(!fmt_spread(&m).contains("busy"), "{}", fmt_spread(&m));
    }

    #[test]
    fn notes_are_cut_at_the_first_clause() {
        assert_eq!(short_note("a b c; d e", 40), "a b c");
        assert_eq!(
            short_note("std::thread::spawn + join: more", 40),
            "std::thread::spawn + join"
        );
        assert_eq!(short_note("fork (copies page tables)", 40), "fork");
        assert_eq!(short_note("abcdefgh", 5), "abcd…");
    }

    #[test]
    fn atomic_write_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("threadlab-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.json");
        write_atomic(&p, "{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{}\n");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unwritable_paths_are_usage_errors() {
        let r = check_writable(Path::new("/nonexistent-folder/x.json"));
        assert!(matches!(r, Err(Error::Usage(_))));
        let r = check_writable(&std::env::temp_dir());
        assert!(matches!(r, Err(Error::Usage(_))));
    }
}
