//! Models beside measurements: for each point, what the TCP models say it
//! should reach, stored in the result file next to what it did. The formulas
//! are longhaul-units' (`window_ceiling_bps`, `bdp_bytes`, `mathis_rate_bps`,
//! `responsiveness`, `cubic_k`); this module only chooses their inputs.
//!
//! Conventions. Rates compared with `longhaul test`'s `bits_per_second` are
//! TCP payload rates: the bottleneck's IP rate times (MTU − 52) / MTU, 52
//! bytes being the IPv4 and TCP headers with the timestamp option Linux
//! sends (MSS 1448 at MTU 1500). A requested window is taken as the window
//! in flight (whether the engine's `-w` gives exactly that is for the runner
//! to verify; see docs/lab.md). The Mathis ceiling and responsiveness use
//! the MSS of the seeds' figures, MTU − 40 (1460 / 8960), and are Reno
//! references (Mathis & Mahdavi, "Deprecating the TCP Macroscopic Model",
//! CCR 49(5), 2019: CUBIC and BBR do not follow 1/√p).

use longhaul_topology::CompiledPath;
use longhaul_units::{
    CUBIC_BETA, CUBIC_C, MATHIS_C_PER_ACK, Nanos, bdp_bytes, bdp_segments, cubic_k,
    mathis_rate_bps, responsiveness, window_ceiling_bps,
};
use serde::{Deserialize, Serialize};

use crate::spec::{Point, UDP_IPV4_HEADERS};

/// IPv4 + TCP header bytes with timestamps, per segment.
pub const HEADER_BYTES: u32 = 52;
/// IPv6 + TCP header bytes with timestamps, per segment: 20 more than IPv4's.
pub const HEADER_BYTES_V6: u32 = 72;

/// What the models say about one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Round-trip propagation delay of the path.
    pub rtt: Nanos,
    /// Bottleneck rate (IP), bit/s.
    pub bottleneck_bps: u64,
    /// IP MTU.
    pub mtu: u32,
    /// MSS used by the loss models (MTU − 40).
    pub mss: u64,
    /// Parallel streams.
    pub streams: u32,
    /// Window per stream, bytes (`None` = auto).
    pub window: Option<u64>,
    /// The bottleneck as a TCP payload rate: bottleneck × (MTU − 52) / MTU (72 over IPv6).
    pub goodput_bps: u64,
    /// All streams' window ÷ RTT ceiling (`None` with auto windows).
    pub window_ceiling_bps: Option<u64>,
    /// The expected throughput: min(window ceiling, goodput).
    pub expected_bps: u64,
    /// Whether the window, not the bottleneck, sets `expected_bps`.
    pub window_limited: bool,
    /// Bandwidth-delay product of the bottleneck (IP rate × RTT), bytes.
    pub bdp_bytes: u64,
    /// The knee: the per-stream window at which the window ceiling meets the
    /// goodput (goodput × RTT / 8 / streams), bytes.
    pub knee_window: u64,
    /// Random loss probability of the data direction (mean, for burst
    /// models).
    pub loss: f64,
    /// Mathis ceiling of all streams at that loss (C = √(3/2)); `None` without
    /// loss (no ceiling).
    pub mathis_bps: Option<f64>,
    /// Reno's time to regain the full rate after one loss (per stream:
    /// its share of the bottleneck).
    pub responsiveness: Nanos,
    /// CUBIC's time to regain W_max after one loss, W_max being a stream's
    /// share of the BDP in segments.
    pub cubic_k: Nanos,
}

/// The model inputs, for callers without a [`Point`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelInputs {
    /// Round-trip time.
    pub rtt: Nanos,
    /// Bottleneck IP rate, bit/s.
    pub bottleneck_bps: u64,
    /// IP MTU.
    pub mtu: u32,
    /// Streams.
    pub streams: u32,
    /// Window per stream, bytes; `None` = auto.
    pub window: Option<u64>,
    /// Loss probability per segment.
    pub loss: f64,
    /// IP and TCP header bytes per segment: [`HEADER_BYTES`] over IPv4, [`HEADER_BYTES_V6`] over
    /// IPv6.
    pub header_bytes: u32,
}

