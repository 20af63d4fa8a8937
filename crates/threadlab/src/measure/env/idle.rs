//! What an idle CPU does: its cpuidle states (how deep it may sleep, and what waking from each
//! costs), the power-management QoS limits that forbid the deep ones, and the residency
//! counters that say how long each CPU spent halted or polling.
//!
//! A wake-up of a thread on an idle CPU pays that CPU's exit from its idle state; on a virtual
//! machine a halted vCPU costs an exit to the host and an interrupt injected back. A state's
//! exit latency above a PM QoS limit is never chosen, so holding the limit at 0 keeps idle CPUs
//! polling (fast wake-ups, a whole CPU burned per idle CPU).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{read_trim, UNKNOWN};

/// One cpuidle state of a CPU, as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleState {
    /// `stateN`'s index: 0 is the polling state where there is one.
    pub index: usize,
    pub name: String,
    /// Worst-case time to leave the state, µs (`latency`).
    pub exit_latency_us: u64,
    /// Idle time below which entering the state does not pay off, µs (`residency`).
    pub target_residency_us: u64,
    /// Disabled by the user (`disable` = 1) or by the driver.
    pub disabled: bool,
}

impl IdleState {
    /// A state that spins instead of halting (the cpuidle core names it "POLL").
    pub fn polls(&self) -> bool {
        self.name.eq_ignore_ascii_case("POLL")
    }
}

fn cpuidle_dir(root: &Path, cpu: usize) -> PathBuf {
    root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpuidle"))
}

/// The cpuidle states of `cpu` under the file-system `root` ("/" on a live machine), in order;
/// empty when the CPU has no cpuidle (no driver, or sysfs hidden).
pub fn idle_states_at(root: &Path, cpu: usize) -> Vec<IdleState> {
    let dir = cpuidle_dir(root, cpu);
    let mut states = Vec::new();
    for index in 0.. {
        let s = dir.join(format!("state{index}"));
        let Some(name) = read_trim(s.join("name")) else {
            break;
        };
        let num = |f: &str| read_trim(s.join(f)).and_then(|v| v.parse::<u64>().ok());
        states.push(IdleState {
            index,
            name,
            exit_latency_us: num("latency").unwrap_or(0),
            target_residency_us: num("residency").unwrap_or(0),
            disabled: num("disable").is_some_and(|d| d != 0),
        });
    }
    states
}

/// The cpuidle states of `cpu` on this machine.
pub fn idle_states(cpu: usize) -> Vec<IdleState> {
    idle_states_at(Path::new("/"), cpu)
}

/// Time the CPUs spent in their idle states so far, µs, summed over the CPUs read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct IdleResidency {
    /// In states that halt the CPU (every state but the polling one).
    pub halted_us: u64,
    /// In the polling state: idle for the scheduler, busy for the CPU (and, on a VM, for the
    /// host core under it).
    pub polling_us: u64,
}

/// The residency counters of `cpus` (each state's `time`), or None when a CPU has no cpuidle
/// states to read. A CPU idle at the moment of reading has not yet counted its current stay,
/// so a reading lags by at most one idle period per CPU.
pub fn idle_residency(cpus: &[usize]) -> Option<IdleResidency> {
    let root = Path::new("/");
    let mut r = IdleResidency::default();
    for &cpu in cpus {
        let dir = cpuidle_dir(root, cpu);
        let mut any = false;
        for index in 0.. {
            let s = dir.join(format!("state{index}"));
            let Some(time) = read_trim(s.join("time")).and_then(|v| v.parse::<u64>().ok()) else {
                break;
            };
            any = true;
            let polls = read_trim(s.join("name")).is_some_and(|n| n.eq_ignore_ascii_case("POLL"));
            if polls {
                r.polling_us += time;
            } else {
                r.halted_us += time;
            }
        }
        if !any {
            return None;
        }
    }
    Some(r)
}

/// The per-CPU resume-latency limits (`power/pm_qos_resume_latency_us`), summarised as
/// "VALUE on CPUS" groups: "0" means no limit, "n/a" means no idle state at all may be used.
pub fn resume_latency_summary(cpus: &[usize]) -> Option<String> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for &cpu in cpus {
        let Some(v) = read_trim(format!(
            "/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"
        )) else {
            continue;
        };
        match groups.iter_mut().find(|(g, _)| *g == v) {
            Some((_, list)) => list.push(cpu),
            None => groups.push((v, vec![cpu])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    Some(
        groups
            .iter()
            .map(|(v, list)| format!("{v} on CPUs {}", super::cpu_list_text(list)))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// The value of the global CPU-latency QoS (`/dev/cpu_dma_latency`), µs: 2,000,000,000 when
/// no program holds a limit. Readable by root only on most systems: Err says why not.
pub fn cpu_dma_latency_us() -> Result<i64, String> {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/cpu_dma_latency")
        .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b)
        .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
    Ok(i64::from(i32::from_ne_bytes(b)))
}

/// The idle states in one line: "POLL (0 µs), haltpoll idle (exit 1 µs, residency 1 µs)".
pub fn describe_states(states: &[IdleState]) -> String {
    if states.is_empty() {
        return UNKNOWN.to_string();
    }
    states
        .iter()
        .map(|s| {
            let mut t = if s.polls() {
                format!("{} (polls)", s.name)
            } else {
                format!(
                    "{} (exit {} µs, residency {} µs)",
                    s.name, s.exit_latency_us, s.target_residency_us
                )
            };
            if s.disabled {
                t.push_str(" disabled");
            }
            t
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_cpuidle(root: &Path, cpu: usize, states: &[(&str, u64, u64, u64)]) {
        let dir = cpuidle_dir(root, cpu);
        for (i, (name, latency, residency, time)) in states.iter().enumerate() {
            let s = dir.join(format!("state{i}"));
            std::fs::create_dir_all(&s).unwrap();
            for (f, v) in [
                ("name", name.to_string()),
                ("latency", latency.to_string()),
                ("residency", residency.to_string()),
                ("time", time.to_string()),
                ("disable", "0".into()),
            ] {
                std::fs::write(s.join(f), format!("{v}\n")).unwrap();
            }
        }
    }

    #[test]
    fn states_of_a_kvm_guest_with_haltpoll() {
        let root = std::env::temp_dir().join(format!("threadlab-idle-{}", std::process::id()));
        // As read on a 2-vCPU KVM guest with the haltpoll driver.
        fake_cpuidle(
            &root,
            0,
            &[
                ("POLL", 0, 0, 7_827_482),
                ("haltpoll idle", 1, 1, 457_846_983),
            ],
        );
        let states = idle_states_at(&root, 0);
        assert_eq!(states.len(), 2);
        assert!(states[0].polls() && !states[1].polls());
        assert_eq!(states[1].exit_latency_us, 1);
        assert_eq!(
            describe_states(&states),
            "POLL (polls), haltpoll idle (exit 1 µs, residency 1 µs)"
        );
        assert!(idle_states_at(&root, 1).is_empty());
        assert_eq!(describe_states(&[]), UNKNOWN);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn residency_on_this_machine_is_consistent() {
        // Where this machine has cpuidle, the counters only grow.
        let cpus = crate::measure::placement::allowed_cpus();
        if let Some(a) = idle_residency(&cpus) {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let b = idle_residency(&cpus).unwrap();
            assert!(b.halted_us >= a.halted_us && b.polling_us >= a.polling_us);
        }
    }
}
