//! The probe stream over real sockets (`longhaul_proto::probe` has the rules): [`serve`] is the
//! server's reflector for one session, [`run_probe`] the client that sends the probes and reads
//! the replies. `longhaul monitor`'s latency tests run [`run_probe`] on one host of each pair,
//! asked by the controller, against the other's server.
//!
//! Timestamps are the Unix clock (one-way delays need it), read as each probe goes and as each
//! reply comes; the reflector stamps its receive and send times the same way.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

use longhaul_proto::auto_pace::{BottleneckEstimate, TRAIN_LEN, TRAINS, TrainTiming};
use longhaul_proto::probe::{
    HEADER_LEN, MAX_SIZE, PROBE_VERSION, Probe, ProbeMessage, ProbeStats, ProbeSummary, Reflector,
    SessionId, parse_session, session_hex,
};
use longhaul_proto::wire::Preamble;
use longhaul_sys::udp::RecvBatch;
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
    // Until the client's first probe, any source; then the socket is connected to it (only its
    // datagrams come in) and read in batches with the kernel's receive times, so a train's spacing
    // is the path's, not this loop's.
    let mut batch: Option<RecvBatch> = None;
    loop {
        let got = match &mut batch {
            None => udp.recv_from(&mut buf).map(|(n, from)| {
                let at = now_ns();
                if let Some(len) =
                    reflector.reflect(&mut buf, n, same_host(from.ip(), peer.ip()), at)
                {
                    Reflector::stamp(&mut buf, now_ns());
                    // A reply that cannot go (a full buffer, an ICMP error from the client's
                    // host) is a lost reply, which the client counts.
                    let _ = udp.send_to(&buf[..len], from);
                    if udp.connect(from).is_ok() {
                        let _ = longhaul_sys::udp::set_receive_info(udp.as_fd());
                        batch = Some(RecvBatch::new(64, MAX_SIZE + 1));
                    }
                }
            }),
            Some(b) => b.recv(udp.as_fd()).map(|n| {
                // The replies of a batch leave together, as the probes came (a train stays one).
                let mut replies: Vec<Vec<u8>> = Vec::with_capacity(n);
                for i in 0..n {
                    let m = b.message(i);
                    let mut reply = m.data.to_vec();
                    let len = reply.len();
                    let at = m.kernel_ns.unwrap_or_else(now_ns);
                    if let Some(len) = reflector.reflect(&mut reply, len, true, at) {
                        reply.truncate(len);
                        replies.push(reply);
                    }
                }
                let sent_at = now_ns();
                for r in &mut replies {
                    Reflector::stamp(r, sent_at);
                }
                let msgs: Vec<&[u8]> = replies.iter().map(Vec::as_slice).collect();
                let _ = longhaul_sys::udp::send_batch(udp.as_fd(), &msgs);
            }),
        };
        match got {
            Ok(()) => {}
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

/// Connects to the server's reflector, asks for the session `hello` describes and returns its
/// control connection, a UDP socket connected to the session's port (bound to the control
/// connection's own address, so the reflector knows the probes as ours) and the session id.
fn open_session(
    host: &str,
    port: u16,
    family: Family,
    timeout: Duration,
    hello: &ProbeMessage,
) -> Result<(ProbeConn, UdpSocket, SessionId), EngineError> {
    let sock = address::connect_any(
        host,
        port,
        family,
        timeout,
        " (is `longhaul server` running there, on that port?)",
    )?;
    let channel = Channel::plain(sock);
    channel
        .write_all(&Preamble::probe().encode())
        .map_err(|e| EngineError::io("send the probe preamble", e))?;
    let mut ctl = ProbeConn::new(channel);
    ctl.send(hello)?;
    let (udp_port, session) = match ctl.recv(timeout, "the probe session's acceptance")? {
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
    let udp = UdpSocket::bind(SocketAddr::new(local.ip(), 0))
        .map_err(|e| EngineError::io(format!("bind a UDP socket on {}", local.ip()), e))?;
    let target = SocketAddr::new(server.ip(), udp_port);
    udp.connect(target)
        .map_err(|e| EngineError::io(format!("connect the probe socket to {target}"), e))?;
    Ok((ctl, udp, session))
}

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
    let a_synced = longhaul_sys::clock_synchronized();
    let (mut ctl, udp, session) = open_session(
        &cfg.host,
        cfg.port,
        cfg.family,
        cfg.timeout,
        &ProbeMessage::ProbeHello {
            version: PROBE_VERSION,
            interval_ns: u64::try_from(cfg.interval.as_nanos()).unwrap_or(u64::MAX),
            size: cfg.size,
            count: cfg.count,
            synced: a_synced,
            train: 1,
        },
    )?;
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

/// `--pace auto`'s packet trains: [`TRAINS`] trains of [`TRAIN_LEN`] back-to-back probes of
/// `size` bytes to the reflector of the server at `server`, 5 ms apart; the bottleneck's rate from
/// how they arrived ([`BottleneckEstimate::from_trains`]): at the reflector for `Forward` (the
/// client sends the data), back at the client for `RoundTrip` (the server sends it).
pub(crate) fn estimate_bottleneck(
    server: SocketAddr,
    size: u32,
    timing: TrainTiming,
    timeout: Duration,
) -> Result<BottleneckEstimate, EngineError> {
    const TRAIN_GAP: Duration = Duration::from_millis(5);
    let began = Instant::now();
    let size = size.clamp(HEADER_LEN as u32, MAX_SIZE as u32);
    let count = u64::from(TRAINS * TRAIN_LEN);
    let (mut ctl, udp, session) = open_session(
        &server.ip().to_string(),
        server.port(),
        Family::Any,
        timeout,
        &ProbeMessage::ProbeHello {
            version: PROBE_VERSION,
            interval_ns: u64::try_from(TRAIN_GAP.as_nanos()).unwrap_or(u64::MAX),
            size,
            count,
            synced: false,
            train: TRAIN_LEN,
        },
    )?;
    // The handshake's round trip bounds the wait for the last replies.
    let rtt = longhaul_sys::tcp_info(std::os::fd::AsFd::as_fd(ctl.socket()))
        .map(|t| Duration::from_micros(u64::from(t.rtt_us)))
        .unwrap_or(Duration::from_millis(100));
    let mut arrivals = vec![vec![None; TRAIN_LEN as usize]; TRAINS as usize];
    let mut got = 0u64;
    let take = |arrivals: &mut Vec<Vec<Option<u64>>>, datagram: &[u8], at_a: u64, got: &mut u64| {
        let Some(p) = Probe::read(datagram) else {
            return;
        };
        if !p.reply || p.session != session || p.seq >= count {
            return;
        }
        let at = match timing {
            TrainTiming::Forward => p.b_recv_ns,
            TrainTiming::RoundTrip => at_a,
        };
        let (train, place) = (p.seq / u64::from(TRAIN_LEN), p.seq % u64::from(TRAIN_LEN));
        let slot = &mut arrivals[train as usize][place as usize];
        if slot.is_none() {
            *slot = Some(at);
            *got += 1;
        }
    };
    let mut probes = vec![vec![0u8; size as usize]; TRAIN_LEN as usize];
    udp.set_read_timeout(Some(Duration::from_millis(1)))
        .map_err(|e| EngineError::io("set the probe socket's timeout", e))?;
    // The replies' arrival times are the kernel's, not this loop's.
    longhaul_sys::udp::set_receive_info(udp.as_fd())?;
    let mut batch = RecvBatch::new(64, MAX_SIZE + 1);
    let mut receive = |arrivals: &mut Vec<Vec<Option<u64>>>, got: &mut u64| {
        if let Ok(n) = batch.recv(udp.as_fd()) {
            for i in 0..n {
                let m = batch.message(i);
                take(arrivals, m.data, m.kernel_ns.unwrap_or_else(now_ns), got);
            }
        }
    };
    for t in 0..u64::from(TRAINS) {
        let at = now_ns();
        for (i, p) in probes.iter_mut().enumerate() {
            Probe::request(session, t * u64::from(TRAIN_LEN) + i as u64, at).write(p);
        }
        let msgs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
        let mut sent = 0;
        while sent < msgs.len() {
            match longhaul_sys::udp::send_batch(std::os::fd::AsFd::as_fd(&udp), &msgs[sent..]) {
                Ok(n) => sent += n,
                // A probe that cannot go is a lost probe; the train counts without it.
                Err(_) => break,
            }
        }
        let next = Instant::now() + TRAIN_GAP;
        while Instant::now() < next {
            receive(&mut arrivals, &mut got);
        }
    }
    let until = Instant::now() + (rtt * 3 + Duration::from_millis(100)).min(timeout);
    while got < count && Instant::now() < until {
        receive(&mut arrivals, &mut got);
    }
    ctl.send(&ProbeMessage::ProbeStop)?;
    match ctl.recv(timeout, "the server's probe counts")? {
        ProbeMessage::ProbeDone { .. } => {}
        m => return Err(unexpected(&m, "the server's probe counts")),
    }
    let ip_header = if server.is_ipv6() { 40 } else { 20 };
    let mut estimate = BottleneckEstimate::from_trains(&arrivals, size + 8 + ip_header, timing)
        .ok_or_else(|| {
            EngineError::Transfer(format!(
                "--pace auto: too few of the {count} probes of its packet trains came back \
                 ({got}) to estimate the path's rate; is UDP blocked between here and {server}?"
            ))
        })?;
    estimate.took_ms = began.elapsed().as_secs_f64() * 1e3;
    info!(
        rate_bps = estimate.rate_bps,
        trains = estimate.trains_used,
        "packet trains"
    );
    Ok(estimate)
}
