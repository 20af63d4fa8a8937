//! Server designs in a test: started and listening, one test at a time.

use std::sync::Mutex;

use threadlab::cancel::Cancel;
use threadlab::error::Error;
use threadlab::experiments::server::client;
use threadlab::subjects::server::{DesignInfo, Server, ServerConfig};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held by a test for its whole length: the tests share the process's descriptors, threads and
/// children, which they count.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// `d` running with `cfg` and listening; None (the reason on stderr) when it cannot run here.
pub fn start(d: &DesignInfo, cfg: &ServerConfig) -> Option<Box<dyn Server>> {
    match (d.start)(cfg, &Cancel::never()) {
        Ok(s) => {
            client::wait_listening(s.local_addr(), &Cancel::never()).unwrap();
            Some(s)
        }
        Err(Error::Skip(why)) => {
            eprintln!("{}: skipped ({why})", d.name);
            None
        }
        Err(e) => panic!("{}: {e}", d.name),
    }
}
