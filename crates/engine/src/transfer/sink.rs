//! The receiving side of a transfer: create what the manifest lists, tell the sender what is already
//! here, then verify and write every chunk that arrives and put each file in place once its digest
//! matches.
//!
//! Files are received into a hidden temporary name in their directory and renamed into place only
//! when every chunk is verified and the file digest matches the sender's (`--fsync`: after an
//! fsync). A journal next to the data (`.longhaul-journal` in the destination directory) records each
//! file started and each chunk verified, so a transfer that is cut (either side killed, the path
//! lost) resumes with only the missing chunks; on resume the chunks the journal claims are read back
//! and re-hashed, and only those that still match count. The journal is removed when a transfer
//! completes with every file in place. An existing file with the sender's size and modification time
//! counts as already there (after both sides have hashed it: the digests must still match); another
//! existing file fails unless `overwrite`.
//!
//! What the peer says is checked before it is acted on. The whole manifest is received and validated
//! (tree rules, reserved names, and for `get` that every entry lies under a name the client asked for)
//! before anything in the destination is created or even looked at. Modes go through the receiver's
//! [`ModePolicy`] (umask; setuid, setgid and sticky only if the receiver asked); existing directories
//! keep their mode unless the receiver asked otherwise. Temporaries are derived names
//! (`.lh-<id>.part`), and each is renamed into place only if the name is still the very inode this
//! receiver created and wrote (checked on the open descriptor and again just before the rename).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use longhaul_transfer::journal::temp_path;
use longhaul_transfer::journal::{Part, Resume};
use longhaul_transfer::manifest::{ChunkPlan, EntryKind, Manifest, check_requested};
use longhaul_transfer::msg::{CHUNK_HEADER_LEN, have_messages};
use longhaul_transfer::stripe::Assignment;
use longhaul_transfer::{
    ChunkOpener, Digest, FileIdentity, MacKey, Message, RangeSet, RelPath, file_digest, hash_chunk,
};
use rustix::fs::FallocateFlags;

use super::conn::{Ctl, REASON_GRACE, Writer, unexpected};
use super::data::DataConn;
use super::dest::{PlacedFile, SinkOptions, inode_of, place_symlink, replaced};
use super::journals::{self, Journals};
use super::page_cache::Behind;
use super::root::{Inode, Kind, Root, RootError};
use super::side::{IDLE_TIMEOUT, PROGRESS_EVERY, Side};
use super::stripes;
use crate::EngineError;
use longhaul_transfer::report::Event;

/// One file being received.
struct Slot {
    path: RelPath,
    temp: RelPath,
    plan: ChunkPlan,
    /// The mode to give the file (the peer's, through the receiver's policy).
    mode: u32,
    mtime_ns: i64,
    /// The temporary file this receiver created or resumed: only this inode is ever written or
    /// renamed into place.
    inode: Option<Inode>,
    /// Hashes of the verified chunks (from the journal after re-checking, and from this run).
    hashes: Mutex<BTreeMap<u64, Digest>>,
    /// Already complete under its final name (same size and time): verify by hashing it.
    in_place: bool,
    /// Refused at preparation (exists, not a regular file, ...): the reason.
    refused: Option<String>,
    /// A stripe: the chunks of this file it receives (`None`: all of them).
    owned: Option<RangeSet>,
}

impl Slot {
    fn owns(&self, chunk: u64) -> bool {
        self.owned.as_ref().is_none_or(|o| o.contains(chunk))
    }

    /// Whether the file's digest can be checked now: every chunk this receiver takes is verified
    /// (or nothing is written: a file already in place, or refused).
    fn complete(&self) -> bool {
        if self.in_place || self.refused.is_some() {
            return true;
        }
        let expected = self.owned.as_ref().map_or(self.plan.count(), RangeSet::len);
        self.hashes.lock().unwrap_or_else(|e| e.into_inner()).len() as u64 >= expected
    }
}

/// A prepared receiver: the destination, the manifest's files and the journal.
pub(crate) struct Sink {
    root: Root,
    opts: SinkOptions,
    slots: HashMap<u32, Arc<Slot>>,
    /// Directories to finish last: path, mode to set (`None`: an existing one that keeps its own),
    /// time.
    dirs: Vec<(RelPath, Option<u32>, i64)>,
    journal: Mutex<Journals>,
    /// A stripe: the whole manifest, for the finish.
    manifest: Option<Manifest>,
}

impl Sink {
    /// Opens the destination's journals (refusing a transfer beside one it must not run beside).
    pub(crate) fn new(root: Root, opts: SinkOptions) -> Result<Self, EngineError> {
        let journal = Journals::open(&root, opts.journal_key, opts.stripe.as_ref())?;
        Ok(Self {
            root,
            opts,
            slots: HashMap::new(),
            dirs: Vec::new(),
            journal: Mutex::new(journal),
            manifest: None,
        })
    }

