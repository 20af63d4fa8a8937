//! threadlab: a thread performance laboratory for Linux.
//!
//! Data flows one way: the CLI picks experiments, each experiment measures through `measure`,
//! returns `results`, and `report` renders them. The binary (`main.rs`, `cli.rs`) is thin.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cancel;
pub mod cli;
pub mod error;
pub mod experiments;
pub mod launch;
pub mod measure;
pub mod proctree;
pub mod report;
pub mod results;
pub mod runner;
pub mod seeds;
pub mod subjects;
pub mod sys;
