//! `throttle`: the Delphi semaphore throttle (2010s). 64 workers each sum a slice of
//! 1 + 2 + ... + 64·C; a semaphore admits N of them at once. Where does the time stop falling,
//! what does running all 64 at once cost, and what pool size should CPU-bound work use here?
//!
//! Run with kernel threads (a counting semaphore on a mutex and condition variable) and with
//! uthread: one carrier per allowed CPU, the 64 green workers spread over them, all sharing one
//! `uthread::Throttle`.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::placement::{allowed_cpus, physical_cores, Placement};
use crate::measure::significance::bootstrap_ratio_ci;
use crate::measure::spawn::spawn_scoped;
use crate::measure::stats::median;
use crate::measure::units::{Direction, Unit};
use crate::results::{Metric, Series, Table};
use crate::seeds;
use crate::sys;

pub struct ThrottleExperiment;

pub const WORKERS: u64 = 64;

/// N = this value stands for "unthrottled" in series (as in the study's curve: 65).
pub const UNTHROTTLED_X: usize = 65;

/// The plateau's margin: an N whose time is within this fraction of the fastest N's is on the
/// plateau (a difference this small is not worth a thread).
pub const PLATEAU_MARGIN: f64 = 0.05;

/// Bootstrap resamples of the ratio of medians behind each N's interval (fixed seed: the same
/// runs always give the same interval).
const RESAMPLES: usize = 4_000;

/// Extra runs per close N, and how many times they may be added, before a close call is
/// settled by its median.
const EXTRA_REPS: usize = 4;
const EXTRA_ROUNDS: usize = 2;

/// 1 + 2 + ... + n, the closed form the workers' total is checked against.
pub fn closed_form_sum(n: u64) -> u64 {
    n * (n + 1) / 2
}

/// The slice of worker `i` of 64: (i·C, (i+1)·C].
pub fn slice(i: u64, per_worker: u64) -> (u64, u64) {
    (i * per_worker + 1, (i + 1) * per_worker)
}

/// Sums lo..=hi one addition at a time (black_box keeps the compiler from using the closed form).
pub fn sum_slice(lo: u64, hi: u64) -> u64 {
    let mut acc = 0u64;
    for i in lo..=hi {
        acc = acc.wrapping_add(std::hint::black_box(i));
    }
    acc
}

/// Where an N stands against the fastest N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The 95% interval of time(N) / time(fastest) lies wholly within 1 + `PLATEAU_MARGIN`.
    Plateau,
    /// The interval lies wholly above 1 + `PLATEAU_MARGIN`.
    Slower,
    /// The interval straddles the margin: more runs decide, or else the median ratio does.
    Close,
}

/// One N's verdict: its median time over the fastest N's, the 95% bootstrap interval of that
/// ratio, and where that puts it.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub n: usize,
    pub ratio: f64,
    pub ci: (f64, f64),
    pub standing: Standing,
}

/// The rule that picks the best N from repeated runs: the start of the plateau. `fastest` is
/// the N with the lowest median time; every N gets the 95% percentile-bootstrap interval of
/// median(N) / median(fastest) (fixed seed). An N is on the plateau when that interval lies
/// wholly below 1 + `PLATEAU_MARGIN` (an equivalence test with a stated margin), slower when it
/// lies wholly above, close otherwise. The answer is the smallest N on the plateau. A close N
/// below it gets more runs (`close_calls`); with `settle`, a close N still undecided counts as
/// on the plateau when its median ratio is within the margin. Noise moves an N's interval, not
/// which side of a 5% margin a 10% penalty or a 1% difference lies on, so the answer does not
/// wander along the plateau from run to run.
pub fn best_concurrency(points: &[(usize, Vec<f64>)], settle: bool) -> Option<Best> {
    let medians: Vec<f64> = points.iter().map(|(_, v)| median(v)).collect();
    let (fi, _) = medians
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_finite() && **m > 0.0)
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    let fastest = &points[fi];
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|&i| points[i].0);
    let band = 1.0 + PLATEAU_MARGIN;
    let verdicts: Vec<Verdict> = order
        .iter()
        .map(|&i| {
            let ratio = medians[i] / medians[fi];
            let ci = if i == fi {
                (1.0, 1.0)
            } else {
                bootstrap_ratio_ci(&fastest.1, &points[i].1, RESAMPLES).unwrap_or((ratio, ratio))
            };
            let standing = if i == fi || ci.1 <= band {
                Standing::Plateau
            } else if ci.0 > band {
                Standing::Slower
            } else if settle {
                if ratio <= band {
                    Standing::Plateau
                } else {
                    Standing::Slower
                }
            } else {
                Standing::Close
            };
            Verdict {
                n: points[i].0,
                ratio,
                ci,
                standing,
            }
        })
        .collect();
    let n = verdicts.iter().find(|v| v.standing == Standing::Plateau)?.n;
    Some(Best {
        n,
        fastest_n: fastest.0,
        verdicts,
    })
}

