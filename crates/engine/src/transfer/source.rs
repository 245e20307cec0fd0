//! The sending side of a transfer: turn the sources into a manifest, then feed the data streams.
//!
//! Each data stream has one thread that pulls work from the shared [`Scheduler`], reads that chunk
//! (`pread` into its one reusable buffer), hashes it and writes header and bytes to its socket; the
//! socket buffer keeps the path busy while the thread reads the next chunk. The control thread turns
//! the receiver's verdicts into scheduler updates and, when every chunk of a file is verified, sends
//! the file digest. Memory: one chunk buffer per stream, whatever the file sizes.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use longhaul_transfer::manifest::{ChunkPlan, Entry, EntryKind, ManifestEntry};
use longhaul_transfer::msg::ManifestBatcher;
use longhaul_transfer::reserved::is_reserved_name;
use longhaul_transfer::schedule::{Announce, DEFAULT_MAX_RETRIES};
use longhaul_transfer::stripe::{Assignment, Stripe};
use longhaul_transfer::{
    ChunkHeader, ChunkSealer, Digest, MacKey, Message, RangeSet, RelPath, Scheduler,
    check_symlink_target, file_digest, hash_chunk,
};
use tracing::warn;

use super::conn::{Ctl, REASON_GRACE, unexpected};
use super::data::DataConn;
use super::page_cache;
use super::root::{Kind, Root, join};
use super::side::{IDLE_TIMEOUT, PROGRESS_EVERY, Side};
use crate::EngineError;
use longhaul_transfer::report::Event;

/// Where a manifest file's bytes come from.
#[derive(Debug)]
struct SourceFile {
    root: usize,
    rel: String,
    plan: Option<ChunkPlan>,
    size: u64,
    /// A stripe: the chunks of this file it sends (`None`: all of them).
    owned: Option<RangeSet>,
}

/// The sources of a transfer: their roots, the manifest entries, and for each file where to read it.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    roots: Vec<Root>,
    pub(crate) entries: Vec<ManifestEntry>,
    files: BTreeMap<u32, SourceFile>,
    /// Entries left out, with why (sockets, devices, links that leave the tree, non-UTF-8 names).
    pub(crate) skipped: Vec<String>,
    /// One stripe of a striped transfer: only its files and chunks are sent.
    pub(crate) stripe: Option<Stripe>,
    /// The receiver takes a file's digest before the file's chunks are all verified: each
    /// `file_done` goes out once the file's chunks are sent, a round trip sooner.
    pub(crate) early_digest: bool,
}

impl Sources {
    /// Adds source `rel` of `root` (`""`: the root itself) under the name `name`, recursively.
    pub(crate) fn add(&mut self, root: Root, rel: &str, name: &str) -> Result<(), EngineError> {
        let dest = RelPath::parse(name).map_err(|e| {
            EngineError::Transfer(format!("source name {name:?} cannot be transferred: {e}"))
        })?;
        if is_reserved_name(name) {
            return Err(EngineError::Transfer(format!(
                "source name {name:?} is reserved for a receiver's journal and temporary files"
            )));
        }
        if self.entries.iter().any(|e| e.entry.path == dest) {
            return Err(EngineError::Transfer(format!(
                "two sources are called {name:?}; they would land on the same path"
            )));
        }
        let Some(meta) = root.lstat(rel)? else {
            return Err(root.err("find", rel, rustix::io::Errno::NOENT).into());
        };
        self.roots.push(root);
        let r = self.roots.len() - 1;
        let before = self.entries.len();
        self.walk(r, rel.to_string(), dest, meta)?;
        if self.entries.len() == before {
            // The source itself was left out (a link leaving the tree, a device): refuse it rather
            // than move nothing and report success.
            let why = self.skipped.pop().unwrap_or_default();
            return Err(EngineError::Transfer(format!("nothing to send: {why}")));
        }
        Ok(())
    }

