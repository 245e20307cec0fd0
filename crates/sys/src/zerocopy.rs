//! Zero-copy senders for an endless stream of one constant pattern.
//!
//! The throughput tool's `-Z` mode sends the same pattern bytes over and over
//! on a connected TCP socket. Three ways of doing that without copying the
//! payload from user memory into socket buffers are provided here, so they
//! can be measured against a plain `write(2)`:
//!
//! * [`SendfileSource`]: the pattern lives in a sealed memfd; each send is a
//!   `sendfile(2)` from offset 0, handing page-cache pages to TCP.
//! * [`ZeroCopySender`]: `send(2)` with `MSG_ZEROCOPY` from a user buffer; the
//!   kernel pins the user pages and later reports completion on the socket's
//!   error queue, which is reaped here without blocking.
//! * [`SpliceSource`]: the pattern sits in a pipe; each send `tee(2)`s it into
//!   a second pipe (page references, no copy) and `splice(2)`s that into the
//!   socket.
//!
//! None of them copies on the sending side, but on loopback the receiver must
//! still copy into its buffer, and `MSG_ZEROCOPY` falls back to a deferred
//! copy for locally delivered data (reported via [`ZeroCopySender::copied_fallbacks`]).

use std::ffi::c_int;
use std::fs::File;
use std::io::{self, Write};
use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::error::{Result, SysError};
use crate::sockopt::set_raw;

/// `SO_EE_ORIGIN_ZEROCOPY` from linux/errqueue.h (not in the `libc` crate).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED` from linux/errqueue.h: the kernel copied the
/// data after all instead of sending the pinned pages.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

fn invalid_input(call: impl Into<String>, msg: &str) -> SysError {
    SysError::new(
        call,
        io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned()),
    )
}

/// Converts a `ssize_t` result, taking `errno` on failure.
fn check_len(rc: isize, describe: impl FnOnce() -> String) -> Result<usize> {
    usize::try_from(rc).map_err(|_| SysError::last_os_error(describe))
}

/// Converts an `int` result, taking `errno` on failure.
fn check_int(rc: c_int, describe: impl FnOnce() -> String) -> Result<c_int> {
    if rc < 0 {
        Err(SysError::last_os_error(describe))
    } else {
        Ok(rc)
    }
}

