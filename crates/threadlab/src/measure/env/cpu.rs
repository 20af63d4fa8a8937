//! The processor: what /proc/cpuinfo says, which of its flags matter here, how many cores the
//! online CPUs form, and whether turbo is on.

use crate::measure::placement::{parse_cpu_list, smt_sibling_sets};

use super::read_trim;

#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct CpuInfo {
    pub(super) model: Option<String>,
    pub(super) vendor: Option<String>,
    pub(super) flags: Vec<String>,
    pub(super) mhz: Option<f64>,
}

/// Parses /proc/cpuinfo, taking the first occurrence of each key (the first CPU's block, plus
/// machine-wide lines such as ARM's "Hardware" that come at the end).
pub(super) fn parse_cpuinfo(s: &str) -> CpuInfo {
    let first = |key: &str| -> Option<String> {
        s.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let nonempty = |v: Option<String>| v.filter(|x| !x.is_empty());
    let model = nonempty(first("model name"))
        .or_else(|| nonempty(first("Hardware")))
        .or_else(|| nonempty(first("uarch")))
        .or_else(|| nonempty(first("cpu model")))
        .or_else(|| nonempty(first("cpu")));
    let vendor = nonempty(first("vendor_id"))
        .or_else(|| nonempty(first("CPU implementer")).map(|i| arm_implementer(&i)))
        .or_else(|| nonempty(first("mvendorid")));
    let flags = nonempty(first("flags"))
        .or_else(|| nonempty(first("Features")))
        .or_else(|| nonempty(first("isa")))
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let mhz = first("cpu MHz")
        .and_then(|m| m.parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m > 0.0);
    CpuInfo {
        model,
        vendor,
        flags,
        mhz,
    }
}

fn arm_implementer(code: &str) -> String {
    let name = match code.to_ascii_lowercase().as_str() {
        "0x41" => "ARM",
        "0x42" => "Broadcom",
        "0x43" => "Cavium",
        "0x46" => "Fujitsu",
        "0x48" => "HiSilicon",
        "0x4e" => "NVIDIA",
        "0x50" => "APM",
        "0x51" => "Qualcomm",
        "0x61" => "Apple",
        "0xc0" => "Ampere",
        _ => return format!("implementer {code}"),
    };
    format!("{name} ({code})")
}

const FLAGS_OF_NOTE: &[&str] = &[
    "constant_tsc",
    "nonstop_tsc",
    "tsc_known_freq",
    "tsc_reliable",
    "rdtscp",
    "rdpid",
    "hypervisor",
    "avx2",
    "avx512f",
    "amx_tile",
    "uintr",
    "waitpkg",
    "atomics",
];

pub(super) fn flags_of_note(flags: &[String]) -> Vec<String> {
    FLAGS_OF_NOTE
        .iter()
        .filter(|f| flags.iter().any(|x| x == *f))
        .map(|f| f.to_string())
        .collect()
}

pub(super) fn online_cpus() -> Option<usize> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

/// (physical cores, most threads on one core) over the online CPUs, from their SMT sibling
/// sets; `None` when sysfs hides the topology.
pub(super) fn topology(online: Option<usize>) -> (Option<usize>, Option<usize>) {
    let cpus = read_trim("/sys/devices/system/cpu/online")
        .and_then(|s| parse_cpu_list(&s))
        .unwrap_or_else(|| (0..online.unwrap_or(0)).collect());
    match smt_sibling_sets(&cpus) {
        Some(sets) => (Some(sets.len()), sets.iter().map(Vec::len).max()),
        None => (None, None),
    }
}

/// A CPU's last-level cache: the highest-level cache sysfs lists for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastLevelCache {
    pub level: u32,
    /// "Unified", "Data", ...
    pub kind: String,
    /// As sysfs gives it, e.g. "32768K".
    pub size: String,
    /// The CPUs sharing it.
    pub shared_with: Vec<usize>,
}

/// The last-level cache of `cpu`, or None when sysfs does not describe its caches.
pub fn last_level_cache(cpu: usize) -> Option<LastLevelCache> {
    let dir = std::path::PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/cache"));
    let mut best: Option<LastLevelCache> = None;
    for index in 0..16 {
        let d = dir.join(format!("index{index}"));
        let Some(level) = read_trim(d.join("level")).and_then(|l| l.parse::<u32>().ok()) else {
            continue;
        };
        let Some(shared_with) =
            read_trim(d.join("shared_cpu_list")).and_then(|l| parse_cpu_list(&l))
        else {
            continue;
        };
        if best.as_ref().map_or(true, |b| level > b.level) {
            best = Some(LastLevelCache {
                level,
                kind: read_trim(d.join("type")).unwrap_or_default(),
                size: read_trim(d.join("size")).unwrap_or_default(),
                shared_with,
            });
        }
    }
    best
}

