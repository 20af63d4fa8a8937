//! `throttle`: the Delphi semaphore throttle (2010s). 64 workers each sum a slice of
//! 1 + 2 + ... + 64·C; a semaphore admits N of them at once. Where does the time stop falling,
//! what does running all 64 at once cost, and what pool size should CPU-bound work use here?
//!
//! Run with kernel threads (a counting semaphore on a mutex and condition variable) and with
//! uthread: one carrier per allowed CPU, the 64 green workers spread over them, all sharing one
//! `uthread::Throttle`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Mode, Outcome};
use crate::measure::placement::{allowed_cpus, physical_cores, Placement};
use crate::results::{Metric, Series};
use crate::seeds;
use crate::sys;

pub struct Throttle;

pub const WORKERS: u64 = 64;

/// N = this value stands for "unthrottled" in series (as in the study's curve: 65).
pub const UNTHROTTLED_X: usize = 65;

/// A best N within this fraction of the fastest time counts as reaching it: the smallest such N
/// is the answer (times for N >= cores are equal within noise on a busy machine).
pub const BEST_TOLERANCE: f64 = 0.03;

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

/// The smallest N whose time is within BEST_TOLERANCE of the fastest, from (N, seconds) pairs.
pub fn best_concurrency(points: &[(usize, f64)]) -> Option<(usize, f64)> {
    let fastest = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let mut sorted = points.to_vec();
    sorted.sort_by_key(|p| p.0);
    sorted
        .into_iter()
        .find(|p| p.1 <= fastest * (1.0 + BEST_TOLERANCE))
}

/// Pool size to recommend for CPU-bound work: physical cores among the CPUs we may use, capped
/// by a cgroup CPU quota.
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
}

/// 64 kernel threads, at most `limit` summing at once (None: unthrottled).
fn run_kernel(limit: Option<usize>, per_worker: u64) -> Result<RunResult> {
    let sem = KernelSemaphore {
        permits: Mutex::new(limit.unwrap_or(0)),
        freed: Condvar::new(),
    };
    let t = Instant::now();
    let parts: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|i| {
                let sem = &sem;
                s.spawn(move || {
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
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join())
            .collect::<std::result::Result<_, _>>()
    })
    .map_err(|_| Error::Fail("a throttle worker panicked".into()))?;
    let seconds = t.elapsed().as_secs_f64();
    Ok(RunResult {
        seconds,
        total: parts.iter().fold(0u64, |a, p| a.wrapping_add(p.0)),
        voluntary: parts.iter().map(|p| p.1).sum(),
        involuntary: parts.iter().map(|p| p.2).sum(),
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
                s.spawn(move || -> Result<(u64, u64, u64)> {
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
                    let sum =
                        sum.ok_or_else(|| Error::Fail("a uthread worker failed to run".into()))?;
                    Ok((sum, v + green, iv))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Fail("a uthread carrier panicked".into())))
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
    })
}

fn x_of(limit: Option<usize>) -> usize {
    limit.unwrap_or(UNTHROTTLED_X)
}

fn label(limit: Option<usize>) -> String {
    limit.map_or("unthrottled".to_string(), |n| n.to_string())
}

