//! The command line: parse, dispatch, print. Every user mistake ends in one line saying what to
//! do, and exit status 2.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand};

/// Output that never panics: a closed stdout or stderr (`| head -1`, `| true`) is not an error
/// of the run. What cannot be shown is dropped; the experiments, the results file and the exit
/// status are as they would have been (see README, "Exit status"). Everything printed passes
/// `report::terminal::clean`: text from a results file never acts on the terminal.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = write!(std::io::stdout(), "{}", crate::report::terminal::clean(&text));
    }};
}
macro_rules! say_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", crate::report::terminal::clean(&text));
    }};
}
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", crate::report::terminal::clean(&text));
    }};
}

mod compare;
mod doctor;
mod progress;
mod show;
pub use doctor::DoctorArgs;
use progress::{fmt_duration, make_progress};
pub use show::ShowArgs;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{self, Experiment, Mode};
use crate::measure::env;
use crate::report::export::Context;
use crate::report::{self, table, Format};
use crate::results::{self, RunResults, Status};
use crate::runner;

#[derive(Parser, Debug)]
#[command(
    name = "threadlab",
    version,
    about = "What threads, processes, locks and context switches cost on this machine, beside the classic studies' figures",
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run experiments (all of them when none is named) and print a summary: each
    /// experiment's headline figures beside the study's and its verdict, then what to choose.
    Run(RunArgs),
    /// Print a saved run again without measuring: the summary, or with --detail every table.
    Show(ShowArgs),
    /// List the experiments: name, study, what it measures, rough duration.
    List,
    /// Write the HTML report of a results file: one self-contained page that opens offline.
    Report(ReportArgs),
    /// Compare two results files metric by metric (or more, side by side).
    Compare(compare::CompareArgs),
    /// Export a results file for monitoring: the Prometheus text format that node_exporter's
    /// textfile collector reads.
    Export(ExportArgs),
    /// Serve one server design until interrupted: the far end of `run server --target`.
    Serve(ServeArgs),
    /// What this machine does to threads, and which settings would change it: the facts, then
    /// each setting measured A/B (off, on, off, on ...) with its effect, a 95% interval, its CPU
    /// cost and how to apply it. About 100 s.
    Doctor(DoctorArgs),
    /// Describe this machine as the results file records it.
    Env {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Internal: measurements that need a fresh process (run by threadlab itself).
    #[command(name = "__probe", hide = true)]
    Probe {
        what: String,
        #[arg(long, default_value = "quick")]
        mode: String,
        #[arg(long, default_value_t = 0)]
        cpu: usize,
    },
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Experiments to run, in the order given (see `threadlab list`); default: all.
    pub experiments: Vec<String>,
    /// The studies' full ranges and more samples (minutes instead of seconds).
    #[arg(long)]
    pub full: bool,
    /// Print every figure, table and note (the whole results file) rather than the summary.
    #[arg(long, short = 'v')]
    pub detail: bool,
    /// Fit the run into this wall time (e.g. 5m, 90s): every sampled figure gets a share of
    /// it, and an experiment that no longer fits is skipped with that reason.
    #[arg(long, value_name = "DURATION", value_parser = parse_budget, allow_hyphen_values = true)]
    pub budget: Option<std::time::Duration>,
    /// Write the results file (JSON) here [default: threadlab-results.json].
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Also write every metric as CSV here.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Also write a Markdown report here.
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,
    /// Write the HTML report here [default: beside the results file, ending in .html].
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Do not write the default results file and report (files named with
    /// --json/--csv/--markdown/--html still are).
    #[arg(long)]
    pub no_save: bool,
    /// Run the chosen experiments K times, interleaved (A B C A B C ...), and report each metric
    /// as the median of the K runs' medians with the spread across runs.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100), allow_negative_numbers = true)]
    pub repeat: u32,
    /// Measure an experiment again when the machine's speed (the drift references) moved more
    /// than PCT percent during it [default: 5].
    #[arg(long, value_name = "PCT", value_parser = parse_drift_pct, allow_negative_numbers = true)]
    pub drift_threshold: Option<f64>,
    /// Never measure an experiment again, whatever the drift references did.
    #[arg(long, conflicts_with = "drift_threshold")]
    pub no_remeasure: bool,
    /// Accept a debug build (its figures are marked and worthless as measurements).
    #[arg(long)]
    pub allow_debug: bool,
    /// The smallest run that exercises everything (for tests; figures are not meaningful).
    #[arg(long, hide = true)]
    pub tiny: bool,
    /// Measure the server at HOST:PORT (started with `threadlab serve`) instead of local ones;
    /// applies to the server experiment.
    #[arg(long, value_name = "HOST:PORT")]
    pub target: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The server design (the list is the lab's own: every design the server experiment
    /// measures).
    #[arg(long, value_parser = design_names())]
    pub design: String,
    /// Where to listen: HOST:PORT, a host name or an address (`[::]:7878` for every IPv6 and
    /// IPv4 address).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Answer STATS (CPU, memory, threads) to peers that are not on loopback.
    #[arg(long)]
    pub allow_remote_stats: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The results file (JSON) that 'threadlab run' wrote.
    #[arg(value_name = "RESULTS.json")]
    pub results: PathBuf,
    /// Write the report here [default: beside the results file, ending in .html].
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Write the Prometheus text format (0.0.4) here, e.g.
    /// /var/lib/prometheus/node-exporter/threadlab.prom.
    #[arg(long, value_name = "PATH", required = true)]
    pub prom: PathBuf,
    /// The results file (JSON) that 'threadlab run' wrote.
    #[arg(value_name = "RESULTS.json")]
    pub results: PathBuf,
    /// The value of the `machine` label [default: the host name the run recorded].
    #[arg(long, value_name = "NAME")]
    pub machine: Option<String>,
}

/// Parses arguments; on a mistake prints one line and returns the exit status.
pub fn main_with_args(args: Vec<std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    0
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    say_err!("{}", short_usage());
                    2
                }
                _ => {
                    say_err!("{}", one_line_clap_error(&e));
                    2
                }
            };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(Error::Usage(msg)) => {
            say_err!("threadlab: {msg}");
            2
        }
        Err(Error::Cancelled(sig)) => 128 + sig,
        Err(e) => {
            say_err!("threadlab: {e}");
            1
        }
    }
}

