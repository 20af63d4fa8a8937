//! The load generator: one pinned thread, epoll, non-blocking sockets, no allocation per
//! request, every reply verified (header and every payload byte).
//!
//! Open loop (the default): requests follow a plan made in advance, a constant rate or Poisson
//! arrivals with a fixed seed, global rather than per connection. A planned request goes to the
//! next idle connection; when none is idle it waits in a FIFO with its clock already running.
//! Latency counts from the planned send time (wrk2's model: no coordinated omission), so a
//! server that stalls is charged for every request that should have gone out meanwhile. Beside
//! it: the uncorrected service time (actual send to reply) and the generator's own send lag
//! (actual send minus when it could have sent: the later of the planned time and the moment its
//! connection became free), which shows the generator's health.
//!
//! Closed loop (only for peak throughput, labelled so): each connection sends its next request
//! as soon as its reply is in.
//!
//! Waiting uses epoll_pwait2 (nanosecond timeouts) with a 1 ns timer slack; with a CPU of its
//! own the generator spins the last `spin` before a planned send instead of sleeping through a
//! timer's wake-up cost.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{IntoRawFd, RawFd};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::measure::process::mono_ns;
use crate::subjects::server::evloop::Epoll;
use crate::subjects::server::protocol::{
    encode_request, parse_response, pattern_offset, ErrorCode, Request, KIND_ERROR, KIND_RESPONSE,
    REQUEST_HEADER, RESPONSE_HEADER,
};
use crate::subjects::server::usage::{rusage, Usage};

use super::client::{connect_failure, Failure, Sources, REPLY_TIMEOUT};

/// Highest latency a histogram records: 60 s.
const HIST_MAX_NS: u64 = 60_000_000_000;

pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

fn record(h: &mut Histogram<u64>, ns: u64) {
    let _ = h.record(ns.clamp(1, HIST_MAX_NS));
}

/// How requests are issued.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadMode {
    /// A planned schedule at `rate` requests per second.
    Open { rate: f64, arrivals: Arrivals },
    /// Back to back on every connection: peak throughput only.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrivals {
    Constant,
    /// Exponential gaps from a seeded generator (the same plan every run).
    Poisson {
        seed: u64,
    },
}

/// One step: what to send, how, for how long.
#[derive(Debug, Clone)]
pub struct Plan {
    pub payload: u32,
    /// (spin_us, block_us) asked of the server per request.
    pub work: (u32, u32),
    pub mode: LoadMode,
    /// Requests planned before this is over are served but not recorded.
    pub warmup: Duration,
    pub measure: Duration,
    /// The measured period is cut into this many windows, each with its own histograms and
    /// server usage: the samples of the step's metrics.
    pub windows: usize,
    /// Spin instead of sleeping this long before a planned send (0 when sharing a CPU).
    pub spin: Duration,
    /// A latency target (ns) the step only has to be judged against: once more than 1% of
    /// the requests planned for the measured period have taken longer, its p99 is above the
    /// target whatever the rest do, and the step ends early (open loop only).
    pub give_up_above_ns: Option<u64>,
}

/// Failures by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failures {
    pub connect: u64,
    pub addr_not_avail: u64,
    pub reset: u64,
    pub timeout: u64,
    pub verify: u64,
    /// Error frames other than BUSY.
    pub server_error: u64,
}

impl Failures {
    pub fn total(&self) -> u64 {
        self.connect
            + self.addr_not_avail
            + self.reset
            + self.timeout
            + self.verify
            + self.server_error
    }

    /// The failures counted since `before` was taken.
    fn since(mut self, before: Failures) -> Failures {
        self.connect -= before.connect;
        self.addr_not_avail -= before.addr_not_avail;
        self.reset -= before.reset;
        self.timeout -= before.timeout;
        self.verify -= before.verify;
        self.server_error -= before.server_error;
        self
    }

    fn count(&mut self, f: &Failure) {
        match f {
            Failure::Connect(_) => self.connect += 1,
            Failure::AddrNotAvail => self.addr_not_avail += 1,
            Failure::Reset => self.reset += 1,
            Failure::Timeout => self.timeout += 1,
            Failure::Verify(_) => self.verify += 1,
            Failure::Refused(_) => self.server_error += 1,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "connect {}, no local address {}, reset {}, timeout {}, wrong reply {}, server error {}",
            self.connect, self.addr_not_avail, self.reset, self.timeout, self.verify, self.server_error
        )
    }
}

/// One window of the measured period. Its histograms are reduced to the figures the metrics
/// use when the step ends (the step's merged histograms are kept whole).
pub struct Window {
    /// Requests planned in this window, from planned send to reply: p50 and p99, ns (None
    /// when no request of the window completed).
    pub latency_p50_ns: Option<u64>,
    pub latency_p99_ns: Option<u64>,
    /// The same requests' p99 from their actual send (uncorrected), ns.
    pub service_p99_ns: Option<u64>,
    /// Replies that arrived in this window (by arrival time).
    pub completed: u64,
    /// Server usage over this window (from the caller's probe).
    pub usage: Usage,
    pub length_ns: u64,
}

/// What a step measured.
pub struct StepResult {
    pub windows: Vec<Window>,
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    pub send_lag: Histogram<u64>,
    /// Service time as the server measured it (first request byte to reply write).
    pub server_service: Histogram<u64>,
    /// Replies that arrived during the measured period.
    pub completed: u64,
    pub measured_ns: u64,
    pub failures: Failures,
    /// BUSY replies: refused, not lost.
    pub rejected: u64,
    /// Replies per connection over the measured period (fairness).
    pub per_conn: Vec<u64>,
    /// Distinct worker ids seen in replies (threads, processes, loops).
    pub workers: usize,
    /// The generator thread's CPU over the measured period, and the part spent spinning.
    pub generator_cpu_ns: u64,
    pub generator_spin_ns: u64,
    /// Time-averaged requests in flight over the measured period (Little's law's L).
    pub mean_in_flight: f64,
    /// Why the step was cut short (the backlog or the lag grew without bound).
    pub saturated: Option<String>,
    /// Planned requests that never went out (saturated): recorded with their wait so far.
    pub unsent: u64,
    /// Requests planned within the measured period (open loop).
    pub planned: u64,
    pub server_usage: Usage,
}

impl StepResult {
    pub fn achieved_per_s(&self) -> f64 {
        self.completed as f64 / (self.measured_ns as f64 / 1e9)
    }

    /// Little's law, L = X * W, with W the mean service time: the generator's own bookkeeping
    /// agrees with itself (the-benchmarker's p50 that was really the generator's stall fails
    /// this). Relative mismatch.
    pub fn little_mismatch(&self) -> Option<f64> {
        if self.service.is_empty() || self.mean_in_flight <= 0.0 {
            return None;
        }
        let l = self.achieved_per_s() * self.service.mean() / 1e9;
        Some((l - self.mean_in_flight).abs() / self.mean_in_flight)
    }
}

mod conn;
mod replies;
mod run;

pub use conn::*;
use replies::*;
pub use run::*;

#[cfg(test)]
mod tests;
