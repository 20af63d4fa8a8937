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
//! - `physical_cores`, `smt`: two hardware threads of one core share execution units and caches.
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
//! - `frequency_governor`, `frequency_driver`, `cpu_mhz`, `turbo_enabled`: clock speed scales every
//!   CPU-bound figure and ramps up only after load appears.
//! - `loadavg_start`, `runnable_tasks_start`, `procs_running_start`: other work competes for the CPUs.
//! - `loadavg_end`, `runnable_tasks_end`, `procs_running_end`: whether competition appeared during the run.
//! - `cgroup_cpu_limit`, `cgroup_cpu_max_raw`, `cgroup_cpuset_effective`: a CFS quota throttles threads
//!   in bursts; a cpuset narrows the usable CPUs.
//! - `rlimit_nproc`: caps how many threads or processes an experiment may create.
//! - `rlimit_rtprio`, `rt_priority_permitted`, `rt_priority_reason`: whether real-time experiments can run.
//! - `sched_rt_runtime_us`, `sched_rt_period_us`: RT throttling stops real-time threads each period.
//! - `sched_autogroup_enabled`: autogroup changes how CPU time is shared between sessions.
//! - `vm_max_map_count`, `threads_max`, `pid_max`: system-wide ceilings on thread creation (each
//!   thread stack is a mapping and every thread needs a pid).
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

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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
    /// Distinct (physical package id, core id) pairs in sysfs topology.
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
    /// CPU quota in CPUs (quota / period), the tightest along the cgroup path; `None` = no quota or unknown.
    pub cgroup_cpu_limit: Option<f64>,
    /// Raw quota as "quota period" (v2 cpu.max, or v1 cfs_quota_us and cfs_period_us).
    pub cgroup_cpu_max_raw: Option<String>,
    /// Effective cpuset of our cgroup as a CPU list string.
    pub cgroup_cpuset_effective: Option<String>,
    /// RLIMIT_NPROC; inside, `None` = unlimited. Outer `None` = could not read.
    pub rlimit_nproc: Option<Rlimit>,
    /// RLIMIT_RTPRIO; inside, `None` = unlimited. Outer `None` = could not read.
    pub rlimit_rtprio: Option<Rlimit>,
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
    /// glibc version, or "not glibc".
    pub glibc_version: String,
    /// "debug" or "release".
    pub build_profile: String,
    /// ARCH-OS, e.g. "x86_64-linux".
    pub target: String,
    pub memory_total_mib: Option<u64>,
    pub transparent_hugepages: Option<String>,
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
}

/// Captures the environment at run start. Never panics; unknown values become `None` / "unknown".
pub fn capture() -> Environment {
    let cpuinfo_text = read("/proc/cpuinfo");
    let cpuinfo = cpuinfo_text
        .as_deref()
        .map(parse_cpuinfo)
        .unwrap_or_default();
    let uts = uname();
    let cmdline = read("/proc/cmdline").unwrap_or_default();
    let (kernel_release, kernel_version, hostname) = match &uts {
        Some(u) => (
            u.release.clone(),
            u.version.clone(),
            Some(u.nodename.clone()),
        ),
        None => (
            UNKNOWN.to_string(),
            UNKNOWN.to_string(),
            read_trim("/proc/sys/kernel/hostname"),
        ),
    };
    let preemption_model = read("/sys/kernel/debug/sched/preempt")
        .as_deref()
        .and_then(preemption_from_debugfs)
        .unwrap_or_else(|| preemption_from_uname(&kernel_version, &cmdline));

    let logical_cpus = online_cpus();
    let (physical_cores, threads_per_core) = topology();
    let smt_active = read_trim("/sys/devices/system/cpu/smt/active").map(|s| s == "1");
    let smt = match (threads_per_core, smt_active) {
        (Some(t), Some(a)) => Some(t > 1 || a),
        (Some(t), None) => Some(t > 1),
        (None, a) => a,
    };

    let virt = detect_virtualization(&cpuinfo);
    let load_start = read("/proc/loadavg").as_deref().and_then(parse_loadavg);
    let procs_running_start = read("/proc/stat").as_deref().and_then(parse_procs_running);
    let (cgroup_cpu_limit, cgroup_cpu_max_raw) = cgroup_cpu_quota();
    let rlimit_rtprio = get_rlimit_rtprio();
    let (rt_priority_permitted, rt_priority_reason) = probe_rt_priority(rlimit_rtprio);

    Environment {
        hostname,
        cpu_model: cpuinfo.model.clone(),
        cpu_vendor: cpuinfo.vendor.clone(),
        cpu_flags_of_note: flags_of_note(&cpuinfo.flags),
        logical_cpus,
        allowed_cpus: allowed_cpus(),
        physical_cores,
        smt,
        numa_nodes: read_trim("/sys/devices/system/node/online")
            .and_then(|s| parse_cpu_list(&s))
            .map(|v| v.len()),
        kernel_release,
        kernel_version,
        preemption_model,
        preempt_boot_option: cmdline_option(&cmdline, "preempt"),
        boot_options_of_note: boot_options_of_note(&cmdline),
        clocksource: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        available_clocksources: read(
            "/sys/devices/system/clocksource/clocksource0/available_clocksource",
        )
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default(),
        virtualized: virt.virtualized,
        hypervisor: virt.hypervisor,
        hypervisor_cpuid_vendor: virt.cpuid_vendor,
        dmi_system: virt.dmi_system,
        container: virt.container,
        cpuidle_driver: read_trim("/sys/devices/system/cpu/cpuidle/current_driver"),
        cpuidle_governor: read_trim("/sys/devices/system/cpu/cpuidle/current_governor_ro")
            .or_else(|| read_trim("/sys/devices/system/cpu/cpuidle/current_governor")),
        frequency_governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        frequency_driver: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver"),
        cpu_mhz: cpuinfo.mhz,
        turbo_enabled: turbo_state(
            read_trim("/sys/devices/system/cpu/intel_pstate/no_turbo").as_deref(),
            read_trim("/sys/devices/system/cpu/cpufreq/boost")
                .or_else(|| read_trim("/sys/devices/system/cpu/cpufreq/policy0/boost"))
                .as_deref(),
        ),
        loadavg_start: load_start.map(|l| l.avg),
        runnable_tasks_start: load_start.map(|l| l.running.saturating_sub(1)),
        procs_running_start,
        loadavg_end: None,
        runnable_tasks_end: None,
        procs_running_end: None,
        cgroup_cpu_limit,
        cgroup_cpu_max_raw,
        cgroup_cpuset_effective: cgroup_cpuset(),
        rlimit_nproc: get_rlimit_nproc(),
        rlimit_rtprio,
        rt_priority_permitted,
        rt_priority_reason,
        sched_rt_runtime_us: read_num("/proc/sys/kernel/sched_rt_runtime_us"),
        sched_rt_period_us: read_num("/proc/sys/kernel/sched_rt_period_us"),
        sched_autogroup_enabled: read_num::<u64>("/proc/sys/kernel/sched_autogroup_enabled")
            .map(|v| v != 0),
        vm_max_map_count: read_num("/proc/sys/vm/max_map_count"),
        threads_max: read_num("/proc/sys/kernel/threads-max"),
        pid_max: read_num("/proc/sys/kernel/pid_max"),
        glibc_version: glibc_version(),
        build_profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_string(),
        target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
        memory_total_mib: read("/proc/meminfo")
            .as_deref()
            .and_then(parse_meminfo_total_kib)
            .map(|kib| kib / 1024),
        transparent_hugepages: read("/sys/kernel/mm/transparent_hugepage/enabled")
            .as_deref()
            .and_then(selected_choice),
        perf_event_paranoid: read_num("/proc/sys/kernel/perf_event_paranoid"),
        timer_resolution_ns: timer_resolution_ns(),
        clock_read_cost_ns: None,
        reference_loop_ns_start: None,
        reference_loop_ns_end: None,
        reference_wide_ns_start: None,
        reference_wide_ns_end: None,
        reference_syscall_ns_start: None,
        reference_syscall_ns_end: None,
    }
}