/// One line for a bare `threadlab`: the commands, and where the rest is.
fn short_usage() -> String {
    use clap::CommandFactory;
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect();
    format!(
        "usage: threadlab <{}> [OPTIONS]; start with 'threadlab run', see 'threadlab --help'",
        names.join("|")
    )
}

/// clap's message ("error: ..."), without colour, in one line, plus where to look. A message
/// that ends in a colon continues on indented lines (the missing arguments): those join it.
fn one_line_clap_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let mut msg = lines
        .next()
        .unwrap_or("error: invalid arguments")
        .trim()
        .trim_start_matches("error: ")
        .to_string();
    if msg.ends_with(':') {
        let more: Vec<&str> = lines
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect();
        if !more.is_empty() {
            msg = format!("{} {}", msg, more.join(", "));
        }
    }
    // An invalid value of a closed list: say what the list is.
    if let Some(values) = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("[possible values: ")
            .and_then(|v| v.strip_suffix(']'))
    }) {
        msg = format!("{msg}; choose from {values}");
    }
    format!("threadlab: {msg}; see 'threadlab --help'")
}

fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::List => {
            say!("{}", list_text());
            Ok(0)
        }
        Command::Env { json } => {
            let e = env::capture();
            if json {
                say_line!(
                    "{}",
                    serde_json::to_string_pretty(&e)
                        .map_err(|e| Error::Fail(format!("cannot encode JSON: {e}")))?
                );
            } else {
                say!("{}", report::env::render_text(&e));
            }
            Ok(0)
        }
        Command::Probe { what, mode, cpu } => probe(&what, &mode, cpu),
        Command::Run(args) => run(args),
        Command::Show(args) => show::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Report(args) => report_command(args),
        Command::Compare(args) => compare::run(args),
        Command::Export(args) => export_command(args),
        Command::Serve(args) => serve(args),
    }
}

