//! The probe stream over real sockets (`longhaul_proto::probe` has the rules): [`serve`] is the
//! server's reflector for one session, [`run_probe`] the client that sends the probes and reads
//! the replies. `longhaul monitor`'s latency tests run [`run_probe`] on one host of each pair,
//! asked by the controller, against the other's server.
//!
//! Timestamps are the Unix clock (one-way delays need it), read as each probe goes and as each
//! reply comes; the reflector stamps its receive and send times the same way.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant, SystemTime};

use longhaul_proto::probe::{
    HEADER_LEN, MAX_SIZE, PROBE_VERSION, ProbeMessage, ProbeStats, ProbeSummary, Reflector,
    parse_session, session_hex,
};
use longhaul_proto::wire::Preamble;
use tracing::info;

use crate::address::{self, Family};
use crate::channel::Channel;
use crate::clock::unix_ns;
use crate::control::{self, Conn};
use crate::{EngineError, random};

/// A probe stream's control connection.
type ProbeConn = Conn<ProbeMessage>;

/// How long a session may outlive its probes (the client's wait for the last replies, a slow
/// stop): after that the server ends it whatever the client does.
const GRACE: Duration = Duration::from_secs(30);

/// How often the reflector looks at the control connection between datagrams.
const POLL: Duration = Duration::from_millis(100);

fn now_ns() -> u64 {
    unix_ns(SystemTime::now())
}

/// Serves one probe session on `conn` (after its preamble; the server counted it against
/// `--max-probes`): the hello by `deadline`, a session no longer than `max_duration`, a UDP socket
/// on the address the client reached, reflection by the [`Reflector`]'s rules until the client
/// stops (or its probes' time plus [`GRACE`] passes), then B's counts.
pub(crate) fn serve(
    conn: Channel,
    deadline: Instant,
    max_duration: Duration,
) -> Result<(), EngineError> {
    let mut ctl = ProbeConn::new(conn);
    let result = serve_on(&mut ctl, deadline, max_duration);
    if let Err(e) = &result
        && !matches!(e, EngineError::Peer(_) | EngineError::Closed(_))
    {
        let _ = ctl.send(&ProbeMessage::Error {
            message: e.for_peer(),
        });
        control::linger_close(ctl.channel());
    }
    result
}

fn serve_on(
    ctl: &mut ProbeConn,
    deadline: Instant,
    max_duration: Duration,
) -> Result<(), EngineError> {
    let (version, interval_ns, size, count) = match ctl.recv_by(deadline, "probe hello")? {
        ProbeMessage::ProbeHello {
            version,
            interval_ns,
            size,
            count,
            ..
        } => (version, interval_ns, size, count),
        m => return Err(unexpected(&m, "probe hello")),
    };
    if version != PROBE_VERSION {
        return Err(EngineError::Version {
            ours: PROBE_VERSION,
            theirs: version,
        });
    }
    let length = Duration::from_nanos(interval_ns.saturating_mul(count));
    if length > max_duration {
        return Err(EngineError::Transfer(format!(
            "a probe session of {} s is longer than this server allows ({} s, --max-duration)",
            length.as_secs(),
            max_duration.as_secs()
        )));
    }
    let tcp = ctl.socket();
    let local = tcp
        .local_addr()
        .map_err(|e| EngineError::io("read the control connection's address", e))?;
    let peer = tcp
        .peer_addr()
        .map_err(|e| EngineError::io("read the control connection's peer", e))?;
    let udp = UdpSocket::bind(SocketAddr::new(local.ip(), 0))
        .map_err(|e| EngineError::io(format!("bind a UDP socket on {}", local.ip()), e))?;
    udp.set_read_timeout(Some(POLL))
        .map_err(|e| EngineError::io("set the probe socket's timeout", e))?;
    let udp_port = udp
        .local_addr()
        .map_err(|e| EngineError::io("read the probe socket's address", e))?
        .port();
    let mut session = [0u8; 16];
    random::fill(&mut session, "a probe session id")?;
    let synced = longhaul_sys::clock_synchronized();
    ctl.send(&ProbeMessage::ProbeAccept {
        udp_port,
        session: session_hex(&session),
        synced,
    })?;
    info!(%peer, udp_port, count, interval_ns, size, "probe session started");
    let mut reflector = Reflector::new(session, size, count, synced);
    let end = Instant::now() + length + GRACE;
    let mut buf = vec![0u8; MAX_SIZE + 1];
    let mut next_poll = Instant::now() + POLL;
    loop {
        match udp.recv_from(&mut buf) {
            Ok((n, from)) => {
                let at = now_ns();
                if let Some(len) =
                    reflector.reflect(&mut buf, n, same_host(from.ip(), peer.ip()), at)
                {
                    Reflector::stamp(&mut buf, now_ns());
                    // A reply that cannot go (a full buffer, an ICMP error from the client's
                    // host) is a lost reply, which the client counts.
                    let _ = udp.send_to(&buf[..len], from);
                }
            }
            Err(e) if control::is_timeout(&e) || e.kind() == std::io::ErrorKind::Interrupted => {}
            // An ICMP port-unreachable from an earlier reply surfaces here on Linux: not fatal.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(EngineError::io("receive probes", e)),
        }
        let now = Instant::now();
        if now >= next_poll {
            next_poll = now + POLL;
            // A look, not a wait: at most a millisecond for a frame already on its way.
            if let Some(m) = ctl.recv_until(now + Duration::from_millis(1))? {
                match m {
                    ProbeMessage::ProbeStop => break,
                    m => return Err(unexpected(&m, "the probes' end")),
                }
            }
        }
        if now >= end {
            break;
        }
    }
    ctl.send(&reflector.done())?;
    control::linger_close(ctl.channel());
    Ok(())
}

