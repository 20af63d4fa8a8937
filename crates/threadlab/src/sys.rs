//! Thin wrappers over the raw system calls the experiments time (futex, sched_yield, gettid).
//!
//! All are async-signal-safe, so forked children may use them.

use std::sync::atomic::AtomicU32;

/// Blocks while `*word == expected` (returns at once otherwise, or on a spurious wake-up).
/// `shared`: the word lives in memory shared between processes (non-private futex).
#[inline]
pub fn futex_wait(word: &AtomicU32, expected: u32, shared: bool) {
    futex_wait_until(word, expected, shared, None);
}

/// Like futex_wait, but returns after `timeout_ms` at the latest, so the caller can re-check
/// whether its partner is still there.
#[inline]
pub fn futex_wait_for(word: &AtomicU32, expected: u32, shared: bool, timeout_ms: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ms / 1000) as libc::time_t,
        tv_nsec: ((timeout_ms % 1000) * 1_000_000) as libc::c_long,
    };
    futex_wait_until(word, expected, shared, Some(&ts));
}

#[inline]
fn futex_wait_until(
    word: &AtomicU32,
    expected: u32,
    shared: bool,
    timeout: Option<&libc::timespec>,
) {
    let op = if shared {
        libc::FUTEX_WAIT
    } else {
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG
    };
    let ts = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: word is a valid, aligned u32 for the duration of the call; ts is null (no
    // timeout) or points to a valid relative timeout that outlives the call.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, expected, ts);
    }
}

/// Wakes up to `n` waiters blocked on `word`; returns how many were woken.
#[inline]
pub fn futex_wake(word: &AtomicU32, n: u32, shared: bool) -> i64 {
    let op = if shared {
        libc::FUTEX_WAKE
    } else {
        libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG
    };
    // SAFETY: word is a valid, aligned u32; FUTEX_WAKE only reads its address.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, n) }
}

#[inline]
pub fn sched_yield() {
    // SAFETY: no preconditions.
    unsafe {
        libc::sched_yield();
    }
}

pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() }
}

/// The scheduler state letter of a thread of this process ('R', 'S', 'D', ...), read from procfs.
pub fn task_state(tid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces; the state follows the last ')'.
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Voluntary and involuntary context switches of the calling thread so far (getrusage).
pub fn thread_context_switches() -> (u64, u64) {
    // SAFETY: ru is a valid out pointer; RUSAGE_THREAD is Linux-specific and always available.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        (ru.ru_nvcsw as u64, ru.ru_nivcsw as u64)
    }
}

/// Private anonymous memory of this process that is resident (RssAnon in /proc/self/status),
/// in bytes: the pages whose page-table entries a fork copies. The binary's and libraries'
/// file pages are resident too, but a fork leaves their entries to be faulted in again.
pub fn anon_rss_bytes() -> u64 {
    parse_anon_rss(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
}

fn parse_anon_rss(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Number of this process's mappings that a fork copies: every mapping in /proc/self/smaps but
/// those marked MADV_DONTFORK (`dc` in VmFlags). A fork duplicates each one (and its
/// page-table entries where it has private pages), and the child's exit tears it down again.
pub fn forked_mapping_count() -> usize {
    count_forked_mappings(&std::fs::read_to_string("/proc/self/smaps").unwrap_or_default())
}

fn count_forked_mappings(smaps: &str) -> usize {
    smaps
        .lines()
        .filter_map(|l| l.strip_prefix("VmFlags:"))
        .filter(|flags| !flags.split_whitespace().any(|f| f == "dc"))
        .count()
}

/// Number of threads in this process.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(1)
}

/// Per-CPU time counters from /proc/stat: (cpu number, idle + iowait ticks, all ticks), in
/// USER_HZ ticks (10 ms on common kernels).
pub fn cpu_ticks() -> Vec<(usize, u64, u64)> {
    parse_cpu_ticks(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

pub fn parse_cpu_ticks(stat: &str) -> Vec<(usize, u64, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal (guest time is inside user).
            let all: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            Some((cpu, idle, all))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn anon_rss_is_read_in_bytes() {
        let status = "Name:\tthreadlab\nVmRSS:\t   72032 kB\nRssAnon:\t   66044 kB\n";
        assert_eq!(super::parse_anon_rss(status), 66044 * 1024);
        assert_eq!(super::parse_anon_rss("Name:\tx\n"), 0);
        assert!(super::anon_rss_bytes() > 0);
    }

    #[test]
    fn forked_mappings_leave_out_dontfork() {
        let smaps = "55be7fe00000-55be7fe01000 r--p 00000000 fe:00 1 /bin/x\n\
                     Rss:                   4 kB\n\
                     VmFlags: rd mr mw me dw sd\n\
                     7f66c0000000-7f66c4000000 rw-p 00000000 00:00 0\n\
                     Rss:               65536 kB\n\
                     VmFlags: rd wr mr mw me dc ac\n\
                     7f66c4000000-7f66c4021000 rw-p 00000000 00:00 0\n\
                     VmFlags: rd wr mr mw me nr\n";
        assert_eq!(super::count_forked_mappings(smaps), 2);
        assert_eq!(super::count_forked_mappings(""), 0);
        // This process has at least its binary, its stack and libc mapped.
        assert!(super::forked_mapping_count() >= 3);
    }

    #[test]
    fn cpu_ticks_parse_per_cpu_lines_only() {
        let stat = "cpu  10 0 5 100 2 0 0 0 0 0\ncpu0 5 0 2 50 1 0 0 0 0 0\ncpu1 5 0 3 50 1 0 0 1 0 0\nintr 1\n";
        assert_eq!(super::parse_cpu_ticks(stat), vec![(0, 51, 58), (1, 51, 60)]);
    }

    use super::*;

    #[test]
    fn own_task_is_running() {
        assert_eq!(task_state(gettid()), Some('R'));
    }

    #[test]
    fn futex_wait_returns_when_value_differs() {
        let w = AtomicU32::new(1);
        futex_wait(&w, 0, false); // value is 1, not 0: returns at once (EAGAIN)
        assert_eq!(futex_wake(&w, 1, false), 0);
    }
}
