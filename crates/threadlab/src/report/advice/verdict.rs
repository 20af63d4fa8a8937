//! Each experiment's headline (the metric ids its verdict rests on, the default placement's
//! first) and its verdict (the conclusion in one or two sentences), built from its metrics.
//! An experiment without a rule of its own here (or whose figures are missing) gets its first
//! metrics with a historical figure and the first sentences of its conclusion.

use super::{best_design, first_sentences, median, readable, readable_ns, server};
use crate::measure::units::fmt_fixed;
use crate::results::ExperimentResult;

/// Figures a short report shows of one experiment, at most.
pub const MAX_HEADLINE: usize = 4;

/// Longest verdict taken from a conclusion, in characters, before falling back to one sentence.
const MAX_VERDICT_CHARS: usize = 320;

pub fn of(e: &ExperimentResult) -> (Vec<String>, Option<String>) {
    let own = match e.name.as_str() {
        "create" => create(e),
        "sync" => sync(e),
        "switch" => switch(e),
        "shm" => shm(e),
        "throttle" => throttle(e),
        "fairness" => fairness(e),
        "preempt" => preempt(e),
        "priority" => priority(e),
        "latency" => latency(e),
        "coop" => coop(e),
        "server" => server_verdict(e),
        "ordering" => ordering(e),
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
fn first_of<'a>(e: &ExperimentResult, ids: &[&'a str]) -> Option<&'a str> {
    ids.iter().copied().find(|id| e.metric(id).is_some())
}

