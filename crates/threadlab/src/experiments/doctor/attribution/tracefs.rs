//! The scheduler's and the idle loop's tracepoints as perf_event_open needs them: each one's
//! id and the offsets of its fields, from tracefs (`events/<system>/<name>/{id,format}`).
//!
//! tracefs need not be mounted. Mounting it would change the machine (every user would see it
//! appear), so when it is not, doctor mounts it in a mount namespace of its own, on a thread
//! that unshares its namespace, reads what it needs and ends, taking the namespace and the
//! mount with it. That needs root (CAP_SYS_ADMIN); without it, the reason says so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One tracepoint: its id and its fields' (offset, size) in the raw record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracepoint {
    pub system: &'static str,
    pub name: &'static str,
    pub id: u64,
    pub fields: HashMap<String, (usize, usize)>,
}

impl Tracepoint {
    pub fn field(&self, name: &str) -> Option<(usize, usize)> {
        self.fields.get(name).copied()
    }
}

/// Parses a tracepoint's `format` file into field name -> (offset, size).
pub fn parse_format(text: &str) -> HashMap<String, (usize, usize)> {
    let mut fields = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let Some(decl) = parts.next() else { continue };
        // "pid_t pid", "char comm[16]", "unsigned short common_type": the name is the last
        // word, without an array suffix.
        let name = decl
            .split_whitespace()
            .last()
            .unwrap_or("")
            .split('[')
            .next()
            .unwrap_or("")
            .to_string();
        let mut offset = None;
        let mut size = None;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(o), Some(s)) = (offset, size) {
            if !name.is_empty() {
                fields.insert(name, (o, s));
            }
        }
    }
    fields
}

fn read_events(dir: &Path, wanted: &[(&'static str, &'static str)]) -> Vec<Option<Tracepoint>> {
    wanted
        .iter()
        .map(|&(system, name)| {
            let d = dir.join(system).join(name);
            let id = std::fs::read_to_string(d.join("id"))
                .ok()?
                .trim()
                .parse()
                .ok()?;
            let fields = parse_format(&std::fs::read_to_string(d.join("format")).ok()?);
            Some(Tracepoint {
                system,
                name,
                id,
                fields,
            })
        })
        .collect()
}

/// The events folder of a mounted tracefs, if one is mounted where tools look.
fn mounted() -> Option<PathBuf> {
    [
        "/sys/kernel/tracing/events",
        "/sys/kernel/debug/tracing/events",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.join("sched").is_dir())
}

/// The tracepoints in `wanted` (None for one this kernel lacks), or why they cannot be read.
pub fn tracepoints(
    wanted: &[(&'static str, &'static str)],
) -> Result<Vec<Option<Tracepoint>>, String> {
    if let Some(dir) = mounted() {
        return Ok(read_events(&dir, wanted));
    }
    let wanted = wanted.to_vec();
    std::thread::Builder::new()
        .name("threadlab-tracefs".into())
        .spawn(move || read_in_private_namespace(&wanted))
        .map_err(|e| format!("cannot start a thread to read tracefs: {e}"))?
        .join()
        .map_err(|_| "the tracefs thread panicked".to_string())?
}

/// On a thread of its own: a private mount namespace, tracefs mounted in it, the events read.
fn read_in_private_namespace(
    wanted: &[(&'static str, &'static str)],
) -> Result<Vec<Option<Tracepoint>>, String> {
    let os = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // SAFETY: unshare affects only this thread (CLONE_NEWNS implies CLONE_FS, which a thread
    // may unshare); no memory is passed.
    if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_FS) } != 0 {
        return Err(format!(
            "tracefs is not mounted and a private mount namespace to mount it in was refused \
             ({}; needs root or CAP_SYS_ADMIN)",
            os("unshare(CLONE_NEWNS)")
        ));
    }
    // Mounts made from here on must not propagate back to the machine's namespace.
    // SAFETY: NUL-terminated literals; MS_REC | MS_PRIVATE changes propagation only, in this
    // thread's (new) namespace.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(os("making a private mount namespace private"));
    }
    // SAFETY: as above; tracefs mounted on its usual folder, seen by this thread only.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "tracefs could not be mounted in a private namespace ({})",
            os("mount tracefs")
        ));
    }
    Ok(read_events(Path::new("/sys/kernel/tracing/events"), wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    // As read from /sys/kernel/tracing/events/sched/sched_switch/format on Linux 6.18.
    const SWITCH: &str = "name: sched_switch\nID: 379\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n\
print fmt: \"prev_comm=%s prev_pid=%d\", REC->prev_comm, REC->prev_pid\n";

    #[test]
    fn fields_and_offsets_are_parsed_from_a_format_file() {
        let f = parse_format(SWITCH);
        assert_eq!(f.get("next_pid"), Some(&(56, 4)));
        assert_eq!(f.get("prev_pid"), Some(&(24, 4)));
        assert_eq!(f.get("prev_comm"), Some(&(8, 16)));
        assert_eq!(f.get("common_type"), Some(&(0, 2)));
        assert!(parse_format("garbage\nfield:;").is_empty());
    }
}
