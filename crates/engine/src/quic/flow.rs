//! The flows of the UDP transport: each a QUIC connection on its own pair of sockets, set up from
//! a hello ([`QuicFlow::connect_all`] on the client, [`QuicListener`] on the server), with its
//! plan ([`FlowPlan`]: windows, controller, packet size), the sending and receiving loops of a
//! test, and the process's one runtime that drives them all.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use longhaul_proto::interval::TcpSample;
use longhaul_proto::msg::{SidePlan, SocketSetup};
use longhaul_proto::report::QuicStart;
use longhaul_sys as sys;
use quinn::congestion::{ControllerFactory, CubicConfig, NewRenoConfig};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{
    ClientConfig, Connection, Endpoint, EndpointConfig, IdleTimeout, MtuDiscoveryConfig,
    ServerConfig, TransportConfig, VarInt,
};

use crate::EngineError;

/// The application protocol both ends name in the TLS handshake.
pub(crate) const ALPN: &[u8] = b"longhaul-data/1";

/// Each flow's UDP socket buffers, both ways (the kernel caps them at `rmem_max`/`wmem_max` for
/// a user without CAP_NET_ADMIN): a QUIC flow's window lives in user space, the socket only
/// absorbs the bursts between two reads.
const SOCKET_BUFFER: u64 = 8 << 20;

/// The smallest flow-control window a stream gets, whatever the plan: a short path's BDP is tiny,
/// and a window below a few hundred packets starves a sender between two window updates.
const MIN_WINDOW: u64 = 4 << 20;

/// The largest IP packet a flow sends: a jumbo frame.
const MAX_MTU: u32 = 9000;

/// How long a connection may stay silent (no packet either way) before it is given up.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Keep-alives while a connection waits for its test to start.
const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// What a sender hands quinn in one write: [`PIECE_TIME`] at the window's rate, between
/// [`MIN_PIECE`] and [`MAX_PIECE`]. Its stop flag is seen between two writes; and quinn finds the
/// bytes of each packet by walking the stream's buffered writes from the oldest (a window of
/// 64 KiB writes at 2 Gbit/s and 120 ms is 2,000 of them, a tenth of the sender's CPU).
const PIECE_TIME: Duration = Duration::from_millis(10);
const MIN_PIECE: usize = 64 << 10;
const MAX_PIECE: usize = 4 << 20;

/// How much data, in time at the controller's rate, a sender keeps queued beyond its window.
const BACKLOG_TIME: Duration = Duration::from_millis(20);

/// How many congestion windows a sender's stream may hold (in flight, waiting behind a loss, or
/// queued). quinn counts a stream's bytes as held from the first one not yet acknowledged: one
/// loss keeps everything sent after it held until its repair is acknowledged, one to two round
/// trips later, so on a lossy path (1 % of a 10,000-packet window is a loss every few hundred
/// microseconds) a sender held to one window would stall for most of every round trip.
const HELD_WINDOWS: u64 = 3;

/// A capped sender (`--pace RATE` of a test, `--rate` of a transfer) writes pieces of this long
/// at its cap, and of at least [`MIN_PACE_PIECE`].
const PACE_PIECE: Duration = Duration::from_millis(10);
const MIN_PACE_PIECE: usize = 16 << 10;

/// The least a sender keeps queued beyond its window.
const MIN_BACKLOG: u64 = 256 << 10;

/// How long a stopped sender waits for the acknowledgement of its last bytes, in round trips and
/// at least: a peer that stopped acknowledging is not waited for longer.
const ACK_WAIT_RTTS: u32 = 16;
const MIN_ACK_WAIT: Duration = Duration::from_secs(2);

/// How often a sender blocked on a full stream looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(10);

/// The error code of a connection closed by the end of its test.
pub(super) const DONE: u32 = 0;

