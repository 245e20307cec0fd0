//! What a test's client needs before and around its conversation, whichever protocol the server
//! speaks: the configuration, the observer of the report, connecting (by family, from a bound
//! address), and the start of the report from what only this host knows.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, SystemTime};

use longhaul_proto::msg::{SidePlan, SocketSetup};
use longhaul_proto::report::{
    Connected, ConnectingTo, IntervalReport, Start, StartExtra, TestStart, Timestamp,
};
use longhaul_proto::window::{BufferAction, BufferOutcome, WindowPlan, assess};
use longhaul_proto::{Direction, EndCondition, TestParams, WindowRequest};

use crate::address::{self, Family};
use crate::tls::ClientTlsConfig;
use crate::{EngineError, SOFTWARE};

/// A UDP test's datagram length when the control connection gives no MSS: what fits a 1500-byte
/// Ethernet frame with TCP timestamps' worth of room, as iperf3's default.
pub const DEFAULT_DATAGRAM_LEN: u32 = 1448;

/// Everything a test needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Server host name or address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// Address family.
    pub family: Family,
    /// Local address to bind (`-B`).
    pub bind: Option<IpAddr>,
    /// Test parameters (`rtt_ns` is filled in by the client).
    pub params: TestParams,
    /// How long to try connecting and to wait for each handshake step.
    pub timeout: Duration,
    /// Hold the test, once set up, until this wall-clock time (a campaign's common start); `None`
    /// starts at once. The server waits for the start within its set-up deadline, so this must
    /// come well before that.
    pub start_at: Option<SystemTime>,
    /// `--encrypt`: every connection of the test in TLS 1.3, with these certificate settings.
    pub encrypt: Option<ClientTlsConfig>,
    /// The protocol the server speaks.
    pub protocol: ServerProtocol,
    /// The key a server that requires one for tests asks this client to prove (`--key`); `None`:
    /// such a server refuses the test.
    pub key: Option<longhaul_transfer::auth::Key>,
    /// `--pace auto`: estimate the bottleneck by packet trains to the server's reflector before
    /// the test, and govern the pacing of every sending side from there.
    pub pace_auto: bool,
    /// `--cport`: the client's data connections bound to this port and the next ones, one each
    /// (TCP and UDP); `None`: ephemeral ports.
    pub data_port: Option<u16>,
    /// Set (by a SIGINT or SIGTERM handler) to end the running test now: the server is told, and
    /// the report holds what ran, marked interrupted. Set before the test starts, it ends the
    /// client with [`crate::EngineError::Interrupted`]. `None`: only the test's end ends it.
    pub interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// The protocol a test speaks to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerProtocol {
    /// iperf3's on its port (5201), else longhaul's, switching to iperf3's when the server
    /// answers as an iperf3 server does.
    #[default]
    Auto,
    /// longhaul's own.
    Longhaul,
    /// iperf3's (a stock iperf3 server, or a longhaul server's iperf3 port).
    Iperf3,
}

/// Receives the report as the test goes (for live output).
pub trait Observer {
    /// The test is set up and about to start.
    fn start(&mut self, _start: &Start) {}
    /// One interval finished.
    fn interval(&mut self, _interval: &IntervalReport) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}
fn resolve(cfg: &ClientConfig) -> Result<Vec<SocketAddr>, EngineError> {
    address::resolve(&cfg.host, cfg.port, cfg.family, cfg.bind)
}

impl ClientConfig {
    /// The server as the report names it.
    pub(crate) fn connecting_to(&self) -> ConnectingTo {
        ConnectingTo {
            host: self.host.clone(),
            port: self.port,
        }
    }

    /// The local port of data connection `index`: `--cport` + `index`, or 0 (ephemeral).
    pub(crate) fn data_port(&self, index: u32) -> Result<u16, EngineError> {
        match self.data_port {
            None => Ok(0),
            Some(p) => u16::try_from(u32::from(p) + index).map_err(|_| {
                EngineError::Limit(format!(
                    "--cport {p}: data connection {index} would need a port beyond 65535"
                ))
            }),
        }
    }
}

/// A TCP socket for `server`, bound to `-B`'s address and `port` if either is given.
pub(crate) fn new_socket(
    cfg: &ClientConfig,
    server: SocketAddr,
    port: u16,
) -> Result<socket2::Socket, EngineError> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        None,
    )
    .map_err(|e| EngineError::io("create socket", e))?;
    if cfg.bind.is_some() || port != 0 {
        let ip = cfg.bind.unwrap_or_else(|| address::unspecified(server));
        let local = SocketAddr::new(ip, port);
        s.bind(&local.into())
            .map_err(|e| EngineError::io(format!("bind {local}"), e))?;
    }
    Ok(s)
}

pub(crate) fn connect_err(server: SocketAddr, e: std::io::Error) -> EngineError {
    EngineError::Connect {
        target: server.to_string(),
        source: e,
        hint: " (is `longhaul server` running there, on that port, and reachable?)",
    }
}

