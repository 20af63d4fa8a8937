//! The charts' arithmetic and their SVG: ticks, mappings, escaping, determinism.

use super::*;

#[test]
fn escaping_leaves_no_markup_and_no_url() {
    let s = esc("<script>alert('x')</script> & \"https://example.com\"");
    assert!(!s.contains('<') && !s.contains('>') && !s.contains('"') && !s.contains('\''));
    assert!(!s.contains("//"), "{s}");
    assert_eq!(esc("a\u{1}b"), "a b");
}

#[test]
fn ticks_are_nice_and_cover_the_data() {
    let (lo, hi, t) = linear_ticks(0.0, 7.3, 5, false);
    assert_eq!((lo, hi), (0.0, 8.0));
    assert_eq!(t, vec![0.0, 2.0, 4.0, 6.0, 8.0]);
    let (lo, hi, t) = decade_ticks(3.0, 45_000.0);
    assert_eq!((lo, hi), (1.0, 100_000.0));
    assert_eq!(t.len(), 6);
    let (lo, hi, _) = binary_log_ticks(1024.0, 64.0 * 1024.0 * 1024.0);
    assert_eq!((lo, hi), (1024.0, 67_108_864.0));
    let (_, _, t) = linear_ticks(2.0, 4.0, 5, true);
    assert_eq!(t, vec![2.0, 3.0, 4.0]);
    let m = Mapper::new(&[0.0, 0.0], Scale::Linear, true, 0.0, 100.0);
    assert_eq!(m.lo, 0.0);
    // One value or none: still a range, never a division by zero.
    let (lo, hi, _) = linear_ticks(5.0, 5.0, 5, false);
    assert!(lo < 5.0 && hi > 5.0);
    let m = Mapper::new(&[], Scale::Log, true, 0.0, 100.0);
    assert!(m.map(1.0).is_finite());
}

#[test]
fn labels_are_short() {
    assert_eq!(fmt_tick(20_000.0), "20k");
    assert_eq!(fmt_tick(0.5), "0.5");
    assert_eq!(fmt_tick(2_000_000.0), "2M");
    assert_eq!(fmt_tick(0.30000000000000004), "0.3");
    assert_eq!(fmt_bytes(65536.0), "64K");
    assert_eq!(fmt_bytes(64.0 * 1024.0 * 1024.0), "64M");
    assert_eq!(fmt_bytes(512.0), "512");
}

#[test]
fn the_nines_axis_is_labelled_in_percent() {
    assert_eq!(fmt_percentile(nines(0.5)), "50");
    assert_eq!(fmt_percentile(nines(0.9)), "90");
    assert_eq!(fmt_percentile(nines(0.99)), "99");
    assert_eq!(fmt_percentile(nines(0.999)), "99.9");
    assert_eq!(fmt_percentile(nines(0.9999)), "99.99");
    let m = Mapper::new(&[nines(0.5), nines(0.998)], Scale::Nines, false, 0.0, 100.0);
    let labels: Vec<String> = m.ticks.iter().map(|t| m.label(*t)).collect();
    assert_eq!(labels, ["50", "90", "99", "99.9"]);
    assert_eq!(m.map(nines(0.5)), 0.0);
    assert_eq!(m.map(3.0), 100.0);
}

#[test]
fn flagged_bars_and_hollow_markers_are_drawn_as_such() {
    let bars = BarChart {
        y: Axis::linear("y"),
        series: vec![BarSeries {
            name: "now".into(),
            then: false,
        }],
        groups: vec![BarGroup {
            label: "g".into(),
            bars: vec![Some(Bar {
                value: 2.0,
                range: Some((1.0, 3.0)),
                title: "t".into(),
                flag: Some("client_bound".into()),
            })],
            note: None,
        }],
        references: vec![Reference {
            name: "the work itself".into(),
            y: 1.0,
            x_from: None,
            x_to: None,
        }],
    };
    let s = bars.svg("b");
    assert!(s.contains("class=\"s0 flagged\"") && s.contains("flagmark"));
    assert!(s.contains("t; flagged: client_bound"));
    assert!(
        s.contains(">the work itself</text>"),
        "the reference is in the legend"
    );
    let line = LineChart {
        x: Axis::nines("p"),
        y: Axis::auto("y", &[1.0, 2.0]),
        lines: vec![Line {
            name: "a".into(),
            points: vec![(nines(0.5), 1.0), (nines(0.99), 2.0)],
            dash: Dash::Dotted,
            hollow: true,
            marker: Marker::Square,
            titles: vec!["first".into(), "second".into()],
            ..Line::default()
        }],
        references: vec![],
        x_unit: "".into(),
        y_unit: "".into(),
        keys: vec![],
        annotations: vec![Annotation {
            x: nines(0.9),
            y: 1.5,
            text: "then".into(),
            title: "the study".into(),
        }],
    };
    let s = line.svg("l");
    assert!(s.contains("ln dotted") && s.contains("<rect class=\"s0 hollow\""));
    assert!(s.contains("<title>second</title>") && s.contains(">then</text>"));
}

