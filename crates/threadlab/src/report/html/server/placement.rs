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
        "the default placement over the pinned one (server on its own CPUs, the generator on \
         another) was {:.2}x to {:.2}x in p99{} across designs (pinned and default placement)",
        p99.0,
        p99.1,
        cpu.map_or(String::new(), |c| format!(
            " and {:.2}x to {:.2}x in server CPU per request",
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
