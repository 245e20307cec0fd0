//! `calc mathis`: Mathis et al. 1997, Reno's throughput ceiling for a loss rate or the loss rate a rate
//! needs, with the average windows of HighSpeed TCP and CUBIC at the same loss for comparison.

use longhaul_units::models::{
    CUBIC_BETA, CUBIC_C, bdp_segments, cubic_avg_window, hstcp_window, mathis_loss_for_rate,
    mathis_rate_bps, reno_avg_window,
};
use longhaul_units::{Nanos, fmt_duration};
use serde::Serialize;

use super::{count, rate_text};

/// What the Mathis calculation starts from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MathisGiven {
    /// A loss probability per packet: report the ceiling it allows.
    Loss(f64),
    /// A rate, bit/s: report the loss probability it needs.
    Rate(u64),
}

/// Average windows (segments) of three response functions at one loss rate,
/// and the rate each carries at the path's RTT and MSS.
#[derive(Debug, Serialize)]
pub struct ResponseWindows {
    /// The loss probability the windows are for.
    pub loss_p: f64,
    /// Reno, W = 1.2/√p (RFC 3649 and RFC 9438 tables).
    pub reno_segments: f64,
    /// The rate Reno's window carries, bit/s.
    pub reno_bps: u64,
    /// HighSpeed TCP, W = 0.12/p^0.835 (RFC 3649 §5).
    pub hstcp_segments: f64,
    /// The rate HighSpeed TCP's window carries, bit/s.
    pub hstcp_bps: u64,
    /// CUBIC, W = 1.054 × RTT^0.75 / p^0.75 (RFC 9438 §5.2).
    pub cubic_segments: f64,
    /// The rate CUBIC's window carries, bit/s.
    pub cubic_bps: u64,
}

/// The loss rate each response function tolerates at a given window
/// (RFC 9438 table 3 style).
#[derive(Debug, Serialize)]
pub struct LossNeeded {
    /// The window, segments.
    pub window_segments: f64,
    /// Reno's tolerable loss probability.
    pub reno_p: f64,
    /// HighSpeed TCP's tolerable loss probability.
    pub hstcp_p: f64,
    /// CUBIC's tolerable loss probability.
    pub cubic_p: f64,
}

/// What `calc mathis` reports.
#[derive(Debug, Serialize)]
pub struct MathisReport {
    /// The model and its formula.
    pub model: &'static str,
    /// Where the model does not apply.
    pub caveat: &'static str,
    /// Segment payload, bytes.
    pub mss_bytes: u64,
    /// Round-trip time, ns.
    pub rtt_ns: u64,
    /// The RTT for display.
    pub rtt: String,
    /// The Mathis constant C.
    pub c: f64,
    /// "ceiling" (from --loss) or "loss_for_rate" (from --rate).
    pub mode: &'static str,
    /// The loss probability (given, or needed for the rate).
    pub loss_p: f64,
    /// The loss for display, with the packets between two losses.
    pub loss: String,
    /// The ceiling (mode ceiling) or the given rate (mode loss_for_rate).
    pub rate_bps: u64,
    /// The rate for display ("unbounded" at `u64::MAX`).
    pub rate: String,
    /// Packets sent between two losses, 1/p.
    pub packets_between_losses: f64,
    /// At `rate_bps`, how long between two losses.
    pub seconds_between_losses: f64,
    /// That time for display.
    pub between_losses: String,
    /// The response functions' windows at `loss_p`.
    pub windows: ResponseWindows,
    /// From a rate: the loss each response function tolerates at the BDP window.
    pub loss_needed: Option<LossNeeded>,
}

/// The rate a window of `segments` × `mss` carries per `rtt`, bit/s.
fn window_rate(segments: f64, mss: u64, rtt: Nanos) -> u64 {
    (segments * mss as f64 * 8.0 / rtt.as_secs_f64()) as u64
}

fn windows_at(p: f64, mss: u64, rtt: Nanos) -> ResponseWindows {
    let reno = reno_avg_window(p);
    let hstcp = hstcp_window(p);
    let cubic = cubic_avg_window(rtt, p, CUBIC_C, CUBIC_BETA);
    ResponseWindows {
        loss_p: p,
        reno_segments: reno,
        reno_bps: window_rate(reno, mss, rtt),
        hstcp_segments: hstcp,
        hstcp_bps: window_rate(hstcp, mss, rtt),
        cubic_segments: cubic,
        cubic_bps: window_rate(cubic, mss, rtt),
    }
}

