//! The crate's modules form a stack of layers: each may use only the modules below it. This
//! test reads every file under `src/`, collects the module paths it names (`crate::x::y`,
//! `super::x`, `self::x`, and a child declared with `mod x;` then used as `x::`), resolves
//! them to the module they point at, and fails on any that points up (or to a module missing
//! from the list below, so that a new module must be given its place).
//!
//! Folders are layers too: no two top-level modules (folders, or files directly under `src/`) may
//! use each other, even through downward edges, so a folder never holds both a layer below
//! another folder and one above it.
//!
//! A reference to a folder's `mod.rs` (for example `crate::preempt::disable`, a re-export)
//! counts as a reference to the folder's wiring module, which sits above everything in the
//! folder: lower layers must name the file that defines an item.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

// The source reader, shared with the threadlab crate's import-circle test.
#[path = "support/module_paths.rs"]
mod module_paths;
use module_paths::{module_of, references, rust_files};

/// Lowest first. A module may use only modules strictly earlier in this list (and itself, and
/// its own children when it is a folder's wiring module).
const LAYERS: &[&str] = &[
    // Leaves.
    "arch",
    "race",
    "stack",
    "sys",
    // The kernel side of the reactor: epoll, eventfd, poll(2).
    "poll::poller",
    // The thread control block and the plain types around it.
    "tcb",
    // The run queue and policy.
    "sched",
    // Leaves of preemption and counting.
    "preempt::count",
    "preempt::timer",
    "preempt",
    // Poll descriptors: waiter slots shared by threads, pollers and shutdowns.
    "poll::desc",
    "poll",
    "runtime::stats",
    "runtime::timers",
    // The runtime, bottom up.
    "runtime::carrier",
    "runtime::guard",
    "runtime::steal",
    "runtime::reactor",
    "runtime::dispatch",
    "runtime::tick",
    "runtime::ops",
    "runtime::owner",
    "runtime::handle",
    "runtime::block_on",
    "runtime",
    // The public API on top.
    "sync",
    "thread",
    // Channels: waiting parties, the shared state, the handles, select.
    "chan::wait",
    "chan::shared",
    "chan::error",
    "chan::handles",
    "chan::select",
    "chan",
    // Descriptors the user owns; sockets; one carrier per CPU.
    "io",
    "net::addr",
    "net::socket",
    "net::tcp",
    "net::unix",
    "net",
    "pool",
    // The crate root wires everything.
    "",
];

/// Where `module` sits in `LAYERS`: the longest listed prefix of its path (a file's private
/// children, like `tcb::tests`, share their parent's place).
fn rank(module: &str) -> Option<usize> {
    placed(module).map(|(i, _)| i)
}

/// The `LAYERS` entry `module` takes its place from, with its index.
fn placed(module: &str) -> Option<(usize, &'static str)> {
    let mut m = module.to_string();
    loop {
        if let Some(i) = LAYERS.iter().position(|l| *l == m) {
            return Some((i, LAYERS[i]));
        }
        // Only the root file itself is the root: a top-level module must be listed.
        match m.rfind("::") {
            Some(i) => m.truncate(i),
            None => return None,
        }
    }
}

/// The module a path points into: the longest prefix of its segments that `LAYERS` names.
fn target_module(path: &[String]) -> String {
    for n in (0..=path.len()).rev() {
        let m = path[..n].join("::");
        if LAYERS.contains(&m.as_str()) {
            return m;
        }
    }
    String::new()
}

/// The upward (or unknown) edges among `files` (module path, source text), as messages.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    for (module, src) in files {
        let Some((from, owner)) = placed(module) else {
            bad.push(format!(
                "module `{module}` is not in LAYERS: give it its place in tests/layering.rs"
            ));
            continue;
        };
        for path in references(module, src) {
            let target = target_module(&path);
            // Itself, its own children, and (for a private child such as `tcb::tests`) the
            // module it belongs to: always allowed.
            if target == *module
                || target == owner
                || (!module.is_empty() && target.starts_with(&format!("{module}::")))
            {
                continue;
            }
            let to = rank(&target).unwrap_or(usize::MAX);
            if to >= from {
                bad.push(format!(
                    "`{}` uses `{}` (module `{}`), which is not below it in LAYERS",
                    if module.is_empty() { "lib" } else { module },
                    path.join("::"),
                    if target.is_empty() { "lib" } else { &target }
                ));
            }
        }
    }
    bad.sort();
    bad.dedup();
    bad
}

/// The top-level module (folder, or file directly under `src/`) a module belongs to; `None`
/// for the crate root, which wires everything.
fn folder(module: &str) -> Option<&str> {
    module.split("::").next().filter(|f| !f.is_empty())
}

