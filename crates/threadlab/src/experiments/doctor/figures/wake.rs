//! Wake-ups through futexes: a thread asleep for 1 ms woken by another (`wake`), and two
//! threads passing a turn back and forth (`handoff`).
//!
//! Both use one hand-off word per waiting thread, with the protocol spin-then-park locks use:
//! the waiter spins for up to its spin budget watching for GO, then announces PARKED and
//! sleeps in FUTEX_WAIT; the signaller swaps in GO and calls FUTEX_WAKE only if it found
//! PARKED. With a zero budget the waiter parks at once, so "park" and "spin then park" differ
//! only in the spin.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::threads::{elapsed_since, prepare, sleep_ns, PARTNER_TIMEOUT_NS};
use super::{PhaseValues, Setup};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::placement::Placement;
use crate::measure::process::mono_ns;
use crate::measure::spawn::spawn_scoped;
use crate::sys::{futex_wait_for, futex_wake};

const EMPTY: u32 = 0;
const GO: u32 = 1;
const PARKED: u32 = 2;

/// How long the woken thread of `wake` has slept: longer than any halt-polling window (the
/// guest's 200 µs at most, the host's likewise), so its CPU is as deeply idle as allowed.
const ASLEEP_NS: u64 = 1_000_000;

/// Operations at the start of a phase that are not counted (the fresh threads' first passes).
const WARMUP_OPS: u64 = 3;

fn stopped() -> Error {
    Error::Fail("stopped".into())
}

fn is_stopped(e: &Error) -> bool {
    matches!(e, Error::Fail(m) if m == "stopped")
}

/// One thread's hand-off word.
#[derive(Default)]
struct Word(AtomicU32);

