//! Building a Go program of the lab's at run time (the goroutine peer of create/switch, the Go
//! server): the local toolchain only, offline, in a temporary folder removed afterwards (by the
//! next build when its process was killed outright), the build supervised (killed with its
//! compiler and linker on an interruption or after a limit). No toolchain, or a build that
//! fails, is a skip with what was found.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::env::{rlimit, Rlimit};
use crate::measure::process::Supervised;
use crate::measure::spawn::start_refused;

/// How long a build may take (a cold Go cache compiles the runtime: about 15 s here).
const BUILD_LIMIT: Duration = Duration::from_secs(300);

/// A built program; its folder (and the program) go when this is dropped.
pub struct Built {
    pub exe: PathBuf,
    dir: PathBuf,
}

impl Drop for Built {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Which program a build makes: module, program name, and a hash of the source.
type Key = (String, String, u64);

/// The programs built while a `KeepBuilds` lives (`guards` of them), for handing out again.
#[derive(Default)]
struct Kept {
    guards: usize,
    built: Vec<(Key, Arc<Built>)>,
}

impl Kept {
    /// The program built for `key` before, if it is still on disk.
    fn find(&self, key: &Key) -> Option<Arc<Built>> {
        self.built
            .iter()
            .find(|(k, b)| k == key && b.exe.is_file())
            .map(|(_, b)| Arc::clone(b))
    }

    /// Keeps `built` for `key` while a guard lives (in place of one whose program went).
    fn keep(&mut self, key: Key, built: &Arc<Built>) {
        if self.guards > 0 {
            self.built.retain(|(k, _)| *k != key);
            self.built.push((key, Arc::clone(built)));
        }
    }

    /// One guard ends; the last hands back what was kept, for the caller to drop (outside the
    /// lock: dropping removes folders).
    fn release(&mut self) -> Vec<(Key, Arc<Built>)> {
        self.guards = self.guards.saturating_sub(1);
        if self.guards == 0 {
            std::mem::take(&mut self.built)
        } else {
            Vec::new()
        }
    }
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    guards: 0,
    built: Vec::new(),
});

fn kept() -> std::sync::MutexGuard<'static, Kept> {
    // A panic while the list was held leaves it whole: entries are pushed, read or taken,
    // never half-written.
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// While one of these lives, a program built once is handed out again to whoever builds the
/// same source, instead of being built anew; when the last is dropped the kept folders go (a
/// program still held elsewhere keeps its own until that holder drops it). A run keeps one for
/// its whole length: it starts the Go peer and the Go server five times, and `go build`
/// relinks the program each time (0.4-0.6 s each with a warm build cache).
pub struct KeepBuilds(());

/// Keeps the programs built from here until the guard is dropped.
pub fn keep_builds() -> KeepBuilds {
    kept().guards += 1;
    KeepBuilds(())
}

impl Drop for KeepBuilds {
    fn drop(&mut self) {
        let gone = kept().release();
        drop(gone);
    }
}

/// Builds `source` (one `main.go`, module `module`) into a program named `exe_name`; `what`
/// names it in messages ("the Go peer program"). While a `KeepBuilds` lives, the same source
/// built before is handed out again (its program still on disk).
pub fn build(
    source: &str,
    module: &str,
    exe_name: &str,
    what: &str,
    cancel: &Cancel,
) -> Result<Arc<Built>> {
    let key = (
        module.to_string(),
        exe_name.to_string(),
        source_hash(source),
    );
    let found = kept().find(&key);
    if let Some(b) = found {
        return Ok(b);
    }
    let built = Arc::new(build_anew(source, module, exe_name, what, cancel)?);
    kept().keep(key, &built);
    Ok(built)
}

fn source_hash(source: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut h);
    h.finish()
}

fn build_anew(
    source: &str,
    module: &str,
    exe_name: &str,
    what: &str,
    cancel: &Cancel,
) -> Result<Built> {
    check_toolchain(cancel)?;
    let tmp = std::env::temp_dir();
    sweep_stale(&tmp, exe_name);
    let dir = tmp.join(format!(
        "threadlab-{exe_name}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::Skip(format!(
            "cannot make a build folder for {what} in {}: {e}",
            dir.display()
        ))
    })?;
    // From here the folder is removed on every path, the guard owning it.
    let built = Built {
        exe: dir.join(exe_name),
        dir,
    };
    std::fs::write(
        built.dir.join("go.mod"),
        format!("module {module}\n\ngo 1.21\n"),
    )?;
    std::fs::write(built.dir.join("main.go"), source)?;
    let mut cmd = go_command(&built.dir);
    cmd.arg("build")
        .arg("-o")
        .arg(&built.exe)
        .arg(".")
        .current_dir(&built.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut builder = Supervised::spawn(&mut cmd, &format!("`go build` of {what}"))
        .map_err(|e| start_refused("cannot run `go build`", &e))?;
    let status = builder.wait(cancel, BUILD_LIMIT)?;
    if !status.success() {
        builder.stderr().wait_closed(Duration::from_millis(200));
        return Err(Error::Skip(format!(
            "`go build` of {what} failed ({status}): {}",
            builder.stderr().text()
        )));
    }
    Ok(built)
}

