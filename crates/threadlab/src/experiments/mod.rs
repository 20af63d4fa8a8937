//! Experiments: one file (or folder) each, all behind the `Experiment` trait, listed in
//! `registry()`.
//!
//! Adding an experiment: write its file (a `const INFO: Info`, and a `run` that records metrics
//! with `Outcome::sampled` / `Interleaved` / `Outcome::add`, its tables as `Table`s and its
//! conclusion as prose), add one line to `registry()`, list its metric ids in
//! docs/results-schema.md (a test checks), and put the study's figures in seeds.rs keyed by
//! metric id when it cites any (a test checks each is emitted). Nothing else changes.

use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::env::Environment;
use crate::measure::host::HostLog;
use crate::measure::placement::{cpus_of, is_unpinned};
use crate::measure::sampler::{InterleavedRow, Precision, Sampler, Span};
use crate::measure::stats::Summary;
use crate::measure::units::Unit;
use crate::results::flag::{add_flag, Flag};
use crate::results::{Metric, Series, SkippedMetric, Table};
use crate::seeds::{self, Study};

pub mod coop;
pub mod create;
pub mod doctor;
pub mod fairness;
pub mod latency;
pub mod ordering;
pub mod preempt;
pub mod priority;
pub mod server;
pub mod shm;
pub mod switch;
pub mod sync;
pub mod throttle;

pub use crate::measure::mode::Mode;

/// What an experiment gets to run with. No global state: everything comes through here.
pub struct Ctx<'a> {
    pub mode: Mode,
    pub cancel: &'a Cancel,
    /// Reports what is being measured now (shown beside the progress bar).
    pub progress: &'a (dyn Fn(&str) + Sync),
    /// The machine as the runner captured it at the start of the run; experiments read it
    /// here rather than capturing again (which would re-probe and re-read /sys mid-run).
    pub env: &'a Environment,
    /// What the sampler's trials saw of the host during this experiment.
    pub host: &'a HostLog,
    /// Scales every sampler's budget and trial counts (1.0 but under `--budget`, which fits
    /// a run into a wall time this way).
    pub budget_scale: f64,
}

/// What a `Ctx` borrows, for a measurement outside a run: a probe in a process of its own, a
/// test. Never cancelled, the machine captured now, no progress shown, full budget.
pub struct Standalone {
    cancel: Cancel,
    env: Environment,
    host: HostLog,
}

impl Standalone {
    pub fn new() -> Standalone {
        Standalone {
            cancel: Cancel::never(),
            env: crate::measure::env::capture(),
            host: HostLog::default(),
        }
    }

    pub fn ctx(&self, mode: Mode) -> Ctx<'_> {
        Ctx {
            mode,
            cancel: &self.cancel,
            progress: &|_| {},
            env: &self.env,
            host: &self.host,
            budget_scale: 1.0,
        }
    }
}

impl Default for Standalone {
    fn default() -> Standalone {
        Standalone::new()
    }
}

impl<'a> Ctx<'a> {
    /// Why a cross-CPU wake-up metric has two modes on this machine, for `explain_modes`.
    pub fn idle_wakeup_modes(&self) -> String {
        format!(
            "a wake-up of a CPU still polling in its idle loop is fast, one of a CPU that has \
             halted goes through the idle state's exit (on a VM, an exit to the host and an \
             interrupt injected back), so which one a batch sees depends on how long the CPU \
             had been idle; here: {}",
            self.env.idle_state_description()
        )
    }

    /// A sampler for rows on `placement` (as metrics name it): the CPUs whose steal sets a trial
    /// aside, and, for rows on two CPUs or placed by the kernel, the pair whose distance every
    /// trial reads.
    pub fn sampler_on(&self, placements: &[&str]) -> Sampler<'a> {
        Sampler::new(
            self.mode.sampler_config().scaled(self.budget_scale),
            self.cancel,
        )
        .with_host_log(self.host)
        .on(span_of(placements, &self.env.allowed_cpus))
    }

    /// A sampler for rows on every allowed CPU.
    pub fn sampler(&self) -> Sampler<'a> {
        self.sampler_on(&[])
    }

    pub fn step(&self, what: &str) -> Result<()> {
        self.cancel.check()?;
        (self.progress)(what);
        Ok(())
    }
}

