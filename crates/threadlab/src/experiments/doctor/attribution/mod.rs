//! Where the time of a cross-CPU wake-up (and of the echo round trip) goes.
//!
//! Where the kernel lets us (root or CAP_PERFMON, and tracefs readable or mountable in a
//! private namespace), the wake-up loop and the echo run again, traced: the scheduler's
//! sched_waking, sched_wakeup and sched_switch, the IPI vectors and the idle loop's cpu_idle on
//! both CPUs, matched with the threads' own clock reads, give each operation's parts: the wake
//! call, the interrupt reaching the woken CPU, the activation, the idle exit and the switch,
//! the return to user space. Where the idle-latency knob could be tried, the split is taken
//! again with the limit held, which shows the part it removes.
//!
//! Without that permission the split is inferred from the A/B where the A/B allows it (what
//! holding the idle limit at 0 removes is the idle exit), and the table says which parts need
//! the permission.

mod perf;
mod split;
mod tracefs;

use std::io::Write;

use super::figures::{round_trips_stamped, settle_idle, wake_stamped, Setup};
use super::knobs::Planned;
use super::record::Effect;
use crate::experiments::Ctx;
use crate::measure::units::fmt_value;
use crate::results::Table;

use perf::Recorder;
use split::{split, Parts, Point, Step, Timeline};

/// What the split found, for the tables, the facts and the conclusion.
pub struct Split {
    pub tables: Vec<Table>,
    /// "permitted ..." or "refused: why", for the facts.
    pub tracing: String,
    pub summary: String,
}

