//! Batched UDP: many datagrams per system call each way.
//!
//! One datagram per `send(2)`/`recv(2)` is why UDP testers lose packets far below line rate (iperf3 at
//! 2 Gbit/s spends a system call per 1,448 bytes). Linux offers two batchings that compose:
//!
//! * **`sendmmsg(2)`/`recvmmsg(2)`**: several messages per call ([`send_batch`], [`RecvBatch`]);
//! * **UDP GSO and GRO**: with `UDP_SEGMENT` set ([`set_udp_segment`]) one message of up to 64 KiB
//!   leaves as datagrams of the segment size, cut by the kernel (or the NIC); with `UDP_GRO` on
//!   ([`set_udp_gro`]) the kernel hands up runs of equal-sized datagrams of one flow as one message,
//!   whose segment size comes in a control message ([`Received::segment`]).
//!
//! [`RecvBatch`] also asks for the kernel's receive timestamp (`SO_TIMESTAMPNS`, the wall clock when
//! the datagram arrived, not when the reader got to it) and for the socket's drop counter
//! (`SO_RXQ_OVFL`: datagrams the kernel dropped because the receive buffer was full, so loss in the
//! host can be told from loss in the network).

use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error::Result;
use crate::sockopt::set_raw;

/// Most segments the kernel cuts one GSO message into (`UDP_MAX_SEGMENTS`, linux/udp.h).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Largest UDP message: 65,535 minus the IPv4 and UDP headers. A GSO message carries at most this
/// many payload bytes in all.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Sets the socket's default GSO segment size (`UDP_SEGMENT`): a later message longer than `size`
/// leaves as datagrams of `size` bytes (the last may be shorter). 0 turns segmentation off.
pub fn set_udp_segment(fd: BorrowedFd<'_>, size: u16) -> Result<()> {
    set_raw(
        fd,
        libc::SOL_UDP,
        libc::UDP_SEGMENT,
        &libc::c_int::from(size),
        || format!("setsockopt(UDP_SEGMENT={size}) on fd {}", fd.as_raw_fd()),
    )
}

/// Turns UDP receive coalescing (`UDP_GRO`) on or off for the socket.
pub fn set_udp_gro(fd: BorrowedFd<'_>, on: bool) -> Result<()> {
    set_raw(
        fd,
        libc::SOL_UDP,
        libc::UDP_GRO,
        &libc::c_int::from(on),
        || format!("setsockopt(UDP_GRO={on}) on fd {}", fd.as_raw_fd()),
    )
}

/// Asks for the kernel's receive timestamp (`SO_TIMESTAMPNS`) and drop counter (`SO_RXQ_OVFL`) on
/// every message [`RecvBatch`] reads.
pub fn set_receive_info(fd: BorrowedFd<'_>) -> Result<()> {
    let on: libc::c_int = 1;
    set_raw(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &on, || {
        format!("setsockopt(SO_TIMESTAMPNS) on fd {}", fd.as_raw_fd())
    })?;
    set_raw(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &on, || {
        format!("setsockopt(SO_RXQ_OVFL) on fd {}", fd.as_raw_fd())
    })
}