/// The CPUs rows on these placements use, and the pair whose distance their trials read when
/// any of them spans two CPUs or is placed by the kernel. No placement: every allowed CPU.
/// `allowed` is the process's CPUs as the run found them (the calling thread may be pinned).
pub fn span_of(placements: &[&str], allowed: &[usize]) -> Span {
    if placements.is_empty() {
        return Span {
            cpus: allowed.to_vec(),
            pair: None,
        };
    }
    let mut cpus: Vec<usize> = placements
        .iter()
        .flat_map(|p| cpus_of(p, allowed))
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let spans_two = placements
        .iter()
        .any(|p| is_unpinned(p) || cpus_of(p, allowed).len() > 1);
    let pair = (spans_two && cpus.len() >= 2).then(|| (cpus[0], cpus[1]));
    Span { cpus, pair }
}

/// What an experiment is, as data: `threadlab list` and the results file read it.
#[derive(Debug)]
pub struct Info {
    /// The name used on the command line.
    pub name: &'static str,
    /// The study it reproduces.
    pub study: &'static Study,
    /// One line: what it measures.
    pub measures: &'static str,
    /// Rough wall time on a 2-core machine in the tiny, quick and full suites, seconds.
    pub rough_secs: [f64; 3],
}

impl Info {
    pub fn rough_duration(&self, mode: Mode) -> Duration {
        Duration::from_secs_f64(mode.pick(
            self.rough_secs[0],
            self.rough_secs[1],
            self.rough_secs[2],
        ))
    }
}

/// What a successful run of an experiment produced.
#[derive(Debug, Default)]
pub struct Outcome {
    pub metrics: Vec<Metric>,
    pub series: Vec<Series>,
    pub skipped: Vec<SkippedMetric>,
    pub tables: Vec<Table>,
    pub conclusion: Option<String>,
}

impl Outcome {
    pub fn skip(&mut self, id: &str, reason: impl Into<String>) {
        self.skipped.push(SkippedMetric {
            id: id.to_string(),
            reason: reason.into(),
        });
    }

    /// Marks the recorded metrics from index `from` on whose ids `pick` accepts as memory bound
    /// (`Metric::memory_bound`). Ratio rows are left as they are: their two parts were read
    /// together, round by round, and the shared memory's state cancels between them.
    pub fn mark_memory_bound(&mut self, from: usize, pick: impl Fn(&str) -> bool) {
        for m in self.metrics.iter_mut().skip(from) {
            if m.ratio_of.is_none() && pick(&m.id) {
                m.memory_bound = true;
            }
        }
    }

    /// Records a metric, with the study's figure for its id when there is one (seeds.rs).
    pub fn add(&mut self, mut m: Metric) -> &mut Metric {
        if m.historical.is_none() {
            m.historical = seeds::historical(&m.id);
        }
        // A group with one row on two CPUs reads the pair's distance for all its rows; a row
        // on one CPU does not depend on it, and compare would read a change of it as a change
        // of regime for that row.
        if !crate::measure::placement::spans_two_cpus(&m.placement) {
            if let Some(t) = m.trials.as_mut() {
                t.pair_ns.clear();
            }
        }
        self.metrics.push(m);
        self.metrics.last_mut().expect("just pushed")
    }

    /// Records a metric from samples of nanoseconds per operation, converted to `unit`.
    pub fn add_ns(
        &mut self,
        id: &str,
        unit: Unit,
        s: &Summary,
        placement: impl ToString,
        note: impl Into<String>,
    ) -> Result<&mut Metric> {
        let converted = s
            .map(|ns| unit.from_ns(ns))
            .ok_or_else(|| Error::Fail(format!("{id}: the samples were not finite numbers")))?;
        Ok(self.add(Metric::from_summary(id, unit, &converted, placement, note)))
    }

