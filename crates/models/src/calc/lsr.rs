//! `calc lsr`: the Internet2 Land Speed Record metric (rate × terrestrial distance, in Tbit·m/s) of a
//! run, with the 30,000 km cap, the rounded-rate figure records are quoted with, the rule checks
//! (10 minutes, 100 km) and the +10 % rule against a standing mark.

use longhaul_units::models::{
    LSR_IMPROVEMENT, LSR_MAX_KM, LSR_MIN_KM, LSR_MIN_SECONDS, fmt_lsr, lsr_beats, lsr_capped_km,
    lsr_metric_from_rate,
};
use longhaul_units::{fmt_km, fmt_rate, fmt_size, fmt_size_si, group_thousands, parse_rate};
use serde::Serialize;

/// How the run is given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Run {
    /// Bytes moved in a number of seconds (above 0).
    Moved {
        /// Bytes moved.
        bytes: u64,
        /// Duration of the run, s.
        seconds: f64,
    },
    /// The average rate, bit/s.
    Rate(u64),
}

/// What `calc lsr` reports.
#[derive(Debug, Serialize)]
pub struct LsrReport {
    /// Bytes moved (when given).
    pub bytes: Option<u64>,
    /// The bytes for display: exact, binary and SI.
    pub bytes_display: Option<String>,
    /// Seconds of the run (when given).
    pub seconds: Option<f64>,
    /// The exact average rate, bit/s (from bytes and seconds, or as given).
    pub rate_bps: f64,
    /// The rate for display.
    pub rate: String,
    /// The rate rounded to three figures as records quote it.
    pub rounded_rate_bps: u64,
    /// The rounded rate for display.
    pub rounded_rate: String,
    /// The terrestrial distance, km.
    pub km: f64,
    /// The distance for display.
    pub distance: String,
    /// The distance the LSR counts: at most 30,000 km.
    pub counted_km: f64,
    /// Whether the distance was capped.
    pub capped: bool,
    /// rate × counted distance, bit·m/s: the mark.
    pub metric_bit_m_per_s: f64,
    /// The mark for display.
    pub metric: String,
    /// The rounded rate × counted distance (the press figure).
    pub rounded_metric_bit_m_per_s: f64,
    /// The press figure for display.
    pub rounded_metric: String,
    /// rate × the full distance (differs from the mark only when capped).
    pub uncapped_metric_bit_m_per_s: f64,
    /// The uncapped metric for display.
    pub uncapped_metric: String,
    /// Rule check: at least 10 minutes (known only from bytes and seconds).
    pub long_enough: Option<bool>,
    /// Rule check: at least 100 km.
    pub far_enough: bool,
    /// One line each: the cap, rounding, rule failures.
    pub notes: Vec<String>,
    /// The comparison with a standing mark, when one was given.
    pub beats: Option<Beats>,
}

/// Comparison with a standing mark under the +10 % rule.
#[derive(Debug, Serialize)]
pub struct Beats {
    /// The standing mark, bit·m/s.
    pub old_bit_m_per_s: f64,
    /// The standing mark for display.
    pub old: String,
    /// The least a new record needs, bit·m/s.
    pub needed_bit_m_per_s: f64,
    /// That need for display.
    pub needed: String,
    /// (new − old) / old, %.
    pub gain_percent: f64,
    /// Whether the run sets a new record.
    pub beats: bool,
}