impl Environment {
    /// Records the load figures at the end of the run.
    pub fn record_end(&mut self) {
        let load = read("/proc/loadavg").as_deref().and_then(parse_loadavg);
        self.loadavg_end = load.map(|l| l.avg);
        self.runnable_tasks_end = load.map(|l| l.running.saturating_sub(1));
        self.procs_running_end = read("/proc/stat").as_deref().and_then(parse_procs_running);
    }

    /// Human-readable description, one aligned "key: value" per line (for `threadlab env`).
    pub fn render_text(&self) -> String {
        let rows = self.rows();
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
        let mut out = String::new();
        for (key, value) in rows {
            let label = format!("{key}:");
            out.push_str(&format!("{label:<width$} {value}\n"));
        }
        out
    }

    /// Compact one-line summary: CPU model, cores/threads, kernel, preemption, virtualisation, governor.
    pub fn one_line(&self) -> String {
        let model = self.cpu_model.as_deref().unwrap_or("unknown CPU");
        let cores = self
            .physical_cores
            .map_or_else(|| "?".to_string(), |c| c.to_string());
        let threads = self
            .logical_cpus
            .map_or_else(|| "?".to_string(), |c| c.to_string());
        let virt = match (self.virtualized, &self.hypervisor) {
            (_, Some(h)) => format!("virtualised ({h})"),
            (Some(true), None) => "virtualised".to_string(),
            (Some(false), None) => "bare metal".to_string(),
            (None, None) => "virtualisation unknown".to_string(),
        };
        let mut s = format!(
            "{model}, {cores} cores/{threads} threads, Linux {}, preemption {}, {virt}, governor {}",
            self.kernel_release,
            short_preemption(&self.preemption_model),
            self.frequency_governor.as_deref().unwrap_or(UNKNOWN),
        );
        if let Some(c) = &self.container {
            s.push_str(&format!(", container {c}"));
        }
        s
    }

