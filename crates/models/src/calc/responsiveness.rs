//! `calc responsiveness`: the time Reno needs to regain full rate after one loss,
//! ρ = C·RTT²/(2·MSS), with CUBIC's K and Scalable TCP's recovery for comparison.

use longhaul_units::models::{
    CUBIC_BETA, CUBIC_C, SCALABLE_A, SCALABLE_B, bdp_segments, cubic_k, responsiveness,
    scalable_recovery_rtts,
};
use longhaul_units::{Nanos, fmt_duration, fmt_rate};
use serde::Serialize;

/// The MSS of jumbo frames (MTU 9000), for the comparison row.
pub const JUMBO_MSS: u64 = 8960;

/// What `calc responsiveness` reports.
#[derive(Debug, Serialize)]
pub struct ResponsivenessReport {
    /// The rate before the loss, bit/s.
    pub rate_bps: u64,
    /// The rate for display.
    pub rate: String,
    /// Round-trip time, ns.
    pub rtt_ns: u64,
    /// The RTT for display.
    pub rtt: String,
    /// Segment payload, bytes.
    pub mss_bytes: u64,
    /// The window before the loss, segments: rate × RTT / (8 × MSS).
    pub window_segments: f64,
    /// Reno: ρ = C × RTT² / (2 × MSS × 8).
    pub reno_ns: u64,
    /// Reno's recovery time for display.
    pub reno: String,
    /// Round trips Reno needs: W / 2.
    pub reno_rtts: f64,
    /// CUBIC's K for that window (RFC 9438 §4.2).
    pub cubic_k_ns: u64,
    /// K for display.
    pub cubic_k: String,
    /// Scalable TCP: 13.42 round trips whatever the rate (Kelly 2003).
    pub scalable_rtts: f64,
    /// Scalable TCP's recovery time, ns.
    pub scalable_ns: u64,
    /// Scalable TCP's recovery time for display.
    pub scalable: String,
    /// Reno with jumbo frames (MSS 8960), for comparison.
    pub reno_jumbo_ns: u64,
    /// Reno's recovery time with jumbo frames for display.
    pub reno_jumbo: String,
}

/// Computes the `calc responsiveness` report for a stream at `rate_bps` over `rtt` with `mss`-byte
/// segments.
pub fn report(rate_bps: u64, rtt: Nanos, mss: u64) -> ResponsivenessReport {
    let w = bdp_segments(rate_bps, rtt, mss);
    let reno = responsiveness(rate_bps, rtt, mss);
    let k = cubic_k(w, CUBIC_BETA, CUBIC_C);
    let n = scalable_recovery_rtts(SCALABLE_A, SCALABLE_B);
    let scalable = Nanos::from_secs_f64(n * rtt.as_secs_f64());
    let jumbo = responsiveness(rate_bps, rtt, JUMBO_MSS);
    ResponsivenessReport {
        rate_bps,
        rate: fmt_rate(rate_bps),
        rtt_ns: rtt.0,
        rtt: fmt_duration(rtt),
        mss_bytes: mss,
        window_segments: w,
        reno_ns: reno.0,
        reno: fmt_duration(reno),
        reno_rtts: w / 2.0,
        cubic_k_ns: k.0,
        cubic_k: fmt_duration(k),
        scalable_rtts: n,
        scalable_ns: scalable.0,
        scalable: fmt_duration(scalable),
        reno_jumbo_ns: jumbo.0,
        reno_jumbo: fmt_duration(jumbo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C·RTT²/(2·MSS) at 10 Gbit/s, 120 ms, MSS 1460 → 6,164 s; K = 42.6 s (RFC 9438 §4.2).
    #[test]
    fn reno_at_10g_120ms() {
        let r = report(10_000_000_000, Nanos::from_millis(120), 1460);
        assert_eq!(r.reno, "6164 s (1 h 43 min)");
        assert_eq!(r.cubic_k, "42.6 s");
        assert_eq!(r.reno_jumbo, "1004 s (16 min 44 s)");
    }
}
