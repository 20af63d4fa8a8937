//! Rows whose trials ran in a peer's own programs: unstable when they move.

use super::tests::moved_with_and_without;
use super::*;
use crate::results::flag::Flag;

#[test]
fn a_row_of_one_peer_program_that_moved_is_unstable_and_a_row_of_fresh_trials_is_slower() {
    // An A/A pair seen on a 2-vCPU guest: switch.go.yield 56.73 ns in A and 63.35 ns in B, each
    // run's trials within a few per cent, all of a run's trials in one Go program.
    let [flagged, unflagged] = moved_with_and_without("x.go.yield", 56.73, 63.35, Flag::OneProgram);
    assert_eq!(flagged.rows[0].verdict, Verdict::Unstable, "{flagged:#?}");
    assert_eq!(flagged.exit_status(), 0);
    assert!(render_pair_text(&flagged).contains("ran in a peer's own programs"));
    // The same move of a row whose trials each had their own subject fails the gate.
    assert_eq!(unflagged.rows[0].verdict, Verdict::Slower, "{unflagged:#?}");
    assert_eq!(unflagged.exit_status(), 1);
}
