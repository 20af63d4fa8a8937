//! The network stack's limits a server benchmark runs into before any thread does: the accept
//! backlog, the SYN backlog, TIME_WAIT reuse and the ephemeral port range.

/// The networking sysctls, each `None` when unreadable (a network namespace can hide them).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct NetSysctls {
    /// `net.core.somaxconn`: caps every listen() backlog, whatever the server asks for.
    pub(super) somaxconn: Option<u64>,
    /// `net.ipv4.tcp_max_syn_backlog`: half-open connections kept before SYNs are dropped or
    /// answered with cookies.
    pub(super) tcp_max_syn_backlog: Option<u64>,
    /// `net.ipv4.tcp_tw_reuse`: 0 off, 1 on, 2 loopback only; decides whether a load generator
    /// that opens many short connections runs out of ports.
    pub(super) tcp_tw_reuse: Option<u32>,
    /// `net.ipv4.ip_local_port_range`: the ephemeral ports one client address can use.
    pub(super) ip_local_port_range: Option<[u32; 2]>,
    /// `net.core.busy_read`: µs a blocking read spins on the device queue before sleeping
    /// (0: never), for every socket without its own SO_BUSY_POLL.
    pub(super) busy_read: Option<u64>,
    /// `net.core.busy_poll`: the same for poll and select.
    pub(super) busy_poll: Option<u64>,
}

/// Reads the sysctls through `read`, which maps a path under /proc/sys to the file's text, so
/// that the same code runs on captured text in tests.
pub(super) fn net_sysctls(read: impl Fn(&str) -> Option<String>) -> NetSysctls {
    fn num<T: std::str::FromStr>(text: Option<String>) -> Option<T> {
        text.and_then(|s| s.trim().parse().ok())
    }
    NetSysctls {
        somaxconn: num(read("net/core/somaxconn")),
        tcp_max_syn_backlog: num(read("net/ipv4/tcp_max_syn_backlog")),
        tcp_tw_reuse: num(read("net/ipv4/tcp_tw_reuse")),
        ip_local_port_range: read("net/ipv4/ip_local_port_range")
            .as_deref()
            .and_then(parse_port_range),
        busy_read: num(read("net/core/busy_read")),
        busy_poll: num(read("net/core/busy_poll")),
    }
}

/// `ip_local_port_range`: two numbers separated by a tab, e.g. "32768\t60999\n".
fn parse_port_range(s: &str) -> Option<[u32; 2]> {
    let mut it = s.split_whitespace().map(str::parse::<u32>);
    let low = it.next()?.ok()?;
    let high = it.next()?.ok()?;
    (it.next().is_none() && low <= high).then_some([low, high])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn sysctls_from_captured_text() {
        // As read on a Debian 12 guest (kernel 6.18).
        let files: HashMap<&str, &str> = [
            ("net/core/somaxconn", "4096\n"),
            ("net/ipv4/tcp_max_syn_backlog", "2048\n"),
            ("net/ipv4/tcp_tw_reuse", "2\n"),
            ("net/ipv4/ip_local_port_range", "32768\t60999\n"),
            ("net/core/busy_read", "0\n"),
            ("net/core/busy_poll", "0\n"),
        ]
        .into_iter()
        .collect();
        let n = net_sysctls(|p| files.get(p).map(|s| s.to_string()));
        assert_eq!(
            n,
            NetSysctls {
                somaxconn: Some(4096),
                tcp_max_syn_backlog: Some(2048),
                tcp_tw_reuse: Some(2),
                ip_local_port_range: Some([32768, 60999]),
                busy_read: Some(0),
                busy_poll: Some(0),
            }
        );
        // A namespace that hides /proc/sys/net: every value unknown, nothing invented.
        assert_eq!(net_sysctls(|_| None), NetSysctls::default());
    }

    #[test]
    fn port_ranges() {
        assert_eq!(parse_port_range("1024 65535"), Some([1024, 65535]));
        assert_eq!(parse_port_range("32768\t60999\n"), Some([32768, 60999]));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("32768"), None);
        assert_eq!(parse_port_range("a b"), None);
        assert_eq!(parse_port_range("1 2 3"), None);
    }
}
