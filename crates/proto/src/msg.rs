//! Control messages and their validation.
//!
//! A test runs as this conversation on its control connection (C = client, S = server):
//!
//! ```text
//! C: Hello            S: Welcome{cookie, key_required} | Busy{running,cap} | Error
//! C: KeyProof         (only when the welcome says a key is required; before the parameters)
//! C: Ping ×k          S: Pong ×k           (the client measures the RTT)
//! C: Params           S: Accepted{plan}  | Error        (the server plans its own buffers)
//! C opens the data connections, each presenting the cookie and its stream index
//!                     S: StreamsReady{sockets}
//! C: Start            (both sides start their streams and interval clocks)
//!                     S: Interval ×n      (the server's samples of the streams it sends on)
//! C: Stop             (the client's clock ran out, or its byte budget is spent)
//!                     S: Results          (after its receivers saw end-of-stream)
//! C: Results          S: (closes)
//! ```
//!
//! Each side's part of it, phase by phase, is a state machine in [`crate::conversation`].
//!
//! Every message is checked by [`Message::from_json`] and every parameter by [`TestParams::validate`], so
//! the server can refuse bad input with a one-line reason before it allocates anything for the test.

use serde::{Deserialize, Serialize};

use crate::ProtoError;

/// Most parallel streams one test may ask for. iperf3 caps at 128 as "a sanity check"; long fat pipes at
/// 100 Gbit/s × 300 ms need more than that to stay under the 1 GiB window of one TCP stream.
pub const MAX_STREAMS: u32 = 1024;
/// Frame bytes a test's control connection accepts per data connection on top of
/// [`crate::frame::MAX_FRAME_LEN`], once the test is admitted: the messages that grow with the streams
/// (stream set-up, interval samples, results) take about 300 bytes per connection.
pub const FRAME_BYTES_PER_CONNECTION: usize = 1024;
/// Longest test: one day, like iperf3.
pub const MAX_DURATION_NS: u64 = 86_400 * 1_000_000_000;
/// Largest write (`-l`): 64 MiB.
pub const MAX_WRITE_LEN: u32 = 64 << 20;
/// Shortest reporting interval: 10 ms (finer sampling costs more than it tells).
pub const MIN_INTERVAL_NS: u64 = 10_000_000;
/// Longest reporting interval: one hour.
pub const MAX_INTERVAL_NS: u64 = 3_600 * 1_000_000_000;
/// Longest omit period (`-O`): ten minutes. Slow start on the longest paths (500 ms RTT, 100 Gbit/s)
/// takes well under a minute; more than this is a typo, not a measurement plan.
pub const MAX_OMIT_NS: u64 = 600 * 1_000_000_000;
/// Longest congestion-control name the kernel accepts (TCP_CA_NAME_MAX − 1).
pub const MAX_CC_NAME: usize = 15;
/// Largest RTT a client may report (`rtt_ns`): 10 s. Geostationary satellite paths are ~0.6 s; beyond
/// 10 s the figure is not a path's RTT, and it feeds the buffer plan (BDP = rate × RTT).
pub const MAX_RTT_NS: u64 = 10 * 1_000_000_000;
/// Largest target or pacing rate: 10 Tbit/s, beyond any single host's interfaces today.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;
/// Smallest pacing rate (`--pace`): 1 kbit/s. Slower than this a stream moves less than one segment in
/// ten seconds, which the server's stall timeout would take for a dead test.
pub const MIN_PACE_BPS: u64 = 1_000;
/// Largest byte count (`-n`): 1 PiB per direction. (The server's maximum test duration ends a
/// byte-count test that takes longer.)
pub const MAX_BYTES: u64 = 1 << 50;
/// Largest fixed window (`-w`): 2 GiB.
pub const MAX_WINDOW: u64 = 1 << 31;
/// Largest UDP datagram payload (`-l` with `-u`): 65,535 minus the IPv4 and UDP headers.
pub const MAX_DATAGRAM_LEN: u32 = 65_507;
/// A UDP test's `write_len` in a client's request that asks the client to pick the datagram length:
/// the control connection's MSS, as iperf3 does (the largest datagram the path carries without IP
/// fragmentation, assuming the data takes the control's path). The client fills it in before it
/// sends the parameters, so a server never accepts it ([`TestParams::validate`]).
pub const AUTO_DATAGRAM_LEN: u32 = 0;
/// Most datagrams one UDP pacing step sends back to back (`--burst`), as iperf3 allows.
pub const MAX_BURST: u32 = 1000;

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// First message of the client.
    Hello {
        /// Client software version, e.g. "longhaul 0.1.0".
        software: String,
    },
    /// The server accepts the test and hands out its cookie.
    Welcome {
        /// Server software version.
        software: String,
        /// Hex-encoded test cookie that data connections present.
        cookie: String,
        /// The server serves tests only to clients that hold its key (`server --require-key`):
        /// send [`Message::KeyProof`] before the parameters. Absent: no key needed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        key_required: bool,
    },
    /// The client's proof that it holds the server's key, made over this session's cookie
    /// (`longhaul_transfer::auth::Key::test_proof`), when the welcome asked for one.
    KeyProof {
        /// 64 lowercase hex digits.
        proof: String,
    },
    /// The server is at its cap of concurrent tests.
    Busy {
        /// Tests running now.
        running: u32,
        /// The server's cap.
        cap: u32,
    },
    /// RTT probe (client → server).
    Ping {
        /// Sequence number echoed in the pong.
        seq: u32,
    },
    /// RTT probe answer.
    Pong {
        /// The ping's sequence number.
        seq: u32,
    },
    /// The test the client wants.
    Params(TestParams),
    /// The server's plan for its own sockets.
    Accepted(SidePlan),
    /// All data connections arrived and were set up; the server's view of each socket.
    StreamsReady {
        /// One entry per data connection, in stream order.
        sockets: Vec<SocketSetup>,
    },
    /// Start sending now.
    Start,
    /// One interval of the server's streams (sent by the server on the streams it sends on).
    Interval(IntervalSample),
    /// The client's clock ran out: stop sending and report.
    Stop,
    /// End-of-test totals of one side.
    Results(SideResults),
    /// A fatal error; the sender closes the connection after it.
    Error {
        /// One-line reason.
        message: String,
    },
}

