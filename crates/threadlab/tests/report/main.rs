//! The HTML report, `compare` and `export` as a user meets them, and the report in a real
//! browser (headless Chromium, skipped with the reason when none is installed). These tests
//! check structure and behaviour only, never durations; one tiny run feeds them all.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use threadlab::measure::units::{Direction, Unit};
use threadlab::report::{fmt_value, html};
use threadlab::results::{parse_results, ExperimentResult, RunResults};

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod browser;
mod compare;
mod export;

/// One tiny run of every experiment, shared by the tests: its results file (the report was
/// written beside it by `run`). It lives in the target's temporary folder, where the next run
/// of these tests replaces it, since no test can clean up after all the others.
fn tiny() -> &'static Path {
    static TINY: OnceLock<PathBuf> = OnceLock::new();
    TINY.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-tiny");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("tiny.json");
        let o = run_tiny("run", &[], &[], &json);
        assert!(o.status.success(), "tiny run: {}", stderr(&o));
        json
    })
}

/// The tiny run's page stays under this (docs/report.md).
const PAGE_BUDGET: usize = 1_300_000;

fn results(path: &Path) -> RunResults {
    parse_results(&std::fs::read_to_string(path).unwrap(), "test").unwrap()
}

/// Each experiment section of a page: (its data-experiment name, its HTML).
fn sections(page: &str) -> Vec<(String, String)> {
    page.split("<section class=\"experiment\"")
        .skip(1)
        .map(|s| {
            let name = s
                .split("data-experiment=\"")
                .nth(1)
                .and_then(|x| x.split('"').next())
                .unwrap_or("")
                .to_string();
            let end = s.find("</section>").unwrap_or(s.len());
            (name, s[..end].to_string())
        })
        .collect()
}

/// Charts with an SVG inside, in one section's HTML.
fn charts(section: &str) -> usize {
    section
        .split("<figure class=\"chart\"")
        .skip(1)
        .filter(|f| f.split("</figure>").next().unwrap_or("").contains("<svg"))
        .count()
}

fn assert_every_experiment_has_a_section_and_a_chart(page: &str, r: &RunResults) {
    let secs = sections(page);
    for e in &r.experiments {
        // The page escapes the name in the attribute; a browser's DOM dump gives it back plain.
        let escaped = html::svg::esc(&e.name);
        let (_, html) = secs
            .iter()
            .find(|(n, _)| *n == e.name || *n == escaped)
            .unwrap_or_else(|| panic!("no section for {}", e.name));
        assert!(charts(html) >= 1, "{} has no chart", e.name);
    }
}

#[test]
fn run_writes_a_report_with_every_experiment_charted_and_nothing_from_the_network() {
    let json = tiny();
    let page = std::fs::read_to_string(json.with_extension("html")).expect("report beside");
    let r = results(json);
    assert_every_experiment_has_a_section_and_a_chart(&page, &r);
    assert_eq!(html::network_references(&page), Vec::<String>::new());
    for needle in ["http://", "https://", "//", "@import", " src=", "url("] {
        assert!(!page.contains(needle), "{needle}");
    }
    // Every href is an anchor that exists in the page.
    for href in page.split("href=\"#").skip(1) {
        let id = href.split('"').next().unwrap();
        assert!(page.contains(&format!("id=\"{id}\"")), "dangling #{id}");
    }
    // Up front: the machine, the warnings; at the end, what to choose with its figures.
    assert!(page.contains("class=\"machine\"") && page.contains("What to know first"));
    let advice = page
        .split("id=\"advice\"")
        .nth(1)
        .expect("an advice section");
    for topic in [
        "Pool size",
        "Lock",
        "Server design",
        "Priority",
        "Cooperative or preemptive",
        "Green or kernel threads",
    ] {
        assert!(advice.contains(topic), "advice lacks {topic}");
    }
    assert!(advice.matches("Rests on").count() >= 5, "{advice}");
    // Within the size budget (docs/report.md: a tiny run's page is about 1 MB, its size
    // following the data - the server's and the doctor's metric counts - by a few percent).
    assert!(page.len() < PAGE_BUDGET, "{} bytes", page.len());
    // Dark mode and print are styled.
    assert!(page.contains("prefers-color-scheme: dark") && page.contains("@media print"));
}

