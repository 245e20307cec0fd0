//! Host checks for a target path (`longhaul doctor`).
//!
//! Two halves, kept apart so that the rules can be tested without a host:
//!
//! - [`HostSnapshot::gather`] does the I/O: it reads the kernel's TCP and
//!   queueing tunables under `/proc/sys`, lists the interfaces in
//!   `/sys/class/net`, asks `tc` for each interface's root qdisc and `ethtool`
//!   for its offloads (both optional: a missing tool is recorded, not an
//!   error), and notes whether the process holds `CAP_NET_ADMIN`. It never
//!   changes anything.
//! - [`evaluate`] is pure: it compares a snapshot with what a [`Target`] path
//!   (rate, RTT, streams) needs and returns one [`Finding`] per check, each
//!   with what was seen, what is wanted, why, and the exact shell command that
//!   closes the gap. [`write_sysctl_file`] turns the `sysctl -w` fixes into a
//!   `/etc/sysctl.d` snippet that survives a reboot.
//!
//! The rules and their sources (notes/models-and-records.md §3–4.1,
//! notes/transfer-tools.md §2 and §6) are stated next to each check below.

use std::fmt;
use std::fs;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use longhaul_sys::{NetLimits, has_net_admin, read_sysctl};
use longhaul_units::{
    MAX_TCP_WINDOW, Nanos, bdp_bytes, fmt_duration, fmt_rate, fmt_size, fmt_size_si,
    responsiveness, streams_needed, window_ceiling_bps,
};
use serde::Serialize;

/// Where Linux lists network interfaces.
const SYS_CLASS_NET: &str = "/sys/class/net";

/// `ARPHRD_LOOPBACK` (linux/if_arp.h): the `type` of a loopback interface.
const ARPHRD_LOOPBACK: u32 = 772;

/// The largest value the buffer sysctls accept: `net.core.rmem_max`,
/// `tcp_rmem` and their send twins are C `int`s (fasterdata's 100G page calls
/// this "the maximum (2 GB)").
pub const MAX_BUFFER_SYSCTL: u64 = i32::MAX as u64;

/// The usual `tcp_notsent_lowat` default, "no limit" (`UINT_MAX`).
const NOTSENT_LOWAT_UNLIMITED: u64 = u32::MAX as u64;

/// fasterdata's `netdev_max_backlog` for 10G-and-up hosts
/// (`fasterdata_tuning.py`, notes/models-and-records.md §4.1).
pub const NETDEV_BACKLOG_10G: u64 = 250_000;

/// The MTU recommended on 10 Gbit/s and faster paths (jumbo frames).
pub const JUMBO_MTU: u32 = 9000;

/// Paths at or above this rate get the 10G recommendations (jumbo frames,
/// `netdev_max_backlog`), as fasterdata tiers its advice.
const TEN_GBIT: u64 = 10_000_000_000;

/// The value to give a buffer sysctl so that sockets can hold `bytes`:
/// `bytes` rounded up to a power of two, as fasterdata's tables are, and at
/// most [`MAX_BUFFER_SYSCTL`]. 300,000,000 → 536,870,912 (512 MiB).
pub fn buffer_sysctl_value(bytes: u64) -> u64 {
    bytes
        .max(1)
        .checked_next_power_of_two()
        .unwrap_or(u64::MAX)
        .min(MAX_BUFFER_SYSCTL)
}

// ---------------------------------------------------------------------------
// Snapshot (facts about this host)

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
    /// The value, if known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Probe::Known(v) => Some(v),
            Probe::Unknown(_) => None,
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
    fn each(&self) -> [(&'static str, Option<Feature>); 3] {
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

impl HostSnapshot {
    /// Reads everything `evaluate` looks at from this host. Never fails and
    /// never writes: what cannot be read is left empty and explained in
    /// [`HostSnapshot::problems`]. Runs `tc` and `ethtool` once per interface
    /// if they are installed.
    pub fn gather() -> HostSnapshot {
        let mut snap = HostSnapshot {
            net_admin: has_net_admin(),
            ..HostSnapshot::default()
        };
        let mut problems = Vec::new();
        match NetLimits::read() {
            Ok(l) => {
                snap.rmem_max = Some(l.rmem_max);
                snap.wmem_max = Some(l.wmem_max);
                snap.tcp_rmem = Some(l.tcp_rmem);
                snap.tcp_wmem = Some(l.tcp_wmem);
                snap.available_cc = l.available_cc;
                snap.allowed_cc = l.allowed_cc;
                snap.default_cc = Some(l.default_cc);
                snap.window_scaling = Some(l.tcp_window_scaling);
                snap.mtu_probing = l.tcp_mtu_probing;
                snap.default_qdisc = l.default_qdisc;
            }
            Err(e) => {
                // Some entries are hidden in non-initial network namespaces;
                // read what is there one by one.
                problems.push(format!("reading the TCP limits: {e}"));
                let mut get = |name: &str| sysctl(name, &mut problems);
                snap.rmem_max = get("net.core.rmem_max").and_then(|v| v.parse().ok());
                snap.wmem_max = get("net.core.wmem_max").and_then(|v| v.parse().ok());
                snap.tcp_rmem = get("net.ipv4.tcp_rmem").and_then(|v| triple(&v));
                snap.tcp_wmem = get("net.ipv4.tcp_wmem").and_then(|v| triple(&v));
                snap.available_cc = get("net.ipv4.tcp_available_congestion_control")
                    .map(|v| words(&v))
                    .unwrap_or_default();
                snap.allowed_cc = get("net.ipv4.tcp_allowed_congestion_control")
                    .map(|v| words(&v))
                    .unwrap_or_default();
                snap.default_cc = get("net.ipv4.tcp_congestion_control");
                snap.window_scaling = get("net.ipv4.tcp_window_scaling").and_then(|v| flag(&v));
                snap.mtu_probing = get("net.ipv4.tcp_mtu_probing").and_then(|v| v.parse().ok());
                snap.default_qdisc = get("net.core.default_qdisc");
            }
        }
        let mut get = |name: &str| sysctl(name, &mut problems);
        snap.kernel_release = get("kernel.osrelease");
        snap.timestamps = get("net.ipv4.tcp_timestamps").and_then(|v| flag(&v));
        snap.sack = get("net.ipv4.tcp_sack").and_then(|v| flag(&v));
        snap.no_metrics_save = get("net.ipv4.tcp_no_metrics_save").and_then(|v| flag(&v));
        snap.netdev_max_backlog = get("net.core.netdev_max_backlog").and_then(|v| v.parse().ok());
        snap.notsent_lowat = get("net.ipv4.tcp_notsent_lowat").and_then(|v| v.parse().ok());
        snap.interfaces = interfaces(Path::new(SYS_CLASS_NET), &mut problems);
        snap.problems = problems;
        snap
    }
}

/// Reads one sysctl; a failure is noted in `problems` and gives `None`.
fn sysctl(name: &str, problems: &mut Vec<String>) -> Option<String> {
    match read_sysctl(name) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    }
}

/// "4096\t131072\t6291456" → [4096, 131072, 6291456].
fn triple(v: &str) -> Option<[u64; 3]> {
    let n: Vec<u64> = v
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    <[u64; 3]>::try_from(n).ok()
}

/// "1" → true, "0" → false (also "2" → true, as for `tcp_timestamps`).
fn flag(v: &str) -> Option<bool> {
    v.trim().parse::<u64>().ok().map(|n| n != 0)
}

fn words(v: &str) -> Vec<String> {
    v.split_whitespace().map(str::to_owned).collect()
}

/// Reads a one-line attribute file under an interface's sysfs directory.
fn attr(dir: &Path, name: &str) -> Option<String> {
    fs::read_to_string(dir.join(name))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Every interface under `root` (normally `/sys/class/net`), sorted by name.
fn interfaces(root: &Path, problems: &mut Vec<String>) -> Vec<Interface> {
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) => {
            problems.push(format!("listing {}: {e}", root.display()));
            return Vec::new();
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let dir = root.join(&name);
            let kind: Option<u32> = attr(&dir, "type").and_then(|v| v.parse().ok());
            // `speed` is -1 or unreadable (EINVAL) when the driver has none.
            let speed_mbps = attr(&dir, "speed")
                .and_then(|v| v.parse::<i64>().ok())
                .and_then(|v| u64::try_from(v).ok())
                .filter(|&v| v > 0);
            let qdisc = run_tool("tc", &["qdisc", "show", "dev", &name]).and_then(|out| {
                parse_tc_qdisc(&out).map_or_else(
                    || Probe::Unknown("tc listed no root qdisc".into()),
                    Probe::Known,
                )
            });
            let offloads = run_tool("ethtool", &["-k", &name])
                .and_then(|out| Probe::Known(parse_ethtool_features(&out)));
            Interface {
                loopback: kind == Some(ARPHRD_LOOPBACK) || name == "lo",
                operstate: attr(&dir, "operstate").unwrap_or_else(|| "unknown".into()),
                mtu: attr(&dir, "mtu").and_then(|v| v.parse().ok()),
                speed_mbps,
                tx_queue_len: attr(&dir, "tx_queue_len").and_then(|v| v.parse().ok()),
                qdisc,
                offloads,
                name,
            }
        })
        .collect()
}