/// The kernel thread ids of the runtime's threads, for their CPU time.
static RUNTIME_THREADS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// CPU time the QUIC runtime's threads have used so far (all of this process's QUIC
/// connections: a server running tests at once charges each with all of them).
pub(crate) fn runtime_cpu() -> sys::CpuTime {
    let threads = RUNTIME_THREADS
        .lock()
        .expect("runtime threads lock")
        .clone();
    threads
        .into_iter()
        .filter_map(|tid| sys::task_cpu_time(tid).ok())
        .fold(sys::CpuTime::default(), |a, b| a + b)
}

/// The tokio runtime that drives every QUIC endpoint of this process.
pub(super) fn runtime() -> Result<&'static tokio::runtime::Runtime, EngineError> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lh-quic")
        .on_thread_start(|| {
            RUNTIME_THREADS
                .lock()
                .expect("runtime threads lock")
                .push(sys::thread_id());
        })
        .on_thread_stop(|| {
            let me = sys::thread_id();
            RUNTIME_THREADS
                .lock()
                .expect("runtime threads lock")
                .retain(|&t| t != me);
        })
        .enable_all()
        .build()
        .map_err(|e| EngineError::io("start the QUIC runtime", e))?;
    Ok(RUNTIME.get_or_init(|| rt))
}

/// How each flow of a test is configured: its windows, the controller, the first RTT guess and
/// the packet size.
#[derive(Debug, Clone)]
pub(crate) struct FlowPlan {
    /// Flow-control window of the stream and the connection, and the sender's buffer, bytes.
    pub(crate) window: u64,
    /// `-C`: cubic (the default), newreno (quinn's), bbr (ours, `model`) or udt (UDT's DAIMD,
    /// `udt`).
    pub(crate) controller: String,
    /// The RTT the client measured on the control connection.
    pub(crate) initial_rtt: Duration,
    /// UDP payload of a full-sized packet on this path (from the control connection's path MTU).
    pub(crate) max_udp_payload: u16,
    /// Whether the sockets may exceed the kernel's buffer caps (SO_*BUFFORCE).
    pub(crate) privileged: bool,
    /// A transfer's flow: one bidirectional stream the client opens (it carries the client's
    /// data proof, then the data either way), instead of a test's one unidirectional stream from
    /// the sending side.
    pub(crate) bidi: bool,
}

impl FlowPlan {
    /// The plan of a test's flows from this side's plan (its windows), `-C` and the control
    /// connection (whose path MTU sets the packet size).
    pub(crate) fn new(
        side: &SidePlan,
        congestion: Option<&str>,
        control: std::os::fd::BorrowedFd<'_>,
        ipv6: bool,
    ) -> Self {
        let plan = &side.window;
        // The path's MTU as TCP found it, up to a jumbo frame's: loopback's 64 KiB would make
        // every lost packet cost 64 KiB and send MTU discovery down to 1,200 bytes.
        let mtu = sys::tcp_info(control).map_or(1500, |i| i.pmtu).min(MAX_MTU);
        let headers = if ipv6 { 48 } else { 28 };
        let payload = mtu.saturating_sub(headers).max(1200);
        Self {
            window: plan.wanted.max(MIN_WINDOW),
            controller: congestion.unwrap_or("cubic").to_string(),
            initial_rtt: Duration::from_nanos(plan.rtt_ns).max(Duration::from_millis(1)),
            max_udp_payload: u16::try_from(payload).unwrap_or(u16::MAX),
            privileged: side.privileged,
            bidi: false,
        }
    }

    /// The plan of a transfer's flows: windows from this side's window plan, `controller` (or
    /// the default), one bidirectional stream each.
    pub(crate) fn for_transfer(
        window: &longhaul_proto::window::WindowPlan,
        privileged: bool,
        controller: Option<&str>,
        control: std::os::fd::BorrowedFd<'_>,
        ipv6: bool,
    ) -> Self {
        let side = SidePlan {
            window: window.clone(),
            pacing_per_stream: Vec::new(),
            privileged,
        };
        Self {
            bidi: true,
            ..Self::new(&side, controller, control, ipv6)
        }
    }

