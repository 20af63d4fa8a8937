//! Timer expiry lateness, cyclictest's method: a thread sleeps to absolute deadlines 1 ms
//! apart (clock_nanosleep, TIMER_ABSTIME) and records how late each wake-up is, alone on its
//! CPU or beside a CPU-bound competitor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::threads::{await_flag, compete, elapsed_since, prepare};
use super::{PhaseValues, Setup};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::{mono_ns, sleep_until_ns};
use crate::measure::spawn::spawn_scoped;

const PERIOD_NS: u64 = 1_000_000;
/// Deadlines at the start of a phase that are not counted.
const WARMUP: u64 = 2;

/// Mean lateness (µs) of 1 ms periodic absolute sleeps on `setup.cpu`, with the setup's timer
/// slack and class; with `contended`, a CPU-bound thread of `setup.competitor`'s kind runs on
/// the same CPU throughout.
pub fn lateness(
    setup: &Setup,
    contended: bool,
    length: Duration,
    cancel: &Cancel,
) -> Result<PhaseValues> {
    let running = AtomicBool::new(!contended);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let competitor = if contended {
            Some(spawn_scoped(s, "a CPU-bound competitor", || {
                compete(setup.cpu, setup.competitor, &running, &stop)
            })?)
        } else {
            None
        };
        let measured = spawn_scoped(s, "the sleeping thread", || {
            await_flag(&running, cancel)?;
            prepare(Some(setup.cpu), setup.timer_slack_ns, setup.fifo)?;
            sleep_to_deadlines(length, cancel)
        })
        .and_then(|h| {
            h.join()
                .map_err(|_| Error::Fail("the sleeping thread panicked".into()))?
        });
        stop.store(true, Ordering::Release);
        if let Some(c) = competitor {
            c.join()
                .map_err(|_| Error::Fail("the competitor panicked".into()))??;
        }
        measured
    })
}

fn sleep_to_deadlines(length: Duration, cancel: &Cancel) -> Result<PhaseValues> {
    let start = mono_ns();
    let mut next = start + PERIOD_NS;
    let (mut total_ns, mut counted, mut seen) = (0u64, 0u64, 0u64);
    // At least one counted deadline, however short the phase.
    while elapsed_since(start) < length || seen <= WARMUP {
        cancel.check()?;
        sleep_until_ns(next);
        let now = mono_ns();
        seen += 1;
        if seen > WARMUP {
            total_ns += now.saturating_sub(next);
            counted += 1;
        }
        next += PERIOD_NS;
        // A wake-up later than a whole period (the thread was starved) skips the deadlines it
        // missed rather than firing them back to back.
        while next <= now {
            next += PERIOD_NS;
        }
    }
    if counted == 0 {
        return Err(Error::Fail(
            "the phase was too short for a single deadline".into(),
        ));
    }
    Ok(PhaseValues {
        values: vec![total_ns as f64 / counted as f64 / 1e3],
        ops: counted,
        huge_backed_pct: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::doctor::figures::{Competitor, Setup};

    #[test]
    fn lateness_alone_and_beside_a_competitor() {
        let cpu = crate::measure::placement::home_cpu();
        let mut s = Setup::base(cpu, cpu);
        let alone = lateness(&s, false, Duration::from_millis(20), &Cancel::never()).unwrap();
        assert!(alone.values[0] >= 0.0 && alone.ops >= 5, "{alone:?}");
        s.competitor = Competitor::Fair { nice: 19 };
        let busy = lateness(&s, true, Duration::from_millis(20), &Cancel::never()).unwrap();
        assert!(busy.ops >= 1, "{busy:?}");
    }
}
