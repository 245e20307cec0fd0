//! Bulk data passes through the page cache without settling in it.
//!
//! A transfer of a terabyte would otherwise fill the page cache with pages no one reads again,
//! evicting what the host's other work keeps there, and leave the receiver's writes dirty until the
//! kernel writes gigabytes back in a burst. So the sender lets go of each chunk's pages once it has
//! read and hashed them, and the receiver starts the write-back of each chunk as soon as it has
//! written it and lets go of it with the next (on disk by then). Both are
//! `posix_fadvise(POSIX_FADV_DONTNEED)`: Linux starts write-back of the range's dirty pages and
//! drops its clean ones. It is only advice: where a filesystem ignores it (tmpfs) or refuses it,
//! nothing changes but memory use, so its errors are not the transfer's.
//!
//! Measured beside an emulated path (bench/RESULTS.md, "Issue 23 item 4"): on this VM, filling
//! fresh page-cache pages makes the emulator's real-time forwarders late (a cold read of 4 GiB: p99
//! 10.6 ms, against 0.6 ms read with drop-behind; 4 GiB written at 240 MB/s: p99 9.2 ms, against
//! 1.0–1.5 ms with write-behind, about what `O_DIRECT` or `sync_file_range` give).

use std::fs::File;
use std::num::NonZeroU64;

use rustix::fs::{Advice, fadvise};

/// What one reader or writer has passed in one file, let go of as it goes: each range when done
/// with, together with the one before when they touch (the kernel drops only whole folios, up to
/// 2 MiB on x86-64: two 1-MiB chunks in a row cover one, either alone does not).
#[derive(Debug, Default)]
pub(crate) struct Behind {
    last: Option<(u64, u64)>,
}

impl Behind {
    /// Bytes `offset..offset + len` of `f` were read and hashed, or written.
    pub(crate) fn done(&mut self, f: &File, offset: u64, len: u64) {
        match self.last.replace((offset, len)) {
            Some((at, n)) if at + n == offset => let_go(f, at, n + len),
            Some((at, n)) => {
                let_go(f, at, n);
                let_go(f, offset, len);
            }
            None => let_go(f, offset, len),
        }
    }
}

fn let_go(f: &File, offset: u64, len: u64) {
    // A length of 0 would mean "to the end of the file".
    if let Some(len) = NonZeroU64::new(len) {
        let _ = fadvise(f, offset, Some(len), Advice::DontNeed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    const MIB: u64 = 1 << 20;

    /// Bytes of `path` in the page cache (`fincore`, util-linux).
    fn cached(path: &std::path::Path) -> u64 {
        let out = std::process::Command::new("fincore")
            .args(["--noheadings", "--bytes", "--output", "RES"])
            .arg(path)
            .output()
            .expect("fincore (util-linux) runs");
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("fincore said {text:?}"))
    }

    /// A 4-MiB file on a disk-backed filesystem, written and synced (its pages clean and cached),
    /// with its first two MiB passed (and let go of) one MiB at a time; `None` where the temporary
    /// directory is tmpfs, which keeps every page whatever the advice.
    fn first_two_mib_passed(tag: &str) -> Option<(std::path::PathBuf, File, Behind)> {
        let dir = std::env::temp_dir();
        #[allow(
            clippy::useless_conversion,
            reason = "f_type is i64 here, narrower on other architectures"
        )]
        if i64::from(rustix::fs::statfs(&dir).unwrap().f_type) == super::super::sink::TMPFS_MAGIC {
            eprintln!("{} is tmpfs: nothing to let go of there", dir.display());
            return None;
        }
        let path = dir.join(format!("lh-page-cache-{tag}-{}", std::process::id()));
        let f = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        f.write_all_at(&vec![7u8; 4 * MIB as usize], 0).unwrap();
        f.sync_all().unwrap();
        assert_eq!(
            cached(&path),
            4 * MIB,
            "a file just written is in the page cache"
        );
        let mut behind = Behind::default();
        behind.done(&f, 0, MIB);
        behind.done(&f, MIB, MIB);
        Some((path, f, behind))
    }

    #[test]
    fn chunks_read_leave_the_page_cache_and_nothing_else_does() {
        let Some((path, f, mut behind)) = first_two_mib_passed("read") else {
            return;
        };
        assert_eq!(
            cached(&path),
            2 * MIB,
            "the first two MiB go, the last two stay"
        );
        behind.done(&f, 3 * MIB, 0);
        assert_eq!(
            cached(&path),
            2 * MIB,
            "an empty range is not the rest of the file"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_chunk_written_leaves_the_page_cache_once_on_disk() {
        let Some((path, f, mut behind)) = first_two_mib_passed("write") else {
            return;
        };
        assert_eq!(cached(&path), 2 * MIB);
        f.write_all_at(&vec![8u8; 2 * MIB as usize], 2 * MIB)
            .unwrap();
        behind.done(&f, 2 * MIB, 2 * MIB);
        // Dirty when passed: its write-back started, and its pages stay until they are clean.
        assert_eq!(cached(&path), 2 * MIB);
        f.sync_all().unwrap();
        behind.done(&f, 4 * MIB, 0);
        assert_eq!(
            cached(&path),
            0,
            "once on disk, it goes with the next chunk"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
