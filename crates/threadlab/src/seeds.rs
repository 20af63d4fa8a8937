//! The historical figures of the five source studies, each with its citation.
//!
//! Every value is copied from the study's text (../shared/seeds/); the unit is the study's own.

use crate::results::{Historical, HistoricalSeries};

pub const PTHREADS_1999: &str =
    "Kothari & Claypool, PThreads Performance, WPI-CS-TR-99-11 (1999), Sun Ultra-1 / SunOS 5.6";
pub const MAC_1997: &str =
    "Oddone, Preempting the Mac, MacTech 13(1) (1997), Mac Thread Manager 2.1.1 / System 7.5.1";
pub const DELPHI_2010S: &str =
    "Delphi TThread articles (2010s), Core i3 M380 (2 cores, 4 logical) / Windows 7";
pub const BEOS_1999: &str =
    "Queru, The Scheduler Is Your Friend, Be Newsletter 4-45 (1999), BeOS R4.5";
pub const ERLANGEN_MACH: &str = "Erlangen QuickThreads port on Mach 3.0 (1990s), HP715/33";

fn fig(value: f64, unit: &str, source: &str) -> Option<Historical> {
    Some(Historical {
        value,
        unit: unit.to_string(),
        source: source.to_string(),
    })
}

/// The historical figure for a metric id, if the studies give one.
pub fn historical(metric_id: &str) -> Option<Historical> {
    let p = PTHREADS_1999;
    match metric_id {
        "create.thread" => fig(67.8961, "us", p),
        "create.process.fork" => fig(11604.4, "us", p),
        "destroy.thread" => fig(49.779, "us", p),
        "destroy.process" => fig(5229.938, "us", p),
        "sync.mutex" | "sync.mutex.single_thread" => fig(0.699, "us", p),
        "sync.semaphore" => fig(2.898, "us", p),
        "switch.thread.yield" => fig(17.925, "us", p),
        "switch.green.yield" => fig(23.954, "us", p),
        "switch.process.yield" => fig(21.62, "us", p),
        "preempt.timer_signal" => fig(24.42, "ms", ERLANGEN_MACH),
        // The study's "asynchronous software trap" is today's thread-directed signal; its direct
        // path ("some processor cycles") has no figure to compare with preempt.poll_flag.
        "preempt.signal_roundtrip" => fig(0.19, "ms", ERLANGEN_MACH),
        _ => None,
    }
}

/// Fig. 1 of the PThreads study: creation time is flat from about 1,000 threads on. The text gives
/// no point values beyond the averages, so the curve is shown as the study's average.
pub fn creation_curve_note() -> &'static str {
    "PThreads 1999 Fig. 1: creation time per thread falls for small counts and is flat from ~1,000 \
     on (average 67.9 us per create+join on the Ultra-1)"
}

/// The Delphi semaphore throttle: seconds per N (Core i3 M380, 64 threads, 20 repetitions).
pub fn throttle_curve() -> HistoricalSeries {
    HistoricalSeries {
        x: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0, 65.0],
        y: vec![
            109.17, 55.44, 60.14, 67.56, 67.85, 67.42, 67.39, 67.52, 67.56, 67.59, 67.55,
        ],
        y_unit: "s".into(),
        source: format!("{DELPHI_2010S}; x = 65 stands for unthrottled"),
    }
}

/// The Mac study's scores (time relative to a cooperative thread that never yields = 1.00):
/// (machine, coop foreground, coop background, preemptive foreground, preemptive background).
pub const MAC_SCORES: &[(&str, f64, f64, f64, f64)] = &[
    ("Classic", 1.066, 1.214, 2.304, 1.690),
    ("LC II", 1.048, 1.268, 1.407, 2.060),
    ("SE/30 24-bit", 1.000, 1.101, 1.203, 1.497),
    ("SE/30 32-bit", 1.035, 1.133, 1.235, 1.521),
    ("IIvx 24-bit", 1.011, 1.047, 1.154, 1.129),
    ("IIvx 32-bit", 1.068, 1.090, 1.178, 1.153),
    ("Quadra 700 24-bit", 1.012, 1.084, 1.080, 1.341),
    ("Quadra 700 32-bit", 1.014, 1.085, 1.075, 1.335),
    ("PowerBook 540", 1.007, 1.032, 1.078, 1.144),
];

