//! A run's points beside the Internet2 Land Speed Records (experiments with `lsr = true`): each
//! point's best repetition as a candidate (rate × the path's distance, in bit·m/s), the record of
//! its class (IP version, single or multi-stream) from `records::RECORDS`, the share of that
//! record it reached, and the contest rules it broke besides the one no emulated run can meet
//! (a real terrestrial path). `longhaul lab run`'s summary prints [`text`]; the HTML report
//! (`report`) makes a table of [`rows`].

use std::fmt::Write as _;

use longhaul_experiments::records::{
    Candidate, RECORDS, RecordRow, Rule, Verdict, check, class_record,
};
use longhaul_experiments::result::ResultFile;

/// One point beside its class's record.
#[derive(Debug, Clone)]
pub struct LsrRow {
    /// The point's id (`ip=4,streams=1`).
    pub point: String,
    /// Its best repetition as a candidate.
    pub candidate: Candidate,
    /// The record of its class (metric in bit·m/s, and the row), if the class has one.
    pub record: Option<(f64, &'static RecordRow)>,
    /// The rules it broke, the real-path rule left out (an emulated run never meets it):
    /// `(rule, why)`.
    pub broken: Vec<(Rule, String)>,
}

impl LsrRow {
    /// Rate the receiver counted, bit/s.
    pub fn bps(&self) -> f64 {
        self.candidate.bytes as f64 * 8.0 / self.candidate.seconds.max(1e-9)
    }