pub(crate) fn connect_control(cfg: &ClientConfig) -> Result<(TcpStream, SocketAddr), EngineError> {
    let mut last = None;
    for server in resolve(cfg)? {
        let s = new_socket(cfg, server, 0)?;
        match s.connect_timeout(&server.into(), cfg.timeout) {
            Ok(()) => {
                tracing::debug!("control connection to {server} open");
                return Ok((s.into(), server));
            }
            Err(e) => last = Some(connect_err(server, e)),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

/// One outcome per buffer kind that matters on this side, from the first socket of each role.
pub(crate) fn outcomes(plan: &WindowPlan, setups: &[SocketSetup]) -> Vec<BufferOutcome> {
    let mut out = Vec::new();
    if let Some(s) = setups.iter().find(|s| s.sender) {
        let granted = match plan.send.action {
            BufferAction::Autotune { max } => max,
            BufferAction::Set { .. } => s.sndbuf,
        };
        out.push(assess(plan, &plan.send, granted));
    }
    if let Some(s) = setups.iter().find(|s| !s.sender) {
        let granted = match plan.recv.action {
            BufferAction::Autotune { max } => max,
            BufferAction::Set { .. } => s.rcvbuf,
        };
        out.push(assess(plan, &plan.recv, granted));
    }
    out
}

#[allow(
    clippy::too_many_arguments,
    reason = "assembles the report from every piece of the set-up"
)]
pub(crate) fn start_report(
    connecting_to: ConnectingTo,
    encryption: Option<String>,
    params: &TestParams,
    timesecs: u64,
    cookie: &str,
    local_plan: &SidePlan,
    remote_plan: Option<&SidePlan>,
    local: &[SocketSetup],
    remote: &[SocketSetup],
) -> Start {
    let connected = local
        .iter()
        .map(|s| {
            let (lh, lp) = split_addr(&s.local);
            let (rh, rp) = split_addr(&s.remote);
            Connected {
                socket: s.stream + 1,
                local_host: lh,
                local_port: lp,
                remote_host: rh,
                remote_port: rp,
            }
        })
        .collect();
    let first = local.first();
    let fixed = match params.window {
        WindowRequest::Fixed { bytes } => bytes,
        WindowRequest::Auto => 0,
    };
    let (duration, bytes) = match params.end {
        EndCondition::Time { ns } => (ns / 1_000_000_000, 0),
        EndCondition::Bytes { bytes } => (0, bytes),
    };
    let local_buffers = outcomes(&local_plan.window, local);
    let remote_buffers = remote_plan.map_or_else(Vec::new, |p| outcomes(&p.window, remote));
    Start {
        connected,
        version: SOFTWARE.into(),
        system_info: system_info(),
        timestamp: Timestamp::from_unix(timesecs),
        connecting_to,
        cookie: cookie.into(),
        tcp_mss_default: first.map_or(0, |s| s.mss),
        sock_bufsize: fixed,
        sndbuf_actual: first.map_or(0, |s| s.sndbuf),
        rcvbuf_actual: first.map_or(0, |s| s.rcvbuf),
        test_start: TestStart {
            protocol: if params.is_udp() { "UDP" } else { "TCP" }.into(),
            num_streams: params.streams,
            blksize: params.write_len,
            omit: (params.omit_ns / 1_000_000_000) as u32,
            duration,
            bytes,
            blocks: 0,
            reverse: u8::from(params.direction == Direction::Reverse),
            tos: first.map_or(0, |s| s.tos),
            target_bitrate: params.udp.map_or(0, |u| u.rate_bps),
            bidir: u8::from(params.direction == Direction::Bidir),
            fqrate: local_plan.pacing_per_stream.first().map_or(0, |b| b * 8),
            interval: params.interval_ns as f64 / 1e9,
        },
        longhaul: StartExtra {
            rtt_ms: params.rtt_ns as f64 / 1e6,
            target_rate_bps: params.target_rate_bps,
            congestion_requested: params.congestion.clone(),
            pace_total_bps: params.pace_total_bps,
            pace_auto: None,
            // TLS sends by copy.
            zerocopy: (params.zerocopy && encryption.is_none()).then(|| {
                crate::zerocopy::ZeroCopyMethod::selected()
                    .name()
                    .to_string()
            }),
            encryption,
            local_plan: local_plan.clone(),
            local_buffers,
            remote_plan: remote_plan.cloned(),
            remote_buffers,
            local_sockets: local.to_vec(),
            remote_sockets: remote.to_vec(),
            server_protocol: if remote_plan.is_some() {
                "longhaul"
            } else {
                "iperf3"
            }
            .into(),
            quic: None,
        },
    }
}

/// Buffer outcomes that limit the run, with their fixes, plus the plans' notes.
pub(crate) fn window_warnings(x: &StartExtra) -> Vec<String> {
    if x.quic.is_some() {
        // The plans' notes are about TCP windows (RFC 7323's 1 GiB, the buffer caps).
        return Vec::new();
    }
    let mut w: Vec<String> = x.local_plan.window.notes.clone();
    for (side, list) in [("client", &x.local_buffers), ("server", &x.remote_buffers)] {
        for b in list.iter().filter(|b| b.limited) {
            w.push(format!(
                "{side} {}; fix: {}",
                b.summary,
                b.fix.clone().unwrap_or_default()
            ));
        }
    }
    w
}

fn split_addr(s: &str) -> (String, u16) {
    match s.parse::<SocketAddr>() {
        Ok(a) => (a.ip().to_string(), a.port()),
        Err(_) => (s.to_string(), 0),
    }
}

/// `uname -srvm`-like description from /proc (no libc needed).
pub fn system_info() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{} {} {} {}",
        read("/proc/sys/kernel/ostype"),
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version")
    )
}
