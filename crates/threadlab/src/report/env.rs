//! The environment for people: one aligned "key: value" per line (`threadlab env`) and a one-line
//! summary (the head of every report). What the environment means for the figures is
//! `report::warnings`.

use std::collections::BTreeMap;

use crate::measure::env::{Environment, Rlimit};

const UNKNOWN: &str = "unknown";

/// Human-readable description, one aligned "key: value" per line (for `threadlab env`).
pub fn render_text(env: &Environment) -> String {
    let rows = rows(env);
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (key, value) in rows {
        let label = format!("{key}:");
        out.push_str(&format!("{label:<width$} {value}\n"));
    }
    out
}

/// Compact one-line summary: CPU model, cores/threads, kernel, preemption, virtualisation, governor.
pub fn one_line(env: &Environment) -> String {
    let model = env.cpu_model.as_deref().unwrap_or("unknown CPU");
    let cores = env
        .physical_cores
        .map_or_else(|| "?".to_string(), |c| c.to_string());
    let threads = env
        .logical_cpus
        .map_or_else(|| "?".to_string(), |c| c.to_string());
    let virt = match (env.virtualized, &env.hypervisor) {
        (_, Some(h)) => format!("virtualised ({h})"),
        (Some(true), None) => "virtualised".to_string(),
        (Some(false), None) => "bare metal".to_string(),
        (None, None) => "virtualisation unknown".to_string(),
    };
    let mut s = format!(
        "{model}, {cores} cores/{threads} threads, Linux {}, preemption {}, {virt}, governor {}",
        env.kernel_release,
        short_preemption(&env.preemption_model),
        env.frequency_governor.as_deref().unwrap_or(UNKNOWN),
    );
    if let Some(c) = &env.container {
        s.push_str(&format!(", container {c}"));
    }
    s
}

/// One row per field, in the order of the JSON object.
fn rows(env: &Environment) -> Vec<Row> {
    let mut rows = machine_rows(env);
    rows.extend(scheduler_rows(env));
    rows.extend(system_rows(env));
    rows.extend(reference_rows(env));
    rows
}

