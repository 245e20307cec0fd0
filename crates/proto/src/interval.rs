//! Interval accounting: turns cumulative socket counters into per-interval figures and end-of-test totals.
//!
//! The I/O layer samples each data socket every interval (bytes moved so far plus a `TCP_INFO` snapshot)
//! and hands the samples here. Counters that only grow (retransmits, time spent limited by the receive
//! window or the send buffer) are reported as differences over the interval; gauges (cwnd, RTT, pacing and
//! delivery rate) as their value at the end of the interval. This is where a user learns *why* a stream was
//! slow: `rwnd_limited` means the receiver's window, `sndbuf_limited` the sender's buffer, neither with a
//! low rate means the network or the application.
//!
//! The omit period (`-O`, as in iperf3) is accounted here too, in each side's own clock: the
//! [`ReportClock`] ends the omit period with a tick of its own (closing a last, possibly partial,
//! omitted interval), the I/O layer samples every stream's counters at that tick, and [`StreamStats`]
//! subtracts that baseline from its end-of-test totals. So the totals of each side, sender and
//! receiver alike, cover exactly the time after its own omit boundary.

use serde::{Deserialize, Serialize};

use crate::udp::{DelaySpread, UdpCounts};

/// One `TCP_INFO` snapshot in plain numbers, filled by the I/O layer. Fields the running kernel does not
/// provide are `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TcpSample {
    /// Retransmitted segments since the connection opened (`tcpi_total_retrans`).
    pub total_retrans: u32,
    /// Congestion window in segments.
    pub snd_cwnd: u32,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
    /// Peer's advertised receive window, bytes (`tcpi_snd_wnd`, Linux 5.4+).
    pub snd_wnd: Option<u32>,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// RTT variance, µs.
    pub rttvar_us: u32,
    /// Minimum RTT seen, µs.
    pub min_rtt_us: Option<u32>,
    /// Path MTU.
    pub pmtu: u32,
    /// Current pacing rate, bytes/s.
    pub pacing_rate: Option<u64>,
    /// Most recent delivery-rate estimate, bytes/s.
    pub delivery_rate: Option<u64>,
    /// Time the connection has been busy sending, µs.
    pub busy_us: Option<u64>,
    /// Time limited by the peer's receive window, µs.
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by the local send buffer, µs.
    pub sndbuf_limited_us: Option<u64>,
    /// Bytes retransmitted since the connection opened.
    pub bytes_retrans: Option<u64>,
}

/// TCP internals of one stream over one interval, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct TcpInterval {
    /// Segments retransmitted during the interval.
    pub retransmits: u64,
    /// Congestion window at the end of the interval, bytes (cwnd × MSS).
    pub snd_cwnd: u64,
    /// Peer's receive window at the end, bytes.
    pub snd_wnd: u64,
    /// Smoothed RTT at the end, µs.
    pub rtt_us: u32,
    /// RTT variance at the end, µs.
    pub rttvar_us: u32,
    /// Minimum RTT so far, µs.
    pub min_rtt_us: u32,
    /// Path MTU.
    pub pmtu: u32,
    /// Pacing rate at the end, bit/s.
    pub pacing_rate_bps: u64,
    /// Delivery rate at the end, bit/s.
    pub delivery_rate_bps: u64,
    /// Time busy sending during the interval, µs.
    pub busy_us: u64,
    /// Time limited by the receive window during the interval, µs.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer during the interval, µs.
    pub sndbuf_limited_us: u64,
}

/// Computes the interval figures from the previous snapshot (`None` at the first interval) and the new one.
pub fn tcp_interval(prev: Option<&TcpSample>, cur: &TcpSample) -> TcpInterval {
    let p = prev.copied().unwrap_or_default();
    let delta = |a: Option<u64>, b: Option<u64>| b.unwrap_or(0).saturating_sub(a.unwrap_or(0));
    TcpInterval {
        retransmits: u64::from(cur.total_retrans.saturating_sub(p.total_retrans)),
        snd_cwnd: u64::from(cur.snd_cwnd) * u64::from(cur.snd_mss),
        snd_wnd: u64::from(cur.snd_wnd.unwrap_or(0)),
        rtt_us: cur.rtt_us,
        rttvar_us: cur.rttvar_us,
        min_rtt_us: cur.min_rtt_us.unwrap_or(0),
        pmtu: cur.pmtu,
        pacing_rate_bps: cur.pacing_rate.unwrap_or(0).saturating_mul(8),
        delivery_rate_bps: cur.delivery_rate.unwrap_or(0).saturating_mul(8),
        busy_us: delta(p.busy_us, cur.busy_us),
        rwnd_limited_us: delta(p.rwnd_limited_us, cur.rwnd_limited_us),
        sndbuf_limited_us: delta(p.sndbuf_limited_us, cur.sndbuf_limited_us),
    }
}

