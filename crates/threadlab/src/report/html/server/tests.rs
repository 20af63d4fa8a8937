//! The server section's charts from literal results: rows, flags, ratios, spectra, bars.

use super::*;
use crate::results::{Historical, Status};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};

fn encoded(name: &str, values_ns: &[u64]) -> SerializedHistogram {
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    for v in values_ns {
        h.record(*v).unwrap();
    }
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut buf).unwrap();
    SerializedHistogram {
        name: name.into(),
        unit: Unit::Ns,
        count: h.len(),
        encoding: HDR_ENCODING.into(),
        data: base64::engine::general_purpose::STANDARD.encode(buf),
    }
}

#[test]
fn stored_histograms_decode_and_bad_ones_do_not() {
    let values: Vec<u64> = (1..=10_000).map(|i| i * 1_000).collect();
    let s = encoded("latency", &values);
    let h = decode(&s).expect("decodes");
    assert_eq!(h.len(), 10_000);
    assert!((h.value_at_quantile(0.5) as f64 / 5_000_000.0 - 1.0).abs() < 0.01);
    let mut other = s.clone();
    other.encoding = "hdr-v3".into();
    assert!(decode(&other).is_none());
    let mut junk = s.clone();
    junk.data = "not base64 at all!".into();
    assert!(decode(&junk).is_none());
    junk.data = base64::engine::general_purpose::STANDARD.encode(b"not a histogram");
    assert!(decode(&junk).is_none());
}

#[test]
fn a_spectrum_goes_as_far_as_the_count_allows_then_the_maximum() {
    let values: Vec<u64> = (1..=10_000).map(|i| i * 1_000).collect();
    let h = decode(&encoded("latency", &values)).unwrap();
    let pts = spectrum_points(&h, Unit::Ns, Unit::Us);
    let whats: Vec<&str> = pts.iter().map(|p| p.what.as_str()).collect();
    // 10,000 values tell apart up to p99.99 (1 - 1/n), where the maximum is drawn.
    assert_eq!(
        whats,
        ["p50", "p75", "p90", "p95", "p99", "p99.5", "p99.9", "p99.95", "max"]
    );
    assert!((pts[0].value - 5_000.0).abs() / 5_000.0 < 0.01, "{pts:?}");
    assert!((pts.last().unwrap().value - 10_000.0).abs() / 10_000.0 < 0.01);
    assert!((pts.last().unwrap().x - 4.0).abs() < 1e-9);
    assert!(pts
        .windows(2)
        .all(|w| w[0].x < w[1].x && w[0].value <= w[1].value));
    // Few values: p50 and the maximum; none: nothing.
    let few = decode(&encoded("latency", &[1_000, 2_000, 3_000])).unwrap();
    let pts = spectrum_points(&few, Unit::Ns, Unit::Us);
    assert_eq!(pts.first().unwrap().what, "p50");
    assert_eq!(pts.last().unwrap().what, "max");
    let empty = Histogram::<u64>::new(3).unwrap();
    assert!(spectrum_points(&empty, Unit::Ns, Unit::Us).is_empty());
}

#[test]
fn sizes_parse() {
    assert_eq!(crate::results::ids::server::size_bytes("64b"), Some(64.0));
    assert_eq!(
        crate::results::ids::server::size_bytes("16kib"),
        Some(16384.0)
    );
    assert_eq!(
        crate::results::ids::server::size_bytes("1mib"),
        Some(1048576.0)
    );
    assert_eq!(crate::results::ids::server::size_bytes("mean"), None);
}

fn metric(id: &str, unit: Unit, v: f64) -> Metric {
    Metric::from_values(
        id,
        unit,
        &[v * 0.9, v, v * 1.1],
        1,
        "cross_cpu(0,1)",
        "n; more",
    )
    .unwrap()
}

