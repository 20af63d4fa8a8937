//! The module paths a crate's source files name, read without a compiler, and the folders that
//! import each other. Shared by uthread's layering test (tests/layering.rs) and threadlab's
//! import-circle test (crates/threadlab/tests/import_circles.rs), each using part of it:
//! `references` collects every module-qualified path a file names (`crate::x::y`, `super::x`,
//! `self::x`, and a child declared with `mod x;` then used as `x::`), resolved to absolute
//! segments; `folder_circles` finds folders that import each other.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The module a source file defines: `src/lib.rs` is the root, `src/a/mod.rs` is `a`,
/// `src/a/b.rs` is `a::b`.
pub fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// Source text without comments, string literals and char literals, so that a path named in
/// prose or in a message is not taken for a use.
pub fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r' && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#")) {
            // Raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat(b'#').take(hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            } else {
                out.push(b[i] as char);
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\''
            && i + 2 < b.len()
            && (b[i + 2] == b'\'' || (b[i + 1] == b'\\' && b[i + 3..].contains(&b'\'')))
        {
            // A char literal ('x' or '\n'); lifetimes ('a) fall through untouched.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            // Copy one UTF-8 character.
            let ch = src[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Other,
}

pub fn tokens(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut v = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            v.push(Tok::Ident(src[s..i].to_string()));
            continue;
        }
        if b[i..].starts_with(b"::") {
            v.push(Tok::PathSep);
            i += 2;
            continue;
        }
        match c {
            b'{' => v.push(Tok::Open),
            b'}' => v.push(Tok::Close),
            b',' => v.push(Tok::Comma),
            c if c.is_ascii_whitespace() => {}
            _ => v.push(Tok::Other),
        }
        i += 1;
    }
    v
}

/// Reads a path (or a `use` tree) starting at `toks[*i]`, pushing every complete path it names
/// onto `out` as segments (a group `a::{b, c::d}` gives `a::b` and `a::c::d`).
pub fn read_tree(toks: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
                if toks.get(*i) == Some(&Tok::PathSep) {
                    *i += 1;
                    continue;
                }
                out.push(path);
                return;
            }
            Some(Tok::Open) => {
                *i += 1;
                loop {
                    match toks.get(*i) {
                        Some(Tok::Close) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Comma) => *i += 1,
                        None => return,
                        Some(Tok::Ident(_)) | Some(Tok::Open) => {
                            read_tree(toks, i, path.clone(), out);
                            // Skip an `as name` rename.
                            if toks.get(*i) == Some(&Tok::Ident("as".into())) {
                                *i += 2;
                            }
                        }
                        Some(_) => *i += 1,
                    }
                }
            }
            _ => {
                // `a::*` or a path ending in something else.
                out.push(path);
                return;
            }
        }
    }
}

/// Every module-qualified path in `src` (a file defining `module`), resolved to absolute
/// segments from the crate root.
pub fn references(module: &str, src: &str) -> Vec<Vec<String>> {
    let toks = tokens(&strip(src));
    let here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(String::from).collect()
    };
    // Children declared in this file (`mod x;` or `mod x { .. }`) are reachable as `x::`.
    let mut children = BTreeSet::new();
    for w in toks.windows(2) {
        if let (Tok::Ident(m), Tok::Ident(name)) = (&w[0], &w[1]) {
            if m == "mod" {
                children.insert(name.clone());
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let Tok::Ident(first) = &toks[i] else {
            i += 1;
            continue;
        };
        // Only the start of a path: not the tail of `a::first`.
        let starts_path = i == 0 || toks[i - 1] != Tok::PathSep;
        let qualified = toks.get(i + 1) == Some(&Tok::PathSep);
        if !starts_path || !qualified {
            i += 1;
            continue;
        }
        let base: Option<Vec<String>> = match first.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(here.clone()),
            "super" => {
                let mut b = here.clone();
                let mut j = i;
                // `super::super::..` climbs one level per `super`.
                loop {
                    b.pop();
                    if toks.get(j + 2) == Some(&Tok::Ident("super".into())) {
                        j += 2;
                    } else {
                        break;
                    }
                }
                i = j;
                Some(b)
            }
            name if children.contains(name) => {
                let mut b = here.clone();
                b.push(name.to_string());
                // Re-read from the child's name itself.
                let mut j = i + 2;
                let mut paths = Vec::new();
                read_tree(&toks, &mut j, b, &mut paths);
                out.extend(paths);
                i = j;
                continue;
            }
            _ => None,
        };
        match base {
            Some(b) => {
                let mut j = i + 2;
                read_tree(&toks, &mut j, b, &mut out);
                i = j;
            }
            None => i += 1,
        }
    }
    out
}

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).expect("readable src dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every source file under `src` as (module path, text), sorted, and every folder as a module
/// path (`a/b/` is `a::b`).
pub fn read_crate(src: &Path) -> (Vec<(String, String)>, BTreeSet<String>) {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths.sort();
    let mut folders = BTreeSet::new();
    let files = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(src).expect("under src");
            let mut dir = rel.parent();
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
                folders.insert(module_of(&d.join("mod.rs")));
                dir = d.parent();
            }
            (
                module_of(rel),
                fs::read_to_string(p).expect("readable source"),
            )
        })
        .collect();
    (files, folders)
}

/// Folders that import each other, directly or round a longer loop, as messages naming one
/// file behind each edge of the loop.
///
/// Folders are compared with their siblings: a file in `a::x::..` naming `a::y::..` is an edge
/// from folder `a::x` to folder `a::y` when both are folders. A folder using its own parent's
/// items, or a parent's wiring naming its children, is not an edge: those are one unit.
pub fn folder_circles(files: &[(String, String)], folders: &BTreeSet<String>) -> Vec<String> {
    circles_among(files, folders, "folders")
}

