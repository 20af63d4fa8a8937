//! `switch`: the cost of one context switch between two kernel threads or two processes
//! (PThreads 1999, section 4.2), by sched_yield, by futex hand-off and through pipes.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Mode, Outcome};
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::process::{fork_child, mono_ns, wait_until, SharedMap};
use crate::measure::sampler::Sampler;
use crate::measure::stats::Summary;
use crate::results::Metric;
use crate::seeds;
use crate::sys::{futex_wait_for, futex_wake, sched_yield};

pub struct Switch;

/// How a party waits for its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Calls sched_yield until the partner has passed the turn.
    Yield,
    /// Sleeps in FUTEX_WAIT on the turn word; the partner's FUTEX_WAKE hands over.
    Futex { shared: bool },
}

/// A partner that stops answering for this long is taken to be gone.
const PARTNER_TIMEOUT_NS: u64 = 5_000_000_000;

/// Plays one side (0 or 1) of a hand-off game on `turn`: side s acts when `turn % 2 == s` by
/// incrementing it, until `turn` reaches `end`. Returns how many times this side waited
/// (sched_yield calls or FUTEX_WAIT calls), or None if the partner stopped answering.
///
/// Async-signal-safe (atomics and raw system calls only), so a forked child may run it.
pub fn play(side: u32, turn: &AtomicU32, end: u32, wait: Wait) -> Option<u64> {
    let mut waits = 0u64;
    loop {
        let mut t = turn.load(Ordering::Acquire);
        let mut since = 0u64;
        while t % 2 != side {
            if t >= end {
                return Some(waits);
            }
            match wait {
                Wait::Yield => sched_yield(),
                Wait::Futex { shared } => futex_wait_for(turn, t, shared, 100),
            }
            waits += 1;
            let before = t;
            t = turn.load(Ordering::Acquire);
            // The partner-timeout check reads the clock, so keep it off the measured path: every
            // 4096 yields, or after a futex wait that returned with the turn unchanged (its
            // 100 ms timeout or a spurious wake-up), never on an ordinary hand-off.
            let check = match wait {
                Wait::Yield => waits % 4096 == 0,
                Wait::Futex { .. } => t == before,
            };
            if check {
                if since == 0 {
                    since = mono_ns();
                } else if mono_ns() - since > PARTNER_TIMEOUT_NS {
                    return None;
                }
            }
        }
        if t >= end {
            return Some(waits);
        }
        turn.store(t + 1, Ordering::Release);
        if let Wait::Futex { shared } = wait {
            futex_wake(turn, 1, shared);
        }
    }
}

/// Who the partner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Party {
    Thread,
    Process,
}

/// Time for `n` hand-offs between this thread (on `cpus.0`) and a partner (on `cpus.1`), and
/// the total number of waits both sides made.
fn handoff_batch(
    party: Party,
    wait: Wait,
    cpus: (usize, usize),
    n: u64,
) -> Result<(Duration, u64)> {
    let end = u32::try_from(n).map_err(|_| Error::Fail("batch too large".into()))?;
    match party {
        Party::Thread => {
            let turn = AtomicU32::new(0);
            let ready = AtomicU32::new(0);
            let partner_waits = AtomicU64::new(0);
            std::thread::scope(|s| {
                let partner = s.spawn(|| -> Result<()> {
                    pin_current_thread(cpus.1)?;
                    ready.store(1, Ordering::Release);
                    let w = play(1, &turn, end, wait)
                        .ok_or_else(|| Error::Fail("the measuring thread stopped".into()))?;
                    partner_waits.store(w, Ordering::Release);
                    Ok(())
                });
                let ran = (|| -> Result<(Duration, u64)> {
                    wait_until(|| ready.load(Ordering::Acquire) == 1, PARTNER_TIMEOUT_NS)?;
                    let t = Instant::now();
                    let w = play(0, &turn, end, wait)
                        .ok_or_else(|| Error::Fail("the partner thread stopped".into()))?;
                    Ok((t.elapsed(), w))
                })();
                if ran.is_err() {
                    // Let the partner finish its game so it can be joined.
                    turn.store(end, Ordering::Release);
                    futex_wake(&turn, 1, false);
                }
                partner
                    .join()
                    .map_err(|_| Error::Fail("the partner thread panicked".into()))??;
                let (took, w) = ran?;
                Ok((took, w + partner_waits.load(Ordering::Acquire)))
            })
        }
        Party::Process => {
            let map = SharedMap::new(4096)?;
            let (turn, ready, partner_waits) = (map.word32(0), map.word32(1), map.word(2));
            // SAFETY: the child runs `play` (atomics, sched_yield, futex) and atomic stores only.
            let child = unsafe {
                fork_child(Some(cpus.1), || {
                    ready.store(1, Ordering::Release);
                    if let Some(w) = play(1, turn, end, wait) {
                        partner_waits.store(w, Ordering::Release);
                    }
                })
            }?;
            wait_until(|| ready.load(Ordering::Acquire) == 1, PARTNER_TIMEOUT_NS)?;
            let t = Instant::now();
            let w = play(0, turn, end, wait)
                .ok_or_else(|| Error::Fail("the partner process stopped".into()))?;
            let took = t.elapsed();
            child.wait()?;
            Ok((took, w + partner_waits.load(Ordering::Acquire)))
        }
    }
}

