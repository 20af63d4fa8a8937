//! `switch`: the cost of one context switch between two kernel threads or two processes
//! (PThreads 1999, section 4.2), by sched_yield, by futex hand-off and through pipes.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::cell::Cell;

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Interleaved, Outcome};
use crate::measure::pair::CacheLine;
use crate::measure::placement::{cpu_pair, home_cpu, pin_current_thread, PinGuard, Placement};
use crate::measure::process::{fork_child, mono_ns, wait_until, SharedMap};
use crate::measure::spawn::{fd_refused, spawn_scoped};
use crate::measure::units::Unit;
use crate::results::flag::{tagged, Flag};
use crate::results::ids;
use crate::seeds;
use crate::subjects::peers::{self, Started};
use crate::sys::{futex_wait_for, futex_wake, sched_yield};

pub mod channels;
mod placement;

use placement::placement_advice;

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

/// What a batch of hand-offs gave: its time, the waits both sides made, and whether the two
/// sides ended it on one CPU (the regime of a pair the kernel places).
struct Handoffs {
    took: Duration,
    waits: u64,
    same_cpu: bool,
}

/// The CPU the calling thread runs on now.
fn current_cpu() -> i32 {
    // SAFETY: no preconditions; -1 where the kernel cannot say.
    unsafe { libc::sched_getcpu() }
}

/// `n` hand-offs between this thread (wherever its mask puts it) and a partner pinned to
/// `partner_cpu` (None: the partner inherits this thread's mask, and the kernel places both).
fn handoff_batch(party: Party, wait: Wait, partner_cpu: Option<usize>, n: u64) -> Result<Handoffs> {
    let end = u32::try_from(n).map_err(|_| Error::Fail("batch too large".into()))?;
    match party {
        Party::Thread => {
            // The turn on a line of its own; the rest is written before and after the game.
            let turn = Box::new(CacheLine(AtomicU32::new(0)));
            let turn = &turn.0;
            let ready = AtomicU32::new(0);
            let partner_waits = AtomicU64::new(0);
            let partner_at = AtomicI32::new(-1);
            std::thread::scope(|s| {
                let partner = spawn_scoped(s, "the partner thread", || -> Result<()> {
                    if let Some(cpu) = partner_cpu {
                        pin_current_thread(cpu)?;
                    }
                    ready.store(1, Ordering::Release);
                    let w = play(1, turn, end, wait)
                        .ok_or_else(|| Error::Fail("the measuring thread stopped".into()))?;
                    partner_at.store(current_cpu(), Ordering::Release);
                    partner_waits.store(w, Ordering::Release);
                    Ok(())
                })?;
                let ran = (|| -> Result<(Duration, u64, i32)> {
                    wait_until(|| ready.load(Ordering::Acquire) == 1, PARTNER_TIMEOUT_NS)?;
                    let t = Instant::now();
                    let w = play(0, turn, end, wait)
                        .ok_or_else(|| Error::Fail("the partner thread stopped".into()))?;
                    Ok((t.elapsed(), w, current_cpu()))
                })();
                if ran.is_err() {
                    // Let the partner finish its game so it can be joined.
                    turn.store(end, Ordering::Release);
                    futex_wake(turn, 1, false);
                }
                partner
                    .join()
                    .map_err(|_| Error::Fail("the partner thread panicked".into()))??;
                let (took, w, here) = ran?;
                Ok(Handoffs {
                    took,
                    waits: w + partner_waits.load(Ordering::Acquire),
                    same_cpu: here == partner_at.load(Ordering::Acquire),
                })
            })
        }
        Party::Process => {
            let map = SharedMap::new(4096)?;
            let (turn, ready, partner_waits) = (map.word32(0), map.word32(1), map.word(2));
            let partner_at = map.word32(6);
            // SAFETY: the child runs `play` (atomics, sched_yield, futex), sched_getcpu (a vDSO
            // or system call, async-signal-safe) and atomic stores only.
            let child = unsafe {
                fork_child(partner_cpu, || {
                    ready.store(1, Ordering::Release);
                    if let Some(w) = play(1, turn, end, wait) {
                        partner_at.store(current_cpu() as u32, Ordering::Release);
                        partner_waits.store(w, Ordering::Release);
                    }
                })
            }?;
            wait_until(|| ready.load(Ordering::Acquire) == 1, PARTNER_TIMEOUT_NS)?;
            let t = Instant::now();
            let w = play(0, turn, end, wait)
                .ok_or_else(|| Error::Fail("the partner process stopped".into()))?;
            let took = t.elapsed();
            let here = current_cpu() as u32;
            child.wait()?;
            Ok(Handoffs {
                took,
                waits: w + partner_waits.load(Ordering::Acquire),
                same_cpu: here == partner_at.load(Ordering::Acquire),
            })
        }
    }
}

