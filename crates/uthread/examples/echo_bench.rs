//! A green-thread echo server on one carrier against a minimal hand-written single-threaded
//! epoll echo loop, with the same buffers, each pinned to one CPU while a pinned epoll client
//! drives it from the other.
//!
//! ```text
//! cargo run --release -p uthread --example echo_bench -- [--conns 32] [--size 64]
//!     [--secs 1.0] [--rounds 5] [--rate R] [--server-cpu 0] [--client-cpu 1] [--only green|epoll]
//! ```
//!
//! Each round runs both servers, in alternating order, through two phases:
//!
//! 1. **Closed loop** (peak throughput): `conns` connections, one request of `size` bytes
//!    outstanding on each; the next one is sent as soon as the reply is in. Requests per
//!    second, and the server thread's CPU time per request (its own clock,
//!    `pthread_getcpuclockid`), which stays meaningful when the client is the bottleneck.
//! 2. **Open loop** (latency): a fixed-rate schedule (`--rate`, default 30% of the first
//!    closed-loop rate measured, rounded to 1,000/s), each request handed to the next idle
//!    connection or queued; latency is measured from the *planned* send time (no coordinated
//!    omission), so a stall of the server or the host shows in full. Percentiles of that, the
//!    largest send lag, and CPU per request. A phase whose backlog runs more than a second
//!    late is stopped, and one that completes less than 99% of the offered rate is marked
//!    SATURATED.
//!
//! The figures of both servers are printed per round, with the green/epoll ratios, and their
//! medians at the end. A debug build is refused.
//!
//! Both servers read into a 4 KiB buffer per connection and write back what they read. The
//! green one is a `uthread` runtime on one OS thread, a green thread per connection doing
//! `read` then `write_all` in a loop; the epoll one is one level-triggered `epoll_wait` loop.
//! The client busy-polls its own epoll set (it has its own CPU), so its schedule is exact.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The servers' per-connection buffer.
const BUF: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Args {
    conns: usize,
    size: usize,
    secs: f64,
    rounds: usize,
    rate: Option<f64>,
    server_cpu: usize,
    client_cpu: usize,
    /// Run only one server (`--only green|epoll`), e.g. under a profiler.
    only: Option<usize>,
}

fn parse_args() -> Args {
    let mut a = Args {
        conns: 32,
        size: 64,
        secs: 1.0,
        rounds: 5,
        rate: None,
        server_cpu: 0,
        client_cpu: 1,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--only" {
            a.only = match it.next().as_deref() {
                Some("green") => Some(0),
                Some("epoll") => Some(1),
                _ => panic!("--only green|epoll"),
            };
            continue;
        }
        let mut v = || {
            it.next()
                .unwrap_or_else(|| panic!("{k} needs a value"))
                .parse::<f64>()
                .unwrap_or_else(|e| panic!("{k}: {e}"))
        };
        match k.as_str() {
            "--conns" => a.conns = v() as usize,
            "--size" => a.size = v() as usize,
            "--secs" => a.secs = v(),
            "--rounds" => a.rounds = v() as usize,
            "--rate" => a.rate = Some(v()),
            "--server-cpu" => a.server_cpu = v() as usize,
            "--client-cpu" => a.client_cpu = v() as usize,
            other => {
                eprintln!("unknown argument {other}; see the example's docs");
                std::process::exit(2);
            }
        }
    }
    assert!(a.size > 0 && a.size <= BUF, "--size must be 1..={BUF}");
    a
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; one CPU is added and applied to the
    // calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            panic!(
                "cannot pin to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// A server under test: its address, its OS thread and its stop flag.
struct Server {
    name: &'static str,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Server {
    /// The server thread's CPU time so far.
    fn cpu(&self) -> Duration {
        let mut clk: libc::clockid_t = 0;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: the thread is alive (joined only in `stop`); both out-parameters are valid.
        unsafe {
            assert_eq!(
                libc::pthread_getcpuclockid(self.thread.as_pthread_t(), &mut clk),
                0
            );
            libc::clock_gettime(clk, &mut ts);
        }
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
    }
}

