//! The test report, shaped like iperf3's `--json` output so that tools reading iperf3 JSON read ours.
//!
//! Key names follow iperf3 3.x (`start`, `intervals`, `end`, `streams`, `sum`, `sum_sent`,
//! `sum_received`, `bits_per_second`, `retransmits`, `snd_cwnd`, `rtt` in µs, `cpu_utilization_percent`,
//! `sender_tcp_congestion`, ...). Everything longhaul adds is an *extra* key (per-stream `min_rtt`,
//! `pacing_rate`, `delivery_rate`, `rwnd_limited`, `sndbuf_limited`, `busy_time`, and a `longhaul`
//! object in `start` and `end`); nothing iperf3 defines is renamed or removed. The JSON is a tested
//! contract (see the end-to-end tests).

use serde::{Deserialize, Serialize};

use crate::interval::{StreamInterval, StreamTotals, UdpInterval, rate};
use crate::msg::{CpuUse, Direction, SidePlan, SocketSetup};
use crate::window::BufferOutcome;

/// The whole report: what `--json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Test set-up.
    pub start: Start,
    /// One entry per reporting interval.
    pub intervals: Vec<IntervalReport>,
    /// Totals.
    pub end: End,
    /// Present when the test failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One data connection, as iperf3 lists it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Connected {
    /// Stream id (iperf3 prints the fd; we print the stream index + 1).
    pub socket: u32,
    /// Local address.
    pub local_host: String,
    /// Local port.
    pub local_port: u16,
    /// Remote address.
    pub remote_host: String,
    /// Remote port.
    pub remote_port: u16,
}

/// iperf3's `start.timestamp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timestamp {
    /// RFC 7231 date, e.g. "Sat, 21 Nov 2026 05:49:17 GMT".
    pub time: String,
    /// Seconds since the Unix epoch.
    pub timesecs: u64,
}

impl Timestamp {
    /// The timestamp for `timesecs` seconds since the epoch.
    pub fn from_unix(timesecs: u64) -> Self {
        Self {
            time: http_date(timesecs),
            timesecs,
        }
    }
}

/// iperf3's `start.connecting_to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectingTo {
    /// Host as given.
    pub host: String,
    /// Server port.
    pub port: u16,
}

/// iperf3's `start.test_start`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestStart {
    /// Always "TCP".
    pub protocol: String,
    /// Streams per direction.
    pub num_streams: u32,
    /// Write size.
    pub blksize: u32,
    /// Seconds omitted at the start (`-O`), whole seconds like `duration`.
    pub omit: u32,
    /// Duration in seconds (0 with `-n`).
    pub duration: u64,
    /// Bytes to send (0 with `-t`).
    pub bytes: u64,
    /// Blocks to send (always 0).
    pub blocks: u64,
    /// 1 with `-R`.
    pub reverse: u8,
    /// Type of service (always 0).
    pub tos: u8,
    /// Target bitrate (0: unlimited).
    pub target_bitrate: u64,
    /// 1 with `--bidir`.
    pub bidir: u8,
    /// Per-stream pacing cap in bit/s (iperf3's `--fq-rate`); ours is the total split, see `longhaul`.
    pub fqrate: u64,
    /// Interval in seconds.
    pub interval: f64,
}

/// longhaul's additions to `start`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartExtra {
    /// RTT measured on the control connection before the test, ms.
    pub rtt_ms: f64,
    /// Target rate used for window sizing, bit/s.
    pub target_rate_bps: u64,
    /// Congestion control requested (`-C`), if any.
    pub congestion_requested: Option<String>,
    /// Total pacing rate requested (`--pace`), bit/s.
    pub pace_total_bps: Option<u64>,
    /// `--pace auto`: the bottleneck the client's packet trains found before the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_auto: Option<crate::auto_pace::BottleneckEstimate>,
    /// Zero-copy send method in use, if `-Z`.
    pub zerocopy: Option<String>,
    /// `--encrypt`: the TLS version and cipher suite of the connections (`None`: plaintext).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    /// This host's window plan.
    pub local_plan: SidePlan,
    /// This host's buffers as granted.
    pub local_buffers: Vec<BufferOutcome>,
    /// The server's window plan (a longhaul server's; an iperf3 server tells none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_plan: Option<SidePlan>,
    /// The server's buffers as granted (empty when it did not say).
    pub remote_buffers: Vec<BufferOutcome>,
    /// Every socket as the client set it up.
    pub local_sockets: Vec<SocketSetup>,
    /// Every socket as the server set it up (empty when it did not say).
    pub remote_sockets: Vec<SocketSetup>,
    /// The protocol the server spoke: "longhaul", or "iperf3" for a stock iperf3 server (which
    /// reports no intervals, plans or sockets of its own, only its totals).
    #[serde(default = "longhaul_protocol")]
    pub server_protocol: String,
    /// `--transport udp`: how the QUIC connections are set up (absent: TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicStart>,
}

