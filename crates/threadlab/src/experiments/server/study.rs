//! The study's pattern (section 5, Figs. 4 and 5): one client, sequential, a short connection
//! (connect, one request, close) or a long one (50 requests), every design at the same size
//! measured interleaved, on the same CPU as the server and across CPUs.

use crate::error::Result;
use crate::experiments::{Ctx, Interleaved, Outcome};
use crate::measure::placement::PinGuard;
use crate::measure::stats;
use crate::measure::units::Unit;
use crate::results::ids::server::{self as sid, stat, Connection};
use crate::results::{Metric, Series};
use crate::seeds;

use super::client::{self, Exchange, Sources};
use super::setup::{Cpus, Sizes};
use super::Running;

pub use crate::results::ids::server::size_label;

/// The id of a study row: `server.<design>[.same_cpu].<short|long>.<size>.mean`.
pub fn row_id(design: &str, same_cpu: bool, long: bool, size: u32) -> String {
    Connection {
        design,
        same_cpu,
        long,
        size: &size_label(size),
        statistic: stat::MEAN,
    }
    .id()
}

/// The id of the study's fork/thread ratio for one kind of connection and size.
pub fn ratio_id(same_cpu: bool, long: bool, size: u32) -> String {
    sid::fork_ratio(same_cpu, long, &size_label(size))
}

/// The id of the Fig. 5 example's figure `statistic` (first request, or the rest) for `design`:
/// a 10 KiB long connection with client and server on one CPU.
fn first_request(design: &str, statistic: &str) -> String {
    Connection {
        design,
        same_cpu: true,
        long: true,
        size: &size_label(10 << 10),
        statistic,
    }
    .id()
}

/// The two designs the study compared.
pub const THREAD: &str = sid::THREAD_PER_CLIENT;
pub const FORK: &str = sid::FORK_PER_CLIENT;

/// Measures the study's rows for every running design, in both placements.
pub fn measure(
    ctx: &Ctx,
    out: &mut Outcome,
    servers: &[Running],
    cpus: &Cpus,
    sizes: &Sizes,
    pattern: &[u8],
) -> Result<()> {
    let mut placements = Vec::new();
    if cpus.apart || cpus.remote.is_some() {
        placements.push((false, cpus.client));
    }
    if cpus.remote.is_none() {
        placements.push((true, cpus.same_cpu()));
    }
    let forks = ForkServers::start(ctx, servers)?;
    for &(same, client_cpu) in &placements {
        let _pin = PinGuard::pin(client_cpu)?;
        let where_ = cpus.placement(client_cpu);
        let mut group = Interleaved::new();
        let mut ratio_sizes = Vec::new();
        for (i, r) in servers.iter().enumerate() {
            let name = r.info.name;
            let (addr, fork_state) = forks.addr_and_note(i, r);
            let study_design = name == THREAD || name == FORK;
            // The sizes are the study's question about its two designs (Figs. 4 and 5); the
            // others answer at 1 KiB, beside them.
            let row_sizes: Vec<u32> = if study_design && !same {
                sizes.study_sizes.to_vec()
            } else {
                vec![1024]
            };
            for &size in &row_sizes {
                if study_design && name == THREAD && !ratio_sizes.contains(&size) {
                    ratio_sizes.push(size);
                }
                let mut sources = Sources::for_target(addr);
                let mut ex = Exchange::new(pattern, size as usize);
                let mut seq = 0u32;
                group.row(
                    &row_id(name, same, false, size),
                    Unit::Us,
                    &where_,
                    format!(
                        "the study's short connection to {name}: connect (source address rotated \
                         over 127.0.0.0/8), one {} request marked CLOSE_AFTER, its echo verified \
                         byte by byte, close; per connection, connect included, as Fig. 4 timed \
                         it; one client, sequential{}",
                        size_label(size),
                        if r.info.model == crate::subjects::server::Model::Processes {
                            fork_state
                        } else {
                            ""
                        }
                    ),
                    move |n| client::short_batch(addr, &mut sources, &mut ex, n, &mut seq),
                );
                let mut sources = Sources::for_target(addr);
                let mut ex = Exchange::new(pattern, size as usize);
                let mut seq = 0u32;
                let per = sizes.long_requests;
                group.row(
                    &row_id(name, same, true, size),
                    Unit::Us,
                    &where_,
                    format!(
                        "the study's long connection to {name}: connect, {per} requests of {} \
                         one after another (each echo verified), close; per request = the \
                         connection's time / {per}, connect included, as Fig. 5 averaged it",
                        size_label(size)
                    ),
                    // One operation is one request: n requests on ceil(n / per) connections, the
                    // time scaled to n.
                    move |n| {
                        let conns = n.div_ceil(per as u64).max(1);
                        let (took, _, _) =
                            client::long_batch(addr, &mut sources, &mut ex, conns, per, &mut seq)?;
                        Ok(took.mul_f64(n as f64 / (conns * per as u64) as f64))
                    },
                );
            }
        }
        let both = servers.iter().any(|r| r.info.name == THREAD)
            && servers.iter().any(|r| r.info.name == FORK);
        if both {
            for &size in &ratio_sizes {
                for long in [false, true] {
                    group.ratio(
                        &ratio_id(same, long, size),
                        &row_id(FORK, same, long, size),
                        &row_id(THREAD, same, long, size),
                        if long {
                            "the study: fork and thread servers converge on long connections (Fig. 5)"
                        } else {
                            "the study: 4.7 / 4.0 ms = 1.18 for 1 KB (Fig. 4)"
                        },
                    );
                }
            }
        }
        group.measure(ctx, out)?;
    }
    figure_series(out, servers, sizes, cpus);
    first_vs_rest(ctx, out, servers, &forks, cpus, sizes, pattern)?;
    Ok(())
}

