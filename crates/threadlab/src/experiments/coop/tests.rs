//! The coop experiment's unit tests: the job and its checksum on both substrates, and the
//! two job lengths.

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
fn a_mode_that_yields_less_often_than_the_short_job_lasts_runs_the_long_one() {
    // A mode whose time-based yield would not happen within the quick suite's short job must
    // run the long job, or its score would measure no yield at all.
    for m in U_MODES {
        if let YieldPolicy::Every(p) = m.policy {
            assert_eq!(m.long, p >= QUICK_SHORT_JOB, "{}", m.id);
        }
    }
    assert!(U_MODES.iter().any(|m| m.long) && U_MODES.iter().any(|m| !m.long));
}

#[test]
fn the_short_and_long_jobs_are_scored_against_their_own_baselines() {
    let mut long = Scores::new(3, vec![0], 40, 0);
    let mut short = Scores::new(3, vec![1, 2], 20, 0);
    let ctx_owner = crate::experiments::Standalone::new();
    let ctx = ctx_owner.ctx(crate::experiments::Mode::Tiny);
    let ok = |_: &str, _: u64, _: &JobRun| Ok(());
    // A job's time is its chunks (baseline) or twice them (a mode): every score is 2.0
    // only if each mode is divided by the baseline of its own length.
    long.rep(&ctx, "b", &["a", "b", "c"], &ok, |m| {
        Ok(((40 * (1 + m.is_some() as u64)) as f64, 0, 0))
    })
    .unwrap();
    short
        .rep(&ctx, "b", &["a", "b", "c"], &ok, |m| {
            Ok(((20 * (1 + m.is_some() as u64)) as f64, 0, 0))
        })
        .unwrap();
    assert_eq!(long.scores[0], vec![2.0]);
    assert!(long.scores[1].is_empty() && long.scores[2].is_empty());
    assert_eq!(
        (short.scores[1].clone(), short.scores[2].clone()),
        (vec![2.0], vec![2.0])
    );
    assert!(short.scores[0].is_empty());
    assert_eq!((long.base_median(), short.base_median()), (40.0, 20.0));
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