/// The green server: one carrier, a green thread per connection.
fn green_server(cpu: usize) -> Server {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s2 = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        pin(cpu);
        let rt = uthread::Runtime::builder()
            .stack_size(64 * 1024)
            .build()
            .unwrap();
        rt.block_on(move || {
            let l = uthread::net::TcpListener::bind("127.0.0.1:0").unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            l.set_accept_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            while !s2.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = l.accept() else { continue };
                s.set_nodelay(true).unwrap();
                uthread::spawn(move || {
                    let mut buf = [0u8; BUF];
                    loop {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if s.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
    });
    Server {
        name: "green",
        addr: rx.recv().unwrap(),
        stop,
        thread,
    }
}

fn cvt(r: isize) -> std::io::Result<usize> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// The hand-written server: one level-triggered epoll loop, a 4 KiB buffer per connection
/// holding what is read until it is written back.
fn epoll_server(cpu: usize) -> Server {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let s2 = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        pin(cpu);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        tx.send(l.local_addr().unwrap()).unwrap();
        struct Conn {
            s: std::net::TcpStream,
            buf: Box<[u8; BUF]>,
            start: usize,
            end: usize,
            /// Registered for EPOLLOUT (a reply is pending) instead of EPOLLIN.
            out: bool,
        }
        let mut conns: Vec<Option<Conn>> = Vec::new();
        // SAFETY: plain system calls on descriptors this loop owns; `ev` and `events` are
        // valid for each call.
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let ctl = |op, fd: RawFd, events: i32, token: u64| {
                let mut ev = libc::epoll_event {
                    events: events as u32,
                    u64: token,
                };
                libc::epoll_ctl(ep, op, fd, &mut ev);
            };
            ctl(libc::EPOLL_CTL_ADD, l.as_raw_fd(), libc::EPOLLIN, u64::MAX);
            let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
            while !s2.load(Ordering::Relaxed) {
                let n = libc::epoll_wait(ep, events.as_mut_ptr(), 256, 20);
                for ev in &events[..n.max(0) as usize] {
                    let token = ev.u64;
                    if token == u64::MAX {
                        while let Ok((s, _)) = l.accept() {
                            s.set_nonblocking(true).unwrap();
                            s.set_nodelay(true).unwrap();
                            ctl(
                                libc::EPOLL_CTL_ADD,
                                s.as_raw_fd(),
                                libc::EPOLLIN,
                                conns.len() as u64,
                            );
                            conns.push(Some(Conn {
                                s,
                                buf: Box::new([0; BUF]),
                                start: 0,
                                end: 0,
                                out: false,
                            }));
                        }
                        continue;
                    }
                    let i = token as usize;
                    let Some(c) = conns[i].as_mut() else { continue };
                    let fd = c.s.as_raw_fd();
                    let mut close = false;
                    if c.end == c.start {
                        // Nothing pending: read once (level-triggered: more comes again).
                        match cvt(libc::read(fd, c.buf.as_mut_ptr().cast(), BUF)) {
                            Ok(0) => close = true,
                            Ok(k) => (c.start, c.end) = (0, k),
                            Err(e) => close = e.kind() != std::io::ErrorKind::WouldBlock,
                        }
                    }
                    if !close && c.end > c.start {
                        let p = c.buf[c.start..c.end].as_ptr();
                        match cvt(libc::send(
                            fd,
                            p.cast(),
                            c.end - c.start,
                            libc::MSG_NOSIGNAL,
                        )) {
                            Ok(k) => c.start += k,
                            Err(e) => close = e.kind() != std::io::ErrorKind::WouldBlock,
                        }
                        // A reply that did not fit: wait for room instead of reading.
                        let pending = c.start < c.end;
                        if pending != c.out {
                            c.out = pending;
                            let want = if pending {
                                libc::EPOLLOUT
                            } else {
                                libc::EPOLLIN
                            };
                            ctl(libc::EPOLL_CTL_MOD, fd, want, token);
                        }
                    }
                    if close {
                        conns[i] = None;
                    }
                }
            }
            libc::close(ep);
        }
    });
    Server {
        name: "epoll",
        addr: rx.recv().unwrap(),
        stop,
        thread,
    }
}

/// The client's connections, registered in its own epoll set.
struct Client {
    ep: RawFd,
    conns: Vec<std::net::TcpStream>,
    /// Reply bytes received so far for each connection's outstanding request.
    got: Vec<usize>,
    req: Vec<u8>,
    buf: Vec<u8>,
    events: Vec<libc::epoll_event>,
    verified: u64,
}

