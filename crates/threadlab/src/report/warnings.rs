//! What in the environment makes a run's figures less trustworthy or harder to compare: one
//! variant per kind, whose text says what was seen and what it means for the figures.
//!
//! The kind names (`EnvWarning::kind`) are stable identifiers, so that a reader of results can
//! filter on them without parsing the text.

use std::fmt;

use crate::measure::env::Environment;
use crate::results::Warning;

/// A reference that moved by more than this share between start and end counts as drift.
const DRIFT_PCT: f64 = 5.0;

/// Clocksources that are cheap, vDSO-readable counters on their architectures.
const GOOD_CLOCKSOURCES: &[&str] = &["tsc", "arch_sys_counter", "timebase", "riscv_clocksource"];

/// The fixed workloads the runner times at the start and end of a run (measure::sampler).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reference {
    /// A chain of dependent multiply-adds: the core's own clock.
    RegisterLoop,
    /// Independent chains: throughput-bound, so it also sees a co-tenant on the core.
    WideLoop,
    /// One getppid: the kernel entry and exit path.
    Syscall,
}

impl Reference {
    fn describe(self) -> &'static str {
        match self {
            Reference::RegisterLoop => "a fixed register-only loop",
            Reference::WideLoop => "a fixed throughput-bound loop",
            Reference::Syscall => "a getppid system call",
        }
    }
}

/// One reference's time at the start and at the end of a run, ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftMove {
    pub reference: Reference,
    pub start_ns: f64,
    pub end_ns: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EnvWarning {
    /// References that took a different time at the end of the run than at its start: one
    /// warning for all of them, so that a drifting machine costs the summary one item.
    Drift { moves: Vec<DriftMove> },
    /// threadlab itself was built without optimisation.
    DebugBuild,
    /// uthread was built with its test-only race-delay hooks.
    RaceHooks,
    /// The 1-minute load average at start was above half a task per CPU.
    /// `idle_at_start`: no other task was runnable when the run began (the load is the recent
    /// past, or comes and goes).
    BusyMachine {
        load_1min: f64,
        cpus: usize,
        idle_at_start: bool,
    },
    /// Other tasks were runnable when the run started.
    CompetingTasksAtStart { tasks: u64 },
    /// Other tasks were runnable when the run ended.
    CompetingTasksAtEnd { tasks: u64 },
    /// The cpufreq governor is powersave.
    PowersaveGovernor { intel_pstate: bool },
    /// A cgroup CPU quota below the CPUs visible.
    CgroupCpuQuota { quota_cpus: f64, cpus: usize },
    /// The affinity mask (taskset, a cpuset) allows fewer CPUs than are online.
    NarrowAffinity { allowed: usize, online: usize },
    /// A guest of a hypervisor (informational).
    Virtualized { hypervisor: Option<String> },
    /// The clocksource is not a cheap counter read in user space.
    SlowClocksource { name: String },
    /// The hypervisor took a noticeable share of the CPUs' time during the run.
    HostSteal { pct: f64, ms: f64 },
    /// The cache-line round trip between the two CPUs moved during the run: the host ran the
    /// vCPUs on other cores for part of it.
    VcpusMoved { low_ns: f64, high_ns: f64 },
}

