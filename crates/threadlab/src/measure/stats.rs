//! Order statistics over samples: median, quartiles, extremes and coefficient of variation.

use serde::{Deserialize, Serialize};

/// A metric whose IQR exceeds this fraction of its median is flagged noisy.
pub const NOISY_IQR_FRACTION: f64 = 0.10;

/// Fewer trials than this never make a metric (the 95% interval of a median needs 6).
pub const MIN_TRIALS: usize = 6;

/// A reading of the machine beside a trial counts as quiet when it is within `QUIET_MARGIN` of
/// the best reading of its group (`quiet_beside`).
pub const QUIET_MARGIN: f64 = 0.10;

/// Whether a reading of the machine (a phase probe's) is quiet: within `QUIET_MARGIN` of `best`,
/// the best reading of its group. The sampler judges each trial by it (both parts of the probe
/// before and after), and a log pooled from several processes judges its trials again.
pub fn quiet_beside(reading: f64, best: f64) -> bool {
    reading <= best * (1.0 + QUIET_MARGIN)
}

/// Statistics over a metric's values, and the values themselves in the order they were taken.
///
/// A value is one trial's figure (the median of the trial's batches: `batches[i]`) when the
/// sampler ran trials, or one sample otherwise. Interleaved rows are aligned by trial and, within
/// a trial, by round: batch j of trial i of every row of a group was taken in the same round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    /// Operations per batch (each batch figure is a batch mean); 1 when samples are single events.
    pub batch: u64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub q1: f64,
    pub q3: f64,
    pub mean: f64,
    /// Standard deviation / mean (sample standard deviation, n - 1), of `values`.
    pub cv: f64,
    /// One per trial (or per sample), in the order taken.
    pub values: Vec<f64>,
    /// Each trial's batch figures, in the order taken; `values[i]` is the median of
    /// `batches[i]`. Empty when the values are not trials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<Vec<f64>>,
    /// What the trial runner did: trials taken and kept, why others were set aside, why it
    /// stopped, the precision it reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials: Option<TrialLog>,
}

