//! UDP test datagrams (issue 16, first part): the header iperf3 puts at the front of every UDP
//! payload, and the receiver's account of a stream, kept as iperf3 keeps it so that `test -u` and a
//! stock iperf3 report the same figures for the same packets, plus the duplicates iperf3 does not
//! count.
//!
//! The header, big-endian, as iperf3 3.x sends it (`iperf_udp.c`):
//!
//! ```text
//! 0  sec    u32   the sender's clock when it sent the datagram (Unix seconds)
//! 4  usec   u32   and microseconds
//! 8  pcount u32   the datagram's number, from 1   (u64 with --udp-counters-64bit)
//! ```
//!
//! The rest of the datagram is payload. The receiver's account ([`UdpReceiver`]) follows iperf3's:
//! a number above the next one expected counts the numbers skipped as lost; a number below it is
//! out of order, and takes one back from the lost count (it was late, not lost); jitter is RFC 3550's
//! interarrival jitter over the transit times (arrival minus the sender's stamp, so a constant clock
//! offset cancels). On top: duplicates (a number seen before, from a window of the last
//! [`DUP_WINDOW`] numbers), and datagrams refused as malformed (too short, a number of 0 or beyond
//! anything the sender could have sent), which are counted and otherwise ignored.
//!
//! longhaul's own tests add two datagrams iperf3 does not know, both told apart by their first eight
//! bytes (a data datagram starting with them would carry a sender clock in the year 2010):
//! - the stream's hello, the 32-byte data preamble (`crate::wire::is_preamble` tells it) sent to the
//!   server's port, which the server echoes once it has routed the stream to its test;
//! - the end marker ([`EndMarker`]): the sender's last datagram number, sent a few times when it
//!   stops, so the receiver knows when the stream ended and counts the datagrams lost at its tail,
//!   which iperf3 never sees (it only counts gaps below the highest number received).
//!
//! The receiver also keeps the transit times (arrival minus the sender's stamp) in a histogram: with
//! both clocks synchronised they are one-way delays ([`DelaySpread`]); otherwise they mean nothing and
//! the report says so.

use serde::{Deserialize, Serialize};

use longhaul_units::hist::Histogram;

/// Bytes of the header with 32-bit counters.
pub const HEADER_LEN_32: usize = 12;
/// Bytes of the header with 64-bit counters (`--udp-counters-64bit`).
pub const HEADER_LEN_64: usize = 16;
/// How many recent datagram numbers the receiver remembers to tell a duplicate from a late one.
pub const DUP_WINDOW: u64 = 4096;
/// Largest jump forward in datagram numbers the receiver believes: more than this many datagrams
/// lost at once is a forged or corrupted number, not loss.
pub const MAX_JUMP: u64 = 1 << 30;

/// A datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sender's clock, seconds.
    pub sec: u32,
    /// Sender's clock, microseconds within the second.
    pub usec: u32,
    /// The datagram's number, from 1.
    pub pcount: u64,
}

impl UdpHeader {
    /// The header of datagram `pcount` sent at `sent_ns` (Unix ns).
    pub fn new(sent_ns: u64, pcount: u64) -> Self {
        Self {
            sec: (sent_ns / 1_000_000_000) as u32,
            usec: ((sent_ns % 1_000_000_000) / 1000) as u32,
            pcount,
        }
    }

    /// The sender's stamp, ns.
    pub fn sent_ns(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.usec.min(999_999)) * 1000
    }

    /// Writes the header at the front of `buf` (at least [`HEADER_LEN_32`] or [`HEADER_LEN_64`]
    /// bytes); a 32-bit counter keeps the low 32 bits, as iperf3's does.
    pub fn write(&self, buf: &mut [u8], counters_64: bool) {
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64 {
            buf[8..16].copy_from_slice(&self.pcount.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.pcount as u32).to_be_bytes());
        }
    }

    /// Reads the header of a datagram; `None` when it is too short to hold one.
    pub fn read(datagram: &[u8], counters_64: bool) -> Option<Self> {
        let need = if counters_64 {
            HEADER_LEN_64
        } else {
            HEADER_LEN_32
        };
        if datagram.len() < need {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes(datagram[i..i + 4].try_into().expect("4"));
        let pcount = if counters_64 {
            u64::from_be_bytes(datagram[8..16].try_into().expect("8"))
        } else {
            u64::from(u32_at(8))
        };
        Some(Self {
            sec: u32_at(0),
            usec: u32_at(4),
            pcount,
        })
    }
}

