//! Address conversions round-trip.

use super::*;

#[test]
fn round_trips() {
    for s in ["127.0.0.1:80", "[::1]:8080", "[fe80::1%3]:1", "0.0.0.0:0"] {
        let a: SocketAddr = s.parse().unwrap();
        let raw = RawAddr::from(&a);
        assert_eq!(SocketAddr::try_from(&raw).unwrap(), a, "{s}");
    }
}
