//! `create`: what it costs to make and end a thread or a process (PThreads 1999, section 4.1).

use std::cell::Cell;
use std::ffi::CString;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Interleaved, Outcome};
use crate::measure::placement::{home_cpu, PinGuard, Placement};
use crate::measure::process::{fork_child, mono_ns, wait_pid, SharedMap};
use crate::measure::spawn::spawn;
use crate::measure::stats;
use crate::measure::units::Unit;
use crate::results::flag::{add_flag, Flag};
use crate::results::ids;
use crate::results::Series;
use crate::seeds;
use crate::subjects::peers::{self, PeerInfo, Started};
use crate::sys;

pub mod balance;

pub struct Create;

extern "C" fn return_at_once(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}

/// Stores the clock into the slot passed as the argument, then returns (= exits).
extern "C" fn stamp_and_return(slot: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: the creator passes a pointer to an AtomicU64 that outlives the join.
    let slot = unsafe { &*(slot as *const AtomicU64) };
    slot.store(mono_ns(), Ordering::Release);
    std::ptr::null_mut()
}

/// pthread_create + pthread_join of a thread running `body` with argument `arg`.
fn create_join(
    body: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
) -> Result<()> {
    let mut tid: libc::pthread_t = 0;
    // SAFETY: default attributes; `body` is a plain extern fn; the join below reaps the thread.
    let rc = unsafe { libc::pthread_create(&mut tid, std::ptr::null(), body, arg) };
    if rc != 0 {
        return Err(Error::Skip(format!(
            "pthread_create failed: {} (RLIMIT_NPROC or memory limit?)",
            std::io::Error::from_raw_os_error(rc)
        )));
    }
    // SAFETY: tid is a joinable thread we created and have not joined.
    let rc = unsafe { libc::pthread_join(tid, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(Error::Fail(format!(
            "pthread_join failed: {}",
            std::io::Error::from_raw_os_error(rc)
        )));
    }
    Ok(())
}

fn create_join_batch(n: u64) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..n {
        create_join(return_at_once, std::ptr::null_mut())?;
    }
    Ok(t.elapsed())
}

extern "C" fn note_cpu_and_return(slot: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: the creator passes a pointer to an AtomicI32 that outlives the join.
    let slot = unsafe { &*(slot as *const AtomicI32) };
    // SAFETY: sched_getcpu has no preconditions.
    slot.store(unsafe { libc::sched_getcpu() }, Ordering::Relaxed);
    std::ptr::null_mut()
}

/// `create_join_batch` whose threads note the CPU they ran on; `share` gets the share of them
/// that ran on the CPU the creator is on after the join. Measured here with a C loop: in some
/// processes 95-100% of the new threads ran on the creator's CPU, at 17-26 us a thread; in
/// others about 52%, at 30-37 us; a process keeps its share for thousands of threads, then
/// may switch. In the lab, each batch after `SETTLE` of the same, it was 49-65% in every trial
/// of three quick runs on a 2-vCPU guest, at 34.8-46.8 us a trial. The two getcpu calls per
/// thread (rseq or vDSO, a few ns) are inside the time.
fn create_join_batch_placed(n: u64, share: &Cell<Option<f64>>) -> Result<Duration> {
    let slot = AtomicI32::new(-1);
    let mut same = 0u64;
    let t = Instant::now();
    for _ in 0..n {
        create_join(note_cpu_and_return, &slot as *const AtomicI32 as *mut _)?;
        // SAFETY: sched_getcpu has no preconditions.
        same += u64::from(slot.load(Ordering::Relaxed) == unsafe { libc::sched_getcpu() });
    }
    let took = t.elapsed();
    share.set(Some(same as f64 / n.max(1) as f64));
    Ok(took)
}

/// How long the default-placed create row creates and joins threads, untimed, before each
/// timed batch. On a 2-vCPU KVM guest a C loop's first 100 create+joins after 50 ms with the
/// other vCPU idle cost 52-58 us each, the 100 after 1000 untimed ones (~40 ms) 34-38 us
/// (docs/agreement.md, "Thread creation, settled and cold"): the host's handling of a halting
/// vCPU adapts to how often it is woken.
const SETTLE: Duration = Duration::from_millis(40);

