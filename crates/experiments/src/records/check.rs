//! The checks of the table: every published metric recomputed from its
//! rate × (capped) distance within the quoted rounding, quoted bytes and
//! seconds against the rate (which reading of "GB" agrees), each class's
//! best mark, and the table as Markdown with those checks beside each row.

use longhaul_units::lsr_capped_km;
use serde::Serialize;

use super::table::{Class, MetricKind, Reading, RecordRow, Table, TimeKind};

/// A quoted decimal: its value and half a unit in its last digit
/// ("2.38" → (2.38, 0.005); "23,888" → (23888, 0.5)). Prefixes ">", "≈",
/// "~" are stripped; `None` if it does not parse.
fn quoted(s: &str) -> Option<(f64, f64)> {
    let s: String = s
        .trim_start_matches(['>', '<', '~'])
        .trim_start_matches('≈')
        .chars()
        .filter(|c| *c != ',')
        .collect();
    let v = s.parse::<f64>().ok()?;
    let decimals = s.split_once('.').map_or(0, |(_, f)| f.len());
    Some((v, 0.5 * 10f64.powi(-(decimals as i32))))
}

fn approx(s: &str) -> bool {
    s.starts_with('≈') || s.starts_with('~')
}

/// A published rate in bit/s and its tolerance (half a unit of the last
/// digit, a whole unit when quoted as approximate).
pub fn rate_bps(row: &RecordRow) -> Option<(f64, f64)> {
    let s = row.rate?;
    let (v, half) = quoted(s)?;
    let tol = if approx(s) { 2.0 * half } else { half };
    Some((v * 1e9, tol * 1e9))
}

/// The published metric in bit·m/s and its rounding tolerance.
pub fn published_metric(row: &RecordRow) -> Option<(f64, f64)> {
    let m = row.metric?;
    let (v, half) = quoted(m.value)?;
    let scale = if m.petabit { 1e15 } else { 1e12 };
    Some((v * scale, half * scale))
}

/// A row's metric recomputed from its rate and (capped) distance.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MetricCheck {
    /// Rate × min(km, 30,000) × 1000, bit·m/s.
    pub recomputed: f64,
    /// The published figure, bit·m/s.
    pub published: f64,
    /// What the rounding of the rate and of the metric allows, bit·m/s.
    pub tolerance: f64,
    /// Whether they agree (for a lower bound: recomputed ≥ bound −
    /// tolerance).
    pub agrees: bool,
}

/// Recomputes a row's metric from its published rate and distance; `None`
/// where the rate, the distance or the metric is missing, or the metric is
/// only inferred.
pub fn recompute(row: &RecordRow) -> Option<MetricCheck> {
    let (rate, rate_tol) = rate_bps(row)?;
    let km = lsr_capped_km(row.km?);
    let (published, metric_tol) = published_metric(row)?;
    let kind = row.metric?.kind;
    if kind == MetricKind::Approx {
        return None;
    }
    let recomputed = rate * km * 1000.0;
    let tolerance = rate_tol * km * 1000.0 + metric_tol;
    let agrees = match kind {
        MetricKind::AtLeast => recomputed >= published - tolerance,
        _ => (recomputed - published).abs() <= tolerance,
    };
    Some(MetricCheck {
        recomputed,
        published,
        tolerance,
        agrees,
    })
}

/// Quoted bytes and seconds against the quoted rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UnitsCheck {
    /// bytes × 8 / seconds with decimal prefixes, bit/s.
    pub decimal_bps: f64,
    /// The same with binary prefixes (iperf's "GBytes").
    pub binary_bps: f64,
    /// The quoted rate.
    pub rate_bps: f64,
    /// Relative tolerance from the rounding of bytes, time and rate.
    pub tolerance: f64,
    /// Which reading agrees.
    pub reading: Reading,
}

/// Checks quoted bytes and seconds against the rate; `None` without them.
/// With an upper-bound time the quoted figures give a lower bound of the
/// rate, which agrees when it does not exceed the rate.
pub fn units_check(row: &RecordRow) -> Option<UnitsCheck> {
    let qd = row.quoted?;
    let (rate, rate_half) = rate_bps(row)?;
    let (bytes, bytes_half) = quoted(qd.bytes)?;
    let (time, time_half) = quoted(qd.time)?;
    let secs = time * f64::from(qd.time_unit_s);
    let mut tolerance = bytes_half / bytes + rate_half / rate;
    tolerance += match qd.time_kind {
        TimeKind::Exact => time_half / time,
        TimeKind::About => 0.10,
        TimeKind::UpperBound => 0.0,
    };
    let power = qd.power as i32;
    let decimal_bps = bytes * 1000f64.powi(power) * 8.0 / secs;
    let binary_bps = bytes * 1024f64.powi(power) * 8.0 / secs;
    let ok = |r: f64| match qd.time_kind {
        TimeKind::UpperBound => r <= rate * (1.0 + tolerance),
        _ => (r / rate - 1.0).abs() <= tolerance,
    };
    let reading = match (ok(decimal_bps), ok(binary_bps)) {
        (true, true) => Reading::Either,
        (true, false) => Reading::Decimal,
        (false, true) => Reading::Binary,
        (false, false) => Reading::Neither,
    };
    Some(UnitsCheck {
        decimal_bps,
        binary_bps,
        rate_bps: rate,
        tolerance,
        reading,
    })
}