/// The prediction for `point` on `path` (the path compiled with
/// [`Point::overrides`]).
pub fn predict(point: &Point, path: &CompiledPath) -> Prediction {
    let mut p = predict_with(ModelInputs {
        rtt: path.rtt,
        bottleneck_bps: path.forward.bottleneck.map_or(0, |b| b.rate_bps),
        mtu: path.mtu,
        streams: point.streams,
        window: point.window,
        loss: mean_loss(path),
        header_bytes: if point.ip == 6 {
            HEADER_BYTES_V6
        } else {
            HEADER_BYTES
        },
    });
    if point.find_rate.is_some() {
        // A line characterisation: the most UDP payload the bottleneck carries, every packet
        // being the datagram and its IPv4 and UDP headers (the MTU's worth when longhaul picks
        // the length). No window limits it.
        let len = point
            .datagram_len()
            .unwrap_or(u64::from(path.mtu.saturating_sub(UDP_IPV4_HEADERS)))
            .max(1);
        let payload = (u128::from(p.bottleneck_bps) * u128::from(len)
            / u128::from(len + u64::from(UDP_IPV4_HEADERS))) as u64;
        p.goodput_bps = payload;
        p.expected_bps = payload;
        p.window_ceiling_bps = None;
        p.window_limited = false;
    }
    p
}

/// The mean loss probability of the data direction: p for Bernoulli, the
/// stationary loss of a Gilbert–Elliott chain (π_bad = p/(p+r); loss =
/// π_good·(1−k) + π_bad·(1−h)).
fn mean_loss(path: &CompiledPath) -> f64 {
    let v = serde_json::to_value(path.forward.loss).unwrap_or_default();
    let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    match v.get("model").and_then(serde_json::Value::as_str) {
        Some("bernoulli") => f("p"),
        Some("gilbert_elliott") => {
            let (p, r) = (f("p"), f("r"));
            if p + r == 0.0 {
                return f("one_minus_k");
            }
            let bad = p / (p + r);
            (1.0 - bad) * f("one_minus_k") + bad * f("one_minus_h")
        }
        _ => 0.0,
    }
}