/// How long the default-placed fork and spawn rows fork or spawn, untimed, before each timed
/// batch. Their batches are a few children (3-13 in a quick run), each after the round's pinned
/// rows have left the other vCPU idle. `scripts/agreement/child_gap.c` on a 2-vCPU KVM guest,
/// unpinned, loops of 4 posix_spawns of /bin/true after 20 ms of work on one CPU: 625-639 us
/// each with nothing before them, 566-570 us after 10 untimed spawns (~5 ms), 533-543 us back
/// to back, as `hyperfine -N` times them; fork + _exit + waitpid in loops of 10 the same way:
/// 168-185, 151-165 and 134-148 us (docs/agreement.md, "Children, settled and cold").
const SETTLE_CHILDREN: Duration = Duration::from_millis(5);

/// `batch(n)` after `lead` of the same (batches of `step`), untimed: the figure of a steady
/// stream of the operation, not of its first few after a pause.
fn after_lead_in(
    lead: Duration,
    step: u64,
    n: u64,
    mut batch: impl FnMut(u64) -> Result<Duration>,
) -> Result<Duration> {
    let t = Instant::now();
    while t.elapsed() < lead {
        batch(step)?;
    }
    batch(n)
}

/// `create_join_batch_placed` after `SETTLE` of the same, untimed (the share is the timed
/// batch's: each call sets it).
fn settled_batch(n: u64, share: &Cell<Option<f64>>) -> Result<Duration> {
    after_lead_in(SETTLE, 32, n, |k| create_join_batch_placed(k, share))
}

/// Sum over `n` threads of (join returned - thread about to exit).
fn destroy_thread_batch(n: u64) -> Result<Duration> {
    let slot = AtomicU64::new(0);
    let mut total = 0u64;
    for _ in 0..n {
        create_join(stamp_and_return, &slot as *const AtomicU64 as *mut _)?;
        let joined = mono_ns();
        total += joined.saturating_sub(slot.load(Ordering::Acquire));
    }
    Ok(Duration::from_nanos(total))
}

fn fork_batch(n: u64) -> Result<Duration> {
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: the child does nothing before _exit.
        unsafe { fork_child(None, || {}) }?.wait()?;
    }
    Ok(t.elapsed())
}

fn destroy_process_batch(map: &SharedMap, n: u64) -> Result<Duration> {
    let slot = map.word(0);
    let mut total = 0u64;
    for _ in 0..n {
        // SAFETY: the child reads the clock (clock_gettime is async-signal-safe) and stores to an
        // atomic in the shared mapping.
        let child = unsafe { fork_child(None, || slot.store(mono_ns(), Ordering::Release)) }?;
        child.wait()?;
        let reaped = mono_ns();
        total += reaped.saturating_sub(slot.load(Ordering::Acquire));
    }
    Ok(Duration::from_nanos(total))
}

/// posix_spawn of `program` with no arguments, then waitpid.
fn spawn_batch(program: &CString, n: u64) -> Result<Duration> {
    extern "C" {
        static environ: *const *mut libc::c_char;
    }
    let argv = [program.as_ptr() as *mut libc::c_char, std::ptr::null_mut()];
    let t = Instant::now();
    for _ in 0..n {
        let mut pid: libc::pid_t = 0;
        // SAFETY: program and argv are NUL-terminated and live across the call; environ is the
        // process environment maintained by libc.
        let rc = unsafe {
            libc::posix_spawn(
                &mut pid,
                program.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                argv.as_ptr(),
                environ,
            )
        };
        if rc != 0 {
            return Err(Error::Skip(format!(
                "posix_spawn({}) failed: {}",
                program.to_string_lossy(),
                std::io::Error::from_raw_os_error(rc)
            )));
        }
        let status = wait_pid(pid)?;
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            return Err(Error::Fail(format!(
                "{} exited abnormally (status {status:#x})",
                program.to_string_lossy()
            )));
        }
    }
    Ok(t.elapsed())
}

