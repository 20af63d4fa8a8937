//! "What to choose on this machine": one answer per question (pool size, lock, server design,
//! priority, cooperative or preemptive, green or kernel threads), each computed once from the
//! run's metrics and tables, naming the metric ids it rests on. Every report renders these
//! answers as they are (the terminal summary, the HTML page); none computes its own. A question
//! whose experiment is not in the file says which run would answer it.
//!
//! `verdict.rs` does the same for each experiment: the figures it rests on (its headline) and
//! its conclusion in a sentence or two.

mod verdict;

use std::fmt::Write;

use crate::measure::units::fmt_more_or_less_time;
use crate::report::server_facts as server;
use crate::report::{fmt_value, fmt_with_unit, readable_ns};
use crate::results::flag::Flag;
use crate::results::ids::server::{self as sid, stat};
use crate::results::ids::{
    self, coop, create, fairness, latency, preempt, priority, switch, sync, throttle, unpinned,
};
use crate::results::{Advice, ExperimentResult, RunResults, Status};

/// Fills what a results file carries beside its metrics: each experiment's headline and
/// verdict, and the run's advice. What is already there is kept, so a file read later shows
/// what its run showed; a file written before these existed gets them from its metrics.
pub fn annotate(r: &mut RunResults) {
    for e in &mut r.experiments {
        if e.status != Status::Ok || (!e.headline.is_empty() && e.verdict.is_some()) {
            continue;
        }
        let (headline, verdict) = verdict::of(e);
        if e.headline.is_empty() {
            e.headline = headline;
        }
        if e.verdict.is_none() {
            e.verdict = verdict;
        }
    }
    if r.advice.is_empty() && !r.experiments.is_empty() {
        r.advice = build(r);
    }
}

/// The answers, in a fixed order of questions.
pub fn build(r: &RunResults) -> Vec<Advice> {
    [
        pool_size(r),
        lock(r),
        server_design(r),
        priority(r),
        cooperative_or_preemptive(r),
        green_or_kernel(r),
    ]
    .into_iter()
    .map(|a| Advice {
        topic: a.topic.to_string(),
        claim: a.text,
        rests_on: a.rests_on,
        condition: a.condition,
    })
    .collect()
}

/// One answer while it is built: the ids are collected as the text quotes them.
struct Answer {
    topic: &'static str,
    text: String,
    rests_on: Vec<String>,
    condition: Option<String>,
}

fn experiment<'a>(r: &'a RunResults, name: &str) -> Option<&'a ExperimentResult> {
    r.experiments
        .iter()
        .find(|e| e.name == name && e.status == Status::Ok)
}

fn median(e: &ExperimentResult, id: &str) -> Option<f64> {
    e.metric(id).map(|m| m.median)
}

fn with_unit(e: &ExperimentResult, id: &str) -> Option<String> {
    e.metric(id).map(|m| fmt_with_unit(m.median, m.unit))
}

/// Those of `ids` that `e` has: what an answer that quotes each figure when present quoted.
fn present(e: Option<&ExperimentResult>, ids: &[String]) -> Vec<String> {
    let Some(e) = e else {
        return Vec::new();
    };
    ids.iter()
        .filter(|id| e.metric(id).is_some())
        .cloned()
        .collect()
}

/// The first `n` sentences of a text (a sentence ends at ". " before a capital letter).
fn first_sentences(text: &str, n: usize) -> String {
    let mut count = 0;
    for (i, w) in text.as_bytes().windows(3).enumerate() {
        if w[0] == b'.' && w[1] == b' ' && w[2].is_ascii_uppercase() {
            count += 1;
            if count == n {
                // i + 1 is just after an ASCII '.', so a char boundary.
                return text[..i + 1].to_string();
            }
        }
    }
    text.to_string()
}

fn not_measured(topic: &'static str, run: &str) -> Answer {
    Answer {
        topic,
        text: format!("Not measured in this file: run 'threadlab run {run}' to answer it."),
        rests_on: Vec::new(),
        condition: None,
    }
}