    /// Conditions that make figures less trustworthy or harder to compare.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        for (what, start, end) in [
            (
                "a fixed register-only loop",
                self.reference_loop_ns_start,
                self.reference_loop_ns_end,
            ),
            (
                "a fixed throughput-bound loop",
                self.reference_wide_ns_start,
                self.reference_wide_ns_end,
            ),
            (
                "a getppid system call",
                self.reference_syscall_ns_start,
                self.reference_syscall_ns_end,
            ),
        ] {
            if let (Some(a), Some(b)) = (start, end) {
                let drift = (b - a) / a * 100.0;
                if drift.abs() > 5.0 {
                    w.push(format!(
                        "the machine's speed drifted during the run ({what} took {a:.1} ns at \
                         start, {b:.1} ns at end, {drift:+.0}%): figures from different moments \
                         are not comparable; on a VM this is usually the host's load"
                    ));
                }
            }
        }
        if self.build_profile == "debug" {
            w.push(
                "debug build: threadlab's own overhead inflates the figures; use a release build"
                    .to_string(),
            );
        }
        let cpus = self
            .logical_cpus
            .or_else(|| (!self.allowed_cpus.is_empty()).then_some(self.allowed_cpus.len()));
        if let (Some(load), Some(n)) = (self.loadavg_start, cpus) {
            if n > 0 && load[0] > 0.5 * n as f64 {
                w.push(format!(
                    "busy machine: 1-minute load average {:.2} at start is above 0.5 per CPU ({n} CPUs)",
                    load[0]
                ));
            }
        }
        if let Some(r) = self.runnable_tasks_start.filter(|&r| r > 0) {
            w.push(format!(
                "{r} other runnable task(s) at start compete for the CPUs"
            ));
        }
        if let Some(r) = self.runnable_tasks_end.filter(|&r| r > 0) {
            w.push(format!(
                "{r} other runnable task(s) at end: competition may have appeared during the run"
            ));
        }
        if self.frequency_governor.as_deref() == Some("powersave") {
            let note = if self.frequency_driver.as_deref() == Some("intel_pstate") {
                " (with intel_pstate this still scales, but ramps more slowly)"
            } else {
                ""
            };
            w.push(format!(
                "CPU frequency governor is powersave: clocks may be low or ramp slowly{note}"
            ));
        }
        if let (Some(limit), Some(n)) = (self.cgroup_cpu_limit, cpus) {
            if limit < n as f64 {
                w.push(format!(
                    "cgroup CPU quota is {limit:.2} CPUs, below the {n} CPUs visible: threads will be throttled in bursts"
                ));
            }
        }
        if let Some(n) = self.logical_cpus {
            if !self.allowed_cpus.is_empty() && self.allowed_cpus.len() < n {
                w.push(format!(
                    "affinity mask allows {} of {n} online CPUs",
                    self.allowed_cpus.len()
                ));
            }
        }
        if self.virtualized == Some(true) {
            let h = self
                .hypervisor
                .as_deref()
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            w.push(format!(
                "virtualised{h} (informational): IPIs, timers and idle exits cost more than on bare metal, and vCPUs may be preempted by the host"
            ));
        }
        if let Some(cs) = &self.clocksource {
            if !GOOD_CLOCKSOURCES.contains(&cs.as_str()) {
                w.push(format!(
                    "clocksource is {cs}, not tsc: clock reads may be slower or go through a system call"
                ));
            }
        }
        w
    }

    fn rows(&self) -> Vec<(&'static str, String)> {
        let cpus_allowed = if self.allowed_cpus.is_empty() {
            UNKNOWN.to_string()
        } else {
            format!(
                "{} ({})",
                format_cpu_list(&self.allowed_cpus),
                self.allowed_cpus.len()
            )
        };
        vec![
            ("hostname", opt(&self.hostname)),
            ("cpu_model", opt(&self.cpu_model)),
            ("cpu_vendor", opt(&self.cpu_vendor)),
            ("cpu_flags_of_note", list(&self.cpu_flags_of_note)),
            ("logical_cpus", opt(&self.logical_cpus)),
            ("allowed_cpus", cpus_allowed),
            ("physical_cores", opt(&self.physical_cores)),
            ("smt", opt_bool(self.smt, "yes", "no")),
            ("numa_nodes", opt(&self.numa_nodes)),
            ("kernel_release", self.kernel_release.clone()),
            ("kernel_version", self.kernel_version.clone()),
            ("preemption_model", self.preemption_model.clone()),
            (
                "preempt_boot_option",
                opt_or(&self.preempt_boot_option, "none"),
            ),
            ("boot_options_of_note", list(&self.boot_options_of_note)),
            ("clocksource", opt(&self.clocksource)),
            ("available_clocksources", list(&self.available_clocksources)),
            ("virtualized", opt_bool(self.virtualized, "yes", "no")),
            ("hypervisor", opt_or(&self.hypervisor, "none detected")),
            (
                "hypervisor_cpuid_vendor",
                opt_or(&self.hypervisor_cpuid_vendor, "none"),
            ),
            ("dmi_system", opt(&self.dmi_system)),
            ("container", opt_or(&self.container, "none detected")),
            ("cpuidle_driver", opt(&self.cpuidle_driver)),
            ("cpuidle_governor", opt(&self.cpuidle_governor)),
            ("frequency_governor", opt(&self.frequency_governor)),
            ("frequency_driver", opt(&self.frequency_driver)),
            (
                "cpu_mhz",
                self.cpu_mhz
                    .map_or_else(|| UNKNOWN.to_string(), |m| format!("{m:.0}")),
            ),
            ("turbo_enabled", opt_bool(self.turbo_enabled, "yes", "no")),
            ("loadavg_start", load(&self.loadavg_start)),
            ("runnable_tasks_start", opt(&self.runnable_tasks_start)),
            ("procs_running_start", opt(&self.procs_running_start)),
            ("loadavg_end", load_end(&self.loadavg_end)),
            (
                "runnable_tasks_end",
                opt_or(&self.runnable_tasks_end, "not recorded"),
            ),
            (
                "procs_running_end",
                opt_or(&self.procs_running_end, "not recorded"),
            ),
            (
                "cgroup_cpu_limit",
                self.cgroup_cpu_limit
                    .map_or_else(|| "none".to_string(), |l| format!("{l:.2} CPUs")),
            ),
            ("cgroup_cpu_max_raw", opt(&self.cgroup_cpu_max_raw)),
            (
                "cgroup_cpuset_effective",
                opt(&self.cgroup_cpuset_effective),
            ),
            ("rlimit_nproc", rlimit(&self.rlimit_nproc)),
            ("rlimit_rtprio", rlimit(&self.rlimit_rtprio)),
            (
                "rt_priority_permitted",
                match (self.rt_priority_permitted, &self.rt_priority_reason) {
                    (true, _) => "yes".to_string(),
                    (false, Some(r)) => format!("no ({r})"),
                    (false, None) => "no".to_string(),
                },
            ),
            ("sched_rt_runtime_us", opt(&self.sched_rt_runtime_us)),
            ("sched_rt_period_us", opt(&self.sched_rt_period_us)),
            (
                "sched_autogroup_enabled",
                opt_bool(self.sched_autogroup_enabled, "yes", "no"),
            ),
            ("vm_max_map_count", opt(&self.vm_max_map_count)),
            ("threads_max", opt(&self.threads_max)),
            ("pid_max", opt(&self.pid_max)),
            ("glibc_version", self.glibc_version.clone()),
            ("build_profile", self.build_profile.clone()),
            ("target", self.target.clone()),
            (
                "memory_total_mib",
                self.memory_total_mib
                    .map_or_else(|| UNKNOWN.to_string(), |m| format!("{m} MiB")),
            ),
            ("transparent_hugepages", opt(&self.transparent_hugepages)),
            ("perf_event_paranoid", opt(&self.perf_event_paranoid)),
            (
                "timer_resolution_ns",
                self.timer_resolution_ns
                    .map_or_else(|| UNKNOWN.to_string(), |n| format!("{n} ns")),
            ),
            (
                "clock_read_cost_ns",
                self.clock_read_cost_ns
                    .map_or_else(|| "not measured".to_string(), |n| format!("{n:.1} ns")),
            ),
            (
                "reference_loop_ns",
                match (self.reference_loop_ns_start, self.reference_loop_ns_end) {
                    (Some(a), Some(b)) => format!("{a:.0} ns at start, {b:.0} ns at end"),
                    (Some(a), None) => format!("{a:.0} ns"),
                    _ => "not measured".to_string(),
                },
            ),
            (
                "reference_wide_ns",
                match (self.reference_wide_ns_start, self.reference_wide_ns_end) {
                    (Some(a), Some(b)) => format!("{a:.0} ns at start, {b:.0} ns at end"),
                    (Some(a), None) => format!("{a:.0} ns"),
                    _ => "not measured".to_string(),
                },
            ),
            (
                "reference_syscall_ns",
                match (
                    self.reference_syscall_ns_start,
                    self.reference_syscall_ns_end,
                ) {
                    (Some(a), Some(b)) => format!("{a:.1} ns at start, {b:.1} ns at end"),
                    (Some(a), None) => format!("{a:.1} ns"),
                    _ => "not measured".to_string(),
                },
            ),
        ]
    }
}

/// Short form of a preemption model for one-line summaries.
fn short_preemption(model: &str) -> String {
    if let Some(rest) = model.strip_prefix("dynamic (") {
        return match rest.split_once(", from preempt=") {
            Some((mode, _)) => format!("dynamic/{mode}"),
            None => "dynamic".to_string(),
        };
    }
    if let Some(mode) = model.strip_suffix(" (dynamic, read from debugfs)") {
        return format!("dynamic/{mode}");
    }
    if model == "full (PREEMPT_RT)" {
        return "PREEMPT_RT".to_string();
    }
    model.to_string()
}

/// Clocksources that are cheap, vDSO-readable counters on their architectures.
const GOOD_CLOCKSOURCES: &[&str] = &["tsc", "arch_sys_counter", "timebase", "riscv_clocksource"];

// ---------------------------------------------------------------------------------------------
// Rendering helpers
// ---------------------------------------------------------------------------------------------

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    opt_or(v, UNKNOWN)
}

fn opt_or<T: std::fmt::Display>(v: &Option<T>, none: &str) -> String {
    v.as_ref()
        .map_or_else(|| none.to_string(), |x| x.to_string())
}

fn opt_bool(v: Option<bool>, yes: &str, no: &str) -> String {
    match v {
        Some(true) => yes.to_string(),
        Some(false) => no.to_string(),
        None => UNKNOWN.to_string(),
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(" ")
    }
}

fn load(v: &Option<[f64; 3]>) -> String {
    v.map_or_else(
        || UNKNOWN.to_string(),
        |l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]),
    )
}

fn load_end(v: &Option<[f64; 3]>) -> String {
    if v.is_none() {
        "not recorded".to_string()
    } else {
        load(v)
    }
}