/// A trivial program every Linux has: `true` from coreutils or busybox.
fn trivial_program() -> Option<CString> {
    ["/bin/true", "/usr/bin/true"]
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .and_then(|p| CString::new(*p).ok())
}

const INFO: Info = Info {
    name: "create",
    study: &seeds::PTHREADS_1999,
    measures: "thread and process creation and destruction (create+join, fork+exit+wait, posix_spawn), green threads, Tokio tasks and goroutines beside them, and creation time vs number created (Fig. 1)",
    rough_secs: [1.0, 11.0, 46.0],
};

impl Experiment for Create {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        creation(ctx, out)?;
        // A process's creation and end copy and tear down the parent's page tables, and run
        // the loader: memory well beyond a core's caches.
        out.mark_memory_bound(0, |id| {
            id.starts_with("create.process.") || id == "destroy.process"
        });
        let balance_from = out.metrics.len();
        // Pool balance (bursts on two CPUs), in a process of its own: its pools, runtimes and
        // their threads' malloc arenas stay mapped, and every later fork here would copy them.
        balance::measure_in_child(ctx, out)?;
        // A burst or a tree touches the stacks and control blocks of thousands of threads.
        out.mark_memory_bound(balance_from, |_| true);
        out.conclusion = Some(conclusion(out));
        Ok(())
    }
}

/// What this run's creation figures say to choose.
fn conclusion(out: &Outcome) -> String {
    let pinned = out.median("create.thread").unwrap_or(f64::NAN);
    // Advice rests on the default placement, what a program gets without pinning.
    let (thread, placed) = match out.median("create.thread.unpinned") {
        Some(u) => {
            let r = out
                .median("create.thread.unpinned.vs_pinned")
                .unwrap_or(u / pinned);
            let pin = if r > 1.1 {
                format!(
                    "pinning the creator and its threads to one CPU would take it to \
                     {pinned:.1} us ({r:.1}x less): the new thread starts on another CPU and \
                     the join waits for wake-ups across CPUs"
                )
            } else if r < 0.9 {
                format!(
                    "pinning the creator and its threads to one CPU would make it dearer \
                     ({pinned:.1} us)"
                )
            } else {
                format!("pinned to one CPU it is about the same ({pinned:.1} us)")
            };
            (u, format!(" where the kernel places the new thread; {pin}"))
        }
        None => (pinned, " (creator and thread on one CPU)".to_string()),
    };
    let fork = out.median("create.process.fork").unwrap_or(f64::NAN);
    let fork_ratio = out
        .median("create.process.fork.vs_thread")
        .unwrap_or(f64::NAN);
    format!(
        "A kernel thread costs {thread:.1} us to create and join here{placed}, a \
         fork+exit+wait {fork:.0} us on one CPU ({fork_ratio:.0}x a thread there; the study \
         saw ~171x). A thread per task is affordable when the task runs for well over {:.0} \
         us; below that, reuse threads from a pool.{}",
        thread * 10.0,
        peer_conclusion(out)
    )
}

/// The conclusion's sentence on the reference peer (uthread) beside kernel threads and the
/// other peers; empty when its rows were not measured.
fn peer_conclusion(out: &Outcome) -> String {
    let reference = ids::peer::spawn(peers::reference().name);
    let (Some(g), Some(r)) = (
        out.median(&reference),
        out.median(&ids::ratio(&reference, "thread")),
    ) else {
        return String::new();
    };
    let mut green = format!(
        " A green thread (uthread, pooled stack) costs {g:.0} ns, {r:.0}x less than a kernel \
         thread on one CPU"
    );
    let (floors, runtimes): (Vec<&PeerInfo>, Vec<&PeerInfo>) =
        peers::others().partition(|p| p.floor);
    let others: Vec<String> = runtimes
        .iter()
        .filter_map(|p| {
            out.median(&ids::ratio(&reference, p.name))
                .map(|r| format!("{r:.1}x less than {}", p.one))
        })
        .collect();
    if !others.is_empty() {
        green.push_str(&format!(" and {}", others.join(" and ")));
    }
    // The floor is no runtime to choose: uthread is read against it, not said to beat it.
    for p in floors {
        if let Some(r) = out.median(&ids::ratio(&reference, p.name)) {
            green.push_str(&format!(
                ", {:.1}x what {} costs to create and run on a reused stack (the floor, with no \
                 scheduler)",
                1.0 / r,
                p.one
            ));
        }
    }
    green.push_str(
        " (ratios taken round by round): for many short tasks on few cores, user-level threads \
         or tasks win.",
    );
    green
}

