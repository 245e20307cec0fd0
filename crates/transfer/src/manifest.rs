//! What a transfer moves (the manifest entries) and how files are cut into chunks.
//!
//! The sender walks its sources into [`Entry`] values (directories, regular files, symlinks) and sends
//! them in manifest batches. Regular files are cut by a [`ChunkPlan`] into fixed-size chunks; a chunk is
//! the unit of hashing, verification, scheduling across streams and resume. The chunk size is one per
//! transfer, chosen by [`choose_chunk_size`] so that per-chunk overhead is negligible and memory stays
//! within [`MEMORY_LIMIT`] whatever the file sizes.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::relpath::{PathError, RelPath, check_symlink_target};
use crate::reserved::reserved_component;

/// Smallest chunk: 1 MiB. Per chunk the protocol spends a 64-byte header, a ~60-byte verdict and a
/// ~150-byte journal line, 0.03 % of a 1 MiB chunk; smaller chunks would buy nothing but overhead.
pub const MIN_CHUNK: u64 = 1 << 20;
/// Largest chunk: 64 MiB. Larger chunks lengthen the tail of a transfer (each stream finishes its last
/// chunk alone) and the work lost when a chunk fails verification.
pub const MAX_CHUNK: u64 = 64 << 20;
/// Chunk buffers held per stream: one being read from disk while the previous one is on the wire, so
/// reading overlaps sending. The receiver, likewise, hashes one chunk while the next one arrives.
pub const BUFFERS_PER_STREAM: u64 = 2;
/// The bound on chunk-buffer memory of one side of a transfer: 512 MiB (issue 4's target).
pub const MEMORY_LIMIT: u64 = 512 << 20;
/// Most data streams of one transfer: at [`MIN_CHUNK`] and [`BUFFERS_PER_STREAM`], 256 streams fill
/// [`MEMORY_LIMIT`] exactly. (At 100 Gbit/s and 300 ms, 256 streams need windows of 15 MiB each.)
pub const MAX_STREAMS: u32 = 256;
/// Largest file accepted: 2^50 bytes (1 PiB), so chunk indices fit in 30 bits at 1 MiB and every
/// offset computation fits in `u64` with room to spare.
pub const MAX_FILE_SIZE: u64 = 1 << 50;

