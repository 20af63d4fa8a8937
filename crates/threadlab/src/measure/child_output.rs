//! What a supervised program says on stderr, drained as it comes (a program never blocks on a
//! full pipe) and kept, bounded, for the error that names why it failed: one path for the
//! stderr of every program the lab starts (the Go toolchain, the Go server and peer, probes,
//! `threadlab serve` children).

use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::error::Result;

/// Kept of a program's stderr: its first 16 KiB (the cause comes first; what follows repeats).
pub const KEPT_BYTES: usize = 16 << 10;

#[derive(Default)]
struct State {
    text: Vec<u8>,
    /// The program closed its stderr (it ended, or closed it).
    closed: bool,
}

/// A program's stderr, read on a thread of its own until the program closes it.
#[derive(Clone, Default)]
pub struct StderrLog {
    inner: Arc<(Mutex<State>, Condvar)>,
}

impl StderrLog {
    /// Starts draining `from`.
    pub fn drain(mut from: impl Read + Send + 'static) -> StderrLog {
        let log = StderrLog::default();
        let me = log.clone();
        let started = std::thread::Builder::new()
            .name("tl-stderr".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let n = match from.read(&mut buf) {
                        Ok(0) | Err(_) => 0,
                        Ok(n) => n,
                    };
                    let (lock, cv) = &*me.inner;
                    let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
                    if n == 0 {
                        st.closed = true;
                        cv.notify_all();
                        return;
                    }
                    let room = KEPT_BYTES.saturating_sub(st.text.len());
                    st.text.extend_from_slice(&buf[..n.min(room)]);
                    cv.notify_all();
                }
            });
        if started.is_err() {
            // No thread: nothing is kept, and the pipe is closed with `from` (the program gets
            // EPIPE on stderr rather than blocking).
            log.inner.0.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        }
        log
    }

    /// What it said so far, trimmed, as one line (lines joined with " | ").
    pub fn text(&self) -> String {
        let st = self.inner.0.lock().unwrap_or_else(|p| p.into_inner());
        one_line(&String::from_utf8_lossy(&st.text))
    }

    /// Waits for the program to close its stderr (it ended), for `limit` at most.
    pub fn wait_closed(&self, limit: Duration) {
        let end = Instant::now() + limit;
        let (lock, cv) = &*self.inner;
        let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
        while !st.closed {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            st = cv
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The first line it writes; None when it closes stderr without one or `limit` passes.
    /// Checks `cancel` every 20 ms: an interruption is `Err(Cancelled)`.
    pub fn first_line(&self, cancel: &Cancel, limit: Duration) -> Result<Option<String>> {
        let end = Instant::now() + limit;
        let (lock, cv) = &*self.inner;
        let mut st = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(i) = st.text.iter().position(|&b| b == b'\n') {
                return Ok(Some(String::from_utf8_lossy(&st.text[..i]).into_owned()));
            }
            if st.closed || Instant::now() >= end {
                return Ok(None);
            }
            drop(st);
            cancel.check()?;
            st = lock.lock().unwrap_or_else(|p| p.into_inner());
            st = cv
                .wait_timeout(st, Duration::from_millis(20))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Lines of a program's message joined into one, blank ones dropped.
fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_s_stderr_is_kept_bounded_and_its_first_line_found() {
        let mut big = b"first line\nsecond\n".to_vec();
        big.extend(std::iter::repeat_n(b'x', 100_000));
        let log = StderrLog::drain(std::io::Cursor::new(big));
        let line = log.first_line(&Cancel::never(), Duration::from_secs(5));
        assert_eq!(line.unwrap().as_deref(), Some("first line"));
        log.wait_closed(Duration::from_secs(5));
        let t = log.text();
        assert!(t.starts_with("first line | second | xxx"), "{t}");
        assert!(t.len() < KEPT_BYTES + 16, "{} bytes kept", t.len());
    }

    #[test]
    fn a_program_that_says_nothing_gives_no_first_line() {
        let log = StderrLog::drain(std::io::Cursor::new(Vec::new()));
        let line = log.first_line(&Cancel::never(), Duration::from_secs(5));
        assert_eq!(line.unwrap(), None);
        assert_eq!(log.text(), "");
    }
}