/// What `best_concurrency` found: the answer, the fastest N, and every N's verdict (ascending).
#[derive(Debug)]
pub struct Best {
    pub n: usize,
    pub fastest_n: usize,
    pub verdicts: Vec<Verdict>,
}

impl Best {
    fn verdict(&self, n: usize) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.n == n)
    }

    /// The close N below the answer: the ones whose extra runs could change it.
    pub fn close_calls(&self) -> Vec<usize> {
        self.verdicts
            .iter()
            .filter(|v| v.n < self.n && v.standing == Standing::Close)
            .map(|v| v.n)
            .collect()
    }
}

/// The rule in words, for notes and the conclusion.
pub fn rule_text() -> String {
    format!(
        "the start of the plateau: the smallest N whose median time is within {:.0}% of the \
         fastest N's with 95% confidence (a bootstrap interval of the ratio of medians wholly \
         below {:.2}); an N whose interval straddles the margin is run {EXTRA_REPS} more times \
         (at most {EXTRA_ROUNDS} times), then decided by its median",
        PLATEAU_MARGIN * 100.0,
        1.0 + PLATEAU_MARGIN
    )
}

/// A pool size from the topology alone: physical cores among the CPUs we may use, capped by a
/// cgroup CPU quota (the server experiment sizes its pool design with it, before any throttle
/// run could say more).
pub fn recommended_pool(physical_allowed: usize, cgroup_cpus: Option<f64>) -> usize {
    let cap = cgroup_cpus.map_or(usize::MAX, |c| (c.floor() as usize).max(1));
    physical_allowed.min(cap).max(1)
}

struct KernelSemaphore {
    permits: Mutex<usize>,
    freed: Condvar,
}

impl KernelSemaphore {
    fn acquire(&self) {
        let mut p = self.permits.lock();
        while *p == 0 {
            self.freed.wait(&mut p);
        }
        *p -= 1;
    }
    fn release(&self) {
        *self.permits.lock() += 1;
        self.freed.notify_one();
    }
}

struct RunResult {
    seconds: f64,
    total: u64,
    voluntary: u64,
    involuntary: u64,
    /// Share of the run the allowed CPUs spent idle, percent, one per CPU (from /proc/stat).
    idle_pct: Vec<f64>,
}

/// Runs `f` and measures how idle each allowed CPU was meanwhile.
fn with_idle<T>(cpus: &[usize], f: impl FnOnce() -> Result<T>) -> Result<(T, Vec<f64>)> {
    let before = sys::cpu_ticks();
    let r = f()?;
    let after = sys::cpu_ticks();
    let idle = cpus
        .iter()
        .map(|c| {
            let b = before.iter().find(|x| x.0 == *c);
            let a = after.iter().find(|x| x.0 == *c);
            match (b, a) {
                (Some(b), Some(a)) if a.2 > b.2 => (a.1 - b.1) as f64 / (a.2 - b.2) as f64 * 100.0,
                _ => f64::NAN,
            }
        })
        .collect();
    Ok((r, idle))
}

