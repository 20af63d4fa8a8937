//! Stack overflow into the guard page is reported by thread name and aborts the process.
//! The test re-executes its own binary with an environment variable; the child overflows.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

const CHILD_ENV: &str = "UTHREAD_GUARD_CHILD";

#[inline(never)]
fn recurse(depth: u64, buf: &mut [u8; 512]) -> u64 {
    let mut local = [0u8; 512];
    local[(depth % 512) as usize] = depth as u8;
    std::hint::black_box(&mut local);
    buf[0] = buf[0].wrapping_add(1);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1, &mut local) + local[3] as u64
}

fn child(mode: &str) {
    let preemptive = mode == "preemptive";
    let rt = uthread::Runtime::builder()
        .quantum(std::time::Duration::from_micros(100))
        .build()
        .unwrap();
    rt.block_on(|| {
        let h = uthread::Builder::new()
            .name("deep-recursion")
            .stack_size(32 * 1024)
            .mode(if preemptive {
                uthread::Mode::Preemptive
            } else {
                uthread::Mode::Cooperative
            })
            .spawn(|| recurse(0, &mut [0u8; 512]))
            .unwrap();
        h.join();
    });
    eprintln!("child survived: this must not happen");
}

fn run_child(mode: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "overflow_child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, mode)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let sig = out.status.signal();
    assert!(
        sig == Some(libc::SIGABRT) || sig == Some(libc::SIGSEGV),
        "child should die by SIGABRT/SIGSEGV, got {:?}; stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("green thread 'deep-recursion'") && stderr.contains("overflowed its stack"),
        "stderr should name the thread:\n{stderr}"
    );
}

/// Entry point of the child process (a no-op in a normal test run).
#[test]
fn overflow_child_entry() {
    if let Ok(mode) = std::env::var(CHILD_ENV) {
        child(&mode);
    }
}

#[test]
fn overflow_is_reported_by_name_cooperative() {
    run_child("cooperative");
}

#[test]
fn overflow_is_reported_by_name_preemptive() {
    run_child("preemptive");
}

fn current_alt_stack() -> libc::stack_t {
    // SAFETY: querying the alternate signal stack with a valid out-pointer.
    unsafe {
        let mut st: libc::stack_t = std::mem::zeroed();
        assert_eq!(libc::sigaltstack(std::ptr::null(), &mut st), 0);
        st
    }
}

/// The fault handler formats its message on the alternate signal stack; Rust's own (8 KiB) is
/// too small for that in a debug build once a signal frame sits on it too. A carrier runs with
/// a larger one and gives the thread's own back when it ends.
#[test]
fn carrier_has_a_large_alternate_stack_and_restores_the_old_one() {
    let before = current_alt_stack();
    let rt = uthread::Runtime::builder().build().unwrap();
    let inside = rt.block_on(|| {
        let st = current_alt_stack();
        (st.ss_flags, st.ss_size)
    });
    assert_eq!(
        inside.0 & libc::SS_DISABLE,
        0,
        "no alternate stack in the carrier"
    );
    assert!(
        inside.1 >= 64 * 1024,
        "alternate stack of {} bytes",
        inside.1
    );
    let after = current_alt_stack();
    assert_eq!(
        (
            after.ss_sp,
            after.ss_size,
            after.ss_flags & libc::SS_DISABLE
        ),
        (
            before.ss_sp,
            before.ss_size,
            before.ss_flags & libc::SS_DISABLE
        )
    );
}
