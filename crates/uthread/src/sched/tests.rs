//! The run queue on its own: bitmaps, keys, FIFO order, the yield rotation and the lottery
//! with a fixed seed (so the draw is the same on every run and machine).

use super::*;
use crate::tcb::life;

fn thread(p: Priority) -> Box<Thread> {
    Box::new(Thread::for_test(p, level_key(p, false), life::READY))
}

fn ptr(t: &mut Thread) -> *mut Thread {
    t
}

#[test]
fn bits_track_levels_across_both_words() {
    let mut b = Bits::default();
    assert!(!b.any());
    for p in [0, 5, 63, 64, 100, 127] {
        b.set(p);
        assert!(b.any());
        assert_eq!(b.highest(), p, "highest after setting {p}");
    }
    assert_eq!(b.single(), None);
    for p in [127, 100, 64, 63, 5] {
        b.clear(p);
    }
    assert_eq!(b.single(), Some(0));
    b.clear(0);
    b.set(70);
    assert_eq!(b.single(), Some(70));
    assert_eq!(b.as_u128(), 1u128 << 70);
}

#[test]
fn level_keys_order_the_classes() {
    // Time-sharing keys are the level itself (the only ones the FIFO fast path accepts, all
    // below 0x100); real-time and idle keys lie above every level.
    assert_eq!(level_key(Priority::TimeSharing(1), false), 1);
    assert_eq!(level_key(Priority::TimeSharing(99), false), 99);
    assert!(level_key(Priority::RealTime(0), false) >= 0x100);
    assert!(level_key(Priority::Idle, false) > level_key(Priority::RealTime(127), false));
    assert_ne!(level_key(Priority::Idle, false), MIXED);
}

#[test]
fn fifo_pops_in_push_order_and_rotates() {
    let mut ts: Vec<_> = (0..3).map(|_| thread(Priority::default())).collect();
    let [a, b, c] = [ptr(&mut ts[0]), ptr(&mut ts[1]), ptr(&mut ts[2])];
    let mut q = Fifo::new();
    // SAFETY: the threads are live (boxed above) and each is in at most one queue.
    unsafe {
        q.push(a);
        q.push(b);
        // `rotate(c)` is push(c) then pop(): the head comes out, c goes to the back.
        assert_eq!(q.rotate(c), a);
        assert_eq!(q.pop(), b);
        // A queue of one rotates to the newcomer.
        assert_eq!(q.rotate(a), c);
        assert_eq!(q.pop(), a);
        assert!(q.is_empty());
        assert!(q.pop().is_null());
    }
}

#[test]
fn real_time_first_then_time_sharing_then_idle() {
    let mut ts = [
        thread(Priority::Idle),
        thread(Priority::TimeSharing(10)),
        thread(Priority::RealTime(5)),
        thread(Priority::RealTime(9)),
        thread(Priority::RealTime(9)),
    ];
    let ps: Vec<*mut Thread> = ts.iter_mut().map(|t| ptr(t)).collect();
    let mut q = RunQueue::new(1);
    // SAFETY: live threads, each pushed once and popped before they are dropped.
    unsafe {
        for &p in &ps {
            q.push(p);
        }
        // Highest real-time level first, FIFO among equals; then the lone time-sharing
        // thread; idle last.
        let order: Vec<_> = (0..5).map(|_| q.pop()).collect();
        assert_eq!(order, vec![ps[3], ps[4], ps[2], ps[1], ps[0]]);
        assert!(q.pop().is_null());
    }
}

#[test]
fn a_yield_among_equals_is_a_fifo_rotation() {
    let mut ts: Vec<_> = (0..3).map(|_| thread(Priority::TimeSharing(12))).collect();
    let ps: Vec<*mut Thread> = ts.iter_mut().map(|t| ptr(t)).collect();
    let mut q = RunQueue::new(1);
    // SAFETY: live threads; the running one (`cur`) is never in the queue.
    unsafe {
        q.push(ps[1]);
        q.push(ps[2]);
        assert_eq!(q.uniform, 12, "one time-sharing level: FIFO fast path");
        let mut cur = ps[0];
        let mut seen = Vec::new();
        for _ in 0..6 {
            cur = q.rotate(cur);
            seen.push(cur);
        }
        assert_eq!(seen, vec![ps[1], ps[2], ps[0], ps[1], ps[2], ps[0]]);
        // Alone, a yielding thread gets itself back.
        let mut alone = RunQueue::new(1);
        assert_eq!(alone.rotate(ps[0]), ps[0]);
    }
}

