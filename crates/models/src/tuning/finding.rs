//! The outcome of one host check: its [`Status`], what was seen and wanted, why it matters and the exact
//! command that closes the gap.

use std::fmt;

use longhaul_units::fmt_size;
use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Good for the target.
    Ok,
    /// Context, or an optional improvement; nothing blocks the target.
    Info,
    /// The target is reachable, but a recommended setting is off; it may cost
    /// throughput or stability.
    Warn,
    /// The host cannot reach the target as configured.
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        })
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What was checked: a sysctl name, or "eth0 qdisc".
    pub check: String,
    /// How it came out.
    pub status: Status,
    /// What the host has.
    pub observed: String,
    /// What the target needs.
    pub wanted: String,
    /// Shell command(s) that close the gap, one per line; run as root.
    pub fix: Option<String>,
    /// Why it matters, in one or two sentences.
    pub why: String,
}

impl Finding {
    pub(crate) fn new(check: impl Into<String>, status: Status) -> Finding {
        Finding {
            check: check.into(),
            status,
            observed: String::new(),
            wanted: String::new(),
            fix: None,
            why: String::new(),
        }
    }

    pub(crate) fn observed(mut self, s: impl Into<String>) -> Finding {
        self.observed = s.into();
        self
    }

    pub(crate) fn wanted(mut self, s: impl Into<String>) -> Finding {
        self.wanted = s.into();
        self
    }

    pub(crate) fn why(mut self, s: impl Into<String>) -> Finding {
        self.why = s.into();
        self
    }

    pub(crate) fn fix(mut self, s: impl Into<String>) -> Finding {
        self.fix = Some(s.into());
        self
    }
}

/// Whether any finding failed.
pub fn any_fail(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

/// How many findings came out with `status`.
pub fn count(findings: &[Finding], status: Status) -> usize {
    findings.iter().filter(|f| f.status == status).count()
}

/// "536870912 (512 MiB)".
pub(crate) fn bytes(n: u64) -> String {
    format!("{n} ({})", fmt_size(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_orders_by_severity() {
        assert!(
            Status::Ok < Status::Info && Status::Info < Status::Warn && Status::Warn < Status::Fail
        );
    }
}