/// Circles among the top-level modules of `files` (each as `a -> b -> .. -> a`), whatever the
/// direction of the edges inside them.
fn folder_circles(files: &[(String, String)]) -> Vec<String> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, src) in files {
        let Some(from) = folder(module) else { continue };
        for path in references(module, src) {
            let target = target_module(&path);
            let Some(to) = folder(&target).or_else(|| path.first().map(String::as_str)) else {
                continue;
            };
            if to != from {
                edges
                    .entry(from.to_string())
                    .or_default()
                    .insert(to.to_string());
            }
        }
    }
    // Depth-first search from every folder; a folder met again on the current path closes a
    // circle.
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        out: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut circle = path[at..].to_vec();
            // Start each circle at its smallest name, so one circle is reported once.
            let first = (0..circle.len()).min_by_key(|&i| &circle[i]).unwrap_or(0);
            circle.rotate_left(first);
            circle.push(circle[0].clone());
            out.insert(circle.join(" -> "));
            return;
        }
        if done.contains(node) {
            return;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done, out);
        }
        path.pop();
        done.insert(node.to_string());
    }
    let mut out = BTreeSet::new();
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        visit(node, &edges, &mut Vec::new(), &mut done, &mut out);
    }
    out.into_iter().collect()
}

/// Every source file under `src/`, as (module path, source text).
fn crate_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths.sort();
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).expect("under src");
            (
                module_of(rel),
                fs::read_to_string(p).expect("readable source"),
            )
        })
        .collect();
    assert!(files.len() >= 15, "found only {} files", files.len());
    files
}

#[test]
fn modules_use_only_lower_layers() {
    let bad = violations(&crate_files());
    assert!(
        bad.is_empty(),
        "layering violations:\n  {}",
        bad.join("\n  ")
    );
}

/// The checker itself: it must see each kind of upward edge, and accept downward ones.
#[test]
fn the_checker_reports_upward_edges() {
    let file = |m: &str, s: &str| (m.to_string(), s.to_string());
    // Downward only: fine.
    let ok = [
        file("sched", "use crate::tcb::{Priority, Thread};"),
        file(
            "runtime::dispatch",
            "use super::carrier::{Carrier, Local};\nuse crate::{arch, preempt::count as p};",
        ),
        file("runtime", "mod ops;\npub use ops::yield_now;"),
        file(
            "tcb",
            "// crate::runtime::ops in a comment\nlet s = \"crate::sync::X\";",
        ),
    ];
    assert_eq!(violations(&ok), Vec::<String>::new());
    // Each of these points up.
    let cases = [
        file("tcb", "use crate::sched::level_key;"),
        file("sched", "fn f() { crate::runtime::ops::yield_now() }"),
        file("runtime::carrier", "use super::dispatch::wake;"),
        file(
            "runtime::carrier",
            "use super::{stats::bump, ops::yield_now};",
        ),
        file(
            "runtime::stats",
            "use crate::{sys, runtime::block_on::Runtime};",
        ),
        file("preempt::count", "use crate::preempt::PreemptGuard;"),
        file("runtime::tick", "use crate::runtime::yield_now;"),
        file("sys", "use crate::sys2::x;"),
        file("brand_new", ""),
    ];
    for case in cases {
        let got = violations(std::slice::from_ref(&case));
        assert_eq!(got.len(), 1, "{case:?} gave {got:?}");
    }
}

#[test]
fn no_two_folders_use_each_other() {
    let circles = folder_circles(&crate_files());
    assert!(
        circles.is_empty(),
        "folder-level import circles (move the lower part into a folder of its own):\n  {}",
        circles.join("\n  ")
    );
}

/// The circle finder itself: downward edges that still join two folders both ways are a
/// circle; a chain is not.
#[test]
fn the_checker_reports_folder_circles() {
    let file = |m: &str, s: &str| (m.to_string(), s.to_string());
    let chain = [
        file("poll::desc", "use crate::tcb::Thread;"),
        file("runtime::ops", "use crate::poll::desc::PollDesc;"),
        file("io", "use crate::runtime::ops::wait_io;"),
    ];
    assert_eq!(folder_circles(&chain), Vec::<String>::new());
    // The old shape: the poller inside `io`, below the runtime, and the waits above it.
    let two = [
        file("runtime::carrier", "use crate::io::poller::Poller;"),
        file("io", "use crate::runtime::ops::wait_io;"),
    ];
    assert_eq!(
        folder_circles(&two),
        vec!["io -> runtime -> io".to_string()]
    );
    let three = [
        file("sched", "use crate::tcb::Thread;"),
        file("tcb", "use crate::preempt::count::x;"),
        file("preempt::count", "use crate::sched::RunQueue;"),
    ];
    assert_eq!(
        folder_circles(&three),
        vec!["preempt -> sched -> tcb -> preempt".to_string()]
    );
}