/// 64 kernel threads, at most `limit` summing at once (None: unthrottled).
fn run_kernel(limit: Option<usize>, per_worker: u64) -> Result<RunResult> {
    let sem = KernelSemaphore {
        permits: Mutex::new(limit.unwrap_or(0)),
        freed: Condvar::new(),
    };
    let t = Instant::now();
    let parts: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
        let mut refused = None;
        let mut handles = Vec::with_capacity(WORKERS as usize);
        for i in 0..WORKERS {
            let sem = &sem;
            // A worker that started runs to its end whether or not the others could start
            // (nobody waits for all 64), so a refusal only stops the spawning.
            match spawn_scoped(s, "a throttle worker thread", move || {
                let (lo, hi) = slice(i, per_worker);
                let sum = match limit {
                    Some(_) => {
                        sem.acquire();
                        let sum = sum_slice(lo, hi);
                        sem.release();
                        sum
                    }
                    None => sum_slice(lo, hi),
                };
                let (v, iv) = sys::thread_context_switches();
                (sum, v, iv)
            }) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let joined = handles
            .into_iter()
            .map(|h| h.join())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|_| Error::Fail("a throttle worker panicked".into()));
        match refused {
            Some(e) => Err(e),
            None => joined,
        }
    })?;
    let seconds = t.elapsed().as_secs_f64();
    Ok(RunResult {
        seconds,
        total: parts.iter().fold(0u64, |a, p| a.wrapping_add(p.0)),
        voluntary: parts.iter().map(|p| p.1).sum(),
        involuntary: parts.iter().map(|p| p.2).sum(),
        idle_pct: Vec::new(),
    })
}

/// The same on uthread: `carriers` OS threads each run a runtime with their share of the 64
/// green workers; all share one `uthread::Throttle`. Context switches: the carriers' kernel
/// switches (voluntary, involuntary); green switches are added to the voluntary count.
fn run_uthread(limit: Option<usize>, per_worker: u64, carriers: usize) -> Result<RunResult> {
    let throttle = Arc::new(uthread::Throttle::new(limit.unwrap_or(1)));
    let t = Instant::now();
    let parts: Vec<Result<(u64, u64, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..carriers)
            .map(|c| {
                let throttle = Arc::clone(&throttle);
                spawn_scoped(
                    s,
                    "a uthread carrier thread",
                    move || -> Result<(u64, u64, u64)> {
                        let rt = uthread::Runtime::new();
                        // Workers wait on a throttle that other carriers release: a live Handle tells
                        // the runtime that remote wake-ups can come, so all-blocked is not deadlock.
                        let remote = rt.handle();
                        let sum = rt.block_on(move || {
                            let handles: Vec<_> = (0..WORKERS)
                                .filter(|i| *i as usize % carriers == c)
                                .map(|i| {
                                    let throttle = Arc::clone(&throttle);
                                    uthread::Builder::new()
                                        .stack_size(64 * 1024)
                                        .spawn(move || {
                                            let (lo, hi) = slice(i, per_worker);
                                            match limit {
                                                Some(_) => throttle.run(|| sum_slice(lo, hi)),
                                                None => sum_slice(lo, hi),
                                            }
                                        })
                                })
                                .collect();
                            let mut sum = 0u64;
                            for h in handles {
                                match h.map(|h| h.join().finished()) {
                                    Ok(Some(v)) => sum = sum.wrapping_add(v),
                                    _ => return None,
                                }
                            }
                            Some(sum)
                        });
                        drop(remote);
                        let green = rt.stats().context_switches;
                        let (v, iv) = sys::thread_context_switches();
                        let sum = sum
                            .ok_or_else(|| Error::Fail("a uthread worker failed to run".into()))?;
                        Ok((sum, v + green, iv))
                    },
                )
            })
            .collect();
        // Carriers that started finish their own workers whatever the others do.
        handles
            .into_iter()
            .map(|h| {
                h.and_then(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Fail("a uthread carrier panicked".into())))
                })
            })
            .collect()
    });
    let seconds = t.elapsed().as_secs_f64();
    let parts = parts.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(RunResult {
        seconds,
        total: parts.iter().fold(0u64, |a, p| a.wrapping_add(p.0)),
        voluntary: parts.iter().map(|p| p.1).sum(),
        involuntary: parts.iter().map(|p| p.2).sum(),
        idle_pct: Vec::new(),
    })
}

fn x_of(limit: Option<usize>) -> usize {
    limit.unwrap_or(UNTHROTTLED_X)
}

fn label(limit: Option<usize>) -> String {
    limit.map_or("unthrottled".to_string(), |n| n.to_string())
}

/// Per N: every run.
struct PerN {
    n: usize,
    runs: Vec<RunResult>,
}

