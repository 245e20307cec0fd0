//! Lateness by phase (issue 22): the *ramp* (slow start, and the loss storm it may end in) and the
//! *steady* state after it, so that a run whose start overflowed the queue is not judged only by
//! its worst second, nor a clean start hidden by a later storm.
//!
//! The boundary is found from what the emulator sees, the same way for every controller: the steady
//! phase starts at the end of the first window of `max(1 s, 4 × RTT)` in which a direction wrote at
//! least 80 % of its bottleneck rate (less any constant cross traffic) and its queue dropped nothing.
//! A slow start saturates the bottleneck about one round trip before it overflows a one-BDP queue,
//! so the window in which it saturates holds its overflow too; a paced or well-behaved start passes
//! as soon as it runs near the rate. Without a rate limit, the first window that carried anything
//! without a drop. Both directions of a testbed switch together (the data direction decides; the
//! ACK direction never carries 80 %).

use std::sync::atomic::{AtomicU64, Ordering};

use longhaul_link::LinkConfig;
use longhaul_units::hist::{Histogram, Summary};

use crate::stall::{StallStats, StallWatch};

/// Shortest window judged.
pub const MIN_WINDOW_NS: u64 = 1_000_000_000;
/// Windows last this many round trips at least.
pub const WINDOW_RTTS: u64 = 4;
/// Share of the bottleneck rate a window must carry to count as steady: 80 %.
pub const STEADY_SHARE: (u64, u64) = (4, 5);

/// When the testbed came up and when its steady phase began (0: not yet), shared by its forwarders.
#[derive(Debug)]
pub(crate) struct PhaseShared {
    up_ns: u64,
    steady_since_ns: AtomicU64,
}

impl PhaseShared {
    pub(crate) fn new(up_ns: u64) -> Self {
        Self {
            up_ns,
            steady_since_ns: AtomicU64::new(0),
        }
    }

    /// When the testbed came up (monotonic clock).
    pub(crate) fn up_ns(&self) -> u64 {
        self.up_ns
    }

    fn steady(&self) -> bool {
        self.steady_since_ns.load(Ordering::Relaxed) != 0
    }

