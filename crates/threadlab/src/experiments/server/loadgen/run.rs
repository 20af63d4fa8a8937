//! One step: the plan's schedule, dispatch to idle connections, windows, usage reads, and the step's results; and the listen-queue counters.

use super::*;

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
        let mut win_latency: Vec<Histogram<u64>> = (0..windows).map(|_| histogram()).collect();
        let mut win_service: Vec<Histogram<u64>> = (0..windows).map(|_| histogram()).collect();
        let mut win_completed = vec![0u64; windows];
        let mut latency = histogram();
        let mut service = histogram();
        let mut send_lag = histogram();
        let mut server_service = histogram();
        let mut per_conn_start: Vec<u64> = self.conns.iter().map(|c| c.completed).collect();
        self.workers_seen.iter_mut().for_each(|w| *w = 0);
        let failures_before = self.failures;
        let mut rejected = 0u64;
        let slack = TimerSlack::set(1);

        let t0 = mono_ns() + 1_000_000;
        let warm_end = t0 + plan.warmup.as_nanos() as u64;
        let end = warm_end + plan.measure.as_nanos() as u64;
        let wlen = ((end - warm_end) / windows as u64).max(1);
        let drain_end = end + REPLY_TIMEOUT.as_nanos() as u64;
        let window_of = |t: u64| -> Option<usize> {
            (t >= warm_end && t < end).then(|| (((t - warm_end) / wlen) as usize).min(windows - 1))
        };
        let mut gap: Box<dyn FnMut() -> u64> = match plan.mode {
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
        };
        let open = matches!(plan.mode, LoadMode::Open { .. });
        // Requests of the measured period allowed above the target before the p99 is known to
        // miss it (see `Plan::give_up_above_ns`).
        let give_up = match (plan.give_up_above_ns, plan.mode) {
            (Some(ns), LoadMode::Open { rate, .. }) => Some((
                ns,
                (0.01 * rate * plan.measure.as_secs_f64()).floor() as u64,
            )),
            _ => None,
        };
        let mut over_target = 0u64;
        let mut next_planned = t0;
        let mut planning = true;
        let mut saturated: Option<String> = None;
        let mut boundary = 0usize; // next usage sample: warm_end + boundary * wlen
        let mut usage_at: Vec<Usage> = Vec::with_capacity(windows + 1);
        // Both ends start at the step's start: a step that never reaches its measured period
        // then shows no generator time, rather than the thread's whole life.
        let mut gen_cpu_at = [rusage(libc::RUSAGE_THREAD).cpu_ns; 2];
        let mut end_read = false;
        let mut spin_ns = 0u64;
        let mut in_flight = 0u64;
        let mut area = 0f64; // integral of in_flight over the measured period, ns
        let mut last_change = warm_end;
        let mut next_sweep = mono_ns();
        let spin = plan.spin.as_nanos() as u64;
        let mut done: Option<Done> = None;
        let mut unsent = 0u64;
        let mut planned_in_period = 0u64;

        loop {
            let now = mono_ns();
            while boundary <= windows && now >= warm_end + boundary as u64 * wlen {
                if boundary == 0 {
                    gen_cpu_at[0] = rusage(libc::RUSAGE_THREAD).cpu_ns;
                    per_conn_start = self.conns.iter().map(|c| c.completed).collect();
                    last_change = now.max(warm_end);
                }
                if boundary == windows {
                    gen_cpu_at[1] = rusage(libc::RUSAGE_THREAD).cpu_ns;
                    end_read = true;
                    let t = now.min(end);
                    area += in_flight as f64 * t.saturating_sub(last_change) as f64;
                    last_change = u64::MAX;
                }
                usage_at.push(usage());
                boundary += 1;
            }
            // Plan.
            if open && planning {
                while next_planned <= now && next_planned < end {
                    if next_planned >= warm_end {
                        planned_in_period += 1;
                    }
                    self.fifo.push_back(next_planned);
                    next_planned += gap().max(1);
                }
                if next_planned >= end {
                    planning = false;
                }
                let backlog = self.fifo.len();
                let oldest = self.fifo.front().map_or(0, |&t| now.saturating_sub(t));
                if backlog > BACKLOG_PER_CONN * self.conns.len().max(1) || oldest > MAX_LAG_NS {
                    saturated = Some(format!(
                        "the server fell behind the plan: {backlog} requests waiting for a free \
                         connection, the oldest for {:.0} ms; step stopped",
                        oldest as f64 / 1e6
                    ));
                    planning = false;
                }
            }
            // Dispatch.
            // Closed loop issues only until the end; open loop drains its FIFO past it.
            let issuing = open || now < end;
            while issuing && !self.idle.is_empty() {
                let planned = if open {
                    match self.fifo.front() {
                        Some(&t) if saturated.is_none() => t,
                        _ => break,
                    }
                } else {
                    now
                };
                let Some(ci) = self.idle.pop() else { break };
                if self.conns[ci as usize].st != St::Idle {
                    continue;
                }
                if open {
                    self.fifo.pop_front();
                }
                self.send(ci as usize, planned, plan);
                if self.conns[ci as usize].st == St::Dead {
                    continue;
                }
                // In flight from its actual send: the same instant its service time counts from.
                let sent = self.conns[ci as usize].sent_ns;
                if last_change != u64::MAX && sent >= warm_end {
                    area += in_flight as f64 * sent.saturating_sub(last_change) as f64;
                    last_change = sent;
                }
                in_flight += 1;
            }
            let finished_plan = if open {
                !planning && (self.fifo.is_empty() || saturated.is_some())
            } else {
                now >= end
            };
            // A step cut short ends once its last request is answered: the windows left
            // would only show an idle server.
            let cut_short = open && saturated.is_some();
            if finished_plan && in_flight == 0 && (boundary > windows || cut_short) {
                break;
            }
            if now > drain_end || self.live() == 0 {
                break;
            }
            cancel.check()?;
            // Wait until the next planned send, window boundary or sweep.
            let mut until = next_sweep;
            if open && planning && !self.idle.is_empty() {
                until = until.min(next_planned);
            }
            if boundary <= windows {
                until = until.min(warm_end + boundary as u64 * wlen);
            }
            if !open && now < end && !self.idle.is_empty() {
                until = now;
            }
            let wait = until.saturating_sub(mono_ns());
            let got = if wait == 0 {
                self.wait(Some(0))
            } else if wait <= spin {
                let got = self.wait(Some(0));
                if got == 0 {
                    // The whole idle round counts as spinning: its poll and its bookkeeping.
                    spin_ns += mono_ns() - now;
                }
                got
            } else {
                self.wait(Some(wait - spin))
            };
            for i in 0..got {
                let ev = self.events[i];
                let ci = ev.u64 as usize;
                let was_live = matches!(self.conns[ci].st, St::Sending | St::Receiving);
                self.on_event(ci, ev.events, plan, &mut done);
                if let Some(d) = done.take() {
                    let t = d.now_ns;
                    if last_change != u64::MAX && t >= warm_end {
                        area += in_flight as f64 * t.saturating_sub(last_change) as f64;
                        last_change = t;
                    }
                    in_flight -= 1;
                    self.idle.push(d.conn as u32);
                    match d.outcome {
                        Outcome::Reply => {}
                        Outcome::Busy => {
                            if window_of(d.planned_ns).is_some() {
                                rejected += 1;
                            }
                            continue;
                        }
                        Outcome::Error => {
                            self.failures.server_error += 1;
                            continue;
                        }
                    }
                    let lat = d.now_ns - d.planned_ns;
                    let svc = d.now_ns - d.sent_ns;
                    if let Some(w) = window_of(d.planned_ns) {
                        if let Some((target, allowed)) = give_up {
                            over_target += (lat > target) as u64;
                            if over_target > allowed && saturated.is_none() {
                                saturated = Some(format!(
                                    "over 1% of the requests planned in the measured period took \
                                     longer than {:.2} ms: the p99 misses that target whatever \
                                     the rest do; step stopped early",
                                    target as f64 / 1e6
                                ));
                                planning = false;
                            }
                        }
                        record(&mut win_latency[w], lat);
                        record(&mut win_service[w], svc);
                        record(&mut latency, lat);
                        record(&mut service, svc);
                        record(&mut send_lag, d.sent_ns.saturating_sub(d.ready_ns));
                        record(&mut server_service, d.server_ns);
                    }
                    if let Some(w) = window_of(d.now_ns) {
                        win_completed[w] += 1;
                        self.conns[d.conn].completed += 1;
                    }
                } else if was_live && self.conns[ci].st == St::Dead {
                    in_flight -= 1;
                }
            }
            let now = mono_ns();
            if now >= next_sweep {
                next_sweep = now + 10_000_000;
                let limit = REPLY_TIMEOUT.as_nanos() as u64;
                for ci in 0..self.conns.len() {
                    let c = &self.conns[ci];
                    if matches!(c.st, St::Sending | St::Receiving) && now > c.sent_ns + limit {
                        self.kill(ci, Some(Failure::Timeout));
                        in_flight -= 1;
                    }
                }
            }
        }
        drop(slack);
        // Requests planned but never sent (a saturated step): charged with their wait so far.
        let stop = mono_ns();
        for &t in &self.fifo {
            if window_of(t).is_some() {
                record(&mut latency, stop - t);
                unsent += 1;
            }
        }
        self.fifo.clear();
        // Connections still waiting for a reply at the drain limit.
        for ci in 0..self.conns.len() {
            if matches!(self.conns[ci].st, St::Sending | St::Receiving) {
                self.kill(ci, Some(Failure::Timeout));
            }
        }
        self.idle = (0..self.conns.len() as u32)
            .filter(|&i| self.conns[i as usize].st == St::Idle)
            .collect();
        while usage_at.len() < windows + 1 {
            usage_at.push(usage());
        }
        if !end_read {
            gen_cpu_at[1] = rusage(libc::RUSAGE_THREAD).cpu_ns;
        }
        let q = |h: &Histogram<u64>, p: f64| (!h.is_empty()).then(|| h.value_at_quantile(p));
        let win: Vec<Window> = (0..windows)
            .map(|k| Window {
                latency_p50_ns: q(&win_latency[k], 0.5),
                latency_p99_ns: q(&win_latency[k], 0.99),
                service_p99_ns: q(&win_service[k], 0.99),
                completed: win_completed[k],
                usage: usage_at[k + 1].since(usage_at[k]),
                length_ns: wlen,
            })
            .collect();
        drop((win_latency, win_service));
        let measured_ns = end - warm_end;
        let completed = win.iter().map(|w| w.completed).sum();
        let per_conn = self
            .conns
            .iter()
            .zip(&per_conn_start)
            .filter(|(c, _)| c.st != St::Dead || c.completed > 0)
            .map(|(c, s)| c.completed - s)
            .collect();
        let mut failures = self.failures;
        failures.connect -= failures_before.connect;
        failures.addr_not_avail -= failures_before.addr_not_avail;
        failures.reset -= failures_before.reset;
        failures.timeout -= failures_before.timeout;
        failures.verify -= failures_before.verify;
        failures.server_error -= failures_before.server_error;
        Ok(StepResult {
            server_usage: usage_at[windows].since(usage_at[0]),
            windows: win,
            latency,
            service,
            send_lag,
            server_service,
            completed,
            measured_ns,
            failures,
            rejected,
            per_conn,
            workers: self
                .workers_seen
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum(),
            generator_cpu_ns: gen_cpu_at[1].saturating_sub(gen_cpu_at[0]),
            generator_spin_ns: spin_ns,
            mean_in_flight: area / measured_ns.max(1) as f64,
            saturated,
            unsent,
            planned: planned_in_period,
        })
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
