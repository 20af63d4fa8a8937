//! More than two runs side by side: one column per file, fastest and slowest marked per row.

use super::*;

/// A fleet: one column per file.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub runs: Vec<RunInfo>,
    pub rows: Vec<FleetRow>,
}

#[derive(Debug, Clone)]
pub struct FleetRow {
    pub experiment: String,
    pub id: String,
    pub unit: Unit,
    pub direction: Direction,
    /// Per file, in the first file's unit where it converts.
    pub medians: Vec<Option<f64>>,
    /// Per file, the metric's flags there (empty when none or absent).
    pub flags: Vec<Vec<String>>,
    pub fastest: Option<usize>,
    pub slowest: Option<usize>,
}

/// Every metric id any file holds, in the order first seen, with each file's median.
pub fn fleet(runs: &[Run]) -> Result<Fleet> {
    let mut rows: Vec<FleetRow> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for e in &run.results.experiments {
            for m in &e.metrics {
                let row = match rows
                    .iter_mut()
                    .find(|r| r.experiment == e.name && r.id == m.id)
                {
                    Some(r) => r,
                    None => {
                        rows.push(FleetRow {
                            experiment: e.name.clone(),
                            id: m.id.clone(),
                            unit: m.unit,
                            direction: m.direction,
                            medians: vec![None; runs.len()],
                            flags: vec![Vec::new(); runs.len()],
                            fastest: None,
                            slowest: None,
                        });
                        rows.last_mut().expect("just pushed")
                    }
                };
                if row.medians[i].is_none() {
                    row.medians[i] = m.unit.convert(m.median, row.unit);
                    row.flags[i] = m.flags.clone();
                }
            }
        }
    }
    if !rows
        .iter()
        .any(|r| r.medians.iter().filter(|m| m.is_some()).count() > 1)
    {
        return Err(Error::Usage(
            "the files share no metric; compare results of the same experiments (e.g. runs of \
             'threadlab run' on each machine)"
                .into(),
        ));
    }
    for r in rows.iter_mut() {
        let present: Vec<(usize, f64)> = r
            .medians
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.map(|m| (i, m)))
            .collect();
        if present.len() < 2 {
            continue;
        }
        let min = present
            .iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|x| x.0);
        let max = present
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|x| x.0);
        let all_equal = present.iter().all(|x| x.1 == present[0].1);
        if all_equal {
            continue;
        }
        (r.fastest, r.slowest) = match r.direction {
            Direction::LowerIsBetter => (min, max),
            Direction::HigherIsBetter => (max, min),
            Direction::Neither => (None, None),
        };
    }
    Ok(Fleet {
        runs: runs.iter().map(RunInfo::of).collect(),
        rows,
    })
}

/// Column names for a fleet: A, B, C ... Z, then F27, F28 ...
pub fn column_name(i: usize) -> String {
    if i < 26 {
        ((b'A' + i as u8) as char).to_string()
    } else {
        format!("F{}", i + 1)
    }
}

pub fn render_fleet_text(f: &Fleet) -> String {
    let mut out = String::from("threadlab compare: a fleet of runs, one column each\n");
    for (i, r) in f.runs.iter().enumerate() {
        out.push_str(&format!(
            "  {}  {} · {} run · {}\n     {}\n",
            column_name(i),
            r.label,
            r.mode,
            r.started_at,
            r.machine
        ));
    }
    out.push_str(
        "\n+ marks the fastest and - the slowest of each row (by the metric's direction; none \
         for counts, shares and ratios); ! a figure its file flags (client_bound, saturated, \
         ...: not to be taken at face value). No test is made across more than two files: \
         compare two of them for that.\n",
    );
    let mut experiments: Vec<&str> = Vec::new();
    for r in &f.rows {
        if !experiments.contains(&r.experiment.as_str()) {
            experiments.push(&r.experiment);
        }
    }
    for e in experiments {
        out.push_str(&format!("\n{e}\n"));
        let mut t = new_table();
        let mut header = vec!["metric".to_string()];
        header.extend((0..f.runs.len()).map(column_name));
        t.set_header(header);
        for r in f.rows.iter().filter(|r| r.experiment == e) {
            let mut cells = vec![Cell::new(&r.id)];
            for (i, m) in r.medians.iter().enumerate() {
                let mark = if r.fastest == Some(i) {
                    " +"
                } else if r.slowest == Some(i) {
                    " -"
                } else {
                    "  "
                };
                let text = m.map_or("-".to_string(), |v| fmt_with_unit(v, r.unit));
                let flag = if r.flags[i].is_empty() { "" } else { " !" };
                cells.push(
                    Cell::new(format!("{text}{flag}{mark}")).set_alignment(CellAlignment::Right),
                );
            }
            t.add_row(cells);
        }
        for col in t.column_iter_mut() {
            col.set_constraint(ColumnConstraint::ContentWidth);
        }
        out.push_str(&t.to_string());
        out.push('\n');
    }
    out
}
