//! Table cells, the generic charts, common units.

use super::*;

#[test]
fn table_cells_give_their_leading_number() {
    assert_eq!(cell_number("57.7%"), Some(57.7));
    assert_eq!(cell_number("1044.9 us"), Some(1044.9));
    assert_eq!(cell_number("-"), None);
    assert_eq!(cell_number("-3.5"), Some(-3.5));
    assert_eq!(cell_number("5+"), Some(5.0));
    assert_eq!(cell_number(""), None);
}

#[test]
fn an_experiment_its_function_knows_nothing_of_gets_the_generic_charts() {
    // A server experiment of other ids than the server function draws (an older or a
    // hand-made file): its series as curves, one per design, and its metrics as bars.
    let series = |design: &str, y: f64| Series {
        id: format!("server.{design}.response_vs_size"),
        x_label: "request size".into(),
        x_unit: Unit::Bytes,
        y_label: "response time".into(),
        y_unit: Unit::Us,
        x: vec![1024.0, 65536.0, 1048576.0],
        y: vec![y, y * 2.0, y * 40.0],
        note: "n".into(),
        historical: None,
    };
    let e = ExperimentResult {
        study: "s".into(),
        study_label: "l".into(),
        wall_s: 1.0,
        metrics: vec![Metric::single(
            "server.epoll.p99_us",
            Unit::Us,
            5.0,
            "p",
            "n",
        )],
        series: vec![series("epoll", 10.0), series("thread_per_client", 12.0)],
        ..ExperimentResult::new("server", crate::results::Status::Ok)
    };
    let c = charts(&e);
    assert_eq!(c.len(), 2, "one chart of curves, one of metrics");
    assert!(c[0].svg.contains(">epoll<") && c[0].svg.contains(">thread_per_client<"));
    assert_eq!(c[0].numbers[0], ["bytes", "epoll", "thread_per_client"]);
}

#[test]
fn every_time_unit_mix_has_a_common_unit() {
    let a = Metric::single("a", Unit::Ns, 5.0, "p", "n");
    let b = Metric::single("b", Unit::Us, 20.0, "p", "n");
    let a2 = Metric::single("a2", Unit::Ns, 7.0, "p", "n");
    assert_eq!(common_unit(&[&a, &a2, &b]), Some(Unit::Ns));
    assert_eq!(common_unit(&[&b, &b, &a]), Some(Unit::Us));
    let c = Metric::single("c", Unit::Percent, 5.0, "p", "n");
    assert_eq!(common_unit(&[&a, &c]), None);
    assert_eq!(common_unit(&[]), None);
}
