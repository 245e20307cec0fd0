//! The mesh file of `longhaul monitor run MESH`: the hosts, their groups, and which pairs run which
//! tests how often.
//!
//! ```toml
//! name = "lhc"                   # optional [default: the file's name without .toml]
//!
//! [[host]]
//! name = "cern"                  # 1-32 of a-z 0-9 - _
//! address = "10.201.0.1"         # how the monitor and the other hosts reach its longhaul server
//! port = 7067                    # optional [default 7067]
//! groups = ["t1"]                # optional: names a test's from/to may use for several hosts
//!
//! [[test]]
//! name = "t1-throughput"         # 1-32 of a-z 0-9 - _, unique
//! kind = "throughput"            # throughput | traceroute | latency
//! from = ["t1"]                  # hosts or groups
//! to = ["t2", "fnal"]            # optional [default: the same as from]; every from -> to pair,
//!                                #   never a host to itself
//! every = "4h"                   # how often each pair runs it [defaults: throughput 6h,
//!                                #   traceroute 10min, latency: the report interval, 1min]
//! slip = "1h"                    # each run starts at a random point this long after its period
//!                                #   begins [default: a quarter of every; 0 for latency]
//! args = "-t 20 -O 3 -P 4"       # throughput only: `longhaul test` flags
//! ```
//!
//! Errors name the file, the line and the field (`lhc.toml:12: test[0].from: "t3": no host or group of
//! that name`); unknown fields are refused.

use std::collections::{BTreeMap, BTreeSet};

use longhaul_topology::{FileError, field_at_line, line_of_field};
use longhaul_units::{Nanos, TimeUnit, parse_duration};
use serde::Deserialize;

use crate::rule::{AlertRule, When};

/// Default port of a host's longhaul server.
pub const DEFAULT_PORT: u16 = 7067;
/// Most hosts in one mesh.
pub const MAX_HOSTS: usize = 1024;
/// Most tests in one mesh.
pub const MAX_TESTS: usize = 256;
/// Most pairs one test may expand to.
pub const MAX_PAIRS: usize = 16_384;
/// Most pairs of all tests together (each is a planned task, a probe stream or both).
pub const MAX_TOTAL_PAIRS: usize = 65_536;
/// The shortest period of a throughput test: a test every minute on every pair would leave a host no
/// time for anything else.
pub const MIN_THROUGHPUT_EVERY: Nanos = Nanos(60_000_000_000);
/// The shortest period of any test.
pub const MIN_EVERY: Nanos = Nanos(1_000_000_000);

/// A mesh, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Mesh {
    /// Its name.
    pub name: String,
    /// The hosts, in file order (tests refer to them by index).
    pub hosts: Vec<Host>,
    /// The tests, in file order.
    pub tests: Vec<TestSpec>,
    /// The alert rules, in file order.
    pub alerts: Vec<AlertRule>,
    /// Where alerts are POSTed as JSON, if anywhere (an `http://` URL).
    pub webhook: Option<String>,
}

/// A host of the mesh: a longhaul server.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// Its name.
    pub name: String,
    /// How it is reached.
    pub address: String,
    /// Its server's port.
    pub port: u16,
    /// The groups it belongs to.
    pub groups: Vec<String>,
    /// Where it is (degrees), for the dashboard's map.
    pub lat_lon: Option<(f64, f64)>,
}

/// What a test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// `longhaul test` from one host to another, exclusive on both hosts while it runs.
    Throughput,
    /// A traceroute from one host to another.
    Traceroute,
    /// A continuous low-rate probe stream (loss, duplicates, reordering, RTT, jitter), reported
    /// every period.
    Latency,
}