impl Client {
    fn connect(addr: SocketAddr, n: usize, size: usize) -> Client {
        // SAFETY: epoll_create1 has no memory arguments.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let conns: Vec<_> = (0..n)
            .map(|i| {
                let s = std::net::TcpStream::connect(addr).unwrap();
                s.set_nodelay(true).unwrap();
                s.set_nonblocking(true).unwrap();
                let mut ev = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: i as u64,
                };
                // SAFETY: valid event, our descriptors.
                unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) };
                s
            })
            .collect();
        Client {
            ep,
            got: vec![0; n],
            req: (0..size).map(|i| (i * 7 + 3) as u8).collect(),
            buf: vec![0; BUF],
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 256],
            conns,
            verified: 0,
        }
    }

    fn send(&mut self, i: usize) {
        (&self.conns[i]).write_all(&self.req).unwrap();
    }

    /// Polls once (without blocking) and calls `done(i)` for each connection whose reply is
    /// complete.
    fn poll(&mut self, mut done: impl FnMut(&mut Self, usize)) {
        // SAFETY: `events` is writable for its length.
        let n = unsafe { libc::epoll_wait(self.ep, self.events.as_mut_ptr(), 256, 0) };
        for k in 0..n.max(0) as usize {
            let i = self.events[k].u64 as usize;
            let want = self.req.len() - self.got[i];
            match (&self.conns[i]).read(&mut self.buf[..want]) {
                Ok(0) => panic!("server closed connection {i}"),
                Ok(r) => {
                    // Verify one reply byte per read (cheap), the whole reply now and then.
                    let at = self.got[i];
                    assert_eq!(self.buf[0], self.req[at], "wrong echo");
                    self.got[i] += r;
                    if self.got[i] == self.req.len() {
                        self.got[i] = 0;
                        self.verified += 1;
                        done(self, i);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("connection {i}: {e}"),
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // SAFETY: our epoll descriptor, closed once.
        unsafe { libc::close(self.ep) };
    }
}

#[derive(Clone, Copy, Default)]
struct Closed {
    rps: f64,
    cpu_us: f64,
    util: f64,
}

#[derive(Clone, Copy, Default)]
struct Open {
    offered: f64,
    achieved: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    max_lag_us: f64,
    cpu_us: f64,
    saturated: bool,
}

fn closed_loop(srv: &Server, a: &Args) -> Closed {
    let mut c = Client::connect(srv.addr, a.conns, a.size);
    for i in 0..a.conns {
        c.send(i);
    }
    let warm = Instant::now() + Duration::from_millis(300);
    while Instant::now() < warm {
        c.poll(|c, i| c.send(i));
    }
    let (t0, cpu0) = (Instant::now(), srv.cpu());
    let end = t0 + Duration::from_secs_f64(a.secs);
    let mut n = 0u64;
    while Instant::now() < end {
        c.poll(|c, i| {
            n += 1;
            c.send(i);
        });
    }
    let (wall, cpu) = (t0.elapsed(), srv.cpu() - cpu0);
    Closed {
        rps: n as f64 / wall.as_secs_f64(),
        cpu_us: cpu.as_secs_f64() * 1e6 / n as f64,
        util: cpu.as_secs_f64() / wall.as_secs_f64(),
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

fn open_loop(srv: &Server, a: &Args, rate: f64) -> Open {
    let mut c = Client::connect(srv.addr, a.conns, a.size);
    let interval = Duration::from_secs_f64(1.0 / rate);
    let t0 = Instant::now();
    let measure_from = t0 + Duration::from_millis(300);
    let end = measure_from + Duration::from_secs_f64(a.secs);
    let mut idle: VecDeque<usize> = (0..a.conns).collect();
    let mut backlog: VecDeque<Instant> = VecDeque::new();
    let mut planned = vec![t0; a.conns];
    let mut lat = Vec::with_capacity((rate * a.secs * 1.2) as usize);
    let mut next = t0;
    let mut outstanding = 0usize;
    let mut max_lag = Duration::ZERO;
    let mut saturated = false;
    let mut cpu0 = None;
    let mut measured = 0u64;
    loop {
        let now = Instant::now();
        if cpu0.is_none() && now >= measure_from {
            cpu0 = Some((now, srv.cpu(), measured));
        }
        while next <= now && next < end {
            if let Some(i) = idle.pop_front() {
                if next >= measure_from {
                    max_lag = max_lag.max(now - next);
                }
                planned[i] = next;
                c.send(i);
                outstanding += 1;
            } else {
                backlog.push_back(next);
            }
            next += interval;
        }
        if backlog
            .front()
            .is_some_and(|&p| now - p > Duration::from_secs(1))
        {
            saturated = true;
        }
        if saturated || (now >= end && outstanding == 0) {
            break;
        }
        c.poll(|c, i| {
            let done = Instant::now();
            if planned[i] >= measure_from {
                lat.push((done - planned[i]).as_nanos() as u64);
            }
            measured += 1;
            if let Some(p) = backlog.pop_front() {
                max_lag = max_lag.max(done - p);
                planned[i] = p;
                c.send(i);
            } else {
                outstanding -= 1;
                idle.push_back(i);
            }
        });
    }
    let (t1, cpu1, m1) = (Instant::now(), srv.cpu(), measured);
    let (tm, cpum, m0) = cpu0.unwrap_or((t1, cpu1, m1));
    lat.sort_unstable();
    let n = lat.len().max(1) as f64;
    let achieved = n / (end - measure_from).as_secs_f64();
    Open {
        offered: rate,
        achieved,
        p50_us: percentile(&lat, 0.50),
        p90_us: percentile(&lat, 0.90),
        p99_us: percentile(&lat, 0.99),
        p999_us: percentile(&lat, 0.999),
        max_us: lat.last().map_or(f64::NAN, |&x| x as f64 / 1000.0),
        max_lag_us: max_lag.as_secs_f64() * 1e6,
        cpu_us: (cpu1 - cpum).as_secs_f64() * 1e6 / (m1 - m0).max(1) as f64,
        saturated: saturated || t1 < tm || achieved < 0.99 * rate,
    }
}

/// The median of the figures that exist (a saturated phase has none).
/// One round: (closed, open) figures of the green server, then of the epoll server.
type Row = [(Closed, Open); 2];

fn median(xs: Vec<f64>) -> f64 {
    let mut xs: Vec<f64> = xs.into_iter().filter(|x| x.is_finite()).collect();
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    if cfg!(debug_assertions) {
        eprintln!("refusing to benchmark a debug build: use `cargo run --release -p uthread --example echo_bench`");
        std::process::exit(2);
    }
    let a = parse_args();
    pin(a.client_cpu);
    println!(
        "echo bench: {} connections, {} B requests, {:.1} s per phase, {} rounds; servers on CPU {}, client on CPU {}; load average {}",
        a.conns, a.size, a.secs, a.rounds, a.server_cpu, a.client_cpu, load_average()
    );
    let mut rate = a.rate;
    let mut rows: Vec<Row> = Vec::new();
    for round in 0..a.rounds {
        let mut out = [(Closed::default(), Open::default()); 2];
        // Alternate the order so that neither server always runs first.
        let order: [usize; 2] = if round % 2 == 0 { [1, 0] } else { [0, 1] };
        for k in order {
            if a.only.is_some_and(|o| o != k) {
                continue;
            }
            let srv = if k == 0 {
                green_server(a.server_cpu)
            } else {
                epoll_server(a.server_cpu)
            };
            let closed = closed_loop(&srv, &a);
            let r = *rate.get_or_insert((closed.rps * 0.3 / 1000.0).round() * 1000.0);
            let open = open_loop(&srv, &a, r);
            println!(
                "round {round} {:<5}: closed {:>8.0} req/s, server CPU {:>4.2} us/req ({:>3.0}% busy) | open {:>6.0}/s offered, {:>6.0}/s done, latency p50 {:>6.1} p90 {:>6.1} p99 {:>6.1} p99.9 {:>7.1} max {:>7.1} us, send lag max {:>5.1} us, {:>4.2} us/req{}",
                srv.name, closed.rps, closed.cpu_us, closed.util * 100.0, open.offered, open.achieved,
                open.p50_us, open.p90_us, open.p99_us, open.p999_us, open.max_us, open.max_lag_us,
                open.cpu_us, if open.saturated { " SATURATED" } else { "" }
            );
            out[k] = (closed, open);
            srv.stop();
        }
        if a.only.is_some() {
            continue;
        }
        println!(
            "round {round} green/epoll: rps {:.3}, CPU/req (closed) {:.3}, p99 {:.3}, CPU/req (open) {:.3}",
            out[0].0.rps / out[1].0.rps,
            out[0].0.cpu_us / out[1].0.cpu_us,
            out[0].1.p99_us / out[1].1.p99_us,
            out[0].1.cpu_us / out[1].1.cpu_us
        );
        rows.push(out);
    }
    if rows.is_empty() {
        return;
    }
    let col = |f: &dyn Fn(&Row) -> f64| median(rows.iter().map(f).collect());
    println!(
        "medians over {} rounds (ratios taken per round):",
        rows.len()
    );
    for (k, name) in [(0, "green"), (1, "epoll")] {
        println!(
            "  {name:<5}: closed {:.0} req/s, {:.2} us/req CPU | open at {:.0}/s: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, {:.2} us/req CPU",
            col(&|r| r[k].0.rps),
            col(&|r| r[k].0.cpu_us),
            rate.unwrap_or(0.0),
            col(&|r| r[k].1.p50_us),
            col(&|r| r[k].1.p99_us),
            col(&|r| r[k].1.p999_us),
            col(&|r| r[k].1.cpu_us),
        );
    }
    let rps = col(&|r| r[0].0.rps / r[1].0.rps);
    let p99 = col(&|r| r[0].1.p99_us / r[1].1.p99_us);
    let cpu = col(&|r| r[0].0.cpu_us / r[1].0.cpu_us);
    println!(
        "  green/epoll: rps {rps:.3} ({}), p99 at the same offered rate {p99:.3} ({}), CPU per request {cpu:.3}",
        if rps >= 0.9 { "within 10%" } else { "NOT within 10%" },
        if p99 <= 1.1 { "within 10%" } else { "NOT within 10%" },
    );
}
