//! The trial loop behind every sampler call: calibrate each row, then trials until the rows'
//! medians are known to their targets (or the budget or the trial limit ends it), then keep the
//! trials the host left alone.

use std::time::{Duration, Instant};

use super::{BatchFn, InterleavedRow, Sampler, Source, MIN_TRIALS, RESIZE_FACTOR};
use crate::error::{Error, Result};
use crate::measure::drift::phase_probe;
use crate::measure::host::{delay_between, run_delays, steal_between, steal_ticks};
use crate::measure::pair::round_trip_ns;
use crate::measure::stats::{
    median, median_ci_pct, quiet_beside, Stop, Summary, TrialLog, QUIET_MARGIN,
};

/// The trials taken while the machine was quiet: `phases[k]` is read before trial k and
/// `phases[k + 1]` after it, and a trial is quiet when both are (a phase of the host that began
/// in the middle of a trial shows in the reading after it).
pub fn quiet_rounds(phases: &[[f64; 2]]) -> Vec<usize> {
    let best = |k: usize| phases.iter().map(|p| p[k]).fold(f64::INFINITY, f64::min);
    let (bw, bs) = (best(0), best(1));
    let quiet = |p: &[f64; 2]| quiet_beside(p[0], bw) && quiet_beside(p[1], bs);
    (0..phases.len().saturating_sub(1))
        .filter(|&k| quiet(&phases[k]) && quiet(&phases[k + 1]))
        .collect()
}

/// The machine read between two trials.
struct Reading {
    /// The phase probe (throughput-bound loop, system call), when the filter is on.
    phase: Option<[f64; 2]>,
    /// Steal ticks per CPU.
    steal: Vec<(usize, u64)>,
}

impl Reading {
    fn now(filter: bool) -> Reading {
        Reading {
            phase: filter.then(phase_probe),
            steal: if filter { steal_ticks() } else { Vec::new() },
        }
    }
}

/// One trial: every row's batch figures (per-op ns), the share of each row's batches whose
/// parties shared a CPU (rows that can tell), and the CPU pair's distance.
struct Trial {
    batches: Vec<Vec<f64>>,
    colocated: Vec<Option<f64>>,
    pair_ns: Option<f64>,
}

/// Which trials to keep, and why the others were set aside.
struct Selection {
    kept: Vec<usize>,
    steal: usize,
    /// Set aside beside a slow reference, or slowed together (`slowed` of them).
    disturbed: usize,
    slowed: usize,
    /// The kept trials are the quiet ones: false when too few were, and all are kept.
    quiet: bool,
}

/// A trial counts as slowed for its group when at least this many of the group's one-CPU rows
/// (and at least half of them) read more than `QUIET_MARGIN` above their own medians in it.
const SLOWED_MIN_VOTES: usize = 3;

/// The trials among `good` (quiet, unstolen) that the host slowed although neither steal nor
/// the references beside them showed it: at least half of the voting rows (and at least
/// `SLOWED_MIN_VOTES`) read more than `QUIET_MARGIN` above their own medians over `good` in
/// them. A code change moves every trial of a row, and a row's own race or placement moves that
/// row alone; a stall of the host between two readings moves most rows of the trials it falls
/// in. On a 2-vCPU guest, one trial of a quick `switch` read `switch.green.yield` 4.38 ns
/// against 3.18-3.28 ns in the other eleven, with most of the group's one-CPU rows slow beside
/// it; that one trial kept a planted +20.8% from surviving Holm's correction in `compare`.
/// Voters are the rows on one CPU that time batches (`voters`, indices into each trial's
/// batches); a row skipped partway has no figure in some trials and does not vote. Nothing is
/// set aside when fewer than `MIN_TRIALS` would remain, so it takes at least seven quiet trials;
/// a host phase over several trials (up to half) goes as a stall of one does.
fn slowed_together(trials: &[Trial], good: &[usize], voters: &[usize]) -> Vec<usize> {
    let figures: Vec<Vec<f64>> = voters
        .iter()
        .filter_map(|&i| {
            good.iter()
                .map(|&k| {
                    let b = trials[k].batches.get(i)?;
                    (!b.is_empty()).then(|| median(b))
                })
                .collect::<Option<Vec<f64>>>()
        })
        .collect();
    if figures.len() < SLOWED_MIN_VOTES {
        return Vec::new();
    }
    let need = SLOWED_MIN_VOTES.max(figures.len().div_ceil(2));
    let medians: Vec<f64> = figures.iter().map(|v| median(v)).collect();
    let slowed: Vec<usize> = (0..good.len())
        .filter(|&j| {
            figures
                .iter()
                .zip(&medians)
                .filter(|(v, m)| v[j] > **m * (1.0 + QUIET_MARGIN))
                .count()
                >= need
        })
        .map(|j| good[j])
        .collect();
    if good.len() - slowed.len() < MIN_TRIALS {
        return Vec::new();
    }
    slowed
}

