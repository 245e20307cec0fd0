//! When a record arrived at the link: the time the sending host handed it to its device, taken
//! from a tap on that device ([`longhaul_sys::PacketTap`]), not the time the forwarder read it.
//!
//! A forwarder kept from its CPU (another task, the scheduler's own choices) reads the TUN late,
//! and every record read then waited in the sending host's queue. Timed from the read, that wait
//! lands after the path's delay and no counter of the emulator sees it (issue 22: by the hosts'
//! own clocks, p99 1.5-1.8 ms at 10 Gbit/s while the emulator's own figure said 0.3 ms). Timed
//! from the tap, the wait is part of the propagation delay it is inside of: a record read 3 ms
//! late on a 160 ms path is still released on time, and one read later than its release is
//! written at once and counted late.
//!
//! The tap sees the device's packets in the order the TUN queue hands them to the forwarder, so
//! the k-th record read is the k-th packet tapped, bar two exceptions matched away here: a
//! packet the TUN queue dropped (tapped, never read: skipped), and a packet the tap dropped when
//! its own buffer was full (read, not tapped: timed from its read and counted, for the verdict).

use std::collections::VecDeque;

use longhaul_sys::Tapped;
use longhaul_units::hist::{Histogram, Summary};
use serde::{Deserialize, Serialize};

/// Tapped packets held while looking for a record's: more than the TUN queue holds
/// ([`crate::host::TXQUEUELEN`]), so the packets of every record still queued fit.
const MAX_PENDING: usize = 16_384;

/// Where the tapped packets come from ([`longhaul_sys::PacketTap`], or a list in tests).
pub(crate) trait TapSource: Send {
    /// The next packet tapped, or `None` when there is none now.
    fn next_tapped(&mut self) -> Option<Tapped>;
}

impl TapSource for longhaul_sys::PacketTap {
    fn next_tapped(&mut self) -> Option<Tapped> {
        match self.next() {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!("{e}");
                None
            }
        }
    }
}

/// A tap on the outgoing packets of the host device of the namespace at `netns`, or `None` (with
/// a warning naming `direction`) when it cannot be opened.
pub(crate) fn tap_host(netns: &std::path::Path, direction: &str) -> Option<Box<dyn TapSource>> {
    let opened = longhaul_sys::run_in_netns(netns, || {
        longhaul_sys::PacketTap::outgoing(crate::host::DEVICE)
    });
    match opened {
        Ok(Ok(tap)) => Some(Box::new(tap)),
        Ok(Err(e)) | Err(e) => {
            tracing::warn!(
                "{direction}: no tap on the sending host's device ({e}): records are timed when \
                 read, and their wait in that host's queue is not counted"
            );
            None
        }
    }
}

/// How a direction's records were timed, for its report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalStats {
    /// Whether the sending host's device was tapped at all (false: every record was timed at
    /// its read, and the wait in the sending host's queue is not counted).
    pub tapped: bool,
    /// Records timed by the tap.
    pub from_tap: u64,
    /// Records timed at their read because the tap had no packet for them.
    pub at_read: u64,
    /// Packets the tap saw that no read matched (the TUN queue dropped them).
    pub tap_only: u64,
    /// How long the tapped records waited in the sending host's queue (read − tap time).
    pub read_lag: Summary,
}

impl ArrivalStats {
    /// The share of the records read that were timed at their read although a tap ran, or
    /// every record when none ran; `None` when no record was read.
    pub fn untimed_fraction(&self) -> Option<f64> {
        let total = self.from_tap + self.at_read;
        (total > 0).then(|| self.at_read as f64 / total as f64)
    }
}

/// Records timed at their read that the verdict lets pass: a few are sent before the tap opens
/// (a device's first IPv6 announcements).
const MIN_UNTIMED: u64 = 50;
/// The share of records timed at their read above which the verdict says so.
const MAX_UNTIMED: f64 = 0.01;

