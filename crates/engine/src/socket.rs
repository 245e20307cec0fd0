//! Data-socket set-up: buffers from the window plan, congestion control, pacing; and reading back what
//! the kernel actually applied, so reports state facts rather than requests.

use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};

use longhaul_proto::interval::TcpSample;
use longhaul_proto::msg::{SidePlan, SocketFlags, SocketSetup};
use longhaul_proto::pacing::split_pacing;
use longhaul_proto::window::{self, BufferAction, BufferPlan, KernelLimits, WindowPlan};
use longhaul_proto::{TestParams, WindowRequest};
use longhaul_sys as sys;
use longhaul_units::Nanos;

use crate::EngineError;

/// What to apply to one data socket.
pub(crate) struct SocketOptions<'a> {
    pub(crate) plan: &'a WindowPlan,
    pub(crate) congestion: Option<&'a str>,
    /// `-M`, `-N`, `-S` and the like ([`apply_flags`]).
    pub(crate) flags: SocketFlags,
}

/// Applies the buffer that matters for this socket's role (send buffer on a sender, receive buffer on a
/// receiver), on a sender `TCP_NOTSENT_LOWAT` (`window::notsent_lowat`), and the congestion control. The client calls this before `connect` so that the window scale
/// negotiated in the handshake fits the receive buffer.
pub(crate) fn apply(
    fd: BorrowedFd<'_>,
    opts: &SocketOptions<'_>,
    sender: bool,
    stream: u32,
) -> Result<(), EngineError> {
    let buf = if sender {
        &opts.plan.send
    } else {
        &opts.plan.recv
    };
    apply_buffer(fd, buf).map_err(|e| annotate(e, stream))?;
    if sender {
        let lowat = window::notsent_lowat(opts.plan.target_rate_bps, opts.plan.streams);
        sys::set_notsent_lowat(fd, lowat).map_err(|e| annotate(e, stream))?;
    }
    if let Some(cc) = opts.congestion {
        sys::set_congestion(fd, cc).map_err(|e| annotate(e, stream))?;
    }
    apply_flags(fd, &opts.flags, stream)
}

/// Sets the user's socket flags on a data socket, TCP or UDP: the MSS and `TCP_NODELAY` on TCP,
/// DF on UDP, the TOS byte on both (on an IPv6 socket the traffic class, and the IPv4 TOS too for
/// the IPv4-mapped peers of a dual-stack server).
pub(crate) fn apply_flags(
    fd: BorrowedFd<'_>,
    flags: &SocketFlags,
    stream: u32,
) -> Result<(), EngineError> {
    let s = socket2::SockRef::from(&fd);
    let err = |what: String| move |e| EngineError::io(format!("stream {stream}: set {what}"), e);
    let tcp = s.r#type().map_err(err("the socket's type".into()))? == socket2::Type::STREAM;
    let v6 = s.domain().map_err(err("the socket's family".into()))? == socket2::Domain::IPV6;
    if tcp {
        if let Some(mss) = flags.mss {
            s.set_tcp_mss(mss)
                .map_err(err(format!("TCP_MAXSEG {mss}")))?;
        }
        if flags.nodelay {
            s.set_tcp_nodelay(true).map_err(err("TCP_NODELAY".into()))?;
        }
    } else if flags.dont_fragment {
        sys::set_dont_fragment(fd, v6).map_err(|e| annotate(e, stream))?;
    }
    if let Some(tos) = flags.tos {
        let what = format!("the TOS byte {tos:#04x}");
        if v6 {
            s.set_tclass_v6(u32::from(tos)).map_err(err(what.clone()))?;
            // IPv4-mapped peers take the IPv4 option; a v6-only socket may refuse it, harmlessly.
            let _ = s.set_tos_v4(u32::from(tos));
        } else {
            s.set_tos_v4(u32::from(tos)).map_err(err(what))?;
        }
    }
    Ok(())
}