impl Probe<String> {
    fn and_then<U>(self, f: impl FnOnce(String) -> Probe<U>) -> Probe<U> {
        match self {
            Probe::Known(s) => f(s),
            Probe::Unknown(why) => Probe::Unknown(why),
        }
    }
}

/// Runs a read-only query tool and returns its standard output. The tool is
/// looked up in `PATH`, then in `/usr/sbin` and `/sbin` (often missing from
/// an unprivileged user's `PATH`).
fn run_tool(tool: &str, args: &[&str]) -> Probe<String> {
    for program in [
        tool.to_owned(),
        format!("/usr/sbin/{tool}"),
        format!("/sbin/{tool}"),
    ] {
        let out = Command::new(&program)
            .args(args)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output();
        match out {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Probe::Unknown(format!("{tool} could not run: {e}")),
            Ok(out) if out.status.success() => {
                return Probe::Known(String::from_utf8_lossy(&out.stdout).into_owned());
            }
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let first = stderr.lines().next().unwrap_or("").trim();
                return Probe::Unknown(format!(
                    "{tool} {}: {} {first}",
                    args.join(" "),
                    out.status
                ));
            }
        }
    }
    Probe::Unknown(format!("{tool} not installed"))
}

/// Reads `tc qdisc show dev IF` output: the root qdisc's kind and the kinds
/// of the qdiscs below it (ingress and clsact left out). `None` if no line
/// says `root`.
pub fn parse_tc_qdisc(out: &str) -> Option<Qdisc> {
    let mut root = None;
    let mut children = Vec::new();
    for line in out.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let [first, kind, ..] = tokens.as_slice() else {
            continue;
        };
        if *first != "qdisc" {
            continue;
        }
        if tokens.contains(&"root") {
            root = Some((*kind).to_owned());
        } else if !matches!(*kind, "ingress" | "clsact") {
            children.push((*kind).to_owned());
        }
    }
    root.map(|root| Qdisc { root, children })
}

/// Reads TSO, GSO and GRO from `ethtool -k IF` output ("name: on",
/// "name: off [fixed]").
pub fn parse_ethtool_features(out: &str) -> Offloads {
    let mut offloads = Offloads::default();
    for line in out.lines() {
        let Some((name, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim();
        let feature = Feature {
            on: value.starts_with("on"),
            fixed: value.contains("[fixed]"),
        };
        match name {
            "tcp-segmentation-offload" => offloads.tso = Some(feature),
            "generic-segmentation-offload" => offloads.gso = Some(feature),
            "generic-receive-offload" => offloads.gro = Some(feature),
            _ => {}
        }
    }
    offloads
}

// ---------------------------------------------------------------------------
// Evaluation (pure)

/// The path the host should be able to fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Target {
    /// Rate of all streams together, bit/s.
    pub rate_bps: u64,
    /// Round-trip time (serialised as `rtt_ns`).
    #[serde(rename = "rtt_ns")]
    pub rtt: Nanos,
    /// Parallel streams sharing the rate (at least 1).
    pub streams: u32,
}

impl Target {
    /// Streams, at least 1.
    fn streams(&self) -> u64 {
        u64::from(self.streams.max(1))
    }

    /// One stream's share of the bandwidth-delay product, bytes.
    pub fn bdp_per_stream(&self) -> u64 {
        bdp_bytes(self.rate_bps / self.streams(), self.rtt)
    }

    /// The window longhaul aims for per stream: 2 × BDP, at most the 1 GiB
    /// RFC 7323 window (the same rule as `longhaul_proto::window::plan`).
    pub fn wanted_window(&self) -> u64 {
        self.bdp_per_stream().saturating_mul(2).min(MAX_TCP_WINDOW)
    }

    /// The rate all streams together reach when each has `window` bytes.
    fn ceiling(&self, window: u64) -> u64 {
        window_ceiling_bps(window.min(MAX_TCP_WINDOW), self.rtt).saturating_mul(self.streams())
    }

    /// "10 Gbit/s × 120 ms, 1 stream".
    pub fn describe(&self) -> String {
        let n = self.streams();
        format!(
            "{} × {} RTT, {n} stream{}",
            fmt_rate(self.rate_bps),
            fmt_duration(self.rtt),
            if n == 1 { "" } else { "s" }
        )
    }
}

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
    fn new(check: impl Into<String>, status: Status) -> Finding {
        Finding {
            check: check.into(),
            status,
            observed: String::new(),
            wanted: String::new(),
            fix: None,
            why: String::new(),
        }
    }

    fn observed(mut self, s: impl Into<String>) -> Finding {
        self.observed = s.into();
        self
    }

    fn wanted(mut self, s: impl Into<String>) -> Finding {
        self.wanted = s.into();
        self
    }

    fn why(mut self, s: impl Into<String>) -> Finding {
        self.why = s.into();
        self
    }

    fn fix(mut self, s: impl Into<String>) -> Finding {
        self.fix = Some(s.into());
        self
    }
}

