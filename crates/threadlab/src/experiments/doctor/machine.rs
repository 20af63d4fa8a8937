//! Machine-wide settings (a module parameter under /sys, a sysctl under /proc/sys): changed
//! only with `--allow-machine-changes`, each value recorded before it is changed, written back
//! after, and read again to check it is what it was.
//!
//! Four layers make sure nothing stays changed:
//! 1. `Changed` writes the original value back when dropped: after each "on" phase, and on
//!    every error or interruption (the first SIGINT, SIGTERM or SIGHUP unwinds through it).
//! 2. While a value is changed, `cancel::RestoreFileGuard` holds it for the signal handler, so
//!    a second signal (which ends the process at once) writes it back too.
//! 3. A journal (`run/threadlab-doctor.journal` under the root) lists every setting changed
//!    and its original value before the change is made; a run killed by SIGKILL leaves it
//!    behind, and the next `threadlab doctor` restores what it lists (same boot only: a reboot
//!    restores the settings itself) and says so.
//! 4. The journal is locked (flock) for the whole run, so two runs never take each other's
//!    changed values for the originals.
//!
//! Every path is taken under a root ("/" on a live machine), so tests can run all of this
//! against files in a temporary folder standing in for /sys and /proc/sys.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::cancel::RestoreFileGuard;
use crate::error::{Error, Result};

const JOURNAL: &str = "run/threadlab-doctor.journal";

/// One setting read again after it was restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The path as on a live machine ("/sys/module/...").
    pub path: String,
    pub before: String,
    pub after: String,
}

impl Check {
    pub fn ok(&self) -> bool {
        self.before == self.after
    }
}

/// The journal file and what it lists: the settings changed right now, with their original
/// values, and the checks of those restored so far.
struct Journal {
    file: File,
    header: String,
    changed: Vec<(String, String)>,
    checks: Vec<Check>,
}

impl Journal {
    fn write(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        let mut text = format!("{}\n", self.header);
        for (path, before) in &self.changed {
            text.push_str(&format!("{path}\t{before}\n"));
        }
        self.file.write_all(text.as_bytes())?;
        self.file.sync_data()
    }
}

/// The run's access to machine-wide settings.
pub struct Machine {
    root: PathBuf,
    journal: Arc<Mutex<Journal>>,
    /// What a previous run had left changed and this one restored, one line each.
    pub replayed: Vec<String>,
}

fn read_value(p: &Path) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(p)?.trim().to_string())
}

fn write_value(p: &Path, v: &str) -> std::io::Result<()> {
    // Never creating a file that is not there; truncating as `echo value > file` does (sysfs
    // and procfs ignore it, a regular file standing in for them needs it).
    let mut f = OpenOptions::new().write(true).truncate(true).open(p)?;
    f.write_all(v.as_bytes())
}

fn boot_id(root: &Path) -> String {
    read_value(&root.join("proc/sys/kernel/random/boot_id")).unwrap_or_default()
}