/// One item of the tree being transferred.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Where it lives, relative to the transfer root.
    pub path: RelPath,
    /// What it is.
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`); the type bits are carried by `kind`.
    pub mode: u32,
    /// Modification time, nanoseconds since the Unix epoch (negative before 1970).
    pub mtime_ns: i64,
}

/// The kinds of entry a transfer carries. Devices, FIFOs and sockets are skipped by the sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryKind {
    /// A directory (created before anything inside it).
    Dir,
    /// A regular file of `size` bytes.
    File {
        /// Length in bytes.
        size: u64,
    },
    /// A symbolic link, copied as a link and never followed.
    Symlink {
        /// The link's target as stored (relative, inside the root).
        target: String,
    },
}

/// An entry that breaks the rules, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// A symlink target that could leave the root.
    #[error(transparent)]
    Path(#[from] PathError),
    /// Mode bits beyond the permission bits.
    #[error("{path}: mode {mode:#o} has bits beyond 0o7777")]
    Mode {
        /// The entry.
        path: RelPath,
        /// The mode received.
        mode: u32,
    },
    /// A file larger than [`MAX_FILE_SIZE`].
    #[error("{path}: size {size} exceeds the 1 PiB limit")]
    TooBig {
        /// The entry.
        path: RelPath,
        /// The size received.
        size: u64,
    },
}

impl Entry {
    /// Checks the fields a path type cannot: symlink targets, mode bits, file size.
    pub fn validate(&self) -> Result<(), EntryError> {
        if self.mode & !0o7777 != 0 {
            return Err(EntryError::Mode {
                path: self.path.clone(),
                mode: self.mode,
            });
        }
        match &self.kind {
            EntryKind::Dir => Ok(()),
            EntryKind::File { size } if *size > MAX_FILE_SIZE => Err(EntryError::TooBig {
                path: self.path.clone(),
                size: *size,
            }),
            EntryKind::File { .. } => Ok(()),
            EntryKind::Symlink { target } => Ok(check_symlink_target(&self.path, target)?),
        }
    }

    /// The file size, for regular files.
    pub fn file_size(&self) -> Option<u64> {
        match self.kind {
            EntryKind::File { size } => Some(size),
            _ => None,
        }
    }
}

/// The setuid, setgid and sticky bits.
pub const SPECIAL_BITS: u32 = 0o7000;

/// What the receiver makes of the permission bits a peer sends (the sender's `st_mode & 0o7777`).
///
/// The rule, as tar and rsync apply it for a non-root user: the read/write/execute bits are kept minus
/// the receiver's umask (so with the usual 022 nobody else gains write access), and the setuid, setgid
/// and sticky bits are dropped unless the *receiver* asked to keep them. Neither field ever comes from
/// the peer: a key holder cannot make a root server create setuid files, nor a server make a client's
/// files group-writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModePolicy {
    /// Permission bits cleared from every mode (the receiving process's umask).
    pub umask: u32,
    /// Keep setuid, setgid and sticky (`longhaul server --keep-special-bits`, `get --keep-special-bits`).
    pub keep_special_bits: bool,
}

impl Default for ModePolicy {
    /// The common umask 022, special bits dropped.
    fn default() -> Self {
        Self {
            umask: 0o022,
            keep_special_bits: false,
        }
    }
}

impl ModePolicy {
    /// The mode to give an entry the peer sent with `sent`.
    pub fn apply(&self, sent: u32) -> u32 {
        let special = if self.keep_special_bits {
            sent & SPECIAL_BITS
        } else {
            0
        };
        special | (sent & 0o777 & !self.umask)
    }
}

/// Most entries in one transfer: 2^21 (about two million). The receiver keeps every entry in memory
/// (about 200 bytes each, so at most ~400 MiB of control-plane state); larger trees are sent in parts.
pub const MAX_ENTRIES: usize = 1 << 21;

/// An entry with the id the sender gave it; chunk headers and verdicts name files by this id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Unique within the transfer.
    pub id: u32,
    /// The entry.
    pub entry: Entry,
}

/// A manifest that breaks the tree rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The entry itself is invalid.
    #[error(transparent)]
    Entry(#[from] EntryError),
    /// Two entries with one id.
    #[error("duplicate file id {0} in manifest")]
    DuplicateId(u32),
    /// Two entries with one path.
    #[error("duplicate path in manifest: {0}")]
    DuplicatePath(RelPath),
    /// An entry whose parent is not a directory listed before it.
    #[error("{0}: its parent directory is not in the manifest before it")]
    ParentNotDir(RelPath),
    /// More than [`MAX_ENTRIES`] entries.
    #[error("manifest has more than {MAX_ENTRIES} entries")]
    TooMany,
    /// `get`: an entry that is not one of the requested sources' names nor under one.
    #[error(
        "the server listed {path:?}, which was not requested (asked for {}); refused the whole \
transfer, nothing was written",
        .requested.join(", ")
    )]
    NotRequested {
        /// The entry.
        path: String,
        /// The names asked for.
        requested: Vec<String>,
    },
    /// A path with a name the receiver reserves for its journal or temporaries
    /// ([`crate::reserved::is_reserved_name`]).
    #[error("{path}: {name:?} is reserved for the receiver's journal and temporary files")]
    Reserved {
        /// The entry.
        path: RelPath,
        /// The reserved component.
        name: String,
    },
}

/// The manifest as accumulated from batches, with the tree rules enforced on every addition:
/// unique ids, unique paths, no reserved names (the receiver's journal and temporaries), and every
/// non-top-level entry's parent is a directory that came earlier.
/// The last rule means the receiver can create entries in manifest order, and that nothing is ever placed
/// *under* a file or a symlink (a symlink as a parent would redirect the child outside the tree).
#[derive(Debug, Default)]
pub struct Manifest {
    entries: Vec<ManifestEntry>,
    by_id: HashMap<u32, usize>,
    by_path: HashMap<RelPath, usize>,
}

impl Manifest {
    /// An empty manifest.
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates and appends one entry.
    pub fn add(&mut self, e: ManifestEntry) -> Result<(), ManifestError> {
        e.entry.validate()?;
        if let Some(name) = reserved_component(&e.entry.path) {
            return Err(ManifestError::Reserved {
                name: name.to_string(),
                path: e.entry.path,
            });
        }
        if self.entries.len() >= MAX_ENTRIES {
            return Err(ManifestError::TooMany);
        }
        if self.by_id.contains_key(&e.id) {
            return Err(ManifestError::DuplicateId(e.id));
        }
        if self.by_path.contains_key(&e.entry.path) {
            return Err(ManifestError::DuplicatePath(e.entry.path));
        }
        if let Some(parent) = e.entry.path.parent() {
            let is_dir = self
                .by_path
                .get(&parent)
                .is_some_and(|&i| self.entries[i].entry.kind == EntryKind::Dir);
            if !is_dir {
                return Err(ManifestError::ParentNotDir(e.entry.path));
            }
        }
        let i = self.entries.len();
        self.by_id.insert(e.id, i);
        self.by_path.insert(e.entry.path.clone(), i);
        self.entries.push(e);
        Ok(())
    }

    /// The entry with this id.
    pub fn get(&self, id: u32) -> Option<&ManifestEntry> {
        self.by_id.get(&id).map(|&i| &self.entries[i])
    }

    /// All entries in manifest order.
    pub fn entries(&self) -> &[ManifestEntry] {
        &self.entries
    }

    /// The sizes of its regular files added up.
    pub fn total_bytes(&self) -> u64 {
        self.entries
            .iter()
            .filter_map(|e| e.entry.file_size())
            .fold(0, u64::saturating_add)
    }

    /// Regular files with their chunk plans, in manifest order (the scheduler's input).
    pub fn file_plans(&self, chunk_size: u64) -> Result<Vec<(u32, ChunkPlan)>, ChunkSizeError> {
        self.entries
            .iter()
            .filter_map(|e| e.entry.file_size().map(|size| (e.id, size)))
            .map(|(id, size)| Ok((id, ChunkPlan::new(size, chunk_size)?)))
            .collect()
    }
}

/// The rule of `get` (scp's CVE-2019-6111): each requested source lands in DEST under its own name
/// (`requested` holds those names), so every entry the server lists must be one of those names or lie
/// under one. Anything else (`.profile`, `.ssh/authorized_keys`, a sibling) is refused.
pub fn check_requested(path: &RelPath, requested: &[String]) -> Result<(), ManifestError> {
    let top = path.components().next().unwrap_or_default();
    if requested.iter().any(|n| n == top) {
        Ok(())
    } else {
        Err(ManifestError::NotRequested {
            path: path.to_string(),
            requested: requested.to_vec(),
        })
    }
}

/// Where a chunk lies in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSpan {
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes (only the last chunk may be shorter than the chunk size).
    pub len: u32,
}

/// How one file is cut: chunk `i` covers `[i × chunk_size, min((i+1) × chunk_size, size))`.
/// An empty file has no chunks; a file smaller than a chunk has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPlan {
    size: u64,
    chunk_size: u64,
}

/// A chunk size outside the rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chunk size {0} is not a power of two between 1 MiB and 64 MiB")]
pub struct ChunkSizeError(pub u64);

/// Checks that `chunk_size` is a power of two in `[MIN_CHUNK, MAX_CHUNK]`.
pub fn check_chunk_size(chunk_size: u64) -> Result<(), ChunkSizeError> {
    if chunk_size.is_power_of_two() && (MIN_CHUNK..=MAX_CHUNK).contains(&chunk_size) {
        Ok(())
    } else {
        Err(ChunkSizeError(chunk_size))
    }
}

impl ChunkPlan {
    /// The plan of a file of `size` bytes (at most [`MAX_FILE_SIZE`], see [`Entry::validate`]).
    pub fn new(size: u64, chunk_size: u64) -> Result<Self, ChunkSizeError> {
        check_chunk_size(chunk_size)?;
        Ok(Self { size, chunk_size })
    }

    /// File size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Chunk size in bytes.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// Number of chunks (0 for an empty file).
    pub fn count(&self) -> u64 {
        self.size.div_ceil(self.chunk_size)
    }

    /// Offset and length of chunk `i`, or `None` past the end.
    pub fn chunk(&self, i: u64) -> Option<ChunkSpan> {
        if i >= self.count() {
            return None;
        }
        let offset = i * self.chunk_size;
        let len = (self.size - offset).min(self.chunk_size);
        Some(ChunkSpan {
            offset,
            // At most MAX_CHUNK = 2^26, so the conversion is lossless.
            len: len as u32,
        })
    }
}

/// Chunk-buffer memory of one side: `streams × chunk × BUFFERS_PER_STREAM` bytes. It does not depend on
/// file sizes or counts. (Control-plane state, the manifest and the scheduler's range sets, is extra and
/// proportional to the number of entries, about 200 bytes each.)
pub fn memory_bound(streams: u32, chunk_size: u64) -> u64 {
    u64::from(streams) * chunk_size * BUFFERS_PER_STREAM
}

/// Chooses the chunk size for a transfer at `rate_bps` over `rtt_ns` with `streams` data streams
/// (`streams` is clamped to `1..=MAX_STREAMS`).
///
/// Reasoning: the ideal chunk is one stream's share of one round trip, `rate / 8 / streams × rtt`. That
/// is large enough that each chunk's verdict comes back while the stream is busy with the next one, and
/// small enough that an interrupted transfer loses about one RTT of work per stream. The result is rounded
/// *down* to a power of two and clamped to `[MIN_CHUNK, MAX_CHUNK]` and to the largest power of two that
/// keeps [`memory_bound`] within [`MEMORY_LIMIT`]. Example: 10 Gbit/s, 120 ms, 8 streams gives an ideal
/// of 18.75 MB, so 16 MiB chunks and 256 MiB of buffers.
pub fn choose_chunk_size(rate_bps: u64, rtt_ns: u64, streams: u32) -> u64 {
    let streams = streams.clamp(1, MAX_STREAMS);
    let ideal = u128::from(rate_bps) * u128::from(rtt_ns) / 8 / 1_000_000_000 / u128::from(streams);
    let memory_cap = MEMORY_LIMIT / (u64::from(streams) * BUFFERS_PER_STREAM);
    let cap = prev_power_of_two(memory_cap.min(MAX_CHUNK)).max(MIN_CHUNK);
    let ideal = u64::try_from(ideal).unwrap_or(u64::MAX);
    prev_power_of_two(ideal).clamp(MIN_CHUNK, cap)
}

/// Largest power of two ≤ `x` (1 for 0).
fn prev_power_of_two(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn plan_cuts_files_into_chunks() {
        let plan = ChunkPlan::new(10 * MIB + 5, 4 * MIB).unwrap();
        assert_eq!(plan.count(), 3);
        assert_eq!(
            plan.chunk(0),
            Some(ChunkSpan {
                offset: 0,
                len: 4 << 20
            })
        );
        assert_eq!(
            plan.chunk(1),
            Some(ChunkSpan {
                offset: 4 * MIB,
                len: 4 << 20
            })
        );
        assert_eq!(
            plan.chunk(2),
            Some(ChunkSpan {
                offset: 8 * MIB,
                len: (2 << 20) + 5
            })
        );
        assert_eq!(plan.chunk(3), None);
        // The chunks tile the file exactly.
        let total: u64 = (0..plan.count())
            .map(|i| u64::from(plan.chunk(i).unwrap().len))
            .sum();
        assert_eq!(total, plan.size());
    }

    #[test]
    fn empty_small_and_exact_files() {
        assert_eq!(ChunkPlan::new(0, MIB).unwrap().count(), 0);
        assert_eq!(ChunkPlan::new(0, MIB).unwrap().chunk(0), None);
        let small = ChunkPlan::new(1, MIB).unwrap();
        assert_eq!(small.count(), 1);
        assert_eq!(small.chunk(0), Some(ChunkSpan { offset: 0, len: 1 }));
        let exact = ChunkPlan::new(2 * MIB, MIB).unwrap();
        assert_eq!(exact.count(), 2);
        assert_eq!(exact.chunk(1).unwrap().len, 1 << 20);
        let huge = ChunkPlan::new(MAX_FILE_SIZE, MIN_CHUNK).unwrap();
        assert_eq!(huge.count(), 1 << 30);
        assert_eq!(
            huge.chunk((1 << 30) - 1).unwrap().offset,
            MAX_FILE_SIZE - MIB
        );
    }

    #[test]
    fn chunk_size_must_be_a_power_of_two_in_range() {
        for bad in [0, MIB / 2, 3 * MIB, 128 * MIB] {
            assert_eq!(ChunkPlan::new(1, bad), Err(ChunkSizeError(bad)));
        }
        assert!(ChunkPlan::new(1, 64 * MIB).is_ok());
    }

    #[test]
    fn chosen_chunk_sizes_follow_the_documented_rule() {
        // 10 Gbit/s, 120 ms, 8 streams: ideal 18.75 MB → 16 MiB.
        assert_eq!(choose_chunk_size(10_000_000_000, 120_000_000, 8), 16 * MIB);
        // Loopback (tiny RTT): the 1 MiB floor.
        assert_eq!(choose_chunk_size(40_000_000_000, 20_000, 4), MIB);
        // 100 Gbit/s, 300 ms, 1 stream: ideal 3.75 GB → the 64 MiB ceiling.
        assert_eq!(choose_chunk_size(100_000_000_000, 300_000_000, 1), 64 * MIB);
        // 100 Gbit/s, 300 ms, 16 streams: ideal 234 MB but memory allows 16 MiB per buffer.
        assert_eq!(
            choose_chunk_size(100_000_000_000, 300_000_000, 16),
            16 * MIB
        );
        assert_eq!(choose_chunk_size(0, 0, 0), MIB);
        assert_eq!(choose_chunk_size(u64::MAX, u64::MAX, u32::MAX), MIB);
    }

    #[test]
    fn memory_stays_within_the_limit_for_every_choice() {
        for streams in [1, 2, 3, 7, 8, 64, 100, 255, 256] {
            for rate in [1_000_000, 1_000_000_000, 10_000_000_000, 400_000_000_000] {
                for rtt in [10_000, 1_000_000, 120_000_000, 500_000_000] {
                    let c = choose_chunk_size(rate, rtt, streams);
                    assert!(check_chunk_size(c).is_ok(), "{c}");
                    assert!(memory_bound(streams, c) <= MEMORY_LIMIT, "{streams} × {c}");
                }
            }
        }
    }

    #[test]
    fn entries_are_validated() {
        let e = |kind, mode| Entry {
            path: RelPath::parse("a/link").unwrap(),
            kind,
            mode,
            mtime_ns: -5,
        };
        assert!(e(EntryKind::Dir, 0o755).validate().is_ok());
        assert!(e(EntryKind::File { size: 3 }, 0o4755).validate().is_ok());
        assert!(matches!(
            e(EntryKind::Dir, 0o40755).validate(),
            Err(EntryError::Mode { .. })
        ));
        let big = EntryKind::File {
            size: MAX_FILE_SIZE + 1,
        };
        assert!(matches!(
            e(big, 0o644).validate(),
            Err(EntryError::TooBig { .. })
        ));
        let escape = EntryKind::Symlink {
            target: "../../etc".into(),
        };
        assert!(matches!(
            e(escape, 0o777).validate(),
            Err(EntryError::Path(PathError::Escapes(_)))
        ));
        let json = serde_json::to_string(&e(EntryKind::File { size: 3 }, 0o644)).unwrap();
        assert_eq!(
            json,
            r#"{"path":"a/link","kind":{"type":"file","size":3},"mode":420,"mtime_ns":-5}"#
        );
    }

    fn me(id: u32, path: &str, kind: EntryKind) -> ManifestEntry {
        ManifestEntry {
            id,
            entry: Entry {
                path: RelPath::parse(path).unwrap(),
                kind,
                mode: 0o644,
                mtime_ns: 0,
            },
        }
    }

    #[test]
    fn reserved_names_are_refused_anywhere_in_a_path() {
        let mut m = Manifest::new();
        m.add(me(1, "d", EntryKind::Dir)).unwrap();
        for (id, bad) in [
            (2, ".longhaul-journal"),
            (3, ".lh-00000000.part"),
            (4, "d/.lh-0000abcd.part"),
        ] {
            let err = m.add(me(id, bad, EntryKind::File { size: 1 })).unwrap_err();
            assert!(matches!(err, ManifestError::Reserved { .. }), "{bad}");
            assert!(err.to_string().contains("is reserved"), "{err}");
        }
        m.add(me(5, "d/.lh-note.part", EntryKind::File { size: 1 }))
            .unwrap();
        assert_eq!(m.entries().len(), 2);
    }

    #[test]
    fn get_accepts_only_the_requested_names_and_what_lies_under_them() {
        let asked = vec!["a".to_string(), "run 7".to_string()];
        for ok in ["a", "a/b", "a/.profile", "run 7/x/y"] {
            assert_eq!(
                check_requested(&RelPath::parse(ok).unwrap(), &asked),
                Ok(())
            );
        }
        for bad in [
            ".profile",
            ".ssh/authorized_keys",
            "b",
            "ab",
            "run",
            "run 7x/y",
        ] {
            let err = check_requested(&RelPath::parse(bad).unwrap(), &asked).unwrap_err();
            assert!(matches!(err, ManifestError::NotRequested { .. }), "{bad}");
        }
        assert_eq!(
            check_requested(&RelPath::parse(".profile").unwrap(), &asked)
                .unwrap_err()
                .to_string(),
            "the server listed \".profile\", which was not requested (asked for a, run 7); refused \
the whole transfer, nothing was written"
        );
    }

    #[test]
    fn modes_follow_the_umask_and_special_bits_need_the_receivers_consent() {
        let default = ModePolicy::default();
        assert_eq!(default.apply(0o6755), 0o755);
        assert_eq!(default.apply(0o1777), 0o755);
        assert_eq!(default.apply(0o666), 0o644);
        assert_eq!(default.apply(0o640), 0o640);
        let strict = ModePolicy {
            umask: 0o077,
            keep_special_bits: false,
        };
        assert_eq!(strict.apply(0o777), 0o700);
        let keep = ModePolicy {
            umask: 0o022,
            keep_special_bits: true,
        };
        assert_eq!(keep.apply(0o6777), 0o6755);
        assert_eq!(keep.apply(0o1777), 0o1755);
    }

    #[test]
    fn manifest_enforces_tree_rules() {
        let mut m = Manifest::new();
        m.add(me(1, "d", EntryKind::Dir)).unwrap();
        m.add(me(2, "d/f", EntryKind::File { size: 3 * MIB }))
            .unwrap();
        m.add(me(3, "d/l", EntryKind::Symlink { target: "f".into() }))
            .unwrap();
        m.add(me(4, "top", EntryKind::File { size: 0 })).unwrap();
        assert_eq!(
            m.add(me(2, "d/g", EntryKind::Dir)),
            Err(ManifestError::DuplicateId(2))
        );
        assert!(matches!(
            m.add(me(5, "d/f", EntryKind::Dir)),
            Err(ManifestError::DuplicatePath(_))
        ));
        // Children of a file, of a symlink, or of a directory not (yet) listed are refused.
        for bad in ["d/f/x", "d/l/x", "e/x"] {
            assert!(
                matches!(
                    m.add(me(6, bad, EntryKind::Dir)),
                    Err(ManifestError::ParentNotDir(_))
                ),
                "{bad}"
            );
        }
        assert_eq!(m.entries().len(), 4);
        assert_eq!(m.get(3).unwrap().entry.path.as_str(), "d/l");
        let plans = m.file_plans(MIB).unwrap();
        assert_eq!(
            plans
                .iter()
                .map(|(id, p)| (*id, p.count()))
                .collect::<Vec<_>>(),
            vec![(2, 3), (4, 0)]
        );
    }
}