/// The first eight bytes of an [`EndMarker`].
pub const END_MAGIC: [u8; 8] = *b"LHUDPEND";
/// Bytes of an [`EndMarker`].
pub const END_LEN: usize = 16;

/// The sender's last word on a stream: how many datagrams it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndMarker {
    /// Datagrams sent (the highest number used).
    pub sent: u64,
}

impl EndMarker {
    /// The marker's bytes.
    pub fn encode(&self) -> [u8; END_LEN] {
        let mut b = [0u8; END_LEN];
        b[..8].copy_from_slice(&END_MAGIC);
        b[8..].copy_from_slice(&self.sent.to_be_bytes());
        b
    }

    /// Reads a marker; `None` for any other datagram.
    pub fn decode(datagram: &[u8]) -> Option<Self> {
        (datagram.len() == END_LEN && datagram[..8] == END_MAGIC).then(|| Self {
            sent: u64::from_be_bytes(datagram[8..].try_into().expect("8 bytes")),
        })
    }
}

/// Spread of a stream's one-way delays, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DelaySpread {
    /// Datagrams measured.
    pub samples: u64,
    /// Smallest (to within the histogram's 1.6 %).
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Largest (exact).
    pub max_ns: u64,
}

/// The receiver's counters at one instant (interval figures are differences of two).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UdpCounts {
    /// Datagrams taken.
    pub packets: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Lost.
    pub lost: u64,
    /// Out of order.
    pub out_of_order: u64,
    /// Duplicates.
    pub duplicates: u64,
    /// Malformed.
    pub malformed: u64,
    /// Jitter now, ns.
    pub jitter_ns: f64,
    /// Times the receiving host's socket buffer overflowed (`SO_RXQ_OVFL`; each drop is one datagram
    /// or, under GRO, one coalesced run of them): part of
    /// `lost`, but lost in this host rather than in the network. (Filled by the I/O layer.)
    pub host_drops: u64,
}

impl UdpCounts {
    /// What moved from `earlier` to `self` (jitter: its value now).
    pub fn since(&self, earlier: &UdpCounts) -> UdpCounts {
        UdpCounts {
            packets: self.packets.saturating_sub(earlier.packets),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            lost: self.lost.saturating_sub(earlier.lost),
            out_of_order: self.out_of_order.saturating_sub(earlier.out_of_order),
            duplicates: self.duplicates.saturating_sub(earlier.duplicates),
            malformed: self.malformed.saturating_sub(earlier.malformed),
            jitter_ns: self.jitter_ns,
            host_drops: self.host_drops.saturating_sub(earlier.host_drops),
        }
    }
}

/// The receiver's account of one UDP stream, in iperf3's terms.
#[derive(Debug, Clone, Default)]
pub struct UdpReceiver {
    counters_64: bool,
    /// Datagrams taken (well-formed, not duplicates).
    pub packets: u64,
    /// Payload bytes of those.
    pub bytes: u64,
    /// The highest datagram number seen (iperf3's `packet_count`).
    pub highest: u64,
    /// Lost datagrams (iperf3's `cnt_error`).
    pub lost: u64,
    /// Datagrams that came after a higher number (iperf3's `outoforder_packets`).
    pub out_of_order: u64,
    /// Datagrams whose number had been seen already (longhaul's addition).
    pub duplicates: u64,
    /// Datagrams refused: too short, number 0, or an impossible jump.
    pub malformed: u64,
    /// RFC 3550 jitter, ns.
    pub jitter_ns: f64,
    last_transit: Option<i128>,
    /// Bit i: number `highest - i` was seen (i < DUP_WINDOW).
    seen: Vec<u64>,
    /// Transit times that were not negative, ns.
    transit: Histogram,
    /// Transit times below zero: the clocks disagree by more than the path's delay.
    pub negative_transits: u64,
    /// The sender's end marker, once it came.
    pub ended: Option<u64>,
}

