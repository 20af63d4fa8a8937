//! The server experiment's section: the PThreads study's Figs. 4 and 5 redrawn beside today's
//! designs, the fork/thread ratio then and now, the latency percentile spectrum at the
//! open-loop point (from the stored HdrHistograms), and per design the server CPU per request,
//! its headline figures pinned and in the default placement, the blocking-work p99, the memory
//! per connection, the capacity at the latency target and a well-behaved client's fate beside
//! misbehaving connections.
//!
//! Designs are whatever `server.<design>.…` ids the file holds, in the order first seen, the
//! study's two (thread_per_client, fork_per_client) first: a design added later (`green`)
//! appears in every chart with no change here. Every figure carrying flags (`client_bound`,
//! `saturated`, ...) is drawn marked, and its flags are named on hover and in the numbers.

use base64::Engine;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use super::parts::{common_unit, conv, flag_text, key, metric_bar, unit_label};
use super::svg::{
    nines, Annotation, Axis, BarChart, BarGroup, BarSeries, Dash, Key, Line, LineChart, Marker,
    Reference, Scale, THEN,
};
use super::Chart;
use crate::measure::units::Unit;
use crate::report::{fmt_value, fmt_with_unit};
use crate::results::{ExperimentResult, Metric, SerializedHistogram};
use crate::seeds;

/// The two servers the study compared, drawn bold in its figures.
pub const THREAD: &str = "thread_per_client";
pub const FORK: &str = "fork_per_client";

/// The encoding `SerializedHistogram::encoding` names for HdrHistogram V2 + DEFLATE, base64.
pub const HDR_ENCODING: &str = "hdr-v2-deflate-base64";

/// A serialized histogram larger than this (base64 characters) is not decoded: the server
/// experiment's are a few kilobytes, and a page must not stall on a hostile file.
const MAX_ENCODED: usize = 8 << 20;

/// The server experiment's charts, in the order the section shows them.
pub fn charts(e: &ExperimentResult) -> Vec<Chart> {
    let designs = designs(e);
    if designs.is_empty() {
        return Vec::new();
    }
    let mut v = Vec::new();
    v.extend(figure(e, &designs, false));
    v.extend(figure(e, &designs, true));
    v.extend(fork_ratio(e));
    v.extend(first_vs_rest(e, &designs));
    v.extend(spectrum(e, &designs));
    let flags_note = |ms: &[&Metric]| flag_caption(ms);
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "cpu",
            title: "Server CPU per request at the open-loop point",
            series: &[("cpu_per_request", "server CPU per reply")],
            extra: &[
                ("switches_per_request", "switches per reply"),
                (
                    "vs_thread_per_client.cpu_per_request",
                    "÷ thread_per_client",
                ),
            ],
            references: Vec::new(),
        },
        &flags_note,
    ));
    v.extend(placement_charts(e, &designs, &flags_note));
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "block",
            title: "Blocking work: p99 latency when every request blocks the server",
            series: &[("block.p99", "p99 from the planned send")],
            extra: &[("block.achieved", "replies per second")],
            references: blocking_reference(e),
        },
        &flags_note,
    ));
    let conns = |suffix: &str| {
        designs
            .iter()
            .find_map(|d| e.metric(&format!("server.{d}.{suffix}")))
            .map(|m| format!(" ({} connections)", fmt_num(m.median)))
            .unwrap_or_default()
    };
    let (open, scale) = (
        format!("at the open-loop point{}", conns("connections")),
        format!("at connection scale{}", conns("c10k.connections")),
    );
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "memory",
            title: "Memory per connection held",
            series: &[
                ("rss_per_connection", open.as_str()),
                ("c10k.rss_per_connection", scale.as_str()),
            ],
            extra: &[("threads", "threads"), ("processes", "processes")],
            references: Vec::new(),
        },
        &flags_note,
    ));
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "capacity",
            title: "Capacity at the latency target, and goodput offered 1.5 x that",
            series: &[
                ("capacity", "capacity (p99 within the target)"),
                ("overload.goodput", "goodput offered 1.5 x capacity"),
            ],
            extra: &[
                ("overload.p99", "p99 overloaded"),
                ("overload.rejected", "answered BUSY"),
            ],
            references: Vec::new(),
        },
        &flags_note,
    ));
    v.extend(limits_chart(e, &designs, &flags_note));
    v
}

// ---------------------------------------------------------------------------------------------
// Designs and ids.

/// The designs of the file: the second segment of every `server.<design>.<…>` id (not the
/// generator's), the study's two first, the others in the order first seen.
pub fn designs(e: &ExperimentResult) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for m in &e.metrics {
        let mut p = m.id.split('.');
        if p.next() != Some("server") {
            continue;
        }
        let (Some(d), Some(_)) = (p.next(), p.next()) else {
            continue;
        };
        if d != "generator" && !d.is_empty() && !v.iter().any(|x| x == d) {
            v.push(d.to_string());
        }
    }
    let study = |d: &String| match d.as_str() {
        THREAD => 0,
        FORK => 1,
        _ => 2,
    };
    v.sort_by_key(study); // stable: the others keep their order
    v
}

/// The metric `server.<design>.<suffix>`.
pub fn design_metric<'a>(
    e: &'a ExperimentResult,
    design: &str,
    suffix: &str,
) -> Option<&'a Metric> {
    e.metric(&format!("server.{design}.{suffix}"))
}

mod bars;
mod figures;
mod placement;
mod ratios;
mod rows;
mod spectrum;

use bars::*;
use figures::*;
use placement::{limits_chart, placement_charts};
pub use placement::{limits_summary, pinning_effect};
use ratios::*;
pub use rows::*;
pub use spectrum::*;

#[cfg(test)]
mod tests;