/// How a test's QUIC connections (`--transport udp`) are set up, the same on both ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuicStart {
    /// The congestion controller (quinn's cubic or newreno, our bbr or udt).
    pub controller: String,
    /// Flow-control window of each stream and connection, and the sender's buffer, bytes.
    pub window_bytes: u64,
    /// The largest UDP payload a packet starts at and MTU discovery may reach, bytes.
    pub max_udp_payload: u16,
}

fn longhaul_protocol() -> String {
    "longhaul".into()
}

/// iperf3's `start`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    /// Data connections.
    pub connected: Vec<Connected>,
    /// Software version.
    pub version: String,
    /// `uname -a`-style system description.
    pub system_info: String,
    /// When the test started.
    pub timestamp: Timestamp,
    /// Server host and port.
    pub connecting_to: ConnectingTo,
    /// Test cookie.
    pub cookie: String,
    /// MSS of the first data connection.
    pub tcp_mss_default: u32,
    /// Requested `-w`, 0 for auto.
    pub sock_bufsize: u64,
    /// SO_SNDBUF of the first data connection, as the kernel reports it.
    pub sndbuf_actual: u64,
    /// SO_RCVBUF of the first data connection.
    pub rcvbuf_actual: u64,
    /// Test parameters.
    pub test_start: TestStart,
    /// longhaul's additions.
    pub longhaul: StartExtra,
}

/// One stream over one interval, iperf3 keys plus ours.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamEntry {
    /// Stream id.
    pub socket: u32,
    /// Interval start, s.
    pub start: f64,
    /// Interval end, s.
    pub end: f64,
    /// Interval length, s.
    pub seconds: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// Rate, bit/s.
    pub bits_per_second: f64,
    /// Retransmitted segments in the interval.
    pub retransmits: u64,
    /// Congestion window, bytes.
    pub snd_cwnd: u64,
    /// Peer receive window, bytes.
    pub snd_wnd: u64,
    /// Smoothed RTT, µs.
    pub rtt: u32,
    /// RTT variance, µs.
    pub rttvar: u32,
    /// Path MTU.
    pub pmtu: u32,
    /// Whether the interval lies in the omit period (`-O`) and is left out of `end`.
    pub omitted: bool,
    /// Whether these are the sender's figures.
    pub sender: bool,
    /// Minimum RTT, µs (longhaul).
    pub min_rtt: u32,
    /// Pacing rate, bit/s (longhaul).
    pub pacing_rate: u64,
    /// Delivery rate, bit/s (longhaul).
    pub delivery_rate: u64,
    /// µs busy sending in the interval (longhaul).
    pub busy_time: u64,
    /// µs limited by the receive window in the interval (longhaul).
    pub rwnd_limited: u64,
    /// µs limited by the send buffer in the interval (longhaul).
    pub sndbuf_limited: u64,
    /// A UDP stream's datagrams: sent, and the receiver's account of them.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpEntry>,
}

/// A UDP stream's (or sum's) datagrams over an interval: iperf3's keys (`packets`, `lost_packets`,
/// `lost_percent`, `jitter_ms`, `out_of_order`) and ours. `packets` is the sender's count; the rest
/// is the receiver's account of its own interval of the same number, absent when the receiver
/// reported none (an iperf3 server sends no intervals).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct UdpEntry {
    /// Datagrams sent.
    pub packets: u64,
    /// The receiver's account, if it gave one.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub received: Option<UdpReceived>,
}

/// A receiver's account of a UDP stream's datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct UdpReceived {
    /// Datagrams the receiver took (longhaul).
    pub received_packets: u64,
    /// Datagrams the receiver counted lost.
    pub lost_packets: u64,
    /// lost ÷ (taken + lost), %.
    pub lost_percent: f64,
    /// RFC 3550 jitter at the receiver, ms (a sum: the streams' mean, as iperf3's).
    pub jitter_ms: f64,
    /// Datagrams that came after a higher number.
    pub out_of_order: u64,
    /// Datagrams that came twice (longhaul).
    pub duplicates: u64,
    /// Times the receiving host's socket buffer overflowed (longhaul; `SO_RXQ_OVFL`: each drops one
    /// datagram, or one coalesced run of them under GRO; loss in the host, not the network).
    pub host_drops: u64,
}

