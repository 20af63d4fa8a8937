//! How much work a run does: the tiny, quick and full suites, and what each means for the
//! sampler and the runner.

use std::time::Duration;

use crate::measure::sampler::SamplerConfig;

/// How much work a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Smallest possible: for the end-to-end tests (structure, not figures).
    Tiny,
    /// The default suite: every experiment, short.
    Quick,
    /// `--full`: the studies' full ranges and more samples.
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Tiny => "tiny",
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }

    /// Sampling defaults for one metric in this mode.
    pub fn sampler_config(self) -> SamplerConfig {
        match self {
            Mode::Tiny => SamplerConfig {
                warmup: Duration::from_micros(200),
                min_batch: Duration::from_micros(100),
                // Nine: the fewest whose complete separation (p = 4e-5) survives Holm's
                // correction over a tiny run's metrics, which the compare tests rely on.
                min_trials: 9,
                max_trials: 9,
                rounds: 1,
                budget: Duration::from_millis(20),
                // Tiny runs check structure; the filter would only lengthen them.
                phase_filter: false,
            },
            Mode::Quick => SamplerConfig {
                warmup: Duration::from_millis(20),
                min_batch: Duration::from_millis(2),
                min_trials: 8,
                max_trials: 12,
                rounds: 3,
                budget: Duration::from_millis(400),
                phase_filter: true,
            },
            // Twice the quick suite's trials at most and four times its budget per row: a row
            // stops at its precision target, so the floor (min_trials x rounds) is what a
            // steady row costs; 12 x 5 made --full take 25 minutes for figures whose
            // intervals were already within target at 8 x 3.
            Mode::Full => SamplerConfig {
                warmup: Duration::from_millis(100),
                min_batch: Duration::from_millis(5),
                min_trials: 8,
                max_trials: 24,
                rounds: 3,
                budget: Duration::from_millis(1500),
                phase_filter: true,
            },
        }
    }

    /// Picks the value for this mode.
    pub fn pick<T>(self, tiny: T, quick: T, full: T) -> T {
        match self {
            Mode::Tiny => tiny,
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }

    /// The wall time a whole run of every experiment is held to on a 2-vCPU machine: the
    /// quick suite's 110 s and `--full`'s ten minutes. Re-measuring an experiment is given up
    /// where it would take the run past it (`runner::Deadline`); nothing else reads it.
    pub fn target_wall(self) -> Option<Duration> {
        self.pick(
            None,
            Some(Duration::from_secs(110)),
            Some(Duration::from_secs(600)),
        )
    }

    /// How `target_wall` is named in a note: "the quick suite's target".
    pub fn target_name(self) -> &'static str {
        self.pick("its target", "the quick suite's target", "--full's target")
    }

    /// Total time re-measuring may add to a run: under a tenth of the suite in quick, so the
    /// quick suite stays within its 110 s on a drifting host. Its experiments take 97-103 s
    /// unrepeated here; with 15 s, runs that re-measured two experiments took 113-116 s, and
    /// with 10 s one took 112 s (switch 5.8 s again, then ordering, whose second attempt took
    /// 4.7 s against the first's 3.5 s).
    pub fn remeasure_budget(self) -> Duration {
        // --full: half a minute, so that re-measured experiments (one drifted fairness or
        // switch added 52-74 s; switch measured three times added 55 s) cannot take the run
        // past its ten minutes.
        self.pick(
            Duration::from_secs(5),
            Duration::from_secs(8),
            Duration::from_secs(30),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_scale_moves_budget_and_trials_but_never_below_a_median_interval() {
        let c = Mode::Full.sampler_config();
        assert_eq!(c.scaled(1.0).max_trials, c.max_trials);
        let small = c.scaled(0.25);
        assert!(small.budget < c.budget);
        assert!(
            small.min_trials >= crate::measure::sampler::MIN_TRIALS
                && small.min_trials <= c.min_trials
        );
        assert!(small.max_trials >= small.min_trials && small.max_trials < c.max_trials);
        let large = c.scaled(4.0);
        assert_eq!(large.min_trials, c.min_trials);
        assert!(large.max_trials > c.max_trials && large.budget > c.budget);
        // Nonsense leaves it as it is.
        assert_eq!(c.scaled(f64::NAN).max_trials, c.max_trials);
        assert_eq!(c.scaled(0.0).budget, c.budget);
    }
}