fn pool_size(r: &RunResults) -> Answer {
    let topic = "Pool size";
    let Some(e) = experiment(r, throttle::EXPERIMENT) else {
        return not_measured(topic, throttle::EXPERIMENT);
    };
    let mut text = String::new();
    let best = median(e, &throttle::id(throttle::BEST_CONCURRENCY));
    // A file written before the pool was left out when no throttle won holds 65 there.
    let pool = median(e, &throttle::id(throttle::RECOMMENDED_POOL))
        .filter(|&p| !throttle::is_unthrottled(p));
    if let Some(pool) = pool {
        let _ = write!(
            text,
            "Size a pool of CPU-bound workers to {pool:.0} threads where the kernel places them \
             (a program's default: where the time stopped falling, by the throttle's plateau \
             rule)."
        );
    }
    if best.is_some_and(throttle::is_unthrottled) {
        let _ = write!(
            text,
            "No throttle was fastest in this run: {}, the throttle's own lock and hand-offs \
             costing more than extra runnable threads (as on a 2-vCPU guest while its host was \
             busy). No pool size follows from it: run 'threadlab run throttle' again when the \
             load warnings are quiet (the study: best at its 2 physical cores, +21.8% \
             unthrottled).",
            throttle::NO_THROTTLE_WHY
        );
    } else if let Some(best) = best {
        let _ = write!(
            text,
            " The plateau of N admitted at once started at {best:.0}"
        );
        if let Some(p) = median(e, &throttle::id(throttle::PENALTY_PCT)) {
            let _ = write!(
                text,
                "; running all 64 workers at once took {} than that",
                fmt_more_or_less_time(p)
            );
        }
        text.push_str(" (the study: best at its 2 physical cores, +21.8% unthrottled).");
    }
    if let Some(g) = median(
        e,
        &throttle::of(throttle::UTHREAD, throttle::BEST_CONCURRENCY),
    ) {
        if throttle::is_unthrottled(g) {
            text.push_str(" Pinned one per CPU (uthread's carriers), no throttle was fastest too.");
        } else {
            let _ = write!(
                text,
                " Pinned one per CPU (uthread's carriers) it started at {g:.0}."
            );
        }
    }
    if text.is_empty() {
        return not_measured(topic, throttle::EXPERIMENT);
    }
    Answer {
        topic,
        text,
        rests_on: present(
            Some(e),
            &[
                throttle::id(throttle::RECOMMENDED_POOL),
                throttle::id(throttle::BEST_CONCURRENCY),
                throttle::id(throttle::PENALTY_PCT),
                throttle::of(throttle::UTHREAD, throttle::BEST_CONCURRENCY),
            ],
        ),
        condition: None,
    }
}

/// One lock at one thread count: medians of its runs.
struct LockFigure {
    id: String,
    lock: String,
    throughput: f64,
    jain: Option<f64>,
}

