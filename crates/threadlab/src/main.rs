//! The `threadlab` binary: everything is in the library; this only prepares the process (panic
//! hook, stack) and exits with the status the CLI chose.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::io::Write;

// uthread's preemptive threads (the preempt experiment) switch inside the timer signal handler
// only when the global allocator is preempt-safe: a thread preempted inside malloc would
// otherwise deadlock the next green thread on the same carrier.
#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

/// The stack the CLI needs; a smaller `ulimit -s` would abort it with a stack overflow.
const STACK: usize = 8 << 20;

fn main() {
    // Before anything else, while this is the only thread: children must not inherit the
    // library path `cargo run` adds (threadlab::launch).
    threadlab::launch::drop_cargo_library_path();
    // A panic inside an experiment is caught and reported as that experiment's failure. The
    // default hook would print a backtrace hint; this one prints one line instead, and never
    // panics itself on a closed stderr.
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let _ = writeln!(
            std::io::stderr(),
            "threadlab: internal error{location}; please report it with the results file"
        );
    }));
    // Arguments stay OS strings: a file name need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let code = if stack_limit_allows(STACK) || is_probe(&args) {
        // A probe must stay the process's only thread (glibc's single-thread state); it needs
        // far less stack than the CLI's full path.
        threadlab::cli::main_with_args(args)
    } else {
        // `ulimit -s` is below what the CLI needs and cannot be raised: run it on a thread
        // whose stack is mapped explicitly (not subject to RLIMIT_STACK).
        match std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || threadlab::cli::main_with_args(args))
        {
            Ok(h) => h.join().unwrap_or(1),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "threadlab: cannot start: {e}; raise `ulimit -s` (stack) or `ulimit -u` (threads)"
                );
                2
            }
        }
    };
    std::process::exit(code);
}

fn is_probe(args: &[std::ffi::OsString]) -> bool {
    args.get(1).is_some_and(|a| a == "__probe")
}

/// Raises the soft stack limit to `want` when the hard limit allows; true if the main thread may
/// now grow its stack that far.
fn stack_limit_allows(want: usize) -> bool {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) } != 0 {
        return true; // unknown: assume the usual 8 MiB
    }
    let want = want as libc::rlim_t;
    if rl.rlim_cur == libc::RLIM_INFINITY || rl.rlim_cur >= want {
        return true;
    }
    if rl.rlim_max != libc::RLIM_INFINITY && rl.rlim_max < want {
        return false;
    }
    rl.rlim_cur = want;
    // SAFETY: as above; raising the soft limit up to the hard one needs no privilege. The main
    // thread's stack grows on demand against the soft limit at the time of the fault, and the
    // kernel left at least 128 MiB below it for growth when it placed the mappings at exec.
    unsafe { libc::setrlimit(libc::RLIMIT_STACK, &rl) == 0 }
}
