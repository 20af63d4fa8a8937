//! A registered peer runtime appears wherever its rows must: the schema doc documents every id
//! its rows and ratios carry (by name or by a `<peer>` pattern) with its unit, and the report's
//! create and switch sections chart its figures beside the kernel's. A peer added to
//! `subjects::peers::REGISTRY` that misses one of those fails here.

use std::path::Path;

use threadlab::measure::units::Unit;
use threadlab::report::html::sections;
use threadlab::results::{ids, ExperimentResult, Metric, Status};
use threadlab::subjects::peers::{self, PeerInfo, REGISTRY};

/// Every id a peer's rows carry, with its unit: its ratios over the reference's included (the
/// reference's over a kernel thread for the reference itself).
fn ids_of(peer: &PeerInfo) -> Vec<(String, &'static str)> {
    let reference = peers::reference().name;
    let other = if peer.name == reference {
        "thread"
    } else {
        peer.name
    };
    let spawn = ids::peer::spawn(peer.name);
    let mut v = vec![
        (spawn.clone(), "ns"),
        (ids::peer::yields(peer.name), "ns"),
        (ids::ratio(&ids::peer::spawn(reference), other), "ratio"),
        (ids::peer::yield_ratio(reference, other), "ratio"),
    ];
    if peer.spawn_unpinned.is_some() {
        v.push((ids::unpinned(&spawn), "ns"));
    }
    if peer.chan.is_some() {
        v.push((ids::peer::chan(peer.name), "ns"));
        if peer.name != reference {
            v.push((ids::ratio(&ids::peer::chan(reference), peer.name), "ratio"));
        }
    }
    if peer.balance.is_some() {
        for kind in [ids::peer::BURST, ids::peer::TREE] {
            v.push((ids::peer::balance(peer.name, kind), "ms"));
            let base = ids::peer::balance(reference, kind);
            v.push((ids::ratio(&base, peer.name), "ratio"));
        }
    }
    v
}

/// The schema doc's metric rows: (id or pattern, unit), in the doc's order.
fn documented() -> Vec<(String, String)> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
    let text = std::fs::read_to_string(&doc).expect("docs/results-schema.md exists");
    let start = text.find("## Metric ids").expect("a metric id section");
    text[start..]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let id = l.split('`').nth(1)?.to_string();
            let unit = l.split('|').nth(2)?.trim().to_string();
            Some((id, unit))
        })
        .collect()
}

/// `<x>` in a pattern's segment stands for any text after what precedes it there.
fn matches(id: &str, pattern: &str) -> bool {
    let (i, p): (Vec<_>, Vec<_>) = (id.split('.').collect(), pattern.split('.').collect());
    i.len() == p.len()
        && i.iter().zip(&p).all(|(i, p)| match p.find('<') {
            Some(at) => i.starts_with(&p[..at]),
            None => i == p,
        })
}

#[test]
fn every_peer_id_is_in_the_schema_doc_with_its_unit() {
    let doc = documented();
    for peer in REGISTRY {
        for (id, unit) in ids_of(peer.info()) {
            let row = doc
                .iter()
                .find(|(p, _)| matches(&id, p))
                .unwrap_or_else(|| {
                    panic!(
                        "peer `{}`: `{id}` is not in docs/results-schema.md; document it (a \
                     `<peer>` pattern row serves every peer)",
                        peer.info().name
                    )
                });
            assert_eq!(row.1, unit, "{id}: docs/results-schema.md gives {}", row.1);
        }
    }
}

#[test]
fn the_pattern_matcher_tells_ids_apart() {
    assert!(matches("create.nothing", "create.<peer>"));
    assert!(matches("create.green.vs_nothing", "create.green.vs_<peer>"));
    assert!(!matches("create.nothing.burst", "create.<peer>"));
    assert!(!matches("create.green.nothing", "create.green.vs_<peer>"));
}

/// An experiment's result holding one figure for each of `ids`.
fn experiment(name: &str, ids: &[String]) -> ExperimentResult {
    ExperimentResult {
        name: name.into(),
        study: "s".into(),
        study_label: "l".into(),
        status: Status::Ok,
        reason: None,
        wall_s: 1.0,
        metrics: ids
            .iter()
            .enumerate()
            .map(|(i, id)| Metric::single(id, Unit::Ns, 100.0 + i as f64, "same_cpu(0)", "n"))
            .collect(),
        series: vec![],
        skipped_metrics: vec![],
        tables: vec![],
        conclusion: None,
        attempts: vec![],
        headline: vec![],
        verdict: None,
        drift_note: None,
        host: None,
    }
}

/// Whether one of the section's charts draws `id` among other figures (a chart of that figure
/// alone is the generic fallback, not a place beside the kernel's).
fn charted_beside_others(e: &ExperimentResult, id: &str) -> bool {
    let label = ids::within(&e.name, id);
    sections::charts(e)
        .iter()
        .any(|c| c.numbers.len() > 2 && c.numbers.iter().skip(1).any(|row| row[0] == label))
}

#[test]
fn the_report_charts_every_peer_beside_kernel_threads() {
    let spawns: Vec<String> = REGISTRY
        .iter()
        .map(|p| ids::peer::spawn(p.info().name))
        .collect();
    let yields: Vec<String> = REGISTRY
        .iter()
        .map(|p| ids::peer::yields(p.info().name))
        .collect();
    let create = experiment(
        "create",
        &[vec!["create.thread".to_string()], spawns.clone()].concat(),
    );
    let switch = experiment(
        "switch",
        &[vec!["switch.thread.yield".to_string()], yields.clone()].concat(),
    );
    for id in &spawns {
        assert!(
            charted_beside_others(&create, id),
            "{id} is not in the create section's charts (report/html/sections/costs.rs)"
        );
    }
    for id in &yields {
        assert!(
            charted_beside_others(&switch, id),
            "{id} is not in the switch section's charts (report/html/sections/costs.rs)"
        );
    }
}
