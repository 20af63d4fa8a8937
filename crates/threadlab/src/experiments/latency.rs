//! `latency`: the BeOS scheduling-latency probe (Queru, Be Newsletter 4-45, 1999). A thread reads
//! the clock in a tight loop and records every gap between two readings: how many exceed 256 µs
//! (set THREADLAB_LATENCY_THRESHOLD_US to change it) and the longest, with percentiles. Alone,
//! beside an "annoying" lower-priority spinner on the same CPU, and beside the spinner and a
//! "rescheduler" sleeping 125 µs in a loop at the highest priority permitted. The probe runs at
//! normal priority and, where permitted, at real-time priority (SCHED_FIFO).
//!
//! Also the wake-up view, cyclictest's method: sleep to an absolute deadline
//! (clock_nanosleep TIMER_ABSTIME, 1 ms interval) and record how late the thread wakes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Outcome};
use crate::measure::placement::{home_cpu, pin_current_thread, Placement};
use crate::measure::process::{mono_ns, sleep_until_ns};
use crate::measure::sched::{fifo_permitted, max_fifo_priority, pin_and_nice, try_set_fifo};
use crate::measure::spawn::{spawn_scoped, start_called_off, StartGate};
use crate::measure::stats::Summary;
use crate::measure::units::{Direction, Unit};
use crate::results::{Metric, Table};
use crate::seeds;

pub struct Latency;

pub use crate::measure::settings::DEFAULT_LATENCY_THRESHOLD_US as DEFAULT_THRESHOLD_US;
/// The study's annoying program ran 10 priority units below the probe; here nice 10 below 0.
pub const SPINNER_NICE: i32 = 10;
/// The rescheduler's sleep (the study's snooze(125)).
pub const RESCHEDULER_SLEEP: Duration = Duration::from_micros(125);
/// SCHED_FIFO priority of the real-time probe (below the rescheduler's).
pub const RT_PROBE_PRIORITY: i32 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    Alone,
    Annoying,
    AnnoyingRescheduler,
}

impl Condition {
    pub const ALL: [Condition; 3] = [
        Condition::Alone,
        Condition::Annoying,
        Condition::AnnoyingRescheduler,
    ];
    pub fn id(self) -> &'static str {
        match self {
            Condition::Alone => "alone",
            Condition::Annoying => "annoying",
            Condition::AnnoyingRescheduler => "annoying_rescheduler",
        }
    }
    fn spinner(self) -> bool {
        self != Condition::Alone
    }
    fn rescheduler(self) -> bool {
        self == Condition::AnnoyingRescheduler
    }
}

/// What one probe run saw.
pub struct ProbeResult {
    pub samples: u64,
    pub gaps_over: u64,
    pub longest_ns: u64,
    pub hist: Histogram<u64>,
}

impl ProbeResult {
    pub fn percentile_ns(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }
}

/// The threshold in µs (environment override, else 256).
pub fn threshold_us() -> Result<u64> {
    crate::measure::settings::latency_threshold_us()
}

/// Reads the clock `samples` times (or until `cap` passes) and records every gap.
pub fn probe(
    samples: u64,
    threshold_ns: u64,
    cap: Duration,
    stop: &dyn Fn() -> bool,
) -> ProbeResult {
    let mut hist =
        Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 2).expect("valid histogram bounds");
    let deadline = mono_ns() + cap.as_nanos() as u64;
    let (mut gaps_over, mut longest) = (0u64, 0u64);
    let mut last = mono_ns();
    let mut taken = 0u64;
    while taken < samples {
        // Batches of 4096 so that the time cap costs one comparison per batch.
        for _ in 0..4096 {
            let now = mono_ns();
            let gap = now - last;
            last = now;
            hist.saturating_record(gap.max(1));
            if gap > threshold_ns {
                gaps_over += 1;
            }
            longest = longest.max(gap);
        }
        taken += 4096;
        if last >= deadline || stop() {
            break;
        }
    }
    ProbeResult {
        samples: taken,
        gaps_over,
        longest_ns: longest,
        hist,
    }
}

/// Sleeps to absolute deadlines every `interval`, `loops` times; returns lateness in ns.
pub fn wakeup_lateness(loops: usize, interval: Duration, stop: &dyn Fn() -> bool) -> Vec<u64> {
    let mut late = Vec::with_capacity(loops);
    let mut next = mono_ns() + interval.as_nanos() as u64;
    for _ in 0..loops {
        if stop() {
            break;
        }
        sleep_until_ns(next);
        late.push(mono_ns().saturating_sub(next));
        next += interval.as_nanos() as u64;
    }
    late
}