/// The TOS byte (IPv6: traffic class) the kernel sets on a socket's packets, `TCP_NODELAY`, and
/// whether DF is forced on, read back.
pub(crate) fn read_flags(fd: BorrowedFd<'_>) -> (u8, bool, bool) {
    let s = socket2::SockRef::from(&fd);
    let v6 = s.domain().is_ok_and(|d| d == socket2::Domain::IPV6);
    // A dual-stack socket's IPv4-mapped peer gets the IPv4 TOS on its packets, not the class.
    let mapped = s
        .peer_addr()
        .ok()
        .and_then(|a| a.as_socket_ipv6())
        .is_some_and(|a| a.ip().to_ipv4_mapped().is_some());
    let tos = if v6 && !mapped {
        s.tclass_v6()
    } else {
        s.tos_v4()
    };
    let tcp = s.r#type().is_ok_and(|t| t == socket2::Type::STREAM);
    (
        tos.map_or(0, |t| t as u8),
        tcp && s.tcp_nodelay().unwrap_or(false),
        !tcp && sys::dont_fragment(fd, v6).unwrap_or(false),
    )
}

fn apply_buffer(fd: BorrowedFd<'_>, buf: &BufferPlan) -> Result<(), sys::SysError> {
    match buf.action {
        BufferAction::Autotune { .. } => Ok(()),
        BufferAction::Set { request, force } => match buf.kind {
            longhaul_proto::window::BufferKind::Send => sys::set_send_buffer(fd, request, force),
            longhaul_proto::window::BufferKind::Recv => sys::set_recv_buffer(fd, request, force),
        },
    }
}

fn annotate(e: sys::SysError, stream: u32) -> EngineError {
    EngineError::Io {
        what: format!("stream {stream}: {e}"),
        source: e.into_io(),
    }
}

/// Sets the per-stream pacing cap on a sending socket.
pub(crate) fn apply_pacing(fd: BorrowedFd<'_>, bytes_per_sec: u64) -> Result<(), EngineError> {
    Ok(sys::set_max_pacing_rate(fd, bytes_per_sec)?)
}

/// Holds a receiving socket's window at `window` bytes (a fixed `-w`), re-run while data flows.
///
/// The buffer size is not the window: Linux advertises only the share of the receive buffer that it
/// expects to hold payload, `tcp_win_from_space`, from a payload-to-memory ratio it measures on the
/// packets that arrive (Linux ≥ 6.6; older kernels used a fixed half). Measured on this project's VM
/// (kernel 6.18, cern-starlight at 500 Mbit/s): `SO_RCVBUF` of 2 MiB (4 MiB granted) advertised
/// 2,785,280 B, a ratio of 0.664, so `-w 2M` ran at 166 Mbit/s instead of 2 MiB ÷ 127 ms = 132. Nor
/// does `TCP_WINDOW_CLAMP` alone bound it: the kernel re-derives the clamp from the buffer whenever it
/// re-measures the ratio (166 Mbit/s with the clamp set before or after accept).
///
/// So whenever the clamp is not `window` (the kernel derived it), the ratio is read back as clamp ÷
/// buffer, the buffer is sized for `window` × [`WINDOW_HEADROOM`] at that ratio (room for data the
/// reader has not yet taken, which would otherwise shrink the window), and the clamp is set to
/// `window`, which is then the bound. A call that finds the clamp still at `window` does nothing.
pub(crate) fn hold_window(fd: BorrowedFd<'_>, window: u64) -> Result<(), sys::SysError> {
    let clamp = sys::window_clamp(fd)?;
    let buffer = sys::recv_buffer(fd)?;
    if clamp == window || clamp == 0 || buffer == 0 {
        return Ok(());
    }
    let target = (u128::from(window) * u128::from(buffer) * u128::from(WINDOW_HEADROOM.0)
        / (u128::from(clamp) * u128::from(WINDOW_HEADROOM.1))) as u64;
    // The kernel doubles the request; past rmem_max only a privileged process can ask for more, and
    // without privilege the window stays at what the buffer allows (the plan already said so).
    sys::set_recv_buffer(fd, target / 2, sys::has_net_admin())?;
    sys::set_window_clamp(fd, window)
}

/// Receive buffer beyond the held window, as a fraction (5/4: a quarter of the window).
pub(crate) const WINDOW_HEADROOM: (u64, u64) = (5, 4);

/// Reads back how the kernel set up `sock`.
pub(crate) fn describe(
    sock: &TcpStream,
    stream: u32,
    sender: bool,
    pacing: Option<u64>,
) -> SocketSetup {
    let fd = sock.as_fd();
    let (tos, nodelay, dont_fragment) = read_flags(fd);
    SocketSetup {
        tos,
        nodelay,
        dont_fragment,
        stream,
        sender,
        congestion: sys::congestion(fd).unwrap_or_else(|_| "?".into()),
        mss: sys::mss(fd).unwrap_or(0),
        sndbuf: sys::send_buffer(fd).unwrap_or(0),
        rcvbuf: sys::recv_buffer(fd).unwrap_or(0),
        pacing,
        local: sock.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        remote: sock.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
    }
}

