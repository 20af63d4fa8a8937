//! When a step counts as having fallen behind its plan.

use super::*;
use crate::experiments::server::loadgen::StepResult;

/// An open-loop step at `offered`/s over one second: `planned` requests planned in the
/// measured period, `answered` of them answered at all, `completed` replies within it.
fn step(offered: f64, planned: u64, answered: u64, completed: u64) -> Record {
    let mut service = histogram();
    for _ in 0..answered {
        service.record(100_000).unwrap();
    }
    Record {
        design: "epoll",
        pattern: Pattern::Rate,
        trial: 0,
        offered,
        connections: 1000,
        result: StepResult {
            windows: Vec::new(),
            latency: service.clone(),
            service,
            send_lag: histogram(),
            server_service: histogram(),
            completed,
            measured_ns: 1_000_000_000,
            failures: Default::default(),
            rejected: 0,
            per_conn: Vec::new(),
            workers: 1,
            generator_cpu_ns: 0,
            generator_spin_ns: 0,
            mean_in_flight: 10.0,
            saturated: None,
            unsent: 0,
            planned,
            server_usage: Default::default(),
        },
        listen_overflows: None,
        footprint: None,
        connect_failures: 0,
        usage_unavailable: None,
        state: None,
        placed: Placed::Pinned,
    }
}

#[test]
fn a_step_that_keeps_up_is_not_saturated() {
    let r = step(30_000.0, 30_000, 30_000, 29_990);
    assert_eq!(fell_behind(&r), None);
    assert!(!flags(&r, None).contains(&"saturated".to_string()));
}

#[test]
fn a_step_answered_only_after_its_period_is_saturated() {
    // Every planned request answered, but 12,800/s within the period of 30,000/s offered:
    // the rest came while the backlog drained.
    let r = step(30_000.0, 30_000, 30_000, 12_800);
    let why = fell_behind(&r).expect("fell behind");
    assert!(
        why.contains("12800/s served") && why.contains("30000/s"),
        "{why}"
    );
    assert!(flags(&r, None).contains(&"saturated".to_string()));
}

#[test]
fn a_step_with_unanswered_requests_or_cut_short_is_saturated() {
    let r = step(30_000.0, 30_000, 20_000, 20_000);
    assert!(fell_behind(&r).unwrap().contains("20000 of the 30000"));
    let mut cut = step(30_000.0, 30_000, 30_000, 30_000);
    cut.result.saturated = Some("step stopped".into());
    assert_eq!(fell_behind(&cut).as_deref(), Some("step stopped"));
    // A closed-loop peak has no plan to fall behind.
    let mut peak = step(0.0, 0, 30_000, 30_000);
    peak.pattern = Pattern::Peak;
    assert_eq!(fell_behind(&peak), None);
}
