//! `calc bdp`: the bandwidth-delay product of a path, the window each stream needs, whether one stream
//! fits under the 1 GiB RFC 7323 window, the buffer sysctls that allow the window, and one stream's
//! ceiling at the windows that commonly bind.

use longhaul_units::models::{
    MAX_TCP_WINDOW, bdp_bytes, bdp_segments, max_window_ceiling_bps, streams_needed,
    streams_needed_for_window, window_ceiling_bps,
};
use longhaul_units::{fmt_duration, fmt_rate};
use serde::Serialize;

use super::{PathInputs, both_sizes, rate_text};
use crate::tuning::Target;

/// The ceiling one stream has with a given window.
#[derive(Debug, Serialize)]
pub struct Ceiling {
    /// What sets this window.
    pub what: &'static str,
    /// The window, bytes.
    pub window_bytes: u64,
    /// The window as the table labels it ("4 MiB").
    pub window: &'static str,
    /// One stream's ceiling at the path's RTT.
    pub ceiling_bps: u64,
    /// [`Ceiling::ceiling_bps`] for display ("unbounded" at `u64::MAX`).
    pub ceiling: String,
    /// The ceiling as a share of the path's rate, %.
    pub percent_of_rate: f64,
    /// Streams needed at this window to fill the path.
    pub streams_needed: u64,
}

/// What `calc bdp` reports.
#[derive(Debug, Serialize)]
pub struct BdpReport {
    /// The path's rate, bit/s.
    pub rate_bps: u64,
    /// The rate for display.
    pub rate: String,
    /// The path's round-trip time, ns.
    pub rtt_ns: u64,
    /// The RTT for display.
    pub rtt: String,
    /// Parallel streams sharing the rate.
    pub streams: u32,
    /// Segment payload, bytes.
    pub mss_bytes: u64,
    /// The whole path's BDP, bytes.
    pub bdp_bytes: u64,
    /// The BDP for display, SI and binary ("19.74 MB (18.83 MiB)").
    pub bdp: String,
    /// One stream's share of the BDP, bytes.
    pub bdp_per_stream_bytes: u64,
    /// The per-stream BDP for display.
    pub bdp_per_stream: String,
    /// Window per stream to just fill the path (1 × BDP).
    pub window_1x_bytes: u64,
    /// The 1 × BDP window for display.
    pub window_1x: String,
    /// Window per stream longhaul asks for (2 × BDP).
    pub window_2x_bytes: u64,
    /// The 2 × BDP window for display.
    pub window_2x: String,
    /// Segments of `mss_bytes` in flight on the whole path.
    pub segments_in_flight: f64,
    /// The RFC 7323 maximum window, bytes.
    pub max_window_bytes: u64,
    /// The rate the maximum window allows one stream, bit/s.
    pub max_window_ceiling_bps: u64,
    /// That rate for display.
    pub max_window_ceiling: String,
    /// Whether one stream's window can cover the whole BDP.
    pub one_stream_fits: bool,
    /// Streams needed when every stream has the maximum window.
    pub streams_needed: u64,
    /// `net.core.rmem_max`/`wmem_max` that let each stream request 2 × BDP.
    pub core_mem_max_bytes: u64,
    /// `tcp_rmem[2]`/`tcp_wmem[2]` that let autotuning reach 1 × BDP of window.
    pub tcp_mem_max_bytes: u64,
    /// The `sysctl -w` commands that set both.
    pub sysctl_commands: Vec<String>,
    /// One stream's ceiling at [`COMMON_WINDOWS`].
    pub ceilings: Vec<Ceiling>,
}

/// Windows that commonly cap a stream (RFC 7323, socket(7), OpenSSH's `channels.h`), as
/// (label, what sets it, bytes).
/// setsockopt clamps a request at rmem_max and doubles it, about half of which is window, so a cap of
/// N bytes gives about N of window; an autotuned buffer also gives about half its maximum.
pub const COMMON_WINDOWS: [(&str, &str, u64); 6] = [
    (
        "64 KiB",
        "no window scaling (RFC 7323 off): 65,535 B",
        65_535,
    ),
    (
        "208 KiB",
        "rmem_max = 212,992, the long-standing Linux default",
        212_992,
    ),
    (
        "2 MiB",
        "OpenSSH channel window (scp, rsync over ssh)",
        2 << 20,
    ),
    (
        "4 MiB",
        "rmem_max/wmem_max = 4 MiB (the test VM's default)",
        4 << 20,
    ),
    (
        "16 MiB",
        "autotuning with tcp_rmem[2] = 32 MiB (half is window)",
        16 << 20,
    ),
    (
        "1 GiB",
        "RFC 7323 maximum window: 65,535 × 2^14 B",
        MAX_TCP_WINDOW,
    ),
];

