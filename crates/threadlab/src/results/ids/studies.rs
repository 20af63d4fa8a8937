//! The ids of the classic studies' experiments (create, sync, switch, shm, throttle, preempt,
//! priority, latency, coop): each experiment's name, the subjects it measures and a builder
//! per family. A subject may span segments (`process.fork`): it is what follows the
//! experiment's name. Placements (`.unpinned`, `.cross_cpu`) and ratios (`.vs_<b>`) are built
//! with `ids::placed` and `ids::ratio` on these.

/// Thread and process creation (Fig. 1): `create.<subject>`, `destroy.<thread|process>`.
pub mod create {
    pub const EXPERIMENT: &str = "create";
    pub const THREAD: &str = "thread";
    pub const THREAD_STD: &str = "thread.std";
    pub const GREEN: &str = "green";
    pub const TOKIO: &str = "tokio";
    pub const GO: &str = "go";
    pub const FORK: &str = "process.fork";
    pub const SPAWN: &str = "process.spawn";
    /// The unit `destroy.<what>` is about.
    pub const PROCESS: &str = "process";
    /// The figure series of the study's Fig. 1: creation time against threads created.
    const VS_COUNT: &str = "vs_count";

    /// `create.<subject>`.
    pub fn id(subject: &str) -> String {
        format!("{EXPERIMENT}.{subject}")
    }

    /// `destroy.<what>`: the end of a thread's or a process's life.
    pub fn destroy(what: &str) -> String {
        format!("destroy.{what}")
    }

    /// `create.thread.vs_count`: the Fig. 1 series.
    pub fn thread_vs_count() -> String {
        format!("{}.{VS_COUNT}", id(THREAD))
    }
}

/// Locks, semaphores and wake-ups: `sync.<subject>`, `sync.<lock>.contended.<placement>`.
pub mod sync {
    pub const EXPERIMENT: &str = "sync";
    pub const MUTEX: &str = "mutex";
    pub const MUTEX_SINGLE_THREAD: &str = "mutex.single_thread";
    pub const MUTEX_STD: &str = "mutex.std";
    pub const PARKING_LOT: &str = "parking_lot";
    pub const TICKET: &str = "ticket";
    pub const SEMAPHORE: &str = "semaphore";
    pub const WAKE: &str = "wake";

    /// `sync.<subject>`.
    pub fn id(subject: &str) -> String {
        format!("{EXPERIMENT}.{subject}")
    }

    /// `sync.<lock>.contended.<placement>`: two threads hammering one lock.
    pub fn contended(lock: &str, placement: &str) -> String {
        super::super::placed(&format!("{}.contended", id(lock)), placement)
    }
}

/// Context switches: `switch.<who>.<how>` (`thread.futex`), placed `.cross_cpu` or
/// `.unpinned`.
pub mod switch {
    pub const EXPERIMENT: &str = "switch";
    pub const THREAD: &str = "thread";
    pub const PROCESS: &str = "process";
    pub const GREEN: &str = "green";
    pub const TOKIO: &str = "tokio";
    pub const GO: &str = "go";
    pub const YIELD: &str = "yield";
    pub const FUTEX: &str = "futex";
    pub const PIPE: &str = "pipe";

    /// `switch.<who>`: the stem of a subject's figures and ratios.
    pub fn subject(who: &str) -> String {
        format!("{EXPERIMENT}.{who}")
    }

    /// `switch.<who>.<how>`.
    pub fn id(who: &str, how: &str) -> String {
        format!("{}.{how}", subject(who))
    }
}

/// Shared memory read by another thread or process (Fig. 2): `shm.<reader>.read.<size>`.
pub mod shm {
    pub const EXPERIMENT: &str = "shm";
    pub const THREAD: &str = "thread";
    pub const PROCESS: &str = "process";
    /// The largest size read, as its id spells it.
    pub const LARGEST: &str = "64mib";
    /// The series of read time against size, one per reader (`shm.<reader>.read_time`).
    pub const READ_TIME: &str = "read_time";

    /// `shm.<reader>.<series>`.
    pub fn series(reader: &str, series: &str) -> String {
        format!("{EXPERIMENT}.{reader}.{series}")
    }

    /// `shm.<reader>.read.<size>`.
    pub fn read(reader: &str, size: &str) -> String {
        format!("{EXPERIMENT}.{reader}.read.{size}")
    }
}

