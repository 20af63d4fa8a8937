//! Preemption evidence: register/FP-heavy threads with per-round checksums under timer
//! preemption, floating-point environments kept per declaring thread and never leaked to the
//! others, errno preserved per thread, critical sections.
//!
//! `UTHREAD_STRESS_SECS` (default 1.5) sets how long the stress test runs.

#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::arch::asm;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uthread::{Builder, Mode, Runtime};

/// The shortest quantum the runtime accepts: the most ticks, hence preemptions, per second.
const SHORT_QUANTUM: Duration = Duration::from_micros(100);

/// A runtime whose preemptive threads are interrupted every `SHORT_QUANTUM`.
fn short_quantum_runtime() -> Runtime {
    Runtime::builder().quantum(SHORT_QUANTUM).build().unwrap()
}

/// Integer- and FP-heavy round: many live values in general and xmm registers at once.
#[inline(never)]
fn round(seed: u64) -> u64 {
    let mut a = [
        seed,
        seed ^ 0x9E37,
        seed.rotate_left(7),
        !seed,
        seed * 3,
        seed + 11,
        seed ^ 0x55AA,
        seed.wrapping_mul(0x2545F4914F6CDD1D),
    ];
    let mut f = [
        1.0f64 + (seed % 97) as f64,
        2.5,
        3.25,
        0.75,
        1.125,
        9.0,
        0.3,
        7.7,
    ];
    for i in 0..100u64 {
        for k in 0..8 {
            a[k] = a[k].rotate_left(5) ^ a[(k + 1) & 7].wrapping_add(i);
            f[k] = (f[k] * 1.000_001 + f[(k + 3) & 7] * 0.5).sqrt() + (a[k] & 0xff) as f64 * 1e-3;
        }
    }
    let mut h = 0u64;
    for k in 0..8 {
        h = h.wrapping_mul(31).wrapping_add(a[k] ^ f[k].to_bits());
    }
    h
}

fn stress_secs() -> f64 {
    std::env::var("UTHREAD_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.5)
}

/// The payload byte `i` of I/O round `r` of pair `p`: deterministic, so the reader checks it.
fn payload_byte(p: u64, r: u64, i: usize) -> u8 {
    (p as u8) ^ (r as u8).wrapping_mul(31) ^ (i as u8).wrapping_mul(7)
}

/// An I/O round's payload length: mostly none, sometimes large enough that the socket's send
/// buffer fills and the writer parks too.
fn payload_len(r: u64) -> usize {
    if r % 16 == 0 {
        (r as usize * 7919) % (256 * 1024)
    } else {
        0
    }
}

/// A preemptive writer: each round computes a checksum, sends it with the round number and a
/// payload, and sometimes forces a preemption. Returns its rounds and forced preemptions.
fn io_writer(p: u64, mut s: uthread::net::TcpStream, end: Instant) -> (u64, u64) {
    use std::io::Write;
    let mut r = 0u64;
    let mut forced = 0;
    let mut buf = Vec::new();
    while Instant::now() < end {
        let h = round(1 << 40 | p << 32 | r);
        let len = payload_len(r);
        buf.clear();
        buf.extend_from_slice(&r.to_le_bytes());
        buf.extend_from_slice(&h.to_le_bytes());
        buf.extend_from_slice(&(len as u32).to_le_bytes());
        buf.extend((0..len).map(|i| payload_byte(p, r, i)));
        s.write_all(&buf).expect("writer");
        r += 1;
        if r % 4 == 0 {
            uthread::__private::raise_preempt_signal();
            forced += 1;
        }
    }
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    (r, forced)
}

/// A preemptive reader: reads rounds until end of stream, recomputes each checksum and checks
/// every payload byte. Returns its rounds and mismatches.
fn io_reader(p: u64, mut s: uthread::net::TcpStream) -> (u64, u64) {
    use std::io::Read;
    let mut r = 0u64;
    let mut bad = 0;
    let mut head = [0u8; 20];
    let mut payload = Vec::new();
    loop {
        match s.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return (r, bad),
            Err(e) => panic!("reader: {e}"),
        }
        let got_r = u64::from_le_bytes(head[0..8].try_into().unwrap());
        let got_h = u64::from_le_bytes(head[8..16].try_into().unwrap());
        let len = u32::from_le_bytes(head[16..20].try_into().unwrap()) as usize;
        payload.resize(len, 0);
        s.read_exact(&mut payload).expect("payload");
        if got_r != r || got_h != round(1 << 40 | p << 32 | r) || len != payload_len(r) {
            bad += 1;
        }
        if payload
            .iter()
            .enumerate()
            .any(|(i, &b)| b != payload_byte(p, r, i))
        {
            bad += 1;
        }
        r += 1;
    }
}