/// Sends each of `messages` as one message on the connected socket `fd` in as few `sendmmsg(2)`
/// calls as it takes (at most 1,024 messages a call); returns how many the kernel took. Stops early
/// at the first error after at least one message went (the error is then the caller's next call's);
/// an error before any message went is returned.
pub fn send_batch(fd: BorrowedFd<'_>, messages: &[&[u8]]) -> io::Result<usize> {
    const MAX_PER_CALL: usize = 1024;
    let mut sent = 0;
    while sent < messages.len() {
        let chunk = &messages[sent..messages.len().min(sent + MAX_PER_CALL)];
        let mut iovs: Vec<libc::iovec> = chunk
            .iter()
            .map(|m| libc::iovec {
                iov_base: m.as_ptr().cast_mut().cast(),
                iov_len: m.len(),
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: mmsghdr is plain old data; all zeros is an empty header (no name, no
                // control), which the fields below complete.
                let mut h: libc::mmsghdr = unsafe { zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let count = u32::try_from(hdrs.len()).unwrap_or(u32::MAX);
        // SAFETY: `hdrs` holds `count` initialised headers, each pointing at one iovec in `iovs`
        // that points at a live, readable slice of `messages`; all outlive the call, and the kernel
        // only reads the payloads and writes each header's msg_len.
        let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), hdrs.as_mut_ptr(), count, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if sent > 0 { Ok(sent) } else { Err(e) };
        }
        let n = usize::try_from(rc).unwrap_or(0);
        sent += n;
        if n < chunk.len() {
            break;
        }
    }
    Ok(sent)
}

/// Control-message space per received message: a timestamp, the drop counter and the GRO size.
const CMSG_SPACE: usize = 128;

/// Buffers for reading up to `messages` messages of up to `capacity` bytes each in one
/// `recvmmsg(2)` call.
pub struct RecvBatch {
    capacity: usize,
    data: Vec<u8>,
    /// Control-message buffers, u64-aligned as `cmsghdr` needs.
    control: Vec<u64>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    received: usize,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` only ever point into this batch's own buffers, are
// rebuilt before each call, and are never dereferenced outside `recv`; moving the batch to another
// thread moves the buffers with it.
unsafe impl Send for RecvBatch {}

/// One message of a batch.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The message: one datagram, or with GRO several back to back.
    pub data: &'a [u8],
    /// Bytes per datagram in `data` (the GRO segment size; `data.len()` for a single datagram). The
    /// last datagram may be shorter.
    pub segment: usize,
    /// The kernel's receive time (wall clock, ns since the Unix epoch), if it gave one.
    pub kernel_ns: Option<u64>,
    /// The socket's count of datagrams dropped for want of buffer space, as it stood when this
    /// message was queued (with [`set_receive_info`]; the kernel says nothing while it is 0).
    pub dropped: u32,
    /// Whether the message did not fit in the buffer (`MSG_TRUNC`).
    pub truncated: bool,
}

impl Received<'_> {
    /// The datagrams of the message, cut at the segment size.
    pub fn datagrams(&self) -> std::slice::Chunks<'_, u8> {
        self.data.chunks(self.segment.max(1))
    }
}

impl RecvBatch {
    /// Room for `messages` messages of up to `capacity` bytes each (with GRO, a message can be up
    /// to 64 KiB: give [`MAX_UDP_PAYLOAD`] or more).
    pub fn new(messages: usize, capacity: usize) -> Self {
        let messages = messages.max(1);
        Self {
            capacity,
            data: vec![0; messages * capacity],
            control: vec![0; messages * CMSG_SPACE / 8],
            iovs: Vec::with_capacity(messages),
            hdrs: Vec::with_capacity(messages),
            received: 0,
        }
    }

    /// Reads up to the batch's size of messages from `fd`, blocking (subject to the socket's
    /// timeout) until at least one is there; returns how many came.
    pub fn recv(&mut self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let messages = self.data.len() / self.capacity.max(1);
        self.iovs.clear();
        self.hdrs.clear();
        for chunk in self.data.chunks_mut(self.capacity.max(1)) {
            self.iovs.push(libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            });
        }
        for (iov, ctl) in self
            .iovs
            .iter_mut()
            .zip(self.control.chunks_mut(CMSG_SPACE / 8))
        {
            // SAFETY: mmsghdr is plain old data; all zeros is an empty header, completed below.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_iov = iov;
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = ctl.as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = CMSG_SPACE as _;
            self.hdrs.push(h);
        }
        let count = u32::try_from(messages).unwrap_or(u32::MAX);
        // SAFETY: `hdrs` holds `count` headers, each pointing at its own iovec over a disjoint,
        // writable chunk of `data` and at its own CMSG_SPACE bytes of `control`; all live in `self`
        // and outlive the call. MSG_WAITFORONE returns once one message is in.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                count,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            self.received = 0;
            return Err(io::Error::last_os_error());
        }
        self.received = usize::try_from(rc).unwrap_or(0);
        Ok(self.received)
    }

    /// Message `i` of the last [`Self::recv`].
    ///
    /// # Panics
    /// If `i` is not below the count `recv` returned.
    pub fn message(&self, i: usize) -> Received<'_> {
        assert!(i < self.received, "message {i} of {}", self.received);
        let h = &self.hdrs[i];
        let len = (h.msg_len as usize).min(self.capacity);
        let data = &self.data[i * self.capacity..i * self.capacity + len];
        let mut out = Received {
            data,
            segment: len,
            kernel_ns: None,
            dropped: 0,
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        };
        let hdr = &h.msg_hdr;
        // SAFETY: `hdr` is the header the kernel filled in this batch's last recvmmsg; its control
        // pointer and (kernel-updated) length describe this message's own control buffer, so the
        // CMSG_* walk stays inside it. Each payload is read unaligned, with the size its type says.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(hdr);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                let p = libc::CMSG_DATA(c);
                if level == libc::SOL_UDP && kind == libc::UDP_GRO {
                    let seg = p.cast::<libc::c_int>().read_unaligned();
                    if seg > 0 {
                        out.segment = seg as usize;
                    }
                } else if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
                    let ts = p.cast::<libc::timespec>().read_unaligned();
                    if let (Ok(s), Ok(ns)) = (u64::try_from(ts.tv_sec), u64::try_from(ts.tv_nsec)) {
                        out.kernel_ns = Some(s * 1_000_000_000 + ns);
                    }
                } else if level == libc::SOL_SOCKET && kind == libc::SO_RXQ_OVFL {
                    out.dropped = p.cast::<u32>().read_unaligned();
                }
                c = libc::CMSG_NXTHDR(hdr, c);
            }
        }
        out
    }
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("capacity", &self.capacity)
            .field("messages", &self.hdrs.capacity())
            .field("received", &self.received)
            .finish()
    }
}

/// Bytes of the control buffer one message needs; checked against [`CMSG_SPACE`] in the tests.
#[cfg(test)]
fn control_needed() -> usize {
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe {
        (libc::CMSG_SPACE(std::mem::size_of::<libc::timespec>() as u32)
            + libc::CMSG_SPACE(std::mem::size_of::<u32>() as u32)
            + libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::time::Duration;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (a, b)
    }

    #[test]
    fn control_space_fits_every_message_kind() {
        assert!(control_needed() <= CMSG_SPACE);
    }

    #[test]
    fn a_batch_goes_in_one_call_and_comes_back_with_timestamps() {
        let (a, b) = pair();
        set_receive_info(b.as_fd()).unwrap();
        let payloads: Vec<Vec<u8>> = (0u8..10).map(|i| vec![i; 100 + usize::from(i)]).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        assert_eq!(send_batch(a.as_fd(), &refs).unwrap(), 10);
        let mut batch = RecvBatch::new(16, 2048);
        let mut got = Vec::new();
        while got.len() < 10 {
            let n = batch.recv(b.as_fd()).unwrap();
            for i in 0..n {
                let m = batch.message(i);
                assert!(m.kernel_ns.is_some(), "the kernel stamps every message");
                assert_eq!(m.dropped, 0, "nothing dropped");
                assert!(!m.truncated);
                got.push(m.data.to_vec());
            }
        }
        assert_eq!(got, payloads);
    }

    #[test]
    fn gso_cuts_one_message_into_datagrams_and_gro_or_not_they_come_back_whole() {
        let (a, b) = pair();
        set_udp_segment(a.as_fd(), 1000).unwrap();
        // 10 datagrams of 1000 bytes and a last one of 500, each starting with its index.
        let mut msg = vec![0u8; 10_500];
        for (i, d) in msg.chunks_mut(1000).enumerate() {
            d.fill(i as u8);
        }
        assert_eq!(send_batch(a.as_fd(), &[&msg]).unwrap(), 1);
        for gro in [false, true] {
            set_udp_gro(b.as_fd(), gro).unwrap();
            let mut batch = RecvBatch::new(16, MAX_UDP_PAYLOAD);
            let mut datagrams = Vec::new();
            while datagrams.len() < 11 {
                let n = batch.recv(b.as_fd()).unwrap();
                for i in 0..n {
                    datagrams.extend(batch.message(i).datagrams().map(<[u8]>::to_vec));
                }
            }
            assert_eq!(datagrams.len(), 11);
            for (i, d) in datagrams.iter().enumerate() {
                assert_eq!(d.len(), if i == 10 { 500 } else { 1000 });
                assert!(d.iter().all(|&x| x == i as u8));
            }
            if !gro {
                assert_eq!(send_batch(a.as_fd(), &[&msg]).unwrap(), 1);
            }
        }
    }

    #[test]
    fn a_full_receive_buffer_shows_in_the_drop_counter() {
        let (a, b) = pair();
        set_receive_info(b.as_fd()).unwrap();
        crate::set_recv_buffer(b.as_fd(), 4096, false).unwrap();
        let payload = vec![7u8; 1200];
        for _ in 0..200 {
            let _ = a.send(&payload);
        }
        // The counter travels with the datagrams queued after the drops: drain, send one more.
        b.set_nonblocking(true).unwrap();
        let mut batch = RecvBatch::new(8, 2048);
        while batch.recv(b.as_fd()).is_ok() {}
        b.set_nonblocking(false).unwrap();
        a.send(&payload).unwrap();
        assert_eq!(batch.recv(b.as_fd()).unwrap(), 1);
        let dropped = batch.message(0).dropped;
        assert!(
            (1..200).contains(&dropped),
            "a 4 KiB buffer cannot hold 200 datagrams: {dropped} dropped"
        );
    }

    #[test]
    fn a_closed_peer_is_an_error_not_a_hang() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let gone = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(gone.local_addr().unwrap()).unwrap();
        drop(gone);
        // The first send draws the ICMP port unreachable; a later call reports it.
        let _ = send_batch(a.as_fd(), &[b"x"]);
        std::thread::sleep(Duration::from_millis(20));
        a.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut batch = RecvBatch::new(1, 64);
        let e = batch.recv(a.as_fd()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }
}
