//! The HTML report: one self-contained file, readable offline, in a dark-mode browser and on
//! paper.
//!
//! - No network at all: no script, style, font or image is fetched. Charts are inline SVG drawn
//!   by `svg/`; the page's Content-Security-Policy forbids every fetch, so even a mistake
//!   could not load anything.
//! - Every text from the results file is escaped (`svg::esc`), `/` included, so a hostile name or
//!   note can neither add markup nor spell a URL.
//! - One small inline script records any error (or blocked load) into the page's root element
//!   (`data-errors`), and marks the page loaded (`data-ready`), so a headless browser's DOM dump
//!   shows both.
//!
//! Layout: the machine and what to know first (warnings, re-measured, noisy, skipped), one
//! section per experiment (`sections/` decides its charts), then "what to choose on this
//! machine" (`advice.rs`).

pub mod advice;
pub mod compare;
pub mod doctor;
mod parts;
pub mod sections;
pub mod server;
pub mod svg;

use std::collections::HashSet;
use std::fmt::Write;

use svg::esc;

use crate::report::{fmt_attempts, fmt_now, fmt_spread, fmt_then, machine_text, short_note};
use crate::results::{ExperimentResult, RunResults, Status, Table};

/// One chart of a section: its anchor, title, SVG, how it was measured, and its numbers.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Unique in the page once `Page::unique` has seen it; used as the figure's anchor.
    pub key: String,
    pub title: String,
    pub svg: String,
    /// How the figures were measured (from the metrics' and series' notes) and how to read it.
    pub caption: String,
    /// The numbers drawn, first row the header: shown beside the chart.
    pub numbers: Vec<Vec<String>>,
}

/// Tables longer than this fold away under the chart instead of standing beside it.
const NUMBERS_BESIDE_MAX_ROWS: usize = 14;

const STYLE: &str = include_str!("style.css");

/// Records errors and blocked loads into the root element; marks the page loaded.
const SCRIPT: &str = "(function(){var d=document.documentElement,errs=[];\
function rec(m){errs.push(String(m));d.setAttribute('data-errors',errs.join(' | '));}\
window.addEventListener('error',function(e){var t=e.target||{};\
rec(e.message||('failed to load '+(t.src||t.href||t.tagName)));},true);\
document.addEventListener('securitypolicyviolation',function(e){\
rec('blocked '+e.violatedDirective+' '+e.blockedURI);});\
window.addEventListener('load',function(){d.setAttribute('data-ready','1');});})();";

/// The whole page around `body`.
pub fn page(title: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + STYLE.len() + 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n",
    );
    let _ = writeln!(out, "<title>{}</title>", esc(title));
    let _ = writeln!(out, "<style>\n{STYLE}</style>");
    let _ = writeln!(out, "<script>{SCRIPT}</script>");
    out.push_str("</head>\n<body>\n");
    out.push_str(body);
    out.push_str("</body>\n</html>\n");
    out
}

/// An id attribute's value: letters, digits, `-` and `_` only.
pub fn html_id(s: &str) -> String {
    let id: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if id.is_empty() {
        "x".into()
    } else {
        id
    }
}

/// Keeps anchors unique within one page.
#[derive(Default)]
pub struct Page {
    keys: HashSet<String>,
}

impl Page {
    pub fn unique(&mut self, key: &str) -> String {
        let base = html_id(key);
        let mut k = base.clone();
        let mut i = 2;
        while !self.keys.insert(k.clone()) {
            k = format!("{base}-{i}");
            i += 1;
        }
        k
    }
}

