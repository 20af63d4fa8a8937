//! The results file: every figure with its samples, as `threadlab show`, `report` and
//! `compare` read it back.

use super::{Context, Exporter};
use crate::error::{Error, Result};
use crate::results::RunResults;

pub struct Json;

impl Exporter for Json {
    fn flag(&self) -> &'static str {
        "--json"
    }

    fn label(&self) -> &'static str {
        "results"
    }

    fn render(&self, r: &RunResults, _: &Context) -> Result<String> {
        serde_json::to_string_pretty(r)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| Error::Fail(format!("cannot encode results as JSON: {e}")))
    }
}
