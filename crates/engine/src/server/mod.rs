//! `longhaul server`: many tests at once on one port.
//!
//! Every accepted connection gets a thread that reads its preamble by a whole-step deadline. A control
//! connection becomes a test session if the server is under its cap, otherwise it is told
//! "busy, N tests running" and closed; authenticated transfers have a cap of their own. A data
//! connection presents a cookie and is handed to the session that issued it; an unknown cookie is
//! dropped. A transfer's data connection must also prove the transfer's session key right after its
//! preamble (`transfer::DataGate`), or it is dropped. Any error in one session — garbage, a truncated or
//! oversized message, a peer that dies — is logged, the session's sockets and threads are released, and
//! the other sessions never notice.
//!
//! A test session's conversation (its phases, step deadlines, limits on the test, end and drain) is
//! `longhaul_proto::conversation::server`'s state machine; this module drives it and keeps what needs
//! all sessions or the host: admission, routing data connections by cookie, the listener's buffer.
//!
//! Limits the server enforces on peers that do not hold a key (issue 11, finding 4):
//! - set-up: each step has one deadline for the whole step (`handshake_timeout`): the preamble and
//!   the hello together from the moment of accept, then all pings and the parameters, then all data
//!   connections, then the start; at most [`MAX_PINGS`] pings;
//! - admission (see `Handshaking::admit`): at most [`MAX_HANDSHAKING`] connections waiting for
//!   their preamble, at most [`MAX_HANDSHAKING_PER_SOURCE`] of them from one source (an IPv4 address
//!   or an IPv6 /64), except that a source whose sessions are waiting for their data connections may
//!   have that many more, outside the global cap: so neither one host nor many trickling preambles
//!   can starve the data connections of running sessions; tests and transfers are counted against
//!   separate caps;
//! - a test: its streams (`max_streams`) and the socket-buffer bytes it makes this server request
//!   (`max_test_memory`), its duration (`max_duration`; a test the client does not stop is ended at
//!   its duration plus the time a longhaul client may take to drain its senders plus
//!   [`OVERRUN_GRACE`]; an iperf3 client's at its duration plus the grace), and progress (`stall_timeout`: no byte moved on any stream);
//!   congestion controls only from the kernel's available list; the listener's receive buffer,
//!   raised for a test's window scale, comes back down when no running session needs it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::conversation::server::{Event, Server as TestSession, ServerSettings};
use longhaul_proto::msg::{CpuUse, MAX_STREAMS, SidePlan, SideResults, SocketSetup};
use longhaul_proto::window::BufferAction;
use longhaul_proto::wire::{
    ConnKind, Cookie, PREAMBLE_LEN, PROTOCOL_VERSION, Preamble, encode_frame,
};
use longhaul_proto::{Message, Transport};
use longhaul_sys as sys;
use tracing::{info, warn};

use crate::channel::Channel;
use crate::control::{Control, read_preamble};
use crate::quic::{FlowPlan, QuicListener};
use crate::run::{Run, RunStream, recv_config, send_config, wake_at};
use crate::socket::{self, SocketOptions};
use crate::stream::Flow;
use crate::tls::ServerTls;
use crate::transfer::DataGate;
use crate::{EngineError, SOFTWARE, random};

mod iperf3;
mod report;
mod state;

use state::{
    Busy, Counts, Expecting, Handshakes, Handshaking, ListenerBuf, Route, Shared, Slot,
    accept_forever, policy, receive_forever,
};
pub use state::{DEFAULT_PORT, MAX_HANDSHAKING, MAX_HANDSHAKING_PER_SOURCE, ServerConfig};

/// A bound server.
pub struct Server {
    listener: Arc<TcpListener>,
    /// The UDP socket on the same port where UDP tests' flows say hello (`crate::udp`).
    udp: UdpSocket,
    /// The iperf3 port's sockets, until [`Server::run`] serves them.
    iperf3: Mutex<Option<iperf3::Listeners>>,
    iperf3_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
}

pub use longhaul_proto::conversation::server::{MAX_PINGS, OVERRUN_GRACE};

