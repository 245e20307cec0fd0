//! Derived metrics from interval samples (time, bit/s): the mean throughput
//! over a window of time, the recovery time after a burst (seed 002 Fig. 10),
//! the stability of a long run (Fig. 7) and the window-sweep check
//! "throughput ≈ min(window ÷ RTT, bottleneck) within 10 %" (Fig. 6).
//!
//! Time is in seconds from the start of the test, omit period included;
//! [`samples_from_report`] converts `longhaul test --json` intervals, whose
//! times restart at 0 after the omit period as iperf3's do.

use serde::{Deserialize, Serialize};

/// One interval: `bps` bit/s from `start` to `end` (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Interval start, s from the test start.
    pub start: f64,
    /// Interval end, s.
    pub end: f64,
    /// Mean rate over the interval, bit/s.
    pub bps: f64,
}

/// The summed intervals of a `longhaul test --json` report
/// (`intervals[].sum`), on one time axis: omitted intervals keep their
/// times, the others are shifted by `omit_s` (the report restarts its clock
/// after the omit period). Malformed entries are skipped.
pub fn samples_from_report(report: &serde_json::Value, omit_s: f64) -> Vec<Sample> {
    let Some(intervals) = report.get("intervals").and_then(|v| v.as_array()) else {
        return Vec::new();
    };
    intervals
        .iter()
        .filter_map(|i| {
            let sum = i.get("sum")?;
            let f = |k: &str| sum.get(k).and_then(serde_json::Value::as_f64);
            let shift = if sum.get("omitted").and_then(serde_json::Value::as_bool) == Some(true) {
                0.0
            } else {
                omit_s
            };
            Some(Sample {
                start: f("start")? + shift,
                end: f("end")? + shift,
                bps: f("bits_per_second")?,
            })
        })
        .collect()
}

/// The time-weighted mean rate over `[from, to]`: each sample counts for the
/// part of its interval inside the window. `None` when no sample overlaps.
pub fn mean_bps(samples: &[Sample], from: f64, to: f64) -> Option<f64> {
    let (mut bits, mut secs) = (0.0, 0.0);
    for s in samples {
        let overlap = s.end.min(to) - s.start.max(from);
        if overlap > 0.0 && s.bps.is_finite() {
            bits += s.bps * overlap;
            secs += overlap;
        }
    }
    (secs > 0.0).then(|| bits / secs)
}

/// How recovery after a burst is measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RecoveryParams {
    /// Start of the pre-burst reference period (the end of the omit period).
    pub pre_from: f64,
    /// Burst start (end of the reference period).
    pub burst_start: f64,
    /// Burst end.
    pub burst_end: f64,
    /// Recovered at this fraction of the pre-burst mean (0.95).
    pub fraction: f64,
    /// Length of the sliding window, s (1.0).
    pub window: f64,
}

/// What [`recovery`] found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// Mean rate from `pre_from` to the burst.
    pub pre_bps: f64,
    /// `fraction` × `pre_bps`.
    pub target_bps: f64,
    /// Seconds from the burst's end to the start of the first sliding window
    /// (starting at the burst's end or at an interval boundary after it)
    /// whose mean is at least the target; `None` if no window within the
    /// samples gets there. 0 when the burst did not dent the rate.
    pub recovery_s: Option<f64>,
}

/// The recovery after a burst; `None` when there is no pre-burst sample.
pub fn recovery(samples: &[Sample], p: &RecoveryParams) -> Option<Recovery> {
    let pre_bps = mean_bps(samples, p.pre_from, p.burst_start)?;
    let target_bps = p.fraction * pre_bps;
    let last = samples
        .iter()
        .map(|s| s.end)
        .fold(f64::NEG_INFINITY, f64::max);
    let mut starts: Vec<f64> = std::iter::once(p.burst_end)
        .chain(
            samples
                .iter()
                .flat_map(|s| [s.start, s.end])
                .filter(|t| *t > p.burst_end),
        )
        .collect();
    starts.sort_by(f64::total_cmp);
    starts.dedup();
    let recovery_s = starts
        .into_iter()
        .take_while(|t| t + p.window <= last + 1e-9)
        .find(|t| mean_bps(samples, *t, t + p.window).is_some_and(|m| m >= target_bps))
        .map(|t| t - p.burst_end);
    Some(Recovery {
        pre_bps,
        target_bps,
        recovery_s,
    })
}

