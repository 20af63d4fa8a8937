//! `throttle`: the Delphi semaphore throttle (2010s). 64 workers each sum a slice of
//! 1 + 2 + ... + 64·C; a semaphore admits N of them at once. Where does the time stop falling,
//! what does running all 64 at once cost, and what pool size should CPU-bound work use here?
//!
//! Run with kernel threads (a counting semaphore on a mutex and condition variable) and with
//! uthread: one carrier per allowed CPU, the 64 green workers spread over them, all sharing one
//! `uthread::Throttle`.

mod conclusion;
mod figures;
mod plateau;
mod sweep;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::experiments::{Ctx, Experiment, Info, Mode, Outcome};
use crate::measure::placement::{allowed_cpus, physical_cores};
use crate::seeds;

pub use plateau::{
    best_concurrency, best_paired, paired, recommended_pool, rule_text, Best, Paired, Run,
    Standing, Tagged, Verdict,
};

use figures::Found;
use sweep::Sweeper;

pub struct ThrottleExperiment;

pub const WORKERS: u64 = 64;

/// N = this value stands for "unthrottled" in series (as in the study's curve: 65).
pub const UNTHROTTLED_X: usize = crate::results::ids::throttle::UNTHROTTLED_X;

/// The plateau's margin: an N whose time is within this fraction of the fastest N's is on the
/// plateau (a difference this small is not worth a thread).
pub const PLATEAU_MARGIN: f64 = 0.05;

/// 1 + 2 + ... + n, the closed form the workers' total is checked against.
pub fn closed_form_sum(n: u64) -> u64 {
    n * (n + 1) / 2
}

/// The slice of worker `i` of 64: (i·C, (i+1)·C].
pub fn slice(i: u64, per_worker: u64) -> (u64, u64) {
    (i * per_worker + 1, (i + 1) * per_worker)
}

/// Sums lo..=hi one addition at a time. An empty asm statement that claims to change `i` in
/// its register keeps the compiler from the closed form and from vectorising, and touches no
/// memory: `std::hint::black_box(i)`, used before, passed `i` through a stack slot each
/// iteration, and that store and reload set the loop's speed by where the slot fell. Two builds
/// differing only elsewhere ran one kernel-thread worker at a time 15-20% apart (64 x 4M
/// additions: 0.213-0.218 s against 0.246-0.257 s, uthread's workers 0.208-0.215 s in both),
/// which moved the best N between 3 and unthrottled.
///
/// Never inlined, so that every N runs this one copy of the loop. Inlined, the throttled and the
/// unthrottled worker each had a copy at its own address, and on a 2-vCPU Intel Xeon guest the
/// unthrottled one ran faster: 0.102 s against 0.113-0.116 s for every throttled N, N = 64 (64
/// permits for 64 workers: no worker ever waits) included, so in three runs in a row no throttle
/// was the answer. With one copy, N = 64 and unthrottled read 0.115 and 0.112-0.119 s.
#[inline(never)]
pub fn sum_slice(lo: u64, hi: u64) -> u64 {
    let mut acc = 0u64;
    for mut i in lo..=hi {
        // SAFETY: an empty template; it only claims to read and write one register.
        unsafe {
            std::arch::asm!("/* {0} */", inout(reg) i, options(nomem, nostack, preserves_flags))
        };
        acc = acc.wrapping_add(i);
    }
    acc
}

/// The N each runner is swept over, per mode (None: unthrottled).
fn limits(mode: Mode) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
    let kernel: Vec<Option<usize>> = match mode {
        Mode::Tiny => vec![Some(1), Some(2), None],
        Mode::Quick => vec![Some(1), Some(2), Some(3), Some(4), Some(8), Some(64), None],
        Mode::Full => [1, 2, 3, 4, 5, 6, 8, 16, 32, 64]
            .into_iter()
            .map(Some)
            .chain([None])
            .collect(),
    };
    // uthread's plateau starts at its carriers (one per CPU): more admitted at once only queue
    // on the same carriers, so --full leaves out the kernel's 5, 6 and 32.
    let uthread: Vec<Option<usize>> = match mode {
        Mode::Tiny => vec![Some(1), None],
        Mode::Quick => vec![Some(1), Some(2), Some(3), Some(4), None],
        Mode::Full => [1, 2, 3, 4, 8, 16, 64]
            .into_iter()
            .map(Some)
            .chain([None])
            .collect(),
    };
    (kernel, uthread)
}

const INFO: Info = Info {
    name: "throttle",
    study: &seeds::DELPHI_2010S,
    measures: "64 CPU-bound workers admitted N at a time: time and context switches per N, best N, pool size to use",
    rough_secs: [0.3, 10.0, 40.0],
};

impl Experiment for ThrottleExperiment {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn run(&self, ctx: &Ctx, out: &mut Outcome) -> Result<()> {
        // The quick suite's job: 3,000,000 numbers per worker, about 75 ms for all 64 on two
        // CPUs. With 4,000,000 (about 100 ms) the experiment took 13.7-17.6 s of quick suites
        // of 110-119 s on a 2-vCPU Intel Xeon guest, whose bar is 110 s.
        let per_worker: u64 = ctx.mode.pick(20_000, 3_000_000, 10_000_000);
        // Mann-Whitney needs at least 4 runs a side to reach p < 0.05 at all, and `compare`
        // needs 8 a side to test a figure after Holm's correction over the ~106 metrics of a
        // pair of `run create sync switch shm throttle` (7 a side: p >= 5.8e-4, above
        // 0.05 / 106). --full takes 8. The quick suite keeps 7: with 8 the experiment took
        // 11.3, 12.5 and 15.1 s in three suites against 9.0-10.4 s with 7 the same morning,
        // and the suite 105.0-110.3 s against 100.8-103.6.
        let reps = ctx.mode.pick(4, 7, 8);
        let (kernel_limits, uthread_limits) = limits(ctx.mode);
        let cpus = allowed_cpus();
        let carriers = cpus.len().max(1);

        let kernel_run = |l| sweep::run_kernel(l, per_worker);
        let (kernel, best) = Sweeper {
            ctx,
            what: "kernel",
            per_worker,
            cpus: &cpus,
            run: &kernel_run,
        }
        .to_answer(&kernel_limits, reps)?;
        let green_run = |l| sweep::run_uthread(l, per_worker, carriers);
        let (green, green_best) = Sweeper {
            ctx,
            what: "uthread",
            per_worker,
            cpus: &cpus,
            run: &green_run,
        }
        .to_answer(&uthread_limits, reps)?;

        let found = Found {
            kernel,
            best,
            green,
            green_best,
            reps,
            carriers,
            physical: physical_cores(&cpus).unwrap_or(cpus.len()),
            logical: cpus.len(),
            cg: ctx
                .env
                .cgroup_cpu_limit
                .map_or("no cgroup CPU quota".to_string(), |c| {
                    format!("cgroup quota {c:.2} CPUs")
                }),
            work: figures::work_text(per_worker, reps),
        };
        figures::series(&found, out);
        let penalty = found
            .penalty()
            .ok_or_else(|| Error::Fail("no throttle penalty: a kernel row was not run".into()))?;
        figures::metrics(&found, penalty, out)?;
        figures::per_n_metrics(&found, out);
        out.tables.push(figures::table(&found));
        out.conclusion = Some(conclusion::conclusion(&found, penalty));
        Ok(())
    }
}
