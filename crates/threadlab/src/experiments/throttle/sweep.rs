//! The two runners (kernel threads behind a counting semaphore, uthread behind its Throttle)
//! and the sweeps over N that repeat them round-robin.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::experiments::Ctx;
use crate::measure::spawn::{green_runtime, spawn_scoped};
use crate::measure::stats::median;
use crate::sys;

use super::plateau::{
    best_paired, rounds_text, Best, Run, Tagged, EXTRA_REPS, EXTRA_ROUNDS, SETTLE_ROUNDS,
};
use super::{closed_form_sum, slice, sum_slice, UNTHROTTLED_X, WORKERS};

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

pub(super) struct RunResult {
    seconds: f64,
    pub(super) total: u64,
    voluntary: u64,
    involuntary: u64,
    /// Share of the run the allowed CPUs spent idle, percent, one per CPU (from /proc/stat).
    idle_pct: Vec<f64>,
    /// The round that took it (0: the first sweep; k: the k-th round of extra runs).
    round: usize,
    /// Its repetition within the round: every N of the round ran once in it, one after another.
    rep: usize,
}

impl RunResult {
    /// A run of `seconds` from its workers' or carriers' (sum, voluntary, involuntary switches);
    /// the idle shares, the round and the repetition are added by the sweep.
    fn of(seconds: f64, parts: &[(u64, u64, u64)]) -> RunResult {
        RunResult {
            seconds,
            total: parts.iter().fold(0u64, |a, p| a.wrapping_add(p.0)),
            voluntary: parts.iter().map(|p| p.1).sum(),
            involuntary: parts.iter().map(|p| p.2).sum(),
            idle_pct: Vec::new(),
            round: 0,
            rep: 0,
        }
    }
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
pub(super) fn run_kernel(limit: Option<usize>, per_worker: u64) -> Result<RunResult> {
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
    Ok(RunResult::of(t.elapsed().as_secs_f64(), &parts))
}

/// The same on uthread: `carriers` OS threads each run a runtime with their share of the 64
/// green workers; all share one `uthread::Throttle`. Context switches: the carriers' kernel
/// switches (voluntary, involuntary); green switches are added to the voluntary count.
pub(super) fn run_uthread(
    limit: Option<usize>,
    per_worker: u64,
    carriers: usize,
) -> Result<RunResult> {
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
                        let rt = green_runtime(uthread::Runtime::new())?;
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
    Ok(RunResult::of(seconds, &parts))
}

fn x_of(limit: Option<usize>) -> usize {
    limit.unwrap_or(UNTHROTTLED_X)
}

pub(super) fn label(limit: Option<usize>) -> String {
    limit.map_or("unthrottled".to_string(), |n| n.to_string())
}

/// Per N: every run.
pub(super) struct PerN {
    pub(super) n: usize,
    runs: Vec<RunResult>,
}

impl PerN {
    pub(super) fn seconds(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.seconds).collect()
    }
    /// Every run with the round and repetition that took it, as the rule reads them.
    pub(super) fn tagged(&self) -> Vec<Run> {
        self.runs
            .iter()
            .map(|x| Run {
                round: x.round,
                rep: x.rep,
                seconds: x.seconds,
            })
            .collect()
    }
    /// The rounds its runs came from, in the order taken (`rounds_text`).
    pub(super) fn rounds_text(&self) -> String {
        rounds_text(self.runs.iter().map(|r| r.round))
    }
    fn median_of(&self, f: impl Fn(&RunResult) -> f64) -> f64 {
        median(&self.runs.iter().map(f).collect::<Vec<_>>())
    }
    pub(super) fn voluntary(&self) -> f64 {
        self.median_of(|r| r.voluntary as f64)
    }
    pub(super) fn involuntary(&self) -> f64 {
        self.median_of(|r| r.involuntary as f64)
    }
    /// The median idle share of the idlest CPU.
    pub(super) fn idlest_pct(&self) -> f64 {
        let cpus = self.runs.first().map_or(0, |r| r.idle_pct.len());
        (0..cpus)
            .map(|c| self.median_of(|r| r.idle_pct[c]))
            .fold(0.0, f64::max)
    }
}

/// One runner's sweeps over N: the kernel threads' or uthread's.
pub(super) struct Sweeper<'a> {
    pub(super) ctx: &'a Ctx<'a>,
    pub(super) what: &'a str,
    pub(super) per_worker: u64,
    pub(super) cpus: &'a [usize],
    pub(super) run: &'a dyn Fn(Option<usize>) -> Result<RunResult>,
}

impl Sweeper<'_> {
    /// Runs every N `reps` times, checking every total, appending to `rows` (one per N, created
    /// when missing). The reps are the outer loop, so a burst of load from other jobs hits one
    /// run of every N, not every run of a few N.
    fn sweep(
        &self,
        limits: &[Option<usize>],
        reps: usize,
        round: usize,
        rows: &mut Vec<PerN>,
    ) -> Result<()> {
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
                r.round = round;
                r.rep = rep;
                if let Some(row) = rows.iter_mut().find(|row| row.n == x_of(limit)) {
                    row.runs.push(r);
                }
            }
        }
        rows.sort_by_key(|r| r.n);
        Ok(())
    }

    /// The sweep, then the rule; close calls below the answer get more runs (with the fastest
    /// N, interleaved; `Best::to_run_again` says which, round by round), and one they leave
    /// undecided stays off the plateau. Each N is read against the fastest run by run, in the
    /// repetitions both took part in (`best_paired`).
    pub(super) fn to_answer(
        &self,
        limits: &[Option<usize>],
        reps: usize,
    ) -> Result<(Vec<PerN>, Best)> {
        let mut rows = Vec::new();
        self.sweep(limits, reps, 0, &mut rows)?;
        let points =
            |rows: &[PerN]| -> Vec<Tagged> { rows.iter().map(|r| (r.n, r.tagged())).collect() };
        let none = || Error::Fail(format!("no {} throttle points", self.what));
        for round in 1..=EXTRA_ROUNDS + SETTLE_ROUNDS {
            let best = best_paired(&points(&rows)).ok_or_else(none)?;
            let close = best.to_run_again(round);
            if close.is_empty() {
                break;
            }
            let again: Vec<Option<usize>> = close
                .iter()
                .chain(std::iter::once(&best.fastest_n))
                .map(|&n| (n != UNTHROTTLED_X).then_some(n))
                .collect();
            self.sweep(&again, EXTRA_REPS, round, &mut rows)?;
        }
        let best = best_paired(&points(&rows)).ok_or_else(none)?;
        Ok((rows, best))
    }
}