/// The report of one run. `source` names the results file in the footer.
pub fn render(r: &RunResults, source: &str) -> String {
    let mut page_keys = Page::default();
    let machine = machine_text(&r.environment);
    // The warnings the run stored (a file read later shows what the run saw).
    let warnings: Vec<String> = r.warnings.iter().map(|w| w.text.clone()).collect();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<header>\n<h1>threadlab: what threads cost on this machine</h1>\n<p class=\"machine\">{}</p>\n<p class=\"muted\">{} suite{}, threadlab {}, started {}, finished {}</p>\n</header>",
        esc(&machine),
        esc(&r.mode),
        if r.repeat > 1 {
            format!(" × {} runs", r.repeat)
        } else {
            String::new()
        },
        esc(&r.threadlab_version),
        esc(&r.started_at),
        esc(&r.finished_at)
    );
    body.push_str(&first_things(r, &warnings));

    // Charts first: the advice links to them.
    let mut sections: Vec<(&ExperimentResult, String, Vec<Chart>)> = Vec::new();
    for e in &r.experiments {
        let id = page_keys.unique(&format!("exp-{}", e.name));
        let mut charts = sections::charts(e);
        for c in charts.iter_mut() {
            c.key = page_keys.unique(&format!("chart-{}", c.key));
        }
        sections.push((e, id, charts));
    }

    body.push_str("<nav class=\"toc\">");
    for (e, id, _) in &sections {
        let _ = write!(body, "<a href=\"#{id}\">{}</a>", esc(&e.name));
    }
    body.push_str(
        "<a href=\"#advice\">what to choose</a><a href=\"#change\">what to change</a></nav>\n",
    );

    for (e, id, charts) in &sections {
        body.push_str(&experiment_section(e, id, charts));
    }
    let index: Vec<advice::ChartRef> = sections
        .iter()
        .flat_map(|(e, _, charts)| {
            charts.iter().map(|c| advice::ChartRef {
                experiment: e.name.clone(),
                key: c.key.clone(),
                title: c.title.clone(),
            })
        })
        .collect();
    body.push_str(&advice::render(r, &index));
    body.push_str(&doctor::render(r));
    let _ = writeln!(
        body,
        "<footer>Written by threadlab {} from {}. Self-contained: it loads nothing from the network. \
         Regenerate with <code>threadlab report {}</code>; compare runs with <code>threadlab compare A.json B.json</code>.</footer>",
        esc(env!("CARGO_PKG_VERSION")),
        esc(source),
        esc(source)
    );
    page(
        &format!("threadlab {} run: {}", r.mode, short_note(&machine, 80)),
        &body,
    )
}

/// Up front: the warnings, what was re-measured, what is noisy, what did not run.
fn first_things(r: &RunResults, warnings: &[String]) -> String {
    let mut items: Vec<String> = Vec::new();
    if let Some(sig) = &r.interrupted_by {
        items.push(format!(
            "<span class=\"warn\">The run was interrupted by {}</span>: unfinished experiments are marked skipped.",
            esc(sig)
        ));
    }
    for w in warnings {
        items.push(format!("<span class=\"warn\">warning</span> {}", esc(w)));
    }
    for e in &r.experiments {
        match e.status {
            Status::Ok => {}
            s => items.push(format!(
                "<span class=\"status\">{} {}</span>: {}",
                esc(&e.name),
                if s == Status::Failed {
                    "failed"
                } else {
                    "skipped"
                },
                esc(e.reason.as_deref().unwrap_or("no reason given"))
            )),
        }
        if let Some(a) = fmt_attempts(e) {
            items.push(format!("<b>{}</b> {}", esc(&e.name), esc(&a)));
        }
    }
    let noisy: Vec<String> = r
        .experiments
        .iter()
        .flat_map(|e| e.metrics.iter())
        .filter(|m| m.noisy || m.modes.is_some())
        .map(|m| {
            format!(
                "<span class=\"id\">{}</span> {}",
                esc(&m.id),
                esc(&fmt_spread(m))
            )
        })
        .collect();
    if !noisy.is_empty() {
        let shown = noisy.len().min(24);
        items.push(format!(
            "{} noisy or bimodal metric{} (IQR over 10% of the median, or two clusters; re-run on a quieter machine before trusting them): {}{}",
            noisy.len(),
            if noisy.len() == 1 { "" } else { "s" },
            noisy[..shown].join(", "),
            if noisy.len() > shown {
                format!(", and {} more (marked in the tables)", noisy.len() - shown)
            } else {
                String::new()
            }
        ));
    }
    items.extend(flagged_items(r));
    let skipped: usize = r.experiments.iter().map(|e| e.skipped_metrics.len()).sum();
    if skipped > 0 {
        items.push(format!(
            "{skipped} metric{} could not be taken on this machine; each section says why.",
            if skipped == 1 { "" } else { "s" }
        ));
    }
    if items.is_empty() {
        items.push("No warnings: no drift, nothing re-measured, nothing noisy.".into());
    }
    let mut out =
        String::from("<section class=\"first\" id=\"first\">\n<h3>What to know first</h3>\n<ul>\n");
    for i in items {
        let _ = writeln!(out, "<li>{i}</li>");
    }
    out.push_str("</ul>\n</section>\n");
    out
}