impl Server {
    /// Binds the listening socket.
    pub fn bind(cfg: ServerConfig) -> Result<Self, EngineError> {
        let tls = ServerTls::new(&cfg.tls)?;
        let (listener, udp) = listen_both(cfg.bind, cfg.port)?;
        let listener = Arc::new(listener);
        let shared = Arc::new(Shared {
            cfg,
            tls,
            running: AtomicU32::new(0),
            transfers: AtomicU32::new(0),
            probes: AtomicU32::new(0),
            jobs: AtomicU32::new(0),
            counts: Counts::default(),
            handshakes: Mutex::new(Handshakes::default()),
            pending: Mutex::new(HashMap::new()),
            listener: Arc::clone(&listener),
            listener_buf: Mutex::new(ListenerBuf {
                current: 0,
                needs: HashMap::new(),
            }),
            next_session: AtomicU64::new(0),
            stopping: std::sync::atomic::AtomicBool::new(false),
        });
        let iperf3 =
            shared
                .cfg
                .iperf3_port
                .and_then(|port| match listen_both(shared.cfg.bind, port) {
                    Ok((tcp, udp)) => Some(iperf3::Listeners { tcp, udp }),
                    Err(e) => {
                        warn!("iperf3 clients not served: {e} (--iperf3-port)");
                        None
                    }
                });
        let iperf3_addr = iperf3.as_ref().and_then(|l| l.tcp.local_addr().ok());
        Ok(Self {
            listener,
            udp,
            iperf3: Mutex::new(iperf3),
            iperf3_addr,
            shared,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// Where stock iperf3 clients are served, if anywhere.
    pub fn iperf3_addr(&self) -> Option<SocketAddr> {
        self.iperf3_addr
    }

    /// Tests running now.
    pub fn running(&self) -> u32 {
        self.shared.running.load(Ordering::Relaxed)
    }

    /// A handle that reads this server's counters (for `/metrics`) from any thread.
    pub fn stats(&self) -> ServerStats {
        ServerStats(Arc::clone(&self.shared))
    }

    /// Accepts connections forever.
    pub fn run(&self) -> Result<(), EngineError> {
        info!(addr = %self.local_addr(), max_tests = self.shared.cfg.max_tests, "longhaul server listening");
        let udp = self
            .udp
            .try_clone()
            .map_err(|e| EngineError::io("clone the UDP socket", e))?;
        let shared = Arc::clone(&self.shared);
        std::thread::Builder::new()
            .name("lh-udp-hello".into())
            .spawn(move || route_udp_hellos(&shared, &udp))
            .map_err(|e| EngineError::io("start the UDP hello thread", e))?;
        if let Some(l) = self.iperf3.lock().expect("iperf3 listeners lock").take() {
            info!(addr = %self.iperf3_addr.map(|a| a.to_string()).unwrap_or_default(), "iperf3 clients served");
            iperf3::serve(&self.shared, l)?;
        }
        let shared = Arc::clone(&self.shared);
        accept_forever(
            &self.shared,
            &self.listener,
            "lh-conn",
            move |conn, peer, deadline, hs| handle(&shared, conn, peer, deadline, hs),
        )
    }
}

/// The TCP listener and the UDP socket on the same port (with port 0, the first free number both
/// can have).
fn listen_both(bind: Option<IpAddr>, port: u16) -> Result<(TcpListener, UdpSocket), EngineError> {
    let mut last = None;
    for _ in 0..if port == 0 { 16 } else { 1 } {
        let tcp = listen(bind, port)?;
        let got = tcp
            .local_addr()
            .map_err(|e| EngineError::io("read the listener's address", e))?;
        match listen_udp(got) {
            Ok(udp) => return Ok((tcp, udp)),
            Err(e) => last = Some(EngineError::io(format!("bind UDP {got}"), e)),
        }
    }
    Err(last.expect("tried at least once"))
}

/// The UDP socket where flows say hello: the TCP listener's address and port, shared (as the flows'
/// own sockets share it) with `SO_REUSEADDR`; dual-stack when the listener is.
fn listen_udp(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
        s.set_only_v6(false)?;
    }
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// Hands each UDP flow's hello to the session that issued its cookie, if it came from that session's
/// client. Nothing else is answered here: a datagram that is not a hello for a test waiting for its
/// flows gets no reply (no reflection, no amplification), and a session answers only its own.
fn route_udp_hellos(shared: &Shared, sock: &UdpSocket) -> ! {
    receive_forever(sock, "UDP hello socket", |datagram, from| {
        let Ok(b) = <&[u8; PREAMBLE_LEN]>::try_from(datagram) else {
            return;
        };
        let Ok(pre) = Preamble::decode(b) else {
            return;
        };
        if pre.kind != ConnKind::Data {
            return;
        }
        let route = shared
            .pending
            .lock()
            .expect("pending lock")
            .get(&pre.cookie)
            .and_then(|r| r.udp.clone());
        match route {
            Some((ip, tx)) if ip == from.ip().to_canonical() => {
                let _ = tx.try_send((pre.stream, from));
            }
            Some(_) => warn!(%from, "UDP stream hello from another host than its test's client"),
            None => {}
        }
    })
}

fn listen(bind: Option<IpAddr>, port: u16) -> Result<TcpListener, EngineError> {
    use socket2::{Domain, Socket, Type};
    let make = |addr: SocketAddr, dual: bool| -> std::io::Result<TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        s.set_reuse_address(true)?;
        if dual {
            s.set_only_v6(false)?;
        }
        s.bind(&addr.into())?;
        s.listen(1024)?;
        Ok(s.into())
    };
    let what = |a: SocketAddr| format!("bind {a}");
    match bind {
        Some(ip) => {
            let a = SocketAddr::new(ip, port);
            make(a, false).map_err(|e| EngineError::io(what(a), e))
        }
        None => {
            let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
            make(v6, true).or_else(|_| {
                // No IPv6 on this host: serve IPv4 only.
                let v4 = SocketAddr::from(([0, 0, 0, 0], port));
                make(v4, false).map_err(|e| EngineError::io(what(v4), e))
            })
        }
    }
}

/// Reads a connection's preamble by `deadline`; for a `Tls` preamble, runs the TLS handshake and
/// reads the connection's own preamble inside, by the same deadline.
fn open_channel(
    shared: &Shared,
    sock: TcpStream,
    deadline: Instant,
) -> Result<(Channel, Preamble), EngineError> {
    let plain = Channel::plain(sock);
    let pre = read_preamble(&plain, deadline)?;
    if pre.kind != ConnKind::Tls || pre.version != PROTOCOL_VERSION {
        return Ok((plain, pre));
    }
    let sock = plain.into_plain().expect("a plain channel");
    let channel = shared.tls.accept(sock, deadline)?;
    let pre = read_preamble(&channel, deadline)?;
    if pre.kind == ConnKind::Tls {
        return Err(EngineError::Tls("a TLS preamble inside TLS".into()));
    }
    Ok((channel, pre))
}

/// Tells a peer why its conversation is refused, in that conversation's own error message (a data
/// connection is only dropped).
fn refuse(conn: &Channel, kind: ConnKind, why: String) {
    let frame = match kind {
        ConnKind::Control => encode_frame(&Message::Error { message: why }),
        ConnKind::Transfer => longhaul_transfer::Message::Error { message: why }.encode_frame(),
        ConnKind::Job => encode_frame(&longhaul_fleet::JobMessage::Error { message: why }),
        ConnKind::Probe => {
            encode_frame(&longhaul_proto::probe::ProbeMessage::Error { message: why })
        }
        ConnKind::Data | ConnKind::Tls => return,
    };
    if conn.write_all(&frame).is_ok() {
        crate::control::linger_close(conn);
    }
}

/// Serves one accepted connection; `deadline` is the end of its first step (preamble, TLS
/// handshake, and for a test its hello).
fn handle(
    shared: &Arc<Shared>,
    conn: TcpStream,
    peer: SocketAddr,
    deadline: Instant,
    hs: Handshaking,
) {
    let opened = open_channel(shared, conn, deadline);
    // A transfer's data connection still has its proof to send: it stays counted as handshaking,
    // under the same deadline, until the proof is in.
    let hs = match &opened {
        Ok((_, p)) if p.kind == ConnKind::Data => Some(hs),
        _ => {
            drop(hs);
            None
        }
    };
    let (conn, pre) = match opened {
        Ok(o) => o,
        Err(e) => {
            warn!(%peer, "dropped connection: {e}");
            return;
        }
    };
    if pre.version != PROTOCOL_VERSION {
        let e = EngineError::Version {
            ours: PROTOCOL_VERSION,
            theirs: pre.version,
        };
        warn!(%peer, "{e}");
        if pre.kind == ConnKind::Control {
            let _ = conn.write_all(&encode_frame(&Message::Error {
                message: e.to_string(),
            }));
        }
        return;
    }
    if shared.tls.required() && !conn.is_encrypted() {
        info!(%peer, "refused a plaintext connection: encryption is required");
        refuse(
            &conn,
            pre.kind,
            "this server requires encryption (--require-encryption): run the client with \
             --encrypt"
                .into(),
        );
        return;
    }
    if shared.stopping.load(Ordering::Acquire) && pre.kind != ConnKind::Data {
        info!(%peer, "refused: the server is shutting down");
        refuse(&conn, pre.kind, SHUTTING_DOWN.into());
        return;
    }
    match pre.kind {
        // `open_channel` answered it with TLS, or returned it for the version check above.
        ConnKind::Tls => warn!(%peer, "dropped connection: a TLS preamble out of place"),
        ConnKind::Data => {
            let route = shared
                .pending
                .lock()
                .expect("pending lock")
                .get(&pre.cookie)
                .map(|r| (r.to.clone(), r.gate.clone(), r.encrypted));
            match route {
                Some((_, _, true)) if !conn.is_encrypted() => {
                    warn!(%peer, "plaintext data connection for an encrypted session dropped");
                }
                Some((tx, gate, _)) => {
                    if let Some(gate) = gate
                        && let Err(e) = gate.admit(
                            &conn,
                            &pre.cookie,
                            pre.stream,
                            deadline.saturating_duration_since(Instant::now()),
                        )
                    {
                        warn!(%peer, "data connection refused: {e}");
                        return;
                    }
                    drop(hs);
                    let _ = tx.try_send((pre.stream, conn));
                }
                None => warn!(%peer, "data connection with an unknown test cookie dropped"),
            }
        }
        ConnKind::Transfer => {
            let cap = shared.cfg.max_transfers;
            let running = shared.transfers.fetch_add(1, Ordering::AcqRel);
            let _slot = Slot(&shared.transfers);
            if running >= cap {
                info!(%peer, running, cap, "refused transfer: busy");
                shared.counts.refused(Busy::Transfer);
                let msg = longhaul_transfer::Message::Error {
                    message: format!(
                        "server busy, {running} transfers running (cap {cap}, --max-transfers); \
                         try again later"
                    ),
                };
                let _ = conn.write_all(&msg.encode_frame());
                return;
            }
            let cookie = match random::cookie() {
                Ok(c) => c,
                Err(e) => {
                    warn!(%peer, "refused transfer: {e}");
                    let msg = longhaul_transfer::Message::Error {
                        message: e.to_string(),
                    };
                    let _ = conn.write_all(&msg.encode_frame());
                    return;
                }
            };
            let gate = DataGate::default();
            let (registration, rx) =
                Registration::new(shared, cookie, Some(gate.clone()), conn.is_encrypted());
            let udp_hellos = || registration.accept_udp(peer.ip());
            let listener_use = ListenerUse::new(shared);
            let widen = |request, force| listener_use.widen(request, force);
            let expecting = std::cell::RefCell::new(Vec::new());
            let expect = |streams| {
                expecting
                    .borrow_mut()
                    .extend(Expecting::new(shared, Some(peer), streams));
            };
            let admission = crate::transfer::Admission {
                cookie,
                gate: &gate,
                data: &rx,
                timeout: shared.cfg.handshake_timeout,
                widen: &widen,
                expect: &expect,
                udp_hellos: &udp_hellos,
                tls: shared.tls.rustls_config(),
                stopping: (&shared.stopping, SHUTTING_DOWN),
            };
            match crate::transfer::serve(
                conn,
                shared.cfg.files.as_ref(),
                shared.cfg.controllers.tickets(),
                &admission,
            ) {
                Ok(Some(s)) => {
                    let c = &shared.counts;
                    Counts::add(&c.transfers_finished, 1);
                    // The transfer as the client asked it: a client's `send` came in here.
                    if s.direction == "send" {
                        Counts::add(&c.transfer_bytes_received, s.bytes_moved);
                    } else {
                        Counts::add(&c.transfer_bytes_sent, s.bytes_moved);
                    }
                    Counts::add(&c.transfer_files, s.files);
                    Counts::add(&c.chunks_resent, s.chunks_resent);
                    Counts::add(&c.chunks_verified, s.chunks_verified);
                    info!(
                        %peer,
                        direction = %s.direction,
                        files = s.files,
                        failed = s.failed.len(),
                        bytes = s.bytes_moved,
                        seconds = s.seconds,
                        "transfer done"
                    );
                }
                Ok(None) => {}
                Err(e) => {
                    Counts::add(&shared.counts.transfers_failed, 1);
                    warn!(%peer, "transfer ended with an error: {e}");
                }
            }
        }
        ConnKind::Probe => {
            let cap = shared.cfg.max_probes;
            let running = shared.probes.fetch_add(1, Ordering::AcqRel);
            let _slot = Slot(&shared.probes);
            if running >= cap {
                info!(%peer, running, cap, "refused probe session: busy");
                shared.counts.refused(Busy::Probe);
                let msg = longhaul_proto::probe::ProbeMessage::Error {
                    message: format!(
                        "server busy, {running} probe sessions running (cap {cap}, --max-probes); \
                         try again later"
                    ),
                };
                let _ = conn.write_all(&encode_frame(&msg));
                return;
            }
            Counts::add(&shared.counts.probe_sessions, 1);
            if let Err(e) = crate::probe::serve(conn, deadline, shared.cfg.max_duration) {
                warn!(%peer, "probe session ended with an error: {e}");
            }
        }
        ConnKind::Job => {
            // A job runs a test from this server: it takes a test slot.
            let cap = shared.cfg.max_tests;
            let running = shared.running.fetch_add(1, Ordering::AcqRel);
            let _slot = Slot(&shared.running);
            if running >= cap {
                info!(%peer, running, cap, "refused job: busy");
                shared.counts.refused(Busy::Job);
                let msg = longhaul_fleet::JobMessage::Error {
                    message: format!(
                        "server busy, {running} tests running (cap {cap}, --max-tests); try again \
later"
                    ),
                };
                let _ = conn.write_all(&encode_frame(&msg));
                return;
            }
            shared.jobs.fetch_add(1, Ordering::AcqRel);
            let _job = Slot(&shared.jobs);
            let cx = crate::job::JobContext {
                controllers: &shared.cfg.controllers,
                files: shared.cfg.files.as_ref(),
                deadline: Instant::now() + shared.cfg.handshake_timeout,
                connect_timeout: shared.cfg.handshake_timeout,
            };
            match crate::job::serve(conn, &cx) {
                Ok(d) => {
                    Counts::add(&shared.counts.jobs_finished, 1);
                    info!(%peer, controller = %d.controller, what = %d.what, "job done");
                }
                Err(e) => {
                    Counts::add(&shared.counts.jobs_failed, 1);
                    warn!(%peer, "job ended with an error: {e}");
                }
            }
        }
        ConnKind::Control => {
            if let Err(why) = shared.cfg.admits(peer.ip()) {
                info!(%peer, "refused test: {why}");
                let _ = conn.write_all(&encode_frame(&Message::Error { message: why }));
                crate::control::linger_close(&conn);
                return;
            }
            let cap = shared.cfg.max_tests;
            let running = shared.running.fetch_add(1, Ordering::AcqRel);
            let slot = Slot(&shared.running);
            let mut ctrl = Control::new(conn);
            if running >= cap {
                info!(%peer, running, cap, "refused test: busy");
                shared.counts.refused(Busy::Test);
                let _ = ctrl.send(&Message::Busy { running, cap });
                return;
            }
            match session(shared, &mut ctrl, deadline) {
                Ok(()) => {}
                Err(e) => {
                    Counts::add(&shared.counts.tests_failed, 1);
                    warn!(%peer, "test ended with an error: {e}");
                    // Tell the client why, if it is still listening.
                    if !matches!(e, EngineError::Peer(_) | EngineError::Closed(_)) {
                        let _ = ctrl.send(&Message::Error {
                            message: e.to_string(),
                        });
                        // The test is over: its slot is free while the client reads why.
                        drop(slot);
                        crate::control::linger_close(ctrl.channel());
                    }
                }
            }
        }
    }
}

/// Reads a running server's counters ([`Server::stats`]).
#[derive(Clone)]
pub struct ServerStats(Arc<Shared>);

/// A server's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerSnapshot {
    /// Tests running now.
    pub tests_running: u32,
    /// Transfers running now.
    pub transfers_running: u32,
    /// Probe sessions being reflected now.
    pub probes_running: u32,
    /// Controllers' jobs running now.
    pub jobs_running: u32,
    /// Tests that ended normally.
    pub tests_finished: u64,
    /// Tests that ended with an error.
    pub tests_failed: u64,
    /// Bytes the finished tests moved (after their omit periods).
    pub test_bytes: u64,
    /// Sessions refused as busy, by cap: tests, transfers, probe sessions, jobs.
    pub refused_busy: [u64; 4],
    /// Connections dropped for holding too many handshake slots.
    pub dropped_handshakes: u64,
    /// Transfers that ended normally.
    pub transfers_finished: u64,
    /// Transfers that ended with an error.
    pub transfers_failed: u64,
    /// Bytes this server sent in transfers (`get`).
    pub transfer_bytes_sent: u64,
    /// Bytes this server received and verified in transfers (`send`).
    pub transfer_bytes_received: u64,
    /// Files the finished transfers moved.
    pub transfer_files: u64,
    /// Chunks sent again after failing verification or a broken connection.
    pub chunks_resent: u64,
    /// Chunks verified by the receiving side (this server for a `send`, the client for a `get`).
    pub chunks_verified: u64,
    /// Probe sessions served.
    pub probe_sessions: u64,
    /// Jobs that ended normally.
    pub jobs_finished: u64,
    /// Jobs refused or failed.
    pub jobs_failed: u64,
}

/// What a peer is told when the server stops under it (SIGTERM) or refuses it while stopping.
const SHUTTING_DOWN: &str = "the server is shutting down (SIGTERM: stopped by its administrator \
                             or service manager); try again once it is back";

impl ServerStats {
    /// Stops serving (SIGTERM): new conversations are refused, and running tests and transfers end
    /// within a second, each peer told why in an error message (a transfer's client resumes from
    /// its journal).
    pub fn stop_serving(&self) {
        self.0.stopping.store(true, Ordering::Release);
    }

