//! Where reports and results go, checked before anything is measured and written so that
//! nothing but a regular file is ever replaced.
//!
//! - A regular file (or a new one) is written in place: a temporary file beside it, flushed,
//!   then renamed over it, so a reader never sees half a file. A symbolic link is followed and
//!   the file it names is replaced, never the link.
//! - Anything else (a device such as /dev/null or /dev/full, a FIFO, a socket, /dev/stdout and
//!   /proc/self/fd/N, which may stand for a shell redirection) is written directly, as a shell's
//!   `>` would: renaming over it would replace the device node or the link with a file.
//! - Every path is checked up front: its folder exists and is a folder we may write in, it does
//!   not name a folder, and no two outputs are the same file (compared by what the paths
//!   resolve to). A run therefore never ends in a write error that a check could have
//!   predicted.
//! - Temporary names are short (`.threadlab-<pid>-<n>.tmp`), so a legal file name near the
//!   255-byte limit works, and while one exists it is registered with the interruption handler,
//!   which removes it if a second signal ends the process mid-write.

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

/// A checked output path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// As the user gave it, for messages.
    pub given: PathBuf,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Written through a temporary file renamed over `target` (symlinks resolved).
    InPlace { target: PathBuf },
    /// Opened and written as it is: a device, FIFO, socket or standard stream.
    Direct,
}

/// What identifies the file an output ends up in, to find two outputs naming the same one.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Existing { dev: u64, ino: u64 },
    New { dir: PathBuf, name: OsString },
}

/// Checks every path before a run: each must be writable, and no two may be the same file.
/// `what` names each output for messages ("--json", "--csv", ...).
pub fn check_all(paths: &[(&str, &Path)]) -> Result<Vec<Output>> {
    let mut outs: Vec<(Output, Identity)> = Vec::new();
    for (what, p) in paths {
        let (out, id) = check(what, p)?;
        if let Some((other, _)) = outs.iter().find(|(_, i)| *i == id) {
            return Err(Error::Usage(format!(
                "{what} {} and {} name the same file; give each output its own path",
                show(p),
                show(&other.given)
            )));
        }
        outs.push((out, id));
    }
    Ok(outs.into_iter().map(|(o, _)| o).collect())
}

/// Checks one output path; see the module docs for the rules.
pub fn check_one(what: &str, p: &Path) -> Result<Output> {
    check(what, p).map(|(o, _)| o)
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

fn check(what: &str, p: &Path) -> Result<(Output, Identity)> {
    let usage = |why: String| Err(Error::Usage(format!("{what} {}: {why}", show(p))));
    if p.as_os_str().is_empty() {
        return Err(Error::Usage(format!("{what} needs a file name")));
    }
    if p.as_os_str().as_bytes().ends_with(b"/") {
        return usage("names a folder; give a file name, e.g. results.json".into());
    }
    if is_stream_path(p) {
        // /dev/stdout, /proc/self/fd/1: they stand for something the shell opened. Written
        // directly, whatever it is, as `>` would.
        return match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => usage("is a folder; give a file name".into()),
            Ok(m) => Ok((
                direct(p),
                Identity::Existing {
                    dev: m.dev(),
                    ino: m.ino(),
                },
            )),
            Err(e) => usage(format!("{e}; give a path that exists or a file to create")),
        };
    }
    let target = match resolve_links(p) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => usage("is a folder; give a file name, e.g. results.json".into()),
        Ok(m) if m.is_file() => {
            if !writable(&target, libc::W_OK) {
                return usage("exists and is not writable by you; choose another path".into());
            }
            check_dir(what, p, &target)?;
            Ok((
                Output {
                    given: p.to_path_buf(),
                    kind: Kind::InPlace { target },
                },
                Identity::Existing {
                    dev: m.dev(),
                    ino: m.ino(),
                },
            ))
        }
        Ok(m) => {
            let ft = m.file_type();
            if !(ft.is_char_device() || ft.is_block_device() || ft.is_fifo() || ft.is_socket()) {
                return usage("is not a file threadlab can write".into());
            }
            if !writable(&target, libc::W_OK) {
                return usage("is a device or FIFO that you may not write to".into());
            }
            Ok((
                direct(p),
                Identity::Existing {
                    dev: m.dev(),
                    ino: m.ino(),
                },
            ))
        }
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            let dir = check_dir(what, p, &target)?;
            let name = target
                .file_name()
                .map(|n| n.to_os_string())
                .unwrap_or_default();
            if name.len() > 255 {
                return usage("the file name is longer than 255 bytes".into());
            }
            Ok((
                Output {
                    given: p.to_path_buf(),
                    kind: Kind::InPlace {
                        target: target.clone(),
                    },
                },
                Identity::New { dir, name },
            ))
        }
        Err(e) => usage(format!("{e}")),
    }
}

fn direct(p: &Path) -> Output {
    Output {
        given: p.to_path_buf(),
        kind: Kind::Direct,
    }
}

/// /dev/std{in,out,err}, /dev/fd/N and /proc/<pid>/fd/N.
fn is_stream_path(p: &Path) -> bool {
    let s = p.as_os_str().as_bytes();
    s.starts_with(b"/dev/std") || s.starts_with(b"/dev/fd/") || {
        let mut c = p.components().skip(1);
        matches!(
            (c.next(), c.next(), c.next()),
            (Some(a), Some(_), Some(b)) if a.as_os_str() == "proc" && b.as_os_str() == "fd"
        )
    }
}

/// Follows symbolic links (up to 40, as the kernel does) to the path that will really be
/// written; the target need not exist yet.
fn resolve_links(p: &Path) -> std::result::Result<PathBuf, String> {
    let mut cur = p.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&cur).map_err(|e| e.to_string())?;
                cur = if to.is_absolute() {
                    to
                } else {
                    cur.parent().unwrap_or(Path::new(".")).join(to)
                };
            }
            _ => return Ok(cur),
        }
    }
    Err("too many levels of symbolic links".into())
}

