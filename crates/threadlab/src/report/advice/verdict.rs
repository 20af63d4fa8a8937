//! Each experiment's headline (the metric ids its verdict rests on, the default placement's
//! first) and its verdict (the conclusion in one or two sentences), built from its metrics.
//! An experiment without a rule of its own here (or whose figures are missing) gets its first
//! metrics with a historical figure and the first sentences of its conclusion.

use super::{best_design, first_sentences, median, readable, readable_ns, server};
use crate::measure::units::{fmt_fixed, fmt_more_or_less_time};
use crate::results::ids::server::{self as sid, stat};
use crate::results::ids::{
    self, coop, create, fairness, latency, ordering, preempt, priority, shm, switch, sync,
    throttle, unpinned, CROSS_CPU,
};
use crate::results::ExperimentResult;

/// Figures a short report shows of one experiment, at most.
pub const MAX_HEADLINE: usize = 4;

/// Longest verdict taken from a conclusion, in characters, before falling back to one sentence.
const MAX_VERDICT_CHARS: usize = 320;

pub fn of(e: &ExperimentResult) -> (Vec<String>, Option<String>) {
    let own = match e.name.as_str() {
        create::EXPERIMENT => create(e),
        sync::EXPERIMENT => sync(e),
        switch::EXPERIMENT => switch(e),
        shm::EXPERIMENT => shm(e),
        throttle::EXPERIMENT => throttle(e),
        fairness::EXPERIMENT => fairness(e),
        preempt::EXPERIMENT => preempt(e),
        priority::EXPERIMENT => priority(e),
        latency::EXPERIMENT => latency(e),
        coop::EXPERIMENT => coop(e),
        sid::EXPERIMENT => server_verdict(e),
        ordering::EXPERIMENT => ordering(e),
        _ => None,
    };
    let (mut headline, verdict) = match own {
        Some((ids, text)) => (ids, Some(text)),
        None => (Vec::new(), from_conclusion(e)),
    };
    headline.retain(|id| e.metric(id).is_some());
    headline.dedup();
    if headline.is_empty() {
        headline = fallback_headline(e);
    }
    headline.truncate(MAX_HEADLINE);
    (headline, verdict)
}

/// The first two sentences of the conclusion, or the first when two are too long.
fn from_conclusion(e: &ExperimentResult) -> Option<String> {
    let c = e.conclusion.as_deref()?;
    let two = first_sentences(c, 2);
    if two.chars().count() <= MAX_VERDICT_CHARS {
        return Some(two);
    }
    Some(first_sentences(c, 1))
}

/// The first metrics with a historical figure, else the first metrics.
fn fallback_headline(e: &ExperimentResult) -> Vec<String> {
    let then: Vec<String> = e
        .metrics
        .iter()
        .filter(|m| m.historical.is_some())
        .map(|m| m.id.clone())
        .take(MAX_HEADLINE)
        .collect();
    if !then.is_empty() {
        return then;
    }
    e.metrics.iter().take(3).map(|m| m.id.clone()).collect()
}

/// The first of `ids` that `e` has.
fn first_of(e: &ExperimentResult, ids: &[String]) -> Option<String> {
    ids.iter().find(|id| e.metric(id).is_some()).cloned()
}

fn shown(e: &ExperimentResult, id: &str) -> Option<String> {
    e.metric(id).map(readable)
}

type Verdict = Option<(Vec<String>, String)>;

fn create(e: &ExperimentResult) -> Verdict {
    let pinned = create::id(create::THREAD);
    let thread = first_of(e, &[unpinned(&pinned), pinned.clone()])?;
    let cost_ns = e
        .metric(&thread)?
        .unit
        .convert(median(e, &thread)?, crate::measure::units::Unit::Ns)?;
    let mut text = format!(
        "A kernel thread costs {} to create and join: a thread per task pays off for tasks of \
         well over {} (ten times that); below it, reuse threads from a pool.",
        shown(e, &thread)?,
        readable_ns(cost_ns * 10.0)
    );
    if let Some(g) = median(e, &ids::ratio(&create::id(create::GREEN), create::THREAD)) {
        text.push_str(&format!(
            " A green thread starts {}x cheaper still.",
            fmt_fixed(g, 0)
        ));
    }
    Some((
        vec![
            thread,
            pinned,
            unpinned(&create::id(create::FORK)),
            create::id(create::GREEN),
        ],
        text,
    ))
}