    /// The plan as the start of the report shows it.
    pub(crate) fn report(&self) -> QuicStart {
        QuicStart {
            controller: self.controller.clone(),
            window_bytes: self.window,
            max_udp_payload: self.max_udp_payload,
        }
    }

    fn transport(&self) -> Result<TransportConfig, EngineError> {
        let window = VarInt::from_u64(self.window).unwrap_or(VarInt::MAX);
        let mut t = TransportConfig::default();
        t.stream_receive_window(window)
            .receive_window(window)
            .send_window(self.window)
            .max_concurrent_bidi_streams(VarInt::from_u32(u32::from(self.bidi)))
            .max_concurrent_uni_streams(VarInt::from_u32(u32::from(!self.bidi)))
            .datagram_receive_buffer_size(None)
            .initial_rtt(self.initial_rtt)
            .max_idle_timeout(Some(
                IdleTimeout::try_from(IDLE_TIMEOUT).expect("30 s is a valid idle timeout"),
            ))
            .keep_alive_interval(Some(KEEP_ALIVE))
            .initial_mtu(self.max_udp_payload)
            .congestion_controller_factory(controller(
                &self.controller,
                initial_window(self.max_udp_payload),
                self.window,
            )?);
        let mut mtu = MtuDiscoveryConfig::default();
        mtu.upper_bound(self.max_udp_payload);
        t.mtu_discovery_config(Some(mtu));
        Ok(t)
    }
}

/// RFC 9002's initial window (§7.2) for datagrams of `max_udp_payload` bytes: quinn's controllers
/// start at 14,720 bytes whatever the packet size, which on a path of large packets (loopback's
/// 64 KiB) is less than one packet and sends nothing at all.
fn initial_window(max_udp_payload: u16) -> u64 {
    let size = u64::from(max_udp_payload);
    (10 * size).min(14_720.max(2 * size))
}

/// The controller `-C` names, starting at `window` bytes and holding at most `max_window` in
/// flight, with quinn's defaults otherwise.
fn controller(
    name: &str,
    window: u64,
    max_window: u64,
) -> Result<Arc<dyn ControllerFactory + Send + Sync>, EngineError> {
    Ok(match name {
        "cubic" => Arc::new(CubicConfig::default().initial_window(window).clone()),
        "newreno" => Arc::new(NewRenoConfig::default().initial_window(window).clone()),
        "bbr" => Arc::new(super::model::ModelFactory {
            initial_window: window,
        }),
        "udt" => Arc::new(super::udt::UdtFactory {
            initial_window: window,
            max_window,
        }),
        other => {
            return Err(EngineError::Unsupported(format!(
                "congestion control {other:?} is not one of the UDP transport's: {}",
                longhaul_proto::msg::QUIC_CONTROLLERS.join(", ")
            )));
        }
    })
}

/// Sets a flow socket's buffers both ways (a QUIC sender receives acknowledgements, a receiver
/// sends them).
pub(crate) fn size_buffers(sock: &UdpSocket, privileged: bool) -> Result<(), EngineError> {
    let fd = sock.as_fd();
    let io = |e: sys::SysError| EngineError::io("size a UDP transport socket", e.into_io());
    sys::set_send_buffer(fd, SOCKET_BUFFER, privileged).map_err(io)?;
    sys::set_recv_buffer(fd, SOCKET_BUFFER, privileged).map_err(io)?;
    Ok(())
}

/// What a stream's worker shares with the control thread: the stop flag it watches and the bytes
/// it counts.
pub(crate) struct Counters<'a> {
    pub(crate) stop: &'a AtomicBool,
    pub(crate) bytes: &'a AtomicU64,
}

/// One stream of a test: a QUIC connection on its own pair of sockets.
#[derive(Debug)]
pub(crate) struct QuicFlow {
    endpoint: Endpoint,
    pub(super) conn: Connection,
    controller: String,
    /// The sender's cap, if any.
    pace: Mutex<Option<Pace>>,
}