/// Results files larger than this are refused: no run writes one (a full run is ~1 MB).
const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// Reads and checks a results file; every problem is a usage error saying what to do.
fn read_results(path: &Path) -> Result<RunResults> {
    let what = path.display().to_string();
    let fix = "give the path of a results file that 'threadlab run' wrote";
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Usage(format!("cannot read {what}: {e}; {fix}")))?;
    if !meta.is_file() {
        return Err(Error::Usage(format!("{what} is not a regular file; {fix}")));
    }
    if meta.len() > MAX_RESULTS_BYTES {
        return Err(Error::Usage(format!(
            "{what} is {} MiB, far larger than any results file; {fix}",
            meta.len() >> 20
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Usage(format!("cannot read {what}: {e}; {fix}")))?;
    // Everything read from a file is text to show, never a command to a terminal.
    Ok(report::terminal::cleaned(&results::parse_results(
        &text, &what,
    )?))
}

/// Where a report goes by default: beside `results`, the same name ending in .html.
fn report_path_for(results: &Path) -> PathBuf {
    let p = results.with_extension("html");
    if p == results {
        let mut s = results.as_os_str().to_owned();
        s.push(".html");
        PathBuf::from(s)
    } else {
        p
    }
}

/// The name a page gives its results file.
fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

fn report_command(args: ReportArgs) -> Result<i32> {
    let out = args
        .output
        .clone()
        .unwrap_or_else(|| report_path_for(&args.results));
    if out == args.results {
        return Err(Error::Usage(format!(
            "the report would overwrite its results file {}; name another with -o PATH",
            out.display()
        )));
    }
    report::check_writable(&out)?;
    let r = read_results(&args.results)?;
    let cx = Context {
        source: &file_name(&args.results),
        machine: None,
    };
    report::write_atomic(&out, &Format::HTML.render(&r, &cx)?)?;
    say_err!("wrote {}", out.display());
    Ok(0)
}

fn export_command(args: ExportArgs) -> Result<i32> {
    report::check_writable(&args.prom)?;
    let r = read_results(&args.results)?;
    let cx = Context {
        source: &file_name(&args.results),
        machine: args.machine.as_deref(),
    };
    report::write_atomic(&args.prom, &Format::PROMETHEUS.render(&r, &cx)?)?;
    say_err!("wrote {}", args.prom.display());
    Ok(0)
}

pub fn list_text() -> String {
    let mut out = String::new();
    let (mut quick, mut full) = (0.0, 0.0);
    for e in experiments::registry() {
        let i = e.info();
        let (q, f) = (
            i.rough_duration(Mode::Quick).as_secs_f64(),
            i.rough_duration(Mode::Full).as_secs_f64(),
        );
        quick += q;
        full += f;
        out.push_str(&format!(
            "{:<10} ~{} quick, ~{} --full\n           {}\n           study: {}\n",
            i.name,
            fmt_duration(q),
            fmt_duration(f),
            i.measures,
            i.study.citation
        ));
    }
    out.push_str(&format!(
        "\nall        ~{} quick, ~{} --full (measured on 2 vCPUs; --budget DURATION fits a run \
         into another time)\n",
        fmt_duration(quick),
        fmt_duration(full)
    ));
    out
}

/// Resolves experiment names, keeping the order given and dropping repeats.
pub fn select(names: &[String]) -> Result<Vec<&'static dyn Experiment>> {
    if names.is_empty() {
        return Ok(experiments::registry());
    }
    let mut chosen: Vec<&'static dyn Experiment> = Vec::new();
    for n in names {
        let e = experiments::find(n).ok_or_else(|| {
            let all: Vec<_> = experiments::registry()
                .iter()
                .map(|e| e.info().name)
                .collect();
            Error::Usage(format!(
                "unknown experiment '{n}'; choose from {} (see 'threadlab list')",
                all.join(", ")
            ))
        })?;
        if !chosen.iter().any(|c| c.info().name == e.info().name) {
            chosen.push(e);
        }
    }
    Ok(chosen)
}

fn run(args: RunArgs) -> Result<i32> {
    let mut chosen = select(&args.experiments)?;
    crate::measure::settings::check_all()?;
    if let Some(target) = &args.target {
        chosen = with_remote_server(chosen, &args.experiments, target)?;
    }
    if cfg!(debug_assertions) && !args.allow_debug {
        return Err(Error::Usage(
            "this is a debug build, whose figures are meaningless; use 'cargo run --release -- run' \
             (or pass --allow-debug to run it anyway)"
                .into(),
        ));
    }
    if args.full && args.tiny {
        return Err(Error::Usage("choose one of --full and --tiny".into()));
    }
    let mode = if args.tiny {
        Mode::Tiny
    } else if args.full {
        Mode::Full
    } else {
        Mode::Quick
    };
    let saving = Saving::plan(OutputArgs {
        json: args.json.as_deref(),
        default_json: "threadlab-results.json",
        csv: args.csv.as_deref(),
        markdown: args.markdown.as_deref(),
        html: args.html.as_deref(),
        no_save: args.no_save,
    })?;

    let cancel = Cancel::install()?;
    let progress = make_progress();
    let started = Instant::now();
    let plan = runner::Plan {
        experiments: &chosen,
        mode,
        repeat: args.repeat,
        drift_threshold_pct: if args.no_remeasure {
            None
        } else {
            Some(args.drift_threshold.unwrap_or(runner::DEFAULT_DRIFT_PCT))
        },
        budget: args.budget,
    };
    let results = runner::run(&plan, &cancel, progress.as_ref());
    progress.clear();

    print_results(&results, args.detail, &[], &saving.files())?;
    finish(&results, &saving, started, &cancel)
}

/// The end of a measuring command: the files saved, the time taken, and the exit status: 128 +
/// the signal that stopped the run, 1 when an experiment failed, else 0.
fn finish(results: &RunResults, saving: &Saving, started: Instant, cancel: &Cancel) -> Result<i32> {
    saving.save(results)?;
    say_err!("done in {:.1} s", started.elapsed().as_secs_f64());
    if let Some(sig) = cancel.signal() {
        return Ok(128 + sig);
    }
    let failed = results
        .experiments
        .iter()
        .any(|e| e.status == Status::Failed);
    Ok(if failed { 1 } else { 0 })
}

/// The summary, or with `detail` every table of the file, of the experiments in `only` (all
/// when empty), ending with the files named.
fn print_results(
    results: &RunResults,
    detail: bool,
    only: &[String],
    files: report::summary::Files,
) -> Result<()> {
    let width = terminal_width().unwrap_or(160) as usize;
    let clean = report::terminal::cleaned(results);
    let text = if detail {
        let style = table::Style {
            color: std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty()),
            width: Some(width.min(u16::MAX as usize) as u16),
        };
        let mut picked = clean.clone();
        if !only.is_empty() {
            picked.experiments.retain(|e| only.contains(&e.name));
        }
        let mut text = table::render(&picked, &style);
        text.push_str(&report::summary::tail(&picked, width, files));
        text
    } else {
        report::summary::render(&clean, width, only, files)
    };
    // Printed as is, not through `say!`: the table's colour codes are its own, and its text
    // comes from a cleaned copy of the results.
    use std::io::Write as _;
    let _ = write!(std::io::stdout(), "{text}");
    Ok(())
}

