//! A guest's memory-bound figures: unstable when they move, with the memory reference at rest.

use super::tests::{gated, memory_and_core, run, with_metrics};
use super::*;

#[test]
fn in_a_guest_a_memory_bound_figure_that_moved_is_unstable_and_on_bare_metal_it_is_slower() {
    // Both figures 30% slower in B, every reference at rest (the walk included).
    let guest = |mut r: Run| {
        r.results.environment.virtualized = Some(true);
        r
    };
    let a = with_metrics(run("a", &[]), memory_and_core(100.0));
    let b = with_metrics(run("b", &[]), memory_and_core(130.0));
    let o = gated();
    let bare = compare_pair(&a, &b, &o).unwrap();
    assert!(
        bare.rows.iter().all(|r| r.verdict == Verdict::Slower),
        "{:?}",
        bare.rows
    );
    let c = compare_pair(&guest(a), &guest(b), &o).unwrap();
    let big = c.rows.iter().find(|r| r.id == "x.read.64mib").unwrap();
    let small = c.rows.iter().find(|r| r.id == "x.switch").unwrap();
    assert_eq!(big.verdict, Verdict::Unstable, "{big:?}");
    assert_eq!(big.regime.as_deref(), Some(GUEST_MEMORY));
    // The figure that stays in the core's caches is still caught, and fails the gate.
    assert_eq!(small.verdict, Verdict::Slower, "{small:?}");
    assert_eq!(c.exit_status(), 1);
    assert_eq!(
        c.slower_than(10.0)
            .iter()
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>(),
        ["x.switch"]
    );
    // The gate could not have failed on the memory-bound figure however far it moved.
    let (covered, blind) = c.blind_to(10.0);
    assert_eq!(covered, 2);
    assert_eq!(
        blind
            .iter()
            .map(|(r, why)| (r.id.as_str(), *why))
            .collect::<Vec<_>>(),
        [("x.read.64mib", Blind::Unstable)]
    );
    assert!(render_pair_text(&c).contains(
        "in 1 of the 2 metrics the gate covers ('detects' wider than 10%, or no test): 1 \
         unstable if moved"
    ));
}