impl Message {
    /// Parses and validates one message from JSON bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ProtoError> {
        let msg: Message =
            serde_json::from_slice(bytes).map_err(|e| ProtoError::BadMessage(e.to_string()))?;
        msg.validate()?;
        Ok(msg)
    }

    /// Short name of the message kind, for "unexpected X" errors and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello { .. } => "hello",
            Message::Welcome { .. } => "welcome",
            Message::Busy { .. } => "busy",
            Message::Ping { .. } => "ping",
            Message::Pong { .. } => "pong",
            Message::KeyProof { .. } => "key_proof",
            Message::Params(_) => "params",
            Message::Accepted(_) => "accepted",
            Message::StreamsReady { .. } => "streams_ready",
            Message::Start => "start",
            Message::Interval(_) => "interval",
            Message::Stop => "stop",
            Message::Results(_) => "results",
            Message::Error { .. } => "error",
        }
    }

    fn validate(&self) -> Result<(), ProtoError> {
        let too_long = |what: &str, s: &str| {
            if s.len() > 1024 {
                Err(ProtoError::Invalid(format!(
                    "{what} longer than 1024 bytes"
                )))
            } else {
                Ok(())
            }
        };
        match self {
            Message::Hello { software } | Message::Welcome { software, .. } => {
                too_long("software version", software)
            }
            Message::Error { message } => too_long("error message", message),
            Message::KeyProof { proof }
                if proof.len() != 64
                    || !proof
                        .bytes()
                        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                Err(ProtoError::Invalid(
                    "key proof must be 64 lowercase hex digits".into(),
                ))
            }
            Message::Params(p) => p.validate(),
            Message::StreamsReady { sockets } if sockets.len() > 2 * MAX_STREAMS as usize => {
                Err(ProtoError::Invalid("too many sockets".into()))
            }
            Message::Interval(s) if s.streams.len() > 2 * MAX_STREAMS as usize => {
                Err(ProtoError::Invalid("too many streams in interval".into()))
            }
            Message::Results(r) if r.streams.len() > 2 * MAX_STREAMS as usize => {
                Err(ProtoError::Invalid("too many streams in results".into()))
            }
            Message::Results(SideResults {
                pace_auto: Some(g), ..
            }) if g.timeline.len() > crate::auto_pace::MAX_TIMELINE => Err(ProtoError::Invalid(
                "more --pace auto rounds in results than a report keeps".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// Which way the data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, server receives (the default, like iperf3).
    #[default]
    Forward,
    /// Server sends, client receives (`-R`).
    Reverse,
    /// Both at once, on separate connections (`--bidir`).
    Bidir,
}

impl Direction {
    /// Number of data connections for `streams` streams in this direction.
    pub fn connections(self, streams: u32) -> u32 {
        match self {
            Direction::Bidir => streams * 2,
            _ => streams,
        }
    }

    /// Whether the client sends on data connection `index` (bidir: the first half is client → server).
    pub fn client_sends(self, index: u32, streams: u32) -> bool {
        match self {
            Direction::Forward => true,
            Direction::Reverse => false,
            Direction::Bidir => index < streams,
        }
    }
}

/// When the test ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndCondition {
    /// After this many nanoseconds (`-t`).
    Time {
        /// Duration in ns.
        ns: u64,
    },
    /// After this many bytes in total per direction (`-n`), split across the streams.
    Bytes {
        /// Bytes to send per direction.
        bytes: u64,
    },
}

/// How socket buffers are sized (`-w`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowRequest {
    /// Size from the measured RTT and the target rate (the default).
    Auto,
    /// The user asked for this window per stream, in bytes.
    Fixed {
        /// Requested window in bytes.
        bytes: u64,
    },
}

