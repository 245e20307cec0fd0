//! Layer-3 TUN devices (`/dev/net/tun`), optionally with virtio-net headers
//! and segmentation offload so that the kernel hands over whole TCP
//! super-packets (up to 64 KB, many MSS-sized segments) per `read`.
//!
//! [`Tun::open`] does the fixed sequence
//!
//! 1. `open("/dev/net/tun", O_RDWR | O_CLOEXEC)`;
//! 2. `ioctl(TUNSETIFF, {name, IFF_TUN | IFF_NO_PI [| IFF_VNET_HDR] [| IFF_MULTI_QUEUE]})`;
//! 3. with `vnet_hdr`: `ioctl(TUNSETVNETHDRSZ, 10)` and
//!    `ioctl(TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 [| TUN_F_TSO_ECN] [| TUN_F_USO4 | TUN_F_USO6])`.
//!
//! The device is **not persistent**: it disappears when the last descriptor
//! attached to it is closed. It is created in the network namespace of the
//! **calling thread**; to create it inside another namespace, open it within
//! [`run_in_netns`](crate::run_in_netns). The descriptor keeps working from
//! any thread afterwards. Creating a device needs `CAP_NET_ADMIN`. Addresses,
//! MTU and link state are configured with `ip` (see [`ip()`](crate::ip())).
//!
//! # Records with `vnet_hdr`
//!
//! Each `read` returns one record: a 10-byte `struct virtio_net_hdr`
//! (include/uapi/linux/virtio_net.h) followed by one IP packet, which may be a
//! GSO super-packet; each `write` takes the same layout. The header's `u16`
//! fields are in the host's byte order (legacy virtio), i.e. little-endian on
//! x86_64 and aarch64; big-endian hosts would need `TUNSETVNETLE`, which this
//! crate does not set:
//!
//! | offset | field         | meaning |
//! |-------:|---------------|---------|
//! | 0      | `flags: u8`   | `VIRTIO_NET_HDR_F_NEEDS_CSUM` (1): checksum is partial (pseudo-header sum only) |
//! | 1      | `gso_type: u8`| `NONE` 0, `TCPV4` 1, `UDP` 3, `TCPV6` 4, `UDP_L4` 5; `\| ECN` 0x80 |
//! | 2      | `hdr_len: u16`| length of the headers (do not trust it; recompute) |
//! | 4      | `gso_size: u16`| segment payload size (the MSS) |
//! | 6      | `csum_start: u16` | where checksumming starts (the L4 header) |
//! | 8      | `csum_offset: u16`| offset of the checksum field from `csum_start` |
//!
//! The 12-byte `virtio_net_hdr_mrg_rxbuf` (which appends `num_buffers: u16`)
//! is not used: the header size is set to 10 explicitly. Parsing and
//! segmenting records is the job of the packet crate, not of this one.
//!
//! Constants are defined here because the `libc` crate does not provide the
//! TUN ioctls; names and values are those of include/uapi/linux/if_tun.h.

use std::fs::OpenOptions;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::{Result, SysError};

/// The character device through which TUN/TAP devices are created.
pub const TUN_DEVICE: &str = "/dev/net/tun";

/// Longest interface name in bytes: `IFNAMSIZ` (16) minus the terminating NUL.
pub const MAX_IFNAME_LEN: usize = libc::IFNAMSIZ - 1;

/// Size of the virtio-net header that precedes every record when
/// [`TunOptions::vnet_hdr`] is set: `sizeof(struct virtio_net_hdr)`, without
/// the `num_buffers` field of `virtio_net_hdr_mrg_rxbuf`.
pub const VNET_HDR_LEN: usize = 10;

/// Largest record a `read` can return: the virtio-net header plus the
/// largest IP packet (64 KiB; GSO super-packets stay below it).
pub const MAX_RECORD_LEN: usize = VNET_HDR_LEN + 65_536;

/// `_IOW(type, nr, size)` from include/uapi/asm-generic/ioctl.h.
const fn iow(ty: u8, nr: u8, size: usize) -> libc::Ioctl {
    const IOC_WRITE: libc::Ioctl = 1;
    (IOC_WRITE << 30)
        | ((size as libc::Ioctl) << 16)
        | ((ty as libc::Ioctl) << 8)
        | nr as libc::Ioctl
}