/// [`recovery`]'s time alone: seconds from the burst's end until a sliding
/// window of the rate is back at `fraction` of the pre-burst mean; `None` if
/// never (or no pre-burst samples). For the tests; callers use [`recovery`].
#[cfg(test)]
fn recovery_time(samples: &[Sample], p: &RecoveryParams) -> Option<f64> {
    recovery(samples, p).and_then(|r| r.recovery_s)
}

/// Stability of a long run (seed 002 Fig. 7: 93 % of 10-s samples within
/// 5.440–5.460 Gbit/s, minimum at 90 % of the mean).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// Time-weighted mean, bit/s.
    pub mean_bps: f64,
    /// Share of samples within ±`band` of the mean.
    pub within_band: f64,
    /// Lowest sample as a fraction of the mean.
    pub min_fraction: f64,
}

/// [`Stability`] of the samples from `from` on, with a band of ±`band`
/// (0.002 for the original's ±0.2 %). `None` without samples.
pub fn stability(samples: &[Sample], from: f64, band: f64) -> Option<Stability> {
    let kept: Vec<&Sample> = samples.iter().filter(|s| s.start >= from).collect();
    let mean = mean_bps(samples, from, f64::INFINITY)?;
    let within = kept
        .iter()
        .filter(|s| (s.bps / mean - 1.0).abs() <= band)
        .count();
    let min = kept.iter().map(|s| s.bps).fold(f64::INFINITY, f64::min);
    Some(Stability {
        mean_bps: mean,
        within_band: within as f64 / kept.len().max(1) as f64,
        min_fraction: min / mean,
    })
}

/// Tolerance of the window-sweep check: 10 %.
pub const SWEEP_TOLERANCE: f64 = 0.10;

/// One point's measured and expected throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// The point id.
    pub id: String,
    /// Measured mean, bit/s.
    pub measured_bps: f64,
    /// Expected: min(window ÷ RTT, bottleneck goodput) (see
    /// [`crate::predict::Prediction::expected_bps`]).
    pub expected_bps: f64,
}

/// One point's deviation from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deviation {
    /// The point id.
    pub id: String,
    /// Measured, bit/s.
    pub measured_bps: f64,
    /// Expected, bit/s.
    pub expected_bps: f64,
    /// measured ÷ expected − 1 (−0.05 = 5 % below the model).
    pub deviation: f64,
    /// |deviation| ≤ tolerance.
    pub within: bool,
}

