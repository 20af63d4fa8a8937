//! The machine a run happened on, captured so that figures can be judged and compared.
//!
//! Every field is recorded because it changes what a thread measurement means:
//!
//! - `hostname`: tells runs from different machines apart when results are compared.
//! - `cpu_model`, `cpu_vendor`: switch, atomic and cache-line costs are properties of the core design.
//! - `cpu_flags_of_note`: `constant_tsc`/`nonstop_tsc`/`rdtscp` make the TSC a trustworthy clock;
//!   `hypervisor` marks a guest; `avx2`/`avx512f` widen the register state saved on a switch;
//!   `uintr`/`waitpkg` enable user interrupts and user-mode waits; `atomics` is ARM LSE.
//! - `logical_cpus`: how many threads can truly run at once; sets the knee of every scaling curve.
//! - `allowed_cpus`: the affinity mask we inherited; a narrower mask than `logical_cpus` caps parallelism.
//! - `physical_cores`, `smt`: two hardware threads of one core share execution units and caches
//!   (cores are the online CPUs' SMT sibling sets, as `measure::placement::physical_cores` counts them).
//! - `numa_nodes`: cross-node cache-line transfers cost several times more than same-node ones.
//! - `kernel_release`, `kernel_version`: scheduler, futex and clone costs change between kernels.
//! - `preemption_model`, `preempt_boot_option`: decide how quickly a woken thread gets the CPU.
//! - `boot_options_of_note`: `isolcpus`, `nohz_full`, `mitigations`, `idle=` and friends change switch
//!   and wake-up costs directly.
//! - `clocksource`, `available_clocksources`: a clock that is not `tsc` makes every timestamp dearer.
//! - `virtualized`, `hypervisor`, `hypervisor_cpuid_vendor`, `dmi_system`: guests pay VM exits for IPIs,
//!   timers and idle, and vCPUs can be descheduled by the host.
//! - `container`: containers bring cgroup quotas, seccomp filters and hidden `/sys` files.
//! - `cpuidle_driver`, `cpuidle_governor`: deep idle states add microseconds to every wake-up.
//! - `haltpoll_parameters`, `cpuidle_haltpoll_parameters`, `kvm_halt_poll_parameters`: how long an
//!   idle CPU polls before halting; polling turns a guest's wake-up from a VM exit into a store.
//! - `cpuidle_states`: each idle state's exit latency; a wake-up of an idle CPU pays the exit of
//!   the state it was in.
//! - `pm_qos_resume_latency_us`, `cpu_dma_latency_us`: power-management limits that forbid idle
//!   states slower to leave than the limit (0 keeps idle CPUs polling).
//! - `llc_shared_cpu_lists`, `llc_description`: CPUs that share a last-level cache hand data to
//!   each other through it; across caches a hand-off costs more.
//! - `kernel_hz`: the tick rate; how often the scheduler looks at a CPU that never sleeps.
//! - `nohz_full_cpus`, `isolated_cpus`: CPUs kept free of the tick and of ordinary tasks.
//! - `cpu_vulnerabilities`: each mitigation adds work to kernel entry, exit or switches.
//! - `timer_slack_ns`: how late a sleep may fire so that the kernel can batch timers.
//! - `transparent_hugepages_defrag`: whether a huge-page fault may stall to compact memory.
//! - `net_core_busy_read`, `net_core_busy_poll`: socket busy polling, machine-wide.
//! - `frequency_governor`, `frequency_driver`, `cpu_mhz`, `turbo_enabled`: clock speed scales every
//!   CPU-bound figure and ramps up only after load appears.
//! - `loadavg_start`, `runnable_tasks_start`, `procs_running_start`: other work competes for the CPUs.
//! - `loadavg_end`, `runnable_tasks_end`, `procs_running_end`: whether competition appeared during the run.
//! - `cgroup_cpu_limit`, `cgroup_cpu_max_raw`, `cgroup_cpuset_effective`: a CFS quota throttles threads
//!   in bursts; a cpuset narrows the usable CPUs.
//! - `rlimit_nproc`: caps how many threads or processes an experiment may create.
//! - `rlimit_nofile`: caps sockets and pipes, hence connections a server experiment may hold.
//! - `rlimit_rtprio`, `rt_priority_permitted`, `rt_priority_reason`: whether real-time experiments can run.
//! - `sched_rt_runtime_us`, `sched_rt_period_us`: RT throttling stops real-time threads each period.
//! - `sched_autogroup_enabled`: autogroup changes how CPU time is shared between sessions.
//! - `vm_max_map_count`, `threads_max`, `pid_max`: system-wide ceilings on thread creation (each
//!   thread stack is a mapping and every thread needs a pid).
//! - `cgroup_pids_max`: the cgroup's ceiling on tasks (threads included).
//! - `io_uring_disabled`: whether io_uring may be used at all.
//! - `seccomp_mode`: a seccomp filter runs on every system call this process makes.
//! - `net_core_somaxconn`, `net_ipv4_tcp_max_syn_backlog`, `net_ipv4_tcp_tw_reuse`,
//!   `net_ipv4_ip_local_port_range`: the backlogs and ports a server benchmark exhausts first.
//! - `glibc_version`: thread creation, mutexes and stack caching live in the C library.
//! - `build_profile`: a debug build of threadlab measures its own overhead, not the system.
//! - `target`: the architecture and OS the binary was built for.
//! - `memory_total_mib`: bounds how many thread stacks fit.
//! - `transparent_hugepages`: huge pages change page-fault and stack-touch costs.
//! - `perf_event_paranoid`: whether hardware counters can be read by later experiments.
//! - `timer_resolution_ns`: the finest step the monotonic clock reports.
//! - `clock_read_cost_ns`: what one clock read costs (filled in by the caller, which measures it).
//!
//! Capturing never panics: anything that cannot be read (containers hide much of `/sys`) is `None`,
//! an empty list, or `"unknown"`.
//!
//! One file per concern: `cpu` (cpuinfo, topology, caches), `kernel` (uname, preemption, boot
//! options, clock, tick, mitigations, glibc), `idle` (cpuidle states, PM QoS, residency), `virt`
//! (hypervisor, container), `cgroup` (quota, cpuset), `limits` (rlimits, real-time permission),
//! `load` (load average, CPU time by kind), `net` (the network stack's sysctls). Facts other parts of the lab also need (the
//! affinity mask, cores, SCHED_FIFO) come from `measure::placement` and `measure::sched`, so that
//! the environment records exactly what the experiments act on. How the environment is shown
//! and judged lives in `report::env` and `report::warnings`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub use capture::capture;

