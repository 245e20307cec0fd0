//! Hosts that register themselves (issue 20): what `longhaul agent` reports (a host's facts), what
//! the service answers, and the views of `/api/v1/hosts`. Pure: the facts are checked for size
//! here (they come from the network), and two reports' facts compare into the changes the service
//! records as events.
//!
//! An agent holds a per-host key (32 random bytes, in hex). The first report of an unknown host
//! registers it with that key, **pending** until an admin accepts it (its key's fingerprint is
//! shown on both sides, for the admin to compare); a report with another key for the same host is
//! refused. Accepted hosts heartbeat; one silent for the service's agent timeout is
//! **unreachable**, and **hung** when its console, if it has one, is silent too.

use serde::{Deserialize, Serialize};

/// The most interfaces, congestion controls, or characters of one text field, a report may carry.
pub const MAX_ITEMS: usize = 256;
/// The longest text field of a report, in bytes.
pub const MAX_TEXT: usize = 256;
/// The largest report body, in bytes.
pub const MAX_REPORT: usize = 256 * 1024;

/// One network interface, as `longhaul doctor` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nic {
    /// `eth0`.
    pub name: String,
    /// `up`, `down`, ...
    pub operstate: String,
    /// Bytes.
    pub mtu: Option<u32>,
    /// Mbit/s, when the driver reports it.
    pub speed_mbps: Option<u64>,
    /// The kernel driver (`ixgbe`, `veth`).
    pub driver: Option<String>,
    /// TCP segmentation offload.
    pub tso: Option<bool>,
    /// Generic segmentation offload.
    pub gso: Option<bool>,
    /// Generic receive offload.
    pub gro: Option<bool>,
}

/// A host's facts: what `doctor` gathers, and the agent's version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    /// `kernel.hostname`.
    pub hostname: Option<String>,
    /// `kernel.osrelease`.
    pub kernel: Option<String>,
    /// The first `model name` of `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// CPUs the agent may use.
    pub cpus: Option<u32>,
    /// `MemTotal`, bytes.
    pub memory_bytes: Option<u64>,
    /// `net.ipv4.tcp_available_congestion_control`.
    pub congestion_controls: Vec<String>,
    /// `net.ipv4.tcp_congestion_control`.
    pub default_congestion_control: Option<String>,
    /// `net.core.rmem_max`, bytes.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`, bytes.
    pub wmem_max: Option<u64>,
    /// The interfaces but loopback, by name.
    pub nics: Vec<Nic>,
    /// The agent's longhaul version.
    pub longhaul_version: String,
}

/// `POST /api/v1/agent/report`, with `Authorization: Bearer KEY`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentReport {
    /// The host's resource id (`cern/pc-1`).
    pub host: String,
    /// Its facts now.
    pub facts: HostFacts,
}

/// The answer to a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentReply {
    /// `pending` or `accepted`.
    pub state: String,
    /// Seconds until the next report is due.
    pub heartbeat_s: u64,
    /// The fingerprint of the key the service holds for the host.
    pub fingerprint: String,
}

/// One registered host, as `GET /api/v1/hosts` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentHostView {
    /// The host.
    pub host: String,
    /// `pending` or `accepted`.
    pub state: String,
    /// Its key's fingerprint.
    pub fingerprint: String,
    /// When it first reported (UTC, RFC 3339).
    pub registered: String,
    /// Its last report.
    pub last_seen: String,
    /// Whether its heartbeats arrive (an accepted host silent for the agent timeout is not).
    pub reachable: bool,
    /// Unreachable with its console silent too.
    pub hung: bool,
    /// Its facts, as last reported.
    pub facts: HostFacts,
}

/// `GET /api/v1/hosts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentHostList {
    /// The hosts, by id.
    #[serde(default)]
    pub host: Vec<AgentHostView>,
    /// The service's agent timeout, seconds.
    pub agent_timeout_s: u64,
}