impl UdpReceiver {
    /// A receiver of datagrams with 32- or 64-bit counters.
    pub fn new(counters_64: bool) -> Self {
        Self {
            counters_64,
            seen: vec![0; (DUP_WINDOW / 64) as usize],
            ..Self::default()
        }
    }

    fn seen_bit(&self, n: u64) -> Option<(usize, u64)> {
        let back = self.highest.checked_sub(n)?;
        (back < DUP_WINDOW).then_some(((back / 64) as usize, 1 << (back % 64)))
    }

    /// Slides the window up by `by` numbers (a new highest).
    fn advance(&mut self, by: u64) {
        if by >= DUP_WINDOW {
            self.seen.iter_mut().for_each(|w| *w = 0);
            return;
        }
        // Shift the whole bitmap towards older numbers by `by` bits.
        let words = (by / 64) as usize;
        let bits = by % 64;
        let n = self.seen.len();
        for i in (0..n).rev() {
            let lo = if i >= words { self.seen[i - words] } else { 0 };
            let carry = if bits > 0 && i > words {
                self.seen[i - words - 1] >> (64 - bits)
            } else {
                0
            };
            self.seen[i] = if bits > 0 { (lo << bits) | carry } else { lo };
        }
    }

    /// A datagram of `datagram.len()` bytes arrived at `now_ns` (the receiver's clock).
    pub fn datagram(&mut self, datagram: &[u8], now_ns: u64) {
        let Some(h) = UdpHeader::read(datagram, self.counters_64) else {
            self.malformed += 1;
            return;
        };
        let n = h.pcount;
        if n == 0 || n > self.highest.saturating_add(MAX_JUMP) {
            self.malformed += 1;
            return;
        }
        if n > self.highest {
            let skipped = n - self.highest - 1;
            self.lost += skipped;
            self.advance(n - self.highest);
            self.highest = n;
            self.seen[0] |= 1;
        } else {
            match self.seen_bit(n) {
                Some((w, bit)) if self.seen[w] & bit != 0 => {
                    self.duplicates += 1;
                    return;
                }
                Some((w, bit)) => self.seen[w] |= bit,
                // Older than the window: iperf3 would call it out of order too.
                None => {}
            }
            self.out_of_order += 1;
            // It was counted lost when a higher number came first: it was late, not lost.
            self.lost = self.lost.saturating_sub(1);
        }
        self.packets += 1;
        self.bytes += datagram.len() as u64;
        let transit = i128::from(now_ns) - i128::from(h.sent_ns());
        match u64::try_from(transit) {
            Ok(t) => self.transit.record(t),
            Err(_) => self.negative_transits += 1,
        }
        if let Some(last) = self.last_transit {
            let d = (transit - last).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    /// The sender's end marker: it sent `sent` datagrams, so those above the highest number seen
    /// were lost at the tail. Only the first marker counts (the sender repeats it), and a count
    /// below the highest seen or beyond any believable jump is ignored.
    pub fn end(&mut self, sent: u64) {
        if self.ended.is_some() {
            return;
        }
        self.ended = Some(sent);
        if sent > self.highest && sent - self.highest <= MAX_JUMP {
            self.lost += sent - self.highest;
            // The numbers up to `sent` are not seen yet: a straggler among them is late, not twice.
            self.advance(sent - self.highest);
            self.highest = sent;
        }
    }

    /// The counters now.
    pub fn counts(&self) -> UdpCounts {
        UdpCounts {
            packets: self.packets,
            bytes: self.bytes,
            lost: self.lost,
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            malformed: self.malformed,
            jitter_ns: self.jitter_ns,
            host_drops: 0,
        }
    }

    /// The transit times' spread: one-way delays if both clocks are synchronised. `None` before any
    /// datagram, or when some transit was negative (the clocks are certainly off).
    pub fn transit(&self) -> Option<DelaySpread> {
        if self.transit.is_empty() || self.negative_transits > 0 {
            return None;
        }
        let h = &self.transit;
        Some(DelaySpread {
            samples: h.len(),
            min_ns: h.quantile(0.0),
            p50_ns: h.quantile(0.5),
            p90_ns: h.quantile(0.9),
            p99_ns: h.quantile(0.99),
            max_ns: h.quantile(1.0),
        })
    }

    /// Lost datagrams as a share of those the sender sent up to the highest number (iperf3's
    /// `lost_percent` / 100).
    pub fn loss(&self) -> f64 {
        if self.highest == 0 {
            0.0
        } else {
            self.lost as f64 / self.highest as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgram(n: u64, sent_ns: u64, len: usize, c64: bool) -> Vec<u8> {
        let mut b = vec![0u8; len];
        UdpHeader::new(sent_ns, n).write(&mut b, c64);
        b
    }

    #[test]
    fn headers_round_trip_in_both_counter_widths() {
        for c64 in [false, true] {
            let h = UdpHeader::new(1_795_772_042_643_000_161, 77);
            let b = dgram(77, 1_795_772_042_643_000_161, 100, c64);
            assert_eq!(UdpHeader::read(&b, c64), Some(h));
            assert_eq!(h.sent_ns(), 1_795_772_042_643_000_000);
        }
        assert_eq!(UdpHeader::read(&[0; 11], false), None);
        assert_eq!(UdpHeader::read(&[0; 15], true), None);
        // A 32-bit counter keeps the low bits, as iperf3's does.
        let b = dgram((1 << 32) + 5, 0, 12, false);
        assert_eq!(UdpHeader::read(&b, false).unwrap().pcount, 5);
    }

    #[test]
    fn loss_out_of_order_and_duplicates_are_counted_as_iperf3_counts_them() {
        let mut r = UdpReceiver::new(false);
        // 1 2 4 3 6 6 (5 never comes; 3 is late; 6 twice).
        for (i, n) in [1u64, 2, 4, 3, 6, 6].into_iter().enumerate() {
            r.datagram(&dgram(n, 1000 * i as u64, 64, false), 1000 * i as u64 + 50);
        }
        assert_eq!(r.highest, 6);
        assert_eq!(r.lost, 1, "3 skipped then came late; 5 is lost");
        assert_eq!(r.out_of_order, 1);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.packets, 5);
        assert!((r.loss() - 1.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn jitter_is_rfc_3550_and_blind_to_a_clock_offset() {
        let mut r = UdpReceiver::new(true);
        // Transit alternating 10 and 12 ms behind a 5 s clock offset.
        for n in 1..=400u64 {
            let sent = n * 1_000_000;
            let transit = if n % 2 == 0 { 10_000_000 } else { 12_000_000 };
            r.datagram(&dgram(n, sent, 64, true), sent + transit + 5_000_000_000);
        }
        assert!(
            (r.jitter_ns - 2_000_000.0).abs() < 1_000.0,
            "{}",
            r.jitter_ns
        );
        assert_eq!((r.lost, r.out_of_order), (0, 0));
    }

    #[test]
    fn malformed_datagrams_are_counted_and_ignored() {
        let mut r = UdpReceiver::new(false);
        r.datagram(&[1, 2, 3], 0);
        r.datagram(&dgram(0, 0, 64, false), 0);
        r.datagram(&dgram(1, 0, 64, false), 0);
        // A forged jump of more than MAX_JUMP numbers is not a billion losses.
        r.datagram(&dgram(u64::from(u32::MAX), 0, 64, false), 0);
        assert_eq!(r.highest, 1, "the jump was refused");
        let mut r64 = UdpReceiver::new(true);
        r64.datagram(&dgram(1, 0, 64, true), 0);
        r64.datagram(&dgram(u64::MAX, 0, 64, true), 0);
        assert_eq!((r64.malformed, r64.highest, r64.lost), (1, 1, 0));
        assert_eq!(r.malformed, 3);
        assert_eq!((r.packets, r.lost), (1, 0));
    }

    #[test]
    fn the_end_marker_counts_the_tail_and_only_once() {
        let m = EndMarker { sent: 10 };
        assert_eq!(EndMarker::decode(&m.encode()), Some(m));
        assert_eq!(EndMarker::decode(&dgram(1, 0, 16, true)), None);
        let mut r = UdpReceiver::new(false);
        for n in [1u64, 2, 3, 5, 7] {
            r.datagram(&dgram(n, 0, 64, false), 0);
        }
        r.end(10);
        assert_eq!(
            (r.lost, r.highest),
            (2 + 3, 10),
            "4 and 6 in the middle, 8-10 at the tail"
        );
        // Stragglers after the marker (it overtook them) were late, not lost, nor duplicates.
        r.datagram(&dgram(9, 0, 64, false), 0);
        r.datagram(&dgram(8, 0, 64, false), 0);
        assert_eq!((r.lost, r.out_of_order, r.duplicates), (3, 2, 0));
        r.datagram(&dgram(8, 0, 64, false), 0);
        assert_eq!(
            (r.lost, r.duplicates),
            (3, 1),
            "a second copy is a duplicate"
        );
        r.end(20);
        assert_eq!(r.lost, 3, "a repeated marker changes nothing");
        // A marker below what was seen (a lying or confused sender) adds nothing.
        let mut r = UdpReceiver::new(false);
        r.datagram(&dgram(9, 0, 64, false), 0);
        r.end(3);
        assert_eq!((r.lost, r.highest), (8, 9));
    }

    #[test]
    fn transit_times_give_a_spread_unless_the_clocks_are_behind() {
        let mut r = UdpReceiver::new(false);
        assert_eq!(r.transit(), None);
        for n in 1..=100u64 {
            r.datagram(
                &dgram(n, n * 1_000_000, 64, false),
                n * 1_000_000 + 60_000_000 + n * 1000,
            );
        }
        let s = r.transit().unwrap();
        assert_eq!(s.samples, 100);
        assert!(s.min_ns >= 60_000_000 && s.min_ns < 61_100_000, "{s:?}");
        assert!(s.p50_ns >= 60_050_000 && s.p50_ns < 61_100_000, "{s:?}");
        assert_eq!(s.max_ns, 60_100_000);
        // One datagram from the future: the clocks are off, no spread.
        r.datagram(&dgram(101, 200_000_000, 64, false), 100_000_000);
        assert_eq!(r.transit(), None);
    }

    #[test]
    fn the_duplicate_window_slides_with_the_highest_number() {
        let mut r = UdpReceiver::new(true);
        for n in 1..=10_000u64 {
            r.datagram(&dgram(n, 0, 64, true), 0);
        }
        // Recent numbers are known: a repeat is a duplicate.
        r.datagram(&dgram(9_999, 0, 64, true), 0);
        r.datagram(&dgram(10_000 - DUP_WINDOW + 1, 0, 64, true), 0);
        assert_eq!(r.duplicates, 2);
        // Beyond the window a repeat cannot be told from a late datagram: out of order.
        r.datagram(&dgram(10, 0, 64, true), 0);
        assert_eq!((r.duplicates, r.out_of_order), (2, 1));
        // A jump forward keeps what the window still covers.
        r.datagram(&dgram(10_100, 0, 64, true), 0);
        r.datagram(&dgram(10_000, 0, 64, true), 0);
        r.datagram(&dgram(10_050, 0, 64, true), 0);
        assert_eq!(r.duplicates, 3, "10000 was seen; 10050 was not");
        assert_eq!(r.lost, 99 - 1, "10001..=10099 skipped, 10050 came late");
    }
}
