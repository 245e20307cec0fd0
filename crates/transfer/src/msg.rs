//! The transfer protocol: control messages (JSON frames) and the binary chunk header of data streams.
//!
//! A transfer uses the connection preamble of `longhaul_proto::wire` (kind control or data, the cookie,
//! the stream index) and the same control frames (`longhaul_proto::frame`, through [`Framed`]): a 4-byte
//! big-endian length, then that many bytes of JSON, at most [`MAX_FRAME_LEN`] (64 KiB). The conversation (C = client, S = server; "sender" and
//! "receiver" are the data's):
//!
//! ```text
//! C: TransferHello{version, direction, client_nonce, ticket?, early_digest?}
//!                     S: AuthChallenge{server_nonce, server_proof, inline?, cookie?, early_digest?,
//!                                      path_rate_bps?} | Error
//! C: (checks server_proof) AuthResponse{client_proof}, and in the same flight:
//!            Request{paths} (get) | SendTo{..} (send), Plan{streams, chunk_size, ..},
//!            send: ManifestBatch{entries, last} × n
//! send, when the challenge named the cookie: C opens its data connections now (below)
//!                     S: (checks client_proof, before reading on) AuthOk{cookie} | Error
//! get:       S: ManifestBatch{entries, last} × n
//! receiver:  Have{files, last} × m       (verified chunks from its journal; one round trip in all)
//! C opens `streams` data connections at once (unless it did above), each presenting the cookie,
//!   its stream index and a proof of the session key.
//! (A small send, `Plan{streams: 0}`, sends instead ChunkInline{file, chunk, data} × k, FileDone
//!   and Done right behind its manifest; the server answers each file, then Done.)
//! sender, data streams:  (ChunkHeader ‖ tag ‖ chunk bytes) × k, streams pulling work from the scheduler
//! receiver:  ChunkVerdict{file, chunk, ok} per chunk   (ok = false: the sender re-sends it)
//! sender:    FileDone{file, digest} once every chunk of a file is verified, or once every chunk is
//!            sent when the receiver said `early_digest` (it checks the digest once they are verified)
//! receiver:  FileVerified{file} | FileFailed{file, reason}
//! sender:    Done{files, bytes}        receiver: Done{files, bytes}, then both close
//! ```
//!
//! Every frame after the handshake (the server's from `auth_ok` on, the client's after `auth_response`)
//! is sealed with a tag under the session key, and every chunk header carries one: see
//! [`crate::session`].
//!
//! Everything received is untrusted: [`Message::from_json`] bounds every count and string and validates
//! every path before the caller sees the message, and [`ChunkHeader::decode`] checks every field.
//! The client may take the Hello → AuthChallenge round trip as its first RTT sample.

use serde::{Deserialize, Serialize};

use crate::digest::{Digest, hex_bytes};
use crate::manifest::{
    BUFFERS_PER_STREAM, ChunkPlan, EntryError, MAX_CHUNK, MAX_FILE_SIZE, MAX_STREAMS, MEMORY_LIMIT,
    ManifestEntry, check_chunk_size, memory_bound,
};
use crate::ranges::RangeSet;
use crate::relpath::RelPath;

pub use longhaul_proto::frame::MAX_FRAME_LEN;
use longhaul_proto::frame::{self, FrameError, Framed};
pub use longhaul_proto::msg::{MAX_RATE_BPS, MAX_RTT_NS};
use longhaul_proto::msg::{QUIC_CONTROLLERS, Transport};

/// The most bytes of files a transfer sends on its control connection ([`Message::ChunkInline`],
/// a plan of 0 streams) instead of opening data connections: what fits, base64-encoded beside the
/// request, in TCP's initial window of ten segments, so the data leaves with the client's proof
/// and no data connection's handshake is waited for.
pub const INLINE_LIMIT: u64 = 8 * 1024;

/// Serde adapter for byte strings written as standard base64 text.
mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD.decode(s).map_err(D::Error::custom)
    }
}

/// Version of the transfer protocol spoken by this build.
///
/// 2: the session after the handshake is authenticated (`crate::session`): sealed control frames,
/// data-connection proofs, 96-byte chunk headers with a tag.
pub const TRANSFER_VERSION: u16 = 2;
/// Most source paths in one `get` request.
pub const MAX_REQUEST_PATHS: usize = 1024;
/// Longest free-text field (error messages, failure reasons), in bytes.
pub const MAX_TEXT: usize = 4096;

/// Which way the data goes, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// `longhaul send`: the client sends, the server receives.
    Send,
    /// `longhaul get`: the server sends, the client receives.
    Get,
}

/// A transfer's cookie where a message may leave it out (32 hex digits on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DataCookie(#[serde(with = "hex_bytes")] pub [u8; 16]);

/// The name of a ticket (16 random bytes from the issuing server; 32 hex digits on the wire).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TicketId(#[serde(with = "hex_bytes")] pub [u8; 16]);

impl std::fmt::Debug for TicketId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TicketId({})", crate::digest::to_hex(&self.0))
    }
}

/// Per-file resume state in a [`Message::Have`]: the chunks the receiver already holds verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaveFile {
    /// File id from the manifest.
    pub file: u32,
    /// Verified chunk indices. A file may appear in several `Have` messages; the sets are united.
    pub verified: RangeSet,
}