/// The verdict's objection to `a` (records read by `who`), if more than 1 % of the records were
/// timed at their read: their wait in the sending host's queue is in no figure.
pub(crate) fn untimed_problem(who: &str, a: &ArrivalStats) -> Option<String> {
    if a.at_read < MIN_UNTIMED || a.untimed_fraction().is_none_or(|f| f <= MAX_UNTIMED) {
        return None;
    }
    Some(format!(
        "{who}: {} of {} records timed when read, not when sent ({}): their wait in the \
         sending host's queue is in no figure",
        a.at_read,
        a.at_read + a.from_tap,
        if a.tapped {
            "the tap missed them"
        } else {
            "no tap on the sending host"
        }
    ))
}

/// A direction's arrival clock: the tap and the packets read from it but not yet matched.
pub(crate) struct ArrivalClock {
    tap: Option<Box<dyn TapSource>>,
    pending: VecDeque<Tapped>,
    /// CLOCK_REALTIME − CLOCK_MONOTONIC, refreshed by [`ArrivalClock::resync`].
    offset_ns: i128,
    last: u64,
    read_lag: Histogram,
    stats: ArrivalStats,
}

impl ArrivalClock {
    /// A clock over `tap`; without one every record is timed at its read.
    pub(crate) fn new(tap: Option<Box<dyn TapSource>>) -> Self {
        Self {
            stats: ArrivalStats {
                tapped: tap.is_some(),
                ..ArrivalStats::default()
            },
            tap,
            pending: VecDeque::new(),
            offset_ns: longhaul_sys::realtime_minus_monotonic_ns(),
            last: 0,
            read_lag: Histogram::new(),
        }
    }

    /// Samples the realtime − monotonic offset again (a clock step between two samples moves
    /// the tapped times; the clamping in [`ArrivalClock::arrival`] bounds the harm).
    pub(crate) fn resync(&mut self) {
        self.offset_ns = longhaul_sys::realtime_minus_monotonic_ns();
    }

    /// The arrival time of `packet` (from its network header on), read at `read_at` (monotonic
    /// ns): its tap time, or `read_at` when the tap has no packet for it. Never later than
    /// `read_at`, never earlier than the arrival before.
    pub(crate) fn arrival(&mut self, packet: &[u8], read_at: u64) -> u64 {
        let tapped = self.find(packet);
        let at = match tapped {
            Some(t) => {
                self.stats.from_tap += 1;
                let at = i128::from(t.realtime_ns) - self.offset_ns;
                let at = u64::try_from(at.max(0)).unwrap_or(0).min(read_at);
                self.read_lag.record(read_at - at);
                at
            }
            None => {
                self.stats.at_read += 1;
                read_at
            }
        };
        let at = at.max(self.last);
        self.last = at;
        at
    }