/// "536870912 (512 MiB)".
fn bytes(n: u64) -> String {
    format!("{n} ({})", fmt_size(n))
}

/// Checks `snap` against what `target` needs. Pure: the same snapshot and
/// target always give the same findings, in a fixed order.
pub fn evaluate(snap: &HostSnapshot, target: &Target) -> Vec<Finding> {
    let mut out = Vec::new();
    buffers(snap, target, &mut out);
    tcp_options(snap, target, &mut out);
    congestion(snap, &mut out);
    queueing(snap, target, &mut out);
    links(snap, target, &mut out);
    window_limit(target, &mut out);
    out
}

/// Socket-buffer caps.
///
/// Rules (notes/transfer-tools.md §2; notes/models-and-records.md §3.1,
/// §4.1; socket(7)):
/// - `setsockopt(SO_RCVBUF, x)` is clamped at `net.core.rmem_max` and then
///   doubled, about half of which is usable window, so `rmem_max` ≈ the
///   largest window a socket that sets its buffer can get. longhaul asks for
///   2 × BDP per stream (proto::window), so `rmem_max` ≥ 2 × BDP; below 1 ×
///   BDP the path cannot be filled at all (Fail), in between it fills
///   without headroom (Warn). Same for `wmem_max` and `SO_SNDBUF`.
/// - Autotuning grows a buffer up to `tcp_rmem[2]`, again about half of it
///   window, so `tcp_rmem[2]` ≥ 2 × BDP gives at least one BDP of window.
///   Applications that set their buffers (longhaul, iperf -w) are not bound
///   by it, so a shortfall is a Warn when `rmem_max` still lets such a
///   socket fill the path, else a Fail.
/// - The fixes round up to a power of two as fasterdata's values are
///   (64, 256, 512 MiB; 2 GiB at the int limit).
fn buffers(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    let bdp = t.bdp_per_stream();
    let want = t.wanted_window();
    let rtt = fmt_duration(t.rtt);
    let mut short = false;
    for (name, value, role) in [
        ("net.core.rmem_max", snap.rmem_max, "receive"),
        ("net.core.wmem_max", snap.wmem_max, "send"),
    ] {
        let Some(v) = value else {
            out.push(
                Finding::new(name, Status::Info)
                    .observed("unknown (not readable here)")
                    .wanted(format!("≥ {}", bytes(want))),
            );
            continue;
        };
        let ceiling = t.ceiling(v);
        let status = if v >= want {
            Status::Ok
        } else if ceiling >= t.rate_bps {
            Status::Warn
        } else {
            Status::Fail
        };
        short |= status != Status::Ok;
        let mut f = Finding::new(name, status)
            .observed(format!("{} → {}", bytes(v), fmt_rate(ceiling)))
            .wanted(if want < bdp.saturating_mul(2) {
                format!("≥ {want} (the 1 GiB window; 2 × BDP is more)")
            } else {
                format!("≥ {want} (2 × BDP)")
            })
            .why(format!(
                "caps the {role} buffer a socket may request (SO_{}BUF); the kernel doubles the \
                 request and about half is usable window, so the window tops out near this value \
                 (→ the rate that window allows at {rtt}); 2 × BDP per stream is {}",
                if role == "send" { "SND" } else { "RCV" },
                fmt_size_si(want)
            ));
        if status != Status::Ok {
            f = f.fix(format!("sysctl -w {name}={}", buffer_sysctl_value(want)));
        }
        out.push(f);
    }

    // Sockets that set their buffer get about `core` of window.
    let core_covers = |core: Option<u64>| core.is_some_and(|c| t.ceiling(c) >= t.rate_bps);
    for (name, value, core, app_default) in [
        ("net.ipv4.tcp_rmem", snap.tcp_rmem, snap.rmem_max, 131_072),
        ("net.ipv4.tcp_wmem", snap.tcp_wmem, snap.wmem_max, 16_384),
    ] {
        let want_max = bdp.saturating_mul(2).min(MAX_BUFFER_SYSCTL);
        let Some([min, default, max]) = value else {
            out.push(
                Finding::new(name, Status::Info)
                    .observed("unknown (not readable here)")
                    .wanted(format!("max ≥ {}", bytes(want_max))),
            );
            continue;
        };
        let ceiling = t.ceiling(max / 2);
        let status = if max >= want_max {
            Status::Ok
        } else if core_covers(core) {
            Status::Warn
        } else {
            Status::Fail
        };
        short |= status != Status::Ok;
        let mut f = Finding::new(name, status)
            .observed(format!(
                "{min} {default} {max} ({}) → {}",
                fmt_size(max),
                fmt_rate(ceiling)
            ))
            .wanted(if want_max < bdp.saturating_mul(2) {
                format!("max ≥ {want_max} (the int limit; 2 × BDP is more)")
            } else {
                format!("max ≥ {want_max} (2 × BDP)")
            })
            .why(if status == Status::Warn {
                "caps kernel autotuning (about half of it is window): tools that leave buffers \
                 alone (scp, rsync, most applications) stop there; longhaul and iperf -w set \
                 their buffers and are bound by the core cap instead, which is high enough"
                    .to_owned()
            } else {
                "caps kernel autotuning; about half of the buffer is usable window, so the max \
                 must be twice the BDP for autotuned sockets to fill the path"
                    .to_owned()
            });
        if status != Status::Ok {
            // Keep the host's min and default; change only the max. A host
            // whose values are unknown gets the kernel defaults.
            let (min, default) = if min > 0 {
                (min, default)
            } else {
                (4096, app_default)
            };
            f = f.fix(format!(
                "sysctl -w {name}=\"{min} {default} {}\"",
                buffer_sysctl_value(want_max)
            ));
        }
        out.push(f);
    }

    // SO_SNDBUFFORCE/SO_RCVBUFFORCE (CAP_NET_ADMIN) bypass the core caps
    // (socket(7)); longhaul uses them when privileged (proto::window::plan).
    let (status, observed, why) = match (snap.net_admin, short) {
        (true, true) => (
            Status::Info,
            "yes (root or CAP_NET_ADMIN)",
            "longhaul forces its buffers past the caps above (SO_*BUFFORCE), so its own tests \
             are not blocked by them; other tools still are",
        ),
        (false, true) => (
            Status::Info,
            "no",
            "run longhaul as root (or with CAP_NET_ADMIN) and it forces its buffers past the \
             caps above with SO_*BUFFORCE; other tools still need the sysctls raised",
        ),
        (true, false) => (
            Status::Ok,
            "yes (root or CAP_NET_ADMIN)",
            "longhaul may force its buffers past the caps (SO_*BUFFORCE); not needed here",
        ),
        (false, false) => (
            Status::Ok,
            "no",
            "not needed: the caps already allow the window",
        ),
    };
    out.push(
        Finding::new("SO_*BUFFORCE", status)
            .observed(observed)
            .wanted("root, when the buffer caps are short")
            .why(why),
    );
}