/// The best published mark of a class (lower bounds count at their bound;
/// inferred marks count too), with its row.
pub fn class_record(class: Class, rows: &[RecordRow]) -> Option<(f64, &RecordRow)> {
    rows.iter()
        .filter(|r| r.classes.contains(&class))
        .filter_map(|r| published_metric(r).map(|(m, _)| (m, r)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The table as Markdown (what `longhaul lab records` and docs/lab.md
/// show): every row with its recomputed metric and the byte-unit reading.
pub fn table_markdown(rows: &[RecordRow]) -> String {
    let mut out = String::from(
        "| date | team | class | route | km | Gbit/s | published (Tb·m/s) | recomputed | metric | bytes / time | units | source | note |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let class = if r.classes.is_empty() {
            "-".to_owned()
        } else {
            r.classes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let km = match (r.km, r.real_km) {
            (Some(k), Some(real)) => format!("{k:.0} (real {real:.0})"),
            (Some(k), None) => format!("{k:.0}"),
            _ => "n/a".into(),
        };
        let published = r.metric.map_or("-".to_owned(), |m| {
            let prefix = match m.kind {
                MetricKind::Exact => "",
                MetricKind::AtLeast => ">",
                MetricKind::Derived => "(derived) ",
                MetricKind::Approx => "~",
            };
            let unit = if m.petabit { " Pb·m/s" } else { "" };
            format!("{prefix}{}{unit}", m.value)
        });
        let check = recompute(r);
        let recomputed = check.map_or("-".to_owned(), |c| format!("{:.0}", c.recomputed / 1e12));
        let verdict = match check {
            Some(c) if c.agrees => "agrees",
            Some(_) => "**disagrees**",
            None => "-",
        };
        let quoted = r.quoted.map_or("-".to_owned(), |q| {
            let unit = ["", "K", "M", "G", "T"]
                .get(q.power as usize)
                .copied()
                .unwrap_or("?");
            let t = match (q.time_kind, q.time_unit_s) {
                (TimeKind::Exact, 60) => format!("{} min", q.time),
                (TimeKind::About, 60) => format!("~{} min", q.time),
                (TimeKind::UpperBound, 60) => format!("<{} min", q.time),
                (TimeKind::About, _) => format!("~{} s", q.time),
                (TimeKind::UpperBound, _) => format!("<{} s", q.time),
                (TimeKind::Exact, _) => format!("{} s", q.time),
            };
            format!("{} {unit}B / {t}", q.bytes)
        });
        let units = units_check(r).map_or("-", |u| match u.reading {
            Reading::Decimal => "decimal",
            Reading::Binary => "**binary**",
            Reading::Either => "either",
            Reading::Neither => "**neither**",
        });
        let table = match r.table {
            Table::Notes => "",
            Table::DataReservoir => " (DR series)",
        };
        out.push_str(&format!(
            "| {} | {} | {class} | {} | {km} | {} | {published} | {recomputed} | {verdict} | {quoted} | {units} | {}{table} | {} |\n",
            r.date,
            r.team,
            r.route,
            r.rate.unwrap_or("-"),
            r.source,
            r.note
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::table::{RECORDS, V6S};

    /// Every row whose metric can be recomputed: rate × capped distance
    /// gives the published metric within the quoted rounding, except the
    /// rows flagged (and explained) as disagreeing.
    #[test]
    fn every_metric_is_recomputed_from_rate_and_distance() {
        let mut checked = 0;
        for r in RECORDS {
            let c = recompute(r);
            assert_eq!(
                c.map(|c| c.agrees),
                r.metric_agrees,
                "{} {}: {c:?}",
                r.date,
                r.team
            );
            if r.metric_agrees == Some(false) {
                assert!(
                    !r.note.is_empty(),
                    "{}: disagreement without a note",
                    r.date
                );
            }
            checked += usize::from(c.is_some());
        }
        assert_eq!(checked, 32);
        let agreeing = RECORDS
            .iter()
            .filter(|r| r.metric_agrees == Some(true))
            .count();
        assert_eq!(agreeing, 30);
    }

    #[test]
    fn metric_check_examples_of_rounding() {
        let row = |date: &str, rate: &str| {
            RECORDS
                .iter()
                .find(|r| r.date == date && r.rate == Some(rate))
                .unwrap()
        };
        // 8.80 × 30,000 = 264,000 against 264,147: within 8.80's rounding.
        let c = recompute(row("2006-02 (ann. 04-26)", "8.80")).unwrap();
        assert_eq!((c.recomputed / 1e12).round(), 264_000.0);
        assert!(c.agrees && (c.recomputed - c.published).abs() > 100e12);
        // 4.00 × 11,539 = 46,156 exactly.
        let c = recompute(row("2004 (before 04-20)", "4.00")).unwrap();
        assert_eq!((c.recomputed / 1e12).round(), 46_156.0);
        // Seed 004's 6.22 does not give its own 185.4 Pb·m/s.
        let c = recompute(row("2005-11-13 (SC05)", "6.22")).unwrap();
        assert!(!c.agrees);
        assert_eq!((c.recomputed / 1e15 * 10.0).round() / 10.0, 186.6);
        // A rate one digit off would not pass: 2.39 × 10,037 vs 23,888.
        let mut r = *row("2003-02-27/28", "2.38");
        r.rate = Some("2.39");
        assert!(!recompute(&r).unwrap().agrees);
    }

    /// Where bytes and seconds are quoted, the reading that makes them agree
    /// with the rate is the one the row states; the rows where it is binary
    /// or neither say so in their note.
    #[test]
    fn bytes_and_seconds_against_the_rate() {
        let mut checked = 0;
        for r in RECORDS {
            let u = units_check(r);
            assert_eq!(
                u.map(|u| u.reading),
                r.reading,
                "{} {}: {u:?}",
                r.date,
                r.team
            );
            if matches!(
                r.reading,
                Some(Reading::Binary | Reading::Neither | Reading::Either)
            ) {
                assert!(!r.note.is_empty(), "{}: unit oddity without a note", r.date);
            }
            checked += usize::from(u.is_some());
        }
        assert_eq!(checked, 14);
        let count = |x: Reading| RECORDS.iter().filter(|r| r.reading == Some(x)).count();
        assert_eq!(count(Reading::Binary), 4);
        assert_eq!(count(Reading::Decimal), 7);
        assert_eq!(count(Reading::Either), 2);
        assert_eq!(count(Reading::Neither), 1);
    }

    #[test]
    fn docs_show_the_table_as_rendered() {
        let md = table_markdown(RECORDS);
        assert_eq!(md.lines().count(), RECORDS.len() + 2);
        assert_eq!(md.matches("**disagrees**").count(), 2);
        let docs = include_str!("../../../../docs/lab.md");
        assert!(
            docs.contains(&md),
            "docs/lab.md is out of date: paste table_markdown(RECORDS)"
        );
    }

    #[test]
    fn units_check_560_gbytes_is_binary() {
        let r = RECORDS
            .iter()
            .find(|r| r.metric.map(|m| m.value) == Some("46,156"))
            .unwrap();
        let u = units_check(r).unwrap();
        assert!((u.binary_bps / 1e9 - 4.009).abs() < 0.001);
        assert!((u.decimal_bps / 1e9 - 3.733).abs() < 0.001);
        assert_eq!(u.reading, Reading::Binary);
    }

    #[test]
    fn quoted_figures_and_their_rounding() {
        assert_eq!(quoted("2.38"), Some((2.38, 0.005)));
        assert_eq!(quoted("23,888"), Some((23_888.0, 0.5)));
        assert_eq!(quoted(">0.830"), Some((0.83, 0.0005)));
        assert_eq!(quoted("≈5.6").map(|x| x.0), Some(5.6));
        assert_eq!(quoted("n/a"), None);
        let r = RECORDS.iter().find(|r| r.rate == Some("≈5.6")).unwrap();
        let (_, tol) = rate_bps(r).unwrap();
        assert!((tol - 0.1e9).abs() < 1.0);
    }

    #[test]
    fn beating_9_08_needs_9_988_gbps() {
        let (record, row) = class_record(V6S, RECORDS).unwrap();
        assert_eq!(record, 272_400e12);
        assert_eq!(row.rate, Some("9.08"));
        let needed = record * 1.1 / 30_000.0 / 1000.0;
        assert!((needed / 1e9 - 9.988).abs() < 1e-9);
    }
}
