//! Where threads and processes run: pinning to one CPU or two different CPUs.
//!
//! The placement is part of a metric's identity: on virtual machines a same-CPU hand-off and a
//! cross-CPU one differ by 10-40x. Every metric records the placement it was measured with.

use std::collections::BTreeSet;
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
///
/// Empty only when neither the affinity call nor `/proc/self/status` answers: the caller then
/// knows the mask is unknown rather than being handed a guess.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero bytes is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
    // SAFETY: `set` is valid and writable for size_of::<cpu_set_t>() bytes; pid 0 is this thread.
    let rc = unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc == 0 {
        let max = mem::size_of::<libc::cpu_set_t>() * 8;
        // SAFETY: every index is below the set's bit capacity, and `set` is initialised.
        let cpus: Vec<usize> = (0..max)
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect();
        if !cpus.is_empty() {
            return cpus;
        }
    }
    // The call fails when the kernel's mask is wider than cpu_set_t (over 1024 CPUs); procfs
    // still gives the list.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .and_then(parse_cpu_list)
            })
        })
        .unwrap_or_default()
}

/// The CPUs a placement (as metrics name it: "same_cpu(0)", "cross_cpu(0,1)", "cpus(0,1)",
/// "round_robin(0,1)") runs on; `allowed` (the process's CPUs) for "unpinned" or a name without
/// a list.
pub fn cpus_of(placement: &str, allowed: &[usize]) -> Vec<usize> {
    placement
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .and_then(parse_cpu_list)
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| allowed.to_vec())
}

/// Whether the kernel places the threads of a metric with this placement ("unpinned").
pub fn is_unpinned(placement: &str) -> bool {
    placement == "unpinned"
}

/// Whether a metric with this placement runs all its parties on one CPU of this machine:
/// "same_cpu(N)" and nothing else (not a server on another host, "client_cpu(0),server(...)").
pub fn on_one_cpu(placement: &str) -> bool {
    placement
        .strip_prefix("same_cpu(")
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(parse_cpu_list)
        .is_some_and(|cpus| cpus.len() == 1)
}

/// Whether a metric with this placement has its parties on two CPUs or lets the kernel place
/// them: "unpinned", or a list of more than one CPU ("cross_cpu(0,1)", "cpus(0,1), one worker
/// pinned per CPU"). "same_cpu(0)" and names without a list do not.
pub fn spans_two_cpus(placement: &str) -> bool {
    is_unpinned(placement)
        || placement
            .split_once('(')
            .and_then(|(_, rest)| rest.split_once(')'))
            .and_then(|(list, _)| parse_cpu_list(list))
            .is_some_and(|cpus| cpus.len() > 1)
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

/// The logical CPUs sharing a physical core with `cpu` (itself included), from sysfs; just
/// `cpu` when sysfs does not say.
pub fn smt_siblings(cpu: usize) -> Vec<usize> {
    read_smt_siblings(cpu).unwrap_or_else(|| vec![cpu])
}

/// `thread_siblings_list` of `cpu`, or `None` when it cannot be read or parsed (containers hide
/// it; offline CPUs have no topology folder).
fn read_smt_siblings(cpu: usize) -> Option<Vec<usize>> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
    let list = parse_cpu_list(&std::fs::read_to_string(path).ok()?)?;
    (!list.is_empty()).then_some(list)
}

/// The physical cores `cpus` lie on, each as its full SMT sibling set (sorted, deduplicated),
/// or `None` when sysfs gives the siblings of none of them.
///
/// Sibling sets are the kernel's own grouping into cores. The `core_id` file is not used: its
/// numbering is platform-defined (documented as "architecture and platform dependent"), so pairs
/// of package and core id can merge or split cores where the sibling lists do not.
pub fn smt_sibling_sets(cpus: &[usize]) -> Option<Vec<Vec<usize>>> {
    sibling_sets(cpus, read_smt_siblings)
}

/// Physical cores among `cpus` (SMT siblings counted once); `None` when topology is hidden.
pub fn physical_cores(cpus: &[usize]) -> Option<usize> {
    smt_sibling_sets(cpus).map(|sets| sets.len())
}

/// The distinct sibling sets of `cpus` given a lookup; a CPU whose siblings are unknown counts
/// as a core of its own, unless no CPU's siblings are known at all.
fn sibling_sets(
    cpus: &[usize],
    siblings: impl Fn(usize) -> Option<Vec<usize>>,
) -> Option<Vec<Vec<usize>>> {
    let mut known = false;
    let mut sets = BTreeSet::new();
    for &cpu in cpus {
        let set = match siblings(cpu) {
            Some(mut s) => {
                known = true;
                s.sort_unstable();
                s.dedup();
                s
            }
            None => vec![cpu],
        };
        sets.insert(set);
    }
    known.then(|| sets.into_iter().collect())
}

/// Parses a kernel CPU list such as "0-3,8-11" or "0,2,4" (also "0-15:2/4" stride groups, as in
/// `isolcpus=` and cpuset files). `None` when any part is malformed, so that a list the kernel
/// would reject is not silently read as a shorter one.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    const MAX_CPUS: usize = 1 << 20;
    let s = s.trim();
    let mut out = BTreeSet::new();
    if s.is_empty() {
        return Some(Vec::new());
    }
    for part in s.split(',') {
        let part = part.trim();
        let (range, stride) = match part.split_once(':') {
            Some((r, g)) => {
                let (used, size) = g.split_once('/')?;
                (
                    r,
                    Some((used.parse::<usize>().ok()?, size.parse::<usize>().ok()?)),
                )
            }
            None => (part, None),
        };
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let a = range.parse::<usize>().ok()?;
                (a, a)
            }
        };
        if a > b || b >= MAX_CPUS {
            return None;
        }
        for cpu in a..=b {
            match stride {
                Some((used, size)) if size > 0 => {
                    if (cpu - a) % size < used {
                        out.insert(cpu);
                    }
                }
                Some(_) => return None,
                None => {
                    out.insert(cpu);
                }
            }
        }
    }
    Some(out.into_iter().collect())
}

