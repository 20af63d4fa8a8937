//! The command line: parse, dispatch, print. Every user mistake ends in one line saying what to
//! do, and exit status 2.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{self, Experiment, Mode};
use crate::measure::env;
use crate::report::{self, table, Format};
use crate::results::Status;
use crate::runner::{self, Progress};

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
    /// Run experiments (all of them when none is named) and print then-vs-now tables.
    Run(RunArgs),
    /// List the experiments: name, study, what it measures, rough duration.
    List,
    /// Serve one server design until interrupted: the far end of `run server --target`.
    Serve(ServeArgs),
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
    /// Write the results file (JSON) here [default: threadlab-results.json].
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Also write every metric as CSV here.
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Also write a Markdown report here.
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,
    /// Do not write the default results file (files named with --json/--csv/--markdown still are).
    #[arg(long)]
    pub no_save: bool,
    /// Run the chosen experiments K times, interleaved (A B C A B C ...), and report each metric
    /// as the median of the K runs' medians with the spread across runs.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Measure an experiment again when the machine's speed (the drift references) moved more
    /// than PCT percent during it [default: 5].
    #[arg(long, value_name = "PCT", value_parser = parse_drift_pct)]
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
    /// The design: thread_per_client, thread_per_request, fork_per_client, prefork, pool,
    /// epoll, epoll_per_core, io_uring, tokio or go.
    #[arg(long)]
    pub design: String,
    /// Where to listen.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: std::net::SocketAddr,
    /// Answer STATS (CPU, memory, threads) to peers that are not on loopback.
    #[arg(long)]
    pub allow_remote_stats: bool,
}

/// Parses arguments; on a mistake prints one line and returns the exit status.
pub fn main_with_args(args: Vec<String>) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    }
                }
                _ => {
                    eprintln!("{}", one_line_clap_error(&e));
                    2
                }
            };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(Error::Usage(msg)) => {
            eprintln!("threadlab: {msg}");
            2
        }
        Err(Error::Cancelled(sig)) => 128 + sig,
        Err(e) => {
            eprintln!("threadlab: {e}");
            1
        }
    }
}

/// clap's first line ("error: ..."), without colour, plus where to look.
fn one_line_clap_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("error: invalid arguments")
        .trim()
        .trim_start_matches("error: ");
    format!("threadlab: {first}; see 'threadlab --help'")
}

fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::List => {
            print!("{}", list_text());
            Ok(0)
        }
        Command::Env { json } => {
            let e = env::capture();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&e)
                        .map_err(|e| Error::Fail(format!("cannot encode JSON: {e}")))?
                );
            } else {
                print!("{}", report::env::render_text(&e));
            }
            Ok(0)
        }
        Command::Probe { what, mode, cpu } => probe(&what, &mode, cpu),
        Command::Run(args) => run(args),
        Command::Serve(args) => serve(args),
    }
}

pub fn list_text() -> String {
    let mut out = String::new();
    for e in experiments::registry() {
        let i = e.info();
        out.push_str(&format!(
            "{:<10} ~{}s quick, ~{}s --full\n           {}\n           study: {}\n",
            i.name,
            i.rough_duration(Mode::Quick).as_secs(),
            i.rough_duration(Mode::Full).as_secs(),
            i.measures,
            i.study.citation
        ));
    }
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
    let mut outputs: Vec<(Format, PathBuf)> = Vec::new();
    match (&args.json, args.no_save) {
        (Some(p), _) => outputs.push((Format::Json, p.clone())),
        (None, false) => outputs.push((Format::Json, PathBuf::from("threadlab-results.json"))),
        (None, true) => {}
    }
    if let Some(p) = &args.csv {
        outputs.push((Format::Csv, p.clone()));
    }
    if let Some(p) = &args.markdown {
        outputs.push((Format::Markdown, p.clone()));
    }
    for (_, p) in &outputs {
        report::check_writable(p)?;
    }

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
    };
    let results = runner::run(&plan, &cancel, progress.as_ref());
    progress.clear();

    let style = table::Style {
        color: std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty()),
        width: terminal_width(),
    };
    print!("{}", table::render(&results, &style));
    for (format, path) in &outputs {
        report::write_atomic(path, &format.render(&results)?)?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!("done in {:.1} s", started.elapsed().as_secs_f64());

    if let Some(sig) = cancel.signal() {
        return Ok(128 + sig);
    }
    let failed = results
        .experiments
        .iter()
        .any(|e| e.status == Status::Failed);
    Ok(if failed { 1 } else { 0 })
}

/// The experiments to run with the server experiment aimed at `target` (the only one when
/// none was named).
fn with_remote_server(
    chosen: Vec<&'static dyn Experiment>,
    named: &[String],
    target: &str,
) -> Result<Vec<&'static dyn Experiment>> {
    use std::net::ToSocketAddrs;
    let addr = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            Error::Usage(format!(
                "--target '{target}' is not an address; give HOST:PORT, e.g. 192.0.2.7:7878"
            ))
        })?;
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
    let _nofile = experiments::server::NofileRaised::raise();
    let mut cfg = server::ServerConfig::loopback();
    cfg.listen = args.listen;
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
    eprintln!(
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
    eprintln!(
        "threadlab serve: stopped; {} requests served, {} refused busy, {} bad or late frames, \
         {} resets, {} accepted, {} times out of descriptors",
        c.served, c.rejected, c.errors, c.resets, c.accepted, c.fd_exhausted
    );
    Ok(0)
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

fn terminal_width() -> Option<u16> {
    if !std::io::stdout().is_terminal() {
        return Some(160);
    }
    // SAFETY: winsize is plain data and TIOCGWINSZ writes at most its size.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 {
            Some(ws.ws_col)
        } else {
            None
        }
    }
}

/// Progress on stderr: a bar on a terminal, plain lines otherwise.
trait Reporter: Progress {
    fn clear(&self);
}

fn make_progress() -> Box<dyn Reporter> {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix:>10} [{bar:20}] {pos}/{len} {elapsed:>4} {msg}",
            )
            .expect("the template is valid")
            .progress_chars("=> "),
        );
        Box::new(BarProgress(bar))
    } else {
        Box::new(LineProgress)
    }
}

struct BarProgress(indicatif::ProgressBar);

impl Progress for BarProgress {
    fn experiment(&self, index: usize, total: usize, name: &str) {
        self.0.set_length(total as u64);
        self.0.set_position(index as u64);
        self.0.set_prefix(name.to_string());
    }
    fn step(&self, what: &str) {
        self.0.set_message(what.to_string());
    }
    fn finished(&self, _name: &str, _status: Status, _wall_s: f64) {
        self.0.inc(1);
    }
}

impl Reporter for BarProgress {
    fn clear(&self) {
        self.0.finish_and_clear();
    }
}

struct LineProgress;

impl Progress for LineProgress {
    fn experiment(&self, index: usize, total: usize, name: &str) {
        eprintln!("[{}/{total}] {name}", index + 1);
    }
    fn step(&self, _what: &str) {}
    fn finished(&self, name: &str, status: Status, wall_s: f64) {
        eprintln!("      {name}: {status:?} in {wall_s:.1} s");
    }
}

impl Reporter for LineProgress {
    fn clear(&self) {}
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
    println!("{}", (p.run)(mode, cpu)?);
    Ok(0)
}
