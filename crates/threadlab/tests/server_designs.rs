//! Every server design answers the protocol: short and long connections, verified echoes,
//! the design id in each reply, STATS on loopback; and it stops cleanly. Every design in the
//! registry is documented and drawn.

use std::time::Duration;

use threadlab::cancel::Cancel;
use threadlab::error::Error;
use threadlab::experiments::server::client::{self, Exchange, Sources};
use threadlab::measure::units::Unit;
use threadlab::report::html;
use threadlab::results::{ExperimentResult, Metric};
use threadlab::subjects::server::protocol::{pattern, ErrorCode};
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

/// A non-loopback IPv4 address of this machine, if it has one.
fn non_loopback_ipv4() -> Option<std::net::Ipv4Addr> {
    let mut found = None;
    // SAFETY: getifaddrs fills a list the caller frees with freeifaddrs; each entry's ifa_addr
    // is null or points to a sockaddr of the family it names, valid until the list is freed.
    unsafe {
        let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut p = list;
        while !p.is_null() && found.is_none() {
            let a = (*p).ifa_addr;
            if !a.is_null() && (*a).sa_family as libc::c_int == libc::AF_INET {
                let sin = &*(a as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !ip.is_loopback() && !ip.is_unspecified() {
                    found = Some(ip);
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found
}

/// STATS tells a peer how the server is built and loaded, so every design answers it only on
/// loopback (unless allowed) and refuses it to any other peer, which it goes on serving.
#[test]
fn every_design_refuses_stats_to_a_remote_peer_and_still_echoes_it() {
    let Some(ip) = non_loopback_ipv4() else {
        eprintln!("skipped: this machine has no non-loopback IPv4 address to connect from");
        return;
    };
    let pat = pattern(1024);
    for d in DESIGNS {
        let mut cfg = ServerConfig::loopback();
        cfg.listen = "0.0.0.0:0".parse().unwrap();
        cfg.prefork_processes = 2;
        let server = match (d.start)(&cfg, &Cancel::never()) {
            Ok(s) => s,
            Err(Error::Skip(reason)) => {
                eprintln!("{} skipped: {reason}", d.name);
                continue;
            }
            Err(e) => panic!("{}: {e}", d.name),
        };
        let addr = std::net::SocketAddr::from((ip, server.local_addr().port()));
        client::wait_listening(addr, &Cancel::never()).unwrap();
        let mut sources = Sources::for_target(addr);
        let mut c = client::connect(addr, &mut sources).unwrap();
        match client::stats(&mut c, 3) {
            Err(client::Failure::Refused(ErrorCode::Forbidden)) => {}
            other => panic!("{}: STATS from {ip} answered {other:?}", d.name),
        }
        let mut c = client::connect(addr, &mut sources).unwrap();
        let mut ex = Exchange::new(&pat, 100);
        let h = ex
            .roundtrip(&mut c, 1, 4, false, (0, 0))
            .unwrap_or_else(|f| panic!("{}: echo from {ip} after the refusal: {f}", d.name));
        assert_eq!(h.design, d.id, "{}", d.name);
    }
}

/// Where a design must appear once it is in `DESIGNS`: `threadlab serve --help` (checked by
/// `serve_cli`), the ids docs/results-schema.md documents, and the report's server section.
/// None of these lists designs by hand, so a new design needs no edit there; this fails if
/// one starts to.
#[test]
fn every_registered_design_is_documented_and_drawn() {
    let doc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
    let doc = std::fs::read_to_string(doc).expect("docs/results-schema.md exists");
    let patterns: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("| `server."))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    let server_section = &doc[doc.find("### server").expect("a server section")..];
    assert!(
        server_section.contains("threadlab serve --help"),
        "the schema's server section should name where the designs are listed"
    );
    let stats = ["short.1kib.mean", "long.1kib.mean", "peak", "rate.p99"];
    for d in DESIGNS {
        for s in stats {
            let id = format!("server.{}.{s}", d.name);
            assert!(
                patterns.iter().any(|p| matches_pattern(&id, p)),
                "{id} is not documented in docs/results-schema.md"
            );
        }
    }

    let mut e: ExperimentResult = serde_json::from_value(serde_json::json!({
        "name": "server", "study": "s", "status": "ok", "wall_s": 1.0, "metrics": []
    }))
    .expect("a minimal experiment result");
    for (i, d) in DESIGNS.iter().enumerate() {
        for (s, unit) in [
            ("short.1kib.mean", Unit::Us),
            ("long.1kib.mean", Unit::Us),
            ("cpu_per_request", Unit::Us),
            ("peak", Unit::PerS),
        ] {
            let v = 10.0 + i as f64;
            let id = format!("server.{}.{s}", d.name);
            e.metrics.push(
                Metric::from_values(&id, unit, &[v, v * 1.01, v * 0.99], 1, "-", "").unwrap(),
            );
        }
    }
    let charts = html::server::charts(&e);
    let drawn: String = charts.iter().map(|c| c.svg.as_str()).collect();
    for d in DESIGNS {
        assert!(
            drawn.contains(d.name),
            "the report's server section leaves out {}",
            d.name
        );
    }
}

/// `<x>` in a documented id matches any one segment.
fn matches_pattern(id: &str, pattern: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (id.split('.').collect(), pattern.split('.').collect());
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, p)| x == p || (p.starts_with('<') && p.ends_with('>')))
}
