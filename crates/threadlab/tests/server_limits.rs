//! Every server stops on time and keeps to its limits whatever its connections do: frames whose
//! work blocks, pipelined, when it is stopped; a port another server holds; clients that never
//! read, sit idle or send half a frame; STATS from an IPv4 client of a server on `[::]`; a
//! target that trickles its replies. Deadlines here are generous ("it hung"), never timings.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use threadlab::cancel::Cancel;
use threadlab::error::Error;
use threadlab::experiments::server::client::{self, Exchange, Failure, Sources};
use threadlab::subjects::server::protocol::{
    encode_request, parse_response, pattern, Request, KIND_ERROR, KIND_RESPONSE, KIND_STATS,
    RESPONSE_HEADER,
};
use threadlab::subjects::server::{DesignInfo, ServerConfig, DESIGNS};

#[path = "support/servers.rs"]
mod servers;
use servers::{serial, start};

/// The lab's designs that run in this process (the Go server is a program of its own).
fn in_process() -> impl Iterator<Item = &'static &'static DesignInfo> {
    DESIGNS.iter().filter(|d| d.name != "go")
}

/// Reads one reply (header and payload) within `limit`: its kind and payload, or None.
fn reply_kind(s: &mut TcpStream, limit: Duration) -> Option<(u8, Vec<u8>)> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut h = [0u8; RESPONSE_HEADER];
    s.read_exact(&mut h).ok()?;
    let r = parse_response(&h).ok()?;
    let mut body = vec![0u8; r.payload_len as usize];
    s.read_exact(&mut body).ok()?;
    Some((r.kind, body))
}

#[test]
fn a_server_stops_within_seconds_while_pipelined_frames_block() {
    let _one = serial();
    for d in in_process() {
        let Some(server) = start(d, &ServerConfig::loopback()) else {
            continue;
        };
        let addr = server.local_addr();
        // Eight connections with four frames each that block 1 s: 32 s of work queued.
        let mut frame = Vec::new();
        for seq in 0..4 {
            let mut r = Request::echo(seq, 16, 1);
            r.work_block_us = 1_000_000;
            frame.extend_from_slice(&encode_request(&r));
            frame.extend_from_slice(&[7u8; 16]);
        }
        let conns: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(&frame).unwrap();
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        drop(server);
        let took = t.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "{}: stopping took {took:?} while frames' work blocked",
            d.name
        );
        drop(conns);
    }
}

#[test]
fn no_server_starts_on_a_port_another_one_holds() {
    let _one = serial();
    for holder in in_process() {
        let Some(held) = start(holder, &ServerConfig::loopback()) else {
            continue;
        };
        for joiner in in_process() {
            let mut cfg = ServerConfig::loopback();
            cfg.listen = held.local_addr();
            match (joiner.start)(&cfg, &Cancel::never()) {
                Ok(second) => panic!(
                    "{} started on {}, which {} holds",
                    joiner.name,
                    second.local_addr(),
                    holder.name
                ),
                Err(Error::Skip(_)) => {}
                Err(e) => assert!(
                    e.to_string().contains("another program listens there"),
                    "{} on {}'s port: {e}",
                    joiner.name,
                    holder.name
                ),
            }
        }
    }
}

/// A well-behaved client's answer within `limit`: a reply or a BUSY refusal, never silence.
fn answered(addr: SocketAddr, limit: Duration) -> Result<u8, String> {
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| e.to_string())?;
    s.write_all(&encode_request(&Request::echo(1, 0, 1)))
        .map_err(|e| e.to_string())?;
    match reply_kind(&mut s, limit) {
        Some((KIND_RESPONSE, _)) => Ok(KIND_RESPONSE),
        Some((KIND_ERROR, body)) if body.starts_with(&4u16.to_le_bytes()) => Ok(KIND_ERROR),
        other => Err(format!("{other:?}")),
    }
}

