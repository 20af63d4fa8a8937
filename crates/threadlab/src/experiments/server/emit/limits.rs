//! The limits step's figures (`server.<design>.limits.…`) and its table: how a well-behaved
//! client fared beside misbehaving connections, with each design's limit in the note.

use super::super::limits::{Answer, LimitsRecord, ANSWER_WITHIN};
use super::*;

/// Every id the limits step gives a design.
pub fn ids(d: &str) -> Vec<String> {
    [
        stat::LIMITS_P50,
        stat::LIMITS_MAX,
        stat::LIMITS_SERVED,
        stat::LIMITS_BUSY,
        stat::LIMITS_UNANSWERED,
        stat::LIMITS_CUT,
    ]
    .iter()
    .map(|s| sid::id(d, s))
    .collect()
}

/// What stands between a design and a crowd of slow clients, as README "Servers" states it:
/// (in a few words, in full).
pub fn limit_of(d: &str) -> (&'static str, &'static str) {
    match d {
        "prefork" => (
            "its N processes",
            "its N processes, one connection each: while all are held and another waits, a \
             held connection idle or half-sent for 0.5 s is closed and its process takes the \
             waiting one, and one still waiting after 0.7 s is answered BUSY by the parent; a \
             non-reader holds its process until the frame deadline",
        ),
        "pool" => (
            "its workers",
            "its workers: replies a client does not take are finished by the dispatcher, so \
             slow readers hold no worker; requests whose work blocks hold one each (see \
             block.p99), and a request finding the queue full is answered BUSY",
        ),
        "epoll" | "epoll_per_core" | "io_uring" => (
            "none (work inline)",
            "none from slow clients (non-blocking sockets, one frame buffer per connection); \
             work runs inline, so a request whose work blocks stalls its loop (see block.p99)",
        ),
        "fork_per_client" | "thread_per_client" | "thread_per_request" => (
            "one each",
            "one process or thread per connection (or request): a slow client holds only its \
             own, up to the frame deadline or idle timeout, within the connection cap",
        ),
        _ => (
            "one task each",
            "a task per connection: a slow client holds only its own, up to the frame deadline \
             or idle timeout",
        ),
    }
}

/// The limits step's metrics, per design.
pub fn metrics(out: &mut Outcome, records: &Records, placement: &str) {
    let mut e = Emit {
        out,
        placement: placement.to_string(),
        ceiling: records.ceiling,
    };
    for rec in &records.limits {
        design(&mut e, rec);
    }
}

fn crowd(rec: &LimitsRecord) -> String {
    format!(
        "{} misbehaving connections beside it ({} sending two {} KiB frames and never reading, \
         {} idle, {} with half a header sent; each one the server closes opened again)",
        rec.misbehaving(),
        rec.non_readers,
        rec.frame_bytes / 1024,
        rec.idle,
        rec.half_sent
    )
}