/// TCP options that long fat paths depend on (RFC 7323, RFC 2018) and the
/// metrics cache.
fn tcp_options(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    // RFC 7323 §2: without window scaling a window is at most 65,535 bytes.
    let f = match snap.window_scaling {
        Some(true) => Finding::new("net.ipv4.tcp_window_scaling", Status::Ok).observed("1"),
        Some(false) => Finding::new("net.ipv4.tcp_window_scaling", Status::Fail)
            .observed(format!(
                "0 → 64 KiB window, ceiling {} at {}",
                fmt_rate(t.ceiling(65_535)),
                fmt_duration(t.rtt)
            ))
            .fix("sysctl -w net.ipv4.tcp_window_scaling=1"),
        None => Finding::new("net.ipv4.tcp_window_scaling", Status::Info).observed("unknown"),
    };
    out.push(
        f.wanted("1")
            .why("RFC 7323 window scaling: without it no window exceeds 64 KiB"),
    );

    // RFC 7323 §5 (PAWS): sequence numbers wrap after 4 GiB, which at
    // 10 Gbit/s takes 3.4 s, less than a segment may live in the network;
    // timestamps tell old segments from new ones, and give RTT samples.
    let wrap = if t.rate_bps > 0 {
        format!(
            "; at {} the 4 GiB sequence space wraps every {}",
            fmt_rate(t.rate_bps),
            fmt_duration(Nanos::from_secs_f64(
                (1u64 << 32) as f64 * 8.0 / t.rate_bps as f64
            ))
        )
    } else {
        String::new()
    };
    out.push(on_off(
        "net.ipv4.tcp_timestamps",
        snap.timestamps,
        Status::Warn,
        format!("RFC 7323 timestamps protect against wrapped sequence numbers (PAWS) and time every round trip{wrap}"),
    ));
    // RFC 2018: without SACK, each of several losses in one window costs a
    // round trip to find; a 10G × 100 ms window holds 83,333 segments.
    out.push(on_off(
        "net.ipv4.tcp_sack",
        snap.sack,
        Status::Warn,
        "selective acknowledgements (RFC 2018) repair several losses in one window in one round \
         trip; without them each costs a round trip"
            .to_owned(),
    ));
    // fasterdata's test-host and systemd templates set it (notes §4.1):
    // otherwise a connection starts from the ssthresh a previous lossy
    // connection to the same host left in the route cache.
    out.push(on_off(
        "net.ipv4.tcp_no_metrics_save",
        snap.no_metrics_save,
        Status::Warn,
        "with 0 the kernel caches ssthresh per destination, so one lossy run makes the next \
         start in slow linear growth; fasterdata sets 1 on test hosts"
            .to_owned(),
    ));
}

/// A 0/1 sysctl wanted at 1.
fn on_off(name: &str, value: Option<bool>, if_off: Status, why: String) -> Finding {
    let f = match value {
        Some(true) => Finding::new(name, Status::Ok).observed("1"),
        Some(false) => Finding::new(name, if_off)
            .observed("0")
            .fix(format!("sysctl -w {name}=1")),
        None => Finding::new(name, Status::Info).observed("unknown"),
    };
    f.wanted("1").why(why)
}

/// Congestion control: CUBIC (RFC 9438, the Linux default) or BBR; Reno's
/// recovery after one loss takes hours on these paths (responsiveness,
/// notes/models-and-records.md §3.3; transfer-tools.md §2).
fn congestion(snap: &HostSnapshot, out: &mut Vec<Finding>) {
    let has = |name: &str| snap.available_cc.iter().any(|c| c == name);
    let available = snap.available_cc.join(" ");
    let default = snap.default_cc.as_deref().unwrap_or("unknown");
    let observed = format!("default {default}; available: {available}");
    let why = "Reno halves its window on a loss and regains one segment per round trip: hours at \
               10G over 100 ms (calc responsiveness); CUBIC recovers in seconds and BBR does not \
               back off on isolated losses";
    let f = if snap.available_cc.is_empty() && snap.default_cc.is_none() {
        Finding::new("net.ipv4.tcp_congestion_control", Status::Info).observed("unknown")
    } else if !has("cubic") && !has("bbr") {
        Finding::new("net.ipv4.tcp_congestion_control", Status::Fail)
            .observed(observed)
            .fix("modprobe tcp_bbr\nsysctl -w net.ipv4.tcp_congestion_control=bbr")
    } else if !matches!(default, "cubic" | "bbr") {
        let pick = if has("bbr") { "bbr" } else { "cubic" };
        Finding::new("net.ipv4.tcp_congestion_control", Status::Warn)
            .observed(observed)
            .fix(format!("sysctl -w net.ipv4.tcp_congestion_control={pick}"))
    } else {
        Finding::new("net.ipv4.tcp_congestion_control", Status::Ok).observed(observed)
    };
    out.push(f.wanted("cubic or bbr available and default").why(why));

    if snap.available_cc.is_empty() {
        return;
    }
    if !has("bbr") {
        out.push(
            Finding::new("tcp_bbr module", Status::Info)
                .observed("not loaded")
                .wanted("loaded, to compare BBR with CUBIC (longhaul -C bbr)")
                .fix("modprobe tcp_bbr")
                .why(
                    "as root, selecting bbr on a socket loads the module on demand; \
                     unprivileged users need it loaded and allowed",
                ),
        );
    }
    // tcp(7): unprivileged processes may only select algorithms listed in
    // tcp_allowed_congestion_control.
    if !snap.net_admin {
        let missing: Vec<&str> = ["cubic", "bbr"]
            .into_iter()
            .filter(|cc| has(cc) && !snap.allowed_cc.iter().any(|a| a == cc))
            .collect();
        if !missing.is_empty() {
            let mut allowed: Vec<&str> = snap.allowed_cc.iter().map(String::as_str).collect();
            allowed.extend(&missing);
            out.push(
                Finding::new("net.ipv4.tcp_allowed_congestion_control", Status::Info)
                    .observed(snap.allowed_cc.join(" "))
                    .wanted(format!("includes {}", missing.join(" and ")))
                    .fix(format!(
                        "sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{}\"",
                        allowed.join(" ")
                    ))
                    .why("unprivileged processes may only choose the algorithms listed here"),
            );
        }
    }
}

