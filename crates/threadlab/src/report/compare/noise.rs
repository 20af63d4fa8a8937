//! What a metric's noise floor is made of: the runs' machines, their drift and spread, how far the machine moved between them.

use super::*;
use crate::measure::stats::{median, Summary};
use crate::results::flag::Flag;

/// What identifies a machine and kernel for the purpose of comparing code.
pub(super) fn fingerprint(r: &RunResults) -> Vec<(&'static str, String)> {
    let e = &r.environment;
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
    let mut v = vec![
        ("CPU", opt(&e.cpu_model)),
        (
            "logical CPUs",
            e.logical_cpus.map_or("unknown".into(), |c| c.to_string()),
        ),
        (
            "kernel",
            format!("{} {}", e.kernel_release, e.kernel_version),
        ),
        ("preemption", e.preemption_model.clone()),
        (
            "virtualisation",
            match (&e.hypervisor, e.virtualized) {
                (Some(h), _) => h.clone(),
                (None, Some(true)) => "virtualised".into(),
                (None, Some(false)) => "bare metal".into(),
                (None, None) => "unknown".into(),
            },
        ),
        ("cpuidle", opt(&e.cpuidle_driver)),
        ("governor", opt(&e.frequency_governor)),
        ("build", e.build_profile.clone()),
    ];
    if let Some(h) = &e.hostname {
        v.push(("host", h.clone()));
    }
    v
}

pub(super) fn machine_differences(a: &RunResults, b: &RunResults) -> Vec<String> {
    let (fa, fb) = (fingerprint(a), fingerprint(b));
    let mut d = Vec::new();
    for (k, va) in &fa {
        // A field only one file records (an older file without a host name) is not a difference.
        if let Some((_, vb)) = fb.iter().find(|(kb, _)| kb == k) {
            if va != vb {
                d.push(format!("{k}: {va} vs {vb}"));
            }
        }
    }
    d
}

/// A file's side of a row, from its values (the file's own median and quartiles are not
/// trusted: they are recomputed), in `unit` when they convert.
pub(super) fn side(m: &Metric, values: &[f64]) -> Side {
    let trials = !m.batches.is_empty() || m.trials.is_some() || !m.trial_of.is_empty();
    match Summary::from_samples(values, 1) {
        Some(s) => Side {
            median: s.median,
            samples: values.len(),
            spread_pct: (values.len() > 1 && s.median != 0.0)
                .then(|| (s.q3 - s.q1) / s.median.abs() * 100.0),
            trials,
        },
        None => Side {
            median: m.median,
            samples: values.len(),
            spread_pct: None,
            trials,
        },
    }
}

pub use crate::measure::pair::PAIR_REGIME_RATIO;

/// The share of operations whose threads shared a CPU moved more than this between the runs:
/// the kernel placed them differently (a hand-off on one CPU is a switch, on two a wake-up). A
/// hand-off pair keeps its placement for a batch (shares near 0 or 1); a thread create+join
/// is placed anew each time, and its regimes here are about 100% and about 52% together.
pub const COLOCATION_REGIME_SHIFT: f64 = 0.3;

/// A run's trials, in the order they were taken, stepped from one level to another this far
/// apart (the nearer edges of the two stretches, which do not overlap): the machine changed
/// regime partway through the run. Trials of one regime move a few per cent; a change of
/// code moves every trial of B, not the last few.
pub const LEVEL_SHIFT_RATIO: f64 = 1.15;

/// Two runs each disturbed throughout met the same phase of the host when the phase probe's
/// medians beside their kept trials lie within this many per cent (`host_phases`). On a 2-vCPU
/// Intel Xeon guest the probe read 40 us in the host's quiet phase and 53-127 us in its busy one,
/// and runs disturbed throughout had medians 3-15% apart, their one-CPU figures (`sync.mutex`
/// 21.1-22.2 ns, `switch.green.yield` 5.70-6.02 ns, `destroy.thread` 7.16-7.42 us) within 6%,
/// against 18.6 ns, 3.3 ns and 5.6 us in quiet trials.
pub const SAME_BUSY_PHASE_PCT: f64 = 20.0;

/// Trials on each side of a step, at the fewest.
const LEVEL_SHIFT_MIN_TRIALS: usize = 3;

