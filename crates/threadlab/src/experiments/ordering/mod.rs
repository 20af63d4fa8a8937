//! `ordering`: memory-ordering litmus tests on real hardware (Delphi TThread articles,
//! "Atomic Operations and Memory Ordering").
//!
//! The article: thread A writes K := 5 then L := 1; thread B reads L then K, and may see L = 1
//! with a stale K unless memory ordering is enforced. That is the message-passing test (MP).
//! Beside it: store buffering (SB), load buffering (LB) and, with four CPUs, independent reads of
//! independent writes (IRIW). Each runs millions of times with four choices of ordering, the
//! threads pinned to different CPUs, and every outcome is counted.
//!
//! Method (after litmus7's per-iteration synchronisation): the threads meet before every
//! iteration by each publishing its iteration number and spinning until the others have
//! published theirs; then each runs its two accesses at once, so the accesses race within a few
//! hundred nanoseconds. Iteration i stores the value i, so "saw the store" means "read i" and
//! any smaller value is the initial state of that iteration: no variable needs resetting.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::placement::{allowed_cpus, cpu_pair};
use crate::measure::stats::Summary;
use crate::measure::units::Unit;
use crate::results::{ids, Metric, Table};
use crate::seeds;

mod litmus;

pub use litmus::{
    forbids, hardware_model, run_litmus, Litmus, LitmusResult, Order, JITTER_UNITS, LITMUS_TESTS,
    ORDERS,
};

pub struct MemoryOrdering;

/// How many runs of how many iterations each (test, ordering) pair gets.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Runs wanted, and the fewest kept when the time budget runs out.
    reps: usize,
    min_reps: usize,
    iterations: u64,
    /// Past this, no further run starts once `min_reps` are in (SB and LB cost 4-10x more per
    /// iteration than MP, since both threads write a line the other reads, and vary with noise).
    /// Runs after the first are shortened, down to a tenth of `iterations`, so that `min_reps`
    /// fit in it: an iteration costs about four times more when the host runs the two vCPUs
    /// on different core complexes (a cache line's round trip 370-440 ns instead of 45-50),
    /// and the quick suite's ordering took 8.0-8.5 s then against 2.1 s otherwise; with the
    /// budget at 300 ms and the runs shortened, 4.2-4.6 s at about 250 ns an iteration.
    /// `--full`'s took 47.0 s at about 280 ns an iteration with 4 s a pair.
    budget: Duration,
}

impl Plan {
    /// Iterations for the next run of a pair, given the runs so far and the time they took:
    /// `iterations` while the remaining runs of `min_reps` fit in the budget at the rate seen,
    /// fewer (never under a tenth) when they would not.
    fn next_iterations(&self, done: &[LitmusResult], spent: Duration) -> u64 {
        let done_iters: u64 = done.iter().map(|r| r.iterations).sum();
        let left_runs = self.min_reps.saturating_sub(done.len());
        if done_iters == 0 || left_runs == 0 {
            return self.iterations;
        }
        let ns_per_iter = spent.as_nanos() as f64 / done_iters as f64;
        let left = self.budget.saturating_sub(spent).as_nanos() as f64;
        let fit = (left / left_runs as f64 / ns_per_iter.max(1e-3)) as u64;
        fit.clamp((self.iterations / 10).max(1), self.iterations)
    }
}

fn plan(mode: Mode) -> Plan {
    mode.pick(
        Plan {
            reps: 2,
            min_reps: 2,
            iterations: 20_000,
            budget: Duration::from_millis(100),
        },
        Plan {
            reps: 5,
            min_reps: 3,
            iterations: 500_000,
            budget: Duration::from_millis(300),
        },
        Plan {
            reps: 7,
            min_reps: 5,
            iterations: 2_000_000,
            budget: Duration::from_secs(2),
        },
    )
}

/// What the test and ordering say about the relaxed outcome, for notes.
fn verdict(test: Litmus, order: Order, hw_allows: bool) -> String {
    let lang = if forbids(test, order) {
        "the Rust/C++ memory model forbids it with this ordering, so any count above 0 is a bug"
    } else {
        "the Rust/C++ memory model allows it with this ordering (so does the compiler, which may reorder or merge these accesses)"
    };
    let hw = if hw_allows {
        "this CPU's hardware model allows it for plain accesses"
    } else {
        "this CPU's hardware model never shows it, whatever the ordering, as long as the compiler keeps the program order"
    };
    format!("{lang}; {hw}")
}

const INFO: Info = Info {
    name: "ordering",
    study: &seeds::DELPHI_2010S,
    measures: "relaxed outcomes of the MP (K/L), SB, LB and IRIW litmus tests under four orderings",
    rough_secs: [0.3, 3.0, 11.0],
};

impl Experiment for MemoryOrdering {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpus = allowed_cpus();
        let Some((a, b)) = cpu_pair() else {
            return Err(Error::Skip(
                "litmus tests need two CPUs: this process may use only one".into(),
            ));
        };
        let (model, hw_allowed) = hardware_model();
        let method = Method {
            plan: plan(ctx.mode),
            model,
            hw_allowed,
        };
        let mut lines = Vec::new();
        let mut violations = Vec::new();