    fn journals(&self) -> std::sync::MutexGuard<'_, Journals> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates the directories and links of a validated manifest ([`recv_manifest`]) and prepares
    /// every file (a stripe: every file it owns part of).
    pub(crate) fn prepare_all(
        &mut self,
        manifest: Manifest,
        chunk_size: u64,
    ) -> Result<(), EngineError> {
        let owned: Option<HashMap<u32, RangeSet>> = self.opts.stripe.map(|s| {
            Assignment::for_manifest(manifest.entries(), chunk_size, s.count)
                .of(s.index)
                .into_iter()
                .collect()
        });
        for e in manifest.entries() {
            let mine = match &owned {
                None => Some(None),
                Some(o) => o.get(&e.id).map(|set| Some(set.clone())),
            };
            self.prepare(e.id, &e.entry, chunk_size, mine)?;
        }
        if self.opts.stripe.is_some() {
            self.manifest = Some(manifest);
        }
        Ok(())
    }

    /// Prepares one entry; `owned` is `None` for a file this stripe has no part of.
    fn prepare(
        &mut self,
        id: u32,
        e: &longhaul_transfer::Entry,
        chunk_size: u64,
        owned: Option<Option<RangeSet>>,
    ) -> Result<(), EngineError> {
        let path = e.path.as_str();
        let striped = self.opts.stripe.is_some();
        match &e.kind {
            EntryKind::Dir => {
                let existing = self.root.lstat(path)?;
                let mode = self.opts.modes.apply(e.mode);
                match existing.map(|m| m.kind) {
                    // Owner rwx while the transfer writes into it; the final mode is set at the end.
                    // (A transfer cut before that leaves `mode | 0o700`, which the resume keeps.)
                    None => {
                        self.root.create_dirs(path, mode | 0o700)?;
                        if striped {
                            self.journals().record(|j| j.dir_created(&e.path))?;
                        }
                        self.dirs.push((e.path.clone(), Some(mode), e.mtime_ns));
                    }
                    Some(Kind::Dir) => {
                        let chmod = self.opts.overwrite && self.opts.chmod_existing_dirs;
                        self.dirs
                            .push((e.path.clone(), chmod.then_some(mode), e.mtime_ns));
                    }
                    Some(_) => {
                        return Err(EngineError::Transfer(format!(
                            "{path} exists in {} and is not a directory",
                            self.root.path().display()
                        )));
                    }
                }
            }
            // A stripe leaves links to the finish.
            EntryKind::Symlink { .. } if striped => {}
            EntryKind::Symlink { target } => {
                place_symlink(&self.root, &e.path, target, e.mtime_ns, self.opts.overwrite)?;
            }
            EntryKind::File { size } => {
                let Some(owned) = owned else { return Ok(()) };
                let plan = ChunkPlan::new(*size, chunk_size)
                    .map_err(|err| EngineError::Transfer(err.to_string()))?;
                let existing = self.root.lstat(path)?;
                let mut slot =
                    self.prepare_file(e, *size, plan, existing.map(|m| (m.kind, m.mtime_ns)))?;
                slot.owned = owned;
                if slot.inode.is_some() {
                    self.resume_chunks(&mut slot)?;
                }
                self.slots.insert(id, Arc::new(slot));
            }
        }
        Ok(())
    }