fn sync(e: &ExperimentResult) -> Verdict {
    let mutex = shown(e, &sync::id(sync::MUTEX))?;
    let contended = first_of(
        e,
        &[
            sync::contended(sync::MUTEX, ids::UNPINNED),
            sync::contended(sync::MUTEX, CROSS_CPU),
        ],
    );
    let wake_id = sync::id(sync::WAKE);
    let wake = first_of(e, &[unpinned(&wake_id), ids::placed(&wake_id, CROSS_CPU)]);
    let mut text = format!("An uncontended mutex pair costs {mutex}");
    if let Some(c) = contended.as_ref().and_then(|c| shown(e, c)) {
        text.push_str(&format!(", contended by two threads {c}"));
    }
    if let Some(w) = wake.as_ref().and_then(|w| shown(e, w)) {
        text.push_str(&format!(", and waking a blocked thread {w}"));
    }
    text.push_str(": locking is cheap until threads meet, and blocking costs the wake-up.");
    let mut headline = vec![sync::id(sync::MUTEX)];
    headline.extend(contended);
    headline.extend(wake);
    Some((headline, text))
}

fn switch(e: &ExperimentResult) -> Verdict {
    let futex = switch::id(switch::THREAD, switch::FUTEX);
    let thread_yield = switch::id(switch::THREAD, switch::YIELD);
    let green_yield = switch::id(switch::GREEN, switch::YIELD);
    let kernel = first_of(e, &[unpinned(&futex), futex, thread_yield.clone()])?;
    // The ratio divides the one-CPU yield: it sits beside that figure, not beside the default
    // placement's hand-off, which a race decides (a pair that spins on two CPUs or sleeps).
    let mut text = match (
        shown(e, &thread_yield),
        shown(e, &green_yield),
        median(
            e,
            &ids::ratio(&switch::subject(switch::GREEN), switch::THREAD),
        ),
    ) {
        (Some(k), Some(g), Some(x)) => format!(
            "On one CPU two kernel threads hand off in {k}, a user-level switch in {g} ({}x \
             less): switch in user space where tasks hand off constantly",
            fmt_fixed(x, 0)
        ),
        _ => format!(
            "Two kernel threads handing off cost {} per switch",
            shown(e, &kernel)?
        ),
    };
    if kernel != thread_yield {
        if let Some(m) = e.metric(&kernel) {
            text.push_str(&format!(
                ". Unpinned, a futex hand-off took {}",
                default_handoff_words(m)
            ));
        }
    }
    text.push('.');
    Some((
        vec![
            kernel,
            thread_yield,
            switch::id(switch::PROCESS, switch::YIELD),
            green_yield,
        ],
        text,
    ))
}

/// The default placement's hand-off in words: both regimes when its trials split, and when a
/// race decides it, that the figure of this run says which regime its threads fell into.
fn default_handoff_words(m: &crate::results::Metric) -> String {
    let v = |x: f64| match m.unit {
        crate::measure::units::Unit::Ns => readable_ns(x),
        u => crate::report::fmt_with_unit(x, u),
    };
    match &m.modes {
        Some(modes) if modes.len() == 2 => format!(
            "{} ({:.0}% of trials) or {}: a race decides whether a pair spins or sleeps",
            v(modes[0].median),
            modes[0].share * 100.0,
            v(modes[1].median)
        ),
        _ if crate::results::flag::has(m, crate::results::flag::Flag::Race) => format!(
            "{} here; a race decides whether a pair spins or sleeps, so runs differ",
            v(m.median)
        ),
        _ => v(m.median),
    }
}

fn shm(e: &ExperimentResult) -> Verdict {
    let t = shm::read(shm::THREAD, shm::LARGEST);
    let p = shm::read(shm::PROCESS, shm::LARGEST);
    let (tv, pv) = (median(e, &t)?, median(e, &p)?);
    let apart = (tv / pv - 1.0).abs() * 100.0;
    let text = if apart <= 10.0 {
        format!(
            "Threads and processes read shared memory at the same speed ({} and {} for 64 MiB, \
             {}% apart): choose between them for isolation and start-up cost, not for sharing.",
            shown(e, &t)?,
            shown(e, &p)?,
            fmt_fixed(apart, 0)
        )
    } else {
        format!(
            "Reading 64 MiB another party wrote took {} between threads and {} between \
             processes ({}% apart): here sharing is cheaper for the {}.",
            shown(e, &t)?,
            shown(e, &p)?,
            fmt_fixed(apart, 0),
            if tv < pv { "threads" } else { "processes" }
        )
    };
    Some((vec![t, p], text))
}