/// Takes ownership of a descriptor a successful call just returned.
fn own_fd(fd: c_int) -> OwnedFd {
    // SAFETY: callers pass only descriptors freshly returned by a successful
    // kernel call, which nothing else owns or will close.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A constant pattern in a sealed memfd, sent with `sendfile(2)`.
#[derive(Debug)]
pub struct SendfileSource {
    memfd: OwnedFd,
    len: usize,
}

impl SendfileSource {
    /// Creates an anonymous memory file (`memfd_create`, `MFD_CLOEXEC`) holding
    /// `pattern`, sealed against any further change of size or content.
    pub fn new(pattern: &[u8]) -> Result<Self> {
        if pattern.is_empty() {
            return Err(invalid_input(
                "memfd_create(longhaul-pattern)",
                "empty pattern",
            ));
        }
        // SAFETY: the name is a valid NUL-terminated string; the flags are
        // valid memfd flags.
        let rc = unsafe {
            libc::memfd_create(
                c"longhaul-pattern".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        let memfd = own_fd(check_int(rc, || {
            "memfd_create(longhaul-pattern)".to_owned()
        })?);
        let mut file = File::from(memfd);
        file.write_all(pattern).map_err(|e| {
            SysError::new(
                format!(
                    "write {} bytes to memfd {}",
                    pattern.len(),
                    file.as_raw_fd()
                ),
                e,
            )
        })?;
        let seals =
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        // SAFETY: F_ADD_SEALS takes an int argument and touches no memory of ours.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) };
        check_int(rc, || {
            format!("fcntl(F_ADD_SEALS) on memfd {}", file.as_raw_fd())
        })?;
        Ok(SendfileSource {
            memfd: file.into(),
            len: pattern.len(),
        })
    }

    /// Length of the pattern in bytes; the most one [`send`](Self::send) sends.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: empty patterns are rejected by [`new`](Self::new).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memfd holding the pattern.
    pub fn memfd(&self) -> BorrowedFd<'_> {
        self.memfd.as_fd()
    }

    /// Sends up to `len` bytes (at most [`len()`](Self::len)) of the pattern,
    /// always from its start, with `sendfile(sock, memfd, &0, len)`; returns
    /// the number of bytes sent, which may be fewer (signal, `SO_SNDTIMEO`,
    /// or a non-blocking socket). A short send followed by another call
    /// restarts the pattern at its first byte.
    pub fn send(&self, sock: BorrowedFd<'_>, len: usize) -> Result<usize> {
        let count = len.min(self.len);
        let mut offset: libc::off_t = 0;
        // SAFETY: both descriptors are live for the call; `offset` is a valid
        // writable off_t that the kernel updates instead of the file position.
        let rc =
            unsafe { libc::sendfile(sock.as_raw_fd(), self.memfd.as_raw_fd(), &mut offset, count) };
        check_len(rc, || {
            format!(
                "sendfile({count} bytes from memfd {}) on fd {}",
                self.memfd.as_raw_fd(),
                sock.as_raw_fd()
            )
        })
    }
}

/// Sends with `MSG_ZEROCOPY` and reaps the completion notifications.
///
/// # Buffer contract
///
/// With `MSG_ZEROCOPY` the kernel keeps references to the *user pages* of the
/// buffer after `send` returns and transmits (or retransmits) from them until
/// the peer acknowledges the data. Modifying the buffer before its completion
/// is reaped changes the bytes on the wire. The intended use is a buffer that
/// holds a constant pattern and is never modified while the connection is
/// open: then any in-flight byte is still the pattern, and correctness does not
/// depend on completions; they are reaped only so that the error queue and the
/// socket's option-memory budget (`net.core.optmem_max`) never fill up.
/// Before freeing or reusing the buffer for other content, call
/// [`flush`](Self::flush).
///
/// The sender does not own the socket; pass the same socket to every call.
#[derive(Debug)]
pub struct ZeroCopySender {
    sends: u64,
    completions: u64,
    copied: u64,
    notifications: u64,
    enobufs: u64,
}

impl ZeroCopySender {
    /// Enables `SO_ZEROCOPY` on `sock`.
    ///
    /// Fails (typically `ENOPROTOOPT` or `EOPNOTSUPP`) on kernels or socket
    /// types without `MSG_ZEROCOPY` support.
    pub fn new(sock: BorrowedFd<'_>) -> Result<Self> {
        let one: c_int = 1;
        set_raw(sock, libc::SOL_SOCKET, libc::SO_ZEROCOPY, &one, || {
            format!("setsockopt(SO_ZEROCOPY=1) on fd {}", sock.as_raw_fd())
        })?;
        Ok(ZeroCopySender {
            sends: 0,
            completions: 0,
            copied: 0,
            notifications: 0,
            enobufs: 0,
        })
    }

    /// Sends `buf` with `send(MSG_ZEROCOPY | MSG_NOSIGNAL)`, first reaping any
    /// pending completions without blocking. Returns the bytes accepted, which
    /// may be fewer than `buf.len()` like any `send`.
    ///
    /// If the kernel refuses with `ENOBUFS` (too many notifications
    /// outstanding), completions are awaited (polling for `POLLERR` in 100 ms
    /// steps) and reaped, and the send is retried; `ENOBUFS` is returned only
    /// if nothing is outstanding that could free the budget, or if the socket
    /// is non-blocking (then wait for `POLLERR`, call [`reap`](Self::reap)
    /// and retry). See the type's documentation for the buffer contract.
    pub fn send(&mut self, sock: BorrowedFd<'_>, buf: &[u8]) -> Result<usize> {
        self.reap(sock)?;
        let describe = || {
            format!(
                "send({} bytes, MSG_ZEROCOPY) on fd {}",
                buf.len(),
                sock.as_raw_fd()
            )
        };
        loop {
            // SAFETY: `sock` is live for the call and `buf` is readable for
            // `buf.len()` bytes. The kernel pins the pages it references; see
            // the buffer contract on the type.
            let rc = unsafe {
                libc::send(
                    sock.as_raw_fd(),
                    buf.as_ptr().cast::<libc::c_void>(),
                    buf.len(),
                    libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL,
                )
            };
            match usize::try_from(rc) {
                Ok(n) => {
                    if n > 0 {
                        self.sends += 1;
                    }
                    return Ok(n);
                }
                Err(_) => {
                    let err = SysError::last_os_error(describe);
                    if err.raw_os_error() != Some(libc::ENOBUFS) {
                        return Err(err);
                    }
                    self.enobufs += 1;
                    if self.reap(sock)? > 0 {
                        continue;
                    }
                    if self.outstanding() == 0 || is_nonblocking(sock)? {
                        return Err(err);
                    }
                    wait_for_error_queue(sock, Duration::from_millis(100))?;
                    self.reap(sock)?;
                }
            }
        }
    }

    /// Reads every completion notification queued on `sock`'s error queue
    /// (`recvmsg(MSG_ERRQUEUE | MSG_DONTWAIT)`) without blocking; returns the
    /// number of sends whose completion was reaped by this call. Messages of
    /// other origins (e.g. ICMP errors with `IP_RECVERR`) are discarded.
    pub fn reap(&mut self, sock: BorrowedFd<'_>) -> Result<u64> {
        let mut reaped = 0;
        loop {
            // Room for several cmsgs, aligned for `cmsghdr`.
            let mut control = [0u64; 32];
            // SAFETY: msghdr is a plain C struct for which all-zero bytes
            // (null pointers, zero lengths) are a valid value.
            let mut msg: libc::msghdr = unsafe { MaybeUninit::zeroed().assume_init() };
            msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
            msg.msg_controllen = size_of_val(&control) as _;
            // SAFETY: `msg` describes no data buffers and a control buffer that
            // is writable for `msg_controllen` bytes and lives across the call.
            let rc = unsafe {
                libc::recvmsg(
                    sock.as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(reaped),
                    Some(libc::EINTR) => continue,
                    _ => {
                        return Err(SysError::new(
                            format!("recvmsg(MSG_ERRQUEUE) on fd {}", sock.as_raw_fd()),
                            err,
                        ));
                    }
                }
            }
            for ee in extended_errors(&msg) {
                if ee.ee_errno != 0 || ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY {
                    continue;
                }
                // The notification covers send calls ee_info..=ee_data
                // (32-bit counters that may wrap).
                let n = u64::from(ee.ee_data.wrapping_sub(ee.ee_info)) + 1;
                self.notifications += 1;
                self.completions += n;
                reaped += n;
                if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                    self.copied += n;
                }
            }
        }
    }

    /// Waits until every send's completion has been reaped, or `timeout`
    /// passes; returns whether none is outstanding. Call before freeing or
    /// modifying the buffer.
    pub fn flush(&mut self, sock: BorrowedFd<'_>, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            self.reap(sock)?;
            let now = Instant::now();
            if self.outstanding() == 0 || now >= deadline {
                return Ok(self.outstanding() == 0);
            }
            wait_for_error_queue(sock, (deadline - now).min(Duration::from_millis(100)))?;
        }
    }

    /// Successful `MSG_ZEROCOPY` send calls so far.
    pub fn sends(&self) -> u64 {
        self.sends
    }

    /// Send calls whose completion has been reaped.
    pub fn completions(&self) -> u64 {
        self.completions
    }

    /// Of the [`completions`](Self::completions), how many were marked
    /// `SO_EE_CODE_ZEROCOPY_COPIED`: the kernel fell back to copying (always
    /// the case for loopback delivery, and when the device cannot do
    /// scatter-gather).
    pub fn copied_fallbacks(&self) -> u64 {
        self.copied
    }

    /// Completion messages read (each may cover a range of send calls).
    pub fn notifications(&self) -> u64 {
        self.notifications
    }

    /// Sends not yet completed.
    pub fn outstanding(&self) -> u64 {
        self.sends.saturating_sub(self.completions)
    }

    /// How many times the kernel refused a send with `ENOBUFS`.
    pub fn enobufs(&self) -> u64 {
        self.enobufs
    }
}