/// The Mac machine whose scores are attached to coop metrics as the historical figure.
pub const MAC_REFERENCE: &str = "Quadra 700 32-bit";

/// The Mac study's score for one column ("coop_fg", "coop_bg", "preempt_fg", "preempt_bg") on
/// the reference machine.
pub fn mac_score(column: &str) -> Option<Historical> {
    let row = MAC_SCORES.iter().find(|r| r.0 == MAC_REFERENCE)?;
    let v = match column {
        "coop_fg" => row.1,
        "coop_bg" => row.2,
        "preempt_fg" => row.3,
        "preempt_bg" => row.4,
        _ => return None,
    };
    fig(v, "score", &format!("{MAC_1997}, {MAC_REFERENCE}"))
}

/// The BeOS latency table: (system, gaps > 256 us, longest gap in us), 256 million samples.
pub const BEOS_LATENCY: &[(&str, f64, f64)] = &[
    ("bare-bones", 35.0, 3060.0),
    ("bare-bones + annoying", 136.0, 3219.0),
    ("bare-bones + annoying + rescheduler", 365.0, 459.0),
    ("normal", 702.0, 4776.0),
    ("normal + annoying", 1139.0, 6127.0),
    ("normal + annoying + rescheduler", 2970.0, 838.0),
];

/// The BeOS figure for a latency condition ("alone", "annoying", "annoying_rescheduler") and
/// quantity ("gaps_over_threshold" or "longest_gap"), from the bare-bones system.
pub fn beos_latency(condition: &str, quantity: &str) -> Option<Historical> {
    let row = match condition {
        "alone" => BEOS_LATENCY[0],
        "annoying" => BEOS_LATENCY[1],
        "annoying_rescheduler" => BEOS_LATENCY[2],
        _ => return None,
    };
    let src = format!("{BEOS_1999}, {} system, 256 million samples", row.0);
    match quantity {
        "gaps_over_threshold" => fig(row.1, "count", &src),
        "longest_gap" => fig(row.2, "us", &src),
        _ => None,
    }
}

/// The BeOS frame example: % of 60 fps frames with k = 0, 1, 2, 3 interruptions when a
/// 100 us scheduler runs 166 times per frame and picks the spinner once in 1025.
pub fn beos_frame_binomial() -> HistoricalSeries {
    HistoricalSeries {
        x: vec![0.0, 1.0, 2.0, 3.0],
        y: vec![85.0, 13.8, 1.1, 0.06],
        y_unit: "%".into(),
        source: format!("{BEOS_1999}; binomial n = 166, p = 1/1025"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pthreads_figures_match_the_study() {
        assert_eq!(historical("create.thread").unwrap().value, 67.8961);
        assert_eq!(historical("create.process.fork").unwrap().value, 11604.4);
        assert_eq!(historical("switch.thread.yield").unwrap().unit, "us");
        assert!(historical("no.such.metric").is_none());
    }

    #[test]
    fn throttle_curve_is_complete() {
        let c = throttle_curve();
        assert_eq!(c.x.len(), c.y.len());
        assert_eq!(c.x.len(), 11);
        // Best at N = 2 (the machine's physical cores), as the article says.
        let best =
            c.y.iter()
                .enumerate()
                .min_by(|a, b| a.1.partial_cmp(b.1).unwrap())
                .unwrap()
                .0;
        assert_eq!(c.x[best], 2.0);
    }

    #[test]
    fn mac_and_beos_tables() {
        assert_eq!(MAC_SCORES.len(), 9);
        assert_eq!(mac_score("preempt_bg").unwrap().value, 1.335);
        assert!(mac_score("balance").is_none());
        assert_eq!(
            beos_latency("annoying", "gaps_over_threshold")
                .unwrap()
                .value,
            136.0
        );
        assert_eq!(
            beos_latency("annoying_rescheduler", "longest_gap")
                .unwrap()
                .unit,
            "us"
        );
        let f = beos_frame_binomial();
        assert_eq!(f.x.len(), f.y.len());
    }
}