    fn prepare_file(
        &mut self,
        e: &longhaul_transfer::Entry,
        size: u64,
        plan: ChunkPlan,
        existing: Option<(Kind, i64)>,
    ) -> Result<Slot, EngineError> {
        let identity = FileIdentity {
            size,
            mtime_ns: e.mtime_ns,
            chunk_size: plan.chunk_size(),
        };
        let mut slot = Slot {
            path: e.path.clone(),
            temp: temp_path(&e.path, &identity),
            plan,
            mode: self.opts.modes.apply(e.mode),
            mtime_ns: e.mtime_ns,
            inode: None,
            hashes: Mutex::new(BTreeMap::new()),
            in_place: false,
            refused: None,
            owned: None,
        };
        match existing {
            Some((Kind::File(s), t)) if s == size && t == e.mtime_ns => {
                slot.in_place = true;
                if self.opts.stripe.is_some() {
                    // Its part (hashed in place) is recorded against the file's record.
                    self.journals()
                        .record(|j| j.start_file(&e.path, identity, e.mode))?;
                }
                return Ok(slot);
            }
            Some((Kind::File(_), _)) if self.opts.overwrite => {}
            Some((Kind::Symlink, _)) if self.opts.overwrite => {}
            Some(_) => {
                slot.refused = Some(if self.opts.overwrite {
                    "exists and is not a regular file".into()
                } else {
                    "exists and differs (use --overwrite to replace it)".into()
                });
                return Ok(slot);
            }
            None => {}
        }
        let mut j = self.journals();
        // The journals' state is only used for a path of this manifest with the same identity, and
        // temporaries are derived names (`journal::temp_path`), never names read from their text.
        let claims = j.claims(&e.path, identity);
        for stale in &claims.stale {
            if *stale != slot.temp {
                self.root.remove_file(stale.as_str())?;
            }
        }
        if !matches!(j.state.resume(&e.path, identity), Resume::Continue(_)) {
            j.record(|s| s.start_file(&e.path, identity, e.mode))?;
        }
        drop(j);
        let f = self.root.open_partial(slot.temp.as_str())?;
        slot.inode = Some(inode_of(&f, &slot.temp)?);
        // Stale bytes of a temporary nobody claims are cut (an unstriped receiver owns the file); a
        // stripe's temporary is shared, and only claimed or received chunks ever count.
        if claims.hashes.is_empty() && self.opts.stripe.is_none() {
            f.set_len(0)
                .map_err(|err| EngineError::io(format!("truncate {}", slot.temp), err))?;
        }
        // Reserve the space now: a full disk is found before any data moves.
        reserve(&f, size).map_err(|err| disk_error(&self.root, &e.path, size, err))?;
        *slot.hashes.get_mut().unwrap_or_else(|e| e.into_inner()) = claims.hashes;
        Ok(slot)
    }

    /// Trusts only what is still on disk: re-reads and re-hashes every chunk of ours that a
    /// journal claims, and records those that match in our own journal.
    fn resume_chunks(&self, slot: &mut Slot) -> Result<(), EngineError> {
        let claimed = std::mem::take(slot.hashes.get_mut().unwrap_or_else(|e| e.into_inner()));
        if claimed.is_empty() {
            return Ok(());
        }
        let f = self.root.open_rw(slot.temp.as_str())?;
        if Some(inode_of(&f, &slot.temp)?) != slot.inode {
            return Err(EngineError::Transfer(format!(
                "{}: {}",
                slot.path,
                replaced(&slot.temp)
            )));
        }
        let mut buf = Vec::new();
        let mut hashes = BTreeMap::new();
        let mut j = self.journals();
        let recorded = j.state.file(&slot.path).map(|st| st.verified.clone());
        for (i, want) in claimed {
            let Some(span) = slot.plan.chunk(i) else {
                continue;
            };
            if !slot.owns(i) {
                continue;
            }
            buf.resize(span.len as usize, 0);
            if f.read_exact_at(&mut buf, span.offset).is_ok() && hash_chunk(&buf) == want {
                hashes.insert(i, want);
                if !recorded.as_ref().is_some_and(|r| r.contains(i)) {
                    j.record(|s| s.chunk_verified(&slot.path, i, want))?;
                }
            }
        }
        *slot.hashes.get_mut().unwrap_or_else(|e| e.into_inner()) = hashes;
        Ok(())
    }

    /// Releases the journal's lock (the transfer is over; nothing more is appended).
    fn unlock_journal(&self) {
        self.journals().unlock();
    }

    /// The verified chunks of every file (all of a file already in place or refused; for a stripe,
    /// also every chunk that is not its own), as `have`.
    pub(crate) fn send_have(&self, ctl: &Ctl) -> Result<(), EngineError> {
        let sets: Vec<(u32, RangeSet)> = self
            .slots
            .iter()
            .map(|(&id, s)| {
                let mut set = RangeSet::new();
                if s.in_place || s.refused.is_some() {
                    set.insert_range(0, s.plan.count());
                } else {
                    let hashes = s.hashes.lock().unwrap_or_else(|e| e.into_inner());
                    for i in 0..s.plan.count() {
                        if !s.owns(i) || hashes.contains_key(&i) {
                            set.insert(i);
                        }
                    }
                }
                (id, set)
            })
            .collect();
        let refs: Vec<(u32, &RangeSet)> = sets.iter().map(|(id, s)| (*id, s)).collect();
        let mut msgs = have_messages(&refs);
        if msgs.is_empty() {
            msgs.push(Message::Have {
                files: Vec::new(),
                last: true,
            });
        }
        for m in msgs {
            ctl.send(&m)?;
        }
        // Refusals are reported at once; the sender then has nothing to send for them.
        for (&id, s) in &self.slots {
            if let Some(reason) = &s.refused {
                ctl.send(&Message::FileFailed {
                    file: id,
                    reason: reason.clone(),
                })?;
            }
        }
        Ok(())
    }

