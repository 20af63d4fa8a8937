//! The kernel and C library: release and version, preemption model, boot options of note,
//! clocksource and timer resolution, memory, module parameters, glibc.

use std::collections::BTreeMap;
use std::path::Path;

use super::UNKNOWN;

pub(super) struct Uts {
    pub(super) nodename: String,
    pub(super) release: String,
    pub(super) version: String,
}

fn c_chars_to_string(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub(super) fn uname() -> Option<Uts> {
    // SAFETY: utsname is a plain struct of char arrays; all-zero bytes is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname that outlives the call.
    let rc = unsafe { libc::uname(&mut u) };
    if rc != 0 {
        return None;
    }
    Some(Uts {
        nodename: c_chars_to_string(&u.nodename),
        release: c_chars_to_string(&u.release),
        version: c_chars_to_string(&u.version),
    })
}

/// The selected entry of a sysfs choice list: "always [madvise] never" -> "madvise";
/// also accepts the parenthesised form used by debugfs, "none voluntary (full) lazy".
pub(super) fn selected_choice(s: &str) -> Option<String> {
    s.split_whitespace().find_map(|tok| {
        let inner = tok
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .or_else(|| tok.strip_prefix('(').and_then(|t| t.strip_suffix(')')))?;
        (!inner.is_empty()).then(|| inner.to_string())
    })
}

/// Preemption mode from /sys/kernel/debug/sched/preempt (PREEMPT_DYNAMIC kernels, root + debugfs).
pub(super) fn preemption_from_debugfs(s: &str) -> Option<String> {
    selected_choice(s).map(|m| format!("{m} (dynamic, read from debugfs)"))
}

/// Preemption model from `uname -v` and, for PREEMPT_DYNAMIC kernels, the boot command line.
pub(super) fn preemption_from_uname(v: &str, cmdline: &str) -> String {
    let toks: Vec<&str> = v.split_whitespace().collect();
    let has = |t: &str| toks.contains(&t);
    let old_rt = toks.windows(2).any(|w| w[0] == "PREEMPT" && w[1] == "RT");
    if has("PREEMPT_RT") || old_rt {
        "full (PREEMPT_RT)".to_string()
    } else if has("PREEMPT_DYNAMIC") {
        match cmdline_option(cmdline, "preempt") {
            Some(m) => format!("dynamic ({m}, from preempt= boot option)"),
            None => {
                "dynamic (mode unknown; default voluntary unless preempt= boot option)".to_string()
            }
        }
    } else if has("PREEMPT_LAZY") {
        "lazy".to_string()
    } else if has("PREEMPT") {
        "full".to_string()
    } else {
        "none/voluntary".to_string()
    }
}

/// The value of `name=value` on the kernel command line (options after "--" go to init and are ignored).
pub(super) fn cmdline_option(cmdline: &str, name: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .take_while(|t| *t != "--")
        .filter_map(|t| t.split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .last()
}

const BOOT_OPTIONS_OF_NOTE: &[&str] = &[
    "preempt",
    "isolcpus",
    "nohz_full",
    "nohz",
    "rcu_nocbs",
    "irqaffinity",
    "mitigations",
    "nosmt",
    "idle",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "cpuidle.off",
    "cpuidle_haltpoll.force",
    "intel_pstate",
    "amd_pstate",
    "threadirqs",
    "nopti",
    "pti",
    "clocksource",
    "tsc",
    "transparent_hugepage",
];

/// Kernel command-line options that affect scheduling, switching or timing.
pub(super) fn boot_options_of_note(cmdline: &str) -> Vec<String> {
    cmdline
        .split_whitespace()
        .take_while(|t| *t != "--")
        .filter(|t| {
            let key = t.split_once('=').map_or(*t, |(k, _)| k);
            BOOT_OPTIONS_OF_NOTE.contains(&key)
        })
        .map(str::to_string)
        .collect()
}

/// MemTotal from /proc/meminfo, in KiB.
pub(super) fn parse_meminfo_total_kib(s: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The parameters of a kernel module as name -> value, read from its
/// `/sys/module/<module>/parameters` folder `dir`, keeping the names `keep` accepts. `None` when
/// the folder does not exist (the module is not loaded); write-only parameters are left out.
pub(super) fn module_parameters(
    dir: &Path,
    keep: impl Fn(&str) -> bool,
) -> Option<BTreeMap<String, String>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut params = BTreeMap::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !keep(&name) {
            continue;
        }
        if let Ok(value) = std::fs::read_to_string(entry.path()) {
            params.insert(name, value.trim().to_string());
        }
    }
    Some(params)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(super) fn glibc_version() -> String {
    // SAFETY: gnu_get_libc_version takes no arguments and returns a pointer to a static,
    // NUL-terminated string owned by glibc.
    let p = unsafe { libc::gnu_get_libc_version() };
    if p.is_null() {
        return UNKNOWN.to_string();
    }
    // SAFETY: `p` is non-null and points to a static NUL-terminated string (see above).
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn glibc_version() -> String {
    "not glibc".to_string()
}

pub(super) fn timer_resolution_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return None;
    }
    let sec = u64::try_from(ts.tv_sec).ok()?;
    let nsec = u64::try_from(ts.tv_nsec).ok()?;
    sec.checked_mul(1_000_000_000)?.checked_add(nsec)
}

/// The kernel's tick rate (CONFIG_HZ): the coarse clocks advance once per tick, so their
/// resolution is one tick. It bounds how often the scheduler looks at a CPU that never sleeps.
pub(super) fn kernel_hz() -> Option<u32> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc != 0 || ts.tv_sec != 0 || ts.tv_nsec <= 0 {
        return None;
    }
    // Round: a tick of 4,000,000 ns is 250 Hz; 3,333,333 ns is 300 Hz.
    u32::try_from((1_000_000_000 + ts.tv_nsec / 2) / ts.tv_nsec).ok()
}

