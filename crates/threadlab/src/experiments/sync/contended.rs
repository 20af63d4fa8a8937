//! Contended lock costs for `sync`: two threads hammering one lock, on two CPUs and on one.
//!
//! The uncontended rows of `sync` time a lock+unlock pair in one thread. Here two threads each
//! run a batch of lock, increment a shared counter, unlock; the figure is the batch's wall time
//! divided by the pairs both threads completed, so it includes whatever contention costs with
//! that lock: cache-line transfers, futex sleeps and wake-ups, spinning, hand-off waits.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Instant;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{Ctx, Outcome};
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::process::wait_until;
use crate::measure::sampler::Sampler;
use crate::measure::spawn::spawn_scoped;
use crate::measure::stats::Summary;
use crate::measure::units::Unit;
use crate::results::Metric;
use crate::subjects::locks::{BenchLock, ParkingLotMutex, PthreadMutex, StdMutex, TicketLock};

/// What the two threads share.
#[derive(Default)]
struct Shared {
    /// Batch number the partner should run (0 = none yet).
    go: AtomicU64,
    /// Operations per thread in the current batch.
    iters: AtomicU64,
    /// Last batch number the partner finished.
    done: AtomicU64,
    stop: AtomicBool,
    /// Set by the partner if it could not run (pinning failed).
    failed: AtomicBool,
    /// Incremented under the lock: checks mutual exclusion at the end.
    counter: AtomicU64,
}

/// Sets the stop flag when dropped, so the partner thread ends on every exit path.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// `n` lock+increment+unlock pairs. A batch under a convoy can last seconds, so the
/// interruption flag is read every 1024 pairs (a relaxed load: noise next to a lock pair) and
/// the batch ends early when it is set; the sampler then reports the interruption.
#[inline]
fn pairs<L: BenchLock>(lock: &L, counter: &AtomicU64, n: u64, interrupted: &AtomicI32) {
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
        if interrupted.load(Ordering::Relaxed) != 0 {
            return;
        }
    }
}

