//! Packet capture per link (`--pcap DIR`): every record a direction's forwarder writes to the
//! destination host goes, with its release time, into a pcap file that tcpdump, tshark and Wireshark
//! read (nanosecond timestamps, link type RAW: IPv4 and IPv6 without a link-layer header).
//!
//! The forwarder must never wait for a disk, so it only copies the first `snaplen` bytes of a record
//! into a bounded channel ([`QUEUE`] records); a writer thread drains it into the file. When the
//! writer falls behind, records are left out of the capture and counted (`dropped`), never delayed.
//!
//! What a capture shows: the packets as the receiving host's TCP sees them, at the time the emulator
//! handed them over. GSO super-packets the link did not split appear as one large TCP segment (and a
//! `UDP_SEGMENT` sender's super-datagrams as one large UDP datagram, its length field the whole), as
//! in a tcpdump on a host with segmentation offload.
//!
//! The emulator runs as root and DIR is often under /tmp, so the files are created safely (issue 11,
//! finding 5): DIR is opened without following a symbolic link (created, mode 0755, when missing),
//! and each file is created in it with `O_CREAT | O_EXCL | O_NOFOLLOW`, so an existing file is never
//! truncated and a planted link is never written through; either is refused with an error naming the
//! file. Files this run created are removed again when a later one is refused.

use std::fs::File;
use std::io::BufWriter;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use serde::{Deserialize, Serialize};

use crate::error::EmuError;

/// Records buffered between a forwarder and its writer thread.
pub const QUEUE: usize = 16_384;
/// Default bytes kept per packet: enough for IPv6 + TCP headers with options.
pub const DEFAULT_SNAPLEN: u32 = 128;

/// Counters of one capture file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CaptureStats {
    /// The file written.
    pub file: PathBuf,
    /// Packets written to it.
    pub packets: u64,
    /// Packets left out because the writer fell behind.
    pub dropped: u64,
    /// The first write error, if the file could not be written.
    pub error: Option<String>,
}

struct Captured {
    at_ns: u64,
    orig_len: u32,
    data: Vec<u8>,
}

/// The forwarder's end of a capture.
#[derive(Debug)]
pub(crate) struct Capture {
    tx: SyncSender<Captured>,
    snaplen: usize,
    /// Added to a monotonic time to get the wall-clock time written in the file.
    wall_offset_ns: i128,
    dropped: u64,
    writer: JoinHandle<CaptureStats>,
}

/// Creates `names` in `dir` (see the module's rules) and starts a writer for each, in order.
/// Either every file is created or none is left behind.
pub(crate) fn create_all(
    dir: &Path,
    names: &[String],
    snaplen: u32,
) -> Result<Vec<Capture>, EmuError> {
    let dirfd = open_dir(dir)?;
    let remove = |created: &[String]| {
        for name in created {
            let _ = rustix::fs::unlinkat(&dirfd, name.as_str(), rustix::fs::AtFlags::empty());
        }
    };
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        match create_file(&dirfd, dir, name) {
            Ok(f) => files.push(f),
            Err(e) => {
                remove(&names[..files.len()]);
                return Err(e);
            }
        }
    }
    let mut caps = Vec::with_capacity(names.len());
    for (f, name) in files.into_iter().zip(names) {
        match Capture::start(f, &dir.join(name), snaplen) {
            Ok(c) => caps.push(c),
            Err(e) => {
                for c in caps {
                    c.finish();
                }
                remove(names);
                return Err(e);
            }
        }
    }
    Ok(caps)
}

/// Opens the capture directory without following a symbolic link; creates it (and its missing
/// parents, mode 0755) when it does not exist.
fn open_dir(dir: &Path) -> Result<OwnedFd, EmuError> {
    use rustix::fs::{Mode, OFlags};
    use std::os::unix::fs::DirBuilderExt;
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| EmuError::Io {
                what: format!("create the capture directory {}", dir.display()),
                source,
            })?;
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| {
        let link = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
        if link || e == rustix::io::Errno::LOOP {
            EmuError::Config(format!(
                "capture directory {} is a symbolic link; refusing to follow it (give the directory \
itself as --pcap DIR)",
                dir.display()
            ))
        } else {
            EmuError::Io {
                what: format!("open the capture directory {}", dir.display()),
                source: e.into(),
            }
        }
    })
}

/// Creates `name` in `dirfd` (the directory `dir`): a new file only, never through a link.
fn create_file(dirfd: &OwnedFd, dir: &Path, name: &str) -> Result<File, EmuError> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let path = dir.join(name);
    match rustix::fs::openat(dirfd, name, flags, Mode::from_raw_mode(0o644)) {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::EXIST) => Err(EmuError::Config(format!(
            "capture file {} already exists (a file or a symbolic link); refusing to overwrite it or \
follow it: remove it or give another --pcap DIR",
            path.display()
        ))),
        Err(e) => Err(EmuError::Io {
            what: format!("create the capture file {}", path.display()),
            source: e.into(),
        }),
    }
}

