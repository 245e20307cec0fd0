//! Socket options the tool tunes: buffer sizes, congestion control, pacing,
//! `TCP_NOTSENT_LOWAT`, and reading the MSS.
//!
//! Each function is one `setsockopt(2)`/`getsockopt(2)` call on a borrowed
//! file descriptor; nothing is retried or adjusted behind the caller's back,
//! except for the documented clamping of buffer sizes and the `u32` fallback
//! of [`set_max_pacing_rate`] on kernels older than 4.20.

use std::ffi::c_int;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error::{Result, SysError};

/// Largest value [`set_send_buffer`] and [`set_recv_buffer`] pass to the
/// kernel: `i32::MAX / 2` bytes (just under 1 GiB).
///
/// The option takes a C `int`, and the kernel itself caps the request at
/// `INT_MAX / 2` before doubling it (the doubled value leaves room for its
/// bookkeeping overhead), so the largest buffer a socket can get is
/// `2 * MAX_BUFFER_REQUEST` bytes. Larger requests are clamped to this value.
pub const MAX_BUFFER_REQUEST: u64 = (i32::MAX / 2) as u64;

/// Longest congestion-control name the kernel accepts (`TCP_CA_NAME_MAX - 1`).
pub const MAX_CONGESTION_NAME: usize = 15;

/// Types that any byte pattern written by the kernel leaves valid, and that
/// contain no padding the kernel could read uninitialised.
///
/// # Safety
/// Implementors must be plain old data: every bit pattern is a valid value.
pub(crate) unsafe trait Pod: Copy {}

// SAFETY: a C int is valid for every bit pattern and has no padding.
unsafe impl Pod for c_int {}
// SAFETY: u32 is valid for every bit pattern and has no padding.
unsafe impl Pod for u32 {}
// SAFETY: u64 is valid for every bit pattern and has no padding.
unsafe impl Pod for u64 {}
// SAFETY: a byte array is valid for every bit pattern and has no padding.
unsafe impl<const N: usize> Pod for [u8; N] {}

/// `setsockopt(fd, level, name, value, size_of::<T>())`; `describe` is called
/// only on failure to build the call's description.
pub(crate) fn set_raw<T: Pod>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    value: &T,
    describe: impl FnOnce() -> String,
) -> Result<()> {
    set_bytes_raw(fd, level, name, pod_bytes(value), describe)
}

/// The bytes of a plain-old-data value.
fn pod_bytes<T: Pod>(value: &T) -> &[u8] {
    // SAFETY: `T: Pod` has no padding, so all `size_of::<T>()` bytes behind the
    // reference are initialised; the slice borrows `value` for its lifetime.
    unsafe { std::slice::from_raw_parts((value as *const T).cast::<u8>(), size_of::<T>()) }
}

/// `setsockopt(fd, level, name, bytes.as_ptr(), bytes.len())`.
pub(crate) fn set_bytes_raw(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    bytes: &[u8],
    describe: impl FnOnce() -> String,
) -> Result<()> {
    let Ok(len) = libc::socklen_t::try_from(bytes.len()) else {
        return Err(SysError::new(
            describe(),
            io::Error::new(io::ErrorKind::InvalidInput, "option value too long"),
        ));
    };
    // SAFETY: `fd` is a live descriptor for the duration of the borrow; the
    // pointer and length describe the readable slice `bytes`, which the kernel
    // only reads.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            bytes.as_ptr().cast::<libc::c_void>(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(SysError::last_os_error(describe))
    }
}

/// `getsockopt(fd, level, name, out, size_of::<T>())`; returns the length the
/// kernel reported (it may be shorter than `T`; the rest of `out` is left as
/// it was).
pub(crate) fn get_raw<T: Pod>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    out: &mut T,
    describe: impl FnOnce() -> String,
) -> Result<usize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `fd` is live for the borrow; `out` is a valid, writable `T` of
    // `len` bytes, and any bytes the kernel writes form a valid `T` because
    // `T: Pod`. `len` is a valid writable socklen_t.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (out as *mut T).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(len as usize)
    } else {
        Err(SysError::last_os_error(describe))
    }
}