impl UdpEntry {
    fn of(sent: Option<&UdpInterval>, got: Option<&UdpInterval>) -> Self {
        Self {
            packets: sent.map_or(0, |s| s.packets),
            received: got.map(|g| UdpReceived {
                received_packets: g.packets,
                lost_packets: g.lost,
                lost_percent: percent(g.lost, g.packets),
                jitter_ms: g.jitter_ms,
                out_of_order: g.out_of_order,
                duplicates: g.duplicates,
                host_drops: g.host_drops,
            }),
        }
    }

    /// The sum of several streams' entries (the receivers' account over those that gave one).
    fn sum(entries: impl Iterator<Item = UdpEntry>) -> Option<Self> {
        let mut n = 0u32;
        let mut out = Self::default();
        let mut with = 0u32;
        let mut r = UdpReceived::default();
        for e in entries {
            n += 1;
            out.packets = out.packets.saturating_add(e.packets);
            if let Some(g) = e.received {
                with += 1;
                r.received_packets = r.received_packets.saturating_add(g.received_packets);
                r.lost_packets = r.lost_packets.saturating_add(g.lost_packets);
                r.jitter_ms += g.jitter_ms;
                r.out_of_order = r.out_of_order.saturating_add(g.out_of_order);
                r.duplicates = r.duplicates.saturating_add(g.duplicates);
                r.host_drops = r.host_drops.saturating_add(g.host_drops);
            }
        }
        if n == 0 {
            return None;
        }
        if with > 0 {
            r.jitter_ms /= f64::from(with);
            r.lost_percent = percent(r.lost_packets, r.received_packets);
            out.received = Some(r);
        }
        Some(out)
    }
}

/// `lost` as a percentage of the datagrams accounted for (taken + lost).
fn percent(lost: u64, taken: u64) -> f64 {
    let all = lost.saturating_add(taken);
    if all == 0 {
        0.0
    } else {
        100.0 * lost as f64 / all as f64
    }
}

impl StreamEntry {
    fn from_interval(s: &StreamInterval) -> Self {
        let t = s.tcp.unwrap_or_default();
        let start = s.start_ns as f64 / 1e9;
        let end = s.end_ns as f64 / 1e9;
        Self {
            socket: s.stream.saturating_add(1),
            start,
            end,
            seconds: end - start,
            bytes: s.bytes,
            bits_per_second: s.bits_per_second(),
            retransmits: t.retransmits,
            snd_cwnd: t.snd_cwnd,
            snd_wnd: t.snd_wnd,
            rtt: t.rtt_us,
            rttvar: t.rttvar_us,
            pmtu: t.pmtu,
            omitted: s.omitted,
            sender: s.sender,
            min_rtt: t.min_rtt_us,
            pacing_rate: t.pacing_rate_bps,
            delivery_rate: t.delivery_rate_bps,
            busy_time: t.busy_us,
            rwnd_limited: t.rwnd_limited_us,
            sndbuf_limited: t.sndbuf_limited_us,
            udp: None,
        }
    }
}

/// A sum over streams (intervals and end).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SumEntry {
    /// Start, s.
    pub start: f64,
    /// End, s.
    pub end: f64,
    /// Length, s.
    pub seconds: f64,
    /// Bytes.
    pub bytes: u64,
    /// Rate, bit/s.
    pub bits_per_second: f64,
    /// Retransmits (sender sums only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Whether the interval lies in the omit period (always false in `end`, which leaves it out).
    pub omitted: bool,
    /// Whether these are the sender's figures.
    pub sender: bool,
    /// A UDP test's datagrams over the streams summed.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpEntry>,
}

/// One reporting interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalReport {
    /// Per-stream figures.
    pub streams: Vec<StreamEntry>,
    /// Sum over the streams of the main direction.
    pub sum: SumEntry,
    /// Sum over the reverse streams with `--bidir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<SumEntry>,
}

