//! The receiver's resume journal: which chunks of which file are already on disk and verified.
//!
//! One journal per destination transfer, kept next to the data as [`JOURNAL_NAME`](crate::reserved::JOURNAL_NAME). It is append-only
//! text, one record per line, and every line ends with a checksum of itself:
//!
//! ```text
//! longhaul-journal-v1 5b2c07d1
//! {"r":"file","id":0,"path":"a/big.dat","size":3145728,"mtime_ns":1700000000000000000,"mode":420,"chunk_size":1048576,"temp":"a/.lh-00000000.part"} 9f3a0c11
//! {"r":"chunk","id":0,"index":1,"hash":"…64 hex…"} 0e4d2a7b
//! {"r":"complete","id":0,"digest":"…64 hex…"} c1d2e3f4
//! ```
//!
//! The checksum is the first 8 hex digits of BLAKE3 over the text before the last space. That is the
//! format's base form ([`Journal::new`]); receivers write the keyed form ([`Journal::keyed`], header
//! `longhaul-journal-v3`), where the tag is a MAC (16 bytes of keyed BLAKE3 under a key derived from the
//! transfer key), so a journal written without the key is not trusted at all. A process killed
//! mid-append leaves a torn last line; a disk error may garble one. [`Journal::replay`] trusts the longest
//! prefix of complete (newline-terminated), well-checksummed, consistent lines and ignores everything
//! after the first line that is not, so a chunk is never taken as verified unless its whole record was
//! written. [`Journal::valid_len`] says where that prefix ends: the writer must truncate the file there
//! before appending, or new records would sit behind garbage that the next replay stops at.
//!
//! Ordering contract for the writer (the I/O layer): a `chunk` record is appended only after the chunk's
//! bytes were written to the temporary file (`pwrite`), and with `--fsync` after they were made durable
//! (`fdatasync`). Without `--fsync` resume is exact after a killed process or a cut path (the page cache
//! survives), but not after a power loss, where the journal may outlive the data it describes.
//! A `complete` record is appended after the file was verified and renamed into place.
//!
//! The journal is data the receiver reads back from disk, so it is never trusted to name what the
//! receiver touches: the temporary file of a record is *derived* ([`temp_path`]: `.lh-<16 hex>.part`
//! in the file's own directory, from the path and the identity) and a record whose `temp` field says anything else is inconsistent
//! (replay stops there); a record naming a reserved path
//! ([`is_reserved_name`](crate::reserved::is_reserved_name)) is inconsistent too; and the receiver
//! acts on a record only for a path of the current manifest with the same [`FileIdentity`]. So a forged
//! or planted journal can at worst make the receiver delete or continue the session's own temporaries.
//!
//! A stripe of a striped transfer ([`crate::stripe`]) keeps its own journal, which starts with a
//! `stripe` record (`{"r":"stripe","run":"…32 hex…","index":0,"count":3}`) and adds three records:
//! `dir` (a directory this stripe created: the stripe that puts the files in place gives it the
//! sender's mode), `part` (every chunk of the file that this stripe owns is verified and the digest
//! over them matched the sender's, written into the temporary with this device and inode) and
//! `done` (the stripe's transfer ended with every part verified).
//!
//! Records name files by a journal-local id (the sender's file ids change from run to run); a new `file`
//! record for a path replaces whatever the journal held for it, which is how a changed source restarts.
//! Files are identified by (size, mtime, chunk size) ([`FileIdentity`]); if any differs at the sender, the
//! old partial data is worthless and [`Journal::resume`] says [`Resume::Restart`].

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::digest::{Digest, file_digest, to_hex};
use crate::manifest::{ChunkPlan, check_chunk_size};
use crate::ranges::RangeSet;
use crate::relpath::{PathError, RelPath};
use crate::reserved::reserved_component;
use crate::stripe::RunId;

/// First record of a journal whose lines carry a plain checksum (the format's base form).
pub const JOURNAL_HEADER: &str = "longhaul-journal-v1";
/// First record of a journal whose lines carry a MAC ([`Journal::keyed`]), what receivers write.
pub const JOURNAL_HEADER_KEYED: &str = "longhaul-journal-v3";
/// Context of the key derivation for journal MACs ([`crate::Key::derive_for`]).
pub const JOURNAL_KEY_CONTEXT: &str = "longhaul 2026-11 resume journal line MAC";

/// Context of the derivation of temporary names ([`temp_path`]).
const TEMP_NAME_CONTEXT: &str = "longhaul 2026-11 temporary file name";

/// The key of a journal's line MACs.
pub type JournalKey = [u8; 32];

