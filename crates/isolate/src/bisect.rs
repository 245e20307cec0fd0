//! Bisection over the reflectors of a path (the Data Reservoir team's method on their 30,000 km
//! lightpath, seed 004: loop back at intermediate points, halve the suspect stretch), and the
//! confidence in the segment it ends on.
//!
//! Contract: reflectors are numbered 0.. in path order, the last being the far end; the sender
//! itself is taken as clean. [`Bisection::next`] first asks for the far end: clean there means no
//! fault at this rate. Otherwise it keeps a clean point `lo` (the sender at first) and a faulty one
//! `hi`, and asks for the reflector halfway between until they are neighbours: the fault lies on
//! the segment from `lo` to `hi`. That takes about log2(n) + 1 measurements instead of n. It
//! assumes a fault shows at every reflector beyond it (true of loss, damage and a slow link, which
//! affect everything that crosses them).

use serde::{Deserialize, Serialize};

use crate::figures::{FaultKind, Figures, Thresholds};

/// The search's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bisection {
    n: usize,
    /// The last reflector known clean (`None`: the sender).
    lo: Option<usize>,
    /// The first known faulty (`None` before the far end was measured).
    hi: Option<usize>,
    /// The far end was measured clean.
    clean_end: bool,
}

/// Where the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The far end was clean: no fault at this rate.
    NoFault,
    /// The fault lies between reflector `after` (`None`: the sender) and reflector `at`.
    Segment {
        /// The last clean reflector.
        after: Option<usize>,
        /// The first faulty one.
        at: usize,
    },
}

impl Bisection {
    /// A search over `n` ≥ 1 reflectors.
    pub fn new(n: usize) -> Self {
        Self {
            n,
            lo: None,
            hi: None,
            clean_end: n == 0,
        }
    }

    /// The reflector to measure next, or `None` when the search is over.
    pub fn next(&self) -> Option<usize> {
        if self.clean_end {
            return None;
        }
        let Some(hi) = self.hi else {
            return Some(self.n - 1);
        };
        let lo = self.lo.map_or(0, |l| l + 1);
        // The reflectors strictly between lo and hi: lo..hi.
        (lo < hi).then(|| lo + (hi - lo) / 2)
    }

    /// Notes the verdict on reflector `i` (the one [`Self::next`] asked for).
    pub fn record(&mut self, i: usize, faulty: bool) {
        if self.hi.is_none() && i + 1 == self.n && !faulty {
            self.clean_end = true;
        } else if faulty {
            self.hi = Some(self.hi.map_or(i, |h| h.min(i)));
        } else {
            self.lo = Some(self.lo.map_or(i, |l| l.max(i)));
        }
    }

    /// The outcome, once [`Self::next`] is `None`.
    pub fn outcome(&self) -> Option<Outcome> {
        if self.next().is_some() {
            return None;
        }
        Some(match self.hi {
            None => Outcome::NoFault,
            Some(at) => Outcome::Segment { after: self.lo, at },
        })
    }
}

/// ln P(X = k) for X ~ Binomial(n, p), 0 < p < 1.
fn ln_pmf(n: u64, k: u64, p: f64) -> f64 {
    let ln_choose: f64 = (0..k).map(|i| ((n - i) as f64 / (i + 1) as f64).ln()).sum();
    ln_choose + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()
}

/// P(X ≥ k) for X ~ Binomial(n, p).
pub fn upper_tail(n: u64, k: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    sum_pmf(n, k..=n, p)
}

/// P(X ≤ k) for X ~ Binomial(n, p).
pub fn lower_tail(n: u64, k: u64, p: f64) -> f64 {
    if k >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    sum_pmf(n, 0..=k, p)
}

/// Σ P(X = j) over `js` (a non-empty range within 0..=n), in O(n): each term from the one before.
fn sum_pmf(n: u64, js: std::ops::RangeInclusive<u64>, p: f64) -> f64 {
    let odds = (p / (1.0 - p)).ln();
    let mut ln = ln_pmf(n, *js.start(), p);
    let mut total = 0.0;
    for j in js {
        total += ln.exp();
        ln += ((n - j) as f64 / (j + 1) as f64).ln() + odds;
    }
    total.min(1.0)
}