/// (major, minor) of a kernel release string: "6.18.44-fc" → (6, 18).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Default qdisc, the backlog queue, and `tcp_notsent_lowat`.
///
/// fq is fasterdata's recommendation for pacing (notes §4.1). Since Linux
/// 4.20 TCP paces internally (SO_MAX_PACING_RATE, BBR) without fq, and the
/// loopback baseline measured `--fq-rate 5G` exact on a `noqueue` device
/// (transfer-tools §6.2), so a missing fq is a Warn; only BBR on a kernel
/// before 4.20 needs fq to pace at all (Fail).
fn queueing(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    let f = match snap.default_qdisc.as_deref() {
        Some("fq") => Finding::new("net.core.default_qdisc", Status::Ok).observed("fq"),
        Some(q) => Finding::new("net.core.default_qdisc", Status::Warn)
            .observed(q)
            .fix("sysctl -w net.core.default_qdisc=fq"),
        None => Finding::new("net.core.default_qdisc", Status::Info).observed("unknown"),
    };
    out.push(f.wanted("fq").why(
        "the qdisc new interfaces get; fq paces each flow (fasterdata). Applies to qdiscs \
         created afterwards: see the per-interface qdisc rows",
    ));

    // fasterdata_tuning.py sets 250000 on 10G-and-up hosts (notes §4.1): the
    // per-CPU queue of received packets waiting for the stack.
    if t.rate_bps >= TEN_GBIT {
        let name = "net.core.netdev_max_backlog";
        let f = match snap.netdev_max_backlog {
            Some(v) if v >= NETDEV_BACKLOG_10G => {
                Finding::new(name, Status::Ok).observed(v.to_string())
            }
            Some(v) => Finding::new(name, Status::Warn)
                .observed(v.to_string())
                .fix(format!("sysctl -w {name}={NETDEV_BACKLOG_10G}")),
            None => Finding::new(name, Status::Info).observed("unknown"),
        };
        out.push(f.wanted(format!("≥ {NETDEV_BACKLOG_10G} at 10G and up")).why(
            "packets received faster than the stack takes them queue here per CPU; when it is \
             full they are dropped before TCP sees them",
        ));
    }

    let name = "net.ipv4.tcp_notsent_lowat";
    let f = match snap.notsent_lowat {
        Some(NOTSENT_LOWAT_UNLIMITED) | None => Finding::new(name, Status::Ok).observed(
            snap.notsent_lowat
                .map_or("unknown".to_owned(), |v| format!("{v} (unlimited)")),
        ),
        Some(v) => Finding::new(name, Status::Info).observed(bytes(v)),
    };
    out.push(f.wanted("unlimited for bulk senders").why(
        "limits unsent data queued per socket; a small global value (set for latency-sensitive \
         servers) makes a bulk sender wake far more often, but does not cap the window",
    ));
}

