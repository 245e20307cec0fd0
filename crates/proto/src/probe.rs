//! The probe stream: a low-rate stream of UDP probes from a client ("A") that a server ("B")
//! reflects, for loss, duplicates, reordering, round-trip time, jitter and (when both clocks say
//! they are synchronised) one-way delay. `longhaul monitor`'s latency tests run one per pair.
//!
//! The split follows TWAMP (RFC 5357): a TCP control connection (preamble kind `Probe`) agrees on
//! the session, and the probes travel over UDP to a port the server opened for it:
//!
//! ```text
//! A: ProbeHello{version, interval_ns, size, count, synced, train}
//!                          B: ProbeAccept{udp_port, session, synced} | Error (a limit)
//! A → B (UDP): probe{session, seq, a_send_ns} × count, `train` back to back every interval_ns
//!                          B → A (UDP): the same bytes with b_recv_ns, b_send_ns, b_seen, reply bit
//! A: ProbeStop             B: ProbeDone{received, duplicates, refused}
//! ```
//!
//! The reflector is built not to be an amplifier or a weapon: it answers only probes that carry the
//! session's 16 random bytes, only from the address of the TCP peer (whose handshake proved it owns
//! that address), never with more bytes than it received, at most `count` + a margin replies, and
//! only while the control connection is open ([`Reflector`]).
//!
//! A probe is fixed binary, big-endian, at least [`HEADER_LEN`] bytes (the rest is padding to the
//! asked size):
//!
//! ```text
//! 0  magic "LHPB"       4    24 seq        u64     48 b_send_ns  u64 (B's clock)
//! 4  version u8 = 1     1    32 a_send_ns  u64     56 b_seen     u64 (probes B took so far)
//! 5  flags u8           1       (A's clock)
//!      bit 0: a reply   40 b_recv_ns  u64 (B's clock)
//!      bit 1: B's clock is synchronised
//! 6  reserved u16 = 0   2
//! 8  session            16
//! ```
//!
//! [`ProbeStats`] turns what A sent and got back into the figures: jitter is RFC 3550's
//! interarrival jitter over the forward transit times (B's receive time minus A's send time, whose
//! clock offset cancels in the differences); reordering counts replies whose sequence number is
//! below one already received (RFC 4737's "reordered" singleton); one-way delays are given only when
//! both ends reported synchronised clocks, and are marked unsynchronised otherwise, never guessed.

use serde::{Deserialize, Serialize};

use crate::ProtoError;
use crate::frame::Framed;

/// Version of the probe conversation and packets spoken by this build.
pub const PROBE_VERSION: u16 = 1;
/// Bytes of a probe's header: the smallest probe.
pub const HEADER_LEN: usize = 64;
/// Largest probe (a jumbo frame's UDP payload over IPv4).
pub const MAX_SIZE: usize = 8972;
/// Shortest interval between probes (1,000 per second).
pub const MIN_INTERVAL_NS: u64 = 1_000_000;
/// Most probes in one session (one an ms for an hour).
pub const MAX_COUNT: u64 = 3_600_000;
/// Longest packet train (`train`).
pub const MAX_TRAIN: u32 = 64;
/// Replies a reflector sends beyond `count` (duplicates the path made, a retry).
pub const REPLY_MARGIN: u64 = 64;

const MAGIC: &[u8; 4] = b"LHPB";
const FLAG_REPLY: u8 = 1;
const FLAG_SYNCED: u8 = 2;

/// The session id: 16 random bytes from the server.
pub type SessionId = [u8; 16];