/// Figs. 4 and 5 as curves: time against size, for each design measured at several sizes.
fn figure_series(out: &mut Outcome, servers: &[Running], sizes: &Sizes, cpus: &Cpus) {
    let same = !cpus.apart && cpus.remote.is_none();
    for long in [false, true] {
        for r in servers {
            let name = r.info.name;
            let mut xs = Vec::new();
            let mut ys = Vec::new();
            for &size in sizes.study_sizes {
                if let Some(m) = out.median(&row_id(name, same, long, size)) {
                    xs.push(size as f64);
                    ys.push(m);
                }
            }
            if xs.len() < 2 {
                continue;
            }
            let historical = match (long, name) {
                (false, THREAD) => Some(seeds::server_fig4_point(4.0)),
                (false, FORK) => Some(seeds::server_fig4_point(4.7)),
                _ => None,
            };
            out.series.push(Series {
                id: sid::figure_series(if long { 5 } else { 4 }, name),
                x_label: "request size".into(),
                x_unit: Unit::Bytes,
                y_label: if long {
                    "mean time per request, 50 per connection".into()
                } else {
                    "time per short connection".into()
                },
                y_unit: Unit::Us,
                x: xs,
                y: ys,
                note: format!(
                    "{} ({})",
                    if long {
                        "Fig. 5 redrawn: long connections; the study gives no point values, only that the two servers converge"
                    } else {
                        "Fig. 4 redrawn: short connections; the study's one stated point is 1 KB: fork 4.7 ms, thread 4.0 ms"
                    },
                    cpus.placement(if same { cpus.same_cpu() } else { cpus.client })
                ),
                historical,
            });
        }
    }
}

/// Where the fork-per-connection design serves the study's rows from. A fork copies the forking
/// process. The study's heavy-weight server forked its own small program; forked from the lab,
/// the rows would measure the lab's size instead, which grows with everything measured before
/// (146 MiB after a full suite, which made a fork 7.5 ms). So that design serves these rows from
/// a fresh `threadlab serve` process, or from the lab when one cannot be started (said in the
/// note).
struct ForkServers {
    lab_note: String,
    /// (index in `servers`, the fresh server, its note).
    fresh: Vec<(usize, Box<dyn crate::subjects::server::Server>, String)>,
}

impl ForkServers {
    fn start(ctx: &Ctx, servers: &[Running]) -> Result<ForkServers> {
        let lab_mib = crate::subjects::server::usage::rss_bytes(None) as f64 / 1048576.0;
        let lab_note = format!(
            "; each fork copies the lab, {} mappings and {lab_mib:.0} MiB resident (no fresh \
             `threadlab serve` process could be started)",
            std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count()),
        );
        let mut fresh = Vec::new();
        for (i, r) in servers.iter().enumerate() {
            if r.info.name != FORK || r.server.is_remote() || r.server.program_pid().is_some() {
                continue;
            }
            match crate::subjects::server::child::spawn(r.info, &r.cfg, ctx.cancel) {
                Ok(child) => {
                    let pid = child.program_pid();
                    let maps = pid
                        .and_then(|p| std::fs::read_to_string(format!("/proc/{p}/maps")).ok())
                        .map_or(0, |m| m.lines().count());
                    let note = format!(
                        "; served by a fresh `threadlab serve` process ({maps} mappings, {:.1} \
                         MiB resident) whose forks copy that, as the study's server forked its \
                         own small program (the lab itself is {lab_mib:.0} MiB now)",
                        crate::subjects::server::usage::rss_bytes(pid) as f64 / 1048576.0,
                    );
                    fresh.push((i, child, note));
                }
                Err(e @ crate::error::Error::Cancelled(_)) => return Err(e),
                Err(_) => {}
            }
        }
        Ok(ForkServers { lab_note, fresh })
    }

    /// The address to send the study's requests to for `servers[i]`, and what its note says
    /// about what a fork copies.
    fn addr_and_note(&self, i: usize, r: &Running) -> (std::net::SocketAddr, &str) {
        match self.fresh.iter().find(|(j, _, _)| *j == i) {
            Some((_, s, note)) => (s.local_addr(), note.as_str()),
            None => (r.server.local_addr(), self.lab_note.as_str()),
        }
    }
}