    /// Measures one metric: reports the step, samples `batch` (which runs n operations and
    /// returns the time they took), converts to `unit` and records it with its historical
    /// figure. The id is written once, here.
    pub fn sampled(
        &mut self,
        ctx: &Ctx,
        id: &str,
        unit: Unit,
        placement: impl ToString,
        note: impl Into<String>,
        batch: impl FnMut(u64) -> Result<Duration>,
    ) -> Result<&mut Metric> {
        ctx.step(id)?;
        let s = ctx.sampler().per_op_ns(batch)?;
        self.add_ns(id, unit, &s, placement, note)
    }

    /// Says, in the note of every metric whose samples fell in two clusters, what the two are:
    /// `cross_cpu` explains metrics placed on two CPUs (the wake-up of an idle CPU), `other`
    /// those on one; for threads the kernel places, which CPUs it chose comes first.
    pub fn explain_modes(&mut self, cross_cpu: &str, other: &str) {
        let placed = format!(
            "the kernel put the threads on one CPU in some trials and on two in others, and the two \
             cost differently (each trial's share of operations on one CPU is in the results \
             file's trials.colocated); across CPUs, too, {cross_cpu}"
        );
        for m in self.metrics.iter_mut() {
            let Some(modes) = &m.modes else { continue };
            let why = if m.placement.starts_with("cross_cpu") {
                cross_cpu
            } else if crate::measure::placement::spans_two_cpus(&m.placement) {
                &placed
            } else {
                other
            };
            m.note.push_str(&format!(
                "; the samples fall in two clusters, {:.0}% near {} and {:.0}% near {} {}: {why}",
                modes[0].share * 100.0,
                crate::measure::units::fmt_value(modes[0].median),
                modes[1].share * 100.0,
                crate::measure::units::fmt_value(modes[1].median),
                m.unit
            ));
        }
    }

    /// The median of a recorded metric.
    pub fn median(&self, id: &str) -> Option<f64> {
        self.metric(id).map(|m| m.median)
    }

    pub fn metric(&self, id: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.id == id)
    }

    pub fn metric_mut(&mut self, id: &str) -> Option<&mut Metric> {
        self.metrics.iter_mut().find(|m| m.id == id)
    }
}

/// One axis of a series measured here: its label, unit and values.
pub struct Axis<'s> {
    pub label: &'s str,
    pub unit: Unit,
    pub values: Vec<f64>,
}

/// A series of this run's own, with no historical curve beside it.
pub fn own_series(id: String, x: Axis, y: Axis, note: String) -> Series {
    Series {
        id,
        x_label: x.label.into(),
        x_unit: x.unit,
        y_label: y.label.into(),
        y_unit: y.unit,
        x: x.values,
        y: y.values,
        note,
        historical: None,
    }
}

/// Rows that are read against each other, measured in the same trials, round by round (see
/// `Sampler::interleaved`), and rows derived from them round by round (ratios, overhead
/// subtracted).
#[derive(Default)]
pub struct Interleaved<'a> {
    rows: Vec<(RowSpec, InterleavedRow<'a>)>,
    derived: Vec<DerivedSpec>,
    /// The last row added is a derived one (`flag` applies to it).
    last_derived: bool,
}

struct RowSpec {
    id: String,
    unit: Unit,
    placement: String,
    note: String,
    /// Measured only as an input of derived rows, not recorded itself.
    hidden: bool,
    /// Flags its metric carries from the start (see `Interleaved::flag`).
    flags: Vec<Flag>,
}

impl RowSpec {
    /// A row that is recorded.
    fn shown(id: &str, unit: Unit, placement: impl ToString, note: impl Into<String>) -> RowSpec {
        RowSpec {
            id: id.to_string(),
            unit,
            placement: placement.to_string(),
            note: note.into(),
            hidden: false,
            flags: Vec::new(),
        }
    }
}