impl Capture {
    /// Writes the pcap header to `out` (the new file `file`) and starts its writer thread.
    fn start(out: File, file: &Path, snaplen: u32) -> Result<Self, EmuError> {
        let io_err = |what: &str, source| EmuError::Io {
            what: format!("{what} {}", file.display()),
            source,
        };
        let header = PcapHeader {
            snaplen,
            datalink: DataLink::RAW,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            endianness: pcap_file::Endianness::native(),
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 20, out), header)
            .map_err(|e| io_err("write the pcap header of", std::io::Error::other(e)))?;
        let (tx, rx) = sync_channel(QUEUE);
        let path = file.to_path_buf();
        let writer = std::thread::Builder::new()
            .name("lh-pcap".into())
            .spawn(move || drain(writer, rx, path))
            .map_err(|e| io_err("start the writer thread of", e))?;
        Ok(Self {
            tx,
            snaplen: snaplen as usize,
            wall_offset_ns: wall_offset_ns(),
            dropped: 0,
            writer,
        })
    }

    /// Queues the IP packet `ip` (a record without its virtio-net header), released at `at_ns`
    /// (monotonic clock). Never blocks.
    pub(crate) fn offer(&mut self, at_ns: u64, ip: &[u8]) {
        let keep = ip.len().min(self.snaplen);
        let c = Captured {
            at_ns: (i128::from(at_ns) + self.wall_offset_ns).max(0) as u64,
            orig_len: u32::try_from(ip.len()).unwrap_or(u32::MAX),
            data: ip[..keep].to_vec(),
        };
        match self.tx.try_send(c) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped += 1,
        }
    }

    /// Flushes and closes the file; returns its counters.
    pub(crate) fn finish(self) -> CaptureStats {
        drop(self.tx);
        let mut stats = self.writer.join().unwrap_or_default();
        stats.dropped += self.dropped;
        stats
    }
}

fn drain(
    mut w: PcapWriter<BufWriter<File>>,
    rx: Receiver<Captured>,
    file: PathBuf,
) -> CaptureStats {
    let mut stats = CaptureStats {
        file,
        ..CaptureStats::default()
    };
    for c in rx {
        if stats.error.is_some() {
            stats.dropped += 1;
            continue;
        }
        let p = PcapPacket::new(Duration::from_nanos(c.at_ns), c.orig_len, &c.data);
        match w.write_packet(&p) {
            Ok(_) => stats.packets += 1,
            Err(e) => {
                stats.dropped += 1;
                stats.error = Some(e.to_string());
            }
        }
    }
    if stats.error.is_none()
        && let Err(e) = std::io::Write::flush(&mut w.into_writer())
    {
        stats.error = Some(e.to_string());
    }
    stats
}

/// Wall clock − monotonic clock, nanoseconds.
fn wall_offset_ns() -> i128 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    wall - i128::from(longhaul_sys::monotonic_now_ns())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_pcap_with_nanosecond_times_and_snapped_packets() {
        let dir = std::env::temp_dir().join(format!("lh-capture-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let [mut c, other]: [Capture; 2] = create_all(&dir, &names(&["x.pcap", "y.pcap"]), 64)
            .unwrap()
            .try_into()
            .unwrap();
        other.finish();
        let file = dir.join("x.pcap");
        let now = longhaul_sys::monotonic_now_ns();
        c.offer(now, &[0x45; 100]);
        c.offer(now + 1_500, &[0x60; 40]);
        let stats = c.finish();
        assert_eq!((stats.packets, stats.dropped, stats.error), (2, 0, None));

        let bytes = std::fs::read(&file).unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(r.header().datalink, DataLink::RAW);
        assert_eq!(
            r.header().ts_resolution,
            pcap_file::TsResolution::NanoSecond
        );
        // Raw records: pcap-file's checked reader refuses orig_len > snaplen, which the format
        // (and tcpdump) allow; that is what a snapped capture is.
        let ts = |p: &pcap_file::pcap::RawPcapPacket| Duration::new(u64::from(p.ts_sec), p.ts_frac);
        let a = r.next_raw_packet().unwrap().unwrap();
        assert_eq!((a.orig_len, a.incl_len, a.data.len()), (100, 64, 64));
        let (t0, wall) = (ts(&a), std::time::SystemTime::now());
        let b = r.next_raw_packet().unwrap().unwrap();
        assert_eq!((b.orig_len, b.data.len()), (40, 40));
        assert_eq!((ts(&b) - t0).as_nanos(), 1_500);
        // The times are wall-clock times, within a minute of now.
        let now = wall.duration_since(std::time::UNIX_EPOCH).unwrap();
        assert!(
            now.abs_diff(t0) < Duration::from_secs(60),
            "{t0:?} vs {now:?}"
        );
        assert!(r.next_raw_packet().is_none());

        // A second run into the same directory keeps the first run's files.
        let again = create_all(&dir, &names(&["z.pcap", "y.pcap", "x.pcap"]), 64).unwrap_err();
        assert!(
            again.to_string().contains("y.pcap already exists"),
            "{again}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
        // ... and leaves none of the new files it did create (z.pcap) behind.
        assert!(!dir.join("z.pcap").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