/// Where a metric's trials step from one level to another and stay there: the split of its
/// trials (in the order taken, at least `LEVEL_SHIFT_MIN_TRIALS` on each side) whose two
/// stretches do not overlap and are furthest apart, when the nearer edges are at least
/// `LEVEL_SHIFT_RATIO` apart. The two stretches' medians and how many trials came before the
/// step. Only for metrics whose values are trials (a sampler's log is present).
pub fn level_shift(m: &Metric) -> Option<(f64, f64, usize)> {
    m.trials.as_ref()?;
    let v = &m.values;
    if v.iter().any(|&x| !(x > 0.0 && x.is_finite())) {
        return None;
    }
    let span = |s: &[f64]| {
        let lo = s.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = s.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    (LEVEL_SHIFT_MIN_TRIALS..=v.len().saturating_sub(LEVEL_SHIFT_MIN_TRIALS))
        .filter_map(|k| {
            let ((lo1, hi1), (lo2, hi2)) = (span(&v[..k]), span(&v[k..]));
            let gap = (lo2 / hi1).max(lo1 / hi2);
            (gap >= LEVEL_SHIFT_RATIO).then_some((k, gap))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| (median(&v[..k]), median(&v[k..]), k))
}

/// Why a metric's regime differs between A and B, when it does: the two CPUs it ran on were at
/// a different distance (its trials' cache-line round trips, or for a metric that does not
/// read them per trial the experiment's, before and after), the kernel placed its threads
/// differently, its trials stepped to another level during a run, it times an idle vCPU's
/// wake-up or is decided by a race (flags), or its trials fall in two clusters in either run.
pub fn regime_change(
    (ea, eb): (&ExperimentResult, &ExperimentResult),
    (ma, mb): (&Metric, &Metric),
) -> Option<String> {
    // A metric on one CPU does not depend on the pair's distance (older files kept it for
    // every row of a group that had one row on two CPUs).
    let on_two = [ma, mb]
        .iter()
        .all(|m| crate::measure::placement::spans_two_cpus(&m.placement));
    let pair = |m: &Metric| m.trials.as_ref().and_then(|t| t.pair_median_ns());
    if on_two {
        let moved = match pair(ma).zip(pair(mb)) {
            Some((pa, pb)) => (pa > 0.0 && pb > 0.0 && (pa / pb).max(pb / pa) > PAIR_REGIME_RATIO)
                .then(|| {
                    format!(
                        "the two CPUs were {pa:.0} ns apart in A and {pb:.0} ns in B (a cache \
                         line's round trip): the host ran the vCPUs elsewhere; run both again"
                    )
                }),
            None => pair_moved_around(ea, eb),
        };
        if moved.is_some() {
            return moved;
        }
    }
    let together = |m: &Metric| m.trials.as_ref().and_then(|t| t.colocated_median());
    if let (Some(ta), Some(tb)) = (together(ma), together(mb)) {
        if (ta - tb).abs() > COLOCATION_REGIME_SHIFT {
            return Some(format!(
                "the kernel put the threads on one CPU for {:.0}% of A's operations and {:.0}% of \
                 B's: where it places them decides this figure; run both again",
                ta * 100.0,
                tb * 100.0
            ));
        }
    }
    if let Some(why) = host_phases(ma, mb) {
        return Some(why);
    }
    for flag in Flag::REGIME {
        if [ma, mb].iter().any(|m| crate::results::flag::has(m, flag)) {
            return flag_regime(flag).map(str::to_string);
        }
    }
    let stepped: Vec<String> = [("A", ma), ("B", mb)]
        .iter()
        .filter_map(|(k, m)| {
            level_shift(m).map(|(x, y, n)| {
                format!(
                    "{} for {k}'s first {n} trials and {} for the rest",
                    crate::report::fmt_with_unit(x, m.unit),
                    crate::report::fmt_with_unit(y, m.unit)
                )
            })
        })
        .collect();
    if !stepped.is_empty() {
        return Some(format!(
            "it read {}: the machine changed regime during the run; run both again",
            stepped.join(", and ")
        ));
    }
    let bimodal: Vec<&str> = [("A", ma), ("B", mb)]
        .iter()
        .filter(|(_, m)| m.modes.is_some())
        .map(|(k, _)| *k)
        .collect();
    (!bimodal.is_empty()).then(|| {
        format!(
            "its values fall in two clusters in {}: which regime a set of threads settles into \
             decides the figure; compare the modes, or use --repeat",
            bimodal.join(" and ")
        )
    })
}

/// Why a change of a metric carrying `flag` is the flag's regime and not the code's, for the
/// flags that make it so (`regime_change`).
fn flag_regime(flag: Flag) -> Option<&'static str> {
    Some(match flag {
        Flag::IdleVcpu => {
            "it times the wake-up of an idle virtual CPU, and how fast the host brings one back \
             changes between runs (on a 2-vCPU guest the runs' medians of the cross-CPU \
             wake-up spread 22% while each run's trials agreed within 5%, and the doctor's \
             cross-CPU loopback echo read 40-52 us in 16 runs and 62-65 us in 3): run both \
             again"
        }
        Flag::OneProgram => {
            "its trials ran in a peer's own programs, started once for the group (one, or three \
             taken in turn), and such a program's regime can last its life (with one program \
             per group, over 92 quick runs on a 2-vCPU guest switch.go.yield's medians read \
             56.4-61.1 ns from the 10th to the 90th percentile and five runs 65.0-98.8, while \
             each run's trials agreed within a few per cent): run both again"
        }
        Flag::Race => {
            "a race between threads decides this figure, and its outcome can outlast all the \
             trials of a run (in back-to-back runs of the same build on one machine, such \
             figures moved up to 2x while each run's trials agreed): run both again, or read \
             the rows on one CPU"
        }
        _ => return None,
    })
}

/// A side whose sampler found too few quiet trials even after taking more, and so kept every
/// trial: most of them lay beside a slow reference, and its figure is a mixture of the host's
/// phases in proportions the next run will not repeat (`switch.green.chan` read 22 ns in such a
/// run and 14.5-15 ns in the others, its trials in the slow phase 22 ns and in the quiet ones
/// 14.5-15).
///
/// Except for a figure on one CPU where both sides were so and their kept trials met the same
/// phase: the phase probe's median beside them within `SAME_BUSY_PHASE_PCT` of each other
/// (`kept_trials_shift_pct`, which joins the floor as for any pair). Then neither figure is a
/// mixture the other lacks: both are what the host's busy phase gave, and they are compared
/// like for like. Not on two CPUs: there the probe's phase is not the figure's regime
/// (`shm.thread.read.4kib`, a read across the two vCPUs, read 0.34 us in one such run and 0.47
/// us in the next, the probe beside them 66-73 us and 63-76 us).
fn host_phases(ma: &Metric, mb: &Metric) -> Option<String> {
    let throughout = |m: &Metric| {
        crate::measure::placement::on_one_cpu(&m.placement)
            && m.trials.as_ref().is_some_and(|t| t.disturbed_throughout())
    };
    if throughout(ma)
        && throughout(mb)
        && kept_trials_shift_pct(ma, mb).is_some_and(|s| s <= SAME_BUSY_PHASE_PCT)
    {
        return None;
    }
    let mixed: Vec<String> = [("A", ma), ("B", mb)]
        .iter()
        .filter_map(|(k, m)| {
            let t = m.trials.as_ref()?;
            t.disturbed_throughout()
                .then(|| format!("{} of {k}'s {} trials", t.steal + t.disturbed, t.taken))
        })
        .collect();
    (!mixed.is_empty()).then(|| {
        format!(
            "the machine was slower beside {}, too many to set aside: which phase of the \
             host a run met decides this figure; run both again",
            mixed.join(" and ")
        )
    })
}

/// The kept attempt of an experiment, when it recorded its references.
pub(super) fn kept(e: &ExperimentResult) -> Option<&crate::results::Attempt> {
    e.attempts
        .iter()
        .find(|a| a.kept)
        .filter(|a| a.reference_wide_ns.iter().all(|v| *v > 0.0))
}

/// The mean of an attempt's before and after readings of one reference, ns.
pub(super) fn reference_mean(x: [f64; 2]) -> Option<f64> {
    let m = (x[0] + x[1]) / 2.0;
    (m > 0.0 && m.is_finite()).then_some(m)
}

/// How far the machine's speed moved between the two runs around this experiment, percent:
/// the throughput-bound reference loop (the mean of its before and after readings), A against
/// B. Every figure runs on the CPU, so every figure of the experiment may move with it.
pub(super) fn machine_shift_pct(ea: &ExperimentResult, eb: &ExperimentResult) -> Option<f64> {
    let a = reference_mean(kept(ea)?.reference_wide_ns)?;
    let b = reference_mean(kept(eb)?.reference_wide_ns)?;
    Some((b / a - 1.0).abs() * 100.0)
}

/// How far the CPU's speed moved between the two runs where a metric's kept trials were taken,
/// percent: the median of the phase probe beside each kept trial (`TrialLog::phase_wide_ns`),
/// A against B. The readings around the experiment can be slow while every kept trial was
/// quiet: in one A/A pair the register loop read 496 and 566 us around A's `create` and 417
/// us around B's, 21% apart, while the sampler had set A's one disturbed trial aside; with
/// that move in its floor, `destroy.thread` planted x1.2 read "within noise". None unless both
/// runs kept the readings.
pub(super) fn kept_trials_shift_pct(ma: &Metric, mb: &Metric) -> Option<f64> {
    let side = |m: &Metric| {
        let v = &m.trials.as_ref()?.phase_wide_ns;
        let med = (!v.is_empty()).then(|| median(v))?;
        (med > 0.0 && med.is_finite()).then_some(med)
    };
    let (a, b) = (side(ma)?, side(mb)?);
    Some((b / a - 1.0).abs() * 100.0)
}

/// How far the memory reference (the walk through 64 MiB) moved during the kept attempt of an
/// experiment, percent (its slower reading against its faster): the host's memory phase while
/// a memory-bound figure was taken, which joins that figure's floor as the CPU's drift joins
/// every figure's.
pub(super) fn memory_drift_pct(e: &ExperimentResult) -> Option<f64> {
    let [x, y] = kept(e)?.reference_memory_ns;
    (x > 0.0 && y > 0.0).then(|| (x.max(y) / x.min(y) - 1.0) * 100.0)
}

/// How far the memory reference moved between the two runs around this experiment, percent
/// (the means of each run's readings, the slower against the faster).
pub(super) fn memory_shift_pct(ea: &ExperimentResult, eb: &ExperimentResult) -> Option<f64> {
    let a = reference_mean(kept(ea)?.reference_memory_ns)?;
    let b = reference_mean(kept(eb)?.reference_memory_ns)?;
    Some((a.max(b) / a.min(b) - 1.0) * 100.0)
}

/// The memory reference moved more than this, percent (its slower reading against its faster,
/// during either run or between their means): the memory the host shares was not in the same
/// state for A's and B's figures. In three runs of `switch shm` here its readings around an
/// experiment were 147-177 ns a step in two, whose 64 MiB reads took 1.83 and 1.90 ms, and
/// 185-195 ns in the third, whose read took 2.38 ms.
pub const MEMORY_REGIME_PCT: f64 = 15.0;

/// Why a memory-bound figure cannot be compared between two runs in a virtual machine, even
/// with the memory reference at rest: the host's other tenants share the caches and memory
/// bandwidth, and what they do moves such figures between runs more than any reference of the
/// run records. In 21 back-to-back A/A pairs of `run create sync switch shm throttle` on a
/// 2-vCPU KVM guest (2026-11-26/27), 139 memory-bound figures were compared with the walk's move
/// under `MEMORY_REGIME_PCT`, and 23 of them moved more than 20% (`shm.*.read.1mib` up to 3.4x,
/// `shm.process.read.64mib` +28% with the walk 10.9% apart, `create.green.tree` +31% in a pair
/// whose probes, vCPU distance and walk all stayed within 12%): two of those pairs failed
/// `--fail-if-slower 10` on nothing but such figures. The shm reads between two vCPUs at
/// 4 KiB, which cross from one core's caches to the other's through the shared ones, read
/// 0.26-0.48 us over 34 runs on that guest, at a level the host kept for seconds to minutes
/// (`experiments::shm`), and alone failed two of the 21 A/A pairs kept from this lab's runs
/// ("SLOWER +80.4%", +87.8%) before they carried the flag.
pub const GUEST_MEMORY: &str = "its data goes through caches or memory the host's other \
     tenants share, and in a virtual machine such figures move between runs with every \
     reference of the run at rest (on a 2-vCPU guest, 23 of 139 moved more than 20% between \
     back-to-back runs of one build, up to 3.4x): compare them on bare metal, or run both again";

/// Why a memory-bound figure (`Metric::memory_bound`) cannot be compared between A and B: the
/// memory reference moved more than `MEMORY_REGIME_PCT` during either run's experiment or, on
/// one machine, between the runs; or, whatever it did, either run is in a virtual machine
/// (`guest`, `GUEST_MEMORY`). None otherwise, and for bare-metal files that predate the walk.
pub(super) fn memory_regime(
    ea: &ExperimentResult,
    eb: &ExperimentResult,
    same_machine: bool,
    guest: bool,
) -> Option<String> {
    walk_moved(ea, eb, same_machine).or_else(|| guest.then(|| GUEST_MEMORY.to_string()))
}

/// The memory reference's move around the two runs' experiments, when it passed
/// `MEMORY_REGIME_PCT`.
fn walk_moved(ea: &ExperimentResult, eb: &ExperimentResult, same_machine: bool) -> Option<String> {
    let read = |e: &ExperimentResult| {
        let [x, y] = kept(e)?.reference_memory_ns;
        (x > 0.0 && y > 0.0).then_some([x, y])
    };
    let (a, b) = (read(ea)?, read(eb)?);
    let moved = |x: f64, y: f64| (x.max(y) / x.min(y) - 1.0) * 100.0;
    let mean = |r: [f64; 2]| (r[0] + r[1]) / 2.0;
    let mut worst = moved(a[0], a[1]).max(moved(b[0], b[1]));
    if same_machine {
        worst = worst.max(moved(mean(a), mean(b)));
    }
    let span = |r| reading_span(r, 1);
    (worst > MEMORY_REGIME_PCT).then(|| {
        format!(
            "a step of a walk through 64 MiB of memory took {} ns around A's experiment and {} ns \
             around B's ({worst:.0}% apart): the host's other tenants were loading the cache \
             and memory this figure uses; run both again",
            span(a),
            span(b),
        )
    })
}

/// A reference's two readings around an experiment as "lo-hi" with `decimals` places, or one
/// figure when they print alike.
fn reading_span(r: [f64; 2], decimals: usize) -> String {
    let (lo, hi) = (r[0].min(r[1]), r[0].max(r[1]));
    let (a, b) = (format!("{lo:.decimals$}"), format!("{hi:.decimals$}"));
    if a == b {
        a
    } else {
        format!("{a}-{b}")
    }
}

/// For a metric on two CPUs that does not read the pair's distance per trial (the server's,
/// fairness', the doctor's figures): the distance read before and after each run's experiment
/// moved more than `PAIR_REGIME_RATIO` during either run or between their means. None for
/// files that predate the reading, or a run on one CPU.
fn pair_moved_around(ea: &ExperimentResult, eb: &ExperimentResult) -> Option<String> {
    let read = |e: &ExperimentResult| {
        let [x, y] = kept(e)?.reference_pair_ns;
        (x > 0.0 && y > 0.0).then_some([x, y])
    };
    let (a, b) = (read(ea)?, read(eb)?);
    let apart = |x: f64, y: f64| x.max(y) / x.min(y);
    let mean = |r: [f64; 2]| (r[0] + r[1]) / 2.0;
    let worst = apart(a[0], a[1])
        .max(apart(b[0], b[1]))
        .max(apart(mean(a), mean(b)));
    let span = |r| reading_span(r, 0);
    (worst > PAIR_REGIME_RATIO).then(|| {
        format!(
            "the two CPUs were {} ns apart around A's experiment and {} ns around B's (a cache \
             line's round trip, before and after): the host ran the vCPUs elsewhere; run both \
             again",
            span(a),
            span(b)
        )
    })
}

/// How far the throughput-bound reference loop moved during the kept attempt of an experiment,
/// percent (before against after): the CPU's own drift while its figures were taken. The
/// attempt's `drift_pct` also counts the kernel-entry reference, which is kept out of floors
/// (see `kernel_entry_move_pct`).
pub(super) fn cpu_drift_pct(e: &ExperimentResult) -> Option<f64> {
    let [before, after] = kept(e)?.reference_wide_ns;
    (before > 0.0 && after > 0.0).then(|| (after / before - 1.0).abs() * 100.0)
}

/// The largest move of the kernel-entry reference (one getppid) around this experiment,
/// percent: during A's attempt, during B's, or between the two runs. On a VM it can double
/// within minutes; only figures that enter the kernel move with it, so it is reported, not
/// added to every floor.
pub(super) fn kernel_entry_move_pct(ea: &ExperimentResult, eb: &ExperimentResult) -> Option<f64> {
    let (ka, kb) = (kept(ea)?, kept(eb)?);
    let change = |x: f64, y: f64| (x > 0.0 && y > 0.0).then(|| (y / x - 1.0).abs() * 100.0);
    let between = change(
        reference_mean(ka.reference_syscall_ns)?,
        reference_mean(kb.reference_syscall_ns)?,
    );
    [ka, kb]
        .iter()
        .filter_map(|k| change(k.reference_syscall_ns[0], k.reference_syscall_ns[1]))
        .chain(between)
        .reduce(f64::max)
}

/// Kernel-entry moves (during or between the runs) larger than this are reported.
pub(super) const KERNEL_ENTRY_NOTE_PCT: f64 = 10.0;