/// The parameters of one test, sent by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestParams {
    /// Parallel streams per direction (`-P`).
    pub streams: u32,
    /// When to stop.
    pub end: EndCondition,
    /// Reporting interval in ns; 0 turns interval reports off.
    pub interval_ns: u64,
    /// Direction of the data.
    pub direction: Direction,
    /// Congestion control to apply on both ends (`-C`); `None` keeps each kernel's default.
    pub congestion: Option<String>,
    /// Window sizing.
    pub window: WindowRequest,
    /// Target rate for window sizing, all streams together, bit/s.
    pub target_rate_bps: u64,
    /// Total pacing rate split across the sending streams, bit/s (`--pace`).
    pub pace_total_bps: Option<u64>,
    /// `--pace auto`: each sending side's governor paces its streams from the bottleneck the
    /// client's packet trains found (absent: not asked, also from older clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_auto: Option<PaceAuto>,
    /// `--dedicated`: the path carries nothing else and the client opens at `pace_total_bps` from
    /// the first round trip ([`crate::fast_start`]); each side sets its buffers before the
    /// handshake instead of leaving them to autotuning (absent: false, also from older clients).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast_start: bool,
    /// Bytes per write call (`-l`).
    pub write_len: u32,
    /// Use zero-copy send (`-Z`).
    pub zerocopy: bool,
    /// RTT the client measured on the control connection, ns.
    pub rtt_ns: u64,
    /// Omit period (`-O`), ns: the test runs `omit_ns` + the `-t` duration, and each side leaves the
    /// first `omit_ns` of its own clock out of its end-of-test totals (intervals in it are reported
    /// flagged `omitted`). 0 (the default, also when an older client leaves it out) omits nothing.
    /// Only with [`EndCondition::Time`].
    #[serde(default)]
    pub omit_ns: u64,
    /// A UDP test (`-u`): the data connections are UDP flows of `write_len`-byte datagrams. Absent:
    /// TCP (also from peers that predate UDP tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpParams>,
    /// What carries the data connections (`--transport`). Absent: TCP (also from older peers).
    #[serde(default, skip_serializing_if = "Transport::is_tcp")]
    pub transport: Transport,
    /// Options both ends set on every data socket (iperf3's `-M`, `-N`, `-S`,
    /// `--repeating-payload`, `--dont-fragment`). Absent: none (also from older peers).
    #[serde(default, skip_serializing_if = "SocketFlags::is_unset")]
    pub sockets: SocketFlags,
}

/// Options for every data socket of a test, set by both ends (iperf3's client flags of the same
/// meaning); each is read back from the sockets into the report ([`SocketSetup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SocketFlags {
    /// `TCP_MAXSEG` (`-M`): the largest segment each end sends and advertises, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    /// `TCP_NODELAY` (`-N`): Nagle's algorithm off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodelay: bool,
    /// The IP TOS byte (IPv6: traffic class) of every data packet (`-S`, `--dscp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// Payload of repeating `0123456789` instead of pseudo-random bytes (`--repeating-payload`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeating_payload: bool,
    /// UDP over IPv4: the DF bit set, never fragmented (`--dont-fragment`; TCP always sets it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dont_fragment: bool,
}

/// The smallest `-M` Linux takes (`TCP_MIN_MSS`).
pub const MIN_MSS: u32 = 88;
/// The largest `-M` Linux takes (`MAX_TCP_WINDOW`).
pub const MAX_MSS: u32 = 32_767;

impl SocketFlags {
    /// Whether none is set.
    pub fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

/// What carries a test's or a transfer's data (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The kernel's TCP, one connection per stream (the default).
    #[default]
    Tcp,
    /// QUIC over UDP in user space, one connection per stream: reliable, encrypted, with its own
    /// congestion control ([`QUIC_CONTROLLERS`]) and windows sized from the path.
    Quic,
}

impl Transport {
    /// Whether this is TCP.
    pub fn is_tcp(&self) -> bool {
        *self == Transport::Tcp
    }
}

/// The congestion controllers of the QUIC transport (`-C` with `--transport udp`).
pub const QUIC_CONTROLLERS: [&str; 4] = ["cubic", "newreno", "bbr", "udt"];

/// How a UDP test sends (`-u`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpParams {
    /// Rate of each sending stream, bit/s of datagram payload (iperf3's `-b`); 0: as fast as the
    /// host can send.
    pub rate_bps: u64,
    /// Datagrams sent back to back at each pacing step (iperf3's `-b RATE/BURST`); 0: the sender
    /// picks the smallest burst its timer can keep up with.
    pub burst: u32,
    /// 64-bit datagram counters (`--udp-counters-64bit`).
    pub counters_64bit: bool,
    /// No UDP segmentation or receive offload (`--no-gso`): one datagram per message on both
    /// ends, still batched per system call. Absent on the wire: offload on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_offload: bool,
}

impl UdpParams {
    /// Bytes of the datagram header.
    pub fn header_len(&self) -> usize {
        if self.counters_64bit {
            crate::udp::HEADER_LEN_64
        } else {
            crate::udp::HEADER_LEN_32
        }
    }
}

impl TestParams {
    /// The largest control frame either side accepts once this test is admitted (the server has
    /// accepted its parameters): [`crate::frame::MAX_FRAME_LEN`] plus [`FRAME_BYTES_PER_CONNECTION`]
    /// for each data connection, so a test of many streams can report them all (at most about
    /// 2.1 MiB, for 1024 streams both ways). Before admission, frames stay under the handshake's
    /// 64 KiB.
    pub fn frame_limit(&self) -> usize {
        let connections = self.direction.connections(self.streams.min(MAX_STREAMS)) as usize;
        crate::frame::MAX_FRAME_LEN + connections * FRAME_BYTES_PER_CONNECTION
    }