/// Builds an interval report from the sender-side samples of every stream (and for a UDP stream, its
/// receiver's sample too, whose account of the datagrams joins the sender's figures). `streams` is
/// the number of streams per direction; with `--bidir`, indices `0..streams` are client → server.
pub fn interval_report(
    samples: &[StreamInterval],
    direction: Direction,
    streams: u32,
) -> IntervalReport {
    let mut sorted: Vec<&StreamInterval> = samples.iter().collect();
    // Per stream, the sender's sample first.
    sorted.sort_by_key(|s| (s.stream, !s.sender));
    let mut entries: Vec<StreamEntry> = Vec::with_capacity(sorted.len());
    for (i, s) in sorted.iter().enumerate() {
        if i > 0 && sorted[i - 1].stream == s.stream {
            continue;
        }
        let mut e = StreamEntry::from_interval(s);
        if s.udp.is_some() {
            let mine = sorted.iter().filter(|o| o.stream == s.stream);
            let sent = mine.clone().find(|o| o.sender).and_then(|o| o.udp.as_ref());
            let got = mine
                .clone()
                .find(|o| !o.sender)
                .and_then(|o| o.udp.as_ref());
            e.udp = Some(UdpEntry::of(sent, got));
        }
        entries.push(e);
    }
    let sum_of = |pick: &dyn Fn(u32) -> bool| -> Option<SumEntry> {
        let chosen: Vec<&StreamEntry> = entries
            .iter()
            .filter(|e| pick(e.socket.saturating_sub(1)))
            .collect();
        let first = chosen.first()?;
        let (start, end) = (
            first.start,
            chosen.iter().map(|e| e.end).fold(first.end, f64::max),
        );
        let bytes = total(chosen.iter().map(|e| e.bytes));
        let ns = ((end - start) * 1e9).round() as u64;
        Some(SumEntry {
            start,
            end,
            seconds: end - start,
            bytes,
            bits_per_second: rate(bytes, ns),
            retransmits: Some(total(chosen.iter().map(|e| e.retransmits))),
            // Both sides run the same omit period, so an interval's streams agree; any one omitted
            // stream marks the sum omitted.
            omitted: chosen.iter().any(|e| e.omitted),
            sender: chosen.iter().all(|e| e.sender),
            udp: UdpEntry::sum(chosen.iter().filter_map(|e| e.udp)),
        })
    };
    let (sum, reverse) = match direction {
        Direction::Bidir => (sum_of(&|i| i < streams), sum_of(&|i| i >= streams)),
        _ => (sum_of(&|_| true), None),
    };
    IntervalReport {
        streams: entries,
        sum: sum.unwrap_or_default(),
        sum_bidir_reverse: reverse,
    }
}

/// Sender's end-of-test figures for one stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndSender {
    /// Stream id.
    pub socket: u32,
    /// Always 0 (the end of the omit period, if any).
    pub start: f64,
    /// Seconds sending after the omit period.
    pub end: f64,
    /// Seconds sending after the omit period.
    pub seconds: f64,
    /// Bytes sent after the omit period.
    pub bytes: u64,
    /// Rate, bit/s.
    pub bits_per_second: f64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Largest cwnd, bytes.
    pub max_snd_cwnd: u64,
    /// Largest peer window, bytes.
    pub max_snd_wnd: u64,
    /// Largest sampled RTT, µs.
    pub max_rtt: u32,
    /// Smallest sampled RTT, µs.
    pub min_rtt: u32,
    /// Mean sampled RTT, µs.
    pub mean_rtt: u32,
    /// Always true.
    pub sender: bool,
    /// Congestion control applied (longhaul).
    pub congestion: String,
    /// MSS (longhaul).
    pub mss: u32,
    /// Bytes retransmitted (longhaul).
    pub bytes_retrans: u64,
    /// µs limited by the receive window (longhaul).
    pub rwnd_limited: u64,
    /// µs limited by the send buffer (longhaul).
    pub sndbuf_limited: u64,
    /// µs busy (longhaul).
    pub busy_time: u64,
    /// Bytes sent during the omit period, left out of `bytes` (longhaul).
    pub omitted_bytes: u64,
}

/// Receiver's end-of-test figures for one stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndReceiver {
    /// Stream id.
    pub socket: u32,
    /// Always 0 (the end of the receiver's omit period, if any).
    pub start: f64,
    /// Seconds until the last byte.
    pub end: f64,
    /// Seconds until the last byte.
    pub seconds: f64,
    /// Bytes received after the receiver's omit period.
    pub bytes: u64,
    /// Rate, bit/s.
    pub bits_per_second: f64,
    /// Always false.
    pub sender: bool,
    /// Bytes received during the omit period, left out of `bytes` (longhaul).
    pub omitted_bytes: u64,
}

/// Both ends of one stream.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndStream {
    /// Sender figures.
    pub sender: EndSender,
    /// Receiver figures.
    pub receiver: EndReceiver,
    /// A UDP stream, as iperf3 reports it (`end.streams[].udp`): the sender's bytes and datagrams
    /// with the receiver's account of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<EndUdp>,
}