/// Where the creation rows run and the process state their notes name.
struct Setup {
    /// The one CPU of the pinned rows.
    cpu: usize,
    placement: Placement,
    /// Every CPU this process may use, where there are two or more.
    unpinned: Option<Vec<usize>>,
    /// The process's thread count and private resident memory, which a fork's cost grows with.
    state: String,
    /// The fewest and most mappings a fork copied, read before every batch of the fork rows
    /// (a peer started afresh for a trial maps its stacks for that trial only).
    maps: Cell<Option<(usize, usize)>>,
    /// The share of the last default-placed create batch's threads that ran on the creator's
    /// CPU.
    thread_share: Cell<Option<f64>>,
}

impl Setup {
    /// Runs `run` in the default placement: the creator allowed on every CPU this process
    /// may use, new threads and children inheriting that, as in a program that sets no
    /// affinity. The creator's own pin is lifted for the batch, outside the timed span.
    fn default_placed(&self, run: impl FnOnce() -> Result<Duration>) -> Result<Duration> {
        let one = [self.cpu];
        let _free = PinGuard::pin_set(self.unpinned.as_deref().unwrap_or(&one))?;
        run()
    }

    /// Notes the mappings a fork of this process copies now (before a batch, untimed).
    fn count_maps(&self) {
        let n = sys::forked_mapping_count();
        let (lo, hi) = self.maps.get().unwrap_or((n, n));
        self.maps.set(Some((lo.min(n), hi.max(n))));
    }
}

/// The ids whose notes give the process state, which a fork's cost grows with.
const FORK_ROWS: [&str; 3] = [
    "create.process.fork",
    "create.process.fork.unpinned",
    "destroy.process",
];

/// Adds to the fork rows' process state the mappings their forks copied, once measured: about
/// 1 us of a fork each here (docs/agreement.md, "fork").
fn note_mappings(out: &mut Outcome, s: &Setup) {
    let Some((lo, hi)) = s.maps.get() else { return };
    let maps = if lo == hi {
        format!("{lo} mappings")
    } else {
        format!("{lo}-{hi} mappings")
    };
    for id in FORK_ROWS {
        if let Some(m) = out.metric_mut(id) {
            m.note = m
                .note
                .replacen("process state: ", &format!("process state: {maps}, "), 1);
        }
    }
}

/// The process's threads and the private memory a fork copies the page-table entries of, for
/// the notes (the mappings it copies are added once measured: `note_mappings`): the drift
/// reference's 64 MiB walk is private and resident too, but left out of every fork
/// (MADV_DONTFORK). A fork here cost the same with the walk mapped or never read (three
/// alternated runs: 180.5-195.9 us either way).
fn process_state() -> String {
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    let anon = sys::anon_rss_bytes() as usize;
    let walk = crate::measure::drift::resident_not_forked_bytes().min(anon);
    let mut s = format!(
        "process state: {} thread(s), {:.1} MiB of private memory resident",
        sys::thread_count(),
        mib(anon - walk)
    );
    if walk > 0 {
        s.push_str(&format!(
            " (and the drift reference's {:.0} MiB walk, which fork leaves out)",
            mib(walk)
        ));
    }
    s
}