/// Cost of `n` 1-byte writes + reads on one pipe within one process: lmbench's lat_ctx
/// overhead, subtracted from the pipe rows round by round.
fn pipe_overhead_batch(p: &Pipe, n: u64) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..n {
        p.put()?;
        p.get()?;
    }
    Ok(t.elapsed())
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
            return Err(fd_refused("a pipe", &std::io::Error::last_os_error()));
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

impl Pipe {
    /// Closes the write end (a parent that only reads: when the child ends, a read sees EOF
    /// instead of waiting for a writer that is this process itself).
    fn close_write(&mut self) {
        // SAFETY: closes an fd this value owns, once (marked closed).
        unsafe { libc::close(self.wr) };
        self.wr = -1;
    }
    fn close_read(&mut self) {
        // SAFETY: as above.
        unsafe { libc::close(self.rd) };
        self.rd = -1;
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: closes fds this value owns and has not closed.
        unsafe {
            if self.rd >= 0 {
                libc::close(self.rd);
            }
            if self.wr >= 0 {
                libc::close(self.wr);
            }
        }
    }
}

/// Round trips of one byte between this process and a child through two pipes: n switches.
/// `child_cpu`: where the child is pinned (None: it inherits the caller's mask).
fn pipe_batch(child_cpu: Option<usize>, n: u64) -> Result<Duration> {
    let mut there = Pipe::new()?;
    let mut back = Pipe::new()?;
    let (there_rd, there_wr, back_rd, back_wr) = (there.rd, there.wr, back.rd, back.wr);
    // SAFETY: the child only calls close, read, write and _exit on inherited descriptors.
    let child = unsafe {
        fork_child(child_cpu, move || {
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
    // The parent's copies of the child's ends: closed, so that a child that ended gives EOF.
    there.close_read();
    back.close_write();
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

const INFO: Info = Info {
    name: "switch",
    study: &seeds::PTHREADS_1999,
    measures: "one context switch between kernel threads and between processes: sched_yield, futex hand-off, pipes (lmbench lat_ctx style), same CPU and across CPUs, with green threads, Tokio tasks and goroutines beside them",
    rough_secs: [2.0, 5.0, 23.0],
};

/// A kernel hand-off row: who the partner is and how it waits.
struct Row {
    id: &'static str,
    party: Party,
    wait: Wait,
}

const ROWS: [Row; 4] = [
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

fn handoff_note(row: &Row, cross: bool, waits: f64) -> String {
    let who = match row.party {
        Party::Thread => "two threads of one process",
        Party::Process => "two processes (fork; turn word in a MAP_SHARED page)",
    };
    match (row.wait, cross) {
        (Wait::Yield, false) => format!(
            "{who} pass a turn: each calls sched_yield until the other has taken it; time per \
             hand-off = per switch, includes the syscall; {waits:.2} yield calls per hand-off \
             (1.00 = every yield switched)"
        ),
        (Wait::Yield, true) => format!(
            "{who} on different CPUs pass a turn, polling with sched_yield: no context switch \
             happens (each is alone on its CPU), so this is the cross-CPU hand-off latency \
             (cache-line transfer + a yield syscall); {waits:.2} yields per hand-off"
        ),
        (Wait::Futex { .. }, false) => format!(
            "{who} hand off with FUTEX_WAKE then FUTEX_WAIT: per switch = round trip / 2, \
             including both syscalls (nothing subtracted); {waits:.2} waits per hand-off"
        ),
        (Wait::Futex { .. }, true) => format!(
            "{who} on different CPUs hand off by futex: half a round trip, each half a wake-up \
             of a sleeping thread on the other CPU (IPI + idle exit); {waits:.2} waits per \
             hand-off"
        ),
    }
}

fn unpinned_note(row: &Row, waits: f64) -> String {
    let who = match row.party {
        Party::Thread => "two threads of one process",
        Party::Process => "two processes (fork; turn word in a MAP_SHARED page)",
    };
    let how = match row.wait {
        Wait::Yield => "polling with sched_yield",
        Wait::Futex { .. } => "by FUTEX_WAKE then FUTEX_WAIT (per hand-off = round trip / 2)",
    };
    format!(
        "{who}, neither pinned, pass a turn {how}: the kernel places them (on one CPU this is a \
         switch, on two a cross-CPU wake-up), as it does for a program that sets no affinity; \
         {waits:.2} waits per hand-off"
    )
}

/// The trial log's clause of a metric's note, for notes written after measuring.
fn trial_note(m: &crate::results::Metric) -> String {
    m.trials.as_ref().map(|t| t.note()).unwrap_or_default()
}

/// Waits and hand-offs counted across a row's batches, for its note.
#[derive(Default)]
struct WaitCount {
    waits: Cell<u64>,
    handoffs: Cell<u64>,
    /// Whether the last batch's two sides ended on one CPU.
    last_same_cpu: Cell<Option<bool>>,
}

impl WaitCount {
    fn per_handoff(&self) -> f64 {
        self.waits.get() as f64 / self.handoffs.get().max(1) as f64
    }
}

impl Experiment for Switch {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        let home = home_cpu();
        let pair = cpu_pair();
        let unpinned = ctx.env.allowed_cpus.clone();
        let mut placements = vec![(String::new(), (home, home))];
        if let Some(p) = pair {
            placements.push((".cross_cpu".to_string(), p));
        }
        for (suffix, cpus) in &placements {
            handoff_group(ctx, out, suffix, *cpus, &unpinned)?;
        }
        // Channel ping-pong (same CPU and across two), measured unpinned: it pins its own.
        channels::measure(ctx, out)?;
        out.explain_modes(
            &ctx.idle_wakeup_modes(),
            "on one CPU nothing waits for an idle CPU, so two clusters here are two phases of the \
             host (see the drift references and the experiment's attempts)",
        );
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
        out.conclusion = conclusion(out);
        Ok(())
    }
}

/// One interleaved group of hand-off rows, the measuring side on `cpus.0` and partners on
/// `cpus.1`: on one CPU (`suffix` empty) with the default-placement rows and the peers'
/// yields, or across two (`suffix` `.cross_cpu`).
fn handoff_group(
    ctx: &Ctx,
    out: &mut Outcome,
    suffix: &str,
    cpus: (usize, usize),
    unpinned: &[usize],
) -> Result<()> {
    let cross = cpus.0 != cpus.1;
    let placement = if cross {
        Placement::CrossCpu(cpus.0, cpus.1)
    } else {
        Placement::SameCpu(cpus.0)
    };
    // The measuring side stays on cpus.0 for the whole group; partners pin themselves.
    let _pin = PinGuard::pin(cpus.0)?;
    let counts: Vec<WaitCount> = ROWS.iter().map(|_| WaitCount::default()).collect();
    let counts_unpinned: Vec<WaitCount> = ROWS.iter().map(|_| WaitCount::default()).collect();
    let overhead_pipe = Pipe::new()?;
    let started = if cross {
        Vec::new()
    } else {
        peers::start_all(
            ctx.cancel,
            |p| ctx.step(&format!("starting the {} peer", p.title)),
            |p, reason| out.skip(&ids::peer::yields(p.name), reason),
        )?
    };
    let pipe = PipeIds::new(suffix);

    let mut group = Interleaved::new();
    for (row, count) in ROWS.iter().zip(&counts) {
        let id = format!("{}{suffix}", row.id);
        group.row(&id, Unit::Ns, placement, String::new(), move |n| {
            // A game needs at least two hand-offs; scale back to the n the sampler
            // divides by.
            let run = n.max(2);
            let h = handoff_batch(row.party, row.wait, Some(cpus.1), run)?;
            count.waits.set(count.waits.get() + h.waits);
            count.handoffs.set(count.handoffs.get() + run);
            Ok(h.took.mul_f64(n as f64 / run as f64))
        });
        // Across CPUs, whether the waiting side sees the turn flip before it next yields or
        // sleeps is a race whose regime can outlast a run.
        if cross {
            group.flag(Flag::Race);
        }
    }
    let guest = ctx.env.is_guest();
    pipe_rows(&mut group, &pipe, placement, guest, cpus, &overhead_pipe);
    if !cross && unpinned.len() > 1 {
        unpinned_rows(&mut group, unpinned, &counts_unpinned);
    }
    if !cross {
        peer_rows(&mut group, placement, &started, ctx.cancel);
    }
    let measured = group.measure(ctx, out)?;
    drop(started);

    handoff_notes(out, suffix, cross, &counts, &counts_unpinned);
    let overhead = measured.median_ns(&pipe.overhead).unwrap_or(f64::NAN);
    pipe_notes(out, &pipe, cpus, overhead);
    Ok(())
}

/// The ids of one placement's pipe rows: the figure, and the two inputs it is derived from
/// round by round.
struct PipeIds {
    id: String,
    raw: String,
    overhead: String,
}

impl PipeIds {
    fn new(suffix: &str) -> PipeIds {
        let id = format!("switch.process.pipe{suffix}");
        PipeIds {
            raw: format!("{id}.raw"),
            overhead: format!("{id}.overhead"),
            id,
        }
    }
}

/// lmbench's lat_ctx: round trips through two pipes with a partner process on `cpus.1`, less
/// one in-process pipe write+read, round by round; across two CPUs also the pair the
/// scheduler places on both.
///
/// `guest`: this machine is a virtual one. There every pipe hand-off across two CPUs wakes an
/// idle vCPU, which the host serves faster or slower from one run to the next
/// (docs/agreement.md: 30 against 44 perf-usecs/op for the same pair, by how settled the
/// exchange is; back-to-back quick runs read `switch.process.pipe.cross_cpu` at 14.4 and
/// 20.6 us, each run's trials within 12%), so those rows carry `Flag::IdleVcpu`.
fn pipe_rows<'a>(
    group: &mut Interleaved<'a>,
    pipe: &'a PipeIds,
    placement: Placement,
    guest: bool,
    cpus: (usize, usize),
    overhead_pipe: &'a Pipe,
) {
    let cross = cpus.0 != cpus.1;
    let idle_vcpu = cross && guest;
    group
        .input(&pipe.raw, move |n| {
            let run = n.max(2);
            Ok(pipe_batch(Some(cpus.1), run)?.mul_f64(n as f64 / run as f64))
        })
        .input(&pipe.overhead, |n| pipe_overhead_batch(overhead_pipe, n))
        .derived(
            &pipe.id,
            Unit::Ns,
            placement,
            String::new(),
            &[&pipe.raw, &pipe.overhead],
            |v| (v[0] - v[1]).max(0.0),
        );
    if idle_vcpu {
        group.flag(Flag::IdleVcpu);
    }
    if cross {
        // What `taskset -c a,b perf bench sched pipe` measures: both processes allowed
        // on both CPUs, the scheduler placing them (wake-affine pulls, migrations).
        group.derived(
            "switch.process.pipe.unpinned",
            Unit::Ns,
            format!("cpus({},{})", cpus.0, cpus.1),
            String::new(),
            &["switch.process.pipe.unpinned.raw", &pipe.overhead],
            |v| (v[0] - v[1]).max(0.0),
        );
        if idle_vcpu {
            group.flag(Flag::IdleVcpu);
        }
        group.input("switch.process.pipe.unpinned.raw", move |n| {
            let _both = PinGuard::pin_set(&[cpus.0, cpus.1])?;
            let run = n.max(2);
            Ok(pipe_batch(None, run)?.mul_f64(n as f64 / run as f64))
        });
    }
}

/// What a program that sets no affinity gets: both parties placed by the kernel (this
/// thread's pin is lifted for each batch, outside the timed span).
fn unpinned_rows<'a>(group: &mut Interleaved<'a>, all: &'a [usize], counts: &'a [WaitCount]) {
    for (row, count) in ROWS.iter().zip(counts) {
        if row.id == "switch.process.yield" {
            continue;
        }
        let id = format!("{}.unpinned", row.id);
        // The measuring thread plays one side with its pin lifted for the batch, a
        // fresh partner the other, as in a program whose main thread hands off to a
        // worker. A fresh measuring thread woken for each batch (`Driver`) put both
        // on one CPU in every batch, which no two-thread program here does
        // reliably. Where the kernel put them is recorded per batch: a hand-off on
        // one CPU is a switch, on two a cross-CPU wake-up (compare reads a change of
        // that share between runs as a change of regime).
        group.row(
            &id,
            Unit::Ns,
            Placement::Unpinned,
            String::new(),
            move |n| {
                let _free = PinGuard::pin_set(all)?;
                let run = n.max(2);
                let h = handoff_batch(row.party, row.wait, None, run)?;
                count.waits.set(count.waits.get() + h.waits);
                count.handoffs.set(count.handoffs.get() + run);
                count.last_same_cpu.set(Some(h.same_cpu));
                Ok(h.took.mul_f64(n as f64 / run as f64))
            },
        );
        // Where the kernel puts the pair, and whether the waiting side sees the turn flip
        // before it sleeps, are races whose outcome can outlast a run.
        group
            .colocation(move || count.last_same_cpu.get())
            .flag(Flag::Race);
    }
    group
        .ratio(
            "switch.thread.futex.unpinned.vs_pinned",
            "switch.thread.futex.unpinned",
            "switch.thread.futex",
            "a futex hand-off between two threads the kernel places, over the same pinned \
             to one CPU: what pinning partners that talk often to one CPU changes",
        )
        .flag(Flag::Race);
}

/// Every started peer's yield switch on the measuring CPU, and the ratios taken round by
/// round: the reference peer over a kernel thread and over each other peer, a process over a
/// thread.
fn peer_rows<'a>(
    group: &mut Interleaved<'a>,
    placement: Placement,
    started: &'a [Started],
    cancel: &'a crate::cancel::Cancel,
) {
    for peer in started {
        let id = ids::peer::yields(peer.info.name);
        group.peer_row(peer, cancel, (&id, placement, peer.info.yields), |r, n| {
            r.yield_switch(n)
        });
    }
    let reference = peers::reference().name;
    let base = ids::peer::yields(reference);
    group
        .ratio(
            &ids::peer::yield_ratio(reference, "thread"),
            "switch.thread.yield",
            &base,
            "how many times cheaper a green switch is than a kernel thread switch",
        )
        .ratio(
            "switch.process.vs_thread",
            "switch.process.yield",
            "switch.thread.yield",
            "a process switch over a thread switch (the study: 21.62 / 17.93 = 1.21)",
        );
    for other in peers::others() {
        let note = if other.floor {
            format!(
                "{}'s switch over a green switch: the floor, not a runtime (no \
                 scheduler, no run queue), so below 1; 1 / this is how many bare switches one \
                 green switch costs",
                other.one
            )
        } else {
            format!(
                "how many times cheaper a green switch is than {} switch",
                other.one
            )
        };
        group.ratio(
            &ids::peer::yield_ratio(reference, other.name),
            &ids::peer::yields(other.name),
            &base,
            note,
        );
    }
}

/// The hand-off rows' notes, written after measuring: they carry the waits per hand-off the
/// batches counted (behind the flags the rows were made with).
fn handoff_notes(
    out: &mut Outcome,
    suffix: &str,
    cross: bool,
    counts: &[WaitCount],
    counts_unpinned: &[WaitCount],
) {
    for (row, count) in ROWS.iter().zip(counts) {
        let id = format!("{}{suffix}", row.id);
        if let Some(m) = out.metric_mut(&id) {
            let body = format!(
                "{}{}",
                handoff_note(row, cross, count.per_handoff()),
                trial_note(m)
            );
            m.note = tagged(&m.flags, &body);
        }
    }
    // The unpinned rows are measured with the same-CPU group only; the cross-CPU pass
    // must not rewrite their notes from its own (empty) counts.
    if cross {
        return;
    }
    for (row, count) in ROWS.iter().zip(counts_unpinned) {
        let id = format!("{}.unpinned", row.id);
        if let Some(m) = out.metric_mut(&id) {
            let body = format!(
                "{}{}",
                unpinned_note(row, count.per_handoff()),
                trial_note(m)
            );
            m.note = tagged(&m.flags, &body);
        }
    }
}

/// The pipe rows' notes, written after measuring: they name the overhead subtracted
/// (`overhead`, median ns).
fn pipe_notes(out: &mut Outcome, pipe: &PipeIds, cpus: (usize, usize), overhead: f64) {
    let cross = cpus.0 != cpus.1;
    if let Some(m) = out.metric_mut("switch.process.pipe.unpinned") {
        m.note = format!(
            "the lmbench lat_ctx method with both processes allowed on CPUs {} and {} \
             and placed by the scheduler, as `taskset -c {},{} perf bench sched pipe` runs \
             them (its usecs/op = 2 x (this + {overhead:.0} ns)); \
             switch.process.pipe.cross_cpu pins one process per CPU, so every hand-off \
             is a cross-CPU wake-up, while here the scheduler may put both on one CPU \
             (a same-CPU switch) or move them between hand-offs; per switch = round trip \
             / 2 minus one in-process pipe write+read, subtracted round by round. Each \
             batch times a fresh pair's first few ms, and the pair nearly always lands on \
             two CPUs (this row reads like the cross_cpu one). perf times one pair for \
             seconds, and its figure is a mixture whose shares change from run to run: \
             stints with both on one CPU (4 usecs/op); on two CPUs, the first 30-100 ms of \
             the exchange and of each restart after a disturbance (30 usecs/op on the guest \
             the lab is developed on), as in this row's batches; and the settled exchange, \
             slower on a KVM guest (44 usecs/op there; the guest's interrupts, halts and \
             clock speed are the same in both, so the time goes to the host). So \
             the two agree only when perf's mixture averages out near this row: in \
             alternated pairs this read 0.77-1.13x of perf's figure, and up to 4x when \
             perf's pair spent most of its run on one CPU (docs/agreement.md){}",
            cpus.0,
            cpus.1,
            cpus.0,
            cpus.1,
            trial_note(m)
        );
    }
    if let Some(m) = out.metric_mut(&pipe.id) {
        m.note = format!(
            "lmbench lat_ctx method: a byte passed back and forth through two pipes \
             between two processes; per switch = round trip / 2 minus one in-process pipe \
             write+read measured in the same round and subtracted round by round (median \
             {overhead:.0} ns); to compare with `perf bench sched pipe` (pinned with \
             taskset for the same placement), whose usecs/op is a whole round trip with \
             the pipe work: 2 x (this + {overhead:.0} ns){}{}",
            if cross {
                "; on different CPUs no switch happens: this is the cross-CPU hand-off"
            } else {
                ""
            },
            trial_note(m)
        );
    }
}

/// How far the reference peer's switch stands above each floor peer's bare switch (its
/// scheduler's share); empty where no floor was measured.
fn floor_sentence(out: &Outcome) -> String {
    let reference = peers::reference().name;
    peers::others()
        .filter(|p| p.floor)
        .filter_map(|p| {
            let (f, r) = (
                out.median(&ids::peer::yields(p.name))?,
                out.median(&ids::peer::yield_ratio(reference, p.name))?,
            );
            Some(format!(
                " It costs {:.1}x {}'s switch ({f:.2} ns, ratio taken round by round), the \
                 floor with no scheduler that a runtime's switch can approach.",
                1.0 / r,
                p.one
            ))
        })
        .collect()
}

/// What this run's switch figures say to choose; None without the kernel rows.
fn conclusion(out: &Outcome) -> Option<String> {
    let (Some(t), Some(p)) = (
        out.median("switch.thread.yield"),
        out.median("switch.process.yield"),
    ) else {
        return None;
    };
    let reference = peers::reference().name;
    let green = match (
        out.median(&ids::peer::yields(reference)),
        out.median(&ids::peer::yield_ratio(reference, "thread")),
    ) {
        (Some(g), Some(r)) => format!(
            " A user-level switch (uthread) costs {g:.1} ns, {r:.0}x less than a kernel one: \
             where tasks hand off constantly, switch in user space.{}",
            floor_sentence(out)
        ),
        _ => String::new(),
    };
    Some(format!(
        "A kernel switch costs {t:.0} ns between threads and {p:.0} ns between processes \
         ({:.2}x, taken round by round) on one CPU: the gap the 1999 study saw (17.9 vs 21.6 \
         us) is now mostly the TLB and cache refill of a different address space.{}{green}",
        out.median("switch.process.vs_thread").unwrap_or(p / t),
        placement_advice(out),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Metric;

    #[test]
    fn the_floor_sentence_gives_how_many_bare_switches_a_green_one_costs() {
        let floor = peers::others()
            .find(|p| p.floor)
            .expect("a floor peer is registered");
        let mut out = Outcome::default();
        for (id, v) in [
            (ids::peer::yields(floor.name), 1.0),
            (
                ids::peer::yield_ratio(peers::reference().name, floor.name),
                0.4,
            ),
        ] {
            out.add(Metric::single(&id, Unit::Ns, v, "same_cpu(0)", "n"));
        }
        let text = floor_sentence(&out);
        assert!(
            text.contains(&format!("2.5x {}'s switch (1.00 ns", floor.one)),
            "{text}"
        );
        assert_eq!(floor_sentence(&Outcome::default()), "");
    }
}
