//! The facts that shape thread performance on this machine, each with what it means for
//! threads here. Everything is read by `measure::env` (the environment the run recorded), plus
//! the steal time measured over doctor's own run.

use crate::measure::env::{describe_states, mitigation_counts, CpuTimes, Environment};
use crate::results::Table;

/// One fact: its name, its value here, and what it means for threads.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub name: &'static str,
    pub value: String,
    pub meaning: String,
}

fn fact(name: &'static str, value: impl Into<String>, meaning: impl Into<String>) -> Fact {
    Fact {
        name,
        value: value.into(),
        meaning: meaning.into(),
    }
}

fn or_unknown<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("unknown".into(), |x| x.to_string())
}

/// Steal over an interval: the share of the CPUs' time the hypervisor gave to something else
/// while this guest wanted to run, %.
pub fn steal_pct(before: Option<CpuTimes>, after: Option<CpuTimes>) -> Option<f64> {
    let (b, a) = (before?, after?);
    let total = a.total().checked_sub(b.total())?;
    (total > 0).then(|| a.steal.saturating_sub(b.steal) as f64 / total as f64 * 100.0)
}

/// Every fact, in reading order.
pub fn facts(env: &Environment, steal: Option<f64>, tracing: &str) -> Vec<Fact> {
    let mut f = vec![virtualisation(env), idle(env), haltpoll(env), pm_qos(env)];
    f.extend(topology(env));
    f.push(frequency(env));
    f.push(mitigations(env));
    f.push(fact(
        "clocksource",
        or_unknown(&env.clocksource),
        match env.clocksource.as_deref() {
            Some("tsc") | Some("arch_sys_counter") => format!(
                "timestamps are read in user space without a system call ({} ns a read)",
                env.clock_read_cost_ns
                    .map_or("?".into(), |c| format!("{c:.0}"))
            ),
            _ => "every timestamp may cost a system call: timing loops and timeouts get dearer"
                .into(),
        },
    ));
    f.push(fact(
        "tick and preemption",
        format!(
            "{} Hz; {}",
            or_unknown(&env.kernel_hz),
            env.preemption_model
        ),
        format!(
            "the scheduler looks at a CPU that never sleeps every {} ms; the preemption model \
             decides whether a woken thread can take the CPU from one running kernel code",
            env.kernel_hz
                .map_or("?".into(), |hz| format!("{:.1}", 1000.0 / hz as f64))
        ),
    ));
    f.push(isolation(env));
    f.push(fact(
        "transparent huge pages",
        format!(
            "enabled {}, defrag {}",
            or_unknown(&env.transparent_hugepages),
            or_unknown(&env.transparent_hugepages_defrag)
        ),
        match env.transparent_hugepages.as_deref() {
            Some("always") => "large buffers get 2 MiB pages without asking (knob thp)",
            Some("madvise") => {
                "large buffers get 2 MiB pages only after madvise(MADV_HUGEPAGE) (knob thp)"
            }
            Some("never") => "no huge pages for anyone: large buffers pay a TLB miss per 4 KiB",
            _ => "unknown",
        },
    ));
    f.push(rt_throttling(env));
    f.push(fact(
        "autogroup",
        match env.sched_autogroup_enabled {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        },
        "on: CPU time is shared between sessions first, so nice only orders threads of one \
         session (a terminal's jobs) against each other",
    ));
    f.push(cgroup(env));
    f.push(fact(
        "steal time",
        steal.map_or("unknown".into(), |s| format!("{s:.2}% during this run")),
        match steal {
            Some(s) if s >= 1.0 => {
                "the host took the CPUs from this guest for a measurable share: expect noisy \
                 figures, and prefer the A/B ratios to the absolute values"
            }
            Some(_) => "the host hardly took the CPUs from this guest during the run",
            None => "/proc/stat has no steal column to read",
        },
    ));
    f.push(fact(
        "timer slack",
        env.timer_slack_ns
            .map_or("unknown".into(), |n| format!("{} µs", n as f64 / 1e3)),
        "a sleep may fire this much late so that the kernel can batch timers (knob \
         timer_slack); real-time threads have none",
    ));
    f.push(fact(
        "real-time priority",
        if env.rt_priority_permitted {
            "permitted".to_string()
        } else {
            format!("refused: {}", or_unknown(&env.rt_priority_reason))
        },
        "SCHED_FIFO lets a thread preempt ordinary ones at once (knob sched_fifo)",
    ));
    f.push(fact(
        "socket busy polling",
        format!(
            "net.core.busy_read {}, busy_poll {}",
            or_unknown(&env.net_core_busy_read),
            or_unknown(&env.net_core_busy_poll)
        ),
        "0: a blocking socket read sleeps at once unless the socket asks (knob busy_poll)",
    ));
    f.push(fact(
        "tracing",
        tracing.to_string(),
        "whether doctor can split a wake-up into its parts with the scheduler's tracepoints",
    ));
    f
}

