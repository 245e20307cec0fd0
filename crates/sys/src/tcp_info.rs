//! `getsockopt(TCP_INFO)`: the kernel's per-connection TCP statistics.
//!
//! The raw `struct tcp_info` (include/uapi/linux/tcp.h) has grown over the
//! years by appending fields. We pass the kernel a buffer laid out as the
//! Linux 6.7+ struct; an older kernel fills only the prefix it knows and
//! reports that length. [`tcp_info`] converts the raw struct into the safe
//! [`TcpInfo`], where every field appended after the original (Linux 2.6)
//! layout is an `Option` that is `None` when the kernel did not fill it.
//! Times are converted to explicit units in the field names.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error::{Result, SysError};
use crate::sockopt::{Pod, get_raw};

/// `struct tcp_info` as of Linux 6.7 (include/uapi/linux/tcp.h).
///
/// Byte offsets (all fields naturally aligned, so there is no padding):
///
/// | offset | fields |
/// |-------:|--------|
/// |   0 | 8 × u8: state, ca_state, retransmits, probes, backoff, options, wscale (snd:4, rcv:4), app_limited:1 + fastopen_client_fail:2 |
/// |   8 | 24 × u32: rto … total_retrans (ends at 104) |
/// | 104 | 4 × u64: pacing_rate, max_pacing_rate, bytes_acked, bytes_received |
/// | 136 | 6 × u32: segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out |
/// | 160 | 4 × u64: delivery_rate, busy_time, rwnd_limited, sndbuf_limited |
/// | 192 | 2 × u32: delivered, delivered_ce |
/// | 200 | 2 × u64: bytes_sent, bytes_retrans |
/// | 216 | 6 × u32: dsack_dups, reord_seen, rcv_ooopack, snd_wnd, rcv_wnd, rehash |
/// | 240 | 2 × u16: total_rto, total_rto_recoveries |
/// | 244 | u32: total_rto_time |
/// | 248 | end: `size_of::<RawTcpInfo>() == 248` |
///
/// Newer kernels may append more fields; they are simply not requested.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    /// `snd_wscale:4, rcv_wscale:4` bitfields.
    wscale: u8,
    /// `delivery_rate_app_limited:1, fastopen_client_fail:2` bitfields.
    app_limited_fastopen: u8,

    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,

    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,

    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,

    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,

    rcv_rtt: u32,
    rcv_space: u32,

    total_retrans: u32,

    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,

    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,

    delivery_rate: u64,

    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,

    delivered: u32,
    delivered_ce: u32,

    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,

    rcv_ooopack: u32,

    snd_wnd: u32,
    rcv_wnd: u32,

    rehash: u32,

    total_rto: u16,
    total_rto_recoveries: u16,
    total_rto_time: u32,
}

/// Size of the Linux 6.7+ `struct tcp_info`, computed by hand from the table
/// on [`RawTcpInfo`]: 8 + 24·4 + 4·8 + 6·4 + 4·8 + 2·4 + 2·8 + 6·4 + 2·2 + 4.
pub(crate) const RAW_TCP_INFO_SIZE: usize =
    8 + 24 * 4 + 4 * 8 + 6 * 4 + 4 * 8 + 2 * 4 + 2 * 8 + 6 * 4 + 2 * 2 + 4;

/// Length of the original (Linux 2.6) layout, up to and including
/// `tcpi_total_retrans`; every supported kernel fills at least this much.
const BASE_LEN: usize = offset_of!(RawTcpInfo, pacing_rate);

// The struct must have no padding, which `Pod` requires.
const _: () = assert!(size_of::<RawTcpInfo>() == RAW_TCP_INFO_SIZE);

// SAFETY: `RawTcpInfo` is `repr(C)` and made only of integers, with no padding
// (checked by the assertion above), so every bit pattern is a valid value.
unsafe impl Pod for RawTcpInfo {}

