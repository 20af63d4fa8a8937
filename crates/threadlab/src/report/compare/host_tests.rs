//! The host's phases: a figure kept from trials most of which met a slow phase, two runs that
//! met the same busy phase, and slow readings around an experiment whose slow trials were set
//! aside.

use super::tests::{gated, run, samples, steady, trial_metric, with_metrics};
use super::*;

#[test]
fn a_figure_kept_from_a_run_disturbed_throughout_is_unstable_and_a_quiet_pair_is_slower() {
    let o = gated();
    // A user-level switch on one CPU: 14.6 ns in A's quiet trials; B met the host's slow
    // phase in 21 of its 24 trials, too many to set aside, and kept them all (22 ns).
    let switch = |base: f64, disturbed: usize| {
        let mut m = trial_metric("x.green.chan", &samples(base, 24), 45.0);
        if let Some(t) = m.trials.as_mut() {
            t.disturbed = disturbed;
        }
        m
    };
    let a = with_metrics(run("a", &[]), vec![switch(14.6, 0)]);
    let b = with_metrics(run("b", &[]), vec![switch(22.0, 21)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
    assert!(render_pair_text(&c).contains("21 of B's 24 trials"));
    // Had B set its few disturbed trials aside (kept < taken), the move is a slowdown.
    let mut quiet = switch(22.0, 3);
    if let Some(t) = quiet.trials.as_mut() {
        t.taken = 27;
    }
    let b = with_metrics(run("b", &[]), vec![quiet]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Slower, "{c:#?}");
    assert_eq!(c.exit_status(), 1);
}

#[test]
fn two_runs_disturbed_throughout_in_the_same_phase_are_compared_like_for_like() {
    let o = gated();
    // Both runs met the host's busy phase in every trial and kept them all; the phase probe
    // beside their trials read `probe_a` and `probe_b` us.
    let busy = |base: f64, probe: f64| {
        let mut m = trial_metric("x.green.yield", &samples(base, 12), 45.0);
        m.placement = "same_cpu(0)".into();
        if let Some(t) = m.trials.as_mut() {
            t.disturbed = 12;
            t.phase_wide_ns = vec![probe * 1000.0; 12];
        }
        m
    };
    let pair = |a: Metric, b: Metric| {
        let a = with_metrics(run("a", &[]), vec![a]);
        let b = with_metrics(run("b", &[]), vec![b]);
        compare_pair(&a, &b, &o).unwrap()
    };
    // The same phase (probe 70 and 73 us): A/A is quiet, a planted x1.2 is slower.
    let c = pair(busy(5.70, 70.0), busy(5.76, 73.0));
    assert_eq!(c.exit_status(), 0, "{c:#?}");
    assert!(!c.rows[0].verdict.flagged(), "{c:#?}");
    let c = pair(busy(5.70, 70.0), busy(5.70 * 1.2, 73.0));
    assert_eq!(c.rows[0].verdict, Verdict::Slower, "{c:#?}");
    assert_eq!(c.exit_status(), 1);
    // Busy phases the probe tells apart (70 against 90 us): their 29% joins the floor, and a
    // move beyond it is unstable, as it is when only one side was disturbed throughout.
    let c = pair(busy(5.70, 70.0), busy(5.70 * 1.2, 90.0));
    assert_eq!(c.rows[0].verdict, Verdict::WithinNoise, "{c:#?}");
    let c = pair(busy(5.70, 70.0), busy(5.70 * 1.5, 90.0));
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
    assert!(render_pair_text(&c).contains("12 of A's 12 trials and 12 of B's 12 trials"));
    // On two CPUs the probe's phase is not the figure's regime: the same phase, moved, is
    // unstable.
    let two = |base: f64| {
        let mut m = busy(base, 70.0);
        m.placement = "cross_cpu(0,1)".into();
        m
    };
    let c = pair(two(0.34), two(0.47));
    assert_eq!(c.rows[0].verdict, Verdict::Unstable, "{c:#?}");
}

#[test]
fn slow_readings_around_an_experiment_whose_slow_trials_were_set_aside_do_not_hide_a_change() {
    let o = gated();
    // One A/A pair seen here: the register loop read 496 and 566 us around A's `create` and
    // 417 us around B's, 21% apart, while A's sampler set its one disturbed trial aside and
    // every kept trial of both runs sat beside probe readings of about 13.4 us.
    let destroy = |base: f64, probe: f64| {
        let mut m = trial_metric("x.destroy", &steady(base), 45.0);
        if let Some(t) = m.trials.as_mut() {
            t.taken += 1;
            t.disturbed = 1;
            t.phase_wide_ns = vec![probe; t.kept];
        }
        m
    };
    let slow_around = |mut r: Run| {
        r.results.experiments[0].attempts[0].reference_wide_ns = [496.0, 566.0];
        r
    };
    let a = slow_around(with_metrics(run("a", &[]), vec![destroy(9.7, 13.4)]));
    let b = with_metrics(run("b", &[]), vec![destroy(9.7 * 1.2, 13.5)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::Slower, "{c:#?}");
    assert!(c.rows[0].floor_pct < 6.0, "{c:#?}");
    assert_eq!(c.exit_status(), 1);
    // A file without the per-trial readings falls back on the readings around the experiment:
    // the same planted change is within that 21% floor.
    let bare = |mut r: Run| {
        for m in &mut r.results.experiments[0].metrics {
            if let Some(t) = m.trials.as_mut() {
                t.phase_wide_ns.clear();
            }
        }
        r
    };
    let c = compare_pair(&bare(a.clone()), &bare(b.clone()), &o).unwrap();
    assert_eq!(c.rows[0].verdict, Verdict::WithinNoise, "{c:#?}");
    // Kept trials taken at different CPU speeds carry that move in the floor.
    let b = with_metrics(run("b", &[]), vec![destroy(9.7 * 1.2, 16.8)]);
    let c = compare_pair(&a, &b, &o).unwrap();
    assert!(c.rows[0].floor_pct > 20.0, "{c:#?}");
    assert_eq!(c.exit_status(), 0);
}