fn virtualisation(env: &Environment) -> Fact {
    let value = match (env.virtualized, &env.hypervisor) {
        (Some(true), Some(h)) => format!("guest of {h}"),
        (Some(true), None) => "guest (hypervisor unknown)".into(),
        (Some(false), _) => "bare metal".into(),
        (None, _) => "unknown".into(),
    };
    let meaning = if env.is_guest() {
        "an inter-processor interrupt and the wake-up of a halted vCPU each cost an exit to the \
         host, and the host may give this vCPU's core to something else (steal)"
    } else {
        "interrupts and idle exits are the hardware's own"
    };
    fact("virtualisation", value, meaning)
}

fn idle(env: &Environment) -> Fact {
    let halting = env.cpuidle_states.iter().any(|s| !s.polls() && !s.disabled);
    fact(
        "cpuidle",
        format!(
            "driver {}, governor {}; states: {}",
            or_unknown(&env.cpuidle_driver),
            or_unknown(&env.cpuidle_governor),
            describe_states(&env.cpuidle_states)
        ),
        if halting {
            "an idle CPU halts: a thread woken there waits for the CPU to leave its idle state \
             (knob idle_latency)"
        } else {
            "idle CPUs only poll (or cpuidle is absent): wake-ups pay no idle exit"
        },
    )
}

fn haltpoll(env: &Environment) -> Fact {
    let Some(p) = &env.haltpoll_parameters else {
        return fact(
            "guest halt polling",
            "haltpoll not loaded",
            "no guest-side poll window: an idle vCPU halts as its governor decides",
        );
    };
    let ns = p.get("guest_halt_poll_ns").cloned().unwrap_or_default();
    let meaning = if ns == "0" {
        "no poll window: every idle vCPU halts at once, so every wake-up of a thread on an idle \
         vCPU pays a VM exit and the host's wake-up of the vCPU (knob haltpoll_window)"
            .to_string()
    } else {
        format!(
            "an idle vCPU polls up to {ns} ns (adaptive) before it halts: wake-ups within that \
             window are cheap, the polling is paid in CPU"
        )
    };
    fact(
        "guest halt polling",
        format!("guest_halt_poll_ns = {ns}"),
        meaning,
    )
}

fn pm_qos(env: &Environment) -> Fact {
    let global = match env.cpu_dma_latency_us {
        Some(v) if v >= 2_000_000_000 => "no global limit held".to_string(),
        Some(v) => format!("a program holds a global limit of {v} µs"),
        None => "global limit not readable (root only)".to_string(),
    };
    fact(
        "PM QoS",
        format!(
            "{global}; per CPU: {}",
            or_unknown(&env.pm_qos_resume_latency_us)
        ),
        "a limit forbids idle states slower to leave than it; 0 keeps idle CPUs polling \
         (knobs idle_latency, cpu_resume_latency)",
    )
}

fn topology(env: &Environment) -> Vec<Fact> {
    let smt = fact(
        "SMT",
        format!(
            "{} CPUs on {} cores, SMT {}",
            or_unknown(&env.logical_cpus),
            or_unknown(&env.physical_cores),
            match env.smt {
                Some(true) => "on",
                Some(false) => "off",
                None => "unknown",
            }
        ),
        if env.smt == Some(true) {
            "two threads on SMT siblings share one core's execution units and caches: cheap \
             hand-offs, halved throughput (knob smt_sibling)"
        } else {
            "each CPU is a core of its own: no sibling to share a core with"
        },
    );
    let llc = fact(
        "last-level cache",
        format!(
            "{}; shared by {}",
            or_unknown(&env.llc_description),
            if env.llc_shared_cpu_lists.is_empty() {
                "unknown".into()
            } else {
                env.llc_shared_cpu_lists.join(" | ")
            }
        ),
        if env.llc_shared_cpu_lists.len() > 1 {
            "threads under different last-level caches hand data over through memory or the \
             interconnect (knob other_llc)"
        } else {
            "every CPU shares one last-level cache: hand-offs between any two stay in it"
        },
    );
    let numa = fact(
        "NUMA",
        format!("{} node(s)", or_unknown(&env.numa_nodes)),
        if env.numa_nodes.unwrap_or(1) > 1 {
            "memory on the other node costs more to reach (knob other_node)"
        } else {
            "one node: memory is equally far from every CPU"
        },
    );
    vec![smt, llc, numa]
}

