//! One step: the plan's schedule, dispatch to idle connections, windows, usage reads, and the
//! step's results; and the listen-queue counters.
//!
//! `Generator::run`'s loop is the measuring instrument. Its parts are `#[inline(always)]` and
//! keep their state in small structs of plain values held by `run`, the histograms apart, so
//! that it compiles to the one loop it was written as: no call, indirection or allocation per
//! request comes from the split.

use super::*;

/// The step's fixed terms: the warm-up from `t0`, the measured period of `windows` windows of
/// `wlen` ns up to `end`, the drain up to `drain_end`; open or closed loop, the spin before a
/// planned send, and when to give up early (target ns, requests allowed above it).
#[derive(Clone, Copy)]
struct Terms {
    windows: usize,
    t0: u64,
    warm_end: u64,
    end: u64,
    wlen: u64,
    drain_end: u64,
    open: bool,
    spin: u64,
    give_up: Option<(u64, u64)>,
}

impl Terms {
    /// A step starting 1 ms from now.
    fn starting_soon(plan: &Plan, windows: usize) -> Terms {
        let t0 = mono_ns() + 1_000_000;
        let warm_end = t0 + plan.warmup.as_nanos() as u64;
        let end = warm_end + plan.measure.as_nanos() as u64;
        // Requests of the measured period allowed above the target before the p99 is known to
        // miss it (see `Plan::give_up_above_ns`).
        let give_up = match (plan.give_up_above_ns, plan.mode) {
            (Some(ns), LoadMode::Open { rate, .. }) => Some((
                ns,
                (0.01 * rate * plan.measure.as_secs_f64()).floor() as u64,
            )),
            _ => None,
        };
        Terms {
            windows,
            t0,
            warm_end,
            end,
            wlen: ((end - warm_end) / windows as u64).max(1),
            drain_end: end + REPLY_TIMEOUT.as_nanos() as u64,
            open: matches!(plan.mode, LoadMode::Open { .. }),
            spin: plan.spin.as_nanos() as u64,
            give_up,
        }
    }

    /// The measured window `t` falls in, if any.
    #[inline(always)]
    fn window_of(&self, t: u64) -> Option<usize> {
        (t >= self.warm_end && t < self.end)
            .then(|| (((t - self.warm_end) / self.wlen) as usize).min(self.windows - 1))
    }

    /// The start of window `k` (`windows`: the end of the measured period).
    #[inline(always)]
    fn boundary(&self, k: usize) -> u64 {
        self.warm_end + k as u64 * self.wlen
    }
}

/// The gaps between planned sends in ns: constant or Poisson at the plan's rate; none in
/// closed loop.
fn arrivals(mode: LoadMode) -> Box<dyn FnMut() -> u64> {
    match mode {
        LoadMode::Open { rate, arrivals } => {
            let mean = 1e9 / rate.max(1e-3);
            match arrivals {
                Arrivals::Constant => {
                    // Accumulate in f64 so that a rate whose gap is not whole ns stays exact.
                    let mut acc = 0f64;
                    let mut last = 0u64;
                    Box::new(move || {
                        acc += mean;
                        let next = acc as u64;
                        let g = next - last;
                        last = next;
                        g
                    })
                }
                Arrivals::Poisson { seed } => {
                    let mut s = seed | 1;
                    Box::new(move || {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        let u = ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                        (-u.ln() * mean) as u64
                    })
                }
            }
        }
        LoadMode::Closed => Box::new(|| 0),
    }
}

/// Requests in flight, and their integral over the measured period (ns x requests, for the
/// mean by Little's law). `last_change` is u64::MAX once the period is closed.
struct InFlight {
    n: u64,
    area: f64,
    last_change: u64,
}

impl InFlight {
    /// Adds the time since the last change at the current count, when `t` is in the period.
    /// In flight counts from the actual send: the same instant its service time counts from.
    #[inline(always)]
    fn advance(&mut self, t: u64, warm_end: u64) {
        if self.last_change != u64::MAX && t >= warm_end {
            self.area += self.n as f64 * t.saturating_sub(self.last_change) as f64;
            self.last_change = t;
        }
    }
}

/// Where the loop is and what it counts as it goes; plain values only.
struct Cursor {
    next_planned: u64,
    planning: bool,
    /// The next usage read: at `Terms::boundary(boundary)`.
    boundary: usize,
    next_sweep: u64,
    planned_in_period: u64,
    /// Requests of the measured period above the give-up target so far.
    over_target: u64,
    spin_ns: u64,
    rejected: u64,
    unsent: u64,
    /// The generator thread's CPU time at the start and the end of the measured period.
    gen_cpu_at: [u64; 2],
    end_read: bool,
    flight: InFlight,
}