/// `TUNSETIFF = _IOW('T', 202, int)`: attach to (creating if needed) the
/// interface named in a `struct ifreq`, with `ifr_flags` selecting the mode.
pub const TUNSETIFF: libc::Ioctl = iow(b'T', 202, size_of::<libc::c_int>());
/// `TUNSETOFFLOAD = _IOW('T', 208, unsigned int)`: the offloads userspace can
/// accept (`TUN_F_*`); the argument is the mask itself, not a pointer.
pub const TUNSETOFFLOAD: libc::Ioctl = iow(b'T', 208, size_of::<libc::c_uint>());
/// `TUNSETVNETHDRSZ = _IOW('T', 216, int)`: size of the virtio-net header,
/// passed by pointer.
pub const TUNSETVNETHDRSZ: libc::Ioctl = iow(b'T', 216, size_of::<libc::c_int>());

/// `IFF_TUN`: layer-3 device (IP packets, no Ethernet header).
pub const IFF_TUN: libc::c_short = 0x0001;
/// `IFF_MULTI_QUEUE`: allow several descriptors (queues) on one device
/// (Linux ≥ 3.8).
pub const IFF_MULTI_QUEUE: libc::c_short = 0x0100;
/// `IFF_NO_PI`: no 4-byte packet-information prefix.
pub const IFF_NO_PI: libc::c_short = 0x1000;
/// `IFF_VNET_HDR`: prefix each packet with a virtio-net header.
pub const IFF_VNET_HDR: libc::c_short = 0x4000;

/// `TUN_F_CSUM`: userspace accepts packets with partial checksums
/// (`VIRTIO_NET_HDR_F_NEEDS_CSUM`); required by all the others.
pub const TUN_F_CSUM: libc::c_uint = 0x01;
/// `TUN_F_TSO4`: userspace accepts TCP/IPv4 GSO super-packets.
pub const TUN_F_TSO4: libc::c_uint = 0x02;
/// `TUN_F_TSO6`: userspace accepts TCP/IPv6 GSO super-packets.
pub const TUN_F_TSO6: libc::c_uint = 0x04;
/// `TUN_F_TSO_ECN`: … including ones with CWR set (`VIRTIO_NET_HDR_GSO_ECN`).
pub const TUN_F_TSO_ECN: libc::c_uint = 0x08;
/// `TUN_F_USO4`: userspace accepts UDP/IPv4 GSO (`UDP_L4`; Linux ≥ 6.2).
pub const TUN_F_USO4: libc::c_uint = 0x20;
/// `TUN_F_USO6`: userspace accepts UDP/IPv6 GSO (`UDP_L4`; Linux ≥ 6.2).
pub const TUN_F_USO6: libc::c_uint = 0x40;

/// How [`Tun::open`] sets up the device. `Default` is plain mode: one IP
/// packet per `read`, no header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TunOptions {
    /// `IFF_VNET_HDR` plus offloads `TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6`:
    /// records carry a [`VNET_HDR_LEN`]-byte header and TCP arrives as GSO
    /// super-packets.
    pub vnet_hdr: bool,
    /// `IFF_MULTI_QUEUE`: open the same name again (with this flag) for
    /// another queue; the kernel spreads flows over queues by hash.
    pub multi_queue: bool,
    /// Adds `TUN_F_TSO_ECN` (needs `vnet_hdr`).
    pub tso_ecn: bool,
    /// Adds `TUN_F_USO4 | TUN_F_USO6`, UDP GSO (needs `vnet_hdr`; Linux ≥ 6.2,
    /// older kernels refuse with `EINVAL`).
    pub udp_gso: bool,
}

impl TunOptions {
    /// Options with `vnet_hdr` set (TCP super-packets, no ECN or UDP GSO).
    pub fn vnet() -> Self {
        Self {
            vnet_hdr: true,
            ..Self::default()
        }
    }

    /// The `TUNSETIFF` flags these options select.
    pub fn iff_flags(&self) -> libc::c_short {
        let mut flags = IFF_TUN | IFF_NO_PI;
        if self.vnet_hdr {
            flags |= IFF_VNET_HDR;
        }
        if self.multi_queue {
            flags |= IFF_MULTI_QUEUE;
        }
        flags
    }