    fn walk(
        &mut self,
        r: usize,
        rel: String,
        path: RelPath,
        meta: super::root::Meta,
    ) -> Result<(), EngineError> {
        let id = u32::try_from(self.entries.len())
            .map_err(|_| EngineError::Transfer("more than 2^32 entries".into()))?;
        let kind = match meta.kind {
            Kind::Dir => EntryKind::Dir,
            Kind::File(size) => EntryKind::File { size },
            Kind::Symlink => {
                let target = self.roots[r].read_link(&rel)?;
                if let Err(e) = check_symlink_target(&path, &target) {
                    self.skipped
                        .push(format!("{path}: symlink to {target:?} left out ({e})"));
                    return Ok(());
                }
                EntryKind::Symlink { target }
            }
            Kind::Other => {
                self.skipped.push(format!(
                    "{path}: not a file, directory or symlink; left out"
                ));
                return Ok(());
            }
        };
        let entry = Entry {
            path: path.clone(),
            kind: kind.clone(),
            mode: meta.mode,
            mtime_ns: meta.mtime_ns,
        };
        entry
            .validate()
            .map_err(|e| EngineError::Transfer(format!("{path}: {e}")))?;
        self.entries.push(ManifestEntry { id, entry });
        match kind {
            EntryKind::File { size } => {
                self.files.insert(
                    id,
                    SourceFile {
                        root: r,
                        rel,
                        plan: None,
                        size,
                        owned: None,
                    },
                );
            }
            EntryKind::Dir => {
                for (name, m) in self.roots[r].list(&rel)? {
                    // A receiver's own files (an earlier transfer's journal or partial files here)
                    // are not data, and every receiver refuses their names.
                    if is_reserved_name(&name) {
                        self.skipped.push(format!(
                            "{path}/{name}: left out (a name reserved for a receiver's journal and \
temporary files)"
                        ));
                        continue;
                    }
                    let child = match RelPath::parse(&name).and_then(|n| path.join(&n)) {
                        Ok(c) => c,
                        Err(e) => {
                            self.skipped.push(format!("{path}/{name}: left out ({e})"));
                            continue;
                        }
                    };
                    self.walk(r, join(&rel, &name), child, m)?;
                }
            }
            EntryKind::Symlink { .. } => {}
        }
        Ok(())
    }

    /// The sizes of the files to send, added up.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.files
            .values()
            .map(|f| f.size)
            .fold(0, u64::saturating_add)
    }

    /// How many chunks of `chunk_size` the files to send make.
    pub(crate) fn chunk_count(&self, chunk_size: u64) -> u64 {
        self.files
            .values()
            .map(|f| f.size.div_ceil(chunk_size.max(1)))
            .fold(0, u64::saturating_add)
    }

    /// Sends the manifest in frames of at most 64 KiB.
    pub(crate) fn send_manifest(&self, ctl: &Ctl) -> Result<(), EngineError> {
        let mut b = ManifestBatcher::new();
        for e in &self.entries {
            if let Some(m) = b.push(e.clone()) {
                ctl.send(&m)?;
            }
        }
        ctl.send(&b.finish())
    }
}

/// Reads the receiver's `have` messages (after the manifest): verified chunks per file id.
pub(crate) fn recv_have(
    ctl: &mut Ctl,
    src: &Sources,
    chunk_size: u64,
) -> Result<HashMap<u32, RangeSet>, EngineError> {
    // Resume state is checked against our own manifest: only our files, only their chunks, and no
    // more of it than the manifest could need (issue 11, finding 7).
    let chunks = |id: u32| src.files.get(&id).map(|f| f.size.div_ceil(chunk_size));
    let total = src.chunk_count(chunk_size);
    let mut have = longhaul_transfer::msg::HaveCollector::new(total);
    loop {
        match ctl.recv(IDLE_TIMEOUT, "the receiver's resume state")? {
            Message::Have { files, last } => {
                have.add(&files, chunks)?;
                if last {
                    return Ok(have.finish());
                }
            }
            m => return Err(unexpected(&m, "have")),
        }
    }
}

