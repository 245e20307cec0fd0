//! iperf3's protocol on real sockets (`longhaul_proto::iperf3` has its rules): [`client`] runs
//! `longhaul test` against a stock iperf3 server; the server's side, iperf3 clients served by
//! `longhaul server`, is `crate::server::iperf3`. Both run the test with the same stream workers
//! as longhaul's own protocol (`crate::run`), and share the I/O here: state bytes, JSON frames and
//! the results each side sends.

pub(crate) mod client;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use longhaul_proto::interval::{StreamTotals, UdpInterval, UdpTotals};
use longhaul_proto::iperf3::{self, Results, State, StreamResult, stream_id, stream_index};
use longhaul_proto::msg::CpuUse;
use longhaul_proto::{Direction, ProtoError, TestParams};

use crate::EngineError;
use crate::control::is_timeout;

/// The iperf3 version this side says it speaks (its JSON and states are 3.12's).
pub(crate) const IPERF3_VERSION: &str = "3.12";

/// Reads exactly `buf.len()` bytes by `deadline`; `what` names them in errors.
pub(crate) fn read_exact_by(
    mut sock: &TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    what: &str,
) -> Result<(), EngineError> {
    let mut got = 0;
    while got < buf.len() {
        let now = Instant::now();
        if now >= deadline {
            return Err(EngineError::Timeout(what.to_string()));
        }
        sock.set_read_timeout(Some(
            (deadline - now).max(std::time::Duration::from_millis(1)),
        ))
        .map_err(|e| EngineError::io("set a read timeout", e))?;
        match sock.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(EngineError::Closed(
                    sock.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                ));
            }
            Ok(n) => got += n,
            Err(e) if is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(EngineError::io(format!("read {what}"), e)),
        }
    }
    Ok(())
}

/// Sends one state byte.
pub(crate) fn write_state(mut sock: &TcpStream, s: State) -> Result<(), EngineError> {
    sock.write_all(&[s.byte()])
        .map_err(|e| EngineError::io("send an iperf3 state", e))
}

/// Reads one state byte by `deadline`. An unknown byte is a protocol error; a server's error
/// (its code and errno follow) or "busy" becomes the matching engine error.
pub(crate) fn read_state(
    sock: &TcpStream,
    deadline: Instant,
    what: &str,
) -> Result<State, EngineError> {
    let mut b = [0u8; 1];
    read_exact_by(sock, &mut b, deadline, what)?;
    match State::from_byte(b[0]) {
        Some(State::AccessDenied) => Err(EngineError::Peer(
            "the iperf3 server is busy running a test; try again later".into(),
        )),
        Some(State::ServerError) => {
            let mut codes = [0u8; 8];
            read_exact_by(sock, &mut codes, deadline, "the iperf3 server's error code")?;
            let code = u32::from_be_bytes(codes[..4].try_into().expect("4 bytes"));
            let errno = i32::from_be_bytes(codes[4..].try_into().expect("4 bytes"));
            Err(EngineError::Peer(format!(
                "the iperf3 server refused the test: {}{}",
                iperf3::error_text(code),
                if errno != 0 {
                    format!(" ({})", std::io::Error::from_raw_os_error(errno))
                } else {
                    String::new()
                }
            )))
        }
        Some(State::ServerTerminate) => Err(EngineError::Peer(
            "the iperf3 server ended the test (it was interrupted)".into(),
        )),
        Some(State::ClientTerminate) => Err(EngineError::Peer(
            "the iperf3 client ended the test (it was interrupted)".into(),
        )),
        Some(s) => Ok(s),
        None => Err(EngineError::Protocol(ProtoError::Invalid(format!(
            "unknown iperf3 state {} while waiting for {what}",
            b[0] as i8
        )))),
    }
}

/// Reads the state `want` by `deadline`; any other is a protocol error.
pub(crate) fn expect_state(
    sock: &TcpStream,
    want: State,
    deadline: Instant,
    what: &str,
) -> Result<(), EngineError> {
    match read_state(sock, deadline, what)? {
        s if s == want => Ok(()),
        s => Err(EngineError::Protocol(ProtoError::Invalid(format!(
            "iperf3 state {s:?} while waiting for {what}"
        )))),
    }
}