impl PerN {
    fn seconds(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.seconds).collect()
    }
    fn median_of(&self, f: impl Fn(&RunResult) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }
    fn voluntary(&self) -> f64 {
        self.median_of(|r| r.voluntary as f64)
    }
    fn involuntary(&self) -> f64 {
        self.median_of(|r| r.involuntary as f64)
    }
    /// The median idle share of the idlest CPU.
    fn idlest_pct(&self) -> f64 {
        let cpus = self.runs.first().map_or(0, |r| r.idle_pct.len());
        (0..cpus)
            .map(|c| self.median_of(|r| r.idle_pct[c]))
            .fold(0.0, f64::max)
    }
}

/// One runner's sweeps over N: the kernel threads' or uthread's.
struct Sweeper<'a> {
    ctx: &'a Ctx<'a>,
    what: &'a str,
    per_worker: u64,
    cpus: &'a [usize],
    run: &'a dyn Fn(Option<usize>) -> Result<RunResult>,
}

impl Sweeper<'_> {
    /// Runs every N `reps` times, checking every total, appending to `rows` (one per N, created
    /// when missing). The reps are the outer loop, so a burst of load from other jobs hits one
    /// run of every N, not every run of a few N.
    fn sweep(&self, limits: &[Option<usize>], reps: usize, rows: &mut Vec<PerN>) -> Result<()> {
        let expect = closed_form_sum(WORKERS * self.per_worker);
        for &limit in limits {
            if !rows.iter().any(|r| r.n == x_of(limit)) {
                rows.push(PerN {
                    n: x_of(limit),
                    runs: Vec::new(),
                });
            }
        }
        for rep in 0..reps {
            self.ctx
                .step(&format!("throttle.{} rep {}/{reps}", self.what, rep + 1))?;
            for &limit in limits {
                self.ctx.cancel.check()?;
                let (mut r, idle) = with_idle(self.cpus, || (self.run)(limit))?;
                if r.total != expect {
                    return Err(Error::Fail(format!(
                        "{} N={}: total {} differs from the closed form {expect}",
                        self.what,
                        label(limit),
                        r.total
                    )));
                }
                r.idle_pct = idle;
                if let Some(row) = rows.iter_mut().find(|row| row.n == x_of(limit)) {
                    row.runs.push(r);
                }
            }
        }
        rows.sort_by_key(|r| r.n);
        Ok(())
    }

    /// The sweep, then the rule; close calls below the answer get more runs (with the fastest
    /// N, interleaved) before the rule settles them by their medians.
    fn to_answer(&self, limits: &[Option<usize>], reps: usize) -> Result<(Vec<PerN>, Best)> {
        let mut rows = Vec::new();
        self.sweep(limits, reps, &mut rows)?;
        let points = |rows: &[PerN]| -> Vec<(usize, Vec<f64>)> {
            rows.iter().map(|r| (r.n, r.seconds())).collect()
        };
        let none = || Error::Fail(format!("no {} throttle points", self.what));
        for _ in 0..EXTRA_ROUNDS {
            let best = best_concurrency(&points(&rows), false).ok_or_else(none)?;
            let close = best.close_calls();
            if close.is_empty() {
                break;
            }
            let again: Vec<Option<usize>> = close
                .iter()
                .chain(std::iter::once(&best.fastest_n))
                .map(|&n| (n != UNTHROTTLED_X).then_some(n))
                .collect();
            self.sweep(&again, EXTRA_REPS, &mut rows)?;
        }
        let best = best_concurrency(&points(&rows), true).ok_or_else(none)?;
        Ok((rows, best))
    }
}

const INFO: Info = Info {
    name: "throttle",
    study: &seeds::DELPHI_2010S,
    measures: "64 CPU-bound workers admitted N at a time: time and context switches per N, best N, pool size to use",
    rough_secs: [0.3, 8.0, 26.0],
};

impl Experiment for ThrottleExperiment {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let per_worker: u64 = ctx.mode.pick(20_000, 4_000_000, 10_000_000);
        // Mann-Whitney needs at least 4 runs a side to reach p < 0.05 at all.
        let reps = ctx.mode.pick(4, 7, 7);
        let kernel_limits: Vec<Option<usize>> = match ctx.mode {
            Mode::Tiny => vec![Some(1), Some(2), None],
            Mode::Quick => vec![Some(1), Some(2), Some(3), Some(4), Some(8), Some(64), None],
            Mode::Full => [1, 2, 3, 4, 5, 6, 8, 16, 32, 64]
                .into_iter()
                .map(Some)
                .chain([None])
                .collect(),
        };
        let uthread_limits: Vec<Option<usize>> = match ctx.mode {
            Mode::Tiny => vec![Some(1), None],
            Mode::Quick => vec![Some(1), Some(2), Some(3), Some(4), None],
            Mode::Full => kernel_limits.clone(),
        };
        let cpus = allowed_cpus();
        let carriers = cpus.len().max(1);