/// Threads that keep their own floating-point environment never make the queue uniform (the
/// yield's fast path skips the environment hand-over on that promise), yet rotate among
/// themselves and with others of their level in FIFO order as before.
#[test]
fn own_fp_env_threads_never_take_the_uniform_rotation() {
    let p = Priority::TimeSharing(12);
    let mut ts: Vec<_> = (0..3)
        .map(|k| Box::new(Thread::for_test(p, level_key(p, k != 1), life::READY)))
        .collect();
    let ps: Vec<*mut Thread> = ts.iter_mut().map(|t| ptr(t)).collect();
    assert_ne!(level_key(p, true), level_key(p, false));
    let mut q = RunQueue::new(1);
    // SAFETY: live threads; the running one (`cur`) is never in the queue.
    unsafe {
        q.push(ps[2]);
        assert!(
            !q.is_uniform_at(level_key(p, true)),
            "alone, still not uniform"
        );
        q.push(ps[1]);
        assert!(
            !q.is_uniform_at(level_key(p, false)),
            "mixed with a plain thread"
        );
        let mut cur = ps[0];
        let mut seen = Vec::new();
        for _ in 0..6 {
            cur = q.rotate(cur);
            seen.push(cur);
        }
        assert_eq!(seen, vec![ps[2], ps[1], ps[0], ps[2], ps[1], ps[0]]);
    }
    // Plain threads of one level do make it uniform (one alone is kept aside until a second
    // comes; see `a_thread_alone_is_kept_aside_in_fifo_order`).
    let mut more: Vec<_> = (0..2).map(|_| thread(p)).collect();
    let mut plain = RunQueue::new(1);
    // SAFETY: as above.
    unsafe {
        plain.push(ps[1]);
        plain.push(ptr(&mut more[0]));
        assert!(plain.is_uniform_at(level_key(p, false)));
    }
}

/// A thread pushed into an empty queue is kept aside (`lone`): `take_lone` and `pop` give it
/// back; a second push puts it first in its level's FIFO, so the order is the FIFO's whatever
/// the second thread's class; a yield beside it rotates it out as before.
#[test]
fn a_thread_alone_is_kept_aside_in_fifo_order() {
    let ts12 = Priority::TimeSharing(12);
    let mut ts: Vec<_> = (0..4).map(|_| thread(ts12)).collect();
    let ps: Vec<*mut Thread> = ts.iter_mut().map(|t| ptr(t)).collect();
    let mut rt = thread(Priority::RealTime(5));
    let mut higher = thread(Priority::TimeSharing(20));
    let mut own_fp = Box::new(Thread::for_test(ts12, level_key(ts12, true), life::READY));
    // SAFETY: live threads, each in at most one queue, taken out before they are dropped; the
    // running one (`cur`) is never queued.
    unsafe {
        let mut q = RunQueue::new(1);
        // Alone: aside, not uniform (a yield beside it takes the slow rotation).
        q.push(ps[0]);
        assert_eq!(q.lone, ps[0]);
        assert!(!q.is_uniform_at(level_key(ts12, false)));
        assert!(!q.is_empty());
        assert_eq!(q.take_lone(), ps[0]);
        assert!(q.is_empty() && q.pop().is_null());
        assert_eq!(q.uniform, MIXED);
        // `pop` takes it as well, and leaves the queue as new.
        q.push(ps[0]);
        assert_eq!(q.pop(), ps[0]);
        assert!(q.is_empty() && q.lone.is_null() && q.uniform == MIXED);
        // A second thread of its level: first in the FIFO, uniform again.
        q.push(ps[0]);
        q.push(ps[1]);
        assert!(q.lone.is_null());
        assert!(q.is_uniform_at(level_key(ts12, false)));
        assert!(q.take_lone().is_null(), "nothing aside: nothing taken");
        assert_eq!(q.len, 2);
        assert_eq!((q.pop(), q.pop()), (ps[0], ps[1]));
        assert!(q.pop().is_null());
        // Beside a real-time thread: mixed, the real-time one first, then the one aside.
        q.push(ps[0]);
        q.push(ptr(&mut rt));
        assert_eq!(q.uniform, MIXED);
        assert_eq!((q.pop(), q.pop()), (ptr(&mut rt), ps[0]));
        assert!(q.pop().is_null());
        // Beside a thread of another time-sharing level, or of its own with its own
        // floating-point environment: mixed, each popped once.
        for other in [ptr(&mut higher), ptr(&mut own_fp)] {
            q.push(ps[0]);
            q.push(other);
            assert_eq!(q.uniform, MIXED);
            let mut got = [q.pop(), q.pop()];
            got.sort();
            let mut want = [ps[0], other];
            want.sort();
            assert_eq!(got, want);
            assert!(q.pop().is_null() && q.is_empty());
        }
        // A yield beside a thread aside: that thread runs, and the rotation goes on in FIFO
        // order with a third thread pushed later.
        q.push(ps[1]);
        let mut cur = q.rotate(ps[0]);
        assert_eq!(cur, ps[1]);
        assert!(q.is_uniform_at(level_key(ts12, false)));
        q.push(ps[2]);
        let mut seen = Vec::new();
        for _ in 0..6 {
            cur = q.rotate(cur);
            seen.push(cur);
        }
        assert_eq!(seen, vec![ps[0], ps[2], ps[1], ps[0], ps[2], ps[1]]);
        while !q.pop().is_null() {}
        // A thread with its own environment alone is not kept aside.
        q.push(ptr(&mut own_fp));
        assert!(q.lone.is_null() && q.take_lone().is_null());
        assert_eq!(q.pop(), ptr(&mut own_fp));
        let _ = &mut ts;
    }
}

