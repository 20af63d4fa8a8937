//! Reading the environment at run start: the machine, then what an idle CPU and the clocks do,
//! then what this process may do and what the run starts from.

use std::path::Path;

use super::{
    cgroup, cpu, cpu_list_text, idle, kernel, limits, load, net, none_if_null, read, read_num,
    read_trim, virt, Environment, UNKNOWN,
};
use crate::measure::placement::{allowed_cpus, parse_cpu_list};

/// Captures the environment at run start. Never panics; unknown values become `None` / "unknown".
pub fn capture() -> Environment {
    with_limits_and_build(with_idle_and_clocks(machine()))
}

/// The host, its kernel and boot options, the CPUs and their topology, virtualization.
fn machine() -> Environment {
    let cpuinfo_text = read("/proc/cpuinfo");
    let cpuinfo = cpuinfo_text
        .as_deref()
        .map(cpu::parse_cpuinfo)
        .unwrap_or_default();
    let uts = kernel::uname();
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
        .and_then(kernel::preemption_from_debugfs)
        .unwrap_or_else(|| kernel::preemption_from_uname(&kernel_version, &cmdline));

    let logical_cpus = cpu::online_cpus();
    let (physical_cores, threads_per_core) = cpu::topology(logical_cpus);
    let smt_active = read_trim("/sys/devices/system/cpu/smt/active").map(|s| s == "1");
    let smt = match (threads_per_core, smt_active) {
        (Some(t), Some(a)) => Some(t > 1 || a),
        (Some(t), None) => Some(t > 1),
        (None, a) => a,
    };

    let virt = virt::detect_virtualization(&cpuinfo);
    let allowed = allowed_cpus();

    Environment {
        hostname,
        cpu_model: cpuinfo.model.clone(),
        cpu_vendor: cpuinfo.vendor.clone(),
        cpu_flags_of_note: cpu::flags_of_note(&cpuinfo.flags),
        logical_cpus,
        allowed_cpus: allowed.clone(),
        physical_cores,
        smt,
        numa_nodes: read_trim("/sys/devices/system/node/online")
            .and_then(|s| parse_cpu_list(&s))
            .map(|v| v.len()),
        kernel_release,
        kernel_version,
        preemption_model,
        preempt_boot_option: kernel::cmdline_option(&cmdline, "preempt"),
        boot_options_of_note: kernel::boot_options_of_note(&cmdline),
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
        cpu_mhz: cpuinfo.mhz,
        ..Environment::default()
    }
}

/// What an idle CPU does and what waking it costs, the last-level cache, the tick, mitigations,
/// timer slack and frequency.
fn with_idle_and_clocks(env: Environment) -> Environment {
    let module = |name: &str| Path::new("/sys/module").join(name).join("parameters");
    let allowed = env.allowed_cpus.clone();
    let first_cpu = allowed.first().copied().unwrap_or(0);
    let llc = cpu::last_level_cache(first_cpu);

    Environment {
        cpuidle_driver: read_trim("/sys/devices/system/cpu/cpuidle/current_driver"),
        cpuidle_governor: read_trim("/sys/devices/system/cpu/cpuidle/current_governor_ro")
            .or_else(|| read_trim("/sys/devices/system/cpu/cpuidle/current_governor")),
        haltpoll_parameters: kernel::module_parameters(&module("haltpoll"), |_| true),
        cpuidle_haltpoll_parameters: kernel::module_parameters(&module("cpuidle_haltpoll"), |_| {
            true
        }),
        kvm_halt_poll_parameters: kernel::module_parameters(&module("kvm"), |p| {
            p.starts_with("halt_poll")
        }),
        cpuidle_states: idle::idle_states(first_cpu),
        pm_qos_resume_latency_us: idle::resume_latency_summary(&allowed),
        cpu_dma_latency_us: idle::cpu_dma_latency_us().ok(),
        llc_shared_cpu_lists: cpu::llc_groups(&allowed)
            .unwrap_or_default()
            .iter()
            .map(|g| cpu_list_text(g))
            .collect(),
        llc_description: llc.map(|c| format!("L{} {} {}", c.level, c.kind, c.size)),
        kernel_hz: kernel::kernel_hz(),
        nohz_full_cpus: read("/sys/devices/system/cpu/nohz_full").map(|s| none_if_null(&s)),
        isolated_cpus: read("/sys/devices/system/cpu/isolated").map(|s| none_if_null(&s)),
        cpu_vulnerabilities: kernel::vulnerabilities(Path::new(
            "/sys/devices/system/cpu/vulnerabilities",
        ))
        .unwrap_or_default(),
        timer_slack_ns: kernel::timer_slack_ns(),
        frequency_governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        frequency_driver: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver"),
        turbo_enabled: cpu::turbo_state(
            read_trim("/sys/devices/system/cpu/intel_pstate/no_turbo").as_deref(),
            read_trim("/sys/devices/system/cpu/cpufreq/boost")
                .or_else(|| read_trim("/sys/devices/system/cpu/cpufreq/policy0/boost"))
                .as_deref(),
        ),
        ..env
    }
}