    /// Whether the locks the accept path and the sessions take briefly can be taken (the systemd
    /// watchdog's check): a deadlock blocks this call, a poisoned lock makes it false.
    pub fn responsive(&self) -> bool {
        let s = &self.0;
        s.handshakes.lock().is_ok() && s.pending.lock().is_ok() && s.listener_buf.lock().is_ok()
    }

    /// The counters now.
    pub fn snapshot(&self) -> ServerSnapshot {
        let s = &self.0;
        let c = &s.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerSnapshot {
            tests_running: s.running.load(Ordering::Relaxed),
            transfers_running: s.transfers.load(Ordering::Relaxed),
            probes_running: s.probes.load(Ordering::Relaxed),
            jobs_running: s.jobs.load(Ordering::Relaxed),
            tests_finished: get(&c.tests_finished),
            tests_failed: get(&c.tests_failed),
            test_bytes: get(&c.test_bytes),
            refused_busy: c.refused.each_ref().map(get),
            dropped_handshakes: get(&c.dropped_handshakes),
            transfers_finished: get(&c.transfers_finished),
            transfers_failed: get(&c.transfers_failed),
            transfer_bytes_sent: get(&c.transfer_bytes_sent),
            transfer_bytes_received: get(&c.transfer_bytes_received),
            transfer_files: get(&c.transfer_files),
            chunks_resent: get(&c.chunks_resent),
            chunks_verified: get(&c.chunks_verified),
            probe_sessions: get(&c.probe_sessions),
            jobs_finished: get(&c.jobs_finished),
            jobs_failed: get(&c.jobs_failed),
        }
    }
}

/// Registers a cookie for data connections; unregisters on drop.
struct Registration<'a> {
    shared: &'a Shared,
    cookie: Cookie,
}