    /// Checks every field against the limits above; the error names the field.
    ///
    /// The ranges (every number a client sends): streams 1..=[`MAX_STREAMS`]; duration 1 ns..=one day
    /// ([`MAX_DURATION_NS`]) or bytes 1..=[`MAX_BYTES`]; interval 0 or [`MIN_INTERVAL_NS`]..=
    /// [`MAX_INTERVAL_NS`]; omit 0..=[`MAX_OMIT_NS`]; fixed window 1..=[`MAX_WINDOW`]; write length
    /// 1..=[`MAX_WRITE_LEN`]; target rate 1..=[`MAX_RATE_BPS`]; pacing [`MIN_PACE_BPS`]..=
    /// [`MAX_RATE_BPS`]; rtt 0..=[`MAX_RTT_NS`]. A server may enforce tighter limits of its own.
    pub fn validate(&self) -> Result<(), ProtoError> {
        let bad = |m: String| Err(ProtoError::Invalid(m));
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return bad(format!(
                "streams must be 1..={MAX_STREAMS}, got {}",
                self.streams
            ));
        }
        match self.end {
            EndCondition::Time { ns } if ns == 0 || ns > MAX_DURATION_NS => {
                return bad(format!(
                    "duration must be >0 and at most 86400 s, got {ns} ns"
                ));
            }
            EndCondition::Bytes { bytes } if bytes == 0 || bytes > MAX_BYTES => {
                return bad(format!("byte count must be 1..=1 PiB (2^50), got {bytes}"));
            }
            _ => {}
        }
        if self.interval_ns != 0 && !(MIN_INTERVAL_NS..=MAX_INTERVAL_NS).contains(&self.interval_ns)
        {
            return bad(format!(
                "interval must be 0 (off) or 0.01..=3600 s, got {} ns",
                self.interval_ns
            ));
        }
        if self.omit_ns > MAX_OMIT_NS {
            return bad(format!(
                "omit period must be at most 600 s, got {} ns",
                self.omit_ns
            ));
        }
        // A byte budget has no time boundary to omit at: the bytes sent before it would still be owed,
        // so "the first N seconds" of a byte-count test is not well defined. Refused rather than guessed.
        if self.omit_ns > 0 && matches!(self.end, EndCondition::Bytes { .. }) {
            return bad("omit period (-O) cannot be used with a byte count (-n)".into());
        }
        if let Some(cc) = &self.congestion {
            validate_cc_name(cc)?;
        }
        if let WindowRequest::Fixed { bytes } = self.window
            && (bytes == 0 || bytes > MAX_WINDOW)
        {
            return bad(format!("window must be 1 B..=2 GiB, got {bytes}"));
        }
        if self.write_len == 0 || self.write_len > MAX_WRITE_LEN {
            return bad(format!(
                "write length must be 1..=64 MiB, got {}",
                self.write_len
            ));
        }
        if self.target_rate_bps == 0 || self.target_rate_bps > MAX_RATE_BPS {
            return bad(format!(
                "target rate must be 1 bit/s..=10 Tbit/s, got {} bit/s",
                self.target_rate_bps
            ));
        }
        if let Some(pace) = self.pace_total_bps
            && !(MIN_PACE_BPS..=MAX_RATE_BPS).contains(&pace)
        {
            return bad(format!(
                "pacing rate must be 1 kbit/s..=10 Tbit/s, got {pace} bit/s"
            ));
        }
        if let Some(p) = self.pace_auto {
            if !(MIN_PACE_BPS..=MAX_RATE_BPS).contains(&p.bottleneck_bps) {
                return bad(format!(
                    "--pace auto's bottleneck must be 1 kbit/s..=10 Tbit/s, got {} bit/s",
                    p.bottleneck_bps
                ));
            }
            if self.pace_total_bps.is_some() {
                return bad("--pace is either auto or a rate, not both".into());
            }
        }
        if self.fast_start && self.pace_total_bps.is_none() {
            return bad("a fast start (--dedicated) opens at a known rate: --pace RATE".into());
        }
        if self.rtt_ns > MAX_RTT_NS {
            return bad(format!("rtt must be at most 10 s, got {} ns", self.rtt_ns));
        }
        if let Some(udp) = &self.udp {
            self.validate_udp(udp)?;
        }
        if self.transport == Transport::Quic {
            self.validate_quic()?;
        }
        if let Some(mss) = self.sockets.mss {
            if !(MIN_MSS..=MAX_MSS).contains(&mss) {
                return bad(format!(
                    "MSS (-M) must be {MIN_MSS}..={MAX_MSS} bytes, got {mss}"
                ));
            }
            if self.is_udp() || self.transport == Transport::Quic {
                return bad("the MSS (-M) is TCP's: not with -u or --transport udp".into());
            }
        }
        Ok(())
    }

    fn validate_quic(&self) -> Result<(), ProtoError> {
        let bad = |m: &str| Err(ProtoError::Invalid(m.into()));
        if self.udp.is_some() {
            return bad(
                "-u sends unreliable datagrams; --transport udp carries reliable streams: \
                 one or the other",
            );
        }
        if let Some(cc) = &self.congestion
            && !QUIC_CONTROLLERS.contains(&cc.as_str())
        {
            return Err(ProtoError::Invalid(format!(
                "congestion control {cc:?} is not one of the UDP transport's: {}",
                QUIC_CONTROLLERS.join(", ")
            )));
        }
        if self.zerocopy {
            return bad("zero-copy (-Z) sends from the kernel's TCP; not with --transport udp");
        }
        if self.fast_start {
            return bad("--dedicated opens a TCP route's window; not with --transport udp");
        }
        if self.pace_auto.is_some() {
            return bad(
                "--pace auto governs TCP sockets' pacing; with --transport udp give --pace RATE",
            );
        }
        if !self.sockets.is_unset() {
            return bad(
                "-M, -N, -S/--dscp, --repeating-payload and --dont-fragment set the kernel's TCP \
                 and UDP sockets; not with --transport udp",
            );
        }
        Ok(())
    }

    fn validate_udp(&self, udp: &UdpParams) -> Result<(), ProtoError> {
        let bad = |m: String| Err(ProtoError::Invalid(m));
        let header = udp.header_len() as u32;
        if !(header..=MAX_DATAGRAM_LEN).contains(&self.write_len) {
            return bad(format!(
                "UDP datagram length (-l) must be {header}..={MAX_DATAGRAM_LEN} bytes, got {}",
                self.write_len
            ));
        }
        if udp.rate_bps != 0 && !(MIN_PACE_BPS..=MAX_RATE_BPS).contains(&udp.rate_bps) {
            return bad(format!(
                "UDP rate (-b) must be 0 (unlimited) or 1 kbit/s..=10 Tbit/s, got {} bit/s",
                udp.rate_bps
            ));
        }
        if udp.burst > MAX_BURST {
            return bad(format!(
                "UDP burst must be at most {MAX_BURST} datagrams, got {}",
                udp.burst
            ));
        }
        if self.congestion.is_some() {
            return bad("congestion control (-C) applies to TCP tests only, not UDP (-u)".into());
        }
        if self.pace_total_bps.is_some() || self.pace_auto.is_some() {
            return bad("--pace applies to TCP tests; a UDP test (-u) is paced by -b".into());
        }
        if self.zerocopy {
            return bad("zero-copy (-Z) applies to TCP tests only, not UDP (-u)".into());
        }
        Ok(())
    }

    /// [`Self::validate`] for a client's own request, in which a UDP test may leave the datagram
    /// length to the client ([`AUTO_DATAGRAM_LEN`]).
    pub fn validate_request(&self) -> Result<(), ProtoError> {
        if self.is_udp() && self.write_len == AUTO_DATAGRAM_LEN {
            let mut p = self.clone();
            p.write_len = p.udp.map_or(1, |u| u.header_len() as u32);
            return p.validate();
        }
        self.validate()
    }

    /// Whether this is a UDP test.
    pub fn is_udp(&self) -> bool {
        self.udp.is_some()
    }
}