/// One chart of a page by its key: the HTML of its figure.
fn figure<'a>(page: &'a str, key: &str) -> Option<&'a str> {
    let start = page.find(&format!("<figure class=\"chart\" id=\"{key}\""))?;
    let len = page[start..].find("</figure>")?;
    Some(&page[start..start + len])
}

/// The server experiment of the tiny run, when it measured anything.
fn server_of(r: &RunResults) -> Option<&ExperimentResult> {
    let e = r
        .experiments
        .iter()
        .find(|e| e.name == "server")
        .expect("the tiny run includes the server experiment");
    if e.metrics.is_empty() {
        println!(
            "skipped: the server experiment measured nothing here ({:?}: {})",
            e.status,
            e.reason.as_deref().unwrap_or("no reason")
        );
        return None;
    }
    Some(e)
}

#[test]
fn the_server_section_draws_its_figures_with_units_captions_and_numbers() {
    let json = tiny();
    let r = results(json);
    let Some(e) = server_of(&r) else { return };
    let page = std::fs::read_to_string(json.with_extension("html")).unwrap();
    let (_, section) = sections(&page)
        .into_iter()
        .find(|(n, _)| n == "server")
        .expect("a server section");
    let mut keys = vec![
        "chart-server-fig4",
        "chart-server-fig5",
        "chart-server-fork-ratio",
        "chart-server-fig5-example",
        "chart-server-spectrum",
        "chart-server-cpu",
        "chart-server-block",
        "chart-server-memory",
    ];
    if e.metrics.iter().any(|m| m.id.ends_with(".capacity")) {
        keys.push("chart-server-capacity");
    }
    for key in &keys {
        let f = figure(&section, key).unwrap_or_else(|| panic!("no {key} in the server section"));
        assert!(f.contains("<svg"), "{key}: no chart");
        // Numbers on hover, a table of them, a caption saying how they were measured.
        assert!(f.contains("<title>"), "{key}: nothing on hover");
        assert!(f.contains("<table class=\"numbers\">"), "{key}: no numbers");
        let caption = f
            .split("<p class=\"caption\">")
            .nth(1)
            .and_then(|c| c.split("</p>").next())
            .unwrap_or("");
        assert!(caption.len() > 40, "{key}: caption {caption:?}");
    }
    // Units on the axes; the study's figures beside today's in Fig. 4.
    let fig4 = figure(&section, "chart-server-fig4").unwrap();
    assert!(fig4.contains("(us)") && fig4.contains("request size (bytes"));
    assert!(
        fig4.contains("Ultra-1 1999: thread_per_client 4.00 ms"),
        "{fig4}"
    );
    assert!(fig4.contains("Ultra-1 1999: fork_per_client 4.70 ms"));
    assert!(figure(&section, "chart-server-spectrum")
        .unwrap()
        .contains("latency (us)"));
    // Every design the file has is in the figures (designs are generic: a new one needs no
    // change in the report).
    let cpu = figure(&section, "chart-server-cpu").unwrap();
    for m in e
        .metrics
        .iter()
        .filter(|m| m.id.ends_with(".cpu_per_request"))
    {
        let d = m.id.split('.').nth(1).unwrap();
        if !m.id.contains(".vs_") && d != "generator" {
            assert!(
                cpu.contains(&format!("<td>{d}</td>")),
                "{d} not in the CPU chart"
            );
        }
    }
    // The advice on server designs rests on these figures, and names them.
    let advice = page.split("id=\"advice\"").nth(1).unwrap();
    let server_advice = advice
        .split("<li>")
        .find(|li| li.contains("Server design"))
        .unwrap();
    assert!(
        server_advice.contains("href=\"#chart-server-"),
        "{server_advice}"
    );
    // Nothing from the network, and within the size budget with everything else.
    assert_eq!(html::network_references(&page), Vec::<String>::new());
    assert!(page.len() < PAGE_BUDGET, "{} bytes", page.len());
}