/// A round of a channel pair: its number, its checksum and a payload derived from both.
type ChanRound = (u64, u64, Vec<u8>);

/// A preemptive channel writer: each round computes a checksum and sends it with a payload,
/// sometimes forcing a preemption. Returns its rounds and forced preemptions.
fn chan_writer(p: u64, tx: uthread::chan::Sender<ChanRound>, end: Instant) -> (u64, u64) {
    let (mut r, mut forced) = (0u64, 0u64);
    while Instant::now() < end {
        let h = round(2 << 40 | p << 32 | r);
        let payload = (0..(r % 97) as usize)
            .map(|i| payload_byte(p, r, i))
            .collect();
        tx.send((r, h, payload)).expect("chan writer");
        r += 1;
        if r % 4 == 0 {
            uthread::__private::raise_preempt_signal();
            forced += 1;
        }
    }
    (r, forced)
}

/// A preemptive channel reader: receives rounds until the writer is gone (through a `Select`
/// with a channel that never delivers and a timeout, when `select` is set), recomputes each
/// checksum and payload. Returns its rounds and mismatches.
fn chan_reader(p: u64, rx: uthread::chan::Receiver<ChanRound>, select: bool) -> (u64, u64) {
    let (_never_tx, never) = uthread::chan::bounded::<ChanRound>(0);
    let (mut r, mut bad) = (0u64, 0u64);
    loop {
        let got = if select {
            uthread::chan::Select::new()
                .recv(&rx, |m| m.ok())
                .recv(&never, |_| panic!("nothing is sent on this channel"))
                .timeout(Duration::from_secs(60), || panic!("the writer stalled"))
                .wait()
        } else {
            rx.recv().ok()
        };
        let Some((got_r, got_h, payload)) = got else {
            return (r, bad);
        };
        if got_r != r || got_h != round(2 << 40 | p << 32 | r) || payload.len() as u64 != r % 97 {
            bad += 1;
        }
        if payload
            .iter()
            .enumerate()
            .any(|(i, &b)| b != payload_byte(p, r, i))
        {
            bad += 1;
        }
        r += 1;
    }
}

