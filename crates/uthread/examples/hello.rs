//! A tour of the API: cooperative and preemptive threads, priorities, a throttle, a
//! start-suspended thread that is cancelled, and synchronize/queue in a console program.
//!
//! `cargo run -p uthread --example hello`

// Preemptive threads that allocate need this (see the crate README, "Preemption safety").
#[global_allocator]
static ALLOC: uthread::PreemptSafeAlloc = uthread::PreemptSafeAlloc::system();

use std::sync::Arc;
use std::time::{Duration, Instant};
use uthread::{Builder, JoinOutcome, Mode, Priority, Runtime, Throttle};

fn busy(ms: u64) -> u64 {
    let end = Instant::now() + Duration::from_millis(ms);
    let mut n = 0u64;
    while Instant::now() < end {
        n = std::hint::black_box(n + 1);
    }
    n
}

fn main() {
    let rt = Runtime::builder()
        .quantum(Duration::from_millis(1))
        .build()
        .expect("valid configuration");
    rt.block_on(|| {
        // Two preemptive spinners share the carrier without ever yielding.
        let spinners: Vec<_> = (0..2)
            .map(|i| {
                Builder::new()
                    .name(format!("spinner-{i}"))
                    .mode(Mode::Preemptive)
                    .priority(Priority::TimeSharing(10))
                    .spawn(move || busy(20))
                    .expect("spawn")
            })
            .collect();

        // A throttle admits two bodies at a time.
        let throttle = Arc::new(Throttle::new(2));
        let workers: Vec<_> = (0..6)
            .map(|i| {
                let t = throttle.clone();
                uthread::spawn(move || {
                    t.run(|| {
                        uthread::sleep(Duration::from_millis(2));
                        // Run on the runtime owner (the OS thread in block_on) and wait.
                        uthread::synchronize(move || {
                            println!("worker {i} reports via synchronize")
                        });
                    })
                })
            })
            .collect();

        // A suspended thread that is cancelled never runs; join says so.
        let never = Builder::new()
            .start_suspended(true)
            .spawn(|| unreachable!())
            .expect("spawn");
        assert!(never.cancel());
        assert!(matches!(never.join(), JoinOutcome::Cancelled));

        uthread::queue(|| println!("queued: runs later on the owner"));

        for h in workers {
            h.join();
        }
        for h in spinners {
            let name = h.name().unwrap_or("?").to_string();
            println!("{name}: {:?} iterations", h.join().finished());
        }
    });
    println!("{:#?}", rt.stats());
}