/// The `sock_extended_err` payloads of the `IP_RECVERR`/`IPV6_RECVERR` control
/// messages in a message returned by `recvmsg`.
fn extended_errors(msg: &libc::msghdr) -> Vec<libc::sock_extended_err> {
    let mut out = Vec::new();
    let need = size_of::<libc::sock_extended_err>();
    // SAFETY: `msg` was filled by a successful recvmsg whose control buffer is
    // still alive, so CMSG_FIRSTHDR yields null or a header inside it.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is non-null and was produced by CMSG_FIRSTHDR or
        // CMSG_NXTHDR, which only return headers lying within the buffer.
        let hdr = unsafe { cmsg.read_unaligned() };
        let is_recverr = (hdr.cmsg_level == libc::SOL_IP && hdr.cmsg_type == libc::IP_RECVERR)
            || (hdr.cmsg_level == libc::SOL_IPV6 && hdr.cmsg_type == libc::IPV6_RECVERR);
        // SAFETY: CMSG_LEN is a pure computation.
        let min_len = unsafe { libc::CMSG_LEN(need as u32) } as usize;
        if is_recverr && hdr.cmsg_len as usize >= min_len {
            // SAFETY: the header's length covers a whole sock_extended_err
            // after it, inside the control buffer; read_unaligned copes with
            // any alignment.
            let ee = unsafe {
                libc::CMSG_DATA(cmsg)
                    .cast::<libc::sock_extended_err>()
                    .read_unaligned()
            };
            out.push(ee);
        }
        // SAFETY: `msg` and `cmsg` are as above; CMSG_NXTHDR returns null at
        // the end of the control data.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    out
}