/// A field name and its text.
type Row = (&'static str, String);

/// The CPU, the kernel, the hypervisor and the idle path: what the machine is.
fn machine_rows(env: &Environment) -> Vec<Row> {
    let cpus_allowed = if env.allowed_cpus.is_empty() {
        UNKNOWN.to_string()
    } else {
        format!(
            "{} ({})",
            format_cpu_list(&env.allowed_cpus),
            env.allowed_cpus.len()
        )
    };
    vec![
        ("hostname", opt(&env.hostname)),
        ("cpu_model", opt(&env.cpu_model)),
        ("cpu_vendor", opt(&env.cpu_vendor)),
        ("cpu_flags_of_note", list(&env.cpu_flags_of_note)),
        ("logical_cpus", opt(&env.logical_cpus)),
        ("allowed_cpus", cpus_allowed),
        ("physical_cores", opt(&env.physical_cores)),
        ("smt", opt_bool(env.smt, "yes", "no")),
        ("numa_nodes", opt(&env.numa_nodes)),
        ("kernel_release", env.kernel_release.clone()),
        ("kernel_version", env.kernel_version.clone()),
        ("preemption_model", env.preemption_model.clone()),
        (
            "preempt_boot_option",
            opt_or(&env.preempt_boot_option, "none"),
        ),
        ("boot_options_of_note", list(&env.boot_options_of_note)),
        ("clocksource", opt(&env.clocksource)),
        ("available_clocksources", list(&env.available_clocksources)),
        ("virtualized", opt_bool(env.virtualized, "yes", "no")),
        ("hypervisor", opt_or(&env.hypervisor, "none detected")),
        (
            "hypervisor_cpuid_vendor",
            opt_or(&env.hypervisor_cpuid_vendor, "none"),
        ),
        ("dmi_system", opt(&env.dmi_system)),
        ("container", opt_or(&env.container, "none detected")),
        ("cpuidle_driver", opt(&env.cpuidle_driver)),
        ("cpuidle_governor", opt(&env.cpuidle_governor)),
        ("haltpoll_parameters", params(&env.haltpoll_parameters)),
        (
            "cpuidle_haltpoll_parameters",
            params(&env.cpuidle_haltpoll_parameters),
        ),
        (
            "kvm_halt_poll_parameters",
            params(&env.kvm_halt_poll_parameters),
        ),
        (
            "cpuidle_states",
            crate::measure::env::describe_states(&env.cpuidle_states),
        ),
        (
            "pm_qos_resume_latency_us",
            opt(&env.pm_qos_resume_latency_us),
        ),
        (
            "cpu_dma_latency_us",
            opt_or(&env.cpu_dma_latency_us, "not readable"),
        ),
        ("llc_shared_cpu_lists", list(&env.llc_shared_cpu_lists)),
        ("llc_description", opt(&env.llc_description)),
    ]
}

/// Timer, mitigations, frequency, load and resource limits: what a run competes with.
fn scheduler_rows(env: &Environment) -> Vec<Row> {
    vec![
        ("kernel_hz", opt(&env.kernel_hz)),
        (
            "nohz_full_cpus",
            opt_or(&env.nohz_full_cpus, "not supported"),
        ),
        ("isolated_cpus", opt(&env.isolated_cpus)),
        (
            "cpu_vulnerabilities",
            if env.cpu_vulnerabilities.is_empty() {
                UNKNOWN.to_string()
            } else {
                let (m, v, n) = crate::measure::env::mitigation_counts(&env.cpu_vulnerabilities);
                format!("{m} mitigated, {v} vulnerable, {n} not affected")
            },
        ),
        ("timer_slack_ns", opt(&env.timer_slack_ns)),
        ("frequency_governor", opt(&env.frequency_governor)),
        ("frequency_driver", opt(&env.frequency_driver)),
        (
            "cpu_mhz",
            env.cpu_mhz
                .map_or_else(|| UNKNOWN.to_string(), |m| format!("{m:.0}")),
        ),
        ("turbo_enabled", opt_bool(env.turbo_enabled, "yes", "no")),
        ("loadavg_start", load(&env.loadavg_start)),
        ("runnable_tasks_start", opt(&env.runnable_tasks_start)),
        ("procs_running_start", opt(&env.procs_running_start)),
        ("loadavg_end", load_end(&env.loadavg_end)),
        (
            "runnable_tasks_end",
            opt_or(&env.runnable_tasks_end, "not recorded"),
        ),
        (
            "procs_running_end",
            opt_or(&env.procs_running_end, "not recorded"),
        ),
        ("steal_during_run", steal_text(env)),
        (
            "cgroup_cpu_limit",
            env.cgroup_cpu_limit
                .map_or_else(|| "none".to_string(), |l| format!("{l:.2} CPUs")),
        ),
        ("cgroup_cpu_max_raw", opt(&env.cgroup_cpu_max_raw)),
        ("cgroup_cpuset_effective", opt(&env.cgroup_cpuset_effective)),
        (
            "cgroup_pids_max",
            opt_or(&env.cgroup_pids_max, "none found"),
        ),
        ("rlimit_nproc", rlimit(&env.rlimit_nproc)),
        ("rlimit_rtprio", rlimit(&env.rlimit_rtprio)),
        ("rlimit_nofile", rlimit(&env.rlimit_nofile)),
        (
            "rt_priority_permitted",
            match (env.rt_priority_permitted, &env.rt_priority_reason) {
                (true, _) => "yes".to_string(),
                (false, Some(r)) => format!("no ({r})"),
                (false, None) => "no".to_string(),
            },
        ),
    ]
}

/// Scheduler, kernel and network settings, build and memory.
fn system_rows(env: &Environment) -> Vec<Row> {
    vec![
        ("sched_rt_runtime_us", opt(&env.sched_rt_runtime_us)),
        ("sched_rt_period_us", opt(&env.sched_rt_period_us)),
        (
            "sched_autogroup_enabled",
            opt_bool(env.sched_autogroup_enabled, "yes", "no"),
        ),
        ("vm_max_map_count", opt(&env.vm_max_map_count)),
        ("threads_max", opt(&env.threads_max)),
        ("pid_max", opt(&env.pid_max)),
        (
            "io_uring_disabled",
            env.io_uring_disabled.map_or_else(
                || "no such setting (kernel before 6.6)".to_string(),
                |v| match v {
                    0 => "0 (io_uring allowed)".to_string(),
                    1 => "1 (only for kernel.io_uring_group)".to_string(),
                    2 => "2 (io_uring refused)".to_string(),
                    n => n.to_string(),
                },
            ),
        ),
        (
            "seccomp_mode",
            env.seccomp_mode.map_or_else(
                || UNKNOWN.to_string(),
                |m| match m {
                    0 => "0 (none)".to_string(),
                    1 => "1 (strict)".to_string(),
                    2 => "2 (filter: runs on every system call)".to_string(),
                    n => n.to_string(),
                },
            ),
        ),
        ("net_core_somaxconn", opt(&env.net_core_somaxconn)),
        (
            "net_ipv4_tcp_max_syn_backlog",
            opt(&env.net_ipv4_tcp_max_syn_backlog),
        ),
        (
            "net_ipv4_tcp_tw_reuse",
            env.net_ipv4_tcp_tw_reuse.map_or_else(
                || UNKNOWN.to_string(),
                |v| match v {
                    0 => "0 (off)".to_string(),
                    1 => "1 (on)".to_string(),
                    2 => "2 (loopback only)".to_string(),
                    n => n.to_string(),
                },
            ),
        ),
        (
            "net_ipv4_ip_local_port_range",
            env.net_ipv4_ip_local_port_range.map_or_else(
                || UNKNOWN.to_string(),
                |[a, b]| format!("{a}-{b} ({} ports)", b - a + 1),
            ),
        ),
        ("net_core_busy_read", opt(&env.net_core_busy_read)),
        ("net_core_busy_poll", opt(&env.net_core_busy_poll)),
        ("glibc_version", env.glibc_version.clone()),
        ("build_profile", env.build_profile.clone()),
        (
            "cargo_library_path_removed",
            if env.cargo_library_path_removed.is_empty() {
                "nothing (not started by cargo run, or no library path of its own)".to_string()
            } else {
                format!(
                    "{} directories cargo run had put in front of LD_LIBRARY_PATH, taken out \
                     before any child started: {}",
                    env.cargo_library_path_removed.len(),
                    env.cargo_library_path_removed.join(":")
                )
            },
        ),
        ("target", env.target.clone()),
        (
            "memory_total_mib",
            env.memory_total_mib
                .map_or_else(|| UNKNOWN.to_string(), |m| format!("{m} MiB")),
        ),
        ("transparent_hugepages", opt(&env.transparent_hugepages)),
        (
            "transparent_hugepages_defrag",
            opt(&env.transparent_hugepages_defrag),
        ),
    ]
}

/// The clocks and the reference loops measured at the start and end of the run.
fn reference_rows(env: &Environment) -> Vec<Row> {
    vec![
        ("perf_event_paranoid", opt(&env.perf_event_paranoid)),
        (
            "timer_resolution_ns",
            env.timer_resolution_ns
                .map_or_else(|| UNKNOWN.to_string(), |n| format!("{n} ns")),
        ),
        (
            "clock_read_cost_ns",
            env.clock_read_cost_ns
                .map_or_else(|| "not measured".to_string(), |n| format!("{n:.1} ns")),
        ),
        (
            "reference_loop_ns",
            match (env.reference_loop_ns_start, env.reference_loop_ns_end) {
                (Some(a), Some(b)) => format!("{a:.0} ns at start, {b:.0} ns at end"),
                (Some(a), None) => format!("{a:.0} ns"),
                _ => "not measured".to_string(),
            },
        ),
        (
            "reference_wide_ns",
            match (env.reference_wide_ns_start, env.reference_wide_ns_end) {
                (Some(a), Some(b)) => format!("{a:.0} ns at start, {b:.0} ns at end"),
                (Some(a), None) => format!("{a:.0} ns"),
                _ => "not measured".to_string(),
            },
        ),
        (
            "reference_syscall_ns",
            match (env.reference_syscall_ns_start, env.reference_syscall_ns_end) {
                (Some(a), Some(b)) => format!("{a:.1} ns at start, {b:.1} ns at end"),
                (Some(a), None) => format!("{a:.1} ns"),
                _ => "not measured".to_string(),
            },
        ),
        (
            "reference_memory_ns",
            match (env.reference_memory_ns_start, env.reference_memory_ns_end) {
                (Some(a), Some(b)) => format!("{a:.1} ns at start, {b:.1} ns at end"),
                (Some(a), None) => format!("{a:.1} ns"),
                _ => "not measured".to_string(),
            },
        ),
        (
            "reference_pair_ns",
            match (
                env.reference_pair_ns_start,
                env.reference_pair_ns_end,
                env.reference_pair_ns_range,
            ) {
                (Some(a), Some(b), Some([lo, hi])) => {
                    format!("{a:.0} ns at start, {b:.0} ns at end, {lo:.0}-{hi:.0} ns in the run")
                }
                (Some(a), None, _) => format!("{a:.0} ns"),
                _ => "not measured".to_string(),
            },
        ),
    ]
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

/// A module's parameters as "name=value ..."; the module may simply not be loaded.
fn params(v: &Option<BTreeMap<String, String>>) -> String {
    match v {
        None => "module not loaded".to_string(),
        Some(p) if p.is_empty() => "none".to_string(),
        Some(p) => p
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
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

/// "cpu0 0 ms, cpu1 20 ms (0.01% of the run's CPU time)", or why it is not known.
fn steal_text(env: &Environment) -> String {
    let Some(steal) = &env.steal_ms_during_run else {
        return "not recorded".to_string();
    };
    let per_cpu: Vec<String> = steal
        .iter()
        .map(|(cpu, ms)| format!("cpu{cpu} {ms:.0} ms"))
        .collect();
    let total: f64 = steal.iter().map(|x| x.1).sum();
    match env.run_wall_s.filter(|w| *w > 0.0 && !steal.is_empty()) {
        Some(wall) => format!(
            "{} ({:.2}% of the run's CPU time; from /proc/stat, 10 ms resolution)",
            per_cpu.join(", "),
            total / (wall * 1e3 * steal.len() as f64) * 100.0
        ),
        None => per_cpu.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_preemption_forms() {
        // The long forms are what measure::env's parsers produce (their tests pin them).
        let dynamic = "dynamic (mode unknown; default voluntary unless preempt= boot option)";
        assert_eq!(short_preemption(dynamic), "dynamic");
        let booted = "dynamic (full, from preempt= boot option)";
        assert_eq!(short_preemption(booted), "dynamic/full");
        let debugfs = "voluntary (dynamic, read from debugfs)";
        assert_eq!(short_preemption(debugfs), "dynamic/voluntary");
        assert_eq!(short_preemption("full (PREEMPT_RT)"), "PREEMPT_RT");
        assert_eq!(short_preemption("none/voluntary"), "none/voluntary");
    }

    #[test]
    fn cpu_lists_compact() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn renders_a_captured_environment() {
        let mut env = crate::measure::env::capture();
        env.record_end();
        assert!(render_text(&env).lines().count() > 40);
        assert!(!one_line(&env).contains('\n'));
    }
}