fn frequency(env: &Environment) -> Fact {
    fact(
        "frequency",
        format!(
            "driver {}, governor {}",
            or_unknown(&env.frequency_driver),
            or_unknown(&env.frequency_governor)
        ),
        match env.frequency_governor.as_deref() {
            None => "not this kernel's to set (on a VM the host decides the clock)",
            Some("performance") => "the clock stays high: short bursts run at full speed",
            Some(_) => {
                "the clock follows the load: a thread woken after a pause may start on a slow \
                 CPU"
            }
        },
    )
}

fn mitigations(env: &Environment) -> Fact {
    let (m, v, n) = mitigation_counts(&env.cpu_vulnerabilities);
    let boot = env
        .boot_options_of_note
        .iter()
        .find(|o| o.starts_with("mitigations"))
        .cloned()
        .unwrap_or_else(|| "no mitigations= option".into());
    fact(
        "mitigations",
        format!("{m} mitigated, {v} vulnerable, {n} not affected; {boot}"),
        format!(
            "mitigations add work to kernel entry and exit and to switches: a system call costs \
             {} here",
            env.reference_syscall_ns_start
                .map_or("?".into(), |ns| format!("{ns:.0} ns"))
        ),
    )
}

fn isolation(env: &Environment) -> Fact {
    let none = |v: &Option<String>| {
        v.as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or("none")
            .to_string()
    };
    fact(
        "isolated CPUs",
        format!(
            "isolcpus {}, nohz_full {}",
            none(&env.isolated_cpus),
            none(&env.nohz_full_cpus)
        ),
        "every CPU takes the tick and ordinary tasks unless listed here (boot parameters)",
    )
}

fn rt_throttling(env: &Environment) -> Fact {
    let value = format!(
        "sched_rt_runtime_us {} of sched_rt_period_us {}",
        or_unknown(&env.sched_rt_runtime_us),
        or_unknown(&env.sched_rt_period_us)
    );
    let meaning = match (env.sched_rt_runtime_us, env.sched_rt_period_us) {
        (Some(-1), _) => "off: a real-time thread that never sleeps keeps its CPU for good".into(),
        (Some(r), Some(p)) if p > 0 => format!(
            "ordinary tasks on a CPU a real-time thread hogs still get {:.0} ms per {:.0} ms \
             (knob rt_throttling)",
            (p - r) as f64 / 1e3,
            p as f64 / 1e3
        ),
        _ => "unknown".into(),
    };
    fact("real-time throttling", value, meaning)
}

fn cgroup(env: &Environment) -> Fact {
    fact(
        "cgroup CPU limits",
        format!(
            "quota {}, cpuset {}",
            env.cgroup_cpu_limit
                .map_or("none".into(), |l| format!("{l:.2} CPUs")),
            or_unknown(&env.cgroup_cpuset_effective)
        ),
        match env.cgroup_cpu_limit {
            Some(_) => {
                "a quota stops every thread of the group once the period's budget is spent: \
                 bursts of parallel threads stall until the next period"
            }
            None => "no quota: threads may use every CPU of the cpuset",
        },
    )
}

/// The facts as the results file's table.
pub fn table(facts: &[Fact]) -> Table {
    let mut t = Table::new(
        "doctor.facts",
        "What shapes thread performance on this machine",
        &["fact", "here", "what it means for threads"],
    );
    for f in facts {
        t.row(vec![f.name.to_string(), f.value.clone(), f.meaning.clone()]);
    }
    t.note = "Read from sysfs, procfs and the kernel's answers (see the environment); steal \
              time measured over this run."
        .into();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_least_twelve_facts_each_with_a_meaning() {
        let env = crate::measure::env::capture();
        let f = facts(&env, Some(0.1), "permitted");
        assert!(f.len() >= 12, "{}", f.len());
        assert!(f
            .iter()
            .all(|x| !x.value.is_empty() && !x.meaning.is_empty()));
        let t = table(&f);
        assert_eq!(t.rows.len(), f.len());
    }

    #[test]
    fn steal_is_a_share_of_the_interval() {
        let t = |busy, idle, steal| Some(CpuTimes { busy, idle, steal });
        assert_eq!(steal_pct(t(10, 80, 10), t(20, 160, 20)), Some(10.0));
        assert_eq!(steal_pct(t(10, 80, 10), t(10, 80, 10)), None);
        assert_eq!(steal_pct(None, t(1, 1, 1)), None);
    }

    #[test]
    fn no_halt_polling_is_explained_as_a_vm_exit_per_wake_up() {
        let env = Environment {
            haltpoll_parameters: Some(
                [("guest_halt_poll_ns".to_string(), "0".to_string())]
                    .into_iter()
                    .collect(),
            ),
            ..Environment::default()
        };
        let f = haltpoll(&env);
        assert_eq!(f.value, "guest_halt_poll_ns = 0");
        assert!(f.meaning.contains("VM exit"));
    }
}