impl<'a> Registration<'a> {
    fn new(
        shared: &'a Shared,
        cookie: Cookie,
        gate: Option<DataGate>,
        encrypted: bool,
    ) -> (Self, Receiver<(u32, Channel)>) {
        let (tx, rx) = mpsc::sync_channel(2 * MAX_STREAMS as usize);
        shared.pending.lock().expect("pending lock").insert(
            cookie,
            Route {
                to: tx,
                gate,
                encrypted,
                udp: None,
            },
        );
        (Self { shared, cookie }, rx)
    }

    /// Routes UDP flow hellos from `client` to the session: returns where they arrive.
    fn accept_udp(&self, client: IpAddr) -> Receiver<(u32, SocketAddr)> {
        let (tx, rx) = mpsc::sync_channel(4 * MAX_STREAMS as usize);
        if let Some(r) = self
            .shared
            .pending
            .lock()
            .expect("pending lock")
            .get_mut(&self.cookie)
        {
            r.udp = Some((client.to_canonical(), tx));
        }
        rx
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared
            .pending
            .lock()
            .expect("pending lock")
            .remove(&self.cookie);
    }
}

/// Serves one admitted test session. The conversation's rules (phases, step deadlines, the server's
/// limits on a test, its end, the drain) are [`Server`](longhaul_proto::conversation::server::Server)'s;
/// this drives it: the control connection, the data connections routed by cookie, admission credit
/// for them, the listener's buffer, the streams and the clock.
fn session(shared: &Shared, ctrl: &mut Control, hello_by: Instant) -> Result<(), EngineError> {
    let origin = Instant::now();
    let peer = ctrl
        .socket()
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let cpu_start = sys::thread_cpu_time().unwrap_or_default();
    let cookie = random::cookie()?;
    let (registration, data) =
        Registration::new(shared, cookie, None, ctrl.channel().is_encrypted());
    let settings = ServerSettings {
        software: SOFTWARE.into(),
        peer: peer.clone(),
        cookie,
        key_required: shared.cfg.test_key.is_some(),
    };
    let conv = TestSession::new(
        policy(&shared.cfg),
        settings,
        // The preamble and the hello share the first step's deadline, counted from accept.
        hello_by.saturating_duration_since(origin),
    );
    let mut s = Session {
        shared,
        origin,
        peer,
        cpu_start,
        conv,
        data,
        cookie,
        udp_hellos: None,
        registration: Some(registration),
        expecting: None,
        listener_use: None,
        side: None,
        socks: Vec::new(),
        quic: Vec::new(),
        quic_plan: None,
        streams: Vec::new(),
        run: None,
        moved: None,
        record: shared
            .cfg
            .reports
            .as_ref()
            .map(|_| report::Record::default()),
    };
    let outcome = s.converse(ctrl);
    if let Some(run) = s.run.take() {
        run.abort();
        let _ = run.finish();
    }
    outcome?;
    Counts::add(&shared.counts.tests_finished, 1);
    if let Some((bytes, wall)) = s.moved {
        Counts::add(&shared.counts.test_bytes, bytes);
        info!(peer = %s.peer, bytes, seconds = wall, "test finished");
    }
    if let (Some(tx), Some(record), Some(params), Some(side)) = (
        &shared.cfg.reports,
        s.record.take(),
        s.conv.params(),
        s.side.as_ref(),
    ) && let Some(r) = record.report(params, side, &s.peer, &s.cookie, s.conv.peer_results())
    {
        let _ = tx.send(r);
    }
    Ok(())
}