/// Wall time per lock+unlock pair with two threads on `cpus` (the caller's thread on the first).
fn contended_pair_ns<L: BenchLock>(
    sampler: &Sampler,
    cancel: &Cancel,
    cpus: (usize, usize),
) -> Result<Summary> {
    let interrupted = cancel.flag();
    let lock = L::default();
    let sh = Shared::default();
    let mut total_per_thread = 0u64;
    let summary = std::thread::scope(|s| -> Result<Summary> {
        let _stop = StopOnDrop(&sh.stop);
        let (lock_ref, sh_ref) = (&lock, &sh);
        let partner = spawn_scoped(s, "the partner thread", move || -> Result<()> {
            if let Err(e) = pin_current_thread(cpus.1) {
                sh_ref.failed.store(true, Ordering::Release);
                return Err(e);
            }
            let mut seen = 0;
            loop {
                wait_until(
                    || {
                        sh_ref.stop.load(Ordering::Acquire)
                            || sh_ref.go.load(Ordering::Acquire) != seen
                    },
                    u64::MAX,
                )?;
                if sh_ref.stop.load(Ordering::Acquire) {
                    return Ok(());
                }
                seen = sh_ref.go.load(Ordering::Acquire);
                pairs(
                    lock_ref,
                    &sh_ref.counter,
                    sh_ref.iters.load(Ordering::Relaxed),
                    interrupted,
                );
                sh_ref.done.store(seen, Ordering::Release);
            }
        })?;
        let _pin = PinGuard::pin(cpus.0)?;
        let mut batch_no = 0;
        let r = sampler.per_op_ns(|n| {
            batch_no += 1;
            total_per_thread += n;
            sh.iters.store(n, Ordering::Relaxed);
            let t = Instant::now();
            sh.go.store(batch_no, Ordering::Release);
            pairs(&lock, &sh.counter, n, interrupted);
            wait_until(
                || {
                    sh.done.load(Ordering::Acquire) == batch_no
                        || sh.failed.load(Ordering::Acquire)
                        || cancel.is_cancelled()
                },
                30_000_000_000,
            )?;
            cancel.check()?;
            if sh.failed.load(Ordering::Acquire) {
                return Err(Error::Fail("the partner thread could not be pinned".into()));
            }
            // Both threads did n pairs: per pair is half the batch's time per n.
            Ok(t.elapsed() / 2)
        });
        sh.stop.store(true, Ordering::Release);
        let joined = partner
            .join()
            .unwrap_or_else(|_| Err(Error::Fail("the partner thread panicked".into())));
        joined?;
        r
    })?;
    let counted = sh.counter.load(Ordering::Relaxed);
    if counted != 2 * total_per_thread {
        return Err(Error::Fail(format!(
            "lock {} lost updates under contention: {counted} increments for {} pairs",
            L::NAME,
            2 * total_per_thread
        )));
    }
    Ok(summary)
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

fn measure(
    lock: &str,
    sampler: &Sampler,
    cancel: &Cancel,
    cpus: (usize, usize),
) -> Result<Summary> {
    match lock {
        "pthread" => contended_pair_ns::<PthreadMutex>(sampler, cancel, cpus),
        "std" => contended_pair_ns::<StdMutex>(sampler, cancel, cpus),
        "parking_lot" => contended_pair_ns::<ParkingLotMutex>(sampler, cancel, cpus),
        "ticket" => contended_pair_ns::<TicketLock<()>>(sampler, cancel, cpus),
        other => Err(Error::Fail(format!("unknown lock {other}"))),
    }
}

/// Appends `<prefix>.contended.cross_cpu` and `<prefix>.contended.same_cpu` for each lock.
pub fn contended_metrics(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let home = home_cpu();
    let placements = [("cross_cpu", cpu_pair()), ("same_cpu", Some((home, home)))];
    for (prefix, lock, what) in CONTENDED_LOCKS {
        for (where_, cpus) in placements {
            let id = format!("{prefix}.contended.{where_}");
            let Some(cpus) = cpus else {
                out.skip(&id, "this process may use only one CPU");
                continue;
            };
            ctx.step(&id)?;
            let placement = if cpus.0 == cpus.1 {
                Placement::SameCpu(cpus.0)
            } else {
                Placement::CrossCpu(cpus.0, cpus.1)
            };
            let situation = if cpus.0 == cpus.1 {
                "Both threads pinned to one CPU: they contend only when one is preempted holding the lock (or, for a FIFO lock, holding a place in line); the rest of the time each runs alone, so this is near the uncontended cost plus the switches that contention forces."
            } else {
                "Threads pinned to two different CPUs: every hand-off moves the lock's cache line (and, for blocking locks, may sleep and wake a thread)."
            };
            match measure(lock, &ctx.sampler(), ctx.cancel, cpus) {
                Ok(s) => {
                    out.add(Metric::from_summary(
                    &id,
                    Unit::Ns,
                    &s,
                    placement,
                    format!(
                        "Per lock+unlock pair, 2 threads contending; {what}: two threads each run a batch of lock, load+store of a shared counter, unlock. Figure = batch wall time / pairs completed by both threads (aggregate cost per lock+unlock pair under contention, including the critical section and all waiting); the batch start handshake (one cache-line transfer) is included and is under 0.1% of a batch. {situation} Spread over batches of >= {} ms; compare with the uncontended single-thread rows of sync.",
                        ctx.mode.sampler_config().min_batch.as_millis().max(1)
                    ),
                ));
                }
                Err(Error::Skip(r)) => out.skip(&id, r),
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::Cancel;
    use crate::measure::sampler::SamplerConfig;
    use std::time::Duration;

    fn sampler(cancel: &Cancel) -> Sampler<'_> {
        Sampler::new(
            SamplerConfig {
                warmup: Duration::from_millis(1),
                samples: 7,
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
            let s = measure(lock, &sampler(&cancel), &cancel, (cpu, cpu)).unwrap();
            assert!(s.median > 0.0 && s.n >= 7, "{lock}");
        }
    }

    #[test]
    fn cross_cpu_runs_where_there_are_two_cpus() {
        let Some(pair) = cpu_pair() else { return };
        let cancel = Cancel::never();
        let s = measure("ticket", &sampler(&cancel), &cancel, pair).unwrap();
        assert!(s.min > 0.0);
    }

    #[test]
    fn cancellation_stops_and_joins_the_partner() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGINT);
        let r = measure("std", &sampler(&cancel), &cancel, (home_cpu(), home_cpu()));
        assert!(matches!(r, Err(Error::Cancelled(_))));
    }
}