/// Why a metric's sampling stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The 95% interval of the median reached the metric's target width.
    Precision,
    /// The metric's time budget was spent first.
    Budget,
    /// The most trials the mode allows were taken.
    Limit,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What the trial runner did for one metric (measure::sampler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialLog {
    /// Trials run: each with fresh threads and objects where the row makes them, a warm-up
    /// batch where it does, then its batches.
    pub taken: usize,
    /// Trials whose figures are kept.
    pub kept: usize,
    /// Trials set aside because the host took time from a CPU they used (steal in /proc/stat).
    pub steal: usize,
    /// Trials set aside because the machine was disturbed around them (a throughput-bound or
    /// system-call reference read before or after the trial over 10% slower than its best), or
    /// in them (`slowed`, counted here too).
    pub disturbed: usize,
    /// Of the `disturbed` trials, those set aside because most of the group's rows on one CPU
    /// (at least 3) read over 10% above their own medians in them: the host slowed the trial
    /// between two quiet readings. Absent (0) in files that predate it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slowed: usize,
    pub stop: Stop,
    /// The target: half-width of the 95% interval of the median, percent of the median.
    pub target_pct: f64,
    /// The half-width reached (distribution-free interval over the kept trials), percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_pct: Option<f64>,
    /// For metrics whose threads run on two CPUs (or wherever the kernel puts them): the
    /// round trip of a cache line between the two CPUs, measured at the start of each kept
    /// trial, ns. On a VM it says where the host runs the two vCPUs (the same core complex or
    /// not), which decides cross-CPU figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pair_ns: Vec<f64>,
    /// For metrics whose threads the kernel places: per kept trial, the share of its operations
    /// whose threads ran on one CPU (0 = always apart, 1 = always together): the regime such a
    /// figure is in (a hand-off between two threads on one CPU is a switch, on two a cross-CPU
    /// wake-up; a new thread on its creator's CPU or on the other).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub colocated: Vec<f64>,
    /// Per kept trial, the throughput-bound phase probe beside it (40,000 iterations of the
    /// register loop, the slower of the readings before and after the trial), ns: the CPU's
    /// speed where the kept figures were taken, which the readings around the whole experiment
    /// can miss when the sampler set the slow trials aside. Empty when the phase filter was off
    /// and in files that predate it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_wide_ns: Vec<f64>,
}

impl TrialLog {
    /// For the metric's note: how many trials, what was set aside, when sampling stopped.
    pub fn note(&self) -> String {
        let mut s = format!(
            "; {} trial{}",
            self.kept,
            if self.kept == 1 { "" } else { "s" }
        );
        let set_aside = self.taken - self.kept;
        if set_aside > 0 {
            let mut why = Vec::new();
            if self.steal > 0 {
                why.push(format!("{} overlapped host steal", self.steal));
            }
            let beside = self.disturbed.saturating_sub(self.slowed);
            if beside > 0 {
                why.push(format!(
                    "{beside} ran while a reference read beside them was over 10% slow"
                ));
            }
            if self.slowed > 0 {
                why.push(format!(
                    "{} slowed with most of the group's one-CPU rows (each over 10% above its \
                     own median)",
                    self.slowed
                ));
            }
            s.push_str(&format!(
                " ({set_aside} more set aside: {})",
                why.join(", ")
            ));
        } else if self.steal + self.disturbed > 0 {
            s.push_str(&format!(
                " (all kept, although {} were disturbed: too few quiet ones; read the spread)",
                self.steal + self.disturbed
            ));
        }
        match (self.stop, self.ci_pct) {
            (Stop::Precision, Some(ci)) => s.push_str(&format!(
                ", median known to ±{ci:.1}% (target ±{:.0}%)",
                self.target_pct
            )),
            (Stop::Budget, Some(ci)) => s.push_str(&format!(
                ", median known to ±{ci:.1}% (target ±{:.0}%, budget spent first)",
                self.target_pct
            )),
            (Stop::Limit, Some(ci)) => s.push_str(&format!(
                ", median known to ±{ci:.1}% (target ±{:.0}%, trial limit reached)",
                self.target_pct
            )),
            (_, None) => {}
        }
        s
    }

    /// The logs of separate samplings of one figure added up, their per-trial readings in
    /// order; `ci_pct` is left to the caller, who has the pooled values. None without a log.
    pub fn pooled(logs: &[&TrialLog]) -> Option<TrialLog> {
        let first = logs.first()?;
        Some(TrialLog {
            taken: logs.iter().map(|l| l.taken).sum(),
            kept: logs.iter().map(|l| l.kept).sum(),
            steal: logs.iter().map(|l| l.steal).sum(),
            disturbed: logs.iter().map(|l| l.disturbed).sum(),
            slowed: logs.iter().map(|l| l.slowed).sum(),
            stop: first.stop,
            target_pct: first.target_pct,
            ci_pct: None,
            pair_ns: logs
                .iter()
                .flat_map(|l| l.pair_ns.iter().copied())
                .collect(),
            colocated: logs
                .iter()
                .flat_map(|l| l.colocated.iter().copied())
                .collect(),
            phase_wide_ns: logs
                .iter()
                .flat_map(|l| l.phase_wide_ns.iter().copied())
                .collect(),
        })
    }

    /// Judges the kept trials of a log pooled from `parts` again, against all of them: a kept
    /// trial is quiet when its phase probe (`phase_wide_ns`, the slower reading beside it) is
    /// within `QUIET_MARGIN` of the best beside any pooled trial, and when at least `MIN_TRIALS`
    /// are, only those stay. Returns the indices of the trials kept (into the pooled kept
    /// trials), or None when all stay: every trial quiet, too few quiet, or a trial without its
    /// reading. Each part judged its trials against its own best reading only, so a part that
    /// spent all of them in a slow phase of the host kept them all, and would otherwise set the
    /// figure: on a 2-vCPU guest
    /// `sync.mutex.single_thread` read 6.32 ns in a quick suite, pooled from one process's 8
    /// trials at 4.9 ns beside a probe of 32.5 us and another's 12, all kept, beside 53.6-58.8
    /// us, against 4.92-4.96 ns in the runs around it. The trials set aside count as disturbed
    /// (a part that kept all does not say which of its trials overlapped steal).
    fn quiet_across(&mut self, parts: &[&TrialLog]) -> Option<Vec<usize>> {
        let phases = &self.phase_wide_ns;
        if phases.len() != self.kept || phases.iter().any(|p| !p.is_finite() || *p <= 0.0) {
            return None;
        }
        let best = phases.iter().copied().fold(f64::INFINITY, f64::min);
        let keep: Vec<usize> = (0..phases.len())
            .filter(|&k| quiet_beside(phases[k], best))
            .collect();
        if keep.len() < MIN_TRIALS || keep.len() == self.kept {
            return None;
        }
        let per_trial = |v: &[f64]| -> Vec<f64> {
            if v.len() == phases.len() {
                keep.iter().map(|&k| v[k]).collect()
            } else {
                v.to_vec()
            }
        };
        self.pair_ns = per_trial(&self.pair_ns);
        self.colocated = per_trial(&self.colocated);
        self.phase_wide_ns = per_trial(phases);
        self.kept = keep.len();
        self.steal = parts
            .iter()
            .filter(|p| p.kept < p.taken)
            .map(|p| p.steal)
            .sum();
        self.disturbed = self.taken - self.kept - self.steal;
        Some(keep)
    }

    /// A log for tests: `taken` trials, `kept` of them, `disturbed` set aside or (when all are
    /// kept) disturbed, no per-trial readings.
    #[cfg(test)]
    pub fn for_test(taken: usize, kept: usize, disturbed: usize) -> TrialLog {
        TrialLog {
            taken,
            kept,
            steal: 0,
            disturbed,
            slowed: 0,
            stop: Stop::Limit,
            target_pct: 5.0,
            ci_pct: None,
            pair_ns: Vec::new(),
            colocated: Vec::new(),
            phase_wide_ns: Vec::new(),
        }
    }

    /// Every trial was kept although most lay beside a slow reference or host steal: too few
    /// were quiet to set the others aside, and the figure is what the host's busy phase gave
    /// (a quick suite on a contended host read `switch.green.yield` at 4.71 ns so, its trials
    /// within 1.6% of each other, against 3.25 ns in the next).
    pub fn disturbed_throughout(&self) -> bool {
        self.kept == self.taken && (self.steal + self.disturbed) * 2 > self.taken
    }

    /// The median share of batches whose parties shared a CPU, over the kept trials.
    pub fn colocated_median(&self) -> Option<f64> {
        (!self.colocated.is_empty()).then(|| median(&self.colocated))
    }

    /// The median cache-line round trip between the two CPUs over the kept trials, ns.
    pub fn pair_median_ns(&self) -> Option<f64> {
        (!self.pair_ns.is_empty()).then(|| median(&self.pair_ns))
    }
}

impl Summary {
    /// Summarises samples; None when there are none or any is not finite.
    pub fn from_samples(samples: &[f64], batch: u64) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        Some(Summary {
            n,
            batch,
            median: quantile_sorted(&v, 0.5),
            min: v[0],
            max: v[n - 1],
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
            mean,
            cv: cv(samples),
            values: samples.to_vec(),
            batches: Vec::new(),
            trials: None,
        })
    }

    /// Summarises trials: each trial's value is the median of its batches. None when there is
    /// no trial, a trial without batches, or a figure that is not finite.
    pub fn from_trials(
        batches: Vec<Vec<f64>>,
        batch: u64,
        log: Option<TrialLog>,
    ) -> Option<Summary> {
        if batches.iter().any(|b| b.is_empty()) {
            return None;
        }
        let values: Vec<f64> = batches.iter().map(|b| median(b)).collect();
        let mut s = Summary::from_samples(&values, batch)?;
        s.batches = batches;
        s.trials = log;
        Some(s)
    }

    /// One figure sampled more than once (in separate processes, at different times) as one
    /// summary of all their trials; the interval of the median is over them all. None when a
    /// part has no trials.
    pub fn pooled(parts: &[Summary]) -> Option<Summary> {
        let first = parts.first()?;
        if parts.iter().any(|p| p.batches.is_empty()) {
            return None;
        }
        let mut batches: Vec<Vec<f64>> = parts.iter().flat_map(|p| p.batches.clone()).collect();
        let logs: Option<Vec<&TrialLog>> = parts.iter().map(|p| p.trials.as_ref()).collect();
        let mut log = logs.as_deref().and_then(TrialLog::pooled);
        if let (Some(l), Some(parts)) = (log.as_mut(), logs.as_deref()) {
            if let Some(keep) = l.quiet_across(parts) {
                batches = keep.iter().map(|&k| batches[k].clone()).collect();
            }
        }
        let mut s = Summary::from_trials(batches, first.batch, log)?;
        if let Some(t) = s.trials.as_mut() {
            t.ci_pct = median_ci_pct(&s.values);
        }
        Some(s)
    }

    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }

    /// Wide spread: IQR over 10% of the median. Such a metric is shown flagged, not hidden.
    pub fn is_noisy(&self) -> bool {
        self.median != 0.0 && self.iqr() / self.median.abs() > NOISY_IQR_FRACTION
    }

    /// The same figures passed one by one through `f` (subtracting an overhead, converting a
    /// unit), batches and values alike, with every statistic computed again from the results.
    /// None if `f` gave a value that is not finite.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Option<Summary> {
        let mut s = if self.batches.is_empty() {
            let v: Vec<f64> = self.values.iter().map(|&x| f(x)).collect();
            Summary::from_samples(&v, self.batch)?
        } else {
            let b: Vec<Vec<f64>> = self
                .batches
                .iter()
                .map(|t| t.iter().map(|&x| f(x)).collect())
                .collect();
            Summary::from_trials(b, self.batch, None)?
        };
        s.trials = self.trials.clone();
        Some(s)
    }

    /// Half-width of the distribution-free 95% interval of the median of `values`, percent of
    /// the median (`median_ci_pct`).
    pub fn ci_pct(&self) -> Option<f64> {
        median_ci_pct(&self.values)
    }
}

