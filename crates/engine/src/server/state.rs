//! What every part of a server shares: its configuration, the state all sessions see (caps,
//! counters, sessions waiting for their data connections, connections still handshaking), the
//! admission rules for new connections, and the policy a test's conversation enforces.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::conversation::server::ServerPolicy;
use longhaul_proto::wire::Cookie;
use tracing::warn;

use crate::channel::Channel;
use crate::tls::ServerTls;
use crate::transfer::DataGate;

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
    /// Most transfers served at once (a separate cap: unauthenticated tests cannot fill it).
    pub max_transfers: u32,
    /// Most probe sessions reflected at once (`longhaul monitor`'s latency tests; a separate cap,
    /// as each is a thread that mostly sleeps).
    pub max_probes: u32,
    /// How long a peer may take for each whole handshake step before it is dropped.
    pub handshake_timeout: Duration,
    /// Longest test: a longer `-t` is refused, and any test still running after it (plus grace) ends.
    pub max_duration: Duration,
    /// A running test in which no stream moved a byte for this long is ended.
    pub stall_timeout: Duration,
    /// Most streams (`-P`) of one test.
    pub max_streams: u32,
    /// Most socket-buffer bytes one test may make this server request (as the kernel grants them:
    /// twice each setsockopt request), over all its data connections.
    pub max_test_memory: u64,
    /// Files served to `longhaul send`/`get` (the root and the key), if any.
    pub files: Option<crate::transfer::ServeFiles>,
    /// Controllers whose jobs this server runs (`--controllers FILE`); none by default.
    pub controllers: Arc<crate::job::Controllers>,
    /// `--encrypt` (TLS): this server's certificate, the CA its clients' certificates must come
    /// from, and whether plaintext is refused. Encrypted connections are accepted in any case.
    pub tls: crate::tls::ServerTlsConfig,
    /// The port where stock iperf3 clients are served (TCP and UDP; 0: any free one), if any. A
    /// port already taken (a stock iperf3 server) is logged and skipped.
    pub iperf3_port: Option<u16>,
    /// Highest rate of one test, all streams and both directions, bit/s (`--max-rate`).
    pub max_rate_bps: Option<u64>,
    /// Whether UDP tests are served (`--no-udp` turns them off).
    pub allow_udp: bool,
    /// The client networks tests (longhaul's and iperf3's) are served to; empty: any.
    pub allow_from: Vec<ipnet::IpNet>,
    /// Tests only for clients that prove they hold this key (`--require-key`, the key file
    /// transfers use); iperf3 clients, which cannot, are refused. `None`: tests for anyone admitted.
    pub test_key: Option<longhaul_transfer::auth::Key>,
    /// `--json`: each longhaul test's report from this server's side, sent here as it ends
    /// (also when the client stopped it early).
    pub reports: Option<std::sync::mpsc::Sender<longhaul_proto::report::Report>>,
}

impl ServerConfig {
    /// Whether a test from `peer` may run (`--allow-from`); the refusal names the address.
    pub fn admits(&self, peer: IpAddr) -> Result<(), String> {
        let ip = peer.to_canonical();
        if self.allow_from.is_empty() || self.allow_from.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        Err(format!(
            "tests from {ip} are not served here: its network is not in this server's --allow-from"
        ))
    }

    /// Whether a stock iperf3 client at `peer` may test: as [`Self::admits`], and never when tests
    /// need the key (an iperf3 client cannot prove it).
    pub fn admits_iperf3(&self, peer: IpAddr) -> Result<(), String> {
        self.admits(peer)?;
        if self.test_key.is_some() {
            return Err(
                "test authorization failed: this server serves tests only to clients \
                        that hold its key (--require-key), which iperf3 clients cannot prove; \
                        use longhaul test --key FILE"
                    .into(),
            );
        }
        Ok(())
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: None,
            port: DEFAULT_PORT,
            max_tests: 8,
            max_transfers: 8,
            max_probes: 256,
            handshake_timeout: Duration::from_secs(10),
            max_duration: Duration::from_secs(86_400),
            stall_timeout: Duration::from_secs(60),
            max_streams: 128,
            max_test_memory: 8 << 30,
            files: None,
            controllers: Arc::default(),
            tls: crate::tls::ServerTlsConfig::default(),
            iperf3_port: Some(longhaul_proto::iperf3::DEFAULT_PORT),
            max_rate_bps: None,
            allow_udp: true,
            allow_from: Vec::new(),
            test_key: None,
            reports: None,
        }
    }
}
/// Most connections that may be waiting to send their preamble at once. Each waits at most the
/// handshake timeout on its own thread; beyond this, new connections are closed at once, so a flood of
/// silent connections cannot exhaust threads.
pub const MAX_HANDSHAKING: u32 = 1024;
/// Most connections from one source (IPv4 address, IPv6 /64) waiting for their preamble at once,
/// beyond the data connections its sessions are waiting for. A host trickling preambles holds at most
/// this many slots for at most one handshake timeout each, and other sources keep the rest.
pub const MAX_HANDSHAKING_PER_SOURCE: u32 = 32;
/// Where a session waiting for data connections takes them, and for a transfer the proof they must
/// present first.
pub(super) struct Route {
    pub(super) to: SyncSender<(u32, Channel)>,
    pub(super) gate: Option<DataGate>,
    /// The session's control connection is encrypted, so its data connections must be.
    pub(super) encrypted: bool,
    /// A UDP test's flows: the address its control connection came from (a hello from any other is
    /// ignored) and where the session takes each flow's index and the address it said hello from.
    pub(super) udp: Option<(IpAddr, SyncSender<(u32, SocketAddr)>)>,
}

