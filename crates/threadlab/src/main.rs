//! The `threadlab` binary: everything is in the library; this only sets the panic hook and exits.

// uthread's preemptive threads (the preempt experiment) switch inside the timer signal handler
// only when the global allocator is preempt-safe: a thread preempted inside malloc would
// otherwise deadlock the next green thread on the same carrier.
#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

fn main() {
    // A panic inside an experiment is caught and reported as that experiment's failure. The
    // default hook would print a backtrace hint; this one prints one line instead.
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("threadlab: internal error{location}; please report it with the results file");
    }));
    let code = threadlab::cli::main_with_args(std::env::args().collect());
    std::process::exit(code);
}