#[test]
fn preemption_stress_zero_corruption() {
    const THREADS: u64 = 8;
    const IO_PAIRS: u64 = 2;
    // Channel pairs by capacity: a rendezvous, one slot, sixteen (its reader uses `Select`).
    const CHAN_CAPS: [usize; 3] = [0, 1, 16];
    let rt = short_quantum_runtime();
    let secs = stress_secs();
    let (results, io, chans) = rt.block_on(|| {
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                Builder::new()
                    .name(format!("stress-{t}"))
                    .mode(Mode::Preemptive)
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        let mut out = Vec::new(); // allocates while preemptible: exercises PreemptSafeAlloc
                        let mut r = 0u64;
                        while Instant::now() < end {
                            out.push(round(t << 32 | r));
                            r += 1;
                            // A few forced in-handler switches at syscall boundaries too.
                            if r % 2 == 0 {
                                uthread::__private::raise_preempt_signal();
                            }
                        }
                        out
                    })
                    .unwrap()
            })
            .collect();
        // Preemptive threads doing I/O on the same carrier: pairs over loopback TCP, so that
        // preemptions land around every socket call and inside the I/O paths' user code.
        let listener = uthread::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let io: Vec<_> = (0..IO_PAIRS)
            .map(|p| {
                let c = uthread::net::TcpStream::connect(addr).unwrap();
                let (s, _) = listener.accept().unwrap();
                let pre = || Builder::new().mode(Mode::Preemptive).stack_size(64 * 1024);
                let w = pre().spawn(move || io_writer(p, c, end)).unwrap();
                let r = pre().spawn(move || io_reader(p, s)).unwrap();
                (w, r)
            })
            .collect();
        // Preemptive threads passing checksummed rounds over channels on the same carrier, so
        // that preemptions land inside sends, receives and selects.
        let chans: Vec<_> = CHAN_CAPS
            .iter()
            .enumerate()
            .map(|(p, &cap)| {
                let (tx, rx) = uthread::chan::bounded(cap);
                let pre = || Builder::new().mode(Mode::Preemptive).stack_size(64 * 1024);
                let p = p as u64;
                let w = pre().spawn(move || chan_writer(p, tx, end)).unwrap();
                let r = pre().spawn(move || chan_reader(p, rx, cap == 16)).unwrap();
                (w, r)
            })
            .collect();
        let results = hs
            .into_iter()
            .map(|h| h.join().finished().expect("stress thread failed"))
            .collect::<Vec<_>>();
        let chans = chans
            .into_iter()
            .map(|(w, r)| {
                (
                    w.join().finished().expect("chan writer failed"),
                    r.join().finished().expect("chan reader failed"),
                )
            })
            .collect::<Vec<_>>();
        let io = io
            .into_iter()
            .map(|(w, r)| {
                (
                    w.join().finished().expect("writer failed"),
                    r.join().finished().expect("reader failed"),
                )
            })
            .collect::<Vec<_>>();
        (results, io, chans)
    });
    let s = rt.stats();
    let mut rounds = 0;
    for (t, out) in results.iter().enumerate() {
        for (r, &h) in out.iter().enumerate() {
            assert_eq!(
                h,
                round((t as u64) << 32 | r as u64),
                "corruption in thread {t} round {r}"
            );
        }
        rounds += out.len();
    }
    let mut forced: u64 = results.iter().map(|o| o.len() as u64 / 2).sum();
    let (mut io_rounds, mut io_bad) = (0, 0);
    for ((sent, w_forced), (received, bad)) in &io {
        assert_eq!(sent, received, "every I/O round sent was received");
        io_rounds += received;
        io_bad += bad;
        forced += w_forced;
    }
    let (mut chan_rounds, mut chan_bad) = (0, 0);
    for ((sent, w_forced), (received, bad)) in &chans {
        assert_eq!(sent, received, "every channel round sent was received");
        chan_rounds += received;
        chan_bad += bad;
        forced += w_forced;
    }
    eprintln!(
        "stress: {rounds} rounds checked, {io_rounds} I/O rounds checked ({io_bad} mismatches), {chan_rounds} channel rounds checked ({chan_bad} mismatches); {} preemptions ({} forced at a syscall boundary, ~{} timer-driven at arbitrary instructions); {s:?}",
        s.preemptions,
        forced,
        s.preemptions.saturating_sub(forced)
    );
    assert!(rounds > 0);
    assert!(io_rounds > 0);
    assert_eq!(io_bad, 0, "I/O checksum mismatches");
    assert!(chan_rounds > 0);
    assert_eq!(chan_bad, 0, "channel checksum mismatches");
    assert!(s.preemptions > 100, "expected many preemptions: {s:?}");
    assert!(s.io_waits > 0, "the I/O threads parked: {s:?}");
}

fn get_mxcsr() -> u32 {
    let mut v = 0u32;
    // SAFETY: stmxcsr stores 4 bytes to a valid local.
    unsafe { asm!("stmxcsr [{}]", in(reg) &mut v, options(nostack)) };
    v
}

fn set_mxcsr(v: u32) {
    // SAFETY: loads a valid MXCSR value (reserved bits zero) from a local.
    unsafe { asm!("ldmxcsr [{}]", in(reg) &v, options(nostack)) };
}

fn get_fcw() -> u16 {
    let mut v = 0u16;
    // SAFETY: fnstcw stores 2 bytes to a valid local.
    unsafe { asm!("fnstcw [{}]", in(reg) &mut v, options(nostack)) };
    v
}

fn set_fcw(v: u16) {
    // SAFETY: loads a valid x87 control word from a local.
    unsafe { asm!("fldcw [{}]", in(reg) &v, options(nostack)) };
}

const MXCSR_RC_MASK: u32 = 0x6000;
/// The exception flags, which every floating-point operation may set: not part of what a
/// thread keeps.
const MXCSR_FLAGS: u32 = 0x3F;
const MXCSR_FTZ: u32 = 0x8000;
const MXCSR_DAZ: u32 = 0x0040;

/// The MXCSR control bits and the x87 control word: what a thread's environment is compared by.
fn fp_env() -> (u32, u16) {
    (get_mxcsr() & !MXCSR_FLAGS, get_fcw())
}

