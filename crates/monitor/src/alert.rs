//! Alerts: rules that fire after N consecutive bad results of a pair and clear after M good ones,
//! as perfSONAR's users ask ("alert only on repeated bad results"). A rule reads one figure of each
//! result of the tests it applies to:
//!
//! - `throughput_below`: the throughput is below `value` % of the pair's baseline;
//! - `rtt_above`: the RTT is more than `value` % above the pair's baseline;
//! - `loss_above`: more than `value` % of the probes were lost;
//! - `path_changed`: the trace found a path change;
//! - `down`: a host of the pair did not answer.
//!
//! The **baseline** of a pair is the median of its last [`BASELINE_RESULTS`] results that did not
//! break the rule, so a long outage does not drag the baseline down with it; a relative rule judges
//! nothing until the pair has [`MIN_BASELINE`] of them. A result that does not carry the rule's
//! figure (a failed run, a down host for a throughput rule) neither counts for nor against it.

use std::collections::{BTreeMap, VecDeque};

use crate::outcome::{Outcome, Status};
use crate::rule::{AlertRule, When};

/// Results in a pair's baseline.
pub const BASELINE_RESULTS: usize = 20;
/// Good results a pair needs before a relative rule judges it.
pub const MIN_BASELINE: usize = 3;

/// An alert that fired or cleared.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertEvent {
    /// The rule (index into the mesh's alerts).
    pub rule: usize,
    /// The test, from and to hosts (indices).
    pub test: usize,
    /// The sending host.
    pub from: usize,
    /// The receiving host.
    pub to: usize,
    /// Fired (`true`) or cleared.
    pub firing: bool,
    /// The figure of the result that decided it, if the rule reads one.
    pub value: Option<f64>,
    /// The pair's baseline then, for a relative rule.
    pub baseline: Option<f64>,
    /// When (the result's end), ns since the epoch.
    pub at_ns: u64,
}

#[derive(Debug, Clone, Default)]
struct PairState {
    bad: u32,
    good: u32,
    firing: bool,
    baseline: VecDeque<f64>,
}

/// Every rule's state for every pair.
#[derive(Debug, Clone, Default)]
pub struct Alerts {
    rules: Vec<AlertRule>,
    state: BTreeMap<(usize, usize, usize, usize), PairState>,
}

fn median(v: &VecDeque<f64>) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().collect();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

impl Alerts {
    /// The state of `rules`, nothing seen yet.
    pub fn new(rules: Vec<AlertRule>) -> Self {
        Self {
            rules,
            state: BTreeMap::new(),
        }
    }

    /// The rules.
    pub fn rules(&self) -> &[AlertRule] {
        &self.rules
    }

    /// Judges one archived outcome (`changed`: its trace found a path change); the alerts that
    /// fired or cleared with it.
    pub fn judge(&mut self, o: &Outcome, changed: bool) -> Vec<AlertEvent> {
        let mut out = Vec::new();
        for (k, rule) in self.rules.iter().enumerate() {
            if !rule.tests.contains(&o.run.test) {
                continue;
            }
            let st = self
                .state
                .entry((k, o.run.test, o.run.from, o.run.to))
                .or_default();
            let m = &o.measures;
            let ok = o.status == Status::Ok;
            // (bad?, the figure, whether it joins the baseline when good)
            let (bad, value, baseline) = match rule.when {
                When::Down => match o.status {
                    Status::Down => (true, None, None),
                    Status::Ok => (false, None, None),
                    Status::Failed => continue,
                },
                When::PathChanged => match (&m.path, ok) {
                    (Some(_), true) => (changed, None, None),
                    _ => continue,
                },
                When::LossAbove => match (m.loss, ok) {
                    (Some(l), true) => (l * 100.0 > rule.value, Some(l), None),
                    _ => continue,
                },
                When::ThroughputBelow | When::RttAbove => {
                    let figure = match rule.when {
                        When::ThroughputBelow => m.bits_per_second,
                        _ => m.rtt_ns.map(|r| r as f64),
                    };
                    let Some(v) = figure.filter(|_| ok) else {
                        continue;
                    };
                    if st.baseline.len() < MIN_BASELINE {
                        st.baseline.push_back(v);
                        continue;
                    }
                    let base = median(&st.baseline);
                    let bad = match rule.when {
                        When::ThroughputBelow => v < base * rule.value / 100.0,
                        _ => v > base * (1.0 + rule.value / 100.0),
                    };
                    (bad, Some(v), Some(base))
                }
            };
            if bad {
                st.bad += 1;
                st.good = 0;
            } else {
                st.good += 1;
                st.bad = 0;
                if let (Some(v), Some(_)) = (value, baseline) {
                    st.baseline.push_back(v);
                    if st.baseline.len() > BASELINE_RESULTS {
                        st.baseline.pop_front();
                    }
                }
            }
            let flip = if st.firing {
                st.good >= rule.clear_after
            } else {
                st.bad >= rule.after
            };
            if flip {
                st.firing = !st.firing;
                out.push(AlertEvent {
                    rule: k,
                    test: o.run.test,
                    from: o.run.from,
                    to: o.run.to,
                    firing: st.firing,
                    value,
                    baseline,
                    at_ns: o.ended_ns,
                });
            }
        }
        out
    }

