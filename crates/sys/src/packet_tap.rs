//! A tap on a network device's outgoing packets: an `AF_PACKET` socket that is handed a copy
//! of every packet the device transmits, stamped by the kernel (`SO_TIMESTAMPNS`) when the
//! host's stack gave it to the device.
//!
//! The emulator uses it to learn when a record entered the sending host's TUN queue, which its
//! own read of the TUN cannot tell: a forwarder kept from its CPU reads late, and the time a
//! record waited there belongs to the path's delay, not after it (issue 22). The tap is opened
//! in the host's namespace ([`crate::run_in_netns`]); it needs `CAP_NET_RAW`.
//!
//! Only outgoing packets reach the socket (a classic BPF filter on the packet type), and a
//! read copies only the packet's first [`TAP_HEAD`] bytes (the network and transport headers,
//! enough to tell one packet from another); the packet's full length comes with it.

use std::ffi::CString;
use std::io;
use std::mem::{MaybeUninit, size_of, size_of_val};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use crate::error::{Result, SysError};

/// Bytes of each packet a read copies: an IPv6 header (40) and a TCP header with options (up to
/// 60) fit; an IPv4 header with a TCP header and the timestamp option (52) too.
pub const TAP_HEAD: usize = 100;

/// The receive buffer asked for: the tap's copies share the packets' data with the device's
/// queue, so this bounds how many packets the tap can hold while its reader is away (the kernel
/// counts each copy at its full size), not memory the tap takes on its own.
const RECEIVE_BUFFER: libc::c_int = 1 << 30;

/// One packet the tap saw leave.
#[derive(Debug, Clone, Copy)]
pub struct Tapped {
    /// The packet's length from its network header on.
    pub len: usize,
    /// Its first bytes (`head[..head_len]`), from the network header on.
    pub head: [u8; TAP_HEAD],
    /// How many bytes of `head` hold the packet (`len.min(TAP_HEAD)`).
    pub head_len: usize,
    /// When the host's stack handed it to the device, in `CLOCK_REALTIME` nanoseconds.
    pub realtime_ns: u64,
}

impl Tapped {
    /// Whether `packet` (from its network header on) is the packet tapped: the same length and
    /// the same first bytes.
    pub fn is(&self, packet: &[u8]) -> bool {
        packet.len() == self.len && packet.get(..self.head_len) == Some(&self.head[..self.head_len])
    }
}

/// The tap on one device's outgoing packets.
#[derive(Debug)]
pub struct PacketTap {
    fd: OwnedFd,
}

impl PacketTap {
    /// Opens a tap on `device` of the calling thread's network namespace. Non-blocking.
    pub fn outgoing(device: &str) -> Result<Self> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) with constant arguments; the descriptor it returns (checked
        // below) is owned by nothing else.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            )
        };
        if raw < 0 {
            return Err(SysError::last_os_error(|| "socket(AF_PACKET, SOCK_DGRAM)"));
        }
        // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let tap = Self { fd };
        tap.only_outgoing()?;
        let index = interface_index(device)?;
        // SAFETY: sockaddr_ll is plain old data; all zeroes is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { MaybeUninit::zeroed().assume_init() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = index;
        // SAFETY: the pointer and length describe `addr`, a live sockaddr_ll the kernel only reads.
        let rc = unsafe {
            libc::bind(
                tap.fd.as_raw_fd(),
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(SysError::last_os_error(|| {
                format!("bind(AF_PACKET) to {device}")
            }));
        }
        crate::sockopt::set_raw(
            tap.fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &1 as &libc::c_int,
            || "setsockopt(SO_TIMESTAMPNS) on the packet tap".to_string(),
        )?;
        // Without CAP_NET_ADMIN the kernel's rmem_max caps a plain SO_RCVBUF instead.
        crate::sockopt::set_raw(
            tap.fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &RECEIVE_BUFFER,
            String::new,
        )
        .or_else(|_| {
            crate::sockopt::set_raw(
                tap.fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &RECEIVE_BUFFER,
                || "setsockopt(SO_RCVBUF) on the packet tap".to_string(),
            )
        })?;
        Ok(tap)
    }

    /// A filter that passes outgoing packets only: `ld pkttype; jeq OUTGOING; ret all; ret 0`.
    fn only_outgoing(&self) -> Result<()> {
        let stmt = |code: u32, k: u32| libc::sock_filter {
            code: code as u16,
            jt: 0,
            jf: 0,
            k,
        };
        let mut program = [
            stmt(
                libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
                (libc::SKF_AD_OFF + libc::SKF_AD_PKTTYPE) as u32,
            ),
            libc::sock_filter {
                code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                jt: 0,
                jf: 1,
                k: u32::from(libc::PACKET_OUTGOING),
            },
            stmt(libc::BPF_RET | libc::BPF_K, u32::MAX),
            stmt(libc::BPF_RET | libc::BPF_K, 0),
        ];
        let prog = libc::sock_fprog {
            len: program.len() as u16,
            filter: program.as_mut_ptr(),
        };
        // SAFETY: `prog` points at `program`, which lives across the call; the kernel copies the
        // program and keeps no pointer to it.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&raw const prog).cast(),
                size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(SysError::last_os_error(
                || "setsockopt(SO_ATTACH_FILTER) on the packet tap",
            ))
        }
    }

    /// The next packet the tap holds, or `None` when it holds none now.
    pub fn next(&self) -> Result<Option<Tapped>> {
        let mut head = [0u8; TAP_HEAD];
        // Room for one SCM_TIMESTAMPNS message (a cmsghdr and a timespec), aligned for cmsghdr.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: head.as_mut_ptr().cast(),
            iov_len: head.len(),
        };
        // SAFETY: msghdr is plain old data; all zeroes is a valid (empty) value.
        let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of_val(&control);
        // SAFETY: every pointer in `msg` refers to a live local buffer of the length given with
        // it (`head` through `iov`, `control`), which the kernel writes within those lengths.
        let n = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &raw mut msg,
                libc::MSG_TRUNC | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(SysError::new("recvmsg on the packet tap", e));
        }
        let len = n as usize;
        let mut realtime_ns = None;
        // SAFETY: the CMSG_* walk stays within `msg.msg_control[..msg.msg_controllen]` as the
        // kernel filled it; the timestamp is read unaligned from inside that buffer.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    realtime_ns = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&raw const msg, c);
            }
        }
        let Some(realtime_ns) = realtime_ns else {
            return Err(SysError::new(
                "recvmsg on the packet tap",
                io::Error::other("a packet without its timestamp"),
            ));
        };
        Ok(Some(Tapped {
            len,
            head,
            head_len: len.min(TAP_HEAD),
            realtime_ns,
        }))
    }

    /// Packets the tap dropped because its buffer was full, since the last call (the kernel
    /// resets the count on each read).
    pub fn drops(&self) -> Result<u64> {
        // struct tpacket_stats { tp_packets: u32, tp_drops: u32 }
        let mut stats = [0u8; 8];
        crate::sockopt::get_raw(
            self.fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut stats,
            || "getsockopt(PACKET_STATISTICS) on the packet tap".to_string(),
        )?;
        let drops = u32::from_ne_bytes([stats[4], stats[5], stats[6], stats[7]]);
        Ok(u64::from(drops))
    }
}

/// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC` now, in nanoseconds: subtracted from a tap's
/// timestamp it gives the monotonic time the rest of longhaul measures with.
pub fn realtime_minus_monotonic_ns() -> i128 {
    let before = crate::monotonic_now_ns();
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let after = crate::monotonic_now_ns();
    real as i128 - i128::from(before / 2 + after / 2)
}

fn interface_index(device: &str) -> Result<libc::c_int> {
    let name = CString::new(device).map_err(|_| {
        SysError::new(
            format!("if_nametoindex({device:?})"),
            io::Error::from(io::ErrorKind::InvalidInput),
        )
    })?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(SysError::last_os_error(|| {
            format!("if_nametoindex({device})")
        }));
    }
    libc::c_int::try_from(index).map_err(|_| {
        SysError::new(
            format!("if_nametoindex({device})"),
            io::Error::other("index out of range"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_told_by_its_length_and_first_bytes() {
        let packet: Vec<u8> = (0..200u8).collect();
        let mut head = [0u8; TAP_HEAD];
        head.copy_from_slice(&packet[..TAP_HEAD]);
        let t = Tapped {
            len: 200,
            head,
            head_len: TAP_HEAD,
            realtime_ns: 1,
        };
        assert!(t.is(&packet));
        assert!(!t.is(&packet[..199]), "another length");
        let mut other = packet.clone();
        other[TAP_HEAD - 1] ^= 1;
        assert!(!t.is(&other), "another header");
        other = packet.clone();
        other[TAP_HEAD] ^= 1;
        assert!(t.is(&other), "only the first bytes are compared");
        let short = Tapped {
            len: 3,
            head_len: 3,
            ..t
        };
        assert!(short.is(&packet[..3]));
    }

    /// A UDP datagram sent over `lo` of a fresh namespace: the tap sees it leave once (not
    /// again as it comes back in), with its length, its headers and a timestamp of now.
    #[test]
    fn sees_each_outgoing_packet_once_with_its_time() {
        if !crate::testutil::netns_privileges() {
            return;
        }
        let ns = crate::testutil::TestNetns::new("tap").unwrap();
        crate::run_in_netns(&ns.path(), || {
            let tap = PacketTap::outgoing("lo").unwrap();
            assert!(tap.next().unwrap().is_none(), "nothing sent yet");
            let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let before = realtime_minus_monotonic_ns() + i128::from(crate::monotonic_now_ns());
            tx.send_to(&[7u8; 300], rx.local_addr().unwrap()).unwrap();
            let mut got = [0u8; 400];
            assert_eq!(rx.recv(&mut got).unwrap(), 300);
            let t = tap.next().unwrap().expect("the datagram, leaving");
            assert_eq!(t.len, 20 + 8 + 300, "IPv4 + UDP + payload");
            assert_eq!(t.head[0] >> 4, 4);
            assert_eq!(t.head[9], 17, "UDP");
            assert_eq!(&t.head[28..TAP_HEAD], &[7u8; TAP_HEAD - 28][..]);
            let late = i128::from(t.realtime_ns) - before;
            assert!((-1_000_000..1_000_000_000).contains(&late), "{late} ns");
            assert!(
                tap.next().unwrap().is_none(),
                "its arrival back in is filtered"
            );
            assert_eq!(tap.drops().unwrap(), 0);
        })
        .unwrap();
    }

    #[test]
    fn realtime_and_monotonic_differ_by_a_steady_offset() {
        let a = realtime_minus_monotonic_ns();
        let b = realtime_minus_monotonic_ns();
        assert!((a - b).abs() < 1_000_000, "{a} {b}");
        assert!(a > 0, "realtime is past 1970 by more than the uptime: {a}");
    }
}