    /// Marks the steady phase as begun at `now` (the first direction to get there decides).
    fn begin_steady(&self, now: u64) {
        let _ = self.steady_since_ns.compare_exchange(
            0,
            now.max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Seconds from the testbed's start to its steady phase, if it began.
    pub(crate) fn steady_after_s(&self) -> Option<f64> {
        let t = self.steady_since_ns.load(Ordering::Relaxed);
        (t != 0).then(|| t.saturating_sub(self.up_ns) as f64 / 1e9)
    }
}

/// One direction's judge of windows.
#[derive(Debug)]
pub(crate) struct PhaseClock {
    window_ns: u64,
    /// Bytes a steady window must carry (0: anything without a rate limit, but more than nothing).
    steady_bytes: u64,
    start_ns: Option<u64>,
    written_at_start: u64,
    drops_at_start: u64,
}

impl PhaseClock {
    /// For a direction with `config`, on a path of round-trip time `rtt_ns`.
    pub(crate) fn new(config: &LinkConfig, rtt_ns: u64) -> Self {
        let window_ns = rtt_ns.saturating_mul(WINDOW_RTTS).max(MIN_WINDOW_NS);
        let rate = config.bottleneck.map_or(0, |b| {
            let cross = config.cross.as_ref().map_or(0, |c| c.cbr_bps);
            b.rate_bps.saturating_sub(cross)
        });
        let (num, den) = STEADY_SHARE;
        let steady_bytes =
            (u128::from(rate) * u128::from(window_ns) / 8 / 1_000_000_000) as u64 / den * num;
        Self {
            window_ns,
            steady_bytes,
            start_ns: None,
            written_at_start: 0,
            drops_at_start: 0,
        }
    }

    /// Called now and then with the direction's totals: bytes written and segments dropped at the
    /// queue. Returns whether the window that just closed was steady.
    pub(crate) fn tick(&mut self, now: u64, written: u64, queue_drops: u64) -> bool {
        let Some(start) = self.start_ns else {
            if written > 0 {
                self.start_ns = Some(now);
                self.written_at_start = written;
                self.drops_at_start = queue_drops;
            }
            return false;
        };
        if now < start + self.window_ns {
            return false;
        }
        let carried = written - self.written_at_start;
        let clean = queue_drops == self.drops_at_start;
        self.start_ns = Some(now);
        self.written_at_start = written;
        self.drops_at_start = queue_drops;
        clean && carried > 0 && carried >= self.steady_bytes
    }
}

/// Write lateness: overall, in the ramp and steady phases, and its stalls ([`crate::stall`]).
#[derive(Debug)]
pub(crate) struct Lateness {
    all: Histogram,
    ramp: Histogram,
    steady: Histogram,
    clock: PhaseClock,
    shared: std::sync::Arc<PhaseShared>,
    stalls: StallWatch,
}

impl Lateness {
    pub(crate) fn new(
        clock: PhaseClock,
        shared: std::sync::Arc<PhaseShared>,
        stalls: StallWatch,
    ) -> Self {
        Self {
            all: Histogram::new(),
            ramp: Histogram::new(),
            steady: Histogram::new(),
            clock,
            shared,
            stalls,
        }
    }

    /// One write at `now`, `ns` after its scheduled release.
    pub(crate) fn record(&mut self, now: u64, ns: u64) {
        self.all.record(ns);
        if self.shared.steady() {
            self.steady.record(ns)
        } else {
            self.ramp.record(ns)
        }
        self.stalls.write(now, ns);
    }

    /// Judges the window with the direction's totals (see [`PhaseClock::tick`]) and counts the
    /// drops after a stall (see [`StallWatch::tick`]).
    pub(crate) fn tick(&mut self, now: u64, written: u64, queue_drops: u64) {
        if self.clock.tick(now, written, queue_drops) {
            self.shared.begin_steady(now);
        }
        self.stalls.tick(now, queue_drops);
    }

    /// Overall, ramp and steady summaries, and when the steady phase began.
    pub(crate) fn summaries(&self) -> (Summary, Summary, Summary, Option<f64>) {
        (
            self.all.summary(),
            self.ramp.summary(),
            self.steady.summary(),
            self.shared.steady_after_s(),
        )
    }

    /// The stalls so far.
    pub(crate) fn stalls(&self) -> StallStats {
        self.stalls.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_link::{Bottleneck, Nanos};

    const S: u64 = 1_000_000_000;

    fn ten_gig() -> LinkConfig {
        LinkConfig {
            bottleneck: Some(Bottleneck {
                rate_bps: 10_000_000_000,
                queue_bytes: 400_000_000,
                overhead_per_frame: 0,
                aqm: Default::default(),
            }),
            delay: Nanos::from_millis(161),
            ..LinkConfig::default()
        }
    }

    #[test]
    fn a_slow_start_that_overflows_is_ramp_until_a_clean_full_window() {
        // 323 ms: windows of 1.292 s; 80 % of 10 Gbit/s over one is 1.292 GB.
        let mut c = PhaseClock::new(&ten_gig(), 323_000_000);
        assert_eq!(c.window_ns, 1_292_000_000);
        assert_eq!(c.steady_bytes, 1_292_000_000);
        let w = c.window_ns;
        assert!(!c.tick(0, 0, 0), "no data yet");
        assert!(!c.tick(S, 1_000, 0), "the first data opens a window");
        // Saturated, but the queue overflowed in the same window: ramp.
        assert!(!c.tick(S + w, 1_615_000_000, 34_000));
        // The storm: little carried.
        assert!(!c.tick(S + 2 * w, 1_700_000_000, 34_100));
        // Near the rate, clean: steady.
        assert!(c.tick(S + 3 * w, 1_700_000_000 + 1_600_000_000, 34_100));
        // Not before a window has passed.
        assert!(!c.tick(S + 3 * w + 1, 4_000_000_000, 34_100));
    }

    #[test]
    fn a_paced_start_is_steady_once_near_the_rate_and_cross_traffic_counts() {
        let mut c = PhaseClock::new(&ten_gig(), 323_000_000);
        let w = c.window_ns;
        c.tick(0, 1, 0);
        // 8.5 Gbit/s for a window, no drop.
        assert!(c.tick(w, 1 + 8_500_000_000 / 8 * w / S, 0));
        // 7 Gbit/s is not steady on a 10 Gbit/s path, but is beside 2 Gbit/s of cross traffic.
        let mut cfg = ten_gig();
        let mut c = PhaseClock::new(&cfg, 323_000_000);
        c.tick(0, 1, 0);
        assert!(!c.tick(w, 1 + 7_000_000_000 / 8 * w / S, 0));
        cfg.cross = Some(longhaul_link::CrossTraffic {
            cbr_bps: 2_000_000_000,
            ..Default::default()
        });
        let mut c = PhaseClock::new(&cfg, 323_000_000);
        c.tick(0, 1, 0);
        assert!(c.tick(w, 1 + 7_000_000_000 / 8 * w / S, 0));
        // Unlimited and short: one second with anything in it.
        let mut c = PhaseClock::new(&LinkConfig::default(), 0);
        c.tick(0, 1, 0);
        assert!(!c.tick(S / 2, 2, 0));
        assert!(c.tick(S, 2, 0));
    }

    #[test]
    fn both_directions_switch_together_and_lateness_is_split() {
        let shared = std::sync::Arc::new(PhaseShared::new(5 * S));
        let stalls = std::sync::Arc::default();
        let watch = || StallWatch::new(0, 5 * S, std::sync::Arc::clone(&stalls));
        let mut data = Lateness::new(PhaseClock::new(&ten_gig(), 0), shared.clone(), watch());
        let mut acks = Lateness::new(PhaseClock::new(&ten_gig(), 0), shared.clone(), watch());
        data.record(5 * S, 100_000_000);
        acks.record(5 * S, 50_000_000);
        data.tick(5 * S, 1, 0);
        data.tick(6 * S, 1 + 10_000_000_000 / 8, 0);
        data.record(6 * S, 1_000);
        acks.record(6 * S, 2_000);
        let (all, ramp, steady, after) = acks.summaries();
        assert_eq!((all.samples, ramp.samples, steady.samples), (2, 1, 1));
        assert!(
            ramp.max_ns >= 50_000_000 && steady.max_ns < 10_000,
            "{steady:?}"
        );
        assert_eq!(after, Some(1.0));
        // Both late writes were stalls, each ended by the write on time after it.
        assert_eq!((data.stalls().count, acks.stalls().count), (1, 1));
        assert_eq!(acks.stalls().list[0].worst_ms, 50.0);
        // A later window does not move the start.
        data.tick(7 * S, 2 + 20_000_000_000 / 8, 0);
        assert_eq!(shared.steady_after_s(), Some(1.0));
    }
}
