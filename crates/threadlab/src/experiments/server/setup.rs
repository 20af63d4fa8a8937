//! Where the servers and the generator run, how much each mode measures, and the descriptor
//! limit raised for the run.

use std::time::Duration;

use crate::experiments::throttle::recommended_pool;
use crate::experiments::Mode;
use crate::measure::env::Environment;
use crate::measure::placement::{physical_cores, smt_siblings, Placement};
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
    /// Every CPU the process may use: the default placement's servers and generator may run
    /// on any of them.
    pub all: Vec<usize>,
}

impl Cpus {
    /// From the process's CPUs as the run found them (`Environment::allowed_cpus`): the client
    /// gets the first CPU that is not an SMT sibling of the first allowed one (or the second
    /// allowed one), the servers every other.
    pub fn pick(allowed: &[usize]) -> Cpus {
        let first = allowed.first().copied().unwrap_or(0);
        let siblings = smt_siblings(first);
        let second = allowed
            .iter()
            .skip(1)
            .find(|c| !siblings.contains(c))
            .or_else(|| allowed.get(1))
            .copied();
        match second {
            Some(client) => Cpus {
                client,
                server: allowed.iter().copied().filter(|&c| c != client).collect(),
                apart: true,
                remote: None,
                all: allowed.to_vec(),
            },
            None => Cpus {
                client: first,
                server: vec![first],
                apart: false,
                remote: None,
                all: vec![first],
            },
        }
    }

    /// Whether the default placement differs from the pinned one here: it needs two CPUs and
    /// servers on this host.
    pub fn can_unpin(&self) -> bool {
        self.apart && self.remote.is_none()
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
    /// 4 and 5); the other designs run 1 KiB only.
    pub study_sizes: &'static [u32],
    /// Requests per long connection (the study's 50).
    pub long_requests: u32,
    /// Long connections timed for the first-vs-rest figure.
    pub first_rest_conns: usize,
    /// Trials of the generator's patterns (every design visited once per trial, A B C, A B C
    /// ...), and the most taken when a design's headline figures are not yet known to
    /// `precision_pct` (the half-width of the 95% interval of the median of its windows).
    pub trials: usize,
    pub max_trials: usize,
    pub precision_pct: f64,
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
    /// The search for the capacity at the latency target (full only).
    pub capacity: Option<CapacitySearch>,
    /// Overload step above capacity (full only): factor and length.
    pub overload: Option<(f64, Duration)>,
    /// Connection scale (full only): connections held at 1 request per second each.
    pub scale: Option<(usize, Duration)>,
    /// Misbehaving clients beside a well-behaved one.
    pub limits: LimitsPlan,
}

/// How the capacity at the latency target is searched: from the open-loop point (its rate
/// passed or missed the target), by doubling or quartering the rate to bracket it, then by
/// bisection (geometric) until the bracket is narrow enough or the probes are spent.
#[derive(Debug, Clone)]
pub struct CapacitySearch {
    pub warm: Duration,
    pub measure: Duration,
    /// Probes per design at most, the open-loop point not counted.
    pub probes: usize,
    /// The search stops once the lowest failing rate is within this factor of the highest
    /// passing one.
    pub resolution: f64,
    /// The highest rate tried, as a share of the generator's ceiling (above it the generator
    /// would be the bottleneck, and a pass means "at least this").
    pub top_share: f64,
}

/// The limits step: `misbehaving` connections (as many as prefork has processes when None) of
/// three kinds, `non_readers` of them sending large frames and never reading, half the rest
/// idle and half sending half a frame, all kept open (reopened when the server closes one);
/// beside them a well-behaved client makes short connections one after another, `gap` apart,
/// until `attempts` are made or `budget` is spent (and at least `min_attempts`).
#[derive(Debug, Clone)]
pub struct LimitsPlan {
    pub misbehaving: Option<usize>,
    pub non_readers: usize,
    pub settle: Duration,
    pub attempts: usize,
    pub min_attempts: usize,
    pub budget: Duration,
    pub gap: Duration,
}

impl Sizes {
    pub fn for_mode(mode: Mode) -> Sizes {
        match mode {
            Mode::Tiny => Sizes::tiny(),
            Mode::Quick => Sizes::quick(),
            Mode::Full => Sizes::full(),
        }
    }

