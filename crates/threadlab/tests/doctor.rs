//! `threadlab doctor` as a user meets it: its results file and report, and the machine left as
//! it was. Machine-wide settings are exercised against files in a temporary folder standing in
//! for /sys and /proc/sys (`--machine-root`), so no test needs root or touches the machine's
//! own settings. Structure and behaviour only, never durations.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use threadlab::results::{RunResults, Status};

mod common;
use common::*;

/// A folder standing in for / with the settings doctor may change: every CPU's resume-latency
/// limit (the per-CPU PM QoS knob writes the woken thread's CPU's), haltpoll's window and the
/// RT runtime, plus a boot id and /run for the journal.
fn fake_root(name: &str) -> common::Scratch {
    let root = scratch(name);
    let mut files: Vec<(String, &str)> = vec![
        (
            "sys/module/haltpoll/parameters/guest_halt_poll_ns".into(),
            "0\n",
        ),
        ("proc/sys/kernel/sched_rt_runtime_us".into(), "950000\n"),
        ("proc/sys/kernel/random/boot_id".into(), "test-boot\n"),
    ];
    for cpu in threadlab::measure::placement::allowed_cpus() {
        files.push((
            format!("sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"),
            "0\n",
        ));
    }
    for (path, value) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, value).unwrap();
    }
    std::fs::create_dir_all(root.join("run")).unwrap();
    root
}

/// Every stand-in setting and its value.
fn settings(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.join("sys"), root.join("proc")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let v = std::fs::read_to_string(&p).unwrap().trim().to_string();
                out.push((p.display().to_string(), v));
            }
        }
    }
    out.sort();
    out
}

fn doctor(root: &Path, extra: &[&str]) -> std::process::Command {
    let mut c = threadlab();
    c.args([
        "doctor",
        "--tiny",
        "--allow-debug",
        "--allow-machine-changes",
        "--machine-root",
        root.to_str().unwrap(),
    ])
    .args(extra);
    c
}

/// The per-CPU limit the knob writes while "on": the CPU of the woken thread.
fn resume_file(root: &Path) -> Option<PathBuf> {
    let (_, b) = threadlab::measure::placement::cpu_pair()?;
    Some(root.join(format!(
        "sys/devices/system/cpu/cpu{b}/power/pm_qos_resume_latency_us"
    )))
}

