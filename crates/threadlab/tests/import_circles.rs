//! No two folders of `src/` import each other, directly or round a longer loop: the lab flows
//! one way (command line, runner, experiments, results, report; measure below them), and a
//! circle between folders is where that flow starts to blur. The reader and the circle finder
//! are in tests/support/module_paths.rs.

use std::path::Path;

// The source reader lives beside uthread's layering test, which uses it too.
#[path = "../../uthread/tests/support/module_paths.rs"]
mod module_paths;

use module_paths::{check_the_checker, file_circles, folder_circles, read_crate};

#[test]
fn no_folder_import_circles() {
    let (files, folders) = read_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(folders.len() >= 10, "found only {} folders", folders.len());
    let circles = folder_circles(&files, &folders);
    assert!(
        circles.is_empty(),
        "move what both sides need below them:\n  {}",
        circles.join("\n  ")
    );
}

/// Nor do two files of one folder, or a file and a sibling folder: what both need goes into a
/// file of its own below them (as the server experiment's step records do in `records.rs`).
/// A folder's own `mod.rs` is not a sibling of its files: it wires them and they use its items.
#[test]
fn no_file_import_circles() {
    let (files, _) = read_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let circles = file_circles(&files);
    assert!(
        circles.is_empty(),
        "move what both files need into one file they both import:\n  {}",
        circles.join("\n  ")
    );
}

#[test]
fn the_circle_checker_finds_circles() {
    check_the_checker();
}