/// A small transfer (a plan of 0 streams): every file's chunks and digest on the control
/// connection, then the sender's `done`, all written at once right behind the request, before the
/// receiver has answered anything: the receiver reads them in order, so each file's chunks are
/// stored before its digest is checked, and the authenticated frames need no verdicts. Returns the
/// bytes sent.
pub(crate) fn send_inline(ctl: &Ctl, src: &Sources, chunk_size: u64) -> Result<u64, EngineError> {
    let mut sent = 0u64;
    for (&id, f) in &src.files {
        let plan =
            ChunkPlan::new(f.size, chunk_size).map_err(|e| EngineError::Transfer(e.to_string()))?;
        let mut hashes = Vec::new();
        if plan.count() > 0 {
            let file = src.roots[f.root].open_read(&f.rel)?;
            for i in 0..plan.count() {
                let span = plan.chunk(i).expect("index below count");
                let mut data = vec![0; span.len as usize];
                file.read_exact_at(&mut data, span.offset).map_err(|e| {
                    EngineError::Transfer(format!(
                        "read {} at {}: {e} (did the file change during the transfer?)",
                        f.rel, span.offset
                    ))
                })?;
                hashes.push(hash_chunk(&data));
                sent += data.len() as u64;
                ctl.send(&Message::ChunkInline {
                    file: id,
                    chunk: i,
                    data,
                })?;
            }
        }
        ctl.send(&Message::FileDone {
            file: id,
            digest: file_digest(plan.size(), plan.chunk_size(), &hashes),
        })?;
    }
    ctl.send(&Message::Done {
        files: src.files.len() as u64,
        bytes: sent,
    })?;
    Ok(sent)
}

/// The receiver's answers to [`send_inline`] (after its resume state, once the server has taken
/// the request: the transfer has started, its `sent` bytes on their way): a result for every
/// file, then its `done`.
pub(crate) fn inline_results(
    ctl: &mut Ctl,
    src: &Sources,
    chunk_size: u64,
    sent: u64,
    side: &mut Side<'_>,
) -> Result<(), EngineError> {
    let total = src.files.len() as u64;
    side.to_send = sent;
    side.event(Event::Started {
        streams: 0,
        chunk_size,
        files: total,
        bytes_total: src.total_bytes(),
        bytes_to_send: sent,
    });
    side.bytes_moved = sent;
    let (mut verified, mut failed) = (0u64, 0u64);
    loop {
        match ctl.recv(IDLE_TIMEOUT, "the receiver's file results")? {
            Message::FileVerified { file } => {
                verified += 1;
                side.chunks_verified += src
                    .files
                    .get(&file)
                    .map_or(0, |f| f.size.div_ceil(chunk_size.max(1)));
                side.file_done(src_path(src, file), None);
            }
            Message::FileFailed { file, reason } => {
                failed += 1;
                side.file_done(src_path(src, file), Some(reason));
            }
            Message::Done { .. } => break,
            m => return Err(unexpected(&m, "file results")),
        }
    }
    if verified + failed != total {
        return Err(EngineError::Transfer(format!(
            "the receiver ended after answering for {} of {total} files",
            verified + failed
        )));
    }
    side.progress(side.bytes_moved, verified);
    Ok(())
}

/// State shared by the control thread and the stream threads.
struct Shared {
    sched: Mutex<Scheduler>,
    work: Condvar,
    /// Hashes of the chunks sent, per file, for the file digest.
    hashes: Mutex<HashMap<u32, BTreeMap<u64, Digest>>>,
    stop: AtomicBool,
    error: Mutex<Option<EngineError>>,
    bytes: AtomicU64,
}

impl Shared {
    fn fail(&self, e: EngineError) {
        let mut slot = self.error.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(e);
        self.stop.store(true, Ordering::Release);
        self.work.notify_all();
    }

