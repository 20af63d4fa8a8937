//! How figures are taken: clock and sampler, statistics, placement and scheduling, child
//! processes, environment.

pub mod child_output;
pub mod drift;
pub mod driver;
pub mod env;
pub mod host;
pub mod mode;
pub mod pair;
pub mod placement;
pub mod probe;
pub mod process;
pub mod sampler;
pub mod sched;
pub mod settings;
pub mod significance;
pub mod spawn;
pub mod stats;
pub mod units;
