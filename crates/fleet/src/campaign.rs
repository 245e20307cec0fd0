//! Campaigns (`longhaul campaign FILE`): many host pairs tested at one instant, as SC2004's
//! bandwidth challenge drove its servers (seed 003). The file names the pairs and their test flags;
//! the controller reaches every pair's sending server, learns its clock offset, and asks each to
//! start at one instant in its own clock. This module holds the file and the arithmetic of the
//! result (the aggregate per interval, the start spread); the I/O is the binary's.
//!
//! ```toml
//! name = "four-pairs"        # optional [default: the file's name without .toml]
//! start_in = "3s"            # the common start, this long after every server is reached
//!                            #   [default 3 s; at most 8 s: the targets wait for the start
//!                            #   within their set-up deadline]
//! args = "-t 10 -P 2"        # `longhaul test` flags for every pair
//!
//! [[pair]]
//! name = "caltech"           # optional [default "FROM->TO"]
//! from = "10.201.0.1"        # the server that runs the test (it lists this controller)
//! from_port = 7067           # optional
//! to = "10.201.0.5"          # the server it tests to
//! to_port = 7067             # optional
//! args = "--pace 900M"       # optional: flags after the common ones (a later flag wins)
//!
//! [[pair]]                   # a third-party copy instead of a test (`longhaul copy`)
//! from = "10.201.0.2"        # the server that sends (both list this controller)
//! to = "10.201.0.6"          # the server that receives
//! copy = ["run42", "calib"]  # what to send, relative to from's root
//! dest = "incoming"          # where it lands under to's root [default: the root]
//! args = "-P 8 --rate 2G"    # optional: `longhaul copy` flags after the file's `copy_args`
//! ```
//!
//! `args` at the top are the tests' common flags, `copy_args` the copies'.

use longhaul_proto::report::IntervalReport;
use longhaul_units::Nanos;
use serde::{Deserialize, Serialize};

use longhaul_transfer::RelPath;
use longhaul_transfer::msg::MAX_REQUEST_PATHS;

use crate::msg::MAX_HOLD_NS;

/// Default port of a pair's servers.
pub const DEFAULT_PORT: u16 = 7067;
/// Default delay of the common start after the last server is reached.
pub const DEFAULT_START_IN: Nanos = Nanos(3_000_000_000);
/// Most pairs in one campaign.
pub const MAX_PAIRS: usize = 1024;

/// A campaign file.
#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    /// Its name.
    pub name: String,
    /// The common start, this long after every server is reached.
    pub start_in: Nanos,
    /// The pairs.
    pub pairs: Vec<PairSpec>,
}

/// One pair of a campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairSpec {
    /// Its name in output.
    pub name: String,
    /// The server that runs the test.
    pub from: String,
    /// Its port.
    pub from_port: u16,
    /// The server it tests to.
    pub to: String,
    /// That one's port.
    pub to_port: u16,
    /// What the pair does.
    pub kind: PairKind,
    /// `longhaul test` (or for a copy, `longhaul copy`) flags: the campaign's, then the pair's.
    pub args: Vec<String>,
}

