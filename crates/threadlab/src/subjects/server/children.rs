//! The processes of the fork designs: forked, accounted and reaped.
//!
//! Each child closes every descriptor it inherited except the ones it serves (the lab's other
//! sockets, the load generator's client ends among them, would otherwise stay open in it and
//! hold back their FIN), records its own rusage in a MAP_SHARED slot after every reply, and
//! writes its pid to a pipe just before it exits. A reaper thread reads those pids and reaps
//! exactly those children with wait4, whose rusage is the child's final CPU and context
//! switches; it never calls wait(-1), which would steal other children of the lab (the Go peer,
//! probes). Children die with the lab (PR_SET_PDEATHSIG); `shutdown` kills and reaps the rest.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::measure::process::{fork_child, SharedMap};

use super::usage::{ChildUsage, Usage};

/// Where one child records its CPU and switches (three words on their own cache lines).
pub struct ChildSlot<'a> {
    words: [&'a AtomicU64; 3],
}

impl ChildSlot<'_> {
    /// Stores this process's rusage (async-signal-safe: getrusage and atomic stores).
    pub fn record(&self) {
        // SAFETY: ru is a valid out pointer.
        let u = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut ru);
            Usage::from_rusage(&ru)
        };
        self.words[0].store(u.cpu_ns, Ordering::Relaxed);
        self.words[1].store(u.voluntary, Ordering::Relaxed);
        self.words[2].store(u.involuntary, Ordering::Relaxed);
    }

    fn read(&self) -> Usage {
        Usage {
            cpu_ns: self.words[0].load(Ordering::Relaxed),
            voluntary: self.words[1].load(Ordering::Relaxed),
            involuntary: self.words[2].load(Ordering::Relaxed),
        }
    }

    fn clear(&self) {
        for w in self.words {
            w.store(0, Ordering::Relaxed);
        }
    }
}

struct State {
    free: Vec<usize>,
    live: HashMap<libc::pid_t, usize>,
    retired: Usage,
    closed: bool,
}

/// The live and reaped children of one server.
pub struct Children {
    slots: SharedMap,
    state: Mutex<State>,
    exit_rd: RawFd,
    exit_wr: RawFd,
    reaper: Mutex<Option<JoinHandle<()>>>,
}