/// The ranks (0-based, inclusive) of the order statistics that bound a distribution-free
/// interval of the median with coverage at least 95%: the narrowest symmetric pair (j, n-1-j)
/// with P(j < B < n - j) >= 0.95 for B ~ Binomial(n, 1/2). None below 6 values, where even
/// (min, max) covers less than 95%.
pub fn median_ci_ranks(n: usize) -> Option<(usize, usize)> {
    if n < 6 {
        return None;
    }
    // P(B = k) for B ~ Binomial(n, 1/2), built up in floating point (n is at most a few
    // thousand here, far from underflow at the centre, and only the tails' sums matter).
    let mut pmf = vec![0.0f64; n + 1];
    pmf[0] = 0.5f64.powi(n as i32);
    for k in 1..=n {
        pmf[k] = pmf[k - 1] * (n - k + 1) as f64 / k as f64;
    }
    // Coverage of (x(j), x(n-1-j)) in 0-based ranks is 1 - 2 P(B <= j): take the largest j
    // that keeps it at or above 95% (j = 0, the extremes, always does from n = 6 on).
    let mut best = 0;
    let mut tail = 0.0;
    for (j, p) in pmf.iter().enumerate().take(n / 2) {
        tail += p;
        if 1.0 - 2.0 * tail >= 0.95 {
            best = j;
        } else {
            break;
        }
    }
    Some((best, n - 1 - best))
}