/// Per experiment, the metrics that carry flags: per flag, what it means and which subjects
/// (the id's second segment: the server's designs) it touches.
fn flagged_items(r: &RunResults) -> Vec<String> {
    let mut items = Vec::new();
    for e in &r.experiments {
        let flagged: Vec<&crate::results::Metric> =
            e.metrics.iter().filter(|m| !m.flags.is_empty()).collect();
        if flagged.is_empty() {
            continue;
        }
        // (flag, subjects, metrics)
        let mut by_flag: Vec<(&str, Vec<&str>, usize)> = Vec::new();
        for m in &flagged {
            let subject = crate::results::ids::subject(&m.id);
            for f in &m.flags {
                let i = match by_flag.iter().position(|x| x.0 == f) {
                    Some(i) => i,
                    None => {
                        by_flag.push((f, Vec::new(), 0));
                        by_flag.len() - 1
                    }
                };
                by_flag[i].2 += 1;
                if let Some(s) = subject {
                    if !by_flag[i].1.contains(&s) {
                        by_flag[i].1.push(s);
                    }
                }
            }
        }
        let parts: Vec<String> = by_flag
            .iter()
            .map(|(f, subjects, n)| {
                let shown = subjects.len().min(12);
                format!(
                    "<span class=\"flag\">{}</span> {} ({n} metric{}{}{})",
                    esc(f),
                    esc(crate::results::flag::meaning_of(f)),
                    if *n == 1 { "" } else { "s" },
                    if subjects.is_empty() { "" } else { ": " },
                    esc(&format!(
                        "{}{}",
                        subjects[..shown].join(", "),
                        if subjects.len() > shown {
                            format!(" and {} more", subjects.len() - shown)
                        } else {
                            String::new()
                        }
                    ))
                )
            })
            .collect();
        items.push(format!(
            "<b>{}</b>: {} metric{} carry flags, figures not to take at face value (shown, and \
             marked on their bars and in the tables): {}.",
            esc(&e.name),
            flagged.len(),
            if flagged.len() == 1 { "" } else { "s" },
            parts.join("; ")
        ));
    }
    items
}

fn experiment_section(e: &ExperimentResult, id: &str, charts: &[Chart]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<section class=\"experiment\" id=\"{id}\" data-experiment=\"{}\">\n<h2>{}</h2>\n<p class=\"study\">{} · {:.1} s</p>",
        esc(&e.name),
        esc(&e.name),
        esc(&e.study),
        e.wall_s
    );
    if e.status != Status::Ok {
        let _ = writeln!(
            out,
            "<p class=\"status\">{:?}: {}</p>",
            e.status,
            esc(e.reason.as_deref().unwrap_or(""))
        );
    }
    if let Some(a) = fmt_attempts(e) {
        let _ = writeln!(out, "<p class=\"muted\">{}</p>", esc(&a));
    }
    if let Some(c) = &e.conclusion {
        let _ = writeln!(out, "<p class=\"conclusion\">{}</p>", esc(c));
    }
    if !charts.is_empty() {
        out.push_str("<div class=\"charts\">\n");
        for c in charts {
            out.push_str(&figure(c));
        }
        out.push_str("</div>\n");
    }
    for t in &e.tables {
        out.push_str(&data_table(t));
    }
    if !e.metrics.is_empty() {
        out.push_str(&metric_table(e));
    }
    if !e.skipped_metrics.is_empty() {
        out.push_str("<h3>Not measured here</h3>\n<ul>\n");
        for s in &e.skipped_metrics {
            let _ = writeln!(
                out,
                "<li><span class=\"id\">{}</span>: {}</li>",
                esc(&s.id),
                esc(&s.reason)
            );
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    out
}

pub fn figure(c: &Chart) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<figure class=\"chart\" id=\"{}\" data-chart=\"{}\">\n<figcaption>{}</figcaption>\n<div class=\"fig-body\">{}",
        c.key,
        c.key,
        esc(&c.title),
        c.svg
    );
    if c.numbers.len() > 1 {
        let table = numbers_table(&c.numbers);
        if c.numbers.len() - 1 <= NUMBERS_BESIDE_MAX_ROWS {
            out.push_str(&table);
        } else {
            let _ = write!(
                out,
                "<details><summary>the {} numbers</summary>{table}</details>",
                c.numbers.len() - 1
            );
        }
    }
    let _ = writeln!(
        out,
        "</div>\n<p class=\"caption\">{}</p>\n</figure>",
        esc(&c.caption)
    );
    out
}

