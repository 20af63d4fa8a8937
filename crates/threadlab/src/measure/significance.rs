//! Tests of whether two sets of samples differ: pure functions, no I/O.
//!
//! - Mann-Whitney U (Wilcoxon rank-sum), two-sided: the test benchstat uses. It assumes nothing
//!   about the shape of the distributions, only that samples are independent. With no ties and
//!   n1 * n2 <= 10,000 the p-value is exact (the U distribution counted by dynamic programming);
//!   otherwise the normal approximation with the tie correction and a continuity correction.
//! - A percentile bootstrap interval for the ratio of two medians (criterion's approach for the
//!   change of a statistic), with a fixed seed so the same files give the same interval.
//! - Holm's step-down correction, for testing many metrics at once.
//! - A distribution-free interval for a median (the sign test's order statistics), for figures
//!   taken as paired rounds whose per-round ratio is the quantity of interest (doctor's A/B).

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
        i = j;
    }
    let u1 = rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let u = u1.min(n1f * n2f - u1);
    if tie_term == 0.0 && n1 * n2 <= 10_000 {
        return exact_two_sided(n1, n2, u);
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

/// A 95% percentile-bootstrap interval for median(b) / median(a), from `resamples` resamplings
/// of each set with a fixed seed. None when either set is empty or a median is not positive.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], resamples: usize) -> Option<(f64, f64)> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(0x7468_7265_6164_6c61); // "threadla"
    let mut ratios = Vec::with_capacity(resamples);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    for _ in 0..resamples {
        for x in ra.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        let (ma, mb) = (median(&ra), median(&rb));
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

/// A confidence interval for the median of `values` that assumes nothing about their
/// distribution: the order statistics x(k) and x(n + 1 - k), with k the largest for which
/// P(Binomial(n, 1/2) < k) stays within (1 - level) / 2 (the sign test's interval). Unlike a
/// bootstrap it is exact for any n, which matters for the 6-12 paired rounds an A/B takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianInterval {
    pub lo: f64,
    pub hi: f64,
    /// The interval's actual coverage (at least `level`): order statistics move in steps.
    pub coverage: f64,
}

/// The interval above at `level` (e.g. 0.95); None when there are too few values for that
/// level (fewer than 6 at 95%: even [min, max] covers only 1 - 2 / 2^n) or one is not finite.
pub fn median_interval(values: &[f64], level: f64) -> Option<MedianInterval> {
    let n = values.len();
    if n == 0 || n > 1000 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    // P(B = i) for B ~ Binomial(n, 1/2), summed from the bottom: tail[k] = P(B < k).
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let half_n = 0.5f64.powi(n as i32);
    let mut choose = 1.0f64; // C(n, i)
    let mut below = 0.0f64; // P(B < k) for the k under consideration
    let mut best: Option<usize> = None;
    for k in 1..=n / 2 {
        below += choose * half_n; // now P(B <= k - 1) = P(B < k)
        if below > (1.0 - level) / 2.0 {
            break;
        }
        best = Some(k);
        choose = choose * (n - (k - 1)) as f64 / k as f64;
    }
    let k = best?;
    // P(B < k) on each side, recomputed for the chosen k.
    let mut tail = 0.0f64;
    let mut c = 1.0f64;
    for i in 0..k {
        tail += c * half_n;
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    Some(MedianInterval {
        lo: sorted[k - 1],
        hi: sorted[n - k],
        coverage: 1.0 - 2.0 * tail,
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
        let i = median_interval(&v, 0.95).unwrap();
        assert_eq!((i.lo, i.hi), (2.0, 9.0));
        assert!((i.coverage - (1.0 - 2.0 * 11.0 / 1024.0)).abs() < 1e-12);
        // n = 6: only [min, max] reaches 95% (96.9%); the order given does not matter.
        let i = median_interval(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0], 0.95).unwrap();
        assert_eq!((i.lo, i.hi), (1.0, 6.0));
        assert!((i.coverage - 0.968_75).abs() < 1e-12);
        // n = 5: even [min, max] covers 93.75%, below 95%.
        assert!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95).is_none());
        assert!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.90).is_some());
        assert!(median_interval(&[1.0, f64::NAN, 3.0, 4.0, 5.0, 6.0], 0.95).is_none());
        assert!(median_interval(&[], 0.95).is_none());
        // The interval always contains the median and narrows (in ranks) as n grows.
        let v: Vec<f64> = (1..=40).map(f64::from).collect();
        let i = median_interval(&v, 0.95).unwrap();
        assert!(i.lo <= 20.5 && 20.5 <= i.hi && i.coverage >= 0.95);
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