/// What this process may do (cgroup quotas, resource limits, real-time priority, the kernel's
/// ceilings and network settings), the load the run starts from, the build and memory.
fn with_limits_and_build(env: Environment) -> Environment {
    let (loadavg_start, runnable_tasks_start, procs_running_start) = load::load_now();
    let cgroups = cgroup::Cgroups::read();
    let (cgroup_cpu_limit, cgroup_cpu_max_raw) = cgroups.cpu_quota();
    let rlimit_rtprio = limits::rlimit(libc::RLIMIT_RTPRIO);
    let (rt_priority_permitted, rt_priority_reason) = limits::probe_rt_priority(rlimit_rtprio);
    let proc_sys = |name: &str| read(Path::new("/proc/sys").join(name));
    let ceilings = limits::ceilings(proc_sys);
    let net = net::net_sysctls(proc_sys);

    Environment {
        loadavg_start,
        runnable_tasks_start,
        procs_running_start,
        steal_ticks_start: crate::measure::host::steal_ticks(),
        cgroup_cpu_limit,
        cgroup_cpu_max_raw,
        cgroup_cpuset_effective: cgroups.cpuset(),
        cgroup_pids_max: cgroups.pids_max(),
        rlimit_nproc: limits::rlimit(libc::RLIMIT_NPROC),
        rlimit_rtprio,
        rlimit_nofile: limits::rlimit(libc::RLIMIT_NOFILE),
        rt_priority_permitted,
        rt_priority_reason,
        sched_rt_runtime_us: read_num("/proc/sys/kernel/sched_rt_runtime_us"),
        sched_rt_period_us: read_num("/proc/sys/kernel/sched_rt_period_us"),
        sched_autogroup_enabled: read_num::<u64>("/proc/sys/kernel/sched_autogroup_enabled")
            .map(|v| v != 0),
        vm_max_map_count: ceilings.vm_max_map_count,
        threads_max: ceilings.threads_max,
        pid_max: ceilings.pid_max,
        io_uring_disabled: ceilings.io_uring_disabled,
        seccomp_mode: read("/proc/self/status")
            .as_deref()
            .and_then(limits::parse_seccomp_mode),
        net_core_somaxconn: net.somaxconn,
        net_ipv4_tcp_max_syn_backlog: net.tcp_max_syn_backlog,
        net_ipv4_tcp_tw_reuse: net.tcp_tw_reuse,
        net_ipv4_ip_local_port_range: net.ip_local_port_range,
        net_core_busy_read: net.busy_read,
        net_core_busy_poll: net.busy_poll,
        glibc_version: kernel::glibc_version(),
        build_profile: if cfg!(debug_assertions) {
            "debug"
        } else if uthread::__private::RACE_HOOKS {
            // A build that took in the uthread-races test crate (`cargo build --workspace`).
            "release+race-hooks"
        } else {
            "release"
        }
        .to_string(),
        cargo_library_path_removed: crate::launch::removed().to_vec(),
        target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
        memory_total_mib: read("/proc/meminfo")
            .as_deref()
            .and_then(kernel::parse_meminfo_total_kib)
            .map(|kib| kib / 1024),
        transparent_hugepages: read("/sys/kernel/mm/transparent_hugepage/enabled")
            .as_deref()
            .and_then(kernel::selected_choice),
        transparent_hugepages_defrag: read("/sys/kernel/mm/transparent_hugepage/defrag")
            .as_deref()
            .and_then(kernel::selected_choice),
        perf_event_paranoid: read_num("/proc/sys/kernel/perf_event_paranoid"),
        timer_resolution_ns: kernel::timer_resolution_ns(),
        ..env
    }
}