/// The groups of `cpus` that share a last-level cache (each sorted, in order of their first
/// CPU); None when the cache topology is hidden.
pub fn llc_groups(cpus: &[usize]) -> Option<Vec<Vec<usize>>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &cpu in cpus {
        let shared = last_level_cache(cpu)?.shared_with;
        let mine: Vec<usize> = shared.into_iter().filter(|c| cpus.contains(c)).collect();
        if !groups.iter().any(|g| g.contains(&cpu)) {
            groups.push(if mine.is_empty() { vec![cpu] } else { mine });
        }
    }
    (!groups.is_empty()).then_some(groups)
}

/// The CPUs of each online NUMA node, in node order; None when sysfs does not list them.
pub fn numa_nodes() -> Option<Vec<Vec<usize>>> {
    let online = read_trim("/sys/devices/system/node/online").and_then(|s| parse_cpu_list(&s))?;
    online
        .iter()
        .map(|n| {
            read_trim(format!("/sys/devices/system/node/node{n}/cpulist"))
                .and_then(|s| parse_cpu_list(&s))
        })
        .collect()
}

/// Turbo state: intel_pstate/no_turbo ("1" = turbo off) wins over cpufreq/boost ("1" = on).
pub(super) fn turbo_state(no_turbo: Option<&str>, boost: Option<&str>) -> Option<bool> {
    match (no_turbo.map(str::trim), boost.map(str::trim)) {
        (Some("1"), _) => Some(false),
        (Some("0"), _) => Some(true),
        (_, Some("1")) => Some(true),
        (_, Some("0")) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO_X86: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model name\t: Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz\ncpu MHz\t\t: 4300.012\n\
flags\t\t: fpu vme tsc rdtscp constant_tsc nonstop_tsc avx2 ht hypervisor\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz\n\
cpu MHz\t\t: 800.000\nflags\t\t: fpu\n";

    const CPUINFO_ARM: &str = "processor\t: 0\nBogoMIPS\t: 108.00\n\
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid\n\
CPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n\n\
Hardware\t: BCM2835\nRevision\t: c03111\n";

    const CPUINFO_RISCV: &str = "processor\t: 0\nhart\t\t: 0\nisa\t\t: rv64imafdc\n\
mmu\t\t: sv39\nuarch\t\t: sifive,u74-mc\nmvendorid\t: 0x489\n";

    #[test]
    fn cpuinfo_x86() {
        let c = parse_cpuinfo(CPUINFO_X86);
        assert_eq!(
            c.model.as_deref(),
            Some("Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz")
        );
        assert_eq!(c.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(c.mhz, Some(4300.012));
        assert_eq!(
            flags_of_note(&c.flags),
            vec![
                "constant_tsc",
                "nonstop_tsc",
                "rdtscp",
                "hypervisor",
                "avx2"
            ]
        );
    }

    #[test]
    fn cpuinfo_arm_and_riscv() {
        let c = parse_cpuinfo(CPUINFO_ARM);
        assert_eq!(c.model.as_deref(), Some("BCM2835"));
        assert_eq!(c.vendor.as_deref(), Some("ARM (0x41)"));
        assert_eq!(c.mhz, None);
        assert_eq!(flags_of_note(&c.flags), vec!["atomics"]);
        let r = parse_cpuinfo(CPUINFO_RISCV);
        assert_eq!(r.model.as_deref(), Some("sifive,u74-mc"));
        assert_eq!(r.vendor.as_deref(), Some("0x489"));
        assert_eq!(parse_cpuinfo(""), CpuInfo::default());
        assert_eq!(parse_cpuinfo("garbage\n::\n:"), CpuInfo::default());
    }

    #[test]
    fn turbo() {
        assert_eq!(turbo_state(Some("1"), Some("1")), Some(false));
        assert_eq!(turbo_state(Some("0"), None), Some(true));
        assert_eq!(turbo_state(None, Some("1")), Some(true));
        assert_eq!(turbo_state(None, Some("0\n")), Some(false));
        assert_eq!(turbo_state(None, None), None);
    }
}