impl Cursor {
    fn new(t: &Terms) -> Cursor {
        Cursor {
            next_planned: t.t0,
            planning: true,
            boundary: 0,
            next_sweep: 0,
            planned_in_period: 0,
            over_target: 0,
            spin_ns: 0,
            rejected: 0,
            unsent: 0,
            // Both ends start at the step's start: a step that never reaches its measured
            // period then shows no generator time, rather than the thread's whole life.
            gen_cpu_at: [rusage(libc::RUSAGE_THREAD).cpu_ns; 2],
            end_read: false,
            flight: InFlight {
                n: 0,
                area: 0.0,
                last_change: t.warm_end,
            },
        }
    }
}

/// What the replies planned in the measured period add up to, per window and over the step.
struct Tally {
    win_latency: Vec<Histogram<u64>>,
    win_service: Vec<Histogram<u64>>,
    win_completed: Vec<u64>,
    latency: Histogram<u64>,
    service: Histogram<u64>,
    send_lag: Histogram<u64>,
    server_service: Histogram<u64>,
}

impl Tally {
    fn new(windows: usize) -> Tally {
        Tally {
            win_latency: (0..windows).map(|_| histogram()).collect(),
            win_service: (0..windows).map(|_| histogram()).collect(),
            win_completed: vec![0u64; windows],
            latency: histogram(),
            service: histogram(),
            send_lag: histogram(),
            server_service: histogram(),
        }
    }

    /// A reply to a request planned in window `w`.
    #[inline(always)]
    fn reply(&mut self, w: usize, d: &Done, lat: u64, svc: u64) {
        record(&mut self.win_latency[w], lat);
        record(&mut self.win_service[w], svc);
        record(&mut self.latency, lat);
        record(&mut self.service, svc);
        record(&mut self.send_lag, d.sent_ns.saturating_sub(d.ready_ns));
        record(&mut self.server_service, d.server_ns);
    }
}

/// What the step's figures are differences from: the caller's usage at every window boundary,
/// and each connection's and the generator's counts before the measured period.
struct Reads {
    usage_at: Vec<Usage>,
    per_conn_start: Vec<u64>,
    failures_before: Failures,
}

impl<'p> Generator<'p> {
    /// Runs one step on the live connections. `usage` is read at the end of the warm-up and
    /// at every window boundary (the server's CPU and switches, as the caller measures them).
    pub fn run(
        &mut self,
        plan: &Plan,
        cancel: &Cancel,
        usage: &mut dyn FnMut() -> Usage,
    ) -> Result<StepResult> {
        let windows = plan.windows.max(1);
        let mut tally = Tally::new(windows);
        let per_conn_start: Vec<u64> = self.conns.iter().map(|c| c.completed).collect();
        self.workers_seen.iter_mut().for_each(|w| *w = 0);
        let failures_before = self.failures;
        let slack = TimerSlack::set(1);
        let t = Terms::starting_soon(plan, windows);
        let mut gap = arrivals(plan.mode);
        let mut saturated: Option<String> = None;
        let mut reads = Reads {
            usage_at: Vec::with_capacity(windows + 1),
            per_conn_start,
            failures_before,
        };
        let mut cur = Cursor::new(&t);
        cur.next_sweep = mono_ns();
        loop {
            let now = mono_ns();
            self.cross_boundaries(&t, &mut cur, &mut reads, usage, now);
            if t.open && cur.planning {
                self.plan_due(&t, &mut cur, &mut *gap, &mut saturated, now);
            }
            // Closed loop issues only until the end; open loop drains its FIFO past it.
            if t.open || now < t.end {
                self.dispatch(plan, &t, &mut cur, &saturated, now);
            }
            if self.step_over(&t, &cur, &saturated, now) {
                break;
            }
            cancel.check()?;
            let until = self.next_wake(&t, &cur, now);
            let got = self.wait_until(until, now, t.spin, &mut cur.spin_ns);
            self.on_events(got, plan, &t, &mut cur, &mut tally, &mut saturated);
            self.sweep_timeouts(&mut cur);
        }
        drop(slack);
        self.settle(&t, &mut cur, &mut tally, &mut reads, usage);
        Ok(self.result(&t, cur, tally, reads, saturated))
    }