        for &test in LITMUS_TESTS {
            let test_cpus: Vec<usize> = if test.threads() == 2 {
                vec![a, b]
            } else {
                cpus.iter().copied().take(test.threads()).collect()
            };
            let placement = if test_cpus.len() == 2 {
                format!("cross_cpu({a},{b})")
            } else {
                let l: Vec<String> = test_cpus.iter().map(|c| c.to_string()).collect();
                format!("cpus({})", l.join(","))
            };
            for &order in ORDERS {
                let id = ids::ordering::stem(test.name(), order.name());
                if test_cpus.len() < test.threads() {
                    let why = format!(
                        "{} needs {} CPUs, one per thread; this process may use {}",
                        test.name(),
                        test.threads(),
                        cpus.len()
                    );
                    out.skip(&format!("{id}.relaxed_outcomes"), why.clone());
                    out.skip(&ids::ordering::relaxed_rate(test.name(), order.name()), why);
                    continue;
                }
                ctx.step(&id)?;
                let runs = method.runs(ctx, test, order, &test_cpus)?;
                let total = sum_of(&runs);
                method.emit(out, test, order, &placement, &runs, &total)?;
                if total.forbidden_seen() {
                    violations.push(format!("{id} ({} times)", total.relaxed()));
                }
                lines.push((test, order, total));
            }
        }
        out.tables.push(outcomes_table(model, &lines));
        out.conclusion = Some(conclusion(model, &lines, &violations));
        Ok(())
    }
}

/// How every (test, ordering) pair is run and described: the plan and the hardware's model.
struct Method {
    plan: Plan,
    model: &'static str,
    hw_allowed: &'static [Litmus],
}

impl Method {
    /// The runs of one pair: up to `plan.reps`, no new run past the budget once `min_reps` are in.
    fn runs(
        &self,
        ctx: &Ctx,
        test: Litmus,
        order: Order,
        test_cpus: &[usize],
    ) -> Result<Vec<LitmusResult>> {
        let plan = &self.plan;
        let mut runs = Vec::with_capacity(plan.reps);
        let started = Instant::now();
        while runs.len() < plan.reps
            && (runs.len() < plan.min_reps || started.elapsed() < plan.budget)
        {
            ctx.cancel.check()?;
            let iterations = plan.next_iterations(&runs, started.elapsed());
            runs.push(run_litmus(test, order, iterations, test_cpus, ctx.cancel)?);
        }
        Ok(runs)
    }

    /// One pair's two metrics: the relaxed outcomes over every run, and their rate per run.
    fn emit(
        &self,
        out: &mut Outcome,
        test: Litmus,
        order: Order,
        placement: &str,
        runs: &[LitmusResult],
        total: &LitmusResult,
    ) -> Result<()> {
        let (plan, model) = (&self.plan, self.model);
        let (fewest, most) = runs.iter().fold((u64::MAX, 0), |(lo, hi), r| {
            (lo.min(r.iterations), hi.max(r.iterations))
        });
        let per_run = if fewest == most {
            format!("{most}")
        } else {
            format!("{fewest}-{most}")
        };
        let id = ids::ordering::stem(test.name(), order.name());
        let reps = runs.len();
        let hw = self.hw_allowed.contains(&test);
        let short = format!(
            "{}, {}",
            test.relaxed_short(),
            if forbids(test, order) {
                "forbidden by this ordering"
            } else {
                "allowed by this ordering"
            }
        );
        let note = format!(
            "{short}; program {} with {}. Relaxed outcome {}: {}. All outcomes over {} iterations ({reps} runs of {per_run}: up to {} runs of {}, no new run past {} ms once {} are in, later runs shortened to fit; 1 = read this iteration's store, 0 = an older value): {}. Method: threads pinned one per CPU; before every iteration each thread publishes its iteration number and spins until the others have (litmus7-style per-iteration sync), then runs 0-{} units of pseudo-random arithmetic so the accesses meet at varied offsets; {:.0} ns per iteration here; iteration i stores the value i, so no reset is needed. Hardware model: {model}.",
            test.program(),
            order.describe(),
            test.relaxed_text(),
            verdict(test, order, hw),
            total.iterations,
            plan.reps,
            plan.iterations,
            plan.budget.as_millis(),
            plan.min_reps,
            total.outcomes_text(),
            JITTER_UNITS - 1,
            total.elapsed.as_nanos() as f64 / total.iterations.max(1) as f64,
        );
        out.add(Metric::single(
            &format!("{id}.relaxed_outcomes"),
            Unit::Count,
            total.relaxed() as f64,
            placement,
            note.clone(),
        ));
        let rates: Vec<f64> = runs.iter().map(|r| r.relaxed_pct()).collect();
        let s = Summary::from_samples(&rates, most)
            .ok_or_else(|| Error::Fail("no finite rates".into()))?;
        out.add(Metric::from_summary(
            &ids::ordering::relaxed_rate(test.name(), order.name()),
            Unit::Percent,
            &s,
            placement,
            format!(
                "Share of iterations with {} over {reps} runs; {note}",
                test.relaxed_short()
            ),
        ));
        Ok(())
    }
}