fn throttle(e: &ExperimentResult) -> Verdict {
    let figures = [
        throttle::id(throttle::RECOMMENDED_POOL),
        throttle::id(throttle::BEST_CONCURRENCY),
        throttle::id(throttle::PENALTY_PCT),
    ];
    if median(e, &figures[1]).is_some_and(throttle::is_unthrottled) {
        let text = format!(
            "No throttle was fastest in this run: {}, so it gives no pool size; run it again \
             when the load warnings are quiet.",
            throttle::NO_THROTTLE_WHY
        );
        return Some((figures[1..].to_vec(), text));
    }
    let pool = median(e, &figures[0])?;
    let mut text = format!("Size a pool of CPU-bound workers to {pool:.0} threads");
    if let (Some(best), Some(p)) = (median(e, &figures[1]), median(e, &figures[2])) {
        text.push_str(&format!(
            "; the time stopped falling at N = {best:.0}, and running all 64 at once took {} \
             than that (the study: 21.8% more)",
            fmt_more_or_less_time(p)
        ));
    }
    text.push('.');
    Some((figures.to_vec(), text))
}

/// At the most threads measured: the fastest lock and the fairest.
fn fairness(e: &ExperimentResult) -> Verdict {
    let mut best_t = 0usize;
    for m in &e.metrics {
        if let Some((_, t, fairness::THROUGHPUT)) = fairness::parse(&m.id) {
            if let Ok(t) = t.parse::<usize>() {
                best_t = best_t.max(t);
            }
        }
    }
    let threads = best_t.to_string();
    let at = |statistic: &str| -> Vec<&crate::results::Metric> {
        e.metrics
            .iter()
            .filter(|m| {
                fairness::parse(&m.id).is_some_and(|(_, t, s)| t == threads && s == statistic)
            })
            .collect()
    };
    let fastest = at(fairness::THROUGHPUT)
        .into_iter()
        .max_by(|a, b| a.median.total_cmp(&b.median))?;
    let fairest = at(fairness::JAIN)
        .into_iter()
        .max_by(|a, b| a.median.total_cmp(&b.median))?;
    let name = |id: &str| {
        fairness::parse(id)
            .map_or("?", |(lock, _, _)| lock)
            .to_string()
    };
    let text = format!(
        "With {best_t} threads contending, the fastest lock was {} ({}) and the fairest {} \
         (Jain {:.3}): for throughput take a barging lock, for turn-taking a FIFO one.",
        name(&fastest.id),
        readable(fastest),
        name(&fairest.id),
        fairest.median
    );
    Some((vec![fastest.id.clone(), fairest.id.clone()], text))
}

fn preempt(e: &ExperimentResult) -> Verdict {
    let figures = [
        preempt::id(preempt::POLL_FLAG),
        preempt::id(preempt::SIGNAL_ROUNDTRIP),
        preempt::id(preempt::LOSS_AT_10MS),
        preempt::id(preempt::GREEN_SWITCH),
    ];
    let flag = format!(
        "{} per check in a busy loop",
        e.metric(&figures[0])?.check_cost_words()
    );
    let signal = shown(e, &figures[1])?;
    let mut text = format!(
        "Checking a polled flag costs {flag} against {signal} for a signal round trip: poll \
         where the loop is yours, signal where it is not"
    );
    if let Some(loss) = e.metric(&figures[2]) {
        text.push_str(&format!(
            "; preemption at a 10 ms quantum costs a CPU-bound thread {}",
            loss.loss_words()
        ));
    }
    text.push('.');
    Some((figures.to_vec(), text))
}

fn priority(e: &ExperimentResult) -> Verdict {
    let shares = [
        priority::share(0, 5),
        priority::share(0, 10),
        priority::share(0, 19),
    ];
    let s5 = median(e, &shares[0])?;
    let mut text = format!("Beside a nice-5 thread a nice-0 thread got {s5:.1}% of a CPU");
    if let Some(s10) = median(e, &shares[1]) {
        text.push_str(&format!(", beside nice 10 {s10:.1}%"));
    }
    text.push_str(
        " (BeOS's 2x per step: 97% and 99.9%): nice leans, it does not exclude; use real-time \
         priority to exclude.",
    );
    Some((shares.to_vec(), text))
}

