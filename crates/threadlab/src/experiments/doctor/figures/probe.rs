//! The BeOS latency probe beside a CPU-bound competitor: a thread reads the clock in a tight
//! loop on one CPU while another thread spins on the same CPU, and every gap between two
//! readings longer than the threshold is time the probe did not get.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::threads::{await_flag, compete, prepare};
use super::{PhaseValues, Setup};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;
use crate::measure::spawn::spawn_scoped;

/// Share of the phase lost in gaps over the threshold (%) and the longest gap (µs).
pub fn gaps(setup: &Setup, length: Duration, cancel: &Cancel) -> Result<PhaseValues> {
    let threshold_ns = crate::measure::settings::latency_threshold_us()? * 1_000;
    let running = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let competitor = spawn_scoped(s, "a CPU-bound competitor", || {
            compete(setup.cpu, setup.competitor, &running, &stop)
        })?;
        let measured = spawn_scoped(s, "the probe thread", || {
            await_flag(&running, cancel)?;
            prepare(Some(setup.cpu), None, setup.fifo)?;
            Ok(read_clock_for(length, threshold_ns, cancel))
        })
        .and_then(|h| {
            h.join()
                .map_err(|_| Error::Fail("the probe thread panicked".into()))?
        });
        stop.store(true, Ordering::Release);
        competitor
            .join()
            .map_err(|_| Error::Fail("the competitor panicked".into()))??;
        let (lost_ns, longest_ns, elapsed_ns, reads) = measured?;
        if cancel.is_cancelled() {
            cancel.check()?;
        }
        Ok(PhaseValues {
            values: vec![
                lost_ns as f64 / elapsed_ns.max(1) as f64 * 100.0,
                longest_ns as f64 / 1e3,
            ],
            ops: reads,
            huge_backed_pct: None,
        })
    })
}

/// Reads the clock until `length` has passed (or an interruption): (ns lost in gaps over the
/// threshold, longest gap ns, elapsed ns, reads).
fn read_clock_for(length: Duration, threshold_ns: u64, cancel: &Cancel) -> (u64, u64, u64, u64) {
    let start = mono_ns();
    let end = start + length.as_nanos() as u64;
    let (mut lost, mut longest, mut reads) = (0u64, 0u64, 0u64);
    let mut last = start;
    loop {
        // Batches of 4096 so that the end and the interruption cost one check per batch; a
        // real-time probe must see the flag too, since nothing else runs on its CPU.
        for _ in 0..4096 {
            let now = mono_ns();
            let gap = now - last;
            last = now;
            if gap > threshold_ns {
                lost += gap;
            }
            longest = longest.max(gap);
        }
        reads += 4096;
        if last >= end || cancel.is_cancelled() {
            break;
        }
    }
    (lost, longest, last - start, reads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::doctor::figures::{Competitor, Setup};

    #[test]
    fn the_probe_reports_a_share_and_a_longest_gap() {
        let cpu = crate::measure::placement::home_cpu();
        let mut s = Setup::base(cpu, cpu);
        s.competitor = Competitor::Idle;
        let v = gaps(&s, Duration::from_millis(20), &Cancel::never()).unwrap();
        assert_eq!(v.values.len(), 2);
        assert!((0.0..=100.0).contains(&v.values[0]), "{v:?}");
        assert!(v.values[1] > 0.0 && v.ops > 0, "{v:?}");
    }
}