/// The lock with the highest and the fairest median at T threads.
fn lock(r: &RunResults) -> Answer {
    let topic = "Lock";
    let Some(e) = experiment(r, fairness::EXPERIMENT) else {
        return not_measured(topic, fairness::EXPERIMENT);
    };
    // fairness.<lock>.t<T>.throughput, grouped by T.
    let mut by_t: Vec<(usize, Vec<LockFigure>)> = Vec::new();
    for m in &e.metrics {
        let Some((lock, threads, fairness::THROUGHPUT)) = fairness::parse(&m.id) else {
            continue;
        };
        let Ok(t) = threads.parse::<usize>() else {
            continue;
        };
        let figure = LockFigure {
            id: m.id.clone(),
            lock: lock.to_string(),
            throughput: m.median,
            jain: median(e, &fairness::id(lock, threads, fairness::JAIN)),
        };
        match by_t.iter_mut().find(|x| x.0 == t) {
            Some(x) => x.1.push(figure),
            None => by_t.push((t, vec![figure])),
        }
    }
    by_t.sort_by_key(|x| x.0);
    if by_t.is_empty() {
        return not_measured(topic, fairness::EXPERIMENT);
    }
    let cpus = r.environment.allowed_cpus.len().max(1);
    let mut parts = Vec::new();
    let mut ids = Vec::new();
    for (t, locks) in &by_t {
        let fastest = locks
            .iter()
            .max_by(|a, b| a.throughput.total_cmp(&b.throughput));
        let fairest = locks
            .iter()
            .filter(|l| l.jain.is_some())
            .max_by(|a, b| a.jain.unwrap_or(0.0).total_cmp(&b.jain.unwrap_or(0.0)));
        if let (Some(f), Some(j)) = (fastest, fairest) {
            ids.push(f.id.clone());
            ids.push(fairness::id(&j.lock, t, fairness::JAIN));
            parts.push(format!(
                "with {t} threads on {cpus} CPU{}, the fastest was {} ({}), the fairest {} (Jain {:.3})",
                if cpus == 1 { "" } else { "s" },
                f.lock,
                fmt_rate(f.throughput),
                j.lock,
                j.jain.unwrap_or(0.0)
            ));
        }
    }
    let mut text = format!(
        "For throughput take a barging lock, for turn-taking a FIFO one; here {}.",
        parts.join("; ")
    );
    if let Some(s) =
        experiment(r, sync::EXPERIMENT).and_then(|s| with_unit(s, &sync::id(sync::MUTEX)))
    {
        let _ = write!(
            text,
            " Uncontended, a pthread mutex pair costs {s}: locking is cheap until threads meet."
        );
    }
    Answer {
        topic,
        text,
        rests_on: ids
            .into_iter()
            .chain(present(
                experiment(r, sync::EXPERIMENT),
                &[sync::id(sync::MUTEX)],
            ))
            .collect(),
        condition: None,
    }
}

/// "8.9 M/s", "527 k/s".
fn fmt_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.1} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.0} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.0}/s")
    }
}

fn server_design(r: &RunResults) -> Answer {
    let topic = "Server design";
    if let Some(e) = experiment(r, sid::EXPERIMENT) {
        if let Some(a) = server_answer(e) {
            return a;
        }
        let text = e
            .conclusion
            .as_deref()
            .map(|c| first_sentences(c, 3))
            .unwrap_or_else(|| "See the server section's figures.".into());
        return Answer {
            topic,
            text: format!("From the server experiment: {text}"),
            rests_on: e.headline.clone(),
            condition: None,
        };
    }
    let Some(c) = experiment(r, create::EXPERIMENT) else {
        return not_measured(topic, sid::EXPERIMENT);
    };
    let (thread, fork) = (create::id(create::THREAD), create::id(create::FORK));
    let fork_vs_thread = ids::ratio(&fork, create::THREAD);
    // What a program gets: the kernel places the new thread or child, unless the file
    // predates the default-placement rows.
    let (Some(thread_cost), Some(fork_cost)) = (
        with_unit(c, &unpinned(&thread)).or_else(|| with_unit(c, &thread)),
        with_unit(c, &unpinned(&fork)).or_else(|| with_unit(c, &fork)),
    ) else {
        return not_measured(topic, sid::EXPERIMENT);
    };
    let ratio = median(c, &fork_vs_thread)
        .map(|x| format!(" ({}x)", crate::measure::units::fmt_fixed(x, 0)))
        .unwrap_or_default();
    Answer {
        topic,
        text: format!(
            "No server experiment in this file. What the start-up costs say: a thread per \
             connection costs {thread_cost} to start, a process per connection {fork_cost}{ratio}; a pool \
             pays neither per request. The 1999 study found thread-per-client only ~15% faster \
             than fork-per-client for short connections (4.0 vs 4.7 ms for 1 KB) and no \
             difference for long ones, where the network dominates."
        ),
        rests_on: present(
            Some(c),
            &[
                unpinned(&thread),
                thread.clone(),
                unpinned(&fork),
                fork.clone(),
                fork_vs_thread.clone(),
            ],
        ),
        condition: Some("no server experiment in the file: start-up costs only".into()),
    }
}

