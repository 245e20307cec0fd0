//! longhaul-transfer: the pure, sans-IO core of `longhaul send` and `longhaul get`. Everything a
//! disk-to-disk transfer decides lives here; everything it *does* (sockets, files, threads, the clock,
//! the RNG) lives in `longhaul_engine::transfer`, which drives these types. Depends on `longhaul-proto`
//! (framing constants), serde, serde_json, thiserror and blake3. Start at [`msg`], then read the
//! modules in the order a transfer meets them:
//!
//! - [`auth`]: key files, the mutual challenge–response that opens every connection, and the session
//!   keys it derives;
//! - [`msg`]: the control messages (JSON frames) and the binary chunk header of data streams;
//! - [`session`]: the authenticated session after the handshake (sealed frames and chunk headers,
//!   data-connection proofs);
//! - [`relpath`]: paths confined to the transfer root, and symlink targets that cannot leave it;
//! - [`manifest`]: entries (directories, files, symlinks), the tree rules, chunk plans, chunk size and
//!   the memory bound;
//! - [`ranges`]: compact sets of chunk indices;
//! - [`journal`]: the receiver's append-only resume journal;
//! - [`reserved`]: the names the receiver keeps for itself (the journal, temporaries);
//! - [`stripe`]: striped transfers: which pair of a run moves which chunks;
//! - [`schedule`]: the sender's work list, pulled by one thread per stream;
//! - [`digest`]: BLAKE3 chunk hashes and the end-to-end file digest;
//! - [`report`]: the events and the summary a transfer reports.
//!
//! The protocol, the formats and the memory bound are described in `docs/transfer.md`. No I/O,
//! threads, clock, randomness or libc (a `clippy.toml` bans the clock).

pub mod auth;
pub mod digest;
pub mod journal;
pub mod manifest;
pub mod msg;
pub mod ranges;
pub mod relpath;
pub mod report;
pub mod reserved;
pub mod schedule;
pub mod session;
pub mod stripe;

pub use auth::{AuthError, Key, MacKey, Role, SessionKeys};
pub use digest::{Digest, file_digest, hash_chunk};
pub use journal::{FileIdentity, Journal, Resume};
pub use manifest::{
    ChunkPlan, Entry, EntryKind, Manifest, ManifestEntry, choose_chunk_size, memory_bound,
};
pub use msg::{ChunkHeader, Direction, Message, WireError};
pub use ranges::RangeSet;
pub use relpath::{PathError, RelPath, check_symlink_target};
pub use schedule::{Announce, ScheduleError, Scheduler, Work};
pub use session::{ChunkOpener, ChunkSealer, FrameOpener, FrameSealer};
