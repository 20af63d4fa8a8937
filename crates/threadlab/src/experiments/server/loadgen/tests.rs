//! The generator against live servers and its own arithmetic: plans, verification, saturation, the listen counters.

use super::*;

#[test]
fn listen_counters_are_read_by_name() {
    let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops TW\n\
                TcpExt: 0 7 9 3\n\
                IpExt: InNoRoutes\nIpExt: 0\n";
    assert_eq!(parse_listen_counters(text), Some((7, 9)));
    assert_eq!(parse_listen_counters("IpExt: a\nIpExt: 1\n"), None);
    if std::path::Path::new("/proc/net/netstat").exists() {
        assert!(listen_counters().is_some());
    }
}
