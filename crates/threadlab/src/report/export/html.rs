//! The HTML report: one self-contained page (`report::html`).

use super::{Context, Exporter};
use crate::error::Result;
use crate::results::RunResults;

pub struct Html;

impl Exporter for Html {
    fn flag(&self) -> &'static str {
        "--html"
    }

    fn label(&self) -> &'static str {
        "report"
    }

    fn render(&self, r: &RunResults, cx: &Context) -> Result<String> {
        Ok(crate::report::html::render(r, cx.source))
    }
}
