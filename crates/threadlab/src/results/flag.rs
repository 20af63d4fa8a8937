//! Why a figure should not be taken at face value: the flags a metric carries, each with what
//! it means. The results file keeps them as their names (`Metric::flags`), and a flagged
//! metric's note starts with them in brackets, so that a reader of the note alone (the
//! terminal table, Markdown, CSV) sees them too; `with_flags` and `note_body` are the two ends
//! of that convention.

use super::Metric;

/// A reason to doubt a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// The load generator may have held the load back.
    ClientBound,
    /// The kernel's accept queue overflowed.
    ListenOverflow,
    /// The server fell behind the plan.
    Saturated,
    /// The client saw failures.
    Errors,
    /// Little's law did not hold.
    LittleLawMismatch,
    /// A race between threads whose outcome can outlast a run's trials decides the figure.
    Race,
    /// It times the wake-up of an idle virtual CPU, which the host serves differently from
    /// one run to the next.
    IdleVcpu,
    /// Its trials ran in a peer's own programs, started for the group (Go's: one, or three
    /// taken in turn), each of whose regimes can last that program's life.
    OneProgram,
}

impl Flag {
    pub const ALL: [Flag; 8] = [
        Flag::ClientBound,
        Flag::ListenOverflow,
        Flag::Saturated,
        Flag::Errors,
        Flag::LittleLawMismatch,
        Flag::Race,
        Flag::IdleVcpu,
        Flag::OneProgram,
    ];

    /// The flags that say a regime decides the figure (one that can last a run, so that compare
    /// reads its changes as unstable), in the order compare names them. A row derived from a
    /// row that carries one carries it too.
    pub const REGIME: [Flag; 3] = [Flag::IdleVcpu, Flag::OneProgram, Flag::Race];

    /// The stable snake_case name the results file keeps.
    pub fn name(self) -> &'static str {
        match self {
            Flag::ClientBound => "client_bound",
            Flag::ListenOverflow => "listen_overflow",
            Flag::Saturated => "saturated",
            Flag::Errors => "errors",
            Flag::LittleLawMismatch => "little_law_mismatch",
            Flag::Race => super::RACE_FLAG,
            Flag::IdleVcpu => "idle_vcpu",
            Flag::OneProgram => "one_program",
        }
    }

    /// The flag a name stands for; None for a name this version does not know (a newer
    /// file's), which readers show as it is.
    pub fn from_name(name: &str) -> Option<Flag> {
        Flag::ALL.into_iter().find(|f| f.name() == name)
    }

    /// What the flag means, for captions and the first things to know.
    pub fn meaning(self) -> &'static str {
        match self {
            Flag::ClientBound => {
                "the load generator may have held the load back (busy, lagging its plan, or \
                 near its own ceiling)"
            }
            Flag::ListenOverflow => "the kernel's accept queue overflowed during the step",
            Flag::Saturated => {
                "the server fell behind the plan: the step was cut short or under 97% of the \
                 planned requests were answered"
            }
            Flag::Errors => "the client saw failures (connect, reset, a wrong reply)",
            Flag::LittleLawMismatch => {
                "throughput x latency did not match the requests in flight (Little's law) \
                 within 10%"
            }
            Flag::Race => {
                "a race between threads decides it, and its outcome can outlast all the trials \
                 of a run: compare reads its changes as unstable"
            }
            Flag::IdleVcpu => {
                "it times the wake-up of an idle virtual CPU, which the host brings back faster \
                 or slower from one run to the next: compare reads its changes as unstable"
            }
            Flag::OneProgram => {
                "its trials ran in a peer's own programs (Go's, started once for the group: one, \
                 or three taken in turn), each of whose regimes can last its life: compare reads \
                 its changes as unstable"
            }
        }
    }
}

/// What a flag named `name` means; an unknown name's meaning is in the metric's note.
pub fn meaning_of(name: &str) -> &'static str {
    Flag::from_name(name).map_or("see the metric's note", Flag::meaning)
}

/// Whether `m` carries `flag`.
pub fn has(m: &Metric, flag: Flag) -> bool {
    m.flags.iter().any(|f| f == flag.name())
}

/// The "[flag, flag] " a flagged metric's note starts with.
fn prefix(flags: &[String]) -> String {
    format!("[{}] ", flags.join(", "))
}

/// `m` carrying `flags`: named in its `flags` and at the start of its note.
pub fn with_flags(mut m: Metric, flags: &[String]) -> Metric {
    if !flags.is_empty() {
        m.note = tagged(flags, untagged(&m));
        m.flags = flags.to_vec();
    }
    m
}

/// `m` with `flag` added (once): named in its `flags` and at the start of its note.
pub fn add_flag(m: &mut Metric, flag: Flag) {
    if m.flags.iter().any(|f| f == flag.name()) {
        return;
    }
    let body = untagged(m).to_string();
    m.flags.push(flag.name().to_string());
    m.note = tagged(&m.flags, &body);
}

/// A note for a metric carrying `flags`: `body` behind them in brackets.
pub fn tagged(flags: &[String], body: &str) -> String {
    if flags.is_empty() {
        body.to_string()
    } else {
        format!("{}{body}", prefix(flags))
    }
}

/// A metric's note exactly as written, without the flags `tagged` put in front of it.
pub fn untagged(m: &Metric) -> &str {
    if m.flags.is_empty() {
        return &m.note;
    }
    m.note.strip_prefix(&prefix(&m.flags)).unwrap_or(&m.note)
}

/// A metric's note without the "[flag, flag] " its flags put in front of it, and without
/// leading space, for pages that show the flags apart (as badges).
pub fn note_body(m: &Metric) -> &str {
    let note = m.note.trim_start();
    if m.flags.is_empty() {
        return note;
    }
    match note.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((inside, rest)) if inside == m.flags.join(", ") => rest,
        _ => note,
    }
}

/// The names of `flags`, in order.
pub fn names(flags: &[Flag]) -> Vec<String> {
    flags.iter().map(|f| f.name().to_string()).collect()
}