/// The output flags of `run` and `doctor`.
struct OutputArgs<'a> {
    json: Option<&'a Path>,
    default_json: &'a str,
    csv: Option<&'a Path>,
    markdown: Option<&'a Path>,
    html: Option<&'a Path>,
    no_save: bool,
}

/// The files a run writes, each checked before the first measurement.
struct Saving {
    outputs: Vec<(Format, PathBuf)>,
    checked: Vec<report::output::Output>,
    json_path: Option<PathBuf>,
}

impl Saving {
    fn plan(a: OutputArgs) -> Result<Saving> {
        let mut outputs: Vec<(Format, PathBuf)> = Vec::new();
        match (a.json, a.no_save) {
            (Some(p), _) => outputs.push((Format::JSON, p.to_path_buf())),
            (None, false) => outputs.push((Format::JSON, PathBuf::from(a.default_json))),
            (None, true) => {}
        }
        if let Some(p) = a.csv {
            outputs.push((Format::CSV, p.to_path_buf()));
        }
        if let Some(p) = a.markdown {
            outputs.push((Format::MARKDOWN, p.to_path_buf()));
        }
        // The report goes beside the results file unless named or not wanted; not beside a
        // device, FIFO or stream (`--json /dev/stdout` must not create /dev/stdout.html).
        let json_path = outputs
            .iter()
            .find(|(f, _)| *f == Format::JSON)
            .map(|(_, p)| p.clone());
        let json_is_file = match &json_path {
            Some(j) => !report::output::check_one("--json", j)?.is_direct(),
            None => false,
        };
        let html_path = match (a.html, &json_path, a.no_save) {
            (Some(p), _, _) => Some(p.to_path_buf()),
            (None, Some(j), false) if json_is_file => Some(report_path_for(j)),
            _ => None,
        };
        outputs.extend(html_path.map(|p| (Format::HTML, p)));
        let named: Vec<(&str, &std::path::Path)> = outputs
            .iter()
            .map(|(f, p)| (f.flag(), p.as_path()))
            .collect();
        let checked = report::output::check_all(&named)?;
        Ok(Saving {
            outputs,
            checked,
            json_path,
        })
    }