    /// The `TUNSETOFFLOAD` mask these options select (0 without `vnet_hdr`).
    pub fn offloads(&self) -> libc::c_uint {
        if !self.vnet_hdr {
            return 0;
        }
        let mut mask = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        if self.tso_ecn {
            mask |= TUN_F_TSO_ECN;
        }
        if self.udp_gso {
            mask |= TUN_F_USO4 | TUN_F_USO6;
        }
        mask
    }
}

/// One queue of a TUN device; the device goes away when the last queue is
/// dropped.
#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
    vnet_hdr: bool,
}

impl Tun {
    /// Creates (or, with `multi_queue`, attaches another queue to) the TUN
    /// device `name` in the calling thread's network namespace; see the
    /// [module documentation](self) for the exact sequence of calls.
    ///
    /// `name` may be at most [`MAX_IFNAME_LEN`] (15) bytes without NUL bytes;
    /// it may contain `%d`, which the kernel replaces (see [`Tun::name`]).
    /// Fails with `EPERM` without `CAP_NET_ADMIN`, `EBUSY` if a
    /// single-queue device of that name already has a queue, `EINVAL` if
    /// `name` exists with a different mode. `tso_ecn`/`udp_gso` without
    /// `vnet_hdr` are refused with [`io::ErrorKind::InvalidInput`].
    pub fn open(name: &str, opts: TunOptions) -> Result<Tun> {
        let flags = opts.iff_flags();
        let describe_setiff = || format!("ioctl(TUNSETIFF, {name:?}, flags {flags:#06x})");
        if name.len() > MAX_IFNAME_LEN || name.contains('\0') {
            return Err(SysError::new(
                describe_setiff(),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "interface name of {} bytes (at most {MAX_IFNAME_LEN}, IFNAMSIZ - 1, without NUL)",
                        name.len()
                    ),
                ),
            ));
        }
        if !opts.vnet_hdr && (opts.tso_ecn || opts.udp_gso) {
            return Err(SysError::new(
                describe_setiff(),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "tso_ecn and udp_gso need vnet_hdr",
                ),
            ));
        }

        // std opens with O_CLOEXEC.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(TUN_DEVICE)
            .map_err(|e| SysError::new(format!("open {TUN_DEVICE}"), e))?;
        let fd = OwnedFd::from(file);

        // SAFETY: `ifreq` is plain data (arrays, integers and a union of
        // those and raw pointers); all-zero bytes are a valid value.
        let mut ifr: libc::ifreq = unsafe { MaybeUninit::zeroed().assume_init() };
        for (dst, &src) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
            *dst = src as libc::c_char;
        }
        ifr.ifr_ifru.ifru_flags = flags;
        // SAFETY: `fd` is open; TUNSETIFF reads and writes one `struct
        // ifreq`, and `ifr` is a valid, exclusively borrowed ifreq whose name
        // is NUL-terminated (at most 15 bytes copied into 16 zeroed ones).
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut ifr) };
        if rc != 0 {
            return Err(SysError::last_os_error(describe_setiff));
        }
        // The kernel writes back the final name (relevant for `%d`).
        let actual: Vec<u8> = ifr
            .ifr_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        let name = String::from_utf8_lossy(&actual).into_owned();

        if opts.vnet_hdr {
            let size = VNET_HDR_LEN as libc::c_int;
            // SAFETY: `fd` is open; TUNSETVNETHDRSZ reads one int through the
            // pointer, which points to `size` for the duration of the call.
            let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &size) };
            if rc != 0 {
                return Err(SysError::last_os_error(|| {
                    format!("ioctl(TUNSETVNETHDRSZ, {size}) on TUN {name}")
                }));
            }
            let mask = opts.offloads();
            // SAFETY: `fd` is open; TUNSETOFFLOAD takes the mask by value and
            // dereferences nothing.
            let rc =
                unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, libc::c_ulong::from(mask)) };
            if rc != 0 {
                return Err(SysError::last_os_error(|| {
                    format!("ioctl(TUNSETOFFLOAD, {mask:#x}) on TUN {name}")
                }));
            }
        }

        Ok(Tun {
            fd,
            name,
            vnet_hdr: opts.vnet_hdr,
        })
    }

    /// The interface name as the kernel reports it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether records carry a [`VNET_HDR_LEN`]-byte virtio-net header.
    pub fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }

    /// Reads one record (the virtio-net header, if enabled, then one IP
    /// packet) into `buf` and returns its length. A record longer than `buf`
    /// is truncated, so pass [`MAX_RECORD_LEN`] bytes. Blocks until a packet
    /// is queued, unless non-blocking, where it fails with
    /// [`io::ErrorKind::WouldBlock`].
    pub fn read(&self, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes and the fd
        // is open for the lifetime of `self`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| {
            SysError::last_os_error(|| format!("read({} bytes) on TUN {}", buf.len(), self.name))
        })
    }

    /// Writes one record (the virtio-net header, if enabled, then one IP
    /// packet, possibly a GSO super-packet) and returns the bytes accepted.
    /// The packet is delivered to the device's network stack synchronously,
    /// within this call. Fails with `EIO` while the link is down and
    /// `EINVAL` for a malformed header or a packet that is neither IPv4 nor
    /// IPv6.
    pub fn write(&self, buf: &[u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes and the fd is
        // open for the lifetime of `self`.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| {
            SysError::last_os_error(|| format!("write({} bytes) on TUN {}", buf.len(), self.name))
        })
    }

    /// Sets or clears `O_NONBLOCK` on the descriptor (`fcntl(F_SETFL)`).
    pub fn set_nonblocking(&self, nonblocking: bool) -> Result<()> {
        let raw = self.fd.as_raw_fd();
        // SAFETY: F_GETFL takes no argument and touches no memory.
        let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
        if flags < 0 {
            return Err(SysError::last_os_error(|| {
                format!("fcntl(F_GETFL) on TUN {}", self.name)
            }));
        }
        let new = if nonblocking {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: F_SETFL takes an int by value and touches no memory.
        let rc = unsafe { libc::fcntl(raw, libc::F_SETFL, new) };
        if rc < 0 {
            return Err(SysError::last_os_error(|| {
                format!(
                    "fcntl(F_SETFL, O_NONBLOCK={nonblocking}) on TUN {}",
                    self.name
                )
            }));
        }
        Ok(())
    }

    /// Waits up to `timeout` (nanosecond resolution, `ppoll`) until a record
    /// can be read; returns whether one can. A signal ends the wait early
    /// with `Ok(false)`.
    pub fn wait_readable(&self, timeout: Duration) -> Result<bool> {
        let ts = libc::timespec {
            tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
            // Below 10^9, so it fits every platform's c_long.
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd and `ts` a valid timespec, both
        // live across the call; a null sigmask leaves the mask unchanged.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                return Ok(false);
            }
            return Err(SysError::new(
                format!("ppoll(POLLIN, {timeout:?}) on TUN {}", self.name),
                err,
            ));
        }
        Ok(rc > 0 && pfd.revents & libc::POLLIN != 0)
    }
}

