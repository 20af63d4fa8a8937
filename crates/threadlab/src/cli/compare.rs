//! `threadlab compare`: two results files metric by metric (each side optionally pooled from
//! more runs of its build), or several side by side; the rule is report::compare's.

use std::path::PathBuf;

use super::read_results;
use crate::error::{Error, Result};
use crate::report::compare::{self, Run};
use crate::report::{self, html};

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Results files: A (the baseline), then B; more than two give one column per file.
    #[arg(value_name = "RESULTS.json", required = true, num_args = 2..)]
    pub files: Vec<PathBuf>,
    /// Exit with status 1 when a metric got slower by more than PCT percent (and by the
    /// significance and noise rule of docs/compare.md); two files only.
    #[arg(long, value_name = "PCT", value_parser = parse_pct, allow_negative_numbers = true)]
    pub fail_if_slower: Option<f64>,
    /// The smallest change that counts, percent [default: 5]; a metric's own spread and the
    /// runs' drift raise it.
    #[arg(long, value_name = "PCT", value_parser = parse_pct, allow_negative_numbers = true)]
    pub noise: Option<f64>,
    /// Family-wise significance level, after Holm's correction [default: 0.05].
    #[arg(long, value_name = "ALPHA", value_parser = parse_alpha, allow_negative_numbers = true)]
    pub alpha: Option<f64>,
    /// Also write the comparison as an HTML page here.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Another run of A's build (same machine, same mode), its trials pooled with A's: A's
    /// spread then includes how much each figure moves between runs; repeat for more.
    #[arg(long = "also-a", value_name = "RESULTS.json")]
    pub also_a: Vec<PathBuf>,
    /// Another run of B's build, pooled with B's trials the same way.
    #[arg(long = "also-b", value_name = "RESULTS.json")]
    pub also_b: Vec<PathBuf>,
}

/// Runs `threadlab compare`.
pub fn run(args: CompareArgs) -> Result<i32> {
    if args.files.len() > 2 && args.fail_if_slower.is_some() {
        return Err(Error::Usage(
            "--fail-if-slower compares a baseline with one candidate; give exactly two files, or \
             drop it for a fleet table"
                .into(),
        ));
    }
    if args.files.len() > 2 && !(args.also_a.is_empty() && args.also_b.is_empty()) {
        return Err(Error::Usage(
            "--also-a and --also-b pool more runs into A or B; give exactly two files".into(),
        ));
    }
    if let Some(p) = &args.html {
        report::check_writable(p)?;
    }
    let read = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| {
                Ok(Run {
                    label: p.display().to_string(),
                    results: read_results(p)?,
                })
            })
            .collect::<Result<Vec<Run>>>()
    };
    let mut runs = read(&args.files)?;
    if runs.len() == 2 {
        let b = compare::pool(runs.pop().expect("two runs"), read(&args.also_b)?)?;
        let a = compare::pool(runs.pop().expect("two runs"), read(&args.also_a)?)?;
        runs = vec![a, b];
    }
    if let [a, b] = runs.as_slice() {
        let options = compare::Options {
            alpha: args.alpha.unwrap_or(compare::DEFAULT_ALPHA),
            noise_pct: args.noise.unwrap_or(compare::DEFAULT_NOISE_PCT),
            fail_if_slower_pct: args.fail_if_slower,
            resamples: compare::RESAMPLES,
        };
        let c = compare::compare_pair(a, b, &options)?;
        say!("{}", compare::render_pair_text(&c));
        if let Some(p) = &args.html {
            report::write_atomic(p, &html::compare::render_pair(&c, a, b))?;
            say_err!("wrote {}", p.display());
        }
        return Ok(c.exit_status());
    }
    let f = compare::fleet(&runs)?;
    say!("{}", compare::render_fleet_text(&f));
    if let Some(p) = &args.html {
        report::write_atomic(p, &html::compare::render_fleet(&f, &runs))?;
        say_err!("wrote {}", p.display());
    }
    Ok(0)
}

/// A percentage above 0 and at most 1000.
fn parse_pct(s: &str) -> std::result::Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!("'{s}' is not a percentage in (0, 1000]; e.g. 10")),
    }
}

/// A significance level in (0, 0.5].
fn parse_alpha(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 0.5 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a significance level in (0, 0.5]; e.g. 0.05"
        )),
    }
}