/// How sure the search is that the fault of kind `kind` lies between `lo` (`None`: the sender) and
/// `hi`, in [0, 1]: the chance that `hi`'s figures are not the threshold's noise, times the chance
/// that `lo`'s are not `hi`'s fault looking clean by luck.
///
/// Losses are counted as loss events (runs), so a burst counts once and the binomial model is
/// not fooled by clustered losses; a rate is judged train by train (a sign test).
pub fn confidence(lo: Option<&Figures>, hi: &Figures, kind: FaultKind, t: &Thresholds) -> f64 {
    match kind {
        FaultKind::Rate => {
            let slow = |f: &Figures| f.train_ratios.iter().filter(|&&r| r < t.rate).count() as u64;
            let n_hi = hi.train_ratios.len() as u64;
            let c_hi = 1.0 - upper_tail(n_hi, slow(hi), 0.5) * f64::from(u8::from(n_hi > 0));
            let c_lo = lo.map_or(1.0, |l| {
                let n = l.train_ratios.len() as u64;
                if n == 0 {
                    0.0
                } else {
                    1.0 - upper_tail(n, n - slow(l), 0.5)
                }
            });
            (c_hi * c_lo).clamp(0.0, 1.0)
        }
        FaultKind::Corruption if hi.damaged > 0 && lo.is_none_or(|l| l.damaged == 0) => {
            // A damaged reply is proof of damage beyond `lo`; `lo` clean is as likely as its
            // sample says when `hi` damages as often as seen.
            let c_lo = lo.map_or(1.0, |l| {
                let p = (hi.damaged as f64 / hi.sent.max(1) as f64).clamp(1e-9, 1.0 - 1e-9);
                1.0 - lower_tail(l.sent, 0, p)
            });
            c_lo.clamp(0.0, 1.0)
        }
        _ => {
            let events = hi.loss_runs + hi.damaged;
            let c_hi = 1.0 - upper_tail(hi.sent, events, t.loss);
            let c_lo = lo.map_or(1.0, |l| {
                let p = (events as f64 / hi.sent.max(1) as f64).clamp(1e-9, 1.0 - 1e-9);
                1.0 - lower_tail(l.sent, l.loss_runs + l.damaged, p)
            });
            (c_hi * c_lo).clamp(0.0, 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::tests::observe;

    /// Runs the search over `n` reflectors with the fault first showing at `fault` (none: clean).
    fn search(n: usize, fault: Option<usize>) -> (Outcome, usize) {
        let mut b = Bisection::new(n);
        let mut asked = 0;
        while let Some(i) = b.next() {
            asked += 1;
            assert!(asked <= n, "the search must end");
            b.record(i, fault.is_some_and(|f| i >= f));
        }
        (b.outcome().unwrap(), asked)
    }

    #[test]
    fn the_search_finds_every_segment_in_log_steps() {
        for n in 1..=20 {
            assert_eq!(search(n, None), (Outcome::NoFault, 1));
            for f in 0..n {
                let (o, asked) = search(n, Some(f));
                let want = Outcome::Segment {
                    after: f.checked_sub(1),
                    at: f,
                };
                assert_eq!(o, want, "n {n} fault at {f}");
                let bound = 2 + (n as f64).log2().ceil() as usize;
                assert!(asked <= bound, "n {n} fault {f}: {asked} > {bound}");
            }
        }
        assert_eq!(Bisection::new(0).outcome(), Some(Outcome::NoFault));
    }

    #[test]
    fn binomial_tails_add_up() {
        for (n, p) in [(10u64, 0.3), (1000, 0.002), (1000, 0.04)] {
            for k in [0u64, 1, 3, 9] {
                let both = lower_tail(n, k, p) + upper_tail(n, k + 1, p);
                assert!((both - 1.0).abs() < 1e-9, "n {n} k {k} p {p}: {both}");
            }
        }
        assert!((upper_tail(8, 8, 0.5) - 1.0 / 256.0).abs() < 1e-12);
        assert_eq!(upper_tail(5, 0, 0.1), 1.0);
        let exact = 0.96f64.powi(1000);
        assert!((lower_tail(1000, 0, 0.04) / exact - 1.0).abs() < 1e-9);
    }

    #[test]
    fn clear_evidence_is_confident_and_thin_evidence_is_not() {
        let t = Thresholds::default();
        let clean = Figures::of(&observe(8, 125, 50e6, None, |_| false), &t);
        let lossy = Figures::of(&observe(8, 125, 50e6, None, |i| i % 25 == 3), &t);
        let c = confidence(Some(&clean), &lossy, FaultKind::RandomLoss, &t);
        assert!(c > 0.999, "{c}");
        // Three losses in a thousand against a clean neighbour: not much to go on.
        let thin = Figures::of(&observe(8, 125, 50e6, None, |i| i % 333 == 3), &t);
        let c = confidence(Some(&clean), &thin, FaultKind::RandomLoss, &t);
        assert!(c < 0.9, "{c}");
        // A clean point that saw as many losses as the faulty one gives no confidence.
        let c = confidence(Some(&lossy), &lossy, FaultKind::RandomLoss, &t);
        assert!(c < 0.6, "{c}");
        let slow = Figures::of(&observe(8, 125, 50e6, Some(20e6), |_| false), &t);
        let c = confidence(Some(&clean), &slow, FaultKind::Rate, &t);
        assert!(c > 0.99, "{c}");
        let c = confidence(Some(&slow), &slow, FaultKind::Rate, &t);
        assert!(c < 0.01, "{c}");
        let mut damaged = lossy.clone();
        damaged.damaged = 12;
        let c = confidence(Some(&clean), &damaged, FaultKind::Corruption, &t);
        assert!(c > 0.999, "{c}");
    }
}