    /// The files a run writes, as the summary names them: the results file and the report
    /// last.
    fn files(&self) -> Vec<(&'static str, String)> {
        let mut files: Vec<(Format, &'static str, String)> = self
            .outputs
            .iter()
            .zip(&self.checked)
            .map(|((f, _), out)| (*f, f.label(), out.given.display().to_string()))
            .collect();
        let last = |f: Format| [Format::JSON, Format::HTML].iter().position(|l| *l == f);
        files.sort_by_key(|(f, _, _)| last(*f)); // stable: None first, then JSON, then HTML
        files.into_iter().map(|(_, l, p)| (l, p)).collect()
    }

    fn save(&self, results: &RunResults) -> Result<()> {
        let source = self
            .json_path
            .as_deref()
            .map_or_else(|| "a run that was not saved".to_string(), file_name);
        let cx = Context {
            source: &source,
            machine: None,
        };
        for ((format, _), out) in self.outputs.iter().zip(&self.checked) {
            out.write(format.render(results, &cx)?.as_bytes())?;
            say_err!("wrote {}", out.given.display());
        }
        Ok(())
    }
}

/// The experiments to run with the server experiment aimed at `target` (the only one when
/// none was named).
fn with_remote_server(
    chosen: Vec<&'static dyn Experiment>,
    named: &[String],
    target: &str,
) -> Result<Vec<&'static dyn Experiment>> {
    let addr = resolve("--target", target, "192.0.2.7:7878")?;
    if !named.is_empty() && !chosen.iter().any(|e| e.info().name == "server") {
        return Err(Error::Usage(
            "--target applies to the server experiment: threadlab run server --target HOST:PORT"
                .into(),
        ));
    }
    // One instance for the life of the process, as the registry's are.
    let remote: &'static dyn Experiment = Box::leak(Box::new(
        experiments::server::ServerExperiment::remote(addr),
    ));
    if named.is_empty() {
        return Ok(vec![remote]);
    }
    Ok(chosen
        .into_iter()
        .map(|e| if e.info().name == "server" { remote } else { e })
        .collect())
}

/// The `--design` values, from the design registry (so the help and the errors cannot leave
/// one out).
fn design_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        crate::subjects::server::DESIGNS
            .iter()
            .map(|d| clap::builder::PossibleValue::new(d.name).help(d.summary)),
    )
}

/// HOST:PORT (a name or an address) to the first address it resolves to, for `--listen` and
/// `--target` alike.
fn resolve(option: &str, value: &str, example: &str) -> Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    value
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            Error::Usage(format!(
                "{option} '{value}' is not an address this machine can resolve; give HOST:PORT, \
                 e.g. {example}"
            ))
        })
}

