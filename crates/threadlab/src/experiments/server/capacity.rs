//! The capacity at the latency target (`--full`): the highest offered rate whose p99 is within
//! `SLO_P99_NS` with 99% of the planned requests answered, found by bracketing from the
//! open-loop point (already measured: its rate passed or missed) and then bisecting, one probe
//! per rate on the open-loop point's connections. A probe whose p99 is certain to miss (over 1%
//! of its planned requests already late) or that falls behind its plan ends early, and a design
//! whose open-loop point fell far behind starts from what it served: its capacity cannot be
//! above that.

use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::Result;

use super::loadgen::{Arrivals, Generator, LoadMode, Plan, StepResult};
use super::meter::Meter;
use super::records::{meets_target, Pattern, Record};
use super::setup::{CapacitySearch, SLO_P99_NS};

/// Below this rate a design is not searched further: its capacity is reported as a bound.
pub const LOWEST_RATE: f64 = 100.0;

/// What a probe runs on: the open-loop point's generator and connections.
pub struct Prober<'a, 'p, 'm> {
    pub gen: &'a mut Generator<'p>,
    pub meter: &'a mut Meter<'m>,
    pub plan: &'a Plan,
    pub cancel: &'a Cancel,
    pub step: &'a dyn Fn(&str) -> Result<()>,
    pub name: &'static str,
    /// (pattern, offered rate, result) of every probe, in order.
    pub made: Vec<(Pattern, f64, StepResult)>,
}

impl Prober<'_, '_, '_> {
    /// One open-loop step at `rate` (Poisson arrivals from `seed`); whether it met the target.
    /// `give_up` ends it early once the target is certainly missed.
    pub fn at(
        &mut self,
        rate: f64,
        seed: u64,
        warm: Duration,
        len: Duration,
        pattern: Pattern,
        give_up: Option<u64>,
    ) -> Result<bool> {
        let what = match pattern {
            Pattern::Overload => "overload",
            _ => "capacity probe",
        };
        (self.step)(&format!("{}: {what} at {rate:.0}/s", self.name))?;
        let p = Plan {
            mode: LoadMode::Open {
                rate,
                arrivals: Arrivals::Poisson { seed },
            },
            warmup: warm,
            measure: len,
            give_up_above_ns: give_up,
            ..self.plan.clone()
        };
        let meter = &mut *self.meter;
        let result = self.gen.run(&p, self.cancel, &mut || meter.usage())?;
        let ok = meets_target(&result);
        self.made.push((pattern, rate, result));
        Ok(ok)
    }

    /// A probe of the search: whether it met the target, and whether a miss is certain (the
    /// server fell behind its plan) rather than possibly a stall of the host.
    fn probe(&mut self, rate: f64, s: &CapacitySearch) -> Result<(bool, bool)> {
        let ok = self.at(
            rate,
            0x5eed + self.made.len() as u64,
            s.warm,
            s.measure,
            Pattern::Sweep(rate),
            Some(SLO_P99_NS),
        )?;
        let last = &self.made.last().expect("just probed").2;
        Ok((ok, fell_behind(last)))
    }
}

/// The server could not keep up with the plan at all (the generator stopped the step for its
/// backlog): a miss no stall of the host explains.
pub fn fell_behind(r: &StepResult) -> bool {
    r.saturated
        .as_deref()
        .is_some_and(|s| s.starts_with("the server fell behind"))
}

/// The bracket the search keeps: the highest rate that passed and the lowest that missed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bracket {
    pub passed: Option<f64>,
    pub missed: Option<f64>,
}

/// The next rate to try, or None when the bracket is narrow enough (or cannot be narrowed:
/// the highest rate the generator may offer passed, or the lowest worth trying missed).
pub fn next_rate(b: Bracket, top: f64, s: &CapacitySearch) -> Option<f64> {
    match (b.passed, b.missed) {
        (Some(lo), Some(hi)) => (hi / lo > s.resolution).then(|| (lo * hi).sqrt()),
        (Some(lo), None) => (lo < top).then(|| (lo * 2.0).min(top)),
        (None, Some(hi)) => (hi / 4.0 >= LOWEST_RATE).then_some(hi / 4.0),
        (None, None) => Some(top.min(LOWEST_RATE.max(top / 4.0))),
    }
}