/// What a pair does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairKind {
    /// A test from `from` to `to`.
    Test,
    /// A third-party copy of `paths` (under `from`'s root) into `dest` (under `to`'s).
    Copy {
        /// What to send.
        paths: Vec<RelPath>,
        /// Where it lands (`None`: the root).
        dest: Option<RelPath>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCampaign {
    name: Option<String>,
    start_in: Option<String>,
    #[serde(default)]
    args: String,
    #[serde(default)]
    copy_args: String,
    #[serde(default)]
    pair: Vec<RawPair>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPair {
    name: Option<String>,
    from: String,
    from_port: Option<u16>,
    to: String,
    to_port: Option<u16>,
    #[serde(default)]
    args: String,
    copy: Option<Vec<String>>,
    dest: Option<String>,
}

/// Reads a campaign file; errors name the file, the pair and the field.
pub fn parse_campaign(text: &str, file: &str) -> Result<Campaign, String> {
    let raw: RawCampaign = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    if raw.pair.is_empty() || raw.pair.len() > MAX_PAIRS {
        return Err(format!("{file}: give 1 to {MAX_PAIRS} [[pair]] tables"));
    }
    let start_in = match &raw.start_in {
        None => DEFAULT_START_IN,
        Some(s) => longhaul_units::parse_duration(s, longhaul_units::TimeUnit::Secs)
            .ok()
            .filter(|d| d.0 > 0 && d.0 <= MAX_HOLD_NS)
            .ok_or_else(|| {
                format!(
                    "{file}: start_in: {s:?}: give a duration above 0 and at most {} s",
                    MAX_HOLD_NS / 1_000_000_000
                )
            })?,
    };
    let common: Vec<String> = raw.args.split_whitespace().map(str::to_string).collect();
    let copy_common: Vec<String> = raw
        .copy_args
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut pairs: Vec<PairSpec> = Vec::with_capacity(raw.pair.len());
    for (i, p) in raw.pair.into_iter().enumerate() {
        let at = |field: &str, why: String| format!("{file}: pair[{i}].{field}: {why}");
        for (field, host) in [("from", &p.from), ("to", &p.to)] {
            if host.is_empty() || host.len() > 255 || host.chars().any(char::is_whitespace) {
                return Err(at(field, format!("{host:?}: give a host name or address")));
            }
        }
        for (field, port) in [("from_port", p.from_port), ("to_port", p.to_port)] {
            if port == Some(0) {
                return Err(at(field, "port 0".into()));
            }
        }
        let name = p.name.unwrap_or_else(|| format!("{}->{}", p.from, p.to));
        if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
            return Err(at(
                "name",
                format!("{name:?}: 1 to 64 printable characters"),
            ));
        }
        if pairs.iter().any(|q| q.name == name) {
            return Err(at("name", format!("duplicate name {name:?}")));
        }
        let kind = match (p.copy, p.dest) {
            (None, None) => PairKind::Test,
            (None, Some(_)) => return Err(at("dest", "a dest needs copy = [paths]".into())),
            (Some(paths), dest) => {
                if paths.is_empty() || paths.len() > MAX_REQUEST_PATHS {
                    return Err(at(
                        "copy",
                        format!("give 1 to {MAX_REQUEST_PATHS} paths under from's root"),
                    ));
                }
                let paths = paths
                    .iter()
                    .map(|x| RelPath::parse(x).map_err(|e| at("copy", format!("{x:?}: {e}"))))
                    .collect::<Result<Vec<_>, _>>()?;
                let dest = match dest.as_deref().map(|d| d.trim_end_matches('/')) {
                    None | Some("" | ".") => None,
                    Some(d) => {
                        Some(RelPath::parse(d).map_err(|e| at("dest", format!("{d:?}: {e}")))?)
                    }
                };
                PairKind::Copy { paths, dest }
            }
        };
        let mut args = match kind {
            PairKind::Test => common.clone(),
            PairKind::Copy { .. } => copy_common.clone(),
        };
        args.extend(p.args.split_whitespace().map(str::to_string));
        pairs.push(PairSpec {
            name,
            from: p.from,
            from_port: p.from_port.unwrap_or(DEFAULT_PORT),
            to: p.to,
            to_port: p.to_port.unwrap_or(DEFAULT_PORT),
            kind,
            args,
        });
    }
    let stem = std::path::Path::new(file)
        .file_stem()
        .map_or_else(|| "campaign".into(), |s| s.to_string_lossy().into_owned());
    Ok(Campaign {
        name: raw.name.unwrap_or(stem),
        start_in,
        pairs,
    })
}

/// One interval of the whole campaign: the sum over the pairs that reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggregateInterval {
    /// Start, s after the common start.
    pub start: f64,
    /// End, s.
    pub end: f64,
    /// Bytes, all pairs.
    pub bytes: u64,
    /// Rate, all pairs, bit/s.
    pub bits_per_second: f64,
    /// How many pairs reported this interval.
    pub pairs: usize,
}

/// The campaign's intervals: interval *i* of every pair summed (the pairs start together with the
/// same interval length, so the *i*-th intervals cover the same time).
pub fn aggregate_intervals(pairs: &[&[IntervalReport]]) -> Vec<AggregateInterval> {
    let longest = pairs.iter().map(|p| p.len()).max().unwrap_or(0);
    (0..longest)
        .map(|i| {
            let here: Vec<&IntervalReport> = pairs.iter().filter_map(|p| p.get(i)).collect();
            AggregateInterval {
                start: here
                    .iter()
                    .map(|r| r.sum.start)
                    .fold(f64::INFINITY, f64::min),
                end: here.iter().map(|r| r.sum.end).fold(0.0, f64::max),
                bytes: here.iter().map(|r| r.sum.bytes).sum(),
                bits_per_second: here.iter().map(|r| r.sum.bits_per_second).sum(),
                pairs: here.len(),
            }
        })
        .collect()
}