/// A UDP stream's end-of-test figures: iperf3's keys, then longhaul's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndUdp {
    /// Stream id.
    pub socket: u32,
    /// Always 0.
    pub start: f64,
    /// Seconds the sender sent.
    pub end: f64,
    /// Seconds the sender sent.
    pub seconds: f64,
    /// Bytes sent.
    pub bytes: u64,
    /// Rate sent, bit/s of payload.
    pub bits_per_second: f64,
    /// RFC 3550 jitter at the receiver, ms.
    pub jitter_ms: f64,
    /// Datagrams lost (the tail after the last datagram received included, when the sender's end
    /// marker came).
    pub lost_packets: u64,
    /// Datagrams sent.
    pub packets: u64,
    /// lost ÷ (received + lost), %.
    pub lost_percent: f64,
    /// Datagrams that came after a higher number.
    pub out_of_order: u64,
    /// Always true (the sender's view, as iperf3's client prints it).
    pub sender: bool,
    /// Datagrams the receiver took (longhaul).
    pub received_packets: u64,
    /// Datagrams that came twice (longhaul).
    pub duplicates: u64,
    /// Datagrams refused as malformed (longhaul).
    pub malformed: u64,
    /// Times the receiving host's socket buffer overflowed (longhaul; see
    /// [`UdpReceived::host_drops`]).
    pub host_drops: u64,
    /// The rate the sender was asked for, bit/s of payload; 0: as fast as it could (longhaul).
    pub target_bits_per_second: u64,
    /// Rate received, bit/s of payload (longhaul).
    pub received_bits_per_second: f64,
    /// Whether the receiver saw the sender's end marker (longhaul): without it the datagrams lost
    /// at the very end are not counted, as iperf3 never counts them.
    pub end_marker_seen: bool,
    /// One-way delay, sender to receiver (longhaul).
    pub one_way_delay: OneWayDelay,
}

/// One-way delay of a UDP stream: figures only when both ends' clocks said they were synchronised.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OneWayDelay {
    /// Whether both clocks said they were synchronised (`adjtimex`); without that the transit times
    /// hold the clocks' offset and no delay is given.
    pub synchronized: bool,
    /// Percentiles of the one-way delays, when synchronised.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub ms: Option<DelayMs>,
    /// Delay variation (RFC 5481's PDV): each datagram's transit above the smallest, which needs
    /// no synchronised clocks (their offset cancels); `None` without transit times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variation: Option<DelayVariation>,
}

/// Percentiles of the delay variation above the smallest transit, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelayVariation {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

/// Percentiles of one-way delays, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelayMs {
    /// Smallest.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl EndUdp {
    fn of(id: u32, s: &StreamTotals, r: &StreamTotals) -> Self {
        let (su, ru) = (s.udp.unwrap_or_default(), r.udp.unwrap_or_default());
        let synchronized = su.clock_synced && ru.clock_synced;
        let ms = |ns: u64| ns as f64 / 1e6;
        let (sent, got) = (su.counts, ru.counts);
        EndUdp {
            socket: id.saturating_add(1),
            start: 0.0,
            end: s.seconds,
            seconds: s.seconds,
            bytes: s.bytes,
            bits_per_second: rate_s(s.bytes, s.seconds),
            jitter_ms: got.jitter_ms,
            lost_packets: got.lost,
            packets: sent.packets,
            lost_percent: percent(got.lost, got.packets),
            out_of_order: got.out_of_order,
            sender: true,
            received_packets: got.packets,
            duplicates: got.duplicates,
            malformed: got.malformed,
            host_drops: got.host_drops,
            target_bits_per_second: su.target_bps,
            received_bits_per_second: rate_s(r.bytes, r.seconds),
            end_marker_seen: ru.end_seen,
            one_way_delay: OneWayDelay {
                synchronized,
                ms: ru.transit.filter(|_| synchronized).map(|t| DelayMs {
                    min_ms: ms(t.min_ns),
                    p50_ms: ms(t.p50_ns),
                    p90_ms: ms(t.p90_ns),
                    p99_ms: ms(t.p99_ns),
                    max_ms: ms(t.max_ns),
                }),
                variation: ru.transit.map(|t| DelayVariation {
                    p50_ms: ms(t.p50_ns.saturating_sub(t.min_ns)),
                    p90_ms: ms(t.p90_ns.saturating_sub(t.min_ns)),
                    p99_ms: ms(t.p99_ns.saturating_sub(t.min_ns)),
                    max_ms: ms(t.max_ns.saturating_sub(t.min_ns)),
                }),
            },
        }
    }

    fn entry(&self) -> UdpEntry {
        UdpEntry {
            packets: self.packets,
            received: Some(UdpReceived {
                received_packets: self.received_packets,
                lost_packets: self.lost_packets,
                lost_percent: self.lost_percent,
                jitter_ms: self.jitter_ms,
                out_of_order: self.out_of_order,
                duplicates: self.duplicates,
                host_drops: self.host_drops,
            }),
        }
    }
}

