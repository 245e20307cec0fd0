//! `--dedicated`: a fast start on a path known to carry nothing else (a reserved testbed path, an
//! emulated one, or the user's word with a rate).
//!
//! Slow start doubles the window each round trip from 10 segments, and receive-buffer autotuning
//! grows the advertised window about as fast behind it, so a 120 ms path needs a dozen round trips
//! (1.4 s) before it carries 2 Gbit/s, and a 1 GiB transfer averages well under the rate. On a path
//! whose rate is known and which carries nothing else there is nothing for slow start to find out.
//! A fast start opens at the rate from the first round trip with three settings, each undone
//! afterwards:
//!
//! 1. **The sender's initial congestion window** on the route to the receiver (`ip route ...
//!    initcwnd N`, which needs `CAP_NET_ADMIN`): [`initial_window_segments`], each stream's share of
//!    the bandwidth-delay product with [`INITIAL_WINDOW_HEADROOM`]. The route is a host route of
//!    the sender's own, removed when the run ends; it stays while the run lasts because Linux
//!    restarts an idle connection's window from the route's initial window too.
//! 2. **The receive buffer set before the handshake** ([`open_from_start`]): a buffer left to
//!    autotuning starts small and advertises a small window; one set beforehand (on the server's
//!    listener, which its accepted connections inherit) advertises the whole window from the first
//!    acknowledgement.
//! 3. **Pacing at the rate from the first packet** (`SO_MAX_PACING_RATE`): the opened window leaves
//!    as a stream at the rate, not a burst that overflows the bottleneck's queue.

use longhaul_units::Nanos;
use longhaul_units::models::{MAX_TCP_WINDOW, bdp_bytes};

use crate::window::{BufferAction, BufferPlan, WindowPlan};

/// The initial window as a share of each stream's bandwidth-delay product: room for the RTT to
/// be a little longer than measured. Pacing, not the window, holds the rate.
pub const INITIAL_WINDOW_HEADROOM: f64 = 1.25;
/// The smallest initial window set: Linux's own default (RFC 6928).
pub const MIN_INITIAL_WINDOW: u32 = 10;

/// The initial congestion window, in segments of `mss` payload bytes, for each of `streams`
/// streams sharing `rate_bps` of payload over `rtt`: the stream's share of the bandwidth-delay
/// product × [`INITIAL_WINDOW_HEADROOM`], at least [`MIN_INITIAL_WINDOW`], at most one TCP window
/// (1 GiB).
pub fn initial_window_segments(rate_bps: u64, rtt: Nanos, streams: u32, mss: u32) -> u32 {
    let mss = u64::from(mss.max(1));
    let bdp = bdp_bytes(rate_bps / u64::from(streams.max(1)), rtt);
    let segments = (bdp as f64 * INITIAL_WINDOW_HEADROOM / mss as f64).ceil() as u64;
    let most = MAX_TCP_WINDOW / mss;
    u32::try_from(segments.clamp(u64::from(MIN_INITIAL_WINDOW), most)).unwrap_or(u32::MAX)
}

/// The window plan with every buffer left to autotuning set instead, to the plan's window
/// (`force`d past the system caps when `privileged`), so the window is open from the handshake.
pub fn open_from_start(mut plan: WindowPlan, privileged: bool) -> WindowPlan {
    let open = |b: &mut BufferPlan| {
        if let BufferAction::Autotune { .. } = b.action {
            b.action = BufferAction::Set {
                request: plan.wanted,
                force: privileged,
            };
        }
    };
    open(&mut plan.send);
    open(&mut plan.recv);
    plan
}

/// When a sender first carried [`RAMP_SHARE`] of its rate: fed the sending sockets' byte counts
/// every few milliseconds, it times from the first byte sent to the end of the first round trip
/// (the `window_ns` given) over which the bytes acknowledged reach that share of `rate_bps`.
/// Acknowledgements trail the data by a round trip, so a path open from its first packet reads
/// about two round trips.
#[derive(Debug, Clone)]
pub struct RampTimer {
    rate_bps: u64,
    window_ns: u64,
    first_sent_ns: Option<u64>,
    /// (time, bytes acknowledged) of the readings of the last round trip and one before it.
    readings: std::collections::VecDeque<(u64, u64)>,
    reached_ns: Option<u64>,
}

/// The share of the rate that counts as having reached it.
pub const RAMP_SHARE: f64 = 0.9;

impl RampTimer {
    /// A timer for `rate_bps` of payload, judged over windows of `window_ns` (one RTT, at least
    /// 1 ms).
    pub fn new(rate_bps: u64, window_ns: u64) -> Self {
        Self {
            rate_bps,
            window_ns: window_ns.max(1_000_000),
            first_sent_ns: None,
            readings: std::collections::VecDeque::new(),
            reached_ns: None,
        }
    }

