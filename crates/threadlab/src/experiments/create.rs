//! `create`: what it costs to make and end a thread or a process (PThreads 1999, section 4.1).

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Interleaved, Outcome};
use crate::measure::placement::{home_cpu, PinGuard, Placement};
use crate::measure::process::{fork_child, mono_ns, wait_pid, SharedMap};
use crate::measure::spawn::spawn;
use crate::measure::stats;
use crate::measure::units::Unit;
use crate::results::Series;
use crate::seeds;
use crate::subjects::peers::go::{GoBench, GoPeer};
use crate::subjects::peers::{green, tokio_rt};
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
    rough_secs: [1.0, 6.0, 42.0],
};

impl Experiment for Create {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        creation(ctx, out)?;
        // Pool balance (bursts on two CPUs), in a process of its own: its pools, runtimes and
        // their threads' malloc arenas stay mapped, and every later fork here would copy them.
        balance::measure_in_child(ctx, out)?;
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
        let mut green = String::new();
        if let (Some(g), Some(r)) = (
            out.median("create.green"),
            out.median("create.green.vs_thread"),
        ) {
            green = format!(
                " A green thread (uthread, pooled stack) costs {g:.0} ns, {r:.0}x less than a \
                 kernel thread on one CPU"
            );
            let peers: Vec<String> = [
                ("create.green.vs_tokio", "a Tokio task"),
                ("create.green.vs_go", "a goroutine"),
            ]
            .iter()
            .filter_map(|(id, what)| out.median(id).map(|r| format!("{r:.1}x less than {what}")))
            .collect();
            if !peers.is_empty() {
                green.push_str(&format!(" and {}", peers.join(" and ")));
            }
            green.push_str(
                " (ratios taken round by round): for many short tasks on few cores, user-level \
                 threads or tasks win.",
            );
        }
        out.conclusion = Some(format!(
            "A kernel thread costs {thread:.1} us to create and join here{placed}, a \
             fork+exit+wait {fork:.0} us on one CPU ({fork_ratio:.0}x a thread there; the study \
             saw ~171x). A thread per task is affordable when the task runs for well over {:.0} \
             us; below that, reuse threads from a pool.{green}",
            thread * 10.0
        ));
        Ok(())
    }
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
    let placement = Placement::SameCpu(cpu);
    let state = format!(
        "process state: {} thread(s), {:.0} MiB resident",
        sys::thread_count(),
        sys::rss_bytes() as f64 / (1 << 20) as f64
    );

    ctx.step("starting the Go peer")?;
    let mut go = match GoPeer::start(ctx.cancel) {
        Ok(peer) => Some(peer),
        Err(Error::Skip(reason)) => {
            out.skip("create.go", reason);
            None
        }
        Err(e) => return Err(e),
    };
    let green_rt = uthread::Runtime::new();
    let tokio_rt = tokio_rt::runtime()?;
    let map = SharedMap::new(4096)?;
    let program = trivial_program();
    // The default placement: the creator allowed on every CPU this process may use, new
    // threads and children inheriting that, as in a program that sets no affinity. The
    // creator's own pin is lifted for each batch of these rows (outside the timed span).
    let unpinned = (all.len() > 1).then_some(all.as_slice());
    let default_placed = |run: &dyn Fn() -> Result<Duration>| -> Result<Duration> {
        let _free = PinGuard::pin_set(unpinned.unwrap_or(&[cpu]))?;
        run()
    };
    // The creator is this thread, as in a program whose main thread creates threads, not a
    // fresh measuring thread woken for each batch (`Driver`): the kernel keeps a thread created
    // by a thread another one has just woken on its creator's CPU (16.7 us here against 33.3 us
    // from this thread; a C loop in main, scripts/agreement, takes 31 us).

    // Every row below is read against the others (thread vs process vs green thread vs
    // task vs goroutine), so they are sampled interleaved, round by round.
    let mut group = Interleaved::new();
    group
        .row(
            "create.thread",
            Unit::Us,
            placement,
            "pthread_create + pthread_join of a thread that returns at once, default attributes \
                 (glibc reuses cached stacks), creator and thread on one CPU; nothing subtracted; \
                 counterpart: `taskset -c 0 scripts/agreement/create_join.c` (docs/agreement.md)",
            create_join_batch,
        )
        .row(
            "create.thread.unpinned",
            Unit::Us,
            Placement::Unpinned,
            "pthread_create + pthread_join of a thread that returns at once, default \
                 attributes, neither creator nor thread pinned: the kernel places the new thread \
                 (on a VM often on the other, idle vCPU, whose wake-up from its idle state the \
                 join then waits for), as a program that sets no affinity gets it; nothing \
                 subtracted; counterpart: scripts/agreement/create_join.c run bare, its loop in \
                 main (docs/agreement.md)",
            |n| default_placed(&|| create_join_batch(n)),
        )
        .row(
            "create.thread.std",
            Unit::Us,
            placement,
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
            placement,
            "from the thread's last clock read just before it returns (= pthread_exit) to the \
                 return of pthread_join in the creator, as the study measured; one CPU, so this \
                 includes the exiting thread's teardown and the switch back to the joiner",
            destroy_thread_batch,
        )
        .row(
            "create.process.fork",
            Unit::Us,
            placement,
            format!(
                "fork + child _exit(0) at once + waitpid; fork copies page tables, so the cost \
                     grows with the parent's size ({state}); parent and child on one CPU"
            ),
            fork_batch,
        )
        .row(
            "create.process.fork.unpinned",
            Unit::Us,
            Placement::Unpinned,
            format!(
                "fork + child _exit(0) at once + waitpid, neither parent nor child pinned: \
                     the kernel places the child ({state})"
            ),
            |n| default_placed(&|| fork_batch(n)),
        )
        .row(
            "destroy.process",
            Unit::Us,
            placement,
            format!(
                "from the child's clock read just before _exit to the return of waitpid in the \
                     parent, as the study measured exit() to wait(); includes tearing down the \
                     child's copy of the address space ({state})"
            ),
            |n| destroy_process_batch(&map, n),
        );
    match &program {
        Some(prog) => {
            group.row(
                "create.process.spawn",
                Unit::Us,
                placement,
                format!(
                    "posix_spawn of {} (glibc uses clone(CLONE_VM|CLONE_VFORK), so no page \
                         tables are copied) + waitpid; includes exec, the dynamic loader and the \
                         program's own start-up and exit; `hyperfine -N {}` times the same \
                         (its mean, not the median)",
                    prog.to_string_lossy(),
                    prog.to_string_lossy()
                ),
                |n| spawn_batch(prog, n),
            );
            group.row(
                "create.process.spawn.unpinned",
                Unit::Us,
                Placement::Unpinned,
                format!(
                    "posix_spawn of {} + waitpid, nothing pinned: the kernel places the \
                         child, as `hyperfine -N {}` runs it",
                    prog.to_string_lossy(),
                    prog.to_string_lossy()
                ),
                |n| default_placed(&|| spawn_batch(prog, n)),
            );
        }
        None => out.skip(
            "create.process.spawn",
            "no /bin/true or /usr/bin/true to spawn on this machine",
        ),
    }
    group
            .row(
                "create.green",
                Unit::Ns,
                placement,
                "uthread::spawn of a closure returning at once + join, one carrier (M:1), default \
                 runtime: 256 KiB guarded stacks from the runtime's pool (reused after warm-up), the \
                 thread's control block in a page on top of its stack, no heap allocation; timed \
                 inside block_on, nothing subtracted",
                |n| Ok(green::spawn_join_batch(&green_rt, n)),
            )
            .row(
                "create.green.unpinned",
                Unit::Ns,
                Placement::Unpinned,
                "uthread::spawn + join as create.green, with the carrier (the calling OS thread) \
                 not pinned: all green threads still run on that one carrier, so only the \
                 kernel moving the carrier between CPUs can change the figure",
                |n| default_placed(&|| Ok(green::spawn_join_batch(&green_rt, n))),
            )
            .row(
                "create.tokio",
                Unit::Ns,
                placement,
                "tokio current_thread runtime: tokio::spawn of an empty async block, then .await on \
                 its JoinHandle, one at a time; timed inside block_on, nothing subtracted",
                |n| Ok(tokio_rt::spawn_join_batch(&tokio_rt, n)),
            );
    if let Some(go) = go.as_mut() {
        group.row(
            "create.go",
            Unit::Ns,
            placement,
            "Go, GOMAXPROCS=1: `go` of a goroutine that calls wg.Done(), then wg.Wait(), one at \
                 a time; the Go program (built at run time, inheriting the CPU) times each batch \
                 and the lab's sampler asks for them, interleaved with the other rows; nothing \
                 subtracted",
            |n| go.batch(GoBench::Spawn, n),
        );
    }
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
        )
        .ratio(
            "create.green.vs_thread",
            "create.thread",
            "create.green",
            "how many times cheaper a green thread is than a kernel thread",
        )
        .ratio(
            "create.green.vs_tokio",
            "create.tokio",
            "create.green",
            "how many times cheaper a green thread is than a Tokio task",
        )
        .ratio(
            "create.green.vs_go",
            "create.go",
            "create.green",
            "how many times cheaper a green thread is than a goroutine",
        );
    group.measure(ctx, out)?;
    drop(go);

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
