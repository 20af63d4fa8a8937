//! What `cargo run` adds to the environment of the program it starts, and taking it out again.
//!
//! cargo puts its target directories and the Rust toolchain's library directories in front of
//! `LD_LIBRARY_PATH` (for programs that load Rust dylibs). threadlab loads none, but every program
//! it starts inherits the variable, and the dynamic loader of each then searches those
//! directories before the system's: a spawned `/bin/true` made 44 failed `openat` calls more,
//! and posix_spawn + waitpid of it took 648-656 us against 538-559 us without the variable (loops
//! of 4 back to back on one CPU, three runs each, alternated, on a 2-vCPU KVM guest). The
//! README's `cargo run --release -- run` measured `create.process.spawn` at 678-813 us in 16
//! quick suites while `threadlab run create` read 557-581 us. A program's children do not pay
//! that, so the lab takes cargo's part of the variable out before it starts any child, and the
//! environment section records what it took out.

use std::path::Path;
use std::sync::OnceLock;

/// The directories taken out of `LD_LIBRARY_PATH` at start, in their order.
static REMOVED: OnceLock<Vec<String>> = OnceLock::new();

/// Takes the directories `cargo run` put in front of `LD_LIBRARY_PATH` out of it (the whole
/// variable when nothing else was in it). Only when cargo started the program (it sets `CARGO`),
/// and only the leading run of entries cargo adds: the running program's own directory and
/// those under it (`deps`, build scripts' native directories), the toolchain's
/// `lib/rustlib/<target>/lib`, and its `lib` (the one holding `rustlib`). Whatever the user's
/// own value was stays, in its order.
///
/// Call it first thing in `main`, while the process has one thread: it changes the process
/// environment, which no other thread may be reading.
pub fn drop_cargo_library_path() {
    let removed = match (
        std::env::var_os("CARGO"),
        std::env::var("LD_LIBRARY_PATH"),
        std::env::current_exe(),
    ) {
        (Some(_), Ok(value), Ok(exe)) => {
            // A program in the root directory (or without one) has no directory of its own to
            // recognise: every absolute path would start with it.
            let dir = exe.parent().filter(|d| d.parent().is_some());
            let (removed, kept) = split_cargo_prefix(&value, dir, |p| p.join("rustlib").is_dir());
            if !removed.is_empty() {
                if kept.is_empty() {
                    std::env::remove_var("LD_LIBRARY_PATH");
                } else {
                    std::env::set_var("LD_LIBRARY_PATH", &kept);
                }
            }
            removed
        }
        _ => Vec::new(),
    };
    let _ = REMOVED.set(removed);
}

/// What `drop_cargo_library_path` took out (empty when it found nothing, or was not called).
pub fn removed() -> &'static [String] {
    REMOVED.get().map_or(&[], Vec::as_slice)
}

/// `value` (an `LD_LIBRARY_PATH`) split into cargo's leading entries and the rest, joined again
/// with ':'. `is_sysroot_lib` says whether a directory is a toolchain's `lib` (it holds
/// `rustlib`).
fn split_cargo_prefix(
    value: &str,
    exe_dir: Option<&Path>,
    is_sysroot_lib: impl Fn(&Path) -> bool,
) -> (Vec<String>, String) {
    let entries: Vec<&str> = value.split(':').collect();
    let cargos = |e: &&&str| {
        let p = Path::new(**e);
        !e.is_empty()
            && (exe_dir.is_some_and(|d| p.starts_with(d))
                || e.contains("/lib/rustlib/")
                || is_sysroot_lib(p))
    };
    let n = entries.iter().take_while(cargos).count();
    let removed = entries[..n].iter().map(|e| e.to_string()).collect();
    (removed, entries[n..].join(":"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLCHAIN: &str = "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu";

    fn sysroot_lib(p: &Path) -> bool {
        p == Path::new(TOOLCHAIN).join("lib")
    }

    #[test]
    fn cargos_leading_directories_come_out_and_the_users_stay() {
        let exe = Some(Path::new("/work/main/target/release"));
        let cargo = format!(
            "/work/main/target/release:/work/main/target/release/deps:\
             {TOOLCHAIN}/lib/rustlib/x86_64-unknown-linux-gnu/lib:{TOOLCHAIN}/lib"
        );
        // What `cargo run` gave a shell without LD_LIBRARY_PATH: all of it goes.
        let (removed, kept) = split_cargo_prefix(&cargo, exe, sysroot_lib);
        assert_eq!(removed.len(), 4);
        assert_eq!(kept, "");
        // The user's own directories after cargo's stay, in order, even one under the toolchain
        // that comes after them.
        let user = format!("{cargo}:/opt/mylib:/usr/local/lib:{TOOLCHAIN}/lib");
        let (removed, kept) = split_cargo_prefix(&user, exe, sysroot_lib);
        assert_eq!(removed.len(), 4);
        assert_eq!(kept, format!("/opt/mylib:/usr/local/lib:{TOOLCHAIN}/lib"));
        // Nothing of cargo's in front: nothing comes out.
        let (removed, kept) =
            split_cargo_prefix("/opt/mylib:/work/main/target/release", exe, sysroot_lib);
        assert!(removed.is_empty());
        assert_eq!(kept, "/opt/mylib:/work/main/target/release");
        // An empty entry (the current directory to the loader) is the user's.
        let (removed, kept) = split_cargo_prefix(":/work/main/target/release", exe, sysroot_lib);
        assert!(removed.is_empty());
        assert_eq!(kept, ":/work/main/target/release");
        // Without a directory of the program's own (a program in `/`), its entries are not
        // recognised, and as they lead, nothing comes out.
        let (removed, kept) = split_cargo_prefix(&user, None, sysroot_lib);
        assert!(removed.is_empty(), "{removed:?}");
        assert_eq!(kept, user);
    }
}
