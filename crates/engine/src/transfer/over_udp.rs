//! `--transport udp` for transfers: the data connections as QUIC flows (`crate::quic`), set up as
//! a test's are, and authenticated as a TCP data connection is.
//!
//! Each flow's client socket says hello with the transfer's cookie and the stream's index
//! (`crate::udp`); the server's hello socket routes it to the transfer that issued the cookie, if
//! it came from that transfer's client, and the transfer answers with a QUIC endpoint on a socket
//! of its own, connected to where the hello came from. The client then opens the flow's one
//! bidirectional stream and writes the data proof of its stream index first, as a TCP data
//! connection writes it after its preamble; the server checks the proof before the stream carries
//! a byte of data. A flow that does not prove the key ends the transfer (the client's own flows
//! cannot fail it: a stranger's hello is answered only if it came from the client's address).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use longhaul_proto::wire::Preamble;
use longhaul_transfer::session::{DATA_PROOF_LEN, verify_data_proof};
use longhaul_transfer::{MacKey, Role, SessionKeys};

use super::data::DataConn;
use crate::EngineError;
use crate::quic::{FlowPlan, QuicFlow, QuicListener, QuicStream};
use crate::socket;
use crate::tls::Pinned;

/// The flows' plan on this side: windows from the transfer's window plan, its controller,
/// packets sized from the control connection's (`control`) path MTU.
pub(super) fn flow_plan(
    window: &longhaul_proto::window::WindowPlan,
    controller: Option<&str>,
    control: std::os::fd::BorrowedFd<'_>,
    ipv6: bool,
) -> FlowPlan {
    FlowPlan::for_transfer(
        window,
        socket::kernel_limits().privileged,
        controller,
        control,
        ipv6,
    )
}

/// Where the client's flows go: the server, this host's address to bind (if asked), the
/// transfer's cookie, the certificate the control connection was shown (`--encrypt`), and the
/// set-up deadline.
pub(super) struct Dial<'a> {
    pub(super) server: SocketAddr,
    pub(super) bind: Option<IpAddr>,
    pub(super) cookie: [u8; 16],
    pub(super) pinned: Option<&'a Pinned>,
    pub(super) timeout: Duration,
}

/// The client's flows: one socket per stream saying hello until its QUIC handshake completes,
/// then each stream opened with its proof.
pub(super) fn open(
    dial: &Dial<'_>,
    keys: &SessionKeys,
    plan: &FlowPlan,
    streams: u32,
) -> Result<Vec<DataConn>, EngineError> {
    let mut flows = Vec::with_capacity(streams as usize);
    for i in 0..streams {
        let sock = crate::udp::flow_socket(dial.server, dial.bind, i, 0)?;
        crate::quic::size_buffers(&sock, plan.privileged)?;
        flows.push((sock, Preamble::data(dial.cookie, i).encode()));
    }
    let tls = match dial.pinned {
        Some(p) => p.clone(),
        None => Pinned::any()?,
    };
    let flows = QuicFlow::connect_all(flows, dial.server, tls.rustls_config(), plan, dial.timeout)?;
    let key = keys.sending(Role::Client);
    flows
        .into_iter()
        .enumerate()
        .map(|(i, flow)| {
            let proof = key.data_proof(&dial.cookie, i as u32).0;
            QuicStream::open(flow, &proof, dial.timeout)
                .map(|s| DataConn::Quic(Box::new(s)))
                .map_err(|e| EngineError::io(format!("open UDP transport stream {i}"), e))
        })
        .collect()
}

/// What the server's side of the set-up needs: where the flows' hellos arrive, the server's TLS,
/// its address as the client reached it, and the key and cookie the proofs are checked against.
pub(crate) struct Accept<'a> {
    pub(crate) hellos: Receiver<(u32, SocketAddr)>,
    pub(crate) tls: &'a Arc<rustls::ServerConfig>,
    pub(crate) local: SocketAddr,
    pub(crate) key: &'a MacKey,
    pub(crate) cookie: [u8; 16],
}

