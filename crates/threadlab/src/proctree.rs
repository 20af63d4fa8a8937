//! Ending a child process together with everything it started, with async-signal-safe calls
//! only, so that the interruption handler can do it as well as an ordinary thread.
//!
//! A program the lab runs may start programs of its own: `go build` runs the compiler and the
//! linker. Killing `go` alone leaves them running as orphans (reparented to init), where nobody
//! would find them again, because an orphan's parent is no longer `go`. So the tree is found
//! while it is intact, each process stopped first (`SIGSTOP`: a stopped process cannot fork),
//! the scan repeated until it finds nothing new, and only then everything killed. The children
//! stay in the lab's process group throughout, so a terminal's signal or a `kill` of the group
//! reaches them too.
//!
//! The scan reads `/proc` with raw system calls (open, getdents64, read, close) into fixed
//! buffers on the stack: no allocation, no locks, nothing that is unsafe in a signal handler.

/// At most this many processes are tracked in one tree (the Go toolchain runs a few).
const MAX_TREE: usize = 256;

/// Stops `root` and every descendant of it, then kills them all with `SIGKILL`, deepest first.
/// Returns how many processes were signalled (root included). Async-signal-safe, and safe to
/// interrupt by another call of itself (the interruption handler's).
pub fn kill_tree(root: libc::pid_t) -> usize {
    if root <= 0 {
        return 0;
    }
    let mut tree = [0 as libc::pid_t; MAX_TREE];
    tree[0] = root;
    let mut len = 1;
    // SAFETY: kill has no memory preconditions; `root` is the caller's unreaped child.
    unsafe { libc::kill(root, libc::SIGSTOP) };
    // Scan until two scans in a row find nothing new: a fork that was under way when its
    // parent was stopped shows up in the next scan.
    let mut quiet = 0;
    let mut rounds = 0;
    while quiet < 2 && rounds < 16 {
        rounds += 1;
        let before = len;
        scan(&mut tree, &mut len);
        for &p in &tree[before..len] {
            // SAFETY: as above; `p` was found as a descendant of `root` an instant ago.
            unsafe { libc::kill(p, libc::SIGSTOP) };
        }
        quiet = if len == before { quiet + 1 } else { 0 };
    }
    // Deepest first, the root last: if this is itself interrupted (the second signal arriving
    // while the first one's cleanup runs this), every process not yet killed still has its
    // (stopped) parent, so the handler's own call finds it from the root. Killing the root
    // first would orphan the rest to init, stopped, where no scan finds them again.
    for &p in tree[..len].iter().rev() {
        // SAFETY: as above. SIGKILL ends a stopped process too.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    len
}

/// Adds to `tree[..len]` every process whose parent is in it (one pass over `/proc`, repeated
/// inside while it keeps finding grandchildren of what it just found).
fn scan(tree: &mut [libc::pid_t; MAX_TREE], len: &mut usize) {
    // SAFETY: open/getdents64/close on a NUL-terminated literal path and a stack buffer of the
    // length passed; the kernel writes at most that many bytes.
    let fd = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: as above.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            )
        };
        if n <= 0 {
            break;
        }
        let n = n as usize;
        let mut off = 0;
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        while off + 19 < n {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen == 0 || off + reclen > n {
                break;
            }
            let name = &buf[off + 19..off + reclen];
            if let Some(pid) = parse_pid(name) {
                if !tree[..*len].contains(&pid) {
                    if let Some(ppid) = parent_of(pid) {
                        if tree[..*len].contains(&ppid) && *len < MAX_TREE {
                            tree[*len] = pid;
                            *len += 1;
                        }
                    }
                }
            }
            off += reclen;
        }
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
}

/// The decimal pid a `/proc` entry's NUL-terminated name spells, if it is one.
fn parse_pid(name: &[u8]) -> Option<libc::pid_t> {
    let mut v: i64 = 0;
    let mut digits = 0;
    for &b in name {
        if b == 0 {
            break;
        }
        if !b.is_ascii_digit() || digits >= 10 {
            return None;
        }
        v = v * 10 + (b - b'0') as i64;
        digits += 1;
    }
    (digits > 0 && v > 0 && v <= i32::MAX as i64).then_some(v as libc::pid_t)
}

/// The parent pid in `/proc/PID/stat`: the second field after the last `)` (the command name
/// before it may contain spaces and parentheses).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut path = [0u8; 32];
    let mut at = 0;
    for &b in b"/proc/" {
        path[at] = b;
        at += 1;
    }
    let mut digits = [0u8; 10];
    let mut nd = 0;
    let mut v = pid as u32;
    loop {
        digits[nd] = b'0' + (v % 10) as u8;
        nd += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while nd > 0 {
        nd -= 1;
        path[at] = digits[nd];
        at += 1;
    }
    for &b in b"/stat\0" {
        path[at] = b;
        at += 1;
    }
    let mut buf = [0u8; 512];
    // SAFETY: `path` is NUL-terminated within its length; read writes at most `buf.len()`.
    let n = unsafe {
        let fd = libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len());
        libc::close(fd);
        n
    };
    if n <= 0 {
        return None;
    }
    let text = &buf[..n as usize];
    let close = text.iter().rposition(|&b| b == b')')?;
    // ") S PPID ..."
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let _state = fields.next()?;
    let ppid = fields.next()?;
    let mut v: i64 = 0;
    for &b in ppid {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (b - b'0') as i64;
    }
    Some(v as libc::pid_t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    fn alive(pid: libc::pid_t) -> bool {
        // A zombie has ended; only a live process counts.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(s) => !s
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
            Err(_) => false,
        }
    }

    #[test]
    fn pids_and_parents_are_read_from_proc() {
        assert_eq!(parse_pid(b"123\0"), Some(123));
        assert_eq!(parse_pid(b"self\0"), None);
        assert_eq!(parse_pid(b"\0"), None);
        assert_eq!(parse_pid(b"99999999999\0"), None);
        let me = std::process::id() as libc::pid_t;
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent_of(me), Some(unsafe { libc::getppid() }));
        assert_eq!(parent_of(i32::MAX), None);
    }

    /// A shell whose grandchildren keep running: all of them end, none left as an orphan.
    #[test]
    fn the_whole_tree_ends_grandchildren_included() {
        let dir = std::env::temp_dir().join(format!("threadlab-proctree-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pids = dir.join("pids");
        let script = format!(
            "sleep 60 & echo $! >> {p}; (sleep 60 & echo $! >> {p}; wait) & echo $! >> {p}; wait",
            p = pids.display()
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let began = Instant::now();
        let below: Vec<libc::pid_t> = loop {
            let text = std::fs::read_to_string(&pids).unwrap_or_default();
            let v: Vec<libc::pid_t> = text.lines().filter_map(|l| l.parse().ok()).collect();
            if v.len() == 3 || began.elapsed() > Duration::from_secs(10) {
                break v;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(below.len(), 3, "the script did not start its children");
        let n = kill_tree(child.id() as libc::pid_t);
        assert!(n >= 4, "signalled {n} processes");
        child.wait().unwrap();
        let began = Instant::now();
        while below.iter().any(|&p| alive(p)) && began.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let left: Vec<_> = below.iter().filter(|&&p| alive(p)).collect();
        assert!(left.is_empty(), "still running: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