const EVENTS: [(&str, &str); 9] = [
    ("sched", "sched_waking"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_switch"),
    ("power", "cpu_idle"),
    ("irq_vectors", "call_function_single_entry"),
    ("irq_vectors", "reschedule_entry"),
    ("irq_vectors", "call_function_entry"),
    ("syscalls", "sys_exit_futex"),
    ("syscalls", "sys_exit_recvfrom"),
];
const WAKING: usize = 0;
const WAKEUP: usize = 1;
const SWITCH: usize = 2;
const IDLE: usize = 3;
const IPIS: [usize; 3] = [4, 5, 6];
const FUTEX_EXIT: usize = 7;
const RECV_EXIT: usize = 8;
/// The task a syscall-exit record belongs to (the common fields' pid).
const COMMON_PID: (usize, usize) = (4, 4);

/// The fields the steps match on.
struct Fields {
    woken_pid: (usize, usize),
    next_pid: (usize, usize),
    idle_state: Option<(usize, usize)>,
}

/// Splits the wake-up and the echo round trip, traced where permitted, inferred otherwise.
pub fn wakeup_split(
    ctx: &Ctx,
    a: usize,
    b: usize,
    effects: &[Effect],
    planned: &[Planned],
) -> Split {
    let pm_qos_here = planned
        .iter()
        .any(|p| matches!(p, Planned::Try(k) if k.about.id == "idle_latency"));
    match traced(ctx, a, b, pm_qos_here, effects) {
        Ok((tables, summary)) => Split {
            tables,
            tracing: "permitted: the scheduler's tracepoints through perf_event_open".into(),
            summary,
        },
        Err(why) => inferred(effects, &why),
    }
}

fn traced(
    ctx: &Ctx,
    a: usize,
    b: usize,
    pm_qos: bool,
    effects: &[Effect],
) -> Result<(Vec<Table>, String), String> {
    let tps = tracefs::tracepoints(&EVENTS)?;
    let need = |i: usize| {
        tps[i].clone().ok_or_else(|| {
            format!(
                "this kernel has no {}:{} tracepoint",
                EVENTS[i].0, EVENTS[i].1
            )
        })
    };
    let (waking, switch) = (need(WAKING)?, need(SWITCH)?);
    need(WAKEUP)?;
    let fields = Fields {
        woken_pid: waking.field("pid").ok_or("sched_waking has no pid field")?,
        next_pid: switch
            .field("next_pid")
            .ok_or("sched_switch has no next_pid field")?,
        idle_state: tps[IDLE].as_ref().and_then(|t| t.field("state")),
    };
    let events: Vec<(usize, u64, usize)> = tps
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.as_ref().map(|t| (i, t.id)))
        .flat_map(|(i, id)| [(i, id, a), (i, id, b)])
        .collect();
    let wakes = ctx.mode.pick(10, 60, 200);
    let setup = Setup::base(a, b);
    let mut columns: Vec<Column> = Vec::new();
    for hold in [false, true] {
        if hold && !pm_qos {
            continue;
        }
        settle_idle(&[a, b], ctx.cancel).map_err(|e| e.to_string())?;
        let _qos = if hold { Some(hold_pm_qos()?) } else { None };
        let rec = Recorder::open(&events)?;
        rec.enable();
        let wake = wake_stamped(&setup, wakes, ctx.cancel);
        let echo = round_trips_stamped(&setup, wakes as usize, ctx.cancel);
        rec.disable();
        let (samples, lost) = rec.samples();
        let (tid, stamps) = wake.map_err(|e| e.to_string())?;
        let (ctid, stid, trips) = echo.map_err(|e| e.to_string())?;
        let tl = Timeline::new(samples);
        let wake_ops: Vec<Vec<u64>> = stamps.iter().map(|(s, w)| vec![*s, *w]).collect();
        let wake_parts = split(
            &tl,
            &wake_ops,
            "wake call",
            &wake_steps(a as u32, b as u32, tid as u32, &fields),
        );
        let echo_ops: Vec<Vec<u64>> = trips.iter().map(|t| t.to_vec()).collect();
        let echo_parts = split(
            &tl,
            &echo_ops,
            "client send",
            &echo_steps(a as u32, b as u32, ctid as u32, stid as u32, &fields),
        );
        let mut notes: Vec<String> = Vec::new();
        notes.extend(idle_states(&tl, &stamps, b as u32, &fields));
        if lost > 0 {
            notes.push(format!(
                "the kernel dropped {lost} trace records (buffers full)"
            ));
        }
        let mut wake_notes = notes.clone();
        wake_notes.extend(blind_note(&wake_parts, "switched in"));
        let mut echo_notes = notes;
        echo_notes.extend(blind_note(&echo_parts, "server switched in"));
        let label = if hold {
            "/dev/cpu_dma_latency held at 0"
        } else {
            "no idle limit held"
        };
        columns.push(Column {
            label: label.into(),
            wake: wake_parts,
            echo: echo_parts,
            wake_note: (!wake_notes.is_empty()).then(|| wake_notes.join("; ")),
            echo_note: (!echo_notes.is_empty()).then(|| echo_notes.join("; ")),
        });
    }
    let mut wake_t = parts_table(
        "doctor.wakeup_split",
        "Where a cross-CPU wake-up's time goes (traced)",
        &columns
            .iter()
            .map(|c| (c.label.clone(), &c.wake, c.wake_note.clone()))
            .collect::<Vec<_>>(),
        a,
        b,
    );
    if let Some(e) = effects
        .iter()
        .find(|e| e.knob == "idle_latency" && e.figure == "wakeup")
    {
        let mut row = vec![
            "the idle exit (inferred from the idle_latency A/B: wakeup off - on)".to_string(),
            fmt_value(e.off - e.on),
        ];
        row.resize(wake_t.header.len(), "-".into());
        wake_t.row(row);
    }
    let echo_t = parts_table(
        "doctor.echo_split",
        "Where an echo round trip's time goes (traced)",
        &columns
            .iter()
            .map(|c| (c.label.clone(), &c.echo, c.echo_note.clone()))
            .collect::<Vec<_>>(),
        a,
        b,
    );
    Ok((vec![wake_t, echo_t], summary(&columns)))
}

/// One traced condition: the parts of the wake-up and of the echo, and what to say of each.
struct Column {
    label: String,
    wake: Parts,
    echo: Parts,
    wake_note: Option<String>,
    echo_note: Option<String>,
}

fn hold_pm_qos() -> Result<std::fs::File, String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
    f.write_all(&0i32.to_ne_bytes())
        .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
    Ok(f)
}