/// One control message of a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client's first message. The distinct tag lets a server tell a transfer from a test by its first
    /// frame.
    TransferHello {
        /// [`TRANSFER_VERSION`] of the client; a server of another version answers `Error`.
        version: u16,
        /// `send` or `get`.
        direction: Direction,
        /// The client's fresh nonce (64 hex digits).
        #[serde(with = "hex_bytes")]
        client_nonce: [u8; 32],
        /// A third-party copy: the ticket whose key the client proves instead of the server's own
        /// ([`TicketId`], issued by this server to a controller it accepts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ticket: Option<TicketId>,
        /// As the receiver (`get`), the client takes a file's `FileDone` before the file's chunks
        /// are all verified and checks it once they are, so the sender may announce each file
        /// as soon as its chunks are sent, a round trip sooner (absent: false, as from older
        /// clients).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        early_digest: bool,
    },
    /// Server's nonce and its proof of the key.
    AuthChallenge {
        /// The server's fresh nonce.
        #[serde(with = "hex_bytes")]
        server_nonce: [u8; 32],
        /// `proof(Server, server_nonce, client_nonce)`.
        server_proof: Digest,
        /// The server takes a small transfer's files on the control connection: a plan of 0
        /// streams and [`Message::ChunkInline`] (absent: false, as from older servers). Not
        /// covered by the proof: a path that clears it only costs the transfer a round trip or
        /// two, and one that sets it for a server without it gets the plan refused.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        inline: bool,
        /// The cookie the transfer's data connections will present (the one `AuthOk` repeats),
        /// given this early so that a sending client can open them in the flight of its proof, a
        /// round trip before `AuthOk` (absent: from older servers, which admit data connections
        /// only once the client is authenticated). Not a secret: a data connection is admitted
        /// only with a proof of the session key, which the server waits for (bounded by its
        /// handshake deadline) when the connection comes first.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cookie: Option<DataCookie>,
        /// As the receiver (`send`), the server takes a file's `FileDone` before the file's
        /// chunks are all verified (as `TransferHello::early_digest` for the client).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        early_digest: bool,
        /// The payload rate of the path to this server as its operator set it (`server
        /// --path-rate`), bit/s: a client given no `--rate` plans and paces with it instead of
        /// hedging an unknown path ([`longhaul_proto::msg::MIN_PACE_BPS`]..=[`MAX_RATE_BPS`];
        /// absent: not set, also from older servers). Not covered by the proof: a path that
        /// changes it can only slow the transfer, as it could by dropping packets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path_rate_bps: Option<u64>,
    },
    /// Client's proof of the key.
    AuthResponse {
        /// `proof(Client, server_nonce, client_nonce)`.
        client_proof: Digest,
    },
    /// Authentication succeeded; data connections present this cookie.
    AuthOk {
        /// Cookie of this transfer (32 hex digits).
        #[serde(with = "hex_bytes")]
        cookie: [u8; 16],
    },
    /// `get`: the sources to send, relative to the server's root.
    Request {
        /// Source paths.
        paths: Vec<RelPath>,
    },
    /// `send`: where the data goes and how the server must treat what is already there.
    SendTo {
        /// Destination directory relative to the server's root (`None`: the root itself); created
        /// if missing. Each source lands in it under its own name.
        dest: Option<RelPath>,
        /// Replace existing files that differ (otherwise such a file fails the transfer).
        overwrite: bool,
        /// Make each file durable (fsync) before renaming it into place.
        fsync: bool,
        /// One stripe of a striped transfer (`crate::stripe`): only its chunks move, and the
        /// stripe that ends last puts the files in place.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stripe: Option<crate::stripe::Stripe>,
    },
    /// The client's plan (it measured the RTT and knows the target rate): streams and chunk size
    /// for the whole transfer. Sent after `request` / `send_to`.
    Plan {
        /// Data connections the client will open.
        streams: u32,
        /// Chunk size in bytes (power of two, 1–64 MiB).
        chunk_size: u64,
        /// The RTT the client measured, ns (the server sizes its socket buffers from it).
        #[serde(default)]
        rtt_ns: u64,
        /// The target rate of all streams together, bit/s.
        #[serde(default)]
        rate_bps: u64,
        /// `--pace auto`: the bottleneck the client's packet trains found, bit/s of IP packets; the
        /// sending side governs its pacing from it instead of pacing at `rate_bps` (absent: not
        /// asked, also from older clients).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pace_auto_bps: Option<u64>,
        /// `--dedicated`: the path carries nothing else; each side sets its buffers before the
        /// handshake (the receiver's window is open from the first acknowledgement) and the
        /// client opens at `rate_bps` from the first round trip (absent: false, also from older
        /// clients).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fast_start: bool,
        /// What carries the data: TCP connections, or QUIC connections over UDP (`--transport
        /// udp`; absent: TCP, also from older clients).
        #[serde(default, skip_serializing_if = "Transport::is_tcp")]
        transport: Transport,
        /// Over QUIC: the sending side's congestion controller, one of
        /// [`longhaul_proto::msg::QUIC_CONTROLLERS`] (absent: the transport's default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        controller: Option<String>,
    },
    /// Part of the manifest. Each entry is validated on parsing; the receiver adds them in order to a
    /// [`crate::manifest::Manifest`], which enforces the tree rules (unique ids and paths, parents first).
    ManifestBatch {
        /// Entries in manifest order.
        entries: Vec<ManifestEntry>,
        /// Whether this is the last batch.
        last: bool,
    },
    /// Receiver's resume state, sent after the last manifest batch.
    Have {
        /// Files with verified chunks; files not listed have none.
        files: Vec<HaveFile>,
        /// Whether this is the last `Have`.
        last: bool,
    },
    /// Receiver's verdict on one chunk.
    ChunkVerdict {
        /// File id.
        file: u32,
        /// Chunk index.
        chunk: u64,
        /// Whether the hash matched; `false` asks for a re-send.
        ok: bool,
    },
    /// Sender, in a plan of 0 streams: one chunk of a small file, on the control connection
    /// (sealed like every control frame, so it needs no hash of its own). Its offset and length
    /// are the file's chunk plan's; at most [`INLINE_LIMIT`] bytes.
    ChunkInline {
        /// File id.
        file: u32,
        /// Chunk index.
        chunk: u64,
        /// The chunk's bytes (base64 in the JSON).
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
    /// Sender: every chunk of `file` is verified (in a plan of 0 streams: sent, ahead of this);
    /// here is its file digest.
    FileDone {
        /// File id.
        file: u32,
        /// The sender's file digest ([`crate::digest::file_digest`]).
        digest: Digest,
    },
    /// Receiver: the digests matched and the file is in place under its final name.
    FileVerified {
        /// File id.
        file: u32,
    },
    /// Receiver: the file could not be completed (digest mismatch, disk full, ...).
    FileFailed {
        /// File id.
        file: u32,
        /// Why, one line.
        reason: String,
    },
    /// End of the transfer, with each side's count.
    Done {
        /// Files completed.
        files: u64,
        /// Payload bytes moved in this run.
        bytes: u64,
    },
    /// A fatal error; the sender of it closes the connection.
    Error {
        /// One line.
        message: String,
    },
}

/// Everything that can be wrong with transfer bytes from a peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// A frame announced more than [`MAX_FRAME_LEN`] bytes.
    #[error("control frame of {0} bytes exceeds the 64 KiB limit")]
    FrameTooLarge(usize),
    /// A frame of length zero.
    #[error("empty control frame")]
    EmptyFrame,
    /// Not valid JSON for any message.
    #[error("malformed transfer message: {0}")]
    BadMessage(String),
    /// Well-formed but out of bounds.
    #[error("invalid transfer message: {0}")]
    Invalid(String),
    /// A manifest entry that breaks the rules.
    #[error("invalid manifest entry: {0}")]
    Entry(#[from] EntryError),
    /// A chunk header without the magic: the data stream is out of step.
    #[error("data stream out of step: bad chunk header magic")]
    BadChunkMagic,
    /// A chunk header with a field out of range.
    #[error("bad chunk header: {0}")]
    BadChunkHeader(&'static str),
    /// A sealed control frame whose tag does not verify (`crate::session`).
    #[error("control frame failed authentication: {0}")]
    FrameAuth(String),
    /// A chunk header whose tag does not verify.
    #[error(
        "chunk header failed authentication: stream {stream}, header {seq} of the stream (altered, \
injected, replayed or reordered on the path, or not from this session)"
    )]
    ChunkAuth {
        /// The data stream.
        stream: u32,
        /// The header's sequence number on that stream.
        seq: u64,
    },
    /// A data connection whose proof does not verify.
    #[error(
        "data connection for stream {stream} failed authentication: it does not prove this \
session's key (a cookie alone is not enough)"
    )]
    DataProof {
        /// The stream index it presented.
        stream: u32,
    },
    /// A chunk header that does not match the file's chunk plan.
    #[error("chunk {chunk} of file {file}: header says offset {offset} len {len}, plan disagrees")]
    ChunkMismatch {
        /// File id.
        file: u32,
        /// Chunk index.
        chunk: u64,
        /// Offset in the header.
        offset: u64,
        /// Length in the header.
        len: u32,
    },
}