/// Priority of the rescheduler: SCHED_FIFO max when permitted, else the lowest nice we may set.
fn rescheduler_priority(rt: bool) -> String {
    if rt {
        format!("SCHED_FIFO {}", max_fifo_priority())
    } else {
        "nice 0 (SCHED_OTHER; real time not permitted)".into()
    }
}

/// Runs `body` on a probe thread pinned to `cpu` (SCHED_FIFO when `rt_probe`) with the
/// condition's companions on the same CPU; every thread is bounded by `body` finishing.
fn with_condition<T: Send>(
    cpu: usize,
    cond: Condition,
    rt_probe: bool,
    rt_permitted: bool,
    cancel: &crate::cancel::Cancel,
    body: impl FnOnce() -> T + Send,
) -> Result<T> {
    let stop = AtomicBool::new(false);
    let companions = cond.spinner() as usize + cond.rescheduler() as usize;
    let ready = StartGate::new(companions + 1);
    std::thread::scope(|s| {
        let mut helpers = Vec::new();
        // A refusal to start a thread calls the start off, so the ones waiting are released.
        let refused = |e: Error| {
            ready.abort();
            e
        };
        if cond.spinner() {
            helpers.push(
                spawn_scoped(s, "the spinning thread", || -> Result<()> {
                    let set = pin_and_nice(cpu, SPINNER_NICE);
                    if !ready.wait_unless(|| cancel.is_cancelled()) {
                        return Err(start_called_off());
                    }
                    set?;
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                    Ok(())
                })
                .map_err(refused)?,
            );
        }
        if cond.rescheduler() {
            helpers.push(
                spawn_scoped(s, "the rescheduler thread", || -> Result<()> {
                    let pinned = pin_current_thread(cpu);
                    // Real-time only once every party has arrived: a real-time thread waiting
                    // at the gate on the parties' one CPU would keep the fair-class parties
                    // from ever arriving where real-time throttling does not step in.
                    if !ready.wait_unless(|| cancel.is_cancelled()) {
                        return Err(start_called_off());
                    }
                    pinned?;
                    if rt_permitted {
                        try_set_fifo(max_fifo_priority()).map_err(Error::Fail)?;
                    }
                    // Sleeps almost all the time, so real-time priority here cannot starve anyone.
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(RESCHEDULER_SLEEP);
                    }
                    Ok(())
                })
                .map_err(refused)?,
            );
        }
        let probe = spawn_scoped(s, "the probe thread", || -> Result<T> {
            let pinned = pin_current_thread(cpu);
            // As the rescheduler: real-time only after the gate.
            if !ready.wait_unless(|| cancel.is_cancelled()) {
                return Err(start_called_off());
            }
            let set = pinned.and_then(|_| {
                if rt_probe {
                    try_set_fifo(RT_PROBE_PRIORITY).map_err(Error::Fail)
                } else {
                    Ok(())
                }
            });
            let r = set.map(|_| body());
            stop.store(true, Ordering::Relaxed);
            r
        })
        .map_err(refused)?;
        let r = probe
            .join()
            .unwrap_or_else(|_| Err(Error::Fail("probe panicked".into())));
        stop.store(true, Ordering::Relaxed);
        let companions: Result<()> = helpers.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(Error::Fail("companion panicked".into())))
        });
        // An interruption ends the gate and the loops early: say so rather than what that
        // left behind (a start called off, a short probe).
        cancel.check()?;
        companions?;
        r
    })
}

/// What every probe of a run shares: the CPU, how long each probe runs, the threshold, and
/// whether real time is permitted here (with the reason when not).
struct Setup {
    cpu: usize,
    placement: String,
    samples: u64,
    cap: Duration,
    thr_us: u64,
    rt: std::result::Result<(), String>,
}

impl Setup {
    fn rt_ok(&self) -> bool {
        self.rt.is_ok()
    }

    /// The probe priorities this run measures: normal, and real time where permitted.
    fn probe_kinds(&self) -> &'static [bool] {
        if self.rt_ok() {
            &[false, true]
        } else {
            &[false]
        }
    }
}

/// One clock-loop probe's result, as the conclusion reads it: (id prefix, gaps over, longest us).
type GapRow = (String, u64, f64);

