//! Peer runtimes measured beside the kernel's threads in the same run, interleaved with them:
//! uthread (this workspace's green threads), Tokio's current-thread scheduler and Go's
//! goroutines. `create` and `switch` put their rows in one interleaved group with the kernel
//! rows, so all are sampled the same way (warm-up, calibrated batches, >= 7 rounds).
//! The switch experiment's channel rows (`experiments/switch/channels.rs`) and the create
//! experiment's burst rows on two CPUs (`experiments/create/balance.rs`) measure groups of
//! their own, with the same sampler, from these runtimes.

pub mod go;
pub mod green;
pub mod tokio_rt;
