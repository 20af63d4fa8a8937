//! "What to choose on this machine": the run's answers (`RunResults::advice`, built once by
//! report/advice.rs) as they are, each linked to the charts of the experiments it rests on.
//! A file written before the answers were stored gets them built from its metrics first.

use std::fmt::Write;

use super::svg::esc;
use crate::results::{Advice, RunResults};

/// A chart in the page, for links.
#[derive(Debug, Clone)]
pub struct ChartRef {
    pub experiment: String,
    pub key: String,
    pub title: String,
}

/// The charts that show each question's figures: (experiment, a part of the chart's key).
/// A chart is linked when its experiment is one the answer's metrics come from.
fn charts_of(topic: &str) -> &'static [(&'static str, &'static str)] {
    match topic {
        "Pool size" => &[("throttle", "throttle-curve")],
        "Lock" => &[("fairness", "throughput_vs_threads"), ("fairness", "wait")],
        "Server design" => &[
            ("server", "server-fig4"),
            ("server", "server-fork-ratio"),
            ("server", "server-cpu"),
            ("server", "server-spectrum"),
            ("server", "server-placement"),
            ("server", "server-block"),
            ("server", "server-memory"),
            ("server", "server-limits"),
            ("server", "server-capacity"),
            ("create", "today"),
            ("create", "fig1"),
        ],
        "Priority" => &[("priority", "nice-shares"), ("latency", "longest")],
        "Cooperative or preemptive" => &[("coop", "coop-scores"), ("preempt", "throughput_loss")],
        "Green or kernel threads" => &[("create", "today"), ("switch", "user-level")],
        _ => &[],
    }
}

pub fn render(r: &RunResults, charts: &[ChartRef]) -> String {
    let built;
    let answers: &[Advice] = if r.advice.is_empty() {
        built = crate::report::advice::build(r);
        &built
    } else {
        &r.advice
    };
    let mut out = String::from(
        "<section class=\"advice\" id=\"advice\">\n<h2>What to choose on this machine</h2>\n<ul>\n",
    );
    for a in answers {
        let links = links(a, charts);
        let _ = write!(out, "<li><b>{}.</b> {}", esc(&a.topic), esc(&a.claim));
        if !links.is_empty() {
            let _ = write!(
                out,
                " <span class=\"muted\">Rests on: {}.</span>",
                links.join("; ")
            );
        }
        out.push_str("</li>\n");
    }
    out.push_str("</ul>\n</section>\n");
    out
}

/// Links to the charts of the experiments whose metrics the answer quotes.
fn links(a: &Advice, charts: &[ChartRef]) -> Vec<String> {
    let from = |exp: &str| {
        a.rests_on
            .iter()
            .any(|id| crate::results::ids::experiment(id) == exp)
    };
    charts_of(&a.topic)
        .iter()
        .filter(|(exp, _)| from(exp))
        .filter_map(|(exp, part)| {
            charts
                .iter()
                .find(|c| c.experiment == *exp && c.key.contains(part))
                .map(|c| {
                    format!(
                        "<a href=\"#{}\">{}</a> ({})",
                        c.key,
                        esc(&c.title),
                        esc(exp)
                    )
                })
        })
        .collect()
}
