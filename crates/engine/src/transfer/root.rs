//! The directory a transfer may touch, and nothing outside it.
//!
//! Every path a transfer uses is relative to a [`Root`] and is resolved by the kernel with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` (Linux ≥ 5.6): an
//! absolute path, a `..` that climbs out, or a symlink anywhere in the path — one planted by a
//! hostile peer in an earlier entry of the same transfer, or one already in the tree — makes the
//! call fail instead of leading outside. Symlinks are data here: they are listed and created as
//! links, never followed. The root itself may be reached through symlinks (the user chose it).
//!
//! Names are plain `/`-separated relative paths (the transfer core's `RelPath` has already refused
//! empty, `.` and `..` components); `""` is the root itself. Final components are operated on with
//! the `*at` calls relative to their parent directory's descriptor, so no step re-resolves a path
//! string.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{
    AtFlags, Dir, FileType, Mode, OFlags, RenameFlags, ResolveFlags, Stat, Timestamps, mkdirat,
    openat2, readlinkat, renameat_with, statat, symlinkat, unlinkat, utimensat,
};
use rustix::io::Errno;

/// Why an operation under the root failed: the operation, the relative path and the cause, with
/// the kernel's refusals of escapes spelled out.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path:?} under {root}: {}", explain(.source))]
pub struct RootError {
    /// What was being done ("create", "open", ...).
    pub op: &'static str,
    /// The relative path.
    pub path: String,
    /// The root directory.
    pub root: String,
    /// The cause.
    #[source]
    pub source: io::Error,
}

impl RootError {
    /// Whether the cause is a full disk or quota.
    pub fn is_disk_full(&self) -> bool {
        matches!(
            self.source.raw_os_error(),
            Some(e) if e == Errno::NOSPC.raw_os_error() || e == Errno::DQUOT.raw_os_error()
        )
    }

    /// Whether the cause is that the path does not exist.
    pub fn is_not_found(&self) -> bool {
        self.source.kind() == io::ErrorKind::NotFound
    }

    /// The error as a peer may read it: the same, with "the server's root" for the root's
    /// absolute path, which is this host's business.
    pub fn for_peer(&self) -> String {
        format!(
            "{} {:?} under the server's root: {}",
            self.op,
            self.path,
            explain(&self.source)
        )
    }
}

fn explain(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(x) if x == Errno::LOOP.raw_os_error() => {
            "a symlink is in the way (symlinks under the root are never followed)".into()
        }
        Some(x) if x == Errno::XDEV.raw_os_error() => "the path leads outside the root".into(),
        Some(x) if x == Errno::NOSPC.raw_os_error() => "no space left on the device".into(),
        Some(x) if x == Errno::NOENT.raw_os_error() => "no such file or directory".into(),
        _ => e.to_string(),
    }
}

/// What a directory entry is, without following symlinks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file of this many bytes.
    File(u64),
    /// A symbolic link.
    Symlink,
    /// Anything else (device, socket, FIFO): never transferred.
    Other,
}

/// An entry's type and metadata (`lstat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Its type.
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
}

impl Meta {
    fn of(st: &Stat) -> Self {
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File(st.st_size as u64),
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        };
        Self {
            kind,
            mode: st.st_mode & 0o7777,
            mtime_ns: st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64,
        }
    }
}

/// Which file a descriptor or a name refers to: (device, inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inode(pub u64, pub u64);

impl Inode {
    fn of(st: &Stat) -> Self {
        Self(st.st_dev, st.st_ino)
    }

    /// The file behind an open descriptor.
    pub fn of_file(f: &File) -> io::Result<Self> {
        rustix::fs::fstat(f)
            .map(|st| Self::of(&st))
            .map_err(Into::into)
    }
}

/// Sets the permission bits and the modification time of an open file.
pub fn set_file_meta(f: &File, mode: u32, mtime_ns: i64) -> io::Result<()> {
    rustix::fs::fchmod(f, Mode::from_raw_mode(mode & 0o7777))?;
    rustix::fs::futimens(f, &times(mtime_ns))?;
    Ok(())
}