fn priority(r: &RunResults) -> Answer {
    let topic = "Priority";
    let p = experiment(r, priority::EXPERIMENT);
    let l = experiment(r, latency::EXPERIMENT);
    let (share5, share10) = (priority::share(0, 5), priority::share(0, 10));
    let (gap, rt_gap) = (
        latency::longest_gap(latency::ANNOYING),
        latency::rt_longest_gap(latency::ANNOYING),
    );
    if p.is_none() && l.is_none() {
        return not_measured(topic, "priority latency");
    }
    let mut text = String::new();
    if let Some(p) = p {
        if let Some(s) = median(p, &share5) {
            let _ = write!(
                text,
                "Nice is a gentle weight here: beside a nice-5 thread a nice-0 thread got {s:.1}% \
                 of a CPU"
            );
            if let Some(s10) = median(p, &share10) {
                let _ = write!(text, ", beside nice 10 {s10:.1}%");
            }
            text.push_str(
                " (BeOS's 2x per step would give 97% and 99.9%): use nice to lean, not to \
                 exclude.",
            );
        }
    }
    if let Some(l) = l {
        let normal = with_unit(l, &gap);
        let rt = with_unit(l, &rt_gap);
        match (normal, rt) {
            (Some(n), Some(rt)) => {
                let _ = write!(
                    text,
                    " For a thread that must answer promptly beside CPU hogs, real-time priority: \
                     its longest gap beside a spinner was {rt} at SCHED_FIFO against {n} at \
                     normal priority."
                );
            }
            (Some(n), None) => {
                let why = l
                    .skipped_metrics
                    .iter()
                    .find(|s| latency::is_rt(&s.id))
                    .map(|s| format!(" ({})", s.reason))
                    .unwrap_or_default();
                let _ = write!(
                    text,
                    " Beside a spinner the longest gap was {n}; real-time priority was not \
                     measured{why}."
                );
            }
            _ => {}
        }
    }
    if text.is_empty() {
        return not_measured(topic, "priority latency");
    }
    Answer {
        topic,
        text: text.trim_start().to_string(),
        rests_on: present(p, &[share5, share10])
            .into_iter()
            .chain(present(l, &[gap, rt_gap]))
            .collect(),
        condition: None,
    }
}

fn cooperative_or_preemptive(r: &RunResults) -> Answer {
    let topic = "Cooperative or preemptive";
    let c = experiment(r, coop::EXPERIMENT);
    let p = experiment(r, preempt::EXPERIMENT);
    let scores = [
        coop::score(coop::COOP_FG_333MS),
        coop::score(coop::PREEMPT_FG),
        coop::score(coop::COOP_FG_EVERY4096),
    ];
    let loss = preempt::id(preempt::LOSS_AT_10MS);
    if c.is_none() && p.is_none() {
        return not_measured(topic, "coop preempt");
    }
    let mut text = String::new();
    if let Some(c) = c {
        let fg = median(c, &scores[0]);
        let pre = median(c, &scores[1]);
        let count = median(c, &scores[2]);
        if let (Some(fg), Some(pre)) = (fg, pre) {
            let _ = write!(
                text,
                "On uthread, yielding every 1/3 s scores {fg:.3} and preemption {pre:.3} (1.00 = \
                 never yielding; the Mac: 1.014 and 1.075)"
            );
            if let Some(n) = count {
                let _ = write!(text, "; yielding on a count (every 4096 iterations) {n:.3}");
            }
            text.push('.');
        }
    }
    if let Some(p) = p {
        if let Some(loss) = p.metric(&loss) {
            let _ = write!(
                text,
                " Preemption at a 10 ms quantum costs a CPU-bound thread {}.",
                loss.loss_words()
            );
        }
    }
    if text.is_empty() {
        return not_measured(topic, "coop preempt");
    }
    text.push_str(
        " Choose preemptive threads for CPU-bound jobs; if a job yields cooperatively, it should \
         yield on time, not on a count.",
    );
    Answer {
        topic,
        text: text.trim_start().to_string(),
        rests_on: present(c, &scores)
            .into_iter()
            .chain(present(p, &[loss]))
            .collect(),
        condition: None,
    }
}