impl EnvWarning {
    /// Every kind, in the order `env_warnings` reports them.
    pub const KINDS: &'static [&'static str] = &[
        "drift",
        "debug_build",
        "race_hooks",
        "busy_machine",
        "competing_tasks_start",
        "competing_tasks_end",
        "powersave_governor",
        "cgroup_cpu_quota",
        "narrow_affinity",
        "virtualized",
        "slow_clocksource",
        "host_steal",
        "vcpus_moved",
    ];

    /// A stable snake_case name for this kind of warning.
    pub fn kind(&self) -> &'static str {
        match self {
            EnvWarning::Drift { .. } => "drift",
            EnvWarning::DebugBuild => "debug_build",
            EnvWarning::RaceHooks => "race_hooks",
            EnvWarning::BusyMachine { .. } => "busy_machine",
            EnvWarning::CompetingTasksAtStart { .. } => "competing_tasks_start",
            EnvWarning::CompetingTasksAtEnd { .. } => "competing_tasks_end",
            EnvWarning::PowersaveGovernor { .. } => "powersave_governor",
            EnvWarning::CgroupCpuQuota { .. } => "cgroup_cpu_quota",
            EnvWarning::NarrowAffinity { .. } => "narrow_affinity",
            EnvWarning::Virtualized { .. } => "virtualized",
            EnvWarning::SlowClocksource { .. } => "slow_clocksource",
            EnvWarning::HostSteal { .. } => "host_steal",
            EnvWarning::VcpusMoved { .. } => "vcpus_moved",
        }
    }
}

impl From<&EnvWarning> for Warning {
    fn from(w: &EnvWarning) -> Warning {
        Warning {
            kind: w.kind().to_string(),
            text: w.to_string(),
        }
    }
}

/// Conditions that make figures less trustworthy or harder to compare, in report order.
pub fn env_warnings(env: &Environment) -> Vec<EnvWarning> {
    let mut w = Vec::new();
    let mut moves = Vec::new();
    for (reference, start, end) in [
        (
            Reference::RegisterLoop,
            env.reference_loop_ns_start,
            env.reference_loop_ns_end,
        ),
        (
            Reference::WideLoop,
            env.reference_wide_ns_start,
            env.reference_wide_ns_end,
        ),
        (
            Reference::Syscall,
            env.reference_syscall_ns_start,
            env.reference_syscall_ns_end,
        ),
    ] {
        if let (Some(start_ns), Some(end_ns)) = (start, end) {
            if ((end_ns - start_ns) / start_ns * 100.0).abs() > DRIFT_PCT {
                moves.push(DriftMove {
                    reference,
                    start_ns,
                    end_ns,
                });
            }
        }
    }
    if !moves.is_empty() {
        w.push(EnvWarning::Drift { moves });
    }
    if env.build_profile == "debug" {
        w.push(EnvWarning::DebugBuild);
    } else if env.build_profile.contains("race-hooks") {
        w.push(EnvWarning::RaceHooks);
    }
    let cpus = env
        .logical_cpus
        .or_else(|| (!env.allowed_cpus.is_empty()).then_some(env.allowed_cpus.len()));
    if let (Some(load), Some(n)) = (env.loadavg_start, cpus) {
        if n > 0 && load[0] > 0.5 * n as f64 {
            w.push(EnvWarning::BusyMachine {
                load_1min: load[0],
                cpus: n,
                idle_at_start: env.runnable_tasks_start == Some(0),
            });
        }
    }
    if let Some(tasks) = env.runnable_tasks_start.filter(|&r| r > 0) {
        w.push(EnvWarning::CompetingTasksAtStart { tasks });
    }
    if let Some(tasks) = env.runnable_tasks_end.filter(|&r| r > 0) {
        w.push(EnvWarning::CompetingTasksAtEnd { tasks });
    }
    if env.frequency_governor.as_deref() == Some("powersave") {
        w.push(EnvWarning::PowersaveGovernor {
            intel_pstate: env.frequency_driver.as_deref() == Some("intel_pstate"),
        });
    }
    if let (Some(quota_cpus), Some(n)) = (env.cgroup_cpu_limit, cpus) {
        if quota_cpus < n as f64 {
            w.push(EnvWarning::CgroupCpuQuota {
                quota_cpus,
                cpus: n,
            });
        }
    }
    if let Some(online) = env.logical_cpus {
        if !env.allowed_cpus.is_empty() && env.allowed_cpus.len() < online {
            w.push(EnvWarning::NarrowAffinity {
                allowed: env.allowed_cpus.len(),
                online,
            });
        }
    }
    if env.is_guest() {
        w.push(EnvWarning::Virtualized {
            hypervisor: env.hypervisor.clone(),
        });
    }
    if let Some(cs) = &env.clocksource {
        if !GOOD_CLOCKSOURCES.contains(&cs.as_str()) {
            w.push(EnvWarning::SlowClocksource { name: cs.clone() });
        }
    }
    if let (Some(steal), Some(wall)) = (&env.steal_ms_during_run, env.run_wall_s) {
        let ms: f64 = steal.iter().map(|x| x.1).sum();
        let pct = ms / (wall * 1e3 * steal.len().max(1) as f64) * 100.0;
        if pct > HOST_STEAL_PCT {
            w.push(EnvWarning::HostSteal { pct, ms });
        }
    }
    if let Some([low_ns, high_ns]) = env.reference_pair_ns_range {
        if low_ns > 0.0 && high_ns / low_ns > crate::report::compare::PAIR_REGIME_RATIO {
            w.push(EnvWarning::VcpusMoved { low_ns, high_ns });
        }
    }
    w
}