type DeriveFn = Box<dyn Fn(&[f64]) -> f64>;

struct DerivedSpec {
    id: String,
    unit: Unit,
    placement: Option<String>,
    note: String,
    inputs: Vec<String>,
    /// Takes the inputs' per-op ns of one round, in order; returns the value in `unit` (ns
    /// for a time unit, converted afterwards).
    f: DeriveFn,
    ratio: bool,
    flags: Vec<Flag>,
}

impl<'a> Interleaved<'a> {
    pub fn new() -> Interleaved<'a> {
        Interleaved::default()
    }

    /// A row sampled with calibrated batches of `batch`, which serves every trial (it makes
    /// whatever it measures itself, or measures something that lives outside the group).
    pub fn row(
        &mut self,
        id: &str,
        unit: Unit,
        placement: impl ToString,
        note: impl Into<String>,
        batch: impl FnMut(u64) -> Result<Duration> + 'a,
    ) -> &mut Self {
        self.push(
            RowSpec::shown(id, unit, placement, note),
            InterleavedRow::new(batch),
        )
    }

    /// A row with a fixed batch size (slow or stateful operations: a burst of thousands of
    /// threads is one operation).
    pub fn row_fixed(
        &mut self,
        id: &str,
        unit: Unit,
        placement: impl ToString,
        note: impl Into<String>,
        iters: u64,
        batch: impl FnMut(u64) -> Result<Duration> + 'a,
    ) -> &mut Self {
        self.row(id, unit, placement, note, batch)
            .fixed_batch(iters)
    }

    /// A row whose subject (threads, locks, objects, placement) `make` creates fresh for every
    /// trial, returning its batch; dropping the batch ends the subject.
    pub fn row_fresh<B>(
        &mut self,
        id: &str,
        unit: Unit,
        placement: impl ToString,
        note: impl Into<String>,
        make: impl FnMut() -> Result<B> + 'a,
    ) -> &mut Self
    where
        B: FnMut(u64) -> Result<Duration> + 'a,
    {
        self.push(
            RowSpec::shown(id, unit, placement, note),
            InterleavedRow::fresh(make),
        )
    }

    /// The row `id` timing `op` on a started peer: on a runtime started afresh for every trial
    /// where the peer allows it (a runtime's stacks, pools and their addresses last its life
    /// and can set a figure for all of it), else on the programs started for the group, taken
    /// in turn trial by trial where there are several (Go's). `note` gets a clause saying which.
    pub fn peer_row(
        &mut self,
        peer: &'a crate::subjects::peers::Started,
        cancel: &'a crate::cancel::Cancel,
        (id, placement, note): (&str, crate::measure::placement::Placement, &str),
        op: impl Fn(&mut dyn crate::subjects::peers::Running, u64) -> Result<Duration> + Copy + 'a,
    ) -> &mut Self {
        if peer.restartable() {
            let note = format!("{note}; the runtime is started afresh for every trial");
            self.row_fresh(id, Unit::Ns, placement, note, move || {
                peer.peer
                    .start(cancel)
                    .map(|mut r| move |n| op(r.as_mut(), n))
            })
        } else {
            let running = &peer.running;
            let programs = running.borrow().programs();
            if programs > 1 {
                let note = format!(
                    "{note}; {programs} copies of the program, started for the group, taken in \
                     turn trial by trial"
                );
                let mut trials = 0;
                self.row_fresh(id, Unit::Ns, placement, note, move || {
                    // Each batch names its program: the group's other rows of this peer share it.
                    let k = trials;
                    trials += 1;
                    Ok(move |n| {
                        let mut r = running.borrow_mut();
                        r.use_program(k);
                        op(r.as_mut(), n)
                    })
                });
            } else {
                self.row(id, Unit::Ns, placement, note, move |n| {
                    op(running.borrow_mut().as_mut(), n)
                });
            }
            self.one_program(peer)
        }
    }

    /// The last row added runs its trials in `peer`'s programs, started for the group, when the
    /// peer is a program of its own (Go's): it carries `one_program`, since each program's
    /// regime can last its life and a run sees only one or a few of them (docs/compare.md, "the
    /// life of the process").
    pub fn one_program(&mut self, peer: &crate::subjects::peers::Started) -> &mut Self {
        if peer.info.own_process {
            self.flag(Flag::OneProgram);
        }
        self
    }

    /// A row measured only as the input of derived rows (an overhead, a raw figure), named by
    /// `key`; it is not recorded.
    pub fn input(
        &mut self,
        key: &str,
        batch: impl FnMut(u64) -> Result<Duration> + 'a,
    ) -> &mut Self {
        let spec = RowSpec {
            id: key.to_string(),
            unit: Unit::Ns,
            placement: String::new(),
            note: String::new(),
            hidden: true,
            flags: Vec::new(),
        };
        self.push(spec, InterleavedRow::new(batch))
    }

    /// The last row added (measured or derived) carries `flag` from the moment its metric is
    /// made: in its `flags` and at the start of its note (a note rewritten after measuring
    /// keeps it with `flag::tagged`).
    pub fn flag(&mut self, flag: Flag) -> &mut Self {
        let flags = if self.last_derived {
            self.derived.last_mut().map(|d| &mut d.flags)
        } else {
            self.rows.last_mut().map(|(spec, _)| &mut spec.flags)
        };
        if let Some(flags) = flags {
            if !flags.contains(&flag) {
                flags.push(flag);
            }
        }
        self
    }

    /// The precision the last row added must reach before sampling may stop (default
    /// `Precision::Kernel`; rows on two CPUs or placed by the kernel default to
    /// `Precision::Race`).
    pub fn precision(&mut self, p: Precision) -> &mut Self {
        if let Some((_, row)) = self.rows.last_mut() {
            row.precision = p;
        }
        self
    }

    /// The last row added can tell, after each batch, whether its parties ended on one CPU
    /// (rows the kernel places: see `TrialLog::colocated`).
    pub fn colocation(&mut self, probe: impl Fn() -> Option<bool> + 'a) -> &mut Self {
        self.colocation_share(move || probe().map(|same| if same { 1.0 } else { 0.0 }))
    }

    /// The last row added can tell, after each batch, which share of its operations had their
    /// parties on one CPU (a batch of many thread creations, each placed anew).
    pub fn colocation_share(&mut self, probe: impl Fn() -> Option<f64> + 'a) -> &mut Self {
        if let Some((_, row)) = self.rows.last_mut() {
            row.colocation = Some(Box::new(probe));
        }
        self
    }

    /// The last row added runs this many operations per batch instead of a calibrated number
    /// (slow or stateful operations).
    pub fn fixed_batch(&mut self, iters: u64) -> &mut Self {
        if let Some((_, row)) = self.rows.last_mut() {
            row.fixed_iters = Some(iters.max(1));
        }
        self
    }

    fn push(&mut self, spec: RowSpec, mut row: InterleavedRow<'a>) -> &mut Self {
        if crate::measure::placement::spans_two_cpus(&spec.placement) {
            row.precision = Precision::Race;
        }
        // An input row does not say where it runs, and a row against a server elsewhere
        // depends on that host and the network: neither votes.
        if !spec.hidden && crate::measure::placement::on_one_cpu(&spec.placement) {
            row = row.on_one_cpu();
        }
        self.rows.push((spec, row));
        self.last_derived = false;
        self
    }

    /// A time row computed round by round from other rows' per-op ns: `f` gets them in the
    /// order of `inputs` and returns ns, e.g. a raw figure minus an overhead taken in the same
    /// round.
    pub fn derived(
        &mut self,
        id: &str,
        unit: Unit,
        placement: impl ToString,
        note: impl Into<String>,
        inputs: &[&str],
        f: impl Fn(&[f64]) -> f64 + 'static,
    ) -> &mut Self {
        self.derived.push(DerivedSpec {
            id: id.to_string(),
            unit,
            placement: Some(placement.to_string()),
            note: note.into(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            f: Box::new(f),
            ratio: false,
            flags: Vec::new(),
        });
        self.last_derived = true;
        self
    }

    /// A ratio row: `numerator` / `denominator` (both time rows of this group), one value per
    /// round, so each value compares two batches taken seconds apart at most; a trial's value
    /// is the median of its rounds' ratios.
    pub fn ratio(
        &mut self,
        id: &str,
        numerator: &str,
        denominator: &str,
        note: impl Into<String>,
    ) -> &mut Self {
        self.derived.push(DerivedSpec {
            id: id.to_string(),
            unit: Unit::Ratio,
            placement: None,
            note: format!(
                "{numerator} / {denominator}, one value per round of interleaved sampling; {}",
                note.into()
            ),
            inputs: vec![numerator.to_string(), denominator.to_string()],
            f: Box::new(|v: &[f64]| v[0] / v[1]),
            ratio: true,
            flags: Vec::new(),
        });
        self.last_derived = true;
        self
    }

    /// Samples every row interleaved and records the rows and the derived rows in `out`. A row
    /// that cannot run here is recorded as skipped with its reason, and so are the rows derived
    /// from it.
    pub fn measure(self, ctx: &Ctx, out: &mut Outcome) -> Result<Measured> {
        let names: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| !r.0.hidden)
            .map(|r| r.0.id.as_str())
            .collect();
        ctx.step(&format!("{} (interleaved)", names.join(", ")))?;
        let placements: Vec<String> = self
            .rows
            .iter()
            .map(|r| r.0.placement.clone())
            .chain(self.derived.iter().filter_map(|d| d.placement.clone()))
            .filter(|p| !p.is_empty())
            .collect();
        let (specs, mut rows): (Vec<RowSpec>, Vec<InterleavedRow<'a>>) =
            self.rows.into_iter().unzip();
        let refs: Vec<&str> = placements.iter().map(|p| p.as_str()).collect();
        let sampler = ctx.sampler_on(&refs);
        let results = sampler.interleaved(&mut rows)?;
        drop(rows);
        let mut measured: Vec<(String, Summary)> = Vec::new();
        for (spec, r) in specs.into_iter().zip(results) {
            match r {
                Ok(s) => {
                    if !spec.hidden {
                        // The trial log's note comes with the summary.
                        let m = out.add_ns(&spec.id, spec.unit, &s, spec.placement, spec.note)?;
                        for &f in &spec.flags {
                            add_flag(m, f);
                        }
                    }
                    measured.push((spec.id, s));
                }
                Err(reason) => out.skip(&spec.id, reason),
            }
        }
        for d in self.derived {
            derive(d, &measured, out)?;
        }
        Ok(Measured(measured))
    }
}

