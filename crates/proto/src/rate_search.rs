//! The search for the highest loss-free rate (`longhaul test -u --find-rate`), as RFC 2544 §26.1
//! defines a device's throughput: the fastest rate at which no frame is lost (or, here, at most a
//! threshold), found by trials at chosen rates. A trial whose sender could not offer the rate (the
//! host, not the path, fell short) fails whatever its loss: RFC 2544 counts the offered load, and a
//! rate never offered cannot be reported as carried. The search is a bisection between a rate known to
//! pass and one known to fail: it tries the upper bound first (a path that carries it needs one
//! trial), then halves the interval until it is narrower than the resolution. Each trial's loss is
//! the receiver's (datagrams lost ÷ datagrams sent), so loss in either host counts as loss, as it
//! would for a user of the path.
//!
//! Pure: the driver runs each trial (a UDP test at [`RateSearch::next`]'s rate) and hands its loss
//! to [`RateSearch::record`].

use serde::{Deserialize, Serialize};

/// One trial.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// The rate tried, bit/s of payload per stream set.
    pub rate_bps: u64,
    /// Lost ÷ sent.
    pub loss: f64,
    /// Whether the sender offered the rate (see [`OFFERED_MIN`]).
    pub offered: bool,
    /// Whether the rate was offered and the loss was within the threshold.
    pub passed: bool,
}

/// The share of the asked rate a trial's sender must reach for the rate to count as offered.
pub const OFFERED_MIN: f64 = 0.98;

/// A bisection for the highest rate whose loss is at most a threshold.
#[derive(Debug, Clone)]
pub struct RateSearch {
    /// Highest rate that passed (0: none yet).
    lo: u64,
    /// Lowest rate that failed, or the upper bound before it was tried.
    hi: u64,
    hi_tried: bool,
    threshold: f64,
    resolution: u64,
    trials: Vec<Trial>,
    max_trials: usize,
}

impl RateSearch {
    /// A search up to `upper_bps`, passing a trial whose loss is at most `threshold` (0..=1), to
    /// within `resolution_bps` (at least 1 bit/s), in at most `max_trials` trials.
    pub fn new(upper_bps: u64, threshold: f64, resolution_bps: u64, max_trials: usize) -> Self {
        Self {
            lo: 0,
            hi: upper_bps.max(1),
            hi_tried: false,
            threshold: threshold.clamp(0.0, 1.0),
            resolution: resolution_bps.max(1),
            trials: Vec::new(),
            max_trials: max_trials.max(1),
        }
    }

    /// The next rate to try; `None` when the search is done.
    pub fn next(&self) -> Option<u64> {
        if self.trials.len() >= self.max_trials {
            return None;
        }
        if !self.hi_tried {
            return Some(self.hi);
        }
        if self.lo == self.hi || self.hi - self.lo <= self.resolution {
            return None;
        }
        Some(self.lo + (self.hi - self.lo) / 2)
    }

    /// The loss of the trial at `rate_bps` (the rate [`Self::next`] gave), and whether its sender
    /// offered that rate.
    pub fn record(&mut self, rate_bps: u64, loss: f64, offered: bool) {
        let passed = offered && loss <= self.threshold;
        self.trials.push(Trial {
            rate_bps,
            loss,
            offered,
            passed,
        });
        if rate_bps == self.hi && !self.hi_tried {
            self.hi_tried = true;
            if passed {
                self.lo = self.hi;
            }
            return;
        }
        if passed {
            self.lo = self.lo.max(rate_bps);
        } else {
            self.hi = self.hi.min(rate_bps);
        }
    }

    /// The highest rate that passed (0 if none did).
    pub fn found(&self) -> u64 {
        self.lo
    }

    /// Every trial, in order.
    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that loses nothing up to `capacity` and loses the excess above it.
    fn run(capacity: u64, upper: u64, resolution: u64) -> RateSearch {
        let mut s = RateSearch::new(upper, 0.0, resolution, 64);
        while let Some(r) = s.next() {
            let loss = if r <= capacity {
                0.0
            } else {
                (r - capacity) as f64 / r as f64
            };
            s.record(r, loss, true);
        }
        s
    }

    #[test]
    fn bisection_finds_the_capacity_to_within_the_resolution() {
        for capacity in [1, 981_000_000, 3_333_333_333, 9_999_999_999] {
            let s = run(capacity, 10_000_000_000, 10_000_000);
            assert!(s.found() <= capacity, "{capacity}: {}", s.found());
            assert!(
                capacity - s.found() <= 10_000_000,
                "{capacity}: {}",
                s.found()
            );
            assert!(s.trials().len() <= 12, "{}", s.trials().len());
        }
    }

    #[test]
    fn a_path_that_carries_the_upper_bound_takes_one_trial() {
        let s = run(20_000_000_000, 10_000_000_000, 1_000_000);
        assert_eq!(s.found(), 10_000_000_000);
        assert_eq!(s.trials().len(), 1);
    }

    #[test]
    fn a_path_that_loses_at_any_rate_finds_nothing_and_stops() {
        let mut s = RateSearch::new(1_000_000, 0.0, 1000, 64);
        while let Some(r) = s.next() {
            s.record(r, 0.5, true);
        }
        assert_eq!(s.found(), 0);
        assert!(s.trials().len() <= 11);
        assert!(s.trials().iter().all(|t| !t.passed));
    }

    #[test]
    fn a_threshold_tolerates_that_much_loss_and_the_trial_cap_holds() {
        let mut s = RateSearch::new(1000, 0.01, 1, 64);
        s.record(s.next().unwrap(), 0.005, true);
        assert_eq!(s.found(), 1000, "0.5 % is under a 1 % threshold");
        let mut s = RateSearch::new(1 << 40, 0.0, 1, 3);
        while let Some(r) = s.next() {
            s.record(r, 1.0, true);
        }
        assert_eq!(s.trials().len(), 3);
    }

    #[test]
    fn a_rate_the_sender_could_not_offer_fails_without_loss() {
        // A host that sends at most 300 units, on a path that would carry anything.
        let mut s = RateSearch::new(1000, 0.0, 10, 64);
        while let Some(r) = s.next() {
            s.record(r, 0.0, r <= 300);
        }
        assert!(s.found() <= 300 && s.found() > 290, "{}", s.found());
        assert!(
            s.trials()
                .iter()
                .any(|t| !t.offered && !t.passed && t.loss == 0.0)
        );
    }
}