/// One event of a host: `registered`, `accepted`, `forgotten`, `facts_changed`, `unreachable`,
/// `hung`, `reachable`; with the bookings it may explain (those covering the host then).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEventView {
    /// Order of writing.
    pub seq: u64,
    /// When (UTC, RFC 3339).
    pub at: String,
    /// The host.
    pub host: String,
    /// What happened.
    pub kind: String,
    /// The details (the facts that changed, how long it was silent, who accepted it).
    pub detail: String,
    /// The active bookings covering the host then, as `booking 12 (alice)`.
    #[serde(default)]
    pub bookings: Vec<String>,
}

/// `GET /api/v1/hosts/events`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEventLog {
    /// Newest first.
    #[serde(default)]
    pub event: Vec<HostEventView>,
}

/// A report that does not fit: too long a field, too many items.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FactsError(pub String);

fn text_ok(what: &str, s: &str) -> Result<(), FactsError> {
    if s.len() > MAX_TEXT {
        return Err(FactsError(format!(
            "{what} is {} bytes long; at most {MAX_TEXT}",
            s.len()
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(FactsError(format!("{what} holds control characters")));
    }
    Ok(())
}

impl HostFacts {
    /// Refuses facts no host has: a field over [`MAX_TEXT`] bytes or with control characters,
    /// over [`MAX_ITEMS`] interfaces or congestion controls, two interfaces of one name.
    pub fn check(&self) -> Result<(), FactsError> {
        let texts = [
            ("hostname", &self.hostname),
            ("kernel", &self.kernel),
            ("cpu_model", &self.cpu_model),
            (
                "default_congestion_control",
                &self.default_congestion_control,
            ),
        ];
        for (what, v) in texts {
            if let Some(v) = v {
                text_ok(what, v)?;
            }
        }
        text_ok("longhaul_version", &self.longhaul_version)?;
        if self.nics.len() > MAX_ITEMS || self.congestion_controls.len() > MAX_ITEMS {
            return Err(FactsError(format!(
                "{} interfaces and {} congestion controls; at most {MAX_ITEMS} of each",
                self.nics.len(),
                self.congestion_controls.len()
            )));
        }
        for cc in &self.congestion_controls {
            text_ok("congestion_controls", cc)?;
        }
        let mut names = std::collections::BTreeSet::new();
        for n in &self.nics {
            text_ok("nics.name", &n.name)?;
            text_ok("nics.operstate", &n.operstate)?;
            if let Some(d) = &n.driver {
                text_ok("nics.driver", d)?;
            }
            if !names.insert(n.name.as_str()) {
                return Err(FactsError(format!("interface {} listed twice", n.name)));
            }
        }
        Ok(())
    }
}

fn show<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "unknown".into(), ToString::to_string)
}

fn show_flag(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "unknown",
    }
}

/// What differs from `old` to `new`, one line each (`nic eth1: mtu 1500 → 9000`); empty when
/// nothing does.
pub fn changes(old: &HostFacts, new: &HostFacts) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |name: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{name}: {a} → {b}"));
        }
    };
    field("hostname", show(&old.hostname), show(&new.hostname));
    field("kernel", show(&old.kernel), show(&new.kernel));
    field("cpu_model", show(&old.cpu_model), show(&new.cpu_model));
    field("cpus", show(&old.cpus), show(&new.cpus));
    field(
        "memory_bytes",
        show(&old.memory_bytes),
        show(&new.memory_bytes),
    );
    field(
        "congestion_controls",
        old.congestion_controls.join(" "),
        new.congestion_controls.join(" "),
    );
    field(
        "default_congestion_control",
        show(&old.default_congestion_control),
        show(&new.default_congestion_control),
    );
    field("rmem_max", show(&old.rmem_max), show(&new.rmem_max));
    field("wmem_max", show(&old.wmem_max), show(&new.wmem_max));
    field(
        "longhaul_version",
        old.longhaul_version.clone(),
        new.longhaul_version.clone(),
    );
    for n in &new.nics {
        let Some(o) = old.nics.iter().find(|o| o.name == n.name) else {
            out.push(format!(
                "nic {} added ({}, mtu {}, {} Mbit/s)",
                n.name,
                n.operstate,
                show(&n.mtu),
                show(&n.speed_mbps)
            ));
            continue;
        };
        let mut nic = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("nic {}: {what} {a} → {b}", n.name));
            }
        };
        nic("operstate", o.operstate.clone(), n.operstate.clone());
        nic("mtu", show(&o.mtu), show(&n.mtu));
        nic("speed_mbps", show(&o.speed_mbps), show(&n.speed_mbps));
        nic("driver", show(&o.driver), show(&n.driver));
        nic("tso", show_flag(o.tso).into(), show_flag(n.tso).into());
        nic("gso", show_flag(o.gso).into(), show_flag(n.gso).into());
        nic("gro", show_flag(o.gro).into(), show_flag(n.gro).into());
    }
    for o in &old.nics {
        if !new.nics.iter().any(|n| n.name == o.name) {
            out.push(format!("nic {} removed", o.name));
        }
    }
    out
}

