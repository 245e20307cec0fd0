//! The figures of one reflector, from what one measurement observed, and the verdict on them.
//!
//! A measurement sends `trains` trains of probes paced at the asked rate (a gap between trains lets
//! a queue drain) and notes when each reply came back. From that:
//! - **loss**: probes without a good reply (lost on the way there or back, or damaged), with a
//!   99 % Wilson interval, and how the losses cluster: runs of consecutive lost probes (a burst
//!   loss process leaves long runs, independent loss runs of about one);
//! - **rate**: per train, the replies' dispersion (bytes between the first and the last reply over
//!   the time between them) against the rate the train was sent at; a link slower than the train
//!   spreads it out (packet-pair/train dispersion, Jacobson 1988, Dovrolis et al. 2004);
//! - **damage**: replies that came back with a bad checksum (IPv4), or the host's ICMPv6
//!   checksum-error counter growing during the measurement (the kernel drops those itself).
//!
//! The verdict: damage seen → corruption; the median train ratio below the rate threshold → a rate
//! below the asked one; the loss's lower bound above the loss threshold → loss, bursty when its
//! runs average two probes or more. Otherwise clean.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::icmp::Received;

/// One probe of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Its train (0-based).
    pub train: u32,
    /// When it was sent, ns on the measurement's clock.
    pub sent_ns: u64,
    /// When its good reply came back, if it did.
    pub back_ns: Option<u64>,
}

/// What one measurement of one reflector observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observations {
    /// Every probe in send order.
    pub probes: Vec<Probe>,
    /// IP bytes of each probe (and of each reply).
    pub bytes: u32,
    /// Replies from the reflector that came back damaged (a bad checksum).
    pub damaged: u64,
    /// Growth of the host's ICMP checksum-error counter during the measurement (IPv6, where the
    /// kernel drops damaged replies before the socket sees them).
    pub checksum_errors: u64,
}

impl Observations {
    /// Notes what came back from reflector `from` during a measurement whose probes carried
    /// identifier `ident` and round `round`: the first good reply to each probe sent sets its
    /// `back_ns`; damaged replies from `from` are counted. Anything else (replies to probes never
    /// sent, of another round or run, from another address, second copies) is ignored, so a
    /// peer that forges or repeats replies cannot make a probe come back twice or invent one.
    pub fn account(&mut self, heard: &[(u64, Received)], from: IpAddr, ident: u16, round: u32) {
        for &(at, got) in heard {
            match got {
                Received::Echo {
                    from: f,
                    id,
                    round: r,
                    ..
                } if f == from && id.ident == ident && r == round => {
                    if let Some(p) = self.probes.get_mut(usize::from(id.seq))
                        && p.back_ns.is_none()
                        && at >= p.sent_ns
                    {
                        p.back_ns = Some(at);
                    }
                }
                Received::Damaged { from: f } if f == from => self.damaged += 1,
                _ => {}
            }
        }
    }
}

/// When a reflector counts as faulty.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Loss above this (the 99 % lower bound of the measured loss) is a fault.
    pub loss: f64,
    /// Replies spread below this fraction of the sending rate (median over trains) are a fault.
    pub rate: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            loss: 0.002,
            rate: 0.8,
        }
    }
}

/// The kind of fault a reflector shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Independent losses.
    RandomLoss,
    /// Losses in runs (a burst loss process).
    BurstLoss,
    /// A rate below the asked one.
    Rate,
    /// Damaged packets (dropped by a checksum).
    Corruption,
}

impl FaultKind {
    /// How a report says it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::RandomLoss => "random loss",
            Self::BurstLoss => "burst loss",
            Self::Rate => "a rate below the probes'",
            Self::Corruption => "corruption (damaged packets)",
        }
    }
}

/// A reflector's figures and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Probes sent.
    pub sent: u64,
    /// Good replies.
    pub received: u64,
    /// Probes without a good reply.
    pub lost: u64,
    /// `lost / sent`.
    pub loss: f64,
    /// 99 % Wilson interval of the loss.
    pub loss_low: f64,
    /// Its upper end.
    pub loss_high: f64,
    /// Runs of consecutive lost probes (loss events).
    pub loss_runs: u64,
    /// Mean length of a run, probes (0 without loss).
    pub mean_run: f64,
    /// Longest run.
    pub longest_run: u64,
    /// Damaged replies plus checksum errors counted by the host.
    pub damaged: u64,
    /// Median over trains of the rate each train was sent at, bit/s (IP bytes).
    pub sent_bps: f64,
    /// Median over trains of the replies' dispersion rate, bit/s.
    pub back_bps: f64,
    /// Per train: dispersion rate / sending rate (trains with fewer than two replies left out).
    pub train_ratios: Vec<f64>,
    /// Median of `train_ratios` (1 when none).
    pub ratio: f64,
    /// Smallest round-trip time seen, ms.
    pub rtt_min_ms: Option<f64>,
    /// Median round-trip time, ms.
    pub rtt_median_ms: Option<f64>,
    /// The fault these figures show, if any.
    pub fault: Option<FaultKind>,
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The 99 % Wilson score interval of `k` successes in `n` trials.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    const Z: f64 = 2.575_829;
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = Z * Z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    let low = if k == 0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    (low, (centre + half).min(1.0))
}