/// The creation rows (pinned beside default placement, interleaved) and Fig. 1's series.
fn creation(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let cpu = home_cpu();
    // Read before pinning: afterwards this thread's mask is the one CPU.
    let all = ctx.env.allowed_cpus.clone();
    // Everything runs on one CPU, as on the study's uniprocessor: the creator is pinned and
    // new threads, children and the Go peer inherit the mask, so a create+join includes the
    // switch to the new thread and back.
    let _pin = PinGuard::pin(cpu)?;
    let started = peers::start_all(
        ctx.cancel,
        |p| ctx.step(&format!("starting the {} peer", p.title)),
        |p, reason| out.skip(&ids::peer::spawn(p.name), reason),
    )?;
    let map = SharedMap::new(4096)?;
    let setup = Setup {
        cpu,
        placement: Placement::SameCpu(cpu),
        unpinned: (all.len() > 1).then_some(all),
        state: process_state(),
        maps: Cell::new(None),
        thread_share: Cell::new(None),
    };
    let program = trivial_program();
    // The creator is this thread, as in a program whose main thread creates threads, not a
    // fresh measuring thread woken for each batch (`Driver`): the kernel keeps a thread created
    // by a thread another one has just woken on its creator's CPU (16.7 us here against 33.3 us
    // from this thread; a C loop in main, scripts/agreement, takes 31 us).

    // Every row below is read against the others (thread vs process vs green thread vs
    // task vs goroutine), so they are sampled interleaved, round by round.
    let mut group = Interleaved::new();
    thread_rows(&mut group, &setup);
    process_rows(&mut group, &setup, &map);
    match &program {
        Some(prog) => spawn_rows(&mut group, &setup, prog),
        None => out.skip(
            "create.process.spawn",
            "no /bin/true or /usr/bin/true to spawn on this machine",
        ),
    }
    peer_rows(&mut group, &setup, &started, ctx.cancel);
    ratio_rows(&mut group);
    group.measure(ctx, out)?;
    note_mappings(out, &setup);
    flag_idle_vcpu(ctx.env.is_guest(), out);
    drop(started);

    count_series(ctx, out)
}

/// In a guest, the default placement's creation rows wait for an idle vCPU: a child or thread
/// the kernel puts on the other CPU wakes it, and the join or wait then wakes the creator's
/// halted one. How fast the host brings an idle vCPU back changes between runs and holds
/// within one (compare's `idle_vcpu`). In 18 quick runs of `create` on a 2-vCPU KVM guest
/// (2026-11-26) the runs' medians of the pinned rows spread 20.2-20.9 us (thread), 208-233 us
/// (fork) and 573-609 us (spawn), those of the unpinned ones 34.5-45.6, 243-286 and 601-832 us,
/// each run's trials mostly within 10-20%; one A/A pair failed on `create.thread.unpinned`
/// (+17.4%) and `create.process.spawn.unpinned` (+25.8%). The thread row and its ratio to the
/// pinned one carry the flag only when the kernel put at least one thread in ten on the other
/// CPU (on its creator's, no idle vCPU is woken); fork and spawn keep no record of where the
/// child ran, so theirs always do. The pinned rows stay gated.
fn flag_idle_vcpu(guest: bool, out: &mut Outcome) {
    if !guest {
        return;
    }
    let apart = out
        .metric_mut("create.thread.unpinned")
        .and_then(|m| m.trials.as_ref().and_then(|t| t.colocated_median()))
        .map_or(true, |together| together < 0.9);
    let thread: &[&str] = if apart {
        &["create.thread.unpinned", "create.thread.unpinned.vs_pinned"]
    } else {
        &[]
    };
    let children = [
        "create.process.fork.unpinned",
        "create.process.spawn.unpinned",
    ];
    for id in thread.iter().chain(children.iter()) {
        if let Some(m) = out.metric_mut(id) {
            add_flag(m, Flag::IdleVcpu);
        }
    }
}

