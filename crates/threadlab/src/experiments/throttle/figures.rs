//! What a throttle run emits: the series per N, the metrics (best N, penalty, pool size) and the
//! table beside the study.

use crate::error::{Error, Result};
use crate::experiments::Outcome;
use crate::measure::placement::Placement;
use crate::measure::stats::median;
use crate::measure::units::{Direction, Unit};
use crate::results::ids::throttle as ids;
use crate::results::{HistoricalSeries, Metric, Series, Table};
use crate::seeds;

use super::plateau::{extra_runs_text, paired, rule_text, verdict_text, Best, Paired};
use super::sweep::{label, PerN};
use super::{PLATEAU_MARGIN, UNTHROTTLED_X, WORKERS};

/// Both sweeps' rows and answers, with what the notes say about the machine.
pub(super) struct Found {
    pub(super) kernel: Vec<PerN>,
    pub(super) best: Best,
    pub(super) green: Vec<PerN>,
    pub(super) green_best: Best,
    pub(super) reps: usize,
    pub(super) carriers: usize,
    pub(super) physical: usize,
    pub(super) logical: usize,
    /// The cgroup CPU quota in words.
    pub(super) cg: String,
    /// How the work and its timing were done, for notes.
    pub(super) work: String,
}

impl Found {
    /// The median kernel-thread time at N (NaN when N was not run).
    fn kernel_median(&self, n: usize) -> f64 {
        self.kernel
            .iter()
            .find(|r| r.n == n)
            .map_or(f64::NAN, |r| median(&r.seconds()))
    }

    /// How uthread's sweep ran, with the work: the notes of its series and per-N metrics.
    fn green_text(&self) -> String {
        format!(
            "{} uthread carriers (one per allowed CPU, pinned) sharing one uthread::Throttle; {}",
            self.carriers, self.work
        )
    }

    /// Where uthread's sweep ran: the placement of its metrics.
    fn green_placement(&self) -> String {
        format!("{} uthread carriers, pinned", self.carriers)
    }

    /// The unthrottled kernel threads over the best N's, run by run: each unthrottled run over
    /// the best N's run of the same repetition (both taken within a second, in the same phase
    /// of the host; the medians of all their runs mixed the phases of the best N's extra runs
    /// with the first sweep's). None when either was not run.
    pub(super) fn penalty(&self) -> Option<Paired> {
        let runs = |n: usize| self.kernel.iter().find(|r| r.n == n).map(PerN::tagged);
        paired(&runs(UNTHROTTLED_X)?, &runs(self.best.n)?)
    }
}

/// The note naming the work and how it was timed.
pub(super) fn work_text(per_worker: u64, reps: usize) -> String {
    format!(
        "64 workers sum 1..{} ({} additions each), total checked against n(n+1)/2; time = \
         median of an N's runs: {reps} taken round-robin over N, and a close call's N is run {}; \
         switches = median",
        WORKERS * per_worker,
        per_worker,
        extra_runs_text()
    )
}

/// One series over N: which rows, what it plots, and its note.
struct SeriesSpec<'a> {
    id: &'static str,
    rows: &'a [PerN],
    pick: fn(&PerN) -> f64,
    y_label: &'static str,
    y_unit: Unit,
    note: String,
    historical: Option<HistoricalSeries>,
}

const RUSAGE_NOTE: &str = "getrusage(RUSAGE_THREAD) of each worker at its end, summed";

pub(super) fn series(f: &Found, out: &mut Outcome) {
    let time = |r: &PerN| median(&r.seconds());
    let specs = [
        SeriesSpec {
            id: "throttle.kernel.time_vs_n",
            rows: &f.kernel,
            pick: time,
            y_label: "wall time",
            y_unit: Unit::S,
            note: format!(
                "kernel threads, unpinned; {}; the study's curve is for 64 x 30,000,000",
                f.work
            ),
            historical: Some(seeds::throttle_curve()),
        },
        SeriesSpec {
            id: "throttle.kernel.voluntary_switches_vs_n",
            rows: &f.kernel,
            pick: PerN::voluntary,
            y_label: "voluntary context switches (all workers)",
            y_unit: Unit::Count,
            note: RUSAGE_NOTE.into(),
            historical: None,
        },
        SeriesSpec {
            id: "throttle.kernel.involuntary_switches_vs_n",
            rows: &f.kernel,
            pick: PerN::involuntary,
            y_label: "involuntary context switches (all workers)",
            y_unit: Unit::Count,
            note: RUSAGE_NOTE.into(),
            historical: None,
        },
        SeriesSpec {
            id: "throttle.kernel.idle_vs_n",
            rows: &f.kernel,
            pick: PerN::idlest_pct,
            y_label: "idle share of the idlest allowed CPU during the run",
            y_unit: Unit::Percent,
            note: "from /proc/stat (idle + iowait ticks of 10 ms) before and after each run; \
                   median over the runs"
                .into(),
            historical: None,
        },
        SeriesSpec {
            id: "throttle.uthread.time_vs_n",
            rows: &f.green,
            pick: time,
            y_label: "wall time",
            y_unit: Unit::S,
            note: f.green_text(),
            historical: Some(seeds::throttle_curve()),
        },
        SeriesSpec {
            id: "throttle.uthread.switches_vs_n",
            rows: &f.green,
            pick: |r| r.voluntary() + r.involuntary(),
            y_label: "green switches + carriers' kernel switches",
            y_unit: Unit::Count,
            note: "uthread Stats::context_switches plus getrusage of the carriers".into(),
            historical: None,
        },
    ];
    for s in specs {
        out.series.push(Series {
            id: s.id.into(),
            x_label: "N admitted at once (65 = unthrottled)".into(),
            x_unit: Unit::Threads,
            y_label: s.y_label.into(),
            y_unit: s.y_unit,
            x: s.rows.iter().map(|r| r.n as f64).collect(),
            y: s.rows.iter().map(s.pick).collect(),
            note: s.note,
            historical: s.historical,
        });
    }
}