    /// Bytes still to receive (what `have` did not cover).
    pub(crate) fn totals(&self) -> (u64, u64, u64) {
        let mut total = 0;
        let mut missing = 0;
        for s in self.slots.values() {
            total += s.plan.size();
            if s.in_place || s.refused.is_some() {
                continue;
            }
            let h = s.hashes.lock().unwrap_or_else(|e| e.into_inner());
            missing += (0..s.plan.count())
                .filter(|&i| s.owns(i) && !h.contains_key(&i))
                .filter_map(|i| s.plan.chunk(i))
                .map(|c| u64::from(c.len))
                .sum::<u64>();
        }
        (self.slots.len() as u64, total, missing)
    }
}

/// Reads every manifest batch and checks the whole manifest before anything is created or looked at in
/// the destination: the tree rules and reserved names ([`Manifest::add`]), and for `get`
/// (`requested`: the names of the sources the client asked for, each landing in DEST under its name)
/// that every entry is one of those names or lies under one, as scp should have (CVE-2019-6111).
pub(crate) fn recv_manifest(
    ctl: &mut Ctl,
    requested: Option<&[String]>,
) -> Result<Manifest, EngineError> {
    let mut manifest = Manifest::new();
    loop {
        let (entries, last) = match ctl.recv(IDLE_TIMEOUT, "the manifest")? {
            Message::ManifestBatch { entries, last } => (entries, last),
            m => return Err(unexpected(&m, "the manifest")),
        };
        for e in entries {
            if let Some(names) = requested {
                check_requested(&e.entry.path, names)
                    .map_err(|err| EngineError::Transfer(err.to_string()))?;
            }
            manifest
                .add(e)
                .map_err(|err| EngineError::Transfer(format!("bad manifest: {err}")))?;
        }
        if last {
            return Ok(manifest);
        }
    }
}

/// The filesystem type of tmpfs (`TMPFS_MAGIC` of linux/magic.h).
pub(super) const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Reserves `size` bytes for a file about to be written. Where the filesystem keeps extents (ext4,
/// XFS, btrfs) `fallocate` lays the file out in one piece at once, and a full disk is found before
/// any data moves. tmpfs has no layout to keep, and reserving there zeroes every page up front:
/// 1.2 s for 4 GiB on the 2-core bench machine, all of it before the sender may start (the `have`
/// waits for it); there the free space is checked instead and the pages come with the data.
fn reserve(f: &File, size: u64) -> std::io::Result<()> {
    if size == 0 {
        return Ok(());
    }
    let fs = rustix::fs::fstatfs(f)?;
    #[allow(
        clippy::useless_conversion,
        reason = "f_type is i64 here, narrower on other architectures"
    )]
    let on_tmpfs = i64::from(fs.f_type) == TMPFS_MAGIC;
    if !on_tmpfs {
        return Ok(rustix::fs::fallocate(f, FallocateFlags::empty(), 0, size)?);
    }
    let held = rustix::fs::fstat(f)?.st_blocks.max(0) as u64 * 512;
    let free = (fs.f_bavail as u64).saturating_mul(fs.f_bsize.max(0) as u64);
    if size.saturating_sub(held) > free {
        return Err(std::io::Error::from_raw_os_error(
            rustix::io::Errno::NOSPC.raw_os_error(),
        ));
    }
    Ok(())
}

fn disk_error(root: &Root, path: &RelPath, size: u64, e: std::io::Error) -> EngineError {
    let err = RootError {
        op: "reserve space for",
        path: path.to_string(),
        root: root.path().display().to_string(),
        source: e,
    };
    if err.is_disk_full() {
        EngineError::Transfer(format!(
            "receiver's disk is full: {} needs {size} bytes under {}; free some space and run the \
same command again to resume",
            path,
            root.path().display()
        ))
    } else {
        err.into()
    }
}

/// Shared by the stream threads and the control thread.
struct Shared {
    sink: Sink,
    verdicts: Writer,
    stop: AtomicBool,
    error: Mutex<Option<EngineError>>,
    bytes: AtomicU64,
    chunks: AtomicU64,
}

impl Shared {
    fn fail(&self, e: EngineError) {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(e);
        self.stop.store(true, Ordering::Release);
    }
}

