//! The settings doctor tries: for each, the figures it moves, the setup with it off and on,
//! what must be held while it is on, and how to apply it (as a program, and for the machine).
//! A setting that cannot be tried here says why.

use std::time::Duration;

use super::figures::{busy_poll_refusal, Competitor, Measure, Setup};
use super::machine::Machine;
use crate::measure::env::{llc_groups, numa_nodes, Environment};
use crate::measure::placement::{smt_siblings, Placement};

/// What must be held for the length of an "on" phase, besides the threads' own setup.
#[derive(Debug, Clone, PartialEq)]
pub enum Hold {
    Nothing,
    /// /dev/cpu_dma_latency open with 0 written: a per-file-descriptor PM QoS request.
    PmQosZero,
    /// Machine-wide files (path as on a live machine, value while on).
    Files(Vec<(String, String)>),
}

/// What names a setting and how to apply it, whether or not it can be tried here.
#[derive(Debug, Clone)]
pub struct About {
    pub id: &'static str,
    pub title: &'static str,
    /// How to apply it as a program (the call).
    pub program: String,
    /// How to apply it for the machine (sysctl, tuned profile, kernel parameter).
    pub machine: String,
}

/// A setting to measure A/B.
#[derive(Debug, Clone)]
pub struct Knob {
    pub about: About,
    /// The two conditions in a few words.
    pub off_label: String,
    pub on_label: String,
    /// What the change is scoped to while doctor measures it, i.e. what ends it.
    pub scope: &'static str,
    pub measures: Vec<Measure>,
    pub off: Setup,
    pub on: Setup,
    pub hold: Hold,
    /// Phase length for this knob when it differs from the run's (the RT-throttling probe
    /// needs a whole second to meet the throttle).
    pub phase: Option<Duration>,
}

/// A setting that cannot be tried here.
#[derive(Debug, Clone)]
pub struct NotHere {
    pub about: About,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub enum Planned {
    Try(Box<Knob>),
    NotHere(NotHere),
}

impl Planned {
    pub fn id(&self) -> &'static str {
        match self {
            Planned::Try(k) => k.about.id,
            Planned::NotHere(n) => n.about.id,
        }
    }
}

/// What the catalogue needs to know about this machine and run.
pub struct Here<'a> {
    pub env: &'a Environment,
    pub cpus: &'a [usize],
    /// The two CPUs the cross-CPU figures use (the waker's, the woken thread's).
    pub a: usize,
    pub b: usize,
    /// Machine-wide settings: Ok when the run may change them, Err(why not) otherwise.
    pub machine: std::result::Result<&'a Machine, String>,
}

const HALTPOLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
/// The kernel's default haltpoll window, ns.
const HALTPOLL_DEFAULT_NS: &str = "200000";
/// Spin budget of the spin-then-park knob.
pub const SPIN: Duration = Duration::from_micros(50);
/// SO_BUSY_POLL of the busy-poll knob, µs.
pub const BUSY_POLL_US: u32 = 50;

/// Every setting, in the order they are measured and reported.
pub fn catalogue(here: &Here) -> Vec<Planned> {
    let base = Setup::base(here.a, here.b);
    let cross = [Measure::Wake, Measure::Handoff, Measure::Echo];
    let contended = [Measure::TimerContended, Measure::Probe];
    vec![
        idle_latency(&base),
        haltpoll_window(here, &base),
        cpu_resume_latency(here, &base),
        placement_knob(here, &base, "same_cpu", Ok(here.a), &cross),
        placement_knob(here, &base, "other_core", other_core(here), &cross),
        placement_knob(here, &base, "smt_sibling", smt_sibling(here), &cross),
        placement_knob(here, &base, "other_llc", other_llc(here), &cross),
        placement_knob(here, &base, "other_node", other_node(here), &cross),
        sched_fifo(here, &base, &contended),
        nice_background(&base, &contended),
        sched_idle_background(&base, &contended),
        timer_slack(here, &base),
        spin_then_park(&base),
        busy_poll(&base),
        thp(here, &base),
        rt_throttling(here, &base),
        cpufreq(here),
        boot_only(
            "nohz_full",
            "Tick-free, isolated CPUs (nohz_full, isolcpus)",
            format!(
                "boot parameters (nohz_full=, isolcpus=, rcu_nocbs=): they cannot change while \
                 the machine runs; now isolated: {}, nohz_full: {}",
                here.env
                    .isolated_cpus
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("none"),
                here.env
                    .nohz_full_cpus
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("none")
            ),
            "kernel parameters nohz_full=2-N isolcpus=managed_irq,domain,2-N rcu_nocbs=2-N, \
             then pin the latency-critical threads there (tuned profile cpu-partitioning)",
        ),
        boot_only(
            "mitigations",
            "CPU vulnerability mitigations off",
            "a boot parameter (mitigations=off): it cannot change while the machine runs, and \
             it trades security for the kernel entry's cost (see the syscall reference)"
                .into(),
            "kernel parameter mitigations=off (only on machines that run trusted code alone)",
        ),
        Planned::NotHere(NotHere {
            about: About {
                id: "autogroup",
                title: "Scheduler autogroup",
                program: "setsid() puts a process in a group of its own".into(),
                machine: "sysctl kernel.sched_autogroup_enabled=0 or 1".into(),
            },
            reason: format!(
                "it only decides how CPU time is split between sessions (terminals), and every \
                 thread doctor measures is in one session, so no figure here can move; it is {} \
                 here",
                match here.env.sched_autogroup_enabled {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "unknown",
                }
            ),
        }),
    ]
}