/// Half-width of the distribution-free 95% interval of the median, percent of the median:
/// (x(hi) - x(lo)) / 2 / |median| x 100 at the ranks `median_ci_ranks` gives. None for fewer than
/// 6 values or a zero median.
pub fn median_ci_pct(values: &[f64]) -> Option<f64> {
    let (lo, hi) = median_ci_ranks(values.len())?;
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = quantile_sorted(&v, 0.5);
    (m != 0.0 && m.is_finite()).then(|| (v[hi] - v[lo]) / 2.0 / m.abs() * 100.0)
}

/// Sample standard deviation (n - 1) over the absolute mean; 0 for one sample or a zero mean.
pub fn cv(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let var = values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
    var.sqrt() / mean.abs()
}

/// The median of values in any order (NaN for none).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, 0.5)
}

/// One cluster of a metric whose samples fall in two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeCluster {
    /// Median of the samples in this cluster.
    pub median: f64,
    /// Fraction of all samples in this cluster (0..1).
    pub share: f64,
    pub n: usize,
}

/// A gap between two clusters must be at least this ratio (upper / lower).
pub const BIMODAL_MIN_GAP_RATIO: f64 = 1.5;

/// Two clusters of positive samples, if the samples fall in two; lower cluster first.
///
/// The rule: sort the samples and take the widest gap between neighbours on a log scale whose
/// both sides hold at least max(2, 15%) of the samples. It separates two modes when the upper
/// side starts at least `BIMODAL_MIN_GAP_RATIO` times above the lower side's end, and the gap
/// is wider (on the log scale) than either side's own range: two tight clusters far apart, not
/// one long tail. Needs at least 7 samples.
pub fn two_modes(values: &[f64]) -> Option<[ModeCluster; 2]> {
    let n = values.len();
    if n < 7 || values.iter().any(|&x| !(x > 0.0 && x.is_finite())) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let min_side = ((n as f64 * 0.15).ceil() as usize).max(2);
    let (split, gap) = (min_side..=n - min_side)
        .map(|i| (i, (v[i] / v[i - 1]).ln()))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let lower = &v[..split];
    let upper = &v[split..];
    let range = |c: &[f64]| (c[c.len() - 1] / c[0]).ln();
    if gap < BIMODAL_MIN_GAP_RATIO.ln() || gap <= range(lower) || gap <= range(upper) {
        return None;
    }
    let cluster = |c: &[f64]| ModeCluster {
        median: quantile_sorted(c, 0.5),
        share: c.len() as f64 / n as f64,
        n: c.len(),
    };
    Some([cluster(lower), cluster(upper)])
}