        let kernel_run = |l| run_kernel(l, per_worker);
        let (kernel, best) = Sweeper {
            ctx,
            what: "kernel",
            per_worker,
            cpus: &cpus,
            run: &kernel_run,
        }
        .to_answer(&kernel_limits, reps)?;
        let green_run = |l| run_uthread(l, per_worker, carriers);
        let (green, green_best) = Sweeper {
            ctx,
            what: "uthread",
            per_worker,
            cpus: &cpus,
            run: &green_run,
        }
        .to_answer(&uthread_limits, reps)?;

        let work = format!(
            "64 workers sum 1..{} ({} additions each), total checked against n(n+1)/2; time = \
             median of {reps} runs taken round-robin over N, switches = median",
            WORKERS * per_worker,
            per_worker
        );
        let series = |id: &str,
                      rows: &[PerN],
                      pick: &dyn Fn(&PerN) -> f64,
                      y_label: &str,
                      y_unit: Unit,
                      note: String,
                      hist| Series {
            id: id.into(),
            x_label: "N admitted at once (65 = unthrottled)".into(),
            x_unit: Unit::Threads,
            y_label: y_label.into(),
            y_unit,
            x: rows.iter().map(|r| r.n as f64).collect(),
            y: rows.iter().map(pick).collect(),
            note,
            historical: hist,
        };
        out.series.push(series(
            "throttle.kernel.time_vs_n",
            &kernel,
            &|r| median(&r.seconds()),
            "wall time",
            Unit::S,
            format!("kernel threads, unpinned; {work}; the study's curve is for 64 x 30,000,000"),
            Some(seeds::throttle_curve()),
        ));
        out.series.push(series(
            "throttle.kernel.voluntary_switches_vs_n",
            &kernel,
            &|r| r.voluntary(),
            "voluntary context switches (all workers)",
            Unit::Count,
            "getrusage(RUSAGE_THREAD) of each worker at its end, summed".into(),
            None,
        ));
        out.series.push(series(
            "throttle.kernel.involuntary_switches_vs_n",
            &kernel,
            &|r| r.involuntary(),
            "involuntary context switches (all workers)",
            Unit::Count,
            "getrusage(RUSAGE_THREAD) of each worker at its end, summed".into(),
            None,
        ));
        out.series.push(series(
            "throttle.kernel.idle_vs_n",
            &kernel,
            &|r| r.idlest_pct(),
            "idle share of the idlest allowed CPU during the run",
            Unit::Percent,
            "from /proc/stat (idle + iowait ticks of 10 ms) before and after each run; median \
             over the runs"
                .into(),
            None,
        ));
        out.series.push(series(
            "throttle.uthread.time_vs_n",
            &green,
            &|r| median(&r.seconds()),
            "wall time",
            Unit::S,
            format!(
                "{carriers} uthread carriers (one per allowed CPU, pinned) sharing one \
                 uthread::Throttle; {work}"
            ),
            Some(seeds::throttle_curve()),
        ));
        out.series.push(series(
            "throttle.uthread.switches_vs_n",
            &green,
            &|r| r.voluntary() + r.involuntary(),
            "green switches + carriers' kernel switches",
            Unit::Count,
            "uthread Stats::context_switches plus getrusage of the carriers".into(),
            None,
        ));

        let at = |n: usize| kernel.iter().find(|r| r.n == n);
        let med = |n: usize| at(n).map_or(f64::NAN, |r| median(&r.seconds()));
        let best_s = med(best.n);
        let unthrottled_s = med(UNTHROTTLED_X);
        let penalty = (unthrottled_s - best_s) / best_s * 100.0;

        let physical = physical_cores(&cpus).unwrap_or(cpus.len());
        let logical = cpus.len();
        let cgroup = ctx.env.cgroup_cpu_limit;
        // The pool a program should use is the plateau's start for threads the kernel places:
        // the same rule, so the advice is as steady as the answer.
        let pool = best.n;
        let cg = cgroup.map_or("no cgroup CPU quota".to_string(), |c| {
            format!("cgroup quota {c:.2} CPUs")
        });
        let rule = rule_text();
        let unpinned = Placement::Unpinned;