fn rlimit(v: &Option<Rlimit>) -> String {
    let one = |x: Option<u64>| x.map_or_else(|| "unlimited".to_string(), |n| n.to_string());
    v.map_or_else(
        || UNKNOWN.to_string(),
        |r| format!("soft {}, hard {}", one(r.soft), one(r.hard)),
    )
}

/// Formats sorted CPU numbers as a compact list, e.g. `[0,1,2,5]` -> "0-2,5".
fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

// ---------------------------------------------------------------------------------------------
// File reading
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Pure parsers
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq)]
struct CpuInfo {
    model: Option<String>,
    vendor: Option<String>,
    flags: Vec<String>,
    mhz: Option<f64>,
}

/// Parses /proc/cpuinfo, taking the first occurrence of each key (the first CPU's block, plus
/// machine-wide lines such as ARM's "Hardware" that come at the end).
fn parse_cpuinfo(s: &str) -> CpuInfo {
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

fn flags_of_note(flags: &[String]) -> Vec<String> {
    FLAGS_OF_NOTE
        .iter()
        .filter(|f| flags.iter().any(|x| x == *f))
        .map(|f| f.to_string())
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct LoadAvg {
    avg: [f64; 3],
    /// Currently runnable scheduling entities, including the reader.
    running: u64,
    total: u64,
}

/// Parses /proc/loadavg, e.g. "0.12 0.04 0.01 1/84 4417".
fn parse_loadavg(s: &str) -> Option<LoadAvg> {
    let mut it = s.split_whitespace();
    let mut avg = [0.0; 3];
    for slot in &mut avg {
        let v: f64 = it.next()?.parse().ok()?;
        if !v.is_finite() {
            return None;
        }
        *slot = v;
    }
    let (r, t) = it.next()?.split_once('/')?;
    Some(LoadAvg {
        avg,
        running: r.parse().ok()?,
        total: t.parse().ok()?,
    })
}

/// The `procs_running` line of /proc/stat.
fn parse_procs_running(s: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let rest = l.strip_prefix("procs_running")?;
        rest.trim().parse().ok()
    })
}

