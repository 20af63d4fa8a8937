//! What the default placement does to a futex hand-off between two threads, for the switch
//! experiment's conclusion.
//!
//! Where the kernel places the pair, a hand-off has two regimes on two CPUs: the partner is
//! still running on the other CPU when the turn arrives (its wait returns at once, no switch:
//! a few hundred ns), or it has gone to sleep and every hand-off wakes it there (an idle CPU's
//! wake-up: tens of us on a VM). Which one a pair falls into is a race whose outcome can hold
//! for a whole run, fresh threads and all (docs/compare.md, "Unstable"; where the kernel puts
//! the pair follows what its threads did just before: docs/agreement.md, "Two threads passing a
//! turn where the kernel places them"). So advice read from one run's median said "pinning cuts
//! it 6.4x" in one quick suite and "pinning would make each hand-off 9.0x dearer" in another, of
//! the same build. The advice names the regimes this run's trials fell into, each beside the
//! pinned figure, and recommends the same thing whichever it saw.

use crate::experiments::Outcome;
use crate::measure::stats::median;

/// A trial within this factor of the pinned figure, either way, costs about the same.
const SAME_BAND: f64 = 1.1;

/// The trials of `values` that `keep` selects: their median and their share of all.
fn part(values: &[f64], keep: impl Fn(f64) -> bool) -> Option<(f64, f64)> {
    let kept: Vec<f64> = values.iter().copied().filter(|&v| keep(v)).collect();
    (!kept.is_empty()).then(|| (median(&kept), kept.len() as f64 / values.len() as f64))
}

/// The conclusion's sentences on placement: what the default placement gave this run's
/// trials, by regime, against the pair pinned to one CPU; empty without both rows.
pub(super) fn placement_advice(out: &Outcome) -> String {
    let (Some(free), Some(pinned)) = (
        out.metric("switch.thread.futex.unpinned"),
        out.median("switch.thread.futex"),
    ) else {
        return String::new();
    };
    let trials = if free.values.is_empty() {
        vec![free.median]
    } else {
        free.values.clone()
    };
    let spin = part(&trials, |v| v < pinned / SAME_BAND);
    let sleep = part(&trials, |v| v > pinned * SAME_BAND);
    let lead = " Two threads handing off by futex where the kernel places them";
    // "here", or the share of trials where some were in neither regime (on one CPU).
    let share = |p: f64| {
        if p < 1.0 {
            format!("in {:.0}% of this run's trials", p * 100.0)
        } else {
            "here".to_string()
        }
    };
    let seen = match (spin, sleep) {
        (None, None) => {
            return format!(
                "{lead} cost about the same ({:.0} ns) as pinned to one CPU ({pinned:.0} ns): \
                 pinning would not change it here.",
                free.median
            )
        }
        (Some((s, sp)), Some((z, zp))) => format!(
            "{lead} took {s:.0} ns per hand-off in {:.0}% of this run's trials, the partner \
             still running on the other CPU when the turn arrived, and {z:.0} ns in {:.0}%, each \
             hand-off waking it asleep there",
            sp * 100.0,
            zp * 100.0
        ),
        (Some((s, sp)), None) => format!(
            "{lead} took {s:.0} ns per hand-off {}, the partner still running on the other CPU \
             when the turn arrived; a pair that falls asleep wakes the other CPU on every \
             hand-off instead, which none of this run's trials did",
            share(sp)
        ),
        (None, Some((z, zp))) => {
            let running = out
                .median("switch.thread.futex.cross_cpu")
                .filter(|&c| c < pinned / SAME_BAND)
                .map_or(String::new(), |c| {
                    format!(
                        "; a pair still running when the turn arrives hands off in {c:.0} ns \
                         (the two pinned to different CPUs)"
                    )
                });
            format!(
                "{lead} took {z:.0} ns per hand-off {}, each waking the partner asleep on the \
                 other CPU{running}",
                share(zp)
            )
        }
    };
    format!(
        "{seen}; pinned to one CPU, {pinned:.0} ns every time. Which of the two a pair falls \
         into is a race whose outcome can hold for a whole run: pin partners that talk often to \
         one CPU where a hand-off must cost the same every time; left free, they are faster only \
         while both stay running."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::units::Unit;
    use crate::results::Metric;

    fn run(unpinned: &[f64], cross: f64) -> Outcome {
        let mut out = Outcome::default();
        let m = |id: &str, values: &[f64], place: &str| {
            Metric::from_values(id, Unit::Ns, values, 1, place, "n").unwrap()
        };
        out.add(m("switch.thread.futex", &[2430.0, 2440.0], "same_cpu(0)"));
        out.add(m(
            "switch.thread.futex.cross_cpu",
            &[cross, cross],
            "cross_cpu(0,1)",
        ));
        out.add(m("switch.thread.futex.unpinned", unpinned, "unpinned"));
        out
    }

    /// The advice's recommendation, the part that must not depend on the regime a run met.
    fn recommendation(text: &str) -> &str {
        text.split("every time.").nth(1).unwrap_or("")
    }

    #[test]
    fn a_run_in_either_regime_gives_the_same_recommendation() {
        // Quick suites of one build on the 2-vCPU guest: one with every trial spinning (about
        // 0.26 us), two with every trial asleep (15-18 us), and a mixture.
        let spinning = placement_advice(&run(&[250.0, 260.0, 270.0, 255.0], 170.0));
        let asleep = placement_advice(&run(&[15400.0, 18500.0, 16800.0, 17000.0], 170.0));
        let mixed = placement_advice(&run(&[250.0, 260.0, 270.0, 16800.0], 170.0));
        for text in [&spinning, &asleep, &mixed] {
            assert!(
                text.contains("pinned to one CPU, 2435 ns every time"),
                "{text}"
            );
            assert!(
                !text.contains("dearer") && !text.contains("cuts it"),
                "{text}"
            );
        }
        assert_eq!(recommendation(&spinning), recommendation(&asleep));
        assert_eq!(recommendation(&spinning), recommendation(&mixed));
        assert!(
            spinning.contains("took 258 ns per hand-off here"),
            "{spinning}"
        );
        assert!(
            spinning.contains("none of this run's trials did"),
            "{spinning}"
        );
        // Asleep in every trial: the running regime's figure comes from the pair pinned apart.
        assert!(
            asleep.contains("took 16900 ns per hand-off here"),
            "{asleep}"
        );
        assert!(asleep.contains("hands off in 170 ns"), "{asleep}");
        assert!(
            mixed.contains("260 ns per hand-off in 75% of this run's trials")
                && mixed.contains("16800 ns in 25%"),
            "{mixed}"
        );
    }

    #[test]
    fn about_the_pinned_figure_says_pinning_would_not_change_it() {
        let text = placement_advice(&run(&[2400.0, 2500.0, 2450.0], 170.0));
        assert!(text.contains("pinning would not change it here"), "{text}");
        assert_eq!(placement_advice(&Outcome::default()), "");
    }
}