/// The folder `target` will be created in must exist, be a folder and be writable; returns
/// it, resolved, for identity comparisons.
fn check_dir(what: &str, given: &Path, target: &Path) -> Result<PathBuf> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let fail = |why: &str| {
        Err(Error::Usage(format!(
            "{what} {}: {why}; choose a path in a folder that exists and that you can write",
            show(given)
        )))
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return fail(&format!("{} is not a folder", dir.display())),
        Err(_) => return fail(&format!("the folder {} does not exist", dir.display())),
    }
    if !writable(&dir, libc::W_OK | libc::X_OK) {
        return fail(&format!("you may not create files in {}", dir.display()));
    }
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

/// access(2) for the real user: may this process write (and, for folders, enter) `p`?
fn writable(p: &Path, mode: libc::c_int) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    unsafe { libc::access(c.as_ptr(), mode) == 0 }
}

static TEMP_SEQ: AtomicU32 = AtomicU32::new(0);

impl Output {
    /// Writes `contents`: in place through a temporary file and a rename for a regular file,
    /// directly otherwise. On failure nothing is left behind but what was there before.
    pub fn write(&self, contents: &[u8]) -> Result<()> {
        let fail =
            |e: std::io::Error| Error::Fail(format!("cannot write {}: {e}", show(&self.given)));
        match &self.kind {
            Kind::Direct => {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&self.given)
                    .map_err(fail)?;
                f.write_all(contents).map_err(fail)?;
                f.flush().map_err(fail)
            }
            Kind::InPlace { target } => {
                let dir = target
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let tmp = dir.join(format!(
                    ".threadlab-{}-{}.tmp",
                    std::process::id(),
                    TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
                ));
                let guard = crate::cancel::TempFileGuard::register(&tmp);
                let result = (|| -> std::io::Result<()> {
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&tmp)?;
                    f.write_all(contents)?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, target)
                })();
                if let Err(e) = result {
                    let _ = std::fs::remove_file(&tmp);
                    drop(guard);
                    return Err(fail(e));
                }
                drop(guard);
                Ok(())
            }
        }
    }

    /// True when written directly (a device, FIFO or stream), not replaced.
    pub fn is_direct(&self) -> bool {
        self.kind == Kind::Direct
    }
}

/// Checks and writes in one step, for commands that write a single file.
pub fn write_checked(what: &str, path: &Path, contents: &[u8]) -> Result<()> {
    check_one(what, path)?.write(contents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("threadlab-out-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_regular_file_is_replaced_and_no_temporary_is_left() {
        let d = scratch("regular");
        let p = d.join("r.json");
        std::fs::write(&p, "old").unwrap();
        check_one("--json", &p).unwrap().write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_is_followed_and_kept() {
        let d = scratch("symlink");
        let real = d.join("real.json");
        std::fs::write(&real, "old").unwrap();
        let link = d.join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        check_one("--json", &link).unwrap().write(b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        // A dangling link creates the file it names.
        let dangling = d.join("dangling.json");
        std::os::unix::fs::symlink("made.json", &dangling).unwrap();
        check_one("--json", &dangling).unwrap().write(b"x").unwrap();
        assert!(std::fs::symlink_metadata(&dangling)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(d.join("made.json")).unwrap(), "x");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fifo_is_written_directly_never_replaced() {
        let d = scratch("fifo");
        let fifo = d.join("pipe");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let out = check_one("--json", &fifo).unwrap();
        assert!(out.is_direct());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        out.write(b"through the fifo").unwrap();
        assert_eq!(reader.join().unwrap(), "through the fifo");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn devices_and_streams_are_direct() {
        assert!(check_one("--json", Path::new("/dev/null"))
            .unwrap()
            .is_direct());
        check_one("--json", Path::new("/dev/null"))
            .unwrap()
            .write(b"x")
            .unwrap();
        assert!(is_stream_path(Path::new("/dev/stdout")));
        assert!(is_stream_path(Path::new("/proc/self/fd/1")));
        assert!(!is_stream_path(Path::new("/tmp/x")));
    }

    #[test]
    fn bad_paths_are_refused_up_front_in_one_line() {
        let d = scratch("bad");
        let file = d.join("f");
        std::fs::write(&file, "").unwrap();
        for (p, why) in [
            (d.join("missing/x.json"), "does not exist"),
            (file.join("x.json"), "is not a folder"),
            (PathBuf::from(format!("{}/", d.display())), "folder"),
            (d.clone(), "folder"),
        ] {
            match check_one("--json", &p) {
                Err(Error::Usage(m)) => {
                    assert!(m.contains(why) && !m.contains('\n'), "{m}");
                }
                other => panic!("{}: {other:?}", p.display()),
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn two_outputs_naming_one_file_are_refused() {
        let d = scratch("same");
        let a = d.join("a.json");
        let b = d.join("./a.json");
        let r = check_all(&[("--json", &a), ("--csv", &b)]);
        assert!(matches!(r, Err(Error::Usage(m)) if m.contains("same file")));
        std::fs::write(&a, "").unwrap();
        let link = d.join("l");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let r = check_all(&[("--json", &a), ("--markdown", &link)]);
        assert!(matches!(r, Err(Error::Usage(_))));
        assert!(check_all(&[("--json", &a), ("--csv", &d.join("b.csv"))]).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_name_near_the_limit_fits_its_temporary() {
        let d = scratch("long");
        let long = d.join("r".repeat(250) + ".json");
        check_one("--json", &long).unwrap().write(b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&long).unwrap(), "{}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