pub(super) struct Shared {
    pub(super) cfg: ServerConfig,
    pub(super) tls: ServerTls,
    pub(super) running: AtomicU32,
    pub(super) transfers: AtomicU32,
    pub(super) probes: AtomicU32,
    pub(super) jobs: AtomicU32,
    pub(super) counts: Counts,
    pub(super) handshakes: Mutex<Handshakes>,
    pub(super) pending: Mutex<HashMap<Cookie, Route>>,
    pub(super) listener: Arc<TcpListener>,
    /// What the running sessions need of the listener's receive buffer (see `widen_listener`).
    pub(super) listener_buf: Mutex<ListenerBuf>,
    pub(super) next_session: AtomicU64,
    /// Set on SIGTERM ([`super::ServerStats::stop_serving`]): new conversations are refused and
    /// running tests end, each peer told why.
    pub(super) stopping: std::sync::atomic::AtomicBool,
}

/// Connections waiting for their preamble, per source and in all (`total` counts only those admitted
/// under the general cap), and the data connections each source's sessions are waiting for.
#[derive(Default)]
pub(super) struct Handshakes {
    pub(super) total: u32,
    pub(super) per_source: HashMap<IpAddr, u32>,
    pub(super) expecting: HashMap<IpAddr, u32>,
}

/// The listener's receive buffer: the request in force, and each running session's need.
pub(super) struct ListenerBuf {
    /// Request last applied to the listener (0: never set, the kernel's default).
    pub(super) current: u64,
    /// Largest request of each session that widened it.
    pub(super) needs: HashMap<u64, u64>,
}
/// The source a connection is counted under: its IPv4 address, or the /64 of its IPv6 address (one
/// host usually holds a whole /64).
pub(super) fn source_of(peer: SocketAddr) -> IpAddr {
    match peer.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(
                u128::from(v6) & 0xffff_ffff_ffff_ffff_0000_0000_0000_0000,
            )),
        },
        v4 => v4,
    }
}

/// One connection counted as handshaking (for its source, and maybe in all) until it is dropped.
pub(super) struct Handshaking {
    pub(super) shared: Arc<Shared>,
    pub(super) source: IpAddr,
    /// Counted in `Handshakes::total` (admitted under the general cap).
    pub(super) general: bool,
}

impl Handshaking {
    /// Counts a new connection from `peer`, or logs why it is dropped (`None`).
    ///
    /// The rule: a source whose sessions wait for `e` > 0 data connections may have up to
    /// `e` + [`MAX_HANDSHAKING_PER_SOURCE`] connections handshaking, outside the global cap (they are
    /// bounded by the sessions' own caps: tests × connections per test). Any other source may have
    /// [`MAX_HANDSHAKING_PER_SOURCE`], while fewer than [`MAX_HANDSHAKING`] such connections are
    /// handshaking in all. A client opens its data connections in a burst, faster than the server
    /// reads their preambles, so the data connections of a running session must never depend on
    /// slots that strangers can fill.
    pub(super) fn admit(shared: &Arc<Shared>, peer: SocketAddr) -> Option<Self> {
        let source = source_of(peer);
        let mut h = shared.handshakes.lock().expect("handshakes lock");
        let n = h.per_source.get(&source).copied().unwrap_or(0);
        let expecting = h.expecting.get(&source).copied().unwrap_or(0);
        let general = if expecting > 0 {
            if n >= expecting.saturating_add(MAX_HANDSHAKING_PER_SOURCE) {
                warn!(%peer, "dropped connection: {n} connections from {source} already handshaking ({expecting} expected by its sessions)");
                Counts::add(&shared.counts.dropped_handshakes, 1);
                return None;
            }
            false
        } else {
            if n >= MAX_HANDSHAKING_PER_SOURCE {
                warn!(%peer, "dropped connection: {MAX_HANDSHAKING_PER_SOURCE} connections from {source} already handshaking");
                Counts::add(&shared.counts.dropped_handshakes, 1);
                return None;
            }
            if h.total >= MAX_HANDSHAKING {
                warn!(%peer, "dropped connection: {MAX_HANDSHAKING} connections already handshaking");
                Counts::add(&shared.counts.dropped_handshakes, 1);
                return None;
            }
            h.total += 1;
            true
        };
        *h.per_source.entry(source).or_insert(0) += 1;
        Some(Self {
            shared: Arc::clone(shared),
            source,
            general,
        })
    }
}