/// Reads an `int`-valued option.
fn get_int(fd: BorrowedFd<'_>, level: c_int, name: c_int, label: &str) -> Result<c_int> {
    let mut v: c_int = 0;
    get_raw(fd, level, name, &mut v, || {
        format!("getsockopt({label}) on fd {}", fd.as_raw_fd())
    })?;
    Ok(v)
}

fn set_buffer(
    fd: BorrowedFd<'_>,
    bytes: u64,
    force: bool,
    (plain, plain_name): (c_int, &str),
    (forced, forced_name): (c_int, &str),
) -> Result<()> {
    let (name, label) = if force {
        (forced, forced_name)
    } else {
        (plain, plain_name)
    };
    let clamped = bytes.min(MAX_BUFFER_REQUEST);
    // Cannot fail: clamped to i32::MAX / 2.
    let val = c_int::try_from(clamped).unwrap_or(c_int::MAX / 2);
    set_raw(fd, libc::SOL_SOCKET, name, &val, || {
        if clamped == bytes {
            format!("setsockopt({label}={val}) on fd {}", fd.as_raw_fd())
        } else {
            format!(
                "setsockopt({label}={val}, clamped from {bytes}) on fd {}",
                fd.as_raw_fd()
            )
        }
    })
}

/// Requests a send buffer of `bytes` (`SO_SNDBUF`, or `SO_SNDBUFFORCE` when
/// `force`).
///
/// Without `force` the kernel silently caps the request at
/// `net.core.wmem_max`; `SO_SNDBUFFORCE` bypasses that cap but needs
/// `CAP_NET_ADMIN` (otherwise the call fails with `EPERM`, see
/// [`crate::has_net_admin`]). Requests above [`MAX_BUFFER_REQUEST`] are clamped
/// to it. The kernel then *doubles* the value to account for bookkeeping
/// overhead; [`send_buffer`] reports the doubled figure. Setting the size also
/// disables the kernel's send-buffer autotuning for this socket.
pub fn set_send_buffer(fd: BorrowedFd<'_>, bytes: u64, force: bool) -> Result<()> {
    set_buffer(
        fd,
        bytes,
        force,
        (libc::SO_SNDBUF, "SO_SNDBUF"),
        (libc::SO_SNDBUFFORCE, "SO_SNDBUFFORCE"),
    )
}

/// Requests a receive buffer of `bytes` (`SO_RCVBUF`, or `SO_RCVBUFFORCE` when
/// `force`).
///
/// Same rules as [`set_send_buffer`], with `net.core.rmem_max` as the
/// unprivileged cap. Setting the size disables receive-buffer autotuning for
/// this socket, and for the window scale to be large enough it must be set
/// before `listen(2)`/`connect(2)`.
pub fn set_recv_buffer(fd: BorrowedFd<'_>, bytes: u64, force: bool) -> Result<()> {
    set_buffer(
        fd,
        bytes,
        force,
        (libc::SO_RCVBUF, "SO_RCVBUF"),
        (libc::SO_RCVBUFFORCE, "SO_RCVBUFFORCE"),
    )
}