/// What makes a partially received file resumable: if any of these changed at the sender, the chunks
/// already received belong to another version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    /// Size in bytes.
    pub size: u64,
    /// Modification time at the sender, ns since the epoch.
    pub mtime_ns: i64,
    /// Chunk size of the transfer that started the file (chunk hashes depend on it).
    pub chunk_size: u64,
}

/// The temporary name for a file's partial data: a hidden name in the same directory (so the final
/// rename stays within one file system), reserved ([`crate::reserved::is_reserved_name`]), derived
/// from the file's path and identity (64 bits of BLAKE3), so that every receiver of a striped
/// transfer writes the same one and a changed source gets a new one.
pub fn temp_path(path: &RelPath, identity: &FileIdentity) -> RelPath {
    let mut h = blake3::Hasher::new_derive_key(TEMP_NAME_CONTEXT);
    h.update(&(path.as_str().len() as u64).to_le_bytes());
    h.update(path.as_str().as_bytes());
    h.update(&identity.size.to_le_bytes());
    h.update(&identity.mtime_ns.to_le_bytes());
    h.update(&identity.chunk_size.to_le_bytes());
    let name = format!(".lh-{}.part", to_hex(&h.finalize().as_bytes()[..8]));
    let name = RelPath::parse(&name).expect("a fixed ASCII name is a valid path");
    match path.parent() {
        Some(dir) => dir.join(&name).unwrap_or(name),
        None => name,
    }
}

/// One journal line's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "r", rename_all = "snake_case")]
enum Record {
    Stripe {
        run: RunId,
        index: u32,
        count: u32,
    },
    Dir {
        path: RelPath,
    },
    Part {
        id: u32,
        digest: Digest,
        dev: u64,
        ino: u64,
    },
    Done,
    File {
        id: u32,
        path: RelPath,
        size: u64,
        mtime_ns: i64,
        mode: u32,
        chunk_size: u64,
        temp: RelPath,
    },
    Chunk {
        id: u32,
        index: u64,
        hash: Digest,
    },
    Complete {
        id: u32,
        digest: Digest,
    },
}

/// What the journal knows about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    /// Journal-local id.
    pub id: u32,
    /// Size, mtime and chunk size when the file was started.
    pub identity: FileIdentity,
    /// Permission bits to apply when complete.
    pub mode: u32,
    /// Where the partial data lives (relative to the destination root): always
    /// `temp_path(path, &identity)`, never a name read from the journal.
    pub temp: RelPath,
    /// Chunks whose bytes are in `temp` and whose hash was verified.
    pub verified: RangeSet,
    /// Each verified chunk's hash, for the file digest.
    hashes: BTreeMap<u64, Digest>,
    /// The file digest, once verified and renamed into place.
    pub complete: Option<Digest>,
    /// A stripe's journal: this stripe's part of the file is verified.
    pub part: Option<Part>,
}

/// A stripe's part of a file, verified ([`Journal::part_verified`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The digest over the stripe's chunks of the file (`file_digest` of their hashes).
    pub digest: Digest,
    /// Device and inode the chunks were written into: the temporary, or the file already in place.
    pub inode: (u64, u64),
}

/// The stripe a journal belongs to (its `stripe` record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StripeTag {
    /// The striped run.
    pub run: RunId,
    /// The stripe's index.
    pub index: u32,
    /// Stripes in the run.
    pub count: u32,
}

impl FileState {
    /// The chunk plan the file was started with.
    pub fn plan(&self) -> ChunkPlan {
        ChunkPlan::new(self.identity.size, self.identity.chunk_size)
            .expect("chunk size checked when the record was applied")
    }

    /// The hash of verified chunk `index`.
    pub fn hash(&self, index: u64) -> Option<&Digest> {
        self.hashes.get(&index)
    }

    /// The file digest from the verified chunks' hashes, once every chunk is verified.
    pub fn digest(&self) -> Option<Digest> {
        let plan = self.plan();
        (self.verified.len() == plan.count())
            .then(|| file_digest(plan.size(), plan.chunk_size(), self.hashes.values()))
    }
}