/// Kernel threads: pthread create+join pinned and in the default placement, std's spawn, and
/// a thread's end as the study measured it.
fn thread_rows<'a>(group: &mut Interleaved<'a>, s: &'a Setup) {
    group
        .row(
            "create.thread",
            Unit::Us,
            s.placement,
            "pthread_create + pthread_join of a thread that returns at once, default attributes \
             (glibc reuses cached stacks), creator and thread on one CPU; nothing subtracted; \
             counterpart: `taskset -c 0 scripts/agreement/create_join.c` (docs/agreement.md)",
            create_join_batch,
        )
        .row(
            "create.thread.unpinned",
            Unit::Us,
            Placement::Unpinned,
            format!(
                "pthread_create + pthread_join of a thread that returns at once, default \
                 attributes, neither creator nor thread pinned: the kernel places the new \
                 thread (on a VM often on the other, idle vCPU, whose wake-up from its idle \
                 state the join then waits for), as a program that sets no affinity gets it, in \
                 a steady stream of creates: each batch follows {} ms of the same, untimed (on \
                 a VM the first several hundred after a pause cost more: docs/agreement.md, \
                 \"Thread creation, settled and cold\"); nothing subtracted; each thread notes \
                 the CPU it ran on, and each trial records the share that ran on the creator's \
                 (trials.colocated: the regime this figure is in); counterpart: \
                 scripts/agreement/create_join.c run bare, its loop in main \
                 (docs/agreement.md)",
                SETTLE.as_millis()
            ),
            move |n| s.default_placed(|| settled_batch(n, &s.thread_share)),
        )
        .colocation_share(move || s.thread_share.get())
        .row(
            "create.thread.std",
            Unit::Us,
            s.placement,
            "std::thread::spawn + join of an empty closure: the pthread pair plus Rust's own \
             set-up (an Arc'd packet, thread name and handle, stack-guard bookkeeping)",
            |n| {
                let t = Instant::now();
                for _ in 0..n {
                    spawn("a thread to create", || {})?
                        .join()
                        .map_err(|_| Error::Fail("a spawned thread panicked".into()))?;
                }
                Ok(t.elapsed())
            },
        )
        .row(
            "destroy.thread",
            Unit::Us,
            s.placement,
            "from the thread's last clock read just before it returns (= pthread_exit) to the \
             return of pthread_join in the creator, as the study measured; one CPU, so this \
             includes the exiting thread's teardown and the switch back to the joiner",
            destroy_thread_batch,
        );
}

/// Processes by fork: fork+exit+wait pinned and in the default placement, and a process's
/// end as the study measured it.
fn process_rows<'a>(group: &mut Interleaved<'a>, s: &'a Setup, map: &'a SharedMap) {
    let state = &s.state;
    group
        .row(
            "create.process.fork",
            Unit::Us,
            s.placement,
            format!(
                "fork + child _exit(0) at once + waitpid; fork copies the parent's mappings and \
                 the page-table entries of its private memory, so the cost grows with both \
                 ({state}; docs/agreement.md, \"fork\"); parent and child on one CPU"
            ),
            move |n| {
                s.count_maps();
                fork_batch(n)
            },
        )
        .row(
            "create.process.fork.unpinned",
            Unit::Us,
            Placement::Unpinned,
            format!(
                "fork + child _exit(0) at once + waitpid, neither parent nor child pinned: \
                 the kernel places the child ({state}), in a steady stream of forks: each \
                 batch follows {} ms of the same, untimed (docs/agreement.md, \"Children, \
                 settled and cold\")",
                SETTLE_CHILDREN.as_millis()
            ),
            move |n| {
                s.count_maps();
                s.default_placed(|| after_lead_in(SETTLE_CHILDREN, 1, n, fork_batch))
            },
        )
        .row(
            "destroy.process",
            Unit::Us,
            s.placement,
            format!(
                "from the child's clock read just before _exit to the return of waitpid in the \
                 parent, as the study measured exit() to wait(); includes tearing down the \
                 child's copy of the address space ({state})"
            ),
            move |n| {
                s.count_maps();
                destroy_process_batch(map, n)
            },
        );
}