/// The semaphore throttle: `throttle.<figure>`, `throttle.<scheduler>.<figure>`.
pub mod throttle {
    pub const EXPERIMENT: &str = "throttle";
    pub const RECOMMENDED_POOL: &str = "recommended_pool";
    pub const BEST_CONCURRENCY: &str = "best_concurrency";
    pub const PENALTY_PCT: &str = "penalty_pct";
    /// The curve's series: time against N admitted at once.
    pub const TIME_VS_N: &str = "time_vs_n";
    /// The schedulers: the kernel's threads, uthread's carriers.
    pub const KERNEL: &str = "kernel";
    pub const UTHREAD: &str = "uthread";
    /// The N that stands for no throttle at all, in ids.
    pub const UNTHROTTLED: &str = "unthrottled";
    /// The same as a number, in series and in `best_concurrency` (as in the study's curve).
    pub const UNTHROTTLED_X: usize = 65;

    /// `throttle.<figure>`.
    pub fn id(figure: &str) -> String {
        format!("{EXPERIMENT}.{figure}")
    }

    /// `throttle.<scheduler>.<figure>`.
    pub fn of(scheduler: &str, figure: &str) -> String {
        id(&format!("{scheduler}.{figure}"))
    }

    /// What "no throttle was fastest" means, for every text that says it (the skipped pool's
    /// reason, the verdict, the advice).
    pub const NO_THROTTLE_WHY: &str =
        "admitting all 64 workers at once beat every N admitted at once";

    /// A `best_concurrency` read from a results file that says no throttle was fastest.
    pub fn is_unthrottled(n: f64) -> bool {
        n == UNTHROTTLED_X as f64
    }

    /// The N of an id: `n3`, or `unthrottled` for `None`.
    pub fn at(n: Option<usize>) -> String {
        n.map_or(UNTHROTTLED.to_string(), |n| format!("n{n}"))
    }

    /// `throttle.<scheduler>.time.<at>` (`at`: `n3`, `unthrottled`): every run's wall time at
    /// one N.
    pub fn time_at(scheduler: &str, at: &str) -> String {
        of(scheduler, &format!("time.{at}"))
    }
}

/// Preemption: `preempt.<path>` (the ways to interrupt a thread) and what it costs.
pub mod preempt {
    pub const EXPERIMENT: &str = "preempt";
    pub const TIMER_SIGNAL: &str = "timer_signal";
    pub const TIMER_LATENCY: &str = "timer_latency";
    pub const SIGNAL_ROUNDTRIP: &str = "signal_roundtrip";
    pub const GREEN_SWITCH: &str = "green_switch";
    pub const POLL_FLAG: &str = "poll_flag";
    pub const POLL_FLAG_LATENCY: &str = "poll_flag.latency";
    pub const POLL_FLAG_CHAIN: &str = "poll_flag.chain";
    pub const LOSS_AT_10MS: &str = "loss_at_10ms";
    /// The series of throughput lost against the quantum.
    pub const THROUGHPUT_LOSS: &str = "throughput_loss";

    /// `preempt.<figure>`.
    pub fn id(figure: &str) -> String {
        format!("{EXPERIMENT}.{figure}")
    }
}

/// Priorities: `priority.share.<a>_vs_<b>` (the first thread's CPU share between nice a and
/// nice b) and the tables against the models.
pub mod priority {
    pub const EXPERIMENT: &str = "priority";
    pub const NICE_SHARES: &str = "nice_shares";
    pub const UTHREAD_SHARES: &str = "uthread_shares";
    pub const FRAMES: &str = "frames";
    pub const FRAMES_INTERRUPTIONS: &str = "frames.interruptions";

    /// `priority.<figure>`: a table or a series.
    pub fn id(figure: &str) -> String {
        format!("{EXPERIMENT}.{figure}")
    }

    /// `priority.share.<a>_vs_<b>`: nice a's share beside nice b.
    pub fn share(a: impl std::fmt::Display, b: impl std::fmt::Display) -> String {
        id(&format!("share.{a}_vs_{b}"))
    }
}

/// BeOS's latencies: `latency.[rt.]<load>.longest_gap`, `latency.wakeup.<case>.lateness`.
pub mod latency {
    use crate::results::ids::{is_under, segments};

