//! Rows whose trials all ran in one program of a peer's: unstable when they move.

use super::tests::{gated, run, steady_row, with_metrics};
use super::*;
use crate::results::flag::Flag;

#[test]
fn a_row_of_one_peer_program_that_moved_is_unstable_and_a_row_of_fresh_trials_is_slower() {
    // An A/A pair seen on a 2-vCPU guest: switch.go.yield 56.73 ns in A and 63.35 ns in B, each
    // run's trials within a few per cent, all of a run's trials in one Go program.
    let row = |base: f64, flagged: bool| {
        steady_row("x.go.yield", base, flagged.then_some(Flag::OneProgram))
    };
    let o = gated();
    let a = with_metrics(run("a", &[]), vec![row(56.73, true)]);
    let b = with_metrics(run("b", &[]), vec![row(63.35, true)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
    assert!(render_pair_text(&c).contains("ran in a peer's own programs"));
    // The same move of a row whose trials each had their own subject fails the gate.
    let a = with_metrics(run("a", &[]), vec![row(56.73, false)]);
    let b = with_metrics(run("b", &[]), vec![row(63.35, false)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Slower, "{c:#?}");
    assert_eq!(c.exit_status(), 1);
}