/// Where the open-loop point leaves the search: its rate passed or missed; when it missed and
/// served far less than offered, the rate it served bounds the capacity from above (a miss no
/// stall explains); otherwise its miss still has to be confirmed (the second value).
pub fn start_from(point: &StepResult, offered: f64) -> (Bracket, Option<f64>) {
    if meets_target(point) {
        let b = Bracket {
            passed: Some(offered),
            missed: None,
        };
        return (b, None);
    }
    let served = point.achieved_per_s();
    if fell_behind(point) || (served > LOWEST_RATE && served < 0.9 * offered) {
        let b = Bracket {
            passed: None,
            missed: Some(served.clamp(LOWEST_RATE, offered)),
        };
        return (b, None);
    }
    let b = Bracket {
        passed: None,
        missed: None,
    };
    (b, Some(offered))
}

/// Searches the capacity of the design whose open-loop point is `point`; the highest rate that
/// passed (None when none did). Every probe is in `probe.made`.
///
/// A probe can miss the target because the host took the server's CPU for a few
/// milliseconds (on this kind of VM that alone puts over 1% of a half-second probe's requests
/// above 1 ms, at any rate), so a miss counts only once confirmed by a second probe at the same
/// rate, unless the server fell behind its plan.
pub fn search(
    probe: &mut Prober<'_, '_, '_>,
    point: &Record,
    ceiling: f64,
    s: &CapacitySearch,
) -> Result<Option<f64>> {
    let top = (ceiling * s.top_share).max(LOWEST_RATE);
    let (mut b, mut confirm) = start_from(&point.result, point.offered);
    for _ in 0..s.probes {
        let again = confirm.take();
        let Some(rate) = again.or_else(|| next_rate(b, top, s)) else {
            break;
        };
        let (ok, certain) = probe.probe(rate, s)?;
        if ok {
            b.passed = Some(b.passed.map_or(rate, |p| p.max(rate)));
        } else if certain || again.is_some() {
            b.missed = Some(b.missed.map_or(rate, |m| m.min(rate)));
        } else {
            confirm = Some(rate);
        }
    }
    Ok(b.passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search_plan() -> CapacitySearch {
        CapacitySearch {
            warm: Duration::ZERO,
            measure: Duration::ZERO,
            probes: 20,
            resolution: 1.15,
            top_share: 0.5,
        }
    }

    /// Runs the search's rule against a server whose true capacity is `cap`, from a point at
    /// `offered`; the probes it made and the capacity it reports.
    fn simulate(cap: f64, offered: f64, top: f64, probes: usize) -> (Vec<f64>, Option<f64>) {
        let s = CapacitySearch {
            probes,
            ..search_plan()
        };
        let mut b = if offered <= cap {
            Bracket {
                passed: Some(offered),
                missed: None,
            }
        } else {
            Bracket {
                passed: None,
                missed: Some(offered),
            }
        };
        let mut tried = Vec::new();
        for _ in 0..s.probes {
            let Some(r) = next_rate(b, top, &s) else {
                break;
            };
            tried.push(r);
            if r <= cap {
                b.passed = Some(b.passed.map_or(r, |p| p.max(r)));
            } else {
                b.missed = Some(b.missed.map_or(r, |m| m.min(r)));
            }
        }
        (tried, b.passed)
    }

    #[test]
    fn the_search_brackets_then_bisects_to_the_resolution() {
        // Capacity above the point: doubling, then bisection.
        let (tried, got) = simulate(70_000.0, 30_000.0, 200_000.0, 20);
        assert_eq!(&tried[..2], &[60_000.0, 120_000.0]);
        let got = got.unwrap();
        assert!(got <= 70_000.0 && got * 1.15 >= 70_000.0 / 1.15, "{got}");
        // Below the point: quartering, then bisection.
        let (tried, got) = simulate(5_000.0, 30_000.0, 200_000.0, 20);
        assert_eq!(tried[0], 7_500.0);
        let got = got.unwrap();
        assert!(got <= 5_000.0 && got > 5_000.0 / 1.3, "{got}");
    }

    #[test]
    fn the_search_stops_at_the_generators_top_and_below_the_lowest_rate() {
        // Every rate passes: the search ends at the top, a floor rather than a figure.
        let (tried, got) = simulate(1e9, 30_000.0, 100_000.0, 20);
        assert_eq!(tried, vec![60_000.0, 100_000.0]);
        assert_eq!(got, Some(100_000.0));
        // Nothing passes: quartering stops at the lowest rate worth trying.
        let (tried, got) = simulate(10.0, 30_000.0, 100_000.0, 20);
        assert!(tried.iter().all(|&r| r >= LOWEST_RATE), "{tried:?}");
        assert_eq!(got, None);
        // The probe budget bounds the search whatever the bracket.
        let (tried, _) = simulate(70_000.0, 30_000.0, 200_000.0, 3);
        assert_eq!(tried.len(), 3);
    }
}