fn green_or_kernel(r: &RunResults) -> Answer {
    let topic = "Green or kernel threads";
    let create_ratio = ids::ratio(&create::id(create::GREEN), create::THREAD);
    let switch_ratio = ids::ratio(&switch::subject(switch::GREEN), switch::THREAD);
    let create = experiment(r, create::EXPERIMENT);
    let switch = experiment(r, switch::EXPERIMENT);
    let c = create.and_then(|e| median(e, &create_ratio));
    let s = switch.and_then(|e| median(e, &switch_ratio));
    if c.is_none() && s.is_none() {
        return not_measured(topic, "create switch");
    }
    let mut facts = Vec::new();
    if let Some(c) = c {
        facts.push(format!("starts {}x cheaper", fmt_value(c)));
    }
    if let Some(s) = s {
        facts.push(format!("switches {}x cheaper", fmt_value(s)));
    }
    Answer {
        topic,
        text: format!(
            "A green thread (uthread) {} than a kernel thread here. Use green threads for many \
             short tasks or many waiting connections; kernel threads (one carrier per core) for \
             parallel CPU work and for calls that block outside the runtime.",
            facts.join(" and ")
        ),
        rests_on: present(create, &[create_ratio])
            .into_iter()
            .chain(present(switch, &[switch_ratio]))
            .collect(),
        condition: None,
    }
}

/// The design with the lowest (or highest) positive median of `server.<design>.<suffix>`,
/// preferring figures without flags when `prefer_clean`; with the chosen one's flags.
fn best_design(
    e: &ExperimentResult,
    designs: &[String],
    suffix: &str,
    lowest: bool,
    prefer_clean: bool,
) -> Option<(String, String, Vec<String>, String)> {
    let all: Vec<(&String, &crate::results::Metric)> = designs
        .iter()
        .filter_map(|d| server::design_metric(e, d, suffix).map(|m| (d, m)))
        .filter(|(_, m)| m.median.is_finite() && m.median > 0.0)
        .collect();
    let clean: Vec<&(&String, &crate::results::Metric)> =
        all.iter().filter(|(_, m)| m.flags.is_empty()).collect();
    let pool: Vec<&(&String, &crate::results::Metric)> = if clean.is_empty() || !prefer_clean {
        all.iter().collect()
    } else {
        clean
    };
    let pick = pool.into_iter().min_by(|a, b| {
        let o = a.1.median.total_cmp(&b.1.median);
        if lowest {
            o
        } else {
            o.reverse()
        }
    })?;
    Some((
        pick.0.clone(),
        readable(pick.1),
        pick.1.flags.clone(),
        pick.1.id.clone(),
    ))
}

/// A metric's median in a unit that keeps it short: 1176.6 us reads 1.18 ms.
fn readable(m: &crate::results::Metric) -> String {
    use crate::measure::units::Unit;
    if !m.unit.is_time() {
        return fmt_with_unit(m.median, m.unit);
    }
    match m.unit.convert(m.median, Unit::Ns) {
        Some(ns) => readable_ns(ns),
        None => fmt_with_unit(m.median, m.unit),
    }
}

/// ", flagged a, b" after a chosen figure that carries flags.
fn flagged(f: &[String]) -> String {
    if f.is_empty() {
        String::new()
    } else {
        format!(", flagged {}", f.join(", "))
    }
}

/// Many long connections: the design with the least CPU per request and the one with the
/// lowest open-loop p99, in the default placement when the file has it (what a program gets),
/// with what pinning would change.
fn many_connections(
    e: &ExperimentResult,
    designs: &[String],
    rests_on: &mut Vec<String>,
) -> Option<String> {
    let any_unpinned = designs
        .iter()
        .any(|d| server::design_metric(e, d, &unpinned(stat::CPU_PER_REQUEST)).is_some());
    let (cpu_id, p99_id, placed) = if any_unpinned {
        (
            unpinned(stat::CPU_PER_REQUEST),
            unpinned(stat::RATE_P99),
            " in the default placement",
        )
    } else {
        (
            stat::CPU_PER_REQUEST.to_string(),
            stat::RATE_P99.to_string(),
            "",
        )
    };
    let pinned = |d: &str, suffix: &str| {
        server::design_metric(e, d, suffix)
            .filter(|_| any_unpinned)
            .map_or(String::new(), |m| format!(", pinned {}", readable(m)))
    };
    let cpu = best_design(e, designs, &cpu_id, true, true);
    let p99 = best_design(e, designs, &p99_id, true, true);
    match (cpu, p99) {
        (Some((dc, vc, fc, ic)), Some((dl, vl, fl, il))) => {
            rests_on.push(ic);
            rests_on.push(il);
            Some(format!(
                "for many long connections{placed}, {dc} spent the least server CPU per request \
                 ({vc}{}{}; CPU per request) and {dl} had the lowest p99 at the open-loop point \
                 ({vl}{}{}; latency spectrum)",
                pinned(&dc, stat::CPU_PER_REQUEST),
                flagged(&fc),
                pinned(&dl, stat::RATE_P99),
                flagged(&fl)
            ))
        }
        (Some((dc, vc, fc, ic)), None) => {
            rests_on.push(ic);
            Some(format!(
                "for many long connections{placed}, {dc} spent the least server CPU per request \
                 ({vc}{}{}; CPU per request)",
                pinned(&dc, stat::CPU_PER_REQUEST),
                flagged(&fc)
            ))
        }
        _ => None,
    }
}