/// Processes by posix_spawn of `prog`, pinned and in the default placement.
fn spawn_rows<'a>(group: &mut Interleaved<'a>, s: &'a Setup, prog: &'a CString) {
    let name = prog.to_string_lossy();
    group
        .row(
            "create.process.spawn",
            Unit::Us,
            s.placement,
            format!(
                "posix_spawn of {name} (glibc uses clone(CLONE_VM|CLONE_VFORK), so no page \
                 tables are copied) + waitpid; includes exec, the dynamic loader and the \
                 program's own start-up and exit; `hyperfine -N {name}` times the same (its \
                 mean, not the median)"
            ),
            |n| spawn_batch(prog, n),
        )
        .row(
            "create.process.spawn.unpinned",
            Unit::Us,
            Placement::Unpinned,
            format!(
                "posix_spawn of {name} + waitpid, nothing pinned: the kernel places the child, \
                 as `hyperfine -N {name}` runs it, in a steady stream of spawns as hyperfine's \
                 loop is: each batch follows {} ms of the same, untimed (docs/agreement.md, \
                 \"Children, settled and cold\")",
                SETTLE_CHILDREN.as_millis()
            ),
            move |n| {
                s.default_placed(|| after_lead_in(SETTLE_CHILDREN, 1, n, |k| spawn_batch(prog, k)))
            },
        );
}

/// Every started peer's spawn+join, on the creator's CPU, and in the default placement where
/// the peer has that row; a peer that runs in this process on a runtime started for every
/// trial (`Interleaved::peer_row`).
fn peer_rows<'a>(
    group: &mut Interleaved<'a>,
    s: &'a Setup,
    started: &'a [Started],
    cancel: &'a Cancel,
) {
    for peer in started {
        let id = ids::peer::spawn(peer.info.name);
        group.peer_row(peer, cancel, (&id, s.placement, peer.info.spawn), |r, n| {
            r.spawn_join(n)
        });
        if let Some(note) = peer.info.spawn_unpinned {
            let unpinned = ids::unpinned(&id);
            group.peer_row(
                peer,
                cancel,
                (&unpinned, Placement::Unpinned, note),
                move |r, n| s.default_placed(|| r.spawn_join(n)),
            );
        }
    }
}

/// Ratios taken round by round: what pinning saves, a process over a thread, and the
/// reference peer over a kernel thread and over each other peer.
fn ratio_rows(group: &mut Interleaved<'_>) {
    group
        .ratio(
            "create.thread.unpinned.vs_pinned",
            "create.thread.unpinned",
            "create.thread",
            "what a thread create+join costs where the kernel places the new thread, over \
             the same with creator and thread pinned to one CPU: what pinning saves",
        )
        .ratio(
            "create.process.fork.vs_thread",
            "create.process.fork",
            "create.thread",
            "how many kernel threads cost what one fork+exit+wait costs (the study: 171x)",
        );
    let reference = peers::reference();
    let base = ids::peer::spawn(reference.name);
    group.ratio(
        &ids::ratio(&base, "thread"),
        "create.thread",
        &base,
        format!(
            "how many times cheaper {} is than a kernel thread",
            reference.one
        ),
    );
    for other in peers::others() {
        let note = if other.floor {
            format!(
                "{}'s create + run over {}'s spawn + join: the floor, not a \
                 runtime (no scheduler, no run queue, no join handle), so below 1; 1 / this is \
                 how many of the floor's create + run one spawn + join costs",
                other.one, reference.one
            )
        } else {
            format!(
                "how many times cheaper {} is than {}",
                reference.one, other.one
            )
        };
        group.ratio(
            &ids::ratio(&base, other.name),
            &ids::peer::spawn(other.name),
            &base,
            note,
        );
    }
}