/// TCP connection statistics from `TCP_INFO`, in natural units.
///
/// Fields of the original Linux 2.6 layout are always present. Fields added
/// later are `None` when the running kernel is too old to report them (its
/// answer was shorter than the field's end). Counters are since the
/// connection started; `*_us` fields are microseconds, `*_ms` milliseconds,
/// rates are bytes per second, windows and byte counts are bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Number of bytes of `struct tcp_info` the kernel filled.
    pub kernel_len: usize,
    /// TCP state (`TCP_ESTABLISHED` = 1, … as in `libc::TCP_*` states).
    pub state: u8,
    /// Congestion-avoidance state (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u8,
    /// Retransmissions of the current unacknowledged segment (RTO backoff count).
    pub retransmits: u8,
    /// Unanswered zero-window probes.
    pub probes: u8,
    /// Exponential backoff count of the retransmission timer.
    pub backoff: u8,
    /// Negotiated options bitmask (`TCPI_OPT_TIMESTAMPS` = 1, `SACK` = 2,
    /// `WSCALE` = 4, `ECN` = 8, …).
    pub options: u8,
    /// Send window scale shift (peer's advertised scale).
    pub snd_wscale: u8,
    /// Receive window scale shift (ours).
    pub rcv_wscale: u8,
    /// Whether the last delivery-rate sample was application-limited.
    pub delivery_rate_app_limited: bool,
    /// Retransmission timeout, µs.
    pub rto_us: u32,
    /// Delayed-ACK timeout, µs.
    pub ato_us: u32,
    /// Send MSS, bytes.
    pub snd_mss: u32,
    /// Receive MSS estimate, bytes.
    pub rcv_mss: u32,
    /// Segments sent but not yet acknowledged.
    pub unacked: u32,
    /// Segments SACKed by the receiver.
    pub sacked: u32,
    /// Segments considered lost.
    pub lost: u32,
    /// Segments currently retransmitted and not yet acknowledged.
    pub retrans: u32,
    /// Time since the last data was sent, ms.
    pub last_data_sent_ms: u32,
    /// Time since the last data was received, ms.
    pub last_data_recv_ms: u32,
    /// Time since the last ACK was received, ms.
    pub last_ack_recv_ms: u32,
    /// Path MTU, bytes.
    pub pmtu: u32,
    /// Receive slow-start threshold, bytes (caps the advertised window growth).
    pub rcv_ssthresh: u32,
    /// Smoothed round-trip time, µs.
    pub rtt_us: u32,
    /// Round-trip time variance, µs.
    pub rttvar_us: u32,
    /// Slow-start threshold, segments (`0x7fffffff` = infinite).
    pub snd_ssthresh: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Advertised MSS, bytes.
    pub advmss: u32,
    /// Reordering metric, segments.
    pub reordering: u32,
    /// Receiver-side RTT estimate, µs.
    pub rcv_rtt_us: u32,
    /// Receive-buffer autotuning space, bytes.
    pub rcv_space: u32,
    /// Total segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Current pacing rate, bytes/s (Linux 3.15).
    pub pacing_rate: Option<u64>,
    /// Pacing rate cap, bytes/s; `u64::MAX` = unlimited (Linux 3.15).
    pub max_pacing_rate: Option<u64>,
    /// Bytes acknowledged by the peer (Linux 4.1).
    pub bytes_acked: Option<u64>,
    /// Bytes received in order (Linux 4.1).
    pub bytes_received: Option<u64>,
    /// Segments sent, including retransmissions and pure ACKs (Linux 4.2).
    pub segs_out: Option<u32>,
    /// Segments received (Linux 4.2).
    pub segs_in: Option<u32>,
    /// Bytes written by the application but not yet sent (Linux 4.6).
    pub notsent_bytes: Option<u32>,
    /// Minimum RTT seen over the recent window, µs (Linux 4.6).
    pub min_rtt_us: Option<u32>,
    /// Data segments received (Linux 4.6).
    pub data_segs_in: Option<u32>,
    /// Data segments sent, including retransmissions (Linux 4.6).
    pub data_segs_out: Option<u32>,
    /// Most recent delivery-rate sample, bytes/s (Linux 4.9).
    pub delivery_rate: Option<u64>,
    /// Time with data in flight, µs (Linux 4.10).
    pub busy_time_us: Option<u64>,
    /// Time limited by the peer's receive window, µs (Linux 4.10).
    pub rwnd_limited_us: Option<u64>,
    /// Time limited by our send buffer, µs (Linux 4.10).
    pub sndbuf_limited_us: Option<u64>,
    /// Segments delivered, including retransmissions (Linux 4.18).
    pub delivered: Option<u32>,
    /// Segments delivered with ECN CE marks (Linux 4.18).
    pub delivered_ce: Option<u32>,
    /// Bytes sent, including retransmissions (Linux 4.19).
    pub bytes_sent: Option<u64>,
    /// Bytes retransmitted (Linux 4.19).
    pub bytes_retrans: Option<u64>,
    /// Duplicate segments reported by DSACK (Linux 4.19).
    pub dsack_dups: Option<u32>,
    /// Reordering events seen (Linux 4.19).
    pub reord_seen: Option<u32>,
    /// Out-of-order packets received (Linux 5.4).
    pub rcv_ooopack: Option<u32>,
    /// Peer's advertised receive window after scaling, bytes (Linux 5.4).
    pub snd_wnd: Option<u32>,
    /// Our advertised receive window after scaling, bytes (Linux 6.2).
    pub rcv_wnd: Option<u32>,
    /// Rehash attempts triggered by PLB or timeouts (Linux 6.2).
    pub rehash: Option<u32>,
    /// RTO timeouts, including SYN/SYN-ACK and recurring ones (Linux 6.7).
    pub total_rto: Option<u16>,
    /// RTO recoveries, including an unfinished one (Linux 6.7).
    pub total_rto_recoveries: Option<u16>,
    /// Time spent in RTO recoveries, ms (Linux 6.7).
    pub total_rto_time: Option<u32>,
}