fn numbers_table(rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table class=\"numbers\"><thead><tr>");
    for h in &rows[0] {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for r in &rows[1..] {
        out.push_str("<tr>");
        for (i, cell) in r.iter().enumerate() {
            let numeric = i > 0
                && (cell == "-"
                    || cell.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+'));
            let class = if numeric { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// One of an experiment's own tables, with its title and note.
fn data_table(t: &Table) -> String {
    let mut out = format!(
        "<h3>{}</h3>\n<div class=\"scroll\"><table><thead><tr>",
        esc(&t.title)
    );
    for h in &t.header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let numeric =
                i > 0 && c.starts_with(|ch: char| ch.is_ascii_digit() || ch == '-' || ch == '+');
            let class = if numeric { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", esc(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    if !t.note.is_empty() {
        let _ = writeln!(out, "<p class=\"caption\">{}</p>", esc(&t.note));
    }
    out
}

/// Every metric: median, spread, the study's figure and the ratio, placement, the method's first
/// clause; the methods in full fold away below.
fn metric_table(e: &ExperimentResult) -> String {
    let mut out = String::from(
        "<h3>Every metric</h3>\n<div class=\"scroll\"><table><thead><tr><th>metric</th><th>now</th><th>spread</th><th>then</th><th>then/now</th><th>where</th><th>how</th></tr></thead><tbody>\n",
    );
    for m in &e.metrics {
        let (then, ratio) = fmt_then(m);
        let spread_class = if m.noisy || m.modes.is_some() {
            " noisy"
        } else {
            ""
        };
        let flags: String = m
            .flags
            .iter()
            .map(|f| format!(" <span class=\"flag\">{}</span>", esc(f)))
            .collect();
        let _ = writeln!(
            out,
            "<tr><td class=\"id\">{}{flags}</td><td class=\"num\">{}</td><td class=\"num{spread_class}\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.id),
            esc(&fmt_now(m)),
            esc(&fmt_spread(m)),
            esc(&then),
            esc(&ratio),
            esc(&m.placement),
            esc(&short_note(crate::results::flag::note_body(m), 90))
        );
    }
    out.push_str("</tbody></table></div>\n<details><summary>Methods in full</summary><dl class=\"methods\">\n");
    // Metrics that share a method word for word (a design's figures at several sizes) are
    // listed once, under all their ids, in the order of their first appearance.
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for m in &e.metrics {
        match groups.iter_mut().find(|(_, note)| *note == m.note) {
            Some((ids, _)) => ids.push(&m.id),
            None => groups.push((vec![&m.id], &m.note)),
        }
    }
    for (ids, note) in groups {
        for id in ids {
            let _ = writeln!(out, "<dt>{}</dt>", esc(id));
        }
        let _ = writeln!(out, "<dd>{}</dd>", esc(note));
    }
    out.push_str("</dl></details>\n");
    out
}

/// The checks the end-to-end tests make on any page this module writes: no network address
/// anywhere. Returns what it found, or nothing.
pub fn network_references(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut found = Vec::new();
    for needle in ["http://", "https://", "//", "@import", "url(", " src="] {
        if let Some(i) = lower.find(needle) {
            let start = i.saturating_sub(30);
            let end = (i + 40).min(lower.len());
            let ctx: String = lower
                .get(start..end)
                .map(str::to_string)
                .unwrap_or_default();
            found.push(format!("{needle} in …{ctx}…"));
        }
    }
    // Every href is an anchor inside the page.
    let mut rest = lower.as_str();
    while let Some(i) = rest.find("href=") {
        let after = &rest[i + 5..];
        if !after.starts_with("\"#") {
            found.push(format!(
                "href to {}",
                after.chars().take(40).collect::<String>()
            ));
        }
        rest = after;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_attribute_safe_and_unique() {
        assert_eq!(html_id("a.b c\"<"), "a-b-c--");
        assert_eq!(html_id(""), "x");
        let mut p = Page::default();
        assert_eq!(p.unique("k"), "k");
        assert_eq!(p.unique("k"), "k-2");
        assert_eq!(p.unique("k"), "k-3");
    }

    #[test]
    fn the_page_skeleton_has_no_network_reference() {
        let html = page("t", "<p>x</p>");
        assert_eq!(network_references(&html), Vec::<String>::new());
        assert!(html.contains("Content-Security-Policy"));
        assert!(network_references("<img src=\"https://x\">").len() >= 2);
        assert!(!network_references("<a href=\"x.html\">").is_empty());
    }
}
