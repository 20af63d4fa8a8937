//! `threadlab show`: a saved run printed again without measuring, from this machine or another:
//! the summary `run` prints, or with `--detail` every table, for all experiments or some.

use std::path::PathBuf;

use super::{print_results, read_results};
use crate::error::{Error, Result};
use crate::report::advice;

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The results file (JSON) that 'threadlab run' wrote.
    #[arg(value_name = "RESULTS.json")]
    pub results: PathBuf,
    /// Experiments to show, as the file names them; default: all.
    #[arg(value_name = "EXPERIMENT")]
    pub experiments: Vec<String>,
    /// Print every figure, table and note rather than the summary.
    #[arg(long, short = 'v')]
    pub detail: bool,
}

pub fn run(args: ShowArgs) -> Result<i32> {
    let mut r = read_results(&args.results)?;
    // A file written before headlines, verdicts and advice were stored gets them from its
    // metrics; a newer file keeps what its run showed.
    advice::annotate(&mut r);
    for name in &args.experiments {
        if !r.experiments.iter().any(|e| &e.name == name) {
            let have: Vec<&str> = r.experiments.iter().map(|e| e.name.as_str()).collect();
            return Err(Error::Usage(format!(
                "{} has no experiment '{name}'; choose from {}",
                args.results.display(),
                if have.is_empty() {
                    "none (the file holds no experiment)".to_string()
                } else {
                    have.join(", ")
                }
            )));
        }
    }
    let files = [("results", args.results.display().to_string())];
    print_results(&r, args.detail, &args.experiments, &files)?;
    Ok(0)
}
