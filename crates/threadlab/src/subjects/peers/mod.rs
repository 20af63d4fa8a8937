//! Peer runtimes measured beside the kernel's threads in the same run, interleaved with them:
//! uthread (this workspace's green threads), Tokio's current-thread scheduler and Go's
//! goroutines. `create` and `switch` put their rows in one interleaved group with the kernel
//! rows, so all are sampled the same way (warm-up, calibrated batches, >= 7 rounds).
//! `channels` (the switch experiment's channel rows) and `balance` (the create experiment's
//! burst rows on two CPUs) measure groups of their own, with the same sampler.

pub mod balance;
pub mod channels;
pub mod go;
pub mod green;
pub mod tokio_rt;
