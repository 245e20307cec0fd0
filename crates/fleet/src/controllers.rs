//! The controllers a server accepts (`longhaul server --controllers FILE`), and what each may ask.
//!
//! ```toml
//! [[controller]]
//! name = "ops"                       # how logs and refusals name it: 1-32 of a-z 0-9 - _
//! key = "/etc/longhaul/ops.key"      # its key file (as `longhaul keygen` writes it; mode 0600)
//! max_duration = "5min"              # longest test, omitted seconds included [default 300 s]
//! max_streams = 16                   # most streams per direction (-P) [default 16]
//! max_jobs = 1                       # jobs of this controller at once [default 1]
//! max_rate = "10G"                   # optional: every test paced (--pace) at most this
//! max_bytes = "100G"                 # optional: bytes one test may move per direction
//! ```
//!
//! A server knows each controller by its key (the job hello names it by [`crate::msg::key_id`]);
//! two controllers may not share a key. A job beyond a limit is refused with the limit and the value
//! asked ([`Limits::check_test`]), before the server connects anywhere.

use std::net::IpAddr;
use std::path::PathBuf;

use longhaul_proto::{EndCondition, TestParams};
use longhaul_units::{Nanos, fmt_duration, fmt_rate, fmt_size};
use serde::Deserialize;

/// What a controller may ask of this server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest test (omitted seconds included), ns.
    pub max_duration: Nanos,
    /// Most streams per direction.
    pub max_streams: u32,
    /// Jobs of this controller at once.
    pub max_jobs: u32,
    /// Highest pacing rate, bit/s: a test must be paced at most this.
    pub max_rate_bps: Option<u64>,
    /// Most bytes one test may move per direction.
    pub max_bytes: Option<u64>,
    /// The only targets allowed, if any list is given ([`Limits::check_target`]).
    pub targets: Option<Vec<Target>>,
}

/// How an allowed target is reached ([`Limits::check_target`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// By the name the controller wrote (a listed name, or no target list).
    Name,
    /// At this address, the one checked.
    Address(IpAddr),
}

/// An allowed target: a network (every address a name resolves to must lie in one), or a host
/// name as the controller writes it (case-insensitive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Addresses within `addr/prefix`.
    Net {
        /// The network's address.
        addr: IpAddr,
        /// Its prefix length.
        prefix: u8,
    },
    /// This name.
    Name(String),
}

impl Target {
    /// `10.0.0.0/8`, `fd00::/8`, an address alone (a /32 or /128) or a host name.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        match (addr.parse::<IpAddr>(), prefix) {
            (Ok(addr), prefix) => {
                let max = if addr.is_ipv4() { 32 } else { 128 };
                let prefix =
                    match prefix {
                        None => max,
                        Some(p) => p.parse::<u8>().ok().filter(|&p| p <= max).ok_or_else(|| {
                            format!("{s:?}: the prefix length must be 0 to {max}")
                        })?,
                    };
                Ok(Target::Net { addr, prefix })
            }
            (Err(_), None)
                if !s.is_empty()
                    && s.len() <= 253
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.') =>
            {
                Ok(Target::Name(s.to_ascii_lowercase()))
            }
            _ => Err(format!(
                "{s:?}: give a network (10.0.0.0/8, fd00::/8), an address or a host name"
            )),
        }
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let Target::Net { addr, prefix } = *self else {
            return false;
        };
        let bits = |a: IpAddr| match a {
            IpAddr::V4(v) => (u128::from(u32::from(v)) << 96, 32u32),
            IpAddr::V6(v) => (u128::from(v), 128u32),
        };
        let ((net, len), (host, host_len)) = (bits(addr), bits(ip.to_canonical()));
        if len != host_len {
            return false;
        }
        let prefix = u32::from(prefix);
        let mask = if prefix == 0 {
            0
        } else {
            u128::MAX << (128 - prefix)
        };
        net & mask == host & mask
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_duration: Nanos::from_secs(300),
            max_streams: 16,
            max_jobs: 1,
            max_rate_bps: None,
            max_bytes: None,
            targets: None,
        }
    }
}