impl Message {
    /// Parses and validates one message from a frame's payload.
    pub fn from_json(bytes: &[u8]) -> Result<Self, WireError> {
        let m: Message =
            serde_json::from_slice(bytes).map_err(|e| WireError::BadMessage(e.to_string()))?;
        m.validate()?;
        Ok(m)
    }

    /// Checks bounds serde cannot express. Paths, digests, nonces and range sets are already validated by
    /// their types.
    pub fn validate(&self) -> Result<(), WireError> {
        let invalid = |s: String| Err(WireError::Invalid(s));
        match self {
            Message::Request { paths } if paths.is_empty() || paths.len() > MAX_REQUEST_PATHS => {
                invalid(format!("request must name 1 to {MAX_REQUEST_PATHS} paths"))
            }
            Message::Plan {
                pace_auto_bps: Some(b),
                ..
            } if !(longhaul_proto::msg::MIN_PACE_BPS..=longhaul_proto::msg::MAX_RATE_BPS)
                .contains(b) =>
            {
                invalid(format!(
                    "--pace auto's bottleneck must be 1 kbit/s..=10 Tbit/s, got {b} bit/s"
                ))
            }
            Message::AuthChallenge {
                path_rate_bps: Some(b),
                ..
            } if !(longhaul_proto::msg::MIN_PACE_BPS..=MAX_RATE_BPS).contains(b) => invalid(
                format!("the server's --path-rate must be 1 kbit/s..=10 Tbit/s, got {b} bit/s"),
            ),
            Message::Plan {
                fast_start: true,
                rate_bps,
                pace_auto_bps,
                ..
            } if *rate_bps == 0 || pace_auto_bps.is_some() => invalid(
                "a fast start (--dedicated) opens at a known rate: --rate RATE, not --pace auto"
                    .into(),
            ),
            Message::Plan {
                transport: Transport::Quic,
                pace_auto_bps,
                fast_start,
                ..
            } if pace_auto_bps.is_some() || *fast_start => invalid(
                "--pace auto and --dedicated steer the kernel's TCP; the UDP transport paces \
                 itself"
                    .into(),
            ),
            Message::Plan {
                transport: Transport::Tcp,
                controller: Some(_),
                ..
            } => invalid("a congestion controller in the plan is for the UDP transport".into()),
            Message::Plan {
                controller: Some(c),
                ..
            } if !QUIC_CONTROLLERS.contains(&c.as_str()) => invalid(format!(
                "the UDP transport's congestion controllers are {}, not {:?}",
                QUIC_CONTROLLERS.join(", "),
                c.chars().take(40).collect::<String>()
            )),
            Message::Plan {
                streams: 0,
                transport: Transport::Quic,
                ..
            } => invalid(
                "a plan of 0 streams sends its files on the control connection, over TCP".into(),
            ),
            // 0 streams: a small transfer's files travel on the control connection.
            Message::Plan {
                streams,
                chunk_size,
                rtt_ns,
                rate_bps,
                ..
            } => check_plan((*streams).max(1), *chunk_size, *rtt_ns, *rate_bps).or_else(invalid),
            Message::ChunkInline { data, .. } if data.len() as u64 > INLINE_LIMIT => {
                invalid(format!(
                    "an inline chunk of {} bytes (limit {INLINE_LIMIT})",
                    data.len()
                ))
            }
            Message::SendTo {
                stripe: Some(s), ..
            } => s.validate().or_else(|e| invalid(e.to_string())),
            Message::ManifestBatch { entries, .. } => {
                for e in entries {
                    e.entry.validate()?;
                }
                Ok(())
            }
            Message::FileFailed { reason: text, .. } | Message::Error { message: text }
                if text.len() > MAX_TEXT =>
            {
                invalid(format!(
                    "text field of {} bytes (limit {MAX_TEXT})",
                    text.len()
                ))
            }
            _ => Ok(()),
        }
    }

    /// The message as a plain frame ([`longhaul_proto::frame::encode_frame`]).
    pub fn encode_frame(&self) -> Vec<u8> {
        frame::encode_frame(self)
    }

    /// The message's kind, its JSON `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::TransferHello { .. } => "transfer_hello",
            Message::AuthChallenge { .. } => "auth_challenge",
            Message::AuthResponse { .. } => "auth_response",
            Message::AuthOk { .. } => "auth_ok",
            Message::Request { .. } => "request",
            Message::SendTo { .. } => "send_to",
            Message::Plan { .. } => "plan",
            Message::ManifestBatch { .. } => "manifest_batch",
            Message::Have { .. } => "have",
            Message::ChunkVerdict { .. } => "chunk_verdict",
            Message::ChunkInline { .. } => "chunk_inline",
            Message::FileDone { .. } => "file_done",
            Message::FileVerified { .. } => "file_verified",
            Message::FileFailed { .. } => "file_failed",
            Message::Done { .. } => "done",
            Message::Error { .. } => "error",
        }
    }
}

/// Transfer messages travel in the frames of `longhaul_proto::frame`; after the handshake they are
/// sealed by [`crate::session`].
impl Framed for Message {
    type Error = WireError;

    fn from_json(bytes: &[u8]) -> Result<Self, WireError> {
        Message::from_json(bytes)
    }

    fn kind(&self) -> &'static str {
        Message::kind(self)
    }

    fn peer_error(&self) -> Option<&str> {
        match self {
            Message::Error { message } => Some(message),
            _ => None,
        }
    }
}

impl From<FrameError> for WireError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::TooLarge { len, .. } => WireError::FrameTooLarge(len),
            FrameError::Empty => WireError::EmptyFrame,
            FrameError::Auth(why) => WireError::FrameAuth(why),
        }
    }
}