/// Data connections a session from `source` waits for, counted for admission until dropped.
pub(super) struct Expecting<'a> {
    pub(super) shared: &'a Shared,
    pub(super) source: IpAddr,
    pub(super) count: u32,
}

impl<'a> Expecting<'a> {
    pub(super) fn new(shared: &'a Shared, peer: Option<SocketAddr>, count: u32) -> Option<Self> {
        let source = source_of(peer?);
        let mut h = shared.handshakes.lock().expect("handshakes lock");
        let e = h.expecting.entry(source).or_insert(0);
        *e = e.saturating_add(count);
        Some(Self {
            shared,
            source,
            count,
        })
    }
}

impl Drop for Expecting<'_> {
    fn drop(&mut self) {
        let mut h = self.shared.handshakes.lock().expect("handshakes lock");
        if let Some(e) = h.expecting.get_mut(&self.source) {
            *e = e.saturating_sub(self.count);
            if *e == 0 {
                h.expecting.remove(&self.source);
            }
        }
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        let mut h = self.shared.handshakes.lock().expect("handshakes lock");
        if self.general {
            h.total -= 1;
        }
        if let Some(n) = h.per_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                h.per_source.remove(&self.source);
            }
        }
    }
}
/// What a server has done since it started, counted with plain atomics (no lock on any path).
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) tests_finished: AtomicU64,
    pub(super) tests_failed: AtomicU64,
    pub(super) test_bytes: AtomicU64,
    pub(super) refused: [AtomicU64; 4],
    pub(super) dropped_handshakes: AtomicU64,
    pub(super) transfers_finished: AtomicU64,
    pub(super) transfers_failed: AtomicU64,
    pub(super) transfer_bytes_sent: AtomicU64,
    pub(super) transfer_bytes_received: AtomicU64,
    pub(super) transfer_files: AtomicU64,
    pub(super) chunks_resent: AtomicU64,
    pub(super) chunks_verified: AtomicU64,
    pub(super) probe_sessions: AtomicU64,
    pub(super) jobs_finished: AtomicU64,
    pub(super) jobs_failed: AtomicU64,
}

/// Which cap refused a session as busy (an index into `Counts::refused`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Busy {
    Test = 0,
    Transfer = 1,
    Probe = 2,
    Job = 3,
}

impl Counts {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn refused(&self, what: Busy) {
        Self::add(&self.refused[what as usize], 1);
    }
}
/// Releases a slot (a test's, a transfer's, a probe session's) when its session ends, however
/// it ends.
pub(super) struct Slot<'a>(pub(super) &'a AtomicU32);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
/// The conversation's limits from this server's configuration.
pub(super) fn policy(cfg: &ServerConfig) -> ServerPolicy {
    ServerPolicy {
        max_rate_bps: cfg.max_rate_bps,
        allow_udp: cfg.allow_udp,
        handshake_timeout: cfg.handshake_timeout,
        max_duration: cfg.max_duration,
        stall_timeout: cfg.stall_timeout,
        max_streams: cfg.max_streams,
        max_test_memory: cfg.max_test_memory,
    }
}

/// Accepts connections on `listener` forever: each one that [`Handshaking::admit`] lets in is
/// handled on a thread named `thread` by `handle(conn, peer, end of its first step, its slot)`; an
/// accept error (out of file descriptors, say) is logged and backed off, and serving goes on.
pub(super) fn accept_forever<H>(
    shared: &Arc<Shared>,
    listener: &TcpListener,
    thread: &str,
    handle: H,
) -> !
where
    H: Fn(TcpStream, SocketAddr, Instant, Handshaking) + Clone + Send + 'static,
{
    loop {
        match listener.accept() {
            Ok((conn, peer)) => {
                let deadline = Instant::now() + shared.cfg.handshake_timeout;
                let Some(hs) = Handshaking::admit(shared, peer) else {
                    continue;
                };
                let handle = handle.clone();
                let spawned = std::thread::Builder::new()
                    .name(thread.into())
                    .spawn(move || handle(conn, peer, deadline, hs));
                if let Err(e) = spawned {
                    warn!(%peer, "cannot start a thread for the connection: {e}");
                }
            }
            Err(e) => {
                warn!("accept on {thread}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Reads datagrams (of up to 2 KiB) from `sock` forever, handing each with its sender to `on`; a
/// read error is logged and backed off.
pub(super) fn receive_forever(
    sock: &UdpSocket,
    what: &str,
    mut on: impl FnMut(&[u8], SocketAddr),
) -> ! {
    let mut buf = [0u8; 2048];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => on(&buf[..n], from),
            Err(e) => {
                warn!("{what}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}