    pub const EXPERIMENT: &str = "latency";
    /// The loads beside the clock-reading thread.
    pub const ALONE: &str = "alone";
    pub const ANNOYING: &str = "annoying";
    /// The table of gaps against BeOS's.
    pub const GAPS: &str = "gaps";
    const RT: &str = "rt";
    const WAKEUP: &str = "wakeup";
    const LATENESS: &str = "lateness";
    const LONGEST_GAP: &str = "longest_gap";

    /// `latency.<figure>`.
    pub fn id(figure: &str) -> String {
        format!("{EXPERIMENT}.{figure}")
    }

    /// `latency.<load>.longest_gap`, at normal priority.
    pub fn longest_gap(load: &str) -> String {
        id(&format!("{load}.{LONGEST_GAP}"))
    }

    /// `latency.rt.<load>.longest_gap`: the same at SCHED_FIFO.
    pub fn rt_longest_gap(load: &str) -> String {
        id(&format!("{RT}.{load}.{LONGEST_GAP}"))
    }

    /// Whether `id` is one of the real-time figures (`latency.rt.…`).
    pub fn is_rt(id: &str) -> bool {
        is_under(id, &self::id(RT)) && segments(id).count() > 2
    }

    /// `latency.wakeup.<case>.lateness`.
    pub fn wakeup_lateness(case: &str) -> String {
        id(&format!("{WAKEUP}.{case}.{LATENESS}"))
    }

    /// The case of a wake-up figure (`latency.wakeup.rt.alone.lateness` -> `rt.alone`); None
    /// for any other id.
    pub fn wakeup_case(id: &str) -> Option<&str> {
        let rest = id
            .strip_prefix(EXPERIMENT)?
            .strip_prefix('.')?
            .strip_prefix(WAKEUP)?
            .strip_prefix('.')?;
        Some(rest.trim_end_matches(".lateness"))
    }
}

/// Cooperative against preemptive: `coop.score.<mode>` (1.00 = never yielding).
pub mod coop {
    pub const EXPERIMENT: &str = "coop";
    pub const COOP_FG_333MS: &str = "coop_fg_333ms";
    pub const COOP_FG_EVERY4096: &str = "coop_fg_every4096";
    pub const PREEMPT_FG: &str = "preempt_fg";

    /// `coop.score.<mode>`.
    pub fn score(mode: &str) -> String {
        format!("{EXPERIMENT}.score.{mode}")
    }
}

