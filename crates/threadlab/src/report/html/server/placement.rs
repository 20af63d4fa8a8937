//! The default placement beside the pinned one (`server.<design>.<figure>.unpinned`), and the
//! limits step (`server.<design>.limits.…`): their charts, and the sentences the advice takes
//! from them.

use super::*;

/// Pinned and default-placement bars of the headline figures, one chart each.
pub(super) fn placement_charts(
    e: &ExperimentResult,
    designs: &[String],
    flags_note: &dyn Fn(&[&Metric]) -> String,
) -> Vec<Chart> {
    let specs = [
        (
            "placement",
            "Open-loop p99, pinned and in the default placement",
            stat::RATE_P99,
        ),
        (
            "placement-cpu",
            "Server CPU per request, pinned and in the default placement",
            stat::CPU_PER_REQUEST,
        ),
        (
            "placement-peak",
            "Closed-loop peak, pinned and in the default placement",
            stat::PEAK,
        ),
    ];
    let any = designs
        .iter()
        .any(|d| design_metric(e, d, &ids::unpinned(stat::RATE_P99)).is_some());
    if !any {
        return Vec::new();
    }
    specs
        .iter()
        .filter_map(|&(what, title, statistic)| {
            design_bars(
                e,
                designs,
                &BarsSpec {
                    what,
                    title,
                    series: &[
                        (statistic.into(), "pinned"),
                        (ids::unpinned(statistic), "default placement"),
                    ],
                    extra: &[(ids::unpinned_vs_pinned(statistic), "default ÷ pinned")],
                    references: Vec::new(),
                },
                flags_note,
            )
        })
        .collect()
}

/// The well-behaved client's latency beside the misbehaving connections, and its fate.
pub(super) fn limits_chart(
    e: &ExperimentResult,
    designs: &[String],
    flags_note: &dyn Fn(&[&Metric]) -> String,
) -> Option<Chart> {
    design_bars(
        e,
        designs,
        &BarsSpec {
            what: "limits",
            title: "Slow clients: a well-behaved client beside misbehaving connections",
            series: &[
                (stat::LIMITS_P50.into(), "served, median"),
                (stat::LIMITS_MAX.into(), "slowest answer"),
            ],
            extra: &[
                (stat::LIMITS_SERVED.into(), "served"),
                (stat::LIMITS_BUSY.into(), "BUSY"),
                (stat::LIMITS_UNANSWERED.into(), "unanswered"),
                (stat::LIMITS_CUT.into(), "crowd cut by the server"),
            ],
            references: Vec::new(),
        },
        flags_note,
    )
}