static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Removes the build folders (`threadlab-<exe_name>-<pid>-<n>` in `tmp`) of processes that no
/// longer exist. A process killed outright cannot remove its own: a probe child that built the
/// Go peer dies with the lab by SIGKILL (PR_SET_PDEATHSIG) when a run is interrupted, and each
/// such folder holds a 2.5 MB program. A folder whose process still runs, or that this user
/// may not remove, stays.
fn sweep_stale(tmp: &Path, exe_name: &str) {
    let prefix = format!("threadlab-{exe_name}-");
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some((pid, seq)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), seq.parse::<u32>()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How long `go version` may take: it answers in milliseconds; a `go` that hangs (a wrapper
/// waiting for a download, a broken installation) is stopped rather than waited for.
const VERSION_LIMIT: Duration = Duration::from_secs(10);

/// The fewest descriptors `go` is run with. Go raises its soft limit to the hard one itself, so
/// the hard limit is what counts. During runs of the lab under hard limits from 5 to 256, one
/// of its builds left the Go build cache with a package index made while directories could not
/// be opened: every later `go build` on the machine, with any limit, then failed with "package
/// internal/cpu is not in std" until the cache was moved aside. Which limit did it is not
/// known; 1024, the usual default soft limit, is above all of them.
const GO_MIN_FILES: u64 = 1024;

/// Whether a hard RLIMIT_NOFILE of `hard` (None: unlimited) leaves `go` room enough.
fn go_has_room(hard: Option<u64>) -> bool {
    hard.map_or(true, |h| h >= GO_MIN_FILES)
}

/// `go` is not run under a hard limit on descriptors below `GO_MIN_FILES`: it would fail, and
/// could spoil the user's Go build cache on the way.
fn check_descriptors() -> Result<()> {
    match rlimit(libc::RLIMIT_NOFILE) {
        Some(Rlimit { hard: Some(h), .. }) if !go_has_room(Some(h)) => Err(Error::Skip(format!(
            "`go` is not run under a hard limit of {h} open files (below {GO_MIN_FILES}, the \
             usual default): so few fail its builds, and can leave a broken package index in the \
             Go build cache that fails every later Go build; raise it with `ulimit -n`"
        ))),
        // Unlimited, high enough, or unreadable: let `go` try.
        _ => Ok(()),
    }
}

/// `go version` works, or the reason it does not, in words that name what was found. Runs
/// supervised: within `VERSION_LIMIT`, and stopped at once on an interruption.
fn check_toolchain(cancel: &Cancel) -> Result<()> {
    check_descriptors()?;
    let mut cmd = Command::new("go");
    cmd.arg("version").env("GOTOOLCHAIN", "local");
    match Supervised::run_to_end(&mut cmd, "`go version`", cancel, VERSION_LIMIT) {
        Ok(Ok((status, _, _))) if status.success() => Ok(()),
        Ok(Ok((status, _, err))) => Err(Error::Skip(format!(
            "`go version` failed ({status}): {err}"
        ))),
        Ok(Err(Error::Cancelled(s))) => Err(Error::Cancelled(s)),
        Ok(Err(e)) => Err(Error::Skip(format!(
            "the Go toolchain on PATH does not answer: {e}"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Skip(
            "no Go toolchain on PATH (install Go >= 1.21 to measure goroutines)".into(),
        )),
        Err(e) => Err(start_refused("cannot run `go version`", &e)),
    }
}

/// `go` with a self-contained, offline environment: the local toolchain only, module mode, and
/// a cache and GOPATH in `dir` when the user's are missing or not writable (no HOME under some
/// CI runners; another user's HOME when run with changed credentials), so the build does not
/// fail for a reason that has nothing to do with Go.
fn go_command(dir: &Path) -> Command {
    let mut c = Command::new("go");
    c.env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "on")
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cache_home = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".cache")));
    if std::env::var_os("GOCACHE").is_none()
        && !cache_home.is_some_and(|d| usable_dir(&d.join("go-build")))
    {
        c.env("GOCACHE", dir.join("cache"));
    }
    if std::env::var_os("GOPATH").is_none() && !home.is_some_and(|h| usable_dir(&h.join("go"))) {
        c.env("GOPATH", dir.join("gopath"));
    }
    c
}