fn event(ends: &'static str, events: Vec<usize>, cpu: u32, field: ((usize, usize), u32)) -> Step {
    Step {
        ends,
        point: Point::Event {
            events,
            cpu: Some(cpu),
            field: Some(field),
            within: None,
        },
    }
}

/// A point only some operations have, looked for between the points of steps `within`.
fn optional(
    ends: &'static str,
    events: Vec<usize>,
    cpu: Option<u32>,
    field: Option<((usize, usize), u32)>,
    within: (usize, usize),
) -> Step {
    Step {
        ends,
        point: Point::Event {
            events,
            cpu,
            field,
            within: Some(within),
        },
    }
}

fn stamp(ends: &'static str, i: usize) -> Step {
    Step {
        ends,
        point: Point::Stamp(i),
    }
}

/// The wake-up: stamps [before FUTEX_WAKE, the woken thread running]. Only the waker's
/// sched_waking is required: the woken CPU's points may be invisible (see `blind_note`).
fn wake_steps(a: u32, b: u32, tid: u32, f: &Fields) -> Vec<Step> {
    let w = (0, 5);
    vec![
        event("sched_waking", vec![WAKING], a, (f.woken_pid, tid)),
        optional("IPI entry", IPIS.to_vec(), Some(b), None, w),
        optional(
            "sched_wakeup",
            vec![WAKEUP],
            None,
            Some((f.woken_pid, tid)),
            w,
        ),
        optional(
            "switched in",
            vec![SWITCH],
            Some(b),
            Some((f.next_pid, tid)),
            w,
        ),
        optional(
            "futex returns",
            vec![FUTEX_EXIT],
            Some(b),
            Some((COMMON_PID, tid)),
            w,
        ),
        stamp("thread running", 1),
    ]
}

/// The echo: stamps [client before write, server after read, server before write, client
/// after read].
fn echo_steps(a: u32, b: u32, client: u32, server: u32, f: &Fields) -> Vec<Step> {
    let (s, c) = ((f.woken_pid, server), (f.woken_pid, client));
    let (ws, wc) = ((0, 5), (6, 11));
    vec![
        event("server sched_waking", vec![WAKING], a, s),
        optional("IPI to the server's CPU", IPIS.to_vec(), Some(b), None, ws),
        optional("server sched_wakeup", vec![WAKEUP], None, Some(s), ws),
        optional(
            "server switched in",
            vec![SWITCH],
            Some(b),
            Some((f.next_pid, server)),
            ws,
        ),
        optional(
            "server's recv returns",
            vec![RECV_EXIT],
            Some(b),
            Some((COMMON_PID, server)),
            ws,
        ),
        stamp("server has the request", 1),
        event("client sched_waking", vec![WAKING], b, c),
        optional("IPI to the client's CPU", IPIS.to_vec(), Some(a), None, wc),
        optional("client sched_wakeup", vec![WAKEUP], None, Some(c), wc),
        optional(
            "client switched in",
            vec![SWITCH],
            Some(a),
            Some((f.next_pid, client)),
            wc,
        ),
        optional(
            "client's recv returns",
            vec![RECV_EXIT],
            Some(a),
            Some((COMMON_PID, client)),
            wc,
        ),
        stamp("client has the reply", 3),
    ]
}

/// Why the woken CPU's points are missing, when every operation lacks the switch into the
/// woken thread: on some machines no tracepoint is recorded while a CPU runs its idle task (on
/// this KVM guest, neither perf nor ftrace saw a switch out of idle on CPU 1, while CPU 0's
/// were recorded).
fn blind_note(p: &Parts, switched_in: &str) -> Option<String> {
    let seen = p.names.iter().any(|n| n.contains(switched_in));
    (p.matched > 0 && !seen).then(|| {
        "no tracepoint was recorded while the woken CPU ran its idle task (no switch out of \
         idle, no interrupt taken while idle), so the interrupt's delivery, the idle exit and \
         the switch are one part here, ending where the woken thread's system call returns; \
         the idle-latency A/B separates the idle exit"
            .to_string()
    })
}