/// What the server section's figures say, each clause naming the chart it comes from.
fn server_answer(e: &ExperimentResult) -> Option<Answer> {
    let designs = server::designs(e);
    let mut parts: Vec<String> = Vec::new();
    let mut rests_on: Vec<String> = Vec::new();
    let short_1kib = sid::size_label(1024);
    let short = sid::connection(false, false, &short_1kib, stat::MEAN);
    if let Some((d, v, f, id)) = best_design(e, &designs, &short, true, true) {
        let fork_ratio = sid::fork_ratio(false, false, &short_1kib);
        rests_on.push(id);
        rests_on.extend(present(Some(e), std::slice::from_ref(&fork_ratio)));
        let ratio = median(e, &fork_ratio)
            .map(|x| {
                format!(
                    "; forking per client costs {x:.2}x a thread per client here against 1.18x \
                     in 1999"
                )
            })
            .unwrap_or_default();
        parts.push(format!(
            "For a few short connections (the study's pattern), {d} answered a 1 KiB connection \
             fastest ({v}{}){ratio} (Fig. 4 redrawn; fork over thread)",
            flagged(&f)
        ));
    }
    if let Some(text) = many_connections(e, &designs, &mut rests_on) {
        parts.push(text);
    }
    if let Some(text) = server::pinning_effect(e, &designs) {
        parts.push(text);
    }
    if let Some((d, v, f, id)) = best_design(e, &designs, stat::BLOCK_P99, true, true) {
        rests_on.push(id);
        parts.push(format!(
            "when every request blocks the server, the lowest p99 was {d}'s ({v}{}; blocking \
             work): it waits without stalling its other connections",
            flagged(&f)
        ));
    }
    if let Some((d, v, f, id)) = best_design(e, &designs, stat::RSS_PER_CONNECTION, true, true) {
        rests_on.push(id);
        parts.push(format!(
            "the least memory per connection held: {d} ({v}{}; memory per connection)",
            flagged(&f)
        ));
    }
    if let Some(text) = server::limits_summary(e, &designs) {
        parts.push(text);
    }
    // A capacity flagged client_bound is a floor (every rate passed): higher, not doubtful.
    if let Some((d, v, f, id)) = best_design(e, &designs, stat::CAPACITY, false, false) {
        rests_on.push(id);
        let floor = f.iter().any(|x| x == Flag::ClientBound.name());
        parts.push(format!(
            "the highest capacity at the latency target: {d} ({}{v}{}; capacity)",
            if floor { "at least " } else { "" },
            flagged(&f)
        ));
    }
    if parts.is_empty() {
        return None;
    }
    // Said only where a figure the answer rests on carries a flag: otherwise nothing flagged
    // was chosen, and the sentence would only lengthen the answer.
    let chosen_flagged = rests_on
        .iter()
        .any(|id| e.metric(id).is_some_and(|m| !m.flags.is_empty()));
    let mut text = format!("{}.", capitalise_first(&parts.join("; ")));
    if chosen_flagged {
        text.push_str(
            " A flagged figure is chosen only where every design's is flagged, and is named \
             with its flags (see what to know first).",
        );
    }
    Some(Answer {
        topic: "Server design",
        text,
        rests_on,
        condition: None,
    })
}

fn capitalise_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
