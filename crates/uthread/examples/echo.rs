//! An echo server with a green thread per connection, on a [`uthread::Pool`] (one carrier per
//! CPU), with a built-in self-test client.
//!
//! ```text
//! cargo run --release -p uthread --example echo -- [--addr 127.0.0.1:7007] [--carriers N]
//!     [--pin] [--accept shard|handoff]
//! cargo run --release -p uthread --example echo -- --self-test [--conns 64] [--requests 1]
//!     [--size 64] [--secs 2] [--accept shard|handoff|both] [--rounds 3]
//! ```
//!
//! Accepting, two ways:
//!
//! * `shard` (the default): one `SO_REUSEPORT` listener per carrier, each with its own accept
//!   loop; the kernel spreads connections over the listeners and every connection is served
//!   on the carrier that accepted it.
//! * `handoff`: one listener and one accept loop on carrier 0, which hands each connection to
//!   the pool with `Pool::spawn` (queued on carrier 0; an idle carrier takes it before it starts).
//!
//! `--self-test` starts the server on a free port and drives it from a separate runtime (its
//! own OS thread, green client threads): each client connects, sends `--requests` requests of
//! `--size` bytes one at a time (checking every echo), closes, and starts over, for `--secs`
//! seconds (`--requests 0`: one connection each for the whole run). It prints sessions and
//! requests per second, and exits with status 1 on any error. `--accept both` measures the two
//! accept modes against each other, interleaved over `--rounds` rounds.
//!
//! Robustness, after the practice of nginx and HAProxy: a 30 s idle deadline per connection, a
//! listen backlog of 1024, resets and broken pipes counted as ordinary closes, and the
//! listener's own pacing when descriptors run out (see `TcpListener`).

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uthread::net::{ListenOptions, TcpListener, TcpStream};
use uthread::{JoinHandle, Pool, PoolHandle, Runtime};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Accept {
    Shard,
    Handoff,
}

struct Args {
    addr: String,
    carriers: Option<usize>,
    pin: bool,
    accept: Vec<Accept>,
    self_test: bool,
    conns: usize,
    requests: usize,
    size: usize,
    secs: f64,
    rounds: usize,
}

fn parse_args() -> Args {
    let mut a = Args {
        addr: "127.0.0.1:7007".into(),
        carriers: None,
        pin: false,
        accept: vec![Accept::Shard],
        self_test: false,
        conns: 64,
        requests: 1,
        size: 64,
        secs: 2.0,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{k} needs a value")))
        };
        let num = |s: String| s.parse::<f64>().unwrap_or_else(|e| usage(&format!("{e}")));
        match k.as_str() {
            "--addr" => a.addr = v(),
            "--carriers" => a.carriers = Some(num(v()) as usize),
            "--pin" => a.pin = true,
            "--accept" => {
                a.accept = match v().as_str() {
                    "shard" => vec![Accept::Shard],
                    "handoff" => vec![Accept::Handoff],
                    "both" => vec![Accept::Shard, Accept::Handoff],
                    other => usage(&format!("--accept {other}?")),
                }
            }
            "--self-test" => a.self_test = true,
            "--conns" => a.conns = num(v()) as usize,
            "--requests" => a.requests = num(v()) as usize,
            "--size" => a.size = num(v()) as usize,
            "--secs" => a.secs = num(v()),
            "--rounds" => a.rounds = num(v()) as usize,
            other => usage(&format!("unknown argument {other}")),
        }
    }
    a
}

fn usage(msg: &str) -> ! {
    eprintln!("echo: {msg}; see the example's docs for the options");
    std::process::exit(2)
}

/// Serves one connection: echoes until the peer closes, errs, or idles for 30 s.
fn serve(mut s: TcpStream, errors: &AtomicU64) {
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = [0u8; 4096];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            // A reset, a timeout: an ordinary end of a connection.
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::TimedOut) => {
                return
            }
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        match s.write_all(&buf[..n]) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                return
            }
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// A running server: the pool, its accept loops and their stop flag.
struct Server {
    pool: Pool,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    loops: Vec<JoinHandle<()>>,
    errors: Arc<AtomicU64>,
}

impl Server {
    fn start(a: &Args, addr: &str, mode: Accept) -> std::io::Result<Server> {
        let mut b = Pool::builder().pin(a.pin);
        if let Some(n) = a.carriers {
            b = b.carriers(n);
        }
        let pool = b
            .runtime(Runtime::builder().stack_size(64 * 1024))
            .build()?;
        let stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(AtomicU64::new(0));
        let opts = ListenOptions::new().reuse_port(mode == Accept::Shard);
        let first = TcpListener::bind_with(addr, &opts)?;
        let addr = first.local_addr()?;
        let mut listeners = vec![first];
        if mode == Accept::Shard {
            for _ in 1..pool.carriers() {
                listeners.push(TcpListener::bind_with(addr, &opts)?);
            }
        }
        let ph = pool.handle();
        let loops = listeners
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let (stop, errors, ph) = (stop.clone(), errors.clone(), ph.clone());
                pool.spawn_on(i, move || accept_loop(l, mode, &ph, &stop, &errors))
            })
            .collect();
        Ok(Server {
            pool,
            addr,
            stop,
            loops,
            errors,
        })
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.loops {
            h.join();
        }
        // Connections end when their clients close them.
        self.pool.join();
        self.errors.load(Ordering::Relaxed)
    }
}

