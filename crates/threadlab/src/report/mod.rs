//! Output: the terminal table, and the JSON, CSV and Markdown files. Exporters read only
//! `RunResults`; none of them runs anything.

pub mod csv;
pub mod env;
pub mod markdown;
pub mod table;
pub mod warnings;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::results::{Metric, RunResults};

/// An output format of `threadlab run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
    Markdown,
}

impl Format {
    pub fn render(self, r: &RunResults) -> Result<String> {
        match self {
            Format::Json => serde_json::to_string_pretty(r)
                .map(|mut s| {
                    s.push('\n');
                    s
                })
                .map_err(|e| Error::Fail(format!("cannot encode results as JSON: {e}"))),
            Format::Csv => Ok(csv::render(r)),
            Format::Markdown => Ok(markdown::render(r)),
        }
    }
}

/// Fails early, before any measurement, if `path` cannot be written: its folder must exist and
/// accept a new file.
pub fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "{} is a folder; give a file name, e.g. {}/results.json",
            path.display(),
            path.display()
        )));
    }
    let probe = temp_path(path);
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(Error::Usage(format!(
            "cannot write {}: {e}; choose a path in a folder that exists and that you can write",
            path.display()
        ))),
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "results".into());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `contents` to `path` atomically: a temporary file beside it, flushed to disk, then
/// renamed over `path`. A reader never sees a half-written file.
pub fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    let tmp = temp_path(path);
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Fail(format!("cannot write {}: {e}", path.display())));
    }
    Ok(())
}

/// A value with about four significant digits, trimmed for reading.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
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

/// "12.3 ns" etc.; percentages and counts without a space.
pub fn fmt_with_unit(v: f64, unit: &str) -> String {
    match unit {
        "%" => format!("{}%", fmt_value(v)),
        "count" | "ratio" | "score" | "index" | "threads" => fmt_value(v),
        u => format!("{} {u}", fmt_value(v)),
    }
}

/// The spread shown beside a median: half the IQR relative to the median.
pub fn fmt_spread(m: &Metric) -> String {
    if m.samples <= 1 {
        return "-".into();
    }
    if m.median == 0.0 {
        return format!("iqr {}", fmt_value(m.q3 - m.q1));
    }
    let half_iqr_pct = (m.q3 - m.q1) / 2.0 / m.median.abs() * 100.0;
    format!("±{half_iqr_pct:.1}%")
}

/// "Sun Ultra-1, 1999" from a full citation.
pub fn short_source(source: &str) -> String {
    let known = [
        ("Kothari & Claypool", "Ultra-1 1999"),
        ("Oddone", "Mac 1997"),
        ("Delphi", "Core i3 2010s"),
        ("Queru", "BeOS 1999"),
        ("Erlangen", "HP715 Mach"),
    ];
    known
        .iter()
        .find(|(k, _)| source.contains(k))
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| source.chars().take(20).collect())
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

    #[test]
    fn values_keep_about_four_digits() {
        assert_eq!(fmt_value(12345.6), "12346");
        assert_eq!(fmt_value(123.456), "123.5");
        assert_eq!(fmt_value(1.23456), "1.23");
        assert_eq!(fmt_value(0.123456), "0.123");
        assert_eq!(fmt_value(0.0), "0");
        assert_eq!(fmt_with_unit(3.0, "%"), "3.00%");
        assert_eq!(fmt_with_unit(3.0, "ns"), "3.00 ns");
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