fn select(readings: &[Reading], trials: &[Trial], cpus: &[usize], voters: &[usize]) -> Selection {
    let taken = trials.len();
    let phases: Vec<[f64; 2]> = readings.iter().filter_map(|r| r.phase).collect();
    let quiet: Vec<usize> = if phases.len() == readings.len() && !phases.is_empty() {
        quiet_rounds(&phases)
    } else {
        (0..taken).collect()
    };
    let stolen = |k: usize| steal_between(&readings[k].steal, &readings[k + 1].steal, cpus) > 0;
    let (mut steal, mut disturbed) = (0, 0);
    let mut good = Vec::new();
    for k in 0..taken {
        if stolen(k) {
            steal += 1;
        } else if !quiet.contains(&k) {
            disturbed += 1;
        } else {
            good.push(k);
        }
    }
    if good.len() >= MIN_TRIALS {
        let slowed = slowed_together(trials, &good, voters);
        good.retain(|k| !slowed.contains(k));
        Selection {
            kept: good,
            steal,
            disturbed: disturbed + slowed.len(),
            slowed: slowed.len(),
            quiet: true,
        }
    } else {
        // Disturbed throughout: keep everything, and say how many were disturbed.
        Selection {
            kept: (0..taken).collect(),
            steal,
            disturbed,
            slowed: 0,
            quiet: steal + disturbed == 0,
        }
    }
}

/// The trial limit and budget while too few trials were quiet (`quiet` false: fewer than the row's
/// minimum): half as many again (more made a quick suite on a disturbed host take 117 s), so that a
/// host in another phase for most of a run's trials leaves enough quiet ones to keep (with 6 kept
/// against another run's 8, compare cannot test a metric at all over a quick run's ~94). On a
/// 2-vCPU guest whose speed moved 25-67% within `run switch`, 10 of 12 trials were disturbed, and
/// the run kept all twelve: `switch.green.chan` read 22 ns in the slow phase and 14.5-15 ns in the
/// quiet trials, and back-to-back runs differed by 43%. Until enough are quiet, a precise interval
/// does not stop sampling either (it would be the interval of a mixture of phases). The extra
/// trials are taken only while they can still bring the `good` (quiet, unstolen) trials of the
/// `taken` ones to `min_trials`: in a quick suite on a host in a slow phase for the whole of a
/// group, 17 or 18 of 18 trials of the server's 66 study rows were disturbed, and the six
/// extra ones only made the suite 4 s longer.
fn limits(
    quiet: bool,
    (good, taken): (usize, usize),
    (min_trials, max_trials): (usize, usize),
    budget: Duration,
) -> (usize, Duration) {
    let more = max_trials / 2;
    let reachable = good + (max_trials + more).saturating_sub(taken) >= min_trials;
    if quiet || !reachable {
        (max_trials, budget)
    } else {
        (max_trials + more, budget + budget / 2)
    }
}