/// One message of the probe stream's control connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProbeMessage {
    /// A asks for a session.
    ProbeHello {
        /// [`PROBE_VERSION`].
        version: u16,
        /// Time between probes, ns (at least [`MIN_INTERVAL_NS`]).
        interval_ns: u64,
        /// Bytes of each probe ([`HEADER_LEN`] ..= [`MAX_SIZE`]).
        size: u32,
        /// How many probes (1 ..= [`MAX_COUNT`]).
        count: u64,
        /// Whether A's clock says it is synchronised.
        synced: bool,
        /// Probes A sends back to back every `interval_ns` (a packet train, for `--pace auto`'s
        /// bottleneck estimate); 1 for a steady stream.
        #[serde(default = "one", skip_serializing_if = "is_one")]
        train: u32,
    },
    /// B accepts: the UDP port to probe and the session's id.
    ProbeAccept {
        /// B's UDP port for this session.
        udp_port: u16,
        /// 32 hex digits.
        session: String,
        /// Whether B's clock says it is synchronised.
        synced: bool,
    },
    /// A has sent every probe and waited for the last replies.
    ProbeStop,
    /// B's side of the session.
    ProbeDone {
        /// Valid probes B received (duplicates included).
        received: u64,
        /// Of those, probes whose sequence number B had already seen.
        duplicates: u64,
        /// Datagrams B dropped: not this session's, from another address, or over the limit.
        refused: u64,
    },
    /// Fatal: the reason.
    Error {
        /// One line.
        message: String,
    },
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl ProbeMessage {
    /// Parses and validates one message.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ProtoError> {
        let m: ProbeMessage =
            serde_json::from_slice(bytes).map_err(|e| ProtoError::BadMessage(e.to_string()))?;
        match &m {
            ProbeMessage::ProbeHello {
                interval_ns,
                size,
                count,
                train,
                ..
            } => {
                if !(1..=MAX_TRAIN).contains(train) {
                    return Err(ProtoError::Invalid(format!(
                        "probe train of {train} is outside 1..={MAX_TRAIN} probes"
                    )));
                }
                if *interval_ns < MIN_INTERVAL_NS {
                    return Err(ProtoError::Invalid(format!(
                        "probe interval {interval_ns} ns is below the {MIN_INTERVAL_NS} ns minimum"
                    )));
                }
                if !(HEADER_LEN..=MAX_SIZE).contains(&(*size as usize)) {
                    return Err(ProtoError::Invalid(format!(
                        "probe size {size} is outside {HEADER_LEN}..={MAX_SIZE} bytes"
                    )));
                }
                if !(1..=MAX_COUNT).contains(count) {
                    return Err(ProtoError::Invalid(format!(
                        "probe count {count} is outside 1..={MAX_COUNT}"
                    )));
                }
            }
            ProbeMessage::ProbeAccept { session, .. } => {
                parse_session(session)?;
            }
            ProbeMessage::Error { message } if message.len() > 4096 => {
                return Err(ProtoError::Invalid(
                    "error message longer than 4096 bytes".into(),
                ));
            }
            _ => {}
        }
        Ok(m)
    }
}

impl Framed for ProbeMessage {
    type Error = ProtoError;

    fn from_json(bytes: &[u8]) -> Result<Self, ProtoError> {
        ProbeMessage::from_json(bytes)
    }

    fn kind(&self) -> &'static str {
        match self {
            ProbeMessage::ProbeHello { .. } => "probe_hello",
            ProbeMessage::ProbeAccept { .. } => "probe_accept",
            ProbeMessage::ProbeStop => "probe_stop",
            ProbeMessage::ProbeDone { .. } => "probe_done",
            ProbeMessage::Error { .. } => "error",
        }
    }

    fn peer_error(&self) -> Option<&str> {
        match self {
            ProbeMessage::Error { message } => Some(message),
            _ => None,
        }
    }
}

/// The session id as 32 hex digits.
pub fn session_hex(s: &SessionId) -> String {
    s.iter().map(|b| format!("{b:02x}")).collect()
}

/// The session id of 32 hex digits.
pub fn parse_session(hex: &str) -> Result<SessionId, ProtoError> {
    let bad = || ProtoError::Invalid("probe session is not 32 hex digits".into());
    if hex.len() != 32 || !hex.is_ascii() {
        return Err(bad());
    }
    let mut s = [0; 16];
    for (i, b) in s.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(s)
}

