//! What the experiments measure that is not an experiment: lock implementations and the peer
//! runtimes (uthread, Tokio, Go) measured beside the kernel's threads, and the server designs the
//! `server` experiment measures.

pub mod go_build;
pub mod locks;
pub mod peers;
pub mod server;