/// The socket's send buffer size as the kernel reports it (`SO_SNDBUF`; this is
/// the doubled value, or the autotuned size if never set).
pub fn send_buffer(fd: BorrowedFd<'_>) -> Result<u64> {
    let v = get_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF")?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// The socket's receive buffer size as the kernel reports it (`SO_RCVBUF`;
/// this is the doubled value, or the autotuned size if never set).
pub fn recv_buffer(fd: BorrowedFd<'_>) -> Result<u64> {
    let v = get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, "SO_RCVBUF")?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// The receive window's upper bound (`TCP_WINDOW_CLAMP`), bytes. Linux 6.x
/// keeps it at the share of the receive buffer that becomes window
/// (`tcp_win_from_space`), recomputed whenever the connection's measured
/// payload-to-memory ratio changes, unless something smaller was set.
pub fn window_clamp(fd: BorrowedFd<'_>) -> Result<u64> {
    let v = get_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_WINDOW_CLAMP,
        "TCP_WINDOW_CLAMP",
    )?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// Sets `TCP_WINDOW_CLAMP`: the receive window never grows beyond `bytes`
/// (Linux raises values below half the minimum receive buffer to that).
pub fn set_window_clamp(fd: BorrowedFd<'_>, bytes: u64) -> Result<()> {
    let v = i32::try_from(bytes).unwrap_or(i32::MAX);
    set_raw(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, &v, || {
        format!("setsockopt(TCP_WINDOW_CLAMP={v}) on fd {}", fd.as_raw_fd())
    })
}

/// Selects the congestion-control algorithm (`TCP_CONGESTION`), e.g. `"bbr"`.
///
/// Fails with `ENOENT` if the algorithm is not available (module not loaded,
/// see `net.ipv4.tcp_available_congestion_control`) and with `EPERM` if it is
/// available but not in `net.ipv4.tcp_allowed_congestion_control` and the
/// process lacks `CAP_NET_ADMIN`. Names that are empty, longer than
/// [`MAX_CONGESTION_NAME`] bytes or contain NUL are rejected with
/// `InvalidInput` before any call (the kernel would silently truncate them).
pub fn set_congestion(fd: BorrowedFd<'_>, name: &str) -> Result<()> {
    let describe = || {
        format!(
            "setsockopt(TCP_CONGESTION={name:?}) on fd {}",
            fd.as_raw_fd()
        )
    };
    if name.is_empty() || name.len() > MAX_CONGESTION_NAME || name.contains('\0') {
        return Err(SysError::new(
            describe(),
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "congestion control name must be 1..={MAX_CONGESTION_NAME} bytes without NUL"
                ),
            ),
        ));
    }
    set_bytes_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        name.as_bytes(),
        describe,
    )
}

/// The congestion-control algorithm the kernel actually applied
/// (`TCP_CONGESTION`), with trailing NULs removed.
pub fn congestion(fd: BorrowedFd<'_>) -> Result<String> {
    let mut buf = [0u8; MAX_CONGESTION_NAME + 1];
    let len = get_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        &mut buf,
        || format!("getsockopt(TCP_CONGESTION) on fd {}", fd.as_raw_fd()),
    )?;
    let bytes = &buf[..len.min(buf.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// Caps the socket's pacing rate at `bytes_per_sec` (`SO_MAX_PACING_RATE`);
/// `u64::MAX` means unlimited (the default).
///
/// The 64-bit form needs Linux 4.20; if the kernel rejects it with `EINVAL`
/// the call is repeated with a 32-bit value, saturated at `u32::MAX` (which
/// older kernels treat as unlimited). The cap is enforced by TCP's internal
/// pacing or by the `fq` qdisc.
pub fn set_max_pacing_rate(fd: BorrowedFd<'_>, bytes_per_sec: u64) -> Result<()> {
    let describe = |width: &str| {
        format!(
            "setsockopt(SO_MAX_PACING_RATE={bytes_per_sec}{width}) on fd {}",
            fd.as_raw_fd()
        )
    };
    match set_raw(
        fd,
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &bytes_per_sec,
        || describe(""),
    ) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let narrow = u32::try_from(bytes_per_sec).unwrap_or(u32::MAX);
            set_raw(
                fd,
                libc::SOL_SOCKET,
                libc::SO_MAX_PACING_RATE,
                &narrow,
                || describe(" as u32"),
            )
        }
        other => other,
    }
}