const INFO: Info = Info {
    name: "latency",
    study: &seeds::BEOS_1999,
    measures: "gaps in a clock-reading loop over 256 us and the longest, alone / beside a lower-priority spinner / plus a 125 us rescheduler; normal and real-time; cyclictest-style wake-up lateness",
    rough_secs: [0.4, 4.7, 20.0],
};

impl Experiment for Latency {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let cpu = home_cpu();
        let samples: u64 = ctx.mode.pick(200_000, 12_000_000, 256_000_000);
        let cap = ctx.mode.pick(
            Duration::from_millis(50),
            Duration::from_millis(600),
            Duration::from_secs(2),
        );
        let setup = Setup {
            cpu,
            placement: Placement::SameCpu(cpu).to_string(),
            samples,
            cap,
            thr_us: threshold_us()?,
            rt: fifo_permitted(),
        };
        let mut table = gap_table(&setup);
        let mut rows: Vec<GapRow> = Vec::new();
        if let Err(reason) = &setup.rt {
            for c in Condition::ALL {
                for q in ["gaps_over_threshold", "longest_gap"] {
                    out.skip(&format!("latency.rt.{}.{q}", c.id()), reason.clone());
                }
            }
        }
        for &rt_probe in setup.probe_kinds() {
            for cond in Condition::ALL {
                rows.push(gap_probe(ctx, &setup, rt_probe, cond, &mut table, out)?);
            }
        }
        let wake_table = wakeup_probes(ctx, &setup, out)?;
        out.tables.push(table);
        out.tables.push(wake_table);
        out.conclusion = Some(conclusion(&setup, &rows));
        Ok(())
    }
}

/// The clock-loop probes' table, today beside BeOS (rows added per probe).
fn gap_table(s: &Setup) -> Table {
    let thr_us = s.thr_us;
    let mut table = Table::new(
        "latency.gaps",
        &format!("Clock-loop probe: gaps over {thr_us} us, today beside BeOS"),
        &[
            "condition",
            "samples",
            &format!("gaps > {thr_us} us"),
            "per 256M samples",
            "longest (us)",
            "p99.99 (us)",
            "BeOS gaps",
            "BeOS longest (us)",
        ],
    );
    table.note = format!(
        "BeOS: bare-bones system, 256 million samples ({}); today: {} samples at most, \
         {:.1} s cap per condition",
        seeds::BEOS_1999.citation,
        s.samples,
        s.cap.as_secs_f64()
    );
    table
}

/// Who ran beside the probe, at which priorities, for the probe's notes.
fn gap_who(s: &Setup, rt_probe: bool, cond: Condition) -> String {
    format!(
        "probe {} pinned to CPU {}{}{}",
        if rt_probe {
            format!("SCHED_FIFO {RT_PROBE_PRIORITY}")
        } else {
            "nice 0".to_string()
        },
        s.cpu,
        if cond.spinner() {
            format!("; spinner nice {SPINNER_NICE} on the same CPU")
        } else {
            String::new()
        },
        if cond.rescheduler() {
            format!(
                "; rescheduler sleeping 125 us at {}",
                rescheduler_priority(s.rt_ok())
            )
        } else {
            String::new()
        }
    )
}

/// The note of one probe's metrics: what ran, the gap percentiles, and the RT reserve caveat.
fn gap_note(s: &Setup, rt_probe: bool, cond: Condition, r: &ProbeResult) -> String {
    let who = gap_who(s, rt_probe, cond);
    let pct = format!(
        "gap percentiles p50 {} ns, p99 {} ns, p99.9 {} ns, p99.99 {} ns",
        r.percentile_ns(0.5),
        r.percentile_ns(0.99),
        r.percentile_ns(0.999),
        r.percentile_ns(0.9999)
    );
    let rt_note = if rt_probe && cond.spinner() {
        " A real-time probe still loses the CPU for ~50 ms per second when a fair-class \
         thread is runnable: RT throttling (sched_rt_runtime_us 950000 of 1000000) and, \
         since Linux 6.12, the fair server (dl_server) reserve that lets normal threads run."
    } else {
        ""
    };
    format!(
        "{} clock reads (CLOCK_MONOTONIC) in a tight loop, {who}; {pct}; the study took \
         256 million samples, so compare counts per sample.{rt_note}",
        r.samples
    )
}

