//! The destination's rules, shared by the receiving side (`sink`) and a striped copy's finish
//! (`stripes`): what the receiver does with existing files, modes and durability
//! ([`SinkOptions`]), and how a verified temporary or a link is put in place ([`PlacedFile`],
//! [`place_symlink`]): only the inode that was written, checked on its descriptor and on its name
//! right before the rename.

use std::fs::File;

use longhaul_transfer::RelPath;
use longhaul_transfer::journal::JournalKey;
use longhaul_transfer::manifest::ModePolicy;
use longhaul_transfer::stripe::Stripe;

use super::root::{Inode, Kind, Root, set_file_meta};
use crate::EngineError;

/// What the receiver does with existing files, modes and durability. Only `overwrite`, `fsync`
/// and `stripe` may come from the peer (the client of `send` asks for them); the mode rules are the
/// receiver's own.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SinkOptions {
    pub(crate) overwrite: bool,
    pub(crate) fsync: bool,
    /// What the peer's modes become.
    pub(crate) modes: ModePolicy,
    /// With `overwrite`: existing directories also get the (filtered) mode the peer sent; otherwise
    /// they keep theirs.
    pub(crate) chmod_existing_dirs: bool,
    /// The key of the journal's line MACs (derived from the transfer key): a journal written
    /// without it is not trusted.
    pub(crate) journal_key: JournalKey,
    /// One stripe of a striped transfer: only its chunks are received, and files are put in place
    /// by the stripe that ends last (`stripes::finish`).
    pub(crate) stripe: Option<Stripe>,
}

pub(super) fn inode_of(f: &File, temp: &RelPath) -> Result<Inode, EngineError> {
    Inode::of_file(f).map_err(|e| EngineError::io(format!("stat {temp}"), e))
}

/// The refusal when a temporary's name no longer leads to the inode this receiver wrote.
pub(super) fn replaced(temp: &RelPath) -> String {
    format!(
        "its temporary file {temp} was replaced by another file during the transfer; not put in place"
    )
}

/// A verified temporary to put in place under its name.
pub(super) struct PlacedFile<'a> {
    pub(super) path: &'a RelPath,
    pub(super) temp: &'a RelPath,
    /// The inode that was written: only it is renamed.
    pub(super) inode: Option<Inode>,
    pub(super) mode: u32,
    pub(super) mtime_ns: i64,
    pub(super) size: u64,
}

impl PlacedFile<'_> {
    /// Sets the temporary's mode and time (after an fsync with `--fsync`) and renames it into place,
    /// if the name still leads to the inode that was written; the reason if not.
    pub(super) fn put_in_place(
        &self,
        root: &Root,
        opts: SinkOptions,
    ) -> Result<Result<(), String>, EngineError> {
        let f = root.open_rw(self.temp.as_str())?;
        let inode = inode_of(&f, self.temp)?;
        if Some(inode) != self.inode {
            return Ok(Err(replaced(self.temp)));
        }
        // A shared temporary that held a longer stale file is cut to the file's size.
        let len = f
            .metadata()
            .map_err(|e| EngineError::io(format!("stat {}", self.temp), e))?
            .len();
        if len > self.size {
            f.set_len(self.size)
                .map_err(|e| EngineError::io(format!("truncate {}", self.temp), e))?;
        }
        if opts.fsync {
            f.sync_all()
                .map_err(|e| EngineError::io(format!("fsync {}", self.temp), e))?;
        }
        set_file_meta(&f, self.mode, self.mtime_ns)
            .map_err(|e| EngineError::io(format!("set the mode and time of {}", self.temp), e))?;
        drop(f);
        if root.inode(self.temp.as_str())? != Some(inode) {
            return Ok(Err(replaced(self.temp)));
        }
        root.rename(self.temp.as_str(), self.path.as_str(), opts.overwrite)?;
        if opts.fsync {
            let dir = self.path.parent().map_or(String::new(), |p| p.to_string());
            root.sync_dir(&dir)?;
        }
        Ok(Ok(()))
    }
}

/// Creates symlink `path` to `target` (with `overwrite`, replacing a file or link there; the same
/// link already there is kept).
pub(super) fn place_symlink(
    root: &Root,
    path: &RelPath,
    target: &str,
    mtime_ns: i64,
    overwrite: bool,
) -> Result<(), EngineError> {
    if let Some(m) = root.lstat(path.as_str())? {
        let same = m.kind == Kind::Symlink && root.read_link(path.as_str())? == *target;
        if same {
            return Ok(());
        }
        if !overwrite || m.kind == Kind::Dir {
            return Err(EngineError::Transfer(format!(
                "{path} exists in {} (use --overwrite to replace it)",
                root.path().display()
            )));
        }
        root.remove_file(path.as_str())?;
    }
    root.symlink(target, path.as_str())?;
    root.set_link_mtime(path.as_str(), mtime_ns)?;
    Ok(())
}
