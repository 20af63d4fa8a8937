//! What else wants the CPUs: load average and runnable tasks, read at the start and end of a run.

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LoadAvg {
    pub(super) avg: [f64; 3],
    /// Currently runnable scheduling entities, including the reader.
    pub(super) running: u64,
    pub(super) total: u64,
}

/// Parses /proc/loadavg, e.g. "0.12 0.04 0.01 1/84 4417".
pub(super) fn parse_loadavg(s: &str) -> Option<LoadAvg> {
    let mut it = s.split_whitespace();
    let mut avg = [0.0; 3];
    for slot in &mut avg {
        let v: f64 = it.next()?.parse().ok()?;
        if !v.is_finite() {
            return None;
        }
        *slot = v;
    }
    let (r, t) = it.next()?.split_once('/')?;
    Some(LoadAvg {
        avg,
        running: r.parse().ok()?,
        total: t.parse().ok()?,
    })
}

/// The `procs_running` line of /proc/stat.
pub(super) fn parse_procs_running(s: &str) -> Option<u64> {
    s.lines().find_map(|l| {
        let rest = l.strip_prefix("procs_running")?;
        rest.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadavg() {
        let l = parse_loadavg("0.12 0.04 0.01 1/84 4417\n").unwrap();
        assert_eq!(l.avg, [0.12, 0.04, 0.01]);
        assert_eq!((l.running, l.total), (1, 84));
        let l = parse_loadavg("12.50 8.25 3.00 17/1234 99999").unwrap();
        assert_eq!(l.avg, [12.5, 8.25, 3.0]);
        assert_eq!(l.running, 17);
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("0.1 0.2"), None);
        assert_eq!(parse_loadavg("0.1 0.2 0.3 x"), None);
        assert_eq!(parse_loadavg("nan 0.2 0.3 1/2 3"), None);
    }

    #[test]
    fn procs_running() {
        let stat =
            "cpu  1 2 3 4\nctxt 123\nbtime 1\nprocesses 4417\nprocs_running 3\nprocs_blocked 0\n";
        assert_eq!(parse_procs_running(stat), Some(3));
        assert_eq!(parse_procs_running("cpu 1 2 3"), None);
    }
}
