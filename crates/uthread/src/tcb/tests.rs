//! The `life` word's transitions, one thread at a time (the cross-thread races are forced in
//! `crates/uthread-races/tests/races.rs`).

use super::*;

fn thread(life: u32) -> Thread {
    Thread::for_test(Priority::default(), 10, life)
}

#[test]
fn leave_suspended_moves_only_a_suspended_thread() {
    let t = thread(life::SUSPENDED);
    assert!(t.leave_suspended(false));
    assert_eq!(t.life.load(Ordering::Relaxed), life::READY);
    // A second resume (or a cancel) finds it no longer suspended.
    assert!(!t.leave_suspended(false));
    assert!(!t.leave_suspended(true));
    assert_eq!(t.life.load(Ordering::Relaxed), life::READY);
}

#[test]
fn leave_suspended_with_cancel_marks_it_cancelled() {
    let t = thread(life::SUSPENDED | life::JOINER);
    assert!(t.leave_suspended(true));
    assert_eq!(
        t.life.load(Ordering::Relaxed),
        life::READY | life::CANCEL | life::JOINER,
        "other flags are kept"
    );
}

#[test]
fn begin_starts_a_ready_thread_and_refuses_a_cancelled_one() {
    for joiner in [0, life::JOINER, life::OS_JOINER] {
        let t = thread(life::READY | joiner);
        assert!(t.begin(), "joiner flags {joiner:#x}");
        assert_eq!(t.life.load(Ordering::Relaxed), life::STARTED | joiner);
        assert!(!t.is_done());

        let t = thread(life::READY | life::CANCEL | joiner);
        assert!(!t.begin(), "cancelled, joiner flags {joiner:#x}");
        assert_eq!(
            t.life.load(Ordering::Relaxed),
            life::READY | life::CANCEL | joiner,
            "a refused start changes nothing"
        );
    }
}

#[test]
fn done_absorbs_every_state() {
    for state in [life::SUSPENDED, life::READY, life::STARTED, life::DONE] {
        let t = thread(state);
        assert_eq!(t.is_done(), state == life::DONE);
        t.life.fetch_or(life::DONE, Ordering::Relaxed);
        assert!(t.is_done(), "from state {state}");
    }
}

#[test]
fn release_handle_frees_only_after_the_runtime_let_go() {
    let mut t = thread(life::STARTED);
    // SAFETY: `t` is live; we act as its handle.
    assert!(!unsafe { Thread::release_handle(&mut t) });
    assert_ne!(t.life.load(Ordering::Relaxed) & life::HANDLE_GONE, 0);

    let mut t = thread(life::DONE | life::REAPED);
    // SAFETY: as above.
    assert!(unsafe { Thread::release_handle(&mut t) });
    assert_eq!(
        t.life.load(Ordering::Relaxed) & life::HANDLE_GONE,
        0,
        "no announcement when the handle is the last holder"
    );
}

#[test]
fn priorities_outside_their_class_range_are_rejected() {
    assert!(Priority::RealTime(127).validate().is_ok());
    assert!(Priority::RealTime(128).validate().is_err());
    assert!(Priority::TimeSharing(1).validate().is_ok());
    assert!(Priority::TimeSharing(99).validate().is_ok());
    assert!(Priority::TimeSharing(0).validate().is_err());
    assert!(Priority::TimeSharing(100).validate().is_err());
    assert!(Priority::Idle.validate().is_ok());
}