/// A cap on what a sender writes: `rate` bytes/s since `start`. The controller's pacing is
/// quinn's (window ÷ RTT); this only holds the writes back, pieces of [`PACE_PIECE`] at the cap
/// apart, as `SO_MAX_PACING_RATE` holds a TCP sender.
#[derive(Debug, Clone, Copy)]
struct Pace {
    rate: u64,
    start: Instant,
    written: u64,
}

impl QuicFlow {
    /// The client's side of every flow at once: each socket (bound, connected to `server`) says
    /// its `hello` (the session's cookie and the stream's index) and then carries a QUIC
    /// connection to the server's socket the hello set up, with `tls` (pinned to the control
    /// connection's certificate, or any). The hello is repeated, from a second handle on the same
    /// socket, until the handshake completes: a lost hello costs one repeat, not the test.
    pub(crate) fn connect_all(
        flows: Vec<(UdpSocket, [u8; 32])>,
        server: SocketAddr,
        tls: &Arc<rustls::ClientConfig>,
        plan: &FlowPlan,
        timeout: Duration,
    ) -> Result<Vec<Self>, EngineError> {
        let rt = runtime()?;
        let mut tls = (**tls).clone();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = QuicClientConfig::try_from(tls)
            .map_err(|e| EngineError::Tls(format!("QUIC client configuration: {e}")))?;
        let mut config = ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(plan.transport()?));
        let mut waiting = Vec::with_capacity(flows.len());
        for (sock, hello) in flows {
            let hello_sock = sock
                .try_clone()
                .map_err(|e| EngineError::io("share a UDP transport socket", e))?;
            hello_sock
                .send(&hello)
                .map_err(|e| EngineError::io(format!("say hello to {server}"), e))?;
            let endpoint = endpoint(rt, sock, None, plan.max_udp_payload)?;
            let _inside = rt.enter();
            let connecting = endpoint
                .connect_with(config.clone(), server, "longhaul")
                .map_err(|e| EngineError::Tls(format!("QUIC connect to {server}: {e}")))?;
            let handshake = rt.spawn(async move {
                tokio::pin!(connecting);
                loop {
                    tokio::select! {
                        conn = &mut connecting => return conn,
                        () = tokio::time::sleep(crate::udp::HELLO_REPEAT) => {
                            let _ = hello_sock.send(&hello);
                        }
                    }
                }
            });
            waiting.push((endpoint, handshake));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut out = Vec::with_capacity(waiting.len());
        for (endpoint, handshake) in waiting {
            let conn = rt
                .block_on(async { tokio::time::timeout_at(deadline, handshake).await })
                .map_err(|_| EngineError::Timeout(format!("the QUIC handshake with {server}")))?
                .map_err(|e| EngineError::Tls(format!("the QUIC handshake with {server}: {e}")))?
                .map_err(|e| EngineError::Tls(format!("the QUIC handshake with {server}: {e}")))?;
            out.push(Self {
                endpoint,
                conn,
                controller: plan.controller.clone(),
                pace: Mutex::new(None),
            });
        }
        Ok(out)
    }

