//! The checked experiment: [`Spec`] and its parts (path, axes, event, series), the expanded
//! [`Point`]s and the limits a file is checked against. Plain data with small accessors; reading a file
//! into it is `check`'s job, and its flag values are `args`'.

use longhaul_topology::{CompiledPath, Overrides, Topology};
use longhaul_units::Nanos;
use serde::{Deserialize, Serialize};

use crate::error::SpecWarning;

/// Most repetitions of each point.
pub const MAX_REPETITIONS: u32 = 100;
/// Largest window a point may request: 1 GiB (TCP's own limit is just under,
/// 65,535 << 14 bytes).
pub const MAX_WINDOW: u64 = 1 << 30;
/// Most parallel streams (`longhaul test -P` accepts 1–1024).
pub const MAX_STREAMS: u32 = 1024;
/// Longest duration of one point: 24 h.
pub const MAX_DURATION: Nanos = Nanos(24 * 3600 * 1_000_000_000);
/// Most points a sweep may expand to.
pub const MAX_POINTS: usize = 1000;
/// Fastest bottleneck rate an experiment may ask for (emulated links on one
/// host; a sanity bound, not a promise).
pub const MAX_RATE_BPS: u64 = 400_000_000_000;
/// Smallest Ethernet frame of a frame-size sweep (RFC 2544's smallest, and 802.3's).
pub const MIN_FRAME: u32 = 64;
/// Largest Ethernet frame of a frame-size sweep: a 9000-byte IP MTU plus the frame's header and FCS.
pub const MAX_FRAME: u32 = 9000 + ETHERNET_OVERHEAD;
/// Bytes of an Ethernet frame around its IP packet: the 14-byte header and the 4-byte FCS (RFC 2544's
/// frame sizes count both; the preamble and the inter-frame gap are not in them).
pub const ETHERNET_OVERHEAD: u32 = 18;
/// Bytes of IPv4 and UDP headers in front of a datagram's payload.
pub const UDP_IPV4_HEADERS: u32 = 28;
/// Congestion-control modules known to exist in Linux; other well-formed
/// names are accepted with a warning.
pub const KNOWN_CONGESTION: &[&str] = &[
    "reno",
    "cubic",
    "bbr",
    "bbr2",
    "bbr3",
    "htcp",
    "bic",
    "highspeed",
    "scalable",
    "westwood",
    "vegas",
    "veno",
    "hybla",
    "illinois",
    "yeah",
    "lp",
    "nv",
    "cdg",
    "dctcp",
    "prague",
];
/// A congestion value `quic-<controller>` runs the UDP transport (`longhaul test --transport udp
/// -C <controller>`, QUIC over UDP) instead of the kernel's TCP.
pub const QUIC_PREFIX: &str = "quic-";
/// The UDP transport's controllers (docs/transport.md); other well-formed names after
/// [`QUIC_PREFIX`] are accepted with a warning and left to `longhaul test` to accept or refuse.
pub const KNOWN_QUIC_CONGESTION: &[&str] = &["cubic", "newreno", "bbr", "udt"];

/// Which path the experiment runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSource {
    /// A topology preset (`longhaul emulate presets`).
    Preset(String),
    /// A topology file, relative to the experiment file; the runner reads it
    /// and passes the text to [`Spec::topology`].
    File(String),
}

/// A bottleneck queue override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueSize {
    /// One BDP of the path (the emulator's `auto`).
    Auto,
    /// This many bytes per direction.
    Bytes(u64),
}

/// The path and its overrides (`longhaul emulate` flags).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSpec {
    /// Preset or file.
    pub source: PathSource,
    /// Round-trip time of the whole path (every leg scaled).
    pub rtt: Option<Nanos>,
    /// Bottleneck rate, bit/s.
    pub rate_bps: Option<u64>,
    /// Forward random loss probability, in [0, 1).
    pub loss: Option<f64>,
    /// IP MTU, 1500 or 9000.
    pub mtu: Option<u32>,
    /// Bottleneck queue.
    pub queue: Option<QueueSize>,
}

/// One sweep axis and its values, in the order written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    /// `longhaul test -w`: bytes, `None` for "auto".
    Window(Vec<Option<u64>>),
    /// `longhaul test -P`.
    Streams(Vec<u32>),
    /// `longhaul test -C`; `quic-<controller>` is `--transport udp -C <controller>`.
    Congestion(Vec<String>),
    /// `longhaul test -l`, bytes per write.
    Length(Vec<u64>),
    /// `longhaul emulate --mtu`.
    Mtu(Vec<u32>),
    /// `longhaul emulate --rate` (and `longhaul test --rate` for auto windows).
    Rate(Vec<u64>),
    /// `longhaul emulate --loss`: the forward random loss probability, in [0, 1).
    Loss(Vec<f64>),
    /// The IP version the test runs over (4 or 6): `longhaul test` to host b's IPv4 or IPv6
    /// address.
    Ip(Vec<u8>),
    /// Ethernet frame sizes of a UDP line characterisation (`[find_rate]`): each point's datagrams
    /// fill frames of this many bytes (the payload is the frame less [`ETHERNET_OVERHEAD`] and
    /// [`UDP_IPV4_HEADERS`]).
    Frame(Vec<u32>),
}