/// Inverts the three response functions at window `w` segments:
/// Reno p = (1.2/W)²; HSTCP p = (0.12/W)^(1/0.835); CUBIC
/// p = (k/W)^(4/3) × RTT with k = ∜(C(3+β)/(4(1−β))) (RFC 9438 §5.2).
/// 10G, 100 ms, 1500 B (W = 83,333) gives RFC 9438 table 3: 2.0e-10,
/// 1.0e-7, 2.9e-8.
fn loss_needed(w: f64, rtt: Nanos) -> LossNeeded {
    let k = (CUBIC_C * (3.0 + CUBIC_BETA) / (4.0 * (1.0 - CUBIC_BETA))).powf(0.25);
    LossNeeded {
        window_segments: w,
        reno_p: (1.2 / w).powi(2),
        hstcp_p: (0.12 / w).powf(1.0 / 0.835),
        cubic_p: (k / w).powf(4.0 / 3.0) * rtt.as_secs_f64(),
    }
}

/// "2.05e-10 (one loss per 4.88e9 packets)".
fn loss_text(p: f64) -> String {
    format!("{p:.2e} (one loss per {} packets)", count(1.0 / p))
}

/// Computes the `calc mathis` report: segments of `mss` bytes, round trip `rtt`, Mathis constant `c`.
pub fn report(mss: u64, rtt: Nanos, c: f64, given: MathisGiven) -> MathisReport {
    let (mode, p, rate) = match given {
        MathisGiven::Loss(p) => {
            let bps = mathis_rate_bps(mss, rtt, p, c);
            (
                "ceiling",
                p,
                if bps.is_finite() {
                    bps as u64
                } else {
                    u64::MAX
                },
            )
        }
        MathisGiven::Rate(bps) => ("loss_for_rate", mathis_loss_for_rate(bps, mss, rtt, c), bps),
    };
    let packets = 1.0 / p;
    let pps = rate as f64 / (8.0 * mss as f64);
    let secs = packets / pps;
    let loss_needed = match given {
        MathisGiven::Rate(bps) => Some(loss_needed(bdp_segments(bps, rtt, mss), rtt)),
        MathisGiven::Loss(_) => None,
    };
    MathisReport {
        model: "Mathis et al. 1997, BW = (MSS × 8 / RTT) × C / √p: the Reno reference",
        caveat: "CUBIC and BBR do not follow 1/√p (Mathis & Mahdavi, \"Deprecating the TCP \
                 Macroscopic Model\", CCR 49(5), 2019)",
        mss_bytes: mss,
        rtt_ns: rtt.0,
        rtt: fmt_duration(rtt),
        c,
        mode,
        loss_p: p,
        loss: loss_text(p),
        rate_bps: rate,
        rate: rate_text(rate),
        packets_between_losses: packets,
        seconds_between_losses: secs,
        between_losses: fmt_duration(Nanos::from_secs_f64(secs)),
        windows: windows_at(p, mss, rtt),
        loss_needed,
    }
}

#[cfg(test)]
mod tests {
    use longhaul_units::models::MATHIS_C_PER_ACK;

    use super::*;

    /// The test vector of docs/calc.md: 10 Gbit/s, 100 ms, MSS 1460 → p ≈ 2.05e-10; a rate also gives the loss each
    /// response function tolerates.
    #[test]
    fn loss_for_rate_and_ceiling_for_loss() {
        let r = report(
            1460,
            Nanos::from_millis(100),
            MATHIS_C_PER_ACK,
            MathisGiven::Rate(10_000_000_000),
        );
        assert_eq!(r.mode, "loss_for_rate");
        assert!((r.loss_p - 2.05e-10).abs() < 0.005e-10, "{}", r.loss_p);
        assert!(r.loss_needed.is_some());
        let r = report(
            1460,
            Nanos::from_millis(100),
            MATHIS_C_PER_ACK,
            MathisGiven::Loss(1e-7),
        );
        assert_eq!(r.mode, "ceiling");
        assert_eq!(r.rate, "452 Mbit/s");
        assert!(r.loss_needed.is_none());
    }
}