/// The window-sweep check: each point's deviation from the model and whether
/// it is within `tolerance` ([`SWEEP_TOLERANCE`]). A zero expectation is
/// never within.
pub fn window_sweep_check(points: &[SweepPoint], tolerance: f64) -> Vec<Deviation> {
    points
        .iter()
        .map(|p| {
            let deviation = if p.expected_bps > 0.0 {
                p.measured_bps / p.expected_bps - 1.0
            } else {
                f64::INFINITY
            };
            Deviation {
                id: p.id.clone(),
                measured_bps: p.measured_bps,
                expected_bps: p.expected_bps,
                deviation,
                // A part in 10^12 absorbs float rounding (110 / 100 − 1).
                within: deviation.abs() <= tolerance + 1e-12,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-second samples from a function of the interval's start.
    fn series(n: usize, f: impl Fn(f64) -> f64) -> Vec<Sample> {
        (0..n)
            .map(|i| Sample {
                start: i as f64,
                end: i as f64 + 1.0,
                bps: f(i as f64),
            })
            .collect()
    }

    #[test]
    fn mean_is_time_weighted_and_clipped() {
        let s = vec![
            Sample {
                start: 0.0,
                end: 1.0,
                bps: 100.0,
            },
            Sample {
                start: 1.0,
                end: 3.0,
                bps: 400.0,
            },
        ];
        assert_eq!(mean_bps(&s, 0.0, 3.0), Some(300.0));
        assert_eq!(mean_bps(&s, 0.5, 1.5), Some(250.0));
        assert_eq!(mean_bps(&s, 5.0, 6.0), None);
        assert_eq!(mean_bps(&[], 0.0, 1.0), None);
    }

    fn params() -> RecoveryParams {
        RecoveryParams {
            pre_from: 2.0,
            burst_start: 10.0,
            burst_end: 12.0,
            fraction: 0.95,
            window: 1.0,
        }
    }

    #[test]
    fn recovery_of_a_linear_ramp() {
        // 100 before the burst, 20 during, then +10 per 1-s sample from
        // 12 s: the sample starting at 19 s is 90, the one at 20 s is 100,
        // so the first 1-s window at ≥ 95 starts 8 s after the burst.
        let s = series(40, |t| {
            if t < 10.0 {
                100.0
            } else if t < 12.0 {
                20.0
            } else {
                (20.0 + 10.0 * (t - 12.0)).min(100.0)
            }
        });
        let r = recovery(&s, &params()).unwrap();
        assert_eq!(r.pre_bps, 100.0);
        assert_eq!(r.target_bps, 95.0);
        assert_eq!(r.recovery_s, Some(8.0));
        assert_eq!(recovery_time(&s, &params()), Some(8.0));
    }

    #[test]
    fn no_dent_is_zero_and_never_is_none() {
        let flat = series(30, |_| 100.0);
        assert_eq!(recovery_time(&flat, &params()), Some(0.0));
        let stuck = series(30, |t| if t < 10.0 { 100.0 } else { 50.0 });
        let r = recovery(&stuck, &params()).unwrap();
        assert_eq!(r.recovery_s, None);
        assert_eq!(r.pre_bps, 100.0);
        // No samples before the burst: no reference, no answer.
        let late: Vec<Sample> = flat.into_iter().filter(|s| s.start >= 10.0).collect();
        assert_eq!(recovery(&late, &params()), None);
    }

    #[test]
    fn recovery_ignores_the_slow_start_before_pre_from() {
        let s = series(30, |t| {
            if t < 2.0 {
                1.0
            } else if (10.0..13.0).contains(&t) {
                0.0
            } else {
                100.0
            }
        });
        let r = recovery(&s, &params()).unwrap();
        assert_eq!(r.pre_bps, 100.0);
        assert_eq!(r.recovery_s, Some(1.0));
    }

    #[test]
    fn faster_recovery_has_the_shorter_time() {
        let ramp = |slope: f64| {
            series(80, move |t| {
                if t < 10.0 {
                    100.0
                } else if t < 12.0 {
                    10.0
                } else {
                    (10.0 + slope * (t - 12.0)).min(100.0)
                }
            })
        };
        let reno = recovery_time(&ramp(1.5), &params()).unwrap();
        let cubic = recovery_time(&ramp(20.0), &params()).unwrap();
        assert!(cubic < reno, "{cubic} vs {reno}");
        assert!(reno / cubic > 9.0, "{reno} / {cubic}");
    }

    #[test]
    fn stability_of_a_steady_run_with_one_dip() {
        let s = series(100, |t| if t == 50.0 { 90.0 } else { 100.0 });
        let st = stability(&s, 0.0, 0.002).unwrap();
        assert!((st.mean_bps - 99.9).abs() < 1e-9);
        assert_eq!(st.within_band, 0.99);
        assert!((st.min_fraction - 90.0 / 99.9).abs() < 1e-12);
        assert_eq!(stability(&s, 200.0, 0.002), None);
    }

    #[test]
    fn sweep_check_flags_points_outside_ten_percent() {
        let pts = vec![
            SweepPoint {
                id: "window=1M".into(),
                measured_bps: 95.0,
                expected_bps: 100.0,
            },
            SweepPoint {
                id: "window=4M".into(),
                measured_bps: 88.0,
                expected_bps: 100.0,
            },
            SweepPoint {
                id: "window=8M".into(),
                measured_bps: 110.0,
                expected_bps: 100.0,
            },
            SweepPoint {
                id: "zero".into(),
                measured_bps: 1.0,
                expected_bps: 0.0,
            },
        ];
        let d = window_sweep_check(&pts, SWEEP_TOLERANCE);
        assert_eq!(d.len(), 4);
        assert!(d[0].within);
        assert!((d[0].deviation + 0.05).abs() < 1e-12);
        assert!(!d[1].within);
        assert!(d[2].within, "{}", d[2].deviation);
        assert!(!d[3].within);
    }

    #[test]
    fn samples_from_report_shift_after_the_omit_period() {
        let report = serde_json::json!({
            "intervals": [
                {"sum": {"start": 0.0, "end": 1.0, "bits_per_second": 5.0, "omitted": true}},
                {"sum": {"start": 1.0, "end": 2.0, "bits_per_second": 6.0, "omitted": true}},
                {"sum": {"start": 0.0, "end": 1.0, "bits_per_second": 7.0, "omitted": false}},
                {"sum": {"start": 1.0, "end": 2.0}},
                {"nothing": 1}
            ]
        });
        let s = samples_from_report(&report, 2.0);
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[2],
            Sample {
                start: 2.0,
                end: 3.0,
                bps: 7.0
            }
        );
        assert_eq!(s[1].end, 2.0);
        assert!(samples_from_report(&serde_json::json!({}), 0.0).is_empty());
    }
}
