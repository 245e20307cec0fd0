//! The bottleneck (stage 3) and the synthetic cross traffic that shares it
//! (stage 2): a FIFO byte queue drained by a serializer at R bit/s.
//!
//! Contract: a segment arriving at `now` with `wire` bytes starts service at
//! `start = max(now, link_free)` and departs at `start + 8·wire/R`; the
//! backlog it sees is `(link_free − now)·R/8` bytes (the frame in service
//! included); it is dropped (drop-tail) when backlog + wire > queue_bytes.
//! The backlog therefore never exceeds the queue size.
//!
//! Exactness: time is kept internally in units of 1/R ns, i.e. the state is
//! `link_free × R` as a `u128` (a frame of `w` bytes costs `8·w·10⁹` units),
//! so serialization never accumulates rounding: the n-th back-to-back
//! segment departs at exactly `ceil(Σ wire bits / R)` ns after the first
//! starts. Departure times are rounded up to whole nanoseconds.
//!
//! Cross traffic is a fluid (virtual bytes, never materialised): between arrivals, virtual bytes
//! arrive at the CBR rate plus the on/off rate when on, and the serializer
//! drains at R; the backlog W evolves as `W' = clamp(W + (C − R)·dt, 0,
//! queue)`, exactly, per piece of constant C. Virtual bytes above the queue
//! size are dropped and counted. Because the fluid advances only with time,
//! segments arriving at the same instant are served back to back, which
//! keeps a record of N segments equivalent to N one-segment records.

use longhaul_units::Nanos;

use crate::config::{Bottleneck, CrossTraffic, OnOff};
use crate::rng::{STREAM_CROSS, StageRng};

/// Internal units per byte: 8 bits × 10⁹ (units are bit·ns/s: R × time).
const UNITS_PER_BYTE: u128 = 8_000_000_000;

/// Outcome of offering a segment to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Dropped: the queue had no room.
    Full,
    /// Would be served: starts at `start` after waiting behind `ahead_bytes`.
    Serve {
        /// When its serialization starts.
        start: Nanos,
        /// Bytes ahead of it (backlog at arrival).
        ahead_bytes: u64,
    },
}

/// The on/off source's phase.
#[derive(Debug, Clone)]
struct OnOffState {
    cfg: OnOff,
    on: bool,
    /// End of the current phase.
    until: Nanos,
}

/// A scheduled burst of cross traffic: `rate_bps` more on the bottleneck during [from, until).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// Start, in the link's time base (the times passed to `Link::arrive`).
    pub from: Nanos,
    /// End (exclusive).
    pub until: Nanos,
    /// Cross-traffic rate during the burst, bit/s (adds to the configured cross traffic).
    pub rate_bps: u64,
}

/// Queue, serializer and cross traffic of one direction.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    rate: u128,
    cap: u128,
    /// `link_free × R` in internal units.
    busy: u128,
    cross_cbr: u128,
    on_off: Option<OnOffState>,
    /// Scheduled bursts, in start order.
    bursts: Vec<Burst>,
    rng: StageRng,
    /// Time the cross-traffic fluid has been advanced to (`None` before the
    /// first arrival).
    cross_at: Option<Nanos>,
    /// Virtual bytes offered and dropped, in internal units.
    pub(crate) cross_offered: u128,
    pub(crate) cross_dropped: u128,
}

impl Queue {
    pub(crate) fn new(b: &Bottleneck, cross: Option<&CrossTraffic>, seed: u64) -> Self {
        Self {
            rate: u128::from(b.rate_bps),
            cap: u128::from(b.queue_bytes) * UNITS_PER_BYTE,
            busy: 0,
            cross_cbr: cross.map_or(0, |c| u128::from(c.cbr_bps)),
            on_off: cross.and_then(|c| c.on_off).map(|cfg| OnOffState {
                cfg,
                on: true,
                until: Nanos::ZERO,
            }),
            bursts: Vec::new(),
            rng: StageRng::new(seed, STREAM_CROSS),
            cross_at: None,
            cross_offered: 0,
            cross_dropped: 0,
        }
    }

    /// Work queued at `now`, in internal units (zero when idle).
    fn work(&self, now: Nanos) -> u128 {
        self.busy
            .saturating_sub(u128::from(now.as_nanos()) * self.rate)
    }

    /// Backlog at `now` in bytes (rounded down).
    pub(crate) fn backlog_bytes(&self, now: Nanos) -> u64 {
        (self.work(now) / UNITS_PER_BYTE) as u64
    }