    /// The sending worker: one stream, written with `payload` (`write_len` at a time, in pieces of
    /// [`PIECE_TIME`] at its rate, no copy: quinn keeps the bytes until they are acknowledged) until stopped
    /// or the budget is spent, then finished and held until the peer has every byte.
    ///
    /// What the stream holds is kept to [`HELD_WINDOWS`] of the controller's window plus
    /// [`BACKLOG_TIME`] at its rate, as `TCP_NOTSENT_LOWAT` keeps a TCP sender's queue: so bytes
    /// count as sent when they are about to leave, not seconds ahead, and a stopped sender's last
    /// bytes drain in a few round trips even on a path that crawls.
    pub(crate) fn send_loop(
        &self,
        st: &Counters<'_>,
        payload: &[u8],
        write_len: usize,
        budget: Option<u64>,
    ) -> io::Result<()> {
        let rt = runtime().map_err(|e| io::Error::other(e.to_string()))?;
        let pattern = &payload[..write_len.min(payload.len()).max(1)];
        let chunk = Bytes::from(pattern.repeat(MAX_PIECE.div_ceil(pattern.len())));
        rt.block_on(async {
            let mut stream = self.conn.open_uni().await.map_err(|e| described(&e))?;
            let mut sent = 0u64;
            let mut at = 0;
            while !st.stop.load(Ordering::Relaxed) {
                let piece = self.bound_backlog();
                let len = match budget {
                    Some(b) if b <= sent => break,
                    Some(b) => (b - sent).min(piece as u64) as usize,
                    None => piece,
                };
                let (len, wait) = self.paced(len);
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                if at + len > chunk.len() {
                    at = 0;
                }
                let mut bufs = [chunk.slice(at..at + len)];
                // `write_chunks` is cancel-safe (if it does not resolve, no byte was written), so
                // a stop seen while the stream is full (a peer that stopped acknowledging) leaves
                // the count exact.
                let written = tokio::select! {
                    w = stream.write_chunks(&mut bufs) => w,
                    () = stopped(st.stop) => break,
                };
                match written {
                    Ok(w) => {
                        at += w.bytes;
                        sent += w.bytes as u64;
                        st.bytes.fetch_add(w.bytes as u64, Ordering::Relaxed);
                    }
                    // A stop that had to close the connection under a blocked write.
                    Err(_) if st.stop.load(Ordering::Relaxed) => return Ok(()),
                    Err(e) => return Err(described(&e)),
                }
            }
            let _ = stream.finish();
            // Every byte acknowledged (or the connection gone): the receiver has its end. A peer
            // that stopped acknowledging is not waited for past ACK_WAIT_RTTS round trips (at
            // least MIN_ACK_WAIT); the connection stays up until the flow is dropped at the end.
            let wait = (self.conn.stats().path.rtt * ACK_WAIT_RTTS).max(MIN_ACK_WAIT);
            let _ = tokio::time::timeout(wait, stream.stopped()).await;
            Ok(())
        })
    }

    /// Caps what this flow sends at `bytes_per_sec` from now on.
    pub(crate) fn set_pacing(&self, bytes_per_sec: u64) {
        *self.pace.lock().unwrap_or_else(|e| e.into_inner()) = Some(Pace {
            rate: bytes_per_sec.max(1),
            start: Instant::now(),
            written: 0,
        });
    }

    /// The next write under the cap, if there is one: at most `piece` bytes (and at most
    /// [`PACE_PIECE`] at the cap), and how long to wait before writing it (until the cap allows
    /// what was written before). Counts it as written.
    pub(super) fn paced(&self, piece: usize) -> (usize, Duration) {
        let mut pace = self.pace.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = pace.as_mut() else {
            return (piece, Duration::ZERO);
        };
        let most = ((p.rate as f64 * PACE_PIECE.as_secs_f64()) as usize).max(MIN_PACE_PIECE);
        let piece = piece.min(most);
        let due = p.start + Duration::from_secs_f64(p.written as f64 / p.rate as f64);
        p.written += piece as u64;
        (piece, due.saturating_duration_since(Instant::now()))
    }

    /// Sets how much the stream may hold: [`HELD_WINDOWS`] congestion windows and
    /// [`BACKLOG_TIME`] at the window's rate (at least [`MIN_BACKLOG`]); returns the size of the
    /// next write.
    pub(super) fn bound_backlog(&self) -> usize {
        let path = self.conn.stats().path;
        let rtt = path.rtt.max(Duration::from_micros(100));
        let rate = path.cwnd as f64 / rtt.as_secs_f64();
        let backlog = ((rate * BACKLOG_TIME.as_secs_f64()) as u64).max(MIN_BACKLOG);
        self.conn.set_send_window(
            path.cwnd
                .saturating_mul(HELD_WINDOWS)
                .saturating_add(backlog),
        );
        ((rate * PIECE_TIME.as_secs_f64()) as usize).clamp(MIN_PIECE, MAX_PIECE)
    }