/// One stream over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamInterval {
    /// Stream (data connection) index.
    pub stream: u32,
    /// Interval start, ns since the start of its phase: the test start for omitted intervals, the end of
    /// the omit period for the others (iperf3 restarts its interval times at 0 after the omit period).
    pub start_ns: u64,
    /// Interval end, ns since the start of its phase.
    pub end_ns: u64,
    /// Whether the interval lies in the omit period (`-O`) and is left out of the totals. Absent on the
    /// wire from peers that predate `-O`: false.
    #[serde(default)]
    pub omitted: bool,
    /// Bytes moved during the interval.
    pub bytes: u64,
    /// Whether the sampling side sends on this stream.
    pub sender: bool,
    /// TCP internals (present on the sending side).
    pub tcp: Option<TcpInterval>,
    /// UDP figures (UDP tests, both sides: the sender's datagrams, the receiver's account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpInterval>,
}

/// UDP figures of one stream over one interval: the datagrams a sender sent, or what a receiver
/// took, lost and saw out of order or twice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct UdpInterval {
    /// Datagrams sent (sender) or taken (receiver).
    pub packets: u64,
    /// Lost (receiver).
    pub lost: u64,
    /// Out of order (receiver).
    pub out_of_order: u64,
    /// Duplicates (receiver).
    pub duplicates: u64,
    /// Malformed datagrams ignored (receiver).
    pub malformed: u64,
    /// Dropped by the receiving host for want of socket buffer (receiver): drop events, each one
    /// datagram or one coalesced run of them (GRO), part of `lost`.
    pub host_drops: u64,
    /// RFC 3550 jitter at the end of the interval, ms (receiver).
    pub jitter_ms: f64,
}

impl UdpInterval {
    /// The figures between two readings of the counters.
    pub fn between(earlier: &UdpCounts, now: &UdpCounts) -> Self {
        let d = now.since(earlier);
        Self {
            packets: d.packets,
            lost: d.lost,
            out_of_order: d.out_of_order,
            duplicates: d.duplicates,
            malformed: d.malformed,
            host_drops: d.host_drops,
            jitter_ms: d.jitter_ns / 1e6,
        }
    }
}

/// End-of-test UDP figures of one stream on one side (after the omit period).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct UdpTotals {
    /// The datagrams over the whole test (after the omit period), as an interval counts them; a
    /// receiver's `lost` includes the tail after the last datagram taken when the end marker came.
    #[serde(flatten)]
    pub counts: UdpInterval,
    /// The rate the sender was asked for, bit/s of payload; 0: as fast as it can (sender).
    pub target_bps: u64,
    /// Whether this side's clock said it was synchronised (`adjtimex`).
    pub clock_synced: bool,
    /// Spread of the transit times (receiver): one-way delays if both sides' clocks are
    /// synchronised, meaningless otherwise. `None` if a transit was negative.
    pub transit: Option<DelaySpread>,
    /// Whether the sender's end marker came (receiver): without it, datagrams lost at the tail are
    /// not counted.
    pub end_seen: bool,
}

impl StreamInterval {
    /// Rate over the interval, bit/s.
    pub fn bits_per_second(&self) -> f64 {
        rate(self.bytes, self.end_ns.saturating_sub(self.start_ns))
    }
}

/// Bit rate of `bytes` over `ns` nanoseconds (0 for an empty span).
pub fn rate(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 * 1e9 / ns as f64
    }
}