/// What to do with a file the sender lists, given the journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume<'a> {
    /// Never started: start it ([`Journal::start_file`]).
    Fresh,
    /// Started, but the sender's file changed: delete the old temporary file, then start afresh.
    Restart(&'a FileState),
    /// Started with the same identity: send its verified set in `Have`, receive the rest.
    Continue(&'a FileState),
    /// Already verified and in place with the same identity: nothing to receive.
    Complete(&'a FileState),
}

/// A journal operation that does not fit the state (a bug in the caller, or, in replay, a sign that the
/// lines are not ours).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// No `file` record for this path.
    #[error("journal: {0} was never started")]
    UnknownFile(RelPath),
    /// A chunk index beyond the file's plan.
    #[error("journal: chunk {index} of {path} is beyond its {count} chunks")]
    ChunkOutOfRange {
        /// The file.
        path: RelPath,
        /// The index.
        index: u64,
        /// Chunks in the file.
        count: u64,
    },
    /// `complete` before every chunk was verified, or with a digest that is not the chunks'.
    #[error("journal: {0} is not fully verified with that digest")]
    NotVerified(RelPath),
    /// A record that breaks the rules (only in replay).
    #[error("journal: inconsistent record")]
    Inconsistent,
    /// The temporary name is not a valid path.
    #[error(transparent)]
    Path(#[from] PathError),
}

/// The replayed or live state of a journal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Journal {
    files: BTreeMap<RelPath, FileState>,
    paths: HashMap<u32, RelPath>,
    next_id: u32,
    valid_len: usize,
    ignored_tail: bool,
    /// Lines end with a MAC under this key instead of a checksum.
    mac: Option<JournalKey>,
    /// A stripe's journal: which.
    stripe: Option<StripeTag>,
    /// Directories this stripe created.
    dirs: Vec<RelPath>,
    /// The stripe's transfer ended with every part verified.
    done: bool,
}

impl Journal {
    /// The journal of a destination that has none, lines with checksums. The first line it returns
    /// carries the header.
    pub fn new() -> Self {
        Self::default()
    }

    /// The journal of a destination that has none, each line authenticated with a keyed BLAKE3 MAC
    /// (16 bytes, as 32 hex digits) under `key` (derived from the transfer key with
    /// [`JOURNAL_KEY_CONTEXT`]): a journal written without the key, planted or forged, is not trusted
    /// at all ([`Journal::replay_keyed`]).
    pub fn keyed(key: JournalKey) -> Self {
        Self {
            mac: Some(key),
            ..Self::default()
        }
    }

    /// The first line of a journal file with checksums.
    pub fn header_line() -> String {
        seal(JOURNAL_HEADER, None)
    }

    /// The first line of this journal's file.
    fn own_header_line(&self) -> String {
        match &self.mac {
            None => Self::header_line(),
            Some(k) => seal(JOURNAL_HEADER_KEYED, Some(k)),
        }
    }

    /// Rebuilds the state from a journal file's bytes. Never fails: it trusts the longest valid prefix
    /// (module docs) and records where it ends in [`Journal::valid_len`].
    pub fn replay(bytes: &[u8]) -> Self {
        Self::new().replayed(bytes)
    }

    /// As [`Journal::replay`] for a keyed journal: only lines with a valid MAC under `key` count.
    pub fn replay_keyed(bytes: &[u8], key: JournalKey) -> Self {
        Self::keyed(key).replayed(bytes)
    }

    fn replayed(mut self, bytes: &[u8]) -> Self {
        let j = &mut self;
        let header = if j.mac.is_some() {
            JOURNAL_HEADER_KEYED
        } else {
            JOURNAL_HEADER
        };
        let mac = j.mac;
        let mut pos = 0;
        let mut lines = bytes.split_inclusive(|&b| b == b'\n');
        let header_ok = lines
            .next()
            .and_then(|raw| unseal(raw, mac.as_ref()))
            .is_some_and(|content| content == header);
        if header_ok {
            pos = j.own_header_line().len();
            for raw in lines {
                let Some(rec) =
                    unseal(raw, mac.as_ref()).and_then(|c| serde_json::from_str(c).ok())
                else {
                    break;
                };
                if j.apply(rec).is_err() {
                    break;
                }
                pos += raw.len();
            }
        }
        j.valid_len = pos;
        j.ignored_tail = pos < bytes.len();
        self
    }

    /// Bytes of the journal file that are trusted. After a replay the writer truncates the file to this
    /// length before appending (0 for a missing or foreign journal: the next line returned then starts
    /// with the header, so the writer never writes the header itself).
    pub fn valid_len(&self) -> usize {
        self.valid_len
    }

    /// Whether replay ignored bytes after the trusted prefix (a torn or garbled tail).
    pub fn ignored_tail(&self) -> bool {
        self.ignored_tail
    }

    /// The id [`Journal::start_file`] will give the next file, so the caller can name its temporary file
    /// ([`temp_path`]) before starting it.
    pub fn next_id(&self) -> u32 {
        self.next_id
    }

    /// Every file the journal knows, by path.
    pub fn files(&self) -> impl Iterator<Item = (&RelPath, &FileState)> {
        self.files.iter()
    }

    /// The state of `path`, if the journal has seen it.
    pub fn file(&self, path: &RelPath) -> Option<&FileState> {
        self.files.get(path)
    }

    /// Decides what to do with `path` now that the sender lists it with `identity`.
    pub fn resume(&self, path: &RelPath, identity: FileIdentity) -> Resume<'_> {
        match self.files.get(path) {
            None => Resume::Fresh,
            Some(f) if f.identity != identity => Resume::Restart(f),
            Some(f) if f.complete.is_some() => Resume::Complete(f),
            Some(f) => Resume::Continue(f),
        }
    }

    /// Starts (or restarts) `path`; its data will land in `temp_path(path, &identity)`, which
    /// [`FileState::temp`] then holds. Returns the line to append.
    pub fn start_file(
        &mut self,
        path: &RelPath,
        identity: FileIdentity,
        mode: u32,
    ) -> Result<String, JournalError> {
        self.commit(Record::File {
            id: self.next_id,
            path: path.clone(),
            size: identity.size,
            mtime_ns: identity.mtime_ns,
            mode,
            chunk_size: identity.chunk_size,
            temp: temp_path(path, &identity),
        })
    }

    /// Marks this journal as stripe `tag`'s: the first record of a stripe's journal. Returns the
    /// line to append.
    pub fn start_stripe(&mut self, tag: StripeTag) -> Result<String, JournalError> {
        self.commit(Record::Stripe {
            run: tag.run,
            index: tag.index,
            count: tag.count,
        })
    }

    /// The stripe this journal belongs to (`None`: an unstriped transfer's).
    pub fn stripe(&self) -> Option<StripeTag> {
        self.stripe
    }

    /// Records that this stripe created directory `path`. Returns the line to append.
    pub fn dir_created(&mut self, path: &RelPath) -> Result<String, JournalError> {
        self.commit(Record::Dir { path: path.clone() })
    }

    /// The directories this stripe created.
    pub fn dirs_created(&self) -> &[RelPath] {
        &self.dirs
    }

    /// Records that this stripe's part of `path` is verified. Returns the line to append.
    pub fn part_verified(&mut self, path: &RelPath, part: Part) -> Result<String, JournalError> {
        let id = self.id_of(path)?;
        self.commit(Record::Part {
            id,
            digest: part.digest,
            dev: part.inode.0,
            ino: part.inode.1,
        })
    }

    /// Records that this stripe's transfer ended with every part verified. Returns the line to
    /// append.
    pub fn stripe_done(&mut self) -> Result<String, JournalError> {
        self.commit(Record::Done)
    }

    /// Whether this stripe's transfer ended with every part verified.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Records that chunk `index` of `path` is written and verified. Returns the line to append.
    pub fn chunk_verified(
        &mut self,
        path: &RelPath,
        index: u64,
        hash: Digest,
    ) -> Result<String, JournalError> {
        let id = self.id_of(path)?;
        self.commit(Record::Chunk { id, index, hash })
    }

    /// Records that `path` is verified with `digest` and in place. Returns the line to append.
    pub fn file_complete(
        &mut self,
        path: &RelPath,
        digest: Digest,
    ) -> Result<String, JournalError> {
        let id = self.id_of(path)?;
        self.commit(Record::Complete { id, digest })
    }

    fn id_of(&self, path: &RelPath) -> Result<u32, JournalError> {
        self.files
            .get(path)
            .map(|f| f.id)
            .ok_or_else(|| JournalError::UnknownFile(path.clone()))
    }

    /// Applies a record and returns its line (preceded by the header if nothing is trusted yet); the
    /// state is unchanged on error.
    fn commit(&mut self, rec: Record) -> Result<String, JournalError> {
        let mut line = encode(&rec, self.mac.as_ref());
        self.apply(rec)?;
        if self.valid_len == 0 {
            line.insert_str(0, &self.own_header_line());
        }
        self.valid_len += line.len();
        Ok(line)
    }

    /// The one place records change the state, shared by replay and the writer.
    fn apply(&mut self, rec: Record) -> Result<(), JournalError> {
        match rec {
            Record::File {
                id,
                path,
                size,
                mtime_ns,
                mode,
                chunk_size,
                temp,
            } => {
                // The temporary is derived, never taken from the text: a record pointing anywhere else
                // (another file of the tree, a path of nobody's session) is not ours.
                let identity = FileIdentity {
                    size,
                    mtime_ns,
                    chunk_size,
                };
                if id < self.next_id
                    || check_chunk_size(chunk_size).is_err()
                    || temp != temp_path(&path, &identity)
                    || reserved_component(&path).is_some()
                {
                    return Err(JournalError::Inconsistent);
                }
                self.next_id = id.checked_add(1).ok_or(JournalError::Inconsistent)?;
                if let Some(old) = self.files.get(&path) {
                    self.paths.remove(&old.id);
                }
                self.paths.insert(id, path.clone());
                let state = FileState {
                    id,
                    identity,
                    mode,
                    temp,
                    verified: RangeSet::new(),
                    hashes: BTreeMap::new(),
                    complete: None,
                    part: None,
                };
                self.files.insert(path, state);
            }
            Record::Stripe { run, index, count } => {
                // Only as the first record, and only a stripe that can exist.
                let first = self.files.is_empty() && self.dirs.is_empty() && self.stripe.is_none();
                if !first || count == 0 || index >= count {
                    return Err(JournalError::Inconsistent);
                }
                self.stripe = Some(StripeTag { run, index, count });
            }
            Record::Dir { path } => {
                if self.stripe.is_none() || reserved_component(&path).is_some() {
                    return Err(JournalError::Inconsistent);
                }
                self.dirs.push(path);
            }
            Record::Part {
                id,
                digest,
                dev,
                ino,
            } => {
                if self.stripe.is_none() {
                    return Err(JournalError::Inconsistent);
                }
                let (_, f) = self.by_id(id)?;
                f.part = Some(Part {
                    digest,
                    inode: (dev, ino),
                });
            }
            Record::Done => {
                if self.stripe.is_none() {
                    return Err(JournalError::Inconsistent);
                }
                self.done = true;
            }
            Record::Chunk { id, index, hash } => {
                let (path, f) = self.by_id(id)?;
                let count = f.plan().count();
                if index >= count {
                    return Err(JournalError::ChunkOutOfRange { path, index, count });
                }
                f.verified.insert(index);
                f.hashes.insert(index, hash);
            }
            Record::Complete { id, digest } => {
                let (path, f) = self.by_id(id)?;
                if f.digest() != Some(digest) {
                    return Err(JournalError::NotVerified(path));
                }
                f.complete = Some(digest);
            }
        }
        Ok(())
    }

    fn by_id(&mut self, id: u32) -> Result<(RelPath, &mut FileState), JournalError> {
        let path = self.paths.get(&id).ok_or(JournalError::Inconsistent)?;
        let f = self.files.get_mut(path).ok_or(JournalError::Inconsistent)?;
        Ok((path.clone(), f))
    }
}

