//! Registries keyed by name must agree: an experiment renamed or added without its report
//! section would otherwise fall back to the generic charts without a word.

use threadlab::experiments;
use threadlab::report::html::sections;

/// Experiments whose page is drawn by a renderer of their own (with the generic charts).
const DRAWN_ELSEWHERE: &[&str] = &["doctor"]; // report/html/doctor.rs

#[test]
fn every_experiment_has_its_report_section() {
    for x in experiments::registry() {
        let name = x.info().name;
        assert!(
            sections::with_own_charts().any(|s| s == name) || DRAWN_ELSEWHERE.contains(&name),
            "experiment `{name}` has no section: add its charts function to REGISTRY in \
             src/report/html/sections/mod.rs"
        );
    }
    for name in sections::with_own_charts().chain(DRAWN_ELSEWHERE.iter().copied()) {
        assert!(
            experiments::find(name).is_some(),
            "section `{name}` names no experiment: rename it to the experiment's name"
        );
    }
}