fn set_fp_env((mxcsr, fcw): (u32, u16)) {
    set_mxcsr(mxcsr);
    set_fcw(fcw);
}

/// Gives up the carrier once: a yield, or (preemptive) spinning until the timer preempts this
/// thread (or 20 ms pass). The spin polls `stats()`, a runtime call: a preemption deferred at a
/// tick is taken there, cooperatively, so both kinds of switch happen.
fn give_way(preemptive: bool) {
    if preemptive {
        let start = uthread::stats().unwrap().preemptions;
        let t = Instant::now();
        while uthread::stats().unwrap().preemptions == start
            && t.elapsed() < Duration::from_millis(20)
        {
            black_box(0);
        }
    } else {
        uthread::yield_now();
    }
}

const ROUNDS: usize = 40;

/// A thread that declared its own environment: sets `env` (and an errno of its own), then
/// checks both after every switch. Returns the number of rounds that saw something else.
fn keeps_its_own(env: (u32, u16), errno: i32, preemptive: bool) -> usize {
    set_fp_env(env);
    // SAFETY: __errno_location returns this OS thread's errno slot.
    unsafe { *libc::__errno_location() = errno };
    let mut wrong = 0;
    for _ in 0..ROUNDS {
        give_way(preemptive);
        // SAFETY: as above.
        let e = unsafe { *libc::__errno_location() };
        if fp_env() != env || e != errno {
            wrong += 1;
            set_fp_env(env);
        }
    }
    wrong
}

/// A thread that did not declare one: it must always find the carrier's environment. Returns
/// the number of rounds that saw something else.
fn sees_the_carriers(carrier: (u32, u16), preemptive: bool) -> usize {
    let mut wrong = 0;
    for _ in 0..ROUNDS {
        if fp_env() != carrier {
            wrong += 1;
        }
        give_way(preemptive);
    }
    wrong
}

/// Threads that declared their own environment (cooperative and preemptive, each with another
/// rounding mode) share a carrier with threads that did not (cooperative and preemptive). The
/// former keep theirs across yields and preemptions; the latter only ever see the carrier's;
/// the carrier gets its own back from `block_on`.
fn own_and_shared_envs_on_one_carrier(carrier: (u32, u16), main_own: bool) {
    let before = fp_env();
    set_fp_env(carrier);
    let rt = Runtime::builder()
        .quantum(Duration::from_micros(200))
        .main_own_fp_env(main_own)
        .build()
        .unwrap();
    let wrong: Vec<(String, usize)> = rt.block_on(move || {
        assert_eq!(
            fp_env(),
            carrier,
            "main starts in the carrier's environment"
        );
        // Round down / up / toward zero, with matching x87 rounding control bits (10-11).
        let own = [(0x2000u32, 0x077Fu16), (0x4000, 0x0B7F), (0x6000, 0x0F7F)];
        let mut hs = Vec::new();
        for (k, &(rc, fcw)) in own.iter().enumerate() {
            for preemptive in [false, true] {
                let env = ((carrier.0 & !MXCSR_RC_MASK) | rc, fcw);
                let errno = 100 + 2 * k as i32 + preemptive as i32;
                let h = Builder::new()
                    .own_fp_env(true)
                    .mode(if preemptive {
                        Mode::Preemptive
                    } else {
                        Mode::Cooperative
                    })
                    .spawn(move || keeps_its_own(env, errno, preemptive))
                    .unwrap();
                hs.push((format!("own rc={rc:#x} preemptive={preemptive}"), h));
            }
        }
        for preemptive in [false, true, false, true] {
            let h = Builder::new()
                .mode(if preemptive {
                    Mode::Preemptive
                } else {
                    Mode::Cooperative
                })
                .spawn(move || sees_the_carriers(carrier, preemptive))
                .unwrap();
            hs.push((format!("shared preemptive={preemptive}"), h));
        }
        if main_own {
            // The main thread, declared, takes a mode of its own while the others run.
            let mine = ((carrier.0 & !MXCSR_RC_MASK) | 0x6000, 0x0F7F);
            set_fp_env(mine);
            for _ in 0..ROUNDS {
                uthread::yield_now();
                assert_eq!(fp_env(), mine, "main lost its own environment");
            }
        }
        hs.into_iter()
            .map(|(what, h)| (what, h.join().finished().unwrap()))
            .collect()
    });
    let after = fp_env();
    set_fp_env(before);
    let s = rt.stats();
    eprintln!("carrier env {carrier:x?}: {s:?}");
    assert!(s.preemptions > 0, "no preemption happened: {s:?}");
    for (what, n) in &wrong {
        assert_eq!(
            *n, 0,
            "{what}: {n} of {ROUNDS} rounds saw another environment"
        );
    }
    assert_eq!(after, carrier, "the carrier's environment after block_on");
}

