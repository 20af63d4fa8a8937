//! Where the servers and the generator run, how much each mode measures, and the descriptor
//! limit raised for the run.

use std::time::Duration;

use crate::experiments::throttle::recommended_pool;
use crate::experiments::Mode;
use crate::measure::env::Environment;
use crate::measure::placement::{allowed_cpus, cpu_pair, physical_cores, Placement};
use crate::subjects::server::ServerConfig;

/// The client's CPU and the servers' CPUs.
#[derive(Debug, Clone)]
pub struct Cpus {
    /// The generator (and the study's client) when they have a CPU of their own.
    pub client: usize,
    /// Every server thread and process is pinned to these (all allowed CPUs but the client's).
    pub server: Vec<usize>,
    /// False on a single allowed CPU: client and server then share it.
    pub apart: bool,
    /// The server is on another host (`--target`).
    pub remote: Option<std::net::SocketAddr>,
}

impl Cpus {
    pub fn pick() -> Cpus {
        let allowed = allowed_cpus();
        match cpu_pair() {
            Some((_, client)) => Cpus {
                client,
                server: allowed.iter().copied().filter(|&c| c != client).collect(),
                apart: true,
                remote: None,
            },
            None => {
                let only = allowed.first().copied().unwrap_or(0);
                Cpus {
                    client: only,
                    server: vec![only],
                    apart: false,
                    remote: None,
                }
            }
        }
    }

    /// The study's client on the server's (first) CPU.
    pub fn same_cpu(&self) -> usize {
        self.server[0]
    }