impl Children {
    /// Room for `cap` children at once; starts the reaper.
    pub fn new(cap: usize) -> Result<Arc<Children>> {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid array of two ints.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::os("pipe for the fork server's reaper"));
        }
        let c = Arc::new(Children {
            slots: SharedMap::new(cap.max(1) * 3 * 64)?,
            state: Mutex::new(State {
                free: (0..cap).rev().collect(),
                live: HashMap::new(),
                retired: Usage::default(),
                closed: false,
            }),
            exit_rd: fds[0],
            exit_wr: fds[1],
            reaper: Mutex::new(None),
        });
        let me = c.clone();
        let h = std::thread::Builder::new()
            .name("tl-server-reaper".into())
            .spawn(move || me.reap())
            .map_err(|e| Error::Fail(format!("cannot start the reaper thread: {e}")))?;
        *c.reaper.lock().expect("not poisoned") = Some(h);
        Ok(c)
    }

    fn slot(&self, i: usize) -> ChildSlot<'_> {
        ChildSlot {
            words: [
                self.slots.word(3 * i),
                self.slots.word(3 * i + 1),
                self.slots.word(3 * i + 2),
            ],
        }
    }

    /// Forks a child that closes every descriptor but `keep` (and the exit pipe), runs `body`,
    /// and reports its exit. Ok(None) when `cap` children are alive already.
    ///
    /// # Safety
    /// `body` runs in a child forked from a multi-threaded process: async-signal-safe work only
    /// (see `measure::process::fork_child`).
    pub unsafe fn fork(
        &self,
        keep: &[RawFd],
        body: impl FnOnce(&ChildSlot),
    ) -> Result<Option<libc::pid_t>> {
        // The lock is held across fork and insert, so the reaper cannot see the child's exit
        // before the child is listed. The child never touches it.
        let mut st = self.state.lock().expect("not poisoned");
        if st.closed {
            return Ok(None);
        }
        let Some(i) = st.free.pop() else {
            return Ok(None);
        };
        let slot = self.slot(i);
        slot.clear();
        let exit_wr = self.exit_wr;
        let mut keep_fds = [-1; 8];
        for (k, &fd) in keep.iter().take(7).enumerate() {
            keep_fds[k] = fd;
        }
        keep_fds[7] = exit_wr;
        let forked = fork_child(None, || {
            close_all_but(&mut keep_fds);
            body(&slot);
            slot.record();
            let pid = libc::getpid().to_le_bytes();
            libc::write(exit_wr, pid.as_ptr().cast(), pid.len());
        });
        match forked {
            Ok(child) => {
                let pid = child.pid();
                // This set reaps the child itself (wait4, for its rusage): the guard must not.
                std::mem::forget(child);
                st.live.insert(pid, i);
                Ok(Some(pid))
            }
            Err(e) => {
                st.free.push(i);
                Err(e)
            }
        }
    }

    /// CPU and switches of every child so far (live ones as of their last reply), and the
    /// live pids.
    pub fn usage(&self) -> ChildUsage {
        let st = self.state.lock().expect("not poisoned");
        let mut u = st.retired;
        let mut pids = Vec::with_capacity(st.live.len());
        for (&pid, &i) in &st.live {
            u = u.plus(self.slot(i).read());
            pids.push(pid);
        }
        ChildUsage {
            usage: u,
            live: st.live.len() as u64,
            pids,
        }
    }

    pub fn live(&self) -> usize {
        self.state.lock().expect("not poisoned").live.len()
    }

    fn reap(&self) {
        loop {
            let mut b = [0u8; 4];
            let mut got = 0;
            while got < 4 {
                // SAFETY: reads into the valid remainder of b.
                let n = unsafe { libc::read(self.exit_rd, b[got..].as_mut_ptr().cast(), 4 - got) };
                if n > 0 {
                    got += n as usize;
                } else if n == 0 || super::net::errno() != libc::EINTR {
                    return;
                }
            }
            let pid = libc::pid_t::from_le_bytes(b);
            if pid == 0 {
                return;
            }
            let slot = self.state.lock().expect("not poisoned").live.remove(&pid);
            let Some(i) = slot else { continue };
            let u = wait4(pid);
            let mut st = self.state.lock().expect("not poisoned");
            st.retired = st.retired.plus(u);
            st.free.push(i);
        }
    }

    /// Kills and reaps every live child, stops the reaper; no new child is forked after.
    pub fn shutdown(&self) {
        {
            let mut st = self.state.lock().expect("not poisoned");
            st.closed = true;
            let live: Vec<(libc::pid_t, usize)> = st.live.drain().collect();
            for (pid, i) in live {
                // SAFETY: pid is our unreaped child (removed from `live` under the lock, so the
                // reaper will not wait for it), so it cannot have been reused.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
                let u = wait4(pid);
                st.retired = st.retired.plus(u);
                st.free.push(i);
            }
        }
        let stop = 0i32.to_le_bytes();
        // SAFETY: writes 4 bytes from a valid buffer to our pipe.
        unsafe {
            libc::write(self.exit_wr, stop.as_ptr().cast(), stop.len());
        }
        if let Some(h) = self.reaper.lock().expect("not poisoned").take() {
            let _ = h.join();
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        super::net::close(self.exit_rd);
        super::net::close(self.exit_wr);
    }
}

/// wait4 for one child, retried on EINTR; its rusage (zero if it could not be reaped).
fn wait4(pid: libc::pid_t) -> Usage {
    loop {
        let mut status = 0;
        // SAFETY: valid out pointers; pid is our child.
        let (rc, u) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            let rc = libc::wait4(pid, &mut status, 0, &mut ru);
            (rc, Usage::from_rusage(&ru))
        };
        if rc == pid {
            return u;
        }
        if rc < 0 && super::net::errno() == libc::EINTR {
            continue;
        }
        return Usage::default();
    }
}

/// Closes every descriptor from 3 up except those in `keep` (async-signal-safe: close_range,
/// or close one by one where the kernel lacks it). Sorts `keep` in place; -1 entries are
/// ignored.
pub fn close_all_but(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from: u32 = 3;
    for &k in keep.iter() {
        if k < 0 || (k as u32) < from {
            continue;
        }
        if k as u32 > from {
            close_range(from, k as u32 - 1);
        }
        from = k as u32 + 1;
    }
    close_range(from, u32::MAX);
}

fn close_range(first: u32, last: u32) {
    // SAFETY: close_range has no memory preconditions.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if rc != 0 {
        // Kernels before 5.9: close one by one, up to the descriptor limit.
        // SAFETY: getrlimit with a valid out pointer; close has no memory preconditions.
        unsafe {
            let mut rl = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
            #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
            let top = (rl.rlim_cur as u64).min(last as u64 + 1).min(1 << 20) as u32;
            for fd in first..top {
                libc::close(fd as RawFd);
            }
        }
    }
}