#[test]
fn own_fp_env_is_kept_and_never_leaks() {
    own_and_shared_envs_on_one_carrier((get_mxcsr() & !MXCSR_FLAGS, get_fcw()), false);
}

/// With a carrier environment unlike the one the kernel gives a signal handler (flush-to-zero,
/// denormals-are-zero, x87 at 53-bit precision), a thread resumed at a cooperative switch point
/// by a preemption must still find the carrier's: the handler runs in the kernel's initial
/// environment, so the switch made there must load the carrier's. The main thread declares
/// its own here too.
#[test]
fn own_fp_env_with_a_carrier_environment_of_its_own() {
    let carrier = ((get_mxcsr() & !MXCSR_FLAGS) | MXCSR_FTZ | MXCSR_DAZ, 0x027F);
    own_and_shared_envs_on_one_carrier(carrier, true);
}

/// errno stays per thread whether or not a thread declares a floating-point environment.
#[test]
fn errno_preserved_per_thread() {
    let rt = Runtime::builder()
        .quantum(Duration::from_micros(200))
        .build()
        .unwrap();
    rt.block_on(|| {
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let preemptive = k % 2 == 1;
                Builder::new()
                    .mode(if preemptive {
                        Mode::Preemptive
                    } else {
                        Mode::Cooperative
                    })
                    .spawn(move || {
                        // SAFETY: __errno_location returns this OS thread's errno slot.
                        unsafe { *libc::__errno_location() = 200 + k };
                        (0..ROUNDS)
                            .filter(|_| {
                                give_way(preemptive);
                                // SAFETY: as above.
                                unsafe { *libc::__errno_location() != 200 + k }
                            })
                            .count()
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            assert_eq!(
                h.join().finished().unwrap(),
                0,
                "errno changed under a thread"
            );
        }
    });
}

#[test]
fn cooperative_threads_are_not_preempted() {
    let rt = short_quantum_runtime();
    rt.block_on(|| {
        // One preemptive thread keeps the timer running; the cooperative spinner must keep the
        // carrier for its whole loop regardless.
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f2 = flag.clone();
        let p = Builder::new()
            .mode(Mode::Preemptive)
            .spawn(move || f2.store(true, std::sync::atomic::Ordering::SeqCst))
            .unwrap();
        let c = Builder::new()
            .spawn({
                let flag = flag.clone();
                move || {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(20) {
                        black_box(0);
                    }
                    flag.load(std::sync::atomic::Ordering::SeqCst)
                }
            })
            .unwrap();
        // `c` runs after `p` in FIFO order, so p already ran; now check the reverse: spawn a
        // preemptive thread behind a cooperative spinner.
        p.join();
        assert!(c.join().finished().unwrap());
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r2 = ran.clone();
        let spinner = uthread::spawn(move || {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(20) {
                black_box(0);
            }
            !r2.load(std::sync::atomic::Ordering::SeqCst)
        });
        let r3 = ran.clone();
        let late = Builder::new()
            .mode(Mode::Preemptive)
            .spawn(move || r3.store(true, std::sync::atomic::Ordering::SeqCst))
            .unwrap();
        assert!(
            spinner.join().finished().unwrap(),
            "a cooperative thread was preempted"
        );
        late.join();
    });
}

#[test]
fn critical_section_defers_preemption() {
    let rt = short_quantum_runtime();
    rt.block_on(|| {
        let in_cs = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let violated = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (in_cs, violated) = (in_cs.clone(), violated.clone());
                Builder::new()
                    .mode(Mode::Preemptive)
                    .spawn(move || {
                        let end = Instant::now() + Duration::from_millis(150);
                        while Instant::now() < end {
                            uthread::critical_section(|| {
                                if in_cs.swap(true, std::sync::atomic::Ordering::SeqCst) {
                                    violated.store(true, std::sync::atomic::Ordering::SeqCst);
                                }
                                let t = Instant::now();
                                while t.elapsed() < Duration::from_micros(300) {
                                    black_box(0);
                                }
                                in_cs.store(false, std::sync::atomic::Ordering::SeqCst);
                            });
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join();
        }
        assert!(
            !violated.load(std::sync::atomic::Ordering::SeqCst),
            "preempted inside a critical section"
        );
        let s = uthread::stats().unwrap();
        assert!(
            s.deferred_preemptions > 0 && s.pending_preemptions_taken > 0,
            "{s:?}"
        );
    });
}

#[test]
fn preemptive_mutex_counter() {
    let rt = short_quantum_runtime();
    let total = rt.block_on(|| {
        let m = Arc::new(uthread::Mutex::new(0u64));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                Builder::new()
                    .mode(Mode::Preemptive)
                    .spawn(move || {
                        for _ in 0..200_000 {
                            let mut g = m.lock();
                            let v = *g;
                            black_box(&v);
                            *g = v + 1;
                        }
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            h.join();
        }
        let v = *m.lock();
        v
    });
    assert_eq!(total, 800_000);
}

#[test]
fn runtimes_on_two_os_threads() {
    let hs: Vec<_> = (0..2)
        .map(|i| {
            std::thread::spawn(move || {
                let rt = Runtime::builder()
                    .quantum(Duration::from_micros(200))
                    .build()
                    .unwrap();
                rt.block_on(move || {
                    let hs: Vec<_> = (0..3u64)
                        .map(|t| {
                            Builder::new()
                                .mode(Mode::Preemptive)
                                .spawn(move || {
                                    (0..200)
                                        .map(|r| round(i << 40 | t << 20 | r))
                                        .fold(0, u64::wrapping_add)
                                })
                                .unwrap()
                        })
                        .collect();
                    hs.into_iter()
                        .map(|h| h.join().finished().unwrap())
                        .fold(0, u64::wrapping_add)
                })
            })
        })
        .collect();
    for (i, h) in hs.into_iter().enumerate() {
        let got = h.join().unwrap();
        let want = (0..3u64)
            .map(|t| {
                (0..200)
                    .map(|r| round((i as u64) << 40 | t << 20 | r))
                    .fold(0, u64::wrapping_add)
            })
            .fold(0, u64::wrapping_add);
        assert_eq!(got, want);
    }
}

/// Short-lived preemptive threads spawned, finished and joined while the timer keeps firing:
/// threads end at arbitrary moments, so a finished thread is often cleaned up by a context
/// resumed inside the signal handler, and stacks are recycled under preemption. Every
/// thread's checksum must match its recomputation outside the runtime, and the counts must add
/// up.
#[test]
fn preemptive_threads_come_and_go() {
    const WAVES: u64 = 40;
    const PER_WAVE: u64 = 25;
    let rt = Runtime::builder()
        .quantum(SHORT_QUANTUM)
        .stack_size(64 * 1024)
        .build()
        .unwrap();
    let got: Vec<u64> = rt.block_on(|| {
        let mut out = Vec::new();
        for w in 0..WAVES {
            let hs: Vec<_> = (0..PER_WAVE)
                .map(|t| {
                    let seed = w << 32 | t;
                    Builder::new()
                        .mode(Mode::Preemptive)
                        .spawn(move || {
                            // A few hundred microseconds of work: a handful of ticks each.
                            (0..(20 + seed % 40))
                                .map(|r| round(seed << 8 | r))
                                .fold(0, u64::wrapping_add)
                        })
                        .unwrap()
                })
                .collect();
            // Join in reverse so that joiners also wait for threads that are still running.
            for h in hs.into_iter().rev() {
                out.push(h.join().finished().unwrap());
            }
        }
        out
    });
    let want: Vec<u64> = (0..WAVES)
        .flat_map(|w| {
            (0..PER_WAVE).rev().map(move |t| {
                let seed = w << 32 | t;
                (0..(20 + seed % 40))
                    .map(|r| round(seed << 8 | r))
                    .fold(0, u64::wrapping_add)
            })
        })
        .collect();
    assert_eq!(got, want);
    let s = rt.stats();
    assert_eq!(s.threads_spawned, s.threads_finished);
    assert_eq!(s.threads_spawned, WAVES * PER_WAVE + 1);
    eprintln!("come and go: {s:?}");
}