/// MemTotal from /proc/meminfo, in KiB.
fn parse_meminfo_total_kib(s: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let rest = l.strip_prefix("MemTotal:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The selected entry of a sysfs choice list: "always [madvise] never" -> "madvise";
/// also accepts the parenthesised form used by debugfs, "none voluntary (full) lazy".
fn selected_choice(s: &str) -> Option<String> {
    s.split_whitespace().find_map(|tok| {
        let inner = tok
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .or_else(|| tok.strip_prefix('(').and_then(|t| t.strip_suffix(')')))?;
        (!inner.is_empty()).then(|| inner.to_string())
    })
}

/// Preemption mode from /sys/kernel/debug/sched/preempt (PREEMPT_DYNAMIC kernels, root + debugfs).
fn preemption_from_debugfs(s: &str) -> Option<String> {
    selected_choice(s).map(|m| format!("{m} (dynamic, read from debugfs)"))
}

/// Preemption model from `uname -v` and, for PREEMPT_DYNAMIC kernels, the boot command line.
fn preemption_from_uname(v: &str, cmdline: &str) -> String {
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
fn cmdline_option(cmdline: &str, name: &str) -> Option<String> {
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
fn boot_options_of_note(cmdline: &str) -> Vec<String> {
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

/// Parses a kernel CPU list such as "0-3,8-11" or "0,2,4" (also "0-15:2/4" stride groups).
fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
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

/// Number of distinct (physical package id, core id) pairs.
fn physical_cores(pairs: &[(i64, i64)]) -> usize {
    pairs.iter().collect::<BTreeSet<_>>().len()
}

/// cgroup v2 cpu.max: "max 100000" -> (None, 100000); "200000 100000" -> (Some(200000), 100000).
fn parse_cpu_max(s: &str) -> Option<(Option<u64>, u64)> {
    let mut it = s.split_whitespace();
    let quota = it.next()?;
    let period: u64 = match it.next() {
        Some(p) => p.parse().ok()?,
        None => 100_000,
    };
    if it.next().is_some() || period == 0 {
        return None;
    }
    let quota = if quota == "max" {
        None
    } else {
        Some(quota.parse().ok()?)
    };
    Some((quota, period))
}

/// cgroup v1 cpu.cfs_quota_us and cpu.cfs_period_us: quota "-1" means no limit.
fn parse_cfs_v1(quota: &str, period: &str) -> Option<(Option<u64>, u64)> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period: u64 = period.trim().parse().ok()?;
    if period == 0 {
        return None;
    }
    let quota = if quota < 0 {
        None
    } else {
        Some(u64::try_from(quota).ok()?)
    };
    Some((quota, period))
}

/// Quota in CPUs from (quota, period).
fn quota_cpus(q: (Option<u64>, u64)) -> Option<f64> {
    match q {
        (Some(quota), period) if period > 0 => Some(quota as f64 / period as f64),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
struct CgroupEntry {
    controllers: Vec<String>,
    path: String,
}

/// /proc/self/cgroup lines "hierarchy-id:controller,list:path"; v2 has id 0 and an empty list.
fn parse_proc_cgroup(s: &str) -> Vec<CgroupEntry> {
    s.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let _id = it.next()?;
            let ctrl = it.next()?;
            let path = it.next()?;
            Some(CgroupEntry {
                controllers: ctrl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
struct CgroupMount {
    /// "cgroup2" or "cgroup".
    fstype: String,
    /// Path inside the hierarchy that is mounted (the "root" field).
    root: String,
    mount_point: PathBuf,
    /// Super options; for v1 they name the controllers.
    options: Vec<String>,
}

/// cgroup mounts from /proc/self/mountinfo.
fn parse_mountinfo_cgroups(s: &str) -> Vec<CgroupMount> {
    s.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let lf: Vec<&str> = left.split_whitespace().collect();
            let rf: Vec<&str> = right.split_whitespace().collect();
            let fstype = *rf.first()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgroupMount {
                fstype: fstype.to_string(),
                root: unescape_mount(lf.get(3)?),
                mount_point: PathBuf::from(unescape_mount(lf.get(4)?)),
                options: rf
                    .get(2)
                    .map(|o| o.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Directories from our cgroup up to the mount root, leaf first.
fn cgroup_dirs(mount_point: &Path, mount_root: &str, cgroup_path: &str) -> Vec<PathBuf> {
    let rel = if mount_root != "/" {
        cgroup_path.strip_prefix(mount_root).unwrap_or(cgroup_path)
    } else {
        cgroup_path
    };
    let comps: Vec<&str> = rel
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != "..")
        .collect();
    (0..=comps.len())
        .rev()
        .map(|n| {
            let mut p = mount_point.to_path_buf();
            for c in &comps[..n] {
                p.push(c);
            }
            p
        })
        .collect()
}

/// Turbo state: intel_pstate/no_turbo ("1" = turbo off) wins over cpufreq/boost ("1" = on).
fn turbo_state(no_turbo: Option<&str>, boost: Option<&str>) -> Option<bool> {
    match (no_turbo.map(str::trim), boost.map(str::trim)) {
        (Some("1"), _) => Some(false),
        (Some("0"), _) => Some(true),
        (_, Some("1")) => Some(true),
        (_, Some("0")) => Some(false),
        _ => None,
    }
}

/// Platform name from DMI sys_vendor and product_name; `None` for bare metal or unknown.
fn hypervisor_from_dmi(vendor: &str, product: &str) -> Option<String> {
    let v = vendor.trim();
    let p = product.trim();
    let vl = v.to_ascii_lowercase();
    let pl = p.to_ascii_lowercase();
    let name = if vl == "amazon ec2" {
        if pl.contains(".metal") {
            return None;
        }
        "Amazon EC2"
    } else if vl == "google" || pl == "google compute engine" {
        "Google Compute Engine"
    } else if vl == "microsoft corporation" && pl == "virtual machine" {
        "Hyper-V"
    } else if vl.contains("vmware") || pl.contains("vmware") {
        "VMware"
    } else if vl == "xen" || pl.contains("hvm domu") {
        "Xen"
    } else if vl == "qemu" || pl.contains("kvm") || pl.starts_with("standard pc") {
        if pl.contains("kvm") {
            "KVM"
        } else {
            "QEMU"
        }
    } else if pl == "virtualbox" || vl == "innotek gmbh" {
        "VirtualBox"
    } else if vl.contains("parallels") {
        "Parallels"
    } else if vl == "bhyve" || pl == "bhyve" {
        "bhyve"
    } else if vl == "openstack foundation" || pl.contains("openstack") {
        "OpenStack"
    } else if vl == "digitalocean" {
        "DigitalOcean"
    } else if vl == "hetzner" {
        "Hetzner Cloud"
    } else if vl == "alibaba cloud" {
        "Alibaba Cloud"
    } else if vl == "oracle corporation" && pl.contains("virtualbox") {
        "VirtualBox"
    } else {
        return None;
    };
    Some(name.to_string())
}

/// Hypervisor name from the CPUID leaf 0x40000000 vendor string.
fn hypervisor_from_cpuid_vendor(vendor: &str) -> Option<String> {
    let name = match vendor.trim_end_matches('\0').trim() {
        "KVMKVMKVM" => "KVM",
        "Linux KVM Hv" => "KVM (Hyper-V enlightenments)",
        "Microsoft Hv" => "Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU (TCG emulation)",
        "ACRNACRNACRN" => "ACRN",
        "bhyve bhyve" => "bhyve",
        "VBoxVBoxVBox" => "VirtualBox",
        "lrpepyh  vr" | "prl hyperv" => "Parallels",
        "QNXQVMBSQG" => "QNX",
        "" => return None,
        other => return Some(other.to_string()),
    };
    Some(name.to_string())
}

/// Container runtime from /proc/1/cgroup contents.
fn container_from_cgroup(s: &str) -> Option<String> {
    let checks = [
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("containerd", "containerd"),
        ("libpod", "podman"),
        ("lxc", "lxc"),
        ("garden", "garden"),
    ];
    checks
        .iter()
        .find(|(needle, _)| s.contains(needle))
        .map(|(_, name)| format!("{name} (/proc/1/cgroup)"))
}

// ---------------------------------------------------------------------------------------------
// System calls and sysfs walks
// ---------------------------------------------------------------------------------------------

struct Uts {
    nodename: String,
    release: String,
    version: String,
}

fn c_chars_to_string(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn uname() -> Option<Uts> {
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

fn online_cpus() -> Option<usize> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero bytes is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and writable for size_of::<cpu_set_t>() bytes; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc == 0 {
        let max = std::mem::size_of::<libc::cpu_set_t>() * 8;
        // SAFETY: every index is below the set's bit capacity, and `set` is initialised.
        let cpus: Vec<usize> = (0..max)
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect();
        if !cpus.is_empty() {
            return cpus;
        }
    }
    read("/proc/self/status")
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .and_then(parse_cpu_list)
            })
        })
        .unwrap_or_default()
}

/// (physical cores, threads per core) from sysfs topology.
fn topology() -> (Option<usize>, Option<usize>) {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return (None, None);
    };
    let mut pairs = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(num) = name.strip_prefix("cpu") else {
            continue;
        };
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let topo = entry.path().join("topology");
        let pkg: Option<i64> = read_num(topo.join("physical_package_id"));
        let core: Option<i64> = read_num(topo.join("core_id"));
        if let (Some(pkg), Some(core)) = (pkg, core) {
            pairs.push((pkg, core));
        }
    }
    if pairs.is_empty() {
        return (None, None);
    }
    let cores = physical_cores(&pairs);
    (Some(cores), Some(pairs.len().div_ceil(cores)))
}

struct Virt {
    virtualized: Option<bool>,
    hypervisor: Option<String>,
    cpuid_vendor: Option<String>,
    dmi_system: Option<String>,
    container: Option<String>,
}

fn detect_virtualization(cpuinfo: &CpuInfo) -> Virt {
    let flag = cpuinfo.flags.iter().any(|f| f == "hypervisor");
    let cpuid_vendor = if flag {
        cpuid_hypervisor_vendor()
    } else {
        None
    };
    let cpuid_name = cpuid_vendor
        .as_deref()
        .and_then(hypervisor_from_cpuid_vendor);

    let dmi_vendor = read_trim("/sys/class/dmi/id/sys_vendor");
    let dmi_product = read_trim("/sys/class/dmi/id/product_name");
    let dmi_system = match (&dmi_vendor, &dmi_product) {
        (None, None) => None,
        (v, p) => Some(format!(
            "{} / {}",
            v.as_deref().unwrap_or("?"),
            p.as_deref().unwrap_or("?")
        )),
    };
    let dmi_name = hypervisor_from_dmi(
        dmi_vendor.as_deref().unwrap_or(""),
        dmi_product.as_deref().unwrap_or(""),
    );
    let sys_hv =
        read_trim("/sys/hypervisor/type").map(|t| if t == "xen" { "Xen".to_string() } else { t });
    let wsl = read("/proc/version")
        .map(|v| v.to_ascii_lowercase().contains("microsoft"))
        .unwrap_or(false);

    let hypervisor = match (cpuid_name.or(sys_hv), dmi_name) {
        (Some(c), Some(d)) if c == d || c.starts_with(&d) => Some(c),
        (Some(c), Some(d)) => Some(format!("{c} ({d})")),
        (Some(c), None) => Some(c),
        (None, Some(d)) => Some(d),
        (None, None) if wsl => Some("Hyper-V (WSL2)".to_string()),
        (None, None) if flag => Some("unknown hypervisor".to_string()),
        (None, None) => None,
    };
    let x86 = cfg!(any(target_arch = "x86", target_arch = "x86_64"));
    let virtualized = if flag || hypervisor.is_some() {
        Some(true)
    } else if x86 && !cpuinfo.flags.is_empty() {
        Some(false)
    } else {
        None
    };

    let container = if Path::new("/.dockerenv").exists() {
        Some("docker (/.dockerenv)".to_string())
    } else if Path::new("/run/.containerenv").exists() {
        Some("podman (/run/.containerenv)".to_string())
    } else if let Some(c) = std::env::var("container").ok().filter(|c| !c.is_empty()) {
        Some(format!("{c} ($container)"))
    } else {
        read("/proc/1/cgroup")
            .as_deref()
            .and_then(container_from_cgroup)
    };

    Virt {
        virtualized,
        hypervisor,
        cpuid_vendor,
        dmi_system,
        container,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_vendor() -> Option<String> {
    #[allow(unused_unsafe)]
    // SAFETY: CPUID is available on every x86_64 CPU, and leaf 0x40000000 is reserved for
    // hypervisors (only queried when the hypervisor flag is set); it has no side effects.
    let r = unsafe { core::arch::x86_64::__cpuid(0x4000_0000) };
    let mut bytes = Vec::with_capacity(12);
    for reg in [r.ebx, r.ecx, r.edx] {
        bytes.extend_from_slice(&reg.to_le_bytes());
    }
    let s: String = bytes
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    let s = s.trim().to_string();
    (!s.is_empty()).then_some(s)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor_vendor() -> Option<String> {
    None
}

/// Tightest CPU quota along our cgroup path: (CPUs, raw "quota period").
fn cgroup_cpu_quota() -> (Option<f64>, Option<String>) {
    let entries = read("/proc/self/cgroup")
        .map(|s| parse_proc_cgroup(&s))
        .unwrap_or_default();
    let mounts = read("/proc/self/mountinfo")
        .map(|s| parse_mountinfo_cgroups(&s))
        .unwrap_or_default();

    // cgroup v2.
    if let Some(e) = entries.iter().find(|e| e.controllers.is_empty()) {
        let v2_mounts: Vec<(PathBuf, String)> = {
            let m: Vec<_> = mounts
                .iter()
                .filter(|m| m.fstype == "cgroup2")
                .map(|m| (m.mount_point.clone(), m.root.clone()))
                .collect();
            if m.is_empty() {
                vec![(PathBuf::from("/sys/fs/cgroup"), "/".to_string())]
            } else {
                m
            }
        };
        for (mp, root) in v2_mounts {
            let mut found = false;
            let mut best: Option<(f64, String)> = None;
            let mut leaf_raw: Option<String> = None;
            for dir in cgroup_dirs(&mp, &root, &e.path) {
                let Some(raw) = read_trim(dir.join("cpu.max")) else {
                    continue;
                };
                found = true;
                if leaf_raw.is_none() {
                    leaf_raw = Some(raw.clone());
                }
                if let Some(cpus) = parse_cpu_max(&raw).and_then(quota_cpus) {
                    if best.as_ref().map_or(true, |(b, _)| cpus < *b) {
                        best = Some((cpus, raw));
                    }
                }
            }
            if found {
                return match best {
                    Some((c, raw)) => (Some(c), Some(raw)),
                    None => (None, leaf_raw),
                };
            }
        }
    }

    // cgroup v1.
    let path = entries
        .iter()
        .find(|e| e.controllers.iter().any(|c| c == "cpu"))
        .map(|e| e.path.clone())
        .unwrap_or_else(|| "/".to_string());
    let v1_mounts: Vec<(PathBuf, String)> = {
        let m: Vec<_> = mounts
            .iter()
            .filter(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == "cpu"))
            .map(|m| (m.mount_point.clone(), m.root.clone()))
            .collect();
        if m.is_empty() {
            vec![
                (PathBuf::from("/sys/fs/cgroup/cpu"), "/".to_string()),
                (PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"), "/".to_string()),
            ]
        } else {
            m
        }
    };
    for (mp, root) in v1_mounts {
        let mut found = false;
        let mut best: Option<(f64, String)> = None;
        let mut leaf_raw: Option<String> = None;
        for dir in cgroup_dirs(&mp, &root, &path) {
            let (Some(q), Some(p)) = (
                read_trim(dir.join("cpu.cfs_quota_us")),
                read_trim(dir.join("cpu.cfs_period_us")),
            ) else {
                continue;
            };
            found = true;
            let raw = format!("{q} {p}");
            if leaf_raw.is_none() {
                leaf_raw = Some(raw.clone());
            }
            if let Some(cpus) = parse_cfs_v1(&q, &p).and_then(quota_cpus) {
                if best.as_ref().map_or(true, |(b, _)| cpus < *b) {
                    best = Some((cpus, raw));
                }
            }
        }
        if found {
            return match best {
                Some((c, raw)) => (Some(c), Some(raw)),
                None => (None, leaf_raw),
            };
        }
    }
    (None, None)
}

/// Effective cpuset of our cgroup (v2 cpuset.cpus.effective, v1 cpuset.effective_cpus).
fn cgroup_cpuset() -> Option<String> {
    let entries = read("/proc/self/cgroup")
        .map(|s| parse_proc_cgroup(&s))
        .unwrap_or_default();
    let mounts = read("/proc/self/mountinfo")
        .map(|s| parse_mountinfo_cgroups(&s))
        .unwrap_or_default();
    let mut candidates: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(e) = entries.iter().find(|e| e.controllers.is_empty()) {
        for m in mounts.iter().filter(|m| m.fstype == "cgroup2") {
            for d in cgroup_dirs(&m.mount_point, &m.root, &e.path) {
                candidates.push((d, "cpuset.cpus.effective"));
            }
        }
        candidates.push((
            PathBuf::from("/sys/fs/cgroup").join(e.path.trim_start_matches('/')),
            "cpuset.cpus.effective",
        ));
    }
    if let Some(e) = entries
        .iter()
        .find(|e| e.controllers.iter().any(|c| c == "cpuset"))
    {
        for m in mounts
            .iter()
            .filter(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == "cpuset"))
        {
            for d in cgroup_dirs(&m.mount_point, &m.root, &e.path) {
                candidates.push((d, "cpuset.effective_cpus"));
            }
        }
    }
    candidates.push((PathBuf::from("/sys/fs/cgroup"), "cpuset.cpus.effective"));
    candidates.push((
        PathBuf::from("/sys/fs/cgroup/cpuset"),
        "cpuset.effective_cpus",
    ));
    candidates
        .into_iter()
        .find_map(|(dir, file)| read_trim(dir.join(file)))
}

fn rlimit_from(rl: libc::rlimit) -> Rlimit {
    // rlim_t is u64 on most Linux targets but not all, hence the conversion.
    #[allow(clippy::useless_conversion)]
    let conv = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            None
        } else {
            u64::try_from(v).ok()
        }
    };
    Rlimit {
        soft: conv(rl.rlim_cur),
        hard: conv(rl.rlim_max),
    }
}

fn get_rlimit_nproc() -> Option<Rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut rl) };
    (rc == 0).then(|| rlimit_from(rl))
}

fn get_rlimit_rtprio() -> Option<Rlimit> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid, writable rlimit for the duration of the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut rl) };
    (rc == 0).then(|| rlimit_from(rl))
}