/// Samples the per-hand-off time; also returns the mean number of waits per hand-off.
fn measure_handoff(
    sampler: &Sampler,
    party: Party,
    wait: Wait,
    cpus: (usize, usize),
) -> Result<(Summary, f64)> {
    let _pin = PinGuard::pin(cpus.0)?;
    let mut waits = 0u64;
    let mut handoffs = 0u64;
    let s = sampler.per_op_ns(|n| {
        // A game needs at least two hand-offs; scale back to the n the sampler divides by.
        let run = n.max(2);
        let (took, w) = handoff_batch(party, wait, cpus, run)?;
        waits += w;
        handoffs += run;
        Ok(took.mul_f64(n as f64 / run as f64))
    })?;
    Ok((s, waits as f64 / handoffs.max(1) as f64))
}

/// Cost of a 1-byte write + read on one pipe within one process: lmbench's lat_ctx overhead.
fn pipe_overhead(sampler: &Sampler) -> Result<Summary> {
    let p = Pipe::new()?;
    sampler.per_op_ns(|n| {
        let t = Instant::now();
        for _ in 0..n {
            p.put()?;
            p.get()?;
        }
        Ok(t.elapsed())
    })
}

struct Pipe {
    rd: libc::c_int,
    wr: libc::c_int,
}

impl Pipe {
    fn new() -> Result<Pipe> {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::os("pipe"));
        }
        Ok(Pipe {
            rd: fds[0],
            wr: fds[1],
        })
    }
    fn put(&self) -> Result<()> {
        let b = 1u8;
        // SAFETY: writes one byte from a valid buffer.
        if unsafe { libc::write(self.wr, &b as *const u8 as *const _, 1) } != 1 {
            return Err(Error::os("pipe write"));
        }
        Ok(())
    }
    fn get(&self) -> Result<()> {
        let mut b = 0u8;
        // SAFETY: reads one byte into a valid buffer.
        if unsafe { libc::read(self.rd, &mut b as *mut u8 as *mut _, 1) } != 1 {
            return Err(Error::os("pipe read"));
        }
        Ok(())
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: closes fds this value owns.
        unsafe {
            libc::close(self.rd);
            libc::close(self.wr);
        }
    }
}

/// Round trips of one byte between this process and a child through two pipes: n switches.
fn pipe_batch(cpus: (usize, usize), n: u64) -> Result<Duration> {
    let there = Pipe::new()?;
    let back = Pipe::new()?;
    let (there_rd, there_wr, back_rd, back_wr) = (there.rd, there.wr, back.rd, back.wr);
    // SAFETY: the child only calls close, read, write and _exit on inherited descriptors.
    let child = unsafe {
        fork_child(Some(cpus.1), move || {
            // Close the child's copies of the ends it does not use, or it would never see EOF.
            libc::close(there_wr);
            libc::close(back_rd);
            let mut b = 0u8;
            while libc::read(there_rd, &mut b as *mut u8 as *mut _, 1) == 1 {
                if libc::write(back_wr, &b as *const u8 as *const _, 1) != 1 {
                    break;
                }
            }
        })
    }?;
    // One untimed round trip: the child is up and pinned.
    there.put()?;
    back.get()?;
    let round_trips = n.div_ceil(2);
    let t = Instant::now();
    for _ in 0..round_trips {
        there.put()?;
        back.get()?;
    }
    let took = t.elapsed();
    drop(there); // EOF: the child's read returns 0 and it exits
    child.wait()?;
    Ok(took.mul_f64(n as f64 / (2 * round_trips) as f64))
}

