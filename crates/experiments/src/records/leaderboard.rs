//! The leaderboard: historical records and candidate runs ranked per
//! class, with the reason beside each run that a rule keeps off the ranks.

use serde::{Deserialize, Serialize};

use super::check::published_metric;
use super::rules::{Candidate, Rule, Verdict, check_against};
use super::table::{CLASSES, Class, RecordRow, Streams};

/// Where an entry comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Origin {
    /// A historical record (date, team, source).
    Record {
        /// Date.
        date: String,
        /// Source.
        source: String,
    },
    /// A run checked with [`check`](super::rules::check).
    Run,
}

/// One line of a class's board.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standing {
    /// Rank among eligible entries (1 = best); `None` for ineligible runs.
    pub rank: Option<usize>,
    /// Where it would place by metric alone (1-based, all entries).
    pub place: usize,
    /// Team or run label.
    pub label: String,
    /// Metric, bit·m/s.
    pub metric: f64,
    /// Record or run.
    pub origin: Origin,
    /// Whether it counts.
    pub eligible: bool,
    /// Why not, when it does not count.
    pub reason: String,
}

/// The board of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassBoard {
    /// The class.
    pub class: Class,
    /// Entries, best metric first.
    pub standings: Vec<Standing>,
}

/// Ranks the historical records and the runs per class. Records appear in
/// every class they held (the same mark listed by both tables once); a run
/// appears in its class, and a single-stream run also in the multi-stream
/// class of its IP version (as the Data Reservoir marks did). Runs that
/// fail a rule other than the improvement rule are listed with their
/// reason and no rank.
pub fn leaderboard(candidates: &[Candidate], rows: &[RecordRow]) -> Vec<ClassBoard> {
    CLASSES
        .iter()
        .map(|&class| {
            let mut entries: Vec<Standing> = Vec::new();
            for r in rows.iter().filter(|r| r.classes.contains(&class)) {
                let Some((metric, _)) = published_metric(r) else {
                    continue;
                };
                if entries.iter().any(|e| (e.metric - metric).abs() <= 1e14) {
                    continue;
                }
                entries.push(Standing {
                    rank: None,
                    place: 0,
                    label: r.team.to_owned(),
                    metric,
                    origin: Origin::Record {
                        date: r.date.to_owned(),
                        source: r.source.to_owned(),
                    },
                    eligible: true,
                    reason: String::new(),
                });
            }
            for c in candidates {
                let own = c.class();
                let in_class = own == class
                    || (own.ip == class.ip
                        && own.streams == Streams::Single
                        && class.streams == Streams::Multi);
                if !in_class {
                    continue;
                }
                let failed: Vec<String> = check_against(c, rows)
                    .into_iter()
                    .filter(|r| r.verdict == Verdict::Fail && r.rule != Rule::Improvement)
                    .map(|r| r.detail)
                    .collect();
                entries.push(Standing {
                    rank: None,
                    place: 0,
                    label: c.label.clone(),
                    metric: c.metric(),
                    origin: Origin::Run,
                    eligible: failed.is_empty(),
                    reason: failed.join("; "),
                });
            }
            entries.sort_by(|a, b| b.metric.total_cmp(&a.metric));
            let mut rank = 0;
            for (i, e) in entries.iter_mut().enumerate() {
                e.place = i + 1;
                if e.eligible {
                    rank += 1;
                    e.rank = Some(rank);
                }
            }
            ClassBoard {
                class,
                standings: entries,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::rules::tests::good;
    use crate::records::table::{RECORDS, V4S, V6M, V6S};

    #[test]
    fn leaderboard_ranks_per_class_and_marks_emulated_runs() {
        let real = Candidate {
            km: 30_000.0,
            ..good()
        };
        let emu = Candidate {
            label: "emu".into(),
            emulated: true,
            bytes: real.bytes * 2,
            ..real.clone()
        };
        let boards = leaderboard(&[real, emu], RECORDS);
        assert_eq!(boards.len(), 4);
        let v6s = boards.iter().find(|b| b.class == V6S).unwrap();
        let first = &v6s.standings[0];
        assert_eq!(first.label, "emu");
        assert_eq!(first.place, 1);
        assert_eq!(first.rank, None);
        assert!(!first.eligible && first.reason.contains("emulated"));
        assert_eq!(v6s.standings[1].label, "run-1");
        assert_eq!(v6s.standings[1].rank, Some(1));
        assert_eq!(v6s.standings[2].metric, 272_400e12);
        assert_eq!(v6s.standings[2].rank, Some(2));
        // The single-stream run also counts in IPv6 multi, not in IPv4.
        let v6m = boards.iter().find(|b| b.class == V6M).unwrap();
        assert!(v6m.standings.iter().any(|s| s.label == "run-1"));
        let v4s = boards.iter().find(|b| b.class == V4S).unwrap();
        assert!(v4s.standings.iter().all(|s| s.origin != Origin::Run));
        // The IPv4 board's best is the 264,147 mark, listed once.
        assert_eq!(v4s.standings[0].metric, 264_147e12);
        assert_eq!(
            v4s.standings
                .iter()
                .filter(|s| (s.metric - 264_100e12).abs() < 1e14)
                .count(),
            1
        );
        for b in &boards {
            assert!(b.standings.windows(2).all(|w| w[0].metric >= w[1].metric));
        }
    }
}