/// Reads `TCP_INFO` for a TCP socket.
///
/// Fails with `ENOPROTOOPT`/`EOPNOTSUPP` on non-TCP sockets, and with
/// `InvalidData` if the kernel filled less than the original Linux 2.6 layout.
pub fn tcp_info(fd: BorrowedFd<'_>) -> Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let describe = || format!("getsockopt(TCP_INFO) on fd {}", fd.as_raw_fd());
    let len = get_raw(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut raw, describe)?;
    if len < BASE_LEN {
        return Err(SysError::new(
            describe(),
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("kernel returned {len} bytes, expected at least {BASE_LEN}"),
            ),
        ));
    }
    Ok(TcpInfo::from_raw(&raw, len))
}

impl TcpInfo {
    /// Converts a raw struct of which the kernel filled the first `len` bytes.
    fn from_raw(r: &RawTcpInfo, len: usize) -> TcpInfo {
        // `Some(value)` if the field lies entirely within the filled prefix.
        macro_rules! opt {
            ($field:ident) => {{
                let end = offset_of!(RawTcpInfo, $field) + size_of_val(&r.$field);
                (end <= len).then_some(r.$field)
            }};
        }
        // Bit order of C bitfields within a byte follows the byte order.
        #[cfg(target_endian = "little")]
        let (snd_wscale, rcv_wscale, app_limited) = (
            r.wscale & 0x0f,
            r.wscale >> 4,
            r.app_limited_fastopen & 0x01 != 0,
        );
        #[cfg(target_endian = "big")]
        let (snd_wscale, rcv_wscale, app_limited) = (
            r.wscale >> 4,
            r.wscale & 0x0f,
            r.app_limited_fastopen & 0x80 != 0,
        );
        TcpInfo {
            kernel_len: len,
            state: r.state,
            ca_state: r.ca_state,
            retransmits: r.retransmits,
            probes: r.probes,
            backoff: r.backoff,
            options: r.options,
            snd_wscale,
            rcv_wscale,
            delivery_rate_app_limited: app_limited,
            rto_us: r.rto,
            ato_us: r.ato,
            snd_mss: r.snd_mss,
            rcv_mss: r.rcv_mss,
            unacked: r.unacked,
            sacked: r.sacked,
            lost: r.lost,
            retrans: r.retrans,
            last_data_sent_ms: r.last_data_sent,
            last_data_recv_ms: r.last_data_recv,
            last_ack_recv_ms: r.last_ack_recv,
            pmtu: r.pmtu,
            rcv_ssthresh: r.rcv_ssthresh,
            rtt_us: r.rtt,
            rttvar_us: r.rttvar,
            snd_ssthresh: r.snd_ssthresh,
            snd_cwnd: r.snd_cwnd,
            advmss: r.advmss,
            reordering: r.reordering,
            rcv_rtt_us: r.rcv_rtt,
            rcv_space: r.rcv_space,
            total_retrans: r.total_retrans,
            pacing_rate: opt!(pacing_rate),
            max_pacing_rate: opt!(max_pacing_rate),
            bytes_acked: opt!(bytes_acked),
            bytes_received: opt!(bytes_received),
            segs_out: opt!(segs_out),
            segs_in: opt!(segs_in),
            notsent_bytes: opt!(notsent_bytes),
            min_rtt_us: opt!(min_rtt),
            data_segs_in: opt!(data_segs_in),
            data_segs_out: opt!(data_segs_out),
            delivery_rate: opt!(delivery_rate),
            busy_time_us: opt!(busy_time),
            rwnd_limited_us: opt!(rwnd_limited),
            sndbuf_limited_us: opt!(sndbuf_limited),
            delivered: opt!(delivered),
            delivered_ce: opt!(delivered_ce),
            bytes_sent: opt!(bytes_sent),
            bytes_retrans: opt!(bytes_retrans),
            dsack_dups: opt!(dsack_dups),
            reord_seen: opt!(reord_seen),
            rcv_ooopack: opt!(rcv_ooopack),
            snd_wnd: opt!(snd_wnd),
            rcv_wnd: opt!(rcv_wnd),
            rehash: opt!(rehash),
            total_rto: opt!(total_rto),
            total_rto_recoveries: opt!(total_rto_recoveries),
            total_rto_time: opt!(total_rto_time),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::tests::tcp_pair;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn layout_matches_linux_6_7() {
        assert_eq!(size_of::<RawTcpInfo>(), 248);
        assert_eq!(RAW_TCP_INFO_SIZE, 248);
        assert_eq!(offset_of!(RawTcpInfo, rto), 8);
        assert_eq!(offset_of!(RawTcpInfo, last_data_sent), 44);
        assert_eq!(offset_of!(RawTcpInfo, pmtu), 60);
        assert_eq!(offset_of!(RawTcpInfo, rtt), 68);
        assert_eq!(offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(BASE_LEN, 104);
        assert_eq!(offset_of!(RawTcpInfo, bytes_acked), 120);
        assert_eq!(offset_of!(RawTcpInfo, segs_out), 136);
        assert_eq!(offset_of!(RawTcpInfo, min_rtt), 148);
        assert_eq!(offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(offset_of!(RawTcpInfo, busy_time), 168);
        assert_eq!(offset_of!(RawTcpInfo, delivered), 192);
        assert_eq!(offset_of!(RawTcpInfo, bytes_sent), 200);
        assert_eq!(offset_of!(RawTcpInfo, dsack_dups), 216);
        assert_eq!(offset_of!(RawTcpInfo, snd_wnd), 228);
        assert_eq!(offset_of!(RawTcpInfo, rcv_wnd), 232);
        assert_eq!(offset_of!(RawTcpInfo, rehash), 236);
        assert_eq!(offset_of!(RawTcpInfo, total_rto), 240);
        assert_eq!(offset_of!(RawTcpInfo, total_rto_recoveries), 242);
        assert_eq!(offset_of!(RawTcpInfo, total_rto_time), 244);
    }

    #[test]
    fn short_answer_marks_newer_fields_absent() {
        let raw = RawTcpInfo {
            snd_mss: 1448,
            pacing_rate: 7,
            bytes_acked: 9,
            wscale: 0x79,
            app_limited_fastopen: 0x01,
            ..RawTcpInfo::default()
        };
        // A Linux 4.0 answer: base layout + pacing_rate + max_pacing_rate.
        let info = TcpInfo::from_raw(&raw, 120);
        assert_eq!(info.snd_mss, 1448);
        assert_eq!(info.pacing_rate, Some(7));
        assert_eq!(info.max_pacing_rate, Some(0));
        assert_eq!(info.bytes_acked, None);
        assert_eq!(info.total_rto_time, None);
        if cfg!(target_endian = "little") {
            assert_eq!((info.snd_wscale, info.rcv_wscale), (9, 7));
            assert!(info.delivery_rate_app_limited);
        }
        // A field cut in half by the length is absent too.
        let info = TcpInfo::from_raw(&raw, 124);
        assert_eq!(info.bytes_acked, None);
        let info = TcpInfo::from_raw(&raw, 248);
        assert_eq!(info.bytes_acked, Some(9));
        assert_eq!(info.total_rto_time, Some(0));
    }

    #[test]
    fn loopback_transfer_is_reported() {
        let (mut client, mut server) = tcp_pair();
        const TOTAL: usize = 8 << 20;
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 128 * 1024];
            let mut got = 0;
            while got < TOTAL {
                let n = server.read(&mut buf).unwrap();
                assert!(n > 0);
                got += n;
            }
            let info = tcp_info(server.as_fd()).unwrap();
            (got, info, server)
        });
        let chunk = vec![0x5au8; 64 * 1024];
        for _ in 0..TOTAL / chunk.len() {
            client.write_all(&chunk).unwrap();
        }
        let (got, rinfo, _server) = reader.join().unwrap();
        assert_eq!(got, TOTAL);
        let info = tcp_info(client.as_fd()).unwrap();
        assert_eq!(info.kernel_len, 248, "{info:?}");
        assert_eq!(info.state, 1, "TCP_ESTABLISHED");
        assert!(info.snd_mss > 0);
        assert!(info.rtt_us > 0);
        assert!(info.bytes_acked.unwrap() > 0);
        assert!(info.bytes_sent.unwrap() >= TOTAL as u64);
        assert!(info.min_rtt_us.is_some());
        assert!(info.snd_cwnd > 0);
        assert!(info.total_rto.is_some());
        assert_eq!(rinfo.bytes_received, Some(TOTAL as u64));
        assert!(rinfo.rcv_wnd.unwrap() > 0);
    }

    #[test]
    fn kernel_struct_is_at_least_as_long_as_ours() {
        // Ask with a larger buffer to learn the running kernel's struct size.
        let (c, _s) = tcp_pair();
        let mut big = [0u8; 512];
        let len = get_raw(
            c.as_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut big,
            String::new,
        )
        .unwrap();
        assert!(len >= RAW_TCP_INFO_SIZE, "kernel tcp_info is {len} bytes");
    }

    #[test]
    fn non_tcp_socket_fails() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = tcp_info(u.as_fd()).unwrap_err();
        assert!(
            e.to_string().starts_with("getsockopt(TCP_INFO) on fd "),
            "{e}"
        );
    }
}