        out.add(Metric::single(
            "throttle.best_concurrency",
            Unit::Threads,
            best.n as f64,
            unpinned,
            format!(
                "{rule}; kernel threads, {reps} runs per N; fastest N = {} ({:.3} s median); \
                 {logical} allowed logical CPUs, {physical} physical cores, {cg}; the study found \
                 N = 2 = physical cores on a 2-core/4-thread i3",
                best.fastest_n,
                med(best.fastest_n)
            ),
        ));
        out.add(
            Metric::from_values(
                "throttle.penalty_pct",
                Unit::Percent,
                &[penalty],
                1,
                unpinned,
                format!(
                    "(unthrottled - best N) / best N, medians of kernel-thread runs: \
                     {unthrottled_s:.3} s vs {best_s:.3} s; the study: 67.55 s vs 55.44 s = +21.8%"
                ),
            )
            .ok_or_else(|| Error::Fail("no throttle penalty".into()))?
            .with_direction(Direction::LowerIsBetter),
        );
        out.add(Metric::single(
            "throttle.uthread.best_concurrency",
            Unit::Threads,
            green_best.n as f64,
            format!("{carriers} uthread carriers, pinned"),
            format!("{rule}; uthread carriers (one per allowed CPU, pinned) sharing one Throttle"),
        ));
        out.add(Metric::single(
            "throttle.recommended_pool",
            Unit::Threads,
            pool as f64,
            unpinned,
            format!(
                "the pool size for CPU-bound work whose threads the kernel places (no affinity, \
                 a program's default): throttle.best_concurrency, by the same rule; pinned one \
                 per CPU (as uthread's carriers) the plateau starts at N = {}; {physical} \
                 physical cores among {logical} allowed logical CPUs, {cg}",
                green_best.n
            ),
        ));

        // The table: today beside the study, with the evidence behind the best N.
        let study = seeds::throttle_curve();
        let mut table = Table::new(
            "throttle.per_n",
            "Semaphore throttle: time per N admitted at once",
            &[
                "N",
                "kernel s (median)",
                "spread",
                "vs fastest",
                "invol. switches",
                "idlest CPU idle",
                "uthread s",
                "study s (i3, 64x30M)",
            ],
        );
        table.note = format!(
            "{work}; vs fastest = the ratio of medians against N = {} with its 95% bootstrap \
             interval, and where that puts the N (plateau: interval wholly within +{:.0}%)",
            best.fastest_n,
            PLATEAU_MARGIN * 100.0
        );
        for r in &kernel {
            let g = green
                .iter()
                .find(|g| g.n == r.n)
                .map_or("-".to_string(), |g| format!("{:.3}", median(&g.seconds())));
            let h = study
                .x
                .iter()
                .position(|&x| x as usize == r.n)
                .map_or("-".to_string(), |i| format!("{:.2}", study.y[i]));
            let v = best.verdict(r.n);
            table.row(vec![
                label(if r.n == UNTHROTTLED_X {
                    None
                } else {
                    Some(r.n)
                }),
                format!("{:.3}", median(&r.seconds())),
                spread_text(&r.seconds()),
                v.map_or("-".to_string(), |v| {
                    if v.n == best.fastest_n {
                        "fastest".to_string()
                    } else {
                        verdict_text(v)
                    }
                }),
                format!("{:.0}", r.involuntary()),
                format!("{:.0}%", r.idlest_pct()),
                g,
                h,
            ]);
        }
        out.tables.push(table);

        out.conclusion = Some(conclusion(&ConclusionInput {
            best: &best,
            green_best: &green_best,
            kernel: &kernel,
            physical,
            logical,
            cg: &cg,
            penalty,
        }));
        Ok(())
    }
}

/// "+9.8% [+7.1%, +12.4%] slower": an N's ratio to the fastest, its interval, its standing.
fn verdict_text(v: &Verdict) -> String {
    let pct = |x: f64| (x - 1.0) * 100.0;
    format!(
        "{:+.1}% [{:+.1}%, {:+.1}%] {}",
        pct(v.ratio),
        pct(v.ci.0),
        pct(v.ci.1),
        match v.standing {
            Standing::Plateau => "plateau",
            Standing::Slower => "slower",
            Standing::Close => "close",
        }
    )
}

