//! The binary under hostile use: bad paths and arguments, closed pipes, signals at random
//! moments, resource limits. One test per behaviour; structure and outcomes only, never
//! durations (the interruption tests allow a generous bound for a loaded CI machine and report
//! what they saw).

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use threadlab::results::{RunResults, Status};

mod common;
use common::*;

fn tiny(args: &[&OsStr]) -> Output {
    threadlab()
        .arg("run")
        .args(args)
        .args(["--tiny", "--allow-debug"])
        .output()
        .unwrap()
}

fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_fifo_or_a_symlink_given_as_output_is_never_replaced() {
    let d = scratch("devices");
    // A FIFO: the results go through it, and it is still a FIFO afterwards.
    let fifo = d.join("results.fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let o = tiny(&[OsStr::new("sync"), OsStr::new("--json"), fifo.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = reader.join().unwrap();
    let r: RunResults = serde_json::from_str(&text).expect("the FIFO carried a results file");
    assert_eq!(r.experiments[0].name, "sync");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // A symlink: the file it points to is written, the link stays a link.
    let real = d.join("real.md");
    std::fs::write(&real, "old").unwrap();
    let link = d.join("link.md");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = tiny(&[
        OsStr::new("sync"),
        OsStr::new("--no-save"),
        OsStr::new("--markdown"),
        link.as_os_str(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().contains("sync"));
    // /dev/null is written to, never replaced (as root a rename would replace the node).
    let o = tiny(&[
        OsStr::new("sync"),
        OsStr::new("--json"),
        OsStr::new("/dev/null"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // Nothing else was left in the folder (no temporary files).
    let mut left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["link.md", "real.md", "results.fifo"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn output_paths_that_cannot_work_are_refused_before_measuring() {
    let d = scratch("paths");
    let file = d.join("a-file");
    std::fs::write(&file, "").unwrap();
    let ends_in_slash = format!("{}/", d.join("new").display());
    let under_file = file.join("x.json");
    let missing = d.join("no/such/x.json");
    let same = d.join("same.json");
    let same_again = d.join("./same.json");
    let cases: Vec<(Vec<&OsStr>, &str)> = vec![
        (
            vec![OsStr::new("--json"), OsStr::new(&ends_in_slash)],
            "folder",
        ),
        (
            vec![OsStr::new("--json"), under_file.as_os_str()],
            "not a folder",
        ),
        (
            vec![OsStr::new("--json"), missing.as_os_str()],
            "does not exist",
        ),
        (
            vec![
                OsStr::new("--json"),
                same.as_os_str(),
                OsStr::new("--csv"),
                same_again.as_os_str(),
            ],
            "same file",
        ),
    ];
    for (args, why) in cases {
        let mut all = vec![OsStr::new("sync")];
        all.extend(args);
        assert_one_line_usage_error(&tiny(&all), why);
    }
    assert!(!d.join("same.json").exists());
    // A legal name near the 255-byte limit works (its temporary name is short).
    let long = d.join("r".repeat(250) + ".json");
    let o = tiny(&[OsStr::new("sync"), OsStr::new("--json"), long.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(long.exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn arguments_and_environment_are_validated_in_one_line() {
    // A non-UTF-8 argument where a name is expected.
    let o = tiny(&[OsStr::from_bytes(b"\xff\xfe")]);
    assert_one_line_usage_error(&o, "UTF-8");
    // A non-UTF-8 file name is a legal output path.
    let d = scratch("args");
    let odd = d.join(OsStr::from_bytes(b"r\xff.json"));
    let o = tiny(&[OsStr::new("sync"), OsStr::new("--json"), odd.as_os_str()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(odd.exists());
    std::fs::remove_dir_all(&d).unwrap();
    // Out-of-range values.
    let o = threadlab()
        .args(["run", "latency", "--tiny", "--allow-debug", "--no-save"])
        .env("THREADLAB_LATENCY_THRESHOLD_US", "99999999999999999999")
        .output()
        .unwrap();
    assert_one_line_usage_error(&o, "THREADLAB_LATENCY_THRESHOLD_US");
    // A negative number is a value out of range, named with its flag, not an unknown argument.
    for (flag, value) in [
        ("--repeat", "0"),
        ("--repeat", "1000"),
        ("--repeat", "-3"),
        ("--drift-threshold", "-5"),
        ("--budget", "-5s"),
    ] {
        let o = threadlab()
            .args([
                "run",
                "sync",
                "--tiny",
                "--allow-debug",
                "--no-save",
                flag,
                value,
            ])
            .output()
            .unwrap();
        assert_one_line_usage_error(&o, flag);
    }
    for (flag, value) in [
        ("--fail-if-slower", "-5"),
        ("--noise", "-5"),
        ("--alpha", "-0.1"),
    ] {
        let o = threadlab()
            .args(["compare", "a.json", "b.json", flag, value])
            .output()
            .unwrap();
        assert_one_line_usage_error(&o, flag);
    }
    let o = threadlab()
        .args(["__probe", "mutex-single", "--cpu", "4096"])
        .output()
        .unwrap();
    assert_one_line_usage_error(&o, "--cpu 4096");
    // A missing argument is named in the one line (clap lists it on a line of its own).
    let o = threadlab().args(["report"]).output().unwrap();
    assert_one_line_usage_error(&o, "<RESULTS.json>");
    // Bare threadlab: a short usage line, not the whole help.
    let o = threadlab().output().unwrap();
    assert_one_line_usage_error(&o, "usage: threadlab");
}

/// Runs `args` with stdout and stderr connected to pipes whose read ends are already closed.
fn with_closed_pipes(args: &[&str]) -> std::process::ExitStatus {
    let mut child = threadlab()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().unwrap()
}

#[test]
fn a_closed_stdout_or_stderr_is_not_an_error_of_the_run() {
    assert_eq!(with_closed_pipes(&["list"]).code(), Some(0));
    assert_eq!(with_closed_pipes(&["env", "--json"]).code(), Some(0));
    let d = scratch("pipes");
    let json = d.join("r.json");
    let status = with_closed_pipes(&[
        "run",
        "sync",
        "--tiny",
        "--allow-debug",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(0));
    let r: RunResults = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .expect("the results file is written though nothing could be shown");
    assert_eq!(r.experiments[0].status, Status::Ok);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Starts `cmd` as the leader of a new session: threadlab and everything it starts (in
/// process groups of their own, and orphans reparented to init) keep that session's id, so
/// what is left of them can be found afterwards.
fn in_own_session(cmd: &mut Command) -> &mut Command {
    // SAFETY: the hook runs between fork and exec and only calls setsid, which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// A tiny run of `experiments` writing `json`, in its own session, quiet.
fn tiny_run_in_own_session(experiments: &[&str], json: &Path) -> Child {
    in_own_session(&mut threadlab())
        .arg("run")
        .args(experiments)
        .args(["--tiny", "--allow-debug", "--json"])
        .arg(json)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Live pids of session `sid`. Zombies are left out: they have ended and only wait to be
/// reaped, by init when their parent ended first.
fn session_members(sid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, r)| r.split_whitespace().collect())
            .unwrap_or_default();
        let session = fields.get(3).and_then(|v| v.parse::<i32>().ok());
        if session == Some(sid) && fields.first() != Some(&"Z") {
            found.push(pid);
        }
    }
    found
}

/// A small deterministic generator for the moments (no dependency for one number).
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn signals_at_random_moments_end_the_run_cleanly() {
    let d = scratch("signals");
    let mut seed = 0x5eed_u64 ^ std::process::id() as u64;
    let signals = [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ];
    let mut slowest = Duration::ZERO;
    for round in 0..8 {
        let (sig, code) = signals[round % 3];
        let json = d.join(format!("r{round}.json"));
        // Its own session, so every process it starts can be found afterwards.
        let mut child = tiny_run_in_own_session(&["create", "switch", "sync"], &json);
        let sid = child.id() as i32;
        std::thread::sleep(Duration::from_millis(50 + next(&mut seed) % 1500));
        let sent = Instant::now();
        // Every other round to the whole process group, as a terminal's Ctrl-C or hang-up
        // does: then the lab's children (forked partners, the Go peer, probes) get it too.
        let target = if round % 2 == 1 { -sid } else { sid };
        // SAFETY: kill on our own child's pid, or its process group (setsid made it leader).
        unsafe {
            libc::kill(target, sig);
        }
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                sent.elapsed() < Duration::from_secs(30),
                "no exit after the signal"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        slowest = slowest.max(sent.elapsed());
        // Either it finished before the signal landed, or it stopped with 128 + signal.
        let c = status.code();
        assert!(c == Some(code) || c == Some(0), "round {round}: {status:?}");
        std::thread::sleep(Duration::from_millis(50));
        let left: Vec<String> = session_members(sid)
            .iter()
            .map(|p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                format!("{p}: {}", stat.trim())
            })
            .collect();
        assert!(
            left.is_empty(),
            "round {round} ({sig}): processes left: {left:?}"
        );
        // The file is complete, or absent; never a temporary beside it.
        if let Ok(text) = std::fs::read_to_string(&json) {
            let r: RunResults = serde_json::from_str(&text).expect("a complete results file");
            if c == Some(code) {
                assert!(r.interrupted_by.is_some());
            }
        }
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "temporary file {name} left");
        }
    }
    eprintln!("slowest exit after a signal: {slowest:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_second_signal_ends_at_once_and_leaves_nothing_behind() {
    let d = scratch("second");
    let json = d.join("r.json");
    let mut child = tiny_run_in_own_session(&["switch", "create"], &json);
    let sid = child.id() as i32;
    // The moment that matters most: a Go build under way, whose compiler or linker (started by
    // `go`, not by threadlab) must end too. Without a Go toolchain, 400 ms into the run.
    let began = Instant::now();
    let names = || -> Vec<String> {
        session_members(sid)
            .iter()
            .map(|p| {
                let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                comm.trim().to_string()
            })
            .collect()
    };
    loop {
        let now = names();
        let tool = now.iter().any(|n| n == "compile" || n == "link");
        let building = now.iter().any(|n| n == "go");
        let waited = began.elapsed();
        if tool
            || (waited >= Duration::from_millis(400) && !building)
            || waited >= Duration::from_secs(20)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    for _ in 0..2 {
        // SAFETY: kill on our own child's pid.
        unsafe {
            libc::kill(sid, libc::SIGTERM);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let status = child.wait().unwrap();
    assert!(matches!(status.code(), Some(143) | Some(0)), "{status:?}");
    // Every child and helper ends within a second (the Go toolchain's compiler and linker,
    // started by a build the signals interrupted, included).
    let began = Instant::now();
    while !session_members(sid).is_empty() && began.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<String> = session_members(sid)
        .iter()
        .map(|p| {
            let cmd = std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default();
            format!("{p}: {}", cmd.replace('\0', " "))
        })
        .collect();
    assert!(left.is_empty(), "still running after 1 s: {left:?}");
    for e in std::fs::read_dir(&d).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "temporary file {name} left");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs the tiny suite of `exps` under a resource limit set in the child before exec.
fn under_limit(resource: u32, soft: u64, exps: &[&str]) -> (Output, RunResults) {
    let d = scratch(&format!("limit-{resource}-{soft}"));
    let json = d.join("r.json");
    let mut cmd = threadlab();
    cmd.arg("run")
        .args(exps)
        .args(["--tiny", "--allow-debug", "--json", json.to_str().unwrap()]);
    // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: soft,
                rlim_max: soft,
            };
            if libc::setrlimit(resource as _, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let r: RunResults =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("results");
    std::fs::remove_dir_all(&d).unwrap();
    (o, r)
}

#[test]
fn resource_limits_become_skips_with_their_reason() {
    // Few file descriptors: pipes, runtimes' pollers, pools, the balance probe, the Go peer and
    // the server's sockets may be refused; nothing fails, and every refusal names the limit. At
    // 8 the runtimes and pools are refused here, at 16 fewer of them.
    for soft in [8, 16] {
        let exps = ["switch", "create", "sync", "server"];
        let (o, r) = under_limit(libc::RLIMIT_NOFILE, soft, &exps);
        assert!(o.status.success(), "{}", stderr(&o));
        for e in &r.experiments {
            assert_ne!(
                e.status,
                Status::Failed,
                "{soft}: {}: {:?}",
                e.name,
                e.reason
            );
            let reasons = e
                .reason
                .iter()
                .chain(e.skipped_metrics.iter().map(|m| &m.reason));
            for why in reasons.filter(|w| w.contains("Too many open files")) {
                assert!(why.contains("ulimit -n"), "{soft}: {}: {why}", e.name);
            }
        }
    }
    // A tiny stack: the CLI still runs (it raises the limit or uses its own stack).
    let (o, r) = under_limit(libc::RLIMIT_STACK, 64 * 1024, &["sync"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(r.experiments[0].status, Status::Failed);
    // Few processes: only meaningful for an ordinary user (root is exempt from RLIMIT_NPROC).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let (o, r) = under_limit(libc::RLIMIT_NPROC, 8, &["throttle"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let t = &r.experiments[0];
        assert_eq!(t.status, Status::Skipped, "{:?}", t.reason);
        assert!(t.reason.as_deref().unwrap_or("").contains("ulimit -u"));
    } else {
        eprintln!("RLIMIT_NPROC case not run: root is exempt from it");
    }
}