    /// Structure only: every pattern of --full, each a few milliseconds.
    fn tiny() -> Sizes {
        let ms = Duration::from_millis;
        Sizes {
            study_sizes: &[1024, 16 << 10],
            // 5 requests stand for the study's 50.
            long_requests: 5,
            first_rest_conns: 2,
            trials: 1,
            max_trials: 1,
            precision_pct: 100.0,
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
            capacity: Some(CapacitySearch {
                warm: ms(3),
                measure: ms(14),
                probes: 2,
                resolution: 1.5,
                top_share: 0.5,
            }),
            overload: Some((1.5, ms(14))),
            scale: Some((32, ms(14))),
            limits: LimitsPlan {
                misbehaving: Some(6),
                non_readers: 1,
                settle: ms(5),
                attempts: 2,
                min_attempts: 1,
                budget: ms(20),
                gap: ms(1),
            },
        }
    }

    /// The default run: the headline patterns, one trial.
    fn quick() -> Sizes {
        let ms = Duration::from_millis;
        Sizes {
            study_sizes: &[1024, 4 << 10, 16 << 10, 64 << 10],
            long_requests: 50,
            first_rest_conns: 15,
            trials: 1,
            max_trials: 1,
            precision_pct: 100.0,
            windows: 7,
            peak_conns: 64,
            peak_warm: ms(15),
            peak_measure: ms(84),
            rate_conns: 1000,
            rate: 30_000.0,
            rate_warm: ms(30),
            rate_measure: ms(245),
            block_conns: 64,
            block_rate: 1000.0,
            block_us: 1000,
            block_warm: ms(20),
            block_measure: ms(175),
            spin: None,
            capacity: None,
            overload: None,
            scale: None,
            limits: LimitsPlan {
                misbehaving: None,
                non_readers: 2,
                settle: ms(30),
                attempts: 6,
                min_attempts: 3,
                budget: ms(200),
                gap: ms(5),
            },
        }
    }

    /// --full: every pattern, trials until the headline figures are precise.
    fn full() -> Sizes {
        let ms = Duration::from_millis;
        Sizes {
            study_sizes: &[64, 1024, 4 << 10, 16 << 10, 64 << 10],
            long_requests: 50,
            first_rest_conns: 25,
            trials: 2,
            max_trials: 3,
            precision_pct: 10.0,
            windows: 7,
            peak_conns: 64,
            peak_warm: ms(60),
            peak_measure: ms(280),
            rate_conns: 1000,
            rate: 30_000.0,
            rate_warm: ms(100),
            rate_measure: ms(560),
            block_conns: 64,
            block_rate: 1000.0,
            block_us: 1000,
            block_warm: ms(60),
            block_measure: ms(280),
            spin: Some((200, 2500.0)),
            capacity: Some(CapacitySearch {
                warm: ms(50),
                measure: ms(300),
                probes: 8,
                resolution: 1.15,
                top_share: 0.5,
            }),
            overload: Some((1.5, ms(500))),
            scale: Some((10_000, ms(500))),
            limits: LimitsPlan {
                misbehaving: None,
                non_readers: 2,
                settle: ms(100),
                attempts: 20,
                min_attempts: 5,
                budget: ms(800),
                gap: ms(10),
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
    let allowed = &env.allowed_cpus;
    let physical = physical_cores(allowed).unwrap_or(allowed.len().max(1));
    cfg.pool_workers = recommended_pool(physical, env.cgroup_cpu_limit);
    // What one process can hold, less a margin: in the lab the generator's ends share the
    // limit, and a server that runs out answers BUSY with its reserve descriptor.
    cfg.max_connections = nofile.saturating_sub(256).clamp(64, 1 << 20) as usize;
    cfg
}

/// The same servers in the default placement: allowed on every CPU of the process, as a
/// program started without `taskset` is, and sized for all of them the way each design sizes
/// itself for the machine (Tokio's workers and Go's GOMAXPROCS one per CPU, the per-core
/// designs one loop, ring or carrier per CPU, each on its own CPU as those designs pin them).
pub fn server_config_unpinned(cpus: &Cpus, env: &Environment, nofile: u64) -> ServerConfig {
    let mut cfg = server_config(cpus, env, nofile);
    cfg.cpus = cpus.all.clone();
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