/// Sends one JSON frame.
pub(crate) fn write_json(mut sock: &TcpStream, v: &serde_json::Value) -> Result<(), EngineError> {
    sock.write_all(&iperf3::encode_json(v))
        .map_err(|e| EngineError::io("send iperf3 JSON", e))
}

/// Reads one JSON frame by `deadline` (its length checked before anything is allocated).
pub(crate) fn read_json(
    sock: &TcpStream,
    deadline: Instant,
    what: &str,
) -> Result<Vec<u8>, EngineError> {
    let mut h = [0u8; 4];
    read_exact_by(sock, &mut h, deadline, what)?;
    let len = iperf3::json_len(h)?;
    let mut body = vec![0u8; len];
    read_exact_by(sock, &mut body, deadline, what)?;
    Ok(body)
}

/// This side's results document from its stream totals.
pub(crate) fn results_of(totals: &[StreamTotals], cpu: &CpuUse) -> Results {
    let (t, u, s) = cpu.percent();
    Results {
        cpu: (t, u, s),
        congestion_used: totals
            .iter()
            .find(|t| t.sender && !t.congestion.is_empty())
            .map(|t| t.congestion.clone()),
        streams: totals
            .iter()
            .map(|t| {
                let udp = t.udp.unwrap_or_default().counts;
                StreamResult {
                    id: stream_id(t.stream),
                    bytes: t.bytes,
                    retransmits: t.retransmits,
                    jitter_ms: udp.jitter_ms,
                    errors: udp.lost,
                    // A receiver's count is iperf3's: the datagrams its numbers cover.
                    packets: if t.sender {
                        udp.packets
                    } else {
                        udp.packets.saturating_add(udp.lost)
                    },
                    seconds: t.seconds,
                }
            })
            .collect(),
        server_output_text: None,
    }
}

/// The peer's results document as stream totals of the test `p` (the peer's role on each stream
/// is the opposite of ours: `local_client` says whether this side is the client), and its CPU over
/// `wall_s`. Streams the test does not have are dropped.
pub(crate) fn totals_of(
    r: &Results,
    p: &TestParams,
    local_client: bool,
    wall_s: f64,
) -> (Vec<StreamTotals>, CpuUse) {
    let connections = p.direction.connections(p.streams);
    let mut seen = std::collections::BTreeSet::new();
    let totals = r
        .streams
        .iter()
        .filter_map(|s| {
            let index = stream_index(s.id).filter(|i| *i < connections)?;
            if !seen.insert(index) {
                return None;
            }
            let client_sends = p.direction.client_sends(index, p.streams);
            let sender = client_sends != local_client;
            Some(StreamTotals {
                stream: index,
                sender,
                bytes: s.bytes,
                seconds: s.seconds,
                retransmits: if sender { s.retransmits } else { 0 },
                congestion: if sender {
                    r.congestion_used.clone().unwrap_or_default()
                } else {
                    String::new()
                },
                udp: p.udp.map(|u| {
                    if sender {
                        UdpTotals {
                            counts: UdpInterval {
                                packets: s.packets,
                                ..Default::default()
                            },
                            target_bps: u.rate_bps,
                            ..Default::default()
                        }
                    } else {
                        UdpTotals {
                            counts: UdpInterval {
                                packets: s.packets.saturating_sub(s.errors),
                                lost: s.errors,
                                jitter_ms: s.jitter_ms,
                                ..Default::default()
                            },
                            ..Default::default()
                        }
                    }
                }),
                ..Default::default()
            })
        })
        .collect();
    let cpu = CpuUse {
        user_s: r.cpu.1.clamp(0.0, 1e4) / 100.0 * wall_s,
        system_s: r.cpu.2.clamp(0.0, 1e4) / 100.0 * wall_s,
        wall_s,
    };
    (totals, cpu)
}

/// Whether this side (client or server) sends on any TCP stream of `p`: iperf3's
/// `sender_has_retransmits` (1 if so, -1 if it only receives; UDP: 0).
pub(crate) fn tcp_sender(p: &TestParams, client: bool) -> Option<bool> {
    if p.is_udp() {
        return None;
    }
    Some(match p.direction {
        Direction::Bidir => true,
        Direction::Forward => client,
        Direction::Reverse => !client,
    })
}