/// The prediction from bare inputs.
pub fn predict_with(m: ModelInputs) -> Prediction {
    let streams = m.streams.max(1);
    let mtu = m.mtu.max(m.header_bytes + 1);
    let goodput_bps =
        (u128::from(m.bottleneck_bps) * u128::from(mtu - m.header_bytes) / u128::from(mtu)) as u64;
    let window_ceiling_bps = m
        .window
        .map(|w| window_ceiling_bps(w, m.rtt).saturating_mul(u64::from(streams)));
    let expected_bps = window_ceiling_bps.map_or(goodput_bps, |c| c.min(goodput_bps));
    let window_limited = window_ceiling_bps.is_some_and(|c| c < goodput_bps);
    let mss = u64::from(mtu) - 40;
    let per_stream = m.bottleneck_bps / u64::from(streams);
    let mathis_bps = (m.loss > 0.0)
        .then(|| mathis_rate_bps(mss, m.rtt, m.loss, MATHIS_C_PER_ACK) * f64::from(streams));
    Prediction {
        rtt: m.rtt,
        bottleneck_bps: m.bottleneck_bps,
        mtu: m.mtu,
        mss,
        streams,
        window: m.window,
        goodput_bps,
        window_ceiling_bps,
        expected_bps,
        window_limited,
        bdp_bytes: bdp_bytes(m.bottleneck_bps, m.rtt),
        knee_window: bdp_bytes(goodput_bps, m.rtt) / u64::from(streams),
        loss: m.loss,
        mathis_bps,
        responsiveness: responsiveness(per_stream, m.rtt, mss),
        cubic_k: cubic_k(
            bdp_segments(per_stream, m.rtt, u64::from(mtu)),
            CUBIC_BETA,
            CUBIC_C,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    fn inputs(window: Option<u64>) -> ModelInputs {
        ModelInputs {
            rtt: Nanos::from_millis(100),
            bottleneck_bps: 500_000_000,
            mtu: 1500,
            streams: 1,
            window,
            loss: 0.0,
            header_bytes: HEADER_BYTES,
        }
    }

    #[test]
    fn small_window_is_window_limited() {
        let p = predict_with(inputs(Some(1 << 20)));
        // 1 MiB × 8 / 0.1 s = 83.9 Mbit/s.
        assert_eq!(p.window_ceiling_bps, Some(83_886_080));
        assert_eq!(p.expected_bps, 83_886_080);
        assert!(p.window_limited);
    }

    #[test]
    fn large_window_is_bottleneck_limited_at_the_goodput() {
        let p = predict_with(inputs(Some(64 << 20)));
        assert_eq!(p.goodput_bps, 482_666_666);
        assert_eq!(p.expected_bps, p.goodput_bps);
        assert!(!p.window_limited);
        let auto = predict_with(inputs(None));
        assert_eq!(auto.window_ceiling_bps, None);
        assert_eq!(auto.expected_bps, auto.goodput_bps);
    }

    #[test]
    fn knee_is_where_the_ceiling_meets_the_goodput() {
        let p = predict_with(inputs(None));
        assert_eq!(p.bdp_bytes, 6_250_000);
        assert_eq!(p.knee_window, 6_033_333);
        let at = predict_with(inputs(Some(p.knee_window)));
        assert!((at.window_ceiling_bps.unwrap() as f64 / p.goodput_bps as f64 - 1.0).abs() < 1e-6);
        let four = predict_with(ModelInputs {
            streams: 4,
            ..inputs(None)
        });
        assert_eq!(four.knee_window, p.knee_window / 4);
        let w = predict_with(ModelInputs {
            streams: 4,
            ..inputs(Some(1 << 20))
        });
        assert_eq!(w.window_ceiling_bps, Some(4 * 83_886_080));
    }

    #[test]
    fn mathis_and_responsiveness_come_from_units() {
        let p = predict_with(inputs(None));
        assert_eq!(p.mathis_bps, None);
        let lossy = predict_with(ModelInputs {
            loss: 1e-6,
            ..inputs(None)
        });
        let m = lossy.mathis_bps.unwrap();
        // 1460 × 8 / 0.1 × 1.2247 / 0.001 = 143 Mbit/s.
        assert!((m - 143_050_201.0).abs() < 1.0, "{m}");
        // 500 Mbit/s × 0.1² / (2 × 1460 × 8) = 214 s.
        assert_eq!(lossy.responsiveness.as_secs_f64().round(), 214.0);
        assert!(lossy.cubic_k.as_secs_f64() > 1.0);
    }

    #[test]
    fn predict_reads_the_compiled_path() {
        let text = "name = \"t\"\nduration = 10\n[path]\npreset = \"cern-starlight\"\nrate = \"500M\"\nloss = 0.001\n[sweep]\nwindow = [\"4M\"]\n";
        let s = Spec::parse(text, "t.toml").unwrap();
        let topo = s.topology(None).unwrap();
        let pt = &s.points()[0];
        let p = predict(pt, &pt.compile(&topo).unwrap());
        assert_eq!(p.bottleneck_bps, 500_000_000);
        assert_eq!(p.loss, 0.001);
        assert_eq!(p.rtt.as_millis(), 127);
        assert!(p.window_limited);
    }

    #[test]
    fn over_ipv6_each_segment_carries_20_bytes_less() {
        let text = "name = \"t\"\nduration = 10\n[path]\npreset = \"cern-starlight\"\nrate = \"1G\"\nmtu = 9000\n[sweep]\nip = [4, 6]\n";
        let s = Spec::parse(text, "t.toml").unwrap();
        let topo = s.topology(None).unwrap();
        let [v4, v6] = [0, 1].map(|i| {
            let pt = &s.points()[i];
            predict(pt, &pt.compile(&topo).unwrap())
        });
        // 1 Gbit/s × 8948 / 9000 and × 8928 / 9000.
        assert_eq!(v4.goodput_bps, 994_222_222);
        assert_eq!(v6.goodput_bps, 992_000_000);
        assert_eq!(v6.expected_bps, v6.goodput_bps);
        assert!(v6.knee_window < v4.knee_window);
    }
}
