//! What the default placement says beside the pinned one: the table of the headline figures in
//! both, and the conclusion's sentences on many connections, which rest on the default
//! placement (what a program gets) and say what pinning changes here.

use crate::experiments::Outcome;
use crate::results::Table;

use super::super::records::Record;
use super::super::setup::Cpus;
use super::super::Running;
use super::{best, us, THREAD};

/// The median of `server.<d>.<suffix>` in the default placement, or pinned when that was not
/// measured: (value, whether it is the default placement's).
fn placed(out: &Outcome, d: &str, suffix: &str) -> Option<(f64, bool)> {
    out.median(&format!("server.{d}.{suffix}.unpinned"))
        .map(|v| (v, true))
        .or_else(|| {
            out.median(&format!("server.{d}.{suffix}"))
                .map(|v| (v, false))
        })
}

/// The design with the smallest figure, from the default placement when any design has one.
pub fn best_placed<'a>(
    out: &Outcome,
    running: &'a [Running],
    suffix: &str,
    keep: impl Fn(&Running) -> bool,
) -> Option<(&'a str, f64, bool)> {
    let unpinned = format!("{suffix}.unpinned");
    if let Some((d, v)) = best(out, running, &unpinned, &keep) {
        return Some((d, v, true));
    }
    best(out, running, suffix, keep).map(|(d, v)| (d, v, false))
}

/// "; pinned 41 us" for a design's figure in the default placement.
pub fn pinned_beside(out: &Outcome, d: &str, suffix: &str) -> String {
    out.median(&format!("server.{d}.{suffix}"))
        .map_or(String::new(), |p| format!("; pinned {}", us(Some(p))))
}

/// The range of `server.<d>.<suffix>.unpinned.vs_pinned` over the designs that kept up with
/// their plan in both placements, with the design at the far end from 1: (lowest, highest,
/// (design, its ratio)).
fn ratio_range(
    out: &Outcome,
    running: &[Running],
    suffix: &str,
) -> Option<(f64, f64, (&'static str, f64))> {
    let all: Vec<(&'static str, f64)> = running
        .iter()
        .filter_map(|r| {
            out.metric(&format!(
                "server.{}.{suffix}.unpinned.vs_pinned",
                r.info.name
            ))
            .filter(|m| !m.flags.iter().any(|f| f == "saturated"))
            .map(|m| (r.info.name, m.median))
        })
        .filter(|(_, v)| v.is_finite() && *v > 0.0)
        .collect();
    let lo = all.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    let hi = all.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
    let far = all
        .iter()
        .copied()
        .max_by(|a, b| a.1.ln().abs().total_cmp(&b.1.ln().abs()))?;
    Some((lo, hi, far))
}

/// The designs whose open-loop point fell behind its plan in one of the placements.
fn fell_behind(out: &Outcome, running: &[Running]) -> Vec<&'static str> {
    running
        .iter()
        .filter(|r| {
            out.metric(&format!(
                "server.{}.rate.p99.unpinned.vs_pinned",
                r.info.name
            ))
            .is_some_and(|m| m.flags.iter().any(|f| f == "saturated"))
        })
        .map(|r| r.info.name)
        .collect()
}

/// The conclusion's sentences on many long connections.
pub fn many_connections(out: &Outcome, running: &[Running], rate: &Record) -> String {
    let mut s = String::new();
    let load = format!(
        "{} long connections at {:.0} requests/s",
        rate.connections, rate.offered
    );
    if let Some((low, v, unpinned)) = best_placed(out, running, "cpu_per_request", |_| true) {
        s.push_str(&format!(
            "With {load}, {} the least server CPU per request was {low}'s ({}{}); ",
            if unpinned {
                "in the default placement (nothing pinned, as a program runs)"
            } else {
                "pinned"
            },
            us(Some(v)),
            if unpinned {
                pinned_beside(out, low, "cpu_per_request")
            } else {
                String::new()
            }
        ));
    }
    let cpu = |d: &str| placed(out, d, "cpu_per_request").map(|x| x.0);
    if let (Some(e), Some(t)) = (cpu("epoll"), cpu(THREAD)) {
        s.push_str(&format!(
            "epoll {} against thread_per_client {} ({:.2}x). ",
            us(Some(e)),
            us(Some(t)),
            e / t
        ));
    }
    if let Some((low, v, true)) = best_placed(out, running, "rate.p99", |_| true) {
        s.push_str(&format!(
            "The lowest p99 there in the default placement: {low}'s ({}{}). ",
            us(Some(v)),
            pinned_beside(out, low, "rate.p99")
        ));
    }
    let p99 = ratio_range(out, running, "rate.p99");
    let cpu = ratio_range(out, running, "cpu_per_request");
    let peak = ratio_range(out, running, "peak");
    if let (Some(p), Some(c)) = (p99, cpu) {
        let far = |(d, _): (&str, f64), suffix: &str| {
            format!(
                "{d}: {} default, {} pinned",
                us(out.median(&format!("server.{d}.{suffix}.unpinned"))),
                us(out.median(&format!("server.{d}.{suffix}")))
            )
        };
        s.push_str(&format!(
            "What pinning changes on this machine (server on its own CPUs, generator on \
             another), default placement over pinned per design: p99 {:.2}x to {:.2}x (most for \
             {}), server CPU per request {:.2}x to {:.2}x (most for {}){}; the study's rows and \
             the lab's other rows stay pinned{}. ",
            p.0,
            p.1,
            far(p.2, "rate.p99"),
            c.0,
            c.1,
            far(c.2, "cpu_per_request"),
            peak.map_or(String::new(), |k| format!(
                ", closed-loop peak {:.2}x to {:.2}x",
                k.0, k.1
            )),
            match fell_behind(out, running).as_slice() {
                [] => String::new(),
                late => format!(
                    " ({} left out: the open-loop point fell behind its plan in one of the \
                     placements)",
                    late.join(", ")
                ),
            }
        ));
    }
    s
}

/// Each design's headline figures pinned and in the default placement.
pub fn placement_table(out: &Outcome, running: &[Running], cpus: &Cpus) -> Table {
    let mut t = Table::new(
        "server.placement",
        "the headline figures pinned and in the default placement",
        &[
            "design",
            "p50 pinned",
            "p50 default",
            "p99 pinned",
            "p99 default",
            "CPU/req pinned",
            "CPU/req default",
            "peak/s pinned",
            "peak/s default",
        ],
    );
    for r in running {
        let d = r.info.name;
        let m = |s: &str| out.median(&format!("server.{d}.{s}"));
        let rate = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        t.row(vec![
            d.to_string(),
            us(m("rate.p50")),
            us(m("rate.p50.unpinned")),
            us(m("rate.p99")),
            us(m("rate.p99.unpinned")),
            us(m("cpu_per_request")),
            us(m("cpu_per_request.unpinned")),
            rate(m("peak")),
            rate(m("peak.unpinned")),
        ]);
    }
    t.note = format!(
        "pinned: servers on {:?}, the generator on CPU {}; default: a second server of each \
         design and the generator allowed on CPUs {:?}, placed by the kernel, visited right \
         after the pinned one in every trial; medians of the windows",
        cpus.server, cpus.client, cpus.all
    );
    t
}
