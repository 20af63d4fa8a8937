//! Matching the threads' own clock stamps with the kernel's tracepoints, operation by
//! operation, and splitting each operation's time at the points found.
//!
//! An operation is described as a sequence of steps: a stamp the threads took, or the first
//! tracepoint hit after the previous point that matches (event, CPU, the thread it names).
//! A step may be optional (an interrupt that only some wake-ups need, and that may come before
//! or after the activation): it is looked for between two required points and skipped where
//! it is not found. A missing required step drops the operation; the counts say how many
//! matched. The points found are put in time order, and each interval between two of them is
//! named by both its ends ("sched_waking → sched_switch"): a part is then the same quantity
//! in every operation that has it.

use std::collections::BTreeMap;

use super::perf::Sample;

/// What a step of an operation is.
#[derive(Debug, Clone)]
pub enum Point {
    /// The operation's stamp number `i`.
    Stamp(usize),
    /// The first hit of any of `events` on `cpu` (None: any CPU) whose `field` (offset, size)
    /// holds `tid`, when given. `within`: an optional step, looked for between the points of
    /// those two steps (indices into the step list, both required).
    Event {
        events: Vec<usize>,
        cpu: Option<u32>,
        field: Option<((usize, usize), u32)>,
        within: Option<(usize, usize)>,
    },
}

/// A step and the name of the point it finds.
#[derive(Debug, Clone)]
pub struct Step {
    pub ends: &'static str,
    pub point: Point,
}

/// Samples by event index, each list sorted by time.
pub struct Timeline {
    by_event: BTreeMap<usize, Vec<Sample>>,
}

impl Timeline {
    pub fn new(samples: Vec<(usize, Sample)>) -> Timeline {
        let mut by_event: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
        for (e, s) in samples {
            by_event.entry(e).or_default().push(s);
        }
        for v in by_event.values_mut() {
            v.sort_by_key(|s| s.time_ns);
        }
        Timeline { by_event }
    }

    /// The first matching hit in [from, to].
    fn first(
        &self,
        events: &[usize],
        cpu: Option<u32>,
        field: Option<((usize, usize), u32)>,
        from: u64,
        to: u64,
    ) -> Option<u64> {
        events
            .iter()
            .filter_map(|e| {
                let v = self.by_event.get(e)?;
                let start = v.partition_point(|s| s.time_ns < from);
                v[start..]
                    .iter()
                    .take_while(|s| s.time_ns <= to)
                    .find(|s| {
                        cpu.map_or(true, |c| s.cpu == c)
                            && field.map_or(true, |(f, tid)| s.field(f) == Some(u64::from(tid)))
                    })
                    .map(|s| s.time_ns)
            })
            .min()
    }

    /// The last hit of `event` on `cpu` before `t`.
    pub fn last_before(&self, event: usize, cpu: u32, t: u64) -> Option<&Sample> {
        let v = self.by_event.get(&event)?;
        let end = v.partition_point(|s| s.time_ns < t);
        v[..end].iter().rev().find(|s| s.cpu == cpu)
    }
}

/// Per interval ("point -> point"): every duration found (ns); and the operations that
/// matched, with their whole durations.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Parts {
    /// In the order the intervals first appeared.
    pub names: Vec<String>,
    pub ns: BTreeMap<String, Vec<u64>>,
    /// First stamp to last, per matched operation.
    pub whole_ns: Vec<u64>,
    pub matched: usize,
    pub total: usize,
}

/// Splits every operation (its stamps, in order) at the points `steps` find. An interval is
/// named by the points at both its ends, so that a part is the same quantity in every
/// operation that has it, whichever optional points the others had.
pub fn split(timeline: &Timeline, ops: &[Vec<u64>], start: &'static str, steps: &[Step]) -> Parts {
    let mut parts = Parts {
        total: ops.len(),
        ..Parts::default()
    };
    for stamps in ops {
        let Some(found) = points(timeline, stamps, steps) else {
            continue;
        };
        parts.matched += 1;
        parts
            .whole_ns
            .push(stamps[stamps.len() - 1].saturating_sub(stamps[0]));
        let (mut prev_t, mut prev_name) = (stamps[0], start);
        for (t, name) in found {
            let key = format!("{prev_name} → {name}");
            if !parts.names.contains(&key) {
                parts.names.push(key.clone());
            }
            parts.ns.entry(key).or_default().push(t - prev_t);
            (prev_t, prev_name) = (t, name);
        }
    }
    parts
}

