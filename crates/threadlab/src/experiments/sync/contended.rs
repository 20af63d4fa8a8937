//! Contended lock costs for `sync`: two threads hammering one lock, on two CPUs and on one.
//!
//! The uncontended rows of `sync` time a lock+unlock pair in one thread. Here two threads each
//! run a batch of lock, increment a shared counter, unlock; the figure is the batch's wall time
//! divided by the pairs both threads completed, so it includes whatever contention costs with
//! that lock: cache-line transfers, futex sleeps and wake-ups, spinning, hand-off waits.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{Ctx, Interleaved, Outcome};
use crate::measure::driver::Driver;
use crate::measure::placement::{cpu_pair, home_cpu, place_current_thread, Placement};
use crate::measure::process::wait_until;
use crate::measure::sampler::RESIZE_FACTOR;
use crate::measure::spawn::spawn;
use crate::measure::units::Unit;
use crate::results::flag::Flag;
use crate::subjects::locks::{BenchLock, ParkingLotMutex, PthreadMutex, StdMutex, TicketLock};
use crate::sys::{futex_wait_for, futex_wake};

/// What the two threads share: the lock and the batch handshake.
struct Shared<L> {
    lock: L,
    /// Batch number the partner should run, as a futex word it sleeps on between batches (so
    /// an idle partner takes no CPU from the other rows of the group).
    go: AtomicU32,
    /// Operations per thread in the current batch.
    iters: AtomicU64,
    /// The partner is awake for this batch and spins until `start`.
    ready: AtomicU32,
    start: AtomicU32,
    /// Last batch number the partner finished.
    done: AtomicU32,
    stop: AtomicBool,
    /// Set by the partner if it could not run (pinning failed).
    failed: AtomicBool,
    /// Incremented under the lock: checks mutual exclusion.
    counter: AtomicU64,
    /// The CPU the partner ended its last batch on.
    partner_at: AtomicI32,
    /// Pairs the partner completed in its last batch.
    partner_pairs: AtomicU64,
    /// Set by the measuring side once the batch has run for longer than its cap: both sides
    /// end it at their next check.
    cut: AtomicBool,
}

/// `n` lock+increment+unlock pairs, or fewer: a batch under a convoy can last seconds, so
/// `stop` is read every 1024 pairs (a relaxed load and a clock read: noise next to 1024 lock
/// pairs) and the batch ends early when it holds. The pairs completed.
#[inline]
fn pairs<L: BenchLock>(lock: &L, counter: &AtomicU64, n: u64, stop: impl Fn() -> bool) -> u64 {
    let mut left = n;
    while left > 0 {
        let chunk = left.min(1024);
        for _ in 0..chunk {
            lock.with(|| {
                // A load and a store, not an atomic add: a lost update would show a broken lock.
                let c = counter.load(Ordering::Relaxed);
                counter.store(c + 1, Ordering::Relaxed);
            });
        }
        left -= chunk;
        if stop() {
            break;
        }
    }
    n - left
}

/// Where the two threads run: the measuring thread's CPUs and the partner's.
#[derive(Debug, Clone)]
pub struct Seats {
    pub main: Vec<usize>,
    pub partner: Vec<usize>,
}

/// Two threads and a fresh lock, made for one trial: the partner thread sleeps between batches
/// and is stopped and joined when this is dropped.
struct ContendedPair<L: BenchLock + 'static> {
    sh: Arc<Shared<L>>,
    partner: Option<std::thread::JoinHandle<()>>,
    /// The measuring thread: fresh per trial, placed on `seats.main`.
    main: Driver,
    seats: Seats,
    batch_no: u32,
    /// Pairs both threads completed so far: what the shared counter must read.
    completed: u64,
    /// A batch still running after this is cut (see `batch`).
    cap: Duration,
}

