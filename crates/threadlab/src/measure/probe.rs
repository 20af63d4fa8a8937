//! Measurements that need a fresh process: threadlab runs itself again as
//! `threadlab __probe NAME --mode M --cpu C` and reads the one line of JSON it prints. The table
//! of probes is `experiments::PROBES`; this is the running of one.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::mode::Mode;
use crate::measure::process::Supervised;
use crate::measure::spawn::start_refused;

/// A probe may run this long before it is stopped.
const PROBE_LIMIT: Duration = Duration::from_secs(120);

/// The exit status of a probe that could not measure here (a resource limit, one CPU, ...):
/// its reason is on stderr, and it becomes the caller's skip, not a failure.
pub const SKIPPED: i32 = 3;

/// Runs probe `name` in a fresh copy of this program and returns what it printed on stdout.
/// An interruption (of the lab, or a terminal's signal reaching the probe) is `Cancelled`,
/// never a failure.
pub fn run_probe(name: &str, mode: Mode, cpu: usize, cancel: &Cancel) -> Result<String> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Skip(format!("cannot find threadlab's own executable: {e}")))?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "__probe",
        name,
        "--mode",
        mode.name(),
        "--cpu",
        &cpu.to_string(),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = Supervised::spawn(&mut cmd, &format!("the {name} probe")).map_err(|e| {
        start_refused(
            &format!("cannot run threadlab again for the {name} probe"),
            &e,
        )
    })?;
    // The probe prints one short line; the pipe buffer holds it until we read it after exit.
    let status = child.wait(cancel, PROBE_LIMIT)?;
    let read = |r: Option<&mut dyn std::io::Read>| {
        let mut s = String::new();
        if let Some(r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    };
    let stdout = read(
        child
            .child
            .stdout
            .as_mut()
            .map(|r| r as &mut dyn std::io::Read),
    );
    child
        .stderr()
        .wait_closed(std::time::Duration::from_millis(200));
    let stderr = child.stderr().text();
    if status.success() {
        return Ok(stdout);
    }
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        if [libc::SIGINT, libc::SIGTERM, libc::SIGHUP].contains(&sig) {
            return Err(Error::Cancelled(sig));
        }
    }
    cancel.check()?;
    let why = stderr.trim();
    if status.code() == Some(SKIPPED) && !why.is_empty() {
        return Err(Error::Skip(why.to_string()));
    }
    if why.contains("overflowed its stack") {
        return Err(Error::Skip(format!(
            "the {name} probe runs in a fresh single-threaded process, whose stack `ulimit -s` \
             keeps too small here (soft and hard limit); raise it (e.g. `ulimit -s 8192`)"
        )));
    }
    Err(Error::Fail(format!(
        "the {name} probe failed ({status}){}",
        if why.is_empty() {
            String::new()
        } else {
            format!(": {why}")
        }
    )))
}