fn encode(rec: &Record, mac: Option<&JournalKey>) -> String {
    seal(
        &serde_json::to_string(rec).expect("records always serialise"),
        mac,
    )
}

/// `content tag\n`.
fn seal(content: &str, mac: Option<&JournalKey>) -> String {
    format!("{content} {}\n", tag(content, mac))
}

/// The content of a sealed line, if it is complete, UTF-8, and its tag matches.
fn unseal<'a>(raw: &'a [u8], mac: Option<&JournalKey>) -> Option<&'a str> {
    let line = std::str::from_utf8(raw.strip_suffix(b"\n")?).ok()?;
    let (content, sum) = line.rsplit_once(' ')?;
    // Both are lowercase hex of a public length: comparing them as strings leaks nothing useful
    // (a forger learns at most where a guessed tag of a line they wrote first differs).
    (sum == tag(content, mac)).then_some(content)
}

/// The line's tag: without a key a checksum (4 bytes of BLAKE3, against torn and garbled lines);
/// with one a MAC (16 bytes of keyed BLAKE3, against forged lines too).
fn tag(content: &str, mac: Option<&JournalKey>) -> String {
    match mac {
        None => checksum(content),
        Some(k) => to_hex(&blake3::keyed_hash(k, content.as_bytes()).as_bytes()[..16]),
    }
}