impl TestKind {
    /// Its name in the mesh file and the archive.
    pub fn as_str(self) -> &'static str {
        match self {
            TestKind::Throughput => "throughput",
            TestKind::Traceroute => "traceroute",
            TestKind::Latency => "latency",
        }
    }

    /// Whether two runs of this kind may share a host (throughput tests may not).
    pub fn exclusive(self) -> bool {
        self == TestKind::Throughput
    }

    fn default_every(self) -> Nanos {
        match self {
            TestKind::Throughput => Nanos(6 * 3600 * 1_000_000_000),
            TestKind::Traceroute => Nanos(600 * 1_000_000_000),
            TestKind::Latency => Nanos(60 * 1_000_000_000),
        }
    }
}

/// A test of the mesh and the pairs that run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSpec {
    /// Its name.
    pub name: String,
    /// What it measures.
    pub kind: TestKind,
    /// (from, to) host indices, each pair once, never a host to itself.
    pub pairs: Vec<(usize, usize)>,
    /// How often each pair runs it.
    pub every: Nanos,
    /// Each run starts at a random point this long after its period begins.
    pub slip: Nanos,
    /// `longhaul test` flags (throughput).
    pub args: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMesh {
    name: Option<String>,
    #[serde(default)]
    host: Vec<RawHost>,
    #[serde(default)]
    test: Vec<RawTest>,
    #[serde(default)]
    alert: Vec<RawAlert>,
    webhook: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAlert {
    name: String,
    when: When,
    value: Option<f64>,
    tests: Option<Vec<String>>,
    after: Option<u32>,
    clear_after: Option<u32>,
}

/// Most alert rules in a mesh.
pub const MAX_ALERTS: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: String,
    address: String,
    port: Option<u16>,
    #[serde(default)]
    groups: Vec<String>,
    lat: Option<f64>,
    lon: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    name: String,
    kind: TestKind,
    from: Vec<String>,
    to: Option<Vec<String>>,
    every: Option<String>,
    slip: Option<String>,
    #[serde(default)]
    args: String,
}

/// Whether `s` is a valid host, group or test name: 1-32 of a-z 0-9 - _.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Why `name` cannot name a new `what` beside those `taken`, if it cannot.
fn new_name<'a>(
    what: &str,
    name: &str,
    mut taken: impl Iterator<Item = &'a str>,
) -> Option<String> {
    if !valid_name(name) {
        return Some(format!("{name:?}: 1 to 32 of a-z 0-9 - _"));
    }
    taken
        .any(|t| t == name)
        .then(|| format!("{name:?}: a second {what} of that name"))
}

/// A refusal of `field`, placed in `text` of `file`.
fn refuse(text: &str, file: &str, field: String, message: String) -> FileError {
    FileError {
        file: file.to_owned(),
        line: line_of_field(text, &field),
        column: None,
        field: Some(field),
        message,
    }
}

fn duration(text: &str, file: &str, field: String, s: &str) -> Result<Nanos, FileError> {
    parse_duration(s, TimeUnit::Secs).map_err(|e| refuse(text, file, field, format!("{s:?}: {e}")))
}

