//! What a transfer tells its user: the events of a running side ([`Event`]) and the summary it ends
//! with ([`Summary`]). The engine's sides produce them; `longhaul send`/`get` print them, and a
//! server running a third-party copy (`longhaul copy`) sends them to its controller in job frames,
//! so they go both ways through serde.

use serde::{Deserialize, Serialize};

/// What a transfer reports as it goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Data is about to flow.
    Started {
        /// Data streams.
        streams: u32,
        /// Chunk size, bytes.
        chunk_size: u64,
        /// Files in the transfer.
        files: u64,
        /// Their total size.
        bytes_total: u64,
        /// What this run has to move (less when resuming or when files are already there).
        bytes_to_send: u64,
    },
    /// Every second.
    Progress {
        /// Payload bytes moved so far in this run.
        bytes: u64,
        /// Of `bytes_to_send`.
        bytes_to_send: u64,
        /// Files verified and in place.
        files: u64,
        /// Seconds since the start.
        seconds: f64,
        /// Rate over the last interval, bit/s.
        bits_per_second: f64,
    },
    /// A file is verified and in place, or failed.
    File {
        /// Its path in the transfer.
        path: String,
        /// Why it failed, if it did.
        error: Option<String>,
    },
}

/// `--pace auto` in a transfer's summary.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PaceAutoSummary {
    /// The packet trains' estimate (on the client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<longhaul_proto::auto_pace::BottleneckEstimate>,
    /// This side's governor, if this side sent (a `get` is governed by the server, which logs it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<longhaul_proto::auto_pace::GovernorSummary>,
}

/// `--dedicated` in a transfer's summary: how the sender opened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FastStartSummary {
    /// The initial congestion window each stream opened with, segments.
    pub initial_window_segments: u32,
    /// From the first byte sent to the first round trip carrying 90 % of the rate, ms (absent:
    /// never reached).
    pub to_rate_ms: Option<f64>,
    /// The round trip the window was sized for, ms.
    pub rtt_ms: f64,
}

/// The end of a transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `send` or `get`.
    pub direction: String,
    /// Files verified and in place (including those that already were).
    pub files: u64,
    /// Files that failed, with why.
    pub failed: Vec<String>,
    /// Entries left out by the sender (special files, links leaving the tree).
    pub skipped: Vec<String>,
    /// Payload bytes moved in this run.
    pub bytes_moved: u64,
    /// What this run had to move.
    pub bytes_to_send: u64,
    /// Seconds from the first byte to the end.
    pub seconds: f64,
    /// bytes_moved × 8 / seconds.
    pub bits_per_second: f64,
    /// Data streams.
    pub streams: u32,
    /// Chunk size, bytes.
    pub chunk_size: u64,
    /// Chunk-buffer memory bound of each side, bytes (streams × chunk × 2).
    pub memory_bound: u64,
    /// RTT measured on the control connection, ns.
    pub rtt_ns: u64,
    /// Chunks sent again after failing verification.
    pub chunks_resent: u64,
    /// Chunks the receiver verified (BLAKE3 against the sender's hash) in this run.
    #[serde(default)]
    pub chunks_verified: u64,
    /// Retransmits on the data connections, known when this side sends: TCP's, or over the UDP
    /// transport the packets QUIC declared lost and sent again.
    pub retransmits: Option<u64>,
    /// Whether every file was verified end to end (file digests equal).
    pub verified: bool,
    /// `--encrypt`: the TLS version and cipher suite of the connections (`None`: plaintext).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<String>,
    /// `--pace auto`: the bottleneck the packet trains found (the client's) and what this side's
    /// governor did, when this side sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_auto: Option<PaceAutoSummary>,
    /// `--dedicated`: the sending client's fast start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_start: Option<FastStartSummary>,
    /// The target rate the plan took from the server's `--path-rate` (the client gave no
    /// `--rate`), bit/s: the streams were paced at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_rate_bps: Option<u64>,
    /// One stripe of a striped transfer: which, and (at the receiver) whether it put the files
    /// in place. `files` then counts this stripe's parts of files verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stripe: Option<StripeSummary>,
    /// `--transport udp`: the data went over QUIC flows, each with this congestion controller
    /// (the sending side's; absent: over TCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpSummary>,
}

/// How the UDP transport carried a transfer ([`Summary::udp`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpSummary {
    /// The sending side's congestion controller (`-C`): cubic, newreno, bbr or udt.
    pub controller: String,
}

/// A stripe's end ([`Summary::stripe`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeSummary {
    /// The run (32 hex digits).
    pub run: String,
    /// This stripe's index.
    pub index: u32,
    /// Stripes in the run.
    pub count: u32,
    /// At the receiver: this stripe ended last and put the files in place (`files_in_place` of
    /// them; the rest are in the summary's `failed`). `false` while other stripes run, or when
    /// one of them failed: a rerun resumes.
    pub finished: bool,
    /// Files in place after the finish (including those that already were).
    pub files_in_place: u64,
}