/// Computes the `calc lsr` report for a run over `km` of terrestrial distance (above 0), compared
/// with the standing mark `old` (bit·m/s) when given.
pub fn report(run: Run, km: f64, old: Option<f64>) -> LsrReport {
    let (bytes, seconds, rate) = match run {
        Run::Moved { bytes, seconds } => (Some(bytes), Some(seconds), bytes as f64 * 8.0 / seconds),
        Run::Rate(bps) => (None, None, bps as f64),
    };
    let counted = lsr_capped_km(km);
    let capped = counted < km;
    // Three significant figures, as fmt_rate prints and records quote
    // ("4.00 Gbit/s"); parsing the printed form back gives the rounded rate.
    let exact_bps = rate.round() as u64;
    let rounded = parse_rate(&fmt_rate(exact_bps)).unwrap_or(exact_bps);
    let metric = lsr_metric_from_rate(rate, counted);
    let rounded_metric = lsr_metric_from_rate(rounded as f64, counted);
    let uncapped = lsr_metric_from_rate(rate, km);
    let mut notes = Vec::new();
    if capped {
        notes.push(format!(
            "distance capped at {} (LSR rule): {} measured",
            fmt_km(LSR_MAX_KM),
            fmt_km(km)
        ));
    }
    if bytes.is_some() && rounded != exact_bps {
        notes.push(
            "marks use exact bytes and seconds; press figures use the rounded rate (seed 001: \
             560 GiB in 1200 s gives 46,256, its 46,156 is 4.00 Gbit/s × 11,539 km)"
                .to_owned(),
        );
    }
    let long_enough = seconds.map(|s| s >= LSR_MIN_SECONDS);
    if long_enough == Some(false) {
        notes.push("shorter than the 10-minute minimum run".to_owned());
    }
    let far_enough = km >= LSR_MIN_KM;
    if !far_enough {
        notes.push("shorter than the 100 km minimum distance".to_owned());
    }
    let beats = old.map(|old| {
        let needed = old * (1.0 + LSR_IMPROVEMENT);
        Beats {
            old_bit_m_per_s: old,
            old: fmt_lsr(old),
            needed_bit_m_per_s: needed,
            needed: fmt_lsr(needed),
            gain_percent: (metric - old) * 100.0 / old,
            beats: lsr_beats(metric, old),
        }
    });
    LsrReport {
        bytes,
        bytes_display: bytes.map(|b| {
            format!(
                "{} B = {} = {}",
                group_thousands(b),
                fmt_size(b),
                fmt_size_si(b)
            )
        }),
        seconds,
        rate_bps: rate,
        rate: fmt_rate(exact_bps),
        rounded_rate_bps: rounded,
        rounded_rate: fmt_rate(rounded),
        km,
        distance: fmt_km(km),
        counted_km: counted,
        capped,
        metric_bit_m_per_s: metric,
        metric: fmt_lsr(metric),
        rounded_metric_bit_m_per_s: rounded_metric,
        rounded_metric: fmt_lsr(rounded_metric),
        uncapped_metric_bit_m_per_s: uncapped,
        uncapped_metric: fmt_lsr(uncapped),
        long_enough,
        far_enough,
        notes,
        beats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeds 000/001: 4.00 Gbit/s × 11,539 km = 46,156 Tbit·m/s; Tokyo 2006: 9.08 Gbit/s over
    /// 32,372 km counts 30,000 km.
    #[test]
    fn metric_and_cap() {
        let r = report(Run::Rate(4_000_000_000), 11_539.0, None);
        assert_eq!(r.metric_bit_m_per_s, 46_156e12);
        assert!(!r.capped);
        let r = report(Run::Rate(9_080_000_000), 32_372.0, Some(264_147e12));
        assert!(r.capped);
        assert_eq!(r.metric_bit_m_per_s, 272_400e12);
        assert!(!r.beats.unwrap().beats);
    }

    /// 560 GiB in 1200 s: the exact mark and the rounded press figure differ, and the report's notes say
    /// why.
    #[test]
    fn moved_bytes_give_the_exact_rate() {
        let r = report(
            Run::Moved {
                bytes: 560 << 30,
                seconds: 1200.0,
            },
            11_539.0,
            None,
        );
        assert_eq!(r.long_enough, Some(true));
        assert_eq!(r.rounded_rate, "4.01 Gbit/s");
        assert!(
            r.notes.iter().any(|n| n.contains("46,156")),
            "{:?}",
            r.notes
        );
    }
}
