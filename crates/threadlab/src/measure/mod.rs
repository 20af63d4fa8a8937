//! How figures are taken: clock and sampler, statistics, placement and scheduling, child
//! processes, environment.

pub mod env;
pub mod placement;
pub mod process;
pub mod sampler;
pub mod sched;
pub mod stats;