/// Receives chunks on `socks` and file results on `ctl` until the sender's `done`. Chunk headers must
/// carry `key`'s tags (the session's key of the data's direction); one that does not ends the transfer.
pub(crate) fn run(
    ctl: &mut Ctl,
    socks: Vec<DataConn>,
    sink: Sink,
    chunk_size: u64,
    key: &MacKey,
    side: &mut Side<'_>,
) -> Result<(), EngineError> {
    let (files, bytes_total, missing) = sink.totals();
    side.to_send = missing;
    side.event(Event::Started {
        streams: socks.len() as u32,
        chunk_size,
        files,
        bytes_total,
        bytes_to_send: missing,
    });
    let shared = Arc::new(Shared {
        sink,
        verdicts: ctl.writer(),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
        bytes: AtomicU64::new(0),
        chunks: AtomicU64::new(0),
    });
    let mut threads = Vec::new();
    for (i, sock) in socks.into_iter().enumerate() {
        let mine = Arc::clone(&shared);
        let opener = ChunkOpener::new(key.clone(), i as u32);
        let spawned = thread::Builder::new()
            .name(format!("lh-recv {i}"))
            .spawn(move || {
                if let Err(e) = stream(i as u32, sock, opener, &mine, chunk_size) {
                    mine.fail(e);
                }
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => shared.fail(EngineError::io("start a stream thread", e)),
        }
    }
    let result = control(ctl, &shared, side);
    let streams_failed = result.is_ok();
    side.bytes_moved = shared.bytes.load(Ordering::Relaxed);
    side.chunks_verified = shared.chunks.load(Ordering::Relaxed);
    if let Err(e) = result {
        shared.fail(e);
        // Wake the stream threads: their sockets close when the sender goes away; here we stop
        // reading by shutting them down ourselves.
    }
    shared.stop.store(true, Ordering::Release);
    for t in threads {
        let _ = t.join();
    }
    let err = shared
        .error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    match err {
        Some(e) if streams_failed => Err(ctl.reason_for(e, REASON_GRACE)),
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn stream(
    index: u32,
    sock: DataConn,
    mut opener: ChunkOpener,
    shared: &Shared,
    chunk_size: u64,
) -> Result<(), EngineError> {
    let sink = &shared.sink;
    let mut buf = Vec::with_capacity(chunk_size as usize);
    let mut open: Option<(u32, File, Behind)> = None;
    let mut hdr = [0u8; CHUNK_HEADER_LEN];
    // Reads time out now and then so that a stop (an error elsewhere) is noticed.
    sock.set_read_tick(Duration::from_millis(500));
    let stream_err = |e: std::io::Error| EngineError::Stream {
        stream: index,
        source: e,
    };
    loop {
        // A stop while chunks keep coming (the read never times out then) is seen here.
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        match read_full(&sock, &mut hdr, &shared.stop).map_err(stream_err)? {
            Fill::Eof => return Ok(()),
            Fill::Stopped => return Ok(()),
            Fill::Full => {}
        }
        // The tag first: nothing of an unauthenticated header is acted on.
        let h = opener.open(&hdr)?;
        let slot = sink.slots.get(&h.file).ok_or_else(|| {
            EngineError::Transfer(format!(
                "chunk for file {}, which is not in the manifest (or not this stripe's)",
                h.file
            ))
        })?;
        h.check_plan(&slot.plan)?;
        if !slot.owns(h.chunk) {
            return Err(EngineError::Transfer(format!(
                "chunk {} of {} is not this stripe's",
                h.chunk, slot.path
            )));
        }
        buf.resize(h.len as usize, 0);
        match read_full(&sock, &mut buf, &shared.stop).map_err(stream_err)? {
            Fill::Full => {}
            Fill::Eof => {
                return Err(EngineError::Transfer(format!(
                    "stream {index}: the sender closed in the middle of a chunk"
                )));
            }
            Fill::Stopped => return Ok(()),
        }
        let ok = h.matches(&buf) && slot.refused.is_none() && !slot.in_place;
        if ok {
            let at = (h.file, h.chunk, h.offset);
            store(shared, slot, at, &buf, h.hash, &mut open)?;
        }
        shared.verdicts.send(&Message::ChunkVerdict {
            file: h.file,
            chunk: h.chunk,
            ok,
        })?;
    }
}

/// Writes a verified chunk (`at`: file id, chunk index, offset) of `slot` into its temporary file
/// (`open` keeps the last file opened), journals it and counts it.
fn store(
    shared: &Shared,
    slot: &Slot,
    at: (u32, u64, u64),
    buf: &[u8],
    hash: Digest,
    open: &mut Option<(u32, File, Behind)>,
) -> Result<(), EngineError> {
    let (file, chunk, offset) = at;
    let sink = &shared.sink;
    if open.as_ref().is_none_or(|(id, ..)| *id != file) {
        let f = sink.root.open_rw(slot.temp.as_str())?;
        if Some(inode_of(&f, &slot.temp)?) != slot.inode {
            return Err(EngineError::Transfer(format!(
                "{}: {}",
                slot.path,
                replaced(&slot.temp)
            )));
        }
        *open = Some((file, f, Behind::default()));
    }
    let (_, f, behind) = open.as_mut().expect("opened above");
    f.write_all_at(buf, offset).map_err(|e| {
        let err = RootError {
            op: "write",
            path: slot.temp.to_string(),
            root: sink.root.path().display().to_string(),
            source: e,
        };
        if err.is_disk_full() {
            EngineError::Transfer(format!(
                "receiver's disk is full writing {}; free some space and run the same command \
again to resume",
                slot.path
            ))
        } else {
            err.into()
        }
    })?;
    behind.done(f, offset, buf.len() as u64);
    sink.journals()
        .record(|j| j.chunk_verified(&slot.path, chunk, hash))?;
    slot.hashes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(chunk, hash);
    shared.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
    shared.chunks.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// A chunk that came on the control connection (a plan of 0 streams): checked against the file's
/// chunk plan like a data connection's header, then stored; a file already in place or refused
/// takes nothing (its `file_done` says how it ended). The frame was authenticated, so the bytes
/// are the sender's; their hash is taken here for the file digest.
fn store_inline(
    shared: &Shared,
    (file, chunk, data): (u32, u64, &[u8]),
    open: &mut Option<(u32, File, Behind)>,
) -> Result<(), EngineError> {
    let slot = shared.sink.slots.get(&file).ok_or_else(|| {
        EngineError::Transfer(format!(
            "inline chunk for file {file}, which is not in the manifest"
        ))
    })?;
    match slot.plan.chunk(chunk) {
        Some(span) if span.len as usize == data.len() && slot.owns(chunk) => {
            if slot.refused.is_some() || slot.in_place {
                return Ok(());
            }
            store(
                shared,
                slot,
                (file, chunk, span.offset),
                data,
                hash_chunk(data),
                open,
            )
        }
        _ => Err(EngineError::Transfer(format!(
            "inline chunk {chunk} of {} ({} bytes) does not match its chunk plan",
            slot.path,
            data.len()
        ))),
    }
}

enum Fill {
    Full,
    Eof,
    Stopped,
}

/// Fills `buf` from `sock`; EOF before the first byte is a clean end, within it an error.
fn read_full(sock: &DataConn, buf: &mut [u8], stop: &AtomicBool) -> std::io::Result<Fill> {
    let mut got = 0;
    while got < buf.len() {
        match sock.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(Fill::Eof),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if crate::control::is_timeout(&e) => {
                if stop.load(Ordering::Acquire) {
                    return Ok(Fill::Stopped);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Fill::Full)
}

/// Puts file `id` in place if its digest matches `want`; the reason if not. A stripe compares the
/// digest over its own chunks of the file and records its part verified; the finish puts the file
/// in place.
fn finalize(sink: &Sink, id: u32, want: &Digest) -> Result<Result<(), String>, EngineError> {
    let Some(slot) = sink.slots.get(&id) else {
        return Err(EngineError::Transfer(format!(
            "file_done for file {id}, which is not in the manifest (or not this stripe's)"
        )));
    };
    if let Some(reason) = &slot.refused {
        return Ok(Err(reason.clone()));
    }
    let plan = slot.plan;
    let at = if slot.in_place {
        &slot.path
    } else {
        &slot.temp
    };
    let hashes: BTreeMap<u64, Digest> = if slot.in_place {
        // Already here: hash what is on disk.
        let f = sink.root.open_read(at.as_str())?;
        let mut buf = Vec::new();
        let mut h = BTreeMap::new();
        for i in (0..plan.count()).filter(|&i| slot.owns(i)) {
            let span = plan.chunk(i).expect("index below count");
            buf.resize(span.len as usize, 0);
            f.read_exact_at(&mut buf, span.offset)
                .map_err(|e| EngineError::io(format!("read {at}"), e))?;
            h.insert(i, hash_chunk(&buf));
        }
        h
    } else {
        slot.hashes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    };
    let expected = slot.owned.as_ref().map_or(plan.count(), RangeSet::len);
    if hashes.len() as u64 != expected {
        return Ok(Err(format!(
            "{} of {} chunks verified when the sender said it was done",
            hashes.len(),
            expected
        )));
    }
    let got = file_digest(plan.size(), plan.chunk_size(), hashes.values());
    if got != *want {
        return Ok(Err("the file digest differs from the sender's".into()));
    }
    if sink.opts.stripe.is_some() {
        let Some(inode) = sink.root.inode(at.as_str())? else {
            return Ok(Err(format!("{at} is gone")));
        };
        if !slot.in_place && Some(inode) != slot.inode {
            return Ok(Err(replaced(&slot.temp)));
        }
        let part = Part {
            digest: got,
            inode: (inode.0, inode.1),
        };
        sink.journals()
            .record(|j| j.part_verified(&slot.path, part))?;
        return Ok(Ok(()));
    }
    if slot.in_place {
        return Ok(Ok(()));
    }
    // Only the inode this receiver created and wrote (and whose chunks it verified as they were
    // written) is put in place: checked on the descriptor, whose mode and time are set, and again on
    // the name right before the rename. (Re-hashing the file instead would double the disk reads.)
    let file = PlacedFile {
        path: &slot.path,
        temp: &slot.temp,
        inode: slot.inode,
        mode: slot.mode,
        mtime_ns: slot.mtime_ns,
        size: plan.size(),
    };
    if let Err(why) = file.put_in_place(&sink.root, sink.opts)? {
        return Ok(Err(why));
    }
    sink.journals()
        .record(|j| j.file_complete(&slot.path, got))?;
    Ok(Ok(()))
}

/// Checks file `id` against the sender's digest and tells the sender how it ended.
fn conclude(
    ctl: &Ctl,
    sink: &Sink,
    side: &mut Side<'_>,
    (id, digest): (u32, &Digest),
    failed: &mut u64,
) -> Result<(), EngineError> {
    let path = sink
        .slots
        .get(&id)
        .map_or_else(|| format!("file {id}"), |s| s.path.to_string());
    match finalize(sink, id, digest)? {
        Ok(()) => {
            ctl.send(&Message::FileVerified { file: id })?;
            side.file_done(path, None);
        }
        Err(reason) => {
            *failed += 1;
            if sink.slots.get(&id).is_some_and(|s| s.refused.is_none()) {
                ctl.send(&Message::FileFailed {
                    file: id,
                    reason: reason.clone(),
                })?;
            }
            side.file_done(path, Some(reason));
        }
    }
    Ok(())
}

/// How often the control loop looks again at files whose digest came before their last chunks.
const EARLY_DIGEST_POLL: Duration = Duration::from_millis(2);

fn control(ctl: &mut Ctl, shared: &Shared, side: &mut Side<'_>) -> Result<(), EngineError> {
    let sink = &shared.sink;
    let mut next_tick = Instant::now() + PROGRESS_EVERY;
    let mut failed = 0u64;
    let mut inline_file = None;
    // Digests the sender announced as soon as it had sent a file's chunks, before they were all
    // verified here (we said we take them so): each is checked once its chunks are in.
    let mut early: BTreeMap<u32, Digest> = BTreeMap::new();
    // The sender's `done` came; the loop ends once no early digest waits.
    let mut ended = false;
    loop {
        let complete: Vec<u32> = early
            .keys()
            .copied()
            .filter(|id| sink.slots.get(id).is_none_or(|s| s.complete()))
            .collect();
        for id in complete {
            let digest = early.remove(&id).expect("listed above");
            conclude(ctl, sink, side, (id, &digest), &mut failed)?;
        }
        if ended && early.is_empty() {
            break;
        }
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        side.check_stopping()?;
        let now = Instant::now();
        if now >= next_tick {
            next_tick = now + PROGRESS_EVERY;
            side.progress(shared.bytes.load(Ordering::Relaxed), side.files_ok);
        }
        let wait = if early.is_empty() {
            Duration::from_millis(250)
        } else {
            EARLY_DIGEST_POLL
        };
        let Some(m) = ctl.recv_until(now + wait)? else {
            side.check_idle(shared.bytes.load(Ordering::Relaxed))?;
            continue;
        };
        side.touch();
        match m {
            Message::ChunkInline { file, chunk, data } => {
                store_inline(shared, (file, chunk, &data), &mut inline_file)?;
            }
            Message::FileDone { file, digest } => {
                inline_file = None;
                if sink.slots.get(&file).is_some_and(|s| !s.complete()) {
                    early.insert(file, digest);
                } else {
                    conclude(ctl, sink, side, (file, &digest), &mut failed)?;
                }
            }
            Message::Done { .. } if ended => return Err(unexpected(&m, "file digests")),
            Message::Done { .. } => ended = true,
            m => return Err(unexpected(&m, "file digests")),
        }
    }
    side.progress(shared.bytes.load(Ordering::Relaxed), side.files_ok);
    if let (Some(stripe), Some(manifest)) = (sink.opts.stripe, &sink.manifest) {
        // A stripe: record that it ended; the one that ends last puts every file in place.
        let finished = if failed == 0 {
            sink.journals().record(|j| j.stripe_done())?;
            stripes::finish(&sink.root, &stripe, sink.opts, manifest)?
        } else {
            None
        };
        side.stripe = Some(stripes::summary(&stripe, finished.as_ref()));
        if let Some(f) = finished {
            side.failed.extend(f.failed);
        }
    } else {
        // Directories last, deepest first: writing into a directory changes its time.
        let mut dirs = sink.dirs.clone();
        dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
        for (p, mode, mtime) in dirs {
            sink.root.set_meta(p.as_str(), mode, mtime)?;
        }
        if failed == 0 {
            // Every file is in place: no journal here has anything left to resume.
            journals::remove_all(&sink.root)?;
        }
    }
    // Nothing is appended any more: let the next transfer into this destination start as soon as
    // the sender hears we are done (holding the lock until this side has unwound made a command
    // run right after the previous one fail with "another transfer is running").
    sink.unlock_journal();
    ctl.send(&Message::Done {
        files: side.files_ok,
        bytes: shared.bytes.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink over a fresh directory with one 5-byte file `f` (id 1) prepared and its one chunk
    /// written and verified, as the stream threads leave it.
    fn one_verified_file(tag: &str) -> (std::path::PathBuf, Sink, Digest) {
        use longhaul_transfer::manifest::{Entry, ManifestEntry};
        let dir = std::env::temp_dir().join(format!("lh-sink-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut sink = Sink::new(Root::open(&dir).unwrap(), SinkOptions::default()).unwrap();
        let mut m = Manifest::new();
        m.add(ManifestEntry {
            id: 1,
            entry: Entry {
                path: RelPath::parse("f").unwrap(),
                kind: EntryKind::File { size: 5 },
                mode: 0o4777,
                mtime_ns: 1_000_000_000,
            },
        })
        .unwrap();
        sink.prepare_all(m, 1 << 20).unwrap();
        let slot = Arc::clone(&sink.slots[&1]);
        let f = sink.root.open_rw(slot.temp.as_str()).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        let h = hash_chunk(b"hello");
        slot.hashes.lock().unwrap().insert(0, h);
        sink.journals()
            .record(|j| j.chunk_verified(&slot.path, 0, h))
            .unwrap();
        (dir, sink, file_digest(5, 1 << 20, [&h]))
    }

    #[test]
    fn only_the_inode_the_receiver_wrote_is_renamed_into_place() {
        let (dir, sink, digest) = one_verified_file("inode-ok");
        assert_eq!(finalize(&sink, 1, &digest).unwrap(), Ok(()));
        assert_eq!(std::fs::read(dir.join("f")).unwrap(), b"hello");
        // The default policy: umask 022, no setuid.
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.join("f")).unwrap().permissions(),
        );
        assert_eq!(mode & 0o7777, 0o755);
        let _ = std::fs::remove_dir_all(&dir);

        // Another file renamed over the temporary (by a local user, or by a peer's file of that
        // name before names were reserved) is refused, though the digest of what was verified
        // matches.
        let (dir, sink, digest) = one_verified_file("inode-replaced");
        let temp = sink.slots[&1].temp.clone();
        std::fs::write(dir.join("other"), b"HELLO").unwrap();
        std::fs::rename(dir.join("other"), dir.join(temp.as_str())).unwrap();
        let got = finalize(&sink, 1, &digest).unwrap();
        assert!(
            got.as_ref().is_err_and(|e| e.contains("was replaced")),
            "{got:?}"
        );
        assert!(!dir.join("f").exists(), "unverified bytes put in place");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_new_journal_is_replayed_with_its_records() {
        let dir = std::env::temp_dir().join(format!("lh-sink-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let root = Root::open(&dir).unwrap();
        let path = RelPath::parse("a.dat").unwrap();
        let identity = FileIdentity {
            size: 3 << 20,
            mtime_ns: 7,
            chunk_size: 1 << 20,
        };
        {
            let mut j = Journals::open(&root, [3; 32], None).unwrap();
            j.record(|s| s.start_file(&path, identity, 0o644)).unwrap();
            j.record(|s| s.chunk_verified(&path, 1, hash_chunk(b"x")))
                .unwrap();
        }
        let text = std::fs::read(dir.join(longhaul_transfer::reserved::JOURNAL_NAME)).unwrap();
        let replayed = longhaul_transfer::Journal::replay_keyed(&text, [3; 32]);
        assert!(
            !replayed.ignored_tail(),
            "{}",
            String::from_utf8_lossy(&text)
        );
        match replayed.resume(&path, identity) {
            Resume::Continue(st) => assert!(st.verified.contains(1)),
            other => panic!("expected to continue, got {other:?}"),
        }
        // A second transfer continues the same journal: still one header, all records trusted.
        {
            let mut j = Journals::open(&root, [3; 32], None).unwrap();
            j.record(|s| s.chunk_verified(&path, 2, hash_chunk(b"y")))
                .unwrap();
        }
        let text = std::fs::read(dir.join(longhaul_transfer::reserved::JOURNAL_NAME)).unwrap();
        let replayed = longhaul_transfer::Journal::replay_keyed(&text, [3; 32]);
        assert!(
            !replayed.ignored_tail(),
            "{}",
            String::from_utf8_lossy(&text)
        );
        match replayed.resume(&path, identity) {
            Resume::Continue(st) => assert_eq!(st.verified.len(), 2),
            other => panic!("expected to continue, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