/// Decodes a stored histogram the way any HdrHistogram reader would.
fn decoded(m: &threadlab::results::Metric, name: &str) -> Option<Histogram<u64>> {
    let h = m.histograms.iter().find(|h| h.name == name)?;
    assert_eq!(h.encoding, "hdr-v2-deflate-base64");
    assert_eq!(h.unit, Unit::Ns);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&h.data)
        .expect("base64");
    Some(
        Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .expect("an HdrHistogram"),
    )
}

#[test]
fn the_percentile_spectrum_is_drawn_from_the_decoded_histograms() {
    let json = tiny();
    let mut r = results(json);
    let Some(e) = server_of(&r) else { return };
    let page = std::fs::read_to_string(json.with_extension("html")).unwrap();
    let spectrum = figure(&page, "chart-server-spectrum").expect("a spectrum");
    let with: Vec<&threadlab::results::Metric> = e
        .metrics
        .iter()
        .filter(|m| m.id.ends_with(".rate.p99") && !m.histograms.is_empty())
        .collect();
    assert!(!with.is_empty(), "the tiny run stores histograms");
    assert!(
        spectrum.contains("HdrHistograms"),
        "caption says where from"
    );
    for m in &with {
        let d = m.id.split('.').nth(1).unwrap();
        let lat = decoded(m, "latency").expect("a latency histogram");
        let p50 = fmt_value(lat.value_at_quantile(0.5) as f64 / 1e3);
        let max = fmt_value(lat.max() as f64 / 1e3);
        // The curve's points and the table beside it are the histogram's, not the metrics'.
        assert!(
            spectrum.contains(&format!("{d}, from the planned send: p50 {p50} us")),
            "{d}: p50 {p50} not on the curve"
        );
        let row = spectrum
            .split("<tr>")
            .find(|row| row.starts_with(&format!("<td>{d}</td>")))
            .unwrap_or_else(|| panic!("{d} not in the spectrum's table"));
        assert!(row.contains(&format!(">{p50}<")) && row.contains(&format!(">{max}<")));
        assert!(row.contains(&format!(">{}<", lat.len())), "request count");
        if let Some(svc) = decoded(m, "service") {
            let p50 = fmt_value(svc.value_at_quantile(0.5) as f64 / 1e3);
            assert!(spectrum.contains(&format!(
                "{d}, from the actual send (uncorrected): p50 {p50} us"
            )));
        }
    }

    // Histograms are optional: without them the spectrum rests on the percentile metrics.
    for e in r.experiments.iter_mut() {
        for m in e.metrics.iter_mut() {
            m.histograms.clear();
        }
    }
    let page = html::render(&r, "no-histograms.json");
    let spectrum = figure(&page, "chart-server-spectrum").expect("a spectrum without them");
    assert!(!spectrum.contains("HdrHistograms"));
    assert!(spectrum.contains("no histogram in the file"));
    assert_eq!(html::network_references(&page), Vec::<String>::new());
}