/// Linear-interpolated quantile (type 7, as R and numpy default) of sorted data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "quantile of no data");
    let q = q.clamp(0.0, 1.0);
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Jain's fairness index over per-thread counts: 1.0 when all equal, 1/n when one takes all.
pub fn jain_index(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sum_sq: f64 = xs.iter().map(|x| x * x).sum();
    if sum_sq == 0.0 {
        return 1.0;
    }
    sum * sum / (n * sum_sq)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(values: &[f64], taken: usize, disturbed: usize) -> Summary {
        let log = TrialLog {
            taken,
            kept: values.len(),
            steal: 0,
            disturbed,
            slowed: 0,
            stop: Stop::Precision,
            target_pct: 3.0,
            ci_pct: Some(1.0),
            pair_ns: Vec::new(),
            colocated: Vec::new(),
            phase_wide_ns: Vec::new(),
        };
        let batches = values.iter().map(|&v| vec![v, v]).collect();
        Summary::from_trials(batches, 1000, Some(log)).unwrap()
    }

    #[test]
    fn samplings_of_one_figure_pool_their_trials_and_their_spread() {
        // One process read 4.9 ns in every trial, the next 6.3: pooled, the spread shows it.
        let a = sampled(&[4.9; 8], 10, 2);
        let b = sampled(&[6.3; 8], 8, 0);
        let p = Summary::pooled(&[a, b]).unwrap();
        assert_eq!(p.values.len(), 16);
        assert_eq!((p.min, p.max), (4.9, 6.3));
        let t = p.trials.unwrap();
        assert_eq!((t.taken, t.kept, t.disturbed), (18, 16, 2));
        assert!(t.ci_pct.unwrap() > 10.0, "{:?}", t.ci_pct);
        // A part without trials cannot be pooled.
        let plain = Summary::from_samples(&[1.0, 2.0], 1).unwrap();
        assert!(Summary::pooled(&[plain]).is_none());
    }

    #[test]
    fn the_note_says_why_each_trial_was_set_aside() {
        let mut t = TrialLog::for_test(14, 11, 2);
        t.steal = 1;
        t.slowed = 1;
        assert_eq!(
            t.note(),
            "; 11 trials (3 more set aside: 1 overlapped host steal, 1 ran while a reference \
             read beside them was over 10% slow, 1 slowed with most of the group's one-CPU rows \
             (each over 10% above its own median))"
        );
        // A file from before `slowed` reads as it did.
        let old: TrialLog = serde_json::from_str(
            r#"{"taken":12,"kept":11,"steal":0,"disturbed":1,"stop":"limit","target_pct":3.0}"#,
        )
        .unwrap();
        assert_eq!(old.slowed, 0);
        assert!(
            old.note().contains("1 ran while a reference"),
            "{}",
            old.note()
        );
    }

    #[test]
    fn a_pooled_part_disturbed_throughout_is_set_aside_when_the_others_hold_enough_quiet_trials() {
        // One process: 8 quiet trials at 4.9 ns beside a probe of 32.5 us. The next: 12 trials
        // all kept although all were disturbed (53.6-58.8 us beside them), at 6.3 ns.
        let with_phases = |values: &[f64], taken: usize, disturbed: usize, phase: &[f64]| {
            let mut s = sampled(values, taken, disturbed);
            s.trials.as_mut().unwrap().phase_wide_ns = phase.to_vec();
            s
        };
        let quiet = with_phases(
            &[4.9, 4.92, 4.95, 4.9, 4.93, 4.91, 4.96, 4.9],
            8,
            0,
            &[32_518.0; 8],
        );
        let mut slow_phase = vec![57_215.0; 11];
        slow_phase.push(53_580.0);
        let busy = with_phases(&[6.3; 12], 12, 12, &slow_phase);
        let p = Summary::pooled(&[quiet.clone(), busy.clone()]).unwrap();
        assert_eq!(p.values.len(), 8);
        assert!(p.median < 5.0, "{}", p.median);
        let t = p.trials.as_ref().unwrap();
        assert_eq!((t.taken, t.kept, t.steal, t.disturbed), (20, 8, 0, 12));
        assert_eq!(t.phase_wide_ns, vec![32_518.0; 8]);
        assert!(t.note().contains("12 more set aside"), "{}", t.note());
        // Too few quiet trials to keep: all stay, and the spread shows the two phases.
        let few = with_phases(&[4.9; 5], 5, 0, &[32_518.0; 5]);
        let p = Summary::pooled(&[few, busy.clone()]).unwrap();
        assert_eq!(p.values.len(), 17);
        // Both processes in one phase: nothing set aside.
        let p = Summary::pooled(&[busy.clone(), busy]).unwrap();
        assert_eq!(p.trials.unwrap().kept, 24);
        // A part without its readings: nothing can be judged, all stay.
        let bare = sampled(&[6.3; 12], 12, 12);
        assert_eq!(Summary::pooled(&[quiet, bare]).unwrap().values.len(), 20);
    }

    #[test]
    fn odd_count_median_is_middle_value() {
        let s = Summary::from_samples(&[5.0, 1.0, 3.0, 2.0, 4.0], 1).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 5.0);
        assert_eq!(s.q1, 2.0);
        assert_eq!(s.q3, 4.0);
        assert_eq!(s.n, 5);
    }

    #[test]
    fn even_count_median_interpolates() {
        let s = Summary::from_samples(&[1.0, 2.0, 3.0, 4.0], 1).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(s.q1, 1.75);
        assert_eq!(s.q3, 3.25);
    }

    #[test]
    fn cv_matches_hand_computation() {
        // mean 5, sample variance = (9+1+1+9)/3 = 20/3
        let s = Summary::from_samples(&[2.0, 4.0, 6.0, 8.0], 1).unwrap();
        let expected = (20.0f64 / 3.0).sqrt() / 5.0;
        assert!((s.cv - expected).abs() < 1e-12);
    }

    #[test]
    fn constant_samples_have_no_spread_and_are_not_noisy() {
        let s = Summary::from_samples(&[7.0; 9], 100).unwrap();
        assert_eq!(s.cv, 0.0);
        assert_eq!(s.iqr(), 0.0);
        assert!(!s.is_noisy());
        assert_eq!(s.batch, 100);
    }

    #[test]
    fn wide_spread_is_flagged_noisy() {
        let s = Summary::from_samples(&[10.0, 10.0, 20.0, 30.0, 30.0], 1).unwrap();
        assert!(s.is_noisy());
    }

    #[test]
    fn empty_or_non_finite_input_gives_none() {
        assert!(Summary::from_samples(&[], 1).is_none());
        assert!(Summary::from_samples(&[1.0, f64::NAN], 1).is_none());
        assert!(Summary::from_samples(&[1.0, f64::INFINITY], 1).is_none());
    }

    #[test]
    fn ordering_invariant_holds() {
        let s = Summary::from_samples(&[3.3, 1.1, 9.9, 4.4, 2.2, 8.8, 5.5], 1).unwrap();
        assert!(s.min <= s.q1 && s.q1 <= s.median && s.median <= s.q3 && s.q3 <= s.max);
    }

    #[test]
    fn map_recomputes_every_statistic_from_the_mapped_samples() {
        let s = Summary::from_samples(&[10.0, 12.0, 14.0], 1).unwrap();
        let t = s.map(|x| x - 2.0).unwrap();
        assert_eq!(t.median, 10.0);
        assert_eq!(t.min, 8.0);
        assert_eq!(t.max, 12.0);
        // Absolute spread kept: sd 2 over mean 10 instead of over mean 12.
        assert!((t.cv - 0.2).abs() < 1e-12);
        assert_eq!(t.values, vec![8.0, 10.0, 12.0]);
    }

    #[test]
    fn a_unit_conversion_leaves_cv_unchanged() {
        // The schema-1 bug: ns -> us rescaled cv by old mean / new mean (x1000).
        let s = Summary::from_samples(&[1000.0, 1300.0, 900.0, 1100.0], 1).unwrap();
        let us = s.map(|ns| ns / 1e3).unwrap();
        assert!((us.cv - s.cv).abs() < 1e-12);
        assert!((us.cv - cv(&us.values)).abs() < 1e-12);
    }

    #[test]
    fn values_keep_the_order_they_were_taken_in() {
        let s = Summary::from_samples(&[3.0, 1.0, 2.0], 1).unwrap();
        assert_eq!(s.values, vec![3.0, 1.0, 2.0]);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn two_tight_clusters_far_apart_are_two_modes() {
        let v = [
            270.0, 17_600.0, 280.0, 265.0, 17_900.0, 275.0, 17_200.0, 290.0, 272.0,
        ];
        let [lo, hi] = two_modes(&v).expect("bimodal");
        assert_eq!(lo.n, 6);
        assert_eq!(hi.n, 3);
        assert!((lo.share - 6.0 / 9.0).abs() < 1e-12);
        assert_eq!(lo.median, 273.5);
        assert_eq!(hi.median, 17_600.0);
    }

    #[test]
    fn one_cluster_or_a_long_tail_is_not_bimodal() {
        let tight = [100.0, 101.0, 99.0, 100.5, 98.0, 102.0, 100.2];
        assert!(two_modes(&tight).is_none());
        // A geometric tail: every gap is as wide as the ranges around it.
        let tail = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0];
        assert!(two_modes(&tail).is_none());
        // A single outlier is not a mode (each side needs >= 2 and >= 15% of the samples).
        let outlier = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 10.1, 500.0];
        assert!(two_modes(&outlier).is_none());
        assert!(
            two_modes(&[1.0, 100.0, 1.0, 100.0]).is_none(),
            "too few samples"
        );
    }

    #[test]
    fn the_median_interval_has_the_textbook_ranks() {
        // 1-based (1, 8) for n = 8 (99.2%), (2, 8) for n = 9 (96.1%), (3, 10) for n = 12
        // (96.1%), (6, 15) for n = 20 (95.9%).
        assert_eq!(median_ci_ranks(5), None);
        assert_eq!(median_ci_ranks(6), Some((0, 5)));
        assert_eq!(median_ci_ranks(8), Some((0, 7)));
        assert_eq!(median_ci_ranks(9), Some((1, 7)));
        assert_eq!(median_ci_ranks(12), Some((2, 9)));
        assert_eq!(median_ci_ranks(20), Some((5, 14)));
        let v = [10.0, 11.0, 9.0, 10.0, 10.5, 9.5, 10.0, 10.2, 9.8];
        // Sorted: 9, 9.5, 9.8, 10, 10, 10, 10.2, 10.5, 11; ranks 1 and 7: 9.5 and 10.5.
        assert!((median_ci_pct(&v).unwrap() - 5.0).abs() < 1e-9);
        assert!(median_ci_pct(&v[..5]).is_none());
    }

    #[test]
    fn trials_summarise_by_their_medians_and_keep_their_batches() {
        let s = Summary::from_trials(vec![vec![1.0, 3.0, 2.0], vec![10.0, 12.0, 11.0]], 4, None)
            .unwrap();
        assert_eq!(s.values, vec![2.0, 11.0]);
        assert_eq!(s.n, 2);
        assert_eq!(s.batches.len(), 2);
        let doubled = s.map(|x| x * 2.0).unwrap();
        assert_eq!(doubled.values, vec![4.0, 22.0]);
        assert_eq!(doubled.batches[1], vec![20.0, 24.0, 22.0]);
        assert!(Summary::from_trials(vec![vec![]], 1, None).is_none());
    }

    #[test]
    fn jain_index_extremes() {
        assert!((jain_index(&[5.0, 5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[10.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        let mid = jain_index(&[3.0, 1.0]);
        assert!(mid > 0.5 && mid < 1.0);
    }
}