    /// The placement of the client on `client` against the servers.
    pub fn placement(&self, client: usize) -> String {
        if let Some(addr) = self.remote {
            return format!("client_cpu({client}),server({addr})");
        }
        match self.server.as_slice() {
            [s] if *s == client => Placement::SameCpu(client).to_string(),
            [s] => Placement::CrossCpu(*s, client).to_string(),
            many => format!(
                "server_cpus({}),client_cpu({client})",
                many.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// How much each pattern measures in a mode.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// Payload sizes of the study's pattern for thread_per_client and fork_per_client (Figs.
    /// 4 and 5); the other designs run the first of them.
    pub study_sizes: &'static [u32],
    /// Every design at every size (full), or only the study's two (quick, tiny).
    pub study_all_sizes: bool,
    /// Requests per long connection (the study's 50).
    pub long_requests: u32,
    /// Long connections timed for the first-vs-rest figure.
    pub first_rest_conns: usize,
    pub trials: usize,
    pub windows: usize,
    /// Closed-loop peak and the generator's ceiling.
    pub peak_conns: usize,
    pub peak_warm: Duration,
    pub peak_measure: Duration,
    /// The open-loop point: many long connections at a fixed offered rate.
    pub rate_conns: usize,
    pub rate: f64,
    pub rate_warm: Duration,
    pub rate_measure: Duration,
    /// Blocking work: requests that sleep `block_us` each, at `block_rate`.
    pub block_conns: usize,
    pub block_rate: f64,
    pub block_us: u32,
    pub block_warm: Duration,
    pub block_measure: Duration,
    /// Spinning work (full only): `spin_us` of CPU per request at `spin_rate`.
    pub spin: Option<(u32, f64)>,
    /// Rate sweep to the capacity at the latency target (full only): rates as fractions of the
    /// generator's ceiling, each step this long.
    pub sweep: Option<(&'static [f64], Duration)>,
    /// Overload step above capacity (full only): factor and length.
    pub overload: Option<(f64, Duration)>,
    /// Connection scale (full only): connections held at 1 request per second each.
    pub scale: Option<(usize, Duration)>,
}

impl Sizes {
    pub fn for_mode(mode: Mode) -> Sizes {
        let ms = Duration::from_millis;
        match mode {
            // Structure only: every pattern of --full, each a few milliseconds.
            Mode::Tiny => Sizes {
                study_sizes: &[1024, 16 << 10],
                study_all_sizes: false,
                // 5 requests stand for the study's 50.
                long_requests: 5,
                first_rest_conns: 2,
                trials: 1,
                windows: 7,
                peak_conns: 8,
                peak_warm: ms(4),
                peak_measure: ms(14),
                rate_conns: 16,
                rate: 2000.0,
                rate_warm: ms(4),
                rate_measure: ms(21),
                block_conns: 8,
                block_rate: 400.0,
                block_us: 1000,
                block_warm: ms(4),
                block_measure: ms(21),
                spin: Some((100, 400.0)),
                sweep: Some((&[0.01], ms(14))),
                overload: Some((1.5, ms(14))),
                scale: Some((32, ms(14))),
            },
            Mode::Quick => Sizes {
                study_sizes: &[1024, 4 << 10, 16 << 10, 64 << 10],
                study_all_sizes: false,
                long_requests: 50,
                first_rest_conns: 15,
                trials: 1,
                windows: 7,
                peak_conns: 64,
                peak_warm: ms(40),
                peak_measure: ms(140),
                rate_conns: 1000,
                rate: 30_000.0,
                rate_warm: ms(100),
                rate_measure: ms(420),
                block_conns: 64,
                block_rate: 1000.0,
                block_us: 1000,
                block_warm: ms(40),
                block_measure: ms(245),
                spin: None,
                sweep: None,
                overload: None,
                scale: None,
            },
            Mode::Full => Sizes {
                study_sizes: &[64, 1024, 4 << 10, 16 << 10, 64 << 10],
                study_all_sizes: true,
                long_requests: 50,
                first_rest_conns: 25,
                trials: 3,
                windows: 7,
                peak_conns: 64,
                peak_warm: ms(200),
                peak_measure: ms(700),
                rate_conns: 1000,
                rate: 30_000.0,
                rate_warm: ms(300),
                rate_measure: ms(1400),
                block_conns: 64,
                block_rate: 1000.0,
                block_us: 1000,
                block_warm: ms(200),
                block_measure: ms(700),
                spin: Some((200, 2500.0)),
                sweep: Some((&[0.05, 0.1, 0.2, 0.3, 0.4, 0.5], ms(1000))),
                overload: Some((1.5, ms(2000))),
                scale: Some((10_000, ms(2000))),
            },
        }
    }
}

/// Latency target of the capacity sweep: p99 within 1 ms on loopback.
pub const SLO_P99_NS: u64 = 1_000_000;

/// The servers' configuration for this run: pinned to the server CPUs, the pool sized by the
/// throttle experiment's advice (physical cores among the allowed CPUs, cgroup-capped).
pub fn server_config(cpus: &Cpus, env: &Environment, nofile: u64) -> ServerConfig {
    let mut cfg = ServerConfig::loopback();
    cfg.cpus = cpus.server.clone();
    let allowed = allowed_cpus();
    let physical = physical_cores(&allowed).unwrap_or(allowed.len().max(1));
    cfg.pool_workers = recommended_pool(physical, env.cgroup_cpu_limit);
    // What one process can hold, less a margin: in the lab the generator's ends share the
    // limit, and a server that runs out answers BUSY with its reserve descriptor.
    cfg.max_connections = nofile.saturating_sub(256).clamp(64, 1 << 20) as usize;
    cfg
}

/// RLIMIT_NOFILE raised to its hard limit for the run (as Go does at start), restored after.
pub struct NofileRaised {
    before: libc::rlimit,
    pub soft: u64,
    pub hard: u64,
}

impl NofileRaised {
    pub fn raise() -> NofileRaised {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out pointer.
        unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut before);
        }
        let raised = libc::rlimit {
            rlim_cur: before.rlim_max,
            rlim_max: before.rlim_max,
        };
        // SAFETY: a valid rlimit; raising the soft limit to the hard one needs no privilege.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &raised);
        }
        let mut now = before;
        // SAFETY: valid out pointer.
        unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut now);
        }
        #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
        NofileRaised {
            before,
            soft: now.rlim_cur as u64,
            hard: now.rlim_max as u64,
        }
    }

    /// Tries to raise the hard limit too, to hold `fds` (works with CAP_SYS_RESOURCE, up to
    /// fs.nr_open); true when the soft limit now covers them.
    pub fn make_room(&mut self, fds: u64) -> bool {
        if self.soft >= fds {
            return true;
        }
        #[allow(clippy::unnecessary_cast)]
        let want = libc::rlimit {
            rlim_cur: fds as libc::rlim_t,
            rlim_max: (fds as libc::rlim_t).max(self.hard as libc::rlim_t),
        };
        // SAFETY: a valid rlimit; refused without privilege, which the caller reports.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) } == 0 {
            self.soft = fds;
            self.hard = self.hard.max(fds);
            return true;
        }
        false
    }
}

impl Drop for NofileRaised {
    fn drop(&mut self) {
        // Programs the lab starts later (select()-based ones break above 1024) get the
        // original limits back. Lowering the hard limit is not undone if it was raised.
        let restore = libc::rlimit {
            rlim_cur: self.before.rlim_cur,
            rlim_max: std::cmp::max(self.before.rlim_max, self.hard as libc::rlim_t),
        };
        // SAFETY: a valid rlimit.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &restore);
        }
    }
}

/// Gives freed heap back to the system, so that memory a server takes next is counted as
/// grown rather than served from pages already resident (glibc only; elsewhere a no-op).
pub fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
