//! The rule that turns repeated runs per N into one answer: the start of the plateau.

use crate::measure::significance::bootstrap_ratio_ci;
use crate::measure::stats::median;

use super::PLATEAU_MARGIN;

/// Bootstrap resamples of the ratio of medians behind each N's interval (fixed seed: the same
/// runs always give the same interval).
const RESAMPLES: usize = 4_000;

/// Extra runs per close N, and how many times they may be added; a close call still undecided
/// after them is not on the plateau (its equivalence was not shown).
pub(super) const EXTRA_REPS: usize = 4;
pub(super) const EXTRA_ROUNDS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The 95% interval of time(N) / time(fastest) lies wholly within 1 + `PLATEAU_MARGIN`.
    Plateau,
    /// The interval lies wholly above 1 + `PLATEAU_MARGIN`.
    Slower,
    /// The interval straddles the margin: more runs may decide; until they do, not on the
    /// plateau.
    Close,
}

/// One N's verdict: its median time over the fastest N's, the 95% bootstrap interval of that
/// ratio, and where that puts it.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub n: usize,
    pub ratio: f64,
    pub ci: (f64, f64),
    pub standing: Standing,
}

/// The rule that picks the best N from repeated runs: the start of the plateau. `fastest` is
/// the N with the lowest median time; every N gets the 95% percentile-bootstrap interval of
/// median(N) / median(fastest) (fixed seed). An N is on the plateau when that interval lies
/// wholly below 1 + `PLATEAU_MARGIN` (an equivalence test with a stated margin), slower when it
/// lies wholly above, close otherwise. The answer is the smallest N on the plateau. A close N
/// below it gets more runs (`close_calls`); one still undecided after them is not on the
/// plateau: equivalence is claimed only where it was shown. Settling a close call by its median
/// instead let an N whose penalty sits near the margin (N = 2 at +3-16% on a 2-vCPU guest, its
/// interval mostly straddling 5%) win in 4 of 31 runs; taking it as not shown, the same 31
/// runs' intervals give one answer in 30.
///
/// Two exceptions, for N that noise alone keeps from being shown (`not_told_apart`): a close N
/// just below the first shown whose median is within the margin and whose interval reaches 1
/// (no difference from the fastest shown at all), and, where no N but the fastest is shown, two
/// or more close N below it whose intervals reach 1 (the smallest of them with its median within
/// the margin).
pub fn best_concurrency(points: &[(usize, Vec<f64>)]) -> Option<Best> {
    let tagged: Vec<Tagged> = points
        .iter()
        .map(|(n, v)| (*n, v.iter().map(|&x| (0, x)).collect()))
        .collect();
    best_in_windows(&tagged)
}

/// One N and its runs, each tagged with the sweep that took it: 0 for the first (every N),
/// k for the k-th round of extra runs (the close N and the fastest).
pub type Tagged = (usize, Vec<(usize, f64)>);

/// `best_concurrency` over runs taken in several sweeps, each N read against the fastest only
/// in the sweeps both took part in, and the fastest chosen on the first sweep, which every N
/// took part in. The extra runs come seconds later, when the host may be in another phase:
/// read against runs that did not share it, they move an N by the host's change. On a 2-vCPU
/// Intel Xeon guest uthread's N = 2, 3 and 4 were run again while the host was 20% slower than
/// in the first sweep, and the unthrottled run, which was not, then read 7-10% faster than all
/// of them: the answer was "no throttle" in 2 of 8 runs, and N = 2 in the other six.
pub fn best_in_windows(points: &[Tagged]) -> Option<Best> {
    let of = |i: usize, sweeps: &dyn Fn(usize) -> bool| -> Vec<f64> {
        points[i]
            .1
            .iter()
            .filter(|(s, _)| sweeps(*s))
            .map(|&(_, x)| x)
            .collect()
    };
    let first: Vec<f64> = (0..points.len())
        .map(|i| {
            let v = of(i, &|s| s == 0);
            if v.is_empty() {
                f64::NAN
            } else {
                median(&v)
            }
        })
        .collect();
    let (fi, _) = first
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_finite() && **m > 0.0)
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    let took_part = |i: usize, s: usize| points[i].1.iter().any(|&(t, _)| t == s);
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|&i| points[i].0);
    let band = 1.0 + PLATEAU_MARGIN;
    let verdicts: Vec<Verdict> = order
        .iter()
        .map(|&i| {
            // Both sides from the sweeps both took part in.
            let fastest = of(fi, &|s| took_part(i, s));
            let this = of(i, &|s| took_part(fi, s));
            let ratio = if i == fi || this.is_empty() || fastest.is_empty() {
                1.0
            } else {
                median(&this) / median(&fastest)
            };
            let ci = if i == fi {
                (1.0, 1.0)
            } else {
                bootstrap_ratio_ci(&fastest, &this, RESAMPLES).unwrap_or((ratio, ratio))
            };
            let standing = if i == fi || ci.1 <= band {
                Standing::Plateau
            } else if ci.0 > band {
                Standing::Slower
            } else {
                Standing::Close
            };
            Verdict {
                n: points[i].0,
                ratio,
                ci,
                standing,
            }
        })
        .collect();
    let shown = verdicts.iter().find(|v| v.standing == Standing::Plateau)?.n;
    Some(Best {
        n: not_told_apart(&verdicts, shown, points[fi].0).unwrap_or(shown),
        shown,
        fastest_n: points[fi].0,
        verdicts,
    })
}

