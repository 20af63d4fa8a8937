//! The five source studies and their historical figures, each with its citation.
//!
//! Every value is copied from the study's text (../shared/seeds/); the unit is the study's own.
//! A figure is keyed by the metric id it is compared with, written once here; the test in
//! tests/cli.rs checks that the tiny run emits every id listed in `FIGURES`.

use crate::measure::units::Unit;
use crate::results::{Historical, HistoricalSeries};

/// A source study: its citation, and the machine and year it measured, in a few words.
#[derive(Debug, PartialEq, Eq)]
pub struct Study {
    pub citation: &'static str,
    /// For tables: "Ultra-1 1999".
    pub label: &'static str,
}

pub const PTHREADS_1999: Study = Study {
    citation:
        "Kothari & Claypool, PThreads Performance, WPI-CS-TR-99-11 (1999), Sun Ultra-1 / SunOS 5.6",
    label: "Ultra-1 1999",
};
pub const MAC_1997: Study = Study {
    citation:
        "Oddone, Preempting the Mac, MacTech 13(1) (1997), Mac Thread Manager 2.1.1 / System 7.5.1",
    label: "Mac 1997",
};
pub const DELPHI_2010S: Study = Study {
    citation: "Delphi TThread articles (2010s), Core i3 M380 (2 cores, 4 logical) / Windows 7",
    label: "Core i3 2010s",
};
pub const BEOS_1999: Study = Study {
    citation: "Queru, The Scheduler Is Your Friend, Be Newsletter 4-45 (1999), BeOS R4.5",
    label: "BeOS 1999",
};
pub const ERLANGEN_MACH: Study = Study {
    citation: "Erlangen QuickThreads port on Mach 3.0 (1990s), HP715/33",
    label: "HP715 Mach",
};

/// Every study, for lookups by citation.
pub const STUDIES: [&Study; 5] = [
    &PTHREADS_1999,
    &MAC_1997,
    &DELPHI_2010S,
    &BEOS_1999,
    &ERLANGEN_MACH,
];

/// The short label of a citation this file wrote; the citation's start for any other.
pub fn label_of(citation: &str) -> String {
    STUDIES
        .iter()
        .find(|s| citation.starts_with(s.citation))
        .map(|s| s.label.to_string())
        .unwrap_or_else(|| citation.chars().take(20).collect())
}

/// A study's figure, compared with the metric of the same id.
pub struct Figure {
    pub id: &'static str,
    pub value: f64,
    pub unit: Unit,
    pub study: &'static Study,
    /// Which of the study's machines or conditions, when it reports several.
    pub detail: &'static str,
}

const fn f(id: &'static str, value: f64, unit: Unit, study: &'static Study) -> Figure {
    Figure {
        id,
        value,
        unit,
        study,
        detail: "",
    }
}

const fn fd(
    id: &'static str,
    value: f64,
    unit: Unit,
    study: &'static Study,
    detail: &'static str,
) -> Figure {
    Figure {
        id,
        value,
        unit,
        study,
        detail,
    }
}

/// Where the PThreads study's client/server figures come from.
const FIG4: &str =
    "Fig. 4: 1 KB (1,000 bytes) short connection, client and server on different machines";
const FIG5_EXAMPLE: &str = "Fig. 5 text: 10K sent from the same machine, server not named; printed in us, which beside Fig. 4's 4 ms reads as ms";

/// The Mac machine whose scores are attached to coop metrics as the historical figure.
pub const MAC_REFERENCE: &str = "Quadra 700 32-bit";
const BEOS_BARE: &str = "bare-bones system, 256 million samples";