impl<L: BenchLock + 'static> ContendedPair<L> {
    fn start(seats: Seats, cap: Duration) -> Result<ContendedPair<L>> {
        let sh = Arc::new(Shared {
            lock: L::default(),
            go: AtomicU32::new(0),
            iters: AtomicU64::new(0),
            ready: AtomicU32::new(0),
            start: AtomicU32::new(0),
            done: AtomicU32::new(0),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            counter: AtomicU64::new(0),
            partner_at: AtomicI32::new(-1),
            partner_pairs: AtomicU64::new(0),
            cut: AtomicBool::new(false),
        });
        let psh = Arc::clone(&sh);
        let cpus = seats.partner.clone();
        let main = Driver::start(&seats.main)?;
        let partner = spawn("the partner thread", move || partner_loop(&psh, &cpus))?;
        Ok(ContendedPair {
            sh,
            partner: Some(partner),
            main,
            seats,
            batch_no: 0,
            completed: 0,
            cap,
        })
    }

    /// The time `n` pairs on each thread take, per pair (the batch's wall time over the pairs
    /// both threads completed, times `n`), and whether the two threads ended it on one CPU. A
    /// batch still running after `cap` is cut, and its figure is per pair it completed: a
    /// lock that falls into a convoy after its batch was sized (one pair in a few hundred
    /// nanoseconds instead of a few) would otherwise hold a batch for a second or more, and the
    /// sampler re-sizes the next batch from the figure either way. The measuring side runs on
    /// the pair's own fresh thread; an interruption stops both sides through the stop flag.
    fn batch(&mut self, n: u64, cancel: &Cancel) -> Result<(Duration, bool)> {
        self.batch_no += 1;
        let (sh, b, cap) = (Arc::clone(&self.sh), self.batch_no, self.cap);
        let ((took, main_pairs), main_at) = self.main.run_watching(
            move || main_side(&sh, b, n, cap),
            || {
                if cancel.is_cancelled() {
                    self.sh.stop.store(true, Ordering::Release);
                }
            },
        )??;
        cancel.check()?;
        let sh = &*self.sh;
        if sh.failed.load(Ordering::Acquire) {
            return Err(Error::Skip(format!(
                "the partner thread could not be placed on CPUs {:?}",
                self.seats.partner
            )));
        }
        let done = main_pairs + sh.partner_pairs.load(Ordering::Acquire);
        self.completed += done;
        let counted = sh.counter.load(Ordering::Relaxed);
        if counted != self.completed {
            return Err(Error::Fail(format!(
                "lock {} lost updates under contention: {counted} increments for {} pairs",
                L::NAME,
                self.completed
            )));
        }
        // Uncut, both threads did n pairs and this is half the batch's time.
        let per_n = took.mul_f64(n as f64 / done.max(1) as f64);
        Ok((per_n, main_at == sh.partner_at.load(Ordering::Acquire)))
    }
}

/// The measuring side of batch `b`: wake the partner, start it together with this thread, do
/// `n` pairs (fewer once `cap` has passed), wait for the partner's; the wall time from the
/// start and the pairs this side completed, and the CPU it ended on.
fn main_side<L: BenchLock>(
    sh: &Shared<L>,
    b: u32,
    n: u64,
    cap: Duration,
) -> Result<((Duration, u64), i32)> {
    sh.cut.store(false, Ordering::Relaxed);
    sh.iters.store(n, Ordering::Relaxed);
    sh.go.store(b, Ordering::Release);
    futex_wake(&sh.go, 1, false);
    let failed = || sh.failed.load(Ordering::Acquire);
    let stop = || sh.stop.load(Ordering::Acquire);
    wait_until(
        || sh.ready.load(Ordering::Acquire) == b || failed() || stop(),
        5_000_000_000,
    )?;
    let t = Instant::now();
    let over = || {
        if t.elapsed() > cap {
            sh.cut.store(true, Ordering::Release);
        }
        stop()
    };
    sh.start.store(b, Ordering::Release);
    let done = pairs(&sh.lock, &sh.counter, n, || {
        over() || sh.cut.load(Ordering::Relaxed)
    });
    let at = current_cpu();
    wait_until(
        || over() || sh.done.load(Ordering::Acquire) == b || failed(),
        30_000_000_000,
    )?;
    Ok(((t.elapsed(), done), at))
}

/// The CPU the calling thread runs on now (-1 where the kernel cannot say).
fn current_cpu() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::sched_getcpu() }
}

impl<L: BenchLock + 'static> Drop for ContendedPair<L> {
    fn drop(&mut self) {
        self.sh.stop.store(true, Ordering::Release);
        self.sh.go.fetch_add(1, Ordering::Release);
        futex_wake(&self.sh.go, 1, false);
        if let Some(p) = self.partner.take() {
            let _ = p.join();
        }
    }
}

fn partner_loop<L: BenchLock>(sh: &Shared<L>, cpus: &[usize]) {
    if place_current_thread(cpus).is_err() {
        sh.failed.store(true, Ordering::Release);
        return;
    }
    let stop = || sh.stop.load(Ordering::Acquire);
    let mut seen = 0u32;
    loop {
        // Sleep until the next batch (or the end): no CPU taken from the group's other rows.
        loop {
            if stop() {
                return;
            }
            let g = sh.go.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            futex_wait_for(&sh.go, g, false, 100);
        }
        sh.ready.store(seen, Ordering::Release);
        if wait_until(
            || sh.start.load(Ordering::Acquire) == seen || stop(),
            5_000_000_000,
        )
        .is_err()
            || stop()
        {
            return;
        }
        let done = pairs(
            &sh.lock,
            &sh.counter,
            sh.iters.load(Ordering::Relaxed),
            || stop() || sh.cut.load(Ordering::Acquire),
        );
        sh.partner_pairs.store(done, Ordering::Release);
        sh.partner_at.store(current_cpu(), Ordering::Release);
        sh.done.store(seen, Ordering::Release);
    }
}