/// iperf3's `end.cpu_utilization_percent`.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct CpuPercent {
    /// Client total, % of one core.
    pub host_total: f64,
    /// Client user.
    pub host_user: f64,
    /// Client system.
    pub host_system: f64,
    /// Server total.
    pub remote_total: f64,
    /// Server user.
    pub remote_user: f64,
    /// Server system.
    pub remote_system: f64,
}

/// The Land Speed Record metric of the run (`--distance-km`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LsrEntry {
    /// Distance the metric uses, km.
    pub distance_km: f64,
    /// Received rate, bit/s.
    pub bits_per_second: f64,
    /// Rate × distance, bit·m/s.
    pub bit_meters_per_second: f64,
    /// Human form, e.g. "46,156 Tbit·m/s".
    pub display: String,
}

/// longhaul's additions to `end`.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct EndExtra {
    /// The Land Speed Record metric, with `--distance-km`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lsr: Option<LsrEntry>,
    /// Warnings to show after the results (e.g. a binding window cap with its fix).
    pub warnings: Vec<String>,
    /// Client-side CPU seconds per gigabit moved.
    pub cpu_seconds_per_gbit: f64,
    /// `--pace auto`: what each sending side's governor did (the trains' estimate is in `start`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace_auto: Option<PaceAutoReport>,
    /// The user interrupted the test (SIGINT, SIGTERM): the totals are of what ran before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// `--pace auto` in the end report.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PaceAutoReport {
    /// The client's governor, if the client sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<crate::auto_pace::GovernorSummary>,
    /// The server's governor, if the server sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::auto_pace::GovernorSummary>,
}

/// iperf3's `end`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct End {
    /// Per-stream totals.
    pub streams: Vec<EndStream>,
    /// A UDP test's sum, main direction, as iperf3 gives it: the bytes sent with the receivers'
    /// account of the datagrams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<SumEntry>,
    /// Sender sum, main direction.
    pub sum_sent: SumEntry,
    /// Receiver sum, main direction.
    pub sum_received: SumEntry,
    /// Sender sum of the reverse streams with `--bidir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent_bidir_reverse: Option<SumEntry>,
    /// Receiver sum of the reverse streams with `--bidir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received_bidir_reverse: Option<SumEntry>,
    /// CPU use of both ends.
    pub cpu_utilization_percent: CpuPercent,
    /// Congestion control on the sending sockets (main direction), as the kernel applied it.
    pub sender_tcp_congestion: String,
    /// Congestion control on the receiving sockets.
    pub receiver_tcp_congestion: String,
    /// longhaul's additions.
    pub longhaul: EndExtra,
}