/// A doctor run (saving nothing) caught inside an "on" phase: `file` reads "n/a".
fn doctor_in_on_phase(root: &Path, file: &Path) -> Child {
    let mut child = doctor(root, &["--no-save"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&mut child, file, "n/a");
    child
}

/// Waits until `file` reads `value` (the run is inside an "on" phase), at most a minute.
fn wait_for(child: &mut Child, file: &Path, value: &str) {
    let t = Instant::now();
    loop {
        if std::fs::read_to_string(file).is_ok_and(|v| v.trim() == value) {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            if let Some(o) = child.stdout.as_mut() {
                use std::io::Read;
                let _ = o.read_to_string(&mut out);
            }
            panic!(
                "doctor ended ({status}) before it changed {}: {out}",
                file.display()
            );
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the setting never changed"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill on our own child's pid, which it keeps until we reap it.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

fn exit_code(child: &mut Child) -> Option<i32> {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "doctor did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_tiny_doctor_writes_facts_knobs_and_reasons() {
    let dir = scratch("tiny");
    let json = dir.join("d.json");
    let o = run_tiny("doctor", &[], &[], &json);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: RunResults = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.experiments.len(), 1);
    let e = &r.experiments[0];
    assert_eq!(e.name, "doctor");
    if e.status == Status::Skipped {
        return; // one CPU: the reason says so
    }
    assert_eq!(e.status, Status::Ok, "{:?}", e.reason);
    let table = |id: &str| e.tables.iter().find(|t| t.id == id);
    assert!(table("doctor.facts").unwrap().rows.len() >= 12);
    // Every knob is either measured (in the apply table as such) or skipped with a reason.
    let apply = table("doctor.apply").unwrap();
    assert!(apply.rows.len() >= 8);
    for row in &apply.rows {
        let measured = row[4].starts_with("measured");
        let skipped = e
            .skipped_metrics
            .iter()
            .any(|s| s.id == format!("doctor.{}", row[0]) && !s.reason.is_empty());
        assert!(measured != skipped, "{row:?}");
    }
    // Without --allow-machine-changes the machine-wide knobs say why they were not tried.
    let why = |id: &str| {
        e.skipped_metrics
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.reason.clone())
    };
    assert!(why("doctor.rt_throttling").is_some());
    for m in e.metrics.iter().filter(|m| m.id.ends_with(".effect")) {
        let of = m
            .ratio_of
            .as_ref()
            .expect("an effect names what it divides");
        assert!(
            e.metric(&of[0]).is_some() && e.metric(&of[1]).is_some(),
            "{}",
            m.id
        );
    }
    // The huge-page figures walk 64 MiB: compare reads them against the memory walk. Where
    // the machine has no transparent huge pages the setting is skipped with its reason.
    let thp: Vec<_> = e
        .metrics
        .iter()
        .filter(|m| m.id.starts_with("doctor.thp."))
        .collect();
    assert!(!thp.is_empty() || why("doctor.thp").is_some());
    for m in &thp {
        let walks = m.ratio_of.is_none() && !m.id.starts_with("doctor.thp.cpu.");
        assert_eq!(m.memory_bound, walks, "{}", m.id);
    }
    assert!(thp.is_empty() || thp.iter().filter(|m| m.memory_bound).count() == 4);
    // In a guest, a figure that wakes a thread on another, idle vCPU (and the CPU burned while
    // it ran) carries idle_vcpu; figures on one CPU and the effect rows never do.
    let guest = r.environment.virtualized == Some(true);
    let idle = |id: &str| {
        e.metric(id)
            .map(|m| m.flags.iter().any(|f| f == "idle_vcpu"))
    };
    for m in &e.metrics {
        let flagged = m.flags.iter().any(|f| f == "idle_vcpu");
        let one_cpu = m.placement.starts_with("same_cpu") && !m.id.contains(".cpu.");
        if m.id.ends_with(".effect") || one_cpu || !guest {
            assert!(!flagged, "{} ({})", m.id, m.placement);
        }
    }
    // same_cpu: the kernel places the hand-off's threads with it off, one CPU holds both on.
    if let Some(flagged) = idle("doctor.same_cpu.handoff.off") {
        assert_eq!(flagged, guest);
        assert_eq!(idle("doctor.same_cpu.cpu.off"), Some(guest));
        assert_eq!(idle("doctor.same_cpu.handoff.on"), Some(false));
        assert_eq!(idle("doctor.same_cpu.cpu.on"), Some(false));
    }
    // A waiter that spins for the hand-off is not asleep when it comes.
    if let Some(flagged) = idle("doctor.spin_then_park.handoff.off") {
        assert_eq!(flagged, guest);
        assert_eq!(idle("doctor.spin_then_park.handoff.on"), Some(false));
    }
    assert_ne!(idle("doctor.timer_slack.timer.off"), Some(true));
    // The terminal report has every section; the HTML report says what to change.
    let out = stdout(&o);
    for needle in [
        "What shapes thread performance",
        "Settings measured A/B",
        "How to apply",
    ] {
        assert!(out.contains(needle), "{needle} missing");
    }
    let html = std::fs::read_to_string(dir.join("d.html")).unwrap();
    assert!(html.contains("What to change on this machine"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn machine_settings_are_restored_after_a_run_and_after_sigterm_in_an_on_phase() {
    let root = fake_root("sigterm");
    let Some(file) = resume_file(&root) else {
        return; // one CPU: no cross-CPU knob runs
    };
    let before = settings(&root);
    let o = doctor(&root, &["--no-save"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("written back and read again"),
        "the restores are reported"
    );
    assert_eq!(
        settings(&root),
        before,
        "a whole run leaves every value as it was"
    );
    assert!(!root.join("run/threadlab-doctor.journal").exists());

    let mut child = doctor_in_on_phase(&root, &file);
    signal(&child, libc::SIGTERM);
    assert_eq!(exit_code(&mut child), Some(143));
    assert_eq!(
        settings(&root),
        before,
        "SIGTERM in an on phase restores it"
    );
    assert!(!root.join("run/threadlab-doctor.journal").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_second_signal_restores_from_the_handler_and_sigkill_from_the_journal() {
    let root = fake_root("kill");
    let Some(file) = resume_file(&root) else {
        return;
    };
    let before = settings(&root);
    // Two signals: the second ends the process at once, from the handler.
    let mut child = doctor_in_on_phase(&root, &file);
    signal(&child, libc::SIGTERM);
    signal(&child, libc::SIGTERM);
    let code = exit_code(&mut child);
    assert_eq!(code, Some(143));
    assert_eq!(settings(&root), before, "the handler wrote the value back");

    // SIGKILL: nothing runs, the journal remembers, the next run restores.
    let mut child = doctor_in_on_phase(&root, &file);
    signal(&child, libc::SIGKILL);
    let _ = exit_code(&mut child);
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "n/a");
    let journal = std::fs::read_to_string(root.join("run/threadlab-doctor.journal")).unwrap();
    assert!(journal.contains("pm_qos_resume_latency_us\t0"), "{journal}");
    let o = doctor(&root, &["--no-save"]).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("a run that was killed"),
        "{}",
        stdout(&o)
    );
    assert_eq!(settings(&root), before);
    assert!(!root.join("run/threadlab-doctor.journal").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_unprivileged_user_gets_root_only_knobs_skipped_with_the_reason() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        return; // needs root to become another user; an ordinary user runs the test below
    }
    let o = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_threadlab"))
        .args([
            "doctor",
            "--tiny",
            "--allow-debug",
            "--no-save",
            "--allow-machine-changes",
        ])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if o.status.code() == Some(126) || stderr(&o).contains("Permission denied") {
        return; // the test binary is not reachable by that user here
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Not tried here, and why"), "{out}");
    // /dev/cpu_dma_latency and the machine-wide files are root's.
    assert!(out.contains("idle_latency"), "{out}");
    assert!(!out.contains("FAILED") && !out.contains("panicked"));
}

#[test]
fn an_unknown_setting_or_a_missing_root_is_one_line_and_status_2() {
    let o = run(&["doctor", "no_such_knob", "--allow-debug", "--no-save"]);
    assert_one_line_usage_error(&o, "idle_latency");
    let o = run(&[
        "doctor",
        "--allow-debug",
        "--no-save",
        "--machine-root",
        "/nonexistent-folder",
    ]);
    assert_one_line_usage_error(&o, "not a folder");
    let o = run(&["doctor", "--tiny", "--quick", "--allow-debug", "--no-save"]);
    assert_one_line_usage_error(&o, "--quick");
}
