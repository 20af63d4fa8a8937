//! Metric, series and table ids: how they are built and how they are read back. An id is
//! dotted segments, `<experiment>.<what>[.<qualifier>...]`; the experiments build theirs with
//! these functions and the reports take them apart with them, so that the shape of an id is
//! written down once (docs/results-schema.md lists every id; a test checks the families here
//! against it).

mod studies;
pub use studies::{coop, create, latency, preempt, priority, shm, switch, sync, throttle};

/// The segment a ratio's second term follows: `<a>.vs_<b>` is a over b, round by round.
const VS: &str = "vs_";

/// The id's segments.
pub fn segments(id: &str) -> impl Iterator<Item = &str> {
    id.split('.')
}

/// The experiment an id belongs to: its first segment.
pub fn experiment(id: &str) -> &str {
    segments(id).next().unwrap_or(id)
}

/// The id without its experiment, as a label inside the experiment's own section; the whole
/// id when it does not belong to `experiment`.
pub fn within<'a>(experiment: &str, id: &'a str) -> &'a str {
    id.strip_prefix(experiment)
        .and_then(|s| s.strip_prefix('.'))
        .unwrap_or(id)
}

/// The last segment: a series' subject (`create.time_vs_n.thread` -> `thread`) or a figure's
/// statistic.
pub fn last(id: &str) -> &str {
    id.rsplit('.').next().unwrap_or(id)
}

/// The segments between the experiment and the last, for an id of three or more segments
/// (`shm.thread.read_time` -> `thread`, `a.b.c.d` -> `b.c`).
pub fn middle(id: &str) -> Option<&str> {
    let (_, rest) = id.split_once('.')?;
    Some(rest.rsplit_once('.')?.0)
}

/// The subject of an id of three or more segments: its second (`server.epoll.rate.p99` ->
/// `epoll`); None for `<experiment>.<what>`.
pub fn subject(id: &str) -> Option<&str> {
    let mut s = segments(id);
    let (_, subject, more) = (s.next(), s.next(), s.next());
    more.and(subject)
}