    /// Every window boundary `now` has reached: the caller's usage read; at the first, the
    /// generator's CPU time and each connection's count taken; at the last, the CPU time again
    /// and the in-flight integral closed.
    #[inline(always)]
    fn cross_boundaries(
        &mut self,
        t: &Terms,
        cur: &mut Cursor,
        reads: &mut Reads,
        usage: &mut dyn FnMut() -> Usage,
        now: u64,
    ) {
        while cur.boundary <= t.windows && now >= t.boundary(cur.boundary) {
            if cur.boundary == 0 {
                cur.gen_cpu_at[0] = rusage(libc::RUSAGE_THREAD).cpu_ns;
                reads.per_conn_start = self.conns.iter().map(|c| c.completed).collect();
                cur.flight.last_change = now.max(t.warm_end);
            }
            if cur.boundary == t.windows {
                cur.gen_cpu_at[1] = rusage(libc::RUSAGE_THREAD).cpu_ns;
                cur.end_read = true;
                let end = now.min(t.end);
                let f = &mut cur.flight;
                f.area += f.n as f64 * end.saturating_sub(f.last_change) as f64;
                f.last_change = u64::MAX;
            }
            reads.usage_at.push(usage());
            cur.boundary += 1;
        }
    }

    /// Open loop: every send planned up to `now` goes into the FIFO (those of the measured
    /// period counted); the step is stopped when the server has fallen too far behind.
    #[inline(always)]
    fn plan_due(
        &mut self,
        t: &Terms,
        cur: &mut Cursor,
        gap: &mut dyn FnMut() -> u64,
        saturated: &mut Option<String>,
        now: u64,
    ) {
        while cur.next_planned <= now && cur.next_planned < t.end {
            if cur.next_planned >= t.warm_end {
                cur.planned_in_period += 1;
            }
            self.fifo.push_back(cur.next_planned);
            cur.next_planned += gap().max(1);
        }
        if cur.next_planned >= t.end {
            cur.planning = false;
        }
        let backlog = self.fifo.len();
        let oldest = self.fifo.front().map_or(0, |&p| now.saturating_sub(p));
        if backlog > BACKLOG_PER_CONN * self.conns.len().max(1) || oldest > MAX_LAG_NS {
            *saturated = Some(format!(
                "the server fell behind the plan: {backlog} requests waiting for a free \
                 connection, the oldest for {:.0} ms; step stopped",
                oldest as f64 / 1e6
            ));
            cur.planning = false;
        }
    }

    /// Sends on idle connections: in open loop the FIFO's oldest planned requests (none once
    /// the step is cut short), in closed loop a request at once.
    #[inline(always)]
    fn dispatch(
        &mut self,
        plan: &Plan,
        t: &Terms,
        cur: &mut Cursor,
        saturated: &Option<String>,
        now: u64,
    ) {
        while !self.idle.is_empty() {
            let planned = if t.open {
                match self.fifo.front() {
                    Some(&p) if saturated.is_none() => p,
                    _ => break,
                }
            } else {
                now
            };
            let Some(ci) = self.idle.pop() else { break };
            if self.conns[ci as usize].st != St::Idle {
                continue;
            }
            if t.open {
                self.fifo.pop_front();
            }
            self.send(ci as usize, planned, plan);
            if self.conns[ci as usize].st == St::Dead {
                continue;
            }
            cur.flight
                .advance(self.conns[ci as usize].sent_ns, t.warm_end);
            cur.flight.n += 1;
        }
    }

    /// Whether the loop is done: the plan finished, nothing in flight and the windows all
    /// read (a step cut short ends once its last request is answered: the windows left would
    /// only show an idle server); or the drain is over, or no connection is left.
    #[inline(always)]
    fn step_over(&self, t: &Terms, cur: &Cursor, saturated: &Option<String>, now: u64) -> bool {
        let finished_plan = if t.open {
            !cur.planning && (self.fifo.is_empty() || saturated.is_some())
        } else {
            now >= t.end
        };
        let cut_short = t.open && saturated.is_some();
        (finished_plan && cur.flight.n == 0 && (cur.boundary > t.windows || cut_short))
            || now > t.drain_end
            || self.live() == 0
    }

    /// The next planned send, window boundary or sweep; now, in closed loop with a connection
    /// idle.
    #[inline(always)]
    fn next_wake(&self, t: &Terms, cur: &Cursor, now: u64) -> u64 {
        let mut until = cur.next_sweep;
        if t.open && cur.planning && !self.idle.is_empty() {
            until = until.min(cur.next_planned);
        }
        if cur.boundary <= t.windows {
            until = until.min(t.boundary(cur.boundary));
        }
        if !t.open && now < t.end && !self.idle.is_empty() {
            until = now;
        }
        until
    }