/// The server's flows: an endpoint for each stream index from its first hello, each flow's
/// handshake and proof, all by `timeout`; in stream order. `sender`: whether this side sends
/// the data (a `get`).
pub(super) fn accept(
    a: &Accept<'_>,
    plan: &FlowPlan,
    streams: u32,
    sender: bool,
    timeout: Duration,
) -> Result<Vec<DataConn>, EngineError> {
    let deadline = Instant::now() + timeout;
    let mut listeners: Vec<Option<QuicListener>> = (0..streams).map(|_| None).collect();
    while listeners.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        let (index, from) = a.hellos.recv_timeout(left).map_err(|_| {
            let missing = listeners.iter().filter(|l| l.is_none()).count();
            EngineError::Timeout(format!(
                "{missing} of {streams} UDP transport streams to say hello"
            ))
        })?;
        // A repeat of a hello already answered, or an index the plan does not have: the client's
        // own flows repeat hellos until their handshake is through.
        let Some(slot @ None) = listeners.get_mut(index as usize) else {
            continue;
        };
        let sock = crate::udp::accept_flow(a.local, from)
            .map_err(|e| EngineError::io(format!("open UDP stream {index} to {from}"), e))?;
        *slot = Some(QuicListener::listen(sock, a.tls, plan, index, sender)?);
    }
    let mut out = Vec::with_capacity(streams as usize);
    for (i, listener) in listeners.into_iter().enumerate() {
        let i = i as u32;
        let left = deadline.saturating_duration_since(Instant::now());
        let (flow, _) = listener
            .expect("every stream said hello")
            .established(left)?;
        let mut proof = [0u8; DATA_PROOF_LEN];
        let left = deadline.saturating_duration_since(Instant::now());
        let stream = QuicStream::accept(flow, &mut proof, left).map_err(|e| {
            EngineError::io(format!("the stream and proof of UDP transport flow {i}"), e)
        })?;
        verify_data_proof(a.key, &a.cookie, i, &proof)?;
        out.push(DataConn::Quic(Box::new(stream)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::net::UdpSocket;
    use std::sync::mpsc;

    use longhaul_transfer::Key;
    use longhaul_transfer::msg::Direction;

    use std::os::fd::AsFd;

    use super::*;
    use crate::tls::{ServerTls, ServerTlsConfig};

    fn plan() -> FlowPlan {
        let window = longhaul_proto::window::plan(
            longhaul_units::Nanos(1_000_000),
            1_000_000_000,
            1,
            None,
            &socket::kernel_limits(),
        );
        // Not a connected TCP socket: the packet size falls back to a 1,500-byte path's.
        let control = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        FlowPlan::for_transfer(&window, false, Some("cubic"), control.as_fd(), false)
    }

    /// A flow whose stream opens with `proof` for stream 0, against a server expecting `key`'s.
    fn accept_with(proof: [u8; DATA_PROOF_LEN], key: &MacKey) -> Result<usize, EngineError> {
        let plan = plan();
        // The server's hello socket (its port) and the client's flow socket.
        let acceptor = {
            use socket2::{Domain, Protocol, Socket, Type};
            let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
            s.set_reuse_address(true).unwrap();
            s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
                .unwrap();
            UdpSocket::from(s)
        };
        let local = acceptor.local_addr().unwrap();
        let client = crate::udp::flow_socket(local, None, 0, 0).unwrap();
        let (tx, hellos) = mpsc::sync_channel(4);
        tx.send((0, client.local_addr().unwrap())).unwrap();
        let tls = ServerTls::new(&ServerTlsConfig::default()).unwrap();
        let cookie = [7u8; 16];
        let server = std::thread::scope(|scope| {
            let server = scope.spawn(|| {
                let a = Accept {
                    hellos,
                    tls: tls.rustls_config(),
                    local,
                    key,
                    cookie,
                };
                accept(&a, &plan, 1, false, Duration::from_secs(10))
            });
            let flows = QuicFlow::connect_all(
                vec![(client, Preamble::data(cookie, 0).encode())],
                local,
                Pinned::any().unwrap().rustls_config(),
                &plan,
                Duration::from_secs(10),
            )
            .unwrap();
            let flow = flows.into_iter().next().unwrap();
            let stream = QuicStream::open(flow, &proof, Duration::from_secs(10)).unwrap();
            let accepted = server.join().unwrap();
            drop(stream);
            accepted
        });
        drop(acceptor);
        server.map(|conns| conns.len())
    }

    /// A flow proves the session's key for its stream before it carries data: the right proof
    /// is taken, a wrong one (a stranger who learned the cookie, or another session's key) ends
    /// the set-up naming the stream.
    #[test]
    fn a_flow_is_taken_only_with_the_proof_of_the_session_key() {
        let keys = Key::from_bytes([3; 32]).session(Direction::Send, &[1; 32], &[2; 32]);
        let other = Key::from_bytes([4; 32]).session(Direction::Send, &[1; 32], &[2; 32]);
        let key = keys.receiving(Role::Server);
        let cookie = [7u8; 16];
        let right = keys.sending(Role::Client).data_proof(&cookie, 0).0;
        assert_eq!(accept_with(right, key).unwrap(), 1);
        for wrong in [
            other.sending(Role::Client).data_proof(&cookie, 0).0,
            keys.sending(Role::Client).data_proof(&cookie, 1).0,
            [0; DATA_PROOF_LEN],
        ] {
            let err = accept_with(wrong, key).unwrap_err().to_string();
            assert!(err.contains("stream 0"), "{err}");
        }
    }
}