/// Every historical figure that has a metric today, by metric id.
pub const FIGURES: &[Figure] = &[
    f("create.thread", 67.8961, Unit::Us, &PTHREADS_1999),
    f("create.process.fork", 11604.4, Unit::Us, &PTHREADS_1999),
    f("destroy.thread", 49.779, Unit::Us, &PTHREADS_1999),
    f("destroy.process", 5229.938, Unit::Us, &PTHREADS_1999),
    f("sync.mutex", 0.699, Unit::Us, &PTHREADS_1999),
    f("sync.mutex.single_thread", 0.699, Unit::Us, &PTHREADS_1999),
    f("sync.semaphore", 2.898, Unit::Us, &PTHREADS_1999),
    f("switch.thread.yield", 17.925, Unit::Us, &PTHREADS_1999),
    f("switch.green.yield", 23.954, Unit::Us, &PTHREADS_1999),
    f("switch.process.yield", 21.62, Unit::Us, &PTHREADS_1999),
    // Section 5: "the time to send and receive a 1K bytes to a Heavy Weight Server takes around
    // 4.7 milliseconds whereas to a Multi-threaded server takes around 4.0 milliseconds".
    fd(
        "server.thread_per_client.short.1kib.mean",
        4.0,
        Unit::Ms,
        &PTHREADS_1999,
        FIG4,
    ),
    fd(
        "server.fork_per_client.short.1kib.mean",
        4.7,
        Unit::Ms,
        &PTHREADS_1999,
        FIG4,
    ),
    fd(
        "server.fork_per_client.vs_thread.short.1kib",
        4.7 / 4.0,
        Unit::Ratio,
        &PTHREADS_1999,
        FIG4,
    ),
    // "time taken to send a 10K data from the same machine ... took 1.469 us first time, but
    // then after a while it became almost stable around 0.45 us".
    fd(
        "server.thread_per_client.same_cpu.long.10kib.first",
        1.469,
        Unit::Us,
        &PTHREADS_1999,
        FIG5_EXAMPLE,
    ),
    fd(
        "server.thread_per_client.same_cpu.long.10kib.rest",
        0.45,
        Unit::Us,
        &PTHREADS_1999,
        FIG5_EXAMPLE,
    ),
    fd(
        "server.fork_per_client.same_cpu.long.10kib.first",
        1.469,
        Unit::Us,
        &PTHREADS_1999,
        FIG5_EXAMPLE,
    ),
    fd(
        "server.fork_per_client.same_cpu.long.10kib.rest",
        0.45,
        Unit::Us,
        &PTHREADS_1999,
        FIG5_EXAMPLE,
    ),
    f("preempt.timer_signal", 24.42, Unit::Ms, &ERLANGEN_MACH),
    // The study's "asynchronous software trap" is today's thread-directed signal; its direct
    // path ("some processor cycles") has no figure to compare with preempt.poll_flag.
    f("preempt.signal_roundtrip", 0.19, Unit::Ms, &ERLANGEN_MACH),
    // The article: N = 2 = physical cores was best; 64 at once took 67.55 s against 55.44 s.
    fd(
        "throttle.best_concurrency",
        2.0,
        Unit::Threads,
        &DELPHI_2010S,
        "2 cores, 4 logical",
    ),
    fd(
        "throttle.penalty_pct",
        (67.55 - 55.44) / 55.44 * 100.0,
        Unit::Percent,
        &DELPHI_2010S,
        "67.55 s unthrottled vs 55.44 s at N = 2",
    ),
    fd(
        "coop.score.coop_fg_333ms",
        1.014,
        Unit::Score,
        &MAC_1997,
        MAC_REFERENCE,
    ),
    fd(
        "coop.score.coop_bg_333ms",
        1.085,
        Unit::Score,
        &MAC_1997,
        MAC_REFERENCE,
    ),
    fd(
        "coop.score.preempt_fg",
        1.075,
        Unit::Score,
        &MAC_1997,
        MAC_REFERENCE,
    ),
    fd(
        "coop.score.preempt_bg",
        1.335,
        Unit::Score,
        &MAC_1997,
        MAC_REFERENCE,
    ),
    fd(
        "coop.score.kernel.preempt_fg",
        1.075,
        Unit::Score,
        &MAC_1997,
        MAC_REFERENCE,
    ),
    fd(
        "coop.score.kernel.preempt_bg",
        1.335,
        Unit::Score,
        &MAC_1997,
        MAC_REFERENCE,
    ),
    fd(
        "latency.alone.gaps_over_threshold",
        35.0,
        Unit::Count,
        &BEOS_1999,
        BEOS_BARE,
    ),
    fd(
        "latency.alone.longest_gap",
        3060.0,
        Unit::Us,
        &BEOS_1999,
        BEOS_BARE,
    ),
    fd(
        "latency.annoying.gaps_over_threshold",
        136.0,
        Unit::Count,
        &BEOS_1999,
        BEOS_BARE,
    ),
    fd(
        "latency.annoying.longest_gap",
        3219.0,
        Unit::Us,
        &BEOS_1999,
        BEOS_BARE,
    ),
    fd(
        "latency.annoying_rescheduler.gaps_over_threshold",
        365.0,
        Unit::Count,
        &BEOS_1999,
        BEOS_BARE,
    ),
    fd(
        "latency.annoying_rescheduler.longest_gap",
        459.0,
        Unit::Us,
        &BEOS_1999,
        BEOS_BARE,
    ),
];

/// The historical figure for a metric id, if the studies give one.
pub fn historical(metric_id: &str) -> Option<Historical> {
    FIGURES
        .iter()
        .find(|f| f.id == metric_id)
        .map(|f| Historical {
            value: f.value,
            unit: f.unit,
            source: if f.detail.is_empty() {
                f.study.citation.to_string()
            } else {
                format!("{}, {}", f.study.citation, f.detail)
            },
        })
}

/// Fig. 1 of the PThreads study: creation time is flat from about 1,000 threads on. The text gives
/// no point values beyond the averages, so the curve is shown as the study's average.
pub fn creation_curve_note() -> &'static str {
    "PThreads 1999 Fig. 1: creation time per thread falls for small counts and is flat from ~1,000 \
     on (average 67.9 us per create+join on the Ultra-1)"
}