/// Waits up to `timeout` for `POLLERR` (a non-empty error queue) on `sock`.
fn wait_for_error_queue(sock: BorrowedFd<'_>, timeout: Duration) -> Result<()> {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    let ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: `pfd` is one valid, writable pollfd for the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(SysError::new(
                format!("poll(POLLERR) on fd {}", sock.as_raw_fd()),
                err,
            ));
        }
    }
    Ok(())
}

fn is_nonblocking(fd: BorrowedFd<'_>) -> Result<bool> {
    // SAFETY: F_GETFL takes no argument and touches no memory of ours.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    let flags = check_int(rc, || format!("fcntl(F_GETFL) on fd {}", fd.as_raw_fd()))?;
    Ok(flags & libc::O_NONBLOCK != 0)
}

/// A constant pattern held in a pipe, sent with `tee(2)` + `splice(2)`.
///
/// The pattern is written once into a "source" pipe. Each refill `tee`s the
/// source into a "work" pipe (adding page references, copying nothing) and
/// [`send`](Self::send) splices from the work pipe into the socket; the
/// source pipe is never drained. Unlike [`SendfileSource`], a short send does
/// not restart the pattern: the stream is the pattern repeated exactly.
#[derive(Debug)]
pub struct SpliceSource {
    source: OwnedFd,
    work_read: OwnedFd,
    work_write: OwnedFd,
    len: usize,
    pending: usize,
}

fn make_pipe(flags: c_int, capacity: usize) -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), flags | libc::O_CLOEXEC) };
    check_int(rc, || "pipe2".to_owned())?;
    let (r, w) = (own_fd(fds[0]), own_fd(fds[1]));
    let want = c_int::try_from(capacity).unwrap_or(c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes an int argument and touches no memory of ours.
    let rc = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    check_int(rc, || {
        format!("fcntl(F_SETPIPE_SZ={capacity}) on pipe {}", w.as_raw_fd())
    })?;
    Ok((r, w))
}

impl SpliceSource {
    /// Creates the two pipes, sized to hold `pattern` (`F_SETPIPE_SZ`; without
    /// `CAP_SYS_RESOURCE` the size is limited by `fs.pipe-max-size`, 1 MiB by
    /// default), and writes the pattern into the source pipe.
    pub fn new(pattern: &[u8]) -> Result<Self> {
        if pattern.is_empty() {
            return Err(invalid_input("SpliceSource::new", "empty pattern"));
        }
        let (source, source_write) = make_pipe(libc::O_NONBLOCK, pattern.len())?;
        let mut file = File::from(source_write);
        // Non-blocking: a pattern that does not fit fails instead of hanging.
        file.write_all(pattern).map_err(|e| {
            SysError::new(
                format!("write {} bytes to pipe {}", pattern.len(), file.as_raw_fd()),
                e,
            )
        })?;
        drop(file);
        let (work_read, work_write) = make_pipe(0, pattern.len())?;
        Ok(SpliceSource {
            source,
            work_read,
            work_write,
            len: pattern.len(),
            pending: 0,
        })
    }