/// Computes the `calc bdp` report for a path.
pub fn report(p: &PathInputs) -> BdpReport {
    let total = bdp_bytes(p.rate_bps, p.rtt);
    let target = Target {
        rate_bps: p.rate_bps,
        rtt: p.rtt,
        streams: p.streams,
    };
    let per_stream = target.bdp_per_stream();
    let two = per_stream.saturating_mul(2);
    let max_ceiling = max_window_ceiling_bps(p.rtt);
    // The same values as the fixes of `longhaul doctor` (tuning::Target): the core caps hold the
    // wanted window (2 × BDP per stream, at most the 1 GiB window), autotuning holds 2 × BDP since
    // about half of an autotuned buffer is window.
    let core = target.core_sysctl_value();
    let tcp = target.autotune_sysctl_value();
    let sysctl_commands = vec![
        format!("sysctl -w net.core.rmem_max={core} net.core.wmem_max={core}"),
        format!(
            "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {tcp}\" net.ipv4.tcp_wmem=\"4096 16384 {tcp}\""
        ),
    ];
    let ceilings = COMMON_WINDOWS
        .into_iter()
        .map(|(label, what, window)| {
            let ceiling = window_ceiling_bps(window, p.rtt);
            Ceiling {
                what,
                window_bytes: window,
                window: label,
                ceiling_bps: ceiling,
                ceiling: rate_text(ceiling),
                percent_of_rate: ceiling as f64 * 100.0 / p.rate_bps as f64,
                streams_needed: streams_needed_for_window(p.rate_bps, p.rtt, window),
            }
        })
        .collect();
    BdpReport {
        rate_bps: p.rate_bps,
        rate: fmt_rate(p.rate_bps),
        rtt_ns: p.rtt.0,
        rtt: fmt_duration(p.rtt),
        streams: p.streams,
        mss_bytes: p.mss,
        bdp_bytes: total,
        bdp: both_sizes(total),
        bdp_per_stream_bytes: per_stream,
        bdp_per_stream: both_sizes(per_stream),
        window_1x_bytes: per_stream,
        window_1x: both_sizes(per_stream),
        window_2x_bytes: two,
        window_2x: both_sizes(two),
        segments_in_flight: bdp_segments(p.rate_bps, p.rtt, p.mss),
        max_window_bytes: MAX_TCP_WINDOW,
        max_window_ceiling_bps: max_ceiling,
        max_window_ceiling: rate_text(max_ceiling),
        one_stream_fits: total <= MAX_TCP_WINDOW,
        streams_needed: streams_needed(p.rate_bps, p.rtt),
        core_mem_max_bytes: core,
        tcp_mem_max_bytes: tcp,
        sysctl_commands,
        ceilings,
    }
}

#[cfg(test)]
mod tests {
    use longhaul_units::Nanos;

    use super::*;

    /// Seed 002: 9.29 Gbit/s × 17 ms = 19.74 MB; 2 × BDP rounds up to 64 MiB.
    #[test]
    fn report_of_seed_002() {
        let r = report(&PathInputs {
            rate_bps: 9_290_000_000,
            rtt: Nanos::from_millis(17),
            mss: 1460,
            streams: 1,
        });
        assert_eq!(r.bdp_bytes, 19_741_250);
        assert_eq!(r.bdp, "19.74 MB (18.83 MiB)");
        assert_eq!(r.window_2x_bytes, 39_482_500);
        assert_eq!(r.core_mem_max_bytes, 67_108_864);
        assert_eq!(r.tcp_mem_max_bytes, 67_108_864);
        assert_eq!(r.ceilings.len(), COMMON_WINDOWS.len());
    }
}