/// Fig. 4's one stated point (1 KB = 1,000 bytes, short connection), for the series.
pub fn server_fig4_point(ms: f64) -> HistoricalSeries {
    HistoricalSeries {
        x: vec![1000.0],
        y: vec![ms],
        y_unit: Unit::Ms,
        source: format!("{}; {FIG4}", PTHREADS_1999.citation),
    }
}

/// The Delphi semaphore throttle: seconds per N (Core i3 M380, 64 threads, 20 repetitions).
pub fn throttle_curve() -> HistoricalSeries {
    HistoricalSeries {
        x: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0, 65.0],
        y: vec![
            109.17, 55.44, 60.14, 67.56, 67.85, 67.42, 67.39, 67.52, 67.56, 67.59, 67.55,
        ],
        y_unit: Unit::S,
        source: format!("{}; x = 65 stands for unthrottled", DELPHI_2010S.citation),
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

/// The BeOS latency table: (system, gaps > 256 us, longest gap in us), 256 million samples.
pub const BEOS_LATENCY: &[(&str, f64, f64)] = &[
    ("bare-bones", 35.0, 3060.0),
    ("bare-bones + annoying", 136.0, 3219.0),
    ("bare-bones + annoying + rescheduler", 365.0, 459.0),
    ("normal", 702.0, 4776.0),
    ("normal + annoying", 1139.0, 6127.0),
    ("normal + annoying + rescheduler", 2970.0, 838.0),
];

/// The BeOS frame example: % of 60 fps frames with k = 0, 1, 2, 3 interruptions when a
/// 100 us scheduler runs 166 times per frame and picks the spinner once in 1025.
pub fn beos_frame_binomial() -> HistoricalSeries {
    HistoricalSeries {
        x: vec![0.0, 1.0, 2.0, 3.0],
        y: vec![85.0, 13.8, 1.1, 0.06],
        y_unit: Unit::Percent,
        source: format!("{}; binomial n = 166, p = 1/1025", BEOS_1999.citation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pthreads_figures_match_the_study() {
        assert_eq!(historical("create.thread").unwrap().value, 67.8961);
        assert_eq!(historical("create.process.fork").unwrap().value, 11604.4);
        assert_eq!(historical("switch.thread.yield").unwrap().unit, Unit::Us);
        assert!(historical("no.such.metric").is_none());
    }

    #[test]
    fn every_id_is_listed_once_and_every_study_has_a_label() {
        for (i, a) in FIGURES.iter().enumerate() {
            assert!(
                FIGURES[i + 1..].iter().all(|b| b.id != a.id),
                "{} twice",
                a.id
            );
        }
        assert_eq!(label_of(PTHREADS_1999.citation), "Ultra-1 1999");
        assert_eq!(
            label_of(&format!("{}, {MAC_REFERENCE}", MAC_1997.citation)),
            "Mac 1997"
        );
        assert_eq!(label_of("Someone else"), "Someone else");
    }

    #[test]
    fn server_figures_are_the_texts() {
        let t = historical("server.thread_per_client.short.1kib.mean").unwrap();
        let f = historical("server.fork_per_client.short.1kib.mean").unwrap();
        assert_eq!((t.value, t.unit, f.value), (4.0, Unit::Ms, 4.7));
        let r = historical("server.fork_per_client.vs_thread.short.1kib").unwrap();
        assert!((r.value - 1.175).abs() < 1e-12);
        assert!(t.source.contains("Fig. 4"));
        assert_eq!(
            historical("server.thread_per_client.same_cpu.long.10kib.first")
                .unwrap()
                .value,
            1.469
        );
        assert_eq!(server_fig4_point(4.7).y, vec![4.7]);
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
    fn mac_and_beos_figures_agree_with_their_tables() {
        assert_eq!(MAC_SCORES.len(), 9);
        let quadra = MAC_SCORES.iter().find(|r| r.0 == MAC_REFERENCE).unwrap();
        assert_eq!(
            historical("coop.score.coop_fg_333ms").unwrap().value,
            quadra.1
        );
        assert_eq!(
            historical("coop.score.coop_bg_333ms").unwrap().value,
            quadra.2
        );
        assert_eq!(historical("coop.score.preempt_fg").unwrap().value, quadra.3);
        assert_eq!(historical("coop.score.preempt_bg").unwrap().value, quadra.4);
        for (cond, row) in ["alone", "annoying", "annoying_rescheduler"]
            .iter()
            .zip(BEOS_LATENCY)
        {
            let g = historical(&format!("latency.{cond}.gaps_over_threshold")).unwrap();
            let l = historical(&format!("latency.{cond}.longest_gap")).unwrap();
            assert_eq!((g.value, l.value), (row.1, row.2));
        }
        let f = beos_frame_binomial();
        assert_eq!(f.x.len(), f.y.len());
    }
}