    /// One reading at `at_ns`: bytes sent and acknowledged so far, all streams. Returns the time
    /// to the rate, ms, once reached.
    pub fn observe(&mut self, at_ns: u64, sent: u64, acked: u64) -> Option<f64> {
        if self.reached_ns.is_none() {
            if self.first_sent_ns.is_none() && sent > 0 {
                self.first_sent_ns = Some(at_ns);
            }
            self.readings.push_back((at_ns, acked));
            // Keep one reading at least a window old, to measure the last window from.
            while self
                .readings
                .get(1)
                .is_some_and(|&(t, _)| at_ns.saturating_sub(t) >= self.window_ns)
            {
                self.readings.pop_front();
            }
            if let (Some(&(t, a)), Some(_)) = (self.readings.front(), self.first_sent_ns) {
                let span = at_ns.saturating_sub(t);
                let bits = u128::from(acked.saturating_sub(a)) * 8 * 1_000_000_000;
                if span >= self.window_ns
                    && bits as f64 >= RAMP_SHARE * self.rate_bps as f64 * span as f64
                {
                    self.reached_ns = Some(at_ns);
                }
            }
        }
        self.to_rate_ms()
    }

    /// The time from the first byte sent to the rate, ms, if reached.
    pub fn to_rate_ms(&self) -> Option<f64> {
        let (t0, t1) = (self.first_sent_ns?, self.reached_ns?);
        Some(t1.saturating_sub(t0) as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{KernelLimits, plan};

    #[test]
    fn the_initial_window_is_each_streams_share_of_the_bdp_with_headroom() {
        // 1.93 Gbit/s of payload over 120 ms is 28.95 MB; one stream gets 1.25 × that in
        // 1,448-byte segments.
        let one = initial_window_segments(1_930_000_000, Nanos(120_000_000), 1, 1448);
        assert_eq!(one, (28_950_000.0 * 1.25 / 1448.0_f64).ceil() as u32);
        let four = initial_window_segments(1_930_000_000, Nanos(120_000_000), 4, 1448);
        assert!(
            (four as f64 / (one as f64 / 4.0) - 1.0).abs() < 0.001,
            "{four} {one}"
        );
        // Never below Linux's default, never above one TCP window.
        assert_eq!(
            initial_window_segments(1_000, Nanos(1_000_000), 1, 1448),
            10
        );
        assert_eq!(
            initial_window_segments(u64::MAX / 2, Nanos(1_000_000_000), 1, 1448),
            (MAX_TCP_WINDOW / 1448) as u32
        );
        assert_eq!(initial_window_segments(0, Nanos(0), 0, 0), 10);
    }

    /// Readings every 5 ms of a sender that starts at `t0_ms` and delivers `rate(t)` bit/s,
    /// acknowledged one RTT (100 ms) later; the time the timer reports.
    fn ramp(rate: impl Fn(f64) -> f64, t0_ms: u64) -> Option<f64> {
        let mut timer = RampTimer::new(1_000_000_000, 100_000_000);
        let (mut sent, mut acked_at) = (0.0_f64, Vec::new());
        for step in 0..400u64 {
            let t_ms = step * 5;
            if t_ms >= t0_ms {
                sent += rate((t_ms - t0_ms) as f64 / 1e3) / 8.0 * 0.005;
            }
            acked_at.push(sent);
            let acked = if step >= 20 {
                acked_at[(step - 20) as usize]
            } else {
                0.0
            };
            if let Some(ms) = timer.observe(t_ms * 1_000_000, sent as u64, acked as u64) {
                return Some(ms);
            }
        }
        None
    }

    #[test]
    fn the_ramp_timer_counts_from_the_first_byte_to_a_round_trip_at_the_rate() {
        // Open from the first packet: acknowledged at the rate from one RTT on, 90 % of a window
        // of it (the threshold) 0.9 RTT later: under two RTTs.
        let open = ramp(|_| 1e9, 50).unwrap();
        assert!((180.0..=210.0).contains(&open), "{open}");
        // Slow start from 10 segments, doubling each RTT: a dozen RTTs.
        let slow = ramp(
            |t| (10.0 * 1448.0 * 8.0 / 0.1 * 2f64.powf(t / 0.1)).min(1e9),
            0,
        )
        .unwrap();
        assert!(slow > 1_000.0, "{slow}");
        // Never at 90 %: no answer.
        assert_eq!(ramp(|_| 0.85e9, 0), None);
    }

    #[test]
    fn an_open_start_sets_the_buffers_autotuning_would_have_grown() {
        let limits = KernelLimits {
            rmem_max: 4 << 20,
            wmem_max: 4 << 20,
            tcp_rmem_max: 64 << 20,
            tcp_wmem_max: 64 << 20,
            privileged: true,
        };
        let p = plan(Nanos(120_000_000), 2_000_000_000, 4, None, &limits);
        assert!(
            matches!(p.recv.action, BufferAction::Autotune { .. }),
            "{p:?}"
        );
        let open = open_from_start(p.clone(), true);
        for b in [&open.recv, &open.send] {
            assert_eq!(
                b.action,
                BufferAction::Set {
                    request: p.wanted,
                    force: true
                }
            );
        }
        // A buffer already set (a -w window) is left as it was.
        let fixed = plan(Nanos(120_000_000), 2_000_000_000, 4, Some(1 << 20), &limits);
        assert_eq!(open_from_start(fixed.clone(), true), fixed);
    }
}