/// Steal above this share of the CPUs' time during a run is reported.
const HOST_STEAL_PCT: f64 = 0.5;

impl fmt::Display for EnvWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvWarning::Drift { moves } => {
                let t = crate::report::readable_ns;
                f.write_str("the machine's speed drifted during the run: ")?;
                for (i, m) in moves.iter().enumerate() {
                    let (what, start, end) = (m.reference.describe(), t(m.start_ns), t(m.end_ns));
                    let drift = (m.end_ns - m.start_ns) / m.start_ns * 100.0;
                    if i == 0 {
                        write!(
                            f,
                            "{what} took {start} at start, {end} at end ({drift:+.0}%)"
                        )?;
                    } else {
                        write!(f, ", {what} {start} and {end} ({drift:+.0}%)")?;
                    }
                }
                f.write_str("; run again, and compare only runs without this warning")
            }
            EnvWarning::DebugBuild => f.write_str(
                "debug build: threadlab's own overhead inflates the figures; use a release build",
            ),
            EnvWarning::RaceHooks => f.write_str(
                "uthread was built with its test-only race hooks (a build of the whole workspace, \
                 uthread-races included), which add work to green-thread spawn, join and wake: \
                 build with 'cargo run --release -- run' or 'cargo build --release -p threadlab'",
            ),
            EnvWarning::BusyMachine {
                load_1min,
                cpus,
                idle_at_start,
            } => write!(
                f,
                "busy machine: 1-minute load average {load_1min:.2} at start is above 0.5 per CPU \
                 ({cpus} CPUs){}",
                if *idle_at_start {
                    // The average decays over minutes: right after a run of the suite (whose
                    // server experiment holds a thousand threads) it still read 24 with nothing
                    // else running.
                    ", though no other task was runnable as the run began: work that had just \
                     ended (a run before this one counts) or that comes and goes; if figures \
                     look out of line, run again once the load average has fallen"
                } else {
                    ": other work shares the CPUs with the measurements; stop it, or run when \
                     the machine is idle"
                }
            ),
            EnvWarning::CompetingTasksAtStart { tasks } => write!(
                f,
                "{tasks} other runnable task(s) at start compete for the CPUs; stop them, or run \
                 when the machine is idle"
            ),
            EnvWarning::CompetingTasksAtEnd { tasks } => write!(
                f,
                "{tasks} other runnable task(s) at end: competition may have appeared during the \
                 run; if some figures look out of line, run those experiments again when the \
                 machine is idle"
            ),
            EnvWarning::PowersaveGovernor { intel_pstate } => {
                let note = if *intel_pstate {
                    " (with intel_pstate this still scales, but ramps more slowly)"
                } else {
                    ""
                };
                write!(
                    f,
                    "CPU frequency governor is powersave: clocks may be low or ramp slowly{note}; \
                     for steady figures select the performance governor (cpupower frequency-set \
                     -g performance)"
                )
            }
            EnvWarning::CgroupCpuQuota { quota_cpus, cpus } => write!(
                f,
                "cgroup CPU quota is {quota_cpus:.2} CPUs, below the {cpus} CPUs visible: threads \
                 will be throttled in bursts; run without the quota (or raise cpu.max / \
                 cpu.cfs_quota_us), or read multi-threaded figures as limited by it"
            ),
            EnvWarning::NarrowAffinity { allowed, online } => write!(
                f,
                "affinity mask allows {allowed} of {online} online CPUs: cross-CPU and scaling \
                 figures use only those; widen it (taskset, the container's cpuset) to measure \
                 the whole machine"
            ),
            EnvWarning::Virtualized { hypervisor } => {
                let h = hypervisor
                    .as_deref()
                    .map(|h| format!(" ({h})"))
                    .unwrap_or_default();
                write!(
                    f,
                    "virtualised{h} (informational): IPIs, timers and idle exits cost more than on bare metal, and vCPUs may be preempted by the host"
                )
            }
            EnvWarning::SlowClocksource { name } => write!(
                f,
                "clocksource is {name}, not tsc: clock reads may be slower or go through a system \
                 call (clock_read_cost_ns shows the cost); if tsc is among the available \
                 clocksources, select it (clocksource=tsc on the kernel command line)"
            ),
            EnvWarning::HostSteal { pct, ms } => write!(
                f,
                "the hypervisor took {ms:.0} ms from this machine's CPUs during the run ({pct:.1}% \
                 of their time, steal in /proc/stat): trials that overlapped it were set aside \
                 (each experiment's `host` says how many), but figures taken around it may still \
                 be slower; run again when the host is quieter, or on dedicated cores"
            ),
            EnvWarning::VcpusMoved { low_ns, high_ns } => write!(
                f,
                "the host moved the two vCPUs during the run: a cache line's round trip between \
                 them read {low_ns:.0} to {high_ns:.0} ns, and figures on two CPUs follow it (each \
                 experiment's reading is in its attempts; compare reads their changes as \
                 unstable)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(w: &[EnvWarning]) -> Vec<&'static str> {
        w.iter().map(EnvWarning::kind).collect()
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
        let w = env_warnings(&env);
        assert_eq!(
            kinds(&w),
            [
                "debug_build",
                "busy_machine",
                "competing_tasks_start",
                "powersave_governor",
                "cgroup_cpu_quota",
                "narrow_affinity",
                "virtualized",
                "slow_clocksource"
            ],
            "{w:#?}"
        );
        assert!(w[5]
            .to_string()
            .starts_with("affinity mask allows 2 of 4 online CPUs: "));
        // A high load average with nothing else runnable at the start: the load is past.
        let past = Environment {
            logical_cpus: Some(2),
            allowed_cpus: vec![0, 1],
            loadavg_start: Some([24.19, 9.0, 4.0]),
            runnable_tasks_start: Some(0),
            ..Environment::default()
        };
        let w = env_warnings(&past);
        let busy = w
            .iter()
            .find(|w| w.kind() == "busy_machine")
            .expect("busy_machine");
        assert!(
            busy.to_string()
                .contains("no other task was runnable as the run began"),
            "{busy}"
        );
        assert!(!kinds(&w).contains(&"competing_tasks_start"), "{w:#?}");
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
        assert!(
            env_warnings(&clean).is_empty(),
            "{:#?}",
            env_warnings(&clean)
        );
    }

    #[test]
    fn drift_is_one_warning_naming_each_reference_that_moved() {
        let env = Environment {
            build_profile: "release".to_string(),
            reference_loop_ns_start: Some(100.0),
            reference_loop_ns_end: Some(104.0),
            reference_wide_ns_start: Some(100.0),
            reference_wide_ns_end: Some(120.0),
            reference_syscall_ns_start: Some(100.0),
            reference_syscall_ns_end: Some(90.0),
            ..Environment::default()
        };
        let w = env_warnings(&env);
        // One warning names every reference that moved more than the threshold, and only those.
        assert_eq!(kinds(&w), ["drift"]);
        let text = w[0].to_string();
        assert!(
            text.contains(
                "a fixed throughput-bound loop took 100.0 ns at start, 120.0 ns at end (+20%)"
            ),
            "{text}"
        );
        assert!(
            text.contains(", a getppid system call 100.0 ns and 90.00 ns (-10%)"),
            "{text}"
        );
        assert!(!text.contains("register-only"), "{text}");
    }

    #[test]
    fn kinds_are_listed_distinct_and_snake_case() {
        let every = [
            EnvWarning::Drift {
                moves: vec![DriftMove {
                    reference: Reference::Syscall,
                    start_ns: 1.0,
                    end_ns: 2.0,
                }],
            },
            EnvWarning::DebugBuild,
            EnvWarning::RaceHooks,
            EnvWarning::BusyMachine {
                load_1min: 1.0,
                cpus: 1,
                idle_at_start: false,
            },
            EnvWarning::CompetingTasksAtStart { tasks: 1 },
            EnvWarning::CompetingTasksAtEnd { tasks: 1 },
            EnvWarning::PowersaveGovernor { intel_pstate: true },
            EnvWarning::CgroupCpuQuota {
                quota_cpus: 0.5,
                cpus: 1,
            },
            EnvWarning::NarrowAffinity {
                allowed: 1,
                online: 2,
            },
            EnvWarning::Virtualized { hypervisor: None },
            EnvWarning::SlowClocksource {
                name: "hpet".into(),
            },
            EnvWarning::HostSteal { pct: 1.0, ms: 20.0 },
            EnvWarning::VcpusMoved {
                low_ns: 45.0,
                high_ns: 370.0,
            },
        ];
        assert_eq!(kinds(&every), EnvWarning::KINDS);
        for k in EnvWarning::KINDS {
            assert!(
                k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{k}"
            );
        }
        for w in &every {
            assert!(!w.to_string().is_empty() && !w.to_string().contains('\n'));
        }
    }

    #[test]
    fn every_kind_is_documented() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
        let text = std::fs::read_to_string(doc).expect("docs/results-schema.md exists");
        for k in EnvWarning::KINDS {
            assert!(
                text.contains(&format!("| `{k}` |")),
                "warning kind {k} is not documented in docs/results-schema.md"
            );
        }
    }

    #[test]
    fn a_pair_distance_that_moved_during_the_run_is_warned_about() {
        let at = |range: Option<[f64; 2]>| {
            let env = Environment {
                reference_pair_ns_range: range,
                ..Default::default()
            };
            kinds(&env_warnings(&env)).contains(&"vcpus_moved")
        };
        assert!(at(Some([45.0, 372.0])));
        assert!(!at(Some([44.0, 52.0])));
        assert!(!at(None));
        let w = EnvWarning::VcpusMoved {
            low_ns: 45.0,
            high_ns: 372.0,
        };
        assert!(w.to_string().contains("45 to 372 ns"));
    }

    #[test]
    fn a_build_with_uthread_race_hooks_is_warned_about() {
        let env = Environment {
            build_profile: "release+race-hooks".to_string(),
            ..Default::default()
        };
        let w = env_warnings(&env);
        assert!(kinds(&w).contains(&"race_hooks"), "{:?}", kinds(&w));
        assert!(!kinds(&w).contains(&"debug_build"));
    }

    #[test]
    fn stored_warnings_keep_kind_and_text() {
        let w = EnvWarning::DebugBuild;
        let stored = Warning::from(&w);
        assert_eq!(stored.kind, "debug_build");
        assert_eq!(stored.text, w.to_string());
    }
}