fn nice_background(base: &Setup, contended: &[Measure]) -> Planned {
    Planned::Try(Box::new(Knob {
        about: About {
            id: "nice_background",
            title: "The CPU-bound competitor at nice 19",
            program: "setpriority(PRIO_PROCESS, tid, 19) on background threads (Linux keeps nice \
                      per thread), or nice -n 19 for a background program"
                .into(),
            machine: "systemd CPUWeight= / Nice= for background services; kernel.sched_autogroup \
                      decides whether nice acts across terminal sessions"
                .into(),
        },
        off_label: "competitor at nice 0".into(),
        on_label: "competitor at nice 19".into(),
        scope: "the competitor thread, which ends with the phase",
        measures: contended.to_vec(),
        off: base.clone(),
        on: {
            let mut s = base.clone();
            s.competitor = Competitor::Fair { nice: 19 };
            s
        },
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn sched_idle_background(base: &Setup, contended: &[Measure]) -> Planned {
    Planned::Try(Box::new(Knob {
        about: About {
            id: "sched_idle_background",
            title: "The CPU-bound competitor in SCHED_IDLE",
            program: "sched_setscheduler(tid, SCHED_IDLE, 0) (pthread_setschedparam) on \
                      background threads: no privilege needed to lower a thread's class"
                .into(),
            machine: "chrt --idle 0 PROGRAM, or systemd CPUSchedulingPolicy=idle for a \
                      background service"
                .into(),
        },
        off_label: "competitor SCHED_OTHER nice 0".into(),
        on_label: "competitor SCHED_IDLE".into(),
        scope: "the competitor thread, which ends with the phase",
        measures: contended.to_vec(),
        off: base.clone(),
        on: {
            let mut s = base.clone();
            s.competitor = Competitor::Idle;
            s
        },
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn timer_slack(here: &Here, base: &Setup) -> Planned {
    Planned::Try(Box::new(Knob {
        about: About {
            id: "timer_slack",
            title: "Timer slack of the sleeping thread at 1 ns",
            program: "prctl(PR_SET_TIMERSLACK, 1) in the thread that sleeps (0 would restore \
                      the default); real-time threads have no slack"
                .into(),
            machine: "per process: /proc/PID/timerslack_ns (root, or the process's owner with \
                      CAP_SYS_NICE); systemd TimerSlackNSec="
                .into(),
        },
        off_label: format!(
            "default slack ({} ns)",
            here.env
                .timer_slack_ns
                .map_or("unknown".to_string(), |n| n.to_string())
        ),
        on_label: "slack 1 ns".into(),
        scope: "the measuring thread, which ends with the phase",
        measures: vec![Measure::Timer],
        off: base.clone(),
        on: {
            let mut s = base.clone();
            s.timer_slack_ns = Some(1);
            s
        },
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn spin_then_park(base: &Setup) -> Planned {
    Planned::Try(Box::new(Knob {
        about: About {
            id: "spin_then_park",
            title: "Spin 50 µs before parking in FUTEX_WAIT",
            program: "wait for the hand-off word in a loop (with a pause instruction) for up to \
                      50 µs before FUTEX_WAIT; the waker calls FUTEX_WAKE only if the waiter \
                      announced it parked (parking_lot and glibc's adaptive mutex spin likewise)"
                .into(),
            machine: "none: a program's own choice".into(),
        },
        off_label: "park at once".into(),
        on_label: "spin up to 50 µs, then park".into(),
        scope: "the threads of the phase",
        measures: vec![Measure::Wake, Measure::Handoff],
        off: base.clone(),
        on: {
            let mut s = base.clone();
            s.spin_before_park = SPIN;
            s
        },
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn boot_only(id: &'static str, title: &'static str, reason: String, machine: &str) -> Planned {
    Planned::NotHere(NotHere {
        about: About {
            id,
            title,
            program: "none".into(),
            machine: machine.into(),
        },
        reason,
    })
}

/// Why a machine-wide file cannot be changed by this run, if it cannot.
fn machine_refusal(here: &Here, path: &str) -> Option<String> {
    match &here.machine {
        Err(why) => Some(why.clone()),
        Ok(m) => match m.read(path) {
            Err(e) => Some(format!("{e} (not on this kernel)")),
            Ok(_) => m.unwritable(path),
        },
    }
}

fn idle_latency(base: &Setup) -> Planned {
    let program = "open /dev/cpu_dma_latency, write the 32-bit value 0 and keep the descriptor \
                   open while latency matters (the limit lasts as long as it, as under \
                   cyclictest)";
    let machine = "tuned profile latency-performance or network-latency (they hold the limit, \
                   force_latency); kernel parameter idle=poll for a machine that never idles; \
                   per CPU: write n/a to /sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us";
    let about = About {
        id: "idle_latency",
        title: "Idle-state latency limit held at 0 (PM QoS)",
        program: program.into(),
        machine: machine.into(),
    };
    match std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
    {
        Err(e) => Planned::NotHere(NotHere {
            about,
            reason: format!(
                "/dev/cpu_dma_latency cannot be opened for writing: {e} (root only on most \
                 systems; a program that needs it runs as root or is given the device)"
            ),
        }),
        Ok(_) => Planned::Try(Box::new(Knob {
            about,
            off_label: "no limit held".into(),
            on_label: "/dev/cpu_dma_latency held at 0".into(),
            scope: "a file descriptor: the limit ends when it closes, even if the process is \
                    killed",
            measures: vec![
                Measure::Wake,
                Measure::Handoff,
                Measure::Timer,
                Measure::Echo,
            ],
            off: base.clone(),
            on: base.clone(),
            hold: Hold::PmQosZero,
            phase: None,
        })),
    }
}

fn haltpoll_window(here: &Here, base: &Setup) -> Planned {
    let title = "Haltpoll's poll window (guest_halt_poll_ns = 200000)";
    let program = "none: a setting of the guest kernel's idle governor".to_string();
    let machine = format!(
        "echo {HALTPOLL_DEFAULT_NS} > {HALTPOLL_NS} (the kernel's default; this machine boots \
         with {}), or remove haltpoll.guest_halt_poll_ns= from the kernel command line",
        here.env
            .boot_options_of_note
            .iter()
            .find(|o| o.starts_with("haltpoll."))
            .map_or("its own value".to_string(), |o| o.clone())
    );
    let about = About {
        id: "haltpoll_window",
        title,
        program,
        machine,
    };
    let not_here = |reason: String| {
        Planned::NotHere(NotHere {
            about: about.clone(),
            reason,
        })
    };
    if here.env.cpuidle_governor.as_deref() != Some("haltpoll") {
        return not_here(format!(
            "the haltpoll idle governor is not in use here (cpuidle governor {}): there is no \
             guest poll window to set",
            here.env.cpuidle_governor.as_deref().unwrap_or("unknown")
        ));
    }
    if let Some(why) = machine_refusal(here, HALTPOLL_NS) {
        return not_here(why);
    }
    let current = here
        .machine
        .as_ref()
        .ok()
        .and_then(|m| m.read(HALTPOLL_NS).ok())
        .unwrap_or_default();
    if current != "0" {
        return not_here(format!(
            "guest_halt_poll_ns is {current} already: idle vCPUs poll up to that long before \
             they halt"
        ));
    }
    Planned::Try(Box::new(Knob {
        about,
        off_label: "guest_halt_poll_ns = 0".into(),
        on_label: format!("guest_halt_poll_ns = {HALTPOLL_DEFAULT_NS}"),
        scope: "machine-wide: written for each \"on\" phase, written back after it and checked",
        measures: vec![Measure::Wake, Measure::Handoff, Measure::Echo],
        off: base.clone(),
        on: base.clone(),
        hold: Hold::Files(vec![(HALTPOLL_NS.into(), HALTPOLL_DEFAULT_NS.into())]),
        phase: None,
    }))
}

fn cpu_resume_latency(here: &Here, base: &Setup) -> Planned {
    let path = format!(
        "/sys/devices/system/cpu/cpu{}/power/pm_qos_resume_latency_us",
        here.b
    );
    let title = "Idle-state limit on the woken thread's CPU only (per-CPU PM QoS)";
    let program = "none per thread: a per-CPU limit is root's".to_string();
    let machine = format!(
        "echo n/a > {path} for the CPUs that run the threads to be woken (0 restores 'no \
         limit'); pin those threads there"
    );
    let refused = machine_refusal(here, &path).or_else(|| {
        let now = here.machine.as_ref().ok()?.read(&path).ok()?;
        (now != "0").then(|| format!("{path} holds a limit already ({now})"))
    });
    let about = About {
        id: "cpu_resume_latency",
        title,
        program,
        machine,
    };
    if let Some(reason) = refused {
        return Planned::NotHere(NotHere { about, reason });
    }
    Planned::Try(Box::new(Knob {
        about,
        off_label: "no limit".into(),
        on_label: format!("CPU {} may not leave its polling state", here.b),
        scope: "machine-wide: written for each \"on\" phase, written back after it and checked",
        measures: vec![Measure::Wake, Measure::Handoff],
        off: base.clone(),
        on: base.clone(),
        hold: Hold::Files(vec![(path.clone(), "n/a".into())]),
        phase: None,
    }))
}

/// A CPU on another core than `a` that shares its last-level cache.
fn other_core(here: &Here) -> Result<usize, String> {
    let groups = llc_groups(here.cpus).ok_or("sysfs does not describe the caches here")?;
    let mine = groups
        .iter()
        .find(|g| g.contains(&here.a))
        .cloned()
        .unwrap_or_default();
    let siblings = smt_siblings(here.a);
    mine.into_iter()
        .find(|c| !siblings.contains(c))
        .ok_or_else(|| format!("no other core shares CPU {}'s last-level cache", here.a))
}

fn smt_sibling(here: &Here) -> Result<usize, String> {
    smt_siblings(here.a)
        .into_iter()
        .find(|c| *c != here.a && here.cpus.contains(c))
        .ok_or_else(|| {
            format!(
                "CPU {} has no SMT sibling this process may use (no SMT here)",
                here.a
            )
        })
}

fn other_llc(here: &Here) -> Result<usize, String> {
    let groups = llc_groups(here.cpus).ok_or("sysfs does not describe the caches here")?;
    groups
        .iter()
        .find(|g| !g.contains(&here.a))
        .and_then(|g| g.first().copied())
        .ok_or_else(|| "one last-level cache serves every CPU this process may use".into())
}

fn placement_knob(
    here: &Here,
    base: &Setup,
    id: &'static str,
    partner: Result<usize, String>,
    measures: &[Measure],
) -> Planned {
    let title = match id {
        "same_cpu" => "Both threads on one CPU",
        "other_core" => "Two cores sharing a last-level cache",
        "smt_sibling" => "Two SMT siblings of one core",
        "other_llc" => "Two CPUs under different last-level caches",
        _ => "Two CPUs on different NUMA nodes",
    };
    let program = "sched_setaffinity / pthread_setaffinity_np on both threads";
    let machine = if id == "other_node" {
        "numactl --cpunodebind=N --membind=N PROGRAM keeps a program on one node"
    } else {
        "taskset -c LIST, systemd CPUAffinity=, or a cpuset cgroup"
    };
    let about = About {
        id,
        title,
        program: program.into(),
        machine: machine.into(),
    };
    let (on, label) = match partner {
        Ok(c) if id == "same_cpu" => (Placement::SameCpu(c), format!("both on CPU {c}")),
        Ok(c) => (
            Placement::CrossCpu(here.a, c),
            format!("on CPUs {} and {c}", here.a),
        ),
        Err(reason) => return Planned::NotHere(NotHere { about, reason }),
    };
    let mut off = base.clone();
    off.placement = Placement::Unpinned;
    let mut pinned = base.clone();
    pinned.placement = on;
    Planned::Try(Box::new(Knob {
        about,
        off_label: "unpinned (where the kernel puts them)".into(),
        on_label: label,
        scope: "the threads of the phase",
        measures: measures.to_vec(),
        off,
        on: pinned,
        hold: Hold::Nothing,
        phase: None,
    }))
}

/// A CPU on another NUMA node than `a`.
fn other_node(here: &Here) -> Result<usize, String> {
    let nodes = numa_nodes().ok_or("sysfs does not describe the NUMA nodes here")?;
    if nodes.len() < 2 {
        return Err("one NUMA node: every CPU reaches memory the same way".into());
    }
    let mine = nodes
        .iter()
        .find(|n| n.contains(&here.a))
        .cloned()
        .unwrap_or_default();
    here.cpus
        .iter()
        .copied()
        .find(|c| !mine.contains(c))
        .ok_or_else(|| format!("every CPU this process may use is on CPU {}'s node", here.a))
}

fn sched_fifo(here: &Here, base: &Setup, contended: &[Measure]) -> Planned {
    let program = "pthread_setschedparam(SCHED_FIFO, priority) on the latency-critical thread \
                   (needs CAP_SYS_NICE or RLIMIT_RTPRIO; a FIFO thread that never sleeps keeps \
                   its CPU from everything else)";
    let machine = "chrt -f 50 PROGRAM; limits.conf rtprio for the user; systemd \
                   CPUSchedulingPolicy=fifo";
    let about = About {
        id: "sched_fifo",
        title: "The measured thread at SCHED_FIFO",
        program: program.into(),
        machine: machine.into(),
    };
    if !here.env.rt_priority_permitted {
        return Planned::NotHere(NotHere {
            about,
            reason: here
                .env
                .rt_priority_reason
                .clone()
                .unwrap_or_else(|| "real-time priority is not permitted here".into()),
        });
    }
    let mut on = base.clone();
    on.fifo = true;
    Planned::Try(Box::new(Knob {
        about,
        off_label: "SCHED_OTHER, competitor at nice 0".into(),
        on_label: "SCHED_FIFO 50 (no timer slack), competitor at nice 0".into(),
        scope: "the measuring thread, which ends with the phase",
        measures: contended.to_vec(),
        off: base.clone(),
        on,
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn busy_poll(base: &Setup) -> Planned {
    let program = format!(
        "setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, {BUSY_POLL_US}) on both ends: a blocking read \
         spins on the device queue before it sleeps"
    );
    let machine =
        format!("sysctl net.core.busy_read={BUSY_POLL_US} net.core.busy_poll={BUSY_POLL_US}");
    let about = About {
        id: "busy_poll",
        title: "Socket busy polling (SO_BUSY_POLL)",
        program,
        machine,
    };
    if let Some(reason) = busy_poll_refusal(BUSY_POLL_US) {
        return Planned::NotHere(NotHere { about, reason });
    }
    let mut on = base.clone();
    on.busy_poll_us = Some(BUSY_POLL_US);
    Planned::Try(Box::new(Knob {
        about,
        off_label: "blocking reads sleep at once".into(),
        on_label: format!("SO_BUSY_POLL {BUSY_POLL_US} µs on both ends"),
        scope: "the phase's two sockets",
        measures: vec![Measure::Echo],
        off: base.clone(),
        on,
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn thp(here: &Here, base: &Setup) -> Planned {
    let program = "madvise(buf, len, MADV_HUGEPAGE) on buffers of many MiB (2 MiB aligned), \
                   before touching them";
    let machine = "echo always > /sys/kernel/mm/transparent_hugepage/enabled (or the kernel \
                   parameter transparent_hugepage=always); defrag decides whether a fault may \
                   stall to compact memory";
    let refusal = match here.env.transparent_hugepages.as_deref() {
        None => Some("this kernel has no transparent huge pages (no sysfs switch)".to_string()),
        Some("never") => Some(
            "transparent huge pages are off machine-wide (enabled = never): madvise cannot \
             turn them on; root can write madvise or always"
                .to_string(),
        ),
        Some(_) => None,
    };
    let about = About {
        id: "thp",
        title: "Transparent huge pages for a 64 MiB buffer",
        program: program.into(),
        machine: machine.into(),
    };
    if let Some(reason) = refusal {
        return Planned::NotHere(NotHere { about, reason });
    }
    let mut on = base.clone();
    on.huge_pages = true;
    Planned::Try(Box::new(Knob {
        about,
        off_label: "MADV_NOHUGEPAGE (4 KiB pages)".into(),
        on_label: "MADV_HUGEPAGE".into(),
        scope: "the phase's mapping",
        measures: vec![Measure::Buffer],
        off: base.clone(),
        on,
        hold: Hold::Nothing,
        phase: None,
    }))
}

fn rt_throttling(here: &Here, base: &Setup) -> Planned {
    let title = "Real-time throttling off, for a real-time spinner";
    let program = "none: a machine setting (a real-time thread that must never be interrupted \
                   sleeps or yields instead)";
    let machine = format!(
        "sysctl kernel.sched_rt_runtime_us=-1 (now {}): lets real-time threads starve \
         everything else on their CPUs; on recent kernels the fair server gives ordinary tasks \
         their 50 ms a second whatever this says (its budget is in debugfs: \
         /sys/kernel/debug/sched/fair_server/cpuN/runtime)",
        here.env
            .sched_rt_runtime_us
            .map_or("unknown".into(), |v| v.to_string())
    );
    let refused = if !here.env.rt_priority_permitted {
        Some(
            here.env
                .rt_priority_reason
                .clone()
                .unwrap_or_else(|| "real-time priority is not permitted here".into()),
        )
    } else if here.env.sched_rt_runtime_us == Some(-1) {
        Some("real-time throttling is off already (kernel.sched_rt_runtime_us = -1)".into())
    } else {
        machine_refusal(here, RT_RUNTIME)
    };
    let about = About {
        id: "rt_throttling",
        title,
        program: program.into(),
        machine,
    };
    if let Some(reason) = refused {
        return Planned::NotHere(NotHere { about, reason });
    }
    let mut s = base.clone();
    s.fifo = true;
    Planned::Try(Box::new(Knob {
        about,
        off_label: format!(
            "sched_rt_runtime_us = {}",
            here.env.sched_rt_runtime_us.unwrap_or_default()
        ),
        on_label: "sched_rt_runtime_us = -1".into(),
        scope: "machine-wide: written for each \"on\" phase, written back after it and checked",
        measures: vec![Measure::Probe],
        off: s.clone(),
        on: s,
        hold: Hold::Files(vec![(RT_RUNTIME.into(), "-1".into())]),
        // The throttle acts once per period (1 s): a phase must be longer than a period.
        phase: Some(Duration::from_millis(1100)),
    }))
}

fn cpufreq(here: &Here) -> Planned {
    let reason = match (&here.env.frequency_driver, &here.env.frequency_governor) {
        (None, _) => "no cpufreq driver here: the clock is not this kernel's to set (on a VM \
                      the host sets it)"
            .to_string(),
        (Some(d), Some(g)) if g == "performance" => {
            format!("the governor is performance already (driver {d})")
        }
        (Some(d), g) => format!(
            "doctor does not change the governor (driver {d}, governor {}): it moves every \
             figure of every program on the machine; compare two runs of `threadlab run` \
             with and without cpupower frequency-set -g performance instead",
            g.as_deref().unwrap_or("unknown")
        ),
    };
    Planned::NotHere(NotHere {
        about: About {
            id: "cpufreq_performance",
            title: "The performance frequency governor",
            program: "none".into(),
            machine: "cpupower frequency-set -g performance, or tuned profile latency-performance"
                .into(),
        },
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_lists_every_knob_once_in_the_documented_order() {
        let env = crate::measure::env::capture();
        let cpus = crate::measure::placement::allowed_cpus();
        let b = *cpus.last().unwrap();
        let planned = catalogue(&Here {
            env: &env,
            cpus: &cpus,
            a: cpus[0],
            b,
            machine: Err("not in this test".into()),
        });
        let ids: Vec<&str> = planned.iter().map(Planned::id).collect();
        assert_eq!(ids, crate::experiments::doctor::KNOBS);
        // Without machine access, every machine-wide knob says why it is not tried.
        for id in ["haltpoll_window", "cpu_resume_latency", "rt_throttling"] {
            let p = planned.iter().find(|p| p.id() == id).unwrap();
            assert!(
                matches!(p, Planned::NotHere(n) if !n.reason.is_empty()),
                "{id}"
            );
        }
    }
}
