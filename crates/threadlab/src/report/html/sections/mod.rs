//! Which charts each experiment's section draws: a registry of one function per experiment,
//! and the generic charts every experiment gets when it has no function of its own (its series
//! as curves, grouped by what they plot; its figures then and now; its metrics as bars).
//!
//! Adding an experiment's charts is one function `fn(&ExperimentResult) -> Vec<Chart>` and one
//! line in `REGISTRY`. The helpers below (curves, then/now bars, grids of bars, distributions,
//! bars from an experiment's own table) do the drawing; a function only picks what to show.

use std::collections::BTreeSet;

use super::parts::{chart_for, common_unit, conv, metric_bar, series_chart, unit_label};
use super::Chart;
use crate::measure::units::Unit;
use crate::report::html::svg::{
    Axis, Bar, BarChart, BarGroup, BarSeries, DistChart, DistRow, Line, Marker, Reference, Scale,
};
use crate::report::{fmt_value, fmt_with_unit, short_note};
use crate::results::ids;
use crate::results::{ExperimentResult, Metric, Series, Table};
use crate::seeds;

type ChartsFn = fn(&ExperimentResult) -> Vec<Chart>;

/// Experiments whose sections redraw a study's figures; any other gets `generic`.
const REGISTRY: &[(&str, ChartsFn)] = &[
    ("create", create),
    ("sync", sync),
    ("switch", switch),
    ("shm", shm),
    ("fairness", fairness),
    ("ordering", ordering),
    ("preempt", preempt),
    ("throttle", throttle),
    ("priority", priority),
    ("latency", latency),
    ("coop", coop),
    ("server", super::server::charts),
];

/// The experiments that have a section function of their own.
pub fn with_own_charts() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|(name, _)| *name)
}

/// The charts of one experiment's section: its own function's, or the generic ones when it
/// has none (or when that function finds nothing it knows in the file).
pub fn charts(e: &ExperimentResult) -> Vec<Chart> {
    let own = REGISTRY
        .iter()
        .find(|(name, _)| *name == e.name)
        .map(|(_, f)| f(e))
        .unwrap_or_default();
    if own.is_empty() {
        generic(e)
    } else {
        own
    }
}

/// Series as curves, study figures then and now, and every metric as bars by unit.
pub fn generic(e: &ExperimentResult) -> Vec<Chart> {
    let mut v = series_charts(e, &|_| true);
    v.extend(then_now(
        e,
        &all_with_history(e),
        "then-now",
        "Then and now",
    ));
    v.extend(metric_bars_by_unit(e, &|m| m.ratio_of.is_none()));
    v
}

// ---------------------------------------------------------------------------------------------
// One function per experiment.

mod bars;
mod costs;
mod curves;
mod grids;
mod locks;
mod scheduling;

pub(in crate::report::html) use bars::*;
use costs::*;
pub(in crate::report::html) use curves::*;
use grids::*;
use locks::*;
use scheduling::*;

#[cfg(test)]
mod tests;