/// A probe's header, as read from or written to a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// Whether it is B's reply.
    pub reply: bool,
    /// Whether B's clock is synchronised (replies).
    pub b_synced: bool,
    /// The session.
    pub session: SessionId,
    /// Sequence number, from 0.
    pub seq: u64,
    /// When A sent it, ns, A's clock.
    pub a_send_ns: u64,
    /// When B received it, ns, B's clock (replies).
    pub b_recv_ns: u64,
    /// When B sent the reply, ns, B's clock (replies).
    pub b_send_ns: u64,
    /// Probes B had taken when it replied (replies).
    pub b_seen: u64,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Probe {
    /// A's probe number `seq`, sent at `a_send_ns`.
    pub fn request(session: SessionId, seq: u64, a_send_ns: u64) -> Self {
        Self {
            reply: false,
            b_synced: false,
            session,
            seq,
            a_send_ns,
            b_recv_ns: 0,
            b_send_ns: 0,
            b_seen: 0,
        }
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` (at least that long); the rest
    /// of the datagram is left as it is (padding).
    pub fn write(&self, buf: &mut [u8]) {
        let b = &mut buf[..HEADER_LEN];
        b[..4].copy_from_slice(MAGIC);
        b[4] = PROBE_VERSION as u8;
        b[5] = (u8::from(self.reply) * FLAG_REPLY) | (u8::from(self.b_synced) * FLAG_SYNCED);
        b[6..8].fill(0);
        b[8..24].copy_from_slice(&self.session);
        for (at, v) in [
            (24, self.seq),
            (32, self.a_send_ns),
            (40, self.b_recv_ns),
            (48, self.b_send_ns),
            (56, self.b_seen),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_be_bytes());
        }
    }

    /// Reads a datagram's header; `None` unless it is a well-formed probe of this version.
    pub fn read(datagram: &[u8]) -> Option<Self> {
        if datagram.len() < HEADER_LEN
            || datagram.len() > MAX_SIZE
            || &datagram[..4] != MAGIC
            || u16::from(datagram[4]) != PROBE_VERSION
            || datagram[5] & !(FLAG_REPLY | FLAG_SYNCED) != 0
            || datagram[6..8] != [0, 0]
        {
            return None;
        }
        Some(Self {
            reply: datagram[5] & FLAG_REPLY != 0,
            b_synced: datagram[5] & FLAG_SYNCED != 0,
            session: datagram[8..24].try_into().expect("16 bytes"),
            seq: u64_at(datagram, 24),
            a_send_ns: u64_at(datagram, 32),
            b_recv_ns: u64_at(datagram, 40),
            b_send_ns: u64_at(datagram, 48),
            b_seen: u64_at(datagram, 56),
        })
    }
}

/// B's side of one session: which datagrams it answers, and how.
#[derive(Debug, Clone)]
pub struct Reflector {
    session: SessionId,
    size: usize,
    count: u64,
    synced: bool,
    received: u64,
    duplicates: u64,
    refused: u64,
    /// Sequence numbers seen (one bit each, `count` bits).
    seen: Vec<u64>,
}

impl Reflector {
    /// The reflector of a session agreed in a [`ProbeMessage::ProbeHello`] (already validated).
    pub fn new(session: SessionId, size: u32, count: u64, synced: bool) -> Self {
        Self {
            session,
            size: size as usize,
            count,
            synced,
            received: 0,
            duplicates: 0,
            refused: 0,
            seen: vec![0; count.div_ceil(64) as usize],
        }
    }

    /// A datagram of `len` bytes in `buf` arrived at `now_ns` (B's clock) from the control
    /// connection's own address (`from_peer`; the caller checks it). Returns the length of the
    /// reply written in place into `buf` (never longer than what came), or `None`: not this
    /// session's, not a request, from another address, out of range, or over the reply budget.
    /// The caller stamps the send time with [`Reflector::stamp`] just before sending.
    pub fn reflect(
        &mut self,
        buf: &mut [u8],
        len: usize,
        from_peer: bool,
        now_ns: u64,
    ) -> Option<usize> {
        let Some(mut p) = Probe::read(&buf[..len]) else {
            self.refused += 1;
            return None;
        };
        if !from_peer
            || p.reply
            || p.session != self.session
            || len > self.size
            || p.seq >= self.count
            || self.received >= self.count + REPLY_MARGIN
        {
            self.refused += 1;
            return None;
        }
        self.received += 1;
        let (word, bit) = ((p.seq / 64) as usize, p.seq % 64);
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
        }
        self.seen[word] |= 1 << bit;
        p.reply = true;
        p.b_synced = self.synced;
        p.b_recv_ns = now_ns;
        p.b_send_ns = now_ns;
        p.b_seen = self.received;
        p.write(buf);
        Some(len)
    }

    /// Stamps a reply's send time (B's clock) just before it goes.
    pub fn stamp(buf: &mut [u8], now_ns: u64) {
        buf[48..56].copy_from_slice(&now_ns.to_be_bytes());
    }

    /// The session's end, for [`ProbeMessage::ProbeDone`].
    pub fn done(&self) -> ProbeMessage {
        ProbeMessage::ProbeDone {
            received: self.received,
            duplicates: self.duplicates,
            refused: self.refused,
        }
    }
}

/// Percentiles of a set of durations, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min_ns: u64,
    /// Median.
    pub median_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl Spread {
    fn of(mut v: Vec<u64>) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        Some(Self {
            min_ns: v[0],
            median_ns: at(0.5),
            p90_ns: at(0.9),
            max_ns: v[v.len() - 1],
        })
    }
}

/// What a probe session measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// Probes sent.
    pub sent: u64,
    /// Distinct probes whose reply came back.
    pub received: u64,
    /// Probes that never came back (sent − received).
    pub lost: u64,
    /// `lost / sent`.
    pub loss: f64,
    /// Replies for a probe already answered.
    pub duplicates: u64,
    /// Replies whose sequence number was below one already received (RFC 4737).
    pub reordered: u64,
    /// Round-trip times.
    pub rtt: Option<Spread>,
    /// RFC 3550 interarrival jitter of the forward transit times, ns.
    pub jitter_ns: Option<u64>,
    /// Whether both clocks said they were synchronised, so the one-way delays mean something.
    pub synchronized: bool,
    /// One-way delay A → B (only when `synchronized`).
    pub forward: Option<Spread>,
    /// One-way delay B → A (only when `synchronized`).
    pub backward: Option<Spread>,
    /// Probes B said it received (duplicates included), from its [`ProbeMessage::ProbeDone`]:
    /// `sent − b_received` were lost on the way there.
    pub b_received: Option<u64>,
    /// Replies dropped as not this session's (wrong id, malformed, unknown sequence number).
    pub foreign: u64,
}

/// A's account of one session.
#[derive(Debug, Clone)]
pub struct ProbeStats {
    session: SessionId,
    count: u64,
    a_synced: bool,
    sent: u64,
    answered: Vec<u64>,
    received: u64,
    duplicates: u64,
    reordered: u64,
    foreign: u64,
    highest: Option<u64>,
    rtts: Vec<u64>,
    longest_rtt_ns: u64,
    forward: Vec<u64>,
    backward: Vec<u64>,
    b_synced: bool,
    /// The previous reply's forward transit (b_recv − a_send), for the jitter.
    last_transit: Option<i128>,
    /// RFC 3550's J, in ns × 16 (kept scaled to avoid rounding each step).
    jitter16: i128,
}

impl ProbeStats {
    /// A session of `count` probes; `a_synced`: whether A's clock says it is synchronised.
    pub fn new(session: SessionId, count: u64, a_synced: bool) -> Self {
        Self {
            session,
            count,
            a_synced,
            sent: 0,
            answered: vec![0; count.div_ceil(64) as usize],
            received: 0,
            duplicates: 0,
            reordered: 0,
            foreign: 0,
            highest: None,
            rtts: Vec::new(),
            longest_rtt_ns: 0,
            forward: Vec::new(),
            backward: Vec::new(),
            b_synced: true,
            last_transit: None,
            jitter16: 0,
        }
    }

    /// Writes probe number `seq` (the next to send) stamped `now_ns` into `buf` (`size` bytes,
    /// padding untouched) and counts it sent.
    pub fn next(&mut self, buf: &mut [u8], now_ns: u64) -> u64 {
        let seq = self.sent;
        Probe::request(self.session, seq, now_ns).write(buf);
        self.sent += 1;
        seq
    }

    /// Probes sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The longest round trip so far, ns (0 before any reply).
    pub fn longest_rtt_ns(&self) -> u64 {
        self.longest_rtt_ns
    }

    /// A datagram arrived at `now_ns` (A's clock) on the session's socket.
    pub fn reply(&mut self, datagram: &[u8], now_ns: u64) {
        let Some(p) = Probe::read(datagram) else {
            self.foreign += 1;
            return;
        };
        if !p.reply || p.session != self.session || p.seq >= self.sent.min(self.count) {
            self.foreign += 1;
            return;
        }
        let (word, bit) = ((p.seq / 64) as usize, p.seq % 64);
        if self.answered[word] & (1 << bit) != 0 {
            self.duplicates += 1;
            return;
        }
        self.answered[word] |= 1 << bit;
        self.received += 1;
        match self.highest {
            Some(h) if p.seq < h => self.reordered += 1,
            _ => self.highest = Some(p.seq),
        }
        let b_held = p.b_send_ns.saturating_sub(p.b_recv_ns);
        let rtt = now_ns.saturating_sub(p.a_send_ns).saturating_sub(b_held);
        self.longest_rtt_ns = self.longest_rtt_ns.max(rtt);
        self.rtts.push(rtt);
        let transit = i128::from(p.b_recv_ns) - i128::from(p.a_send_ns);
        if let Some(last) = self.last_transit {
            let d = (transit - last).abs();
            // J += (|D| − J) / 16, with J kept as 16·J.
            self.jitter16 += d - self.jitter16 / 16;
        }
        self.last_transit = Some(transit);
        self.b_synced &= p.b_synced;
        self.forward.push(p.b_recv_ns.saturating_sub(p.a_send_ns));
        self.backward.push(now_ns.saturating_sub(p.b_send_ns));
    }

    /// The summary, with B's [`ProbeMessage::ProbeDone`] count if it came.
    pub fn summary(&self, b_received: Option<u64>) -> ProbeSummary {
        let synchronized = self.a_synced && self.b_synced && self.received > 0;
        let lost = self.sent - self.received;
        ProbeSummary {
            sent: self.sent,
            received: self.received,
            lost,
            loss: if self.sent == 0 {
                0.0
            } else {
                lost as f64 / self.sent as f64
            },
            duplicates: self.duplicates,
            reordered: self.reordered,
            rtt: Spread::of(self.rtts.clone()),
            jitter_ns: (self.received > 1).then_some((self.jitter16 / 16) as u64),
            synchronized,
            forward: synchronized
                .then(|| Spread::of(self.forward.clone()))
                .flatten(),
            backward: synchronized
                .then(|| Spread::of(self.backward.clone()))
                .flatten(),
            b_received,
            foreign: self.foreign,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: SessionId = [7; 16];

    /// A reflects through B with these one-way delays (ns) per probe; B's clock is `offset` ahead.
    fn session(delays: &[(u64, u64)], offset: u64, synced: bool) -> ProbeSummary {
        let mut a = ProbeStats::new(S, delays.len() as u64, synced);
        let mut b = Reflector::new(S, 100, delays.len() as u64, synced);
        let mut t = 1_000_000_000_000;
        for &(fwd, back) in delays {
            let mut buf = [0u8; 100];
            a.next(&mut buf, t);
            let n = b
                .reflect(&mut buf, 100, true, t + fwd + offset)
                .expect("reflected");
            a.reply(&buf[..n], t + fwd + back);
            t += 10_000_000;
        }
        a.summary(None)
    }

    #[test]
    fn round_trip_and_one_way_delays_come_back_with_the_clocks_offset_cancelled_in_jitter() {
        let s = session(&[(60_000_000, 60_000_000); 10], 5_000_000_000, false);
        assert_eq!((s.sent, s.received, s.lost), (10, 10, 0));
        assert_eq!(s.rtt.unwrap().median_ns, 120_000_000);
        assert_eq!(s.jitter_ns, Some(0), "a 5 s clock offset is no jitter");
        assert!(
            !s.synchronized,
            "unsynchronised clocks give no one-way delay"
        );
        assert_eq!((s.forward, s.backward), (None, None));

        let s = session(&[(50_000_000, 70_000_000); 10], 0, true);
        assert!(s.synchronized);
        assert_eq!(s.forward.unwrap().median_ns, 50_000_000);
        assert_eq!(s.backward.unwrap().median_ns, 70_000_000);
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        // Forward transit alternating 10 and 12 ms: |D| = 2 ms each step after the first, and
        // J → 2 ms as J += (|D| − J)/16 converges.
        let delays: Vec<(u64, u64)> = (0..400)
            .map(|i| (if i % 2 == 0 { 10_000_000 } else { 12_000_000 }, 10_000_000))
            .collect();
        let j = session(&delays, 0, true).jitter_ns.unwrap();
        assert!((1_990_000..=2_000_000).contains(&j), "{j}");
        // After one step: J = 2 ms / 16.
        let j = session(&delays[..2], 0, true).jitter_ns.unwrap();
        assert_eq!(j, 125_000);
    }

    #[test]
    fn loss_duplicates_and_reordering_are_counted_apart() {
        let mut a = ProbeStats::new(S, 6, false);
        let mut b = Reflector::new(S, 64, 6, false);
        let mut replies = Vec::new();
        for seq in 0..6u64 {
            let mut buf = [0u8; 64];
            a.next(&mut buf, seq * 1000);
            let n = b.reflect(&mut buf, 64, true, seq * 1000 + 10).unwrap();
            replies.push(buf[..n].to_vec());
        }
        // 2 is lost, 4 arrives before 3, 5 comes twice.
        for seq in [0, 1, 4, 3, 5, 5] {
            a.reply(&replies[seq], 10_000);
        }
        let s = a.summary(Some(6));
        assert_eq!(
            (s.sent, s.received, s.lost, s.duplicates, s.reordered),
            (6, 5, 1, 1, 1)
        );
        assert!((s.loss - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(s.b_received, Some(6));
    }

    #[test]
    fn the_reflector_answers_only_its_session_from_its_peer_never_more_bytes_nor_too_many() {
        let mut b = Reflector::new(S, 128, 2, true);
        let mut req = [0u8; 128];
        Probe::request(S, 0, 1).write(&mut req);
        // From another address: refused.
        assert_eq!(b.reflect(&mut req.clone(), 128, false, 5), None);
        // Another session: refused.
        let mut other = [0u8; 128];
        Probe::request([8; 16], 0, 1).write(&mut other);
        assert_eq!(b.reflect(&mut other, 128, true, 5), None);
        // Larger than agreed: refused.
        let mut big = [0u8; 200];
        Probe::request(S, 0, 1).write(&mut big);
        assert_eq!(b.reflect(&mut big, 200, true, 5), None);
        // A reply sent back at it: refused (no ping-pong between two reflectors).
        let mut r = req;
        assert_eq!(b.reflect(&mut r, 100, true, 5), Some(100));
        assert_eq!(b.reflect(&mut r, 100, true, 6), None);
        // A sequence number beyond the count: refused.
        let mut late = [0u8; 64];
        Probe::request(S, 2, 1).write(&mut late);
        assert_eq!(b.reflect(&mut late, 64, true, 5), None);
        // Garbage.
        assert_eq!(b.reflect(&mut [0u8; 128], 128, true, 5), None);
        // The reply budget: count + REPLY_MARGIN replies at most, however often one probe repeats.
        let mut answered = 1;
        for _ in 0..1000 {
            let mut again = [0u8; 64];
            Probe::request(S, 1, 1).write(&mut again);
            answered += u64::from(b.reflect(&mut again, 64, true, 5).is_some());
        }
        assert_eq!(answered, 2 + REPLY_MARGIN);
        assert_eq!(
            b.done(),
            ProbeMessage::ProbeDone {
                received: 2 + REPLY_MARGIN,
                duplicates: REPLY_MARGIN,
                refused: 6 + 1000 - (1 + REPLY_MARGIN),
            }
        );
    }

    #[test]
    fn probes_round_trip_and_malformed_ones_are_refused() {
        let p = Probe {
            reply: true,
            b_synced: true,
            session: S,
            seq: 9,
            a_send_ns: 1,
            b_recv_ns: 2,
            b_send_ns: 3,
            b_seen: 4,
        };
        let mut buf = [0u8; 80];
        p.write(&mut buf);
        assert_eq!(Probe::read(&buf), Some(p));
        assert_eq!(Probe::read(&buf[..63]), None, "shorter than the header");
        let mut bad = buf;
        bad[5] = 0x80;
        assert_eq!(Probe::read(&bad), None, "unknown flags");
        let mut bad = buf;
        bad[4] = 2;
        assert_eq!(Probe::read(&bad), None, "another version");
    }

    #[test]
    fn control_messages_are_bounded() {
        let train = |interval: u64, size: u32, count: u64, train: u32| {
            ProbeMessage::from_json(
                serde_json::to_string(&ProbeMessage::ProbeHello {
                    version: 1,
                    interval_ns: interval,
                    size,
                    count,
                    synced: false,
                    train,
                })
                .unwrap()
                .as_bytes(),
            )
        };
        let hello = |interval: u64, size: u32, count: u64| train(interval, size, count, 1);
        assert!(hello(100_000_000, 100, 600).is_ok());
        assert!(
            train(1_000_000, 1472, 450, 50).is_ok(),
            "--pace auto's trains"
        );
        assert!(train(1_000_000, 1472, 450, 0).is_err(), "an empty train");
        assert!(train(1_000_000, 1472, 450, MAX_TRAIN + 1).is_err());
        let steady = ProbeMessage::from_json(
            br#"{"type":"probe_hello","version":1,"interval_ns":1000000,"size":64,"count":5,"synced":false}"#,
        )
        .unwrap();
        assert!(
            matches!(steady, ProbeMessage::ProbeHello { train: 1, .. }),
            "a hello from a build without trains"
        );
        assert!(!serde_json::to_string(&steady).unwrap().contains("train"));
        assert!(hello(1000, 100, 600).is_err(), "a million probes a second");
        assert!(
            hello(100_000_000, 10, 600).is_err(),
            "smaller than the header"
        );
        assert!(
            hello(100_000_000, 65_000, 600).is_err(),
            "larger than a datagram"
        );
        assert!(hello(100_000_000, 100, 0).is_err());
        assert!(hello(100_000_000, 100, MAX_COUNT + 1).is_err());
        assert!(
            ProbeMessage::from_json(
                br#"{"type":"probe_accept","udp_port":1,"session":"zz","synced":false}"#
            )
            .is_err()
        );
        assert_eq!(parse_session(&session_hex(&S)).unwrap(), S);
    }
}