impl Mesh {
    /// Reads and checks a mesh file (`file` names it in errors).
    pub fn from_toml(text: &str, file: &str) -> Result<Self, FileError> {
        let raw: RawMesh = toml::from_str(text)
            .map_err(|e| FileError::from_toml(&e, text, file, field_at_line))?;
        let err = |field: String, message: String| refuse(text, file, field, message);
        if raw.host.len() < 2 || raw.host.len() > MAX_HOSTS {
            // The place of the lone host, if there is one.
            let field = if raw.host.len() == 1 {
                "host[0]"
            } else {
                "host"
            };
            return Err(err(
                field.into(),
                format!("a mesh needs 2 to {MAX_HOSTS} [[host]] tables"),
            ));
        }
        if raw.test.is_empty() || raw.test.len() > MAX_TESTS {
            return Err(err(
                "test".into(),
                format!("a mesh needs 1 to {MAX_TESTS} [[test]] tables"),
            ));
        }
        let mut hosts: Vec<Host> = Vec::with_capacity(raw.host.len());
        for (i, h) in raw.host.into_iter().enumerate() {
            let at = |f: &str| format!("host[{i}].{f}");
            if let Some(why) = new_name("host", &h.name, hosts.iter().map(|o| o.name.as_str())) {
                return Err(err(at("name"), why));
            }
            if h.address.is_empty()
                || h.address.len() > 255
                || h.address.contains(char::is_whitespace)
            {
                return Err(err(
                    at("address"),
                    format!("{:?}: give a host name or address", h.address),
                ));
            }
            if h.port == Some(0) {
                return Err(err(at("port"), "port 0".into()));
            }
            for g in &h.groups {
                if !valid_name(g) {
                    return Err(err(at("groups"), format!("{g:?}: 1 to 32 of a-z 0-9 - _")));
                }
            }
            let lat_lon = match (h.lat, h.lon) {
                (None, None) => None,
                (Some(lat), Some(lon))
                    if (-90.0..=90.0).contains(&lat) && (-180.0..=180.0).contains(&lon) =>
                {
                    Some((lat, lon))
                }
                (Some(_), Some(_)) => {
                    return Err(err(
                        at("lat"),
                        "lat within -90..=90 and lon within -180..=180 degrees".into(),
                    ));
                }
                (Some(_), None) | (None, Some(_)) => {
                    return Err(err(at("lat"), "give both lat and lon, or neither".into()));
                }
            };
            hosts.push(Host {
                name: h.name,
                address: h.address,
                port: h.port.unwrap_or(DEFAULT_PORT),
                groups: h.groups,
                lat_lon,
            });
        }
        let groups: BTreeSet<&str> = hosts
            .iter()
            .flat_map(|h| h.groups.iter().map(String::as_str))
            .collect();
        if let Some(clash) = hosts.iter().position(|h| groups.contains(h.name.as_str())) {
            return Err(err(
                format!("host[{clash}].name"),
                format!("{:?} is also a group's name", hosts[clash].name),
            ));
        }
        let mut tests: Vec<TestSpec> = Vec::with_capacity(raw.test.len());
        for (i, t) in raw.test.into_iter().enumerate() {
            let at = |f: &str| format!("test[{i}].{f}");
            if let Some(why) = new_name("test", &t.name, tests.iter().map(|o| o.name.as_str())) {
                return Err(err(at("name"), why));
            }
            let members = |field: &str, names: &[String]| -> Result<BTreeSet<usize>, FileError> {
                let mut out = BTreeSet::new();
                if names.is_empty() {
                    return Err(err(at(field), "name at least one host or group".into()));
                }
                for n in names {
                    let found: Vec<usize> = hosts
                        .iter()
                        .enumerate()
                        .filter(|(_, h)| h.name == *n || h.groups.contains(n))
                        .map(|(k, _)| k)
                        .collect();
                    if found.is_empty() {
                        return Err(err(
                            at(field),
                            format!("{n:?}: no host or group of that name"),
                        ));
                    }
                    out.extend(found);
                }
                Ok(out)
            };
            let from = members("from", &t.from)?;
            let to = match &t.to {
                Some(to) => members("to", to)?,
                None => from.clone(),
            };
            let pairs: Vec<(usize, usize)> = from
                .iter()
                .flat_map(|&a| to.iter().map(move |&b| (a, b)))
                .filter(|(a, b)| a != b)
                .collect();
            if pairs.is_empty() {
                return Err(err(
                    at("to"),
                    "no pair of two different hosts: a host does not test to itself".into(),
                ));
            }
            if pairs.len() > MAX_PAIRS {
                return Err(err(
                    at("from"),
                    format!("{} pairs: at most {MAX_PAIRS} per test", pairs.len()),
                ));
            }
            let every = match &t.every {
                Some(s) => duration(text, file, at("every"), s)?,
                None => t.kind.default_every(),
            };
            let least = if t.kind == TestKind::Throughput {
                MIN_THROUGHPUT_EVERY
            } else {
                MIN_EVERY
            };
            if every < least {
                return Err(err(
                    at("every"),
                    format!(
                        "at least {} s for a {:?} test",
                        least.0 / 1_000_000_000,
                        t.kind
                    )
                    .to_lowercase(),
                ));
            }
            let slip = match (&t.slip, t.kind) {
                (Some(_), TestKind::Latency) => {
                    return Err(err(
                        at("slip"),
                        "a latency test runs continuously: it has no slip".into(),
                    ));
                }
                (Some(s), _) => duration(text, file, at("slip"), s)?,
                (None, TestKind::Latency) => Nanos(0),
                (None, _) => Nanos(every.0 / 4),
            };
            if slip >= every {
                return Err(err(at("slip"), "must be shorter than every".into()));
            }
            if !t.args.trim().is_empty() && t.kind != TestKind::Throughput {
                return Err(err(
                    at("args"),
                    "only a throughput test takes `longhaul test` flags".into(),
                ));
            }
            tests.push(TestSpec {
                name: t.name,
                kind: t.kind,
                pairs,
                every,
                slip,
                args: t.args.split_whitespace().map(str::to_string).collect(),
            });
        }
        let total: usize = tests.iter().map(|t| t.pairs.len()).sum();
        if total > MAX_TOTAL_PAIRS {
            return Err(err(
                "test".into(),
                format!("{total} pairs in all: at most {MAX_TOTAL_PAIRS}"),
            ));
        }
        if raw.alert.len() > MAX_ALERTS {
            return Err(err(
                "alert".into(),
                format!("at most {MAX_ALERTS} [[alert]] tables"),
            ));
        }
        let mut alerts: Vec<AlertRule> = Vec::with_capacity(raw.alert.len());
        for (i, a) in raw.alert.into_iter().enumerate() {
            let at = |f: &str| format!("alert[{i}].{f}");
            if let Some(why) = new_name("alert", &a.name, alerts.iter().map(|o| o.name.as_str())) {
                return Err(err(at("name"), why));
            }
            let value = match (a.when.takes_value(), a.value) {
                (true, Some(v)) if v.is_finite() && v > 0.0 && v <= 10_000.0 => v,
                (true, Some(v)) => {
                    return Err(err(at("value"), format!("{v}: a percentage above 0")));
                }
                (true, None) => {
                    return Err(err(
                        at("when"),
                        format!("{} needs a value (%)", a.when.as_str()),
                    ));
                }
                (false, Some(_)) => {
                    return Err(err(
                        at("value"),
                        format!("{} takes no value", a.when.as_str()),
                    ));
                }
                (false, None) => 0.0,
            };
            // The kinds whose results carry what the rule reads.
            let reads = |k: TestKind| match a.when {
                When::ThroughputBelow => k == TestKind::Throughput,
                When::LossAbove => k == TestKind::Latency,
                When::RttAbove | When::Down => true,
                When::PathChanged => k != TestKind::Latency,
            };
            let tests_of: Vec<usize> = match &a.tests {
                None => (0..tests.len()).filter(|&k| reads(tests[k].kind)).collect(),
                Some(names) => {
                    let mut v = Vec::new();
                    for n in names {
                        let Some(k) = tests.iter().position(|t| &t.name == n) else {
                            return Err(err(at("tests"), format!("{n:?}: no test of that name")));
                        };
                        if !reads(tests[k].kind) {
                            return Err(err(
                                at("tests"),
                                format!(
                                    "{n:?} is a {} test: its results have nothing {} reads",
                                    tests[k].kind.as_str(),
                                    a.when.as_str()
                                ),
                            ));
                        }
                        v.push(k);
                    }
                    v
                }
            };
            if tests_of.is_empty() {
                return Err(err(
                    at("when"),
                    format!("no test of this mesh has results {} reads", a.when.as_str()),
                ));
            }
            let after = a
                .after
                .unwrap_or(if a.when == When::PathChanged { 1 } else { 3 });
            let clear_after = a.clear_after.unwrap_or(after);
            for (f, n) in [("after", after), ("clear_after", clear_after)] {
                if !(1..=1000).contains(&n) {
                    return Err(err(at(f), format!("{n}: 1 to 1000 results")));
                }
            }
            alerts.push(AlertRule {
                name: a.name,
                when: a.when,
                value,
                tests: tests_of,
                after,
                clear_after,
            });
        }
        if let Some(w) = &raw.webhook
            && (!w.starts_with("http://") || w.len() > 2048 || w.contains(char::is_whitespace))
        {
            return Err(err("webhook".into(), format!("{w:?}: an http:// URL")));
        }
        let stem = std::path::Path::new(file)
            .file_stem()
            .map_or_else(|| "mesh".into(), |s| s.to_string_lossy().into_owned());
        Ok(Mesh {
            name: raw.name.unwrap_or(stem),
            hosts,
            tests,
            alerts,
            webhook: raw.webhook,
        })
    }

