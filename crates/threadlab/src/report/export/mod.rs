//! Every output of a run in one shape: an `Exporter` renders `RunResults` to the text of one
//! file, and `Format` names one from the registry below. JSON, CSV, Markdown, HTML and the
//! Prometheus text format are all exporters; the commands only choose which and where.
//!
//! Adding a format is one file here with its renderer and an `Exporter` (a `Plain` when the text
//! needs nothing but the results) and one line in `Format`'s registry (a constant and an entry in `ALL`); the
//! commands' options that name it are the only other place.

pub mod csv;
mod html;
mod json;
pub mod markdown;
pub mod prom;

use crate::error::Result;
use crate::results::RunResults;

/// What an exporter may need beside the results.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// The results file's name as the page names it (or what the run was, when unsaved).
    pub source: &'a str,
    /// The `machine` label a monitoring export carries; None: the host name the run recorded.
    pub machine: Option<&'a str>,
}

/// One output format.
pub trait Exporter: Sync {
    /// The command-line option that names a file in this format (`--csv`).
    fn flag(&self) -> &'static str;
    /// The word the run's summary uses for the file written (`csv`, `results`, `report`).
    fn label(&self) -> &'static str;
    /// The file's whole text.
    fn render(&self, r: &RunResults, cx: &Context) -> Result<String>;
}

/// A format whose text depends on the results alone.
pub struct Plain {
    pub flag: &'static str,
    pub label: &'static str,
    pub render: fn(&RunResults) -> String,
}

impl Exporter for Plain {
    fn flag(&self) -> &'static str {
        self.flag
    }

    fn label(&self) -> &'static str {
        self.label
    }

    fn render(&self, r: &RunResults, _: &Context) -> Result<String> {
        Ok((self.render)(r))
    }
}

/// A format from the registry: copyable, compared by the option that names it.
#[derive(Clone, Copy)]
pub struct Format(&'static dyn Exporter);

impl Format {
    pub const JSON: Format = Format(&json::Json);
    pub const CSV: Format = Format(&csv::EXPORTER);
    pub const MARKDOWN: Format = Format(&markdown::EXPORTER);
    pub const HTML: Format = Format(&html::Html);
    pub const PROMETHEUS: Format = Format(&prom::Prometheus);

    /// Every format, in the order a run writes them (the results file first, the page last).
    pub const ALL: &'static [Format] = &[
        Format::JSON,
        Format::CSV,
        Format::MARKDOWN,
        Format::HTML,
        Format::PROMETHEUS,
    ];

    /// The option that names this output, for messages.
    pub fn flag(self) -> &'static str {
        self.0.flag()
    }

    /// The word the run's summary uses for the file.
    pub fn label(self) -> &'static str {
        self.0.label()
    }

    pub fn render(self, r: &RunResults, cx: &Context) -> Result<String> {
        self.0.render(r, cx)
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Format) -> bool {
        self.flag() == other.flag()
    }
}

impl Eq for Format {}

impl std::fmt::Debug for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.flag())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each registered format has its own option and summary word, and renders a results file
    /// to a non-empty text.
    #[test]
    fn every_registered_format_is_distinct_and_renders() {
        let r = RunResults::new("tiny", Vec::new());
        let cx = Context {
            source: "r.json",
            machine: None,
        };
        for (i, f) in Format::ALL.iter().enumerate() {
            assert!(f.flag().starts_with("--"), "{f:?}");
            for g in &Format::ALL[i + 1..] {
                assert!(f != g && f.label() != g.label(), "{f:?} and {g:?}");
            }
            assert!(!f.render(&r, &cx).unwrap().is_empty(), "{f:?}");
        }
    }
}