impl Experiment for Switch {
    fn name(&self) -> &'static str {
        "switch"
    }
    fn study(&self) -> &'static str {
        seeds::PTHREADS_1999
    }
    fn measures(&self) -> &'static str {
        "one context switch between kernel threads and between processes: sched_yield, futex hand-off, pipes (lmbench lat_ctx style), same CPU and across CPUs"
    }
    fn rough_duration(&self, mode: Mode) -> Duration {
        Duration::from_secs(mode.pick(2, 8, 60))
    }

    fn run(&self, ctx: &Ctx) -> Result<Outcome> {
        let sampler = ctx.sampler();
        let mut out = Outcome::default();
        let home = home_cpu();
        let pair = cpu_pair();

        struct Row {
            id: &'static str,
            party: Party,
            wait: Wait,
        }
        let rows = [
            Row {
                id: "switch.thread.yield",
                party: Party::Thread,
                wait: Wait::Yield,
            },
            Row {
                id: "switch.thread.futex",
                party: Party::Thread,
                wait: Wait::Futex { shared: false },
            },
            Row {
                id: "switch.process.yield",
                party: Party::Process,
                wait: Wait::Yield,
            },
            Row {
                id: "switch.process.futex",
                party: Party::Process,
                wait: Wait::Futex { shared: true },
            },
        ];
        let mut placements = vec![(String::new(), (home, home))];
        if let Some(p) = pair {
            placements.push((".cross_cpu".to_string(), p));
        }

        for (suffix, cpus) in &placements {
            let cross = cpus.0 != cpus.1;
            let placement = if cross {
                Placement::CrossCpu(cpus.0, cpus.1)
            } else {
                Placement::SameCpu(cpus.0)
            }
            .to_string();
            for row in &rows {
                let id = format!("{}{suffix}", row.id);
                ctx.step(&id)?;
                let (s, waits) = measure_handoff(&sampler, row.party, row.wait, *cpus)?;
                let who = match row.party {
                    Party::Thread => "two threads of one process",
                    Party::Process => "two processes (fork; turn word in a MAP_SHARED page)",
                };
                let note = match (row.wait, cross) {
                    (Wait::Yield, false) => format!(
                        "{who} pass a turn: each calls sched_yield until the other has taken it; \
                         time per hand-off = per switch, includes the syscall; {waits:.2} yield \
                         calls per hand-off (1.00 = every yield switched)"
                    ),
                    (Wait::Yield, true) => format!(
                        "{who} on different CPUs pass a turn, polling with sched_yield: no context \
                         switch happens (each is alone on its CPU), so this is the cross-CPU \
                         hand-off latency (cache-line transfer + a yield syscall); {waits:.2} \
                         yields per hand-off"
                    ),
                    (Wait::Futex { .. }, false) => format!(
                        "{who} hand off with FUTEX_WAKE then FUTEX_WAIT: per switch = round trip / \
                         2, including both syscalls (nothing subtracted); {waits:.2} waits per \
                         hand-off"
                    ),
                    (Wait::Futex { .. }, true) => format!(
                        "{who} on different CPUs hand off by futex: half a round trip, each half a \
                         wake-up of a sleeping thread on the other CPU (IPI + idle exit); \
                         {waits:.2} waits per hand-off"
                    ),
                };
                out.metrics.push(
                    Metric::from_summary(&id, "ns", &s, &placement, &note)
                        .with_historical(seeds::historical(&id)),
                );
            }

            let id = format!("switch.process.pipe{suffix}");
            ctx.step(&id)?;
            let overhead = {
                let _pin = PinGuard::pin(cpus.0)?;
                pipe_overhead(&sampler)?
            };
            let s = {
                let _pin = PinGuard::pin(cpus.0)?;
                sampler.per_op_ns(|n| {
                    let run = n.max(2);
                    Ok(pipe_batch(*cpus, run)?.mul_f64(n as f64 / run as f64))
                })?
            };
            let o = overhead.median;
            let s = s.map(|x| (x - o).max(0.0));
            out.metrics.push(Metric::from_summary(
                &id,
                "ns",
                &s,
                &placement,
                &format!(
                    "lmbench lat_ctx method: a byte passed back and forth through two pipes between \
                     two processes; per switch = round trip / 2 minus one in-process pipe \
                     write+read ({o:.0} ns, measured here and subtracted); to compare with `perf \
                     bench sched pipe` (pinned with taskset for the same placement), whose \
                     usecs/op is a whole round trip with the pipe work: 2 x (this + {o:.0} ns){}",
                    if cross {
                        "; on different CPUs no switch happens: this is the cross-CPU hand-off"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if pair.is_none() {
            for id in [
                "switch.thread.yield.cross_cpu",
                "switch.thread.futex.cross_cpu",
                "switch.process.yield.cross_cpu",
                "switch.process.futex.cross_cpu",
                "switch.process.pipe.cross_cpu",
            ] {
                out.skip(id, "this process may use only one CPU");
            }
        }

        crate::subjects::peers::switch_rows(ctx, &mut out)?;

        let get = |id: &str| out.metrics.iter().find(|m| m.id == id).map(|m| m.median);
        if let (Some(t), Some(p)) = (get("switch.thread.yield"), get("switch.process.yield")) {
            out.conclusion = Some(format!(
                "A kernel switch costs {t:.0} ns between threads and {p:.0} ns between processes \
                 ({:.1}x) on one CPU: the gap the 1999 study saw (17.9 vs 21.6 us) is now mostly \
                 the TLB and cache refill of a different address space. Hand-offs across CPUs are \
                 wake-up latencies, not switches: keep partners that talk often on one CPU.{}",
                p / t,
                match get("switch.green.yield") {
                    Some(g) => format!(
                        " A user-level switch (uthread) costs {g:.1} ns, {:.0}x less than a \
                         kernel one: where tasks hand off constantly, switch in user space.",
                        t / g
                    ),
                    None => String::new(),
                }
            ));
        }
        Ok(out)
    }
}