/// Hands one interval of this side's streams to the `--json` record, if one is kept.
fn record_interval(
    record: &mut Option<report::Record>,
    conv: &TestSession,
    streams: &[longhaul_proto::interval::StreamInterval],
) {
    if let (Some(r), Some(p)) = (record, conv.params()) {
        r.interval(p.direction, p.streams, streams);
    }
}

/// One session's driver: the machine, and what it asked the driver to hold.
struct Session<'a> {
    shared: &'a Shared,
    origin: Instant,
    peer: String,
    cpu_start: sys::CpuTime,
    conv: TestSession,
    /// Where the data connections presenting the cookie arrive.
    data: Receiver<(u32, Channel)>,
    cookie: Cookie,
    /// A UDP test's flow hellos (index, the client's address), while the flows are collected.
    udp_hellos: Option<Receiver<(u32, SocketAddr)>>,
    registration: Option<Registration<'a>>,
    expecting: Option<Expecting<'a>>,
    listener_use: Option<ListenerUse<'a>>,
    side: Option<SidePlan>,
    /// Data connections (or UDP flows) as they arrive, by stream index (while the machine expects
    /// them).
    socks: Vec<Option<Flow>>,
    /// `--transport udp`: each flow's QUIC endpoint, listening from its hello on, and the plan
    /// they share.
    quic: Vec<Option<QuicListener>>,
    quic_plan: Option<FlowPlan>,
    /// Set-up data connections, until the start.
    streams: Vec<RunStream>,
    run: Option<Run>,
    /// Bytes moved and wall time of the finished test (for the log).
    moved: Option<(u64, f64)>,
    /// `--json`: the report of the test, gathered as it runs.
    record: Option<report::Record>,
}