/// The contended rows: (id prefix, lock name, what the lock is).
pub const CONTENDED_LOCKS: &[(&str, &str, &str)] = &[
    (
        "sync.mutex",
        "pthread",
        "glibc's default pthread mutex (via libc)",
    ),
    ("sync.mutex.std", "std", "std::sync::Mutex"),
    ("sync.parking_lot", "parking_lot", "parking_lot::Mutex"),
    (
        "sync.ticket",
        "ticket",
        "threadlab's ticket lock (FIFO spinning, sched_yield after 200 spins)",
    ),
];

/// One lock's rows: every placement in `seats`, in the same trials, a fresh lock and partner
/// thread for each.
fn lock_group<'a, L: BenchLock + 'static>(
    group: &mut Interleaved<'a>,
    cancel: &'a Cancel,
    rows: Vec<(String, String, String, Seats)>,
    together: &'a [Cell<Option<bool>>],
    cap: Duration,
) {
    for ((id, placement, note, seats), together) in rows.into_iter().zip(together) {
        let placed_by_kernel = placement == Placement::Unpinned.to_string();
        group.row_fresh(&id, Unit::Ns, placement, note, move || {
            let mut pair = ContendedPair::<L>::start(seats.clone(), cap)?;
            Ok(move |n: u64| {
                let (took, same) = pair.batch(n, cancel)?;
                together.set(Some(same));
                Ok(took)
            })
        });
        if placed_by_kernel {
            group.colocation(move || together.get());
        }
        // Who wins the lock, and for how long, is a race whose regime can outlast a run.
        group.flag(Flag::Race);
    }
}

/// Appends `<prefix>.contended.{cross_cpu,same_cpu,unpinned}` for each lock, the three
/// placements of one lock measured in the same trials.
pub fn contended_metrics(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let home = home_cpu();
    let all = ctx.env.allowed_cpus.clone();
    let min_batch = ctx.mode.sampler_config().min_batch.as_millis().max(1);
    // A batch the sampler would re-size anyway is cut there.
    let cap = ctx.mode.sampler_config().min_batch * RESIZE_FACTOR;
    for (prefix, lock, what) in CONTENDED_LOCKS {
        let mut rows = Vec::new();
        let placements: [(&str, Option<(Placement, Seats)>); 3] = [
            (
                "cross_cpu",
                cpu_pair().map(|(a, b)| {
                    (
                        Placement::CrossCpu(a, b),
                        Seats {
                            main: vec![a],
                            partner: vec![b],
                        },
                    )
                }),
            ),
            (
                "same_cpu",
                Some((
                    Placement::SameCpu(home),
                    Seats {
                        main: vec![home],
                        partner: vec![home],
                    },
                )),
            ),
            (
                "unpinned",
                (all.len() > 1).then(|| {
                    (
                        Placement::Unpinned,
                        Seats {
                            main: all.clone(),
                            partner: all.clone(),
                        },
                    )
                }),
            ),
        ];
        for (where_, p) in placements {
            let id = format!("{prefix}.contended.{where_}");
            let Some((placement, seats)) = p else {
                out.skip(&id, "this process may use only one CPU");
                continue;
            };
            let situation = match placement {
                Placement::SameCpu(_) => "Both threads pinned to one CPU: they contend only when one is preempted holding the lock (or, for a FIFO lock, holding a place in line); the rest of the time each runs alone, so this is near the uncontended cost plus the switches that contention forces.",
                Placement::CrossCpu(..) => "Threads pinned to two different CPUs: every hand-off moves the lock's cache line (and, for blocking locks, may sleep and wake a thread).",
                Placement::Unpinned => "Neither thread pinned: the kernel places them, as it places a program's threads by default (on two CPUs while both are busy, sometimes on one).",
            };
            rows.push((
                id,
                placement.to_string(),
                format!(
                    "Per lock+unlock pair, 2 threads contending; {what}: two threads each run a batch of lock, load+store of a shared counter, unlock. Figure = batch wall time / pairs completed by both threads (aggregate cost per lock+unlock pair under contention, including the critical section and all waiting); the batch start handshake (one cache-line transfer) is included and is under 0.1% of a batch. {situation} A fresh lock and partner thread each trial (the partner sleeps in the kernel between batches); spread over trials of batches of >= {min_batch} ms (a batch still running after {} ms, as one in a convoy can for seconds, is ended there and counted per pair it completed); compare with the uncontended single-thread rows of sync.",
                    cap.as_millis()
                ),
                seats,
            ));
        }
        if rows.is_empty() {
            continue;
        }
        // Whether each row's two threads ended a batch on one CPU (rows the kernel places).
        let together: [Cell<Option<bool>>; 3] = Default::default();
        let t = &together[..];
        let mut group = Interleaved::new();
        match *lock {
            "pthread" => lock_group::<PthreadMutex>(&mut group, ctx.cancel, rows, t, cap),
            "std" => lock_group::<StdMutex>(&mut group, ctx.cancel, rows, t, cap),
            "parking_lot" => lock_group::<ParkingLotMutex>(&mut group, ctx.cancel, rows, t, cap),
            "ticket" => lock_group::<TicketLock<()>>(&mut group, ctx.cancel, rows, t, cap),
            other => return Err(Error::Fail(format!("unknown lock {other}"))),
        }
        group.measure(ctx, out)?;
    }
    Ok(())
}

