//! The rule that turns repeated runs per N into one answer: the start of the plateau.

use crate::measure::significance::median_interval;
use crate::measure::stats::median;

use super::PLATEAU_MARGIN;

/// Extra runs per close N, and how many times they may be added; a close call still undecided
/// after them is not on the plateau (its equivalence was not shown).
pub(super) const EXTRA_REPS: usize = 4;
pub(super) const EXTRA_ROUNDS: usize = 2;
/// Rounds after those for the unsettled N only (`Best::to_run_again`): the smallest close N
/// whose median is within the margin; one of them where an exception takes it.
pub(super) const SETTLE_ROUNDS: usize = 3;

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

/// One N's verdict: its time over the fastest N's (the median of the run-by-run ratios), the
/// 95% interval of that median, and where that puts it.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub n: usize,
    pub ratio: f64,
    pub ci: (f64, f64),
    pub standing: Standing,
}

impl Verdict {
    /// Its interval reaches 1: not told apart from the fastest at all, what the rule's
    /// exceptions ask of an N they take.
    pub fn reaches_one(&self) -> bool {
        self.ci.0 <= 1.0
    }
}

/// One run of an N, and when it was taken: `round` 0 is the first sweep (every N), k the k-th
/// round of extra runs (the close N and the fastest); `rep` its repetition within the round.
/// Every N of a round runs once per repetition, one after the other, so the runs of one
/// (round, rep) were taken within a second of each other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub round: usize,
    pub rep: usize,
    pub seconds: f64,
}

/// One N and its runs.
pub type Tagged = (usize, Vec<Run>);

/// `best_paired` over runs of one sweep, given in the order of its repetitions: value k of
/// every N was taken in repetition k.
pub fn best_concurrency(points: &[(usize, Vec<f64>)]) -> Option<Best> {
    let tagged: Vec<Tagged> = points
        .iter()
        .map(|(n, v)| {
            let runs = v
                .iter()
                .enumerate()
                .map(|(rep, &seconds)| Run {
                    round: 0,
                    rep,
                    seconds,
                })
                .collect();
            (*n, runs)
        })
        .collect();
    best_paired(&tagged)
}