    /// The receiving worker: the peer's one stream, read to its end, in any order.
    pub(crate) fn recv_loop(&self, st: &Counters<'_>) -> io::Result<()> {
        let rt = runtime().map_err(|e| io::Error::other(e.to_string()))?;
        rt.block_on(async {
            let mut stream = match self.conn.accept_uni().await {
                Ok(s) => s,
                Err(_) if st.stop.load(Ordering::Relaxed) => return Ok(()),
                Err(e) => return Err(described(&e)),
            };
            loop {
                // Unordered: a test counts bytes, so each packet's data is taken as it comes
                // instead of waiting behind a loss (quinn holds at most 1,024 out-of-order pieces
                // per stream, fewer than a long lossy path leaves between a loss and its repair).
                match stream.read_chunk(usize::MAX, false).await {
                    Ok(Some(chunk)) => {
                        st.bytes
                            .fetch_add(chunk.bytes.len() as u64, Ordering::Relaxed);
                    }
                    Ok(None) => return Ok(()),
                    Err(_) if st.stop.load(Ordering::Relaxed) => return Ok(()),
                    Err(e) => return Err(described(&e)),
                }
            }
        })
    }

    /// Wakes a worker blocked on the connection: it is closed under it.
    pub(crate) fn shut_down(&self) {
        self.conn.close(VarInt::from_u32(DONE), b"stopped");
    }

    /// The connection's state as a `TCP_INFO` reading: losses as retransmits, the controller's
    /// window, the RTT estimates and the packet size.
    pub(crate) fn sample(&self) -> TcpSample {
        let path = self.conn.stats().path;
        let mtu = u32::from(path.current_mtu).max(1);
        TcpSample {
            total_retrans: u32::try_from(path.lost_packets).unwrap_or(u32::MAX),
            snd_cwnd: u32::try_from(path.cwnd / u64::from(mtu)).unwrap_or(u32::MAX),
            snd_mss: mtu,
            snd_wnd: None,
            rtt_us: u32::try_from(path.rtt.as_micros()).unwrap_or(u32::MAX),
            rttvar_us: 0,
            min_rtt_us: Some(u32::try_from(path.min_rtt.as_micros()).unwrap_or(u32::MAX)),
            pmtu: mtu,
            pacing_rate: None,
            delivery_rate: None,
            busy_us: None,
            rwnd_limited_us: None,
            sndbuf_limited_us: None,
            bytes_retrans: Some(path.lost_bytes),
        }
    }

    /// How the flow was set up, for the report: the socket's buffers, the controller and the
    /// packet size.
    pub(crate) fn describe(&self, sock: &SocketSetup) -> SocketSetup {
        SocketSetup {
            congestion: format!("quic-{}", self.controller),
            mss: u32::from(self.conn.stats().path.current_mtu),
            ..sock.clone()
        }
    }
}

impl Drop for QuicFlow {
    fn drop(&mut self) {
        self.conn.close(VarInt::from_u32(DONE), b"done");
        self.endpoint.close(VarInt::from_u32(DONE), b"done");
    }
}

/// A server flow waiting for its client's QUIC connection: its endpoint is up from the hello on,
/// so the client's handshake completes while the rest of the test is set up.
#[derive(Debug)]
pub(crate) struct QuicListener {
    endpoint: Endpoint,
    accepted: Option<tokio::task::JoinHandle<Result<Connection, String>>>,
    controller: String,
    peer: SocketAddr,
    /// The flow socket as the kernel set it up.
    setup: SocketSetup,
}