impl Axis {
    /// The axis's name in the file and in point ids.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Window(_) => "window",
            Self::Streams(_) => "streams",
            Self::Congestion(_) => "congestion",
            Self::Length(_) => "length",
            Self::Mtu(_) => "mtu",
            Self::Rate(_) => "rate",
            Self::Loss(_) => "loss",
            Self::Ip(_) => "ip",
            Self::Frame(_) => "frame",
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Self::Window(v) => v.len(),
            Self::Streams(v) => v.len(),
            Self::Congestion(v) => v.len(),
            Self::Length(v) => v.len(),
            Self::Mtu(v) => v.len(),
            Self::Rate(v) => v.len(),
            Self::Loss(v) => v.len(),
            Self::Ip(v) => v.len(),
            Self::Frame(v) => v.len(),
        }
    }

    /// Whether the axis has no values (never true of a parsed spec).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The short label of an axis in point ids.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Self::Congestion(_) => "cc",
            other => other.name(),
        }
    }
}

/// How fast the cross traffic of an event runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventRate {
    /// A fraction of the bottleneck rate ("90%" → 0.9), in (0, 1).
    Fraction(f64),
    /// An absolute rate, bit/s, below the bottleneck rate.
    Bps(u64),
}

impl EventRate {
    /// The rate in bit/s on a bottleneck of `bottleneck_bps`.
    pub fn bps(self, bottleneck_bps: u64) -> u64 {
        match self {
            Self::Fraction(f) => (bottleneck_bps as f64 * f).round() as u64,
            Self::Bps(b) => b,
        }
    }
}

/// A cross-traffic burst on the bottleneck during the test (seed 002 Fig.
/// 10: a 2-s UDP burst that forces drops).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Start, from the start of the test (omit period included).
    pub at: Nanos,
    /// How long the burst lasts.
    pub length: Nanos,
    /// Its rate.
    pub rate: EventRate,
    /// Recovered when the rate is back at this fraction of the pre-burst
    /// mean (default 0.95).
    pub recover_to: f64,
    /// The sliding window over which the recovered rate is averaged
    /// (default 1 s).
    pub recovery_window: Nanos,
}

impl Event {
    /// When the burst ends, from the start of the test.
    pub fn end(&self) -> Nanos {
        self.at.saturating_add(self.length)
    }
}

/// A time series the runner keeps per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    /// Bits per second, per stream and summed.
    Throughput,
    /// Congestion window per stream.
    Cwnd,
    /// Smoothed RTT per stream.
    Rtt,
    /// Retransmitted segments per interval.
    Retransmits,
}

impl Series {
    pub(super) const ALL: [(&'static str, Self); 4] = [
        ("throughput", Self::Throughput),
        ("cwnd", Self::Cwnd),
        ("rtt", Self::Rtt),
        ("retransmits", Self::Retransmits),
    ];
}

/// A UDP line characterisation (`[find_rate]`): each point is `longhaul test -u --find-rate`, the
/// RFC 2544 search for the highest rate whose loss stays at or under a threshold, with latency and
/// jitter at 50, 90 and 100 % of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FindRate {
    /// Loss a trial may have and pass, as a probability (RFC 2544: 0).
    pub loss_threshold: f64,
    /// The highest rate to try, bit/s of payload; `None`: the point's path rate.
    pub upper_bps: Option<u64>,
    /// The search stops when passing and failing rates are this share of the upper rate apart.
    pub resolution: f64,
}

/// A checked experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// Short name, `[a-z0-9][a-z0-9_-]*` (used in file names).
    pub name: String,
    /// One line for listings (default: the name).
    pub title: String,
    /// The figure or table it reproduces ("seed 002, Fig. 6").
    pub source: String,
    /// Free text: method, caveats.
    pub notes: String,
    /// The scale of the original experiment.
    pub original_scale: String,
    /// The scale chosen here, and why.
    pub scale: String,
    /// The path.
    pub path: PathSpec,
    /// Window for points the sweep does not set (`None` = auto).
    pub window: Option<u64>,
    /// Streams for points the sweep does not set.
    pub streams: u32,
    /// Congestion control for points the sweep does not set (`None` = the
    /// host's default).
    pub congestion: Option<String>,
    /// Write size for points the sweep does not set (`None` = longhaul's).
    pub length: Option<u64>,
    /// `longhaul test --pace`: all streams together, bit/s (`None`: unpaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_bps: Option<u64>,
    /// IP version for points the sweep does not set (4 or 6).
    #[serde(default = "ipv4", skip_serializing_if = "is_ipv4")]
    pub ip: u8,
    /// The sweep axes, in expansion order (outermost first).
    pub sweep: Vec<Axis>,
    /// `longhaul test -t` per point.
    pub duration: Nanos,
    /// `longhaul test -O` per point.
    pub omit: Nanos,
    /// `longhaul test -i`.
    pub interval: Nanos,
    /// Runs of each point.
    pub repetitions: u32,
    /// A cross-traffic burst during each test.
    pub event: Option<Event>,
    /// Series to keep.
    pub record: Vec<Series>,
    /// Whether this is the reduced (CI) variant ([`Spec::reduced`]).
    pub reduced: bool,
    /// A UDP line characterisation instead of a TCP test at each point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find_rate: Option<FindRate>,
    /// Whether the summary and the report set each point's Land Speed Record metric beside the
    /// record of its class (`lsr = true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lsr: bool,
    /// Things accepted but worth saying.
    pub warnings: Vec<SpecWarning>,
}