fn latency(e: &ExperimentResult) -> Verdict {
    let figures = [
        latency::longest_gap(latency::ANNOYING),
        latency::rt_longest_gap(latency::ANNOYING),
        latency::longest_gap(latency::ALONE),
        latency::wakeup_lateness(latency::ALONE),
    ];
    let normal = shown(e, &figures[0])?;
    let text = match shown(e, &figures[1]) {
        Some(rt) => format!(
            "Beside a CPU hog the longest gap was {normal} at normal priority and {rt} at \
             SCHED_FIFO: a thread that must answer promptly needs real-time priority."
        ),
        None => format!(
            "Beside a CPU hog the longest gap was {normal} at normal priority; real-time \
             priority was not measured here (see the skipped figures)."
        ),
    };
    Some((figures.to_vec(), text))
}

fn coop(e: &ExperimentResult) -> Verdict {
    let scores = [
        coop::score(coop::COOP_FG_333MS),
        coop::score(coop::PREEMPT_FG),
        coop::score(coop::COOP_FG_EVERY4096),
    ];
    let fg = median(e, &scores[0])?;
    let pre = median(e, &scores[1])?;
    let text = format!(
        "Against never yielding (1.00), yielding every 1/3 s scored {fg:.3} and preemption \
         {pre:.3} (the Mac: 1.014 and 1.075): choose preemptive threads for CPU-bound jobs, and \
         yield on time, not on a count."
    );
    Some((scores.to_vec(), text))
}

fn server_verdict(e: &ExperimentResult) -> Verdict {
    let designs = server::designs(e);
    let any_unpinned = designs
        .iter()
        .any(|d| server::design_metric(e, d, &unpinned(stat::RATE_P99)).is_some());
    let (cpu_id, p99_id) = if any_unpinned {
        (unpinned(stat::CPU_PER_REQUEST), unpinned(stat::RATE_P99))
    } else {
        (stat::CPU_PER_REQUEST.into(), stat::RATE_P99.into())
    };
    let short_1kib = sid::size_label(1024);
    let mut parts = Vec::new();
    let mut headline = Vec::new();
    if let Some((d, v, _, id)) = best_design(e, &designs, &p99_id, true, true) {
        parts.push(format!(
            "at the open-loop point {d} had the lowest p99 ({v})"
        ));
        headline.push(id);
    }
    if let Some((d, v, _, id)) = best_design(e, &designs, &cpu_id, true, true) {
        parts.push(format!("{d} spent the least CPU per request ({v})"));
        headline.push(id);
    }
    let short = sid::connection(false, false, &short_1kib, stat::MEAN);
    if let Some((d, v, _, id)) = best_design(e, &designs, &short, true, true) {
        parts.push(format!(
            "{d} answered a short 1 KiB connection fastest ({v})"
        ));
        headline.push(id);
    }
    if parts.is_empty() {
        return None;
    }
    headline.push(sid::fork_ratio(false, false, &short_1kib));
    let placed = if any_unpinned {
        "in the default placement, "
    } else {
        ""
    };
    let text = super::capitalise_first(&format!("{placed}{}.", parts.join("; ")));
    Some((headline, text))
}

