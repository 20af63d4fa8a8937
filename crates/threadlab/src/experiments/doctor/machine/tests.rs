//! The restore logic against files in a temporary folder standing in for /sys and /proc/sys:
//! no root needed, and the live machine is never touched.

use super::*;

/// A fake root with a haltpoll parameter, an RT sysctl and a boot id.
fn fake_root(name: &str) -> PathBuf {
    let root =
        std::env::temp_dir().join(format!("threadlab-machine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (path, value) in [
        ("sys/module/haltpoll/parameters/guest_halt_poll_ns", "0\n"),
        ("proc/sys/kernel/sched_rt_runtime_us", "950000\n"),
        ("proc/sys/kernel/random/boot_id", "1111-2222\n"),
    ] {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, value).unwrap();
    }
    std::fs::create_dir_all(root.join("run")).unwrap();
    root
}

const HALTPOLL: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
const RT: &str = "/proc/sys/kernel/sched_rt_runtime_us";

fn value(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .unwrap()
        .trim()
        .to_string()
}

fn journal(root: &Path) -> Option<String> {
    std::fs::read_to_string(root.join(JOURNAL)).ok()
}

#[test]
fn a_change_is_journaled_while_it_lasts_and_restored_when_dropped() {
    let root = fake_root("drop");
    let mut m = Machine::open(&root).unwrap();
    assert!(m.replayed.is_empty());
    {
        let _a = m.set(HALTPOLL, "200000").unwrap();
        let _b = m.set(RT, "-1").unwrap();
        assert_eq!(value(&root, HALTPOLL), "200000");
        assert_eq!(value(&root, RT), "-1");
        let j = journal(&root).unwrap();
        assert!(j.contains(&format!("{HALTPOLL}\t0")), "{j}");
        assert!(j.contains(&format!("{RT}\t950000")), "{j}");
    }
    assert_eq!(value(&root, HALTPOLL), "0");
    assert_eq!(value(&root, RT), "950000");
    // Restored settings leave the journal at once, not only at the end.
    let j = journal(&root).unwrap();
    assert!(!j.contains(HALTPOLL) && !j.contains(RT), "{j}");
    let checks = m.checks();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(Check::ok), "{checks:?}");
    drop(m);
    assert!(journal(&root).is_none(), "an empty journal is removed");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_killed_runs_journal_is_replayed_by_the_next_run() {
    let root = fake_root("killed");
    // What a run killed (SIGKILL) in the middle of an "on" phase leaves: the value changed
    // and the journal naming the original.
    std::fs::write(
        root.join("sys/module/haltpoll/parameters/guest_halt_poll_ns"),
        "200000\n",
    )
    .unwrap();
    std::fs::write(
        root.join(JOURNAL),
        format!("threadlab-doctor-journal pid=1 boot_id=1111-2222\n{HALTPOLL}\t0\n"),
    )
    .unwrap();
    let m = Machine::open(&root).unwrap();
    assert_eq!(value(&root, HALTPOLL), "0");
    assert_eq!(m.replayed.len(), 1);
    assert!(m.replayed[0].contains("restored"), "{:?}", m.replayed);
    drop(m);
    assert!(journal(&root).is_none());

    // A journal from an earlier boot is not replayed: the reboot reset the setting, and the
    // admin may have changed it since.
    std::fs::write(
        root.join("sys/module/haltpoll/parameters/guest_halt_poll_ns"),
        "50000\n",
    )
    .unwrap();
    std::fs::write(
        root.join(JOURNAL),
        format!("threadlab-doctor-journal pid=1 boot_id=9999\n{HALTPOLL}\t0\n"),
    )
    .unwrap();
    let m = Machine::open(&root).unwrap();
    assert_eq!(value(&root, HALTPOLL), "50000");
    assert!(m.replayed[0].contains("earlier boot"), "{:?}", m.replayed);
    drop(m);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_second_run_is_refused_while_the_first_holds_the_lock() {
    let root = fake_root("lock");
    let first = Machine::open(&root).unwrap();
    let second = Machine::open(&root);
    assert!(
        matches!(&second, Err(why) if why.contains("another threadlab doctor")),
        "{:?}",
        second.as_ref().err()
    );
    drop(first);
    assert!(Machine::open(&root).is_ok());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_value_the_kernel_does_not_keep_is_an_error_and_is_restored() {
    let root = fake_root("refused");
    let mut m = Machine::open(&root).unwrap();
    // A missing file cannot be changed: nothing is written, nothing journaled.
    assert!(m.set("/sys/module/nothing/parameters/x", "1").is_err());
    assert!(m.unwritable("/sys/module/nothing/parameters/x").is_some());
    assert!(m.unwritable(HALTPOLL).is_none());
    assert_eq!(m.read(HALTPOLL).unwrap(), "0");
    drop(m);
    assert!(journal(&root).is_none());
    std::fs::remove_dir_all(&root).unwrap();
}