impl Session<'_> {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn converse(&mut self, ctrl: &mut Control) -> Result<(), EngineError> {
        loop {
            if self.shared.stopping.load(Ordering::Acquire) {
                self.conv.refuse(SHUTTING_DOWN.into())?;
            }
            while let Some(ev) = self.conv.poll_event() {
                self.act(ev, ctrl)?;
            }
            flush(&mut self.conv, ctrl)?;
            if self.conv.is_over() {
                return Ok(());
            }
            let wake = wake_at(self.origin, self.conv.poll_timeout(), self.run.as_ref());
            if !self.socks.is_empty() && self.udp_hellos.is_some() {
                self.collect_udp_flow(ctrl, wake)?;
                continue;
            }
            if !self.socks.is_empty() {
                // Collecting the data connections: they come through the registration, not the
                // control connection (which is read again for the start).
                let left = wake.saturating_duration_since(Instant::now());
                match self.data.recv_timeout(left) {
                    Ok((index, sock)) => {
                        self.conv.data_connection(index)?;
                        if let Some(slot) = self.socks.get_mut(index as usize) {
                            *slot = Some(Flow::Tcp(Box::new(sock)));
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => self.conv.handle_timeout(self.now())?,
                    // Cannot happen while registered; wait out the step all the same.
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(left);
                        self.conv.handle_timeout(self.now())?;
                    }
                }
                continue;
            }
            match ctrl.recv_until(wake) {
                Ok(Some(m)) => self.conv.handle(m, self.now())?,
                Ok(None) => {
                    if let Some(run) = &mut self.run {
                        for (index, streams) in run.poll_intervals() {
                            record_interval(&mut self.record, &self.conv, &streams);
                            self.conv.local_interval(index, streams);
                        }
                        self.conv.progress(run.bytes_moved(), self.origin.elapsed());
                    }
                    self.conv.handle_timeout(self.now())?;
                }
                // The client may close instead of sending its results.
                Err(_) if self.conv.connection_closed() => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn act(&mut self, ev: Event, ctrl: &mut Control) -> Result<(), EngineError> {
        match ev {
            Event::CheckKey { proof } => {
                let key = self
                    .shared
                    .cfg
                    .test_key
                    .as_ref()
                    .expect("asked only with a key");
                let claimed = longhaul_transfer::digest::Digest::try_from(proof).map_err(|e| {
                    EngineError::Protocol(longhaul_proto::ProtoError::Invalid(format!(
                        "key proof: {e}"
                    )))
                })?;
                let binding = ctrl.channel().binding();
                if key
                    .verify_test(&self.cookie, binding.as_ref(), &claimed)
                    .is_err()
                {
                    self.conv.refuse(
                        "test authorization failed: the client does not hold this server's key \
                         (check --key on both ends)"
                            .into(),
                    )?;
                }
            }
            Event::Plan(params) => {
                if let Some(cc) = &params.congestion
                    && params.transport.is_tcp()
                {
                    socket::check_congestion(cc)?;
                }
                if params.is_udp() || params.transport == Transport::Quic {
                    if params.is_udp() && ctrl.channel().is_encrypted() {
                        return Err(EngineError::Unsupported(
                            "a UDP test (-u) cannot be encrypted: its datagrams are random \
                             filler; run it without --encrypt"
                                .into(),
                        ));
                    }
                    let client = ctrl
                        .socket()
                        .peer_addr()
                        .map_err(|e| EngineError::io("read the client's address", e))?;
                    self.udp_hellos = self
                        .registration
                        .as_ref()
                        .map(|r| r.accept_udp(client.ip()));
                }
                let side = socket::side_plan(&params);
                self.conv.accept(side.clone(), self.now())?;
                // Admitted within this server's limits: the client's results may be as large as the
                // test's stream count needs.
                ctrl.set_frame_limit(params.frame_limit());
                self.side = Some(side);
            }
            Event::ExpectStreams { count } if self.udp_hellos.is_some() => {
                // UDP flows hold no TCP handshake slot and need no window scale.
                self.socks = (0..count).map(|_| None).collect();
                let params = self.conv.params().expect("params before the streams");
                if params.transport == Transport::Quic {
                    let side = self.side.as_ref().expect("a plan before the streams");
                    self.quic_plan = Some(FlowPlan::new(
                        side,
                        params.congestion.as_deref(),
                        ctrl.socket().as_fd(),
                        ctrl.socket().peer_addr().is_ok_and(|a| a.is_ipv6()),
                    ));
                    self.quic = (0..count).map(|_| None).collect();
                }
            }
            Event::ExpectStreams { count } => {
                self.expecting = Expecting::new(self.shared, ctrl.socket().peer_addr().ok(), count);
                let listener_use = ListenerUse::new(self.shared);
                if let Some(side) = &self.side
                    && let BufferAction::Set { request, force } = side.window.recv.action
                {
                    listener_use.widen(request, force);
                }
                self.listener_use = Some(listener_use);
                self.socks = (0..count).map(|_| None).collect();
            }
            Event::SetUpStreams => {
                self.registration = None;
                self.expecting = None;
                self.udp_hellos = None;
                let setups = self.set_up_streams()?;
                if let Some(r) = &mut self.record {
                    r.set_up(&setups);
                }
                self.conv.streams_ready(setups, self.now());
            }
            Event::StartStreams => {
                let params = self.conv.params().expect("params before the start").clone();
                info!(peer = %self.peer, streams = params.streams, direction = ?params.direction, "test started");
                let send = send_config(&params)?;
                let run = Run::start(
                    std::mem::take(&mut self.streams),
                    &send,
                    recv_config(&params),
                    params.interval_ns,
                    params.omit_ns,
                )?;
                self.run = Some(run);
                if let Some(r) = &mut self.record {
                    r.started();
                }
                self.conv.streams_started(self.now());
            }
            Event::StopSenders { drain_by } => {
                let deadline = self.origin + drain_by;
                let run = self.run.as_mut().expect("running");
                run.stop_senders();
                // The client's senders have stopped (it sent Stop after them).
                let params = self.conv.params().expect("params before the end");
                run.drain_udp_receivers(crate::udp::receive_grace(params));
                let tail_grace = longhaul_proto::conversation::tail_grace(params);
                // Let each sender finish its last write before the last interval is read, so the
                // intervals add up to the totals; a sender still stuck at the deadline is reported by
                // `wait_all` below.
                run.wait_senders(deadline);
                // UDP receivers take the datagrams still on their way first, so that the last
                // interval has them.
                let udp_ended = params.is_udp().then(|| run.wait_all(deadline));
                for (index, streams) in run.poll_intervals() {
                    record_interval(&mut self.record, &self.conv, &streams);
                    self.conv.local_interval(index, streams);
                }
                if let Some((index, streams)) = run.final_interval() {
                    record_interval(&mut self.record, &self.conv, &streams);
                    self.conv.local_interval(index, streams);
                }
                flush(&mut self.conv, ctrl)?;
                let tail = Instant::now() + tail_grace;
                let ended = udp_ended.unwrap_or_else(|| run.end_streams(tail, deadline));
                self.conv.streams_ended(ended)?;
                let mut run = self.run.take().expect("running");
                let pace_auto = run.pace_summary();
                let (totals, worker_cpu, wall, stream_error) = run.finish();
                if let Some(e) = stream_error {
                    return Err(e);
                }
                let control_cpu = sys::thread_cpu_time().unwrap_or_default() - self.cpu_start;
                let cpu = worker_cpu + control_cpu;
                self.moved = Some((totals.iter().map(|t| t.bytes).sum(), wall));
                let results = SideResults {
                    cpu: CpuUse {
                        user_s: cpu.user.as_secs_f64(),
                        system_s: cpu.system.as_secs_f64(),
                        wall_s: wall,
                    },
                    streams: totals,
                    pace_auto,
                };
                if let Some(r) = &mut self.record {
                    r.results(&results);
                }
                self.conv.local_results(results, self.now());
            }
            Event::Finished => {}
        }
        Ok(())
    }

    /// Sets up every data connection as planned (buffers, congestion control, pacing) and returns
    /// how the kernel set each up.
    fn set_up_streams(&mut self) -> Result<Vec<SocketSetup>, EngineError> {
        let params = self.conv.params().expect("params before the streams");
        let side = self.side.as_ref().expect("a plan before the streams");
        if params.transport == Transport::Quic {
            return self.accept_quic_streams();
        }
        let opts = SocketOptions {
            plan: &side.window,
            congestion: params.congestion.as_deref(),
            flags: params.sockets,
        };
        let socks = std::mem::take(&mut self.socks);
        let mut setups = Vec::with_capacity(socks.len());
        for (i, s) in socks.into_iter().enumerate() {
            let i = i as u32;
            let sender = !params.direction.client_sends(i, params.streams);
            let s = match s.expect("all connections arrived") {
                Flow::Tcp(c) => *c,
                Flow::Udp(u) => {
                    // Set up when it said hello (its buffers before any datagram came).
                    socket::apply_flags(u.as_fd(), &params.sockets, i)?;
                    let setup = crate::udp::describe(&u, i, sender);
                    self.streams.push(RunStream::new(Flow::Udp(u), &setup));
                    setups.push(setup);
                    continue;
                }
                // Made only by `accept_quic_streams`, from the flows' sockets.
                Flow::Quic(_) => {
                    return Err(EngineError::Closed(format!(
                        "stream {i}: a QUIC connection before its set-up"
                    )));
                }
            };
            socket::apply(s.as_fd(), &opts, sender, i)?;
            let pace = socket::pacing_for(side, i, params.streams, sender);
            if let Some(p) = pace {
                socket::apply_pacing(s.as_fd(), p)?;
            }
            let setup = socket::describe(s.socket(), i, sender, pace);
            self.streams
                .push(RunStream::new(Flow::Tcp(Box::new(s)), &setup));
            setups.push(setup);
        }
        Ok(setups)
    }
}

impl Session<'_> {
    /// `--transport udp`: each flow's endpoint (listening since its hello) has its client's QUIC
    /// connection.
    fn accept_quic_streams(&mut self) -> Result<Vec<SocketSetup>, EngineError> {
        let listeners = std::mem::take(&mut self.quic);
        // Every flow is in: from here on the control connection is read again.
        self.socks.clear();
        let mut setups = Vec::with_capacity(listeners.len());
        for (i, listener) in listeners.into_iter().enumerate() {
            let Some(listener) = listener else {
                return Err(EngineError::Closed(format!(
                    "UDP transport stream {i} never said hello"
                )));
            };
            let (flow, setup) = listener.established(self.shared.cfg.handshake_timeout)?;
            // `--pace RATE`: each sending flow's share.
            let params = self.conv.params().expect("params before the streams");
            let sender = !params.direction.client_sends(i as u32, params.streams);
            if let Some(side) = &self.side
                && let Some(p) = socket::pacing_for(side, i as u32, params.streams, sender)
            {
                flow.set_pacing(p);
            }
            self.streams
                .push(RunStream::new(Flow::Quic(Box::new(flow)), &setup));
            setups.push(setup);
        }
        Ok(setups)
    }

    /// Waits (until `wake` at the latest) for a UDP flow's hello and sets the flow up: a socket bound
    /// to the address and port the client reached (the control connection's), connected to where
    /// the hello came from, with the planned buffer, answering the hello. A repeated hello is
    /// answered again; on each tick, repeats that reached the flows' own sockets are answered too.
    fn collect_udp_flow(&mut self, ctrl: &Control, wake: Instant) -> Result<(), EngineError> {
        let hellos = self.udp_hellos.as_ref().expect("collecting UDP flows");
        let left = wake
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(50));
        match hellos.recv_timeout(left) {
            Ok((index, from)) => {
                let hello = Preamble::data(self.cookie, index).encode();
                if let Some(Some(Flow::Udp(s))) = self.socks.get(index as usize) {
                    let _ = s.send(&hello);
                    return Ok(());
                }
                if let Some(Some(_)) = self.quic.get(index as usize) {
                    // A repeat from before its QUIC handshake reached the endpoint.
                    return Ok(());
                }
                self.conv.data_connection(index)?;
                let params = self.conv.params().expect("params before the streams");
                let plan = &self
                    .side
                    .as_ref()
                    .expect("a plan before the streams")
                    .window;
                let sender = !params.direction.client_sends(index, params.streams);
                let local = ctrl
                    .socket()
                    .local_addr()
                    .map_err(|e| EngineError::io("read the control connection's address", e))?;
                let sock = crate::udp::accept_flow(local, from).map_err(|e| {
                    EngineError::io(format!("open UDP stream {index} to {from}"), e)
                })?;
                if let Some(quic) = &self.quic_plan {
                    // The client needs no answer: its QUIC handshake is one.
                    let listener = QuicListener::listen(
                        sock,
                        self.shared.tls.rustls_config(),
                        quic,
                        index,
                        sender,
                    )?;
                    if let Some(slot) = self.quic.get_mut(index as usize) {
                        *slot = Some(listener);
                    }
                    return Ok(());
                }
                crate::udp::apply_buffers(&sock, plan, sender, index)?;
                sock.send(&hello)
                    .map_err(|e| EngineError::io(format!("answer UDP stream {index}"), e))?;
                if let Some(slot) = self.socks.get_mut(index as usize) {
                    *slot = Some(Flow::Udp(sock));
                }
            }
            Err(_) => {
                for s in self.socks.iter().flatten() {
                    if let Flow::Udp(u) = s {
                        crate::udp::echo_hellos(u);
                    }
                }
                self.conv.handle_timeout(self.now())?;
            }
        }
        Ok(())
    }
}