/// Records one derived row: per trial and round, `d.f` over the inputs' figures of that round;
/// a trial's figure is the median of its rounds.
fn derive(d: DerivedSpec, measured: &[(String, Summary)], out: &mut Outcome) -> Result<()> {
    let inputs: Option<Vec<&Summary>> = d
        .inputs
        .iter()
        .map(|id| measured.iter().find(|(i, _)| i == id).map(|(_, s)| s))
        .collect();
    let Some(inputs) = inputs else {
        let missing: Vec<&str> = d
            .inputs
            .iter()
            .filter(|id| !measured.iter().any(|(i, _)| i == *id))
            .map(|s| s.as_str())
            .collect();
        out.skip(
            &d.id,
            format!(
                "{} was not measured here (see its reason)",
                missing.join(" and ")
            ),
        );
        return Ok(());
    };
    let trials = inputs.iter().map(|s| s.batches.len()).min().unwrap_or(0);
    let per_trial: Vec<Vec<f64>> = (0..trials)
        .map(|t| {
            let rounds = inputs.iter().map(|s| s.batches[t].len()).min().unwrap_or(0);
            (0..rounds)
                .map(|r| {
                    let v: Vec<f64> = inputs.iter().map(|s| s.batches[t][r]).collect();
                    let x = (d.f)(&v);
                    if d.unit.is_time() {
                        d.unit.from_ns(x)
                    } else {
                        x
                    }
                })
                .collect()
        })
        .collect();
    let placement = d.placement.unwrap_or_else(|| {
        out.metric(&d.inputs[0])
            .map(|m| m.placement.clone())
            .unwrap_or_default()
    });
    let mut log = inputs[0].trials.clone();
    if let Some(l) = log.as_mut() {
        // The derived row's own precision, over its own trial figures.
        let values: Vec<f64> = per_trial
            .iter()
            .map(|b| crate::measure::stats::median(b))
            .collect();
        l.ci_pct = crate::measure::stats::median_ci_pct(&values);
    }
    let s = Summary::from_trials(per_trial, inputs[0].batch, log)
        .ok_or_else(|| Error::Fail(format!("{}: no finite values", d.id)))?;
    // A row derived from rows a regime decides (a race, an idle vCPU's wake-up, a peer's
    // program) shares that regime, whether or not the group flags it too.
    let inherited: Vec<Flag> = Flag::REGIME
        .into_iter()
        .filter(|&f| {
            d.inputs.iter().any(|id| {
                out.metric(id)
                    .is_some_and(|m| crate::results::flag::has(m, f))
            })
        })
        .collect();
    let m = out.add(Metric::from_summary(&d.id, d.unit, &s, placement, d.note));
    for f in inherited {
        add_flag(m, f);
    }
    if d.ratio {
        m.ratio_of = Some([d.inputs[0].clone(), d.inputs[1].clone()]);
        m.batch = 1;
    }
    for &f in &d.flags {
        add_flag(m, f);
    }
    Ok(())
}

