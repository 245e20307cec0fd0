//! The contest rules as a checker: a candidate run against the duration,
//! distance, router-hop, address-pair, distance-cap, class and improvement
//! rules, each with its verdict and the figures behind it. An emulated run
//! is never eligible.

use longhaul_units::{LSR_IMPROVEMENT, LSR_MAX_KM, LSR_MIN_HOPS, LSR_MIN_KM, LSR_MIN_SECONDS};
use longhaul_units::{fmt_lsr, lsr_beats, lsr_capped_km, lsr_metric_capped};
use serde::{Deserialize, Serialize};

use super::check::class_record;
use super::table::{Class, Ip, RECORDS, RecordRow, Streams};

/// A run to judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Label (run id and point).
    pub label: String,
    /// IP version used.
    pub ip: Ip,
    /// TCP streams used.
    pub streams: u32,
    /// The class the run is entered in, when one is claimed.
    pub claimed: Option<Class>,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds of continuous transfer.
    pub seconds: f64,
    /// Terrestrial distance: the sum of great-circle distances between the
    /// layer-3 hops' cities, km (uncapped).
    pub km: f64,
    /// Router hops sender → receiver.
    pub hops_forward: u32,
    /// Router hops receiver → sender.
    pub hops_reverse: u32,
    /// Distinct source/destination address pairs used.
    pub address_pairs: u32,
    /// Whether the path was emulated (`longhaul emulate`).
    pub emulated: bool,
}

impl Candidate {
    /// The run's class: single-stream with one stream, else multi-stream.
    pub fn class(&self) -> Class {
        Class {
            ip: self.ip,
            streams: if self.streams == 1 {
                Streams::Single
            } else {
                Streams::Multi
            },
        }
    }

    /// The metric the record would count: bytes × 8 / seconds × min(km,
    /// 30,000) × 1000, bit·m/s.
    pub fn metric(&self) -> f64 {
        lsr_metric_capped(self.bytes, self.seconds, self.km)
    }
}

/// A contest rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rule {
    /// At least 10 continuous minutes.
    Duration,
    /// At least 100 km.
    Distance,
    /// At least 2 router hops each way.
    RouterHops,
    /// One pair of IP addresses.
    AddressPair,
    /// Distance counted at most 30,000 km.
    DistanceCap,
    /// One of four classes, consistent with the run.
    Class,
    /// At least 10 % over the class record.
    Improvement,
    /// A real terrestrial path (emulated runs never count).
    RealPath,
}

/// The outcome of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Met.
    Pass,
    /// Not met: the run is not eligible.
    Fail,
    /// The distance was cut to 30,000 km; not a failure.
    Capped,
}

/// One rule's outcome with the figures behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleResult {
    /// Which rule.
    pub rule: Rule,
    /// Outcome.
    pub verdict: Verdict,
    /// Why, with the numbers.
    pub detail: String,
}

/// Checks `run` against every rule, with the class records of
/// [`RECORDS`].
pub fn check(run: &Candidate) -> Vec<RuleResult> {
    check_against(run, RECORDS)
}

/// Whether every rule passed (a capped distance is not a failure).
pub fn eligible(results: &[RuleResult]) -> bool {
    results.iter().all(|r| r.verdict != Verdict::Fail)
}