/// End-of-test totals of one stream on one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StreamTotals {
    /// Stream index.
    pub stream: u32,
    /// Whether this side sent on the stream.
    pub sender: bool,
    /// Bytes this side sent (sender) or received (receiver) after the omit period.
    pub bytes: u64,
    /// Seconds from the end of the omit period (the start, without one) to the last byte (receiver) or
    /// the end of sending (sender).
    pub seconds: f64,
    /// Bytes sent or received during the omit period, left out of `bytes` (`bytes + omitted_bytes` is
    /// everything the stream moved).
    #[serde(default)]
    pub omitted_bytes: u64,
    /// Retransmitted segments after the omit period (sender only).
    pub retransmits: u64,
    /// Bytes retransmitted (sender only; 0 if the kernel does not tell).
    pub bytes_retrans: u64,
    /// Largest congestion window seen, bytes.
    pub max_snd_cwnd: u64,
    /// Largest peer receive window seen, bytes.
    pub max_snd_wnd: u64,
    /// Smallest smoothed RTT sampled, µs.
    pub min_rtt_us: u32,
    /// Largest smoothed RTT sampled, µs.
    pub max_rtt_us: u32,
    /// Mean of the sampled smoothed RTTs, µs.
    pub mean_rtt_us: u32,
    /// Time limited by the receive window after the omit period, µs.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer after the omit period, µs.
    pub sndbuf_limited_us: u64,
    /// Time busy after the omit period, µs.
    pub busy_us: u64,
    /// Congestion control the kernel applied to this socket.
    pub congestion: String,
    /// The socket's MSS.
    pub mss: u32,
    /// UDP figures (UDP tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpTotals>,
}

/// Accumulates a stream's samples into its [`StreamTotals`] (max cwnd, RTT min/max/mean, cumulative
/// counters), net of the omit period.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    rtt_sum: u64,
    rtt_count: u64,
    /// The latest `TCP_INFO` snapshot: its cumulative counters cover the whole connection.
    last: Option<TcpSample>,
    /// Counters at the end of the omit period, if it has ended.
    omit_end: Option<OmitBaseline>,
    /// A UDP stream's counters at the end of the omit period.
    udp_omit_end: Option<UdpCounts>,
    totals: StreamTotals,
}

/// A stream's counters at the end of the omit period.
#[derive(Debug, Clone, Copy)]
struct OmitBaseline {
    bytes: u64,
    at_ns: u64,
    tcp: Option<TcpSample>,
}