fn checksum(content: &str) -> String {
    to_hex(&blake3::hash(content.as_bytes()).as_bytes()[..4])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::hash_chunk;
    use crate::ranges::tests::Rng;
    use std::collections::BTreeSet;

    const MIB: u64 = 1 << 20;

    fn p(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    fn ident(size: u64) -> FileIdentity {
        FileIdentity {
            size,
            mtime_ns: 1_700_000_000_000_000_000,
            chunk_size: MIB,
        }
    }

    fn start(j: &mut Journal, path: &str, size: u64) -> String {
        j.start_file(&p(path), ident(size), 0o644).unwrap()
    }

    #[test]
    fn lines_look_as_documented() {
        assert_eq!(
            Journal::header_line(),
            format!("longhaul-journal-v1 {}\n", checksum(JOURNAL_HEADER))
        );
        let mut j = Journal::new();
        let first = start(&mut j, "a/b c.dat", 3 * MIB);
        let line = first
            .strip_prefix(&Journal::header_line())
            .expect("first line carries the header");
        assert!(line.starts_with(r#"{"r":"file","id":0,"path":"a/b c.dat","size":3145728,"#));
        assert!(!start(&mut j, "x", 1).starts_with("longhaul"), "only once");
        let temp = temp_path(&p("a/b c.dat"), &ident(3 * MIB));
        assert!(line.contains(&format!(r#""temp":"{temp}""#)), "{line}");
        assert!(temp.as_str().starts_with("a/.lh-"), "{temp}");
    }

    #[test]
    fn writer_and_replay_agree() {
        let mut j = Journal::new();
        let mut text = start(&mut j, "big", 3 * MIB);
        text += &start(&mut j, "ünï/small", 10);
        let h: Vec<Digest> = (0..3).map(|i| hash_chunk(&[i])).collect();
        text += &j.chunk_verified(&p("big"), 2, h[2]).unwrap();
        text += &j.chunk_verified(&p("big"), 0, h[0]).unwrap();
        text += &j.chunk_verified(&p("ünï/small"), 0, h[1]).unwrap();
        let small_digest = j.file(&p("ünï/small")).unwrap().digest().unwrap();
        text += &j.file_complete(&p("ünï/small"), small_digest).unwrap();
        let back = Journal::replay(text.as_bytes());
        assert_eq!(back, j);
        assert_eq!(back.valid_len(), text.len());
        assert!(!back.ignored_tail());
        let big = back.file(&p("big")).unwrap();
        assert_eq!(
            big.verified.ranges().collect::<Vec<_>>(),
            vec![(0, 1), (2, 3)]
        );
        assert_eq!(big.digest(), None, "chunk 1 missing");
        assert!(matches!(
            back.resume(&p("big"), ident(3 * MIB)),
            Resume::Continue(_)
        ));
        assert!(matches!(
            back.resume(&p("ünï/small"), ident(10)),
            Resume::Complete(_)
        ));
        assert!(matches!(back.resume(&p("new"), ident(1)), Resume::Fresh));
    }

    #[test]
    fn a_changed_source_file_restarts() {
        let mut j = Journal::new();
        start(&mut j, "f", 2 * MIB);
        j.chunk_verified(&p("f"), 0, hash_chunk(b"x")).unwrap();
        let newer = FileIdentity {
            mtime_ns: 1,
            ..ident(2 * MIB)
        };
        let bigger = ident(3 * MIB);
        let other_chunks = FileIdentity {
            chunk_size: 2 * MIB,
            ..ident(2 * MIB)
        };
        for changed in [newer, bigger, other_chunks] {
            assert!(
                matches!(j.resume(&p("f"), changed), Resume::Restart(_)),
                "{changed:?}"
            );
        }
        // Restarting replaces the old state: nothing verified, a new id and temp name.
        let old_temp = j.file(&p("f")).unwrap().temp.clone();
        j.start_file(&p("f"), newer, 0o600).unwrap();
        let f = j.file(&p("f")).unwrap();
        assert!(f.verified.is_empty());
        assert_eq!(f.id, 1);
        assert_ne!(f.temp, old_temp);
        assert!(matches!(j.resume(&p("f"), newer), Resume::Continue(_)));
    }

    #[test]
    fn writer_refuses_inconsistent_records() {
        let mut j = Journal::new();
        assert_eq!(
            j.chunk_verified(&p("nope"), 0, hash_chunk(b"")),
            Err(JournalError::UnknownFile(p("nope")))
        );
        start(&mut j, "f", MIB + 1);
        assert!(matches!(
            j.chunk_verified(&p("f"), 2, hash_chunk(b"")),
            Err(JournalError::ChunkOutOfRange { count: 2, .. })
        ));
        j.chunk_verified(&p("f"), 0, hash_chunk(b"a")).unwrap();
        let wrong = hash_chunk(b"whatever");
        assert_eq!(
            j.file_complete(&p("f"), wrong),
            Err(JournalError::NotVerified(p("f")))
        );
        let bad_chunk = FileIdentity {
            chunk_size: 1000,
            ..ident(1)
        };
        assert_eq!(
            j.start_file(&p("g"), bad_chunk, 0),
            Err(JournalError::Inconsistent)
        );
        assert!(
            j.file(&p("g")).is_none(),
            "a refused record leaves no trace"
        );
    }

    /// A line as an old writer (or a forger) would seal it, with any content.
    fn forged(content: &str) -> String {
        seal(content, None)
    }

    #[test]
    fn a_keyed_journal_trusts_only_lines_with_its_mac() {
        let key = [7u8; 32];
        let mut j = Journal::keyed(key);
        let mut text = j.start_file(&p("a"), ident(3 * MIB), 0o644).unwrap();
        text += &j.chunk_verified(&p("a"), 1, hash_chunk(b"one")).unwrap();
        assert!(text.starts_with("longhaul-journal-v3 "), "{text}");
        let back = Journal::replay_keyed(text.as_bytes(), key);
        assert_eq!(back, j);
        assert_eq!(back.valid_len(), text.len());
        // Another key, or none, trusts nothing.
        assert_eq!(
            Journal::replay_keyed(text.as_bytes(), [8u8; 32]).valid_len(),
            0
        );
        assert_eq!(Journal::replay(text.as_bytes()).valid_len(), 0);
        // A journal with checksums only (anyone can write one) is not trusted by a keyed reader.
        let mut plain = Journal::new();
        let forged = plain.start_file(&p("a"), ident(3 * MIB), 0o644).unwrap();
        assert_eq!(Journal::replay_keyed(forged.as_bytes(), key).valid_len(), 0);
        // A line appended without the key ends the trusted prefix.
        let mut tampered = text.clone();
        tampered += &seal(r#"{"r":"chunk","id":0,"index":2,"hash":"00"}"#, None);
        let t = Journal::replay_keyed(tampered.as_bytes(), key);
        assert_eq!(t.valid_len(), text.len());
        assert!(t.ignored_tail());
    }

    #[test]
    fn a_record_whose_temporary_is_not_derived_is_not_trusted() {
        let derived = temp_path(
            &p("a.txt"),
            &FileIdentity {
                size: 5,
                mtime_ns: 1,
                chunk_size: MIB,
            },
        );
        let good = format!(
            r#"{{"r":"file","id":0,"path":"a.txt","size":5,"mtime_ns":1,"mode":420,"chunk_size":1048576,"temp":"{derived}"}}"#
        );
        for temp in [
            "victim.txt",
            &format!("sub/{derived}"),
            ".lh-00000000.part",
            ".lh-0000000000000000.part",
        ] {
            let bad = good.replace(derived.as_str(), temp);
            let text = Journal::header_line() + &forged(&bad);
            let j = Journal::replay(text.as_bytes());
            assert!(j.file(&p("a.txt")).is_none(), "{temp} trusted");
            assert!(j.ignored_tail());
        }
        let text = Journal::header_line() + &forged(&good);
        let j = Journal::replay(text.as_bytes());
        assert_eq!(j.file(&p("a.txt")).unwrap().temp, derived);
        // A record for a reserved path is not ours either.
        let planted = good.replace(r#""a.txt""#, r#"".longhaul-journal""#);
        let text = Journal::header_line() + &forged(&planted);
        assert!(Journal::replay(text.as_bytes()).files().next().is_none());
    }

    #[test]
    fn a_stripe_journal_records_its_stripe_dirs_parts_and_end() {
        let key = [9u8; 32];
        let tag = StripeTag {
            run: RunId([1; 16]),
            index: 1,
            count: 3,
        };
        let mut j = Journal::keyed(key);
        let mut text = j.start_stripe(tag).unwrap();
        text += &j.dir_created(&p("d")).unwrap();
        text += &start(&mut j, "d/f", 2 * MIB);
        text += &j.chunk_verified(&p("d/f"), 1, hash_chunk(b"1")).unwrap();
        let part = Part {
            digest: hash_chunk(b"part"),
            inode: (3, 44),
        };
        text += &j.part_verified(&p("d/f"), part).unwrap();
        text += &j.stripe_done().unwrap();
        let back = Journal::replay_keyed(text.as_bytes(), key);
        assert_eq!(back, j);
        assert!(!back.ignored_tail());
        assert_eq!(back.stripe(), Some(tag));
        assert_eq!(back.dirs_created(), &[p("d")]);
        assert_eq!(back.file(&p("d/f")).unwrap().part, Some(part));
        assert!(back.is_done());

        // Stripe records only in a stripe's journal, the stripe record only first, and only a
        // stripe that can exist.
        let mut plain = Journal::new();
        start(&mut plain, "f", 1);
        assert_eq!(plain.stripe_done(), Err(JournalError::Inconsistent));
        assert_eq!(plain.dir_created(&p("d")), Err(JournalError::Inconsistent));
        assert_eq!(plain.start_stripe(tag), Err(JournalError::Inconsistent));
        let mut twice = Journal::new();
        twice.start_stripe(tag).unwrap();
        assert_eq!(twice.start_stripe(tag), Err(JournalError::Inconsistent));
        let impossible = StripeTag { index: 3, ..tag };
        assert_eq!(
            Journal::new().start_stripe(impossible),
            Err(JournalError::Inconsistent)
        );
    }

    #[test]
    fn missing_or_garbled_header_trusts_nothing() {
        let mut j = Journal::new();
        let text = start(&mut j, "f", 1);
        let body = text.strip_prefix(&Journal::header_line()).unwrap();
        assert_eq!(Journal::replay(body.as_bytes()).valid_len(), 0);
        let garbled = format!(
            "longhaul-journal-v2 {}\n{body}",
            checksum("longhaul-journal-v2")
        );
        assert!(Journal::replay(garbled.as_bytes()).file(&p("f")).is_none());
        assert_eq!(Journal::replay(b"").valid_len(), 0);
        assert!(!Journal::replay(b"").ignored_tail());
    }

    /// Builds a random journal and remembers, for every chunk record, the byte offset where its line
    /// ends, so tests know exactly which records a prefix of the text contains whole.
    fn random_journal(rng: &mut Rng) -> (String, Vec<(usize, RelPath, u64)>) {
        let mut j = Journal::new();
        let mut text = String::new();
        let mut chunk_ends = Vec::new();
        let names: Vec<RelPath> = ["a", "b/ü", "c d"].iter().map(|s| p(s)).collect();
        for _ in 0..rng.below(60) {
            let path = &names[rng.below(3) as usize];
            let line = match (j.file(path), rng.below(10)) {
                (Some(f), 0..=7) => {
                    let index = rng.below(f.plan().count());
                    let line = j.chunk_verified(path, index, hash_chunk(&index.to_le_bytes()));
                    let line = line.unwrap();
                    chunk_ends.push((text.len() + line.len(), path.clone(), index));
                    line
                }
                _ => {
                    let size = rng.below(8 * MIB) + 1;
                    j.start_file(path, ident(size), 0o644).unwrap()
                }
            };
            text += &line;
        }
        (text, chunk_ends)
    }

    #[test]
    fn torn_or_garbled_tails_never_invent_verified_chunks() {
        let mut rng = Rng(0x10C4_A11E_D0DD_BA11);
        for _ in 0..300 {
            let (text, chunk_ends) = random_journal(&mut rng);
            let full = Journal::replay(text.as_bytes());
            assert_eq!(full.valid_len(), text.len());
            for _ in 0..10 {
                let mut bytes = text.as_bytes().to_vec();
                let cut = rng.below(bytes.len() as u64 + 1) as usize;
                bytes.truncate(cut);
                // Sometimes also garble a byte before the cut.
                if cut > 0 && rng.below(3) == 0 {
                    let i = rng.below(cut as u64) as usize;
                    bytes[i] ^= 1 << rng.below(8);
                }
                let j = Journal::replay(&bytes);
                assert!(j.valid_len() <= bytes.len());
                // Every chunk the replay calls verified was written in a complete line within the
                // trusted prefix (later records of the same path may have restarted it; that only removes).
                let written: BTreeSet<(RelPath, u64)> = chunk_ends
                    .iter()
                    .filter(|(end, _, _)| *end <= j.valid_len())
                    .map(|(_, path, i)| (path.clone(), *i))
                    .collect();
                for (path, f) in &j.files {
                    for (s, e) in f.verified.ranges() {
                        for i in s..e {
                            assert!(
                                written.contains(&(path.clone(), i)),
                                "{path} chunk {i} invented"
                            );
                        }
                    }
                }
                // The trusted prefix replays to the same state, and appending after it is trusted.
                let mut kept = bytes[..j.valid_len()].to_vec();
                let mut again = Journal::replay(&kept);
                assert_eq!(again.files, j.files);
                assert!(!again.ignored_tail());
                kept.extend(start(&mut again, "appended", 1).as_bytes());
                let after = Journal::replay(&kept);
                assert!(after.file(&p("appended")).is_some());
                assert_eq!(after.valid_len(), kept.len());
            }
        }
    }

    #[test]
    fn temporaries_are_reserved_in_their_directory_and_named_by_path_and_identity() {
        use crate::reserved::is_reserved_name;
        let id = FileIdentity {
            size: 5,
            mtime_ns: 7,
            chunk_size: 1 << 20,
        };
        let t = temp_path(&p("x/y"), &id);
        assert!(is_reserved_name(t.file_name()));
        assert_eq!(t.parent().map(|d| d.to_string()), Some("x".into()));
        assert_eq!(t, temp_path(&p("x/y"), &id));
        for other in [
            temp_path(&p("x/z"), &id),
            temp_path(&p("x/y"), &FileIdentity { size: 6, ..id }),
            temp_path(&p("x/y"), &FileIdentity { mtime_ns: 8, ..id }),
            temp_path(
                &p("x/y"),
                &FileIdentity {
                    chunk_size: 2 << 20,
                    ..id
                },
            ),
        ] {
            assert_ne!(other.file_name(), t.file_name());
        }
    }
}