    fn phase_length(&mut self, on: bool) -> Nanos {
        let Some(s) = &self.on_off else {
            return Nanos::MAX;
        };
        let mean = if on { s.cfg.on } else { s.cfg.off };
        if s.cfg.exponential {
            let d = self.rng.exponential(mean.as_nanos() as f64);
            Nanos((d.round() as u64).max(1))
        } else {
            mean
        }
    }

    /// Adds a burst (kept in start order; bursts that have ended are dropped as time passes).
    pub(crate) fn add_burst(&mut self, b: Burst) {
        let at = self.bursts.partition_point(|x| x.from <= b.from);
        self.bursts.insert(at, b);
    }

    /// Extra cross-traffic rate of the bursts active at `t`, and the next time that changes.
    fn burst_rate(&self, t: Nanos) -> (u128, Nanos) {
        let mut rate = 0u128;
        let mut next = Nanos::MAX;
        for b in &self.bursts {
            if b.from <= t && t < b.until {
                rate += u128::from(b.rate_bps);
                next = next.min(b.until);
            } else if b.from > t {
                next = next.min(b.from);
            }
        }
        (rate, next)
    }

    /// Advances the cross-traffic fluid to `now`.
    pub(crate) fn advance(&mut self, now: Nanos) {
        let Some(mut t) = self.cross_at else {
            // The on/off source starts "on" at the first arrival.
            if self.on_off.is_some() {
                let len = self.phase_length(true);
                if let Some(s) = self.on_off.as_mut() {
                    s.until = now.saturating_add(len);
                }
            }
            self.cross_at = Some(now);
            return;
        };
        if self.cross_cbr == 0 && self.on_off.is_none() && self.bursts.is_empty() {
            self.cross_at = Some(now);
            return;
        }
        while t < now {
            let (end, c) = match &self.on_off {
                Some(s) => (
                    s.until.min(now),
                    self.cross_cbr + if s.on { u128::from(s.cfg.rate_bps) } else { 0 },
                ),
                None => (now, self.cross_cbr),
            };
            let (burst, edge) = self.burst_rate(t);
            let (end, c) = (end.min(edge), c + burst);
            let dt = u128::from((end - t).as_nanos());
            let mut w = self.work(t);
            let offered = c * dt;
            let drained = self.rate * dt;
            self.cross_offered += offered;
            if offered >= drained {
                w += offered - drained;
                if w > self.cap {
                    self.cross_dropped += w - self.cap;
                    w = self.cap;
                }
            } else {
                w = w.saturating_sub(drained - offered);
            }
            self.busy = u128::from(end.as_nanos()) * self.rate + w;
            t = end;
            let flip = self.on_off.as_ref().is_some_and(|s| s.until == end);
            if flip {
                let on = !self.on_off.as_ref().is_some_and(|s| s.on);
                let len = self.phase_length(on);
                if let Some(s) = self.on_off.as_mut() {
                    s.on = on;
                    s.until = end.saturating_add(len);
                }
            }
        }
        self.bursts.retain(|b| b.until > now);
        self.cross_at = Some(now);
    }

    /// Offers a segment of `wire` bytes at `now` (after [`Queue::advance`]).
    /// Nothing is charged until [`Queue::commit`].
    pub(crate) fn offer(&self, now: Nanos, wire: u64) -> Admit {
        let w = self.work(now);
        if w + u128::from(wire) * UNITS_PER_BYTE > self.cap {
            return Admit::Full;
        }
        let start_units = u128::from(now.as_nanos()) * self.rate + w;
        Admit::Serve {
            start: Nanos(start_units.div_ceil(self.rate) as u64),
            ahead_bytes: (w / UNITS_PER_BYTE) as u64,
        }
    }

    /// Serves a segment of `wire` bytes offered at `now`; returns its
    /// departure time (end of serialization).
    pub(crate) fn commit(&mut self, now: Nanos, wire: u64) -> Nanos {
        let start_units = u128::from(now.as_nanos()) * self.rate + self.work(now);
        self.busy = start_units + u128::from(wire) * UNITS_PER_BYTE;
        Nanos(self.busy.div_ceil(self.rate) as u64)
    }

    /// Serialization time of `wire` bytes, rounded up.
    pub(crate) fn serialization(&self, wire: u64) -> Nanos {
        Nanos((u128::from(wire) * UNITS_PER_BYTE).div_ceil(self.rate) as u64)
    }
}

