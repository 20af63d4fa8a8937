//! The headline figures in the default placement (`….unpinned`): each design's second server,
//! allowed on every CPU with the generator, visited right after its pinned twin in every trial;
//! and what pinning changes, window by window (`….unpinned.vs_pinned`).

use super::*;
use crate::results::ids;

/// The suffixes measured in both placements: (suffix, unit, what).
const HEADLINE: &[(&str, Unit, &str)] = &[
    (stat::PEAK, Unit::PerS, "closed-loop peak"),
    (stat::RATE_P50, Unit::Us, "open-loop p50"),
    (stat::RATE_P99, Unit::Us, "open-loop p99"),
    (stat::CPU_PER_REQUEST, Unit::Us, "server CPU per request"),
];

/// The ratios of the default placement over the pinned one.
const RATIOS: &[&str] = &[stat::PEAK, stat::RATE_P99, stat::CPU_PER_REQUEST];

/// Every id the default placement gives a design.
pub fn ids(d: &str) -> Vec<String> {
    HEADLINE
        .iter()
        .map(|(s, _, _)| sid::id(d, &ids::unpinned(s)))
        .chain(
            RATIOS
                .iter()
                .map(|s| sid::id(d, &ids::unpinned_vs_pinned(s))),
        )
        .collect()
}

const HOW: &str = "default placement: the design's second server, allowed on every CPU the \
    process may use (its threads, loops and forked children placed by the kernel; Tokio's \
    workers, Go's GOMAXPROCS and the per-core designs' loops one per CPU, as each sizes itself \
    for the machine; the per-core designs pin each loop to its CPU, as they do), and the \
    generator allowed on every CPU too (sleeping until each planned send, not spinning: it \
    shares the CPUs); visited right after the pinned server in every trial";

/// One window's figure of a headline suffix.
fn figure(suffix: &str, w: &Window) -> Option<f64> {
    match suffix {
        stat::PEAK => replies_per_s(w),
        stat::RATE_P50 => us_of(w.latency_p50_ns),
        stat::RATE_P99 => p99_us(w),
        stat::CPU_PER_REQUEST => {
            (w.completed > 0).then(|| w.usage.cpu_ns as f64 / w.completed as f64 / 1e3)
        }
        _ => None,
    }
}

fn pattern_of(suffix: &str) -> Pattern {
    if suffix == stat::PEAK {
        Pattern::Peak
    } else {
        Pattern::Rate
    }
}

/// The default-placement metrics of every design that has a second server.
pub fn metrics(out: &mut Outcome, records: &Records, free: &[Running]) {
    let mut e = Emit {
        out,
        placement: "unpinned".into(),
        ceiling: records.ceiling,
    };
    for run in free {
        let d = run.info.name;
        for &(suffix, unit, what) in HEADLINE {
            let recs: Vec<&Record> = records
                .of_placed(d, pattern_of(suffix), Placed::Unpinned)
                .collect();
            if recs.is_empty() {
                continue;
            }
            if suffix == stat::CPU_PER_REQUEST {
                if let Some(why) = &recs[0].usage_unavailable {
                    e.out.skip(&sid::id(d, &ids::unpinned(suffix)), why.clone());
                    continue;
                }
            }
            let f = union_flags(recs.iter().copied(), e.ceiling);
            let v = per_window(&recs, |w| figure(suffix, w));
            let r = recs[0];
            let load = match r.pattern {
                Pattern::Peak => format!("closed loop over {} connections", r.connections),
                _ => format!(
                    "open loop at {:.0}/s over {} long connections{}",
                    r.offered,
                    r.connections,
                    saturated_note(&recs)
                ),
            };
            e.windows(
                &sid::id(d, &ids::unpinned(suffix)),
                unit,
                &v,
                format!(
                    "{what} of {d} as server.{d}.{suffix} measures it ({load}), in the {HOW}; \
                     one value per window"
                ),
                &f,
            );
        }
        for &suffix in RATIOS {
            ratio(&mut e, records, d, suffix);
        }
    }
}

/// `server.<d>.<suffix>.unpinned.vs_pinned`: window k of the default-placement visit over
/// window k of the pinned visit of the same trial (taken seconds apart).
fn ratio(e: &mut Emit, records: &Records, d: &str, suffix: &str) {
    let pattern = pattern_of(suffix);
    let mut values = PerTrial::default();
    let mut used: Vec<&Record> = Vec::new();
    for free in records.of_placed(d, pattern, Placed::Unpinned) {
        let Some(pinned) = records.of(d, pattern).find(|r| r.trial == free.trial) else {
            continue;
        };
        for (a, b) in free.result.windows.iter().zip(&pinned.result.windows) {
            if let (Some(x), Some(y)) = (figure(suffix, a), figure(suffix, b)) {
                if y > 0.0 {
                    values.push(free.trial, x / y);
                }
            }
        }
        used.extend([free, pinned]);
    }
    let flags = union_flags(used.iter().copied(), e.ceiling);
    let id = sid::id(d, &ids::unpinned_vs_pinned(suffix));
    let note = format!(
        "server.{d}.{suffix}.unpinned / server.{d}.{suffix}, window by window (window k of the \
         default-placement visit over window k of the pinned visit just before it, same \
         trial): what pinning server and generator to CPUs of their own changes; above 1 the \
         default placement has the higher figure"
    );
    let m = Metric::from_values(&id, Unit::Ratio, &values.values, 1, "unpinned", note);
    if let Some(mut m) = m {
        m.ratio_of = Some([sid::id(d, &ids::unpinned(suffix)), sid::id(d, suffix)]);
        e.out
            .add(with_flags(m.with_trial_of(values.trial_of), &flags));
    }
}