/// The relaxed outcomes seen most often (the ones the verdict is about), at most three; the
/// verdict is the conclusion's, which names the CPU's memory model.
fn ordering(e: &ExperimentResult) -> Verdict {
    let mut rates: Vec<&crate::results::Metric> = e
        .metrics
        .iter()
        .filter(|m| ids::ends_in(&m.id, ordering::RELAXED_RATE))
        .collect();
    rates.sort_by(|a, b| b.median.total_cmp(&a.median));
    let headline = rates.iter().take(3).map(|m| m.id.clone()).collect();
    Some((headline, from_conclusion(e)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::ModeCluster;
    use crate::measure::units::Unit;
    use crate::results::{Metric, Status, RACE_FLAG};

    fn switch_run(handoff: Metric) -> ExperimentResult {
        let m = |id: &str, unit: Unit, v: f64| {
            Metric::from_values(id, unit, &[v, v], 1, "same_cpu(0)", "n").unwrap()
        };
        let mut e = ExperimentResult::new(switch::EXPERIMENT, Status::Ok);
        e.metrics = vec![
            m("switch.thread.yield", Unit::Ns, 1100.0),
            m("switch.green.yield", Unit::Ns, 2.75),
            m("switch.green.vs_thread", Unit::Ratio, 400.0),
            handoff,
        ];
        e
    }

    fn handoff(values: &[f64]) -> Metric {
        let mut h = Metric::from_values(
            "switch.thread.futex.unpinned",
            Unit::Ns,
            values,
            1,
            "unpinned",
            "n",
        )
        .unwrap();
        h.flags.push(RACE_FLAG.to_string());
        h
    }

    #[test]
    fn the_switch_ratio_sits_beside_the_figure_it_divides() {
        let (ids, text) = of(&switch_run(handoff(&[21_000.0, 22_000.0])));
        let text = text.unwrap();
        // The default placement's hand-off leads the headline; the ratio is the one-CPU yield's.
        assert_eq!(ids[0], "switch.thread.futex.unpinned");
        assert!(
            text.starts_with("On one CPU two kernel threads hand off in 1.10 us, a user-level switch in 2.75 ns (400x less)"),
            "{text}"
        );
        assert!(
            text.contains("took 21.50 us here; a race decides whether a pair spins or sleeps"),
            "{text}"
        );
    }

    #[test]
    fn a_bimodal_default_handoff_gives_both_regimes() {
        let mut h = handoff(&[88.0, 90.0, 10_700.0]);
        h.modes = Some(vec![
            ModeCluster {
                median: 89.0,
                share: 0.7,
                n: 7,
            },
            ModeCluster {
                median: 10_700.0,
                share: 0.3,
                n: 3,
            },
        ]);
        let text = of(&switch_run(h)).1.unwrap();
        assert!(
            text.contains("took 89.00 ns (70% of trials) or 10.70 us: a race decides"),
            "{text}"
        );
    }

    /// A throttle experiment holding these single figures.
    fn throttle_run(figures: &[(String, f64)]) -> ExperimentResult {
        let mut e = ExperimentResult::new(throttle::EXPERIMENT, Status::Ok);
        e.metrics = figures
            .iter()
            .map(|(id, v)| Metric::from_values(id, Unit::Count, &[*v], 1, "unpinned", "n").unwrap())
            .collect();
        e
    }

    #[test]
    fn running_everything_at_once_reads_as_more_or_less_time_never_a_negative_cost() {
        let run = |penalty: f64| {
            let e = throttle_run(&[
                (throttle::id(throttle::RECOMMENDED_POOL), 3.0),
                (throttle::id(throttle::BEST_CONCURRENCY), 3.0),
                (throttle::id(throttle::PENALTY_PCT), penalty),
            ]);
            of(&e).1.unwrap()
        };
        // A quick suite on a contended host: N = 64 finished 12.5% sooner than N = 3, which the
        // plateau rule had not told apart from it.
        let sooner = run(-12.5263);
        assert!(
            sooner.contains("running all 64 at once took 12.5% less time than that"),
            "{sooner}"
        );
        assert!(!sooner.contains("-12.5"), "{sooner}");
        let later = run(21.8);
        assert!(later.contains("took 21.8% more time than that"), "{later}");
    }

    #[test]
    fn no_throttle_fastest_gives_no_pool_size_of_65_threads() {
        // A run on a busy 2-vCPU guest: every throttled N slower than none (N = 3 +21.6%).
        let e = throttle_run(&[
            // As a file written before the pool was left out in this case holds it.
            (throttle::id(throttle::RECOMMENDED_POOL), 65.0),
            (throttle::id(throttle::BEST_CONCURRENCY), 65.0),
            (throttle::id(throttle::PENALTY_PCT), 0.0),
            (
                throttle::of(throttle::UTHREAD, throttle::BEST_CONCURRENCY),
                2.0,
            ),
        ]);
        let verdict = of(&e).1.unwrap();
        assert!(verdict.starts_with("No throttle was fastest"), "{verdict}");
        assert!(!verdict.contains("65"), "{verdict}");
        let r = crate::results::RunResults::new("quick", vec![e]);
        let answer = super::super::pool_size(&r).text;
        assert!(answer.starts_with("No throttle was fastest"), "{answer}");
        assert!(!answer.contains("65 threads"), "{answer}");
        assert!(answer.ends_with("it started at 2."), "{answer}");
    }
}