/// "±4.1%": half the IQR over the median.
fn spread_text(v: &[f64]) -> String {
    match crate::measure::stats::Summary::from_samples(v, 1) {
        Some(s) if s.median > 0.0 => format!("±{:.1}%", s.iqr() / 2.0 / s.median * 100.0),
        _ => "-".to_string(),
    }
}

struct ConclusionInput<'a> {
    best: &'a Best,
    green_best: &'a Best,
    kernel: &'a [PerN],
    physical: usize,
    logical: usize,
    cg: &'a str,
    penalty: f64,
}

/// What the run shows about N, and the pool size that follows from it.
fn conclusion(c: &ConclusionInput) -> String {
    let at = |n: usize| c.kernel.iter().find(|r| r.n == n);
    let best = c.best.n;
    let cores = c.physical;
    let mut s = format!(
        "The time stops falling at N = {best} here ({}). {} logical CPUs, {cores} physical \
         cores, {}. Running all 64 at once costs {:+.1}% against N = {best} (the study: +21.8% on \
         Windows 7). ",
        rule_text(),
        c.logical,
        c.cg,
        c.penalty
    );
    s.push_str(if c.penalty.abs() <= 5.0 {
        "Linux's fair scheduler shares the CPUs among 64 runnable threads with little loss, so the \
         throttle's value is fewer runnable threads (memory, latency for others), not speed. "
    } else {
        "A loss this large is not the fair scheduler's usual cost: check the load warnings. "
    });
    if best == cores {
        s.push_str(&format!(
            "As the study predicted, the time stops falling at N = cores: use a pool of {best} \
             thread(s) for CPU-bound work."
        ));
        return s;
    }
    let evidence = |n: usize| -> String {
        match (at(n), c.best.verdict(n)) {
            (Some(r), Some(v)) => format!(
                "at N = {n} the median was {:.3} s ({}, {} against the fastest), {:.0} \
                 involuntary switches, the idlest CPU idle {:.0}% of the run",
                median(&r.seconds()),
                spread_text(&r.seconds()),
                verdict_text(v),
                r.involuntary(),
                r.idlest_pct()
            ),
            _ => format!("N = {n} was not measured"),
        }
    };
    if best > cores {
        let one_invol = at(1).map_or(f64::NAN, |r| r.involuntary());
        s.push_str(&format!(
            "N = cores ({cores}) is measurably slower than N = {best}: {}; at N = 1, {one_invol:.0} \
             involuntary switches. Unpinned, an admitted worker is sometimes woken onto a CPU \
             that already runs one while another CPU idles until the load balancer moves it, so \
             one extra admitted thread keeps every CPU busy; uthread's carriers, pinned one per \
             CPU, reach their best at N = {} ({}). So: a pool of {best} thread(s) where the \
             kernel places them (a program's default), or {} pinned one per CPU.",
            evidence(cores),
            c.green_best.n,
            if c.green_best.n <= cores {
                "no extra thread needed when placement is fixed"
            } else {
                "even pinned carriers needed more here, so other load shares the CPUs"
            },
            c.green_best.n
        ));
    } else {
        s.push_str(&format!(
            "N = {best} is already as fast as N = cores ({cores}): {}. Fewer threads than cores \
             reaching the best means the CPUs were not all available to this run (another job, a \
             quota, or a host that shares the cores); the idle column shows how much each CPU \
             could give. Use a pool of {cores} thread(s) on a machine where the cores are yours, \
             and check the load warnings before trusting a smaller N.",
            evidence(cores)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_range_and_sum_to_the_closed_form() {
        let per = 1000;
        let total = (0..WORKERS).fold(0u64, |a, i| {
            let (lo, hi) = slice(i, per);
            a + sum_slice(lo, hi)
        });
        assert_eq!(total, closed_form_sum(WORKERS * per));
        assert_eq!(slice(0, per).0, 1);
        assert_eq!(slice(WORKERS - 1, per).1, WORKERS * per);
    }

    #[test]
    fn study_scale_fits_in_u64() {
        let n = WORKERS * 30_000_000;
        assert_eq!(closed_form_sum(n), 1_843_200_000_960_000_000);
    }

    fn runs(center: f64, spread: f64) -> Vec<f64> {
        [-2.0, -1.0, 0.0, 1.0, 2.0]
            .iter()
            .map(|k| center * (1.0 + k * spread))
            .collect()
    }

    #[test]
    fn best_is_the_start_of_the_plateau() {
        // N = 1 twice as slow; N = 2 within 1% of N = 3 (the fastest): the answer is 2.
        let pts = vec![
            (1, runs(2.0, 0.01)),
            (2, runs(1.01, 0.005)),
            (3, runs(1.0, 0.005)),
            (65, runs(1.05, 0.005)),
        ];
        let b = best_concurrency(&pts, false).unwrap();
        assert_eq!((b.n, b.fastest_n), (2, 3));
        // A clear 10% penalty at N = 2 with tight runs is slower: the answer is 3.
        let pts = vec![
            (1, runs(2.0, 0.01)),
            (2, runs(1.10, 0.005)),
            (3, runs(1.0, 0.005)),
            (4, runs(1.01, 0.005)),
        ];
        let b = best_concurrency(&pts, false).unwrap();
        assert_eq!(b.n, 3);
        assert_eq!(b.verdict(2).unwrap().standing, Standing::Slower);
        assert!(best_concurrency(&[], false).is_none());
    }

    #[test]
    fn the_answer_does_not_wander_along_the_plateau() {
        // A plateau from N = 3 on (within 2%), N = 2 12% slower, N = 1 twice: whichever plateau
        // N happens to be fastest, and however the noise falls, the answer is 3.
        for (seed, fastest) in [(1u64, 3usize), (2, 4), (3, 8), (4, 64)] {
            let jitter = |k: u64| 1.0 + ((seed * 31 + k * 17) % 7) as f64 * 0.002;
            let mut pts: Vec<(usize, Vec<f64>)> = vec![
                (1, runs(2.0 * jitter(1), 0.01)),
                (2, runs(1.12 * jitter(2), 0.01)),
            ];
            for n in [3usize, 4, 8, 64] {
                let base = if n == fastest { 1.0 } else { 1.015 };
                pts.push((n, runs(base * jitter(n as u64), 0.01)));
            }
            let b = best_concurrency(&pts, false).unwrap();
            assert_eq!(b.fastest_n, fastest);
            assert_eq!(b.n, 3, "fastest {fastest}: {:?}", b.verdicts);
        }
    }

    #[test]
    fn a_close_call_gets_more_runs_then_its_median_settles_it() {
        // N = 2 is 5% slower with a wide spread: its interval straddles the margin.
        let pts = vec![(2, runs(1.05, 0.04)), (3, runs(1.0, 0.04))];
        let b = best_concurrency(&pts, false).unwrap();
        assert_eq!(b.verdict(2).unwrap().standing, Standing::Close);
        assert_eq!(b.close_calls(), vec![2]);
        assert_eq!(b.n, 3);
        let settled = best_concurrency(&pts, true).unwrap();
        assert_eq!(settled.close_calls(), Vec::<usize>::new());
        // The median ratio, 1.05, is within the margin (<= 1.05): on the plateau.
        assert_eq!(settled.n, 2);
    }

    #[test]
    fn the_studys_curve_gives_the_studys_answer() {
        let c = seeds::throttle_curve();
        let pts: Vec<(usize, Vec<f64>)> =
            c.x.iter()
                .zip(&c.y)
                .map(|(&x, &y)| (x as usize, runs(y, 0.005)))
                .collect();
        assert_eq!(best_concurrency(&pts, true).unwrap().n, 2);
    }

    #[test]
    fn pool_recommendation() {
        assert_eq!(recommended_pool(4, None), 4);
        assert_eq!(recommended_pool(4, Some(1.5)), 1);
        assert_eq!(recommended_pool(4, Some(0.5)), 1);
    }

    #[test]
    fn both_runners_get_the_right_total() {
        let per = 5_000;
        let expect = closed_form_sum(WORKERS * per);
        assert_eq!(run_kernel(Some(2), per).unwrap().total, expect);
        assert_eq!(run_kernel(None, per).unwrap().total, expect);
        assert_eq!(run_uthread(Some(1), per, 2).unwrap().total, expect);
        assert_eq!(run_uthread(None, per, 2).unwrap().total, expect);
    }
}
