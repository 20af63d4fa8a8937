//! Reading the environment at run start, one group of fields per source.

use std::path::Path;

use super::cpu::CpuInfo;
use super::{
    cgroup, cpu, cpu_list_text, idle, kernel, limits, load, net, none_if_null, read, read_num,
    read_trim, virt, Environment, UNKNOWN,
};
use crate::measure::placement::{allowed_cpus, parse_cpu_list};

/// Captures the environment at run start. Never panics; unknown values become `None` / "unknown".
pub fn capture() -> Environment {
    let cpuinfo = read("/proc/cpuinfo")
        .as_deref()
        .map(cpu::parse_cpuinfo)
        .unwrap_or_default();
    let cmdline = read("/proc/cmdline").unwrap_or_default();
    let allowed = allowed_cpus();
    let mut env = Environment::default();
    kernel_and_boot(&mut env, &cmdline);
    cpus(&mut env, &cpuinfo, &allowed);
    virtualization(&mut env, &cpuinfo);
    idle_states(&mut env, &allowed);
    clocks_and_frequency(&mut env, &cpuinfo);
    load_at_start(&mut env);
    limits_and_quotas(&mut env);
    build_and_memory(&mut env);
    env
}

/// /sys/module/NAME/parameters.
fn module(name: &str) -> std::path::PathBuf {
    Path::new("/sys/module").join(name).join("parameters")
}

/// A file under /proc/sys.
fn proc_sys(name: &str) -> Option<String> {
    read(Path::new("/proc/sys").join(name))
}

/// The host's name, the kernel, its preemption model and the boot options of note.
fn kernel_and_boot(env: &mut Environment, cmdline: &str) {
    let (kernel_release, kernel_version, hostname) = match kernel::uname() {
        Some(u) => (u.release, u.version, Some(u.nodename)),
        None => (
            UNKNOWN.to_string(),
            UNKNOWN.to_string(),
            read_trim("/proc/sys/kernel/hostname"),
        ),
    };
    env.preemption_model = read("/sys/kernel/debug/sched/preempt")
        .as_deref()
        .and_then(kernel::preemption_from_debugfs)
        .unwrap_or_else(|| kernel::preemption_from_uname(&kernel_version, cmdline));
    env.hostname = hostname;
    env.kernel_release = kernel_release;
    env.kernel_version = kernel_version;
    env.preempt_boot_option = kernel::cmdline_option(cmdline, "preempt");
    env.boot_options_of_note = kernel::boot_options_of_note(cmdline);
}

/// The CPU model and its topology: SMT, NUMA, the last-level cache and who shares it.
fn cpus(env: &mut Environment, cpuinfo: &CpuInfo, allowed: &[usize]) {
    let logical_cpus = cpu::online_cpus();
    let (physical_cores, threads_per_core) = cpu::topology(logical_cpus);
    let smt_active = read_trim("/sys/devices/system/cpu/smt/active").map(|s| s == "1");
    env.smt = match (threads_per_core, smt_active) {
        (Some(t), Some(a)) => Some(t > 1 || a),
        (Some(t), None) => Some(t > 1),
        (None, a) => a,
    };
    env.cpu_model = cpuinfo.model.clone();
    env.cpu_vendor = cpuinfo.vendor.clone();
    env.cpu_flags_of_note = cpu::flags_of_note(&cpuinfo.flags);
    env.logical_cpus = logical_cpus;
    env.allowed_cpus = allowed.to_vec();
    env.physical_cores = physical_cores;
    env.numa_nodes = read_trim("/sys/devices/system/node/online")
        .and_then(|s| parse_cpu_list(&s))
        .map(|v| v.len());
    env.llc_shared_cpu_lists = cpu::llc_groups(allowed)
        .unwrap_or_default()
        .iter()
        .map(|g| cpu_list_text(g))
        .collect();
    let first_cpu = allowed.first().copied().unwrap_or(0);
    env.llc_description =
        cpu::last_level_cache(first_cpu).map(|c| format!("L{} {} {}", c.level, c.kind, c.size));
}

/// Whether this is a VM or a container, and whose.
fn virtualization(env: &mut Environment, cpuinfo: &CpuInfo) {
    let virt = virt::detect_virtualization(cpuinfo);
    env.virtualized = virt.virtualized;
    env.hypervisor = virt.hypervisor;
    env.hypervisor_cpuid_vendor = virt.cpuid_vendor;
    env.dmi_system = virt.dmi_system;
    env.container = virt.container;
}

/// What an idle CPU does and what waking it costs: cpuidle, halt polling, latency requests.
fn idle_states(env: &mut Environment, allowed: &[usize]) {
    let first_cpu = allowed.first().copied().unwrap_or(0);
    env.cpuidle_driver = read_trim("/sys/devices/system/cpu/cpuidle/current_driver");
    env.cpuidle_governor = read_trim("/sys/devices/system/cpu/cpuidle/current_governor_ro")
        .or_else(|| read_trim("/sys/devices/system/cpu/cpuidle/current_governor"));
    env.haltpoll_parameters = kernel::module_parameters(&module("haltpoll"), |_| true);
    env.cpuidle_haltpoll_parameters =
        kernel::module_parameters(&module("cpuidle_haltpoll"), |_| true);
    env.kvm_halt_poll_parameters =
        kernel::module_parameters(&module("kvm"), |p| p.starts_with("halt_poll"));
    env.cpuidle_states = idle::idle_states(first_cpu);
    env.pm_qos_resume_latency_us = idle::resume_latency_summary(allowed);
    env.cpu_dma_latency_us = idle::cpu_dma_latency_us().ok();
}

