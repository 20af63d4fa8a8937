//! A registered peer runtime appears wherever its rows must: the schema doc documents every id
//! its rows and ratios carry (by name or by a `<peer>` pattern) with its unit, and the report's
//! create and switch sections chart its figures beside the kernel's. A peer added to
//! `subjects::peers::REGISTRY` that misses one of those fails here.

use std::path::Path;

use threadlab::measure::units::Unit;
use threadlab::report::html::sections;
use threadlab::results::{ids, ExperimentResult, Metric};
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

/// The unit docs/results-schema.md gives `id` in the row that names it.
fn unit_in_doc<'a>(doc: &'a str, id: &str) -> Option<&'a str> {
    let row = format!("| `{id}` |");
    let line = doc.lines().find(|l| l.starts_with(&row))?;
    line[row.len()..].split('|').next().map(str::trim)
}

/// `id` with the peer's name as the doc's pattern rows write it: `create.<peer>`,
/// `create.green.vs_<peer>`.
fn as_pattern(id: &str, peer: &str) -> String {
    id.split('.')
        .map(|segment| match segment.strip_prefix("vs_") {
            Some(p) if p == peer => "vs_<peer>",
            _ if segment == peer => "<peer>",
            _ => segment,
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[test]
fn every_peer_id_is_in_the_schema_doc_with_its_unit() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
    let doc = std::fs::read_to_string(&path).expect("docs/results-schema.md exists");
    for peer in REGISTRY {
        let name = peer.info().name;
        for (id, unit) in ids_of(peer.info()) {
            let pattern = as_pattern(&id, name);
            let Some(documented) = unit_in_doc(&doc, &id).or_else(|| unit_in_doc(&doc, &pattern))
            else {
                panic!(
                    "peer `{name}`: neither `{id}` nor `{pattern}` has a row in \
                     docs/results-schema.md; add the pattern row"
                );
            };
            assert_eq!(
                documented, unit,
                "{id}: docs/results-schema.md gives {documented}"
            );
        }
    }
}

#[test]
fn a_peer_name_becomes_the_pattern_segment() {
    assert_eq!(as_pattern("create.nothing", "nothing"), "create.<peer>");
    assert_eq!(
        as_pattern("create.green.vs_nothing", "nothing"),
        "create.green.vs_<peer>"
    );
    assert_eq!(
        as_pattern("switch.nothing.yield", "nothing"),
        "switch.<peer>.yield"
    );
    assert_eq!(
        as_pattern("create.green.vs_thread", "green"),
        "create.<peer>.vs_thread"
    );
}

/// A create or switch result holding one figure for each of `ids`.
fn experiment(name: &str, ids: &[String]) -> ExperimentResult {
    let metrics: Vec<Metric> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| Metric::single(id, Unit::Ns, 100.0 + i as f64, "same_cpu(0)", "n"))
        .collect();
    let json = serde_json::json!({
        "name": name, "study": "s", "status": "ok", "wall_s": 1.0, "metrics": metrics,
    });
    serde_json::from_value(json).expect("a minimal experiment result parses")
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

#[test]
fn the_report_says_a_floor_peer_is_no_runtime_to_choose() {
    let floors: Vec<&PeerInfo> = REGISTRY
        .iter()
        .map(|p| p.info())
        .filter(|p| p.floor)
        .collect();
    assert!(!floors.is_empty(), "corosensei is registered as the floor");
    for p in floors {
        for (e, id) in [
            (
                experiment(
                    "create",
                    &["create.thread".into(), ids::peer::spawn(p.name)],
                ),
                ids::peer::spawn(p.name),
            ),
            (
                experiment(
                    "switch",
                    &["switch.thread.yield".into(), ids::peer::yields(p.name)],
                ),
                ids::peer::yields(p.name),
            ),
        ] {
            let label = ids::within(&e.name, &id);
            let chart = sections::charts(&e)
                .into_iter()
                .find(|c| c.numbers.iter().skip(1).any(|row| row[0] == label))
                .unwrap_or_else(|| panic!("{id} is charted"));
            assert!(
                chart
                    .caption
                    .contains(&format!("{} is not a runtime to choose", p.name)),
                "{id}: {}",
                chart.caption
            );
        }
    }
}