    /// Length of the pattern in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: empty patterns are rejected by [`new`](Self::new).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sends up to `len` bytes of the repeating pattern with one `splice(2)`
    /// into `sock`, first refilling the work pipe with `tee(2)` when empty;
    /// returns the bytes sent (at most [`len()`](Self::len) per call).
    pub fn send(&mut self, sock: BorrowedFd<'_>, len: usize) -> Result<usize> {
        if self.pending == 0 {
            // SAFETY: both are live pipe descriptors owned by `self`.
            let rc = unsafe {
                libc::tee(
                    self.source.as_raw_fd(),
                    self.work_write.as_raw_fd(),
                    self.len,
                    0,
                )
            };
            self.pending = check_len(rc, || {
                format!(
                    "tee({} bytes, pipe {} -> pipe {})",
                    self.len,
                    self.source.as_raw_fd(),
                    self.work_write.as_raw_fd()
                )
            })?;
        }
        let count = len.min(self.pending);
        // SAFETY: both descriptors are live; null offsets are required for
        // pipes and sockets.
        let rc = unsafe {
            libc::splice(
                self.work_read.as_raw_fd(),
                std::ptr::null_mut(),
                sock.as_raw_fd(),
                std::ptr::null_mut(),
                count,
                libc::SPLICE_F_MOVE,
            )
        };
        let n = check_len(rc, || {
            format!(
                "splice({count} bytes, pipe {} -> fd {})",
                self.work_read.as_raw_fd(),
                sock.as_raw_fd()
            )
        })?;
        self.pending -= n.min(self.pending);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::tests::tcp_pair;
    use std::io::Read;
    use std::net::TcpStream;
    use std::thread::JoinHandle;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// Reads exactly `total` bytes and checks they repeat `pattern`.
    fn reader(mut s: TcpStream, pattern: Vec<u8>, total: usize) -> JoinHandle<usize> {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let mut got = 0;
            while got < total {
                let n = s.read(&mut buf[..(total - got).min(64 * 1024)]).unwrap();
                assert!(n > 0, "EOF after {got}");
                for (i, &b) in buf[..n].iter().enumerate() {
                    assert_eq!(b, pattern[(got + i) % pattern.len()], "byte {}", got + i);
                }
                got += n;
            }
            got
        })
    }

    #[test]
    fn sendfile_sends_the_pattern() {
        let pat = pattern(128 * 1024);
        let src = SendfileSource::new(&pat).unwrap();
        assert_eq!(src.len(), pat.len());
        let (client, server) = tcp_pair();
        // Blocking socket: each sendfile sends the whole pattern.
        let rounds = 64;
        let r = reader(server, pat.clone(), rounds * pat.len());
        for _ in 0..rounds {
            assert_eq!(src.send(client.as_fd(), usize::MAX).unwrap(), pat.len());
        }
        assert_eq!(r.join().unwrap(), rounds * pat.len());
    }

    #[test]
    fn memfd_is_sealed() {
        let src = SendfileSource::new(b"abc").unwrap();
        let mut f = File::from(src.memfd().try_clone_to_owned().unwrap());
        let e = f.write_all(b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        assert!(SendfileSource::new(b"").is_err());
    }

    #[test]
    fn sendfile_to_non_socket_fails_with_context() {
        let src = SendfileSource::new(b"abc").unwrap();
        let e = src.send(src.memfd(), 3).unwrap_err();
        assert!(
            e.to_string().starts_with("sendfile(3 bytes from memfd "),
            "{e}"
        );
    }

    #[test]
    fn msg_zerocopy_sends_and_reaps() {
        let pat = pattern(128 * 1024);
        let (client, server) = tcp_pair();
        let mut zc = ZeroCopySender::new(client.as_fd()).unwrap();
        let total = 256 * pat.len();
        let r = reader(server, pat.clone(), total);
        let mut sent = 0;
        while sent < total {
            let off = sent % pat.len();
            sent += zc.send(client.as_fd(), &pat[off..]).unwrap();
        }
        assert_eq!(r.join().unwrap(), total);
        assert!(zc.flush(client.as_fd(), Duration::from_secs(5)).unwrap());
        assert_eq!(zc.completions(), zc.sends());
        assert!(zc.notifications() >= 1 && zc.notifications() <= zc.sends());
        // Loopback delivery always falls back to copying.
        assert!(zc.copied_fallbacks() > 0, "{zc:?}");
    }

    #[test]
    fn msg_zerocopy_rejected_on_unix_socket_stream() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = ZeroCopySender::new(a.as_fd()).unwrap_err();
        assert!(e.to_string().contains("SO_ZEROCOPY=1"), "{e}");
    }

    #[test]
    fn splice_sends_the_repeating_pattern() {
        let pat = pattern(100_000); // not a multiple of the page size
        let mut src = SpliceSource::new(&pat).unwrap();
        let (client, server) = tcp_pair();
        let total = 50 * pat.len() + 12345;
        let r = reader(server, pat.clone(), total);
        let mut sent = 0;
        while sent < total {
            // Odd request sizes exercise partially drained work pipes.
            sent += src
                .send(client.as_fd(), (total - sent).min(70_001))
                .unwrap();
        }
        assert_eq!(sent, total);
        assert_eq!(r.join().unwrap(), total);
    }
}