/// Clock sources, the tick, tickless and isolated CPUs, mitigations, timer slack, frequency.
fn clocks_and_frequency(env: &mut Environment, cpuinfo: &CpuInfo) {
    env.clocksource = read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    env.available_clocksources =
        read("/sys/devices/system/clocksource/clocksource0/available_clocksource")
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
    env.kernel_hz = kernel::kernel_hz();
    env.nohz_full_cpus = read("/sys/devices/system/cpu/nohz_full").map(|s| none_if_null(&s));
    env.isolated_cpus = read("/sys/devices/system/cpu/isolated").map(|s| none_if_null(&s));
    env.cpu_vulnerabilities =
        kernel::vulnerabilities(Path::new("/sys/devices/system/cpu/vulnerabilities"))
            .unwrap_or_default();
    env.timer_slack_ns = kernel::timer_slack_ns();
    env.frequency_governor = read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
    env.frequency_driver = read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_driver");
    env.cpu_mhz = cpuinfo.mhz;
    env.turbo_enabled = cpu::turbo_state(
        read_trim("/sys/devices/system/cpu/intel_pstate/no_turbo").as_deref(),
        read_trim("/sys/devices/system/cpu/cpufreq/boost")
            .or_else(|| read_trim("/sys/devices/system/cpu/cpufreq/policy0/boost"))
            .as_deref(),
    );
    env.timer_resolution_ns = kernel::timer_resolution_ns();
}

/// The machine's load as the run starts (the run's end is filled in by the caller).
fn load_at_start(env: &mut Environment) {
    let load_start = read("/proc/loadavg")
        .as_deref()
        .and_then(load::parse_loadavg);
    env.loadavg_start = load_start.map(|l| l.avg);
    env.runnable_tasks_start = load_start.map(|l| l.running.saturating_sub(1));
    env.procs_running_start = read("/proc/stat")
        .as_deref()
        .and_then(load::parse_procs_running);
    env.steal_ticks_start = crate::measure::host::steal_ticks();
}

/// What this process may do: cgroup quotas, resource limits, real-time priority, the kernel's
/// ceilings and network settings, seccomp.
fn limits_and_quotas(env: &mut Environment) {
    let cgroups = cgroup::Cgroups::read();
    (env.cgroup_cpu_limit, env.cgroup_cpu_max_raw) = cgroups.cpu_quota();
    env.cgroup_cpuset_effective = cgroups.cpuset();
    env.cgroup_pids_max = cgroups.pids_max();
    env.rlimit_nproc = limits::rlimit(libc::RLIMIT_NPROC);
    env.rlimit_rtprio = limits::rlimit(libc::RLIMIT_RTPRIO);
    env.rlimit_nofile = limits::rlimit(libc::RLIMIT_NOFILE);
    (env.rt_priority_permitted, env.rt_priority_reason) =
        limits::probe_rt_priority(env.rlimit_rtprio);
    env.sched_rt_runtime_us = read_num("/proc/sys/kernel/sched_rt_runtime_us");
    env.sched_rt_period_us = read_num("/proc/sys/kernel/sched_rt_period_us");
    env.sched_autogroup_enabled =
        read_num::<u64>("/proc/sys/kernel/sched_autogroup_enabled").map(|v| v != 0);
    let ceilings = limits::ceilings(proc_sys);
    env.vm_max_map_count = ceilings.vm_max_map_count;
    env.threads_max = ceilings.threads_max;
    env.pid_max = ceilings.pid_max;
    env.io_uring_disabled = ceilings.io_uring_disabled;
    env.seccomp_mode = read("/proc/self/status")
        .as_deref()
        .and_then(limits::parse_seccomp_mode);
    let net = net::net_sysctls(proc_sys);
    env.net_core_somaxconn = net.somaxconn;
    env.net_ipv4_tcp_max_syn_backlog = net.tcp_max_syn_backlog;
    env.net_ipv4_tcp_tw_reuse = net.tcp_tw_reuse;
    env.net_ipv4_ip_local_port_range = net.ip_local_port_range;
    env.net_core_busy_read = net.busy_read;
    env.net_core_busy_poll = net.busy_poll;
}

/// The build, the C library, memory and huge pages, perf's paranoia.
fn build_and_memory(env: &mut Environment) {
    env.glibc_version = kernel::glibc_version();
    env.build_profile = if cfg!(debug_assertions) {
        "debug"
    } else if uthread::__private::RACE_HOOKS {
        // A build that took in the uthread-races test crate (`cargo build --workspace`).
        "release+race-hooks"
    } else {
        "release"
    }
    .to_string();
    env.target = format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS);
    env.memory_total_mib = read("/proc/meminfo")
        .as_deref()
        .and_then(kernel::parse_meminfo_total_kib)
        .map(|kib| kib / 1024);
    env.transparent_hugepages = read("/sys/kernel/mm/transparent_hugepage/enabled")
        .as_deref()
        .and_then(kernel::selected_choice);
    env.transparent_hugepages_defrag = read("/sys/kernel/mm/transparent_hugepage/defrag")
        .as_deref()
        .and_then(kernel::selected_choice);
    env.perf_event_paranoid = read_num("/proc/sys/kernel/perf_event_paranoid");
}