/// Checks a congestion-control name is plausible before it reaches the kernel.
pub fn validate_cc_name(cc: &str) -> Result<(), ProtoError> {
    if cc.is_empty()
        || cc.len() > MAX_CC_NAME
        || !cc
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(ProtoError::Invalid(format!(
            "congestion control name {cc:?} is not valid (1-{MAX_CC_NAME} of [a-z0-9_-])"
        )));
    }
    Ok(())
}

/// One side's plan for its socket buffers, as computed by [`crate::window::plan`] and reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SidePlan {
    /// The window plan and what limits it.
    pub window: crate::window::WindowPlan,
    /// Pacing applied per sending stream on this side, bytes/s.
    pub pacing_per_stream: Vec<u64>,
    /// Whether this side may exceed the kernel caps (CAP_NET_ADMIN: SO_*BUFFORCE).
    pub privileged: bool,
}

/// How one data socket was set up, as the kernel reports it after setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketSetup {
    /// Stream index.
    pub stream: u32,
    /// Whether this side sends on it.
    pub sender: bool,
    /// Congestion control the kernel applied (read back, not assumed).
    pub congestion: String,
    /// Maximum segment size.
    pub mss: u32,
    /// Send buffer as the kernel reports it (SO_SNDBUF, already doubled by Linux).
    pub sndbuf: u64,
    /// Receive buffer as the kernel reports it (SO_RCVBUF).
    pub rcvbuf: u64,
    /// Pacing cap applied (bytes/s), if any.
    pub pacing: Option<u64>,
    /// Local and remote socket addresses.
    pub local: String,
    /// Remote address.
    pub remote: String,
    /// The IP TOS byte (IPv6: traffic class) the kernel puts on its packets (read back).
    #[serde(default)]
    pub tos: u8,
    /// Whether `TCP_NODELAY` is set (read back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nodelay: bool,
    /// Whether the DF bit is forced on (`IP_PMTUDISC_DO`, read back).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dont_fragment: bool,
}

/// One reporting interval of one side's streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// Interval number, from 0.
    pub index: u32,
    /// One entry per stream this side sends on.
    pub streams: Vec<crate::interval::StreamInterval>,
}

/// CPU used by one side during a test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct CpuUse {
    /// User time, seconds.
    pub user_s: f64,
    /// System time, seconds.
    pub system_s: f64,
    /// Wall time the CPU was measured over, seconds.
    pub wall_s: f64,
}

impl CpuUse {
    /// Percent of one core, as iperf3 reports it (may exceed 100 with several threads).
    pub fn percent(&self) -> (f64, f64, f64) {
        if self.wall_s <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let u = 100.0 * self.user_s / self.wall_s;
        let s = 100.0 * self.system_s / self.wall_s;
        (u + s, u, s)
    }
}