    /// Waits for events until `until`: asleep in epoll up to `spin` before it, then polling,
    /// the idle polls counted as spinning. The number of events.
    #[inline(always)]
    fn wait_until(&mut self, until: u64, now: u64, spin: u64, spin_ns: &mut u64) -> usize {
        let wait = until.saturating_sub(mono_ns());
        if wait == 0 {
            self.wait(Some(0))
        } else if wait <= spin {
            let got = self.wait(Some(0));
            if got == 0 {
                // The whole idle round counts as spinning: its poll and its bookkeeping.
                *spin_ns += mono_ns() - now;
            }
            got
        } else {
            self.wait(Some(wait - spin))
        }
    }

    /// The `got` events of the last wait: finished requests counted, requests on connections
    /// that died taken out of flight.
    #[inline(always)]
    fn on_events(
        &mut self,
        got: usize,
        plan: &Plan,
        t: &Terms,
        cur: &mut Cursor,
        tally: &mut Tally,
        saturated: &mut Option<String>,
    ) {
        let mut done: Option<Done> = None;
        for i in 0..got {
            let ev = self.events[i];
            let ci = ev.u64 as usize;
            let was_live = matches!(self.conns[ci].st, St::Sending | St::Receiving);
            self.on_event(ci, ev.events, plan, &mut done);
            if let Some(d) = done.take() {
                self.finished(d, t, cur, tally, saturated);
            } else if was_live && self.conns[ci].st == St::Dead {
                cur.flight.n -= 1;
            }
        }
    }

    /// A finished request: out of flight, its connection idle again; when planned in the
    /// measured period, its latency and service time counted, and the give-up target checked.
    #[inline(always)]
    fn finished(
        &mut self,
        d: Done,
        t: &Terms,
        cur: &mut Cursor,
        tally: &mut Tally,
        saturated: &mut Option<String>,
    ) {
        cur.flight.advance(d.now_ns, t.warm_end);
        cur.flight.n -= 1;
        self.idle.push(d.conn as u32);
        match d.outcome {
            Outcome::Reply => {}
            Outcome::Busy => {
                if t.window_of(d.planned_ns).is_some() {
                    cur.rejected += 1;
                }
                return;
            }
            Outcome::Error => {
                self.failures.server_error += 1;
                return;
            }
        }
        let lat = d.now_ns - d.planned_ns;
        let svc = d.now_ns - d.sent_ns;
        if let Some(w) = t.window_of(d.planned_ns) {
            if let Some((target, allowed)) = t.give_up {
                cur.over_target += (lat > target) as u64;
                if cur.over_target > allowed && saturated.is_none() {
                    *saturated = Some(format!(
                        "over 1% of the requests planned in the measured period took longer \
                         than {:.2} ms: the p99 misses that target whatever the rest do; step \
                         stopped early",
                        target as f64 / 1e6
                    ));
                    cur.planning = false;
                }
            }
            tally.reply(w, &d, lat, svc);
        }
        if let Some(w) = t.window_of(d.now_ns) {
            tally.win_completed[w] += 1;
            self.conns[d.conn].completed += 1;
        }
    }

    /// Every 10 ms: connections waiting for a reply longer than REPLY_TIMEOUT are closed as
    /// timed out.
    #[inline(always)]
    fn sweep_timeouts(&mut self, cur: &mut Cursor) {
        let now = mono_ns();
        if now >= cur.next_sweep {
            cur.next_sweep = now + 10_000_000;
            let limit = REPLY_TIMEOUT.as_nanos() as u64;
            for ci in 0..self.conns.len() {
                let c = &self.conns[ci];
                if matches!(c.st, St::Sending | St::Receiving) && now > c.sent_ns + limit {
                    self.kill(ci, Some(Failure::Timeout));
                    cur.flight.n -= 1;
                }
            }
        }
    }