/// Per-interface checks (up, non-loopback interfaces only) and MTU probing.
fn links(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    let checked: Vec<&Interface> = snap.interfaces.iter().filter(|i| i.checked()).collect();
    if checked.is_empty() {
        out.push(
            Finding::new("interfaces", Status::Info)
                .observed(if snap.interfaces.is_empty() {
                    "none listed".to_owned()
                } else {
                    "none up besides loopback".to_owned()
                })
                .wanted("the interface that carries the path")
                .why("MTU, qdisc and offload checks need an interface that is up"),
        );
    }
    let kernel = snap.kernel_release.as_deref().and_then(kernel_version);
    let bbr_default = snap.default_cc.as_deref() == Some("bbr");
    for i in &checked {
        let n = &i.name;
        // Link speed: a NIC slower than the target cannot carry it (if the
        // path uses that NIC; the route is not known here).
        let f = match i.speed_mbps {
            Some(mbps) => {
                let bps = mbps.saturating_mul(1_000_000);
                let status = if bps >= t.rate_bps {
                    Status::Ok
                } else {
                    Status::Warn
                };
                Finding::new(format!("{n} speed"), status).observed(fmt_rate(bps))
            }
            None => Finding::new(format!("{n} speed"), Status::Info)
                .observed("not reported (virtual NIC?)"),
        };
        out.push(f.wanted(format!("≥ {}", fmt_rate(t.rate_bps))).why(format!(
                    "if the path leaves through {n}, its line rate bounds the test (txqueuelen {})",
                    i.tx_queue_len.map_or("unknown".to_owned(), |q| q.to_string())
                )));

        // MTU: the Mathis ceiling grows with the MSS and Reno's recovery
        // time shrinks with it (notes §3.2–3.3: 10G, 120 ms: 6,164 s at
        // MSS 1460, 1,004 s at 8960). Every hop must carry the larger frames.
        if let Some(mtu) = i.mtu {
            let status = if mtu >= JUMBO_MTU {
                Status::Ok
            } else if t.rate_bps >= TEN_GBIT {
                Status::Warn
            } else {
                Status::Info
            };
            let mss = u64::from(mtu.saturating_sub(40)).max(1);
            let mut f = Finding::new(format!("{n} mtu"), status)
                .observed(mtu.to_string())
                .wanted(format!("≥ {JUMBO_MTU} on 10G and faster paths"))
                .why(format!(
                    "larger segments raise the loss-limited ceiling and speed recovery: one loss \
                     costs Reno {} at MSS {mss}, {} at MSS 8960; every hop on the path must \
                     carry 9000-byte frames",
                    fmt_duration(responsiveness(t.rate_bps, t.rtt, mss)),
                    fmt_duration(responsiveness(t.rate_bps, t.rtt, 8960)),
                ));
            if status != Status::Ok {
                f = f.fix(format!("ip link set dev {n} mtu {JUMBO_MTU}"));
            }
            out.push(f);
        }

        let f = match &i.qdisc {
            Probe::Known(q) if q.is_fq() => {
                Finding::new(format!("{n} qdisc"), Status::Ok).observed(q.to_string())
            }
            Probe::Known(q) => {
                let old_bbr = kernel.is_some_and(|v| v < (4, 20)) && bbr_default;
                Finding::new(
                    format!("{n} qdisc"),
                    if old_bbr { Status::Fail } else { Status::Warn },
                )
                .observed(q.to_string())
                .fix(format!("tc qdisc replace dev {n} root fq"))
            }
            Probe::Unknown(why) => Finding::new(format!("{n} qdisc"), Status::Info)
                .observed(format!("unknown ({why})")),
        };
        out.push(f.wanted("fq").why(
            "fq paces each flow and keeps bursts off the path (fasterdata); since Linux 4.20 TCP \
             also paces by itself, so SO_MAX_PACING_RATE and BBR work without fq, but BBR on \
             older kernels needs it",
        ));

        // TSO/GSO/GRO: at 10G+ per-packet CPU cost is the limit; offloads
        // move 64 KiB per stack traversal instead of one MTU (notes §4.3:
        // the bottleneck is back in the host).
        let f = match &i.offloads {
            Probe::Known(o) => {
                let off: Vec<&str> = o
                    .each()
                    .into_iter()
                    .filter(|(_, f)| f.is_some_and(|f| !f.on))
                    .map(|(name, _)| name)
                    .collect();
                let changeable: Vec<&str> = o
                    .each()
                    .into_iter()
                    .filter(|(_, f)| f.is_some_and(|f| !f.on && !f.fixed))
                    .map(|(name, _)| name)
                    .collect();
                let observed = o
                    .each()
                    .iter()
                    .map(|(name, f)| {
                        let state = match f {
                            Some(Feature { on: true, fixed }) => {
                                if *fixed {
                                    "on [fixed]"
                                } else {
                                    "on"
                                }
                            }
                            Some(Feature { on: false, fixed }) => {
                                if *fixed {
                                    "off [fixed]"
                                } else {
                                    "off"
                                }
                            }
                            None => "not listed",
                        };
                        format!("{name} {state}")
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let mut f = Finding::new(
                    format!("{n} offloads"),
                    if off.is_empty() {
                        Status::Ok
                    } else {
                        Status::Warn
                    },
                )
                .observed(observed);
                if !changeable.is_empty() {
                    let args: Vec<String> = changeable.iter().map(|c| format!("{c} on")).collect();
                    f = f.fix(format!("ethtool -K {n} {}", args.join(" ")));
                }
                f
            }
            Probe::Unknown(why) => Finding::new(format!("{n} offloads"), Status::Info)
                .observed(format!("unknown ({why})")),
        };
        out.push(f.wanted("tso, gso, gro on").why(
            "segmentation and receive offloads hand the stack 64 KiB at a time instead of one \
             MTU; without them per-packet CPU cost limits a stream well below 10 Gbit/s",
        ));
    }

    // RFC 4821 packetization-layer PMTU discovery: with jumbo frames, a hop
    // with a smaller MTU whose ICMP "fragmentation needed" is filtered stalls
    // connections; probing recovers. fasterdata_tuning.py sets it when the
    // MTU exceeds 8000 (notes §4.1).
    let jumbo = checked.iter().any(|i| i.mtu.is_some_and(|m| m > 8000));
    let name = "net.ipv4.tcp_mtu_probing";
    let f = match (snap.mtu_probing, jumbo) {
        (None, _) => Finding::new(name, Status::Info).observed("unknown"),
        (Some(0), true) => Finding::new(name, Status::Warn)
            .observed("0")
            .fix(format!("sysctl -w {name}=1")),
        (Some(v), _) => Finding::new(name, Status::Ok).observed(v.to_string()),
    };
    out.push(
        f.wanted(if jumbo {
            "1 (jumbo frames in use)"
        } else {
            "1 with jumbo frames"
        })
        .why(
            "with jumbo frames, a smaller-MTU hop that drops ICMP 'fragmentation needed' \
                 stalls connections; probing (RFC 4821) finds the working size",
        ),
    );
}

/// RFC 7323 caps one window at 65,535 × 2^14 bytes, so one stream cannot
/// exceed that per round trip; beyond it only more streams help
/// (transfer-tools §2: mandatory at 100 Gbit/s × ≥ 120 ms).
fn window_limit(t: &Target, out: &mut Vec<Finding>) {
    let needed = streams_needed(t.rate_bps, t.rtt);
    let per_stream = window_ceiling_bps(MAX_TCP_WINDOW, t.rtt);
    let have = t.streams();
    let status = if have >= needed {
        if needed > 1 { Status::Info } else { Status::Ok }
    } else {
        Status::Warn
    };
    out.push(
        Finding::new("streams (RFC 7323 window)", status)
            .observed(format!(
                "{have} (at most {} each at {})",
                fmt_rate(per_stream),
                fmt_duration(t.rtt)
            ))
            .wanted(format!("≥ {needed}"))
            .why(
                "no TCP window exceeds 65,535 × 2^14 bytes (RFC 7323), whatever the buffers; \
                 beyond that only parallel streams (-P) help",
            ),
    );
}

/// Whether any finding failed.
pub fn any_fail(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

/// Renders the `sysctl -w` fixes among `findings` as the contents of
/// `/etc/sysctl.d/90-longhaul.conf`, so they survive a reboot (apply now with
/// `sysctl --system`). Empty if no fix is a sysctl.
pub fn write_sysctl_file(findings: &[Finding]) -> String {
    let mut lines = Vec::new();
    for f in findings {
        let Some(fix) = &f.fix else { continue };
        for cmd in fix.lines() {
            let Some(assignments) = cmd.trim().strip_prefix("sysctl -w ") else {
                continue;
            };
            if let Some((name, value)) = assignments.split_once('=') {
                let value = value.trim().trim_matches('"');
                lines.push(format!("{} = {value}", name.trim()));
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# /etc/sysctl.d/90-longhaul.conf, written by `longhaul doctor`.\n\
         # Apply without a reboot: sysctl --system\n",
    );
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS_120: Nanos = Nanos(120_000_000);
    const G10: u64 = 10_000_000_000;

    fn iface(name: &str, mtu: u32, qdisc: &str, offloads: bool) -> Interface {
        let on = Feature {
            on: offloads,
            fixed: false,
        };
        Interface {
            name: name.into(),
            loopback: false,
            operstate: "up".into(),
            mtu: Some(mtu),
            speed_mbps: Some(100_000),
            tx_queue_len: Some(10_000),
            qdisc: Probe::Known(Qdisc {
                root: qdisc.into(),
                children: vec![],
            }),
            offloads: Probe::Known(Offloads {
                tso: Some(on),
                gso: Some(on),
                gro: Some(on),
            }),
        }
    }

    fn lo() -> Interface {
        Interface {
            name: "lo".into(),
            loopback: true,
            operstate: "unknown".into(),
            mtu: Some(65_536),
            speed_mbps: None,
            tx_queue_len: Some(1000),
            qdisc: Probe::Known(Qdisc {
                root: "noqueue".into(),
                children: vec![],
            }),
            offloads: Probe::Unknown("ethtool not installed".into()),
        }
    }

    /// The project's test VM as shipped (notes/transfer-tools.md §6).
    fn vm_defaults() -> HostSnapshot {
        HostSnapshot {
            kernel_release: Some("6.18.44".into()),
            rmem_max: Some(4_194_304),
            wmem_max: Some(4_194_304),
            tcp_rmem: Some([4096, 131_072, 33_554_432]),
            tcp_wmem: Some([4096, 16_384, 4_194_304]),
            available_cc: vec!["reno".into(), "bbr".into(), "cubic".into()],
            allowed_cc: vec!["reno".into(), "bbr".into()],
            default_cc: Some("bbr".into()),
            window_scaling: Some(true),
            timestamps: Some(true),
            sack: Some(true),
            mtu_probing: Some(0),
            no_metrics_save: Some(false),
            default_qdisc: Some("pfifo_fast".into()),
            netdev_max_backlog: Some(1000),
            notsent_lowat: Some(4_294_967_295),
            interfaces: vec![
                Interface {
                    speed_mbps: None,
                    tx_queue_len: Some(1000),
                    offloads: Probe::Unknown("ethtool not installed".into()),
                    ..iface("eth0", 1400, "pfifo_fast", true)
                },
                lo(),
            ],
            net_admin: false,
            problems: vec![],
        }
    }

    /// fasterdata's "10G NIC with paths up to 200 ms" test-host set plus
    /// jumbo frames, fq and offloads.
    fn well_tuned() -> HostSnapshot {
        HostSnapshot {
            rmem_max: Some(536_870_912),
            wmem_max: Some(536_870_912),
            tcp_rmem: Some([4096, 87_380, 536_870_912]),
            tcp_wmem: Some([4096, 65_536, 536_870_912]),
            mtu_probing: Some(1),
            no_metrics_save: Some(true),
            default_qdisc: Some("fq".into()),
            netdev_max_backlog: Some(250_000),
            allowed_cc: vec!["reno".into(), "bbr".into(), "cubic".into()],
            interfaces: vec![iface("eth0", 9000, "fq", true), lo()],
            ..vm_defaults()
        }
    }

    fn target() -> Target {
        Target {
            rate_bps: G10,
            rtt: MS_120,
            streams: 1,
        }
    }

    fn find<'a>(findings: &'a [Finding], check: &str) -> &'a Finding {
        findings
            .iter()
            .find(|f| f.check == check)
            .unwrap_or_else(|| panic!("no finding {check:?} in {findings:#?}"))
    }

    #[test]
    fn buffer_sysctl_values_round_up_to_powers_of_two() {
        assert_eq!(buffer_sysctl_value(300_000_000), 536_870_912);
        assert_eq!(buffer_sysctl_value(67_108_864), 67_108_864);
        assert_eq!(buffer_sysctl_value(0), 1);
        assert_eq!(buffer_sysctl_value(3_000_000_000), MAX_BUFFER_SYSCTL);
        assert_eq!(buffer_sysctl_value(u64::MAX), MAX_BUFFER_SYSCTL);
    }

    #[test]
    fn vm_defaults_fail_10g_120ms_with_exact_fixes() {
        let f = evaluate(&vm_defaults(), &target());
        let rmem = find(&f, "net.core.rmem_max");
        assert_eq!(rmem.status, Status::Fail);
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=536870912")
        );
        // 4 MiB / 120 ms = 280 Mbit/s.
        assert!(
            rmem.observed.contains("279 Mbit/s") || rmem.observed.contains("280 Mbit/s"),
            "{}",
            rmem.observed
        );
        assert_eq!(find(&f, "net.core.wmem_max").status, Status::Fail);
        let tcp_rmem = find(&f, "net.ipv4.tcp_rmem");
        assert_eq!(tcp_rmem.status, Status::Fail);
        assert_eq!(
            tcp_rmem.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 131072 536870912\"")
        );
        assert_eq!(
            find(&f, "net.ipv4.tcp_wmem").fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_wmem=\"4096 16384 536870912\"")
        );
        assert_eq!(find(&f, "SO_*BUFFORCE").status, Status::Info);
        assert!(any_fail(&f));
        // Not root: cubic is loaded but not allowed.
        let allowed = find(&f, "net.ipv4.tcp_allowed_congestion_control");
        assert_eq!(
            allowed.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_allowed_congestion_control=\"reno bbr cubic\"")
        );
        let mtu = find(&f, "eth0 mtu");
        assert_eq!(mtu.status, Status::Warn);
        assert_eq!(mtu.fix.as_deref(), Some("ip link set dev eth0 mtu 9000"));
        let q = find(&f, "eth0 qdisc");
        assert_eq!(q.status, Status::Warn);
        assert_eq!(q.fix.as_deref(), Some("tc qdisc replace dev eth0 root fq"));
        let off = find(&f, "eth0 offloads");
        assert_eq!(off.status, Status::Info);
        assert_eq!(off.observed, "unknown (ethtool not installed)");
        assert_eq!(find(&f, "eth0 speed").status, Status::Info);
        // Loopback is never checked.
        assert!(f.iter().all(|f| !f.check.starts_with("lo ")));
        assert_eq!(find(&f, "net.ipv4.tcp_mtu_probing").status, Status::Ok);
        assert_eq!(find(&f, "streams (RFC 7323 window)").status, Status::Ok);
    }

    #[test]
    fn well_tuned_host_is_all_ok() {
        let f = evaluate(&well_tuned(), &target());
        let not_ok: Vec<&Finding> = f.iter().filter(|f| f.status != Status::Ok).collect();
        assert!(not_ok.is_empty(), "{not_ok:#?}");
        assert!(f.iter().all(|f| f.fix.is_none()));
        assert_eq!(write_sysctl_file(&f), "");
    }

    #[test]
    fn root_is_told_longhaul_is_not_blocked() {
        let snap = HostSnapshot {
            net_admin: true,
            ..vm_defaults()
        };
        let f = evaluate(&snap, &target());
        let force = find(&f, "SO_*BUFFORCE");
        assert_eq!(force.status, Status::Info);
        assert!(force.why.contains("not blocked"), "{}", force.why);
        // Root may pick any loaded algorithm.
        assert!(
            !f.iter()
                .any(|f| f.check == "net.ipv4.tcp_allowed_congestion_control")
        );
    }

    #[test]
    fn core_cap_between_one_and_two_bdp_warns() {
        // BDP 150 MB: 256 MiB covers one BDP but not two.
        let snap = HostSnapshot {
            rmem_max: Some(268_435_456),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let rmem = find(&f, "net.core.rmem_max");
        assert_eq!(rmem.status, Status::Warn);
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=536870912")
        );
    }

    #[test]
    fn short_autotuning_warns_when_the_core_cap_covers_it() {
        let snap = HostSnapshot {
            tcp_rmem: Some([4096, 87_380, 33_554_432]),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let r = find(&f, "net.ipv4.tcp_rmem");
        assert_eq!(r.status, Status::Warn);
        assert_eq!(
            r.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 87380 536870912\"")
        );
        assert!(!any_fail(&f));
    }

    #[test]
    fn window_scaling_off_fails() {
        let snap = HostSnapshot {
            window_scaling: Some(false),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let w = find(&f, "net.ipv4.tcp_window_scaling");
        assert_eq!(w.status, Status::Fail);
        assert_eq!(
            w.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_window_scaling=1")
        );
        // 65,535 B / 120 ms = 4.37 Mbit/s.
        assert!(w.observed.contains("4.37 Mbit/s"), "{}", w.observed);
    }

    #[test]
    fn congestion_control_rules() {
        let reno = HostSnapshot {
            available_cc: vec!["reno".into(), "cubic".into()],
            default_cc: Some("reno".into()),
            net_admin: true,
            ..well_tuned()
        };
        let f = evaluate(&reno, &target());
        let cc = find(&f, "net.ipv4.tcp_congestion_control");
        assert_eq!(cc.status, Status::Warn);
        assert_eq!(
            cc.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_congestion_control=cubic")
        );
        let bbr = find(&f, "tcp_bbr module");
        assert_eq!(bbr.status, Status::Info);
        assert_eq!(bbr.fix.as_deref(), Some("modprobe tcp_bbr"));

        let only_reno = HostSnapshot {
            available_cc: vec!["reno".into()],
            ..reno
        };
        let f = evaluate(&only_reno, &target());
        let cc = find(&f, "net.ipv4.tcp_congestion_control");
        assert_eq!(cc.status, Status::Fail);
        assert_eq!(
            cc.fix.as_deref(),
            Some("modprobe tcp_bbr\nsysctl -w net.ipv4.tcp_congestion_control=bbr")
        );
    }

    #[test]
    fn qdisc_is_a_warning_except_for_bbr_before_4_20() {
        let mut snap = vm_defaults();
        assert_eq!(
            find(&evaluate(&snap, &target()), "eth0 qdisc").status,
            Status::Warn
        );
        snap.kernel_release = Some("4.19.0-27-amd64".into());
        assert_eq!(
            find(&evaluate(&snap, &target()), "eth0 qdisc").status,
            Status::Fail
        );
        snap.default_cc = Some("cubic".into());
        assert_eq!(
            find(&evaluate(&snap, &target()), "eth0 qdisc").status,
            Status::Warn
        );
        assert_eq!(kernel_version("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(kernel_version("4.19.0-27-amd64"), Some((4, 19)));
        assert_eq!(kernel_version("x"), None);
    }

    #[test]
    fn mq_with_fq_children_counts_as_fq() {
        let q = parse_tc_qdisc(
            "qdisc mq 0: root \nqdisc fq 0: parent :2 limit 10000p\n\
             qdisc fq 0: parent :1 limit 10000p\nqdisc clsact ffff: parent ffff:fff1\n",
        )
        .unwrap();
        assert_eq!(q.root, "mq");
        assert_eq!(q.children, ["fq", "fq"]);
        assert!(q.is_fq());
        assert_eq!(q.to_string(), "mq (2 × fq)");
        let q = parse_tc_qdisc(
            "qdisc pfifo_fast 0: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n",
        )
        .unwrap();
        assert_eq!(q.root, "pfifo_fast");
        assert!(!q.is_fq());
        assert!(parse_tc_qdisc("").is_none());
    }

    #[test]
    fn ethtool_output_is_parsed() {
        let out = "Features for eth0:\nrx-checksumming: on\n\
                   tcp-segmentation-offload: off\n\ttx-tcp-segmentation: off\n\
                   generic-segmentation-offload: on\ngeneric-receive-offload: off [fixed]\n";
        let o = parse_ethtool_features(out);
        assert_eq!(
            o.tso,
            Some(Feature {
                on: false,
                fixed: false
            })
        );
        assert_eq!(
            o.gso,
            Some(Feature {
                on: true,
                fixed: false
            })
        );
        assert_eq!(
            o.gro,
            Some(Feature {
                on: false,
                fixed: true
            })
        );

        let mut snap = well_tuned();
        snap.interfaces[0].offloads = Probe::Known(o);
        let f = evaluate(&snap, &target());
        let off = find(&f, "eth0 offloads");
        assert_eq!(off.status, Status::Warn);
        // GRO is fixed off: no command can turn it on.
        assert_eq!(off.fix.as_deref(), Some("ethtool -K eth0 tso on"));
        assert_eq!(off.observed, "tso off, gso on, gro off [fixed]");
    }

    #[test]
    fn jumbo_frames_want_mtu_probing() {
        let snap = HostSnapshot {
            mtu_probing: Some(0),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let p = find(&f, "net.ipv4.tcp_mtu_probing");
        assert_eq!(p.status, Status::Warn);
        assert_eq!(
            p.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_mtu_probing=1")
        );
    }

    #[test]
    fn slow_nic_and_small_mtu_below_10g() {
        let mut snap = well_tuned();
        snap.interfaces[0].speed_mbps = Some(1000);
        snap.interfaces[0].mtu = Some(1500);
        let t = Target {
            rate_bps: 5_000_000_000,
            ..target()
        };
        let f = evaluate(&snap, &t);
        assert_eq!(find(&f, "eth0 speed").status, Status::Warn);
        // Below 10G jumbo frames are a suggestion.
        assert_eq!(find(&f, "eth0 mtu").status, Status::Info);
        assert!(!f.iter().any(|f| f.check == "net.core.netdev_max_backlog"));
    }

    #[test]
    fn streams_needed_past_the_1_gib_window() {
        // 100 Gbit/s at 120 ms needs 2 streams (71.6 Gbit/s each at most).
        let t = Target {
            rate_bps: 100_000_000_000,
            rtt: MS_120,
            streams: 1,
        };
        let f = evaluate(&well_tuned(), &t);
        let s = find(&f, "streams (RFC 7323 window)");
        assert_eq!(s.status, Status::Warn);
        assert_eq!(s.wanted, "≥ 2");
        assert!(s.observed.contains("71.6 Gbit/s"), "{}", s.observed);
        // The buffer wanted per stream stops at the 1 GiB window.
        let rmem = find(&f, "net.core.rmem_max");
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=1073741824")
        );
        assert!(rmem.wanted.contains("the 1 GiB window"), "{}", rmem.wanted);
        let tcp = find(&f, "net.ipv4.tcp_rmem");
        assert_eq!(
            tcp.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 87380 2147483647\"")
        );
        let two = Target { streams: 2, ..t };
        let f = evaluate(&well_tuned(), &two);
        assert_eq!(find(&f, "streams (RFC 7323 window)").status, Status::Info);
    }

    #[test]
    fn no_interface_up_is_reported() {
        let snap = HostSnapshot {
            interfaces: vec![lo()],
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        assert_eq!(find(&f, "interfaces").status, Status::Info);
    }

    #[test]
    fn unknown_values_are_info_not_failures() {
        let snap = HostSnapshot::default();
        let f = evaluate(&snap, &target());
        assert!(!any_fail(&f), "{f:#?}");
    }

    #[test]
    fn sysctl_file_collects_every_sysctl_fix() {
        let f = evaluate(&vm_defaults(), &target());
        let conf = write_sysctl_file(&f);
        assert!(
            conf.starts_with("# /etc/sysctl.d/90-longhaul.conf"),
            "{conf}"
        );
        for line in [
            "net.core.rmem_max = 536870912",
            "net.core.wmem_max = 536870912",
            "net.ipv4.tcp_rmem = 4096 131072 536870912",
            "net.ipv4.tcp_wmem = 4096 16384 536870912",
            "net.core.default_qdisc = fq",
            "net.ipv4.tcp_no_metrics_save = 1",
            "net.core.netdev_max_backlog = 250000",
            "net.ipv4.tcp_allowed_congestion_control = reno bbr cubic",
        ] {
            assert!(
                conf.lines().any(|l| l == line),
                "missing {line:?} in\n{conf}"
            );
        }
        // Not sysctls: left to the "To fix" list.
        assert!(!conf.contains("ip link"));
        assert!(!conf.contains("tc qdisc"));
    }

    #[test]
    fn status_orders_by_severity() {
        assert!(
            Status::Ok < Status::Info && Status::Info < Status::Warn && Status::Warn < Status::Fail
        );
    }

    #[test]
    fn gather_reads_this_host_without_failing() {
        let snap = HostSnapshot::gather();
        // /proc/sys is always there on Linux, even in containers.
        assert!(snap.kernel_release.is_some(), "{:?}", snap.problems);
        assert!(snap.interfaces.iter().any(|i| i.loopback), "{snap:#?}");
    }
}