/// The smallest N below the first shown on the plateau that noise alone kept off it, if any:
///
/// * the close N just below `shown` (each of them, down to this one) whose median is within the
///   margin and whose interval reaches 1: told apart from the fastest neither way. On a 2-vCPU
///   guest N = 3 and N = 4 read within 0-4% of each other run after run, and whichever the noise
///   made fastest was the answer: N = 4, with N = 3 at +0.4% [-5.7%, +8.0%], in 5 of 15 `run
///   throttle`; with this, 1 of 15, and N = 2 (+6% to +56%, its interval above 1 in all 15)
///   never;
/// * where equivalence was shown for no N but the fastest itself, and two or more N below it are
///   not shown different from it at all (their intervals reach 1): the smallest of those whose
///   median is within the margin. The plateau then spans several N, and the fastest is whichever
///   of them the noise favoured: on a 2-vCPU guest whose speed moved 25-67% within a run, N = 3,
///   4, 8 and 64 all read within 4% of the unthrottled run but each interval reached past 5% (N
///   = 3: +0.7% [-1.8%, +14.8%]), and the answer was 65 in 3 of 30 quick runs, 3 in 26. The
///   median is asked to be within the margin because an N with a real penalty of about twice the
///   margin can still have an interval that reaches 1: on a 2-vCPU Intel Xeon guest N = 2 read
///   +8.6% [-0.4%, +17.4%] and +11.5% [-1.4%, +19.7%] beside N = 3 at +1.6% and +3.3%, and taking
///   the smallest regardless answered 2 in two runs and 3 in the third.
///
/// An N with a real penalty stays apart (N = 2 there: +34.6% [+28.2%, +41.3%]), and so does a
/// close N whose interval lies above 1 (`a_close_call_shown_slower_is_not_on_the_plateau`).
fn not_told_apart(verdicts: &[Verdict], shown: usize, fastest: usize) -> Option<usize> {
    let band = 1.0 + PLATEAU_MARGIN;
    let within = verdicts
        .iter()
        .rev()
        .filter(|v| v.n < shown)
        .take_while(|v| v.standing == Standing::Close && v.ratio <= band && v.ci.0 <= 1.0)
        .last()
        .map(|v| v.n);
    let spread = if shown == fastest {
        let together: Vec<&Verdict> = verdicts
            .iter()
            .filter(|v| v.n < fastest && v.standing == Standing::Close && v.ci.0 <= 1.0)
            .collect();
        together
            .iter()
            .find(|v| v.ratio <= band)
            .filter(|_| together.len() >= 2)
            .map(|v| v.n)
    } else {
        None
    };
    within.into_iter().chain(spread).min()
}

/// What `best_concurrency` found: the answer, the fastest N, and every N's verdict (ascending).
#[derive(Debug)]
pub struct Best {
    pub n: usize,
    /// The smallest N shown on the plateau (the fastest, where no other was): `n` unless the
    /// rule took an N below it that was not told apart from the fastest.
    pub shown: usize,
    pub fastest_n: usize,
    pub verdicts: Vec<Verdict>,
}

impl Best {
    pub(super) fn verdict(&self, n: usize) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.n == n)
    }

    /// The close N below the answer: the ones whose extra runs could change it.
    pub fn close_calls(&self) -> Vec<usize> {
        self.verdicts
            .iter()
            .filter(|v| v.n < self.shown && v.standing == Standing::Close)
            .map(|v| v.n)
            .collect()
    }
}

/// The rule in words, for notes and the conclusion.
pub fn rule_text() -> String {
    format!(
        "the start of the plateau: the smallest N whose median time is within {:.0}% of the \
         fastest N's with 95% confidence (a bootstrap interval of the ratio of medians wholly \
         below {:.2}); an N whose interval straddles the margin is run {EXTRA_REPS} more times \
         with the fastest (at most {EXTRA_ROUNDS} times; each N is read against the fastest's \
         runs of the same rounds, the fastest chosen on the first), and is not on the plateau \
         if it still straddles, unless its \
         median is within the margin and its interval reaches 1 (not told apart from the \
         fastest at all; likewise each N between it and the plateau); where no N but the \
         fastest is shown on it and two or more below it are not shown apart from it at all \
         (their intervals reach 1), the smallest of those whose median is within the margin",
        PLATEAU_MARGIN * 100.0,
        1.0 + PLATEAU_MARGIN
    )
}

/// A pool size from the topology alone: physical cores among the CPUs we may use, capped by a
/// cgroup CPU quota (the server experiment sizes its pool design with it, before any throttle
/// run could say more).
pub fn recommended_pool(physical_allowed: usize, cgroup_cpus: Option<f64>) -> usize {
    let cap = cgroup_cpus.map_or(usize::MAX, |c| (c.floor() as usize).max(1));
    physical_allowed.min(cap).max(1)
}

/// "+9.8% [+7.1%, +12.4%] slower": an N's ratio to the fastest, its interval, its standing.
pub(super) fn verdict_text(v: &Verdict) -> String {
    let pct = |x: f64| (x - 1.0) * 100.0;
    format!(
        "{:+.1}% [{:+.1}%, {:+.1}%] {}",
        pct(v.ratio),
        pct(v.ci.0),
        pct(v.ci.1),
        match v.standing {
            Standing::Plateau => "plateau",
            Standing::Slower => "slower",
            Standing::Close => "close",
        }
    )
}