fn design(e: &mut Emit, rec: &LimitsRecord) {
    let d = rec.design;
    let n = rec.attempts.len();
    // The step runs once, in the first trial: its attempts are one trial's values.
    let mut served = PerTrial::default();
    for a in rec.attempts.iter().filter(|a| a.answer == Answer::Served) {
        served.push(0, a.ns as f64 / 1e3);
    }
    let busy = rec.count(|a| *a == Answer::Busy);
    let unanswered = rec.count(|a| matches!(a, Answer::Unanswered(_)));
    let who = format!(
        "a well-behaved client's short connections (connect, one 1 KiB request, its verified \
         echo), {n} one after another, with {}; {d}'s limit: {}",
        crowd(rec),
        limit_of(d).1
    );
    let id = |s: &str| sid::id(d, s);
    if served.values.is_empty() {
        e.out.skip(
            &id(stat::LIMITS_P50),
            format!("none of the {n} attempts was served ({busy} BUSY, {unanswered} unanswered)"),
        );
    } else {
        e.windows(
            &id(stat::LIMITS_P50),
            Unit::Us,
            &served,
            format!(
                "{who}; connect to verified reply, one value per attempt served (compare \
                 server.{d}.short.1kib.mean, the same exchange with no crowd)"
            ),
            &[],
        );
    }
    let max = rec
        .attempts
        .iter()
        .filter(|a| !matches!(a.answer, Answer::Unanswered(_)))
        .map(|a| a.ns as f64 / 1e3)
        .fold(f64::NAN, f64::max);
    e.single(
        &id(stat::LIMITS_MAX),
        Unit::Us,
        max,
        "the slowest answer (a reply or BUSY) the well-behaved client got in the same step".into(),
        &[],
    );
    e.single(
        &id(stat::LIMITS_SERVED),
        Unit::Percent,
        100.0 * served.values.len() as f64 / n.max(1) as f64,
        format!("share of the well-behaved client's {n} attempts answered with its echo"),
        &[],
    );
    let server_side = rec.server.map_or(String::new(), |s| {
        format!(
            "; the server sent {} BUSY frames in all during the step, closed {} idle \
             connections and refused {} frames for their deadline",
            s.busy, s.idle_closed, s.deadlines
        )
    });
    e.single(
        &id(stat::LIMITS_BUSY),
        Unit::Count,
        busy as f64,
        format!("attempts refused with a BUSY frame (a refusal, not silence){server_side}"),
        &[],
    );
    let why = rec.attempts.iter().find_map(|a| match &a.answer {
        Answer::Unanswered(w) => Some(w.clone()),
        _ => None,
    });
    e.single(
        &id(stat::LIMITS_UNANSWERED),
        Unit::Count,
        unanswered as f64,
        format!(
            "attempts that got neither their echo nor BUSY within {:.0} s{}",
            ANSWER_WITHIN.as_secs_f64(),
            why.map_or(String::new(), |w| format!(" (the first: {w})"))
        ),
        &[],
    );
    e.single(
        &id(stat::LIMITS_CUT),
        Unit::Count,
        rec.cut as f64,
        format!(
            "misbehaving connections the server closed during the step{}",
            if rec.crowd_failed > 0 {
                format!(
                    "; {} of the crowd could not connect at all",
                    rec.crowd_failed
                )
            } else {
                String::new()
            }
        ),
        &[],
    );
}

/// One row per design: the well-behaved client's fate beside the crowd.
pub fn table(records: &Records) -> Table {
    let mut t = Table::new(
        "server.limits",
        "a well-behaved client beside misbehaving connections",
        &[
            "design",
            "attempts",
            "served",
            "BUSY",
            "unanswered",
            "p50",
            "slowest answer",
            "crowd cut",
            "limit",
        ],
    );
    for rec in &records.limits {
        let served: Vec<f64> = rec
            .attempts
            .iter()
            .filter(|a| a.answer == Answer::Served)
            .map(|a| a.ns as f64)
            .collect();
        let slowest = rec
            .attempts
            .iter()
            .filter(|a| !matches!(a.answer, Answer::Unanswered(_)))
            .map(|a| a.ns)
            .max();
        let time = |ns: f64| crate::report::fmt_with_unit(ns / 1e3, Unit::Us);
        t.row(vec![
            rec.design.to_string(),
            rec.attempts.len().to_string(),
            served.len().to_string(),
            rec.count(|a| *a == Answer::Busy).to_string(),
            rec.count(|a| matches!(a, Answer::Unanswered(_)))
                .to_string(),
            if served.is_empty() {
                "-".into()
            } else {
                time(crate::measure::stats::median(&served))
            },
            slowest.map_or("-".into(), |ns| time(ns as f64)),
            rec.cut.to_string(),
            limit_of(rec.design).0.to_string(),
        ]);
    }
    if let Some(rec) = records.limits.first() {
        t.note = format!(
            "{}; attempts: short connections one after another; served: answered with the echo; \
             BUSY: refused at once; unanswered: neither within {:.0} s; crowd cut: misbehaving \
             connections the server closed (each opened again)",
            crowd(rec),
            ANSWER_WITHIN.as_secs_f64()
        );
    }
    t
}
