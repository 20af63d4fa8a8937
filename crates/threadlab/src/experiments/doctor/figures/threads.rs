//! Setting up the threads of a phase: placement, timer slack, scheduling class, a competitor
//! for the CPU, and the idle settle between phases. Every setting here is scoped to a thread
//! the phase created, so it ends with that thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Competitor;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::placement::pin_current_thread;
use crate::measure::process::mono_ns;
use crate::measure::sched::{set_nice, try_set_fifo};

/// SCHED_FIFO priority of a measuring thread that a setup makes real-time.
pub const FIFO_PRIORITY: i32 = 50;

/// A partner that does not answer within this long has stopped (or been starved): the phase
/// fails instead of hanging.
pub const PARTNER_TIMEOUT_NS: u64 = 2_000_000_000;

/// Applies a thread's share of a setup to the calling thread.
pub fn prepare(cpu: Option<usize>, timer_slack_ns: Option<u64>, fifo: bool) -> Result<()> {
    if let Some(c) = cpu {
        pin_current_thread(c)?;
    }
    if let Some(ns) = timer_slack_ns {
        // PR_SET_TIMERSLACK with 0 would restore the default, so the least slack is 1 ns.
        // SAFETY: PR_SET_TIMERSLACK takes the slack by value and affects this thread only.
        if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) } != 0
        {
            return Err(Error::os("prctl(PR_SET_TIMERSLACK)"));
        }
    }
    if fifo {
        try_set_fifo(FIFO_PRIORITY).map_err(Error::Skip)?;
    }
    Ok(())
}

/// Makes the calling thread SCHED_IDLE (allowed to any thread: it only lowers priority).
fn set_sched_idle() -> Result<()> {
    // SAFETY: sched_param is plain data; pthread_self() is this live thread.
    let rc = unsafe {
        let param: libc::sched_param = std::mem::zeroed();
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_IDLE, &param)
    };
    if rc != 0 {
        return Err(Error::Fail(format!(
            "pthread_setschedparam(SCHED_IDLE): {}",
            std::io::Error::from_raw_os_error(rc)
        )));
    }
    Ok(())
}

/// The body of a CPU-bound competitor pinned to `cpu`: spins until `stop`, after saying it
/// runs through `running`.
pub fn compete(
    cpu: usize,
    kind: Competitor,
    running: &AtomicBool,
    stop: &AtomicBool,
) -> Result<()> {
    let set = pin_current_thread(cpu).and_then(|_| match kind {
        Competitor::Fair { nice } => set_nice(nice),
        Competitor::Idle => set_sched_idle(),
    });
    // Say so even on failure, so that the measuring side never waits for nothing.
    running.store(true, Ordering::Release);
    set?;
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
    Ok(())
}

/// Waits (yielding) until `flag` is set, or fails after the partner timeout.
pub fn await_flag(flag: &AtomicBool, cancel: &Cancel) -> Result<()> {
    let start = mono_ns();
    while !flag.load(Ordering::Acquire) {
        cancel.check()?;
        if mono_ns() - start > PARTNER_TIMEOUT_NS {
            return Err(Error::Fail("a helper thread never started".into()));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// Sleeps `ns` nanoseconds (relative; the calling thread's timer slack applies).
pub fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid relative interval; an interrupted sleep just returns early.
    unsafe {
        libc::nanosleep(&ts, std::ptr::null_mut());
    }
}

/// Lets the idle governor of every CPU in `cpus` return to its steady state: each CPU sleeps
/// in 12 idle periods of 1 ms.
///
/// Why: haltpoll's governor keeps polling an idle CPU as long as wake-ups keep arriving within
/// its poll window, and once any CPU-latency limit has made it poll, the window is 250 µs even
/// with guest_halt_poll_ns = 0 (cpuidle_poll_time seeds it); only idle periods longer than the
/// window shrink it, by half each. A phase right after a knob's "on" phase would otherwise
/// inherit the polling, and an "off" phase would measure "on". The host's own halt polling
/// adapts per vCPU in the same way.
pub fn settle_idle(cpus: &[usize], cancel: &Cancel) -> Result<()> {
    const PERIODS: u32 = 12;
    std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                crate::measure::spawn::spawn_scoped(
                    s,
                    "an idle-settling thread",
                    move || -> Result<()> {
                        pin_current_thread(cpu)?;
                        for _ in 0..PERIODS {
                            if cancel.is_cancelled() {
                                break;
                            }
                            sleep_ns(1_000_000);
                        }
                        Ok(())
                    },
                )
            })
            .collect::<Result<Vec<_>>>()?;
        for h in handles {
            h.join()
                .map_err(|_| Error::Fail("an idle-settling thread panicked".into()))??;
        }
        cancel.check()
    })
}

/// How long an absolute-deadline loop has been running, for phase lengths.
pub fn elapsed_since(start_ns: u64) -> Duration {
    Duration::from_nanos(mono_ns().saturating_sub(start_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_and_pinning_stay_on_the_thread_that_set_them() {
        // SAFETY: PR_GET_TIMERSLACK only returns the calling thread's slack.
        let before = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        let cpu = crate::measure::placement::home_cpu();
        std::thread::spawn(move || {
            prepare(Some(cpu), Some(0), false).unwrap();
            // SAFETY: PR_GET_TIMERSLACK only returns this thread's slack.
            let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            assert_eq!(slack, 1, "0 must become the least slack, not the default");
            assert_eq!(crate::measure::placement::allowed_cpus(), vec![cpu]);
        })
        .join()
        .unwrap();
        // SAFETY: as above, on this (untouched) thread.
        let mine = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        assert_eq!(mine, before);
    }

    #[test]
    fn a_competitor_says_it_runs_and_stops() {
        let running = AtomicBool::new(false);
        let stop = AtomicBool::new(false);
        let cpu = crate::measure::placement::home_cpu();
        std::thread::scope(|s| {
            let h = s.spawn(|| compete(cpu, Competitor::Idle, &running, &stop));
            await_flag(&running, &Cancel::never()).unwrap();
            stop.store(true, Ordering::Release);
            h.join().unwrap().unwrap();
        });
    }
}