fn accept_loop(
    l: TcpListener,
    mode: Accept,
    ph: &PoolHandle,
    stop: &AtomicBool,
    errors: &Arc<AtomicU64>,
) {
    // Wake up now and then to see the stop flag.
    let _ = l.set_accept_timeout(Some(Duration::from_millis(100)));
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                let errors = Arc::clone(errors);
                match mode {
                    // Served where it was accepted.
                    Accept::Shard => drop(uthread::spawn(move || serve(s, &errors))),
                    // Queued here; an idle carrier takes it before it starts.
                    Accept::Handoff => drop(ph.spawn(move || serve(s, &errors))),
                }
            }
            Err(e) if e.kind() == ErrorKind::TimedOut => {}
            // Out of descriptors and the like: the listener already paused; go on.
            Err(_) => {}
        }
    }
}

/// What the self-test client measured.
#[derive(Default, Clone, Copy)]
struct Load {
    sessions: u64,
    requests: u64,
    errors: u64,
    secs: f64,
    /// CPU time of the client's own OS thread.
    client_cpu: Duration,
}

/// CPU time of the calling thread (`RUSAGE_THREAD`) or the whole process (`RUSAGE_SELF`).
fn cpu_time(who: libc::c_int) -> Duration {
    // SAFETY: getrusage fills a valid rusage struct.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Drives `addr` from a runtime of its own OS thread.
fn client(addr: SocketAddr, a: &Args) -> Load {
    let (conns, requests, size, secs) = (a.conns, a.requests, a.size, a.secs);
    std::thread::spawn(move || {
        let sessions = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(AtomicU64::new(0));
        let cpu0 = cpu_time(libc::RUSAGE_THREAD);
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(secs);
        uthread::run(|| {
            let hs: Vec<_> = (0..conns)
                .map(|k| {
                    let (sessions, done, errors) = (sessions.clone(), done.clone(), errors.clone());
                    uthread::spawn(move || {
                        let msg: Vec<u8> = (0..size).map(|i| (i + k) as u8).collect();
                        let mut back = vec![0u8; size];
                        while Instant::now() < end {
                            let r = (|| -> std::io::Result<()> {
                                let mut c = TcpStream::connect(addr)?;
                                c.set_nodelay(true)?;
                                let mut n = 0;
                                while (requests == 0 || n < requests) && Instant::now() < end {
                                    c.write_all(&msg)?;
                                    c.read_exact(&mut back)?;
                                    if back != msg {
                                        return Err(std::io::Error::other("wrong echo"));
                                    }
                                    n += 1;
                                    done.fetch_add(1, Ordering::Relaxed);
                                }
                                Ok(())
                            })();
                            match r {
                                Ok(()) => {
                                    sessions.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => {
                                    if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                                        uthread::synchronize(|| eprintln!("client {k}: {e}"));
                                    }
                                    uthread::sleep(Duration::from_millis(10))
                                }
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join();
            }
        });
        Load {
            sessions: sessions.load(Ordering::Relaxed),
            requests: done.load(Ordering::Relaxed),
            errors: errors.load(Ordering::Relaxed),
            secs: start.elapsed().as_secs_f64(),
            client_cpu: cpu_time(libc::RUSAGE_THREAD) - cpu0,
        }
    })
    .join()
    .unwrap()
}

fn self_test(a: &Args) -> bool {
    let mut ok = true;
    let mut per_mode: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); a.accept.len()];
    let rounds = if a.accept.len() > 1 { a.rounds } else { 1 };
    for round in 0..rounds {
        for (m, &mode) in a.accept.iter().enumerate() {
            let srv = match Server::start(a, "127.0.0.1:0", mode) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("echo: cannot start the server: {e}");
                    return false;
                }
            };
            let carriers = srv.pool.carriers();
            let process0 = cpu_time(libc::RUSAGE_SELF);
            let load = client(srv.addr, a);
            // The server's CPU: the whole process's, less the client thread's.
            let server_cpu = cpu_time(libc::RUSAGE_SELF).saturating_sub(process0 + load.client_cpu);
            let server_errors = srv.stop();
            let (sps, rps) = (
                load.sessions as f64 / load.secs,
                load.requests as f64 / load.secs,
            );
            let short = a.requests == 1;
            let per = if short { load.sessions } else { load.requests }.max(1);
            let cpu_us = server_cpu.as_secs_f64() * 1e6 / per as f64;
            println!(
                "round {round} accept={mode:?} carriers={carriers}: {} conns x {} requests of {} B: {sps:.0} sessions/s, {rps:.0} requests/s, server CPU {cpu_us:.1} us per {}, client errors {}, server errors {server_errors}",
                a.conns,
                if a.requests == 0 { "all".to_string() } else { a.requests.to_string() },
                a.size,
                if short { "session" } else { "request" },
                load.errors
            );
            ok &= load.errors == 0 && server_errors == 0 && load.requests > 0;
            per_mode[m].push((sps, rps, cpu_us));
        }
    }
    if a.accept.len() > 1 {
        for (m, mode) in a.accept.iter().enumerate() {
            let med = |f: fn(&(f64, f64, f64)) -> f64| {
                let mut v: Vec<f64> = per_mode[m].iter().map(f).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            println!(
                "median accept={mode:?}: {:.0} sessions/s, {:.0} requests/s, server CPU {:.1} us per {}",
                med(|x| x.0),
                med(|x| x.1),
                med(|x| x.2),
                if a.requests == 1 { "session" } else { "request" },
            );
        }
    }
    println!("self-test: {}", if ok { "passed" } else { "FAILED" });
    ok
}

fn main() {
    let a = parse_args();
    if a.self_test {
        std::process::exit(if self_test(&a) { 0 } else { 1 });
    }
    let srv = Server::start(&a, &a.addr, a.accept[0]).unwrap_or_else(|e| {
        eprintln!("echo: cannot listen on {}: {e}", a.addr);
        std::process::exit(1)
    });
    println!(
        "echo: listening on {} with {} carriers (accept: {:?}); Ctrl-C to stop",
        srv.addr,
        srv.pool.carriers(),
        a.accept[0]
    );
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