#[test]
fn flagged_server_figures_are_marked_up_front_on_their_bars_and_in_the_tables() {
    let mut r = results(tiny());
    let Some(_) = server_of(&r) else { return };
    let e = r
        .experiments
        .iter_mut()
        .find(|e| e.name == "server")
        .unwrap();
    // Whatever this run flagged, one figure is flagged for certain.
    let m = e
        .metrics
        .iter_mut()
        .find(|m| {
            m.id.ends_with(".cpu_per_request")
                && !m.id.contains(".vs_")
                && !m.id.starts_with("server.generator.")
        })
        .expect("a cpu_per_request metric");
    if !m.flags.contains(&"saturated".to_string()) {
        m.flags.push("saturated".into());
    }
    let id = m.id.clone();
    let page = html::render(&r, "flagged.json");
    let first = page.split("id=\"first\"").nth(1).unwrap();
    let first = &first[..first.find("</section>").unwrap()];
    assert!(
        first.contains("<b>server</b>") && first.contains("<span class=\"flag\">saturated</span>"),
        "{first}"
    );
    let cpu = figure(&page, "chart-server-cpu").unwrap();
    assert!(cpu.contains("class=\"flagmark\"") && cpu.contains("flagged: "));
    assert!(cpu.contains("saturated: the server fell behind"), "caption");
    assert!(page.contains(&format!("<td class=\"id\">{}", html::svg::esc(&id))));

    // A design added later (green) needs no change: rename one and it is drawn wherever the
    // old name was.
    let d = id.split('.').nth(1).unwrap().to_string();
    let keys = [
        "chart-server-cpu",
        "chart-server-spectrum",
        "chart-server-memory",
        "chart-server-block",
    ];
    let had: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| figure(&page, k).is_some_and(|f| f.contains(&format!("<td>{d}</td>"))))
        .collect();
    assert!(had.contains(&"chart-server-cpu"));
    let e = r
        .experiments
        .iter_mut()
        .find(|e| e.name == "server")
        .unwrap();
    for m in e.metrics.iter_mut() {
        m.id = m.id.replace(&format!("server.{d}."), "server.green.");
    }
    let page = html::render(&r, "green.json");
    for key in had {
        let f = figure(&page, key).unwrap();
        assert!(f.contains("<td>green</td>"), "{key} lacks green");
        assert!(!f.contains(&format!("<td>{d}</td>")), "{key} still has {d}");
    }
}

#[test]
fn report_command_writes_where_asked_and_refuses_what_it_cannot_read() {
    let dir = scratch("report-cmd");
    let out = dir.join("r.html");
    let o = run(&[
        "report",
        tiny().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(&out).unwrap();
    assert_every_experiment_has_a_section_and_a_chart(&page, &results(tiny()));
    // Nothing but the report is left in the folder (no temporary file).
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    let bad = dir.join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    assert_one_line_usage_error(&run(&["report", bad.to_str().unwrap()]), "not a threadlab");
    let old = dir.join("old.json");
    std::fs::write(&old, r#"{"schema_version": 1, "experiments": []}"#).unwrap();
    assert_one_line_usage_error(&run(&["report", old.to_str().unwrap()]), "version 1");
    assert_one_line_usage_error(
        &run(&["report", dir.join("missing.json").to_str().unwrap()]),
        "cannot read",
    );
    assert_one_line_usage_error(&run(&["report", dir.to_str().unwrap()]), "regular file");
    assert_one_line_usage_error(&run(&["report", "/dev/zero"]), "regular file");
    assert_one_line_usage_error(
        &run(&[
            "report",
            tiny().to_str().unwrap(),
            "-o",
            "/nonexistent-folder/r.html",
        ]),
        "/nonexistent-folder",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn hostile_text_in_a_results_file_stays_text() {
    let mut r = results(tiny());
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)> https://evil.example/ \"'&";
    r.environment.cpu_model = Some(evil.into());
    for e in r.experiments.iter_mut() {
        e.study = evil.into();
        e.conclusion = Some(evil.into());
        for m in e.metrics.iter_mut() {
            m.note = evil.into();
            m.placement = evil.into();
        }
        for t in e.tables.iter_mut() {
            t.title = evil.into();
            for row in t.rows.iter_mut() {
                for c in row.iter_mut() {
                    c.push_str(evil);
                }
            }
        }
        for s in e.series.iter_mut() {
            s.note = evil.into();
            s.x_label = evil.into();
            // Odd curves: lengths that disagree, values at or below zero.
            s.y.truncate(1);
            s.x.push(-1.0);
        }
    }
    if let Some(e) = r.experiments.first_mut() {
        e.name = format!("x\" onmouseover=\"{evil}");
        if let Some(m) = e.metrics.first_mut() {
            m.id = evil.into();
        }
    }
    let page = html::render(&r, evil);
    assert_eq!(
        page.matches("<script>").count(),
        1,
        "only the page's own script"
    );
    assert!(!page.contains("<img"));
    assert!(!page.contains("onmouseover=\""));
    assert_eq!(html::network_references(&page), Vec::<String>::new());
    assert_every_experiment_has_a_section_and_a_chart(&page, &r);
}