/// How far apart the pairs really started: the latest start minus the earliest, each a server's
/// report (`started_unix_ns`, its clock) brought to the controller's clock (minus its offset).
pub fn start_spread_ns(starts: &[(u64, i64)]) -> u64 {
    let local: Vec<i128> = starts
        .iter()
        .map(|&(started, offset)| i128::from(started) - i128::from(offset))
        .collect();
    match (local.iter().min(), local.iter().max()) {
        (Some(lo), Some(hi)) => u64::try_from(hi - lo).unwrap_or(u64::MAX),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_campaign_file_reads_with_common_and_own_flags() {
        let c = parse_campaign(
            r#"
name = "four"
start_in = "2s"
args = "-t 10 -P 2"
[[pair]]
from = "a"
to = "b"
to_port = 7068
[[pair]]
name = "slow"
from = "c"
to = "d"
args = "--pace 100M -P 1"
"#,
            "c.toml",
        )
        .unwrap();
        assert_eq!(c.name, "four");
        assert_eq!(c.start_in, Nanos::from_secs(2));
        assert_eq!(c.pairs[0].name, "a->b");
        let unnamed = parse_campaign("[[pair]]\nfrom = \"a\"\nto = \"b\"\n", "x/ring.toml");
        assert_eq!(unnamed.unwrap().name, "ring");
        assert_eq!((c.pairs[0].from_port, c.pairs[0].to_port), (7067, 7068));
        assert_eq!(c.pairs[0].args, ["-t", "10", "-P", "2"]);
        assert_eq!(
            c.pairs[1].args,
            ["-t", "10", "-P", "2", "--pace", "100M", "-P", "1"]
        );
    }

    #[test]
    fn bad_campaign_files_name_the_field() {
        let bad = |t: &str| parse_campaign(t, "c.toml").unwrap_err();
        assert!(bad("").contains("[[pair]]"));
        assert!(bad("[[pair]]\nfrom = \"a b\"\nto = \"c\"\n").contains("pair[0].from"));
        assert!(
            bad("[[pair]]\nfrom = \"a\"\nto = \"c\"\nto_port = 0\n").contains("pair[0].to_port")
        );
        assert!(
            bad("[[pair]]\nfrom = \"a\"\nto = \"c\"\n[[pair]]\nfrom = \"a\"\nto = \"c\"\n")
                .contains("pair[1].name: duplicate")
        );
        assert!(
            bad("start_in = \"20s\"\n[[pair]]\nfrom = \"a\"\nto = \"c\"\n").contains("start_in")
        );
        assert!(bad("[[pair]]\nfrom = \"a\"\nto = \"c\"\nrate = 1\n").contains("rate"));
        let pair = "[[pair]]\nfrom = \"a\"\nto = \"c\"\n";
        assert!(bad(&format!("{pair}dest = \"x\"\n")).contains("pair[0].dest: a dest needs"));
        assert!(bad(&format!("{pair}copy = []\n")).contains("pair[0].copy"));
        assert!(bad(&format!("{pair}copy = [\"../etc\"]\n")).contains("pair[0].copy: \"../etc\""));
        assert!(bad(&format!("{pair}copy = [\"a\"]\ndest = \"/x\"\n")).contains("pair[0].dest"));
    }

    #[test]
    fn copy_pairs_take_the_copy_flags() {
        let c = parse_campaign(
            r#"
args = "-t 10"
copy_args = "-P 8"
[[pair]]
from = "a"
to = "b"
[[pair]]
from = "c"
to = "d"
copy = ["run42", "calib/x"]
dest = "incoming/"
args = "--rate 2G"
"#,
            "c.toml",
        )
        .unwrap();
        assert_eq!(c.pairs[0].kind, PairKind::Test);
        assert_eq!(c.pairs[0].args, ["-t", "10"]);
        let PairKind::Copy { paths, dest } = &c.pairs[1].kind else {
            panic!("a copy pair")
        };
        assert_eq!(paths[1].as_str(), "calib/x");
        assert_eq!(dest.as_ref().map(RelPath::as_str), Some("incoming"));
        assert_eq!(c.pairs[1].args, ["-P", "8", "--rate", "2G"]);
    }

    fn interval(start: f64, bytes: u64) -> IntervalReport {
        serde_json::from_value(serde_json::json!({
            "streams": [],
            "sum": {"start": start, "end": start + 1.0, "seconds": 1.0, "bytes": bytes,
                    "bits_per_second": bytes as f64 * 8.0, "omitted": false, "sender": true}
        }))
        .unwrap()
    }

    #[test]
    fn the_aggregate_sums_each_interval_over_the_pairs_that_reported_it() {
        let a = [interval(0.0, 100), interval(1.0, 200)];
        let b = [interval(0.0, 10), interval(1.0, 20), interval(2.0, 30)];
        let agg = aggregate_intervals(&[&a, &b]);
        assert_eq!(agg.len(), 3);
        assert_eq!((agg[0].bytes, agg[0].pairs), (110, 2));
        assert_eq!(agg[1].bits_per_second, 220.0 * 8.0);
        assert_eq!((agg[2].bytes, agg[2].pairs, agg[2].start), (30, 1, 2.0));
        assert!(aggregate_intervals(&[]).is_empty());
    }

    #[test]
    fn the_spread_is_taken_in_the_controllers_clock() {
        // Server 1 runs 5 ms ahead: its report of t+5 ms is t in our clock.
        assert_eq!(start_spread_ns(&[(1_000, 0), (5_001_000, 5_000_000)]), 0);
        assert_eq!(
            start_spread_ns(&[(1_000, 0), (3_000, 0), (2_000, 0)]),
            2_000
        );
        assert_eq!(start_spread_ns(&[]), 0);
    }
}