/// One clock-loop probe under one condition: its two metrics and its table row.
fn gap_probe(
    ctx: &Ctx,
    s: &Setup,
    rt_probe: bool,
    cond: Condition,
    table: &mut Table,
    out: &mut Outcome,
) -> Result<GapRow> {
    let prefix = if rt_probe {
        format!("latency.rt.{}", cond.id())
    } else {
        format!("latency.{}", cond.id())
    };
    ctx.step(&prefix)?;
    let r = with_condition(s.cpu, cond, rt_probe, s.rt_ok(), ctx.cancel, || {
        probe(s.samples, s.thr_us * 1000, s.cap, &|| {
            ctx.cancel.is_cancelled()
        })
    })?;
    let note = gap_note(s, rt_probe, cond, &r);
    // The BeOS figures compare with the normal-priority probe only (seeds.rs keys them by the
    // latency.<condition> ids).
    let gaps = out
        .add(
            Metric::single(
                &format!("{prefix}.gaps_over_threshold"),
                Unit::Count,
                r.gaps_over as f64,
                &s.placement,
                format!("gaps over {} us; {note}", s.thr_us),
            )
            .with_direction(Direction::LowerIsBetter),
        )
        .historical
        .clone();
    let longest = out
        .add(Metric::single(
            &format!("{prefix}.longest_gap"),
            Unit::Us,
            r.longest_ns as f64 / 1000.0,
            &s.placement,
            note.clone(),
        ))
        .historical
        .clone();
    let beos = |h: Option<crate::results::Historical>| {
        h.map_or("-".to_string(), |h| format!("{:.0}", h.value))
    };
    let per_256m = r.gaps_over as f64 * 256e6 / r.samples.max(1) as f64;
    table.row(vec![
        prefix.trim_start_matches("latency.").to_string(),
        r.samples.to_string(),
        r.gaps_over.to_string(),
        format!("{per_256m:.0}"),
        format!("{:.0}", r.longest_ns as f64 / 1000.0),
        format!("{:.1}", r.percentile_ns(0.9999) as f64 / 1000.0),
        beos(gaps),
        beos(longest),
    ]);
    Ok((prefix, r.gaps_over, r.longest_ns as f64 / 1000.0))
}

/// The wake-up view (cyclictest's method): alone and beside the spinner, at each priority.
fn wakeup_probes(ctx: &Ctx, s: &Setup, out: &mut Outcome) -> Result<Table> {
    let loops = ctx.mode.pick(50, 600, 2_000);
    let interval = Duration::from_millis(1);
    let mut wake_table = Table::new(
        "latency.wakeup",
        "Wake-up lateness of 1 ms absolute sleeps (cyclictest's method)",
        &["probe", "min (us)", "median (us)", "p99 (us)", "max (us)"],
    );
    let wake_kinds: Vec<(bool, Condition)> = s
        .probe_kinds()
        .iter()
        .flat_map(|&r| [(r, Condition::Alone), (r, Condition::Annoying)])
        .collect();
    if !s.rt_ok() {
        for c in ["alone", "annoying"] {
            out.skip(
                &format!("latency.wakeup.rt.{c}.lateness"),
                s.rt.clone().err().unwrap_or_default(),
            );
        }
    }
    for (rt_probe, cond) in wake_kinds {
        let id = if rt_probe {
            format!("latency.wakeup.rt.{}.lateness", cond.id())
        } else {
            format!("latency.wakeup.{}.lateness", cond.id())
        };
        ctx.step(&id)?;
        let late = with_condition(s.cpu, cond, rt_probe, s.rt_ok(), ctx.cancel, || {
            wakeup_lateness(loops, interval, &|| ctx.cancel.is_cancelled())
        })?;
        let us: Vec<f64> = late.iter().map(|&n| n as f64 / 1000.0).collect();
        let sum = Summary::from_samples(&us, 1)
            .ok_or_else(|| Error::Fail("no wake-up samples".into()))?;
        let mut sorted = us.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let p99 = crate::measure::stats::quantile_sorted(&sorted, 0.99);
        wake_table.row(vec![
            id.trim_start_matches("latency.wakeup.")
                .trim_end_matches(".lateness")
                .to_string(),
            format!("{:.1}", sum.min),
            format!("{:.1}", sum.median),
            format!("{p99:.1}"),
            format!("{:.1}", sum.max),
        ]);
        // One thread's wake-ups in one stretch of time are one trial: compare reads one value,
        // not thousands that share its regime.
        out.add(Metric::from_summary(
            &id,
            Unit::Us,
            &sum,
            &s.placement,
            format!(
                "{loops} sleeps to absolute 1 ms deadlines (clock_nanosleep TIMER_ABSTIME, as \
                 cyclictest -n -i 1000), lateness = wake time - deadline; p99 {p99:.1} us; thread \
                 {}{}",
                if rt_probe { "SCHED_FIFO 50" } else { "nice 0" },
                if cond.spinner() {
                    format!(", spinner nice {SPINNER_NICE} on the same CPU")
                } else {
                    String::new()
                }
            ),
        ))
        .trial_of = vec![0; us.len()];
    }
    Ok(wake_table)
}