/// Builds `end` from both sides' per-stream totals.
pub fn end_report(
    totals: &[StreamTotals],
    direction: Direction,
    streams: u32,
    local_cpu: CpuUse,
    remote_cpu: CpuUse,
) -> End {
    let senders: Vec<&StreamTotals> = totals.iter().filter(|t| t.sender).collect();
    let receivers: Vec<&StreamTotals> = totals.iter().filter(|t| !t.sender).collect();
    let in_main = |id: u32| direction != Direction::Bidir || id < streams;
    let mut ids: Vec<u32> = totals.iter().map(|t| t.stream).collect();
    ids.sort_unstable();
    ids.dedup();
    let entries: Vec<EndStream> = ids
        .iter()
        .map(|&id| {
            let s = senders
                .iter()
                .find(|t| t.stream == id)
                .copied()
                .cloned()
                .unwrap_or_default();
            let r = receivers
                .iter()
                .find(|t| t.stream == id)
                .copied()
                .cloned()
                .unwrap_or_default();
            EndStream {
                sender: EndSender {
                    socket: id.saturating_add(1),
                    start: 0.0,
                    end: s.seconds,
                    seconds: s.seconds,
                    bytes: s.bytes,
                    bits_per_second: rate_s(s.bytes, s.seconds),
                    retransmits: s.retransmits,
                    max_snd_cwnd: s.max_snd_cwnd,
                    max_snd_wnd: s.max_snd_wnd,
                    max_rtt: s.max_rtt_us,
                    min_rtt: s.min_rtt_us,
                    mean_rtt: s.mean_rtt_us,
                    sender: true,
                    congestion: s.congestion.clone(),
                    mss: s.mss,
                    bytes_retrans: s.bytes_retrans,
                    rwnd_limited: s.rwnd_limited_us,
                    sndbuf_limited: s.sndbuf_limited_us,
                    busy_time: s.busy_us,
                    omitted_bytes: s.omitted_bytes,
                },
                receiver: EndReceiver {
                    socket: id.saturating_add(1),
                    start: 0.0,
                    end: r.seconds,
                    seconds: r.seconds,
                    bytes: r.bytes,
                    bits_per_second: rate_s(r.bytes, r.seconds),
                    sender: false,
                    omitted_bytes: r.omitted_bytes,
                },
                udp: (s.udp.is_some() || r.udp.is_some()).then(|| EndUdp::of(id, &s, &r)),
            }
        })
        .collect();
    let udp_of = |main: bool| {
        UdpEntry::sum(
            entries
                .iter()
                .filter(|e| in_main(e.sender.socket.saturating_sub(1)) == main)
                .filter_map(|e| e.udp.as_ref().map(EndUdp::entry)),
        )
    };
    let sum = |list: &[&StreamTotals], main: bool, sender: bool| -> SumEntry {
        let chosen: Vec<&&StreamTotals> =
            list.iter().filter(|t| in_main(t.stream) == main).collect();
        let bytes = total(chosen.iter().map(|t| t.bytes));
        let seconds = chosen.iter().map(|t| t.seconds).fold(0.0, f64::max);
        SumEntry {
            start: 0.0,
            end: seconds,
            seconds,
            bytes,
            bits_per_second: rate_s(bytes, seconds),
            retransmits: sender.then(|| total(chosen.iter().map(|t| t.retransmits))),
            omitted: false,
            sender,
            udp: udp_of(main),
        }
    };
    let bidir = direction == Direction::Bidir;
    let cc_of = |list: &[&StreamTotals]| {
        list.iter()
            .find(|t| in_main(t.stream))
            .map(|t| t.congestion.clone())
            .unwrap_or_default()
    };
    let (lt, lu, ls) = local_cpu.percent();
    let (rt, ru, rs) = remote_cpu.percent();
    // CPU is measured over the whole run, omit period included, so it is divided by everything sent.
    let moved_gbit: f64 = senders
        .iter()
        .map(|t| t.bytes.saturating_add(t.omitted_bytes) as f64 * 8.0 / 1e9)
        .sum();
    let sum_sent = sum(&senders, true, true);
    let sum_received = sum(&receivers, true, false);
    let sum_sent_bidir_reverse = bidir.then(|| sum(&senders, false, true));
    let sum_received_bidir_reverse = bidir.then(|| sum(&receivers, false, false));
    End {
        sum: sum_sent.udp.is_some().then(|| sum_sent.clone()),
        streams: entries,
        sum_sent,
        sum_received,
        sum_sent_bidir_reverse,
        sum_received_bidir_reverse,
        cpu_utilization_percent: CpuPercent {
            host_total: lt,
            host_user: lu,
            host_system: ls,
            remote_total: rt,
            remote_user: ru,
            remote_system: rs,
        },
        sender_tcp_congestion: cc_of(&senders),
        receiver_tcp_congestion: cc_of(&receivers),
        longhaul: EndExtra {
            cpu_seconds_per_gbit: if moved_gbit > 0.0 {
                (local_cpu.user_s + local_cpu.system_s) / moved_gbit
            } else {
                0.0
            },
            ..Default::default()
        },
    }
}

/// The sum of counters from a peer, saturating: figures a hostile peer made up to overflow show as
/// the largest count instead of ending the test in a panic.
fn total(counts: impl Iterator<Item = u64>) -> u64 {
    counts.fold(0, u64::saturating_add)
}

