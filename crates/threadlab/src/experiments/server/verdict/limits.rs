//! The conclusion's sentence on slow clients: which designs served a well-behaved client at
//! once beside the crowd, and, for the others, what happened and the limit that explains it.

use super::super::emit::limits::limit_of;
use super::super::limits::{Answer, LimitsRecord};
use super::super::records::Records;
use super::us;

/// A well-behaved client served within this (median) counts as served at once.
const AT_ONCE_NS: f64 = 10e6;

fn median_served_us(rec: &LimitsRecord) -> Option<f64> {
    let v: Vec<f64> = rec
        .attempts
        .iter()
        .filter(|a| a.answer == Answer::Served)
        .map(|a| a.ns as f64)
        .collect();
    (!v.is_empty()).then(|| crate::measure::stats::median(&v) / 1e3)
}

pub fn sentence(records: &Records) -> String {
    let Some(first) = records.limits.first() else {
        return String::new();
    };
    let mut at_once = Vec::new();
    let mut others = Vec::new();
    for rec in &records.limits {
        let n = rec.attempts.len();
        let served = rec.count(|a| *a == Answer::Served);
        let busy = rec.count(|a| *a == Answer::Busy);
        let silent = n - served - busy;
        let p50 = median_served_us(rec);
        if served == n && p50.is_some_and(|p| p * 1e3 <= AT_ONCE_NS) {
            at_once.push(format!("{} {}", rec.design, us(p50)));
        } else {
            others.push(format!(
                "{} served {served} of {n}{}{}{} (its limit: {})",
                rec.design,
                p50.map_or(String::new(), |p| format!(" at a median {}", us(Some(p)))),
                if busy > 0 {
                    format!(", refused {busy} BUSY")
                } else {
                    String::new()
                },
                if silent > 0 {
                    format!(", left {silent} without an answer")
                } else {
                    String::new()
                },
                limit_of(rec.design).1
            ));
        }
    }
    format!(
        "Beside {} misbehaving connections ({} never reading, {} idle, {} half-sent), a \
         well-behaved client was served at once by {}{}. ",
        first.misbehaving(),
        first.non_readers,
        first.idle,
        first.half_sent,
        if at_once.is_empty() {
            "no design".into()
        } else {
            at_once.join(", ")
        },
        if others.is_empty() {
            String::new()
        } else {
            format!("; {}", others.join("; "))
        }
    )
}
