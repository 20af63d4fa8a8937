//! What the server experiment's figures say, shared by the report's pages and the advice: the
//! designs a results file holds, their metrics, what pinning changed and how each design fared
//! beside misbehaving connections.

use crate::report::fmt_value;
use crate::results::flag::{self, Flag};
use crate::results::ids;
use crate::results::ids::server::{self as sid, stat, ServerId};
use crate::results::{ExperimentResult, Metric};

/// The designs of the file: the second segment of every `server.<design>.<…>` id (not the
/// generator's), the study's two first, the others in the order first seen.
pub fn designs(e: &ExperimentResult) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in e.metrics.iter().filter_map(|m| ServerId::parse(&m.id)) {
        if s.is_design() && !v.iter().any(|x| x == s.design) {
            v.push(s.design.to_string());
        }
    }
    v.sort_by_key(|d| sid::study_order(d)); // stable: the others keep their order
    v
}

/// The metric `server.<design>.<statistic>`.
pub fn design_metric<'a>(
    e: &'a ExperimentResult,
    design: &str,
    statistic: &str,
) -> Option<&'a Metric> {
    e.metric(&sid::id(design, statistic))
}

/// A number for the tables: whole numbers without decimals (16 connections, 3 threads).
pub fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else {
        fmt_value(v)
    }
}

/// The range over the designs of `server.<design>.<statistic>.unpinned.vs_pinned`.
fn ratio_range(e: &ExperimentResult, designs: &[String], statistic: &str) -> Option<(f64, f64)> {
    let v: Vec<f64> = designs
        .iter()
        .filter_map(|d| design_metric(e, d, &ids::unpinned_vs_pinned(statistic)))
        // A design that fell behind its plan in one placement is not a placement effect.
        .filter(|m| !flag::has(m, Flag::Saturated))
        .map(|m| m.median)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (!v.is_empty()).then_some((lo, hi))
}

/// What pinning server and generator changes here, from the ratio rows.
pub fn pinning_effect(e: &ExperimentResult, designs: &[String]) -> Option<String> {
    let p99 = ratio_range(e, designs, stat::RATE_P99)?;
    let cpu = ratio_range(e, designs, stat::CPU_PER_REQUEST);
    Some(format!(
        "the default placement over the pinned one (server on its own CPUs, generator on \
         another): p99 {:.2}x to {:.2}x{} across designs (pinned and default placement)",
        p99.0,
        p99.1,
        cpu.map_or(String::new(), |c| format!(
            ", server CPU per request {:.2}x to {:.2}x",
            c.0, c.1
        ))
    ))
}

/// Which designs served a well-behaved client every time beside the misbehaving connections,
/// and how the others fared.
pub fn limits_summary(e: &ExperimentResult, designs: &[String]) -> Option<String> {
    let mut every = Vec::new();
    let mut others = Vec::new();
    for d in designs {
        let Some(served) = design_metric(e, d, stat::LIMITS_SERVED) else {
            continue;
        };
        let count = |s: &str| design_metric(e, d, s).map_or(0.0, |m| m.median);
        if served.median >= 100.0 {
            every.push(d.clone());
        } else {
            others.push(format!(
                "{d} {}% served, {} BUSY, {} unanswered",
                fmt_num(served.median.round()),
                fmt_num(count(stat::LIMITS_BUSY)),
                fmt_num(count(stat::LIMITS_UNANSWERED))
            ));
        }
    }
    if every.is_empty() && others.is_empty() {
        return None;
    }
    Some(format!(
        "beside misbehaving connections (never reading, idle, half-sent), a well-behaved client \
         was served every time by {}{} (slow clients)",
        if every.is_empty() {
            "no design".to_string()
        } else if others.is_empty() && every.len() > 2 {
            // All of them: the count says it, and the terminal keeps two lines.
            format!("all {} designs measured", every.len())
        } else {
            every.join(", ")
        },
        if others.is_empty() {
            String::new()
        } else {
            format!("; {}", others.join("; "))
        }
    ))
}