fn rate_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// Formats seconds since the epoch as an RFC 7231 date ("Sat, 21 Nov 2026 05:49:17 GMT"), as iperf3's
/// `timestamp.time` does. Instants past 9999-12-31T23:59:59Z (beyond any clock) print as that instant.
pub fn http_date(secs: u64) -> String {
    let at = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&at)
        .expect("every year from 1970 to 9999 has an RFC 9110 form")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::TcpInterval;

    fn iv(stream: u32, bytes: u64, sender: bool) -> StreamInterval {
        StreamInterval {
            stream,
            start_ns: 0,
            end_ns: 1_000_000_000,
            bytes,
            omitted: false,
            sender,
            tcp: Some(TcpInterval {
                retransmits: 2,
                snd_cwnd: 1000,
                rtt_us: 50,
                ..Default::default()
            }),
            udp: None,
        }
    }

    #[test]
    fn interval_sum_uses_iperf3_keys() {
        let r = interval_report(&[iv(1, 500, true), iv(0, 500, true)], Direction::Forward, 2);
        assert_eq!(r.streams[0].socket, 1);
        assert_eq!(r.sum.bytes, 1000);
        assert_eq!(r.sum.bits_per_second, 8000.0);
        assert_eq!(r.sum.retransmits, Some(4));
        let json = serde_json::to_value(&r).unwrap();
        for key in ["streams", "sum"] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        let s = &json["streams"][0];
        for key in [
            "socket",
            "start",
            "end",
            "seconds",
            "bytes",
            "bits_per_second",
            "retransmits",
            "snd_cwnd",
            "rtt",
            "rttvar",
            "pmtu",
            "omitted",
            "sender",
        ] {
            assert!(s.get(key).is_some(), "stream entry missing {key}");
        }
        assert!(json.get("sum_bidir_reverse").is_none());
    }

    #[test]
    fn omitted_intervals_are_flagged_in_streams_and_sum() {
        let mut a = iv(0, 100, true);
        a.omitted = true;
        let r = interval_report(&[a], Direction::Forward, 1);
        assert!(r.streams[0].omitted && r.sum.omitted);
        let r = interval_report(&[iv(0, 100, true)], Direction::Forward, 1);
        assert!(!r.streams[0].omitted && !r.sum.omitted);
    }

    #[test]
    fn end_carries_omitted_bytes_beside_the_measured_ones() {
        let t = |sender, bytes, omitted_bytes| StreamTotals {
            sender,
            bytes,
            omitted_bytes,
            seconds: 2.0,
            ..Default::default()
        };
        let e = end_report(
            &[t(true, 1000, 300), t(false, 990, 310)],
            Direction::Forward,
            1,
            CpuUse {
                user_s: 1.3,
                system_s: 0.0,
                wall_s: 3.0,
            },
            CpuUse::default(),
        );
        assert_eq!((e.sum_sent.bytes, e.sum_received.bytes), (1000, 990));
        assert_eq!(e.streams[0].sender.omitted_bytes, 300);
        assert_eq!(e.streams[0].receiver.omitted_bytes, 310);
        assert!(!e.sum_sent.omitted);
        // CPU of the whole run over all 1300 bytes sent.
        let per_gbit = 1.3 / (1300.0 * 8.0 / 1e9);
        assert!((e.longhaul.cpu_seconds_per_gbit - per_gbit).abs() < 1e-6 * per_gbit);
    }

    #[test]
    fn bidir_intervals_split_the_sums() {
        let r = interval_report(&[iv(0, 100, true), iv(1, 300, true)], Direction::Bidir, 1);
        assert_eq!(r.sum.bytes, 100);
        assert_eq!(r.sum_bidir_reverse.unwrap().bytes, 300);
    }

    #[test]
    fn end_pairs_sender_and_receiver_of_each_stream() {
        let t = |stream, sender, bytes| StreamTotals {
            stream,
            sender,
            bytes,
            seconds: 2.0,
            retransmits: if sender { 7 } else { 0 },
            congestion: if sender {
                "cubic".into()
            } else {
                "reno".into()
            },
            ..Default::default()
        };
        let e = end_report(
            &[t(0, true, 1000), t(0, false, 900)],
            Direction::Forward,
            1,
            CpuUse {
                user_s: 1.0,
                system_s: 1.0,
                wall_s: 2.0,
            },
            CpuUse::default(),
        );
        assert_eq!(e.streams[0].sender.bytes, 1000);
        assert_eq!(e.streams[0].receiver.bytes, 900);
        assert_eq!(e.sum_sent.retransmits, Some(7));
        assert_eq!(e.sum_received.retransmits, None);
        assert_eq!(e.sum_received.bits_per_second, 3600.0);
        assert_eq!(e.sender_tcp_congestion, "cubic");
        assert_eq!(e.receiver_tcp_congestion, "reno");
        assert_eq!(e.cpu_utilization_percent.host_total, 100.0);
    }

    #[test]
    fn http_date_matches_known_instants() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_795_154_957), "Fri, 20 Nov 2026 06:09:17 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