/// Fig. 1's series: the mean time of a create+join over loops of ever more threads.
fn count_series(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    ctx.step("creation time vs number created")?;
    let counts: &[u64] = ctx.mode.pick(
        &[1, 10, 100],
        &[1, 10, 100, 1_000, 10_000],
        &[1, 10, 100, 1_000, 10_000, 100_000],
    );
    let reps = ctx.mode.pick(3, 5, 7);
    let mut ys = Vec::new();
    for &n in counts {
        let mut per = Vec::new();
        for _ in 0..reps {
            ctx.cancel.check()?;
            // One timed loop over n create+join pairs, as the study timed its loop.
            let mut remaining = n;
            let mut took = Duration::ZERO;
            while remaining > 0 {
                let chunk = remaining.min(1_000);
                took += create_join_batch(chunk)?;
                remaining -= chunk;
                ctx.cancel.check()?;
            }
            per.push(took.as_nanos() as f64 / n as f64);
        }
        ys.push(Unit::Us.from_ns(stats::median(&per)));
    }
    out.series.push(Series {
        id: "create.thread.vs_count".into(),
        x_label: "threads created (create+join each)".into(),
        x_unit: Unit::Count,
        y_label: "mean time per create+join".into(),
        y_unit: Unit::Us,
        x: counts.iter().map(|&n| n as f64).collect(),
        y: ys,
        note: format!(
            "median of {reps} timed loops per count; {}",
            seeds::creation_curve_note()
        ),
        historical: None,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Metric;

    fn outcome(figures: &[(&str, f64)]) -> Outcome {
        let mut out = Outcome::default();
        for (id, v) in figures {
            out.add(Metric::single(id, Unit::Ns, *v, "same_cpu(0)", "n"));
        }
        out
    }

    #[test]
    fn the_conclusion_reads_uthread_against_the_floor_not_as_beating_it() {
        let floor = peers::others()
            .find(|p| p.floor)
            .expect("a floor peer is registered");
        let out = outcome(&[
            ("create.green", 28.0),
            ("create.green.vs_thread", 600.0),
            (&ids::ratio("create.green", floor.name), 0.4),
        ]);
        let text = peer_conclusion(&out);
        assert!(
            text.contains(&format!("2.5x what {} costs", floor.one)),
            "{text}"
        );
        assert!(
            !text.contains(&format!("less than {}", floor.one)),
            "{text}"
        );
    }

    fn trials_outcome(together: f64) -> Outcome {
        let mut out = Outcome::default();
        for id in [
            "create.thread",
            "create.thread.unpinned",
            "create.thread.unpinned.vs_pinned",
            "create.process.fork.unpinned",
            "create.process.spawn.unpinned",
        ] {
            let mut m = Metric::from_values(id, Unit::Us, &[1.0, 1.1], 1, "p", "n").unwrap();
            let mut log = stats::TrialLog::for_test(2, 2, 0);
            log.colocated = vec![together; 2];
            m.trials = Some(log);
            out.add(m);
        }
        out
    }

    fn flagged(out: &Outcome) -> Vec<&str> {
        out.metrics
            .iter()
            .filter(|m| m.flags.iter().any(|f| f == "idle_vcpu"))
            .map(|m| m.id.as_str())
            .collect()
    }

    #[test]
    fn in_a_guest_the_default_placement_waits_for_an_idle_vcpu_and_the_pinned_rows_do_not() {
        // Half the threads on the other CPU, as on the 2-vCPU guest.
        let mut out = trials_outcome(0.52);
        flag_idle_vcpu(true, &mut out);
        assert_eq!(
            flagged(&out),
            [
                "create.thread.unpinned",
                "create.thread.unpinned.vs_pinned",
                "create.process.fork.unpinned",
                "create.process.spawn.unpinned"
            ]
        );
        // Every thread on its creator's CPU: no idle vCPU woken for the thread rows.
        let mut out = trials_outcome(0.97);
        flag_idle_vcpu(true, &mut out);
        assert_eq!(
            flagged(&out),
            [
                "create.process.fork.unpinned",
                "create.process.spawn.unpinned"
            ]
        );
        // Bare metal: nothing.
        let mut out = trials_outcome(0.52);
        flag_idle_vcpu(false, &mut out);
        assert!(flagged(&out).is_empty());
    }
}
