//! Interval accounting: turns cumulative socket counters into per-interval figures and end-of-test totals.
//!
//! The I/O layer samples each data socket every interval (bytes moved so far plus a `TCP_INFO` snapshot)
//! and hands the samples here. Counters that only grow (retransmits, time spent limited by the receive
//! window or the send buffer) are reported as differences over the interval; gauges (cwnd, RTT, pacing and
//! delivery rate) as their value at the end of the interval. This is where a user learns *why* a stream was
//! slow: `rwnd_limited` means the receiver's window, `sndbuf_limited` the sender's buffer, neither with a
//! low rate means the network or the application.

use serde::{Deserialize, Serialize};

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
    /// Interval start, ns since the test started.
    pub start_ns: u64,
    /// Interval end, ns since the test started.
    pub end_ns: u64,
    /// Bytes moved during the interval.
    pub bytes: u64,
    /// Whether the sampling side sends on this stream.
    pub sender: bool,
    /// TCP internals (present on the sending side).
    pub tcp: Option<TcpInterval>,
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
    /// Bytes this side sent (sender) or received (receiver).
    pub bytes: u64,
    /// Seconds from the start to the last byte (receiver) or the end of sending (sender).
    pub seconds: f64,
    /// Retransmitted segments over the whole test (sender only).
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
    /// Total time limited by the receive window, µs.
    pub rwnd_limited_us: u64,
    /// Total time limited by the send buffer, µs.
    pub sndbuf_limited_us: u64,
    /// Total time busy, µs.
    pub busy_us: u64,
    /// Congestion control the kernel applied to this socket.
    pub congestion: String,
    /// The socket's MSS.
    pub mss: u32,
}

/// Accumulates a stream's samples into its [`StreamTotals`] (max cwnd, RTT min/max/mean).
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    rtt_sum: u64,
    rtt_count: u64,
    totals: StreamTotals,
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
        // Cumulative counters: the latest snapshot holds the whole-test value.
        t.retransmits = u64::from(s.total_retrans);
        t.bytes_retrans = s.bytes_retrans.unwrap_or(0);
        t.rwnd_limited_us = s.rwnd_limited_us.unwrap_or(0);
        t.sndbuf_limited_us = s.sndbuf_limited_us.unwrap_or(0);
        t.busy_us = s.busy_us.unwrap_or(0);
    }

    /// The totals, given the bytes moved and the seconds they took.
    pub fn finish(mut self, bytes: u64, seconds: f64) -> StreamTotals {
        self.totals.bytes = bytes;
        self.totals.seconds = seconds;
        if let Some(mean) = self.rtt_sum.checked_div(self.rtt_count) {
            self.totals.mean_rtt_us = mean as u32;
        }
        self.totals
    }
}

/// The deadlines of a periodic report clock that started at `start_ns` (any monotonic origin).
#[derive(Debug, Clone, Copy)]
pub struct IntervalClock {
    start_ns: u64,
    every_ns: u64,
    next_index: u32,
}

impl IntervalClock {
    /// A clock ticking every `every_ns` from `start_ns`; `every_ns == 0` never ticks.
    pub fn new(start_ns: u64, every_ns: u64) -> Self {
        Self {
            start_ns,
            every_ns,
            next_index: 0,
        }
    }

    /// The time of the next tick, if the clock ticks at all.
    pub fn next_deadline(&self) -> Option<u64> {
        (self.every_ns > 0)
            .then(|| self.start_ns + self.every_ns * (u64::from(self.next_index) + 1))
    }

    /// If `now` has reached the next tick: the tick's index and its `[start, end)` span relative to the
    /// clock's start. Ticks are never skipped silently: a late caller gets each missed tick in turn.
    pub fn poll(&mut self, now_ns: u64) -> Option<(u32, u64, u64)> {
        let deadline = self.next_deadline()?;
        if now_ns < deadline {
            return None;
        }
        let i = self.next_index;
        self.next_index += 1;
        let end = deadline - self.start_ns;
        Some((i, end - self.every_ns, end))
    }

    /// Index the next tick will have (= number of ticks so far).
    pub fn ticks(&self) -> u32 {
        self.next_index
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
        let t = s.finish(1 << 30, 10.0);
        assert_eq!((t.min_rtt_us, t.max_rtt_us, t.mean_rtt_us), (100, 300, 200));
        assert_eq!(t.retransmits, 5);
        assert_eq!(t.bytes, 1 << 30);
    }

    #[test]
    fn clock_reports_every_tick_even_when_polled_late() {
        let mut c = IntervalClock::new(1_000, 100);
        assert_eq!(c.poll(1_099), None);
        assert_eq!(c.poll(1_100), Some((0, 0, 100)));
        // Polled late: both missed ticks come out, in order.
        assert_eq!(c.poll(1_350), Some((1, 100, 200)));
        assert_eq!(c.poll(1_350), Some((2, 200, 300)));
        assert_eq!(c.poll(1_350), None);
        assert_eq!(c.next_deadline(), Some(1_400));
        assert_eq!(IntervalClock::new(0, 0).poll(u64::MAX), None);
    }

    #[test]
    fn rate_of_empty_span_is_zero() {
        assert_eq!(rate(100, 0), 0.0);
        assert_eq!(rate(125_000_000, 1_000_000_000), 1e9);
    }
}
