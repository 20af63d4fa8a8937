//! The gate's reach: which metrics a pair could not have shown slower by the gate's percent.

use super::tests::{gated, run, samples};
use super::*;

/// Two steady metrics, one with only two trials, one whose trials disagree, and a count (no better direction: the gate
/// does not cover it); `scale` multiplies `m.b`'s values.
fn metrics(scale: f64) -> Vec<(&'static str, Unit, Vec<f64>)> {
    vec![
        ("m.a", Unit::Ns, samples(100.0, 11)),
        (
            "m.b",
            Unit::Ns,
            samples(100.0, 11).iter().map(|x| x * scale).collect(),
        ),
        ("m.few", Unit::Ns, samples(100.0, 2)),
        // Trials spread over 16%: a floor (its IQR/median) under 10%, an interval too wide.
        ("m.wide", Unit::Ns, wide()),
        ("m.count", Unit::Count, samples(10.0, 11)),
    ]
}

fn wide() -> Vec<f64> {
    (0..11)
        .map(|i| 100.0 * (1.0 + ((i * 7) % 11) as f64 / 11.0 * 0.16 - 0.08))
        .collect()
}

#[test]
fn a_quiet_pair_says_it_could_see_the_gates_slowdown_and_a_moved_one_says_where_it_was_blind() {
    let a = run("a", &metrics(1.0));
    let quiet = run("b", &metrics(1.0));
    let c = compare_pair(&a, &quiet, &gated()).unwrap();
    let (covered, blind) = c.blind_to(10.0);
    assert_eq!(covered, 4, "the count is not covered");
    let names: Vec<(&str, Blind<'_>)> =
        blind.iter().map(|(r, why)| (r.id.as_str(), *why)).collect();
    assert_eq!(
        names,
        [("m.few", Blind::TooFewTrials), ("m.wide", Blind::Interval)]
    );
    let text = render_pair_text(&c);
    assert!(
        text.contains("could not have shown a 10% slowdown in 2 of the 4 metrics")
            && text.contains("1 too few trials to test, 1 by the width of B/A's interval"),
        "{text}"
    );

    // B's experiment ran with the CPU 30% slower (its reference loop): a planted x1.2 on m.b
    // passes the gate, and the text says the pair could not have shown it.
    let mut moved = run("b", &metrics(1.2));
    moved.results.experiments[0].attempts[0].reference_wide_ns = [130.0, 131.0];
    let c = compare_pair(&a, &moved, &gated()).unwrap();
    assert_eq!(c.exit_status(), 0);
    let (covered, blind) = c.blind_to(10.0);
    assert_eq!((covered, blind.len()), (4, 4));
    assert!(
        blind
            .iter()
            .filter(|(r, _)| r.id != "m.few")
            .all(|(_, why)| *why == Blind::Floor("the machine's reference loop, A vs B")),
        "{blind:?}"
    );
    let text = render_pair_text(&c);
    assert!(
        text.contains("nothing is slower by more than 10%")
            && text.contains("in 4 of the 4 metrics")
            && text.contains("3 by the machine's reference loop, A vs B, 1 too few trials"),
        "{text}"
    );

    // Without the move the same plant fails the gate, and m.b is not counted blind.
    let caught = run("b", &metrics(1.2));
    let c = compare_pair(&a, &caught, &gated()).unwrap();
    assert_eq!(c.exit_status(), 1);
    let (_, blind) = c.blind_to(10.0);
    assert!(
        blind
            .iter()
            .all(|(r, _)| r.id == "m.few" || r.id == "m.wide"),
        "{blind:?}"
    );

    // A pair in which every covered metric could be seen says so.
    let two = |label| {
        run(
            label,
            &[
                ("m.a", Unit::Ns, samples(100.0, 11)),
                ("m.b", Unit::Ns, samples(100.0, 11)),
            ],
        )
    };
    let c = compare_pair(&two("a"), &two("b"), &gated()).unwrap();
    assert!(
        render_pair_text(&c)
            .contains("could have shown a 10% slowdown in each of the 2 metrics the gate covers"),
        "{}",
        render_pair_text(&c)
    );
}