/// What the spinner and the rescheduler did to the gaps, and what to use for a latency-critical
/// thread.
fn conclusion(s: &Setup, rows: &[GapRow]) -> String {
    let thr_us = s.thr_us;
    let find = |id: &str| rows.iter().find(|r| r.0 == id).map(|r| (r.1, r.2));
    let alone = find("latency.alone").unwrap_or_default();
    let annoy = find("latency.annoying").unwrap_or_default();
    let resch = find("latency.annoying_rescheduler").unwrap_or_default();
    let rt_line = match &s.rt {
        Ok(()) => {
            let worst = rows
                .iter()
                .filter(|r| r.0.starts_with("latency.rt."))
                .map(|r| r.2)
                .fold(0.0, f64::max);
            format!(
                " At real-time priority the longest gap was {worst:.0} us{}.",
                if worst > 20_000.0 {
                    " — a gap of tens of ms is RT throttling / the fair server (dl_server, 50 ms \
                     per second) handing the normal-priority threads their reserve, by design"
                } else {
                    ""
                }
            )
        }
        Err(reason) => format!(" Real-time probes skipped: {reason}."),
    };
    let spinner_effect = if annoy.0 > alone.0 {
        format!("raised that to {} (longest {:.0} us)", annoy.0, annoy.1)
    } else {
        format!(
            "left it at {} (longest {:.0} us): other jobs on this machine already cause the gaps",
            annoy.0, annoy.1
        )
    };
    let resched_effect = if resch.1 < annoy.1 / 2.0 {
        format!(
            "cut the longest gap to {:.0} us ({} gaps over the threshold), as in the study \
             (3219 -> 459 us): its wake-ups make the scheduler switch sooner",
            resch.1, resch.0
        )
    } else {
        format!(
            "gave {} gaps, longest {:.0} us: on this kernel frequent wake-ups did not shorten \
             the long gaps",
            resch.0, resch.1
        )
    };
    format!(
        "Alone the probe saw {} gaps over {thr_us} us (longest {:.0} us); a \
         nice-{SPINNER_NICE} spinner on its CPU {spinner_effect}; a 125 us rescheduler \
         {resched_effect}.{rt_line} For a latency-critical thread use SCHED_FIFO (and keep it \
         mostly asleep) or keep CPU hogs off its CPU; nice levels alone do not bound gaps. \
         Compare the wake-up rows with cyclictest -m -n -i 1000 on this machine.",
        alone.0, alone.1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_counts_are_consistent() {
        let r = probe(100_000, 256_000, Duration::from_millis(200), &|| false);
        assert!(r.samples >= 4096);
        assert_eq!(r.hist.len(), r.samples);
        assert!(r.gaps_over <= r.samples);
        assert!(r.hist.max() >= r.longest_ns.min(r.hist.max()));
        // Every gap over the threshold is at most the longest.
        if r.gaps_over > 0 {
            assert!(r.longest_ns > 256_000);
        }
    }

    #[test]
    fn wakeups_are_never_early() {
        let late = wakeup_lateness(5, Duration::from_micros(500), &|| false);
        assert_eq!(late.len(), 5);
    }

    #[test]
    fn condition_ids() {
        let ids: Vec<_> = Condition::ALL.iter().map(|c| c.id()).collect();
        assert_eq!(ids, ["alone", "annoying", "annoying_rescheduler"]);
        for id in ids {
            assert!(seeds::historical(&format!("latency.{id}.longest_gap")).is_some());
        }
    }

    #[test]
    fn default_threshold_is_the_studys() {
        assert_eq!(DEFAULT_THRESHOLD_US, 256);
    }
}