/// The calling thread's timer slack, ns (PR_GET_TIMERSLACK): how late the kernel may fire its
/// sleeps to batch them with other timers (50 µs by default; real-time threads get none).
pub(super) fn timer_slack_ns() -> Option<u64> {
    // SAFETY: PR_GET_TIMERSLACK takes no pointer and returns the slack.
    let v = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    u64::try_from(v).ok()
}

/// Each CPU vulnerability file under `dir` (/sys/devices/system/cpu/vulnerabilities) and what
/// the kernel does about it; None when the folder does not exist.
pub(super) fn vulnerabilities(dir: &Path) -> Option<BTreeMap<String, String>> {
    module_parameters(dir, |_| true)
}

/// The mitigations that cost something on kernel entry or a switch, counted from the
/// vulnerability map: (mitigated, vulnerable, not affected).
pub fn mitigation_counts(v: &BTreeMap<String, String>) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for status in v.values() {
        if status.starts_with("Not affected") {
            counts.2 += 1;
        } else if status.starts_with("Vulnerable") {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices() {
        assert_eq!(
            selected_choice("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            selected_choice("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(selected_choice("always madvise never"), None);
        assert_eq!(
            preemption_from_debugfs("none voluntary (full) lazy\n").as_deref(),
            Some("full (dynamic, read from debugfs)")
        );
        assert_eq!(
            preemption_from_debugfs("none [voluntary] full").as_deref(),
            Some("voluntary (dynamic, read from debugfs)")
        );
        assert_eq!(preemption_from_debugfs(""), None);
    }

    #[test]
    fn preemption_uname() {
        let none = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet";
        assert_eq!(
            preemption_from_uname("#1 SMP PREEMPT_DYNAMIC @0", none),
            "dynamic (mode unknown; default voluntary unless preempt= boot option)"
        );
        assert_eq!(
            preemption_from_uname(
                "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)",
                "root=/dev/sda1 preempt=full quiet"
            ),
            "dynamic (full, from preempt= boot option)"
        );
        assert_eq!(
            preemption_from_uname("#1 SMP PREEMPT_RT Debian 6.1.76-1", none),
            "full (PREEMPT_RT)"
        );
        assert_eq!(
            preemption_from_uname("#1 SMP PREEMPT RT Fri Jan 1 2021", none),
            "full (PREEMPT_RT)"
        );
        assert_eq!(
            preemption_from_uname("#1 SMP PREEMPT Tue Mar 5 2019", none),
            "full"
        );
        assert_eq!(
            preemption_from_uname("#58-Ubuntu SMP Thu Oct 13 08:03:55 UTC 2022", none),
            "none/voluntary"
        );
        assert_eq!(preemption_from_uname("", ""), "none/voluntary");
    }

    #[test]
    fn cmdline() {
        let c = "root=/dev/vda preempt=voluntary isolcpus=2-3 quiet -- preempt=full --init";
        assert_eq!(cmdline_option(c, "preempt").as_deref(), Some("voluntary"));
        assert_eq!(cmdline_option(c, "nohz_full"), None);
        assert_eq!(
            boot_options_of_note(c),
            vec!["preempt=voluntary", "isolcpus=2-3"]
        );
        assert_eq!(
            boot_options_of_note("mitigations=off nosmt threadirqs ro"),
            vec!["mitigations=off", "nosmt", "threadirqs"]
        );
    }

    #[test]
    fn tick_rate_and_slack_on_this_machine() {
        // Every Linux configuration ticks at 100 to 1000 Hz.
        let hz = kernel_hz().expect("a coarse clock");
        assert!((100..=1000).contains(&hz), "{hz}");
        assert!(timer_slack_ns().is_some());
    }

    #[test]
    fn mitigations_are_counted_by_status() {
        let v: BTreeMap<String, String> = [
            ("meltdown", "Not affected"),
            (
                "spectre_v1",
                "Mitigation: usercopy/swapgs barriers and __user pointer sanitization",
            ),
            ("spectre_v2", "Mitigation: Retpolines; IBPB: conditional"),
            (
                "mds",
                "Vulnerable: Clear CPU buffers attempted, no microcode",
            ),
        ]
        .iter()
        .map(|(k, s)| (k.to_string(), s.to_string()))
        .collect();
        assert_eq!(mitigation_counts(&v), (2, 1, 1));
    }

    #[test]
    fn meminfo() {
        let mem = "MemTotal:        8137592 kB\nMemFree:         7000000 kB\n";
        assert_eq!(parse_meminfo_total_kib(mem), Some(8_137_592));
        assert_eq!(parse_meminfo_total_kib("MemFree: 1 kB"), None);
    }

    #[test]
    fn module_parameters_from_captured_files() {
        let dir = std::env::temp_dir().join(format!("threadlab-modparams-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // /sys/module/haltpoll/parameters on a KVM guest, as read.
        for (name, value) in [
            ("guest_halt_poll_allow_shrink", "Y\n"),
            ("guest_halt_poll_grow", "2\n"),
            ("guest_halt_poll_grow_start", "50000\n"),
            ("guest_halt_poll_ns", "200000\n"),
            ("guest_halt_poll_shrink", "2\n"),
        ] {
            std::fs::write(dir.join(name), value).unwrap();
        }
        let all = module_parameters(&dir, |_| true).unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(all["guest_halt_poll_ns"], "200000");
        assert_eq!(all["guest_halt_poll_allow_shrink"], "Y");
        let some = module_parameters(&dir, |n| n.ends_with("_ns")).unwrap();
        assert_eq!(some.keys().collect::<Vec<_>>(), ["guest_halt_poll_ns"]);
        std::fs::remove_dir_all(&dir).unwrap();
        // Not loaded: absent.
        assert_eq!(module_parameters(&dir, |_| true), None);
    }
}