/// The socket's pacing-rate cap in bytes per second (`SO_MAX_PACING_RATE`);
/// `u64::MAX` means unlimited.
pub fn max_pacing_rate(fd: BorrowedFd<'_>) -> Result<u64> {
    let mut buf = [0u8; 8];
    let len = get_raw(
        fd,
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &mut buf,
        || format!("getsockopt(SO_MAX_PACING_RATE) on fd {}", fd.as_raw_fd()),
    )?;
    if len >= 8 {
        return Ok(u64::from_ne_bytes(buf));
    }
    // Kernels before 4.20 answer with a 32-bit value where ~0 means unlimited.
    let mut narrow = [0u8; 4];
    narrow.copy_from_slice(&buf[..4]);
    Ok(match u32::from_ne_bytes(narrow) {
        u32::MAX => u64::MAX,
        v => u64::from(v),
    })
}

/// Sets `TCP_NOTSENT_LOWAT`: the socket reports writable only while less than
/// `bytes` of written data is still unsent, which bounds the data queued in
/// the kernel beyond what the congestion window can use.
pub fn set_notsent_lowat(fd: BorrowedFd<'_>, bytes: u32) -> Result<()> {
    set_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        &bytes,
        || {
            format!(
                "setsockopt(TCP_NOTSENT_LOWAT={bytes}) on fd {}",
                fd.as_raw_fd()
            )
        },
    )
}

/// The current `TCP_NOTSENT_LOWAT` (`u32::MAX` when unset and the sysctl
/// `net.ipv4.tcp_notsent_lowat` is at its default).
pub fn notsent_lowat(fd: BorrowedFd<'_>) -> Result<u32> {
    let mut v: u32 = 0;
    get_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_NOTSENT_LOWAT,
        &mut v,
        || format!("getsockopt(TCP_NOTSENT_LOWAT) on fd {}", fd.as_raw_fd()),
    )?;
    Ok(v)
}

/// The connection's maximum segment size (`TCP_MAXSEG`): on a connected
/// socket the current send MSS, before connecting the user-set clamp or the
/// default (536).
pub fn mss(fd: BorrowedFd<'_>) -> Result<u32> {
    let v = get_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, "TCP_MAXSEG")?;
    Ok(u32::try_from(v).unwrap_or(0))
}

/// Sets path-MTU discovery to "do" (`IP_PMTUDISC_DO`; on an IPv6 socket `IPV6_PMTUDISC_DO`, and
/// the IPv4 option too for the IPv4-mapped peers of a dual-stack socket): every datagram carries
/// DF and is never fragmented, one larger than the path's MTU fails with `EMSGSIZE`.
pub fn set_dont_fragment(fd: BorrowedFd<'_>, v6: bool) -> Result<()> {
    let v4: c_int = libc::IP_PMTUDISC_DO;
    let set_v4 = set_raw(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, &v4, || {
        format!("setsockopt(IP_MTU_DISCOVER) on fd {}", fd.as_raw_fd())
    });
    if !v6 {
        return set_v4;
    }
    let v: c_int = libc::IPV6_PMTUDISC_DO;
    set_raw(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, &v, || {
        format!("setsockopt(IPV6_MTU_DISCOVER) on fd {}", fd.as_raw_fd())
    })
}