/// A server experiment with the study's two designs, epoll and a later `green`.
fn experiment() -> ExperimentResult {
    let mut metrics = Vec::new();
    for (d, f) in [
        ("epoll", 1.0),
        ("green", 0.8),
        ("thread_per_client", 1.5),
        ("fork_per_client", 4.0),
    ] {
        for (same, size) in [("", "1kib"), ("", "16kib"), ("same_cpu.", "1kib")] {
            for (kind, base) in [("short", 100.0), ("long", 30.0)] {
                metrics.push(metric(
                    &format!("server.{d}.{same}{kind}.{size}.mean"),
                    Unit::Us,
                    base * f,
                ));
            }
        }
        let mut p99 = metric(&format!("server.{d}.rate.p99"), Unit::Us, 90.0 * f);
        p99.histograms = vec![
            encoded("latency", &[50_000, 60_000, 70_000, 80_000, 900_000]),
            encoded("service", &[40_000, 50_000, 60_000, 100_000]),
        ];
        metrics.push(p99);
        for (s, u, v) in [
            ("cpu_per_request", Unit::Us, 30.0 * f),
            ("block.p99", Unit::Us, 1200.0 * f),
            ("rss_per_connection", Unit::KiB, 2.0 * f),
            ("capacity", Unit::PerS, 1000.0 / f),
        ] {
            metrics.push(metric(&format!("server.{d}.{s}"), u, v));
        }
    }
    metrics[0].historical = None;
    let fork = metrics
        .iter_mut()
        .find(|m| m.id == "server.fork_per_client.short.1kib.mean")
        .unwrap();
    fork.historical = Some(Historical {
        value: 4.7,
        unit: Unit::Ms,
        source: seeds::PTHREADS_1999.citation.into(),
    });
    let mut flagged = metric("server.green.cpu_per_request", Unit::Us, 20.0);
    flagged.flags = vec!["client_bound".into()];
    flagged.note = format!("[client_bound] {}", flagged.note);
    metrics.retain(|m| m.id != flagged.id);
    metrics.push(flagged);
    metrics.push(metric("server.generator.ceiling", Unit::PerS, 1e5));
    ExperimentResult {
        study: "s".into(),
        study_label: "l".into(),
        wall_s: 1.0,
        metrics,
        conclusion: Some("When each request blocks for 1000 us (400/s), ...".into()),
        ..ExperimentResult::new("server", Status::Ok)
    }
}

#[test]
fn designs_are_generic_with_the_studys_two_first() {
    let e = experiment();
    assert_eq!(
        designs(&e),
        ["thread_per_client", "fork_per_client", "epoll", "green"]
    );
}

#[test]
fn every_chart_shows_every_design_and_marks_flags() {
    let e = experiment();
    let c = charts(&e);
    let keys: Vec<&str> = c.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "server-fig4",
            "server-fig5",
            "server-spectrum",
            "server-cpu",
            "server-block",
            "server-memory",
            "server-capacity"
        ]
    );
    for chart in &c {
        for d in ["thread_per_client", "fork_per_client", "epoll", "green"] {
            assert!(
                chart.numbers.iter().any(|r| r[0].starts_with(d)),
                "{} lacks {d}",
                chart.key
            );
        }
        assert!(!chart.caption.is_empty(), "{}", chart.key);
        assert!(chart.svg.starts_with("<svg") && chart.svg.ends_with("</svg>"));
    }
    // Fig. 4 has the study's point beside today's, and log axes.
    assert!(c[0].svg.contains("Ultra-1 1999: fork_per_client 4.70 ms"));
    assert!(c[0].caption.contains("Grey diamonds"));
    // The spectrum comes from the histograms: 5 values give p50, p75 and the maximum.
    assert!(c[2].caption.contains("HdrHistograms"));
    assert!(c[2].svg.contains("epoll, from the planned send: p75"));
    assert!(c[2].svg.contains("from the actual send (uncorrected)"));
    assert_eq!(c[2].numbers[3][7], "5", "{:?}", c[2].numbers);
    // The flagged bar is marked, its flag named on hover and in the table.
    assert!(c[3].svg.contains("flagged: client_bound"));
    assert!(c[3].svg.contains("class=\"flagmark\""));
    let green = c[3].numbers.iter().find(|r| r[0] == "green").unwrap();
    assert_eq!(green.last().unwrap(), "client_bound");
    assert!(c[3].caption.contains("client_bound: the load generator"));
    // The blocking chart draws the work itself.
    assert!(c[4].svg.contains("the work itself: 1 ms"));
}