/// The ranges of a [`Message::Plan`], checked on receipt: streams 1..=[`MAX_STREAMS`], a chunk size
/// that [`check_chunk_size`] accepts, chunk-buffer memory ([`memory_bound`]) within [`MEMORY_LIMIT`],
/// rtt 0 (unknown)..=[`MAX_RTT_NS`] and rate 0 (unknown)..=[`MAX_RATE_BPS`] (the test protocol's
/// limits). The error text names the field and the limit.
pub fn check_plan(streams: u32, chunk_size: u64, rtt_ns: u64, rate_bps: u64) -> Result<(), String> {
    if !(1..=MAX_STREAMS).contains(&streams) {
        return Err(format!(
            "plan asks for {streams} streams (1 to {MAX_STREAMS} allowed)"
        ));
    }
    check_chunk_size(chunk_size).map_err(|e| e.to_string())?;
    let memory = memory_bound(streams, chunk_size);
    if memory > MEMORY_LIMIT {
        return Err(format!(
            "plan needs {} MiB of chunk buffers ({streams} streams × {} MiB chunks × \
             {BUFFERS_PER_STREAM}), over the {} MiB limit; use fewer streams or smaller chunks",
            memory >> 20,
            chunk_size >> 20,
            MEMORY_LIMIT >> 20
        ));
    }
    if rtt_ns > MAX_RTT_NS {
        return Err(format!("plan rtt must be at most 10 s, got {rtt_ns} ns"));
    }
    if rate_bps > MAX_RATE_BPS {
        return Err(format!(
            "plan rate must be at most 10 Tbit/s, got {rate_bps} bit/s"
        ));
    }
    Ok(())
}

/// The sender's side of resume: unites the receiver's [`Message::Have`] messages, checking each against
/// the sender's own manifest. Every file named must be a regular file of the manifest
/// (`chunk_count(id)` is `Some`), every range must lie within that file's chunks, and the whole
/// conversation is bounded: each message costs one unit plus one per range, out of a budget of
/// [`HAVE_BUDGET_BASE`] + 2 × the manifest's chunks (a receiver's honest resume state, split by
/// [`have_messages`], never needs more than one range per chunk nor more messages than ranges).
#[derive(Debug)]
pub struct HaveCollector {
    have: std::collections::HashMap<u32, RangeSet>,
    budget: u64,
}

/// The fixed part of a [`HaveCollector`]'s budget (room for the empty `Have`s of small manifests).
pub const HAVE_BUDGET_BASE: u64 = 64;

impl HaveCollector {
    /// A collector for a manifest of `total_chunks` chunks over all its files.
    pub fn new(total_chunks: u64) -> Self {
        Self {
            have: std::collections::HashMap::new(),
            budget: HAVE_BUDGET_BASE.saturating_add(total_chunks.saturating_mul(2)),
        }
    }

    /// Adds one `Have` message's files; `chunk_count(id)` is the chunk count of regular file `id` of
    /// the manifest, `None` for ids that are not regular files of it.
    pub fn add(
        &mut self,
        files: &[HaveFile],
        chunk_count: impl Fn(u32) -> Option<u64>,
    ) -> Result<(), WireError> {
        let cost = files.iter().fold(1u64, |c, f| {
            c.saturating_add(f.verified.range_count() as u64)
        });
        self.budget = self.budget.checked_sub(cost).ok_or_else(|| {
            WireError::Invalid(
                "resume state (have) larger than the manifest allows: more messages or ranges \
                 than chunks"
                    .into(),
            )
        })?;
        for f in files {
            let Some(count) = chunk_count(f.file) else {
                return Err(WireError::Invalid(format!(
                    "resume state (have) names file {}, which is not a file of the manifest",
                    f.file
                )));
            };
            if f.verified.end() > count {
                return Err(WireError::Invalid(format!(
                    "resume state (have) of file {} names chunk {}, beyond its {count} chunks",
                    f.file,
                    f.verified.end() - 1
                )));
            }
            let set = self.have.entry(f.file).or_default();
            for (s, e) in f.verified.ranges() {
                set.insert_range(s, e);
            }
        }
        Ok(())
    }

    /// The united resume state: verified chunks per file id.
    pub fn finish(self) -> std::collections::HashMap<u32, RangeSet> {
        self.have
    }
}

/// Packs manifest entries into `ManifestBatch` messages whose frames fit in [`MAX_FRAME_LEN`], in order,
/// so the sender can stream a manifest of any length without holding it all.
#[derive(Debug, Default)]
pub struct ManifestBatcher {
    pending: Vec<ManifestEntry>,
    pending_bytes: usize,
}

/// Budget for a batch's entries: the frame limit less room for the envelope (`{"type":...,"last":...}`).
const BATCH_BUDGET: usize = MAX_FRAME_LEN - 256;

impl ManifestBatcher {
    /// An empty batcher.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry; returns a full batch (not the last) when this entry would not fit in the current one.
    /// Any single entry fits: a 4096-byte path and target, even fully `\u00XX`-escaped, stay under 64 KiB.
    pub fn push(&mut self, e: ManifestEntry) -> Option<Message> {
        let size = serde_json::to_vec(&e).map_or(0, |v| v.len()) + 1;
        let full = (self.pending_bytes + size > BATCH_BUDGET).then(|| self.take(false));
        self.pending_bytes += size;
        self.pending.push(e);
        full
    }

    /// The final batch (possibly empty), marked `last`.
    pub fn finish(mut self) -> Message {
        self.take(true)
    }

    fn take(&mut self, last: bool) -> Message {
        self.pending_bytes = 0;
        Message::ManifestBatch {
            entries: std::mem::take(&mut self.pending),
            last,
        }
    }
}

/// Splits resume state into `Have` messages whose frames fit in [`MAX_FRAME_LEN`]. A file with more
/// ranges than fit in one frame is split across messages (the receiver of `Have` unites them).
pub fn have_messages(files: &[(u32, &RangeSet)]) -> Vec<Message> {
    // A range costs at most 44 bytes of JSON ("[" 20 digits "," 20 digits "],"); a file's envelope
    // (`{"file":4294967295,"verified":[]},`) 34, rounded up.
    const RANGE_COST: usize = 44;
    const FILE_COST: usize = 64;
    let mut out = Vec::new();
    let mut cur: Vec<HaveFile> = Vec::new();
    let mut used = 0;
    for &(file, set) in files {
        let mut ranges = set.ranges().peekable();
        while ranges.peek().is_some() {
            if used + FILE_COST + RANGE_COST > BATCH_BUDGET {
                out.push(Message::Have {
                    files: std::mem::take(&mut cur),
                    last: false,
                });
                used = 0;
            }
            used += FILE_COST;
            let mut part = RangeSet::new();
            while used + RANGE_COST <= BATCH_BUDGET {
                let Some((s, e)) = ranges.next() else { break };
                part.insert_range(s, e);
                used += RANGE_COST;
            }
            cur.push(HaveFile {
                file,
                verified: part,
            });
        }
    }
    out.push(Message::Have {
        files: cur,
        last: true,
    });
    out
}