/// Sets the calling thread's affinity to `cpus`; false (errno set, for `Error::os`) when the
/// kernel refuses.
fn set_affinity(cpus: &[usize]) -> bool {
    // SAFETY: the set is zero-initialised plain data with only the bits for `cpus` set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), &set)
    };
    rc == 0
}

/// Pins the calling thread (or, in a fresh child, process) to one CPU.
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    if !set_affinity(&[cpu]) {
        return Err(Error::os(&format!("cannot pin to CPU {cpu}")));
    }
    Ok(())
}

/// Lets the calling thread (for the rest of its life) run on `cpus` only: one CPU pins it, every
/// allowed CPU leaves it where the kernel puts it.
pub fn place_current_thread(cpus: &[usize]) -> Result<()> {
    if !set_affinity(cpus) {
        return Err(Error::os(&format!(
            "cannot place the thread on CPUs {cpus:?}"
        )));
    }
    Ok(())
}

/// Pins the calling thread for the guard's lifetime and restores its previous mask after.
pub struct PinGuard {
    previous: libc::cpu_set_t,
}

impl PinGuard {
    pub fn pin(cpu: usize) -> Result<PinGuard> {
        Self::pin_set(&[cpu])
    }

    /// Lets the calling thread run on any of `cpus` (the kernel chooses among them, as under
    /// `taskset -c a,b`) for the guard's lifetime.
    pub fn pin_set(cpus: &[usize]) -> Result<PinGuard> {
        // SAFETY: as in allowed_cpus: plain data, size passed is the buffer's size.
        let previous = unsafe {
            let mut set: libc::cpu_set_t = mem::zeroed();
            if libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Err(Error::os("cannot read CPU affinity"));
            }
            set
        };
        if !set_affinity(cpus) {
            return Err(Error::os(&format!("cannot pin to CPUs {cpus:?}")));
        }
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
    fn tells_placements_on_two_cpus_from_those_on_one() {
        for two in [
            "unpinned",
            "cross_cpu(0,1)",
            "round_robin(0,1)",
            "cpus(0,1), one worker pinned per CPU",
            "cpus(2-3)",
        ] {
            assert!(spans_two_cpus(two), "{two}");
        }
        for one in [
            "same_cpu(0)",
            "same_cpu(1)",
            "one uthread carrier on CPU 0",
            "one uthread carrier, unpinned",
            "the CPUs used",
            "",
        ] {
            assert!(!spans_two_cpus(one), "{one}");
        }
    }

    #[test]
    fn only_same_cpu_with_one_cpu_is_on_one_cpu() {
        assert!(on_one_cpu("same_cpu(0)") && on_one_cpu("same_cpu(3)"));
        for not_one in [
            "unpinned",
            "cross_cpu(0,1)",
            "same_cpu(0,1)",
            "same_cpu(0) and more",
            "client_cpu(0),server(10.0.0.2:7000)",
            "one uthread carrier on CPU 0",
            "",
        ] {
            assert!(!on_one_cpu(not_one), "{not_one}");
        }
    }

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(
            parse_cpu_list("0-3,8-11"),
            Some(vec![0, 1, 2, 3, 8, 9, 10, 11])
        );
        assert_eq!(parse_cpu_list("0,2,4\n"), Some(vec![0, 2, 4]));
        assert_eq!(parse_cpu_list("5"), Some(vec![5]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("0-7:2/4"), Some(vec![0, 1, 4, 5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
        assert_eq!(parse_cpu_list("0-99999999999"), None);
        assert_eq!(parse_cpu_list("0-7:2/0"), None);
    }

    #[test]
    fn sibling_sets_count_each_core_once() {
        // 4 cores with 2 threads each, numbered the usual way (cpu N and N+4 share a core).
        let smt = |c: usize| Some(vec![c % 4, c % 4 + 4]);
        let all: Vec<usize> = (0..8).collect();
        assert_eq!(sibling_sets(&all, smt).map(|s| s.len()), Some(4));
        assert_eq!(sibling_sets(&[0, 4], smt), Some(vec![vec![0, 4]]));
        assert_eq!(sibling_sets(&[0, 1, 5], smt).map(|s| s.len()), Some(2));
        // Unsorted or repeated lists still name the same core.
        let messy = |c: usize| Some(if c == 0 { vec![4, 0, 0] } else { vec![0, 4] });
        assert_eq!(sibling_sets(&[0, 4], messy).map(|s| s.len()), Some(1));
        // Hidden topology: unknown, not a guess.
        assert_eq!(sibling_sets(&all, |_| None), None);
        assert_eq!(sibling_sets(&[], smt), None);
        // Partly hidden: unknown CPUs count as cores of their own.
        let partial = |c: usize| (c < 2).then(|| vec![0, 1]);
        assert_eq!(
            sibling_sets(&[0, 1, 2, 3], partial).map(|s| s.len()),
            Some(3)
        );
    }

    #[test]
    fn this_machine_has_cores() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        if let Some(n) = physical_cores(&cpus) {
            assert!(n >= 1 && n <= cpus.len());
        }
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
