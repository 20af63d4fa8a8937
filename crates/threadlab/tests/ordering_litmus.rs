//! Litmus tests: with the right ordering the forbidden outcome never appears, on any CPU.
//!
//! These assert only what the memory model guarantees. Whether the relaxed outcomes appear with
//! weaker orderings depends on the hardware (x86 shows only SB's), so it is counted by the
//! `ordering` experiment and never asserted here.

use threadlab::cancel::Cancel;
use threadlab::experiments::ordering::{forbids, run_litmus, Litmus, Order, ORDERS};
use threadlab::measure::placement::{allowed_cpus, cpu_pair};

const ITERATIONS: u64 = 200_000;

/// Two different CPUs when there are two, else unpinned (the test still holds, it is just
/// less likely to catch a reordering).
fn cpus_for(threads: usize) -> Vec<usize> {
    match (threads, cpu_pair()) {
        (2, Some((a, b))) => vec![a, b],
        _ => {
            let all = allowed_cpus();
            if all.len() >= threads {
                all[..threads].to_vec()
            } else {
                Vec::new()
            }
        }
    }
}

fn assert_never(test: Litmus, order: Order) {
    assert!(
        forbids(test, order),
        "the model allows {test:?} with {order:?}"
    );
    let r = run_litmus(
        test,
        order,
        ITERATIONS,
        &cpus_for(test.threads()),
        &Cancel::never(),
    )
    .expect("litmus run");
    assert_eq!(r.counts.iter().sum::<u64>(), ITERATIONS);
    assert_eq!(
        r.relaxed(),
        0,
        "{test:?} with {order:?} showed the forbidden outcome: {}",
        r.outcomes_text()
    );
}

#[test]
fn seqcst_forbids_sb() {
    assert_never(Litmus::Sb, Order::SeqCst);
}

#[test]
fn seqcst_forbids_mp() {
    assert_never(Litmus::Mp, Order::SeqCst);
}

#[test]
fn seqcst_forbids_lb() {
    assert_never(Litmus::Lb, Order::SeqCst);
}

#[test]
fn release_acquire_forbids_mp_the_articles_stale_k() {
    assert_never(Litmus::Mp, Order::AcqRel);
}

#[test]
fn release_acquire_forbids_lb() {
    assert_never(Litmus::Lb, Order::AcqRel);
}

#[test]
fn seqcst_fences_forbid_sb_mp_and_lb() {
    for test in [Litmus::Sb, Litmus::Mp, Litmus::Lb] {
        assert_never(test, Order::Fence);
    }
}

#[test]
fn iriw_with_seqcst_runs_where_there_are_four_cpus() {
    if allowed_cpus().len() < 4 {
        return;
    }
    assert_never(Litmus::Iriw, Order::SeqCst);
}

#[test]
fn every_ordering_counts_every_iteration_once() {
    // Structure only: outcome counts add up, whatever the hardware shows.
    for &order in ORDERS {
        let r = run_litmus(Litmus::Sb, order, 5_000, &cpus_for(2), &Cancel::never()).unwrap();
        assert_eq!(r.counts.len(), 4);
        assert_eq!(r.counts.iter().sum::<u64>(), 5_000);
        assert!(r.relaxed_pct() >= 0.0 && r.relaxed_pct() <= 100.0);
    }
}