mod capture;
mod cgroup;
mod cpu;
mod idle;
mod kernel;
mod limits;
mod load;
mod net;
mod virt;

pub use cpu::{last_level_cache, llc_groups, numa_nodes, LastLevelCache};
pub use idle::{
    cpu_dma_latency_us, describe_states, idle_residency, idle_states, idle_states_at,
    resume_latency_summary, IdleResidency, IdleState,
};
pub use kernel::mitigation_counts;
pub use limits::{rlimit, Resource};
pub use load::CpuTimes;

const UNKNOWN: &str = "unknown";

/// A resource limit. `None` in `soft` or `hard` means unlimited (`RLIM_INFINITY`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Rlimit {
    /// Soft (enforced) limit; `None` = unlimited.
    pub soft: Option<u64>,
    /// Hard (ceiling) limit; `None` = unlimited.
    pub hard: Option<u64>,
}

/// The machine, kernel and process settings a run happened under.
///
/// Fields that could not be determined are `None` (or `"unknown"` for strings that are always present).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Environment {
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
    pub cpu_vendor: Option<String>,
    pub cpu_flags_of_note: Vec<String>,
    /// Online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)`).
    pub logical_cpus: Option<usize>,
    /// CPUs in this process's affinity mask (`sched_getaffinity`).
    pub allowed_cpus: Vec<usize>,
    /// Physical cores the online CPUs form (distinct SMT sibling sets in sysfs topology).
    pub physical_cores: Option<usize>,
    /// More than one hardware thread per core (or `/sys/devices/system/cpu/smt/active` = 1).
    pub smt: Option<bool>,
    pub numa_nodes: Option<usize>,
    /// `uname -r`.
    pub kernel_release: String,
    /// `uname -v`; carries PREEMPT / PREEMPT_DYNAMIC / PREEMPT_RT.
    pub kernel_version: String,
    pub preemption_model: String,
    /// The `preempt=` value from the kernel command line, if any.
    pub preempt_boot_option: Option<String>,
    /// Kernel command-line options that affect scheduling and switch costs.
    pub boot_options_of_note: Vec<String>,
    pub clocksource: Option<String>,
    pub available_clocksources: Vec<String>,
    pub virtualized: Option<bool>,
    /// Best name for the hypervisor or cloud, e.g. "KVM (Amazon EC2)".
    pub hypervisor: Option<String>,
    /// Raw CPUID leaf 0x40000000 vendor string, e.g. "KVMKVMKVM".
    pub hypervisor_cpuid_vendor: Option<String>,
    /// DMI "sys_vendor / product_name".
    pub dmi_system: Option<String>,
    /// Container runtime evidence, e.g. "docker (/.dockerenv)".
    pub container: Option<String>,
    pub cpuidle_driver: Option<String>,
    pub cpuidle_governor: Option<String>,
    /// Parameters of the guest `haltpoll` cpuidle governor (`guest_halt_poll_ns`, ...); absent
    /// when the module is not loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub haltpoll_parameters: Option<BTreeMap<String, String>>,
    /// Parameters of the `cpuidle_haltpoll` driver (`force`); absent when not loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuidle_haltpoll_parameters: Option<BTreeMap<String, String>>,
    /// The `halt_poll*` parameters of the `kvm` module: how long this kernel, as a host, polls
    /// for a halted vCPU of its guests. Absent when kvm is not loaded; a guest cannot see its
    /// own host's values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvm_halt_poll_parameters: Option<BTreeMap<String, String>>,
    /// The cpuidle states of the first allowed CPU, shallowest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpuidle_states: Vec<IdleState>,
    /// Per-CPU resume-latency limits, "VALUE on CPUS" groups ("0": no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pm_qos_resume_latency_us: Option<String>,
    /// The global CPU-latency limit programs hold through /dev/cpu_dma_latency, µs
    /// (2,000,000,000: none); absent when it cannot be read (root only on most systems).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_us: Option<i64>,
    /// The distinct groups of allowed CPUs sharing a last-level cache, as CPU lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub llc_shared_cpu_lists: Vec<String>,
    /// The first allowed CPU's last-level cache, e.g. "L3 Unified 32768K".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc_description: Option<String>,
    /// CONFIG_HZ, from the coarse clock's resolution (one tick).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_hz: Option<u32>,
    /// CPUs in adaptive-tick mode (/sys/devices/system/cpu/nohz_full); absent when the kernel
    /// has no such file, empty when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nohz_full_cpus: Option<String>,
    /// CPUs isolated from the scheduler's balancing (isolcpus=); empty when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated_cpus: Option<String>,
    /// /sys/devices/system/cpu/vulnerabilities: each issue and what the kernel does about it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_vulnerabilities: BTreeMap<String, String>,
    /// This process's timer slack at start, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u64>,
    pub frequency_governor: Option<String>,
    pub frequency_driver: Option<String>,
    /// "cpu MHz" of the first CPU in /proc/cpuinfo.
    pub cpu_mhz: Option<f64>,
    /// Turbo/boost state when visible (intel_pstate/no_turbo or cpufreq/boost).
    pub turbo_enabled: Option<bool>,
    pub loadavg_start: Option<[f64; 3]>,
    /// Runnable tasks other than ourselves at start (/proc/loadavg "r/t" minus one).
    pub runnable_tasks_start: Option<u64>,
    /// `procs_running` from /proc/stat at start (includes ourselves).
    pub procs_running_start: Option<u64>,
    pub loadavg_end: Option<[f64; 3]>,
    pub runnable_tasks_end: Option<u64>,
    pub procs_running_end: Option<u64>,
    /// Steal ticks per CPU (/proc/stat) when the run started, for `steal_ms_during_run`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steal_ticks_start: Vec<(usize, u64)>,
    /// Time the hypervisor ran something else on each CPU during the run (steal), ms, 10 ms
    /// resolution; absent in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ms_during_run: Option<Vec<(usize, f64)>>,
    /// The run's wall time, seconds, for reading the steal against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_wall_s: Option<f64>,
    /// CPU quota in CPUs (quota / period), the tightest along the cgroup path; `None` = no quota or unknown.
    pub cgroup_cpu_limit: Option<f64>,
    /// Raw quota as "quota period" (v2 cpu.max, or v1 cfs_quota_us and cfs_period_us).
    pub cgroup_cpu_max_raw: Option<String>,
    /// Effective cpuset of our cgroup as a CPU list string.
    pub cgroup_cpuset_effective: Option<String>,
    /// Tightest `pids.max` along our cgroup path: a number or "max"; absent when not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_pids_max: Option<String>,
    /// RLIMIT_NPROC; inside, `None` = unlimited. Outer `None` = could not read.
    pub rlimit_nproc: Option<Rlimit>,
    /// RLIMIT_RTPRIO; inside, `None` = unlimited. Outer `None` = could not read.
    pub rlimit_rtprio: Option<Rlimit>,
    /// RLIMIT_NOFILE; inside, `None` = unlimited. Outer `None` = could not read.
    pub rlimit_nofile: Option<Rlimit>,
    /// Whether a fresh thread could switch itself to SCHED_FIFO priority 1.
    pub rt_priority_permitted: bool,
    /// Why it could not, when it could not.
    pub rt_priority_reason: Option<String>,
    pub sched_rt_runtime_us: Option<i64>,
    pub sched_rt_period_us: Option<i64>,
    pub sched_autogroup_enabled: Option<bool>,
    pub vm_max_map_count: Option<u64>,
    pub threads_max: Option<u64>,
    pub pid_max: Option<u64>,
    /// `kernel.io_uring_disabled`: 0 allowed, 1 only for `kernel.io_uring_group`, 2 refused;
    /// absent on kernels without the file (before 6.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_uring_disabled: Option<u8>,
    /// This process's seccomp mode: 0 none, 1 strict, 2 filter.
    pub seccomp_mode: Option<u8>,
    pub net_core_somaxconn: Option<u64>,
    pub net_ipv4_tcp_max_syn_backlog: Option<u64>,
    /// 0 off, 1 on, 2 loopback only.
    pub net_ipv4_tcp_tw_reuse: Option<u32>,
    /// Ephemeral ports, [first, last].
    pub net_ipv4_ip_local_port_range: Option<[u32; 2]>,
    /// `net.core.busy_read`, µs (0: sockets never busy-poll unless they ask, SO_BUSY_POLL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_busy_read: Option<u64>,
    /// `net.core.busy_poll`, µs, for poll and select.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_busy_poll: Option<u64>,
    /// glibc version, or "not glibc".
    pub glibc_version: String,
    /// "debug" or "release".
    pub build_profile: String,
    /// The directories `cargo run` had put in front of `LD_LIBRARY_PATH`, which threadlab took
    /// out before starting any child (`threadlab::launch`); empty when it was not started so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cargo_library_path_removed: Vec<String>,
    /// ARCH-OS, e.g. "x86_64-linux".
    pub target: String,
    pub memory_total_mib: Option<u64>,
    pub transparent_hugepages: Option<String>,
    /// /sys/kernel/mm/transparent_hugepage/defrag: whether a huge-page fault may stall to
    /// compact memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_hugepages_defrag: Option<String>,
    pub perf_event_paranoid: Option<i32>,
    /// `clock_getres(CLOCK_MONOTONIC)` in nanoseconds.
    pub timer_resolution_ns: Option<u64>,
    /// Cost of one clock read; left `None` here, the caller measures and fills it.
    pub clock_read_cost_ns: Option<f64>,
    /// Time of a fixed register-only loop (measure::sampler::reference_loop_ns) at the start and
    /// end of the run, filled by the caller. A CPU that got slower or faster in between (host
    /// contention on a VM, frequency changes) shows here, where no system call is involved.
    pub reference_loop_ns_start: Option<f64>,
    pub reference_loop_ns_end: Option<f64>,
    /// Time of a fixed throughput-bound loop (measure::sampler::reference_wide_ns) at the start
    /// and end of the run, filled by the caller: it slows when a co-tenant takes the core's
    /// issue slots, which the register-only chain above hardly notices.
    pub reference_wide_ns_start: Option<f64>,
    pub reference_wide_ns_end: Option<f64>,
    /// Time of one cheap system call (getppid) at the start and end of the run, filled by the
    /// caller: the kernel entry/exit path, which moves with mitigations and host state.
    pub reference_syscall_ns_start: Option<f64>,
    pub reference_syscall_ns_end: Option<f64>,
    /// One step of a dependent walk through 64 MiB (measure::drift::reference_memory_ns) at the
    /// start and end of the run, filled by the caller: it slows when the host's other tenants
    /// load the shared cache and memory, which the loops above do not see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_memory_ns_start: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_memory_ns_end: Option<f64>,
    /// The cache-line round trip between the two CPUs the experiments use
    /// (measure::pair::reference_pair_ns) at the start and end of the run, filled by the
    /// caller: where the host ran the two vCPUs (on the 2-vCPU EPYC guest this was written on,
    /// about 45 ns on one core complex, about 370 ns across two). Absent on one CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_pair_ns_start: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_pair_ns_end: Option<f64>,
    /// The lowest and highest of every reading of that round trip in the run (at its start and
    /// end, and before and after every experiment): far apart, the host moved the vCPUs during
    /// the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_pair_ns_range: Option<[f64; 2]>,
}