/// A directory that confines every path of a transfer.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// `rel` as (parent, final component); the parent of a single component is `""`.
fn split(rel: &str) -> (&str, &str) {
    match rel.rsplit_once('/') {
        Some((p, n)) => (p, n),
        None => ("", rel),
    }
}

impl Root {
    /// Opens the directory `path` as a root.
    pub fn open(path: &Path) -> Result<Self, RootError> {
        let fd = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RootError {
            op: "open the root",
            path: String::new(),
            root: path.display().to_string(),
            source: e.into(),
        })?;
        Ok(Self {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Directory `rel` under this root as a root of its own (opened without following links).
    pub fn subdir(&self, rel: &str) -> Result<Root, RootError> {
        let fd = self
            .dir(rel)
            .map_err(|e| self.err("open the directory", rel, e))?;
        Ok(Self {
            fd,
            path: self.path.join(rel),
        })
    }

    /// The root's path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn err(&self, op: &'static str, rel: &str, e: impl Into<io::Error>) -> RootError {
        RootError {
            op,
            path: rel.to_string(),
            root: self.path.display().to_string(),
            source: e.into(),
        }
    }

    fn open_at(&self, rel: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
        let rel = if rel.is_empty() { "." } else { rel };
        openat2(&self.fd, rel, flags | OFlags::CLOEXEC, mode, RESOLVE)
    }

    /// A descriptor of directory `rel` for `*at` calls.
    fn dir(&self, rel: &str) -> Result<OwnedFd, Errno> {
        self.open_at(rel, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
    }

    /// Type and metadata of `rel` (not following a final symlink); `None` if it does not exist.
    pub fn lstat(&self, rel: &str) -> Result<Option<Meta>, RootError> {
        if rel.is_empty() {
            return rustix::fs::fstat(&self.fd)
                .map(|st| Some(Meta::of(&st)))
                .map_err(|e| self.err("stat", rel, e));
        }
        let (parent, name) = split(rel);
        let dir = match self.dir(parent) {
            Ok(d) => d,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(self.err("stat", rel, e)),
        };
        match statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Meta::of(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.err("stat", rel, e)),
        }
    }

    /// The entries of directory `rel` (without `.` and `..`), sorted by name, with their metadata.
    /// Names that are not UTF-8 are reported as errors: a transfer carries UTF-8 paths only.
    pub fn list(&self, rel: &str) -> Result<Vec<(String, Meta)>, RootError> {
        let fd = self
            .open_at(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| self.err("list", rel, e))?;
        let mut dir = Dir::read_from(&fd).map_err(|e| self.err("list", rel, e))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| self.err("list", rel, e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(name) else {
                let shown = String::from_utf8_lossy(name).into_owned();
                return Err(self.err(
                    "list",
                    &format!("{rel}/{shown}"),
                    io::Error::new(io::ErrorKind::InvalidData, "the name is not UTF-8"),
                ));
            };
            let st = statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| self.err("stat", &join(rel, name), e))?;
            out.push((name.to_string(), Meta::of(&st)));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Opens regular file `rel` for reading.
    pub fn open_read(&self, rel: &str) -> Result<File, RootError> {
        self.open_at(rel, OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty())
            .map(File::from)
            .map_err(|e| self.err("open", rel, e))
    }

    /// Creates directory `rel` and its missing parents with `mode` (existing directories are kept;
    /// a non-directory in the way is an error).
    pub fn create_dirs(&self, rel: &str, mode: u32) -> Result<(), RootError> {
        if rel.is_empty() {
            return Ok(());
        }
        let mut at = String::new();
        for comp in rel.split('/') {
            let parent = self.dir(&at).map_err(|e| self.err("create", rel, e))?;
            match mkdirat(&parent, comp, Mode::from_raw_mode(mode & 0o7777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(self.err("create", rel, e)),
            }
            at = join(&at, comp);
        }
        // The last component must now be a directory we can open without following a link.
        self.dir(rel)
            .map(drop)
            .map_err(|e| self.err("create", rel, e))
    }

    /// Opens (creating if missing, never truncating) the file `rel` for reading and writing, with
    /// mode 0600: a partial file that a resumed transfer continues, or a journal. Only a file of
    /// our own is continued: a regular file owned by this process's user with one link. Anything
    /// else under that name (a file another user planted, a hard link to some other file, a FIFO)
    /// is removed and a new file created in its place (`O_EXCL`), so nothing is ever written
    /// through a name someone else prepared.
    pub fn open_partial(&self, rel: &str) -> Result<File, RootError> {
        let mode = Mode::from_raw_mode(0o600);
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        for _ in 0..4 {
            let fd = self
                .open_at(rel, flags | OFlags::CREATE, mode)
                .map_err(|e| self.err("create", rel, e))?;
            let st = rustix::fs::fstat(&fd).map_err(|e| self.err("stat", rel, e))?;
            let ours = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                && st.st_uid == rustix::process::geteuid().as_raw()
                && st.st_nlink == 1;
            if ours {
                return Ok(File::from(fd));
            }
            drop(fd);
            self.remove_file(rel)?;
            match self.open_at(rel, flags | OFlags::CREATE | OFlags::EXCL, mode) {
                Ok(fd) => return Ok(File::from(fd)),
                // Someone created it again in between: look again.
                Err(Errno::EXIST) => {}
                Err(e) => return Err(self.err("create", rel, e)),
            }
        }
        Err(self.err(
            "create",
            rel,
            io::Error::other("another process keeps putting a file under this name"),
        ))
    }

    /// Renames `from` to `to` (both relative to the root). Unless `replace`, an existing `to` is
    /// left alone and the rename fails (`RENAME_NOREPLACE`: atomic, no check-then-act race).
    pub fn rename(&self, from: &str, to: &str, replace: bool) -> Result<(), RootError> {
        let (fp, fname) = split(from);
        let (tp, tname) = split(to);
        let fdir = self.dir(fp).map_err(|e| self.err("rename", from, e))?;
        let tdir = self.dir(tp).map_err(|e| self.err("rename", to, e))?;
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        renameat_with(&fdir, fname, &tdir, tname, flags).map_err(|e| self.err("rename", to, e))
    }

    /// Creates symlink `rel` pointing at `target` (stored as given, never resolved here).
    pub fn symlink(&self, target: &str, rel: &str) -> Result<(), RootError> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent).map_err(|e| self.err("link", rel, e))?;
        symlinkat(target, &dir, name).map_err(|e| self.err("link", rel, e))
    }

    /// The target of symlink `rel`.
    pub fn read_link(&self, rel: &str) -> Result<String, RootError> {
        let (parent, name) = split(rel);
        let dir = self
            .dir(parent)
            .map_err(|e| self.err("read link", rel, e))?;
        let target =
            readlinkat(&dir, name, Vec::new()).map_err(|e| self.err("read link", rel, e))?;
        target.into_string().map_err(|_| {
            self.err(
                "read link",
                rel,
                io::Error::new(io::ErrorKind::InvalidData, "the target is not UTF-8"),
            )
        })
    }

    /// Removes file or symlink `rel` (not directories); a missing one is not an error.
    pub fn remove_file(&self, rel: &str) -> Result<(), RootError> {
        let (parent, name) = split(rel);
        let dir = match self.dir(parent) {
            Ok(d) => d,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(self.err("remove", rel, e)),
        };
        match unlinkat(&dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(self.err("remove", rel, e)),
        }
    }

    /// Sets the permission bits (unless `mode` is `None`) and the modification time of file or
    /// directory `rel`, through a descriptor opened without following links (a symlink there is an
    /// error, never a way out).
    pub fn set_meta(&self, rel: &str, mode: Option<u32>, mtime_ns: i64) -> Result<(), RootError> {
        let fd = self
            .open_at(rel, OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty())
            .map_err(|e| self.err("set the mode of", rel, e))?;
        if let Some(mode) = mode {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))
                .map_err(|e| self.err("set the mode of", rel, e))?;
        }
        rustix::fs::futimens(&fd, &times(mtime_ns)).map_err(|e| self.err("set times of", rel, e))
    }

    /// Opens the existing regular file `rel` for reading and writing (never creating it, never
    /// following a link).
    pub fn open_rw(&self, rel: &str) -> Result<File, RootError> {
        self.open_at(rel, OFlags::RDWR | OFlags::NOFOLLOW, Mode::empty())
            .map(File::from)
            .map_err(|e| self.err("open", rel, e))
    }

    /// The (device, inode) of what the name `rel` is now (not following a final link); `None` if
    /// nothing is there.
    pub fn inode(&self, rel: &str) -> Result<Option<Inode>, RootError> {
        let (parent, name) = split(rel);
        let dir = self.dir(parent).map_err(|e| self.err("stat", rel, e))?;
        match statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Inode::of(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.err("stat", rel, e)),
        }
    }

    /// Sets the modification time of symlink `rel` itself (links have no mode of their own).
    pub fn set_link_mtime(&self, rel: &str, mtime_ns: i64) -> Result<(), RootError> {
        let (parent, name) = split(rel);
        let dir = self
            .dir(parent)
            .map_err(|e| self.err("set times of", rel, e))?;
        utimensat(&dir, name, &times(mtime_ns), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| self.err("set times of", rel, e))
    }

    /// Takes an exclusive lock on the root directory itself (`flock`, waiting for it), held until
    /// the returned descriptor is dropped: the stripes of a striped transfer take it in turn to
    /// see whether they all ended.
    pub fn lock_dir(&self) -> Result<OwnedFd, RootError> {
        let fd = self
            .open_at("", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| self.err("lock", "", e))?;
        rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| self.err("lock", "", e))?;
        Ok(fd)
    }

    /// Syncs directory `rel` (after renames into it, for `--fsync`).
    pub fn sync_dir(&self, rel: &str) -> Result<(), RootError> {
        let fd = self
            .open_at(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| self.err("sync", rel, e))?;
        rustix::fs::fsync(fd.as_fd()).map_err(|e| self.err("sync", rel, e))
    }
}