/// One accepted controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSpec {
    /// Its name.
    pub name: String,
    /// Its key file (read by the server at start).
    pub key_file: PathBuf,
    /// Its limits.
    pub limits: Limits,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    controller: Vec<RawController>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawController {
    name: String,
    key: PathBuf,
    max_duration: Option<String>,
    max_streams: Option<u32>,
    max_jobs: Option<u32>,
    max_rate: Option<String>,
    max_bytes: Option<String>,
    targets: Option<Vec<String>>,
}

/// Reads a controllers file; errors name the file, the controller and the field.
pub fn parse_controllers(text: &str, file: &str) -> Result<Vec<ControllerSpec>, String> {
    let raw: RawFile = toml::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    if raw.controller.is_empty() {
        return Err(format!("{file}: no [[controller]] table"));
    }
    let mut out: Vec<ControllerSpec> = Vec::with_capacity(raw.controller.len());
    for (i, c) in raw.controller.into_iter().enumerate() {
        let at = |field: &str, why: String| format!("{file}: controller[{i}].{field}: {why}");
        if c.name.is_empty()
            || c.name.len() > 32
            || !c
                .name
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_')
        {
            return Err(at(
                "name",
                format!("{:?}: use 1 to 32 of a-z, 0-9, '-' and '_'", c.name),
            ));
        }
        if out.iter().any(|o| o.name == c.name) {
            return Err(at("name", format!("duplicate name {:?}", c.name)));
        }
        if c.key.as_os_str().is_empty() {
            return Err(at("key", "give the controller's key file".into()));
        }
        let d = Limits::default();
        let positive = |field: &str, v: Option<u32>, default: u32| match v {
            Some(0) => Err(at(field, "must be at least 1".into())),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        let limits = Limits {
            max_duration: match &c.max_duration {
                None => d.max_duration,
                Some(s) => longhaul_units::parse_duration(s, longhaul_units::TimeUnit::Secs)
                    .ok()
                    .filter(|n| n.0 > 0)
                    .ok_or_else(|| {
                        at(
                            "max_duration",
                            format!("{s:?}: give a duration such as \"90s\" or \"5min\""),
                        )
                    })?,
            },
            max_streams: positive("max_streams", c.max_streams, d.max_streams)?,
            max_jobs: positive("max_jobs", c.max_jobs, d.max_jobs)?,
            max_rate_bps: c
                .max_rate
                .as_deref()
                .map(|s| {
                    longhaul_units::parse_rate(s)
                        .ok()
                        .filter(|&r| r > 0)
                        .ok_or_else(|| {
                            at("max_rate", format!("{s:?}: give a rate such as \"10G\""))
                        })
                })
                .transpose()?,
            max_bytes: c
                .max_bytes
                .as_deref()
                .map(|s| {
                    longhaul_units::parse_size(s)
                        .ok()
                        .filter(|&b| b > 0)
                        .ok_or_else(|| {
                            at("max_bytes", format!("{s:?}: give a size such as \"100G\""))
                        })
                })
                .transpose()?,
            targets: c
                .targets
                .map(|list| {
                    list.iter()
                        .map(|t| Target::parse(t).map_err(|e| at("targets", e)))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?,
        };
        out.push(ControllerSpec {
            name: c.name,
            key_file: c.key,
            limits,
        });
    }
    Ok(out)
}

impl Limits {
    /// Whether a test may go to `to` (as the controller wrote it), which resolved to `addrs`, and
    /// how to reach it: with a target list, `to` must be a listed name (reach it by that name), or
    /// every address must lie in a listed network (reach the first, as checked: never resolve
    /// again). Without a list, by its name.
    pub fn check_target(&self, to: &str, addrs: &[IpAddr]) -> Result<Reach, String> {
        let Some(list) = &self.targets else {
            return Ok(Reach::Name);
        };
        if list
            .iter()
            .any(|t| matches!(t, Target::Name(n) if n.eq_ignore_ascii_case(to)))
        {
            return Ok(Reach::Name);
        }
        match addrs.first() {
            Some(&first) if addrs.iter().all(|a| list.iter().any(|t| t.contains(*a))) => {
                Ok(Reach::Address(first))
            }
            _ => Err(format!("{to} is not among the targets allowed (targets)")),
        }
    }

    /// Whether a test with `p` stays within these limits; otherwise the reason, naming the limit,
    /// the value asked and the flag that would fit.
    pub fn check_test(&self, p: &TestParams) -> Result<(), String> {
        if p.streams > self.max_streams {
            return Err(format!(
                "{} streams asked, at most {} allowed (-P)",
                p.streams, self.max_streams
            ));
        }
        let seconds = match p.end {
            EndCondition::Time { ns } => Some(Nanos(ns.saturating_add(p.omit_ns))),
            EndCondition::Bytes { .. } => None,
        };
        if let Some(t) = seconds
            && t > self.max_duration
        {
            return Err(format!(
                "a test of {} asked (-t and -O together), at most {} allowed",
                fmt_duration(t),
                fmt_duration(self.max_duration)
            ));
        }
        if let Some(max) = self.max_rate_bps {
            match p.pace_total_bps {
                None => {
                    return Err(format!(
                        "tests must be paced at most {} (--pace {})",
                        fmt_rate(max),
                        max
                    ));
                }
                Some(r) if r > max => {
                    return Err(format!(
                        "--pace {} asked, at most {} allowed",
                        fmt_rate(r),
                        fmt_rate(max)
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(max) = self.max_bytes {
            let bytes = match (p.end, p.pace_total_bps, seconds) {
                (EndCondition::Bytes { bytes }, _, _) => bytes,
                // A paced time test moves at most its rate × its duration (per direction).
                (EndCondition::Time { .. }, Some(rate), Some(t)) => {
                    ((rate as u128 * t.0 as u128) / 8_000_000_000).min(u64::MAX as u128) as u64
                }
                (EndCondition::Time { .. }, _, _) => {
                    return Err(format!(
                        "tests may move at most {} per direction: give -n, or --pace with -t",
                        fmt_size(max)
                    ));
                }
            };
            if bytes > max {
                return Err(format!(
                    "{} per direction asked, at most {} allowed (-n, or --pace × -t)",
                    fmt_size(bytes),
                    fmt_size(max)
                ));
            }
        }
        Ok(())
    }

    /// Whether a copy with this many streams, this target rate (bit/s, 0: none) and this many
    /// bytes in all stays within these limits; otherwise the reason. A copy's duration is not known
    /// in advance: the server ends it at `max_duration` (a rerun resumes).
    pub fn check_copy(&self, streams: u32, rate_bps: u64, bytes: u64) -> Result<(), String> {
        if streams > self.max_streams {
            return Err(format!(
                "{streams} streams asked, at most {} allowed (-P)",
                self.max_streams
            ));
        }
        if let Some(max) = self.max_rate_bps
            && (rate_bps == 0 || rate_bps > max)
        {
            return Err(format!(
                "a copy at {} asked, at most {} allowed (--rate {max})",
                if rate_bps == 0 {
                    "any rate".to_string()
                } else {
                    fmt_rate(rate_bps)
                },
                fmt_rate(max)
            ));
        }
        if let Some(max) = self.max_bytes
            && bytes > max
        {
            return Err(format!(
                "a copy of {} asked, at most {} allowed (max_bytes)",
                fmt_size(bytes),
                fmt_size(max)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[controller]]
name = "ops"
key = "/etc/longhaul/ops.key"

[[controller]]
name = "lab-2"
key = "lab2.key"
max_duration = "30s"
max_streams = 4
max_jobs = 2
max_rate = "1G"
max_bytes = "10G"
targets = ["10.201.0.0/16", "fd00:4c48::/32", "DTN2.example.org", "192.0.2.7"]
"#;

    #[test]
    fn a_controllers_file_reads_with_defaults_and_limits() {
        let c = parse_controllers(FILE, "c.toml").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].name, "ops");
        assert_eq!(c[0].limits, Limits::default());
        let l = &c[1].limits;
        assert_eq!(l.max_duration, Nanos::from_secs(30));
        assert_eq!((l.max_streams, l.max_jobs), (4, 2));
        assert_eq!(l.max_rate_bps, Some(1_000_000_000));
        assert_eq!(l.max_bytes, Some(10 << 30));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(l.check_target("10.201.0.5", &[ip("10.201.0.5")]).is_ok());
        assert_eq!(
            l.check_target("w", &[ip("10.201.0.7"), ip("10.201.0.8")]),
            Ok(Reach::Address(ip("10.201.0.7")))
        );
        assert_eq!(l.check_target("dtn2.example.org", &[]), Ok(Reach::Name));
        assert!(l.check_target("x", &[ip("::ffff:10.201.3.4")]).is_ok());
        assert!(
            l.check_target("y", &[ip("fd00:4c48::9"), ip("10.201.0.1")])
                .is_ok()
        );
        assert!(
            l.check_target("dtn2.EXAMPLE.org", &[ip("203.0.113.9")])
                .is_ok()
        );
        assert!(l.check_target("192.0.2.7", &[ip("192.0.2.7")]).is_ok());
        // A name with one address outside, an address next door, nothing resolved.
        assert!(
            l.check_target("z", &[ip("10.201.0.1"), ip("10.202.0.1")])
                .is_err()
        );
        assert!(l.check_target("192.0.2.8", &[ip("192.0.2.8")]).is_err());
        assert!(l.check_target("z", &[]).is_err());
        assert!(
            c[0].limits
                .check_target("anything", &[ip("203.0.113.1")])
                .is_ok()
        );
        assert_eq!(
            Target::parse("0.0.0.0/0"),
            Ok(Target::Net {
                addr: ip("0.0.0.0"),
                prefix: 0
            })
        );
    }

    #[test]
    fn bad_files_are_refused_naming_the_field() {
        let bad = |text: &str| parse_controllers(text, "c.toml").unwrap_err();
        assert!(bad("").contains("no [[controller]]"));
        assert!(
            bad("[[controller]]\nname = \"Ops\"\nkey = \"k\"\n").contains("controller[0].name")
        );
        assert!(
            bad("[[controller]]\nname = \"a\"\nkey = \"k\"\n[[controller]]\nname = \"a\"\nkey = \"j\"\n")
                .contains("controller[1].name: duplicate")
        );
        assert!(
            bad("[[controller]]\nname = \"a\"\nkey = \"k\"\nmax_rate = \"fast\"\n")
                .contains("controller[0].max_rate")
        );
        assert!(
            bad("[[controller]]\nname = \"a\"\nkey = \"k\"\nmax_jobs = 0\n")
                .contains("controller[0].max_jobs: must be at least 1")
        );
        assert!(bad("[[controller]]\nname = \"a\"\nkey = \"k\"\ncolour = 1\n").contains("colour"));
        assert!(
            bad("[[controller]]\nname = \"a\"\nkey = \"k\"\ntargets = [\"10.0.0.0/33\"]\n")
                .contains("controller[0].targets")
        );
        assert!(
            bad("[[controller]]\nname = \"a\"\nkey = \"k\"\ntargets = [\"a b\"]\n")
                .contains("controller[0].targets")
        );
    }

    #[test]
    fn copies_are_checked_against_streams_rate_and_bytes() {
        let spec = &parse_controllers(FILE, "c.toml").unwrap()[1];
        let l = &spec.limits;
        assert!(l.check_copy(4, 1_000_000_000, 1 << 20).is_ok());
        assert!(
            l.check_copy(5, 1_000_000_000, 0)
                .unwrap_err()
                .contains("5 streams")
        );
        assert!(l.check_copy(4, 0, 0).unwrap_err().contains("--rate"));
        assert!(
            l.check_copy(4, 2_000_000_000, 0)
                .unwrap_err()
                .contains("at most 1")
        );
        assert!(l.check_copy(1, 1_000_000, 10 << 30).is_ok());
        let e = l.check_copy(1, 1_000_000, (10 << 30) + 1).unwrap_err();
        assert!(e.contains("max_bytes"), "{e}");
        let open = &parse_controllers(FILE, "c.toml").unwrap()[0].limits;
        assert!(open.check_copy(16, 0, u64::MAX).is_ok());
    }
}