/// Size of the binary chunk header on data streams: its fields and the tag that seals them
/// (`crate::session::ChunkSealer`).
pub const CHUNK_HEADER_LEN: usize = CHUNK_FIELDS_LEN + 32;
/// Size of the chunk header's fields ([`ChunkHeader::encode`]).
pub const CHUNK_FIELDS_LEN: usize = 64;
/// Magic opening every chunk header: "LongHaul ChunK".
pub const CHUNK_MAGIC: [u8; 4] = *b"LHCK";

/// The header that precedes each chunk's bytes on a data stream (all integers big-endian):
///
/// ```text
/// offset  size  field
///      0     4  magic     b"LHCK"
///      4     4  file      file id (u32)
///      8     8  chunk     chunk index (u64)
///     16     8  offset    byte offset in the file (u64) = chunk × chunk_size
///     24     4  len       payload length (u32), 1 ..= 64 MiB; this many bytes follow the header
///     28     4  reserved  must be zero
///     32    32  hash      BLAKE3 of the payload
///     64    32  tag       keyed BLAKE3 over the stream, its sequence number and bytes 0..64
/// ```
///
/// This type is the fields (bytes 0..64); `crate::session::ChunkSealer` and `ChunkOpener` add and
/// check the tag.
///
/// Offset and length are redundant with the file's [`ChunkPlan`]; the receiver checks them
/// ([`ChunkHeader::check_plan`]) so that a confused sender is caught before any byte is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// File id.
    pub file: u32,
    /// Chunk index.
    pub chunk: u64,
    /// Byte offset in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
    /// BLAKE3 of the payload.
    pub hash: Digest,
}

impl ChunkHeader {
    /// Serialises the header's fields (the tag is the sealer's).
    pub fn encode(&self) -> [u8; CHUNK_FIELDS_LEN] {
        let mut b = [0u8; CHUNK_FIELDS_LEN];
        b[0..4].copy_from_slice(&CHUNK_MAGIC);
        b[4..8].copy_from_slice(&self.file.to_be_bytes());
        b[8..16].copy_from_slice(&self.chunk.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset.to_be_bytes());
        b[24..28].copy_from_slice(&self.len.to_be_bytes());
        b[32..64].copy_from_slice(&self.hash.0);
        b
    }

    /// Parses and checks a header: magic, reserved bytes, a length in `1..=MAX_CHUNK`, and a chunk that
    /// lies within [`MAX_FILE_SIZE`]. The payload length is safe to allocate or read once this returns.
    pub fn decode(b: &[u8; CHUNK_FIELDS_LEN]) -> Result<Self, WireError> {
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let be64 = |i: usize| (u64::from(be32(i)) << 32) | u64::from(be32(i + 4));
        if b[0..4] != CHUNK_MAGIC {
            return Err(WireError::BadChunkMagic);
        }
        if be32(28) != 0 {
            return Err(WireError::BadChunkHeader("reserved bytes are not zero"));
        }
        let len = be32(24);
        if len == 0 || u64::from(len) > MAX_CHUNK {
            return Err(WireError::BadChunkHeader("length not in 1 ..= 64 MiB"));
        }
        let offset = be64(16);
        if offset.saturating_add(u64::from(len)) > MAX_FILE_SIZE {
            return Err(WireError::BadChunkHeader(
                "chunk ends beyond the 1 PiB file limit",
            ));
        }
        let mut hash = [0u8; 32];
        hash.copy_from_slice(&b[32..64]);
        Ok(Self {
            file: be32(4),
            chunk: be64(8),
            offset,
            len,
            hash: Digest(hash),
        })
    }

    /// Checks the header against the file's plan: the chunk exists and offset and length are the plan's.
    pub fn check_plan(&self, plan: &ChunkPlan) -> Result<(), WireError> {
        match plan.chunk(self.chunk) {
            Some(span) if span.offset == self.offset && span.len == self.len => Ok(()),
            _ => Err(WireError::ChunkMismatch {
                file: self.file,
                chunk: self.chunk,
                offset: self.offset,
                len: self.len,
            }),
        }
    }