/// Files (and folders) in one folder that import each other, by the same rule as
/// `folder_circles` with every module a node: sibling `a::x` naming `a::y` is an edge, a file
/// using its folder's own items (`super::Item`) or a folder's wiring naming its files is not.
pub fn file_circles(files: &[(String, String)]) -> Vec<String> {
    let modules = files.iter().map(|(m, _)| m.clone()).collect();
    circles_among(files, &modules, "files")
}

/// Groups of `nodes` that import each other, named `what` in the messages.
fn circles_among(files: &[(String, String)], nodes: &BTreeSet<String>, what: &str) -> Vec<String> {
    let folders = nodes;
    // (from, to) -> the first file that makes the edge.
    let mut edges: BTreeMap<(String, String), String> = BTreeMap::new();
    for (module, src) in files {
        let here: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
        for path in references(module, src) {
            let common = here.iter().zip(&path).take_while(|(a, b)| *a == b).count();
            if common >= here.len() || common >= path.len() {
                continue;
            }
            let from = here[..=common].join("::");
            let to = path[..=common].join("::");
            if folders.contains(&from) && folders.contains(&to) {
                edges
                    .entry((from, to))
                    .or_insert_with(|| module.to_string());
            }
        }
    }
    let mut circles = Vec::new();
    for members in strongly_connected(&edges) {
        let within: Vec<String> = edges
            .iter()
            .filter(|((a, b), _)| members.contains(a) && members.contains(b))
            .map(|((a, b), file)| format!("{a} -> {b} (in {file})"))
            .collect();
        circles.push(format!(
            "{what} {} import each other: {}",
            members.iter().cloned().collect::<Vec<_>>().join(", "),
            within.join("; ")
        ));
    }
    circles
}

/// The groups of two or more nodes that reach each other (Kosaraju: order by finish time, then
/// collect on the reversed graph).
fn strongly_connected(edges: &BTreeMap<(String, String), String>) -> Vec<BTreeSet<String>> {
    let nodes: BTreeSet<&String> = edges.keys().flat_map(|(a, b)| [a, b]).collect();
    let next = |n: &String, reverse: bool| -> Vec<&String> {
        edges
            .keys()
            .filter(|(a, b)| if reverse { b == n } else { a == n })
            .map(|(a, b)| if reverse { a } else { b })
            .collect()
    };
    fn visit<'a>(
        n: &'a String,
        seen: &mut BTreeSet<&'a String>,
        out: &mut Vec<&'a String>,
        next: &dyn Fn(&String) -> Vec<&'a String>,
    ) {
        if seen.insert(n) {
            for m in next(n) {
                visit(m, seen, out, next);
            }
            out.push(n);
        }
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in &nodes {
        visit(n, &mut seen, &mut order, &|m| next(m, false));
    }
    let mut seen = BTreeSet::new();
    let mut groups = Vec::new();
    for n in order.into_iter().rev() {
        let mut group = Vec::new();
        visit(n, &mut seen, &mut group, &|m| next(m, true));
        if group.len() > 1 {
            groups.push(group.into_iter().cloned().collect());
        }
    }
    groups
}

/// The checker itself, for each crate's test to call: it must find a two-folder circle, a
/// three-folder one, and a circle between sibling folders deep in the tree, and accept a
/// parent and its children using each other.
pub fn check_the_checker() {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let file = |m: &str, s: &str| (m.to_string(), s.to_string());
    let folders = set(&["a", "b", "c", "r", "r::x", "r::y"]);
    let fine = [
        file("a::one", "use crate::b::two;"),
        file("b::two", "use crate::c::three;\nuse super::two_helper;"),
        file("r", "mod x; mod y;\nuse self::x::f;"),
        file("r::x::f", "use crate::r::shared; use super::super::y::g;"),
        file("r::y::g", "// crate::r::x::f in a comment only"),
    ];
    assert_eq!(folder_circles(&fine, &folders), Vec::<String>::new());
    let two = [
        file("a::one", "use crate::b::two;"),
        file("b::two", "fn f() { crate::a::one::g() }"),
    ];
    let three = [
        file("a::one", "use crate::b::two;"),
        file("b::two", "use crate::c::{three, four};"),
        file("c::three", "use crate::a::one::X;"),
    ];
    let deep = [
        file("r::x::f", "use super::super::y::g;"),
        file("r::y::g", "use crate::r::x::{f, h};"),
    ];
    for case in [&two[..], &three[..], &deep[..]] {
        let got = folder_circles(case, &folders);
        assert_eq!(got.len(), 1, "{case:?} gave {got:?}");
    }
    // Files: two siblings in a folder, or a file and a sibling folder, make a circle; a
    // folder's wiring and its files using the folder's items do not.
    let files_fine = [
        file("r", "mod x; mod y;\nfn go() { x::f(); y::g() }"),
        file("r::x", "use super::Shared;\nuse super::y::g;"),
        file("r::y", "use crate::r::Shared;"),
    ];
    assert_eq!(file_circles(&files_fine), Vec::<String>::new());
    let siblings = [
        file("r::x", "use super::y::g;"),
        file("r::y", "fn g() { super::x::f() }"),
    ];
    let into_folder = [
        file("r::x", "use super::y::inner::h;"),
        file("r::y", ""),
        file("r::y::inner", "use crate::r::x::f;"),
    ];
    for case in [&siblings[..], &into_folder[..]] {
        let got = file_circles(case);
        assert_eq!(got.len(), 1, "{case:?} gave {got:?}");
    }
}
