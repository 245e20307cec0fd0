//! `longhaul server`: many tests at once on one port.
//!
//! Every accepted connection gets a thread that reads its preamble (with a deadline). A control
//! connection becomes a test session if the server is under its cap, otherwise it is told
//! "busy, N tests running" and closed. A data connection presents a cookie and is handed to the session
//! that issued it; an unknown cookie is dropped. A transfer's data connection must also prove the
//! transfer's session key right after its preamble (`transfer::DataGate`), or it is dropped. Any error in one session — garbage, a truncated or
//! oversized message, a peer that dies — is logged, the session's sockets and threads are released, and
//! the other sessions never notice.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::msg::MAX_STREAMS;
use longhaul_proto::window::BufferAction;
use longhaul_proto::wire::{ConnKind, Cookie, PROTOCOL_VERSION, encode_frame};
use longhaul_proto::{EndCondition, Message, ProtoError, TestParams, WindowRequest};
use longhaul_sys as sys;
use longhaul_units::models::MAX_TCP_WINDOW;
use tracing::{info, warn};

use crate::control::{Control, read_preamble};
use crate::run::{RecvConfig, Run, RunStream, SendConfig};
use crate::socket::{self, SocketOptions};
use crate::transfer::DataGate;
use crate::{EngineError, SOFTWARE, random};

/// The port a server listens on unless told otherwise: 7067, the kilometres of the CERN–StarLight
/// DataTAG lightpath (seed 000). iperf3 uses 5201, so both can run side by side.
pub const DEFAULT_PORT: u16 = 7067;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to bind; `None` binds every IPv6 and IPv4 address (dual-stack `[::]`).
    pub bind: Option<IpAddr>,
    /// Port for control and data connections.
    pub port: u16,
    /// Most tests served at once; one more is refused with "busy".
    pub max_tests: u32,
    /// How long a peer may take for each handshake step before it is dropped.
    pub handshake_timeout: Duration,
    /// Files served to `longhaul send`/`get` (the root and the key), if any.
    pub files: Option<crate::transfer::ServeFiles>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: None,
            port: DEFAULT_PORT,
            max_tests: 8,
            handshake_timeout: Duration::from_secs(10),
            files: None,
        }
    }
}

/// A bound server.
pub struct Server {
    listener: Arc<TcpListener>,
    shared: Arc<Shared>,
}

/// Most connections that may be waiting to send their preamble at once. Each waits at most the
/// handshake timeout on its own thread; beyond this, new connections are closed at once, so a flood of
/// silent connections cannot exhaust threads.
const MAX_HANDSHAKING: u32 = 256;

/// Where a session waiting for data connections takes them, and for a transfer the proof they must
/// present first.
type Route = (SyncSender<(u32, TcpStream)>, Option<DataGate>);

struct Shared {
    cfg: ServerConfig,
    running: AtomicU32,
    handshaking: AtomicU32,
    pending: Mutex<HashMap<Cookie, Route>>,
    listener: Arc<TcpListener>,
    /// Receive buffer last forced on the listener (see `widen_listener`).
    listener_rcvbuf: Mutex<u64>,
}

