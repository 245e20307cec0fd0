//! What `longhaul doctor` knows about a host, as plain data: the kernel's TCP and queueing tunables, the
//! network interfaces with their root qdiscs and offloads, and whether the process may force its
//! buffers. `longhaul_engine::doctor::gather` fills it from `/proc/sys`, `/sys/class/net`, `tc` and
//! `ethtool`; tests build it by hand.

use std::fmt;

use serde::Serialize;

/// The result of asking an external tool (`tc`, `ethtool`) about an
/// interface: what it said, or why there is no answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe<T> {
    /// The tool ran and its output was understood.
    Known(T),
    /// No answer, and why: "tc not installed", "ethtool -k eth0: exit 1: …".
    Unknown(String),
}

impl<T> Probe<T> {
    /// Reads a known value further (`f` may still find no answer in it); an unknown one keeps its
    /// reason.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Probe<U>) -> Probe<U> {
        match self {
            Probe::Known(v) => f(v),
            Probe::Unknown(why) => Probe::Unknown(why),
        }
    }
}

/// An interface's qdiscs as `tc qdisc show dev IF` lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Qdisc {
    /// The root qdisc's kind: "fq", "fq_codel", "pfifo_fast", "mq", "noqueue"…
    pub root: String,
    /// Kinds of the qdiscs below the root (for `mq`, one per transmit queue),
    /// without ingress and clsact.
    pub children: Vec<String>,
}

impl Qdisc {
    /// Whether packets leave through `fq`: the root is `fq`, or a multiqueue
    /// root (`mq`, `mqprio`, `multiq`) whose every queue has `fq`.
    pub fn is_fq(&self) -> bool {
        self.root == "fq"
            || (matches!(self.root.as_str(), "mq" | "mqprio" | "multiq")
                && !self.children.is_empty()
                && self.children.iter().all(|c| c == "fq"))
    }
}

impl fmt::Display for Qdisc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.root)?;
        let mut kinds: Vec<&str> = self.children.iter().map(String::as_str).collect();
        kinds.dedup();
        if !kinds.is_empty() {
            write!(f, " ({} × {})", self.children.len(), kinds.join("/"))?;
        }
        Ok(())
    }
}

/// One offload feature as `ethtool -k` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Feature {
    /// Whether it is on.
    pub on: bool,
    /// Whether the driver does not let it change (`[fixed]`).
    pub fixed: bool,
}

/// The segmentation offloads that matter at 10G and above.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Offloads {
    /// TCP segmentation offload (`tcp-segmentation-offload`).
    pub tso: Option<Feature>,
    /// Generic segmentation offload (`generic-segmentation-offload`).
    pub gso: Option<Feature>,
    /// Generic receive offload (`generic-receive-offload`).
    pub gro: Option<Feature>,
}

impl Offloads {
    /// (ethtool short name, feature) for each of TSO, GSO, GRO.
    pub(crate) fn each(&self) -> [(&'static str, Option<Feature>); 3] {
        [("tso", self.tso), ("gso", self.gso), ("gro", self.gro)]
    }
}

/// One network interface, from `/sys/class/net/IF` plus `tc` and `ethtool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    /// Interface name ("eth0").
    pub name: String,
    /// Whether it is a loopback device (`type` = `ARPHRD_LOOPBACK`).
    pub loopback: bool,
    /// `operstate`: "up", "down", "unknown"…
    pub operstate: String,
    /// `mtu`, bytes.
    pub mtu: Option<u32>,
    /// `speed` in Mbit/s; `None` when the driver does not report one (virtual
    /// NICs give -1 or an error).
    pub speed_mbps: Option<u64>,
    /// `tx_queue_len`, packets.
    pub tx_queue_len: Option<u64>,
    /// Root qdisc, from `tc qdisc show dev IF`.
    pub qdisc: Probe<Qdisc>,
    /// TSO/GSO/GRO, from `ethtool -k IF`.
    pub offloads: Probe<Offloads>,
}

impl Interface {
    /// Whether the checks on MTU, qdisc and offloads apply: up, not loopback.
    pub fn checked(&self) -> bool {
        !self.loopback && self.operstate == "up"
    }
}

/// What `longhaul doctor` knows about this host. Every field that could not be
/// read is `None` (or empty), and the reason is in `problems`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostSnapshot {
    /// `kernel.osrelease` ("6.18.44").
    pub kernel_release: Option<String>,
    /// `net.core.rmem_max`, bytes.
    pub rmem_max: Option<u64>,
    /// `net.core.wmem_max`, bytes.
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_rmem`: min, default, autotuning max, bytes.
    pub tcp_rmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_wmem`: min, default, autotuning max, bytes.
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.ipv4.tcp_mem`: min, pressure, max, pages (machine-wide).
    pub tcp_mem: Option<[u64; 3]>,
    /// Bytes per page (the unit of `tcp_mem`).
    pub page_size: Option<u64>,
    /// `net.ipv4.tcp_available_congestion_control`.
    pub available_cc: Vec<String>,
    /// `net.ipv4.tcp_allowed_congestion_control`.
    pub allowed_cc: Vec<String>,
    /// `net.ipv4.tcp_congestion_control`.
    pub default_cc: Option<String>,
    /// `net.ipv4.tcp_window_scaling` ≠ 0.
    pub window_scaling: Option<bool>,
    /// `net.ipv4.tcp_timestamps` ≠ 0.
    pub timestamps: Option<bool>,
    /// `net.ipv4.tcp_sack` ≠ 0.
    pub sack: Option<bool>,
    /// `net.ipv4.tcp_mtu_probing` (0 off, 1 after a black hole, 2 always).
    pub mtu_probing: Option<u32>,
    /// `net.ipv4.tcp_no_metrics_save` ≠ 0.
    pub no_metrics_save: Option<bool>,
    /// `net.core.default_qdisc`.
    pub default_qdisc: Option<String>,
    /// `net.core.netdev_max_backlog`, packets.
    pub netdev_max_backlog: Option<u64>,
    /// `net.ipv4.tcp_notsent_lowat`, bytes.
    pub notsent_lowat: Option<u64>,
    /// Interfaces, sorted by name.
    pub interfaces: Vec<Interface>,
    /// Whether this process has `CAP_NET_ADMIN` (and so `SO_*BUFFORCE`).
    pub net_admin: bool,
    /// What could not be read, one line each.
    pub problems: Vec<String>,
}
