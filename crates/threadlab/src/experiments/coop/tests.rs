//! The coop experiment's unit tests: the job and its checksum on both substrates.

use super::*;

#[test]
fn checksum_does_not_depend_on_the_yield_policy() {
    let chunks = 40;
    let expect = reference_checksum(chunks);
    let noop = || {};
    let go = AtomicI32::new(0);
    assert_eq!(run_job(chunks, YieldPolicy::Never, &noop, &go).0, expect);
    let (sum, yields) = run_job(chunks, YieldPolicy::EveryChunk, &noop, &go);
    assert_eq!((sum, yields), (expect, chunks));
    assert_eq!(
        run_job(chunks, YieldPolicy::Every(Duration::ZERO), &noop, &go).0,
        expect
    );
    // An interruption stops the job after its first chunk.
    let stop = AtomicI32::new(libc::SIGINT);
    assert_ne!(run_job(chunks, YieldPolicy::Never, &noop, &stop).0, expect);
}

#[test]
fn time_based_yield_respects_its_period() {
    let noop = || {};
    let go = AtomicI32::new(0);
    let (_, yields) = run_job(
        64,
        YieldPolicy::Every(Duration::from_secs(3600)),
        &noop,
        &go,
    );
    assert_eq!(yields, 0);
}

#[test]
fn both_substrates_compute_the_same_checksum() {
    let chunks = 50;
    let expect = reference_checksum(chunks);
    let cpu = home_cpu();
    let flag = Arc::new(AtomicI32::new(0));
    assert_eq!(run_uthread(cpu, chunks, None, &flag).unwrap().1, expect);
    for m in U_MODES {
        assert_eq!(
            run_uthread(cpu, chunks, Some(*m), &flag).unwrap().1,
            expect,
            "{}",
            m.id
        );
    }
    for m in K_MODES {
        assert_eq!(
            run_kernel(cpu, chunks, m.0, &flag).unwrap().1,
            expect,
            "{}",
            m.1
        );
    }
}