    /// How many pairs run each kind of test.
    pub fn pairs_by_kind(&self) -> BTreeMap<TestKind, usize> {
        let mut out = BTreeMap::new();
        for t in &self.tests {
            *out.entry(t.kind).or_default() += t.pairs.len();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "lhc"
[[host]]
name = "cern"
address = "10.201.0.1"
groups = ["t1"]
[[host]]
name = "fnal"
address = "10.201.0.2"
port = 7070
groups = ["t1"]
[[host]]
name = "uf"
address = "10.201.0.3"
groups = ["t2"]

[[test]]
name = "bw"
kind = "throughput"
from = ["t1"]
to = ["t1", "uf"]
every = "4h"
args = "-t 20 -O 3"

[[test]]
name = "trace"
kind = "traceroute"
from = ["cern", "uf"]

[[test]]
name = "owamp"
kind = "latency"
from = ["t1", "t2"]

[[alert]]
name = "slow"
when = "throughput_below"
value = 50

[[alert]]
name = "lossy"
when = "loss_above"
value = 1
tests = ["owamp"]
after = 2
"#;

    #[test]
    fn a_mesh_expands_groups_into_pairs_with_defaults() {
        let m = Mesh::from_toml(GOOD, "lhc.toml").unwrap();
        assert_eq!(m.name, "lhc");
        assert_eq!(m.hosts[1].port, 7070);
        assert_eq!(m.hosts[0].port, DEFAULT_PORT);
        let bw = &m.tests[0];
        // t1 = {cern, fnal}; to {cern, fnal, uf}; never a host to itself.
        assert_eq!(bw.pairs, vec![(0, 1), (0, 2), (1, 0), (1, 2)]);
        assert_eq!(bw.every, Nanos(4 * 3600 * 1_000_000_000));
        assert_eq!(bw.slip, Nanos(3600 * 1_000_000_000));
        assert_eq!(bw.args, ["-t", "20", "-O", "3"]);
        let trace = &m.tests[1];
        assert_eq!(trace.pairs, vec![(0, 2), (2, 0)]);
        assert_eq!(trace.every, Nanos(600 * 1_000_000_000));
        let owamp = &m.tests[2];
        assert_eq!(owamp.pairs.len(), 6);
        assert_eq!(owamp.slip, Nanos(0));
        assert_eq!(m.pairs_by_kind()[&TestKind::Latency], 6);
        // Alerts: a rule without tests applies to every test whose results it reads.
        assert_eq!(m.alerts[0].tests, vec![0]);
        assert_eq!((m.alerts[0].after, m.alerts[0].clear_after), (3, 3));
        assert_eq!(m.alerts[1].tests, vec![2]);
        assert_eq!((m.alerts[1].after, m.alerts[1].clear_after), (2, 2));
        assert_eq!(m.webhook, None);
        // Without a name, the file's.
        let unnamed = GOOD.replacen("name = \"lhc\"\n", "", 1);
        assert_eq!(Mesh::from_toml(&unnamed, "dir/x.toml").unwrap().name, "x");
    }

    /// The error for `GOOD` with `from` replaced by `to`, as displayed.
    fn refused(from: &str, to: &str) -> String {
        assert!(GOOD.contains(from), "{from}");
        Mesh::from_toml(&GOOD.replacen(from, to, 1), "lhc.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_meshes_are_refused_naming_file_line_and_field() {
        for (from, to, want) in [
            (
                r#"from = ["t1"]"#,
                r#"from = ["t3"]"#,
                r#"lhc.toml:20: test[0].from: "t3": no host or group of that name"#,
            ),
            (
                r#"name = "fnal""#,
                r#"name = "cern""#,
                r#"lhc.toml:8: host[1].name: "cern": a second host of that name"#,
            ),
            (
                r#"name = "uf""#,
                r#"name = "UF!""#,
                r#"lhc.toml:13: host[2].name: "UF!": 1 to 32 of a-z 0-9 - _"#,
            ),
            (
                "port = 7070",
                "port = 0",
                "lhc.toml:10: host[1].port: port 0",
            ),
            (
                r#"every = "4h""#,
                r#"every = "30s""#,
                "lhc.toml:22: test[0].every: at least 60 s for a throughput test",
            ),
            (
                r#"every = "4h""#,
                r#"every = "soon""#,
                r#"lhc.toml:22: test[0].every: "soon""#,
            ),
            (
                r#"kind = "traceroute""#,
                r#"kind = "ping""#,
                "lhc.toml:27:8: test[1].kind: unknown variant `ping`",
            ),
            (
                r#"from = ["cern", "uf"]"#,
                "from = [\"cern\"]\nto = [\"cern\"]",
                "lhc.toml:29: test[1].to: no pair of two different hosts",
            ),
            (
                r#"from = ["cern", "uf"]"#,
                "from = [\"cern\", \"uf\"]\nargs = \"-P 4\"",
                "lhc.toml:29: test[1].args: only a throughput test takes",
            ),
            (
                r#"from = ["t1", "t2"]"#,
                "from = [\"t1\", \"t2\"]\nslip = \"1s\"",
                "lhc.toml:34: test[2].slip: a latency test runs continuously",
            ),
            (
                r#"args = "-t 20 -O 3""#,
                "args = \"-t 20\"\nslip = \"5h\"",
                "lhc.toml:24: test[0].slip: must be shorter than every",
            ),
            (
                r#"groups = ["t2"]"#,
                r#"groups = ["cern"]"#,
                r#"lhc.toml:4: host[0].name: "cern" is also a group's name"#,
            ),
            (
                "port = 7070",
                "port = 7070\ncolour = \"red\"",
                "lhc.toml:11:1: host[1].colour: unknown field `colour`",
            ),
            (
                "value = 50",
                "value = -5",
                "lhc.toml:38: alert[0].value: -5: a percentage above 0",
            ),
            (
                r#"tests = ["owamp"]"#,
                r#"tests = ["bw"]"#,
                r#"lhc.toml:44: alert[1].tests: "bw" is a throughput test: its results have nothing loss_above reads"#,
            ),
            (
                r#"when = "throughput_below""#,
                r#"when = "slower""#,
                "lhc.toml:37:8: alert[0].when: unknown variant `slower`",
            ),
            (
                "after = 2",
                "after = 0",
                "lhc.toml:45: alert[1].after: 0: 1 to 1000 results",
            ),
            (
                "name = \"lhc\"",
                "name = \"lhc\"\nwebhook = \"ftp://x\"",
                r#"lhc.toml:3: webhook: "ftp://x": an http:// URL"#,
            ),
        ] {
            let got = refused(from, to);
            assert!(got.starts_with(want), "{to}:\n got {got}\nwant {want}…");
        }
        let one = "[[host]]\nname = \"a\"\naddress = \"x\"\n[[test]]\nname = \"t\"\nkind = \"latency\"\nfrom = [\"a\"]\n";
        let e = Mesh::from_toml(one, "m.toml").unwrap_err().to_string();
        assert!(e.starts_with("m.toml:1: host[0]: a mesh needs 2 to"), "{e}");
    }
}