/// The folder exists (or can be made) and this process may write in it.
fn usable_dir(d: &Path) -> bool {
    if std::fs::create_dir_all(d).is_err() {
        return false;
    }
    let Ok(c) = std::ffi::CString::new(d.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_is_run_only_with_room_for_its_descriptors() {
        assert!(go_has_room(None));
        assert!(go_has_room(Some(GO_MIN_FILES)));
        assert!(go_has_room(Some(524_288)));
        assert!(!go_has_room(Some(GO_MIN_FILES - 1)));
        assert!(!go_has_room(Some(16)));
    }

    #[test]
    fn the_folders_of_processes_that_are_gone_are_swept_and_no_other() {
        let tmp = std::env::temp_dir().join(format!("threadlab-sweep-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        // A pid that has ended: a child, waited for.
        let gone = std::process::Command::new("true")
            .spawn()
            .and_then(|mut c| c.wait().map(|_| c.id()))
            .unwrap();
        let me = std::process::id();
        let stale = tmp.join(format!("threadlab-peer-{gone}-0"));
        let mine = tmp.join(format!("threadlab-peer-{me}-3"));
        let other_program = tmp.join(format!("threadlab-server-{gone}-0"));
        let not_ours = tmp.join(format!("threadlab-peer-{gone}"));
        for d in [&stale, &mine, &other_program, &not_ours] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("peer"), b"x").unwrap();
        }
        sweep_stale(&tmp, "peer");
        let alive = Path::new(&format!("/proc/{gone}")).exists();
        assert_eq!(stale.exists(), alive, "a dead process's folder goes");
        assert!(mine.exists(), "a live process's folder stays");
        assert!(
            other_program.exists(),
            "another program's folders are its own to sweep"
        );
        assert!(not_ours.exists(), "a name not of the pattern stays");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_build_interrupted_before_it_starts_is_cancelled_or_skipped() {
        let cancel = Cancel::never();
        cancel.trigger(libc::SIGTERM);
        match build(
            "package main\nfunc main() {}\n",
            "t",
            "t",
            "a test program",
            &cancel,
        ) {
            Err(Error::Cancelled(s)) => assert_eq!(s, libc::SIGTERM),
            Err(Error::Skip(_)) => {} // no toolchain here
            Ok(_) => panic!("a build under a pending signal must stop"),
            Err(e) => panic!("{e}"),
        }
    }

    /// A folder with a program file in it, as a build leaves it.
    fn fake_build(root: &Path, name: &str) -> Arc<Built> {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("prog");
        std::fs::write(&exe, b"x").unwrap();
        Arc::new(Built { exe, dir })
    }

    #[test]
    fn a_kept_program_is_handed_out_again_until_the_last_guard_ends() {
        let root = std::env::temp_dir().join(format!("threadlab-kept-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let key = |src: &str| ("m".to_string(), "p".to_string(), source_hash(src));
        let mut k = Kept::default();

        // No guard: nothing is kept, the caller's build is its own.
        let alone = fake_build(&root, "alone");
        k.keep(key("a"), &alone);
        assert!(k.find(&key("a")).is_none());
        let dir = alone.dir.clone();
        drop(alone);
        assert!(!dir.exists(), "a build nobody keeps goes with its holder");

        k.guards = 2;
        let a = fake_build(&root, "a");
        k.keep(key("a"), &a);
        let again = k.find(&key("a")).expect("kept");
        assert!(Arc::ptr_eq(&a, &again));
        assert!(k.find(&key("b")).is_none(), "another source is built anew");
        drop((a, again));
        assert!(root.join("a").exists(), "kept past its first holder");

        // A program removed from under the lab is built again, and replaces the entry.
        std::fs::remove_file(root.join("a/prog")).unwrap();
        assert!(k.find(&key("a")).is_none());
        let a2 = fake_build(&root, "a2");
        k.keep(key("a"), &a2);
        assert_eq!(k.built.len(), 1);
        assert!(!root.join("a").exists(), "the replaced entry's folder went");

        assert!(k.release().is_empty(), "one guard still lives");
        assert!(k.find(&key("a")).is_some());
        let gone = k.release();
        assert_eq!(gone.len(), 1);
        drop(gone);
        assert!(root.join("a2").exists(), "still held by a2");
        drop(a2);
        assert!(
            !root.join("a2").exists(),
            "the last holder removes the folder"
        );
        assert!(k.find(&key("a")).is_none());
        let _ = std::fs::remove_dir_all(&root);
    }
}
