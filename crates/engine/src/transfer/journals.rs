//! The resume journals of a destination directory, as one receiver sees them: its own, locked and
//! appended to, and every other journal there, read once for what it claims.
//!
//! An unstriped transfer keeps `.longhaul-journal` and locks it exclusively; each stripe of a
//! striped transfer keeps `.longhaul-journal.<run>.<stripe>` (locked exclusively) and holds a shared
//! lock on `.longhaul-journal`, so stripes run together but never beside an unstriped transfer.
//! Whatever wrote them, every journal's claims count for a resume ([`Journals::claims`]): a failed
//! striped run resumes striped any other way, or unstriped, and the other way round. Claims are only
//! claims: the receiver re-reads and re-hashes a claimed chunk before it counts (`sink`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};

use longhaul_transfer::journal::{JournalError, JournalKey, Resume, StripeTag};
use longhaul_transfer::reserved::{JOURNAL_NAME, is_reserved_name};
use longhaul_transfer::stripe::Stripe;
use longhaul_transfer::{Digest, FileIdentity, Journal, RelPath};
use rustix::fs::FlockOperation;

use super::root::Root;
use crate::EngineError;

/// A receiver's journals.
pub(crate) struct Journals {
    /// Our own journal's file name in the destination.
    name: String,
    file: File,
    /// Our own journal's replayed (and live) state.
    pub(crate) state: Journal,
    /// Every other journal in the destination, replayed.
    others: Vec<Journal>,
    /// A stripe's shared lock on `.longhaul-journal`.
    _shared: Option<File>,
}

/// What the journals of a destination say about one file of the manifest.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    /// Chunks some journal records as verified for the file with this identity, with their hashes.
    pub(crate) hashes: BTreeMap<u64, Digest>,
    /// Temporaries of earlier versions of the file (a source that changed since): to delete.
    pub(crate) stale: Vec<RelPath>,
}

fn locked(root: &Root, what: &str) -> EngineError {
    EngineError::Transfer(format!(
        "another transfer into {} is running ({what})",
        root.path().display()
    ))
}

fn lock(file: &File, op: FlockOperation) -> bool {
    rustix::fs::flock(file, op).is_ok()
}

impl Journals {
    /// Locks our journal (refusing a transfer that would run beside another one it must not) and
    /// replays every journal in the destination.
    pub(crate) fn open(
        root: &Root,
        key: JournalKey,
        stripe: Option<&Stripe>,
    ) -> Result<Self, EngineError> {
        let (name, shared) = match stripe {
            None => (JOURNAL_NAME.to_string(), None),
            Some(s) => {
                let shared = root.open_partial(JOURNAL_NAME)?;
                if !lock(&shared, FlockOperation::NonBlockingLockShared) {
                    return Err(locked(root, "an unstriped one holds its journal"));
                }
                (s.journal_name(), Some(shared))
            }
        };
        let mut file = root.open_partial(&name)?;
        if !lock(&file, FlockOperation::NonBlockingLockExclusive) {
            return Err(locked(root, &format!("its journal {name} is locked")));
        }
        let mut text = Vec::new();
        file.read_to_end(&mut text)
            .map_err(|e| EngineError::io(format!("read {name}"), e))?;
        let mut state = Journal::replay_keyed(&text, key);
        let tag = stripe.map(|s| StripeTag {
            run: s.run,
            index: s.index,
            count: s.count,
        });
        if state.stripe() != tag {
            // Not this stripe's journal (or a stripe's where an unstriped one belongs): start ours.
            state = Journal::keyed(key);
        }
        // A torn tail (the process died mid-line) is cut off before anything is appended. A
        // journal with nothing trusted gets its header with the first record (`Journal` prepends
        // it then; writing it here as well would leave two header lines).
        file.set_len(state.valid_len() as u64)
            .map_err(|e| EngineError::io(format!("truncate {name}"), e))?;
        let mut others = Vec::new();
        for other in journal_names(root)? {
            if other != name {
                others.push(read_journal(root, &other, key)?);
            }
        }
        let mut j = Self {
            name,
            file,
            state,
            others,
            _shared: shared,
        };
        if let Some(tag) = tag
            && j.state.stripe().is_none()
        {
            j.record(|s| s.start_stripe(tag))?;
        }
        Ok(j)
    }

    /// Appends a line the journal's state returned.
    pub(crate) fn append(&mut self, line: &str) -> Result<(), EngineError> {
        self.file
            .write_all(line.as_bytes())
            .map_err(|e| EngineError::io(format!("append to {}", self.name), e))
    }

    /// Applies a record to our journal's state and appends its line.
    pub(crate) fn record(
        &mut self,
        rec: impl FnOnce(&mut Journal) -> Result<String, JournalError>,
    ) -> Result<(), EngineError> {
        let line = rec(&mut self.state).map_err(|e| EngineError::Transfer(e.to_string()))?;
        self.append(&line)
    }

    /// What all journals (ours included) claim for `path` with `identity`.
    pub(crate) fn claims(&self, path: &RelPath, identity: FileIdentity) -> Claims {
        let mut c = Claims::default();
        for j in std::iter::once(&self.state).chain(&self.others) {
            match j.resume(path, identity) {
                Resume::Continue(st) => {
                    for (i, end) in st.verified.ranges() {
                        for i in i..end {
                            if let Some(h) = st.hash(i) {
                                c.hashes.insert(i, *h);
                            }
                        }
                    }
                }
                Resume::Restart(st) => c.stale.push(st.temp.clone()),
                Resume::Fresh | Resume::Complete(_) => {}
            }
        }
        c
    }

    /// Releases our journal's lock (nothing more is appended).
    pub(crate) fn unlock(&self) {
        let _ = rustix::fs::flock(&self.file, FlockOperation::Unlock);
    }
}

/// The file names of every journal in the destination (ours and stripes').
pub(crate) fn journal_names(root: &Root) -> Result<Vec<String>, EngineError> {
    Ok(root
        .list("")?
        .into_iter()
        .filter(|(name, m)| {
            matches!(m.kind, super::root::Kind::File(_))
                && name.starts_with(JOURNAL_NAME)
                && is_reserved_name(name)
        })
        .map(|(name, _)| name)
        .collect())
}

/// Journal `name` of the destination, replayed (only lines with our key's MAC count).
pub(crate) fn read_journal(
    root: &Root,
    name: &str,
    key: JournalKey,
) -> Result<Journal, EngineError> {
    let mut text = Vec::new();
    root.open_read(name)?
        .read_to_end(&mut text)
        .map_err(|e| EngineError::io(format!("read {name}"), e))?;
    Ok(Journal::replay_keyed(&text, key))
}

/// Removes every journal of the destination (a transfer that put every file in place).
pub(crate) fn remove_all(root: &Root) -> Result<(), EngineError> {
    for name in journal_names(root)? {
        root.remove_file(&name)?;
    }
    Ok(())
}
