//! `threadlab doctor`: its arguments and the command, which runs the doctor experiment alone
//! (its full mode unless asked otherwise) and reports it as a diagnosis.

use std::path::PathBuf;
use std::time::Instant;

use super::{finish, make_progress, terminal_width, OutputArgs, Saving};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{self, Experiment, Mode};
use crate::report;
use crate::runner;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Measure only these settings (e.g. idle_latency timer_slack); default: all.
    #[arg(value_name = "KNOB")]
    pub knobs: Vec<String>,
    /// Also try the settings that are machine-wide (haltpoll's poll window, a CPU's idle
    /// limit, real-time throttling): each value is recorded before, written back after every
    /// phase and checked. Needs root.
    #[arg(long)]
    pub allow_machine_changes: bool,
    /// The quick suite's short version (a few seconds, the settings that matter most).
    #[arg(long)]
    pub quick: bool,
    /// Write the results file (JSON) here [default: threadlab-doctor.json].
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write the HTML report here [default: beside the results file, ending in .html].
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Do not write the default results file and report.
    #[arg(long)]
    pub no_save: bool,
    /// Accept a debug build (its figures are marked and worthless as measurements).
    #[arg(long)]
    pub allow_debug: bool,
    /// The smallest run that exercises everything (for tests; figures are not meaningful).
    #[arg(long, hide = true)]
    pub tiny: bool,
    /// For tests: a folder standing in for / where the machine-wide settings live.
    #[arg(long, hide = true, value_name = "DIR")]
    pub machine_root: Option<PathBuf>,
}

/// `threadlab doctor`: the doctor experiment alone, in its full mode unless asked otherwise,
/// reported as a diagnosis.
pub(super) fn run(args: DoctorArgs) -> Result<i32> {
    crate::measure::settings::check_all()?;
    if cfg!(debug_assertions) && !args.allow_debug {
        return Err(Error::Usage(
            "this is a debug build, whose figures are meaningless; use 'cargo run --release -- \
             doctor' (or pass --allow-debug to run it anyway)"
                .into(),
        ));
    }
    if args.quick && args.tiny {
        return Err(Error::Usage("choose one of --quick and --tiny".into()));
    }
    if let Some(root) = &args.machine_root {
        if !root.is_dir() {
            return Err(Error::Usage(format!(
                "--machine-root {} is not a folder",
                root.display()
            )));
        }
    }
    let known = experiments::doctor::KNOBS;
    if let Some(k) = args.knobs.iter().find(|k| !known.contains(&k.as_str())) {
        return Err(Error::Usage(format!(
            "unknown setting '{k}'; choose from {}",
            known.join(", ")
        )));
    }
    let mode = if args.tiny {
        Mode::Tiny
    } else if args.quick {
        Mode::Quick
    } else {
        Mode::Full
    };
    let saving = Saving::plan(OutputArgs {
        json: args.json.as_deref(),
        default_json: "threadlab-doctor.json",
        csv: None,
        markdown: None,
        html: args.html.as_deref(),
        no_save: args.no_save,
    })?;
    // One instance for the life of the process, as the registry's are.
    let exp: &'static dyn Experiment = Box::leak(Box::new(experiments::doctor::Doctor {
        allow_machine_changes: args.allow_machine_changes,
        machine_root: args.machine_root.clone(),
        only: args.knobs.clone(),
    }));
    let cancel = Cancel::install()?;
    let progress = make_progress();
    let started = Instant::now();
    let plan = runner::Plan {
        experiments: &[exp],
        mode,
        repeat: 1,
        // doctor alternates off and on phases itself, so drift touches both alike; measuring
        // it all again would double its time for nothing.
        drift_threshold_pct: None,
        budget: None,
    };
    let results = runner::run(&plan, &cancel, progress.as_ref());
    progress.clear();
    // Rendered from a cleaned copy, as run's table is: no text from the machine can act on
    // the terminal.
    say!(
        "{}",
        report::doctor::render(
            &report::terminal::cleaned(&results),
            terminal_width().unwrap_or(160) as usize
        )
    );
    finish(&results, &saving, started, &cancel)
}