    /// Takes the tapped copy of `packet` out of the pending packets (dropping the ones before
    /// it: their records were never read), reading more from the tap as needed.
    fn find(&mut self, packet: &[u8]) -> Option<Tapped> {
        let tap = self.tap.as_mut()?;
        let mut at = self.pending.iter().position(|t| t.is(packet));
        while at.is_none() && self.pending.len() < MAX_PENDING {
            let Some(t) = tap.next_tapped() else { break };
            let hit = t.is(packet);
            self.pending.push_back(t);
            if hit {
                at = Some(self.pending.len() - 1);
            }
        }
        let Some(i) = at else {
            if self.pending.len() >= MAX_PENDING {
                // Out of step past recovery by looking ahead: start again from the tap's next.
                self.stats.tap_only += self.pending.len() as u64;
                self.pending.clear();
            }
            return None;
        };
        self.stats.tap_only += i as u64;
        self.pending.drain(..i);
        self.pending.pop_front()
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> ArrivalStats {
        ArrivalStats {
            read_lag: self.read_lag.summary(),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_sys::TAP_HEAD;

    /// Tapped packets handed out from a list.
    struct Listed(VecDeque<Tapped>);

    impl TapSource for Listed {
        fn next_tapped(&mut self) -> Option<Tapped> {
            self.0.pop_front()
        }
    }

    fn packet(n: u8) -> Vec<u8> {
        vec![n; 60 + usize::from(n)]
    }

    fn tapped(n: u8, realtime_ns: u64) -> Tapped {
        let p = packet(n);
        let mut head = [0u8; TAP_HEAD];
        let k = p.len().min(TAP_HEAD);
        head[..k].copy_from_slice(&p[..k]);
        Tapped {
            len: p.len(),
            head,
            head_len: k,
            realtime_ns,
        }
    }

    /// A clock whose offset is zero, so tapped times read as monotonic ones.
    fn clock(list: Vec<Tapped>) -> ArrivalClock {
        let mut c = ArrivalClock::new(Some(Box::new(Listed(list.into()))));
        c.offset_ns = 0;
        c
    }

    #[test]
    fn each_record_gets_its_tap_time_and_the_wait_is_counted() {
        let mut c = clock(vec![tapped(1, 1_000), tapped(2, 2_000), tapped(3, 3_000)]);
        assert_eq!(c.arrival(&packet(1), 5_000), 1_000);
        assert_eq!(c.arrival(&packet(2), 5_100), 2_000);
        assert_eq!(c.arrival(&packet(3), 5_200), 3_000);
        let s = c.stats();
        assert_eq!((s.from_tap, s.at_read, s.tap_only), (3, 0, 0));
        assert_eq!(s.read_lag.samples, 3);
        assert_eq!(s.read_lag.max_ns, 4_000);
        assert_eq!(s.untimed_fraction(), Some(0.0));
    }

    #[test]
    fn packets_the_tun_dropped_are_skipped() {
        // 2 and 3 were tapped but never read (the TUN queue was full).
        let mut c = clock(vec![
            tapped(1, 10),
            tapped(2, 20),
            tapped(3, 30),
            tapped(4, 40),
        ]);
        assert_eq!(c.arrival(&packet(1), 100), 10);
        assert_eq!(c.arrival(&packet(4), 100), 40);
        let s = c.stats();
        assert_eq!((s.from_tap, s.at_read, s.tap_only), (2, 0, 2));
    }

    #[test]
    fn a_record_the_tap_missed_is_timed_at_its_read_and_the_rest_stay_in_step() {
        // 2 was read but the tap dropped its copy.
        let mut c = clock(vec![tapped(1, 10), tapped(3, 30), tapped(4, 40)]);
        assert_eq!(c.arrival(&packet(1), 100), 10);
        assert_eq!(c.arrival(&packet(2), 110), 110);
        // The later records arrive no earlier than the one before (the link's clock runs on).
        assert_eq!(c.arrival(&packet(3), 120), 110);
        assert_eq!(c.arrival(&packet(4), 130), 110);
        let s = c.stats();
        assert_eq!((s.from_tap, s.at_read, s.tap_only), (3, 1, 0));
        assert_eq!(s.untimed_fraction(), Some(0.25));
    }

    #[test]
    fn a_tap_time_is_never_after_the_read() {
        let mut c = clock(vec![tapped(1, 500)]);
        assert_eq!(c.arrival(&packet(1), 400), 400);
    }

    #[test]
    fn without_a_tap_every_record_is_timed_at_its_read() {
        let mut c = ArrivalClock::new(None);
        assert_eq!(c.arrival(&packet(1), 100), 100);
        assert_eq!(c.arrival(&packet(2), 90), 100);
        let s = c.stats();
        assert!(!s.tapped);
        assert_eq!((s.from_tap, s.at_read), (0, 2));
        assert_eq!(s.untimed_fraction(), Some(1.0));
    }

    #[test]
    fn a_tap_out_of_step_starts_again() {
        // More unmatched packets than can be held: the record is timed at its read, the held
        // packets are let go, and the next record is found among the packets tapped after.
        let mut list: Vec<Tapped> = (0..MAX_PENDING).map(|_| tapped(9, 1)).collect();
        list.push(tapped(2, 50));
        let mut c = clock(list);
        assert_eq!(c.arrival(&packet(1), 100), 100);
        assert_eq!(
            c.arrival(&packet(2), 200),
            100,
            "not before the arrival before"
        );
        let s = c.stats();
        assert_eq!((s.from_tap, s.at_read), (1, 1));
        assert_eq!(s.tap_only, MAX_PENDING as u64);
    }
}