    /// Whether `payload` is the chunk this header announced (its BLAKE3 matches).
    pub fn matches(&self, payload: &[u8]) -> bool {
        payload.len() == self.len as usize && crate::digest::hash_chunk(payload) == self.hash
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::digest::hash_chunk;
    use crate::manifest::{Entry, EntryKind};
    use crate::ranges::tests::Rng;

    const MIB: u64 = 1 << 20;

    /// The first plain frame of `buf`, through the one codec.
    fn decode_frame(buf: &[u8]) -> Result<Option<(Message, usize)>, WireError> {
        frame::decode(buf, None)
    }

    fn plan(streams: u32, chunk_size: u64, rtt_ns: u64, rate_bps: u64) -> Message {
        Message::Plan {
            streams,
            chunk_size,
            rtt_ns,
            rate_bps,
            pace_auto_bps: None,
            fast_start: false,
            transport: Transport::Tcp,
            controller: None,
        }
    }

    /// Finding 7 and 9 of issue 11: a plan whose chunk buffers exceed the memory limit, or whose rtt or
    /// rate are out of range, is refused on receipt, naming the field.
    #[test]
    fn plans_beyond_the_memory_limit_or_numeric_ranges_are_refused() {
        for (m, needle) in [
            (plan(256, 64 * MIB, 0, 0), "over the 512 MiB limit"),
            (plan(9, 32 * MIB, 0, 0), "over the 512 MiB limit"),
            (plan(4, MIB, u64::MAX, 0), "rtt"),
            (plan(4, MIB, MAX_RTT_NS + 1, 0), "rtt"),
            (plan(4, MIB, 0, u64::MAX), "rate"),
            (plan(MAX_STREAMS + 1, MIB, 0, 0), "streams"),
            (plan(4, 3 * MIB, 0, 0), "chunk"),
        ] {
            let err = m.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
            let frame = m.encode_frame();
            assert!(decode_frame(&frame).is_err(), "{m:?} decodes");
        }
        // The limits themselves are inside.
        for m in [
            plan(MAX_STREAMS, MIB, MAX_RTT_NS, MAX_RATE_BPS),
            plan(8, 32 * MIB, 0, 0),
            plan(4, 64 * MIB, 120_000_000, 10_000_000_000),
        ] {
            m.validate().unwrap();
        }
    }

    /// A plan of 0 streams (a small send, its files on the control connection) is a TCP plan,
    /// still within the chunk and rate bounds; an inline chunk carries at most INLINE_LIMIT bytes.
    #[test]
    fn a_small_send_plans_no_streams_and_inlines_at_most_its_limit() {
        plan(0, MIB, 120_000_000, 0).validate().unwrap();
        let Message::Plan {
            chunk_size, rtt_ns, ..
        } = plan(0, MIB, 0, 0)
        else {
            unreachable!()
        };
        let udp = Message::Plan {
            streams: 0,
            chunk_size,
            rtt_ns,
            rate_bps: 0,
            pace_auto_bps: None,
            fast_start: false,
            transport: Transport::Quic,
            controller: None,
        };
        let err = udp.validate().unwrap_err().to_string();
        assert!(err.contains("0 streams"), "{err}");
        assert!(plan(0, 3 * MIB, 0, 0).validate().is_err());
        let inline = |len: u64| Message::ChunkInline {
            file: 1,
            chunk: 0,
            data: vec![7; len as usize],
        };
        let m = inline(INLINE_LIMIT);
        let frame = m.encode_frame();
        assert!(frame.len() <= MAX_FRAME_LEN, "{} bytes", frame.len());
        assert_eq!(decode_frame(&frame).unwrap().unwrap().0, m);
        let big = inline(INLINE_LIMIT + 1);
        assert!(
            big.validate()
                .unwrap_err()
                .to_string()
                .contains("inline chunk")
        );
        assert!(decode_frame(&big.encode_frame()).is_err());
        // The bytes are base64 text: anything else is refused.
        assert!(matches!(
            Message::from_json(
                br#"{"type":"chunk_inline","file":1,"chunk":0,"data":"not base64!"}"#
            ),
            Err(WireError::BadMessage(_))
        ));
    }

    /// A fast start is sized by the rate: a plan asking for one with no rate (a window sized by
    /// nothing), or with --pace auto (two answers to one question), is refused on the wire.
    #[test]
    fn a_fast_start_plan_needs_a_rate() {
        let fast = |rate_bps, pace_auto_bps| Message::Plan {
            streams: 4,
            chunk_size: MIB,
            rtt_ns: 120_000_000,
            rate_bps,
            pace_auto_bps,
            fast_start: true,
            transport: Transport::Tcp,
            controller: None,
        };
        for m in [fast(0, None), fast(1_930_000_000, Some(2_000_000_000))] {
            let err = m.validate().unwrap_err().to_string();
            assert!(err.contains("--dedicated"), "{err}");
            assert!(decode_frame(&m.encode_frame()).is_err(), "{m:?} decodes");
        }
        fast(1_930_000_000, None).validate().unwrap();
    }

    /// A server's --path-rate is a rate a client can pace at: 0 (which would pace nothing) and
    /// figures past the protocol's ceiling are refused on the wire, before a plan is made of them.
    #[test]
    fn a_servers_path_rate_is_a_rate_to_pace_at() {
        let challenge = |path_rate_bps| Message::AuthChallenge {
            server_nonce: [4; 32],
            server_proof: hash_chunk(b"p"),
            inline: true,
            cookie: None,
            early_digest: true,
            path_rate_bps,
        };
        for b in [0, 999, MAX_RATE_BPS + 1, u64::MAX] {
            let m = challenge(Some(b));
            let err = m.validate().unwrap_err().to_string();
            assert!(err.contains("--path-rate"), "{err}");
            assert!(decode_frame(&m.encode_frame()).is_err(), "{m:?} decodes");
        }
        for ok in [None, Some(1_000), Some(1_930_000_000), Some(MAX_RATE_BPS)] {
            challenge(ok).validate().unwrap();
        }
    }

    /// A UDP plan names one of the QUIC controllers (or none), and none of the kernel TCP's
    /// steering; a TCP plan names no controller.
    #[test]
    fn a_udp_plan_names_a_quic_controller_and_no_tcp_steering() {
        let udp = |controller: Option<&str>, pace_auto_bps, fast_start| Message::Plan {
            streams: 4,
            chunk_size: MIB,
            rtt_ns: 120_000_000,
            rate_bps: 1_000_000_000,
            pace_auto_bps,
            fast_start,
            transport: Transport::Quic,
            controller: controller.map(str::to_string),
        };
        for (m, needle) in [
            (udp(Some("bbr2"), None, false), "not \"bbr2\""),
            (udp(Some(&"x".repeat(5000)), None, false), "controllers are"),
            (udp(None, Some(900_000_000), false), "paces itself"),
            (udp(Some("bbr"), None, true), "paces itself"),
        ] {
            let err = m.validate().unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
            assert!(err.len() < 200, "{err}");
            assert!(decode_frame(&m.encode_frame()).is_err(), "{m:?} decodes");
        }
        let Message::Plan { transport, .. } = &mut (plan(4, MIB, 0, 0)) else {
            unreachable!()
        };
        assert_eq!(*transport, Transport::Tcp);
        let mut tcp_with_controller = plan(4, MIB, 0, 0);
        if let Message::Plan { controller, .. } = &mut tcp_with_controller {
            *controller = Some("bbr".into());
        }
        assert!(tcp_with_controller.validate().is_err());
        for c in QUIC_CONTROLLERS {
            udp(Some(c), None, false).validate().unwrap();
        }
        udp(None, None, false).validate().unwrap();
        // TCP plans look as they did to an older peer: no transport, no controller.
        let json = String::from_utf8(plan(4, MIB, 0, 0).encode_frame()[4..].to_vec()).unwrap();
        assert!(
            !json.contains("transport") && !json.contains("controller"),
            "{json}"
        );
    }

    fn have(file: u32, ranges: &[(u64, u64)]) -> HaveFile {
        let mut verified = RangeSet::new();
        for &(s, e) in ranges {
            verified.insert_range(s, e);
        }
        HaveFile { file, verified }
    }

    /// Finding 7: resume state is checked against the sender's manifest (file 0: 10 chunks, file 1:
    /// not a regular file) and bounded in total.
    #[test]
    fn have_is_checked_against_the_manifest_and_bounded() {
        let chunks = |id: u32| (id == 0).then_some(10);
        let mut c = HaveCollector::new(10);
        c.add(&[have(0, &[(0, 3), (5, 10)])], chunks).unwrap();
        c.add(&[have(0, &[(3, 4)])], chunks).unwrap();
        let got = c.finish();
        assert_eq!(got[&0].len(), 9);

        let err = HaveCollector::new(10)
            .add(&[have(1, &[(0, 1)])], chunks)
            .unwrap_err();
        assert!(
            err.to_string().contains("not a file of the manifest"),
            "{err}"
        );
        let err = HaveCollector::new(10)
            .add(&[have(7, &[(0, 1)])], chunks)
            .unwrap_err();
        assert!(
            err.to_string().contains("not a file of the manifest"),
            "{err}"
        );
        let err = HaveCollector::new(10)
            .add(&[have(0, &[(0, 11)])], chunks)
            .unwrap_err();
        assert!(err.to_string().contains("beyond its 10 chunks"), "{err}");
        let err = HaveCollector::new(10)
            .add(&[have(0, &[(u64::MAX - 1, u64::MAX)])], chunks)
            .unwrap_err();
        assert!(err.to_string().contains("beyond"), "{err}");

        // Endless empty `have`s, or the same ranges again and again, run out of budget.
        let mut c = HaveCollector::new(10);
        let err = (0..1000)
            .find_map(|_| c.add(&[], chunks).err())
            .expect("budget runs out");
        assert!(
            err.to_string().contains("larger than the manifest allows"),
            "{err}"
        );
        let mut c = HaveCollector::new(10);
        assert!((0..1000).any(|_| c.add(&[have(0, &[(0, 1), (2, 3)])], chunks).is_err()));

        // An honest resume state, as `have_messages` splits it, always fits.
        let mut full = RangeSet::new();
        for i in (0..20_000).step_by(2) {
            full.insert(i);
        }
        let mut c = HaveCollector::new(20_000);
        for m in have_messages(&[(0, &full)]) {
            let Message::Have { files, .. } = m else {
                unreachable!()
            };
            c.add(&files, |id| (id == 0).then_some(20_000)).unwrap();
        }
        assert_eq!(c.finish()[&0].len(), 10_000);
    }

    fn entry(id: u32, path: &str) -> ManifestEntry {
        ManifestEntry {
            id,
            entry: Entry {
                path: RelPath::parse(path).unwrap(),
                kind: EntryKind::File { size: 5 },
                mode: 0o644,
                mtime_ns: 1_700_000_000_000_000_000,
            },
        }
    }

    /// One message of every kind, for round-trip and mutation tests.
    pub(crate) fn samples() -> Vec<Message> {
        let mut verified = RangeSet::new();
        verified.insert_range(0, 4);
        verified.insert(9);
        vec![
            Message::TransferHello {
                version: TRANSFER_VERSION,
                direction: Direction::Get,
                client_nonce: [3; 32],
                ticket: None,
                early_digest: true,
            },
            Message::AuthChallenge {
                server_nonce: [4; 32],
                server_proof: hash_chunk(b"p"),
                inline: true,
                cookie: Some(DataCookie([5; 16])),
                early_digest: true,
                path_rate_bps: Some(1_930_000_000),
            },
            Message::AuthResponse {
                client_proof: hash_chunk(b"q"),
            },
            Message::AuthOk { cookie: [9; 16] },
            Message::Request {
                paths: vec![RelPath::parse("data/run 1").unwrap()],
            },
            Message::Plan {
                streams: 8,
                chunk_size: 16 * MIB,
                rtt_ns: 120_000_000,
                rate_bps: 10_000_000_000,
                pace_auto_bps: Some(980_000_000),
                fast_start: false,
                transport: Transport::Tcp,
                controller: None,
            },
            Message::SendTo {
                dest: Some(RelPath::parse("incoming").unwrap()),
                overwrite: false,
                fsync: true,
                stripe: None,
            },
            Message::SendTo {
                dest: None,
                overwrite: false,
                fsync: false,
                stripe: Some(crate::stripe::Stripe {
                    run: crate::stripe::RunId([5; 16]),
                    index: 1,
                    count: 4,
                    chunk_size: 8 * MIB,
                }),
            },
            Message::ManifestBatch {
                entries: vec![entry(0, "ünï/cödé"), entry(1, "b")],
                last: true,
            },
            Message::Have {
                files: vec![HaveFile { file: 0, verified }],
                last: true,
            },
            Message::ChunkVerdict {
                file: 0,
                chunk: 7,
                ok: false,
            },
            Message::ChunkInline {
                file: 1,
                chunk: 0,
                data: b"abc".to_vec(),
            },
            Message::FileDone {
                file: 1,
                digest: hash_chunk(b"d"),
            },
            Message::FileVerified { file: 1 },
            Message::FileFailed {
                file: 2,
                reason: "No space left on device".into(),
            },
            Message::Done {
                files: 3,
                bytes: 10,
            },
            Message::Error {
                message: "wrong key".into(),
            },
            Message::TransferHello {
                version: TRANSFER_VERSION,
                direction: Direction::Send,
                client_nonce: [3; 32],
                ticket: Some(TicketId([5; 16])),
                early_digest: false,
            },
            Message::Plan {
                streams: 4,
                chunk_size: 8 * MIB,
                rtt_ns: 120_000_000,
                rate_bps: 1_000_000_000,
                pace_auto_bps: None,
                fast_start: false,
                transport: Transport::Quic,
                controller: Some("bbr".into()),
            },
        ]
    }

    #[test]
    fn every_message_round_trips_through_a_frame() {
        for m in samples() {
            let f = m.encode_frame();
            let (back, used) = decode_frame(&f).unwrap().unwrap();
            assert_eq!(back, m);
            assert_eq!(used, f.len());
            // Any proper prefix is "need more", never an error or a message.
            for cut in 0..f.len() {
                assert_eq!(decode_frame(&f[..cut]), Ok(None), "{m:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn kind_is_the_json_type() {
        for m in samples() {
            let v: serde_json::Value = serde_json::to_value(&m).unwrap();
            assert_eq!(v["type"].as_str(), Some(m.kind()), "{m:?}");
        }
    }

    #[test]
    fn wire_shape_is_stable() {
        let m = Message::ChunkVerdict {
            file: 3,
            chunk: 1,
            ok: true,
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"type":"chunk_verdict","file":3,"chunk":1,"ok":true}"#
        );
        let hello = serde_json::to_string(&samples()[0]).unwrap();
        assert!(hello.starts_with(
            r#"{"type":"transfer_hello","version":2,"direction":"get","client_nonce":"0303"#
        ));
    }

    #[test]
    fn hostile_messages_are_refused() {
        let bad = |json: &str| Message::from_json(json.as_bytes()).unwrap_err();
        assert!(matches!(
            bad(r#"{"type":"format_disk"}"#),
            WireError::BadMessage(_)
        ));
        assert!(matches!(
            bad(r#"{"type":"request","paths":["../etc"]}"#),
            WireError::BadMessage(_)
        ));
        assert!(matches!(
            bad(r#"{"type":"request","paths":[]}"#),
            WireError::Invalid(_)
        ));
        assert!(matches!(
            bad(r#"{"type":"plan","streams":257,"chunk_size":1048576}"#),
            WireError::Invalid(_)
        ));
        assert!(matches!(
            bad(r#"{"type":"plan","streams":4,"chunk_size":1000}"#),
            WireError::Invalid(_)
        ));
        assert!(matches!(
            bad(r#"{"type":"auth_ok","cookie":"00"}"#),
            WireError::BadMessage(_)
        ));
        assert!(matches!(
            bad(r#"{"type":"have","files":[{"file":1,"verified":[[5,2]]}],"last":true}"#),
            WireError::BadMessage(_)
        ));
        let long = format!(
            r#"{{"type":"error","message":"{}"}}"#,
            "x".repeat(MAX_TEXT + 1)
        );
        assert!(matches!(bad(&long), WireError::Invalid(_)));
        let escape = r#"{"type":"manifest_batch","last":true,"entries":[{"id":1,"entry":{"path":"l","kind":{"type":"symlink","target":"../x"},"mode":511,"mtime_ns":0}}]}"#;
        assert!(matches!(bad(escape), WireError::Entry(_)));
        let mut frame = (MAX_FRAME_LEN as u32 + 1).to_be_bytes().to_vec();
        frame.push(b'{');
        assert_eq!(
            decode_frame(&frame),
            Err(WireError::FrameTooLarge(MAX_FRAME_LEN + 1))
        );
        assert_eq!(decode_frame(&[0, 0, 0, 0]), Err(WireError::EmptyFrame));
    }

    #[test]
    fn manifest_batches_fit_in_frames_and_keep_order() {
        let mut b = ManifestBatcher::new();
        let mut frames = Vec::new();
        for i in 0..3000 {
            let path = format!("dir/{}-{i}", "n".repeat(200));
            if let Some(m) = b.push(entry(i, &path)) {
                frames.push(m);
            }
        }
        frames.push(b.finish());
        assert!(frames.len() > 1);
        let mut ids = Vec::new();
        for (k, m) in frames.iter().enumerate() {
            assert!(m.encode_frame().len() <= MAX_FRAME_LEN + 4);
            let Message::ManifestBatch { entries, last } = m else {
                panic!()
            };
            assert_eq!(*last, k == frames.len() - 1);
            ids.extend(entries.iter().map(|e| e.id));
        }
        assert_eq!(ids, (0..3000).collect::<Vec<_>>());
    }

    #[test]
    fn have_messages_split_large_range_sets() {
        // Every other chunk of a big file: far more ranges than one frame holds.
        let mut sparse = RangeSet::new();
        for i in (0..40_000u64).map(|i| i * 2 + (1 << 29)) {
            sparse.insert(i);
        }
        let small = RangeSet::full(3);
        let msgs = have_messages(&[(1, &small), (2, &sparse)]);
        assert!(msgs.len() > 1);
        let mut merged: std::collections::BTreeMap<u32, RangeSet> = Default::default();
        for (k, m) in msgs.iter().enumerate() {
            assert!(m.encode_frame().len() <= MAX_FRAME_LEN + 4);
            let Message::Have { files, last } = m else {
                panic!()
            };
            assert_eq!(*last, k == msgs.len() - 1);
            for f in files {
                let set = merged.entry(f.file).or_default();
                for (s, e) in f.verified.ranges() {
                    set.insert_range(s, e);
                }
            }
        }
        assert_eq!(merged[&1], small);
        assert_eq!(merged[&2], sparse);
        assert_eq!(
            have_messages(&[]),
            vec![Message::Have {
                files: vec![],
                last: true
            }]
        );
    }

    fn header() -> ChunkHeader {
        ChunkHeader {
            file: 7,
            chunk: 2,
            offset: 2 * MIB,
            len: 1000,
            hash: hash_chunk(b"payload"),
        }
    }

    #[test]
    fn chunk_header_round_trips_and_checks_the_plan() {
        let h = header();
        let b = h.encode();
        assert_eq!(&b[0..4], b"LHCK");
        assert_eq!(ChunkHeader::decode(&b), Ok(h));
        let plan = ChunkPlan::new(2 * MIB + 1000, MIB).unwrap();
        assert_eq!(h.check_plan(&plan), Ok(()));
        let longer = ChunkPlan::new(3 * MIB, MIB).unwrap();
        assert!(matches!(
            h.check_plan(&longer),
            Err(WireError::ChunkMismatch { .. })
        ));
        let shorter = ChunkPlan::new(2 * MIB, MIB).unwrap();
        assert!(matches!(
            h.check_plan(&shorter),
            Err(WireError::ChunkMismatch { .. })
        ));
        assert!(
            !h.matches(b"payload"),
            "payload of 7 bytes, header says 1000"
        );
        let exact = ChunkHeader { len: 7, ..h };
        assert!(exact.matches(b"payload"));
        assert!(!exact.matches(b"paylaod"));
    }

    #[test]
    fn chunk_header_rejects_bad_fields() {
        let good = header().encode();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            ChunkHeader::decode(&b)
        };
        assert_eq!(with(0, b'X'), Err(WireError::BadChunkMagic));
        assert!(matches!(with(31, 1), Err(WireError::BadChunkHeader(_))));
        let mut zero_len = good;
        zero_len[24..28].copy_from_slice(&0u32.to_be_bytes());
        assert!(matches!(
            ChunkHeader::decode(&zero_len),
            Err(WireError::BadChunkHeader(_))
        ));
        let mut huge = good;
        huge[24..28].copy_from_slice(&((64 << 20) + 1u32).to_be_bytes());
        assert!(matches!(
            ChunkHeader::decode(&huge),
            Err(WireError::BadChunkHeader(_))
        ));
        let mut far = good;
        far[16..24].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(matches!(
            ChunkHeader::decode(&far),
            Err(WireError::BadChunkHeader(_))
        ));
    }

    /// The fuzz target's invariants on a seeded corpus, so they hold on every `cargo test`: mutated frames
    /// and headers never panic, and whatever is accepted round-trips.
    #[test]
    fn seeded_mutations_never_panic_and_round_trip() {
        let valid: Vec<u8> = samples().iter().flat_map(Message::encode_frame).collect();
        let mut rng = Rng(0xC0FF_EE00_1234_5678);
        for round in 0..2_000 {
            let mut bytes = valid.clone();
            for _ in 0..rng.below(4) + 1 {
                let i = rng.below(bytes.len() as u64) as usize;
                match rng.below(3) {
                    0 => bytes[i] ^= 1 << rng.below(8),
                    1 => bytes.insert(i, rng.next() as u8),
                    _ => bytes.truncate(i.max(1)),
                }
            }
            let mut rest = &bytes[..];
            while let Ok(Some((m, used))) = decode_frame(rest) {
                assert_eq!(Message::from_json(&m.encode_frame()[4..]), Ok(m));
                rest = &rest[used..];
            }
            let mut h = header().encode();
            h[rng.below(64) as usize] ^= 1 << rng.below(8);
            if round % 7 == 0 {
                h.iter_mut().for_each(|b| *b = rng.next() as u8);
            }
            if let Ok(dec) = ChunkHeader::decode(&h) {
                assert_eq!(dec.encode(), h);
            }
        }
    }
}
