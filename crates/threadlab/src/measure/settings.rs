//! Settings read from environment variables, each validated with its range in one place: the
//! CLI checks them all before a run (a bad value is one line and exit status 2), and the
//! experiments read them through the same functions.

use crate::error::{Error, Result};

/// `THREADLAB_LATENCY_THRESHOLD_US`: the gap the latency probe counts, in µs (the BeOS study's
/// 256 by default).
pub const LATENCY_THRESHOLD_VAR: &str = "THREADLAB_LATENCY_THRESHOLD_US";
pub const DEFAULT_LATENCY_THRESHOLD_US: u64 = 256;
/// A gap threshold above one second would count nothing the probe can see in its runs.
pub const MAX_LATENCY_THRESHOLD_US: u64 = 1_000_000;

/// The latency threshold in µs, from the environment or the default.
pub fn latency_threshold_us() -> Result<u64> {
    let Some(v) = std::env::var_os(LATENCY_THRESHOLD_VAR) else {
        return Ok(DEFAULT_LATENCY_THRESHOLD_US);
    };
    let text = v.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_LATENCY_THRESHOLD_US).contains(&n) => Ok(n),
        _ => Err(Error::Usage(format!(
            "{LATENCY_THRESHOLD_VAR}={text:?} is not a whole number of microseconds from 1 to \
             {MAX_LATENCY_THRESHOLD_US}; unset it for the study's {DEFAULT_LATENCY_THRESHOLD_US}"
        ))),
    }
}

/// Checks every setting; the first bad one is the error.
pub fn check_all() -> Result<()> {
    latency_threshold_us().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The variable is process-wide, so one test walks through every case in order.
    #[test]
    fn the_threshold_is_validated_with_its_range() {
        std::env::remove_var(LATENCY_THRESHOLD_VAR);
        assert_eq!(latency_threshold_us().unwrap(), 256);
        for bad in ["0", "-1", "1000001", "18446744073709551616", "abc", ""] {
            std::env::set_var(LATENCY_THRESHOLD_VAR, bad);
            assert!(
                matches!(latency_threshold_us(), Err(Error::Usage(_))),
                "{bad}"
            );
        }
        std::env::set_var(LATENCY_THRESHOLD_VAR, "100");
        assert_eq!(latency_threshold_us().unwrap(), 100);
        std::env::remove_var(LATENCY_THRESHOLD_VAR);
    }
}
