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