    /// The alerts firing now: (rule, test, from, to).
    pub fn firing(&self) -> Vec<(usize, usize, usize, usize)> {
        self.state
            .iter()
            .filter(|(_, s)| s.firing)
            .map(|(&k, _)| k)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Measures;
    use crate::schedule::Run;

    fn outcome(status: Status, measures: Measures, at: u64) -> Outcome {
        Outcome {
            run: Run {
                test: 0,
                from: 0,
                to: 1,
                window: at,
                planned: at,
                exclusive: true,
            },
            started_ns: at,
            ended_ns: at + 1,
            status,
            down_host: None,
            error: None,
            measures,
            detail: String::new(),
        }
    }

    fn bw(v: f64, at: u64) -> Outcome {
        outcome(
            Status::Ok,
            Measures {
                bits_per_second: Some(v),
                ..Measures::default()
            },
            at,
        )
    }

    fn rule(when: When, value: f64, after: u32, clear_after: u32) -> AlertRule {
        AlertRule {
            name: "r".into(),
            when,
            value,
            tests: vec![0],
            after,
            clear_after,
        }
    }

    #[test]
    fn a_throughput_alert_fires_after_n_bad_results_and_clears_after_m_good_ones() {
        let mut a = Alerts::new(vec![rule(When::ThroughputBelow, 50.0, 3, 2)]);
        let mut t = 0;
        let mut feed = |a: &mut Alerts, v: f64| {
            t += 10;
            a.judge(&bw(v, t), false)
        };
        for _ in 0..5 {
            assert!(feed(&mut a, 1e9).is_empty());
        }
        // Two bad results do not fire; one good result in between resets the count.
        assert!(feed(&mut a, 3e8).is_empty());
        assert!(feed(&mut a, 3e8).is_empty());
        assert!(feed(&mut a, 9e8).is_empty());
        assert!(feed(&mut a, 3e8).is_empty());
        assert!(feed(&mut a, 3e8).is_empty());
        let fired = feed(&mut a, 3e8);
        assert_eq!(fired.len(), 1);
        assert!(fired[0].firing);
        assert_eq!(fired[0].value, Some(3e8));
        assert_eq!(fired[0].baseline, Some(1e9));
        assert_eq!(a.firing(), vec![(0, 0, 0, 1)]);
        // A long outage does not drag the baseline down: still firing at the 20th bad result.
        for _ in 0..20 {
            assert!(feed(&mut a, 3e8).is_empty());
        }
        assert!(feed(&mut a, 1e9).is_empty());
        let cleared = feed(&mut a, 1e9);
        assert_eq!(cleared.len(), 1);
        assert!(!cleared[0].firing);
        assert!(a.firing().is_empty());
    }

    #[test]
    fn relative_rules_wait_for_a_baseline_and_skip_results_without_their_figure() {
        let mut a = Alerts::new(vec![rule(When::ThroughputBelow, 50.0, 1, 1)]);
        // The first results build the baseline: none judged, however low.
        assert!(a.judge(&bw(1.0, 1), false).is_empty());
        assert!(a.judge(&bw(1e9, 2), false).is_empty());
        assert!(a.judge(&bw(1e9, 3), false).is_empty());
        // A down host carries no throughput: not a bad throughput result.
        let down = outcome(Status::Down, Measures::default(), 4);
        assert!(a.judge(&down, false).is_empty());
        assert_eq!(a.judge(&bw(1e8, 5), false).len(), 1);
    }

    #[test]
    fn down_loss_rtt_and_path_rules_read_their_own_figures() {
        let mut a = Alerts::new(vec![
            rule(When::Down, 0.0, 2, 1),
            rule(When::LossAbove, 1.0, 1, 1),
            rule(When::PathChanged, 0.0, 1, 1),
            rule(When::RttAbove, 50.0, 1, 1),
        ]);
        let lat = |loss: f64, rtt: u64, at| {
            outcome(
                Status::Ok,
                Measures {
                    loss: Some(loss),
                    rtt_ns: Some(rtt),
                    path: Some(vec![Some("10.0.0.1".into())]),
                    ..Measures::default()
                },
                at,
            )
        };
        for at in 0..3 {
            assert!(a.judge(&lat(0.0, 100, at), false).is_empty());
        }
        let e = a.judge(&lat(0.02, 200, 3), true);
        let fired: Vec<When> = e.iter().map(|e| a.rules()[e.rule].when).collect();
        assert_eq!(
            fired,
            vec![When::LossAbove, When::PathChanged, When::RttAbove],
            "loss 2 % > 1 %, a change, RTT 100 % over its baseline"
        );
        let down = outcome(Status::Down, Measures::default(), 4);
        assert!(
            a.judge(&down, false).is_empty(),
            "one down result is not two"
        );
        let e = a.judge(&down, false);
        assert_eq!(e.len(), 1);
        assert_eq!(a.rules()[e[0].rule].when, When::Down);
    }
}