#[test]
fn slow_clients_never_keep_a_well_behaved_one_waiting_in_silence() {
    let _one = serial();
    // Deadlines long enough that only the designs' own limits can help.
    let mut cfg = ServerConfig::loopback();
    cfg.frame_deadline = Duration::from_secs(30);
    cfg.idle_timeout = Duration::from_secs(60);
    cfg.prefork_processes = 8;
    cfg.pool_workers = 2;
    cfg.max_payload = 8 << 20;
    for d in in_process() {
        let Some(server) = start(d, &cfg) else {
            continue;
        };
        let addr = server.local_addr();
        // Two clients send large frames and never read the replies.
        let big = {
            let mut f = encode_request(&Request::echo(1, 4 << 20, 1)).to_vec();
            f.extend(std::iter::repeat_n(0u8, 4 << 20));
            f
        };
        let mut held = Vec::new();
        for _ in 0..2 {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_recv_buffer_size(4096).unwrap();
            s.connect(&addr.into()).unwrap();
            let mut s: TcpStream = s.into();
            s.set_write_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            for _ in 0..2 {
                let _ = s.write_all(&big);
            }
            held.push(s);
        }
        // As many idle and half-sent connections as prefork has processes.
        for k in 0..2 * cfg.prefork_processes {
            let mut s = TcpStream::connect(addr).unwrap();
            if k % 2 == 1 {
                s.write_all(&encode_request(&Request::echo(1, 10, 1))[..20])
                    .unwrap();
            }
            held.push(s);
        }
        std::thread::sleep(Duration::from_millis(300));
        for attempt in 0..3 {
            if let Err(e) = answered(addr, Duration::from_secs(3)) {
                panic!(
                    "{}: a well-behaved client (attempt {attempt}) got {e}",
                    d.name
                );
            }
        }
        drop(held);
        drop(server);
    }
}

#[test]
fn stats_answer_an_ipv4_client_of_a_server_on_the_ipv6_wildcard() {
    let _one = serial();
    if TcpListener::bind("[::]:0").is_err() {
        eprintln!("skipped: no IPv6 here");
        return;
    }
    for d in in_process() {
        let mut cfg = ServerConfig::loopback();
        cfg.listen = "[::]:0".parse().unwrap();
        // As `threadlab serve` runs them: forked children answer from the parent's snapshot.
        cfg.stats_snapshots = true;
        let Ok(server) = (d.start)(&cfg, &Cancel::never()) else {
            continue;
        };
        let port = server.local_addr().port();
        let v4: SocketAddr = ([127, 0, 0, 1], port).into();
        client::wait_listening(v4, &Cancel::never()).unwrap();
        let mut s = TcpStream::connect(v4).unwrap();
        s.write_all(&encode_request(&Request::stats(3))).unwrap();
        let got = reply_kind(&mut s, Duration::from_secs(5));
        assert_eq!(
            got.map(|g| g.0),
            Some(KIND_STATS),
            "{}: STATS refused to 127.0.0.1 on [::]",
            d.name
        );
    }
}

#[test]
fn a_target_that_trickles_its_reply_is_given_up_on_after_one_deadline() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut req = [0u8; 32 + 1024];
        let _ = c.read_exact(&mut req);
        // A byte every 100 ms: each read waits far less than the client's timeout.
        for b in std::iter::repeat_n(0u8, 2000) {
            if c.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let pat = pattern(4096);
    let mut s = client::connect(addr, &mut Sources::for_target(addr)).unwrap();
    let t = Instant::now();
    let got = Exchange::new(&pat, 1024).roundtrip(&mut s, 1, 1, false, (0, 0));
    let took = t.elapsed();
    drop(s);
    assert!(
        matches!(got, Err(Failure::Timeout) | Err(Failure::Verify(_))),
        "{got:?}"
    );
    assert!(
        took < client::REPLY_TIMEOUT + Duration::from_secs(3),
        "held for {took:?}: the deadline is per read, not per exchange"
    );
    let _ = server.join();
}