/// [`check`] against the class records of `rows`.
pub fn check_against(run: &Candidate, rows: &[RecordRow]) -> Vec<RuleResult> {
    let pass = |ok: bool| if ok { Verdict::Pass } else { Verdict::Fail };
    let mut out = Vec::with_capacity(8);
    out.push(RuleResult {
        rule: Rule::Duration,
        verdict: pass(run.seconds >= LSR_MIN_SECONDS),
        detail: format!(
            "{:.1} s of transfer; at least {LSR_MIN_SECONDS:.0} s (10 min) needed",
            // Cut, not rounded: 599.98 s is not shown as the 600 it falls short of.
            (run.seconds * 10.0).floor() / 10.0
        ),
    });
    out.push(RuleResult {
        rule: Rule::Distance,
        verdict: pass(run.km >= LSR_MIN_KM),
        detail: format!("{:.0} km; at least {LSR_MIN_KM:.0} km needed", run.km),
    });
    out.push(RuleResult {
        rule: Rule::RouterHops,
        verdict: pass(run.hops_forward >= LSR_MIN_HOPS && run.hops_reverse >= LSR_MIN_HOPS),
        detail: format!(
            "{} router hops forward, {} back; at least {LSR_MIN_HOPS} each way needed",
            run.hops_forward, run.hops_reverse
        ),
    });
    out.push(RuleResult {
        rule: Rule::AddressPair,
        verdict: pass(run.address_pairs == 1),
        detail: format!("{} address pair(s); exactly one allowed", run.address_pairs),
    });
    out.push(RuleResult {
        rule: Rule::DistanceCap,
        verdict: if run.km > LSR_MAX_KM {
            Verdict::Capped
        } else {
            Verdict::Pass
        },
        detail: format!(
            "{:.0} km counted as {:.0} km (at most {LSR_MAX_KM:.0})",
            run.km,
            lsr_capped_km(run.km)
        ),
    });
    let class = run.class();
    let class_ok = run.streams >= 1
        && run.claimed.is_none_or(|c| {
            c.ip == run.ip && (c.streams == class.streams || c.streams == Streams::Multi)
        });
    out.push(RuleResult {
        rule: Rule::Class,
        verdict: pass(class_ok),
        detail: match run.claimed {
            Some(c) if !class_ok => format!(
                "entered as {c}, but the run is {class} ({} streams)",
                run.streams
            ),
            _ if run.streams == 0 => "no streams: not a run of any class".into(),
            _ => format!("{class}"),
        },
    });
    let entered = run.claimed.filter(|_| class_ok).unwrap_or(class);
    let metric = run.metric();
    out.push(match class_record(entered, rows) {
        Some((record, row)) => RuleResult {
            rule: Rule::Improvement,
            verdict: pass(lsr_beats(metric, record)),
            detail: format!(
                "{} against the {entered} record {} ({}, {}); {} needed (+{:.0} %)",
                fmt_lsr(metric),
                fmt_lsr(record),
                row.team,
                row.date,
                fmt_lsr(record * (1.0 + LSR_IMPROVEMENT)),
                LSR_IMPROVEMENT * 100.0
            ),
        },
        None => RuleResult {
            rule: Rule::Improvement,
            verdict: Verdict::Pass,
            detail: format!("{}: no {entered} record to beat", fmt_lsr(metric)),
        },
    });
    out.push(RuleResult {
        rule: Rule::RealPath,
        verdict: pass(!run.emulated),
        detail: if run.emulated {
            "emulated path: never eligible; the record counts real terrestrial layer-3 paths only"
                .into()
        } else {
            "real path".into()
        },
    });
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::records::table::{V4S, V6M, V6S};

    /// A run that passes every rule: IPv6 single stream, 11 min, 32,372 km
    /// (capped), 10.0 Gbit/s, real path.
    pub(in crate::records) fn good() -> Candidate {
        Candidate {
            label: "run-1".into(),
            ip: Ip::V6,
            streams: 1,
            claimed: Some(V6S),
            bytes: 10_000_000_000 / 8 * 660,
            seconds: 660.0,
            km: 11_539.0,
            hops_forward: 6,
            hops_reverse: 6,
            address_pairs: 1,
            emulated: false,
        }
    }

    fn verdict(c: &Candidate, rule: Rule) -> Verdict {
        check(c)
            .into_iter()
            .find(|r| r.rule == rule)
            .unwrap()
            .verdict
    }

    #[test]
    fn good_run_on_a_long_path_is_eligible() {
        let c = Candidate {
            km: 32_372.0,
            ..good()
        };
        let r = check(&c);
        assert_eq!(r.len(), 8);
        assert!(eligible(&r), "{r:?}");
        assert_eq!(verdict(&c, Rule::DistanceCap), Verdict::Capped);
        assert_eq!(c.metric(), 10e9 * 30_000.0 * 1000.0);
    }

    #[test]
    fn rule_duration() {
        assert_eq!(verdict(&good(), Rule::Duration), Verdict::Pass);
        assert_eq!(
            verdict(
                &Candidate {
                    seconds: 600.0,
                    ..good()
                },
                Rule::Duration
            ),
            Verdict::Pass
        );
        assert_eq!(
            verdict(
                &Candidate {
                    seconds: 599.0,
                    ..good()
                },
                Rule::Duration
            ),
            Verdict::Fail
        );
        // What a receiver counted for `-t 600` (bench/runs/20261205T110223Z-lsr-tokyo-ipv6-cubic):
        // short by 23 ms, and the detail does not round it up to the 600 it misses.
        let short = Candidate {
            seconds: 599.977,
            ..good()
        };
        let r = check(&short);
        let d = r.iter().find(|r| r.rule == Rule::Duration).unwrap();
        assert_eq!(d.verdict, Verdict::Fail);
        assert!(d.detail.starts_with("599.9 s of transfer"), "{}", d.detail);
    }

    #[test]
    fn rule_distance() {
        assert_eq!(
            verdict(
                &Candidate {
                    km: 100.0,
                    ..good()
                },
                Rule::Distance
            ),
            Verdict::Pass
        );
        assert_eq!(
            verdict(&Candidate { km: 99.0, ..good() }, Rule::Distance),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_router_hops_each_way() {
        assert_eq!(
            verdict(
                &Candidate {
                    hops_forward: 2,
                    hops_reverse: 2,
                    ..good()
                },
                Rule::RouterHops
            ),
            Verdict::Pass
        );
        assert_eq!(
            verdict(
                &Candidate {
                    hops_reverse: 1,
                    ..good()
                },
                Rule::RouterHops
            ),
            Verdict::Fail
        );
        assert_eq!(
            verdict(
                &Candidate {
                    hops_forward: 1,
                    ..good()
                },
                Rule::RouterHops
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_one_address_pair() {
        assert_eq!(verdict(&good(), Rule::AddressPair), Verdict::Pass);
        assert_eq!(
            verdict(
                &Candidate {
                    address_pairs: 2,
                    ..good()
                },
                Rule::AddressPair
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_distance_cap() {
        assert_eq!(verdict(&good(), Rule::DistanceCap), Verdict::Pass);
        let long = Candidate {
            km: 32_372.0,
            ..good()
        };
        assert_eq!(verdict(&long, Rule::DistanceCap), Verdict::Capped);
        // The capped distance is what counts: 32,372 km scores as 30,000.
        assert_eq!(
            long.metric(),
            Candidate {
                km: 30_000.0,
                ..good()
            }
            .metric()
        );
    }

    #[test]
    fn rule_class() {
        assert_eq!(verdict(&good(), Rule::Class), Verdict::Pass);
        // A single stream may be entered in the multi-stream class.
        assert_eq!(
            verdict(
                &Candidate {
                    claimed: Some(V6M),
                    ..good()
                },
                Rule::Class
            ),
            Verdict::Pass
        );
        let wrong = Candidate {
            streams: 4,
            claimed: Some(V6S),
            ..good()
        };
        assert_eq!(verdict(&wrong, Rule::Class), Verdict::Fail);
        assert_eq!(
            verdict(
                &Candidate {
                    claimed: Some(V4S),
                    ..good()
                },
                Rule::Class
            ),
            Verdict::Fail
        );
        assert_eq!(
            verdict(
                &Candidate {
                    streams: 0,
                    claimed: None,
                    ..good()
                },
                Rule::Class
            ),
            Verdict::Fail
        );
    }

    #[test]
    fn rule_ten_percent_improvement() {
        // 10 Gbit/s × 30,000 km = 300,000 ≥ 1.1 × 272,400 = 299,640.
        let beats = Candidate {
            km: 30_000.0,
            ..good()
        };
        assert_eq!(verdict(&beats, Rule::Improvement), Verdict::Pass);
        // 9.9 Gbit/s is 297,000: above the record, but not by 10 %.
        let short = Candidate {
            bytes: 9_900_000_000 / 8 * 660,
            km: 30_000.0,
            ..good()
        };
        assert!(short.metric() > 272_400e12);
        let r = check(&short);
        assert_eq!(
            r.iter()
                .find(|x| x.rule == Rule::Improvement)
                .unwrap()
                .verdict,
            Verdict::Fail
        );
        assert!(!eligible(&r));
        // No record in a class: nothing to beat.
        assert_eq!(
            check_against(&beats, &[])
                .iter()
                .find(|x| x.rule == Rule::Improvement)
                .unwrap()
                .verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn rule_emulated_runs_are_never_eligible() {
        let real = Candidate {
            km: 30_000.0,
            ..good()
        };
        assert_eq!(verdict(&real, Rule::RealPath), Verdict::Pass);
        let emu = Candidate {
            emulated: true,
            ..real
        };
        let r = check(&emu);
        let rp = r.iter().find(|x| x.rule == Rule::RealPath).unwrap();
        assert_eq!(rp.verdict, Verdict::Fail);
        assert!(rp.detail.contains("emulated path: never eligible"));
        assert!(!eligible(&r));
    }
}