/// Whether `id` is `prefix` or starts with `prefix` followed by a dot.
pub fn is_under(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Whether `id`'s last segment is `what`.
pub fn ends_in(id: &str, what: &str) -> bool {
    last(id) == what
}

/// `<a>.vs_<b>`: the ratio of the figure `a` over the subject `b`, taken round by round.
pub fn ratio(a: &str, b: &str) -> String {
    format!("{a}.{VS}{b}")
}

/// A ratio id's two terms: `a.b.vs_c.d` -> (`a.b`, `c.d`); None when `id` is no ratio.
pub fn parse_ratio(id: &str) -> Option<(&str, &str)> {
    let at = id.find(&format!(".{VS}"))?;
    Some((&id[..at], &id[at + 1 + VS.len()..]))
}

/// A figure in a placement: `<what>.<placement>` (`UNPINNED`, `SAME_CPU`, `CROSS_CPU`).
pub fn placed(what: &str, placement: &str) -> String {
    format!("{what}.{placement}")
}

/// The default-placement twin of a figure: `<what>.unpinned`.
pub fn unpinned(what: &str) -> String {
    placed(what, UNPINNED)
}

/// The ratio of a figure in the default placement over the same figure pinned:
/// `<what>.unpinned.vs_pinned`.
pub fn unpinned_vs_pinned(what: &str) -> String {
    ratio(&unpinned(what), PINNED)
}

/// The segment that marks a default-placement figure (no affinity: what a program gets).
pub const UNPINNED: &str = "unpinned";
/// The ratio term of a default-placement figure's pinned twin.
pub const PINNED: &str = "pinned";
/// Both parties pinned to one CPU.
pub const SAME_CPU: &str = "same_cpu";
/// The parties pinned to two CPUs.
pub const CROSS_CPU: &str = "cross_cpu";

/// The server experiment's ids: `server.<design>.<statistic>`, the generator's own figures
/// under `server.generator`, the study's ratios and series.
pub mod server {
    use super::{last, ratio, segments, SAME_CPU};

    /// The experiment's name, the first segment of its ids.
    pub const EXPERIMENT: &str = "server";
    /// Not a design: the load generator's calibration.
    pub const GENERATOR: &str = "generator";
    /// The two servers the study compared.
    pub const THREAD_PER_CLIENT: &str = "thread_per_client";
    pub const FORK_PER_CLIENT: &str = "fork_per_client";
    /// The short name the study's fork/thread ratio uses for thread_per_client.
    const THREAD_SHORT: &str = "thread";

    /// Defines each statistic as a constant, and `ALL` listing them for the schema test.
    macro_rules! statistics {
        ($($(#[$doc:meta])* $name:ident = $value:literal;)*) => {
            $($(#[$doc])* pub const $name: &str = $value;)*
            /// Every statistic a design reports, as `server.<design>.<statistic>`.
            pub const ALL: &[&str] = &[$($value),*];
        };
    }

    /// The statistics each design reports (`server.<design>.<statistic>`).
    pub mod stat {
        statistics! {
            PEAK = "peak";
            RATE_P50 = "rate.p50";
            RATE_P99 = "rate.p99";
            RATE_P999 = "rate.p999";
            RATE_MAX = "rate.max";
            RATE_UNCORRECTED_P99 = "rate.uncorrected_p99";
            RATE_SEND_LAG_P99 = "rate.send_lag_p99";
            RATE_ACHIEVED = "rate.achieved";
            CPU_PER_REQUEST = "cpu_per_request";
            SWITCHES_PER_REQUEST = "switches_per_request";
            ERRORS = "errors";
            RSS_PER_CONNECTION = "rss_per_connection";
            THREADS = "threads";
            PROCESSES = "processes";
            CONNECTIONS = "connections";
            BLOCK_P99 = "block.p99";
            BLOCK_ACHIEVED = "block.achieved";
            SPIN_P99 = "spin.p99";
            C10K_P99 = "c10k.p99";
            C10K_ERRORS = "c10k.errors";
            C10K_RSS_PER_CONNECTION = "c10k.rss_per_connection";
            C10K_CONNECTIONS = "c10k.connections";
            C10K_LISTEN_OVERFLOWS = "c10k.listen_overflows";
            CAPACITY = "capacity";
            OVERLOAD_GOODPUT = "overload.goodput";
            OVERLOAD_P99 = "overload.p99";
            OVERLOAD_REJECTED = "overload.rejected";
            OVERLOAD_JAIN = "overload.jain";
            LIMITS_P50 = "limits.p50";
            LIMITS_MAX = "limits.max";
            LIMITS_SERVED = "limits.served";
            LIMITS_BUSY = "limits.busy";
            LIMITS_UNANSWERED = "limits.unanswered";
            LIMITS_CUT = "limits.cut";
        }
        /// The prefix of the connection-scale step's footprint figures (`c10k.threads`, ...).
        pub const C10K: &str = "c10k.";
        /// The generator's own: verified replies per second of its CPU.
        pub const GENERATOR_CEILING: &str = "ceiling";
        /// A connection figure's statistics (see `Connection`).
        pub const MEAN: &str = "mean";
        pub const FIRST: &str = "first";
        pub const REST: &str = "rest";
    }

    /// The histograms the open-loop p99 (`stat::RATE_P99`) keeps, by name.
    pub mod histogram {
        /// From each request's planned send (no coordinated omission).
        pub const LATENCY: &str = "latency";
        /// From its actual send.
        pub const SERVICE: &str = "service";
        /// The generator's lag behind its plan.
        pub const SEND_LAG: &str = "send_lag";
        /// The server's own time per request, as it reported it.
        pub const SERVER_SERVICE: &str = "server_service";
    }

    /// `server.<design>.<statistic>`.
    pub fn id(design: &str, statistic: &str) -> String {
        format!("{EXPERIMENT}.{design}.{statistic}")
    }

    /// `<statistic>` of `design` over the same of `base`: the statistic part of
    /// `server.<design>.vs_<base>.<statistic>`.
    pub fn vs_design(base: &str, statistic: &str) -> String {
        format!("{}{base}.{statistic}", super::VS)
    }

    /// A server id taken apart.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ServerId<'a> {
        /// A design's name, or `GENERATOR`.
        pub design: &'a str,
        /// Everything after the design: `rate.p99`, `peak.unpinned.vs_pinned`, ...
        pub statistic: &'a str,
    }

    impl<'a> ServerId<'a> {
        /// `server.<design>.<statistic>`; None for any other id.
        pub fn parse(id: &'a str) -> Option<ServerId<'a>> {
            let rest = id.strip_prefix(EXPERIMENT)?.strip_prefix('.')?;
            let (design, statistic) = rest.split_once('.')?;
            (!design.is_empty() && !statistic.is_empty()).then_some(ServerId { design, statistic })
        }

        /// A design's figure, not the generator's.
        pub fn is_design(&self) -> bool {
            self.design != GENERATOR
        }
    }

    /// Where the study's designs sort: thread_per_client, fork_per_client, then the others.
    pub fn study_order(design: &str) -> u8 {
        match design {
            THREAD_PER_CLIENT => 0,
            FORK_PER_CLIENT => 1,
            _ => 2,
        }
    }

    /// The study's connection figures: `server.<design>.[same_cpu.]<short|long>.<size>.<stat>`
    /// (`stat::MEAN`, or `FIRST` and `REST` for the first request and the others).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Connection<'a> {
        pub design: &'a str,
        /// Client and server on one CPU.
        pub same_cpu: bool,
        /// Many requests per connection rather than one.
        pub long: bool,
        /// The request size as the id spells it: `1kib`, `100b`, ...
        pub size: &'a str,
        pub statistic: &'a str,
    }

    impl<'a> Connection<'a> {
        pub fn parse(id: &'a str) -> Option<Connection<'a>> {
            let s = ServerId::parse(id)?;
            let (same_cpu, long, rest) = kind_of(s.statistic)?;
            let (size, statistic) = rest.split_once('.')?;
            (!statistic.contains('.')).then_some(Connection {
                design: s.design,
                same_cpu,
                long,
                size,
                statistic,
            })
        }

        /// `server.<design>.[same_cpu.]<short|long>.<size>.<statistic>`.
        pub fn id(&self) -> String {
            self.with(self.statistic)
        }

        /// The same connection figure with another statistic.
        pub fn with(&self, statistic: &str) -> String {
            id(
                self.design,
                &connection(self.same_cpu, self.long, self.size, statistic),
            )
        }
    }

    /// The statistic part of a connection figure: `[same_cpu.]<short|long>.<size>.<statistic>`,
    /// for `id` or a design's metric.
    pub fn connection(same_cpu: bool, long: bool, size: &str, statistic: &str) -> String {
        format!("{}{size}.{statistic}", kind(same_cpu, long))
    }

    /// `[same_cpu.]<short|long>.`: the kind of connection.
    fn kind(same_cpu: bool, long: bool) -> String {
        format!(
            "{}{}{}.",
            if same_cpu { SAME_CPU } else { "" },
            if same_cpu { "." } else { "" },
            if long { "long" } else { "short" }
        )
    }

    /// Reads `[same_cpu.]<short|long>.<rest>` into (same CPU, long, rest).
    fn kind_of(s: &str) -> Option<(bool, bool, &str)> {
        let (same_cpu, s) = match s.split_once('.') {
            Some((SAME_CPU, rest)) => (true, rest),
            _ => (false, s),
        };
        let (k, rest) = s.split_once('.')?;
        let long = match k {
            "short" => false,
            "long" => true,
            _ => return None,
        };
        Some((same_cpu, long, rest))
    }

    /// A request size as an id segment: `1kib`, `64b`, `16kib`.
    pub fn size_label(bytes: u32) -> String {
        if bytes >= 1024 && bytes % 1024 == 0 {
            format!("{}kib", bytes / 1024)
        } else {
            format!("{bytes}b")
        }
    }

    /// A size segment in bytes: `64b` -> 64, `1kib` -> 1024, `2mib` -> 2 MiB.
    pub fn size_bytes(size: &str) -> Option<f64> {
        let (num, mult) = if let Some(n) = size.strip_suffix("kib") {
            (n, 1024.0)
        } else if let Some(n) = size.strip_suffix("mib") {
            (n, 1024.0 * 1024.0)
        } else if let Some(n) = size.strip_suffix('b') {
            (n, 1.0)
        } else {
            return None;
        };
        num.parse::<f64>().ok().map(|n| n * mult)
    }

    /// The study's fork/thread ratio:
    /// `server.fork_per_client.vs_thread.[same_cpu.]<short|long>.<size>`, as (same CPU, long,
    /// size).
    pub fn parse_fork_ratio(id: &str) -> Option<(bool, bool, &str)> {
        let s = ServerId::parse(id).filter(|s| s.design == FORK_PER_CLIENT)?;
        let rest = s
            .statistic
            .strip_prefix(super::VS)?
            .strip_prefix(THREAD_SHORT)?
            .strip_prefix('.')?;
        let (same_cpu, long, size) = kind_of(rest)?;
        (!size.contains('.')).then_some((same_cpu, long, size))
    }

    /// The id of the study's fork/thread ratio.
    pub fn fork_ratio(same_cpu: bool, long: bool, size: &str) -> String {
        format!(
            "{}.{}",
            ratio(&format!("{EXPERIMENT}.{FORK_PER_CLIENT}"), THREAD_SHORT),
            format_args!("{}{size}", kind(same_cpu, long))
        )
    }

    /// The study's figure series: `server.fig4.<design>`, `server.fig5.<design>`.
    pub fn figure_series(figure: u8, design: &str) -> String {
        format!("{EXPERIMENT}.fig{figure}.{design}")
    }

    /// The design a figure series draws, when `id` is one of `figure`'s.
    pub fn figure_series_design(id: &str, figure: u8) -> Option<&str> {
        let mut s = segments(id);
        let fig = format!("fig{figure}");
        (s.next() == Some(EXPERIMENT) && s.next() == Some(fig.as_str()) && s.next().is_some())
            .then(|| last(id))
    }
}

/// The fairness experiment's per-lock figures: `fairness.<lock>.t<threads>.<statistic>`.
pub mod fairness {
    use super::segments;

    pub const EXPERIMENT: &str = "fairness";
    pub const THROUGHPUT: &str = "throughput";
    pub const JAIN: &str = "jain";
    pub const MAX_MIN: &str = "max_min";
    pub const WAIT_P99: &str = "wait_p99";
    pub const WAIT_MAX: &str = "wait_max";
    pub const BARGING: &str = "barging";

    /// `fairness.<lock>.t<threads>.<statistic>`.
    pub fn id(lock: &str, threads: impl std::fmt::Display, statistic: &str) -> String {
        format!("{EXPERIMENT}.{lock}.t{threads}.{statistic}")
    }

    /// (lock, thread count as written, statistic) of a per-lock figure.
    pub fn parse(id: &str) -> Option<(&str, &str, &str)> {
        let mut s = segments(id);
        match (s.next(), s.next(), s.next(), s.next(), s.next()) {
            (Some(EXPERIMENT), Some(lock), Some(t), Some(statistic), None) => {
                Some((lock, t.strip_prefix('t')?, statistic))
            }
            _ => None,
        }
    }
}

/// The memory-ordering litmus tests: `ordering.<test>.<ordering>.relaxed_rate`, and the
/// table of the outcomes each ordering allows.
pub mod ordering {
    use super::segments;

    pub const EXPERIMENT: &str = "ordering";
    /// How often the relaxed outcome was seen.
    pub const RELAXED_RATE: &str = "relaxed_rate";
    /// The table: test, ordering, the outcome it allows or forbids.
    pub const OUTCOMES_TABLE: &str = "ordering.outcomes";

    /// `ordering.<test>.<ordering>`: the stem of a test's figures under one ordering.
    pub fn stem(test: &str, order: &str) -> String {
        format!("{EXPERIMENT}.{test}.{order}")
    }

    /// `ordering.<test>.<ordering>.relaxed_rate`.
    pub fn relaxed_rate(test: &str, order: &str) -> String {
        format!("{}.{RELAXED_RATE}", stem(test, order))
    }

    /// (test, ordering) of a relaxed-rate id.
    pub fn parse_relaxed_rate(id: &str) -> Option<(&str, &str)> {
        let mut s = segments(id);
        match (s.next(), s.next(), s.next(), s.next(), s.next()) {
            (Some(EXPERIMENT), Some(test), Some(order), Some(RELAXED_RATE), None) => {
                Some((test, order))
            }
            _ => None,
        }
    }
}

/// The doctor's ids: `doctor.<knob>.<figure>.<off|on|effect>`, a figure with a setting off,
/// on, and the per-round ratio on/off; `cpu` is the figure of the CPU the setting burns.
pub mod doctor {
    use super::segments;

    pub const EXPERIMENT: &str = "doctor";
    /// The figure of the CPU a setting burns.
    pub const CPU: &str = "cpu";
    pub const OFF: &str = "off";
    pub const ON: &str = "on";
    pub const EFFECT: &str = "effect";
    /// The tables: facts about the machine, the knobs tried, how to apply each, what was
    /// restored after.
    pub const FACTS: &str = "facts";
    pub const KNOBS: &str = "knobs";
    pub const APPLY: &str = "apply";
    pub const RESTORED: &str = "restored";
    /// The last part of an attribution table's name (`doctor.wakeup_split`).
    const SPLIT: &str = "_split";

    /// `doctor.<table>`.
    pub fn table(name: &str) -> String {
        format!("{EXPERIMENT}.{name}")
    }

    /// Whether `id` is an attribution table: where a figure's time went, step by step.
    pub fn is_split_table(id: &str) -> bool {
        id.ends_with(SPLIT)
    }

    /// `doctor.<knob>.<figure>`: the stem the off, on and effect ids share.
    pub fn figure(knob: &str, figure: &str) -> String {
        format!("{EXPERIMENT}.{knob}.{figure}")
    }

    /// `doctor.<knob>.<figure>.<part>`.
    pub fn part(knob: &str, figure: &str, part: &str) -> String {
        format!("{}.{part}", self::figure(knob, figure))
    }

    /// The knob and figure of an effect id (`doctor.<knob>.<figure>.effect`).
    pub fn parse_effect(id: &str) -> Option<(&str, &str)> {
        let mut s = segments(id);
        match (s.next(), s.next(), s.next(), s.next(), s.next()) {
            (Some(EXPERIMENT), Some(knob), Some(figure), Some(EFFECT), None) => {
                Some((knob, figure))
            }
            _ => None,
        }
    }
}

/// The peer runtimes' rows (`subjects::peers`): `create.<peer>` (spawn and join),
/// `switch.<peer>.yield`, `switch.<peer>.chan`, the pool-balance rows `create.<peer>.burst` and
/// `create.<peer>.tree`, and the reference peer's ratios over each of the others.
pub mod peer {
    /// `create.<peer>`: a unit of work started and waited for.
    pub fn spawn(peer: &str) -> String {
        format!("create.{peer}")
    }

    /// `switch.<peer>.yield`: two units of work alternating.
    pub fn yields(peer: &str) -> String {
        format!("switch.{peer}.yield")
    }

    /// `switch.<peer>.chan`: a message over the peer's channels.
    pub fn chan(peer: &str) -> String {
        format!("switch.{peer}.chan")
    }

    /// The pool-balance kinds: a burst of units spawned by one root, and a fan-out/fan-in tree.
    pub const BURST: &str = "burst";
    pub const TREE: &str = "tree";

    /// `create.<peer>.<kind>`: a pool-balance row on two CPUs, `kind` `BURST` or `TREE`.
    pub fn balance(peer: &str, kind: &str) -> String {
        format!("create.{peer}.{kind}")
    }

    /// `switch.<reference>.vs_<peer>`: the peer's yield switch over the reference's.
    pub fn yield_ratio(reference: &str, peer: &str) -> String {
        super::ratio(&format!("switch.{reference}"), peer)
    }
}

#[cfg(test)]
mod tests {
    use super::server::{self, stat, Connection, ServerId};
    use super::*;

    #[test]
    fn ids_read_back_as_built() {
        let id = server::id("epoll", stat::RATE_P99);
        assert_eq!(id, "server.epoll.rate.p99");
        let s = ServerId::parse(&id).unwrap();
        assert_eq!((s.design, s.statistic), ("epoll", "rate.p99"));
        assert!(s.is_design());
        assert!(!ServerId::parse("server.generator.ceiling")
            .unwrap()
            .is_design());
        assert_eq!(ServerId::parse("server.epoll"), None);
        assert_eq!(ServerId::parse("serverless.epoll.peak"), None);

        let u = unpinned_vs_pinned(stat::PEAK);
        assert_eq!(u, "peak.unpinned.vs_pinned");
        assert_eq!(parse_ratio(&u), Some(("peak.unpinned", "pinned")));
        assert_eq!(parse_ratio("switch.thread.yield"), None);
        assert_eq!(
            server::vs_design("thread_per_client", stat::CPU_PER_REQUEST),
            "vs_thread_per_client.cpu_per_request"
        );

        let f = server::fork_ratio(true, false, "1kib");
        assert_eq!(f, "server.fork_per_client.vs_thread.same_cpu.short.1kib");
        assert_eq!(server::parse_fork_ratio(&f), Some((true, false, "1kib")));
        assert_eq!(
            server::parse_fork_ratio("server.fork_per_client.vs_thread.long.64kib"),
            Some((false, true, "64kib"))
        );
        assert_eq!(
            server::parse_fork_ratio("server.epoll.vs_thread.long.1kib"),
            None
        );

        let c = Connection::parse("server.epoll.same_cpu.long.10kib.first").unwrap();
        assert_eq!(
            (c.design, c.same_cpu, c.long, c.size),
            ("epoll", true, true, "10kib")
        );
        assert_eq!(c.with(stat::REST), "server.epoll.same_cpu.long.10kib.rest");
        let m = Connection::parse("server.thread_per_client.short.1kib.mean").unwrap();
        assert_eq!((m.same_cpu, m.long, m.statistic), (false, false, "mean"));
        assert_eq!(Connection::parse("server.epoll.rate.p99"), None);

        assert_eq!(server::figure_series(4, "epoll"), "server.fig4.epoll");
        assert_eq!(
            server::figure_series_design("server.fig4.epoll", 4),
            Some("epoll")
        );
        assert_eq!(server::figure_series_design("server.fig5.epoll", 4), None);
    }

    /// docs/results-schema.md documents every statistic the vocabulary knows, in each placement
    /// the experiment reports it, and the ratio families.
    #[test]
    fn the_schema_doc_lists_every_server_statistic() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
        let text = std::fs::read_to_string(doc).expect("docs/results-schema.md exists");
        let documented = |id: &str| text.contains(&format!("`{id}`"));
        let mut missing: Vec<String> = stat::ALL
            .iter()
            .map(|s| server::id("<design>", s))
            .chain(
                [
                    stat::PEAK,
                    stat::RATE_P50,
                    stat::RATE_P99,
                    stat::CPU_PER_REQUEST,
                ]
                .iter()
                .map(|s| server::id("<design>", &unpinned(s))),
            )
            .chain(
                [stat::PEAK, stat::RATE_P99, stat::CPU_PER_REQUEST]
                    .iter()
                    .map(|s| server::id("<design>", &unpinned_vs_pinned(s))),
            )
            .chain([
                server::id(server::GENERATOR, stat::GENERATOR_CEILING),
                server::id(server::GENERATOR, stat::CPU_PER_REQUEST),
                server::id(
                    "<design>",
                    &server::vs_design(server::THREAD_PER_CLIENT, stat::CPU_PER_REQUEST),
                ),
                server::fork_ratio(false, false, "<size>"),
                server::fork_ratio(true, true, "<size>"),
            ])
            .filter(|id| !documented(id))
            .collect();
        for (same_cpu, long) in [(false, false), (false, true), (true, false), (true, true)] {
            let c = server::Connection {
                design: "<design>",
                same_cpu,
                long,
                size: "<size>",
                statistic: stat::MEAN,
            };
            if !documented(&c.id()) {
                missing.push(c.id());
            }
        }
        assert!(
            missing.is_empty(),
            "add these ids to docs/results-schema.md: {missing:?}"
        );
    }

    /// Every id the studies' builders make, and the doctor's tables, are in
    /// docs/results-schema.md.
    #[test]
    fn the_schema_doc_lists_every_study_id() {
        let doc =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results-schema.md");
        let text = std::fs::read_to_string(doc).expect("docs/results-schema.md exists");
        let missing: Vec<String> = studies::all()
            .into_iter()
            .chain(
                [
                    doctor::FACTS,
                    doctor::KNOBS,
                    doctor::APPLY,
                    doctor::RESTORED,
                ]
                .iter()
                .map(|t| doctor::table(t)),
            )
            .chain([
                server::id(
                    "<design>",
                    &server::connection(false, false, "<size>", stat::MEAN),
                ),
                fairness::id("<lock>", "<T>", fairness::JAIN),
                ordering::relaxed_rate("<test>", "<ordering>"),
            ])
            .filter(|id| !text.contains(&format!("`{id}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "add these ids to docs/results-schema.md: {missing:?}"
        );
    }

    #[test]
    fn fairness_and_ordering_ids_read_back() {
        let f = fairness::id("mutex", 4, fairness::JAIN);
        assert_eq!(f, "fairness.mutex.t4.jain");
        assert_eq!(fairness::parse(&f), Some(("mutex", "4", "jain")));
        assert_eq!(
            fairness::parse("fairness.mutex.throughput_vs_threads"),
            None
        );
        let o = ordering::relaxed_rate("sb", "relaxed");
        assert_eq!(o, "ordering.sb.relaxed.relaxed_rate");
        assert_eq!(ordering::parse_relaxed_rate(&o), Some(("sb", "relaxed")));
        assert_eq!(ordering::parse_relaxed_rate("ordering.sb.relaxed"), None);
    }

    #[test]
    fn doctor_ids_read_back() {
        let id = doctor::part("idle", "wake", doctor::EFFECT);
        assert_eq!(id, "doctor.idle.wake.effect");
        assert_eq!(doctor::parse_effect(&id), Some(("idle", "wake")));
        assert_eq!(doctor::parse_effect("doctor.idle.wake.on"), None);
        assert_eq!(doctor::parse_effect("doctor.idle.wake.effect.x"), None);
    }

    #[test]
    fn generic_parts() {
        assert_eq!(experiment("create.thread.std"), "create");
        assert_eq!(within("create", "create.thread.std"), "thread.std");
        assert_eq!(within("switch", "create.thread"), "create.thread");
        assert_eq!(last("create.time_vs_n.thread"), "thread");
        assert_eq!(subject("server.epoll.peak"), Some("epoll"));
        assert_eq!(subject("sync.mutex"), None);
        assert!(is_under("latency.wakeup.thread", "latency.wakeup"));
        assert!(!is_under("latency.wakeups", "latency.wakeup"));
        assert!(ends_in("preempt.time_vs_n", "time_vs_n"));
        assert_eq!(middle("shm.thread.read_time"), Some("thread"));
        assert_eq!(middle("a.b.c.d"), Some("b.c"));
        assert_eq!(middle("sync.mutex"), None);
    }
}
