//! The group builder's tests: flags, clusters, which rows vote, and peer programs taken in turn.

use super::*;

#[test]
fn a_flag_goes_to_the_row_or_ratio_added_last_from_the_moment_it_is_made() {
    let alone = Standalone::new();
    let ctx = alone.ctx(Mode::Tiny);
    let mut out = Outcome::default();
    let mut group = Interleaved::new();
    let spin = |per_op: u64| {
        move |n: u64| {
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_nanos(n * per_op) {
                std::hint::spin_loop();
            }
            Ok(t.elapsed())
        }
    };
    group
        .row("t.a", Unit::Ns, "same_cpu(0)", "a", spin(200))
        .flag(Flag::Race)
        .flag(Flag::Race)
        .row("t.b", Unit::Ns, "same_cpu(0)", "b", spin(100))
        .ratio("t.a.vs_b", "t.a", "t.b", "a over b")
        .flag(Flag::IdleVcpu)
        .derived("t.d", Unit::Ns, "same_cpu(0)", "d", &["t.a", "t.b"], |v| {
            v[0] - v[1]
        })
        .row("t.g", Unit::Ns, "same_cpu(0)", "g", spin(150))
        .flag(Flag::OneProgram)
        .ratio("t.b.vs_g", "t.b", "t.g", "b over g")
        .row("t.c", Unit::Ns, "same_cpu(0)", "c", spin(120))
        .flag(Flag::ClientBound)
        .ratio("t.c.vs_b", "t.c", "t.b", "c over b");
    group.measure(&ctx, &mut out).unwrap();
    let flags = |id: &str| out.metric(id).unwrap().flags.clone();
    assert_eq!(flags("t.a"), ["race"]);
    assert!(out.metric("t.a").unwrap().note.starts_with("[race] a"));
    assert!(flags("t.b").is_empty());
    // A row derived from a flagged row carries its regime flag, before its own.
    assert_eq!(flags("t.a.vs_b"), ["race", "idle_vcpu"]);
    assert!(out
        .metric("t.a.vs_b")
        .unwrap()
        .note
        .starts_with("[race, idle_vcpu] t.a / t.b"));
    assert_eq!(flags("t.d"), ["race"]);
    // A ratio to a row that ran in one peer program shares that program's regime.
    assert_eq!(flags("t.b.vs_g"), ["one_program"]);
    // Only regime flags pass on: a load generator that held back is its row's own matter.
    assert!(flags("t.c.vs_b").is_empty());
}

#[test]
fn two_clusters_are_explained_by_where_the_threads_ran() {
    let mut out = Outcome::default();
    let two = Summary::from_samples(&[5.8, 5.7, 17.3, 17.4, 17.2, 17.5, 17.3, 17.4], 1)
        .expect("finite samples");
    for (id, placement) in [
        ("t.same", "same_cpu(0)"),
        ("t.cross", "cross_cpu(0,1)"),
        ("t.free", "unpinned"),
    ] {
        let m = out.add_ns(id, Unit::Ns, &two, placement, "n").unwrap();
        assert!(m.modes.is_some(), "the samples fall in two clusters");
    }
    out.explain_modes("IDLE", "HOST");
    let note = |id: &str| out.metric(id).unwrap().note.clone();
    assert!(note("t.same").ends_with(": HOST"), "{}", note("t.same"));
    assert!(note("t.cross").ends_with(": IDLE"), "{}", note("t.cross"));
    // A contended lock left to the kernel read 5.78 ns in the trials whose threads shared a
    // CPU and 17.35 ns in the others: not two phases of the host.
    let free = note("t.free");
    assert!(
        free.contains("the kernel put the threads on one CPU in some trials")
            && free.ends_with("across CPUs, too, IDLE")
            && !free.contains("HOST"),
        "{free}"
    );
}