/// The points of one operation in time order, each with its name; None when a required step
/// is missing.
fn points(timeline: &Timeline, stamps: &[u64], steps: &[Step]) -> Option<Vec<(u64, &'static str)>> {
    let (&start, &end) = (stamps.first()?, stamps.last()?);
    // Required steps first, in order, each after the one before.
    let mut at: Vec<Option<u64>> = vec![None; steps.len()];
    let mut cursor = start;
    for (i, step) in steps.iter().enumerate() {
        let t = match &step.point {
            Point::Stamp(k) => *stamps.get(*k)?,
            Point::Event {
                within: Some(_), ..
            } => continue,
            Point::Event {
                events, cpu, field, ..
            } => timeline.first(events, *cpu, *field, cursor, end)?,
        };
        if t < cursor {
            return None;
        }
        at[i] = Some(t);
        cursor = t;
    }
    // Then the optional ones, each inside its window.
    for (i, step) in steps.iter().enumerate() {
        if let Point::Event {
            events,
            cpu,
            field,
            within: Some((from, to)),
        } = &step.point
        {
            let (Some(lo), Some(hi)) = (at.get(*from).copied()?, at.get(*to).copied()?) else {
                continue;
            };
            at[i] = timeline.first(events, *cpu, *field, lo, hi);
        }
    }
    let mut found: Vec<(u64, &'static str)> = at
        .iter()
        .zip(steps)
        .filter_map(|(t, s)| t.map(|t| (t, s.ends)))
        .collect();
    found.sort_by_key(|(t, _)| *t);
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(e: usize, t: u64, cpu: u32, tid: u32) -> (usize, Sample) {
        (
            e,
            Sample {
                time_ns: t,
                cpu,
                tid: 0,
                raw: tid.to_ne_bytes().to_vec(),
            },
        )
    }

    #[test]
    fn operations_are_split_at_the_first_matching_hits() {
        // Two wake-ups of thread 7 on CPU 1; hits for another thread (8) and on the wrong CPU
        // must be passed over; the interrupt is optional.
        let tl = Timeline::new(vec![
            hit(0, 110, 0, 8),
            hit(0, 120, 0, 7),
            hit(2, 125, 0, 7),
            hit(1, 150, 1, 7),
            hit(2, 170, 1, 7),
            hit(0, 1_020, 0, 7),
            hit(2, 1_090, 1, 7),
        ]);
        let tid = ((0, 4), 7);
        let steps = vec![
            Step {
                ends: "call",
                point: Point::Event {
                    events: vec![0],
                    cpu: Some(0),
                    field: Some(tid),
                    within: None,
                },
            },
            Step {
                ends: "interrupt",
                point: Point::Event {
                    events: vec![1],
                    cpu: Some(1),
                    field: None,
                    within: Some((0, 2)),
                },
            },
            Step {
                ends: "switch",
                point: Point::Event {
                    events: vec![2],
                    cpu: Some(1),
                    field: Some(tid),
                    within: None,
                },
            },
            Step {
                ends: "return",
                point: Point::Stamp(1),
            },
        ];
        let ops = vec![vec![100, 200], vec![1_000, 1_100], vec![2_000, 2_100]];
        let p = split(&tl, &ops, "stamp", &steps);
        assert_eq!((p.matched, p.total), (2, 3), "the third has no hits");
        assert_eq!(
            p.names,
            vec![
                "stamp → call",
                "call → interrupt",
                "interrupt → switch",
                "switch → return",
                "call → switch"
            ]
        );
        assert_eq!(p.ns["stamp → call"], vec![20, 20]);
        assert_eq!(p.ns["call → interrupt"], vec![30], "only the first had one");
        assert_eq!(p.ns["interrupt → switch"], vec![20]);
        assert_eq!(
            p.ns["call → switch"],
            vec![70],
            "the second, without an interrupt"
        );
        assert_eq!(p.ns["switch → return"], vec![30, 10]);
        assert_eq!(p.whole_ns, vec![100, 100]);
        assert_eq!(tl.last_before(0, 0, 1_000).map(|s| s.time_ns), Some(120));
    }
}