fn shown(e: &ExperimentResult, id: &str) -> Option<String> {
    e.metric(id).map(readable)
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

type Verdict = Option<(Vec<String>, String)>;

fn create(e: &ExperimentResult) -> Verdict {
    let thread = first_of(e, &["create.thread.unpinned", "create.thread"])?;
    let cost_ns = e
        .metric(thread)?
        .unit
        .convert(median(e, thread)?, crate::measure::units::Unit::Ns)?;
    let mut text = format!(
        "A kernel thread costs {} to create and join: a thread per task pays off for tasks of \
         well over {} (ten times that); below it, reuse threads from a pool.",
        shown(e, thread)?,
        readable_ns(cost_ns * 10.0)
    );
    if let Some(g) = median(e, "create.green.vs_thread") {
        text.push_str(&format!(
            " A green thread starts {}x cheaper still.",
            fmt_fixed(g, 0)
        ));
    }
    Some((
        ids(&[
            thread,
            "create.thread",
            "create.process.fork.unpinned",
            "create.green",
        ]),
        text,
    ))
}

fn sync(e: &ExperimentResult) -> Verdict {
    let mutex = shown(e, "sync.mutex")?;
    let contended = first_of(
        e,
        &[
            "sync.mutex.contended.unpinned",
            "sync.mutex.contended.cross_cpu",
        ],
    );
    let wake = first_of(e, &["sync.wake.unpinned", "sync.wake.cross_cpu"]);
    let mut text = format!("An uncontended mutex pair costs {mutex}");
    if let Some(c) = contended.and_then(|c| shown(e, c)) {
        text.push_str(&format!(", contended by two threads {c}"));
    }
    if let Some(w) = wake.and_then(|w| shown(e, w)) {
        text.push_str(&format!(", and waking a blocked thread {w}"));
    }
    text.push_str(": locking is cheap until threads meet, and blocking costs the wake-up.");
    let mut headline = ids(&["sync.mutex"]);
    headline.extend(contended.map(String::from));
    headline.extend(wake.map(String::from));
    Some((headline, text))
}

fn switch(e: &ExperimentResult) -> Verdict {
    let kernel = first_of(
        e,
        &[
            "switch.thread.futex.unpinned",
            "switch.thread.futex",
            "switch.thread.yield",
        ],
    )?;
    let mut text = format!(
        "Two kernel threads handing off cost {} per switch",
        shown(e, kernel)?
    );
    if let (Some(g), Some(x)) = (
        shown(e, "switch.green.yield"),
        median(e, "switch.green.vs_thread"),
    ) {
        text.push_str(&format!(
            "; a user-level switch {g}, {}x less: where tasks hand off constantly, switch in \
             user space",
            fmt_fixed(x, 0)
        ));
    }
    text.push('.');
    Some((
        ids(&[
            kernel,
            "switch.thread.yield",
            "switch.process.yield",
            "switch.green.yield",
        ]),
        text,
    ))
}

fn shm(e: &ExperimentResult) -> Verdict {
    let (t, p) = ("shm.thread.read.64mib", "shm.process.read.64mib");
    let (tv, pv) = (median(e, t)?, median(e, p)?);
    let apart = (tv / pv - 1.0).abs() * 100.0;
    let text = if apart <= 10.0 {
        format!(
            "Threads and processes read shared memory at the same speed ({} and {} for 64 MiB, \
             {}% apart): choose between them for isolation and start-up cost, not for sharing.",
            shown(e, t)?,
            shown(e, p)?,
            fmt_fixed(apart, 0)
        )
    } else {
        format!(
            "Reading 64 MiB another party wrote took {} between threads and {} between \
             processes ({}% apart): here sharing is cheaper for the {}.",
            shown(e, t)?,
            shown(e, p)?,
            fmt_fixed(apart, 0),
            if tv < pv { "threads" } else { "processes" }
        )
    };
    Some((ids(&[t, p]), text))
}

fn throttle(e: &ExperimentResult) -> Verdict {
    let pool = median(e, "throttle.recommended_pool")?;
    let mut text = format!("Size a pool of CPU-bound workers to {pool:.0} threads");
    if let (Some(best), Some(p)) = (
        median(e, "throttle.best_concurrency"),
        median(e, "throttle.penalty_pct"),
    ) {
        text.push_str(&format!(
            "; the time stopped falling at N = {best:.0}, and running all 64 at once cost \
             {p:+.1}% against it (the study: +21.8%)"
        ));
    }
    text.push('.');
    Some((
        ids(&[
            "throttle.recommended_pool",
            "throttle.best_concurrency",
            "throttle.penalty_pct",
        ]),
        text,
    ))
}

/// At the most threads measured: the fastest lock and the fairest.
fn fairness(e: &ExperimentResult) -> Verdict {
    let mut best_t = 0usize;
    for m in &e.metrics {
        let p: Vec<&str> = m.id.split('.').collect();
        if p.len() == 4 && p[3] == "throughput" {
            if let Ok(t) = p[2].trim_start_matches('t').parse::<usize>() {
                best_t = best_t.max(t);
            }
        }
    }
    let at = |suffix: &str| -> Vec<&crate::results::Metric> {
        let tail = format!(".t{best_t}.{suffix}");
        e.metrics.iter().filter(|m| m.id.ends_with(&tail)).collect()
    };
    let fastest = at("throughput")
        .into_iter()
        .max_by(|a, b| a.median.total_cmp(&b.median))?;
    let fairest = at("jain")
        .into_iter()
        .max_by(|a, b| a.median.total_cmp(&b.median))?;
    let name = |id: &str| id.split('.').nth(1).unwrap_or("?").to_string();
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
    let flag = shown(e, "preempt.poll_flag")?;
    let signal = shown(e, "preempt.signal_roundtrip")?;
    let mut text = format!(
        "Checking a polled flag costs {flag} per check against {signal} for a signal round trip: \
         poll where the loop is yours, signal where it is not"
    );
    if let Some(loss) = median(e, "preempt.loss_at_10ms") {
        text.push_str(&format!(
            "; preemption at a 10 ms quantum costs a CPU-bound thread {loss:.2}% of its \
             throughput"
        ));
    }
    text.push('.');
    Some((
        ids(&[
            "preempt.poll_flag",
            "preempt.signal_roundtrip",
            "preempt.loss_at_10ms",
            "preempt.green_switch",
        ]),
        text,
    ))
}

fn priority(e: &ExperimentResult) -> Verdict {
    let s5 = median(e, "priority.share.0_vs_5")?;
    let mut text = format!("Beside a nice-5 thread a nice-0 thread got {s5:.1}% of a CPU");
    if let Some(s10) = median(e, "priority.share.0_vs_10") {
        text.push_str(&format!(", beside nice 10 {s10:.1}%"));
    }
    text.push_str(
        " (BeOS's 2x per step: 97% and 99.9%): nice leans, it does not exclude; use real-time \
         priority to exclude.",
    );
    Some((
        ids(&[
            "priority.share.0_vs_5",
            "priority.share.0_vs_10",
            "priority.share.0_vs_19",
        ]),
        text,
    ))
}

fn latency(e: &ExperimentResult) -> Verdict {
    let normal = shown(e, "latency.annoying.longest_gap")?;
    let text = match shown(e, "latency.rt.annoying.longest_gap") {
        Some(rt) => format!(
            "Beside a CPU hog the longest gap was {normal} at normal priority and {rt} at \
             SCHED_FIFO: a thread that must answer promptly needs real-time priority."
        ),
        None => format!(
            "Beside a CPU hog the longest gap was {normal} at normal priority; real-time \
             priority was not measured here (see the skipped figures)."
        ),
    };
    Some((
        ids(&[
            "latency.annoying.longest_gap",
            "latency.rt.annoying.longest_gap",
            "latency.alone.longest_gap",
            "latency.wakeup.alone.lateness",
        ]),
        text,
    ))
}

fn coop(e: &ExperimentResult) -> Verdict {
    let fg = median(e, "coop.score.coop_fg_333ms")?;
    let pre = median(e, "coop.score.preempt_fg")?;
    let text = format!(
        "Against never yielding (1.00), yielding every 1/3 s scored {fg:.3} and preemption \
         {pre:.3} (the Mac: 1.014 and 1.075): choose preemptive threads for CPU-bound jobs, and \
         yield on time, not on a count."
    );
    Some((
        ids(&[
            "coop.score.coop_fg_333ms",
            "coop.score.preempt_fg",
            "coop.score.coop_fg_every4096",
        ]),
        text,
    ))
}

fn server_verdict(e: &ExperimentResult) -> Verdict {
    let designs = server::designs(e);
    let unpinned = designs
        .iter()
        .any(|d| server::design_metric(e, d, "rate.p99.unpinned").is_some());
    let (cpu_id, p99_id) = if unpinned {
        ("cpu_per_request.unpinned", "rate.p99.unpinned")
    } else {
        ("cpu_per_request", "rate.p99")
    };
    let mut parts = Vec::new();
    let mut headline = Vec::new();
    if let Some((d, v, _, id)) = best_design(e, &designs, p99_id, true, true) {
        parts.push(format!(
            "at the open-loop point {d} had the lowest p99 ({v})"
        ));
        headline.push(id);
    }
    if let Some((d, v, _, id)) = best_design(e, &designs, cpu_id, true, true) {
        parts.push(format!("{d} spent the least CPU per request ({v})"));
        headline.push(id);
    }
    if let Some((d, v, _, id)) = best_design(e, &designs, "short.1kib.mean", true, true) {
        parts.push(format!(
            "{d} answered a short 1 KiB connection fastest ({v})"
        ));
        headline.push(id);
    }
    if parts.is_empty() {
        return None;
    }
    headline.push("server.fork_per_client.vs_thread.short.1kib".into());
    let placed = if unpinned {
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
        .filter(|m| m.id.ends_with(".relaxed_rate"))
        .collect();
    rates.sort_by(|a, b| b.median.total_cmp(&a.median));
    let headline = rates.iter().take(3).map(|m| m.id.clone()).collect();
    Some((headline, from_conclusion(e)?))
}