impl Server {
    /// Binds the listening socket.
    pub fn bind(cfg: ServerConfig) -> Result<Self, EngineError> {
        let listener = Arc::new(listen(cfg.bind, cfg.port)?);
        let shared = Arc::new(Shared {
            cfg,
            running: AtomicU32::new(0),
            handshaking: AtomicU32::new(0),
            pending: Mutex::new(HashMap::new()),
            listener: Arc::clone(&listener),
            listener_rcvbuf: Mutex::new(0),
        });
        Ok(Self { listener, shared })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// Tests running now.
    pub fn running(&self) -> u32 {
        self.shared.running.load(Ordering::Relaxed)
    }

    /// Accepts connections forever.
    pub fn run(&self) -> Result<(), EngineError> {
        info!(addr = %self.local_addr(), max_tests = self.shared.cfg.max_tests, "longhaul server listening");
        loop {
            match self.listener.accept() {
                Ok((conn, peer)) => {
                    if self.shared.handshaking.load(Ordering::Acquire) >= MAX_HANDSHAKING {
                        warn!(%peer, "dropped connection: {MAX_HANDSHAKING} connections already handshaking");
                        continue;
                    }
                    self.shared.handshaking.fetch_add(1, Ordering::AcqRel);
                    let shared = Arc::clone(&self.shared);
                    let spawned = std::thread::Builder::new()
                        .name("lh-conn".into())
                        .spawn(move || handle(&shared, conn, peer));
                    if let Err(e) = spawned {
                        self.shared.handshaking.fetch_sub(1, Ordering::AcqRel);
                        warn!(%peer, "cannot start a thread for the connection: {e}");
                    }
                }
                // Out of file descriptors or similar: log, back off, keep serving.
                Err(e) => {
                    warn!("accept: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
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

fn handle(shared: &Arc<Shared>, mut conn: TcpStream, peer: SocketAddr) {
    let pre = read_preamble(&mut conn, shared.cfg.handshake_timeout);
    shared.handshaking.fetch_sub(1, Ordering::AcqRel);
    let pre = match pre {
        Ok(p) => p,
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
            let _ = std::io::Write::write_all(
                &mut conn,
                &encode_frame(&Message::Error {
                    message: e.to_string(),
                }),
            );
        }
        return;
    }
    match pre.kind {
        ConnKind::Data => {
            let tx = shared
                .pending
                .lock()
                .expect("pending lock")
                .get(&pre.cookie)
                .cloned();
            match tx {
                Some((tx, gate)) => {
                    if let Some(gate) = gate
                        && let Err(e) = gate.admit(
                            &mut conn,
                            &pre.cookie,
                            pre.stream,
                            shared.cfg.handshake_timeout,
                        )
                    {
                        warn!(%peer, "data connection refused: {e}");
                        return;
                    }
                    let _ = tx.try_send((pre.stream, conn));
                }
                None => warn!(%peer, "data connection with an unknown test cookie dropped"),
            }
        }
        ConnKind::Transfer => {
            let cap = shared.cfg.max_tests;
            let running = shared.running.fetch_add(1, Ordering::AcqRel);
            let _slot = Slot(&shared.running);
            if running >= cap {
                info!(%peer, running, cap, "refused transfer: busy");
                let msg = longhaul_transfer::Message::Error {
                    message: format!(
                        "server busy, {running} sessions running (cap {cap}); try again later"
                    ),
                };
                let _ = std::io::Write::write_all(&mut conn, &msg.encode_frame());
                return;
            }
            let cookie = match random::cookie() {
                Ok(c) => c,
                Err(e) => {
                    warn!(%peer, "refused transfer: {e}");
                    let msg = longhaul_transfer::Message::Error {
                        message: e.to_string(),
                    };
                    let _ = std::io::Write::write_all(&mut conn, &msg.encode_frame());
                    return;
                }
            };
            let gate = DataGate::default();
            let (_registration, rx) = Registration::new(shared, cookie, Some(gate.clone()));
            let widen = |request, force| widen_listener(shared, request, force);
            match crate::transfer::serve(
                conn,
                shared.cfg.files.as_ref(),
                cookie,
                &gate,
                &rx,
                shared.cfg.handshake_timeout,
                &widen,
            ) {
                Ok(Some(s)) => info!(
                    %peer,
                    direction = %s.direction,
                    files = s.files,
                    failed = s.failed.len(),
                    bytes = s.bytes_moved,
                    seconds = s.seconds,
                    "transfer done"
                ),
                Ok(None) => {}
                Err(e) => warn!(%peer, "transfer ended with an error: {e}"),
            }
        }
        ConnKind::Control => {
            let cap = shared.cfg.max_tests;
            let running = shared.running.fetch_add(1, Ordering::AcqRel);
            let _slot = Slot(&shared.running);
            let mut ctrl = Control::new(conn);
            if running >= cap {
                info!(%peer, running, cap, "refused test: busy");
                let _ = ctrl.send(&Message::Busy { running, cap });
                return;
            }
            match session(shared, &mut ctrl) {
                Ok(()) => {}
                Err(e) => {
                    warn!(%peer, "test ended with an error: {e}");
                    // Tell the client why, if it is still listening.
                    if !matches!(e, EngineError::Peer(_) | EngineError::Closed(_)) {
                        let _ = ctrl.send(&Message::Error {
                            message: e.to_string(),
                        });
                    }
                }
            }
        }
    }
}

/// Releases a test slot when the session ends, however it ends.
struct Slot<'a>(&'a AtomicU32);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
    ) -> (Self, Receiver<(u32, TcpStream)>) {
        let (tx, rx) = mpsc::sync_channel(2 * MAX_STREAMS as usize);
        shared
            .pending
            .lock()
            .expect("pending lock")
            .insert(cookie, (tx, gate));
        (Self { shared, cookie }, rx)
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

fn unexpected(m: &Message, phase: &'static str) -> EngineError {
    EngineError::Protocol(ProtoError::Unexpected {
        got: m.kind(),
        phase,
    })
}

fn session(shared: &Shared, ctrl: &mut Control) -> Result<(), EngineError> {
    let t = shared.cfg.handshake_timeout;
    let peer = ctrl
        .socket()
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let cpu_start = sys::thread_cpu_time().unwrap_or_default();
    match ctrl.recv(t, "hello")? {
        Message::Hello { .. } => {}
        m => return Err(unexpected(&m, "waiting for hello")),
    }
    let cookie = random::cookie()?;
    let (registration, rx) = Registration::new(shared, cookie, None);
    ctrl.send(&Message::Welcome {
        software: SOFTWARE.into(),
        cookie: random::hex(&cookie),
    })?;
    let params = loop {
        match ctrl.recv(t, "test parameters")? {
            Message::Ping { seq } => ctrl.send(&Message::Pong { seq })?,
            Message::Params(p) => break p,
            m => return Err(unexpected(&m, "waiting for test parameters")),
        }
    };
    if let Some(cc) = &params.congestion {
        socket::check_congestion(cc)?;
    }
    let side = socket::side_plan(&params);
    if let BufferAction::Set { request, force } = side.window.recv.action {
        widen_listener(shared, request, force);
    }
    ctrl.send(&Message::Accepted(side.clone()))?;

    // Collect the data connections.
    let total = params.direction.connections(params.streams);
    let mut socks: Vec<Option<TcpStream>> = (0..total).map(|_| None).collect();
    let deadline = Instant::now() + t;
    let mut arrived = 0;
    while arrived < total {
        let left = deadline.saturating_duration_since(Instant::now());
        let (idx, s) = rx.recv_timeout(left).map_err(|_| {
            EngineError::Timeout(format!("{} data connections from {peer}", total - arrived))
        })?;
        match socks.get_mut(idx as usize) {
            Some(slot @ None) => {
                *slot = Some(s);
                arrived += 1;
            }
            _ => {
                return Err(
                    ProtoError::Invalid(format!("bad or duplicate stream index {idx}")).into(),
                );
            }
        }
    }
    drop(registration);

    let opts = SocketOptions {
        plan: &side.window,
        congestion: params.congestion.as_deref(),
    };
    let mut setups = Vec::with_capacity(total as usize);
    let mut streams = Vec::with_capacity(total as usize);
    for (i, s) in socks.into_iter().enumerate() {
        let s = s.expect("all connections arrived");
        let i = i as u32;
        let sender = !params.direction.client_sends(i, params.streams);
        socket::apply(s.as_fd(), &opts, sender, i)?;
        let pace = socket::pacing_for(&side, i, params.streams, sender);
        if let Some(p) = pace {
            socket::apply_pacing(s.as_fd(), p)?;
        }
        let setup = socket::describe(&s, i, sender, pace);
        streams.push(RunStream {
            index: i,
            sender,
            sock: s,
            congestion: setup.congestion.clone(),
            mss: setup.mss,
        });
        setups.push(setup);
    }
    ctrl.send(&Message::StreamsReady { sockets: setups })?;
    match ctrl.recv(t, "start")? {
        Message::Start => {}
        m => return Err(unexpected(&m, "waiting for start")),
    }
    info!(%peer, streams = params.streams, direction = ?params.direction, "test started");
    let send = send_config(&params)?;
    let mut run = Run::start(
        streams,
        &send,
        recv_config(&params),
        params.interval_ns,
        params.omit_ns,
    )?;
    let outcome = serve_running(ctrl, &mut run, &params);
    if outcome.is_err() {
        run.abort();
    }
    let (totals, worker_cpu, wall, stream_error) = run.finish();
    outcome?;
    if let Some(e) = stream_error {
        return Err(e);
    }
    let control_cpu = sys::thread_cpu_time().unwrap_or_default() - cpu_start;
    let cpu = worker_cpu + control_cpu;
    let bytes: u64 = totals.iter().map(|t| t.bytes).sum();
    ctrl.send(&Message::Results(longhaul_proto::msg::SideResults {
        cpu: longhaul_proto::msg::CpuUse {
            user_s: cpu.user.as_secs_f64(),
            system_s: cpu.system.as_secs_f64(),
            wall_s: wall,
        },
        streams: totals,
    }))?;
    // The client answers with its own results; wait briefly so it can read ours before we close.
    let _ = ctrl.recv(Duration::from_secs(5), "client results");
    info!(%peer, bytes, seconds = wall, "test finished");
    Ok(())
}

/// The running phase on the server: interval reports until the client says stop, then drain.
fn serve_running(
    ctrl: &mut Control,
    run: &mut Run,
    params: &TestParams,
) -> Result<(), EngineError> {
    loop {
        // Wake at least once a second so a dead client is noticed even without interval reports.
        let wake = run
            .next_tick()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(1));
        match ctrl.recv_until(wake.min(Instant::now() + Duration::from_secs(1)))? {
            Some(Message::Stop) => break,
            Some(m) => return Err(unexpected(&m, "running")),
            None => {
                for (index, streams) in run.poll_intervals() {
                    if run.has_senders() {
                        ctrl.send(&Message::Interval(longhaul_proto::msg::IntervalSample {
                            index,
                            streams,
                        }))?;
                    }
                }
            }
        }
    }
    run.stop_senders();
    let deadline = Instant::now() + drain_timeout(params);
    // Let each sender finish its last write before the last interval is read, so the intervals add up
    // to the totals; a sender still stuck at the deadline is reported by `wait_all` below.
    run.wait_senders(deadline);
    for (index, streams) in run.poll_intervals() {
        if run.has_senders() {
            ctrl.send(&Message::Interval(longhaul_proto::msg::IntervalSample {
                index,
                streams,
            }))?;
        }
    }
    if let Some((index, streams)) = run.final_interval()
        && run.has_senders()
    {
        ctrl.send(&Message::Interval(longhaul_proto::msg::IntervalSample {
            index,
            streams,
        }))?;
    }
    if !run.wait_all(deadline) {
        return Err(EngineError::Timeout("the client's streams to end".into()));
    }
    Ok(())
}

/// How long to let queued data drain after the end: generous, since a long path with large buffers can
/// hold seconds of data.
pub(crate) fn drain_timeout(params: &TestParams) -> Duration {
    Duration::from_secs(15) + Duration::from_nanos(params.rtt_ns.saturating_mul(20))
}

pub(crate) fn send_config(params: &TestParams) -> Result<SendConfig, EngineError> {
    let write_len = params.write_len as usize;
    let method = crate::zerocopy::method(params.zerocopy, write_len)?;
    let budget_per_stream = match params.end {
        EndCondition::Bytes { bytes } => Some(bytes.div_ceil(u64::from(params.streams))),
        EndCondition::Time { .. } => None,
    };
    Ok(SendConfig {
        method,
        write_len,
        budget_per_stream,
    })
}

/// How receivers read: at least 1 MiB at a time, so small `-l` writes do not turn into small reads; and
/// with a fixed `-w`, the window each receiver holds.
pub(crate) fn recv_config(params: &TestParams) -> RecvConfig {
    RecvConfig {
        read_len: (params.write_len as usize).max(1024 * 1024),
        window: match params.window {
            WindowRequest::Fixed { bytes } => Some(bytes.min(MAX_TCP_WINDOW)),
            WindowRequest::Auto => None,
        },
    }
}

/// Makes sure sockets accepted from now on negotiate a TCP window scale large enough for `request`.
///
/// Linux fixes the window scale in the SYN-ACK from the listener's receive buffer (or `tcp_rmem[2]`,
/// whichever is larger), before the session can size the accepted socket. A window beyond
/// 65535 × 2^scale could never be advertised, so when a test needs a bigger receive window than the
/// current scale allows, the listener's buffer is raised first. Accepted sockets inherit it; every data
/// socket then gets its own planned size, so only the scale is shared.
fn widen_listener(shared: &Shared, request: u64, force: bool) {
    let mut current = shared.listener_rcvbuf.lock().expect("listener lock");
    if *current >= request {
        return;
    }
    match sys::set_recv_buffer(shared.listener.as_fd(), request, force) {
        Ok(()) => *current = request,
        Err(e) => warn!("cannot raise the listener's receive buffer for window scaling: {e}"),
    }
}