/// Sends every message the machine holds, in order.
fn flush(conv: &mut TestSession, ctrl: &mut Control) -> Result<(), EngineError> {
    while let Some(m) = conv.poll_transmit() {
        ctrl.send(&m)?;
    }
    Ok(())
}

/// One session's use of the listener's receive buffer; on drop, the buffer comes back down to what
/// the sessions still running need.
///
/// Linux fixes the window scale in the SYN-ACK from the listener's receive buffer (or `tcp_rmem[2]`,
/// whichever is larger), before the session can size the accepted socket. A window beyond
/// 65535 × 2^scale could never be advertised, so when a test needs a bigger receive window than the
/// current scale allows, the listener's buffer is raised first. Accepted sockets inherit it; every data
/// socket then gets its own planned size, so only the scale is shared.
///
/// But every later connection inherits it too, a peer's handshake connections included: a 1 GiB
/// buffer left on the listener lets any connection queue up to 2 GiB unread. So when the last session
/// needing a large buffer ends, the listener goes back to the largest need left, and at least
/// `tcp_rmem[2]` (what an autotuned socket may grow to): once set, `SO_RCVBUF` cannot be unset, and
/// accepted sockets inherit the lock that turns autotuning off, so lower would cap their windows.
struct ListenerUse<'a> {
    shared: &'a Shared,
    id: u64,
}