#[test]
fn only_shown_rows_on_one_cpu_vote_on_a_slowed_trial() {
    let mut group = Interleaved::new();
    let batch = |_: u64| Ok(Duration::from_micros(1));
    group
        .row("t.same", Unit::Ns, "same_cpu(0)", "", batch)
        .row("t.cross", Unit::Ns, "cross_cpu(0,1)", "", batch)
        .row("t.free", Unit::Ns, "unpinned", "", batch)
        .row_fixed(
            "t.pool",
            Unit::Ms,
            "cpus(0,1), one worker per CPU",
            "",
            1,
            batch,
        )
        .row(
            "t.remote",
            Unit::Us,
            "client_cpu(0),server(10.0.0.2:7000)",
            "",
            batch,
        )
        .input("t.raw", batch);
    let votes: Vec<(&str, bool)> = group
        .rows
        .iter()
        .map(|(spec, row)| (spec.id.as_str(), row.one_cpu))
        .collect();
    assert_eq!(
        votes,
        [
            ("t.same", true),
            ("t.cross", false),
            ("t.free", false),
            ("t.pool", false),
            ("t.remote", false),
            ("t.raw", false)
        ]
    );
}

/// A peer of its own programs (as Go's) with three, each batch logging the program it ran in.
mod programs {
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use crate::cancel::Cancel;
    use crate::error::Result;
    use crate::subjects::peers::{Peer, PeerInfo, Running, Started};

    pub struct Three;

    pub static INFO: PeerInfo = PeerInfo {
        name: "three",
        title: "three",
        one: "a unit",
        many: "units",
        floor: false,
        slow_start: true,
        own_process: true,
        spawn: "spawn",
        spawn_unpinned: None,
        yields: "yields",
        chan: None,
        balance: None,
    };

    impl Peer for Three {
        fn info(&self) -> &'static PeerInfo {
            &INFO
        }

        fn start(&self, _: &Cancel) -> Result<Box<dyn Running>> {
            unreachable!("started once, by the test")
        }
    }

    pub struct Log {
        pub current: usize,
        pub ran_in: Rc<RefCell<Vec<usize>>>,
    }

    impl Running for Log {
        fn spawn_join(&mut self, n: u64) -> Result<Duration> {
            self.ran_in.borrow_mut().push(self.current);
            let t = Instant::now();
            while t.elapsed() < Duration::from_nanos(n * 100) {
                std::hint::spin_loop();
            }
            Ok(t.elapsed())
        }

        fn yield_switch(&mut self, n: u64) -> Result<Duration> {
            self.spawn_join(n)
        }

        fn programs(&self) -> usize {
            3
        }

        fn use_program(&mut self, k: usize) {
            self.current = k % 3;
        }
    }

    pub fn started(ran_in: &Rc<RefCell<Vec<usize>>>) -> Started {
        Started {
            info: &INFO,
            peer: &Three,
            running: RefCell::new(Box::new(Log {
                current: 0,
                ran_in: ran_in.clone(),
            })),
        }
    }
}

#[test]
fn a_peer_with_several_programs_runs_each_trial_in_the_next_one() {
    let alone = Standalone::new();
    let ctx = alone.ctx(Mode::Tiny);
    let cancel = crate::cancel::Cancel::never();
    let ran_in = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let peer = programs::started(&ran_in);
    let mut out = Outcome::default();
    let mut group = Interleaved::new();
    let placement = crate::measure::placement::Placement::SameCpu(0);
    group
        .peer_row(&peer, &cancel, ("t.p", placement, "spawns"), |r, n| {
            r.spawn_join(n)
        })
        .peer_row(&peer, &cancel, ("t.q", placement, "yields"), |r, n| {
            r.yield_switch(n)
        });
    group.measure(&ctx, &mut out).unwrap();
    let p = out.metric("t.p").unwrap();
    assert!(p.note.contains("3 copies of the program"), "{}", p.note);
    assert_eq!(p.flags, ["one_program"]);
    let trials = p.trials.as_ref().unwrap().taken;
    assert!(trials >= 3, "{trials} trials");
    // Calibration makes a subject of its own, in program 0; then each trial's batches (its
    // warm-up and rounds, both rows') run in one program, and the trials take the programs in
    // turn: 1, 2, 0, 1, ...
    let ran_in = ran_in.borrow();
    let mut turns = ran_in.clone();
    turns.dedup();
    assert_eq!(turns.len(), trials + 1, "{ran_in:?}");
    for (i, k) in turns.iter().enumerate() {
        assert_eq!(*k, i % 3, "program of subject {i}: {ran_in:?}");
    }
}
