//! The conclusion: where the time stops falling, what running all 64 costs, and the pool size
//! that follows.

use crate::measure::stats::median;
use crate::measure::units::fmt_more_or_less_time;

use super::figures::{spread_text, Found};
use super::plateau::{rule_text, verdict_text, Paired};
use super::UNTHROTTLED_X;

/// What the run shows about N, and the pool size that follows from it.
pub(super) fn conclusion(c: &Found, run_by_run: Paired) -> String {
    let penalty = (run_by_run.ratio - 1.0) * 100.0;
    let best = c.best.n;
    if best == UNTHROTTLED_X {
        return no_throttle_fastest(c);
    }
    let at = |n: usize| c.kernel.iter().find(|r| r.n == n);
    let cores = c.physical;
    let mut s = format!(
        "The time stops falling at N = {best} here ({}). {} logical CPUs, {cores} physical \
         cores, {}. Running all 64 at once took {} than N = {best}, run by run (95% interval \
         {:+.1}% to {:+.1}%; the study: 21.8% more on Windows 7). ",
        rule_text(),
        c.logical,
        c.cg,
        fmt_more_or_less_time(penalty),
        (run_by_run.ci.0 - 1.0) * 100.0,
        (run_by_run.ci.1 - 1.0) * 100.0
    );
    s.push_str(if penalty.abs() <= 5.0 {
        "Linux's fair scheduler shares the CPUs among 64 runnable threads with little loss, so the \
         throttle's value is fewer runnable threads (memory, latency for others), not speed. "
    } else if penalty > 0.0 {
        "A loss this large is not the fair scheduler's usual cost: check the load warnings. "
    } else {
        "The plateau rule did not tell this N apart from the fastest, so read the sooner finish \
         as this run's noise within the plateau, not as a gain from running everything at once: \
         check the load warnings. "
    });
    if best == cores {
        s.push_str(&format!(
            "As the study predicted, the time stops falling at N = cores: use a pool of {best} \
             thread(s) for CPU-bound work."
        ));
        return s;
    }
    if best > cores {
        let one_invol = at(1).map_or(f64::NAN, |r| r.involuntary());
        s.push_str(&format!(
            "N = cores ({cores}) is measurably slower than N = {best}: {}; at N = 1, {one_invol:.0} \
             involuntary switches. Unpinned, an admitted worker is sometimes woken onto a CPU \
             that already runs one while another CPU idles until the load balancer moves it, so \
             one extra admitted thread keeps every CPU busy; uthread's carriers, pinned one per \
             CPU, reach their best at N = {} ({}). So: a pool of {best} thread(s) where the \
             kernel places them (a program's default), or {} pinned one per CPU.",
            evidence(c, cores),
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
            evidence(c, cores)
        ));
    }
    s
}

/// Where every throttled N was slower than none at all: no pool size follows from the run.
fn no_throttle_fastest(c: &Found) -> String {
    format!(
        "The time kept falling until no throttle at all here ({}). {} logical CPUs, {} physical \
         cores, {} (the study: best at N = 2, and 21.8% more time with all 64 at once on \
         Windows 7). Every throttled N, up to 64 permits for the 64 workers, was slower than \
         admitting them all at once ({}): the throttle's own lock and hand-offs cost more in \
         this run than running more threads than CPUs. On a 2-vCPU guest this happened in the \
         runs taken while the host was busy (N = 1 at 0.176-0.243 s against 0.143-0.168 s in \
         quiet runs); the likely causes, not measured here: a vCPU the host deschedules while \
         it holds the throttle's lock stalls every worker that needs it, and each hand-off \
         waits for an idle vCPU to wake. So no pool size follows from this run: run again when \
         the load warnings are quiet.",
        rule_text(),
        c.logical,
        c.physical,
        c.cg,
        evidence(c, 64)
    )
}

/// What the sweep measured at `n`, for the conclusion's reasons.
fn evidence(c: &Found, n: usize) -> String {
    match (c.kernel.iter().find(|r| r.n == n), c.best.verdict(n)) {
        (Some(r), Some(v)) => format!(
            "at N = {n} the median was {:.3} s ({}, {} against the fastest), {:.0} involuntary \
             switches, the idlest CPU idle {:.0}% of the run",
            median(&r.seconds()),
            spread_text(&r.seconds()),
            verdict_text(v),
            r.involuntary(),
            r.idlest_pct()
        ),
        _ => format!("N = {n} was not measured"),
    }
}