impl Environment {
    /// Whether the run was in a virtual machine (known to be: an unknown answer is not a guest).
    /// In a guest the host serves idle-vCPU wake-ups and shares caches and memory with other
    /// tenants, which the figures that depend on them carry (`idle_vcpu`, compare's rules).
    pub fn is_guest(&self) -> bool {
        self.virtualized == Some(true)
    }

    /// What decides the cost of waking an idle CPU here, for the notes of cross-CPU wake-up
    /// metrics whose samples fall in two clusters: the cpuidle driver and governor and, on a
    /// KVM guest, the halt-polling parameters (a CPU still polling in its idle loop sees a
    /// wake-up at once; one that halted costs an exit to the host and back).
    pub fn idle_state_description(&self) -> String {
        let mut s = format!(
            "cpuidle driver {}, governor {}",
            self.cpuidle_driver.as_deref().unwrap_or("unknown"),
            self.cpuidle_governor.as_deref().unwrap_or("unknown")
        );
        let params = |m: &Option<BTreeMap<String, String>>| {
            m.as_ref().map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        };
        if let Some(p) = params(&self.haltpoll_parameters) {
            s.push_str(&format!("; haltpoll {p}"));
        }
        if let Some(p) = params(&self.kvm_halt_poll_parameters) {
            s.push_str(&format!("; kvm {p}"));
        }
        s
    }

