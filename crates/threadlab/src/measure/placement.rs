//! Where threads and processes run: pinning to one CPU or two different CPUs.
//!
//! The placement is part of a metric's identity: on virtual machines a same-CPU hand-off and a
//! cross-CPU one differ by 10-40x. Every metric records the placement it was measured with.

use std::fmt;
use std::mem;

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Not pinned: the kernel chooses.
    Unpinned,
    /// Everything involved pinned to this one CPU.
    SameCpu(usize),
    /// The two parties pinned to these two different CPUs.
    CrossCpu(usize, usize),
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Unpinned => f.write_str("unpinned"),
            Placement::SameCpu(c) => write!(f, "same_cpu({c})"),
            Placement::CrossCpu(a, b) => write!(f, "cross_cpu({a},{b})"),
        }
    }
}

/// CPUs this process may run on (its affinity mask, which cgroups and taskset narrow).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most size_of::<cpu_set_t>().
    unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        if libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The CPU all same-CPU measurements use: the first allowed one.
pub fn home_cpu() -> usize {
    allowed_cpus().first().copied().unwrap_or(0)
}

/// Two different allowed CPUs, preferring ones that are not SMT siblings of each other.
pub fn cpu_pair() -> Option<(usize, usize)> {
    let cpus = allowed_cpus();
    let first = *cpus.first()?;
    let siblings = smt_siblings(first);
    cpus.iter()
        .skip(1)
        .find(|c| !siblings.contains(c))
        .or_else(|| cpus.get(1))
        .map(|&second| (first, second))
}

/// The logical CPUs sharing a physical core with `cpu` (itself included), from sysfs.
pub fn smt_siblings(cpu: usize) -> Vec<usize> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    std::fs::read_to_string(path)
        .map(|s| parse_cpu_list(s.trim()))
        .unwrap_or_else(|_| vec![cpu])
}

/// Parses the kernel's CPU list format ("0-3,8,10-11").
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(c) = part.parse() {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// Pins the calling thread (or, in a fresh child, process) to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    // SAFETY: the set is zero-initialised plain data and only the bit for `cpu` is set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(Error::os(&format!("cannot pin to CPU {cpu}")));
    }
    Ok(())
}

/// Pins the calling thread for the guard's lifetime and restores its previous mask after.
pub struct PinGuard {
    previous: libc::cpu_set_t,
}

impl PinGuard {
    pub fn pin(cpu: usize) -> Result<PinGuard> {
        // SAFETY: as in allowed_cpus: plain data, size passed is the buffer's size.
        let previous = unsafe {
            let mut set: libc::cpu_set_t = mem::zeroed();
            if libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Err(Error::os("cannot read CPU affinity"));
            }
            set
        };
        pin_current_thread(cpu)?;
        Ok(PinGuard { previous })
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        // SAFETY: restores a mask the kernel gave us; failure leaves the thread pinned, harmless.
        unsafe {
            libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &self.previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("5"), vec![5]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn placement_names() {
        assert_eq!(Placement::SameCpu(0).to_string(), "same_cpu(0)");
        assert_eq!(Placement::CrossCpu(0, 1).to_string(), "cross_cpu(0,1)");
        assert_eq!(Placement::Unpinned.to_string(), "unpinned");
    }

    #[test]
    fn pin_guard_pins_then_restores() {
        let before = allowed_cpus();
        std::thread::spawn(move || {
            {
                let _g = PinGuard::pin(home_cpu()).unwrap();
                assert_eq!(allowed_cpus(), vec![home_cpu()]);
            }
            assert_eq!(allowed_cpus(), before);
        })
        .join()
        .unwrap();
    }
}
