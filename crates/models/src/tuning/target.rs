//! The path a host should be able to fill, and what it asks of the host: each stream's share of the
//! bandwidth-delay product, the window longhaul wants per stream, and the buffer sysctls that allow it.

use longhaul_units::{
    MAX_TCP_WINDOW, Nanos, bdp_bytes, fmt_duration, fmt_rate, window_ceiling_bps,
};
use serde::Serialize;

use super::buffers::{MAX_BUFFER_SYSCTL, buffer_sysctl_value};

/// Paths at or above this rate get the 10G recommendations (jumbo frames,
/// `netdev_max_backlog`), as fasterdata tiers its advice.
pub(crate) const TEN_GBIT: u64 = 10_000_000_000;

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
    pub(crate) fn streams(&self) -> u64 {
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

    /// The value of `net.core.rmem_max`/`wmem_max` that lets a socket get the
    /// [wanted window](Target::wanted_window): `setsockopt(SO_RCVBUF, x)`
    /// clamps x at the cap *before* doubling it (socket(7)), so the cap must
    /// hold the window itself; rounded up by [`buffer_sysctl_value`].
    pub fn core_sysctl_value(&self) -> u64 {
        buffer_sysctl_value(self.wanted_window())
    }

    /// The autotuning maximum (`tcp_rmem[2]`/`tcp_wmem[2]`) this target
    /// wants, bytes: 2 × BDP per stream, about half of which autotuning turns
    /// into window, so autotuned sockets get at least one BDP; at most the
    /// sysctls' int limit.
    pub fn autotune_max(&self) -> u64 {
        self.bdp_per_stream()
            .saturating_mul(2)
            .min(MAX_BUFFER_SYSCTL)
    }

    /// [`Target::autotune_max`] as a sysctl value, rounded up by
    /// [`buffer_sysctl_value`].
    pub fn autotune_sysctl_value(&self) -> u64 {
        buffer_sysctl_value(self.autotune_max())
    }

    /// The rate all streams together reach when each has `window` bytes.
    pub(crate) fn ceiling(&self, window: u64) -> u64 {
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