/// One point of the sweep: every parameter of one `longhaul test` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// 0-based position in [`Spec::points`].
    pub index: usize,
    /// Stable label: the swept axes and their values (`mtu=9000,window=4M`).
    pub id: String,
    /// The path and its overrides for this point (mtu, rate and loss axes
    /// applied).
    pub path: PathSpec,
    /// Window per stream, bytes; `None` = auto.
    pub window: Option<u64>,
    /// Parallel streams.
    pub streams: u32,
    /// Congestion control; `None` = the host's default. `quic-<controller>`
    /// runs the UDP transport with that controller ([`Point::quic_controller`]).
    pub congestion: Option<String>,
    /// Bytes per write; `None` = longhaul's default.
    pub length: Option<u64>,
    /// `longhaul test --pace`: all streams together, bit/s (`None`: unpaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_bps: Option<u64>,
    /// The IP version the test runs over: 4 or 6 (host b's IPv4 or IPv6 address).
    #[serde(default = "ipv4", skip_serializing_if = "is_ipv4")]
    pub ip: u8,
    /// Test duration (after the omit period).
    pub duration: Nanos,
    /// Omit period.
    pub omit: Nanos,
    /// Interval between reports.
    pub interval: Nanos,
    /// The event, if any.
    pub event: Option<Event>,
    /// A UDP line characterisation instead of a TCP test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find_rate: Option<FindRate>,
    /// The Ethernet frame size its datagrams fill (a `frame` sweep), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<u32>,
}

/// The IP version of a spec or point that does not name one (IPv4, as before there was a choice).
fn ipv4() -> u8 {
    4
}

/// IPv4 is not written: a result file names the IP version only of IPv6 points.
fn is_ipv4(ip: &u8) -> bool {
    *ip == 4
}

/// The topology overrides of a path ("auto" queue = the topology's own).
pub(super) fn overrides(path: &PathSpec) -> Overrides {
    Overrides {
        rtt: path.rtt,
        rate: path.rate_bps,
        loss: path.loss,
        mtu: path.mtu,
        queue: match path.queue {
            Some(QueueSize::Bytes(b)) => Some(b),
            _ => None,
        },
    }
}

impl Point {
    /// The topology overrides for this point (path overrides with the mtu,
    /// rate and loss axes applied). A queue of "auto" is left to the topology.
    pub fn overrides(&self) -> Overrides {
        overrides(&self.path)
    }

    /// The path compiled with this point's overrides.
    pub fn compile(
        &self,
        topology: &Topology,
    ) -> Result<CompiledPath, longhaul_topology::TopologyError> {
        topology.compile(&self.overrides())
    }

    /// The UDP transport's controller when the point runs over QUIC
    /// (`quic-bbr` → `bbr`); `None` for the kernel's TCP.
    pub fn quic_controller(&self) -> Option<&str> {
        self.congestion.as_deref()?.strip_prefix(QUIC_PREFIX)
    }

    /// The UDP payload of a line characterisation's datagrams, bytes: from the frame size, or the
    /// length; `None` when longhaul picks it (the path's MSS) or for a TCP point.
    pub fn datagram_len(&self) -> Option<u64> {
        self.find_rate?;
        match self.frame {
            Some(f) => Some(u64::from(f - ETHERNET_OVERHEAD - UDP_IPV4_HEADERS)),
            None => self.length,
        }
    }

    /// The event resolved on a bottleneck of `bottleneck_bps`: when the
    /// burst starts and ends (from the test start) and its rate in bit/s.
    pub fn event_plan(&self, bottleneck_bps: u64) -> Option<EventPlan> {
        self.event.map(|e| EventPlan {
            start: e.at,
            end: e.end(),
            rate_bps: e.rate.bps(bottleneck_bps),
        })
    }
}

/// An event as the runner applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventPlan {
    /// Start, from the start of the test.
    pub start: Nanos,
    /// End, from the start of the test.
    pub end: Nanos,
    /// Cross-traffic rate, bit/s.
    pub rate_bps: u64,
}
