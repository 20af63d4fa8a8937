//! Order statistics over samples: median, quartiles, extremes and coefficient of variation.

use serde::{Deserialize, Serialize};

/// A metric whose IQR exceeds this fraction of its median is flagged noisy.
pub const NOISY_IQR_FRACTION: f64 = 0.10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    /// Operations per sample (each sample is a batch mean); 1 when samples are single events.
    pub batch: u64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub q1: f64,
    pub q3: f64,
    pub mean: f64,
    /// Standard deviation / mean (sample standard deviation, n - 1).
    pub cv: f64,
}

impl Summary {
    /// Summarises samples; None when there are none or any is not finite.
    pub fn from_samples(samples: &[f64], batch: u64) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(|a, b| a.partial_cmp(b).expect("finite values compare"));
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let cv = if mean != 0.0 {
            var.sqrt() / mean.abs()
        } else {
            0.0
        };
        Some(Summary {
            n,
            batch,
            median: quantile_sorted(&v, 0.5),
            min: v[0],
            max: v[n - 1],
            q1: quantile_sorted(&v, 0.25),
            q3: quantile_sorted(&v, 0.75),
            mean,
            cv,
        })
    }

    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }

    /// Wide spread: IQR over 10% of the median. Such a metric is shown flagged, not hidden.
    pub fn is_noisy(&self) -> bool {
        self.median != 0.0 && self.iqr() / self.median.abs() > NOISY_IQR_FRACTION
    }

    /// Same summary with every statistic passed through `f` (e.g. subtracting an overhead,
    /// or converting per-round-trip to per-switch). `f` must be monotonic non-decreasing.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Summary {
        let mean = f(self.mean);
        let scale = if self.mean != 0.0 && mean != 0.0 {
            // cv is relative: keep the absolute spread, re-express it relative to the new mean.
            self.mean.abs() / mean.abs()
        } else {
            1.0
        };
        Summary {
            n: self.n,
            batch: self.batch,
            median: f(self.median),
            min: f(self.min),
            max: f(self.max),
            q1: f(self.q1),
            q3: f(self.q3),
            mean,
            cv: self.cv * scale,
        }
    }
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
    fn map_subtracts_and_keeps_order() {
        let s = Summary::from_samples(&[10.0, 12.0, 14.0], 1).unwrap();
        let t = s.map(|x| x - 2.0);
        assert_eq!(t.median, 10.0);
        assert_eq!(t.min, 8.0);
        assert_eq!(t.max, 12.0);
        // Absolute spread kept: sd 2 over mean 10 instead of over mean 12.
        assert!((t.cv - 0.2).abs() < 1e-12);
    }

    #[test]
    fn jain_index_extremes() {
        assert!((jain_index(&[5.0, 5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[10.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        let mid = jain_index(&[3.0, 1.0]);
        assert!(mid > 0.5 && mid < 1.0);
    }
}
