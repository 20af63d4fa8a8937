//! The crate's modules form a stack of layers: each may use only the modules below it. This
//! test reads every file under `src/`, collects the module paths it names (`crate::x::y`,
//! `super::x`, `self::x`, and a child declared with `mod x;` then used as `x::`), resolves
//! them to the module they point at, and fails on any that points up (or to a module missing
//! from the list below, so that a new module must be given its place).
//!
//! A reference to a folder's `mod.rs` (for example `crate::preempt::disable`, a re-export)
//! counts as a reference to the folder's wiring module, which sits above everything in the
//! folder: lower layers must name the file that defines an item.

use std::path::Path;

#[path = "support/module_paths.rs"]
mod module_paths;

use module_paths::{check_the_checker, folder_circles, read_crate, references};

/// Lowest first. A module may use only modules strictly earlier in this list (and itself, and
/// its own children when it is a folder's wiring module).
const LAYERS: &[&str] = &[
    // Leaves.
    "arch",
    "race",
    "stack",
    "sys",
    // The kernel side of the reactor: epoll, eventfd, poll(2).
    "io::poller",
    // The thread control block and the plain types around it.
    "tcb",
    // The run queue and policy.
    "sched",
    // Leaves of preemption and counting.
    "preempt::count",
    "preempt::timer",
    "preempt",
    // Poll descriptors: waiter slots shared by threads, pollers and shutdowns.
    "io::desc",
    "runtime::stats",
    "runtime::timers",
    // The runtime, bottom up.
    "runtime::carrier",
    "guard",
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

#[test]
fn modules_use_only_lower_layers() {
    let (files, _) = read_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(files.len() >= 15, "found only {} files", files.len());
    let bad = violations(&files);
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

/// Folders that are in a circle today: `io/` holds both the poller (the lowest layer) and the
/// user-facing waits (above `runtime/`), so `io` and `runtime` name each other at folder level
/// although every file keeps to its layer. An entry here must still be a circle: fixing one
/// means deleting its line.
const KNOWN_FOLDER_CIRCLES: &[&str] = &["io, runtime"];

#[test]
fn no_folder_import_circles() {
    let (files, folders) = read_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(folders.len() >= 5, "found only {} folders", folders.len());
    let circles = folder_circles(&files, &folders);
    let is = |c: &String, k: &str| c.starts_with(&format!("folders {k} import"));
    let new: Vec<&String> = circles
        .iter()
        .filter(|c| !KNOWN_FOLDER_CIRCLES.iter().any(|k| is(c, k)))
        .collect();
    assert!(new.is_empty(), "folder import circles:\n  {new:?}");
    for k in KNOWN_FOLDER_CIRCLES {
        assert!(
            circles.iter().any(|c| is(c, k)),
            "`{k}` no longer import each other: delete it from KNOWN_FOLDER_CIRCLES"
        );
    }
}

#[test]
fn the_circle_checker_finds_circles() {
    check_the_checker();
}