/// Rate, bit/s, of `count` packets of `bytes` spread from `first` to `last` ns.
fn spread_bps(count: usize, bytes: u32, first: u64, last: u64) -> Option<f64> {
    (count >= 2 && last > first)
        .then(|| (count - 1) as f64 * f64::from(bytes) * 8.0 / ((last - first) as f64 / 1e9))
}

impl Figures {
    /// The figures of `obs`, judged by `t`.
    pub fn of(obs: &Observations, t: &Thresholds) -> Self {
        let sent = obs.probes.len() as u64;
        let received = obs.probes.iter().filter(|p| p.back_ns.is_some()).count() as u64;
        let lost = sent - received;
        let (mut runs, mut run, mut longest) = (0u64, 0u64, 0u64);
        for p in &obs.probes {
            if p.back_ns.is_none() {
                run += 1;
                if run == 1 {
                    runs += 1;
                }
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        let trains = obs.probes.iter().map(|p| p.train + 1).max().unwrap_or(0);
        let (mut sent_rates, mut back_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..trains {
            let train: Vec<&Probe> = obs.probes.iter().filter(|p| p.train == k).collect();
            let (Some(first), Some(last)) = (train.first(), train.last()) else {
                continue;
            };
            let Some(out) = spread_bps(train.len(), obs.bytes, first.sent_ns, last.sent_ns) else {
                continue;
            };
            sent_rates.push(out);
            let mut back: Vec<u64> = train.iter().filter_map(|p| p.back_ns).collect();
            back.sort_unstable();
            if let (Some(&a), Some(&b)) = (back.first(), back.last())
                && let Some(bps) = spread_bps(back.len(), obs.bytes, a, b)
            {
                back_rates.push(bps);
                ratios.push(bps / out);
            }
        }
        let mut rtts: Vec<f64> = obs
            .probes
            .iter()
            .filter_map(|p| p.back_ns.map(|b| b.saturating_sub(p.sent_ns) as f64 / 1e6))
            .collect();
        let (loss_low, loss_high) = wilson(lost, sent);
        let damaged = obs.damaged + obs.checksum_errors;
        let mut f = Figures {
            sent,
            received,
            lost,
            loss: if sent == 0 {
                0.0
            } else {
                lost as f64 / sent as f64
            },
            loss_low,
            loss_high,
            loss_runs: runs,
            mean_run: if runs == 0 {
                0.0
            } else {
                lost as f64 / runs as f64
            },
            longest_run: longest,
            damaged,
            sent_bps: median(&mut sent_rates).unwrap_or(0.0),
            back_bps: median(&mut back_rates).unwrap_or(0.0),
            ratio: median(&mut ratios.clone()).unwrap_or(1.0),
            train_ratios: ratios,
            rtt_min_ms: rtts.iter().copied().min_by(f64::total_cmp),
            rtt_median_ms: median(&mut rtts),
            fault: None,
        };
        f.fault = f.judge(t);
        f
    }

    fn judge(&self, t: &Thresholds) -> Option<FaultKind> {
        if self.sent == 0 {
            return None;
        }
        if self.damaged > 0 {
            return Some(FaultKind::Corruption);
        }
        if self.received == 0 || self.ratio < t.rate {
            // Nothing came back at all: a rate of zero.
            return Some(if self.received == 0 {
                FaultKind::RandomLoss
            } else {
                FaultKind::Rate
            });
        }
        if self.loss_low > t.loss {
            return Some(if self.mean_run >= 2.0 {
                FaultKind::BurstLoss
            } else {
                FaultKind::RandomLoss
            });
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `trains` trains of `per` probes of 1500 B sent at `bps`; each reply `rtt` later, spread by a
    /// link of `link_bps` (none: not spread); probes whose index `lost` says are lost.
    pub(crate) fn observe(
        trains: u32,
        per: u32,
        bps: f64,
        link_bps: Option<f64>,
        lost: impl Fn(u64) -> bool,
    ) -> Observations {
        let gap = 1500.0 * 8.0 / bps * 1e9;
        let serve = link_bps.map_or(0.0, |l| 1500.0 * 8.0 / l * 1e9);
        let mut probes = Vec::new();
        let mut i = 0u64;
        for k in 0..trains {
            let start = u64::from(k) * 1_000_000_000;
            let mut free = 0.0f64;
            for j in 0..per {
                let sent = start as f64 + f64::from(j) * gap;
                free = free.max(sent) + serve;
                let back = (!lost(i)).then_some((free + 50e6) as u64);
                probes.push(Probe {
                    train: k,
                    sent_ns: sent as u64,
                    back_ns: back,
                });
                i += 1;
            }
        }
        Observations {
            probes,
            bytes: 1500,
            ..Observations::default()
        }
    }

    #[test]
    fn a_clean_path_is_clean() {
        let f = Figures::of(
            &observe(8, 125, 50e6, None, |_| false),
            &Thresholds::default(),
        );
        assert_eq!((f.sent, f.received, f.lost), (1000, 1000, 0));
        assert!((f.sent_bps / 50e6 - 1.0).abs() < 0.01, "{}", f.sent_bps);
        assert!((f.ratio - 1.0).abs() < 0.01);
        assert_eq!(f.rtt_min_ms, Some(50.0));
        assert_eq!(f.fault, None);
    }

    #[test]
    fn a_slow_link_spreads_the_replies() {
        let f = Figures::of(
            &observe(8, 125, 50e6, Some(20e6), |_| false),
            &Thresholds::default(),
        );
        assert!((f.back_bps / 20e6 - 1.0).abs() < 0.01, "{}", f.back_bps);
        assert!((f.ratio - 0.4).abs() < 0.01);
        assert_eq!(f.fault, Some(FaultKind::Rate));
    }

    #[test]
    fn losses_are_random_or_bursty_by_their_runs() {
        let t = Thresholds::default();
        let random = Figures::of(&observe(8, 125, 50e6, None, |i| i % 37 == 5), &t);
        assert_eq!(random.lost, 27);
        assert_eq!(random.mean_run, 1.0);
        assert_eq!(random.fault, Some(FaultKind::RandomLoss));
        let burst = Figures::of(&observe(8, 125, 50e6, None, |i| i % 150 < 6), &t);
        assert_eq!((burst.loss_runs, burst.longest_run), (7, 6));
        assert_eq!(burst.fault, Some(FaultKind::BurstLoss));
        // One loss in a thousand is within the default threshold's noise.
        let one = Figures::of(&observe(8, 125, 50e6, None, |i| i == 500), &t);
        assert!(one.loss_low < t.loss);
        assert_eq!(one.fault, None);
    }

    #[test]
    fn damage_is_corruption_and_silence_is_loss() {
        let t = Thresholds::default();
        let mut o = observe(8, 125, 50e6, None, |i| i % 50 == 0);
        o.damaged = 3;
        assert_eq!(Figures::of(&o, &t).fault, Some(FaultKind::Corruption));
        let none = Figures::of(&observe(2, 10, 50e6, None, |_| true), &t);
        assert_eq!(none.fault, Some(FaultKind::RandomLoss));
        assert_eq!(none.ratio, 1.0);
    }

    #[test]
    fn forged_repeated_and_stray_replies_are_not_counted() {
        use crate::icmp::ProbeId;
        let me: IpAddr = "10.201.1.4".parse().unwrap();
        let other: IpAddr = "10.201.1.5".parse().unwrap();
        let mut o = observe(1, 4, 50e6, None, |_| true);
        let echo = |from, ident, seq, round| Received::Echo {
            from,
            id: ProbeId { ident, seq },
            round,
            len: 1480,
        };
        let heard = vec![
            (10_000_000, echo(me, 7, 1, 9)),    // good
            (20_000_000, echo(me, 7, 1, 9)),    // its copy
            (10_000_000, echo(me, 7, 9, 9)),    // a probe never sent
            (10_000_000, echo(me, 8, 2, 9)),    // another run's identifier
            (10_000_000, echo(me, 7, 2, 8)),    // another round
            (10_000_000, echo(other, 7, 3, 9)), // another address
            (0, echo(me, 7, 3, 9)),             // back before it was sent
            (10_000_000, Received::Damaged { from: me }),
            (10_000_000, Received::Damaged { from: other }),
        ];
        o.account(&heard, me, 7, 9);
        let back: Vec<Option<u64>> = o.probes.iter().map(|p| p.back_ns).collect();
        assert_eq!(back, vec![None, Some(10_000_000), None, None]);
        assert_eq!(o.damaged, 1);
    }

    #[test]
    fn wilson_bounds_hold_the_estimate() {
        let (lo, hi) = wilson(40, 1000);
        assert!(
            lo < 0.04 && hi > 0.04 && lo > 0.025 && hi < 0.06,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 1000).0, 0.0);
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }
}