/// Fastest time and median switch counts over `reps` runs, checking every total. The fastest
/// run is the one least disturbed by other jobs (lmbench's choice); it estimates what N itself
/// costs. The reps are
/// the outer loop, so a burst of load from other jobs hits one run of every N, not every run of
/// a few N.
fn sweep(
    ctx: &Ctx,
    what: &str,
    limits: &[Option<usize>],
    reps: usize,
    per_worker: u64,
    run: &dyn Fn(Option<usize>) -> Result<RunResult>,
) -> Result<Vec<(usize, f64, f64, f64)>> {
    let expect = closed_form_sum(WORKERS * per_worker);
    let mut runs: Vec<Vec<RunResult>> = limits.iter().map(|_| Vec::new()).collect();
    for rep in 0..reps {
        ctx.step(&format!("throttle.{what} rep {}/{reps}", rep + 1))?;
        for (i, &limit) in limits.iter().enumerate() {
            ctx.cancel.check()?;
            let r = run(limit)?;
            if r.total != expect {
                return Err(Error::Fail(format!(
                    "{what} N={}: total {} differs from the closed form {expect}",
                    label(limit),
                    r.total
                )));
            }
            runs[i].push(r);
        }
    }
    Ok(limits
        .iter()
        .zip(runs)
        .map(|(&limit, rs)| {
            let secs: Vec<f64> = rs.iter().map(|r| r.seconds).collect();
            let mut vol: Vec<f64> = rs.iter().map(|r| r.voluntary as f64).collect();
            let mut invol: Vec<f64> = rs.iter().map(|r| r.involuntary as f64).collect();
            (
                x_of(limit),
                secs.iter().copied().fold(f64::INFINITY, f64::min),
                median(&mut vol),
                median(&mut invol),
            )
        })
        .collect())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    crate::measure::stats::quantile_sorted(v, 0.5)
}