/// `threadlab serve`: one design on ADDR until SIGINT/SIGTERM, then its counters.
fn serve(args: ServeArgs) -> Result<i32> {
    use crate::subjects::server;
    let design = server::find(&args.design).ok_or_else(|| {
        let names: Vec<&str> = server::DESIGNS.iter().map(|d| d.name).collect();
        Error::Usage(format!(
            "unknown design '{}'; choose from {}",
            args.design,
            names.join(", ")
        ))
    })?;
    let listen = resolve("--listen", &args.listen, "127.0.0.1:7878 or localhost:7878")?;
    let _nofile = experiments::server::NofileRaised::raise();
    let mut cfg = server::ServerConfig::loopback();
    cfg.listen = listen;
    cfg.allow_remote_stats = args.allow_remote_stats;
    cfg.stats_snapshots = true;
    let cancel = Cancel::install()?;
    let s = match (design.start)(&cfg, &cancel) {
        Ok(s) => s,
        Err(Error::Skip(why)) => {
            return Err(Error::Fail(format!(
                "{} cannot run here: {why}",
                design.name
            )))
        }
        Err(e) => return Err(e),
    };
    say_err!(
        "threadlab serve: {} listening on {} ({}); Ctrl-C stops it",
        design.name,
        s.local_addr(),
        design.summary
    );
    while !cancel.is_cancelled() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let c = s.counts();
    drop(s);
    say_err!(
        "threadlab serve: stopped; {} requests served, {} refused busy, {} bad or late frames, \
         {} resets, {} accepted, {} times out of descriptors",
        c.served,
        c.rejected,
        c.errors,
        c.resets,
        c.accepted,
        c.fd_exhausted
    );
    Ok(0)
}

/// A run's time budget: a duration of at least 10 s, e.g. "5m", "90s", "1h 30m".
fn parse_budget(s: &str) -> std::result::Result<std::time::Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if d >= std::time::Duration::from_secs(10) => Ok(d),
        Ok(_) => Err(format!(
            "'{s}' is under 10 s, too short for any experiment; e.g. --budget 5m"
        )),
        Err(_) => Err(format!(
            "'{s}' is not a duration; e.g. --budget 5m or --budget 90s"
        )),
    }
}

/// A drift threshold: a percentage above 0 and at most 100.
fn parse_drift_pct(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a percentage in (0, 100]; e.g. --drift-threshold 5"
        )),
    }
}

/// The width to lay text out in: the terminal's when stdout is one, else `COLUMNS` (as a
/// shell exports it, or as set for a pipe), else none (the caller's default).
fn terminal_width() -> Option<u16> {
    if std::io::stdout().is_terminal() {
        // SAFETY: winsize is plain data and TIOCGWINSZ writes at most its size.
        let cols = unsafe {
            let mut ws: libc::winsize = std::mem::zeroed();
            if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 {
                ws.ws_col
            } else {
                0
            }
        };
        if cols > 0 {
            return Some(cols);
        }
    }
    columns_env()
}

/// `COLUMNS` when it holds a usable width (at least 20).
fn columns_env() -> Option<u16> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<u16>().ok())
        .filter(|&c| c >= 20)
}

/// `threadlab __probe WHAT`: a measurement that must run in a fresh process (the table is
/// `experiments::PROBES`). Prints its result as one line of JSON on stdout.
fn probe(what: &str, mode: &str, cpu: usize) -> Result<i32> {
    let mode = match mode {
        "tiny" => Mode::Tiny,
        "quick" => Mode::Quick,
        "full" => Mode::Full,
        other => return Err(Error::Usage(format!("unknown probe mode '{other}'"))),
    };
    let p = experiments::find_probe(what)
        .ok_or_else(|| Error::Usage(format!("unknown probe '{what}'")))?;
    let allowed = crate::measure::placement::allowed_cpus();
    if !allowed.is_empty() && !allowed.contains(&cpu) {
        return Err(Error::Usage(format!(
            "--cpu {cpu} is not a CPU this process may use; choose one of {allowed:?}"
        )));
    }
    match (p.run)(mode, cpu) {
        Ok(line) => {
            say_line!("{line}");
            Ok(0)
        }
        Err(Error::Skip(why)) => {
            say_err!("{why}");
            Ok(crate::measure::probe::SKIPPED)
        }
        Err(e) => Err(e),
    }
}