    /// Records the load figures at the end of the run.
    pub fn record_end(&mut self) {
        (
            self.loadavg_end,
            self.runnable_tasks_end,
            self.procs_running_end,
        ) = load::load_now();
        if !self.steal_ticks_start.is_empty() {
            self.steal_ms_during_run = Some(crate::measure::host::steal_ms(
                &self.steal_ticks_start,
                &crate::measure::host::steal_ticks(),
            ));
        }
    }
}

/// Time the CPUs in `cpus` (all when empty) spent busy, idle and stolen so far (/proc/stat).
pub fn cpu_times(cpus: &[usize]) -> Option<CpuTimes> {
    read("/proc/stat")
        .as_deref()
        .and_then(|s| load::parse_cpu_times(s, cpus))
}

/// A CPU list in the kernel's compact form: [0, 1, 2, 5] -> "0-2,5".
pub fn cpu_list_text(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        while i + 1 < v.len() && v[i + 1] == v[i] + 1 {
            i += 1;
        }
        parts.push(if v[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", v[i])
        });
        i += 1;
    }
    parts.join(",")
}

/// A sysfs CPU list where the kernel writes "(null)" or nothing for none: "" for none.
fn none_if_null(s: &str) -> String {
    let t = s.trim();
    if t == "(null)" {
        String::new()
    } else {
        t.to_string()
    }
}

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_trim(path: impl AsRef<Path>) -> Option<String> {
    read(path)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn read_num<T: std::str::FromStr>(path: impl AsRef<Path>) -> Option<T> {
    read_trim(path).and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_on_this_machine() {
        let mut env = capture();
        assert!(env.logical_cpus.unwrap_or(0) >= 1);
        assert!(!env.kernel_release.is_empty());
        assert!(
            ["debug", "release", "release+race-hooks"].contains(&env.build_profile.as_str()),
            "{}",
            env.build_profile
        );
        env.record_end();
        let json = serde_json::to_string(&env).unwrap();
        let back: Environment = serde_json::from_str(&json).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn cpu_lists_are_compact() {
        assert_eq!(cpu_list_text(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpu_list_text(&[3]), "3");
        assert_eq!(cpu_list_text(&[]), "");
        assert_eq!(none_if_null("(null)\n"), "");
        assert_eq!(none_if_null("2-3\n"), "2-3");
    }

    #[test]
    fn older_json_without_new_fields_still_loads() {
        let back: Environment = serde_json::from_str(r#"{"kernel_release":"6.1.0"}"#).unwrap();
        assert_eq!(back.kernel_release, "6.1.0");
        assert_eq!(back.logical_cpus, None);
    }
}