/// Which idle state the woken CPU was in just before each wake-up, as a sentence.
fn idle_states(tl: &Timeline, stamps: &[(u64, u64)], b: u32, f: &Fields) -> Option<String> {
    let field = f.idle_state?;
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for (t0, _) in stamps {
        let state = match tl.last_before(IDLE, b, *t0).and_then(|s| s.field(field)) {
            Some(s) if s == u64::from(u32::MAX) => "not idle".to_string(),
            Some(s) => format!("idle state {s}"),
            None => "unknown".to_string(),
        };
        *counts.entry(state).or_default() += 1;
    }
    if counts.keys().all(|k| k == "unknown") {
        return None;
    }
    let n = stamps.len().max(1);
    Some(format!(
        "the woken CPU just before the wake call: {}",
        counts
            .iter()
            .map(|(k, c)| format!("{k} in {:.0}%", *c as f64 / n as f64 * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn median_us(v: &[u64]) -> f64 {
    let f: Vec<f64> = v.iter().map(|x| *x as f64 / 1e3).collect();
    crate::measure::stats::median(&f)
}

fn parts_table(
    id: &str,
    title: &str,
    columns: &[(String, &Parts, Option<String>)],
    a: usize,
    b: usize,
) -> Table {
    let mut header = vec!["part".to_string()];
    header.extend(columns.iter().map(|c| format!("{} (µs)", c.0)));
    let mut t = Table {
        id: id.into(),
        title: title.into(),
        header,
        ..Table::default()
    };
    let mut names: Vec<&str> = Vec::new();
    for (_, p, _) in columns {
        for n in &p.names {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    for n in names {
        let mut row = vec![n.to_string()];
        for (_, p, _) in columns {
            row.push(p.ns.get(n).map_or("-".into(), |v| {
                format!("{} ({} of {})", fmt_value(median_us(v)), v.len(), p.matched)
            }));
        }
        t.row(row);
    }
    let mut whole = vec!["the whole operation".to_string()];
    whole.extend(
        columns
            .iter()
            .map(|(_, p, _)| format!("{} ({})", fmt_value(median_us(&p.whole_ns)), p.matched)),
    );
    t.row(whole);
    let mut matched = vec!["operations matched".to_string()];
    matched.extend(
        columns
            .iter()
            .map(|(_, p, _)| format!("{} of {}", p.matched, p.total)),
    );
    t.row(matched);
    let notes: Vec<String> = columns
        .iter()
        .filter_map(|(l, _, n)| n.as_ref().map(|n| format!("{l}: {n}")))
        .collect();
    t.note = format!(
        "Waker or client on CPU {a}, woken thread or server on CPU {b}. Traced with \
         sched_waking, sched_wakeup, sched_switch, the IPI vectors and cpu_idle through \
         perf_event_open on both CPUs (CLOCK_MONOTONIC), matched with the threads' own clock \
         reads. Points: the wake call or send (the thread's clock read just before it), \
         sched_waking (the scheduler starts the wake-up, on the waker's CPU), IPI entry (the \
         woken CPU takes the interrupt, after leaving a halt), sched_wakeup (the thread is made \
         runnable), switched in (sched_switch to the thread on its CPU), running (the thread's \
         own clock read). Not every operation has every point (an interrupt only where the \
         woken CPU had to be interrupted), so each part is named by both its ends and is a \
         median over the operations that had it, with how many had it; the medians need not \
         add up to the whole.{}",
        if notes.is_empty() {
            String::new()
        } else {
            format!(" {}.", notes.join("; "))
        }
    );
    t
}

fn summary(columns: &[Column]) -> String {
    let Some(off) = columns.first().map(|c| &c.wake) else {
        return String::new();
    };
    let biggest = off
        .names
        .iter()
        .filter(|n| off.ns[*n].len() * 2 >= off.matched)
        .map(|n| (n, median_us(&off.ns[n])))
        .max_by(|x, y| x.1.total_cmp(&y.1));
    let Some((n, us)) = biggest else {
        return "The traced wake-ups could not be matched with the tracepoints.".into();
    };
    let mut s = format!(
        "Traced, a cross-CPU wake-up here takes {} µs (median), its largest part {n} ({} µs).",
        fmt_value(median_us(&off.whole_ns)),
        fmt_value(us)
    );
    if let Some(v) = columns.get(1).and_then(|c| c.wake.ns.get(n)) {
        s.push_str(&format!(
            " With the idle limit held at 0 that part takes {} µs.",
            fmt_value(median_us(v))
        ));
    }
    s
}

/// Without tracepoints: what the A/B results imply, and what needs the permission.
fn inferred(effects: &[Effect], why: &str) -> Split {
    let mut t = Table::new(
        "doctor.wakeup_split",
        "Where a cross-CPU wake-up's time goes (inferred: tracing refused)",
        &["part", "µs", "how known"],
    );
    let idle = effects
        .iter()
        .find(|e| e.knob == "idle_latency" && e.figure == "wakeup");
    let whole = idle.or_else(|| {
        effects
            .iter()
            .find(|e| e.figure == "wakeup" && e.knob == "spin_then_park")
    });
    let mut summary = String::new();
    if let Some(w) = whole {
        t.row(vec![
            "the whole wake-up".into(),
            fmt_value(w.off),
            format!("measured ({} off)", w.knob),
        ]);
    }
    if let Some(e) = idle {
        t.row(vec![
            "the idle exit (on a VM: the halted vCPU's exit to the host and back)".into(),
            fmt_value(e.off - e.on),
            "inferred: what holding /dev/cpu_dma_latency at 0 removes (idle_latency off - on)"
                .into(),
        ]);
        t.row(vec![
            "the rest: wake call, wake-up delivery, switch, return".into(),
            fmt_value(e.on),
            "inferred: what remains with the idle CPUs polling (idle_latency on)".into(),
        ]);
        summary = format!(
            "Inferred from the A/B: the idle exit is about {} µs of a {} µs wake-up.",
            fmt_value(e.off - e.on),
            fmt_value(e.off)
        );
    } else {
        t.row(vec![
            "the idle exit".into(),
            "-".into(),
            "needs the idle-latency A/B (/dev/cpu_dma_latency, root only here) or the \
             tracepoints"
                .into(),
        ]);
    }
    t.row(vec![
        "wake call, interrupt, activation, switch, return, each".into(),
        "-".into(),
        format!("needs the tracepoints: {why}"),
    ]);
    t.note =
        "Without the scheduler's tracepoints only what an A/B isolates can be told apart.".into();
    if summary.is_empty() {
        summary = format!("The wake-up could not be split here: {why}.");
    }
    Split {
        tables: vec![t],
        tracing: format!("refused: {why}"),
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracefs_mounts() -> usize {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" tracefs "))
            .count()
    }

    #[test]
    fn where_permitted_the_wake_ups_are_matched_and_no_mount_is_left_behind() {
        let alone = crate::experiments::Standalone::new();
        let ctx = alone.ctx(crate::experiments::Mode::Tiny);
        let Some((a, b)) = crate::measure::placement::cpu_pair() else {
            return;
        };
        let mounts = tracefs_mounts();
        let split = wakeup_split(&ctx, a, b, &[], &[]);
        assert_eq!(
            tracefs_mounts(),
            mounts,
            "the machine's mounts are as they were"
        );
        if split.tracing.starts_with("refused") {
            // Not permitted here: the inferred table says what needs the permission.
            let t = &split.tables[0];
            assert!(t
                .rows
                .iter()
                .any(|r| r[2].contains("needs the tracepoints")));
            return;
        }
        let t = split
            .tables
            .iter()
            .find(|t| t.id == "doctor.wakeup_split")
            .unwrap();
        let matched = t
            .rows
            .iter()
            .find(|r| r[0] == "operations matched")
            .unwrap();
        let n: usize = matched[1].split(' ').next().unwrap().parse().unwrap();
        assert!(n > 0, "{t:?}");
        assert!(t
            .rows
            .iter()
            .any(|r| r[0].starts_with("wake call → sched_waking")));
    }
}