/// Whether a datagram's source is the control connection's peer (an IPv4 peer may show as its
/// IPv4-mapped IPv6 address on a dual-stack socket).
fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

fn unexpected(m: &ProbeMessage, waiting_for: &str) -> EngineError {
    EngineError::Protocol(longhaul_proto::ProtoError::Invalid(format!(
        "unexpected {} while waiting for {waiting_for}",
        longhaul_proto::frame::Framed::kind(m)
    )))
}

/// A probe session a client runs.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The server that reflects.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Address family.
    pub family: Family,
    /// Time between probes.
    pub interval: Duration,
    /// Bytes of each probe.
    pub size: u32,
    /// How many probes.
    pub count: u64,
    /// Connect timeout and the wait for each control answer.
    pub timeout: Duration,
}

/// How long the client waits for the last replies after its last probe: the longest round trip
/// seen, three times over, and at least this.
const MIN_LINGER: Duration = Duration::from_secs(1);

/// Runs one probe session against `cfg.host` and returns what it measured.
pub fn run_probe(cfg: &ProbeConfig) -> Result<ProbeSummary, EngineError> {
    if cfg.interval.as_nanos() < u128::from(longhaul_proto::probe::MIN_INTERVAL_NS)
        || !(HEADER_LEN..=MAX_SIZE).contains(&(cfg.size as usize))
        || cfg.count == 0
    {
        return Err(EngineError::Protocol(longhaul_proto::ProtoError::Invalid(
            format!(
                "probe interval {:?}, size {} or count {} out of range",
                cfg.interval, cfg.size, cfg.count
            ),
        )));
    }
    let sock = address::connect_any(
        &cfg.host,
        cfg.port,
        cfg.family,
        cfg.timeout,
        " (is `longhaul server` running there, on that port?)",
    )?;
    let channel = Channel::plain(sock);
    channel
        .write_all(&Preamble::probe().encode())
        .map_err(|e| EngineError::io("send the probe preamble", e))?;
    let mut ctl = ProbeConn::new(channel);
    let a_synced = longhaul_sys::clock_synchronized();
    ctl.send(&ProbeMessage::ProbeHello {
        version: PROBE_VERSION,
        interval_ns: u64::try_from(cfg.interval.as_nanos()).unwrap_or(u64::MAX),
        size: cfg.size,
        count: cfg.count,
        synced: a_synced,
    })?;
    let (udp_port, session) = match ctl.recv(cfg.timeout, "the probe session's acceptance")? {
        ProbeMessage::ProbeAccept {
            udp_port, session, ..
        } => (udp_port, parse_session(&session)?),
        m => return Err(unexpected(&m, "the probe session's acceptance")),
    };
    let tcp = ctl.socket();
    let local = tcp
        .local_addr()
        .map_err(|e| EngineError::io("read the control connection's address", e))?;
    let server = tcp
        .peer_addr()
        .map_err(|e| EngineError::io("read the control connection's peer", e))?;
    // From the control connection's own address, so the reflector knows the probes as ours.
    let udp = UdpSocket::bind(SocketAddr::new(local.ip(), 0))
        .map_err(|e| EngineError::io(format!("bind a UDP socket on {}", local.ip()), e))?;
    let target = SocketAddr::new(server.ip(), udp_port);
    udp.connect(target)
        .map_err(|e| EngineError::io(format!("connect the probe socket to {target}"), e))?;
    let mut stats = ProbeStats::new(session, cfg.count, a_synced);
    let mut out = vec![0u8; cfg.size as usize];
    let start = Instant::now();
    let receive_until = |stats: &mut ProbeStats, until: Instant| -> Result<(), EngineError> {
        let mut inb = vec![0u8; MAX_SIZE + 1];
        loop {
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            udp.set_read_timeout(Some((until - now).max(Duration::from_micros(100))))
                .map_err(|e| EngineError::io("set the probe socket's timeout", e))?;
            match udp.recv(&mut inb) {
                Ok(n) => stats.reply(&inb[..n], now_ns()),
                Err(e)
                    if control::is_timeout(&e)
                        || e.kind() == std::io::ErrorKind::Interrupted
                        || e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(EngineError::io("receive probe replies", e)),
            }
        }
    };
    for i in 0..cfg.count {
        let at = start
            + cfg
                .interval
                .saturating_mul(u32::try_from(i).unwrap_or(u32::MAX));
        receive_until(&mut stats, at)?;
        stats.next(&mut out, now_ns());
        // A probe that cannot go (ICMP unreachable reported back, a full buffer) is lost.
        let _ = udp.send(&out);
    }
    let linger = (Duration::from_nanos(stats.longest_rtt_ns()) * 3).max(MIN_LINGER);
    receive_until(&mut stats, Instant::now() + linger)?;
    ctl.send(&ProbeMessage::ProbeStop)?;
    let b_received = match ctl.recv(cfg.timeout, "the server's probe counts")? {
        ProbeMessage::ProbeDone { received, .. } => Some(received),
        m => return Err(unexpected(&m, "the server's probe counts")),
    };
    Ok(stats.summary(b_received))
}