/// `--pace auto`'s start, as the client sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaceAuto {
    /// The bottleneck the packet trains found, bit/s of IP packets
    /// ([`MIN_PACE_BPS`]..=[`MAX_RATE_BPS`]).
    pub bottleneck_bps: u64,
}

/// End-of-test totals of one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideResults {
    /// CPU this side spent on the test.
    pub cpu: CpuUse,
    /// One entry per data connection.
    pub streams: Vec<crate::interval::StreamTotals>,
    /// What `--pace auto`'s governor did, on a side that sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_auto: Option<crate::auto_pace::GovernorSummary>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn params() -> TestParams {
        TestParams {
            streams: 4,
            end: EndCondition::Time { ns: 10_000_000_000 },
            interval_ns: 1_000_000_000,
            direction: Direction::Forward,
            congestion: Some("cubic".into()),
            window: WindowRequest::Auto,
            target_rate_bps: 10_000_000_000,
            pace_total_bps: None,
            pace_auto: None,
            fast_start: false,
            write_len: 128 * 1024,
            zerocopy: false,
            rtt_ns: 120_000_000,
            omit_ns: 0,
            udp: None,
            transport: Transport::Tcp,
            sockets: SocketFlags::default(),
        }
    }

    fn udp_params() -> TestParams {
        TestParams {
            congestion: None,
            write_len: 1448,
            udp: Some(UdpParams {
                rate_bps: 1_000_000,
                burst: 0,
                counters_64bit: false,
                no_offload: false,
            }),
            ..params()
        }
    }

    /// iperf3's socket flags: an MSS within Linux's bounds, on TCP only; on the wire only when set.
    #[test]
    fn socket_flags_are_checked_and_sent_only_when_set() {
        let with = |sockets: SocketFlags| TestParams {
            sockets,
            ..params()
        };
        let mss = |m| SocketFlags {
            mss: Some(m),
            ..SocketFlags::default()
        };
        with(mss(MIN_MSS)).validate().unwrap();
        with(mss(MAX_MSS)).validate().unwrap();
        for m in [0, MIN_MSS - 1, MAX_MSS + 1] {
            let e = with(mss(m)).validate().unwrap_err().to_string();
            assert!(e.contains("MSS (-M)"), "{e}");
        }
        let e = TestParams {
            sockets: mss(1000),
            ..udp_params()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("TCP's"), "{e}");
        let p = with(SocketFlags {
            nodelay: true,
            tos: Some(0x28),
            ..SocketFlags::default()
        });
        let wire = serde_json::to_string(&p).unwrap();
        assert!(
            wire.contains(r#""sockets":{"nodelay":true,"tos":40}"#),
            "{wire}"
        );
        assert_eq!(serde_json::from_str::<TestParams>(&wire).unwrap(), p);
    }

    /// The QUIC transport carries reliable streams with its own controllers: a UDP test, a kernel
    /// controller's name, zero-copy, --dedicated and --pace auto are refused with it, each by
    /// name; --pace RATE is taken.
    #[test]
    fn the_quic_transport_refuses_what_only_tcp_or_datagrams_do() {
        let quic = TestParams {
            transport: Transport::Quic,
            ..params()
        };
        quic.validate().unwrap();
        for cc in QUIC_CONTROLLERS {
            let p = TestParams {
                congestion: Some(cc.into()),
                ..quic.clone()
            };
            p.validate().unwrap();
        }
        let refused = |p: TestParams, word: &str| {
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains(word), "{e}");
        };
        refused(
            TestParams {
                congestion: Some("htcp".into()),
                ..quic.clone()
            },
            "not one of the UDP transport's",
        );
        refused(
            TestParams {
                transport: Transport::Quic,
                ..udp_params()
            },
            "-u",
        );
        refused(
            TestParams {
                zerocopy: true,
                ..quic.clone()
            },
            "-Z",
        );
        refused(
            TestParams {
                pace_total_bps: Some(1_000_000_000),
                fast_start: true,
                ..quic.clone()
            },
            "--dedicated",
        );
        // --pace RATE caps QUIC flows as it caps TCP sockets; --pace auto governs TCP sockets.
        TestParams {
            pace_total_bps: Some(1_000_000_000),
            ..quic.clone()
        }
        .validate()
        .unwrap();
        refused(
            TestParams {
                pace_auto: Some(PaceAuto {
                    bottleneck_bps: 1_000_000_000,
                }),
                ..quic.clone()
            },
            "--pace auto",
        );
        refused(
            TestParams {
                sockets: SocketFlags {
                    tos: Some(0x28),
                    ..SocketFlags::default()
                },
                ..quic.clone()
            },
            "not with --transport udp",
        );
        // On the wire a TCP test carries no transport at all (older peers read it), a QUIC one
        // says so; no socket flags either unless some are set.
        let tcp = serde_json::to_string(&params()).unwrap();
        assert!(
            !tcp.contains("transport") && !tcp.contains("sockets"),
            "{tcp}"
        );
        let q = serde_json::to_string(&quic).unwrap();
        assert!(q.contains(r#""transport":"quic""#), "{q}");
        assert_eq!(serde_json::from_str::<TestParams>(&tcp).unwrap(), params());
    }

    /// A fast start opens at a known rate: asked without one (a peer that could then open
    /// windows sized by nothing), it is refused; with --pace RATE it is accepted.
    #[test]
    fn a_fast_start_without_a_rate_is_refused() {
        let mut p = params();
        p.fast_start = true;
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("--pace RATE")
        );
        p.pace_total_bps = Some(1_930_000_000);
        assert!(p.validate().is_ok());
        // Older peers leave it out; a false one is not sent.
        let text = serde_json::to_string(&params()).unwrap();
        assert!(!text.contains("fast_start"), "{text}");
    }

    /// A client's --pace auto start is bounded: a bottleneck of 0 or 5 bit/s would pace the
    /// server's streams to a standstill, and auto with a fixed rate is two answers to one question.
    #[test]
    fn a_pace_auto_start_out_of_range_is_refused() {
        let mut p = params();
        p.pace_auto = Some(PaceAuto {
            bottleneck_bps: 980_000_000,
        });
        assert!(p.validate().is_ok());
        for bad in [0, 5, MAX_RATE_BPS + 1] {
            p.pace_auto = Some(PaceAuto {
                bottleneck_bps: bad,
            });
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains("--pace auto's bottleneck"), "{bad}: {e}");
        }
        p.pace_auto = Some(PaceAuto {
            bottleneck_bps: 980_000_000,
        });
        p.pace_total_bps = Some(900_000_000);
        assert!(p.validate().is_err(), "auto and a rate");
    }

    /// A server's results carry at most the rounds a report keeps: a lying server's endless
    /// timeline is refused, not held.
    #[test]
    fn results_with_an_endless_pace_auto_timeline_are_refused() {
        let mut g = crate::auto_pace::Governor::new(1_000_000_000, 10_000_000_000);
        let mut r = crate::auto_pace::Reading {
            srtt_us: 20_000,
            min_rtt_us: 20_000,
            ..Default::default()
        };
        for i in 1..50u64 {
            r.at_ns = i * 20_000_000;
            r.acked_bytes = i * 2_500_000;
            g.observe(r);
        }
        let mut summary = g.summary();
        let results = |summary: &crate::auto_pace::GovernorSummary| {
            Message::Results(SideResults {
                cpu: CpuUse {
                    user_s: 0.0,
                    system_s: 0.0,
                    wall_s: 1.0,
                },
                streams: Vec::new(),
                pace_auto: Some(summary.clone()),
            })
        };
        assert!(results(&summary).validate().is_ok());
        let round = summary.timeline[0];
        summary.timeline = vec![round; crate::auto_pace::MAX_TIMELINE + 1];
        assert!(results(&summary).validate().is_err());
    }

    #[test]
    fn udp_params_round_trip_and_are_checked() {
        let m = Message::Params(udp_params());
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(Message::from_json(&json).unwrap(), m);
        // A TCP test's parameters carry no udp key, as before UDP tests existed.
        let tcp = serde_json::to_value(Message::Params(params())).unwrap();
        assert!(tcp.get("udp").is_none());
        for (mutate, needle) in [
            (
                Box::new(|p: &mut TestParams| p.write_len = 11) as Box<dyn Fn(&mut TestParams)>,
                "12..=65507",
            ),
            (
                Box::new(|p: &mut TestParams| p.write_len = 65_508),
                "datagram length",
            ),
            (
                Box::new(|p: &mut TestParams| {
                    p.write_len = 15;
                    p.udp.as_mut().unwrap().counters_64bit = true;
                }),
                "16..=65507",
            ),
            (
                Box::new(|p: &mut TestParams| p.udp.as_mut().unwrap().rate_bps = 999),
                "UDP rate",
            ),
            (
                Box::new(|p: &mut TestParams| p.udp.as_mut().unwrap().burst = MAX_BURST + 1),
                "burst",
            ),
            (
                Box::new(|p: &mut TestParams| p.congestion = Some("cubic".into())),
                "TCP tests only",
            ),
            (Box::new(|p: &mut TestParams| p.zerocopy = true), "-Z"),
            (
                Box::new(|p: &mut TestParams| p.pace_total_bps = Some(1_000_000)),
                "paced by -b",
            ),
        ] {
            let mut p = udp_params();
            mutate(&mut p);
            let err = p.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle}");
        }
        let mut p = udp_params();
        p.udp.as_mut().unwrap().rate_bps = 0;
        p.validate().unwrap();
    }

    #[test]
    fn params_round_trip_through_json() {
        let m = Message::Params(params());
        let json = serde_json::to_vec(&m).unwrap();
        assert_eq!(Message::from_json(&json).unwrap(), m);
    }

    #[test]
    fn invalid_params_name_the_field() {
        for (mutate, needle) in [
            (
                Box::new(|p: &mut TestParams| p.streams = 0) as Box<dyn Fn(&mut TestParams)>,
                "streams",
            ),
            (
                Box::new(|p: &mut TestParams| p.streams = MAX_STREAMS + 1),
                "streams",
            ),
            (
                Box::new(|p: &mut TestParams| p.write_len = 0),
                "write length",
            ),
            (Box::new(|p: &mut TestParams| p.interval_ns = 1), "interval"),
            (
                Box::new(|p: &mut TestParams| p.end = EndCondition::Time { ns: 0 }),
                "duration",
            ),
            (
                Box::new(|p: &mut TestParams| p.congestion = Some("cubic;rm -rf".into())),
                "congestion",
            ),
            (
                Box::new(|p: &mut TestParams| p.window = WindowRequest::Fixed { bytes: 0 }),
                "window",
            ),
            (
                Box::new(|p: &mut TestParams| p.omit_ns = MAX_OMIT_NS + 1),
                "omit",
            ),
            (Box::new(|p: &mut TestParams| p.rtt_ns = u64::MAX), "rtt"),
            (
                Box::new(|p: &mut TestParams| p.rtt_ns = MAX_RTT_NS + 1),
                "rtt",
            ),
            (
                Box::new(|p: &mut TestParams| p.target_rate_bps = u64::MAX),
                "target rate",
            ),
            (
                Box::new(|p: &mut TestParams| p.target_rate_bps = 0),
                "target rate",
            ),
            (
                Box::new(|p: &mut TestParams| p.pace_total_bps = Some(u64::MAX)),
                "pacing",
            ),
            (
                Box::new(|p: &mut TestParams| p.pace_total_bps = Some(MIN_PACE_BPS - 1)),
                "pacing",
            ),
            (
                Box::new(|p: &mut TestParams| p.end = EndCondition::Bytes { bytes: u64::MAX }),
                "byte count",
            ),
            (
                Box::new(|p: &mut TestParams| p.write_len = MAX_WRITE_LEN + 1),
                "write length",
            ),
            (
                Box::new(|p: &mut TestParams| p.interval_ns = MAX_INTERVAL_NS + 1),
                "interval",
            ),
            (
                Box::new(|p: &mut TestParams| p.end = EndCondition::Time { ns: u64::MAX }),
                "duration",
            ),
            (
                Box::new(|p: &mut TestParams| {
                    p.omit_ns = 1_000_000_000;
                    p.end = EndCondition::Bytes { bytes: 1 << 20 };
                }),
                "byte count",
            ),
        ] {
            let mut p = params();
            mutate(&mut p);
            let err = p.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle}");
        }
    }

    /// The largest values inside every range are accepted (the bounds are inclusive), and a server
    /// planning buffers from them does not overflow.
    #[test]
    fn params_at_every_upper_bound_are_valid_and_plannable() {
        let mut p = params();
        p.rtt_ns = MAX_RTT_NS;
        p.target_rate_bps = MAX_RATE_BPS;
        p.pace_total_bps = Some(MAX_RATE_BPS);
        p.streams = 1;
        p.window = WindowRequest::Auto;
        p.validate().unwrap();
        let limits = crate::window::KernelLimits {
            rmem_max: 4 << 20,
            wmem_max: 4 << 20,
            tcp_rmem_max: 32 << 20,
            tcp_wmem_max: 4 << 20,
            privileged: true,
        };
        let plan = crate::window::plan(
            longhaul_units::Nanos(p.rtt_ns),
            p.target_rate_bps,
            p.streams,
            None,
            &limits,
        );
        assert_eq!(plan.wanted, longhaul_units::models::MAX_TCP_WINDOW);
    }

    #[test]
    fn omit_is_optional_on_the_wire_and_bounded() {
        // A client that predates -O sends no omit_ns: it means no omit period.
        let mut v = serde_json::to_value(Message::Params(params())).unwrap();
        v.as_object_mut().unwrap().remove("omit_ns");
        let m = Message::from_json(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert!(matches!(m, Message::Params(p) if p.omit_ns == 0));
        let mut p = params();
        p.omit_ns = MAX_OMIT_NS;
        assert!(p.validate().is_ok());
    }

    #[test]
    fn bidir_doubles_connections_and_splits_roles() {
        assert_eq!(Direction::Bidir.connections(3), 6);
        assert!(Direction::Bidir.client_sends(2, 3));
        assert!(!Direction::Bidir.client_sends(3, 3));
        assert!(!Direction::Reverse.client_sends(0, 3));
    }

    #[test]
    fn a_key_proof_is_64_lowercase_hex_and_the_requirement_is_optional_on_the_wire() {
        let proof = |p: &str| {
            Message::from_json(format!(r#"{{"type":"key_proof","proof":"{p}"}}"#).as_bytes())
        };
        assert!(proof(&"0f".repeat(32)).is_ok());
        for bad in [
            "0f".repeat(31),
            "0F".repeat(32),
            "zz".repeat(32),
            "0f".repeat(33),
        ] {
            let e = proof(&bad).unwrap_err().to_string();
            assert!(e.contains("64 lowercase hex"), "{bad}: {e}");
        }
        // A welcome from a server that needs no key reads as before the requirement existed.
        let w = Message::Welcome {
            software: "s".into(),
            cookie: "00".repeat(16),
            key_required: false,
        };
        let json = serde_json::to_string(&w).unwrap();
        assert!(!json.contains("key_required"), "{json}");
        let older = format!(
            r#"{{"type":"welcome","software":"s","cookie":"{}"}}"#,
            "00".repeat(16)
        );
        assert_eq!(Message::from_json(older.as_bytes()).unwrap(), w);
    }

    #[test]
    fn unknown_message_type_is_rejected() {
        let err = Message::from_json(br#"{"type":"format_disk"}"#).unwrap_err();
        assert!(matches!(err, ProtoError::BadMessage(_)));
    }

    #[test]
    fn cpu_percent_is_relative_to_wall_time() {
        let c = CpuUse {
            user_s: 1.0,
            system_s: 3.0,
            wall_s: 4.0,
        };
        assert_eq!(c.percent(), (100.0, 25.0, 75.0));
    }
}