/// Access and modification time both `mtime_ns`.
fn times(mtime_ns: i64) -> Timestamps {
    let t = rustix::fs::Timespec {
        tv_sec: mtime_ns.div_euclid(1_000_000_000),
        tv_nsec: mtime_ns.rem_euclid(1_000_000_000) as _,
    };
    Timestamps {
        last_access: t,
        last_modification: t,
    }
}

/// `a/b` from `a` and `b` (`b` alone when `a` is the root, `""`).
pub fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}/{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn tmp(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("lh-root-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }

    #[test]
    fn creates_reads_renames_and_lists_inside_the_root() {
        let t = tmp("basic");
        let root = Root::open(&t.0).unwrap();
        root.create_dirs("a/b/ü", 0o755).unwrap();
        root.create_dirs("a/b", 0o755).unwrap();
        let mut f = root.open_partial("a/b/ü/.x.part").unwrap();
        f.write_all(b"hello").unwrap();
        drop(f);
        // Re-opening a partial file keeps its bytes.
        let f = root.open_partial("a/b/ü/.x.part").unwrap();
        assert_eq!(f.metadata().unwrap().len(), 5);
        root.rename("a/b/ü/.x.part", "a/b/ü/x", false).unwrap();
        let mut s = String::new();
        root.open_read("a/b/ü/x")
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "hello");
        root.set_meta("a/b/ü/x", Some(0o640), 1_600_000_000_123_456_789)
            .unwrap();
        let m = root.lstat("a/b/ü/x").unwrap().unwrap();
        assert_eq!(
            m,
            Meta {
                kind: Kind::File(5),
                mode: 0o640,
                mtime_ns: 1_600_000_000_123_456_789
            }
        );
        assert_eq!(root.lstat("a/nope").unwrap(), None);
        assert_eq!(root.lstat("nope/deeper").unwrap(), None);
        root.symlink("../x", "a/b/l").unwrap();
        assert_eq!(root.read_link("a/b/l").unwrap(), "../x");
        root.set_link_mtime("a/b/l", 1_000_000_000).unwrap();
        assert_eq!(
            root.lstat("a/b/l").unwrap().unwrap().mtime_ns,
            1_000_000_000
        );
        assert!(root.set_meta("a/b/l", Some(0o600), 0).is_err());
        let names: Vec<(String, Kind)> = root
            .list("a/b")
            .unwrap()
            .into_iter()
            .map(|(n, m)| (n, m.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("l".to_string(), Kind::Symlink),
                ("ü".to_string(), Kind::Dir)
            ]
        );
        root.remove_file("a/b/l").unwrap();
        root.remove_file("a/b/l").unwrap();
        assert_eq!(root.lstat("a/b/l").unwrap(), None);
    }

    #[test]
    fn no_replace_keeps_an_existing_file() {
        let t = tmp("noreplace");
        let root = Root::open(&t.0).unwrap();
        std::fs::write(t.0.join("dest"), "old").unwrap();
        std::fs::write(t.0.join("new"), "new").unwrap();
        let e = root.rename("new", "dest", false).unwrap_err();
        assert_eq!(e.source.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert_eq!(std::fs::read_to_string(t.0.join("dest")).unwrap(), "old");
        root.rename("new", "dest", true).unwrap();
        assert_eq!(std::fs::read_to_string(t.0.join("dest")).unwrap(), "new");
    }

    #[test]
    fn symlinks_and_escapes_never_lead_outside() {
        let t = tmp("escape");
        let outside = tmp("outside");
        std::fs::write(outside.0.join("secret"), "s").unwrap();
        let root_dir = t.0.join("root");
        std::fs::create_dir_all(&root_dir).unwrap();
        // A symlink to a directory outside, and one to a file outside.
        std::os::unix::fs::symlink(&outside.0, root_dir.join("out")).unwrap();
        std::os::unix::fs::symlink(outside.0.join("secret"), root_dir.join("s")).unwrap();
        // A symlink to a directory inside: still not followed.
        std::fs::create_dir_all(root_dir.join("real")).unwrap();
        std::os::unix::fs::symlink("real", root_dir.join("alias")).unwrap();
        let root = Root::open(&root_dir).unwrap();

        let loop_or_xdev = |e: RootError| {
            let msg = e.to_string();
            assert!(
                msg.contains("symlink is in the way") || msg.contains("outside the root"),
                "{msg}"
            );
        };
        loop_or_xdev(root.open_read("out/secret").unwrap_err());
        loop_or_xdev(root.open_read("s").unwrap_err());
        loop_or_xdev(root.open_partial("out/planted").unwrap_err());
        loop_or_xdev(root.create_dirs("out/x", 0o755).unwrap_err());
        loop_or_xdev(root.open_partial("alias/x").unwrap_err());
        loop_or_xdev(root.open_read("../outside/secret").unwrap_err());
        loop_or_xdev(
            root.open_read(outside.0.join("secret").to_str().unwrap())
                .unwrap_err(),
        );
        loop_or_xdev(root.rename("s", "out/s", true).unwrap_err());
        loop_or_xdev(root.set_meta("s", Some(0o777), 0).unwrap_err());
        loop_or_xdev(root.set_meta("out", Some(0o777), 0).unwrap_err());
        assert!(root.list("out").is_err());
        assert!(!outside.0.join("planted").exists());
        assert!(!outside.0.join("x").exists());
        assert!(!outside.0.join("s").exists());
        // The links themselves are visible as links.
        assert_eq!(root.lstat("out").unwrap().unwrap().kind, Kind::Symlink);
        assert_eq!(root.read_link("alias").unwrap(), "real");
    }

    #[test]
    fn a_full_disk_is_recognised() {
        let e = RootError {
            op: "write",
            path: "x".into(),
            root: "/r".into(),
            source: Errno::NOSPC.into(),
        };
        assert!(e.is_disk_full());
        assert_eq!(
            e.to_string(),
            "write \"x\" under /r: no space left on the device"
        );
    }
}
