//! Seeded random streams: one ChaCha8 stream per stage of a direction.
//!
//! Each stage owns a [`StageRng`] made from the direction's seed and a fixed
//! stream number, so the draws of one stage do not depend on which other
//! stages are configured, and a run replays exactly from its seed
//! (ARCHITECTURE.md practice 5; smoltcp's netsim seeds per direction too).
//! Every stage draws a fixed number of values per segment, which is what makes
//! a record of N segments and N one-segment records draw identically.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// Stream numbers, one per stage.
pub(crate) const STREAM_LOSS: u64 = 1;
pub(crate) const STREAM_CROSS: u64 = 2;
pub(crate) const STREAM_JITTER: u64 = 3;
pub(crate) const STREAM_REORDER: u64 = 4;
pub(crate) const STREAM_DUPLICATE: u64 = 5;
pub(crate) const STREAM_CORRUPT: u64 = 6;

/// A stage's random stream.
#[derive(Debug, Clone)]
pub(crate) struct StageRng(ChaCha8Rng);

impl StageRng {
    /// Stream `stream` of `seed`.
    pub(crate) fn new(seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Self(rng)
    }

    /// Uniform on [0, 1) with 53 random bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (one draw, even when p is 0 or 1).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform integer on [0, max] (one draw; the modulo bias is below
    /// 2^-20 for any `max` under 2^44 ns, about 4.9 hours).
    pub(crate) fn upto(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(n) => self.0.next_u64() % n,
            None => self.0.next_u64(),
        }
    }

    /// Standard normal by Box–Muller (two draws, one value used).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Exponential with mean `mean` (one draw).
    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_replayable_and_distinct() {
        let mut a = StageRng::new(7, STREAM_LOSS);
        let mut b = StageRng::new(7, STREAM_LOSS);
        let mut c = StageRng::new(7, STREAM_JITTER);
        let xa: Vec<f64> = (0..8).map(|_| a.unit()).collect();
        let xb: Vec<f64> = (0..8).map(|_| b.unit()).collect();
        let xc: Vec<f64> = (0..8).map(|_| c.unit()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert!(xa.iter().all(|x| (0.0..1.0).contains(x)));
    }

    #[test]
    fn normal_has_unit_variance() {
        let mut r = StageRng::new(1, STREAM_JITTER);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
    }
}
