//! A histogram of nanosecond values with bounded relative error: the emulator's
//! lateness (how late the forwarder wrote each record after its scheduled
//! release; a run whose records leave late did not emulate the path it claims)
//! and a UDP test's one-way delays.
//!
//! Log-linear buckets in nanoseconds: values below 2^`SUB_BITS` have a
//! bucket each; above, every power of two is split into 2^`SUB_BITS` equal
//! buckets, so a reported percentile is at most 1/2^`SUB_BITS` (≈ 1.6 %)
//! above the true value and never below it. The maximum is exact. Fixed
//! size, no allocation per sample.

use serde::{Deserialize, Serialize};

/// Sub-bucket bits per power of two: 64 buckets, ≤ 1.6 % relative error.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets: the linear range plus 64 − `SUB_BITS` octaves.
const BUCKETS: usize = (SUB as usize) * (65 - SUB_BITS as usize);

/// A histogram of nanosecond values.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
    sum: u128,
}

/// Percentiles of a [`Histogram`], in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: u64,
    /// Mean (exact).
    pub mean_ns: u64,
    /// Median (upper edge of its bucket).
    pub p50_ns: u64,
    /// 99th percentile (upper edge of its bucket).
    pub p99_ns: u64,
    /// Largest sample (exact).
    pub max_ns: u64,
}

fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let shift = exp - SUB_BITS;
    let mantissa = (v >> shift) - SUB; // 0..SUB
    (SUB as usize) * (shift as usize + 1) + mantissa as usize
}

/// Largest value that falls into bucket `i`.
fn upper_edge(i: usize) -> u64 {
    let sub = SUB as usize;
    if i < sub {
        return i as u64;
    }
    let shift = (i / sub - 1) as u32;
    let mantissa = (i % sub) as u64 + SUB;
    // (mantissa + 1) << shift − 1, saturating for the top bucket.
    ((mantissa + 1) << shift)
        .wrapping_sub(1)
        .max(mantissa << shift)
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
            sum: 0,
        }
    }

    /// Adds one sample.
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The smallest bucket edge at or above which lie no more than
    /// `(1 − q)` of the samples (`q` in 0..=1), capped at the exact maximum;
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper_edge(i).min(self.max);
            }
        }
        self.max
    }

    /// p50, p99, max and mean.
    pub fn summary(&self) -> Summary {
        Summary {
            samples: self.total,
            mean_ns: if self.total == 0 {
                0
            } else {
                (self.sum / u128::from(self.total)) as u64
            },
            p50_ns: self.quantile(0.50),
            p99_ns: self.quantile(0.99),
            max_ns: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_cover_their_values() {
        let mut last = 0;
        for v in (0..100_000u64).chain([u64::MAX / 2, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(v);
            assert!(b < BUCKETS, "{v} -> {b}");
            assert!(b >= last || v > 100_000);
            last = b;
            let edge = upper_edge(b);
            assert!(edge >= v, "{v}: edge {edge}");
            // Relative error bound.
            assert!(
                (edge - v) as f64 <= v as f64 / SUB as f64 + 1.0,
                "{v}: {edge}"
            );
        }
        for i in 1..BUCKETS {
            assert!(upper_edge(i) > upper_edge(i - 1), "bucket {i}");
        }
    }

    #[test]
    fn empty_histogram_reports_zeros() {
        let h = Histogram::new();
        assert!(h.is_empty());
        assert_eq!(h.summary(), Summary::default());
    }

    #[test]
    fn percentiles_of_a_uniform_ramp() {
        let mut h = Histogram::new();
        // 1..=10_000 µs in ns.
        for us in 1..=10_000u64 {
            h.record(us * 1_000);
        }
        let s = h.summary();
        assert_eq!(s.samples, 10_000);
        assert_eq!(s.max_ns, 10_000_000);
        assert_eq!(s.mean_ns, 5_000_500);
        let within = |got: u64, want: u64| {
            assert!(
                got >= want && (got - want) as f64 <= want as f64 * 0.02,
                "got {got}, want ≈{want}"
            );
        };
        within(s.p50_ns, 5_000_000);
        within(s.p99_ns, 9_900_000);
        assert_eq!(h.quantile(1.0), 10_000_000);
        within(h.quantile(0.0), 1_000);
    }

    #[test]
    fn one_outlier_shows_in_max_not_p99() {
        let mut h = Histogram::new();
        for _ in 0..999 {
            h.record(50_000);
        }
        h.record(20_000_000);
        let s = h.summary();
        assert!(s.p50_ns >= 50_000 && s.p50_ns < 51_000, "{s:?}");
        assert!(s.p99_ns < 51_000, "{s:?}");
        assert_eq!(s.max_ns, 20_000_000);
        // Small exact values.
        let mut h = Histogram::new();
        h.record(3);
        h.record(7);
        assert_eq!(h.quantile(0.5), 3);
        assert_eq!(h.quantile(0.99), 7);
    }
}