/// Tries SCHED_FIFO priority 1 in a fresh thread (never the caller's), which then exits.
fn probe_rt_priority(rtprio: Option<Rlimit>) -> (bool, Option<String>) {
    let spawned = std::thread::Builder::new()
        .name("threadlab-rt-probe".to_string())
        .spawn(|| {
            // SAFETY: sched_param is a plain C struct; all-zero bytes is a valid value.
            let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
            param.sched_priority = 1;
            // SAFETY: pthread_self() is this live thread, and `param` is valid for the call.
            // Only this short-lived probe thread changes policy; it exits right after.
            unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) }
        });
    let rc = match spawned {
        Ok(handle) => match handle.join() {
            Ok(rc) => rc,
            Err(_) => return (false, Some("probe thread panicked".to_string())),
        },
        Err(e) => return (false, Some(format!("could not spawn probe thread: {e}"))),
    };
    if rc == 0 {
        return (true, None);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    (false, Some(rt_failure_reason(rc, euid == 0, rtprio)))
}

fn rt_failure_reason(rc: i32, root: bool, rtprio: Option<Rlimit>) -> String {
    if rc == libc::EPERM {
        let soft = rtprio.map(|r| r.soft);
        match (root, soft) {
            (false, Some(Some(0))) => "EPERM: not root and RLIMIT_RTPRIO is 0".to_string(),
            (false, Some(Some(n))) => format!(
                "EPERM: not root; RLIMIT_RTPRIO is {n}, so the cgroup may have no RT runtime (cpu.rt_runtime_us = 0)"
            ),
            (false, _) => "EPERM: not root and lacking CAP_SYS_NICE".to_string(),
            (true, _) => "EPERM as root: CAP_SYS_NICE dropped (container?) or the cgroup has no RT runtime (cpu.rt_runtime_us = 0)".to_string(),
        }
    } else if rc == libc::EINVAL {
        "EINVAL: SCHED_FIFO priority 1 rejected".to_string()
    } else if rc == libc::ENOSYS {
        "ENOSYS: scheduling policies not supported here".to_string()
    } else {
        format!("pthread_setschedparam failed with error {rc}")
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_version() -> String {
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
fn glibc_version() -> String {
    "not glibc".to_string()
}

fn timer_resolution_ns() -> Option<u64> {
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
    fn loadavg() {
        let l = parse_loadavg("0.12 0.04 0.01 1/84 4417\n").unwrap();
        assert_eq!(l.avg, [0.12, 0.04, 0.01]);
        assert_eq!((l.running, l.total), (1, 84));
        let l = parse_loadavg("12.50 8.25 3.00 17/1234 99999").unwrap();
        assert_eq!(l.avg, [12.5, 8.25, 3.0]);
        assert_eq!(l.running, 17);
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("0.1 0.2"), None);
        assert_eq!(parse_loadavg("0.1 0.2 0.3 x"), None);
        assert_eq!(parse_loadavg("nan 0.2 0.3 1/2 3"), None);
    }

    #[test]
    fn procs_running_and_meminfo() {
        let stat =
            "cpu  1 2 3 4\nctxt 123\nbtime 1\nprocesses 4417\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(parse_procs_running(stat), Some(3));
        assert_eq!(parse_procs_running("cpu 1 2 3"), None);
        let mem = "MemTotal:        8137592 kB\nMemFree:         7000000 kB\n";
        assert_eq!(parse_meminfo_total_kib(mem), Some(8_137_592));
        assert_eq!(parse_meminfo_total_kib("MemFree: 1 kB"), None);
    }

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
    fn short_preemption_forms() {
        let none = "quiet";
        let dynamic = preemption_from_uname("#1 SMP PREEMPT_DYNAMIC", none);
        assert_eq!(short_preemption(&dynamic), "dynamic");
        let booted = preemption_from_uname("#1 SMP PREEMPT_DYNAMIC", "preempt=full");
        assert_eq!(short_preemption(&booted), "dynamic/full");
        let debugfs = preemption_from_debugfs("none (voluntary) full").unwrap();
        assert_eq!(short_preemption(&debugfs), "dynamic/voluntary");
        assert_eq!(short_preemption("full (PREEMPT_RT)"), "PREEMPT_RT");
        assert_eq!(short_preemption("none/voluntary"), "none/voluntary");
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
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8-11"),
            Some(vec![0, 1, 2, 3, 8, 9, 10, 11])
        );
        assert_eq!(parse_cpu_list("0,2,4\n"), Some(vec![0, 2, 4]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("0-7:2/4"), Some(vec![0, 1, 4, 5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a-b"), None);
        assert_eq!(parse_cpu_list("0-99999999999"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn physical_core_pairs() {
        assert_eq!(physical_cores(&[]), 0);
        // 4 cores, 2 threads each.
        let smt: Vec<(i64, i64)> = (0..8).map(|i| (0, i % 4)).collect();
        assert_eq!(physical_cores(&smt), 4);
        // Two sockets reusing core ids.
        assert_eq!(physical_cores(&[(0, 0), (0, 1), (1, 0), (1, 1)]), 4);
        assert_eq!(physical_cores(&[(0, 0), (0, 0)]), 1);
    }

    #[test]
    fn cpu_max_v2() {
        assert_eq!(parse_cpu_max("max 100000\n"), Some((None, 100_000)));
        assert_eq!(
            parse_cpu_max("200000 100000"),
            Some((Some(200_000), 100_000))
        );
        assert_eq!(parse_cpu_max("50000 100000"), Some((Some(50_000), 100_000)));
        assert_eq!(parse_cpu_max("max"), Some((None, 100_000)));
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cpu_max("1 0"), None);
        assert_eq!(parse_cpu_max("x 100000"), None);
        assert_eq!(quota_cpus((Some(200_000), 100_000)), Some(2.0));
        assert_eq!(quota_cpus((Some(50_000), 100_000)), Some(0.5));
        assert_eq!(quota_cpus((None, 100_000)), None);
    }

    #[test]
    fn cfs_v1() {
        assert_eq!(parse_cfs_v1("-1\n", "100000\n"), Some((None, 100_000)));
        assert_eq!(
            parse_cfs_v1("150000", "100000"),
            Some((Some(150_000), 100_000))
        );
        assert_eq!(parse_cfs_v1("150000", "0"), None);
        assert_eq!(parse_cfs_v1("", "100000"), None);
        assert_eq!(
            quota_cpus(parse_cfs_v1("150000", "100000").unwrap()),
            Some(1.5)
        );
    }

    #[test]
    fn proc_cgroup_and_mountinfo() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/22b2\n1:cpu:/\n0::/\n";
        let e = parse_proc_cgroup(hybrid);
        assert_eq!(e.len(), 4);
        assert_eq!(e[2].controllers, vec!["cpu"]);
        assert_eq!(e[3].controllers, Vec::<String>::new());
        assert_eq!(e[3].path, "/");
        let v2 = parse_proc_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n");
        assert_eq!(v2[0].path, "/user.slice/user-1000.slice/session-2.scope");
        let v1 = parse_proc_cgroup("3:cpu,cpuacct:/docker/abc\n");
        assert_eq!(v1[0].controllers, vec!["cpu", "cpuacct"]);

        let mi = "25 20 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n\
35 25 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct\n\
40 25 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let m = parse_mountinfo_cgroups(mi);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].root, "/docker/abc");
        assert_eq!(
            m[0].mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")
        );
        assert!(m[0].options.iter().any(|o| o == "cpu"));
        assert_eq!(m[1].fstype, "cgroup2");
    }

    #[test]
    fn cgroup_dir_walk() {
        let d = cgroup_dirs(Path::new("/sys/fs/cgroup"), "/", "/a/b");
        assert_eq!(
            d,
            vec![
                PathBuf::from("/sys/fs/cgroup/a/b"),
                PathBuf::from("/sys/fs/cgroup/a"),
                PathBuf::from("/sys/fs/cgroup"),
            ]
        );
        // Mount root is our own cgroup (container): strip it.
        let d = cgroup_dirs(
            Path::new("/sys/fs/cgroup/cpu"),
            "/docker/abc",
            "/docker/abc",
        );
        assert_eq!(d, vec![PathBuf::from("/sys/fs/cgroup/cpu")]);
        let d = cgroup_dirs(Path::new("/sys/fs/cgroup"), "/", "/../..");
        assert_eq!(d, vec![PathBuf::from("/sys/fs/cgroup")]);
    }

    #[test]
    fn dmi() {
        let h = |v, p| hypervisor_from_dmi(v, p);
        assert_eq!(
            h("QEMU", "Standard PC (Q35 + ICH9, 2009)").as_deref(),
            Some("QEMU")
        );
        assert_eq!(h("Red Hat", "KVM").as_deref(), Some("KVM"));
        assert_eq!(h("Amazon EC2", "m5.large").as_deref(), Some("Amazon EC2"));
        assert_eq!(h("Amazon EC2", "c5.metal"), None);
        assert_eq!(
            h("Google", "Google Compute Engine").as_deref(),
            Some("Google Compute Engine")
        );
        assert_eq!(
            h("Microsoft Corporation", "Virtual Machine").as_deref(),
            Some("Hyper-V")
        );
        assert_eq!(h("Microsoft Corporation", "Surface Laptop 4"), None);
        assert_eq!(
            h("VMware, Inc.", "VMware Virtual Platform").as_deref(),
            Some("VMware")
        );
        assert_eq!(h("Xen", "HVM domU").as_deref(), Some("Xen"));
        assert_eq!(
            h("innotek GmbH", "VirtualBox").as_deref(),
            Some("VirtualBox")
        );
        assert_eq!(h("Dell Inc.", "PowerEdge R740"), None);
        assert_eq!(h("", ""), None);
    }

    #[test]
    fn cpuid_vendor_names() {
        let h = hypervisor_from_cpuid_vendor;
        assert_eq!(h("KVMKVMKVM").as_deref(), Some("KVM"));
        assert_eq!(h("KVMKVMKVM\0\0\0").as_deref(), Some("KVM"));
        assert_eq!(h("Microsoft Hv").as_deref(), Some("Hyper-V"));
        assert_eq!(h("VMwareVMware").as_deref(), Some("VMware"));
        assert_eq!(h("XenVMMXenVMM").as_deref(), Some("Xen"));
        assert_eq!(h("TCGTCGTCGTCG").as_deref(), Some("QEMU (TCG emulation)"));
        assert_eq!(h("ACRNACRNACRN").as_deref(), Some("ACRN"));
        assert_eq!(h("NewHypervisor").as_deref(), Some("NewHypervisor"));
        assert_eq!(h(""), None);
    }

    #[test]
    fn containers_and_turbo() {
        assert_eq!(
            container_from_cgroup("12:cpu:/docker/0123abcd\n").as_deref(),
            Some("docker (/proc/1/cgroup)")
        );
        assert_eq!(
            container_from_cgroup("0::/kubepods/burstable/pod1/abc\n").as_deref(),
            Some("kubernetes (/proc/1/cgroup)")
        );
        assert_eq!(container_from_cgroup("0::/init.scope\n"), None);
        assert_eq!(turbo_state(Some("1"), Some("1")), Some(false));
        assert_eq!(turbo_state(Some("0"), None), Some(true));
        assert_eq!(turbo_state(None, Some("1")), Some(true));
        assert_eq!(turbo_state(None, Some("0\n")), Some(false));
        assert_eq!(turbo_state(None, None), None);
    }

    #[test]
    fn rt_reasons() {
        let zero = Some(Rlimit {
            soft: Some(0),
            hard: Some(0),
        });
        assert_eq!(
            rt_failure_reason(libc::EPERM, false, zero),
            "EPERM: not root and RLIMIT_RTPRIO is 0"
        );
        assert!(rt_failure_reason(libc::EPERM, true, zero).starts_with("EPERM as root"));
        assert!(rt_failure_reason(libc::EINVAL, false, None).starts_with("EINVAL"));
    }

    #[test]
    fn warnings_from_literal_environment() {
        let env = Environment {
            build_profile: "debug".to_string(),
            logical_cpus: Some(4),
            allowed_cpus: vec![0, 1],
            loadavg_start: Some([3.0, 1.0, 1.0]),
            runnable_tasks_start: Some(2),
            frequency_governor: Some("powersave".to_string()),
            cgroup_cpu_limit: Some(1.5),
            virtualized: Some(true),
            hypervisor: Some("KVM".to_string()),
            clocksource: Some("kvm-clock".to_string()),
            ..Environment::default()
        };
        let w = env.warnings();
        assert_eq!(w.len(), 8, "{w:#?}");
        let clean = Environment {
            build_profile: "release".to_string(),
            logical_cpus: Some(4),
            allowed_cpus: vec![0, 1, 2, 3],
            loadavg_start: Some([0.1, 0.1, 0.1]),
            runnable_tasks_start: Some(0),
            frequency_governor: Some("performance".to_string()),
            cgroup_cpu_limit: None,
            virtualized: Some(false),
            clocksource: Some("tsc".to_string()),
            ..Environment::default()
        };
        assert!(clean.warnings().is_empty(), "{:#?}", clean.warnings());
    }

    #[test]
    fn capture_on_this_machine() {
        let mut env = capture();
        assert!(env.logical_cpus.unwrap_or(0) >= 1);
        assert!(!env.kernel_release.is_empty());
        assert!(env.build_profile == "debug" || env.build_profile == "release");
        env.record_end();
        assert!(env.render_text().lines().count() > 40);
        assert!(!env.one_line().contains('\n'));
        let _ = env.warnings();
        let json = serde_json::to_string(&env).unwrap();
        let back: Environment = serde_json::from_str(&json).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn older_json_without_new_fields_still_loads() {
        let back: Environment = serde_json::from_str(r#"{"kernel_release":"6.1.0"}"#).unwrap();
        assert_eq!(back.kernel_release, "6.1.0");
        assert_eq!(back.logical_cpus, None);
    }
}
