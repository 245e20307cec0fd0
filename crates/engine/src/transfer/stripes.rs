//! The finish of a striped transfer (`longhaul_transfer::stripe`): the stripe that ends last puts
//! every file in place.
//!
//! Each stripe's receiver records in its own journal the parts of files it verified (with the inode
//! it wrote them into) and, when its transfer ends with every part verified, that it is done. It
//! then takes the destination directory's lock and reads the journals of its run: if every stripe
//! of the run is done, it puts the files in place, each only if every stripe that owns part of it
//! verified its part in the very inode that is still under the temporary's name; then the links and
//! the directories' modes and times. Only journals of this run count: chunks an earlier run claimed
//! were re-hashed and recorded again by this run's stripes before they counted.
//!
//! Done in turn under the lock, a later stripe finds the journals gone (every file in place) or
//! finishes again what is left; a file already in place with the inode its parts name counts as
//! placed, so finishing twice does no harm.

use std::collections::{BTreeMap, HashSet};

use longhaul_transfer::journal::Part;
use longhaul_transfer::journal::temp_path;
use longhaul_transfer::manifest::{EntryKind, Manifest};
use longhaul_transfer::report::StripeSummary;
use longhaul_transfer::stripe::{Assignment, Stripe, parse_journal_name};
use longhaul_transfer::{FileIdentity, Journal};

use super::dest::{PlacedFile, SinkOptions, place_symlink};
use super::journals::{self, journal_names, read_journal};
use super::root::{Inode, Root};
use crate::EngineError;

/// What a finish did.
#[derive(Debug, Default)]
pub(crate) struct Finished {
    /// Files in place (including those that already were).
    pub(crate) in_place: u64,
    /// Files (and links) not put in place, each with why.
    pub(crate) failed: Vec<String>,
}

/// A stripe's summary line: which stripe, and what its finish did (`None`: other stripes of the
/// run have not ended, or this one did not end cleanly).
pub(crate) fn summary(stripe: &Stripe, finished: Option<&Finished>) -> StripeSummary {
    StripeSummary {
        run: stripe.run.to_string(),
        index: stripe.index,
        count: stripe.count,
        finished: finished.is_some(),
        files_in_place: finished.map_or(0, |f| f.in_place),
    }
}

/// Puts the run's files in place if every stripe of the run is done (this one has recorded that it
/// is); `None` if some stripe is not.
pub(crate) fn finish(
    root: &Root,
    stripe: &Stripe,
    opts: SinkOptions,
    manifest: &Manifest,
) -> Result<Option<Finished>, EngineError> {
    let _lock = root.lock_dir()?;
    let mut run: BTreeMap<u32, Journal> = BTreeMap::new();
    for name in journal_names(root)? {
        let Some((id, index)) = parse_journal_name(&name) else {
            continue;
        };
        if id != stripe.run {
            continue;
        }
        let j = read_journal(root, &name, opts.journal_key)?;
        if j.stripe()
            .is_some_and(|t| t.count == stripe.count && t.index == index)
        {
            run.insert(index, j);
        }
    }
    if (0..stripe.count).any(|k| !run.get(&k).is_some_and(Journal::is_done)) {
        return Ok(None);
    }
    let assignment = Assignment::for_manifest(manifest.entries(), stripe.chunk_size, stripe.count);
    let mut done = Finished::default();
    let created: HashSet<&longhaul_transfer::RelPath> =
        run.values().flat_map(|j| j.dirs_created()).collect();
    let mut dirs = Vec::new();
    for e in manifest.entries() {
        let path = &e.entry.path;
        match &e.entry.kind {
            EntryKind::Dir => {
                let mode = opts.modes.apply(e.entry.mode);
                let set = created.contains(path) || (opts.overwrite && opts.chmod_existing_dirs);
                dirs.push((path.clone(), set.then_some(mode), e.entry.mtime_ns));
            }
            EntryKind::Symlink { target } => {
                match place_symlink(root, path, target, e.entry.mtime_ns, opts.overwrite) {
                    Ok(()) => {}
                    Err(EngineError::Transfer(why)) => done.failed.push(why),
                    Err(err) => return Err(err),
                }
            }
            EntryKind::File { size } => {
                let identity = FileIdentity {
                    size: *size,
                    mtime_ns: e.entry.mtime_ns,
                    chunk_size: stripe.chunk_size,
                };
                let parts = assignment
                    .owners(e.id)
                    .into_iter()
                    .map(|k| (k, part_of(&run[&k], path, identity)));
                match place(root, opts, e, identity, parts)? {
                    Ok(()) => done.in_place += 1,
                    Err(why) => done.failed.push(format!("{path}: {why}")),
                }
            }
        }
    }
    // Directories last, deepest first: writing into a directory changes its time.
    dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
    for (p, mode, mtime) in dirs {
        root.set_meta(p.as_str(), mode, mtime)?;
    }
    if done.failed.is_empty() {
        journals::remove_all(root)?;
    }
    Ok(Some(done))
}

/// Stripe `j`'s verified part of `path` with `identity`, if it recorded one.
fn part_of(j: &Journal, path: &longhaul_transfer::RelPath, identity: FileIdentity) -> Option<Part> {
    j.file(path)
        .filter(|st| st.identity == identity)
        .and_then(|st| st.part)
}

/// Puts one file in place if every owner verified its part in one inode; the reason if not.
fn place(
    root: &Root,
    opts: SinkOptions,
    e: &longhaul_transfer::ManifestEntry,
    identity: FileIdentity,
    parts: impl Iterator<Item = (u32, Option<Part>)>,
) -> Result<Result<(), String>, EngineError> {
    let mut inode = None;
    for (k, part) in parts {
        let Some(part) = part else {
            return Ok(Err(format!(
                "stripe {k} did not verify its part; run the same command again to resume"
            )));
        };
        let this = Inode(part.inode.0, part.inode.1);
        if inode.is_some_and(|i| i != this) {
            return Ok(Err(
                "its stripes wrote different files (a temporary was replaced); run the same \
command again"
                    .into(),
            ));
        }
        inode = Some(this);
    }
    let path = &e.entry.path;
    if root.inode(path.as_str())? == inode {
        // Already in place: by an earlier finish, or it was there with the sender's size and time.
        return Ok(Ok(()));
    }
    let temp = temp_path(path, &identity);
    let file = PlacedFile {
        path,
        temp: &temp,
        inode,
        mode: opts.modes.apply(e.entry.mode),
        mtime_ns: e.entry.mtime_ns,
        size: identity.size,
    };
    file.put_in_place(root, opts)
}