    /// After the loop: requests planned but never sent (a saturated step) charged with their
    /// wait so far; connections still waiting for a reply at the drain limit closed as timed
    /// out; the idle list rebuilt; the reads the loop did not reach taken now.
    fn settle(
        &mut self,
        t: &Terms,
        cur: &mut Cursor,
        tally: &mut Tally,
        reads: &mut Reads,
        usage: &mut dyn FnMut() -> Usage,
    ) {
        let stop = mono_ns();
        for &p in &self.fifo {
            if t.window_of(p).is_some() {
                record(&mut tally.latency, stop - p);
                cur.unsent += 1;
            }
        }
        self.fifo.clear();
        for ci in 0..self.conns.len() {
            if matches!(self.conns[ci].st, St::Sending | St::Receiving) {
                self.kill(ci, Some(Failure::Timeout));
            }
        }
        self.idle = (0..self.conns.len() as u32)
            .filter(|&i| self.conns[i as usize].st == St::Idle)
            .collect();
        while reads.usage_at.len() < t.windows + 1 {
            reads.usage_at.push(usage());
        }
        if !cur.end_read {
            cur.gen_cpu_at[1] = rusage(libc::RUSAGE_THREAD).cpu_ns;
        }
    }

    /// The step's results from what the loop counted and read.
    fn result(
        &self,
        t: &Terms,
        cur: Cursor,
        tally: Tally,
        reads: Reads,
        saturated: Option<String>,
    ) -> StepResult {
        let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        let usage_at = &reads.usage_at;
        let win: Vec<Window> = (0..t.windows)
            .map(|k| Window {
                latency_p50_ns: q(&tally.win_latency[k], 0.5),
                latency_p99_ns: q(&tally.win_latency[k], 0.99),
                service_p99_ns: q(&tally.win_service[k], 0.99),
                completed: tally.win_completed[k],
                usage: usage_at[k + 1].since(usage_at[k]),
                length_ns: t.wlen,
            })
            .collect();
        drop((tally.win_latency, tally.win_service));
        let measured_ns = t.end - t.warm_end;
        let completed = win.iter().map(|w| w.completed).sum();
        let per_conn = self
            .conns
            .iter()
            .zip(&reads.per_conn_start)
            .filter(|(c, _)| c.st != St::Dead || c.completed > 0)
            .map(|(c, s)| c.completed - s)
            .collect();
        StepResult {
            server_usage: usage_at[t.windows].since(usage_at[0]),
            windows: win,
            latency: tally.latency,
            service: tally.service,
            send_lag: tally.send_lag,
            server_service: tally.server_service,
            completed,
            measured_ns,
            failures: self.failures.since(reads.failures_before),
            rejected: cur.rejected,
            per_conn,
            workers: self
                .workers_seen
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum(),
            generator_cpu_ns: cur.gen_cpu_at[1].saturating_sub(cur.gen_cpu_at[0]),
            generator_spin_ns: cur.spin_ns,
            mean_in_flight: cur.flight.area / measured_ns.max(1) as f64,
            saturated,
            unsent: cur.unsent,
            planned: cur.planned_in_period,
        }
    }
}

impl Drop for Generator<'_> {
    fn drop(&mut self) {
        for c in &mut self.conns {
            if c.fd >= 0 {
                // SAFETY: closes descriptors the generator owns.
                unsafe { libc::close(c.fd) };
                c.fd = -1;
            }
        }
    }
}

/// The calling thread's timer slack set for as long as this lives (the default 50 us would
/// make every timed wait late by up to that much).
pub(super) struct TimerSlack(libc::c_ulong);

impl TimerSlack {
    fn set(ns: libc::c_ulong) -> TimerSlack {
        // SAFETY: prctl with PR_GET/SET_TIMERSLACK has no memory arguments.
        unsafe {
            let old = libc::prctl(libc::PR_GET_TIMERSLACK) as libc::c_ulong;
            libc::prctl(libc::PR_SET_TIMERSLACK, ns);
            TimerSlack(old)
        }
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, self.0);
        }
    }
}

/// Reads /proc/net/netstat's TcpExt counters the experiment checks: (ListenOverflows,
/// ListenDrops). None when the file cannot be read (a namespace may hide it).
pub fn listen_counters() -> Option<(u64, u64)> {
    parse_listen_counters(&std::fs::read_to_string("/proc/net/netstat").ok()?)
}

pub fn parse_listen_counters(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |name: &str| -> Option<u64> {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse().ok()
    };
    Some((get("ListenOverflows")?, get("ListenDrops")?))
}

/// Fails the experiment when the generator cannot be trusted at all (every connection died).
pub fn require_live(g: &Generator, what: &str) -> Result<()> {
    if g.live() == 0 {
        return Err(Error::Fail(format!(
            "{what}: no connection to the server survived ({})",
            g.failures.describe()
        )));
    }
    Ok(())
}
