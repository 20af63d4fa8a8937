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

use super::parts::{chart_for, common_unit, conv, flag_text, metric_bar, unit_label};
use super::svg::{
    nines, Annotation, Axis, BarChart, BarGroup, BarSeries, Dash, Key, Line, LineChart, Marker,
    Reference, Scale, THEN,
};
use super::Chart;
use crate::measure::units::Unit;
use crate::report::{fmt_value, fmt_with_unit};
use crate::results::flag;
use crate::results::ids::server::{stat, Connection};
use crate::results::ids::{self, server as sid};
use crate::results::{ExperimentResult, Historical, Metric, SerializedHistogram, HDR_ENCODING};
use crate::seeds;

/// The two servers the study compared, drawn bold in its figures.
pub const THREAD: &str = sid::THREAD_PER_CLIENT;
pub const FORK: &str = sid::FORK_PER_CLIENT;

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
            series: &[(stat::CPU_PER_REQUEST.into(), "server CPU per reply")],
            extra: &[
                (stat::SWITCHES_PER_REQUEST.into(), "switches per reply"),
                (
                    sid::vs_design(THREAD, stat::CPU_PER_REQUEST),
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
            series: &[(stat::BLOCK_P99.into(), "p99 from the planned send")],
            extra: &[(stat::BLOCK_ACHIEVED.into(), "replies per second")],
            references: blocking_reference(e),
        },
        &flags_note,
    ));
    let conns = |statistic: &str| {
        designs
            .iter()
            .find_map(|d| design_metric(e, d, statistic))
            .map(|m| format!(" ({} connections)", fmt_num(m.median)))
            .unwrap_or_default()
    };
    let (open, scale) = (
        format!("at the open-loop point{}", conns(stat::CONNECTIONS)),
        format!("at connection scale{}", conns(stat::C10K_CONNECTIONS)),
    );
    v.extend(design_bars(
        e,
        &designs,
        &BarsSpec {
            what: "memory",
            title: "Memory per connection held",
            series: &[
                (stat::RSS_PER_CONNECTION.into(), open.as_str()),
                (stat::C10K_RSS_PER_CONNECTION.into(), scale.as_str()),
            ],
            extra: &[
                (stat::THREADS.into(), "threads"),
                (stat::PROCESSES.into(), "processes"),
            ],
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
                (stat::CAPACITY.into(), "capacity (p99 within the target)"),
                (
                    stat::OVERLOAD_GOODPUT.into(),
                    "goodput offered 1.5 x capacity",
                ),
            ],
            extra: &[
                (stat::OVERLOAD_P99.into(), "p99 overloaded"),
                (stat::OVERLOAD_REJECTED.into(), "answered BUSY"),
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

mod bars;
mod figures;
mod placement;
mod ratios;
mod rows;
mod spectrum;

pub use crate::report::server_facts::{design_metric, designs, limits_summary, pinning_effect};
use bars::*;
use figures::*;
use placement::{limits_chart, placement_charts};
use ratios::*;
use rows::*;
pub use spectrum::*;

#[cfg(test)]
mod tests;
