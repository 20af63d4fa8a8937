//! Two runs compared: each metric's ratio with its bootstrap interval, its Mann-Whitney test, Holm's correction, the verdict.

use super::*;

/// The smallest p-value a two-sided U test can give with these sample counts (complete
/// separation, no ties): a metric that cannot reach alpha is not put to the test.
pub(super) fn smallest_p(na: usize, nb: usize) -> f64 {
    let a: Vec<f64> = (0..na).map(|i| i as f64).collect();
    let b: Vec<f64> = (0..nb).map(|i| (na + i) as f64).collect();
    mann_whitney_p(&a, &b)
}

/// Compares B against A by the rule in this module's documentation.
pub fn compare_pair(a: &Run, b: &Run, o: &Options) -> Result<Comparison> {
    let diffs = machine_differences(&a.results, &b.results);
    let same_machine = diffs.is_empty();
    // A guest's memory-bound figures move with the host's other tenants (`GUEST_MEMORY`).
    let guest = [a, b].iter().any(|r| r.results.environment.is_guest());
    let mut rows: Vec<Row> = Vec::new();
    let mut only_in_a = Vec::new();
    let mut only_in_b = Vec::new();
    let mut seen_b = std::collections::HashSet::new();
    for ea in &a.results.experiments {
        let eb = b.results.experiments.iter().find(|e| e.name == ea.name);
        for ma in &ea.metrics {
            let mb = eb.and_then(|e| e.metric(&ma.id));
            let (Some(eb), Some(mb)) = (eb, mb) else {
                only_in_a.push(ma.id.clone());
                continue;
            };
            if !seen_b.insert((eb.name.clone(), mb.id.clone())) {
                continue; // a duplicate id in a hand-edited file: the first one counts
            }
            rows.push(pair_row(ea, eb, ma, mb, (same_machine, guest), o));
        }
    }
    for eb in &b.results.experiments {
        for mb in &eb.metrics {
            if !seen_b.contains(&(eb.name.clone(), mb.id.clone())) {
                only_in_b.push(mb.id.clone());
            }
        }
    }
    if rows.is_empty() {
        return Err(Error::Usage(format!(
            "{} and {} share no metric; compare results of the same experiments (e.g. two runs \
             of 'threadlab run')",
            a.label, b.label
        )));
    }
    // The family: every row with a p-value.
    let tested: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].p.is_some()).collect();
    let ps: Vec<f64> = tested.iter().map(|&i| rows[i].p.unwrap_or(1.0)).collect();
    let adjusted = holm_adjust(&ps);
    for (k, &i) in tested.iter().enumerate() {
        let row = &mut rows[i];
        row.p_holm = Some(adjusted[k]);
        row.verdict = verdict(row, o.alpha);
        row.detectable_pct = detectable_pct(row, tested.len(), o.alpha);
        // A row that no change could have made significant in this family is not "the same":
        // the pair cannot tell (a whole suite of short runs: 8 trials a side cannot survive
        // Holm's correction over several hundred metrics).
        if row.detectable_pct.is_none() && row.verdict == Verdict::NotSignificant {
            row.verdict = Verdict::Untested;
            row.why = format!(
                "{} vs {} trials cannot reach p < {} after Holm's correction over {} metrics: \
                 compare fewer experiments, or runs with more trials",
                row.a.samples,
                row.b.samples,
                o.alpha,
                tested.len()
            );
        }
    }
    let notes = pair_notes(a, b, same_machine, &rows);
    Ok(Comparison {
        a: RunInfo::of(a),
        b: RunInfo::of(b),
        machine_differences: diffs,
        rows,
        only_in_a,
        only_in_b,
        family: tested.len(),
        options: *o,
        notes,
    })
}