impl AsFd for Tun {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Waits up to `timeout` (nanosecond resolution, `ppoll`) until a record can
/// be read from any of `tuns`; sets `ready[i]` for each that can (`ready` is
/// resized to `tuns.len()`) and returns how many. A signal ends the wait
/// early with `Ok(0)`. The multi-host fabric of `longhaul-emu` waits on all
/// its hosts' devices at once with it.
pub fn wait_any_readable(tuns: &[&Tun], timeout: Duration, ready: &mut Vec<bool>) -> Result<usize> {
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        // Below 10^9, so it fits every platform's c_long.
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let mut pfds: Vec<libc::pollfd> = tuns
        .iter()
        .map(|t| libc::pollfd {
            fd: t.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    ready.clear();
    ready.resize(tuns.len(), false);
    // SAFETY: `pfds` holds `pfds.len()` valid pollfds and `ts` is a valid
    // timespec, both live across the call; a null sigmask leaves the mask
    // unchanged.
    let rc = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(SysError::new(
            format!("ppoll(POLLIN, {timeout:?}) on {} TUN devices", tuns.len()),
            err,
        ));
    }
    let mut n = 0;
    for (r, p) in ready.iter_mut().zip(&pfds) {
        *r = p.revents & libc::POLLIN != 0;
        n += usize::from(*r);
    }
    Ok(n)
}

impl From<Tun> for OwnedFd {
    fn from(tun: Tun) -> OwnedFd {
        tun.fd
    }
}

#[cfg(test)]
mod tests;
