//! Every server design answers the protocol: short and long connections, verified echoes,
//! the design id in each reply, STATS on loopback; and it stops cleanly.

use std::time::Duration;

use threadlab::cancel::Cancel;
use threadlab::error::Error;
use threadlab::experiments::server::client::{self, Exchange, Sources};
use threadlab::subjects::server::protocol::pattern;
use threadlab::subjects::server::{ServerConfig, DESIGNS};

#[test]
fn every_design_echoes_short_and_long_connections() {
    let pat = pattern(70_000);
    for d in DESIGNS {
        let mut cfg = ServerConfig::loopback();
        cfg.prefork_processes = 4;
        let server = match (d.start)(&cfg, &Cancel::never()) {
            Ok(s) => s,
            Err(Error::Skip(reason)) => {
                eprintln!("{} skipped: {reason}", d.name);
                assert!(!reason.is_empty());
                continue;
            }
            Err(e) => panic!("{}: {e}", d.name),
        };
        let addr = server.local_addr();
        client::wait_listening(addr, &Cancel::never()).unwrap();
        let mut sources = Sources::for_target(addr);
        for size in [0usize, 1, 1024, 65_536] {
            let mut ex = Exchange::new(&pat, size);
            for seq in 0..3u32 {
                let mut s = client::connect(addr, &mut sources).unwrap();
                let h = ex
                    .roundtrip(&mut s, seq, 7, true, (0, 0))
                    .unwrap_or_else(|f| panic!("{} short {size}: {f}", d.name));
                assert_eq!(h.design, d.id, "{}", d.name);
            }
            let mut s = client::connect(addr, &mut sources).unwrap();
            let mut txns = Vec::new();
            for seq in 0..20u32 {
                let h = ex
                    .roundtrip(&mut s, seq, 9, false, (0, 0))
                    .unwrap_or_else(|f| panic!("{} long {size}: {f}", d.name));
                txns.push(h.txn);
            }
            assert!(txns.windows(2).all(|w| w[1] > w[0]), "{}: {txns:?}", d.name);
        }
        // Work fields: a 2 ms block is waited for, and the service time the server reports
        // includes it.
        let mut s = client::connect(addr, &mut sources).unwrap();
        let mut ex = Exchange::new(&pat, 10);
        let h = ex.roundtrip(&mut s, 1, 1, false, (100, 2000)).unwrap();
        assert!(h.service_ns >= 2_000_000, "{}: {}", d.name, h.service_ns);
        drop(s);
        if !matches!(d.name, "fork_per_client" | "prefork") {
            let mut c = client::connect(addr, &mut sources).unwrap();
            let st = client::stats(&mut c, 5).unwrap_or_else(|f| panic!("{}: {f}", d.name));
            assert!(st.threads >= 1 && st.rss_bytes > 0, "{}: {st:?}", d.name);
        }
        drop(server);
        // Stopped: nothing listens any more.
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
            "{} still listens after it was dropped",
            d.name
        );
    }
}