impl Word {
    /// Waits for GO (spinning up to `spin`, then parked), then re-arms the word. Err when
    /// `stop` is set or nothing comes within the partner timeout.
    fn wait(&self, spin: Duration, stop: &AtomicBool) -> Result<()> {
        if !spin.is_zero() {
            let until = mono_ns() + spin.as_nanos() as u64;
            let mut n = 0u32;
            while self.0.load(Ordering::Acquire) != GO {
                n = n.wrapping_add(1);
                if n % 64 == 0 && mono_ns() > until {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let start = mono_ns();
        loop {
            if self
                .0
                .compare_exchange(GO, EMPTY, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(());
            }
            // Checked before parking: the last signal of a phase comes after `stop` is set,
            // and a waiter must not then sleep through its timeout.
            if stop.load(Ordering::Acquire) {
                return Err(stopped());
            }
            if mono_ns() - start > PARTNER_TIMEOUT_NS {
                return Err(Error::Fail(
                    "a partner thread stopped answering (starved, or its CPU was taken away)"
                        .into(),
                ));
            }
            match self
                .0
                .compare_exchange(EMPTY, PARKED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) | Err(PARKED) => futex_wait_for(&self.0, PARKED, false, 100),
                Err(_) => {} // GO arrived meanwhile: taken at the top
            }
        }
    }

    fn signal(&self) {
        if self.0.swap(GO, Ordering::AcqRel) == PARKED {
            futex_wake(&self.0, 1, false);
        }
    }
}

/// The two parties' CPUs: (measurer, partner).
fn cpus_of(p: Placement) -> (Option<usize>, Option<usize>) {
    match p {
        Placement::Unpinned => (None, None),
        Placement::SameCpu(c) => (Some(c), Some(c)),
        Placement::CrossCpu(a, b) => (Some(a), Some(b)),
    }
}

/// Runs `measurer` and `partner` on two fresh threads set up for `setup` (the measurer also
/// gets the setup's timer slack and class); stops the partner when the measurer ends.
fn two_parties<T: Send>(
    setup: &Setup,
    stop: &AtomicBool,
    wake_partner: &(dyn Fn() + Sync),
    measurer: impl FnOnce() -> Result<T> + Send,
    partner: impl FnOnce() -> Result<()> + Send,
) -> Result<T> {
    let (mc, pc) = cpus_of(setup.placement);
    std::thread::scope(|s| {
        let p = spawn_scoped(s, "the woken thread", || {
            prepare(pc, None, false)?;
            partner()
        })?;
        let m = spawn_scoped(s, "the waking thread", || {
            let r = prepare(mc, setup.timer_slack_ns, setup.fifo).and_then(|_| measurer());
            stop.store(true, Ordering::Release);
            r
        });
        let m = match m {
            Ok(m) => m.join(),
            Err(e) => {
                stop.store(true, Ordering::Release);
                wake_partner();
                let _ = p.join();
                return Err(e);
            }
        };
        wake_partner();
        let pr = p
            .join()
            .map_err(|_| Error::Fail("the woken thread panicked".into()))?;
        let mr = m.map_err(|_| Error::Fail("the waking thread panicked".into()))?;
        // A partner that failed on its own (a pinning refused) explains why the measurer then
        // waited in vain: its error is the one to report.
        match pr {
            Err(e) if !is_stopped(&e) => Err(e),
            _ => mr,
        }
    })
}

/// When a wake-up loop ends.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    Elapsed(Duration),
    Wakes(u64),
}

/// The wake-up loop: the measuring thread sleeps 1 ms, stamps the clock and wakes its partner;
/// the partner, woken, stamps the clock and hands both stamps to `sink` (after the warm-up),
/// then wakes the measurer back (untimed). Returns the partner's thread id.
fn wake_loop(
    setup: &Setup,
    until: Until,
    cancel: &Cancel,
    sink: &(dyn Fn(u64, u64) + Sync),
) -> Result<i32> {
    let to_partner = Word::default();
    let to_waker = Word::default();
    let stamp = AtomicU64::new(0);
    let partner_tid = std::sync::atomic::AtomicI32::new(0);
    let stop = AtomicBool::new(false);
    let spin = setup.spin_before_park;
    let partner = || -> Result<()> {
        partner_tid.store(crate::sys::gettid(), Ordering::Release);
        let mut seen = 0u64;
        loop {
            to_partner.wait(spin, &stop)?;
            let woke = mono_ns();
            if stop.load(Ordering::Acquire) {
                // The phase's closing signal, not a wake-up to count.
                return Err(stopped());
            }
            seen += 1;
            if seen > WARMUP_OPS {
                sink(stamp.load(Ordering::Acquire), woke);
            }
            to_waker.signal();
        }
    };
    let measurer = || -> Result<()> {
        let start = mono_ns();
        let mut wakes = 0u64;
        loop {
            match until {
                // At least one counted wake-up, however slow the machine.
                Until::Elapsed(d) if elapsed_since(start) >= d && wakes > WARMUP_OPS => break,
                Until::Wakes(n) if wakes >= n + WARMUP_OPS => break,
                _ => {}
            }
            cancel.check()?;
            sleep_ns(ASLEEP_NS);
            stamp.store(mono_ns(), Ordering::Release);
            to_partner.signal();
            // The reply is not timed: the waker parks for it, as a program waiting would.
            to_waker.wait(Duration::ZERO, &stop)?;
            wakes += 1;
        }
        Ok(())
    };
    two_parties(setup, &stop, &|| to_partner.signal(), measurer, partner)?;
    Ok(partner_tid.load(Ordering::Acquire))
}

/// A thread asleep 1 ms in FUTEX_WAIT, woken by FUTEX_WAKE from the measuring thread: the
/// mean latency from just before the wake to the woken thread's first instruction.
pub fn wake(setup: &Setup, length: Duration, cancel: &Cancel) -> Result<PhaseValues> {
    let total_ns = AtomicU64::new(0);
    let counted = AtomicU64::new(0);
    wake_loop(setup, Until::Elapsed(length), cancel, &|stamp, woke| {
        total_ns.fetch_add(woke.saturating_sub(stamp), Ordering::AcqRel);
        counted.fetch_add(1, Ordering::AcqRel);
    })?;
    mean_us(
        total_ns.load(Ordering::Acquire),
        counted.load(Ordering::Acquire),
    )
}

/// `wakes` wake-ups as in `wake`, each kept as (stamp before the wake, stamp after it), with
/// the woken thread's id: for matching against the kernel's tracepoints.
pub fn wake_stamped(setup: &Setup, wakes: u64, cancel: &Cancel) -> Result<(i32, Vec<(u64, u64)>)> {
    let stamps = std::sync::Mutex::new(Vec::with_capacity(wakes as usize));
    let tid = wake_loop(setup, Until::Wakes(wakes), cancel, &|stamp, woke| {
        if let Ok(mut v) = stamps.lock() {
            v.push((stamp, woke));
        }
    })?;
    Ok((tid, stamps.into_inner().unwrap_or_default()))
}

/// Two threads passing a turn back and forth: round trip / 2, per hand-off.
pub fn handoff(setup: &Setup, length: Duration, cancel: &Cancel) -> Result<PhaseValues> {
    let ping = Word::default();
    let pong = Word::default();
    let stop = AtomicBool::new(false);
    let spin = setup.spin_before_park;
    let partner = || -> Result<()> {
        loop {
            ping.wait(spin, &stop)?;
            pong.signal();
        }
    };
    let measurer = || -> Result<(u64, u64)> {
        for _ in 0..WARMUP_OPS {
            ping.signal();
            pong.wait(spin, &stop)?;
        }
        let start = mono_ns();
        let mut trips = 0u64;
        // Batches of 32 round trips between clock reads and checks.
        while elapsed_since(start) < length {
            cancel.check()?;
            for _ in 0..32 {
                ping.signal();
                pong.wait(spin, &stop)?;
            }
            trips += 32;
        }
        Ok((mono_ns() - start, trips))
    };
    let (ns, trips) = two_parties(setup, &stop, &|| ping.signal(), measurer, partner)?;
    mean_us(ns, trips * 2)
}

fn mean_us(total_ns: u64, ops: u64) -> Result<PhaseValues> {
    if ops == 0 {
        return Err(Error::Fail(
            "the phase ended before a single wake-up could be counted".into(),
        ));
    }
    Ok(PhaseValues {
        values: vec![total_ns as f64 / ops as f64 / 1e3],
        ops,
        huge_backed_pct: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::doctor::figures::Setup;

    fn setup() -> Setup {
        let cpus = crate::measure::placement::allowed_cpus();
        let b = cpus.get(1).copied().unwrap_or(cpus[0]);
        Setup::base(cpus[0], b)
    }

    #[test]
    fn a_wake_phase_counts_wake_ups_and_ends() {
        let v = wake(&setup(), Duration::from_millis(20), &Cancel::never()).unwrap();
        assert_eq!(v.values.len(), 1);
        assert!(v.values[0] > 0.0 && v.ops >= 1, "{v:?}");
    }

    #[test]
    fn handoffs_work_parked_spinning_and_on_one_cpu() {
        let mut s = setup();
        for spin in [Duration::ZERO, Duration::from_micros(50)] {
            s.spin_before_park = spin;
            let v = handoff(&s, Duration::from_millis(10), &Cancel::never()).unwrap();
            assert!(v.values[0] > 0.0 && v.ops >= 64, "{v:?}");
        }
        s.placement = Placement::SameCpu(crate::measure::placement::home_cpu());
        s.spin_before_park = Duration::ZERO;
        assert!(handoff(&s, Duration::from_millis(10), &Cancel::never()).is_ok());
    }

    #[test]
    fn an_interruption_ends_a_phase_with_cancelled() {
        let c = Cancel::never();
        c.trigger(libc::SIGTERM);
        let r = wake(&setup(), Duration::from_secs(5), &c);
        assert!(matches!(r, Err(Error::Cancelled(libc::SIGTERM))), "{r:?}");
    }
}