/// Every run's counts added up (runs is never empty: at least `min_reps` are taken).
fn sum_of(runs: &[LitmusResult]) -> LitmusResult {
    let mut total = runs[0].clone();
    for r in &runs[1..] {
        total.iterations += r.iterations;
        total.elapsed += r.elapsed;
        for (t, n) in total.counts.iter_mut().zip(&r.counts) {
            *t += n;
        }
    }
    total
}

/// Every pair's relaxed outcomes, with whether the ordering allows them.
fn outcomes_table(model: &str, lines: &[(Litmus, Order, LitmusResult)]) -> Table {
    let mut table = Table::new(
        ids::ordering::OUTCOMES_TABLE,
        "Relaxed outcomes per test and ordering",
        &[
            "test",
            "ordering",
            "relaxed outcome",
            "seen",
            "iterations",
            "rate",
            "allowed?",
        ],
    );
    table.note = format!("hardware model: {model}");
    for (test, order, r) in lines {
        table.row(vec![
            test.name().to_string(),
            order.name().to_string(),
            test.relaxed_short().to_string(),
            r.relaxed().to_string(),
            r.iterations.to_string(),
            format!("{:.3}%", r.relaxed_pct()),
            if forbids(*test, *order) {
                "forbidden".to_string()
            } else {
                "allowed".to_string()
            },
        ]);
    }
    table
}

fn conclusion(
    model: &str,
    lines: &[(Litmus, Order, LitmusResult)],
    violations: &[String],
) -> String {
    let mut s = format!("This CPU's memory model: {model}. ");
    let seen: Vec<String> = lines
        .iter()
        .filter(|(_, _, r)| r.relaxed() > 0)
        .map(|(t, o, r)| {
            format!(
                "{} with {}: {} in {} ({:.3}%)",
                t.name(),
                o.name(),
                r.relaxed(),
                r.iterations,
                r.relaxed_pct()
            )
        })
        .collect();
    if seen.is_empty() {
        s.push_str("No relaxed outcome appeared in any test. ");
    } else {
        s.push_str(&format!("Relaxed outcomes seen: {}. ", seen.join("; ")));
    }
    if violations.is_empty() {
        s.push_str("None appeared where the ordering forbids it (SeqCst and fences forbid all four; Release/Acquire forbids MP and LB). ");
    } else {
        s.push_str(&format!(
            "FORBIDDEN OUTCOMES APPEARED: {}: a compiler, CPU or threadlab bug; please report it. ",
            violations.join(", ")
        ));
    }
    if let Some((_, _, mp)) = lines
        .iter()
        .find(|(t, o, _)| *t == Litmus::Mp && *o == Order::Relaxed)
    {
        s.push_str(&format!(
            "The study's claim (a thread that sees L = 1 may still read a stale K): with Relaxed accesses this machine showed the stale K {} times in {} tries. ",
            mp.relaxed(),
            mp.iterations
        ));
        if mp.relaxed() == 0 && cfg!(target_arch = "x86_64") {
            s.push_str("x86 hardware keeps stores in order and loads in order, so on this CPU the claim only bites if the compiler reorders the accesses, which Relaxed permits; on ARM the same code shows stale values. ");
        }
    }
    s.push_str("What to use: Release on the store of a flag and Acquire on its load whenever a flag publishes data (the article's K/L, a ready flag, a pointer to a new object): it costs nothing extra on x86 and little on ARM. SeqCst (or a SeqCst fence) only when two threads each write one variable and read the other's (Dekker-style, SB): there Release/Acquire is not enough, on x86 too. Relaxed only for counters and statistics that publish nothing. Or, as the article says, take a lock: it orders everything inside it.");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_runs_shrink_to_fit_the_budget_when_iterations_cost_more() {
        let plan = Plan {
            reps: 5,
            min_reps: 3,
            iterations: 500_000,
            budget: Duration::from_millis(300),
        };
        let run = |iterations: u64| LitmusResult {
            test: Litmus::Sb,
            order: Order::Relaxed,
            iterations,
            counts: vec![iterations, 0, 0, 0],
            elapsed: Duration::ZERO,
        };
        // The first run is always whole.
        assert_eq!(plan.next_iterations(&[], Duration::ZERO), 500_000);
        // 90 ns an iteration: two more whole runs fit in what is left.
        let near = [run(500_000)];
        assert_eq!(
            plan.next_iterations(&near, Duration::from_millis(45)),
            500_000
        );
        // 350 ns an iteration (the vCPUs far apart): 125 ms left for two runs, 178,571 each.
        let far = plan.next_iterations(&near, Duration::from_millis(175));
        assert!((170_000..=180_000).contains(&far), "{far}");
        // Over budget already: a tenth, never less.
        assert_eq!(plan.next_iterations(&near, Duration::from_secs(2)), 50_000);
        // Past min_reps, runs are whole again (the budget alone stops them).
        let three = [run(500_000), run(178_000), run(178_000)];
        assert_eq!(
            plan.next_iterations(&three, Duration::from_millis(300)),
            500_000
        );
    }
}