impl Machine {
    /// Takes the run's lock and restores what a killed run left changed. Err(reason) when
    /// another run holds the lock or the journal cannot be kept (then no machine-wide setting
    /// may be changed, and the knobs that need one say why).
    pub fn open(root: &Path) -> std::result::Result<Machine, String> {
        let path = root.join(JOURNAL);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| {
                let root_only = if e.kind() == std::io::ErrorKind::PermissionDenied {
                    "machine-wide settings are root's: "
                } else {
                    ""
                };
                format!(
                    "{root_only}cannot keep the journal of changed settings {}: {e}",
                    path.display()
                )
            })?;
        // SAFETY: flock on a file descriptor this File owns; LOCK_NB never blocks.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(format!(
                "another threadlab doctor is changing machine settings now (it holds {}); \
                 run again when it has finished",
                path.display()
            ));
        }
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let boot = boot_id(root);
        let mut m = Machine {
            root: root.to_path_buf(),
            journal: Arc::new(Mutex::new(Journal {
                file,
                header: format!(
                    "threadlab-doctor-journal pid={} boot_id={boot}",
                    std::process::id()
                ),
                changed: Vec::new(),
                checks: Vec::new(),
            })),
            replayed: Vec::new(),
        };
        m.replay(&text, &boot);
        m.lock()
            .write()
            .map_err(|e| format!("cannot reset the journal {}: {e}", path.display()))?;
        Ok(m)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Restores the settings a journal lists, when it was written in this boot.
    fn replay(&mut self, text: &str, boot: &str) {
        let mut lines = text.lines();
        let Some(header) = lines.next() else { return };
        let same_boot = header
            .split_whitespace()
            .any(|w| w == format!("boot_id={boot}"));
        for line in lines {
            let Some((path, before)) = line.split_once('\t') else {
                continue;
            };
            if !same_boot {
                self.replayed.push(format!(
                    "{path}: left as it is (the journal is from an earlier boot, which reset it)"
                ));
                continue;
            }
            let live = self.under_root(path);
            let now = read_value(&live).unwrap_or_default();
            let r = write_value(&live, before).and_then(|_| read_value(&live));
            self.replayed.push(match r {
                Ok(after) if after == before => format!(
                    "{path}: {now} -> {before}, restored (a run that was killed had changed it)"
                ),
                Ok(after) => format!("{path}: could not restore {before}, it reads {after}"),
                Err(e) => format!("{path}: could not restore {before}: {e}"),
            });
        }
    }

    /// `path` ("/sys/...") under the root.
    pub fn under_root(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// The current value of a setting, or why it cannot be read.
    pub fn read(&self, path: &str) -> std::result::Result<String, String> {
        read_value(&self.under_root(path)).map_err(|e| format!("{path}: {e}"))
    }

    /// Why `path` cannot be changed by this process, if it cannot.
    pub fn unwritable(&self, path: &str) -> Option<String> {
        let p = self.under_root(path);
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: access() reads a NUL-terminated path and nothing else.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
            None
        } else {
            Some(format!(
                "{path} cannot be written by this user ({}): run as root",
                std::io::Error::last_os_error()
            ))
        }
    }

    /// Writes `value` into `path`, journaling its value first; the returned guard writes the
    /// original back when dropped and records the check.
    pub fn set(&mut self, path: &str, value: &str) -> Result<Changed> {
        let live = self.under_root(path);
        let before = read_value(&live).map_err(|e| Error::Fail(format!("{path}: {e}")))?;
        {
            let mut j = self.lock();
            if !j.changed.iter().any(|(p, _)| p == path) {
                j.changed.push((path.to_string(), before.clone()));
                j.write()
                    .map_err(|e| Error::Fail(format!("cannot journal {path}: {e}")))?;
            }
        }
        // Registered before the write, so that no moment exists where the value is changed
        // and a second signal would not restore it.
        let signal_guard = RestoreFileGuard::register(&live, before.as_bytes())?;
        let changed = Changed {
            path: path.to_string(),
            live,
            before,
            journal: Arc::clone(&self.journal),
            _signal: signal_guard,
        };
        write_value(&changed.live, value)
            .map_err(|e| Error::Fail(format!("cannot write {value} into {path}: {e}")))?;
        match read_value(&changed.live) {
            Ok(v) if v == value => Ok(changed),
            Ok(v) => Err(Error::Fail(format!(
                "{path} reads {v} after {value} was written into it"
            ))),
            Err(e) => Err(Error::Fail(format!("{path}: {e}"))),
        }
    }

    /// Every check so far.
    pub fn checks(&self) -> Vec<Check> {
        self.lock().checks.clone()
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // Each setting leaves the journal when it has been restored and checked: an empty
        // journal has done its work. One that still lists a setting stays for the next run.
        if self.lock().changed.is_empty() {
            let _ = std::fs::remove_file(self.root.join(JOURNAL));
        }
    }
}

/// A setting changed for now; dropping it writes the original value back and checks it.
pub struct Changed {
    path: String,
    live: PathBuf,
    before: String,
    journal: Arc<Mutex<Journal>>,
    _signal: RestoreFileGuard,
}

impl Drop for Changed {
    fn drop(&mut self) {
        let _ = write_value(&self.live, &self.before);
        let after = read_value(&self.live).unwrap_or_else(|e| format!("unreadable: {e}"));
        let mut j = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        if after == self.before {
            j.changed.retain(|(p, _)| *p != self.path);
            let _ = j.write();
        }
        j.checks.push(Check {
            path: self.path.clone(),
            before: self.before.clone(),
            after,
        });
    }
}

#[cfg(test)]
mod tests;