/// Every row an interleaved group measured (inputs included), per-op ns, by id.
pub struct Measured(Vec<(String, Summary)>);

impl Measured {
    pub fn ns(&self, id: &str) -> Option<&Summary> {
        self.0.iter().find(|(i, _)| i == id).map(|(_, s)| s)
    }

    pub fn median_ns(&self, id: &str) -> Option<f64> {
        self.ns(id).map(|s| s.median)
    }
}

pub trait Experiment: Sync {
    fn info(&self) -> &'static Info;
    /// Runs it, recording into `out` as it goes. Err(Skip) when it cannot run here,
    /// Err(Cancelled) when interrupted: what `out` holds by then is kept and reported.
    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()>;
}

/// Every experiment, in the order the suite runs them.
pub fn registry() -> Vec<&'static dyn Experiment> {
    vec![
        &create::Create,
        &sync::SyncCosts,
        &switch::Switch,
        &shm::Shm,
        &fairness::Fairness,
        &ordering::MemoryOrdering,
        &preempt::Preempt,
        &throttle::ThrottleExperiment,
        &priority::PriorityExperiment,
        &latency::Latency,
        &coop::Coop,
        &server::LOCAL,
        &doctor::SUITE,
    ]
}

pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    registry().into_iter().find(|e| e.info().name == name)
}

/// A measurement that must run in a fresh process (`threadlab __probe NAME`): `run` measures
/// in the process it is called in and returns the line of JSON the parent reads.
pub struct Probe {
    pub name: &'static str,
    pub run: fn(Mode, usize) -> Result<String>,
}

/// Every out-of-process probe; `cli.rs` dispatches `__probe` through this table.
pub const PROBES: &[Probe] = &[sync::MUTEX_SINGLE_PROBE, create::balance::BALANCE_PROBE];

pub fn find_probe(name: &str) -> Option<&'static Probe> {
    PROBES.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests;