/// What a reader must know before trusting the pair's verdicts: a kernel-entry reference that
/// moved, flagged figures, old schemas, differing modes, interrupted or debug runs.
fn pair_notes(a: &Run, b: &Run, same_machine: bool, rows: &[Row]) -> Vec<String> {
    let mut notes = Vec::new();
    if same_machine {
        let moved: Vec<String> = a
            .results
            .experiments
            .iter()
            .filter_map(|ea| {
                let eb = b.results.experiments.iter().find(|e| e.name == ea.name)?;
                let s = kernel_entry_move_pct(ea, eb)?;
                (s > KERNEL_ENTRY_NOTE_PCT).then(|| format!("{} {s:.0}%", ea.name))
            })
            .collect();
        if !moved.is_empty() {
            notes.push(format!(
                "the kernel-entry reference (one getppid) moved by up to this much during or \
                 between the runs around {}: figures that enter the kernel may have moved with \
                 it, whatever the code did",
                moved.join(", ")
            ));
        }
    }
    let flagged = rows.iter().filter(|r| r.flags_text().is_some()).count();
    if flagged > 0 {
        notes.push(format!(
            "{flagged} metric{} carr{} flags in A or B (client_bound, saturated, ...: the file \
             says its figure should not be taken at face value; named in the flags column): \
             read a change in {} as a change in the measurement's conditions as much as in the \
             code",
            if flagged == 1 { "" } else { "s" },
            if flagged == 1 { "ies" } else { "y" },
            if flagged == 1 { "it" } else { "them" }
        ));
    }
    for r in [a, b] {
        let schema2 = r
            .results
            .experiments
            .iter()
            .flat_map(|e| &e.metrics)
            .any(|m| m.samples > 1 && m.batches.is_empty() && m.trials.is_none());
        if schema2 && r.results.schema_version < crate::results::SCHEMA_VERSION {
            notes.push(format!(
                "{} is a schema-{} file: its values are samples of one set of threads, not \
                 trials, so its spread understates how much a figure moves between runs",
                r.label, r.results.schema_version
            ));
        }
    }
    if a.results.mode != b.results.mode {
        notes.push(format!(
            "A is a {} run and B a {} run: sample counts and ranges differ",
            a.results.mode, b.results.mode
        ));
    }
    for r in [a, b] {
        if let Some(sig) = &r.results.interrupted_by {
            notes.push(format!("{} was interrupted by {sig}", r.label));
        }
        if r.results.environment.build_profile == "debug" {
            notes.push(format!(
                "{} is from a debug build: its figures mean nothing",
                r.label
            ));
        }
    }
    notes
}

/// A metric's noise floor (docs/compare.md) and the part that set it: `noise_pct`, then each
/// measured part that is larger.
fn noise_floor(
    (ea, eb): (&ExperimentResult, &ExperimentResult),
    (ma, mb): (&Metric, &Metric),
    (a, b): (&Side, &Side),
    same_machine: bool,
    memory_walk: bool,
    noise_pct: f64,
) -> (f64, String) {
    let mut floor = (noise_pct, "--noise".to_string());
    let mut raise = |v: Option<f64>, what: String| {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            if v > floor.0 {
                floor = (v, what);
            }
        }
    };
    let spread_of = |s: &Side| {
        if s.trials {
            "spread between trials"
        } else {
            "spread"
        }
    };
    raise(a.spread_pct, format!("A's {} (IQR/median)", spread_of(a)));
    raise(b.spread_pct, format!("B's {} (IQR/median)", spread_of(b)));
    // An experiment's drift says what its trials went through, unless the sampler kept only
    // trials taken while the machine was quiet (nothing set aside and nothing disturbed kept):
    // then the drift around the experiment says nothing about them.
    let filtered = |m: &Metric| {
        m.trials
            .as_ref()
            .is_some_and(|t| t.kept > 0 && t.kept + t.steal + t.disturbed == t.taken)
    };
    if !filtered(ma) {
        raise(cpu_drift_pct(ea), "A's drift during the experiment".into());
    }
    if !filtered(mb) {
        raise(cpu_drift_pct(eb), "B's drift during the experiment".into());
    }
    // How far the CPU's speed moved between the runs: beside the kept trials where both files
    // say, otherwise around the experiment.
    if same_machine {
        match kept_trials_shift_pct(ma, mb) {
            Some(v) => raise(
                Some(v),
                "the CPU's speed beside the kept trials, A vs B".into(),
            ),
            None => raise(
                machine_shift_pct(ea, eb),
                "the machine's reference loop, A vs B".into(),
            ),
        }
    }
    // The memory walk's own move, for a memory-bound figure whose walk stayed under
    // `MEMORY_REGIME_PCT` (the caller's `memory_walk`), as the CPU's drift for every figure.
    if memory_walk {
        raise(
            memory_drift_pct(ea),
            "A's memory walk during the experiment".into(),
        );
        raise(
            memory_drift_pct(eb),
            "B's memory walk during the experiment".into(),
        );
        if same_machine {
            raise(memory_shift_pct(ea, eb), "the memory walk, A vs B".into());
        }
    }
    floor
}