/// The best N (kernel threads and uthread), the unthrottled penalty and the pool size to use.
pub(super) fn metrics(f: &Found, penalty: Paired, out: &mut Outcome) -> Result<()> {
    let (best, green_best) = (&f.best, &f.green_best);
    let (reps, physical, logical, cg) = (f.reps, f.physical, f.logical, &f.cg);
    let best_s = f.kernel_median(best.n);
    let unthrottled_s = f.kernel_median(UNTHROTTLED_X);
    let pct = |x: f64| (x - 1.0) * 100.0;
    // The pool a program should use is the plateau's start for threads the kernel places:
    // the same rule, so the advice is as steady as the answer.
    let pool = best.n;
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
            f.kernel_median(best.fastest_n)
        ),
    ));
    out.add(
        Metric::from_values(
            "throttle.penalty_pct",
            Unit::Percent,
            &[pct(penalty.ratio)],
            1,
            unpinned,
            format!(
                "(unthrottled - best N) / best N of kernel threads, run by run: the median of \
                 each unthrottled run over the best N's run of the same repetition ({} \
                 repetitions), 95% interval [{:+.1}%, {:+.1}%]; the medians of all runs \
                 {unthrottled_s:.3} s vs {best_s:.3} s; the study: 67.55 s vs 55.44 s = +21.8%",
                penalty.pairs,
                pct(penalty.ci.0),
                pct(penalty.ci.1)
            ),
        )
        .ok_or_else(|| Error::Fail("no throttle penalty".into()))?
        .with_direction(Direction::LowerIsBetter),
    );
    out.add(Metric::single(
        "throttle.uthread.best_concurrency",
        Unit::Threads,
        green_best.n as f64,
        f.green_placement(),
        format!("{rule}; uthread carriers (one per allowed CPU, pinned) sharing one Throttle"),
    ));
    if pool == UNTHROTTLED_X {
        // "65 threads" is no pool size: every throttled N was slower than none at all.
        out.skip(
            "throttle.recommended_pool",
            format!(
                "no throttle was fastest in this run: {}, so this run gives no pool size (run \
                 again while the host is quiet)",
                ids::NO_THROTTLE_WHY
            ),
        );
        return Ok(());
    }
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
    Ok(())
}

/// Every run's time at each N, one metric per N and scheduler: the samples behind the curve,
/// the table and the best N, kept so that `compare` can test them and the rule can be read
/// again from the file.
pub(super) fn per_n_metrics(f: &Found, out: &mut Outcome) {
    let kernel = format!("kernel threads placed by the kernel; {}", f.work);
    let sweeps = [
        (
            ids::KERNEL,
            &f.kernel,
            Placement::Unpinned.to_string(),
            kernel,
        ),
        (ids::UTHREAD, &f.green, f.green_placement(), f.green_text()),
    ];
    for (scheduler, rows, placement, how) in sweeps {
        for r in rows {
            let n = (r.n != UNTHROTTLED_X).then_some(r.n);
            let id = ids::time_at(scheduler, &ids::at(n));
            let note = format!(
                "wall time of one run with {} admitted at once, each value one run (fresh \
                 threads and semaphore), in the order taken ({}); {how}",
                n.map_or("all 64".to_string(), |n| n.to_string()),
                r.rounds_text()
            );
            if let Some(m) = Metric::from_values(&id, Unit::S, &r.seconds(), 1, &placement, note) {
                out.add(m.with_direction(Direction::LowerIsBetter));
            }
        }
    }
}

/// The table: today beside the study, with the evidence behind the best N.
pub(super) fn table(f: &Found) -> Table {
    let best = &f.best;
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
        "{}; vs fastest = against N = {}, run by run (each run over the fastest's run of the \
         same repetition, taken within a second of it): the median of those ratios with its \
         95% sign-test interval, and where that puts the N (plateau: interval wholly within \
         +{:.0}%; not told apart: close, its median within the margin and its interval reaching \
         1, so on it too)",
        f.work,
        best.fastest_n,
        PLATEAU_MARGIN * 100.0
    );
    for r in &f.kernel {
        let g = f
            .green
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
                } else if (best.n..best.shown).contains(&v.n) && v.reaches_one() {
                    // Taken by the rule's exception: say so beside "close".
                    format!("{}, not told apart", verdict_text(v))
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
    table
}

/// "±4.1%": half the IQR over the median.
pub(super) fn spread_text(v: &[f64]) -> String {
    match crate::measure::stats::Summary::from_samples(v, 1) {
        Some(s) if s.median > 0.0 => format!("±{:.1}%", s.iqr() / 2.0 / s.median * 100.0),
        _ => "-".to_string(),
    }
}