/// Whether path-MTU discovery is "do" (see [`set_dont_fragment`]).
pub fn dont_fragment(fd: BorrowedFd<'_>, v6: bool) -> Result<bool> {
    if v6 {
        let v = get_int(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            "IPV6_MTU_DISCOVER",
        )?;
        return Ok(v == libc::IPV6_PMTUDISC_DO);
    }
    let v = get_int(
        fd,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        "IP_MTU_DISCOVER",
    )?;
    Ok(v == libc::IP_PMTUDISC_DO)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::fd::AsFd;

    /// A connected loopback TCP pair: (client, server side).
    pub(crate) fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn buffers_are_doubled_and_clamped_to_sysctl() {
        let (c, _s) = tcp_pair();
        set_send_buffer(c.as_fd(), 64 * 1024, false).unwrap();
        assert_eq!(send_buffer(c.as_fd()).unwrap(), 128 * 1024);
        set_recv_buffer(c.as_fd(), 96 * 1024, false).unwrap();
        assert_eq!(recv_buffer(c.as_fd()).unwrap(), 192 * 1024);

        // Unforced requests are capped at net.core.wmem_max, then doubled.
        let wmem_max: u64 = crate::read_sysctl("net.core.wmem_max")
            .unwrap()
            .parse()
            .unwrap();
        set_send_buffer(c.as_fd(), u64::MAX, false).unwrap();
        let got = send_buffer(c.as_fd()).unwrap();
        assert_eq!(got, 2 * wmem_max.min(MAX_BUFFER_REQUEST));
    }

    #[test]
    fn forced_buffer_bypasses_sysctl_or_fails_with_eperm() {
        let (c, _s) = tcp_pair();
        let want = 64 * 1024 * 1024;
        match set_recv_buffer(c.as_fd(), want, true) {
            Ok(()) => assert_eq!(recv_buffer(c.as_fd()).unwrap(), 2 * want),
            Err(e) => {
                assert!(!crate::has_net_admin());
                assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
                assert!(e.to_string().contains("SO_RCVBUFFORCE=67108864"), "{e}");
            }
        }
        // Huge requests are clamped and the kernel caps the doubled size.
        if crate::has_net_admin() {
            set_send_buffer(c.as_fd(), u64::MAX, true).unwrap();
            assert_eq!(send_buffer(c.as_fd()).unwrap(), 2 * MAX_BUFFER_REQUEST);
        }
    }

    #[test]
    fn congestion_round_trip_and_errors() {
        let (c, _s) = tcp_pair();
        let current = congestion(c.as_fd()).unwrap();
        assert!(!current.is_empty() && !current.contains('\0'));
        set_congestion(c.as_fd(), "reno").unwrap();
        assert_eq!(congestion(c.as_fd()).unwrap(), "reno");

        let e = set_congestion(c.as_fd(), "no-such-cc").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
        assert!(
            e.to_string().contains("TCP_CONGESTION=\"no-such-cc\""),
            "{e}"
        );

        let e = set_congestion(c.as_fd(), "a-very-long-name-indeed").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn tcp_option_on_udp_socket_fails() {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = congestion(u.as_fd()).unwrap_err();
        // Linux 6.18 answers EOPNOTSUPP; older kernels ENOPROTOOPT.
        assert!(
            matches!(e.raw_os_error(), Some(libc::ENOPROTOOPT | libc::EOPNOTSUPP)),
            "{e}"
        );
        let raw = u.as_raw_fd();
        assert_eq!(
            e.call(),
            format!("getsockopt(TCP_CONGESTION) on fd {raw}"),
            "{e}"
        );
    }

    #[test]
    fn pacing_rate_round_trip() {
        let (c, _s) = tcp_pair();
        assert_eq!(max_pacing_rate(c.as_fd()).unwrap(), u64::MAX);
        // Above 4 GB/s, which needs the 64-bit form.
        let rate = 5_000_000_000u64;
        set_max_pacing_rate(c.as_fd(), rate).unwrap();
        assert_eq!(max_pacing_rate(c.as_fd()).unwrap(), rate);
        set_max_pacing_rate(c.as_fd(), u64::MAX).unwrap();
        assert_eq!(max_pacing_rate(c.as_fd()).unwrap(), u64::MAX);
    }

    #[test]
    fn notsent_lowat_and_mss() {
        let (c, _s) = tcp_pair();
        set_notsent_lowat(c.as_fd(), 128 * 1024).unwrap();
        assert_eq!(notsent_lowat(c.as_fd()).unwrap(), 128 * 1024);
        let mss = mss(c.as_fd()).unwrap();
        // Loopback MTU is 65536; MSS is 65483 or less with options.
        assert!(mss > 1000 && mss < 65536, "{mss}");
    }
}