/// Every id these builders make for the subjects named here, for the schema test.
#[cfg(test)]
pub fn all() -> Vec<String> {
    use crate::results::ids::{placed, ratio, unpinned, CROSS_CPU, SAME_CPU, UNPINNED};
    let mut v: Vec<String> = [
        create::THREAD,
        create::THREAD_STD,
        create::GREEN,
        create::TOKIO,
        create::GO,
        create::FORK,
        create::SPAWN,
    ]
    .iter()
    .map(|s| create::id(s))
    .collect();
    v.extend([
        create::destroy(create::THREAD),
        create::destroy(create::PROCESS),
        unpinned(&create::id(create::THREAD)),
        unpinned(&create::id(create::FORK)),
        ratio(&create::id(create::FORK), create::THREAD),
        ratio(&create::id(create::GREEN), create::THREAD),
        create::thread_vs_count(),
    ]);
    v.extend(
        [
            sync::MUTEX,
            sync::MUTEX_SINGLE_THREAD,
            sync::MUTEX_STD,
            sync::SEMAPHORE,
        ]
        .iter()
        .map(|s| sync::id(s)),
    );
    for p in [SAME_CPU, CROSS_CPU, UNPINNED] {
        v.push(placed(&sync::id(sync::WAKE), p));
        for lock in [
            sync::MUTEX,
            sync::MUTEX_STD,
            sync::PARKING_LOT,
            sync::TICKET,
        ] {
            v.push(sync::contended(lock, p));
        }
    }
    for who in [switch::THREAD, switch::PROCESS] {
        for how in [switch::YIELD, switch::FUTEX] {
            v.push(switch::id(who, how));
            v.push(placed(&switch::id(who, how), CROSS_CPU));
        }
    }
    v.extend([
        switch::id(switch::PROCESS, switch::PIPE),
        placed(&switch::id(switch::PROCESS, switch::PIPE), CROSS_CPU),
        unpinned(&switch::id(switch::THREAD, switch::FUTEX)),
        switch::id(switch::GREEN, switch::YIELD),
        switch::id(switch::TOKIO, switch::YIELD),
        switch::id(switch::GO, switch::YIELD),
        ratio(&switch::subject(switch::GREEN), switch::THREAD),
        shm::read(shm::THREAD, shm::LARGEST),
        shm::read(shm::PROCESS, shm::LARGEST),
        shm::series(shm::THREAD, shm::READ_TIME),
        shm::series(shm::PROCESS, shm::READ_TIME),
    ]);
    for f in [
        throttle::RECOMMENDED_POOL,
        throttle::BEST_CONCURRENCY,
        throttle::PENALTY_PCT,
    ] {
        v.push(throttle::id(f));
    }
    v.extend([
        throttle::of(throttle::UTHREAD, throttle::BEST_CONCURRENCY),
        throttle::of(throttle::KERNEL, throttle::TIME_VS_N),
        throttle::of(throttle::UTHREAD, throttle::TIME_VS_N),
        throttle::time_at("<scheduler>", "n<N>"),
        throttle::time_at("<scheduler>", throttle::UNTHROTTLED),
    ]);
    for f in [
        preempt::TIMER_SIGNAL,
        preempt::TIMER_LATENCY,
        preempt::SIGNAL_ROUNDTRIP,
        preempt::GREEN_SWITCH,
        preempt::POLL_FLAG,
        preempt::POLL_FLAG_LATENCY,
        preempt::POLL_FLAG_CHAIN,
        preempt::LOSS_AT_10MS,
        preempt::THROUGHPUT_LOSS,
    ] {
        v.push(preempt::id(f));
    }
    for f in [
        priority::NICE_SHARES,
        priority::UTHREAD_SHARES,
        priority::FRAMES,
        priority::FRAMES_INTERRUPTIONS,
    ] {
        v.push(priority::id(f));
    }
    v.push(priority::share("<a>", "<b>"));
    v.extend([
        latency::id(latency::GAPS),
        latency::longest_gap("<condition>"),
        latency::rt_longest_gap("<condition>"),
        latency::wakeup_lateness("<condition>"),
        coop::score("<mode>"),
    ]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::ids::{placed, ratio, unpinned, CROSS_CPU};

    #[test]
    fn study_ids_are_built_as_the_experiments_write_them() {
        assert_eq!(
            unpinned(&create::id(create::FORK)),
            "create.process.fork.unpinned"
        );
        assert_eq!(
            ratio(&create::id(create::GREEN), create::THREAD),
            "create.green.vs_thread"
        );
        assert_eq!(create::destroy(create::PROCESS), "destroy.process");
        assert_eq!(
            sync::contended(sync::MUTEX_STD, CROSS_CPU),
            "sync.mutex.std.contended.cross_cpu"
        );
        assert_eq!(
            placed(&switch::id(switch::PROCESS, switch::PIPE), CROSS_CPU),
            "switch.process.pipe.cross_cpu"
        );
        assert_eq!(
            shm::read(shm::THREAD, shm::LARGEST),
            "shm.thread.read.64mib"
        );
        assert_eq!(
            throttle::of(throttle::UTHREAD, throttle::BEST_CONCURRENCY),
            "throttle.uthread.best_concurrency"
        );
        assert_eq!(
            throttle::time_at(throttle::KERNEL, &throttle::at(Some(3))),
            "throttle.kernel.time.n3"
        );
        assert_eq!(
            throttle::time_at(throttle::UTHREAD, &throttle::at(None)),
            "throttle.uthread.time.unthrottled"
        );
        assert_eq!(priority::share(0, 10), "priority.share.0_vs_10");
        assert_eq!(
            latency::rt_longest_gap(latency::ANNOYING),
            "latency.rt.annoying.longest_gap"
        );
        assert_eq!(coop::score(coop::PREEMPT_FG), "coop.score.preempt_fg");
    }

    #[test]
    fn latency_ids_read_back() {
        let w = latency::wakeup_lateness("rt.alone");
        assert_eq!(latency::wakeup_case(&w), Some("rt.alone"));
        assert_eq!(latency::wakeup_case("latency.alone.longest_gap"), None);
        assert!(latency::is_rt("latency.rt.annoying.longest_gap"));
        assert!(!latency::is_rt("latency.rtx.longest_gap"));
        assert!(!latency::is_rt("latency.annoying.longest_gap"));
    }
}