/// The rows that vote on a slowed trial (`slowed_together`): those on one CPU that time batches
/// (a figure the caller measures itself may be a rate or a share), and only where the machine is
/// read around the trials (not on synthetic batches).
fn voters(rows: &[InterleavedRow<'_>], filter: bool) -> Vec<usize> {
    if !filter {
        return Vec::new();
    }
    (0..rows.len())
        .filter(|&i| rows[i].one_cpu && !matches!(rows[i].source, Source::Value(_)))
        .collect()
}

/// Runs one batch of a row: per-op ns.
fn call(
    row: &mut InterleavedRow<'_>,
    subject: Option<&mut BatchFn<'_>>,
    iters: u64,
) -> Result<f64> {
    let took = match (&mut row.source, subject) {
        (Source::Value(f), _) => return f(),
        (Source::Batch(b), _) => b(iters)?,
        (Source::Fresh(_), Some(b)) => b(iters)?,
        (Source::Fresh(_), None) => {
            return Err(Error::Fail(
                "a fresh row was run without its subject".into(),
            ))
        }
    };
    Ok(took.as_nanos() as f64 / iters as f64)
}

/// Grows the batch until one lasts at least `min_batch` and the warm-up time since `start` has
/// passed (calibration doubles as warm-up); returns that batch size.
fn calibrate(s: &Sampler, batch: &mut BatchFn<'_>, start: Instant) -> Result<u64> {
    let mut iters: u64 = 1;
    loop {
        s.cancel.check()?;
        let took = batch(iters)?;
        let warm = start.elapsed() >= s.cfg.warmup;
        if took >= s.cfg.min_batch {
            if warm {
                return Ok(iters);
            }
        } else if iters < (1 << 40) {
            // Jump straight to the size the last batch suggests, with a margin.
            let per_op = took.as_secs_f64() / iters as f64;
            let want = if per_op > 0.0 {
                (s.cfg.min_batch.as_secs_f64() * 1.2 / per_op).ceil() as u64
            } else {
                iters * 2
            };
            iters = want.clamp(iters + 1, iters.saturating_mul(16));
        } else {
            return Err(Error::Fail(
                "the operation is too fast to time: the batch never reached the minimum length"
                    .into(),
            ));
        }
    }
}

/// Calibrates (and warms up) one row: its batch size.
fn prepare(s: &Sampler, row: &mut InterleavedRow<'_>) -> Result<u64> {
    let start = Instant::now();
    let warm_up = |row: &mut InterleavedRow<'_>, mut subject: Option<BatchFn<'_>>, n: u64| {
        while start.elapsed() < s.cfg.warmup {
            s.cancel.check()?;
            call(row, subject.as_mut(), n)?;
        }
        Ok(n)
    };
    let fixed = match row.source {
        Source::Value(_) => Some(1),
        _ => row.fixed_iters,
    };
    let mut subject = match &mut row.source {
        Source::Fresh(make) => Some(make()?),
        _ => None,
    };
    match (fixed, subject.as_mut(), &mut row.source) {
        (Some(n), _, _) => warm_up(row, subject, n),
        (None, Some(b), _) => calibrate(s, b, start),
        (None, None, Source::Batch(b)) => calibrate(s, b, start),
        (None, None, _) => Err(Error::Fail("a row without a batch to calibrate".into())),
    }
}

/// The outcome of one row of a trial.
enum RowState {
    Live(u64),
    Skipped(String),
}

pub(super) fn run(
    s: &Sampler,
    rows: &mut [InterleavedRow<'_>],
) -> Result<Vec<std::result::Result<Summary, String>>> {
    let mut state = prepare_all(s, rows)?;
    let live_rows = state
        .iter()
        .filter(|st| matches!(st, RowState::Live(_)))
        .count();
    let budget = s.cfg.budget * live_rows.max(1) as u32;
    let min_trials = s.cfg.min_trials.max(MIN_TRIALS);
    let max_trials = s.cfg.max_trials.max(min_trials);
    // Figures the caller measures itself are each a replication already (a fresh buffer, a
    // fresh timer): one per trial.
    let all_values = rows.iter().all(|r| matches!(r.source, Source::Value(_)));
    let rounds = if all_values { 1 } else { s.cfg.rounds.max(1) };
    let voters = voters(rows, s.cfg.phase_filter);
    let start = Instant::now();
    let mut readings = vec![Reading::now(s.cfg.phase_filter)];
    let mut trials: Vec<Trial> = Vec::new();
    let stop = loop {
        s.cancel.check()?;
        let pair_ns = pair_round_trip_ns(s)?;
        let (batches, colocated) = run_trial(s, rows, &mut state, trials.len(), rounds)?;
        readings.push(Reading::now(s.cfg.phase_filter));
        trials.push(Trial {
            batches,
            colocated,
            pair_ns,
        });
        let sel = select(&readings, &trials, &s.span.cpus, &voters);
        let spent = start.elapsed();
        let good = trials.len() - sel.steal - sel.disturbed;
        let (max_trials, budget) = limits(
            sel.quiet && sel.kept.len() >= min_trials,
            (good, trials.len()),
            (min_trials, max_trials),
            budget,
        );
        if trials.len() >= max_trials {
            break Stop::Limit;
        }
        if sel.kept.len() >= min_trials {
            let precise = rows.iter().zip(&state).enumerate().all(|(i, (row, st))| {
                !matches!(st, RowState::Live(_))
                    || values_of(&trials, &sel.kept, i)
                        .and_then(|v| median_ci_pct(&v))
                        .is_some_and(|ci| ci <= row.precision.target_pct())
            });
            if precise && sel.quiet {
                break Stop::Precision;
            }
            if spent > budget {
                break Stop::Budget;
            }
        }
        // A machine disturbed throughout: too few trials are kept however many are taken.
        let set_aside = trials.len() - sel.kept.len();
        if trials.len() >= MIN_TRIALS && set_aside > 0 && spent > budget * 2 {
            break Stop::Budget;
        }
        if state.iter().all(|st| matches!(st, RowState::Skipped(_))) {
            break Stop::Budget;
        }
    };
    let sel = select(&readings, &trials, &s.span.cpus, &voters);
    if let Some(log) = s.host {
        log.record_set_aside(
            if sel.kept.len() < trials.len() {
                sel.steal
            } else {
                0
            },
            if sel.kept.len() < trials.len() {
                sel.disturbed
            } else {
                0
            },
        );
    }
    Ok(summaries(rows, state, (&trials, &readings), &sel, stop))
}

/// Each row's summary over the kept trials, with the log of how they were taken; a skipped
/// row's reason.
fn summaries(
    rows: &[InterleavedRow<'_>],
    state: Vec<RowState>,
    (trials, readings): (&[Trial], &[Reading]),
    sel: &Selection,
    stop: Stop,
) -> Vec<std::result::Result<Summary, String>> {
    let pair_ns: Vec<f64> = sel.kept.iter().filter_map(|&k| trials[k].pair_ns).collect();
    let phase_wide_ns = kept_phase_wide_ns(readings, &sel.kept);
    rows.iter()
        .zip(state)
        .enumerate()
        .map(|(i, (row, st))| {
            let iters = match st {
                RowState::Skipped(reason) => return Err(reason),
                RowState::Live(n) => n,
            };
            let batches: Vec<Vec<f64>> = sel
                .kept
                .iter()
                .map(|&k| trials[k].batches[i].clone())
                .collect();
            let values: Vec<f64> = batches.iter().map(|b| median(b)).collect();
            let log = TrialLog {
                taken: trials.len(),
                kept: sel.kept.len(),
                steal: sel.steal,
                disturbed: sel.disturbed,
                slowed: sel.slowed,
                stop,
                target_pct: row.precision.target_pct(),
                ci_pct: median_ci_pct(&values),
                pair_ns: pair_ns.clone(),
                colocated: sel
                    .kept
                    .iter()
                    .filter_map(|&k| trials[k].colocated[i])
                    .collect(),
                phase_wide_ns: phase_wide_ns.clone(),
            };
            Summary::from_trials(batches, iters, Some(log))
                .ok_or_else(|| "the samples were not finite numbers".to_string())
        })
        .collect()
}

/// The throughput-bound probe beside each kept trial, the slower of its readings before and
/// after (trial k lies between readings k and k + 1); empty when the filter was off.
fn kept_phase_wide_ns(readings: &[Reading], kept: &[usize]) -> Vec<f64> {
    kept.iter()
        .filter_map(|&k| {
            let before = readings.get(k)?.phase?;
            let after = readings.get(k + 1)?.phase?;
            Some(before[0].max(after[0]))
        })
        .collect()
}

/// Prepares every row (calibration or warm-up): a row that cannot run here is skipped with its
/// reason, any other failure ends the sampling.
fn prepare_all(s: &Sampler, rows: &mut [InterleavedRow<'_>]) -> Result<Vec<RowState>> {
    let mut state: Vec<RowState> = Vec::with_capacity(rows.len());
    for row in rows.iter_mut() {
        state.push(match prepare(s, row) {
            Ok(n) => RowState::Live(n),
            Err(Error::Skip(reason)) => RowState::Skipped(reason),
            Err(e) => return Err(e),
        });
    }
    Ok(state)
}

/// The round trip between the span's two CPUs before a trial, when the phase filter reads it.
fn pair_round_trip_ns(s: &Sampler) -> Result<Option<f64>> {
    Ok(match s.span.pair {
        Some((a, b)) if s.cfg.phase_filter => match round_trip_ns(a, b) {
            Ok(ns) => Some(ns),
            Err(Error::Skip(_)) => None,
            Err(e) => return Err(e),
        },
        _ => None,
    })
}

/// A live row's trial figures (the median of each kept trial's batches).
fn values_of(trials: &[Trial], kept: &[usize], row: usize) -> Option<Vec<f64>> {
    kept.iter()
        .map(|&k| {
            let b = &trials[k].batches[row];
            (!b.is_empty()).then(|| median(b))
        })
        .collect()
}

/// What one trial gave: each row's batch figures (empty for a skipped row) and, for rows that
/// can tell, the share of its batches whose parties shared a CPU.
type TrialFigures = (Vec<Vec<f64>>, Vec<Option<f64>>);

/// One trial of every live row: fresh subjects, warm-up, `rounds` rounds.
fn run_trial(
    s: &Sampler,
    rows: &mut [InterleavedRow<'_>],
    state: &mut [RowState],
    index: usize,
    rounds: usize,
) -> Result<TrialFigures> {
    let mut subjects: Vec<Option<BatchFn<'_>>> = Vec::with_capacity(rows.len());
    for (row, st) in rows.iter_mut().zip(state.iter_mut()) {
        let subject = match (&mut row.source, &*st) {
            (Source::Fresh(make), RowState::Live(_)) => match make() {
                Ok(b) => Some(b),
                Err(Error::Skip(reason)) => {
                    *st = RowState::Skipped(reason);
                    None
                }
                Err(e) => return Err(e),
            },
            _ => None,
        };
        subjects.push(subject);
    }
    let delays_before = s.host.map(|_| run_delays());
    let t0 = Instant::now();
    let mut batches: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); rows.len()];
    let mut together: Vec<(f64, u32)> = vec![(0.0, 0); rows.len()];
    // Round 0 warms up what is new: a fresh subject, or, in the first trial, every row (each
    // cooled while the others calibrated). Rounds 1..=rounds are kept.
    for round in 0..=rounds {
        for (i, row) in rows.iter_mut().enumerate() {
            let RowState::Live(iters) = state[i] else {
                continue;
            };
            let fresh = matches!(row.source, Source::Fresh(_));
            if round == 0 && !(fresh || index == 0) {
                continue;
            }
            s.cancel.check()?;
            let per_op = match call(row, subjects[i].as_mut(), iters) {
                Ok(v) => v,
                Err(Error::Skip(reason)) => {
                    state[i] = RowState::Skipped(reason);
                    subjects[i] = None;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if round > 0 {
                batches[i].push(per_op);
                if let Some(same) = row.colocation.as_ref().and_then(|probe| probe()) {
                    together[i].0 += same;
                    together[i].1 += 1;
                }
            }
            // An operation whose cost jumped after calibration (a lock convoy, a cache that
            // stopped fitting) would make every later batch far too long: re-size the batch to
            // the cost just seen. Figures stay per operation, so they remain comparable.
            let took = Duration::from_nanos((per_op * iters as f64) as u64);
            if took > s.cfg.min_batch * RESIZE_FACTOR
                && iters > 1
                && row.fixed_iters.is_none()
                && !matches!(row.source, Source::Value(_))
            {
                let want = (s.cfg.min_batch.as_secs_f64() * 1.2 / (per_op / 1e9)).ceil() as u64;
                state[i] = RowState::Live(want.max(1));
            }
        }
    }
    let wall = t0.elapsed();
    if let (Some(log), Some(before)) = (s.host, delays_before) {
        let wall_ns = wall.as_nanos() as u64;
        log.record_trial(wall_ns, delay_between(&before, &run_delays(), wall_ns));
    }
    drop(subjects);
    let shares = together
        .iter()
        .map(|&(same, of)| (of > 0).then(|| same / f64::from(of)))
        .collect();
    Ok((batches, shares))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(wide: f64, syscall: f64) -> Reading {
        Reading {
            phase: Some([wide, syscall]),
            steal: Vec::new(),
        }
    }

    /// Trials from each row's per-trial figures (`rows[i][k]`: row i in trial k), one batch
    /// each.
    fn trials_of(rows: &[&[f64]]) -> Vec<Trial> {
        let taken = rows.first().map_or(0, |r| r.len());
        (0..taken)
            .map(|k| Trial {
                batches: rows.iter().map(|r| vec![r[k]]).collect(),
                colocated: vec![None; rows.len()],
                pair_ns: None,
            })
            .collect()
    }

    /// `n` trials of one row at 1.0: no voter, nothing slowed.
    fn plain(n: usize) -> Vec<Trial> {
        trials_of(&[&vec![1.0; n]])
    }

    /// The one-CPU rows of a quick `switch` on a 2-vCPU guest, per kept trial (ns): in the
    /// fourth, every one of them read 10-68% above its median, `switch.green.yield` 4.38 ns
    /// against 3.18-3.28 ns.
    const SWITCH: [[f64; 12]; 9] = [
        [
            1327., 1363., 1347., 1554., 1353., 1389., 1328., 1302., 1369., 1379., 1347., 1310.,
        ],
        [
            2436., 2379., 2413., 2777., 2421., 2403., 2367., 2446., 2383., 2460., 2406., 2446.,
        ],
        [
            1529., 1508., 1472., 1746., 1522., 1500., 1506., 1511., 1488., 1442., 1477., 1503.,
        ],
        [
            2745., 2736., 2815., 3113., 2720., 2671., 2859., 2709., 2814., 2685., 2782., 2754.,
        ],
        [
            3.279, 3.247, 3.179, 4.384, 3.26, 3.225, 3.224, 3.216, 3.212, 3.194, 3.219, 3.23,
        ],
        [
            54.05, 53.93, 53.75, 81.19, 54.09, 53.55, 54.34, 53.85, 54.38, 53.15, 53.69, 53.73,
        ],
        [
            56.76, 56.71, 58.37, 96.9, 56.41, 63.67, 57.22, 57.45, 56.15, 57.88, 59.42, 57.83,
        ],
        [
            1.254, 1.259, 1.241, 1.754, 1.26, 1.246, 1.268, 1.269, 1.239, 1.219, 1.277, 1.291,
        ],
        [
            1830., 1777., 1826., 2017., 1878., 1839., 1828., 1837., 1805., 1823., 1863., 1875.,
        ],
    ];

    #[test]
    fn a_trial_most_one_cpu_rows_read_slow_in_is_set_aside() {
        let rows: Vec<&[f64]> = SWITCH.iter().map(|r| &r[..]).collect();
        let trials = trials_of(&rows);
        let quiet: Vec<Reading> = (0..=12).map(|_| reading(100.0, 50.0)).collect();
        let voters: Vec<usize> = (0..9).collect();
        let sel = select(&quiet, &trials, &[], &voters);
        assert_eq!(sel.kept, [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!((sel.slowed, sel.disturbed, sel.steal), (1, 1, 0));
        assert!(sel.quiet);
        // Rows that do not vote (on two CPUs, whose figures follow the vCPUs' distance
        // together) set nothing aside.
        let sel = select(&quiet, &trials, &[], &[]);
        assert_eq!((sel.kept.len(), sel.slowed), (12, 0));
        // Two voters are too few to tell the host from the rows' own regimes.
        assert!(slowed_together(&trials, &(0..12).collect::<Vec<_>>(), &[4, 5]).is_empty());
        // A trial already set aside beside a slow reference (the reading after the third trial
        // sets the third and the fourth aside) is not counted again.
        let mut around = quiet;
        around[3] = reading(150.0, 50.0);
        let sel = select(&around, &trials, &[], &voters);
        assert_eq!((sel.kept.len(), sel.slowed, sel.disturbed), (10, 0, 2));
    }

    #[test]
    fn a_row_slow_alone_or_a_step_of_a_few_rows_sets_nothing_aside() {
        let all: Vec<usize> = (0..12).collect();
        let voters: Vec<usize> = (0..9).collect();
        // `switch.go.yield` read 63.67 in the sixth trial alone: its own trial, not the host's.
        let mut rows: Vec<Vec<f64>> = SWITCH.iter().map(|r| r.to_vec()).collect();
        for r in rows.iter_mut() {
            r[3] = r[2];
        }
        let refs: Vec<&[f64]> = rows.iter().map(|r| &r[..]).collect();
        assert!(slowed_together(&trials_of(&refs), &all, &voters).is_empty());
        // Four of the nine rows step 50% up for the last six trials (their own phase, or a
        // change that landed partway): each of those trials has four rows over 10% above their
        // medians, fewer than half the voters.
        for r in rows.iter_mut().take(4) {
            r[6..].iter_mut().for_each(|v| *v *= 1.5);
        }
        let refs: Vec<&[f64]> = rows.iter().map(|r| &r[..]).collect();
        assert!(slowed_together(&trials_of(&refs), &all, &voters).is_empty());
        // Five of them (more than half) would be the host's.
        rows[4][6..].iter_mut().for_each(|v| *v *= 1.5);
        let refs: Vec<&[f64]> = rows.iter().map(|r| &r[..]).collect();
        assert_eq!(
            slowed_together(&trials_of(&refs), &all, &voters),
            [6, 7, 8, 9, 10, 11]
        );
        // Nothing is set aside when fewer than `MIN_TRIALS` would remain (with six quiet
        // trials, none can go); while enough do, a host phase over several trials goes as a
        // stall of one does.
        let six: Vec<&[f64]> = SWITCH.iter().map(|r| &r[..6]).collect();
        assert!(slowed_together(&trials_of(&six), &all[..6], &voters).is_empty());
        let phase = |n: usize, slow: usize| -> Vec<Vec<f64>> {
            (0..4)
                .map(|_| (0..n).map(|k| if k < slow { 1.5 } else { 1.0 }).collect())
                .collect()
        };
        let seven = phase(7, 2);
        let refs: Vec<&[f64]> = seven.iter().map(|r| &r[..]).collect();
        assert!(slowed_together(&trials_of(&refs), &all[..7], &[0, 1, 2, 3]).is_empty());
        let seven = phase(7, 1);
        let refs: Vec<&[f64]> = seven.iter().map(|r| &r[..]).collect();
        assert_eq!(
            slowed_together(&trials_of(&refs), &all[..7], &[0, 1, 2, 3]),
            [0]
        );
        let twelve = phase(12, 5);
        let refs: Vec<&[f64]> = twelve.iter().map(|r| &r[..]).collect();
        assert_eq!(
            slowed_together(&trials_of(&refs), &all, &[0, 1, 2, 3]),
            [0, 1, 2, 3, 4]
        );
        // Rows skipped partway (no figure from the seventh trial on) do not vote: the two
        // left are too few, although all nine read slow in the fourth trial.
        let mut trials = trials_of(&SWITCH.iter().map(|r| &r[..]).collect::<Vec<_>>());
        for t in trials.iter_mut().skip(6) {
            for b in t.batches.iter_mut().skip(2) {
                b.clear();
            }
        }
        assert!(slowed_together(&trials, &all, &voters).is_empty());
    }

    #[test]
    fn only_rows_on_one_cpu_that_time_batches_vote_and_only_with_the_filter_on() {
        let batch = |_: u64| Ok(Duration::from_micros(1));
        let rows = [
            InterleavedRow::new(batch).on_one_cpu(),
            InterleavedRow::new(batch),
            InterleavedRow::values(|| Ok(1.0)).on_one_cpu(),
            InterleavedRow::fixed(4, batch).on_one_cpu(),
        ];
        assert_eq!(voters(&rows, true), [0, 3]);
        assert!(voters(&rows, false).is_empty());
    }

    #[test]
    fn a_run_disturbed_throughout_keeps_all_and_says_it_is_not_quiet() {
        // Ten of twelve trials lie beside a slow throughput reading: too few quiet ones.
        let mut readings = vec![reading(100.0, 50.0), reading(101.0, 50.0)];
        readings.extend((0..10).map(|_| reading(150.0, 50.0)));
        readings.push(reading(100.0, 50.0));
        let sel = select(&readings, &plain(12), &[], &[]);
        assert_eq!(sel.kept.len(), 12);
        assert!(!sel.quiet);
        assert!(sel.disturbed >= 10);
        // Two quiet of twelve: six more can still make the eight a row needs.
        assert_eq!(
            limits(sel.quiet, (2, 12), (8, 12), Duration::from_secs(1)),
            (18, Duration::from_millis(1500))
        );
        // One quiet of twelve: six more cannot; the usual limits end it.
        assert_eq!(
            limits(sel.quiet, (1, 12), (8, 12), Duration::from_secs(1)),
            (12, Duration::from_secs(1))
        );
        // Early on, the extension is still in reach whatever the first trials were.
        assert_eq!(
            limits(false, (0, 5), (8, 12), Duration::from_secs(1)),
            (18, Duration::from_millis(1500))
        );
    }

    #[test]
    fn a_quiet_run_keeps_the_quiet_trials_under_the_usual_limits() {
        let mut readings: Vec<Reading> = (0..9).map(|_| reading(100.0, 50.0)).collect();
        readings.insert(4, reading(150.0, 50.0));
        let sel = select(&readings, &plain(9), &[], &[]);
        assert!(sel.quiet);
        assert_eq!(sel.kept, vec![0, 1, 2, 5, 6, 7, 8]);
        assert_eq!(
            limits(sel.quiet, (7, 9), (8, 12), Duration::from_secs(1)),
            (12, Duration::from_secs(1))
        );
    }
}
