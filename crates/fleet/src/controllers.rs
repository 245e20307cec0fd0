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
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_duration: Nanos::from_secs(300),
            max_streams: 16,
            max_jobs: 1,
            max_rate_bps: None,
            max_bytes: None,
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
    }
}