impl Experiment for Throttle {
    fn name(&self) -> &'static str {
        "throttle"
    }
    fn study(&self) -> &'static str {
        seeds::DELPHI_2010S
    }
    fn measures(&self) -> &'static str {
        "64 CPU-bound workers admitted N at a time: time and context switches per N, best N, pool size to use"
    }
    fn rough_duration(&self, mode: Mode) -> Duration {
        mode.pick(
            Duration::from_millis(300),
            Duration::from_secs(6),
            Duration::from_secs(120),
        )
    }

    fn run(&self, ctx: &Ctx) -> Result<Outcome> {
        let per_worker: u64 = ctx.mode.pick(20_000, 4_000_000, 30_000_000);
        let reps = ctx.mode.pick(1, 5, 3);
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
            Mode::Quick => vec![Some(1), Some(2), Some(4), None],
            Mode::Full => kernel_limits.clone(),
        };
        let carriers = allowed_cpus().len().max(1);
        let mut out = Outcome::default();

        let kernel = sweep(ctx, "kernel", &kernel_limits, reps, per_worker, &|l| {
            run_kernel(l, per_worker)
        })?;
        let green = sweep(ctx, "uthread", &uthread_limits, reps, per_worker, &|l| {
            run_uthread(l, per_worker, carriers)
        })?;

        let work = format!(
            "64 workers sum 1..{} ({} additions each), total checked against n(n+1)/2; time = fastest of {reps} interleaved runs, switches = median",
            WORKERS * per_worker,
            per_worker
        );
        let series = |id: &str,
                      rows: &[(usize, f64, f64, f64)],
                      pick: fn(&(usize, f64, f64, f64)) -> f64,
                      y_label: &str,
                      y_unit: &str,
                      note: String,
                      hist| Series {
            id: id.into(),
            x_label: "N admitted at once (65 = unthrottled)".into(),
            x_unit: "threads".into(),
            y_label: y_label.into(),
            y_unit: y_unit.into(),
            x: rows.iter().map(|r| r.0 as f64).collect(),
            y: rows.iter().map(pick).collect(),
            note,
            historical: hist,
        };
        out.series.push(series(
            "throttle.kernel.time_vs_n",
            &kernel,
            |r| r.1,
            "wall time",
            "s",
            format!("kernel threads, unpinned; {work}; the study's curve is for 64 x 30,000,000"),
            Some(seeds::throttle_curve()),
        ));
        out.series.push(series(
            "throttle.kernel.voluntary_switches_vs_n",
            &kernel,
            |r| r.2,
            "voluntary context switches (all workers)",
            "count",
            "getrusage(RUSAGE_THREAD) of each worker at its end, summed".into(),
            None,
        ));
        out.series.push(series(
            "throttle.kernel.involuntary_switches_vs_n",
            &kernel,
            |r| r.3,
            "involuntary context switches (all workers)",
            "count",
            "getrusage(RUSAGE_THREAD) of each worker at its end, summed".into(),
            None,
        ));
        out.series.push(series(
            "throttle.uthread.time_vs_n",
            &green,
            |r| r.1,
            "wall time",
            "s",
            format!("{carriers} uthread carriers (one per allowed CPU) sharing one uthread::Throttle; {work}"),
            Some(seeds::throttle_curve()),
        ));
        out.series.push(series(
            "throttle.uthread.switches_vs_n",
            &green,
            |r| r.2 + r.3,
            "green switches + carriers' kernel switches",
            "count",
            "uthread Stats::context_switches plus getrusage of the carriers".into(),
            None,
        ));

        let points: Vec<(usize, f64)> = kernel.iter().map(|r| (r.0, r.1)).collect();
        let points_invol: Vec<(usize, f64)> = kernel.iter().map(|r| (r.0, r.3)).collect();
        let (best_n, best_s) =
            best_concurrency(&points).ok_or_else(|| Error::Fail("no throttle points".into()))?;
        let unthrottled_s = points
            .iter()
            .find(|p| p.0 == UNTHROTTLED_X)
            .map_or(f64::NAN, |p| p.1);
        let penalty = (unthrottled_s - best_s) / best_s * 100.0;
        let green_points: Vec<(usize, f64)> = green.iter().map(|r| (r.0, r.1)).collect();
        let green_best = best_concurrency(&green_points).map_or(0, |p| p.0);

        let environment = ctx.env;
        let physical = physical_cores(&allowed_cpus()).unwrap_or_else(|| allowed_cpus().len());
        let pool = recommended_pool(physical, environment.cgroup_cpu_limit);
        let logical = allowed_cpus().len();
        let cg = environment
            .cgroup_cpu_limit
            .map_or("no cgroup CPU quota".to_string(), |c| {
                format!("cgroup quota {c:.2} CPUs")
            });

        // With P CPUs free, N = 1 should take ~P times as long as the best; much less means
        // other jobs held the CPUs and the best N found here says little about the machine.
        let n1_s = points.iter().find(|p| p.0 == 1).map_or(f64::NAN, |p| p.1);
        let speedup = n1_s / best_s;
        let expected_speedup = physical.min(logical) as f64;
        let disturbed = expected_speedup >= 2.0 && speedup < 0.75 * expected_speedup;
        let mut best_metric = Metric::single(
            "throttle.best_concurrency",
            "threads",
            best_n as f64,
            &Placement::Unpinned.to_string(),
            &format!(
                "smallest N (65 = unthrottled) within {:.0}% of the fastest kernel-thread time; \
                 {logical} allowed logical CPUs, {physical} physical cores, {cg}; the study found \
                 N = 2 = physical cores on a 2-core/4-thread i3",
                BEST_TOLERANCE * 100.0
            ),
        )
        .with_historical(Some(crate::results::Historical {
            value: 2.0,
            unit: "threads".into(),
            source: seeds::DELPHI_2010S.into(),
        }));
        let disturbed_text = format!(
            "DISTURBED: N = 1 took only {speedup:.2}x the best time where ~{expected_speedup:.0}x \
             was expected, so other jobs held the CPUs and the best N is not this machine's"
        );
        if disturbed {
            best_metric.noisy = true;
            best_metric.note.push_str(&format!("; {disturbed_text}"));
        }
        out.metrics.push(best_metric);
        out.metrics.push(Metric::single(
            "throttle.penalty_pct",
            "%",
            penalty,
            &Placement::Unpinned.to_string(),
            &format!(
                "(unthrottled - best N) / best N, kernel threads: {unthrottled_s:.3} s vs {best_s:.3} s; \
                 the study: 67.55 s vs 55.44 s = +21.8%"
            ),
        ).with_historical(Some(crate::results::Historical {
            value: (67.55 - 55.44) / 55.44 * 100.0,
            unit: "%".into(),
            source: seeds::DELPHI_2010S.into(),
        })));
        out.metrics.push(Metric::single(
            "throttle.uthread.best_concurrency",
            "threads",
            green_best as f64,
            &format!("{carriers} uthread carriers"),
            "smallest N within 3% of the fastest, uthread carriers sharing one Throttle",
        ));
        out.metrics.push(Metric::single(
            "throttle.recommended_pool",
            "threads",
            pool as f64,
            &Placement::Unpinned.to_string(),
            &format!(
                "physical cores among the allowed CPUs ({physical}), capped by the cgroup quota \
                 ({cg}); {logical} logical CPUs allowed"
            ),
        ));

        // The table: today beside the study.
        let study = seeds::throttle_curve();
        let mut table = String::from(
            "  N            kernel s   vol.sw   invol.sw   uthread s   study s (i3, 64x30M)\n",
        );
        for r in &kernel {
            let g = green
                .iter()
                .find(|g| g.0 == r.0)
                .map_or("-".to_string(), |g| format!("{:.3}", g.1));
            let h = study
                .x
                .iter()
                .position(|&x| x as usize == r.0)
                .map_or("-".to_string(), |i| format!("{:.2}", study.y[i]));
            let n = if r.0 == UNTHROTTLED_X {
                "unthrottled".to_string()
            } else {
                r.0.to_string()
            };
            table.push_str(&format!(
                "  {n:<12} {:>8.3} {:>8.0} {:>10.0}   {g:>9}   {h:>9}\n",
                r.1, r.2, r.3
            ));
        }
        let verdict = if penalty.abs() <= 5.0 {
            "Linux's fair scheduler shares the CPUs among 64 runnable threads with little loss, so \
             the throttle's value is fewer runnable threads (memory, latency for others), not speed."
        } else {
            "A loss this large was not expected from the fair scheduler: check the load warnings \
             (another job competing for the CPUs during some runs inflates single points)."
        };
        // At N = cores, an unpinned admitted worker is sometimes woken onto a CPU that already
        // runs one while the other CPU idles until the load balancer moves it: that shows as
        // involuntary switches well above N = 1's, and uthread's pinned carriers avoid it.
        let invol_at = |n: usize| points_invol.iter().find(|p| p.0 == n).map(|p| p.1);
        let placement = match (invol_at(pool), invol_at(1)) {
            (Some(at_cores), Some(at_one)) if best_n > pool && at_cores > 1.5 * at_one => format!(
                " Kernel threads need one more than the cores here: at N = {pool} the workers saw \
                 {at_cores:.0} involuntary switches against {at_one:.0} at N = 1, i.e. an admitted \
                 worker was often placed on a CPU that was already busy while the other CPU \
                 waited for the load balancer; uthread's carriers, pinned one per CPU, reach \
                 their best at N = {green_best}."
            ),
            _ => String::new(),
        };
        out.conclusion = Some(format!(
            "Semaphore throttle ({work}):\n{table}{}The time stops falling at N = {best_n} here ({logical} logical CPUs, {physical} \
             physical cores, {cg}); running all 64 at once costs {penalty:+.1}% against that (the \
             study: +21.8% on Windows 7). {verdict}{placement} For CPU-bound work use a pool of \
             {pool} thread(s){}.",
            if disturbed {
                format!("{disturbed_text}. ")
            } else {
                String::new()
            },
            if best_n > pool && !disturbed {
                format!(
                    "; unpinned kernel threads did best with {best_n} admitted here, so admit one \
                     more than cores when the pool's threads are not pinned"
                )
            } else {
                String::new()
            }
        ));
        Ok(out)
    }
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

    #[test]
    fn best_is_smallest_within_tolerance() {
        let pts = [(1, 2.0), (2, 1.01), (3, 1.0), (65, 1.05)];
        assert_eq!(best_concurrency(&pts).unwrap().0, 2);
        assert_eq!(best_concurrency(&seeds_points()).unwrap().0, 2);
    }

    fn seeds_points() -> Vec<(usize, f64)> {
        let c = seeds::throttle_curve();
        c.x.iter()
            .zip(&c.y)
            .map(|(&x, &y)| (x as usize, y))
            .collect()
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