#[test]
fn without_histograms_the_spectrum_rests_on_the_percentile_metrics() {
    let mut e = experiment();
    for m in e.metrics.iter_mut() {
        m.histograms.clear();
    }
    let d = "epoll";
    e.metrics
        .push(metric(&format!("server.{d}.rate.p50"), Unit::Us, 40.0));
    e.metrics
        .push(metric(&format!("server.{d}.rate.p999"), Unit::Us, 400.0));
    let c = charts(&e);
    let s = c.iter().find(|c| c.key == "server-spectrum").unwrap();
    assert!(!s.caption.contains("HdrHistograms"));
    assert!(s.caption.contains("no histogram in the file"));
    let row = s.numbers.iter().find(|r| r[0] == "epoll").unwrap();
    assert_eq!(&row[1..5], ["40.00", "-", "90.00", "400.0"]);
}

#[test]
fn the_default_placement_and_the_limits_step_get_charts_and_sentences() {
    let mut e = experiment();
    let c = charts(&e);
    assert!(c
        .iter()
        .all(|c| !c.key.contains("placement") && c.key != "server-limits"));
    assert_eq!(pinning_effect(&e, &designs(&e)), None);
    assert_eq!(limits_summary(&e, &designs(&e)), None);
    for (d, f, served) in [
        ("epoll", 1.0, 100.0),
        ("green", 0.8, 100.0),
        ("fork_per_client", 4.0, 50.0),
    ] {
        for (s, u, v) in [
            ("rate.p99.unpinned", Unit::Us, 120.0 * f),
            ("cpu_per_request.unpinned", Unit::Us, 25.0 * f),
            ("peak.unpinned", Unit::PerS, 5e4 / f),
            ("rate.p99.unpinned.vs_pinned", Unit::Ratio, 1.3 * f),
            ("cpu_per_request.unpinned.vs_pinned", Unit::Ratio, 0.8),
            ("limits.p50", Unit::Us, 80.0 * f),
            ("limits.max", Unit::Us, 300.0 * f),
            ("limits.served", Unit::Percent, served),
            ("limits.busy", Unit::Count, 100.0 - served),
            ("limits.unanswered", Unit::Count, 0.0),
        ] {
            e.metrics.push(metric(&format!("server.{d}.{s}"), u, v));
        }
    }
    let c = charts(&e);
    let keys: Vec<&str> = c.iter().map(|c| c.key.as_str()).collect();
    for k in [
        "server-placement",
        "server-placement-cpu",
        "server-placement-peak",
        "server-limits",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    let p = c.iter().find(|c| c.key == "server-placement").unwrap();
    assert!(p.numbers[0][1].starts_with("pinned (") && p.numbers[0][2].starts_with("default"));
    let ds = designs(&e);
    let effect = pinning_effect(&e, &ds).unwrap();
    assert!(effect.contains("p99 1.04x to 5.20x"), "{effect}");
    assert!(
        effect.contains("server CPU per request 0.80x to 0.80x"),
        "{effect}"
    );
    let limits = limits_summary(&e, &ds).unwrap();
    assert!(
        limits.contains("served every time by epoll, green; fork_per_client 50% served, 50 BUSY"),
        "{limits}"
    );
    // When every design (more than two) served every time, the count stands for the list.
    for m in e.metrics.iter_mut() {
        if m.id == "server.fork_per_client.limits.served" {
            m.median = 100.0;
        }
    }
    let limits = limits_summary(&e, &ds).unwrap();
    assert!(
        limits.contains("served every time by all 3 designs measured (slow clients)"),
        "{limits}"
    );
}