/// The study's Fig. 5 example, "10K from the same machine took 1.469 us the first time, but
/// then ... around 0.45 us": the first request of a long connection against the rest, for the
/// two designs the study compared, connections alternating between them.
fn first_vs_rest(
    ctx: &Ctx,
    out: &mut Outcome,
    servers: &[Running],
    forks: &ForkServers,
    cpus: &Cpus,
    sizes: &Sizes,
    pattern: &[u8],
) -> Result<()> {
    const SIZE: u32 = 10 << 10;
    let pair: Vec<(&Running, std::net::SocketAddr, &str)> = servers
        .iter()
        .enumerate()
        .filter(|(_, r)| r.info.name == THREAD || r.info.name == FORK)
        .map(|(i, r)| {
            let (addr, note) = forks.addr_and_note(i, r);
            (r, addr, if r.info.name == FORK { note } else { "" })
        })
        .collect();
    if pair.is_empty() || cpus.remote.is_some() {
        return Ok(());
    }
    ctx.step("first request of a long connection vs the rest")?;
    let _pin = PinGuard::pin(cpus.same_cpu())?;
    let per = sizes.long_requests;
    let mut firsts = vec![Vec::new(); pair.len()];
    let mut rests = vec![Vec::new(); pair.len()];
    let mut ex = Exchange::new(pattern, SIZE as usize);
    let mut sources: Vec<Sources> = pair
        .iter()
        .map(|&(_, addr, _)| Sources::for_target(addr))
        .collect();
    let mut seq = 0u32;
    for k in 0..sizes.first_rest_conns + 1 {
        for (i, &(_, addr, _)) in pair.iter().enumerate() {
            ctx.cancel.check()?;
            let (_, first, rest) =
                client::long_batch(addr, &mut sources[i], &mut ex, 1, per, &mut seq)?;
            // The first connection of each warms up and is not kept.
            if k > 0 {
                firsts[i].push(first.as_secs_f64() * 1e6);
                rests[i].push(rest.as_secs_f64() * 1e6 / (per - 1) as f64);
            }
        }
    }
    let where_ = cpus.placement(cpus.same_cpu());
    for (i, &(r, _, fork_note)) in pair.iter().enumerate() {
        let name = r.info.name;
        let (f, re) = (&firsts[i], &rests[i]);
        if let Some(m) = Metric::from_values(
            &first_request(name, stat::FIRST),
            Unit::Us,
            f,
            1,
            &where_,
            format!(
                "first request of a long connection to {name} (10 KiB, the study's Fig. 5 \
                 example), connect included; one value per connection ({} connections \
                 alternating with the other design's); median {:.1} us{fork_note}",
                f.len(),
                stats::median(f)
            ),
        ) {
            out.add(m);
        }
        if let Some(m) = Metric::from_values(
            &first_request(name, stat::REST),
            Unit::Us,
            re,
            (per - 1) as u64,
            &where_,
            format!(
                "the other {} requests of the same connections, mean per request; the study \
                 prints its example in us (1.469 first, then 0.45), which beside Fig. 4's 4 ms \
                 per 1 KB short connection reads as ms",
                per - 1
            ),
        ) {
            out.add(m);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_the_pattern_size_and_placement() {
        assert_eq!(size_label(1024), "1kib");
        assert_eq!(size_label(65536), "64kib");
        assert_eq!(size_label(64), "64b");
        assert_eq!(
            row_id("epoll", false, false, 1024),
            "server.epoll.short.1kib.mean"
        );
        assert_eq!(
            row_id("fork_per_client", true, true, 16384),
            "server.fork_per_client.same_cpu.long.16kib.mean"
        );
        assert_eq!(
            ratio_id(false, false, 1024),
            "server.fork_per_client.vs_thread.short.1kib"
        );
    }
}