    /// The candidate's metric as a share of the class record.
    pub fn share(&self) -> Option<f64> {
        self.record
            .filter(|(m, _)| *m > 0.0)
            .map(|(m, _)| self.candidate.metric() / m)
    }
}

/// Each point with a finished test, beside its class's record; empty unless the experiment asks
/// (`lsr = true`).
pub fn rows(rf: &ResultFile) -> Vec<LsrRow> {
    if !rf.experiment.spec.lsr {
        return Vec::new();
    }
    rf.lsr_candidates()
        .into_iter()
        .map(|(i, candidate)| {
            let broken = check(&candidate)
                .into_iter()
                .filter(|r| r.verdict == Verdict::Fail && r.rule != Rule::RealPath)
                .map(|r| (r.rule, r.detail))
                .collect();
            LsrRow {
                point: rf.points[i].point.id.clone(),
                record: class_record(candidate.class(), RECORDS),
                candidate,
                broken,
            }
        })
        .collect()
}

/// A metric in bit·m/s as Pb·m/s.
pub fn pb(metric: f64) -> String {
    format!("{:.1} Pb·m/s", metric / 1e15)
}

fn record_text(row: &LsrRow) -> String {
    match row.record {
        Some((m, r)) => format!(
            "the {} record {} ({}, {}){}",
            row.candidate.class(),
            pb(m),
            r.team,
            r.date,
            row.share()
                .map_or_else(String::new, |s| format!(": {:.0} % of it", s * 100.0))
        ),
        None => format!("no {} record", row.candidate.class()),
    }
}

/// The rules a row breaks, for people.
pub fn broken_text(row: &LsrRow) -> String {
    if row.broken.is_empty() {
        return "every other rule met".to_owned();
    }
    let rules: Vec<String> = row
        .broken
        .iter()
        .map(|(rule, why)| match rule {
            // The record is on the line already.
            Rule::Improvement => "Improvement (a new record must beat it by 10 %)".to_owned(),
            _ => format!("{rule:?} ({why})"),
        })
        .collect();
    format!("also breaks {}", rules.join(", "))
}

/// The summary's lines, one per point (empty when the experiment does not ask).
pub fn text(rf: &ResultFile) -> String {
    let rows = rows(rf);
    if rows.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "Land Speed Record metric (an emulated path: never eligible; the best repetition of each point):\n",
    );
    for row in &rows {
        let _ = writeln!(
            s,
            "  {}: {:.3} Gbit/s × {:.0} km = {}, {}; {}",
            row.point,
            row.bps() / 1e9,
            row.candidate.km.min(30_000.0),
            pb(row.candidate.metric()),
            record_text(row),
            broken_text(row)
        );
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use longhaul_experiments::builtin::builtin;
    use longhaul_experiments::result::{
        Derived, Experiment, Fidelity, HostFacts, PointResult, Repetition,
    };
    use serde_json::json;

    use super::*;

    /// A run of `lsr-tokyo-loop` whose points received `gbps[i]` Gbit/s for `seconds[i]` s, over
    /// the points' own IP versions; `lsr` as given.
    pub(crate) fn run(gbps: [f64; 4], seconds: [f64; 4], lsr: bool) -> ResultFile {
        let b = builtin("lsr-tokyo-loop").unwrap();
        let mut spec = b.spec().unwrap();
        spec.lsr = lsr;
        let mut rf = ResultFile::new(
            "20261205-100000-lsr-tokyo-loop",
            Experiment {
                name: spec.name.clone(),
                file: "builtin/lsr-tokyo-loop.toml".into(),
                text: b.toml.into(),
                reduced: false,
                spec: spec.clone(),
            },
            "2026-12-05T10:00:00Z",
            HostFacts::default(),
            "0.1.0",
            BTreeMap::new(),
        );
        for (i, point) in spec.points().into_iter().enumerate() {
            let (a, b) = match point.ip {
                6 => ("fd00:4c48::1", "fd00:4c48::2"),
                _ => ("10.201.0.1", "10.201.0.2"),
            };
            let report = json!({
                "start": {"connected": [{"local_host": a, "remote_host": b}]},
                "end": {"sum_received": {
                    "bytes": (gbps[i] * 1e9 / 8.0 * seconds[i]) as u64,
                    "seconds": seconds[i],
                }},
            });
            rf.points.push(PointResult {
                point,
                prediction: None,
                repetitions: vec![Repetition {
                    repetition: 0,
                    started: "2026-12-05T10:00:00Z".into(),
                    report,
                    error: None,
                    fidelity: Fidelity::default(),
                    derived: Derived::default(),
                }],
                summary: Derived::default(),
            });
        }
        rf
    }

    #[test]
    fn each_point_is_set_beside_the_record_of_its_class() {
        // Points: cc=cubic,ip=4; cc=cubic,ip=6; cc=bbr,ip=4; cc=bbr,ip=6.
        let rf = run([9.0, 9.417, 8.5, 9.99], [600.0, 600.0, 30.0, 600.0], true);
        let rows = rows(&rf);
        assert_eq!(rows.len(), 4);
        let v6 = &rows[1];
        assert_eq!(v6.point, "cc=cubic,ip=6");
        assert_eq!(v6.candidate.class().to_string(), "IPv6 single-stream");
        // 9.417 Gbit/s × 30,000 km against Data Reservoir's 9.08 × 30,000 (272.4 Pb·m/s): above
        // it, but not by the 10 % a new record needs.
        let (record, row) = v6.record.expect("a record");
        assert!((record / 1e15 - 272.4).abs() < 0.05, "{record}");
        assert!(row.date.starts_with("2006-12-31"), "{}", row.date);
        assert!((v6.share().unwrap() - 9.417 / 9.08).abs() < 0.001);
        let rules: Vec<Rule> = v6.broken.iter().map(|(r, _)| *r).collect();
        assert_eq!(rules, [Rule::Improvement]);
        // 9.99 Gbit/s is 10 % over it ("9.988 Gbps required to beat it", seed 004).
        assert!(rows[3].broken.is_empty(), "{:?}", rows[3].broken);
        // IPv4's record is the 8.80 Gbit/s of 2006 (264.1 Pb·m/s).
        let v4 = &rows[0];
        assert_eq!(v4.candidate.class().to_string(), "IPv4 single-stream");
        assert!((v4.record.unwrap().0 / 1e15 - 264.1).abs() < 0.1);
        // 30 s is no record run, whatever its rate.
        assert!(
            rows[2].broken.iter().any(|(r, _)| *r == Rule::Duration),
            "{:?}",
            rows[2].broken
        );

        let t = text(&rf);
        assert!(t.contains("never eligible"), "{t}");
        assert!(
            t.contains("cc=cubic,ip=6: 9.417 Gbit/s × 30000 km = 282.5 Pb·m/s, the IPv6 single-stream record 272.4 Pb·m/s"),
            "{t}"
        );
        assert!(
            t.contains(
                ": 104 % of it; also breaks Improvement (a new record must beat it by 10 %)\n"
            ),
            "{t}"
        );
        assert!(t.contains("cc=bbr,ip=6: 9.990 Gbit/s"), "{t}");
        assert!(t.contains(": 110 % of it; every other rule met"), "{t}");
        assert!(
            t.contains("also breaks Duration (30.0 s of transfer; at least 600 s (10 min) needed), Improvement"),
            "{t}"
        );
        println!("{t}");
    }

    #[test]
    fn experiments_that_do_not_ask_show_nothing() {
        let rf = run([9.0; 4], [600.0; 4], false);
        assert!(rows(&rf).is_empty());
        assert_eq!(text(&rf), "");
    }
}
