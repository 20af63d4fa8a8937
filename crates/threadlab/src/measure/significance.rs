//! Tests of whether two sets of samples differ: pure functions, no I/O.
//!
//! - Mann-Whitney U (Wilcoxon rank-sum), two-sided: the test benchstat uses. It assumes nothing
//!   about the shape of the distributions, only that samples are independent. With no ties and
//!   n1 * n2 <= 10,000 the p-value is exact (the U distribution counted by dynamic programming);
//!   otherwise the normal approximation with the tie correction and a continuity correction.
//! - A percentile bootstrap interval for the ratio of two medians (criterion's approach for the
//!   change of a statistic), with a fixed seed so the same files give the same interval.
//! - Holm's step-down correction, for testing many metrics at once.
//! - A distribution-free interval for a median (the sign test's order statistics, at the ranks
//!   `stats::median_ci_ranks` gives), for figures taken as paired rounds whose per-round ratio
//!   is the quantity of interest (doctor's A/B).

use crate::measure::stats::median;

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b`. 1.0 when either is empty.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // Ranks of the pooled samples, ties sharing their mean rank.
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0; // sum of t^3 - t over tie groups
                            // Every value's rank doubled (a tie's mean rank times two is a whole number).
    let mut doubled = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && pooled[j].0 == pooled[i].0 {
            j += 1;
        }
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += pooled[i..j].iter().filter(|p| p.1).count() as f64 * mean_rank;
        doubled.extend(std::iter::repeat(i + 1 + j).take(j - i));
        i = j;
    }
    let u1 = rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let u = u1.min(n1f * n2f - u1);
    if tie_term == 0.0 && n1 * n2 <= 10_000 {
        return exact_two_sided(n1, n2, u);
    }
    if n <= EXACT_WITH_TIES_MAX {
        return exact_two_sided_tied(&doubled, n1, (2.0 * rank_sum_a).round() as usize);
    }
    let nf = n1f + n2f;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0; // every value equal
    }
    let mean = n1f * n2f / 2.0;
    let z = ((mean - u) - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// Up to this many values in all, a test with ties takes the exact distribution of the rank
/// sum given the ties (every way of choosing which n1 of the pooled ranks are A's), not the
/// normal approximation: with 8 trials a side and one tie, the approximation gives a complete
/// separation p = 7.8e-4 instead of 1.6e-4, which Holm's correction over a quick run's metrics
/// then lifts past 0.05, so a 20% change went untested.
const EXACT_WITH_TIES_MAX: usize = 60;

/// Two-sided p of a rank sum `observed` (doubled ranks) of `n1` values drawn from `doubled`,
/// the pooled ranks doubled: the probability, over every choice of n1 of them, of a sum at
/// least as far from its mean. Counted by dynamic programming over (values chosen, sum).
fn exact_two_sided_tied(doubled: &[usize], n1: usize, observed: usize) -> f64 {
    let max_sum: usize = doubled.iter().sum();
    // ways[k][s]: choices of k of the ranks seen so far with doubled sum s.
    let mut ways = vec![vec![0.0f64; max_sum + 1]; n1 + 1];
    ways[0][0] = 1.0;
    for &r in doubled {
        for k in (1..=n1).rev() {
            let (lower, upper) = ways.split_at_mut(k);
            let (from, to) = (&lower[k - 1], &mut upper[0]);
            for s in (r..=max_sum).rev() {
                to[s] += from[s - r];
            }
        }
    }
    let counts = &ways[n1];
    let total: f64 = counts.iter().sum();
    let mean = n1 as f64 * (doubled.len() + 1) as f64; // doubled: 2 * n1 * (n + 1) / 2
    let far = (observed as f64 - mean).abs() - 1e-9;
    let tail: f64 = counts
        .iter()
        .enumerate()
        .filter(|(s, _)| (*s as f64 - mean).abs() >= far)
        .map(|(_, c)| c)
        .sum();
    (tail / total).min(1.0)
}

/// P(U <= u) * 2 under the null hypothesis, from the exact distribution of U.
fn exact_two_sided(n1: usize, n2: usize, u: f64) -> f64 {
    // counts[k] = number of arrangements with U = k, built by adding one sample at a time:
    // f(m, n, k) = f(m - 1, n, k - n) + f(m, n - 1, k).
    let max_u = n1 * n2;
    // table[n][k] for the current m.
    let mut prev: Vec<Vec<f64>> = (0..=n2)
        .map(|_| {
            let mut v = vec![0.0; max_u + 1];
            v[0] = 1.0;
            v
        })
        .collect();
    for m in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max_u + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for n in 1..=n2 {
            for k in 0..=m * n {
                let mut c = cur[n - 1][k];
                if k >= n {
                    c += prev[n][k - n];
                }
                cur[n][k] = c;
            }
        }
        prev = cur;
    }
    let counts = &prev[n2];
    let total: f64 = counts.iter().sum();
    let upto = u.floor() as usize;
    let tail: f64 = counts[..=upto.min(max_u)].iter().sum();
    (2.0 * tail / total).min(1.0)
}

/// 1 - Phi(z) for z >= 0 (Abramowitz & Stegun 7.1.26 through erfc; error < 1.5e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    0.5 * poly * (-x * x).exp()
}

/// Above this many values a side, a resample's median is drawn from its exact distribution
/// instead of being built value by value, so the cost of an interval stops growing with n.
pub const BUILT_RESAMPLE_MAX: usize = 1_000;

/// A 95% percentile-bootstrap interval for median(b) / median(a), from `resamples` resamplings
/// of each set with a fixed seed. None when either set is empty or a median is not positive.
///
/// A side of up to `BUILT_RESAMPLE_MAX` values is resampled value by value (n draws and a sort
/// per resample). A larger side costs one sort, then a constant per resample: the median of n
/// values drawn with replacement from the sorted sample x is x[floor(n U)] for U the k-th
/// smallest of n uniforms, which is Beta(k, n + 1 - k) distributed (k the median's rank), so
/// it is drawn directly; for even n the next order statistic follows from the smallest of the
/// n - k uniforms above it. Same distribution, exactly; docs/compare.md states the rule.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], resamples: usize) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(0x7468_7265_6164_6c61); // "threadla"
    let mut ratios = Vec::with_capacity(resamples);
    let (mut side_a, mut side_b) = (Side::new(a), Side::new(b));
    for _ in 0..resamples {
        let ma = side_a.resampled_median(&mut rng);
        let mb = side_b.resampled_median(&mut rng);
        if ma > 0.0 && mb.is_finite() {
            ratios.push(mb / ma);
        }
    }
    if ratios.len() < resamples / 2 {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let lo = crate::measure::stats::quantile_sorted(&ratios, 0.025);
    let hi = crate::measure::stats::quantile_sorted(&ratios, 0.975);
    Some((lo, hi))
}

/// One sample set, ready to be resampled.
enum Side<'a> {
    /// Small: resampled value by value into the scratch buffer.
    Built {
        values: &'a [f64],
        scratch: Vec<f64>,
    },
    /// Large: sorted once; a resample's median is drawn from its distribution.
    Drawn { sorted: Vec<f64> },
}

impl<'a> Side<'a> {
    fn new(values: &'a [f64]) -> Side<'a> {
        if values.len() <= BUILT_RESAMPLE_MAX {
            return Side::Built {
                values,
                scratch: vec![0.0; values.len()],
            };
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Side::Drawn { sorted }
    }

    fn resampled_median(&mut self, rng: &mut SplitMix64) -> f64 {
        match self {
            Side::Built { values, scratch } => {
                for x in scratch.iter_mut() {
                    *x = values[rng.below(values.len())];
                }
                median(scratch)
            }
            Side::Drawn { sorted } => drawn_median(sorted, rng),
        }
    }
}

/// The median of a resample (n draws with replacement) of `sorted`, drawn in constant time.
fn drawn_median(sorted: &[f64], rng: &mut SplitMix64) -> f64 {
    let n = sorted.len();
    let at = |u: f64| sorted[((u * n as f64) as usize).min(n - 1)];
    // The median's rank (1-based): the middle one, or the lower of the two middle ones.
    let k = n.div_ceil(2);
    let u = beta(k as f64, (n + 1 - k) as f64, rng);
    if n % 2 == 1 {
        return at(u);
    }
    // The (k+1)-th: the smallest of the n - k uniforms above u.
    let v = 1.0 - rng.unit();
    let next = u + (1.0 - u) * (1.0 - v.powf(1.0 / (n - k) as f64));
    (at(u) + at(next)) / 2.0
}

/// A Beta(a, b) variate (a, b >= 1) as G_a / (G_a + G_b).
fn beta(a: f64, b: f64, rng: &mut SplitMix64) -> f64 {
    let x = gamma(a, rng);
    let y = gamma(b, rng);
    x / (x + y)
}

/// A Gamma(shape, 1) variate for shape >= 1 (Marsaglia and Tsang, 2000: a squeeze on a cubed
/// normal, accepted ~98% of the time or more).
fn gamma(shape: f64, rng: &mut SplitMix64) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.unit();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// A standard normal variate (Box-Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.unit();
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Holm's step-down adjustment of p-values (same order as given): the smallest p is multiplied
/// by m, the next by m - 1, ..., each kept at least as large as the one before, capped at 1.
pub fn holm_adjust(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (k, &i) in order.iter().enumerate() {
        let v = ((m - k) as f64 * p[i]).min(1.0);
        running = running.max(v);
        adjusted[i] = running;
    }
    adjusted
}

/// A distribution-free 95% confidence interval for the median of `values`, at the order
/// statistics `stats::median_ci_ranks` gives (the sign test's interval: exact for any n, which
/// matters for the 6-12 paired rounds an A/B takes, where a bootstrap understates the width).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianInterval {
    pub lo: f64,
    pub hi: f64,
}

/// The interval above; None for fewer than 6 values (even [min, max] then covers less than
/// 95%) or a value that is not finite.
pub fn median_interval(values: &[f64]) -> Option<MedianInterval> {
    if values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let (lo, hi) = crate::measure::stats::median_ci_ranks(values.len())?;
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(MedianInterval {
        lo: sorted[lo],
        hi: sorted[hi],
    })
}

/// A small, fast, seedable generator (Steele, Lea & Flood's SplitMix64).
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0), by Lemire's multiply-shift (bias below 2^-32 for small n).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_p_values_match_the_tables() {
        // n1 = n2 = 5, complete separation: U = 0, two-sided p = 2 / C(10, 5) = 2/252.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
        assert!((mann_whitney_p(&b, &a) - 2.0 / 252.0).abs() < 1e-12);
        // n1 = n2 = 3, separated: p = 2 / 20 = 0.1 (never below 0.05 with 3 vs 3).
        assert!((mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) - 0.1).abs() < 1e-12);
        // Interleaved samples: no evidence of a difference.
        let p = mann_whitney_p(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        assert!(p > 0.5, "{p}");
    }

    #[test]
    fn ties_in_small_samples_take_the_exact_distribution() {
        // 8 against 8, completely separated, with a tie on each side: exactly 2 of the
        // C(16, 8) = 12,870 ways to split the ranks are as extreme.
        let a = [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        let b = [11.0, 12.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0];
        let p = mann_whitney_p(&a, &b);
        assert!((p - 2.0 / 12_870.0).abs() < 1e-12, "{p}");
        // Without ties it agrees with the untied exact test.
        let (x, y) = ([1.0, 2.0, 4.0, 7.0, 8.0], [3.0, 5.0, 6.0, 9.0, 10.0]);
        let untied = mann_whitney_p(&x, &y);
        let mut doubled: Vec<usize> = (1..=10).map(|r| 2 * r).collect();
        doubled.sort();
        let rank_sum_x = 2 * (1 + 2 + 4 + 7 + 8);
        assert!((exact_two_sided_tied(&doubled, 5, rank_sum_x) - untied).abs() < 1e-12);
        // Everything tied: no evidence either way.
        assert_eq!(mann_whitney_p(&[3.0; 6], &[3.0; 6]), 1.0);
        // Interleaved with ties: far from significant.
        // (by enumeration: 20 of the 70 splits are as far from the mean rank sum).
        let p = mann_whitney_p(&[1.0, 2.0, 2.0, 4.0], &[2.0, 3.0, 4.0, 5.0]);
        assert!((p - 20.0 / 70.0).abs() < 1e-12, "{p}");
    }

    #[test]
    fn normal_approximation_with_ties() {
        let a: Vec<f64> = (0..40).map(|i| (i % 10) as f64).collect();
        let b: Vec<f64> = (0..40).map(|i| (i % 10) as f64 + 5.0).collect();
        let p = mann_whitney_p(&a, &b);
        assert!(p < 1e-6, "{p}");
        let same = mann_whitney_p(&a, &a);
        assert!(same > 0.9, "{same}");
        assert_eq!(mann_whitney_p(&[1.0; 20], &[1.0; 20]), 1.0);
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
    }

    #[test]
    fn bootstrap_interval_covers_the_ratio() {
        let a: Vec<f64> = (0..11).map(|i| 100.0 + i as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.3).collect();
        let (lo, hi) = bootstrap_ratio_ci(&a, &b, 2000).unwrap();
        assert!(lo <= 1.3 && 1.3 <= hi, "{lo}..{hi}");
        assert!(lo > 1.2 && hi < 1.4, "{lo}..{hi}");
        // Same seed, same answer.
        assert_eq!(
            bootstrap_ratio_ci(&a, &b, 2000),
            bootstrap_ratio_ci(&a, &b, 2000)
        );
        assert!(bootstrap_ratio_ci(&[], &b, 100).is_none());
    }

    #[test]
    fn drawn_resample_medians_have_the_distribution_of_built_ones() {
        // The same sample resampled both ways: the quantiles of the two sets of medians agree.
        for n in [1501usize, 1500] {
            let mut r = SplitMix64(7);
            let values: Vec<f64> = (0..n).map(|_| (r.unit() * 3.0).exp()).collect();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let mut built = Side::Built {
                values: &values,
                scratch: vec![0.0; n],
            };
            let mut rng = SplitMix64(11);
            let mut by_building: Vec<f64> = (0..3000)
                .map(|_| built.resampled_median(&mut rng))
                .collect();
            let mut by_drawing: Vec<f64> =
                (0..3000).map(|_| drawn_median(&sorted, &mut rng)).collect();
            by_building.sort_by(f64::total_cmp);
            by_drawing.sort_by(f64::total_cmp);
            let q = crate::measure::stats::quantile_sorted;
            let spread = q(&by_building, 0.975) - q(&by_building, 0.025);
            for p in [0.025, 0.25, 0.5, 0.75, 0.975] {
                let (x, y) = (q(&by_building, p), q(&by_drawing, p));
                assert!(
                    (x - y).abs() < 0.1 * spread,
                    "n {n}, quantile {p}: built {x}, drawn {y} (95% range {spread})"
                );
            }
        }
    }

    #[test]
    fn a_bootstrap_of_many_values_costs_a_sort_not_n_per_resample() {
        // 200,000 values a side and 10,000 resamples: built value by value this is 4e9 draws
        // (minutes); drawn, it is two sorts. The test would hang, not fail, without the rule.
        let a: Vec<f64> = (0..200_000).map(|i| 100.0 + (i % 97) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 2.0).collect();
        let (lo, hi) = bootstrap_ratio_ci(&a, &b, 10_000).unwrap();
        assert!(lo <= 2.0 && 2.0 <= hi && hi - lo < 0.05, "{lo}..{hi}");
    }

    #[test]
    fn beta_draws_have_the_mean_and_variance_of_beta() {
        let mut rng = SplitMix64(3);
        for (a, b) in [(1.0, 1.0), (3.0, 7.0), (5000.0, 5001.0)] {
            let xs: Vec<f64> = (0..20_000).map(|_| beta(a, b, &mut rng)).collect();
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
            let (m, v) = (a / (a + b), a * b / ((a + b).powi(2) * (a + b + 1.0)));
            assert!(
                (mean - m).abs() < 4.0 * (v / 20_000.0).sqrt(),
                "{a},{b}: mean {mean}"
            );
            assert!((var / v - 1.0).abs() < 0.05, "{a},{b}: var {var} vs {v}");
        }
    }

    #[test]
    fn holm_multiplies_in_step_down_order() {
        let adj = holm_adjust(&[0.01, 0.04, 0.03, 0.5]);
        assert!((adj[0] - 0.04).abs() < 1e-12); // 4 x 0.01
        assert!((adj[2] - 0.09).abs() < 1e-12); // 3 x 0.03
        assert!((adj[1] - 0.09).abs() < 1e-12); // max(2 x 0.04, 0.09)
        assert!((adj[3] - 0.5).abs() < 1e-12);
        assert!(holm_adjust(&[]).is_empty());
    }

    #[test]
    fn median_interval_uses_the_sign_tests_order_statistics() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        // n = 10: P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2) = 56/1024, so x(2)..x(9).
        let i = median_interval(&v).unwrap();
        assert_eq!((i.lo, i.hi), (2.0, 9.0));
        // n = 6: only [min, max] reaches 95%; the order given does not matter.
        let i = median_interval(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]).unwrap();
        assert_eq!((i.lo, i.hi), (1.0, 6.0));
        // n = 5: even [min, max] covers 93.75%, below 95%.
        assert!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]).is_none());
        assert!(median_interval(&[1.0, f64::NAN, 3.0, 4.0, 5.0, 6.0]).is_none());
        assert!(median_interval(&[]).is_none());
        let v: Vec<f64> = (1..=40).map(f64::from).collect();
        let i = median_interval(&v).unwrap();
        assert_eq!((i.lo, i.hi), (14.0, 27.0));
    }

    #[test]
    fn splitmix_is_uniform_enough() {
        let mut r = SplitMix64(1);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[r.below(4)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
        let u = r.unit();
        assert!((0.0..1.0).contains(&u));
    }
}