/// How often each of three time-sharing levels wins `draws` lotteries (threads stay queued;
/// only the draw is made).
fn draw(seed: u64, levels: [u8; 3], draws: usize) -> [usize; 3] {
    let mut ts: Vec<_> = levels
        .iter()
        .map(|&p| thread(Priority::TimeSharing(p)))
        .collect();
    let mut q = RunQueue::new(seed);
    for t in ts.iter_mut() {
        // SAFETY: live, unqueued threads; never popped, so they outlive the queue's use.
        unsafe { q.push(ptr(t)) };
    }
    let mut wins = [0; 3];
    for _ in 0..draws {
        let p = q.lottery();
        let i = levels
            .iter()
            .position(|&l| l as usize == p)
            .expect("the lottery picks a queued level");
        wins[i] += 1;
    }
    wins
}

#[test]
fn the_lottery_doubles_the_odds_per_priority_unit() {
    // Weights 1 : 2 : 4. With a fixed seed the counts are exact for this implementation; the
    // bounds below only say they are near the weights (the expected counts are 10,000, 20,000
    // and 40,000).
    let wins = draw(0x5EED, [10, 11, 12], 70_000);
    assert_eq!(wins.iter().sum::<usize>(), 70_000);
    for (got, want) in wins.iter().zip([10_000.0, 20_000.0, 40_000.0]) {
        let ratio = *got as f64 / want;
        assert!((0.95..1.05).contains(&ratio), "{wins:?}");
    }
    // Same seed, same draws.
    assert_eq!(
        draw(0x5EED, [10, 11, 12], 1_000),
        draw(0x5EED, [10, 11, 12], 1_000)
    );
}

#[test]
fn the_lottery_survives_the_widest_priority_spread() {
    // 2^(1 - 99) underflows nothing that matters: level 99 wins (nearly) always, and the draw
    // never picks an empty level or panics.
    let wins = draw(7, [1, 50, 99], 10_000);
    assert_eq!(wins[2], 10_000, "{wins:?}");
}

#[test]
fn the_never_queued_key_is_given_back_by_every_rotation() {
    // The scheduler pseudo-thread's key: a yield from the scheduler context must neither take
    // the FIFO fast path nor land in the queue, whether the queue is empty, uniform or mixed.
    assert!(NEVER_QUEUED > level_key(Priority::Idle, false) && NEVER_QUEUED != MIXED);
    let mut sched = Box::new(Thread::for_test(
        Priority::default(),
        NEVER_QUEUED,
        life::READY,
    ));
    let s = ptr(&mut sched);
    let mut ts: Vec<_> = [
        Priority::default(),
        Priority::default(),
        Priority::RealTime(3),
    ]
    .into_iter()
    .map(thread)
    .collect();
    let [a, b, r] = [ptr(&mut ts[0]), ptr(&mut ts[1]), ptr(&mut ts[2])];
    let mut q = RunQueue::new(1);
    // SAFETY: every thread is live (boxed above) and in at most one queue.
    unsafe {
        assert_eq!(q.rotate(s), s, "empty queue");
        q.push(a);
        q.push(b);
        assert_eq!(q.rotate(s), s, "uniform queue");
        q.push(r);
        assert_eq!(q.rotate(s), s, "mixed queue");
        assert_eq!([q.pop(), q.pop(), q.pop(), q.pop()], [r, a, b, null_mut()]);
    }
}