impl<'a> ListenerUse<'a> {
    fn new(shared: &'a Shared) -> Self {
        Self {
            shared,
            id: shared.next_session.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Makes sure sockets accepted from now on negotiate a window scale large enough for `request`.
    fn widen(&self, request: u64, force: bool) {
        let mut b = self.shared.listener_buf.lock().expect("listener lock");
        let need = b.needs.entry(self.id).or_insert(0);
        *need = (*need).max(request);
        if b.current >= request {
            return;
        }
        match sys::set_recv_buffer(self.shared.listener.as_fd(), request, force) {
            Ok(()) => b.current = request,
            Err(e) => warn!("cannot raise the listener's receive buffer for window scaling: {e}"),
        }
    }
}

impl Drop for ListenerUse<'_> {
    fn drop(&mut self) {
        let mut b = self.shared.listener_buf.lock().expect("listener lock");
        if b.needs.remove(&self.id).is_none() {
            return;
        }
        let floor = socket::kernel_limits().tcp_rmem_max / 2;
        let target = b.needs.values().copied().max().unwrap_or(0).max(floor);
        if b.current <= target {
            return;
        }
        match sys::set_recv_buffer(self.shared.listener.as_fd(), target, sys::has_net_admin()) {
            Ok(()) => b.current = target,
            Err(e) => warn!("cannot restore the listener's receive buffer: {e}"),
        }
    }
}