/// A key's fingerprint: the first 16 bytes of its BLAKE3 hash, as `xxxx:xxxx:…` (8 groups).
pub fn fingerprint(key: &str) -> String {
    let hash = blake3::hash(key.as_bytes());
    hash.as_bytes()[..16]
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// Whether `key` is one an agent makes: 64 lower-case hex digits (32 random bytes).
pub fn key_is_well_formed(key: &str) -> bool {
    key.len() == 64
        && key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nic(name: &str, mtu: u32) -> Nic {
        Nic {
            name: name.into(),
            operstate: "up".into(),
            mtu: Some(mtu),
            speed_mbps: Some(10_000),
            driver: Some("veth".into()),
            tso: Some(true),
            gso: Some(true),
            gro: Some(true),
        }
    }

    fn facts() -> HostFacts {
        HostFacts {
            hostname: Some("pc-1".into()),
            kernel: Some("6.12.0".into()),
            cpus: Some(2),
            congestion_controls: vec!["reno".into(), "cubic".into()],
            nics: vec![nic("eth0", 1500), nic("eth1", 1500)],
            longhaul_version: "0.1.0".into(),
            ..HostFacts::default()
        }
    }

    #[test]
    fn unchanged_facts_have_no_changes() {
        assert!(changes(&facts(), &facts()).is_empty());
    }

    #[test]
    fn each_change_is_one_line_naming_the_field_and_both_values() {
        let old = facts();
        let mut new = facts();
        new.kernel = Some("6.13.1".into());
        new.nics[1].mtu = Some(9000);
        new.nics[1].gro = Some(false);
        new.nics.remove(0);
        new.nics.push(nic("eth2", 9000));
        new.congestion_controls.push("bbr".into());
        assert_eq!(
            changes(&old, &new),
            [
                "kernel: 6.12.0 → 6.13.1",
                "congestion_controls: reno cubic → reno cubic bbr",
                "nic eth1: mtu 1500 → 9000",
                "nic eth1: gro on → off",
                "nic eth2 added (up, mtu 9000, 10000 Mbit/s)",
                "nic eth0 removed",
            ]
        );
    }

    #[test]
    fn hostile_facts_are_refused_by_field() {
        let mut f = facts();
        f.hostname = Some("x".repeat(MAX_TEXT + 1));
        assert!(f.check().unwrap_err().0.contains("hostname is 257 bytes"));
        let mut f = facts();
        f.nics[0].driver = Some("ixgbe\u{1b}[2J".into());
        assert!(f.check().unwrap_err().0.contains("control characters"));
        let mut f = facts();
        f.nics = (0..=MAX_ITEMS)
            .map(|i| nic(&format!("e{i}"), 1500))
            .collect();
        assert!(f.check().unwrap_err().0.contains("at most 256"));
        let mut f = facts();
        f.nics[1].name = "eth0".into();
        assert!(f.check().unwrap_err().0.contains("eth0 listed twice"));
        assert!(facts().check().is_ok());
    }

    #[test]
    fn keys_and_fingerprints() {
        let key = "0123456789abcdef".repeat(4);
        assert!(key_is_well_formed(&key));
        assert!(!key_is_well_formed(&key.to_uppercase()));
        assert!(!key_is_well_formed(&key[1..]));
        let fp = fingerprint(&key);
        assert_eq!(fp.len(), 8 * 4 + 7);
        assert_ne!(fp, fingerprint(&"f".repeat(64)));
    }
}