/// Converts internal units to bytes.
pub(crate) fn units_to_bytes(units: u128) -> u64 {
    u64::try_from(units / UNITS_PER_BYTE).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Aqm;

    fn queue(rate: u64, bytes: u64, cross: Option<CrossTraffic>) -> Queue {
        let b = Bottleneck {
            rate_bps: rate,
            queue_bytes: bytes,
            overhead_per_frame: 0,
            aqm: Aqm::DropTail,
        };
        Queue::new(&b, cross.as_ref(), 1)
    }

    #[test]
    fn cbr_cross_traffic_occupies_exactly_its_share() {
        // 1 Gbit/s link with 600 Mbit/s CBR: idle link stays empty (fluid),
        // and a segment pays only its own serialization.
        let mut q = queue(
            1_000_000_000,
            1_000_000,
            Some(CrossTraffic {
                cbr_bps: 600_000_000,
                on_off: None,
            }),
        );
        q.advance(Nanos(0));
        q.advance(Nanos::from_secs(1));
        assert_eq!(q.backlog_bytes(Nanos::from_secs(1)), 0);
        assert_eq!(units_to_bytes(q.cross_offered), 75_000_000);
        assert_eq!(q.cross_dropped, 0);
    }

    #[test]
    fn on_off_above_the_rate_fills_the_queue_and_drops_the_excess() {
        // 2 Gbit/s on for 1 ms, off 1 ms, into 1 Gbit/s and a 100 kB queue:
        // during "on" the queue grows 125 kB/ms, capped at 100 kB; 25 kB of
        // virtual bytes are dropped per on period; "off" drains 125 kB.
        let mut q = queue(
            1_000_000_000,
            100_000,
            Some(CrossTraffic {
                cbr_bps: 0,
                on_off: Some(OnOff {
                    rate_bps: 2_000_000_000,
                    on: Nanos::from_millis(1),
                    off: Nanos::from_millis(1),
                    exponential: false,
                }),
            }),
        );
        q.advance(Nanos(0));
        q.advance(Nanos::from_millis(1));
        assert_eq!(q.backlog_bytes(Nanos::from_millis(1)), 100_000);
        assert_eq!(units_to_bytes(q.cross_dropped), 25_000);
        q.advance(Nanos::from_millis(2));
        assert_eq!(q.backlog_bytes(Nanos::from_millis(2)), 0);
        q.advance(Nanos::from_millis(10));
        assert_eq!(units_to_bytes(q.cross_dropped), 125_000);
        assert_eq!(units_to_bytes(q.cross_offered), 1_250_000);
    }

    #[test]
    fn a_scheduled_burst_occupies_the_bottleneck_for_exactly_its_span() {
        // 1 Gbit/s bottleneck, 10 MB queue; a 0.8 Gbit/s burst from 1 s to 3 s offers exactly
        // 0.8e9 / 8 × 2 = 200 MB, none before or after.
        let mut q = queue(1_000_000_000, 10_000_000, None);
        q.advance(Nanos::ZERO);
        q.add_burst(Burst {
            from: Nanos::from_secs(1),
            until: Nanos::from_secs(3),
            rate_bps: 800_000_000,
        });
        q.advance(Nanos::from_millis(500));
        assert_eq!(q.cross_offered, 0);
        q.advance(Nanos::from_secs(2));
        assert_eq!(units_to_bytes(q.cross_offered), 100_000_000);
        // Below the rate: no backlog builds.
        assert_eq!(q.backlog_bytes(Nanos::from_secs(2)), 0);
        q.advance(Nanos::from_secs(10));
        assert_eq!(units_to_bytes(q.cross_offered), 200_000_000);
        assert_eq!(q.cross_dropped, 0);
        assert!(q.bursts.is_empty(), "ended bursts are dropped");
        // A burst above the rate fills the queue and drops the excess: 1.5 Gbit/s for 1 s on a
        // 1 Gbit/s link is 62.5 MB too much, of which the 10 MB queue keeps 10 MB.
        q.add_burst(Burst {
            from: Nanos::from_secs(20),
            until: Nanos::from_secs(21),
            rate_bps: 1_500_000_000,
        });
        q.advance(Nanos::from_secs(21));
        assert_eq!(units_to_bytes(q.cross_dropped), 52_500_000);
        assert_eq!(q.backlog_bytes(Nanos::from_secs(21)), 10_000_000);
    }
}