pub(super) fn pair_row(
    ea: &ExperimentResult,
    eb: &ExperimentResult,
    ma: &Metric,
    mb: &Metric,
    (same_machine, guest): (bool, bool),
    o: &Options,
) -> Row {
    // One value per trial, the unit of replication: a server step's windows share one
    // server and one placement (`Metric::trial_of`).
    let (a_values, b_raw) = (ma.trial_values(), mb.trial_values());
    // B's samples in A's unit (a unit that changed between versions still compares when it
    // converts); otherwise the row is shown untested.
    let b_values: Option<Vec<f64>> = b_raw.iter().map(|v| mb.unit.convert(*v, ma.unit)).collect();
    let b_side = match &b_values {
        Some(v) => side(mb, v),
        None => side(mb, &b_raw),
    };
    let a_side = side(ma, &a_values);
    // A figure that walks shared memory moves with what the host's other tenants do to the
    // cache and memory, which the register loops do not see. When the memory reference moved
    // more than `MEMORY_REGIME_PCT`, a change of it is the host's as much as the code's
    // (unstable); below that, the walk's own move joins its floor (`noise_floor`). In a guest
    // such a figure moves between runs with the reference at rest too: unstable there.
    let memory_bound = ma.memory_bound || mb.memory_bound;
    let memory_regime = memory_bound
        .then(|| memory_regime(ea, eb, same_machine, guest))
        .flatten();
    let floor = noise_floor(
        (ea, eb),
        (ma, mb),
        (&a_side, &b_side),
        same_machine,
        memory_bound && memory_regime.is_none(),
        o.noise_pct,
    );
    let mut row = Row {
        experiment: ea.name.clone(),
        id: ma.id.clone(),
        unit: ma.unit,
        direction: ma.direction,
        ratio_row: ma.ratio_of.is_some(),
        a: a_side,
        b: b_side,
        ratio: None,
        ci: None,
        p: None,
        p_holm: None,
        floor_pct: floor.0,
        floor_from: floor.1,
        detectable_pct: None,
        regime: regime_change((ea, eb), (ma, mb)).or(memory_regime),
        verdict: Verdict::Untested,
        why: String::new(),
        flags_a: ma.flags.clone(),
        flags_b: mb.flags.clone(),
    };
    let Some(bv) = b_values else {
        row.why = format!("units differ ({} vs {})", ma.unit, mb.unit);
        return row;
    };
    if !(row.a.median > 0.0 && row.b.median > 0.0) {
        row.why = "a median at or below zero: no ratio".into();
        return row;
    }
    row.ratio = Some(row.b.median / row.a.median);
    // A file written before values named their trial keeps a step's windows as if each were a
    // trial: beside a file that names them, the two sides count different things.
    if ma.trial_of.is_empty() != mb.trial_of.is_empty() {
        row.why = format!(
            "{} does not say which trial each value came from (an older threadlab): its \
             values are a step's windows or attempts, not trials",
            if ma.trial_of.is_empty() { "A" } else { "B" }
        );
        return row;
    }
    if a_values.len() > 1 && bv.len() > 1 {
        row.ci = bootstrap_ratio_ci(&a_values, &bv, o.resamples);
    }
    if smallest_p(a_values.len(), bv.len()) >= o.alpha {
        row.why = format!(
            "{} vs {} trials: the U test cannot reach p < {}",
            a_values.len(),
            bv.len(),
            o.alpha
        );
        return row;
    }
    row.p = Some(mann_whitney_p(&a_values, &bv));
    row.verdict = Verdict::NotSignificant;
    row
}

pub(super) fn verdict(row: &Row, alpha: f64) -> Verdict {
    let (Some(p), Some(ratio)) = (row.p_holm, row.ratio) else {
        return Verdict::Untested;
    };
    if p >= alpha {
        return Verdict::NotSignificant;
    }
    let band = 1.0 + row.floor_pct / 100.0;
    let (lo, hi) = row.ci.unwrap_or((ratio, ratio));
    let beyond = lo > band || hi < 1.0 / band;
    if !beyond {
        return Verdict::WithinNoise;
    }
    if row.regime.is_some() {
        return Verdict::Unstable;
    }
    match row.direction {
        Direction::LowerIsBetter if ratio > 1.0 => Verdict::Slower,
        Direction::LowerIsBetter => Verdict::Faster,
        Direction::HigherIsBetter if ratio < 1.0 => Verdict::Slower,
        Direction::HigherIsBetter => Verdict::Faster,
        Direction::Neither => Verdict::Changed,
    }
}

/// The smallest change this row could have flagged, percent: its interval, as wide as it came
/// out, must clear the floor, so the ratio must pass (1 + floor) by the interval's half-width
/// (on a log scale); and a complete separation of its trials must survive Holm's correction
/// over the family at its strictest step (alpha / family). None when it cannot.
pub(super) fn detectable_pct(row: &Row, family: usize, alpha: f64) -> Option<f64> {
    if smallest_p(row.a.samples, row.b.samples) > alpha / family.max(1) as f64 {
        return None;
    }
    let half = match row.ci {
        Some((lo, hi)) if lo > 0.0 && hi >= lo => (hi / lo).ln() / 2.0,
        _ => 0.0,
    };
    Some(((1.0 + row.floor_pct / 100.0) * half.exp() - 1.0) * 100.0)
}