    /// The next chunk for `stream`, waiting while others may still be re-queued; `None` when done.
    fn next(&self, stream: u32) -> Option<longhaul_transfer::Work> {
        let mut s = self.sched.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.stop.load(Ordering::Acquire) || s.is_finished() {
                return None;
            }
            if let Some(w) = s.next_for_stream(stream) {
                return Some(w);
            }
            s = self
                .work
                .wait_timeout(s, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Sends every missing chunk over `socks` and the file digests over `ctl` until the receiver has
/// verified every file (or failed it). Chunk headers are sealed with `key` (the session's key of the
/// data's direction). Returns the payload bytes sent. A stripe sends only its files and chunks
/// (`longhaul_transfer::stripe`, [`Sources::stripe`]) and a digest over its own chunks of each
/// file.
pub(crate) fn run(
    ctl: &mut Ctl,
    socks: Vec<DataConn>,
    mut src: Sources,
    chunk_size: u64,
    key: &MacKey,
    have: &HashMap<u32, RangeSet>,
    side: &mut Side<'_>,
) -> Result<(), EngineError> {
    let announce = if src.early_digest {
        Announce::Sent
    } else {
        Announce::Verified
    };
    let mut sched = Scheduler::announcing(DEFAULT_MAX_RETRIES, announce);
    let empty = RangeSet::new();
    if let Some(s) = src.stripe {
        let mut owned: HashMap<u32, RangeSet> =
            Assignment::for_manifest(&src.entries, chunk_size, s.count)
                .of(s.index)
                .into_iter()
                .collect();
        // Files with no chunk of ours are the other stripes' business.
        src.files.retain(|id, f| {
            f.owned = owned.remove(id);
            f.owned.is_some()
        });
    }
    for (&id, f) in &mut src.files {
        let plan =
            ChunkPlan::new(f.size, chunk_size).map_err(|e| EngineError::Transfer(e.to_string()))?;
        f.plan = Some(plan);
        sched
            .add_file(id, plan, have.get(&id).unwrap_or(&empty))
            .map_err(|e| EngineError::Transfer(e.to_string()))?;
    }
    side.to_send = sched.bytes_to_send();
    side.event(Event::Started {
        streams: socks.len() as u32,
        chunk_size,
        files: src.files.len() as u64,
        bytes_total: src.files.values().map(|f| f.size).sum(),
        bytes_to_send: side.to_send,
    });
    let src = Arc::new(src);
    let shared = Arc::new(Shared {
        sched: Mutex::new(sched),
        work: Condvar::new(),
        hashes: Mutex::new(HashMap::new()),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
        bytes: AtomicU64::new(0),
    });
    let wake: Vec<_> = socks.iter().filter_map(DataConn::waker).collect();
    let mut threads = Vec::new();
    for (i, sock) in socks.into_iter().enumerate() {
        let (mine, src) = (Arc::clone(&shared), Arc::clone(&src));
        let sealer = ChunkSealer::new(key.clone(), i as u32);
        let spawned = thread::Builder::new()
            .name(format!("lh-send {i}"))
            .spawn(move || {
                if let Err(e) = stream(i as u32, sock, sealer, &mine, &src, chunk_size) {
                    mine.fail(e);
                }
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => shared.fail(EngineError::io("start a stream thread", e)),
        }
    }
    let result = control(ctl, &shared, &src, side);
    let streams_failed = result.is_ok();
    if let Err(e) = result {
        shared.fail(e);
        // A stream thread may be blocked writing to a path that went silent: shutting its
        // connection down makes the write fail at once.
        for w in &wake {
            w.wake();
        }
    }
    shared.stop.store(true, Ordering::Release);
    shared.work.notify_all();
    for t in threads {
        let _ = t.join();
    }
    side.bytes_moved = shared.bytes.load(Ordering::Relaxed);
    match shared
        .error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        Some(e) if streams_failed => Err(ctl.reason_for(e, REASON_GRACE)),
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// One data stream: a reader thread fills one buffer (read, hash) while this thread sends the
/// other, so the socket never waits for the disk. Two buffers of one chunk each per stream: the
/// memory bound `streams × chunk × 2`.
fn stream(
    index: u32,
    sock: DataConn,
    mut sealer: ChunkSealer,
    shared: &Shared,
    src: &Sources,
    chunk_size: u64,
) -> Result<(), EngineError> {
    let (full_tx, full_rx) = mpsc::sync_channel::<Filled>(1);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..2 {
        let _ = empty_tx.send(Vec::with_capacity(chunk_size as usize));
    }
    thread::scope(|scope| {
        let reader = scope.spawn(move || read_ahead(index, shared, src, &full_tx, &empty_rx));
        let mut sent = Ok(());
        for (w, buf, hash) in &full_rx {
            let header = ChunkHeader {
                file: w.file,
                chunk: w.chunk,
                offset: w.offset,
                len: w.len,
                hash,
            };
            let wrote = sock
                .write_all(&sealer.seal(&header))
                .and_then(|()| sock.write_all(&buf));
            if let Err(e) = wrote {
                sent = Err(EngineError::Stream {
                    stream: index,
                    source: e,
                });
                break;
            }
            shared.bytes.fetch_add(u64::from(w.len), Ordering::Relaxed);
            shared
                .sched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .on_sent(w.file, w.chunk);
            let _ = empty_tx.send(buf);
        }
        // Closing our end stops a reader blocked on handing over the next chunk.
        drop(full_rx);
        drop(empty_tx);
        let read = reader
            .join()
            .unwrap_or_else(|_| Err(EngineError::Transfer("a reader thread panicked".into())));
        if sent.is_ok() && read.is_ok() {
            sock.finish_sending();
        }
        sent.and(read)
    })
}

/// A chunk read and hashed, ready to send.
type Filled = (longhaul_transfer::Work, Vec<u8>, Digest);

/// The reader half of a stream: pulls work, reads and hashes each chunk into a free buffer.
fn read_ahead(
    index: u32,
    shared: &Shared,
    src: &Sources,
    full: &mpsc::SyncSender<Filled>,
    empty: &mpsc::Receiver<Vec<u8>>,
) -> Result<(), EngineError> {
    let mut open: Option<(u32, File, page_cache::Behind)> = None;
    while let Ok(mut buf) = empty.recv() {
        let Some(w) = shared.next(index) else {
            return Ok(());
        };
        let f = &src.files[&w.file];
        if open.as_ref().is_none_or(|(id, ..)| *id != w.file) {
            let file = src.roots[f.root].open_read(&f.rel)?;
            open = Some((w.file, file, page_cache::Behind::default()));
        }
        let (_, file, behind) = open.as_mut().expect("opened above");
        buf.resize(w.len as usize, 0);
        file.read_exact_at(&mut buf, w.offset).map_err(|e| {
            EngineError::Transfer(format!(
                "read {} at {}: {e} (did the file change during the transfer?)",
                f.rel, w.offset
            ))
        })?;
        behind.done(file, w.offset, buf.len() as u64);
        let hash = hash_chunk(&buf);
        shared
            .hashes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(w.file)
            .or_default()
            .insert(w.chunk, hash);
        if full.send((w, buf, hash)).is_err() {
            // The sender half stopped (its socket failed); it reports why.
            return Ok(());
        }
    }
    Ok(())
}

/// The digest of file `id` (a stripe: of its own chunks of it): chunks sent in this run were
/// hashed on the way; the ones the receiver already had are read and hashed here.
fn digest_of(id: u32, src: &Sources, shared: &Shared) -> Result<Digest, EngineError> {
    let f = &src.files[&id];
    let plan = f.plan.expect("planned before the streams start");
    let mut hashes = shared
        .hashes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&id)
        .unwrap_or_default();
    let mine = |i: u64| f.owned.as_ref().is_none_or(|o| o.contains(i));
    let expected = f.owned.as_ref().map_or(plan.count(), RangeSet::len);
    if (hashes.len() as u64) < expected {
        let file = src.roots[f.root].open_read(&f.rel)?;
        let mut buf = Vec::new();
        for i in 0..plan.count() {
            if hashes.contains_key(&i) || !mine(i) {
                continue;
            }
            let span = plan.chunk(i).expect("index below count");
            buf.resize(span.len as usize, 0);
            file.read_exact_at(&mut buf, span.offset).map_err(|e| {
                EngineError::Transfer(format!(
                    "read {} at {}: {e} (did the file change during the transfer?)",
                    f.rel, span.offset
                ))
            })?;
            hashes.insert(i, hash_chunk(&buf));
        }
    }
    Ok(file_digest(plan.size(), plan.chunk_size(), hashes.values()))
}

fn control(
    ctl: &mut Ctl,
    shared: &Shared,
    src: &Sources,
    side: &mut Side<'_>,
) -> Result<(), EngineError> {
    let total = src.files.len();
    let (mut verified, mut failed) = (0usize, 0usize);
    let (mut announced, mut done_sent) = (0usize, false);
    let mut next_tick = Instant::now() + PROGRESS_EVERY;
    loop {
        // Files whose chunks are all verified (or were already there) get their digest.
        loop {
            let ready = shared
                .sched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .poll_file_ready();
            let Some(id) = ready else { break };
            let digest = digest_of(id, src, shared)?;
            ctl.send(&Message::FileDone { file: id, digest })?;
            announced += 1;
        }
        // Every digest is out and nothing more will be: the end follows in the same flight, so
        // the receiver's `done` comes right behind its last result, a round trip sooner than
        // after the results. (With a file failed on the way, the end waits for every result.)
        if announced == total && !done_sent {
            ctl.send(&Message::Done {
                files: total as u64,
                bytes: shared.bytes.load(Ordering::Relaxed),
            })?;
            done_sent = true;
        }
        if verified + failed == total {
            break;
        }
        if shared.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        side.check_stopping()?;
        let now = Instant::now();
        if now >= next_tick {
            next_tick = now + PROGRESS_EVERY;
            side.progress(shared.bytes.load(Ordering::Relaxed), verified as u64);
        }
        // Files announced as they are sent: look again soon, so a file's digest leaves right
        // behind its last chunk (a verdict may be a while coming).
        let wait = if src.early_digest && announced < total {
            Duration::from_millis(20)
        } else {
            PROGRESS_EVERY.min(Duration::from_millis(250))
        };
        let Some(m) = ctl.recv_until(now + wait)? else {
            side.check_idle(shared.bytes.load(Ordering::Relaxed))?;
            continue;
        };
        side.touch();
        match m {
            Message::ChunkVerdict { file, chunk, ok } => {
                if ok {
                    side.chunks_verified += 1;
                } else {
                    warn!("chunk {chunk} of file {file} failed verification; sending it again");
                    side.resent += 1;
                }
                shared
                    .sched
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .on_verdict(file, chunk, ok)
                    .map_err(|e| EngineError::Transfer(e.to_string()))?;
                shared.work.notify_all();
            }
            Message::FileVerified { file } => {
                verified += 1;
                side.file_done(src_path(src, file), None);
            }
            Message::FileFailed { file, reason } => {
                failed += 1;
                side.file_done(src_path(src, file), Some(reason));
            }
            m => return Err(unexpected(&m, "verdicts and file results")),
        }
    }
    side.progress(shared.bytes.load(Ordering::Relaxed), verified as u64);
    if !done_sent {
        ctl.send(&Message::Done {
            files: verified as u64,
            bytes: shared.bytes.load(Ordering::Relaxed),
        })?;
    }
    match ctl.recv(IDLE_TIMEOUT, "the receiver's done")? {
        Message::Done { .. } => Ok(()),
        m => Err(unexpected(&m, "done")),
    }
}

fn src_path(src: &Sources, id: u32) -> String {
    src.entries
        .get(id as usize)
        .filter(|e| e.id == id)
        .map_or_else(|| format!("file {id}"), |e| e.entry.path.to_string())
}