/// The rule that picks the best N from repeated runs: the start of the plateau.
///
/// * The fastest N is the one with the lowest median time in the first sweep, which every N
///   took part in.
/// * Every other N is read against it run by run: each of its runs over the fastest's run of
///   the same round and repetition, taken within a second of it. Its ratio is the median of
///   those ratios, with the sign test's distribution-free 95% interval of that median (from 6
///   pairs; with fewer, the range of the ratios, which then covers less).
/// * An N is on the plateau when that interval lies wholly below 1 + `PLATEAU_MARGIN` (an
///   equivalence test with a stated margin), slower when it lies wholly above, close otherwise.
///   The answer is the smallest N on the plateau. A close N below it gets more runs
///   (`Best::to_run_again`); one still undecided after them is not on the plateau:
///   equivalence is claimed only where it was shown.
///
/// Why run by run: on a shared VM the host's speed moves by tens of per cent within a run (one
/// quick suite's runs of N = 4 read 75.8 to 111.6 ms), and every N of a repetition meets the
/// same phase, so the ratio of two runs a second apart carries the N's cost and little of the
/// host's. Read as two independent sets (the ratio of the medians, with a bootstrap interval
/// of it), the phases stayed in: on a 2-vCPU Intel Xeon guest N = 2 read +3.1% [-0.2%,
/// +16.0%] beside N = 4 in a run whose repetitions moved from 80 to 110 ms, and the answer was
/// 2; its run-by-run ratios read +8.1% [+2.6%, +10.6%]. The 34 runs on record on that guest
/// (2026-11-27) had answered 3 in 29 (4 in 3, 2 in 2) and uthread 2 in 31; their runs read
/// again run by run answer 3 in 34 and 2 in 34 (the extra runs as they were taken: the new
/// reading could have asked for others).
///
/// Settling a close call by its median instead let an N whose penalty sits near the margin (N
/// = 2 at +3-16% on a 2-vCPU guest, its interval mostly straddling 5%) win in 4 of 31 runs;
/// taking it as not shown, the same 31 runs' intervals gave one answer in 30.
///
/// Two exceptions, for N that noise alone keeps from being shown (`not_told_apart`): a close N
/// just below the first shown whose median is within the margin and whose interval reaches 1
/// (no difference from the fastest shown at all), and, where no N but the fastest is shown, two
/// or more close N below it whose intervals reach 1 (the smallest of them with its median within
/// the margin).
pub fn best_paired(points: &[Tagged]) -> Option<Best> {
    let first: Vec<f64> = points
        .iter()
        .map(|(_, runs)| {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.round == 0)
                .map(|r| r.seconds)
                .collect();
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
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|&i| points[i].0);
    let verdicts: Vec<Verdict> = order
        .iter()
        .map(|&i| {
            if i == fi {
                return Verdict {
                    n: points[i].0,
                    ratio: 1.0,
                    ci: (1.0, 1.0),
                    standing: Standing::Plateau,
                };
            }
            verdict(points[i].0, &points[i].1, &points[fi].1)
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

/// Each run of `this` over the run of `base` with the same round and repetition.
fn paired_ratios(this: &[Run], base: &[Run]) -> Vec<f64> {
    this.iter()
        .filter_map(|r| {
            base.iter()
                .find(|f| f.round == r.round && f.rep == r.rep)
                .filter(|f| f.seconds > 0.0 && r.seconds.is_finite())
                .map(|f| r.seconds / f.seconds)
        })
        .collect()
}

/// One set of runs read against another run by run.
#[derive(Debug, Clone, Copy)]
pub struct Paired {
    /// The median of the ratios of runs of the same round and repetition.
    pub ratio: f64,
    /// Its 95% interval: the sign test's from 6 pairs; with fewer, the range of the ratios,
    /// which then covers less.
    pub ci: (f64, f64),
    /// How many pairs there were.
    pub pairs: usize,
}

/// `this` over `base`, run by run (`Paired`); None without a pair.
pub fn paired(this: &[Run], base: &[Run]) -> Option<Paired> {
    let ratios = paired_ratios(this, base);
    if ratios.is_empty() {
        return None;
    }
    let ci = match median_interval(&ratios) {
        Some(m) => (m.lo, m.hi),
        None => ratios
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            }),
    };
    Some(Paired {
        ratio: median(&ratios),
        ci,
        pairs: ratios.len(),
    })
}

/// An N's verdict from its runs read against the fastest's. No pairs: not shown either way.
fn verdict(n: usize, this: &[Run], fastest: &[Run]) -> Verdict {
    let Some(p) = paired(this, fastest) else {
        return Verdict {
            n,
            ratio: f64::NAN,
            ci: (f64::NAN, f64::NAN),
            standing: Standing::Close,
        };
    };
    let band = 1.0 + PLATEAU_MARGIN;
    let standing = if p.ci.1 <= band {
        Standing::Plateau
    } else if p.ci.0 > band {
        Standing::Slower
    } else {
        Standing::Close
    };
    Verdict {
        n,
        ratio: p.ratio,
        ci: p.ci,
        standing,
    }
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
        .take_while(|v| v.standing == Standing::Close && v.ratio <= band && v.reaches_one())
        .last()
        .map(|v| v.n);
    let spread = if shown == fastest {
        let together: Vec<&Verdict> = verdicts
            .iter()
            .filter(|v| v.n < fastest && v.standing == Standing::Close && v.reaches_one())
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

    /// The verdict of the smallest close N below the first shown on the plateau whose median
    /// is within the margin: the N more runs can settle, on the plateau or off it. Only the
    /// smallest: it is the answer or below it, and once it is settled the next one, if any,
    /// gets the next round.
    pub fn unsettled(&self) -> Option<&Verdict> {
        let band = 1.0 + PLATEAU_MARGIN;
        self.verdicts
            .iter()
            .find(|v| v.n < self.shown && v.standing == Standing::Close && v.ratio <= band)
    }

    /// The N to run again (with the fastest) in round `round` of extra runs (from 1): every
    /// close call in the first `EXTRA_ROUNDS`; then the unsettled one (`unsettled`) while its
    /// interval lies above 1, up to `SETTLE_ROUNDS` rounds, and where an exception takes it,
    /// in the first of those rounds only; then none.
    ///
    /// * Interval above 1: a small cost shown, and that it stays within the margin not; no
    ///   exception takes it, so only more runs can put it on the plateau. On a 2-vCPU Intel
    ///   Xeon guest N = 3 at +1.6% [+0.3%, +6.4%] beside N = 4 made a quick suite answer 4
    ///   (the other 13 of that day answered 3); settled, N = 3 at +4.1% [+0.5%, +15.0%] beside
    ///   N = 8 gave 3 where it would have given 8.
    /// * An exception takes it: its median within the margin is what the exception rests on,
    ///   and one round checks it with more runs. On that guest N = 2 (about +8% beside N = 3,
    ///   run after run) was taken at +3.8% [-0.4%, +16.2%] and +4.3% [-3.7%, +9.7%] beside
    ///   the fastest, and two runs answered 2. An N truly on the plateau stays taken: in the 7
    ///   sweeps where such an N had three more rounds the answer stayed as it was, at 1.2-2.5
    ///   s of runs each, so one round is what it gets.
    /// * An N that a round left close with its median past the margin gets none: neither the
    ///   plateau nor an exception takes it unless its median falls.
    pub fn to_run_again(&self, round: usize) -> Vec<usize> {
        if round <= EXTRA_ROUNDS {
            return self.close_calls();
        }
        match self.unsettled() {
            Some(v) if round <= EXTRA_ROUNDS + settling_rounds(v) => vec![v.n],
            _ => Vec::new(),
        }
    }
}

/// The rounds of a sequence of runs, in the order taken: "round 0: 7 runs, round 1: 4, round
/// 3: 4". A results file stores an N's runs in that order, so this tags each with its round,
/// and the pairs the rule read can be found again (an N may sit out a round the fastest took).
pub(super) fn rounds_text(rounds: impl IntoIterator<Item = usize>) -> String {
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for round in rounds {
        match counts.last_mut() {
            Some((r, k)) if *r == round => *k += 1,
            _ => counts.push((round, 1)),
        }
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, (round, k))| {
            let runs = if i == 0 { " runs" } else { "" };
            format!("round {round}: {k}{runs}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rule in words, for notes and the conclusion.
pub fn rule_text() -> String {
    format!(
        "the start of the plateau: the smallest N whose time is within {:.0}% of the fastest \
         N's with 95% confidence (the fastest chosen on the first sweep; each run of N over the \
         fastest's run of the same repetition, taken within a second of it, and the sign \
         test's interval of the median of those ratios wholly below {:.2}); an N whose interval \
         straddles the margin is run {}, and is not on the plateau if it still straddles, \
         unless its median is within the margin and its interval reaches 1 (not told apart \
         from the fastest at all; likewise each N between it and the plateau); where no N but \
         the fastest is shown on it and two or more below it are not shown apart from it at \
         all (their intervals reach 1), the smallest of those whose median is within the margin",
        PLATEAU_MARGIN * 100.0,
        1.0 + PLATEAU_MARGIN,
        extra_runs_text()
    )
}

/// How many settling rounds the unsettled N gets (`Best::to_run_again`): one where an exception
/// takes it (its interval reaches 1), else `SETTLE_ROUNDS`.
fn settling_rounds(v: &Verdict) -> usize {
    if v.reaches_one() {
        1
    } else {
        SETTLE_ROUNDS
    }
}

/// Which extra runs a close N gets (`Best::to_run_again`), in words: for the rule's text and
/// the time metrics' notes.
pub(super) fn extra_runs_text() -> String {
    format!(
        "{EXTRA_REPS} more times with the fastest (at most {EXTRA_ROUNDS} times, then, for the \
         smallest such N whose median is within the margin, up to {SETTLE_ROUNDS} times more \
         while its interval lies above 1, or once where it reaches 1)"
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
