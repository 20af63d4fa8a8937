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
}