/// This host's plan for a test: its buffers (from this kernel's limits) and the pacing split. Client and
/// server each plan their own side from the same parameters.
/// A note when this host's `net.ipv4.tcp_mem` puts TCP under memory pressure before the test's
/// buffers (`buffers` bytes over all its connections) are full, with the line that fixes it.
fn tcp_memory_note(buffers: u64) -> Option<String> {
    let page = longhaul_sys::tcp_memory::page_size();
    let now = longhaul_sys::TcpMem::read_in(std::path::Path::new(longhaul_sys::PROC_SYS)).ok()?;
    let v = longhaul_models::tuning::tcp_mem_for([now.min, now.pressure, now.max], page, buffers)?;
    Some(format!(
        "this test's buffers ({}) are more than the kernel lets TCP hold before memory pressure \
         (net.ipv4.tcp_mem \"{}\": {} pages of {page} bytes), where windows stop growing and \
         a long path's stream collapses; fix: {}",
        longhaul_units::fmt_size(buffers),
        now.value(),
        now.pressure,
        longhaul_models::tuning::tcp_mem_fix(v)
    ))
}

pub(crate) fn side_plan(params: &TestParams) -> SidePlan {
    let limits = kernel_limits();
    let fixed = match params.window {
        WindowRequest::Fixed { bytes } => Some(bytes),
        WindowRequest::Auto => None,
    };
    if let Some(udp) = &params.udp {
        return SidePlan {
            window: window::udp_plan(udp.rate_bps, params.streams, fixed, &limits),
            pacing_per_stream: Vec::new(),
            privileged: limits.privileged,
        };
    }
    // A paced test never goes faster than its pacing: its windows (and the data a sender may queue)
    // are sized for that rate.
    let rate = params
        .pace_total_bps
        .map_or(params.target_rate_bps, |p| p.min(params.target_rate_bps));
    let mut window = window::plan(Nanos(params.rtt_ns), rate, params.streams, fixed, &limits);
    if params.fast_start {
        window = longhaul_proto::fast_start::open_from_start(window, limits.privileged);
    }
    let buffers = window
        .wanted
        .saturating_mul(u64::from(params.direction.connections(params.streams)));
    window.notes.extend(tcp_memory_note(buffers));
    SidePlan {
        window,
        pacing_per_stream: params
            .pace_total_bps
            .map(|t| split_pacing(t, params.streams))
            .unwrap_or_default(),
        privileged: limits.privileged,
    }
}

/// The pacing cap (bytes/s) of data connection `index`, if this side sends on it and pacing is on.
pub(crate) fn pacing_for(plan: &SidePlan, index: u32, streams: u32, sender: bool) -> Option<u64> {
    if !sender {
        return None;
    }
    plan.pacing_per_stream
        .get((index % streams.max(1)) as usize)
        .copied()
}

/// This host's buffer limits and privilege.
pub(crate) fn kernel_limits() -> KernelLimits {
    let l = sys::NetLimits::read().ok();
    KernelLimits {
        rmem_max: l.as_ref().map_or(212_992, |l| l.rmem_max),
        wmem_max: l.as_ref().map_or(212_992, |l| l.wmem_max),
        tcp_rmem_max: l.as_ref().map_or(6 << 20, |l| l.tcp_rmem[2]),
        tcp_wmem_max: l.as_ref().map_or(4 << 20, |l| l.tcp_wmem[2]),
        privileged: sys::has_net_admin(),
    }
}

/// Checks that congestion control `name` is one this kernel already offers
/// (`net.ipv4.tcp_available_congestion_control`).
///
/// Names outside that list are refused, never probed: as root, `TCP_CONGESTION` with an unknown name
/// makes the kernel load the module `tcp_<name>`, and the name comes from the network (issue 11).
pub(crate) fn check_congestion(name: &str) -> Result<(), EngineError> {
    let available = sys::NetLimits::read()
        .map(|l| l.available_cc)
        .unwrap_or_default();
    if available.iter().any(|a| a == name) {
        return Ok(());
    }
    Err(EngineError::UnknownCongestion {
        name: name.to_string(),
        available: available.join(" "),
    })
}