#[test]
fn log_scale_only_for_positive_data_spanning_decades() {
    assert!(spans_decades(&[1.0, 100.0]));
    assert!(!spans_decades(&[1.0, 10.0]));
    assert!(!spans_decades(&[0.0, 100.0]));
    assert!(!spans_decades(&[]));
}

#[test]
fn charts_survive_odd_data() {
    let line = LineChart {
        x: Axis::auto("x", &[0.0, 1.0]),
        y: Axis {
            label: "y".into(),
            scale: Scale::Log,
        },
        lines: vec![
            Line {
                name: "<b>".into(),
                points: vec![(0.0, -1.0), (1.0, 0.0), (2.0, 1e300)],
                then: false,
                colour: 3,
                ..Line::default()
            },
            Line {
                name: "empty".into(),
                points: vec![],
                then: true,
                colour: 0,
                ..Line::default()
            },
        ],
        references: vec![],
        x_unit: "u".into(),
        y_unit: "u".into(),
        keys: vec![],
        annotations: vec![],
    };
    let s = line.svg("a");
    assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
    assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
    let bars = BarChart {
        y: Axis::auto("y", &[]),
        series: vec![],
        groups: vec![BarGroup {
            label: "g".into(),
            bars: vec![
                None,
                Some(Bar {
                    value: f64::NAN,
                    range: Some((f64::NAN, 1.0)),
                    title: "t".into(),
                    flag: Some("client_bound".into()),
                }),
            ],
            note: Some("n".into()),
        }],
        references: vec![Reference {
            name: "r".into(),
            y: f64::NAN,
            x_from: None,
            x_to: None,
        }],
    };
    let s = bars.svg("b");
    assert!(!s.contains("NaN"), "{s}");
    let d = DistChart {
        x: Axis::auto("x", &[1.0, 1000.0]),
        rows: vec![DistRow {
            label: "r".into(),
            values: vec![],
            colour: 0,
            marks: vec![(f64::INFINITY, "m".into())],
        }],
        unit: "us".into(),
    };
    assert!(!d.svg("d").contains("NaN"));
    let r = ratio_chart(
        &[RatioRow {
            label: "m".into(),
            ratio: 0.0,
            ci: Some((f64::NAN, 2.0)),
            band: 1.05,
            verdict: 1,
            title: "t".into(),
        }],
        "B / A",
        "r",
    );
    assert!(!r.contains("NaN"));
}

#[test]
fn triangle_and_diamond_markers_keep_their_outlines() {
    for (x, y) in [(100.0, 50.0), (63.37, 211.04), (0.0, 0.0)] {
        for light in [false, true] {
            let r: f64 = if light { 2.4 } else { 3.2 };
            let cls = format!("s3 pt{}", if light { " light" } else { "" });
            let triangle = format!(
                "<path class=\"{cls}\" d=\"M{} {}L{} {}H{}Z\"/>",
                c(x),
                c(y - r * 1.2),
                c(x + r * 1.1),
                c(y + r * 0.8),
                c(x - r * 1.1)
            );
            let diamond = format!(
                "<path class=\"{cls}\" d=\"M{} {}L{} {}L{} {}L{} {}Z\"/>",
                c(x),
                c(y - r * 1.2),
                c(x + r * 1.2),
                c(y),
                c(x),
                c(y + r * 1.2),
                c(x - r * 1.2),
                c(y)
            );
            assert_eq!(
                Marker::Triangle.svg(x, y, "s3", false, light, None),
                triangle
            );
            assert_eq!(Marker::Diamond.svg(x, y, "s3", false, light, None), diamond);
        }
    }
}