/// One lock's cost on `seats`, sampled alone (for tests).
#[cfg(test)]
fn measure(
    lock: &str,
    sampler: &crate::measure::sampler::Sampler,
    cancel: &Cancel,
    seats: Seats,
) -> Result<crate::measure::stats::Summary> {
    use crate::measure::sampler::InterleavedRow;
    fn row<'a, L: BenchLock + 'static>(seats: Seats, cancel: &'a Cancel) -> InterleavedRow<'a> {
        InterleavedRow::fresh(move || {
            let mut pair = ContendedPair::<L>::start(seats.clone(), Duration::from_millis(100))?;
            Ok(move |n: u64| pair.batch(n, cancel).map(|(took, _)| took))
        })
    }
    let r = match lock {
        "pthread" => row::<PthreadMutex>(seats, cancel),
        "std" => row::<StdMutex>(seats, cancel),
        "parking_lot" => row::<ParkingLotMutex>(seats, cancel),
        "ticket" => row::<TicketLock<()>>(seats, cancel),
        other => return Err(Error::Fail(format!("unknown lock {other}"))),
    };
    sampler.one(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::Cancel;
    use crate::measure::sampler::{Sampler, SamplerConfig};

    fn sampler(cancel: &Cancel) -> Sampler<'_> {
        Sampler::new(
            SamplerConfig {
                warmup: Duration::from_millis(1),
                min_trials: 6,
                max_trials: 6,
                rounds: 2,
                min_batch: Duration::from_micros(300),
                budget: Duration::from_millis(50),
                phase_filter: false,
            },
            cancel,
        )
    }

    #[test]
    fn every_lock_gives_a_positive_cost_on_one_cpu() {
        let cancel = Cancel::never();
        let cpu = home_cpu();
        for (_, lock, _) in CONTENDED_LOCKS {
            let seats = Seats {
                main: vec![cpu],
                partner: vec![cpu],
            };
            let s = measure(lock, &sampler(&cancel), &cancel, seats).unwrap();
            assert!(s.median > 0.0 && s.n >= 6, "{lock}");
        }
    }

    #[test]
    fn a_batch_past_its_cap_is_cut_and_its_pairs_still_add_up() {
        // 2^40 pairs a side would take hours: only the cut ends this batch.
        let cancel = Cancel::never();
        let cpu = home_cpu();
        let seats = Seats {
            main: vec![cpu],
            partner: vec![cpu],
        };
        let mut pair =
            ContendedPair::<TicketLock<()>>::start(seats, Duration::from_millis(5)).unwrap();
        let n = 1u64 << 40;
        let (per_n, _) = pair.batch(n, &cancel).unwrap();
        assert!(per_n > Duration::ZERO);
        assert!(pair.completed > 0 && pair.completed < 2 * n);
        // The next batch, uncut, is counted from where the cut one left the counter.
        let before = pair.completed;
        pair.batch(1000, &cancel).unwrap();
        assert_eq!(pair.completed, before + 2000);
    }

    #[test]
    fn cross_cpu_runs_where_there_are_two_cpus() {
        let Some((a, b)) = cpu_pair() else { return };
        let cancel = Cancel::never();
        let seats = Seats {
            main: vec![a],
            partner: vec![b],
        };
        let s = measure("ticket", &sampler(&cancel), &cancel, seats).unwrap();
        assert!(s.min > 0.0);
    }

    #[test]
    fn cancellation_stops_and_joins_the_partner() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGINT);
        let seats = Seats {
            main: vec![home_cpu()],
            partner: vec![home_cpu()],
        };
        let r = measure("std", &sampler(&cancel), &cancel, seats);
        assert!(matches!(r, Err(Error::Cancelled(_))));
    }
}