/// A `TCP_INFO` snapshot in the pure crate's terms (`None` if the socket is gone).
pub(crate) fn tcp_sample(fd: BorrowedFd<'_>) -> Option<TcpSample> {
    let t = sys::tcp_info(fd).ok()?;
    Some(TcpSample {
        total_retrans: t.total_retrans,
        snd_cwnd: t.snd_cwnd,
        snd_mss: t.snd_mss,
        snd_wnd: t.snd_wnd,
        rtt_us: t.rtt_us,
        rttvar_us: t.rttvar_us,
        min_rtt_us: t.min_rtt_us,
        pmtu: t.pmtu,
        pacing_rate: t.pacing_rate,
        delivery_rate: t.delivery_rate,
        busy_us: t.busy_time_us,
        rwnd_limited_us: t.rwnd_limited_us,
        sndbuf_limited_us: t.sndbuf_limited_us,
        bytes_retrans: t.bytes_retrans,
    })
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use longhaul_proto::window::{BufferAction, assess, plan};
    use longhaul_units::Nanos;

    use super::*;

    /// The acceptance case of the window sizing on a real kernel socket: with this host's default caps
    /// (4 MiB rmem_max here) a receiver planning for a 10 Gbit/s stream 120 ms away asks for 2 × BDP and,
    /// as root, is granted it; the report says so.
    #[test]
    fn root_is_granted_two_bdp_for_a_120ms_path() {
        let limits = kernel_limits();
        if !longhaul_testkit::require(limits.privileged, "needs CAP_NET_ADMIN: run as root") {
            return;
        }
        let rtt = Nanos::from_millis(120);
        let p = plan(rtt, 10_000_000_000, 1, None, &limits);
        assert_eq!(p.bdp_per_stream, 150_000_000);
        assert!(matches!(
            p.recv.action,
            BufferAction::Set {
                request: 300_000_000,
                force: true
            }
        ));
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let opts = SocketOptions {
            plan: &p,
            congestion: None,
            flags: Default::default(),
        };
        apply(sock.as_fd(), &opts, false, 0).unwrap();
        let granted = sys::recv_buffer(sock.as_fd()).unwrap();
        let out = assess(&p, &p.recv, granted);
        println!("{}", out.summary);
        assert!(out.window >= 2 * p.bdp_per_stream, "{}", out.summary);
        assert!(!out.limited, "{}", out.summary);
        assert!(out.summary.contains("SO_RCVBUFFORCE"), "{}", out.summary);
        // The send side too.
        apply(sock.as_fd(), &opts, true, 0).unwrap();
        let out = assess(&p, &p.send, sys::send_buffer(sock.as_fd()).unwrap());
        assert!(out.window >= 2 * p.bdp_per_stream, "{}", out.summary);
    }

    /// On a real socket with data flowing: after `hold_window` the kernel's clamp is the window, and
    /// the buffer is what the kernel's own ratio (clamp ÷ buffer, read before) needs for that window
    /// plus the headroom. A second call with nothing re-measured changes nothing.
    #[test]
    fn hold_window_sizes_the_buffer_from_the_kernels_ratio() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        sys::set_recv_buffer(l.as_fd(), 1 << 20, false).unwrap();
        let mut tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let sender = std::thread::spawn(move || tx.write_all(&vec![7u8; 8 << 20]));
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0;
        while got < 4 << 20 {
            got += rx.read(&mut buf).unwrap();
        }
        let (clamp, buffer) = (
            sys::window_clamp(rx.as_fd()).unwrap(),
            sys::recv_buffer(rx.as_fd()).unwrap(),
        );
        let window = 256 * 1024;
        hold_window(rx.as_fd(), window).unwrap();
        assert_eq!(sys::window_clamp(rx.as_fd()).unwrap(), window);
        let sized = sys::recv_buffer(rx.as_fd()).unwrap();
        let wanted = window * buffer / clamp * WINDOW_HEADROOM.0 / WINDOW_HEADROOM.1;
        assert!(
            sized.abs_diff(wanted) <= wanted / 50,
            "buffer {sized} for a {window} window at ratio {clamp}/{buffer} (wanted {wanted})"
        );
        hold_window(rx.as_fd(), window).unwrap();
        assert_eq!(sys::recv_buffer(rx.as_fd()).unwrap(), sized);
        while rx.read(&mut buf).unwrap() > 0 {}
        sender.join().unwrap().unwrap();
    }
}