impl QuicListener {
    /// An endpoint on the flow's own socket (bound to the server's port and connected to the
    /// client that said hello, so it hears no one else) that takes one connection and then no
    /// more.
    pub(crate) fn listen(
        sock: UdpSocket,
        tls: &Arc<rustls::ServerConfig>,
        plan: &FlowPlan,
        index: u32,
        sender: bool,
    ) -> Result<Self, EngineError> {
        let rt = runtime()?;
        size_buffers(&sock, plan.privileged)?;
        let setup = crate::udp::describe(&sock, index, sender);
        let peer = sock
            .peer_addr()
            .map_err(|e| EngineError::io("read a UDP flow's peer", e))?;
        let mut tls = (**tls).clone();
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = QuicServerConfig::try_from(tls)
            .map_err(|e| EngineError::Tls(format!("QUIC server configuration: {e}")))?;
        let mut config = ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(Arc::new(plan.transport()?));
        config.max_incoming(1);
        let endpoint = endpoint(rt, sock, Some(config), plan.max_udp_payload)?;
        let ep = endpoint.clone();
        let accepted = rt.spawn(async move {
            let incoming = ep
                .accept()
                .await
                .ok_or_else(|| "the endpoint closed before a connection".to_string())?;
            let conn = incoming.await.map_err(|e| e.to_string())?;
            // One connection per flow: the endpoint takes no other.
            ep.set_server_config(None);
            Ok(conn)
        });
        Ok(Self {
            endpoint,
            accepted: Some(accepted),
            controller: plan.controller.clone(),
            peer,
            setup,
        })
    }

    /// The flow once its client's handshake is complete (by `timeout`), and how it is set up.
    pub(crate) fn established(
        mut self,
        timeout: Duration,
    ) -> Result<(QuicFlow, SocketSetup), EngineError> {
        let rt = runtime()?;
        let peer = self.peer;
        let accepted = self.accepted.take().expect("accepted once");
        let conn = rt
            .block_on(async { tokio::time::timeout(timeout, accepted).await })
            .map_err(|_| EngineError::Timeout(format!("the QUIC handshake from {peer}")))?
            .map_err(|e| EngineError::Tls(format!("the QUIC handshake from {peer}: {e}")))?
            .map_err(|e| EngineError::Tls(format!("the QUIC handshake from {peer}: {e}")))?;
        let flow = QuicFlow {
            endpoint: self.endpoint.clone(),
            conn,
            controller: std::mem::take(&mut self.controller),
            pace: Mutex::new(None),
        };
        let setup = flow.describe(&self.setup);
        Ok((flow, setup))
    }
}

impl Drop for QuicListener {
    fn drop(&mut self) {
        if let Some(task) = self.accepted.take() {
            task.abort();
            self.endpoint.close(VarInt::from_u32(DONE), b"not set up");
        }
    }
}

/// An error of quinn's with its causes (a lost connection says why it was lost).
pub(super) fn described(e: &dyn std::error::Error) -> io::Error {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    io::Error::other(text)
}

/// An endpoint of the shared runtime on `sock` (made non-blocking, as the runtime needs).
pub(super) fn endpoint(
    rt: &tokio::runtime::Runtime,
    sock: UdpSocket,
    server: Option<ServerConfig>,
    max_udp_payload: u16,
) -> Result<Endpoint, EngineError> {
    sock.set_nonblocking(true)
        .map_err(|e| EngineError::io("set a UDP transport socket non-blocking", e))?;
    let _inside = rt.enter();
    let mut config = EndpointConfig::default();
    config.max_udp_payload_size(max_udp_payload).map_err(|e| {
        EngineError::Unsupported(format!("a UDP payload of {max_udp_payload}: {e}"))
    })?;
    Endpoint::new(config, server, sock, Arc::new(quinn::TokioRuntime))
        .map_err(|e| EngineError::io("open a QUIC endpoint", e))
}

/// Resolves once `stop` is raised (looked at every [`STOP_CHECK`]).
async fn stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(STOP_CHECK).await;
    }
}
