//! What the binary's integration tests share: running threadlab as a user does, reading its
//! output, scratch folders, and the shape every usage error must have. Each test file takes
//! what it needs, so some of these go unused in one file or another.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test, with no terminal input and no colour.
pub fn threadlab() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_threadlab"));
    c.stdin(Stdio::null()).env("NO_COLOR", "1");
    c
}

pub fn run(args: &[&str]) -> Output {
    threadlab().args(args).output().expect("threadlab runs")
}

/// `threadlab <command> [names...] --tiny --allow-debug [extra...] --json <json>`: a tiny run
/// (or doctor) that writes its results file to `json`.
pub fn run_tiny(command: &str, names: &[&str], extra: &[&str], json: &Path) -> Output {
    let mut args = vec![command];
    args.extend_from_slice(names);
    args.extend_from_slice(&["--tiny", "--allow-debug"]);
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    run(&args)
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// An empty folder of this test file's own (`threadlab-<file>-<pid>-<name>`) under the
/// temporary directory; whatever an earlier run left there is removed first. The folder goes
/// when the guard is dropped, unless the test is failing (then it stays, to be looked at).
pub fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!(
        "threadlab-{}-{}-{name}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// A test's scratch folder (`scratch`), removed on drop.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            // A file the test made read-only, or a folder it left unwritable, must not keep
            // the rest: make the tree writable again first.
            make_writable(&self.0);
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Gives the owner write access to `p` and everything below it (and to folders read and
/// search access, to reach what is inside), as `chmod -R u+w` without a child process or its
/// complaint about a folder the test already removed. Symbolic links are left alone.
fn make_writable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return;
    };
    if meta.file_type().is_symlink() {
        return;
    }
    let mut perm = meta.permissions();
    let add = if meta.is_dir() { 0o700 } else { 0o200 };
    perm.set_mode(perm.mode() | add);
    let _ = std::fs::set_permissions(p, perm);
    if meta.is_dir() {
        for entry in std::fs::read_dir(p).into_iter().flatten().flatten() {
            make_writable(&entry.path());
        }
    }
}

/// A usage mistake: exit status 2, exactly one line on stderr, no panic text.
pub fn assert_one_line_usage_error(o: &Output, must_contain: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err:?}");
    assert!(err.contains(must_contain), "{err:?} lacks {must_contain:?}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"));
}
