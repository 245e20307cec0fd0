//! longhaul-isolate: the pure part of `longhaul isolate` (issue 17 item 3), fault isolation on a
//! long path by bisection over reflectors: the probes on the wire ([`icmp`]), the figures of one
//! reflector and the verdict on them ([`figures`]), the bisection and its confidence ([`bisect`]),
//! and the report ([`Report`]). Depends on `longhaul-packet` (the Internet checksum), serde and
//! thiserror; `longhaul-engine::isolate` sends the probes over raw ICMP sockets and drives it.
//!
//! Contract: no sockets, threads or clock; times are passed in as ns. Every parser of received
//! bytes returns a value for any input and never panics (fuzzed: `fuzz/fuzz_targets/icmp_reply.rs`).

pub mod bisect;
pub mod figures;
pub mod icmp;

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

pub use bisect::{Bisection, Outcome, confidence};
pub use figures::{FaultKind, Figures, Observations, Probe, Thresholds};

/// A reflector on the path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reflector {
    /// Its hop number (the TTL that reached it), when the path was discovered.
    pub hop: Option<u8>,
    /// Its address.
    pub addr: IpAddr,
    /// Its round-trip time when found, ms.
    pub rtt_ms: Option<f64>,
}

/// One measurement in the order the search made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Index into [`Report::reflectors`].
    pub reflector: usize,
    /// Its address.
    pub addr: IpAddr,
    /// What it showed.
    pub figures: Figures,
}

/// The segment the fault lies on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// The last clean reflector (`None`: this host).
    pub after: Option<IpAddr>,
    /// The first faulty reflector.
    pub at: IpAddr,
    /// Their hop numbers, when the path was discovered (0 for this host).
    pub after_hop: Option<u8>,
    /// The first faulty reflector's hop number.
    pub at_hop: Option<u8>,
    /// What the first faulty reflector showed.
    pub kind: FaultKind,
    /// How sure, in [0, 1] ([`bisect::confidence`]).
    pub confidence: f64,
}

/// What `longhaul isolate` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The far end.
    pub target: IpAddr,
    /// The rate the probe trains were sent at, bit/s (IP bytes).
    pub rate_bps: u64,
    /// IP bytes of each probe.
    pub probe_bytes: u32,
    /// Probes per measurement.
    pub probes: u32,
    /// Trains per measurement.
    pub trains: u32,
    /// The thresholds the verdicts used.
    pub thresholds: Thresholds,
    /// The reflectors, in path order (the far end last).
    pub reflectors: Vec<Reflector>,
    /// The measurements, in the order they were made.
    pub measured: Vec<Measured>,
    /// The segment the fault lies on; `None`: the far end was clean at this rate.
    pub fault: Option<Fault>,
    /// Wall-clock time of the whole run, s.
    pub elapsed_s: f64,
}