impl StreamStats {
    /// Starts the statistics of `stream`.
    pub fn new(stream: u32, sender: bool, congestion: String, mss: u32) -> Self {
        Self {
            totals: StreamTotals {
                stream,
                sender,
                congestion,
                mss,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Folds in one `TCP_INFO` snapshot.
    pub fn observe(&mut self, s: &TcpSample) {
        let t = &mut self.totals;
        t.max_snd_cwnd = t
            .max_snd_cwnd
            .max(u64::from(s.snd_cwnd) * u64::from(s.snd_mss));
        t.max_snd_wnd = t.max_snd_wnd.max(u64::from(s.snd_wnd.unwrap_or(0)));
        if s.rtt_us > 0 {
            t.min_rtt_us = if t.min_rtt_us == 0 {
                s.rtt_us
            } else {
                t.min_rtt_us.min(s.rtt_us)
            };
            t.max_rtt_us = t.max_rtt_us.max(s.rtt_us);
            self.rtt_sum += u64::from(s.rtt_us);
            self.rtt_count += 1;
        }
        self.last = Some(*s);
    }

    /// Marks the end of the omit period at `at_ns` (the side's clock, when the counters were read):
    /// `bytes` moved so far and the `TCP_INFO` snapshot of that moment (senders; `None` for receivers or
    /// when the kernel gave none). Everything before it is left out of the totals: bytes, seconds,
    /// retransmits and limit times are counted from here, and the extremes and mean of cwnd and RTT
    /// restart with the next snapshot. Only the first mark counts.
    pub fn mark_omit_end(&mut self, bytes: u64, at_ns: u64, tcp: Option<&TcpSample>) {
        if self.omit_end.is_some() {
            return;
        }
        self.omit_end = Some(OmitBaseline {
            bytes,
            at_ns,
            tcp: tcp.copied(),
        });
        let t = &mut self.totals;
        (t.max_snd_cwnd, t.max_snd_wnd, t.min_rtt_us, t.max_rtt_us) = (0, 0, 0, 0);
        (self.rtt_sum, self.rtt_count) = (0, 0);
    }

    /// Marks the end of the omit period of a UDP stream: its counters then. Only the first counts.
    pub fn mark_udp_omit_end(&mut self, counts: &UdpCounts) {
        self.udp_omit_end.get_or_insert(*counts);
    }

    /// A UDP stream's figures net of the omit period.
    pub fn udp_since_omit(&self, now: &UdpCounts) -> UdpInterval {
        UdpInterval::between(&self.udp_omit_end.unwrap_or_default(), now)
    }

    /// The totals, given all the bytes the stream moved and the time (the side's clock, ns since the
    /// start) it stopped moving them.
    pub fn finish(mut self, bytes: u64, end_ns: u64) -> StreamTotals {
        let base = self.omit_end.unwrap_or(OmitBaseline {
            bytes: 0,
            at_ns: 0,
            tcp: None,
        });
        let t = &mut self.totals;
        t.bytes = bytes.saturating_sub(base.bytes);
        t.omitted_bytes = bytes.min(base.bytes);
        t.seconds = end_ns.saturating_sub(base.at_ns) as f64 / 1e9;
        if let Some(last) = self.last {
            // Cumulative counters: latest snapshot minus the one at the omit boundary (zero without one).
            let b = base.tcp.unwrap_or_default();
            let d = |cur: Option<u64>, old: Option<u64>| {
                cur.unwrap_or(0).saturating_sub(old.unwrap_or(0))
            };
            t.retransmits = u64::from(last.total_retrans.saturating_sub(b.total_retrans));
            t.bytes_retrans = d(last.bytes_retrans, b.bytes_retrans);
            t.rwnd_limited_us = d(last.rwnd_limited_us, b.rwnd_limited_us);
            t.sndbuf_limited_us = d(last.sndbuf_limited_us, b.sndbuf_limited_us);
            t.busy_us = d(last.busy_us, b.busy_us);
        }
        if let Some(mean) = self.rtt_sum.checked_div(self.rtt_count) {
            t.mean_rtt_us = mean as u32;
        }
        self.totals
    }
}

/// One tick of a [`ReportClock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// Interval number, counting reported intervals only (both sides number them alike, so the client
    /// pairs its samples with the server's by it).
    pub index: u32,
    /// The interval to report, `[start, end)` ns relative to the start of its phase (see
    /// [`StreamInterval::start_ns`]); `None` when interval reports are off and the tick only ends the
    /// omit period.
    pub span: Option<(u64, u64)>,
    /// The interval lies in the omit period.
    pub omitted: bool,
    /// This tick ends the omit period: the counters read for it are the baseline of the totals
    /// ([`StreamStats::mark_omit_end`]).
    pub omit_end: bool,
}

/// The deadlines of one side's reports, in that side's clock (ns since its start).
///
/// Without an omit period: a tick every `every_ns`. With one (`omit_ns` > 0): ticks every `every_ns`
/// through the omit period, a tick exactly at `omit_ns` that closes the last omitted interval (partial if
/// `omit_ns` is not a multiple of `every_ns`; iperf3 drops that remainder, we report it, flagged) and
/// ends the omit period, then ticks every `every_ns` after `omit_ns`, with times restarting at 0.
#[derive(Debug, Clone, Copy)]
pub struct ReportClock {
    every_ns: u64,
    omit_ns: u64,
    omitting: bool,
    /// Clock time the current phase started (0, then `omit_ns`).
    phase_start: u64,
    /// Clock time of the last tick (the end of the last interval).
    last: u64,
    next_index: u32,
}

impl ReportClock {
    /// A clock ticking every `every_ns` (0: no interval reports) after an omit period of `omit_ns`
    /// (0: none).
    pub fn new(every_ns: u64, omit_ns: u64) -> Self {
        Self {
            every_ns,
            omit_ns,
            omitting: omit_ns > 0,
            phase_start: 0,
            last: 0,
            next_index: 0,
        }
    }

    /// The clock time of the next tick, if any is due ever.
    pub fn next_deadline(&self) -> Option<u64> {
        let tick = (self.every_ns > 0).then(|| self.last + self.every_ns);
        if self.omitting {
            Some(tick.map_or(self.omit_ns, |t| t.min(self.omit_ns)))
        } else {
            tick
        }
    }

    /// If `now_ns` has reached the next deadline: that tick. Ticks are never skipped silently: a late
    /// caller gets each missed tick in turn (and reads the same counters for them).
    pub fn poll(&mut self, now_ns: u64) -> Option<Tick> {
        let deadline = self.next_deadline()?;
        if now_ns < deadline {
            return None;
        }
        let omitted = self.omitting;
        let omit_end = self.omitting && deadline >= self.omit_ns;
        let span = (self.every_ns > 0)
            .then(|| (self.last - self.phase_start, deadline - self.phase_start));
        let index = self.next_index;
        if span.is_some() {
            self.next_index += 1;
        }
        self.last = deadline;
        if omit_end {
            self.omitting = false;
            self.phase_start = deadline;
        }
        Some(Tick {
            index,
            span,
            omitted,
            omit_end,
        })
    }

    /// The last, partial interval, from the last tick to `now_ns` (the end of the run), if interval
    /// reports are on and it is not empty. It is omitted if the run ended inside the omit period.
    pub fn last_partial(&mut self, now_ns: u64) -> Option<Tick> {
        if self.every_ns == 0 || now_ns <= self.last {
            return None;
        }
        let tick = Tick {
            index: self.next_index,
            span: Some((self.last - self.phase_start, now_ns - self.phase_start)),
            omitted: self.omitting,
            omit_end: false,
        };
        self.next_index += 1;
        self.last = now_ns;
        Some(tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(retrans: u32, rwnd: u64, rtt: u32) -> TcpSample {
        TcpSample {
            total_retrans: retrans,
            snd_cwnd: 10,
            snd_mss: 1448,
            rtt_us: rtt,
            rwnd_limited_us: Some(rwnd),
            pacing_rate: Some(1_000_000),
            ..Default::default()
        }
    }

    #[test]
    fn counters_are_differenced_gauges_are_not() {
        let a = sample(3, 1000, 100);
        let b = sample(10, 4000, 200);
        let iv = tcp_interval(Some(&a), &b);
        assert_eq!(iv.retransmits, 7);
        assert_eq!(iv.rwnd_limited_us, 3000);
        assert_eq!(iv.rtt_us, 200);
        assert_eq!(iv.snd_cwnd, 14480);
        assert_eq!(iv.pacing_rate_bps, 8_000_000);
        // First interval: differences from zero.
        assert_eq!(tcp_interval(None, &a).retransmits, 3);
    }

    #[test]
    fn a_counter_that_goes_backwards_does_not_wrap() {
        let iv = tcp_interval(Some(&sample(10, 5000, 1)), &sample(3, 1000, 1));
        assert_eq!(iv.retransmits, 0);
        assert_eq!(iv.rwnd_limited_us, 0);
    }

    #[test]
    fn stats_track_extremes_and_mean() {
        let mut s = StreamStats::new(0, true, "cubic".into(), 1448);
        for rtt in [300, 100, 200] {
            s.observe(&sample(5, 0, rtt));
        }
        let t = s.finish(1 << 30, 10_000_000_000);
        assert_eq!((t.min_rtt_us, t.max_rtt_us, t.mean_rtt_us), (100, 300, 200));
        assert_eq!(t.retransmits, 5);
        assert_eq!(t.bytes, 1 << 30);
        assert_eq!(t.omitted_bytes, 0);
        assert_eq!(t.seconds, 10.0);
    }

    #[test]
    fn totals_leave_the_omit_period_out() {
        let mut s = StreamStats::new(0, true, "bbr".into(), 1448);
        // Slow start: big RTT, 4 retransmits, 1000 µs limited by the receive window.
        s.observe(&sample(4, 1000, 900));
        let boundary = sample(4, 1000, 900);
        s.mark_omit_end(3_000, 2_000_000_000, Some(&boundary));
        // A second mark (a late duplicate) changes nothing.
        s.mark_omit_end(9_999, 2_500_000_000, None);
        for (retrans, rwnd, rtt) in [(6, 1500, 200), (7, 1800, 100)] {
            s.observe(&sample(retrans, rwnd, rtt));
        }
        let t = s.finish(10_000, 5_000_000_000);
        assert_eq!(t.bytes, 7_000);
        assert_eq!(t.omitted_bytes, 3_000);
        assert_eq!(t.seconds, 3.0);
        assert_eq!(t.retransmits, 3);
        assert_eq!(t.rwnd_limited_us, 800);
        // The slow-start RTT of 900 µs is not among the measured extremes.
        assert_eq!((t.min_rtt_us, t.max_rtt_us, t.mean_rtt_us), (100, 200, 150));
    }

    #[test]
    fn receiver_totals_use_their_own_boundary() {
        // A receiver has no TCP snapshots: only its byte counter and clock are rebased.
        let mut s = StreamStats::new(0, false, "cubic".into(), 1448);
        s.mark_omit_end(500, 1_000_000_000, None);
        let t = s.finish(2_500, 3_000_000_000);
        assert_eq!((t.bytes, t.omitted_bytes, t.seconds), (2_000, 500, 2.0));
        assert_eq!(t.retransmits, 0);
    }

    #[test]
    fn clock_reports_every_tick_even_when_polled_late() {
        let mut c = ReportClock::new(100, 0);
        let tick = |index, span: (u64, u64)| Tick {
            index,
            span: Some(span),
            omitted: false,
            omit_end: false,
        };
        assert_eq!(c.poll(99), None);
        assert_eq!(c.poll(100), Some(tick(0, (0, 100))));
        // Polled late: both missed ticks come out, in order.
        assert_eq!(c.poll(350), Some(tick(1, (100, 200))));
        assert_eq!(c.poll(350), Some(tick(2, (200, 300))));
        assert_eq!(c.poll(350), None);
        assert_eq!(c.next_deadline(), Some(400));
        assert_eq!(c.last_partial(350), Some(tick(3, (300, 350))));
        assert_eq!(c.last_partial(350), None);
        assert_eq!(ReportClock::new(0, 0).poll(u64::MAX), None);
        assert_eq!(ReportClock::new(0, 0).next_deadline(), None);
    }

    #[test]
    fn omit_period_ends_with_its_own_tick_and_times_restart() {
        // Intervals of 100, omit 250: omitted 0-100, 100-200, 200-250 (partial, ends the omit period),
        // then measured intervals timed from the boundary: 0-100 (clock 350), 100-200 (clock 450).
        let mut c = ReportClock::new(100, 250);
        let mut ticks = Vec::new();
        let mut now = 0;
        while ticks.len() < 5 {
            now += 10;
            while let Some(t) = c.poll(now) {
                ticks.push((now, t));
            }
        }
        let got: Vec<_> = ticks
            .iter()
            .map(|(now, t)| (*now, t.index, t.span.unwrap(), t.omitted, t.omit_end))
            .collect();
        assert_eq!(
            got,
            vec![
                (100, 0, (0, 100), true, false),
                (200, 1, (100, 200), true, false),
                (250, 2, (200, 250), true, true),
                (350, 3, (0, 100), false, false),
                (450, 4, (100, 200), false, false),
            ]
        );
        assert_eq!(c.last_partial(480).unwrap().span, Some((200, 230)));
    }

    #[test]
    fn omit_boundary_on_a_tick_is_one_tick() {
        let mut c = ReportClock::new(100, 200);
        assert!(!c.poll(100).unwrap().omit_end);
        let t = c.poll(200).unwrap();
        assert_eq!(
            (t.index, t.span, t.omitted, t.omit_end),
            (1, Some((100, 200)), true, true)
        );
        let t = c.poll(300).unwrap();
        assert_eq!(
            (t.index, t.span, t.omitted, t.omit_end),
            (2, Some((0, 100)), false, false)
        );
    }

    #[test]
    fn omit_boundary_ticks_even_with_intervals_off() {
        let mut c = ReportClock::new(0, 3_000);
        assert_eq!(c.next_deadline(), Some(3_000));
        assert_eq!(c.poll(2_999), None);
        let t = c.poll(3_001).unwrap();
        assert_eq!((t.span, t.omit_end), (None, true));
        assert_eq!(c.next_deadline(), None);
        assert_eq!(c.last_partial(9_000), None);
    }

    #[test]
    fn rate_of_empty_span_is_zero() {
        assert_eq!(rate(100, 0), 0.0);
        assert_eq!(rate(125_000_000, 1_000_000_000), 1e9);
    }
}
