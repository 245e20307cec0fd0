//! Disk-to-disk transfers (`longhaul send` / `longhaul get`): the I/O around the sans-IO core in
//! `longhaul-transfer` (protocol, manifest, journal, scheduler, digests; `docs/transfer.md`).
//!
//! - [`root`]: the directory a transfer is confined to (openat2, no symlink is ever followed);
//! - `conn`: the control connection (the engine's framed `control::Conn` with transfer messages), connect,
//!   and the mutual authentication;
//! - `source`: the sending side (manifest from the sources, one thread per data stream reading,
//!   hashing and sending chunks);
//! - `sink`: the receiving side (temporary files, verification, rename into place);
//! - `dest`: the destination's rules and putting a verified file or a link in place;
//! - `journals`: the receiver's resume journals in a destination (its own, and every other there);
//! - `stripes`: the finish of a striped transfer (the stripe that ends last puts files in place);
//! - `side`: what both sides share: counters, events, the summary, the timeouts;
//! - `ticket`: the copy tickets a server issued to its controllers (third-party copies).
//!
//! The client measures the RTT on the control connection and chooses streams and the chunk size
//! from it and the target rate, in both directions; the server follows the client's plan.

use std::net::TcpStream;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::auto_pace::{BottleneckEstimate, TrainTiming};
use longhaul_proto::msg::{MAX_RATE_BPS, MIN_PACE_BPS, QUIC_CONTROLLERS, Transport};
use longhaul_proto::wire::Preamble;
use longhaul_transfer::auth::TicketId;
use longhaul_transfer::journal::JOURNAL_KEY_CONTEXT;
use longhaul_transfer::manifest::{MAX_STREAMS, ModePolicy, memory_bound};
use longhaul_transfer::msg::{Direction, INLINE_LIMIT};
use longhaul_transfer::session::{DATA_PROOF_LEN, verify_data_proof};
use longhaul_transfer::stripe::Stripe;
use longhaul_transfer::{Key, MacKey, Message, RelPath, Role, SessionKeys, choose_chunk_size};
use longhaul_units::Nanos;

use crate::EngineError;
use crate::channel::Channel;
use crate::fast_start::{InitialWindowRoute, RampWatch};
use crate::pacer::{self, PacedSocket, Pacer};
use crate::socket::{self, SocketOptions};
use crate::tls::Pinned;

pub(crate) mod conn;
mod data;
mod dest;
mod journals;
mod over_udp;
mod page_cache;
pub mod root;
mod side;
mod sink;
mod source;
mod stripes;
pub(crate) mod ticket;

pub use conn::Endpoint;
use conn::{Ctl, unexpected};
use data::DataConn;
use dest::SinkOptions;
pub use longhaul_transfer::report::{Event, Summary};
use longhaul_transfer::report::{FastStartSummary, PaceAutoSummary, UdpSummary};
use root::Root;
use side::Side;
use sink::{Sink, recv_manifest};
use source::Sources;
use ticket::{Grant, Tickets};

/// How long a side may see neither a control message nor a payload byte before it gives up, unless
/// configured otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Streams used when the window plan does not ask for more: enough to hash and read on several
/// cores and to spread one big file, few enough not to thrash a disk.
pub const DEFAULT_STREAMS: u32 = 4;

/// The target rate when the user gives none, bit/s: a 10 Gbit/s host.
pub const DEFAULT_RATE_BPS: u64 = 10_000_000_000;

/// What the client asks for.
#[derive(Debug, Clone)]
pub struct TransferConfig {
    /// The server.
    pub endpoint: Endpoint,
    /// The shared key.
    pub key: Key,
    /// Data streams; `None`: from the window plan (at least [`DEFAULT_STREAMS`] unless
    /// `rate_is_path`).
    pub streams: Option<u32>,
    /// Target rate of all streams together, bit/s (sizes windows and chunks).
    pub rate_bps: u64,
    /// `rate_bps` is the user's figure for the path (`--rate`): the plan opens no more streams
    /// than the windows it needs, one where one window carries it. Otherwise the path is unknown
    /// and at least [`DEFAULT_STREAMS`] hedge it.
    pub rate_is_path: bool,
    /// Chunk size; `None`: one stream's share of one RTT (1–64 MiB).
    pub chunk_size: Option<u64>,
    /// Replace existing files that differ.
    pub overwrite: bool,
    /// fsync each file before renaming it into place.
    pub fsync: bool,
    /// Congestion control for the data connections.
    pub congestion: Option<String>,
    /// Give up after this long with no progress at all (a dead peer or a cut path).
    pub idle_timeout: Duration,
    /// `get`: what the server's modes become here (the server of a `send` applies its own).
    pub modes: ModePolicy,
    /// `get` with `overwrite`: existing directories get the server's (filtered) mode too.
    pub chmod_existing_dirs: bool,
    /// A third-party copy: the receiving server's ticket, whose key is `key` (`None`: `key` is
    /// the server's own).
    pub ticket: Option<TicketId>,
    /// End the transfer (with an error; a rerun resumes) after this long: a controller's
    /// `max_duration` on the sending server of a third-party copy.
    pub time_limit: Option<Duration>,
    /// `send`: one stripe of a striped transfer (its chunk size is the transfer's).
    pub stripe: Option<Stripe>,
    /// `--pace auto`: packet trains to the server's reflector before the data, then the sending
    /// side's governor paces the streams from the bottleneck they found (instead of at `rate_bps`).
    pub pace_auto: bool,
    /// `--dedicated` (`send` only): the path carries nothing else; open at `rate_bps` from the
    /// first round trip ([`longhaul_proto::fast_start`]): an initial window on a route of this
    /// host's own to the server, buffers set before the handshake on both sides.
    pub fast_start: bool,
    /// `--transport udp`: the data connections are QUIC flows over UDP (`-C`: their controller).
    pub transport: Transport,
}

/// This process's umask, for [`ModePolicy::umask`]: read from `/proc/self/status` (Linux ≥ 4.7),
/// because `umask(2)` can only read it by changing it, which would race with other threads creating
/// files. If it cannot be read, 0o077 (fail closed: nobody else gets any access).
pub fn process_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .map_or(0o077, |m| m & 0o777)
}

/// The summary of a side that has finished.
fn summary(
    ctl: &Ctl,
    side: &Side<'_>,
    direction: Direction,
    plan: &Plan,
    skipped: Vec<String>,
    retransmits: Option<u64>,
) -> Summary {
    let seconds = side.seconds();
    Summary {
        direction: match direction {
            Direction::Send => "send".into(),
            Direction::Get => "get".into(),
        },
        files: side.files_ok,
        failed: side.failed.clone(),
        skipped,
        bytes_moved: side.bytes_moved,
        bytes_to_send: side.to_send,
        seconds,
        bits_per_second: side.bytes_moved as f64 * 8.0 / seconds.max(1e-9),
        streams: plan.streams,
        chunk_size: plan.chunk_size,
        memory_bound: memory_bound(plan.streams, plan.chunk_size),
        rtt_ns: plan.rtt_ns,
        chunks_resent: side.resent,
        chunks_verified: side.chunks_verified,
        retransmits,
        stripe: side.stripe.clone(),
        verified: side.failed.is_empty(),
        encryption: ctl.channel().encryption(),
        pace_auto: None,
        fast_start: None,
        path_rate_bps: plan.rate_from_server.then_some(plan.rate_bps),
        udp: plan.controller.map(|c| UdpSummary {
            controller: c.to_string(),
        }),
    }
}

/// The UDP transport's congestion controller when `-C` names none.
const DEFAULT_UDP_CONTROLLER: &str = "cubic";

/// Streams and chunk size for a transfer.
#[derive(Debug, Clone, Copy)]
struct Plan {
    streams: u32,
    chunk_size: u64,
    rtt_ns: u64,
    rate_bps: u64,
    /// `rate_bps` is the server's `--path-rate` (the user gave no `--rate`).
    rate_from_server: bool,
    /// `--pace auto`: the bottleneck the packet trains found, bit/s of IP packets.
    pace_auto_bps: Option<u64>,
    /// `--dedicated`: buffers set before the handshake; the sending client opens at `rate_bps`.
    fast_start: bool,
    /// What carries the data.
    transport: Transport,
    /// Over QUIC: the sending side's controller, one of [`QUIC_CONTROLLERS`] (`None` over TCP).
    controller: Option<&'static str>,
}

impl Plan {
    /// The client's `plan` message.
    fn message(&self) -> Message {
        Message::Plan {
            streams: self.streams,
            chunk_size: self.chunk_size,
            rtt_ns: self.rtt_ns,
            rate_bps: self.rate_bps,
            pace_auto_bps: self.pace_auto_bps,
            fast_start: self.fast_start,
            transport: self.transport,
            controller: self.controller.map(str::to_string),
        }
    }

    /// With `--pace auto`, starts the governor of this side's sending streams.
    /// `socks` are the [`probes`] of the data connections.
    fn governor(&self, socks: &[Arc<TcpStream>]) -> Result<Option<Pacer>, EngineError> {
        let Some(bottleneck) = self.pace_auto_bps else {
            return Ok(None);
        };
        let Some(first) = socks.first() else {
            return Ok(None);
        };
        let mss = longhaul_sys::mss(first.as_fd()).unwrap_or(1448);
        let ipv6 = first.local_addr().is_ok_and(|a| a.is_ipv6());
        let socks: Vec<Arc<dyn PacedSocket>> = socks
            .iter()
            .map(|s| Arc::clone(s) as Arc<dyn PacedSocket>)
            .collect();
        Pacer::start(socks, pacer::start_rate(bottleneck, mss, ipv6)).map(Some)
    }
}

/// `--pace auto` on a client: the packet trains to the server before the data (timed at the
/// server for `send`, back here for `get`), as the plan carries them and the summary reports them.
fn trains(
    cfg: &TransferConfig,
    ctl: &Ctl,
    server: std::net::SocketAddr,
    direction: Direction,
    p: &mut Plan,
) -> Result<Option<BottleneckEstimate>, EngineError> {
    if !cfg.pace_auto {
        return Ok(None);
    }
    let timing = match direction {
        Direction::Send => TrainTiming::Forward,
        Direction::Get => TrainTiming::RoundTrip,
    };
    let mss = longhaul_sys::mss(ctl.socket().as_fd()).unwrap_or(1448);
    let e = crate::probe::estimate_bottleneck(server, mss, timing, cfg.endpoint.timeout)?;
    p.pace_auto_bps = Some(e.start_bps.clamp(MIN_PACE_BPS, MAX_RATE_BPS));
    Ok(Some(e))
}

/// The client's plan: RTT from the control connection's TCP_INFO (after the handshake's round
/// trips), the target rate from `--rate`, else from the server's `--path-rate` (`server_rate`,
/// named in its challenge), else [`DEFAULT_RATE_BPS`]; streams from the window plan (enough
/// windows for the target rate under this host's buffer limits, at least [`DEFAULT_STREAMS`] on a
/// path neither the user nor the server described, but no more than there are chunks to send when
/// `chunks_of` counts them) unless given, chunk size from the core's rule.
///
/// The plan is checked against the limits the server enforces (`check_plan`: chunk-buffer memory,
/// rtt, rate), so a `--chunk`/`-P`/`--rate` beyond them is refused here with the same reason.
fn plan(
    cfg: &TransferConfig,
    ctl: &Ctl,
    server_rate: Option<u64>,
    chunks_of: Option<&dyn Fn(u64) -> u64>,
) -> Result<Plan, EngineError> {
    let (rate_bps, rate_is_path, rate_from_server) = match server_rate {
        Some(r) if !cfg.rate_is_path => (r, true, true),
        _ => (cfg.rate_bps, cfg.rate_is_path, false),
    };
    let rtt_ns = longhaul_sys::tcp_info(ctl.socket().as_fd())
        .map(|t| u64::from(t.min_rtt_us.filter(|&m| m > 0).unwrap_or(t.rtt_us)) * 1000)
        .unwrap_or(1_000_000)
        .clamp(1000, longhaul_transfer::msg::MAX_RTT_NS);
    let streams = cfg.streams.unwrap_or_else(|| {
        let limits = socket::kernel_limits();
        let w = longhaul_proto::window::plan(Nanos(rtt_ns), rate_bps, 1, None, &limits);
        // One window per stream at most what the buffer cap lets us have.
        let per_stream = match w.recv.action {
            longhaul_proto::window::BufferAction::Set { force: true, .. } => w.wanted,
            _ => (w.recv.cap / 2).max(1),
        };
        let needed = (2 * w.bdp_per_stream).div_ceil(per_stream.max(1));
        let least = if rate_is_path { 1 } else { DEFAULT_STREAMS };
        u32::try_from(needed)
            .unwrap_or(MAX_STREAMS)
            .clamp(least, 64)
    });
    let streams = streams.clamp(1, MAX_STREAMS);
    // A stripe uses its run's chunk size: chunks, digests and journals are the same for every
    // stripe.
    let chunk_size = cfg
        .stripe
        .map(|s| s.chunk_size)
        .or(cfg.chunk_size)
        .unwrap_or_else(|| choose_chunk_size(rate_bps, rtt_ns, streams));
    // A stream with no chunk to send would cost a connection and two threads for nothing.
    let streams = match (cfg.streams, chunks_of) {
        (None, Some(count)) => {
            streams.min(u32::try_from(count(chunk_size).max(1)).unwrap_or(u32::MAX))
        }
        _ => streams,
    };
    longhaul_transfer::msg::check_plan(streams, chunk_size, rtt_ns, rate_bps)
        .map_err(EngineError::Transfer)?;
    let controller = match cfg.transport {
        Transport::Tcp => None,
        Transport::Quic => Some(udp_controller(cfg)?),
    };
    Ok(Plan {
        streams,
        chunk_size,
        rtt_ns,
        rate_bps,
        rate_from_server,
        pace_auto_bps: None,
        fast_start: cfg.fast_start,
        transport: cfg.transport,
        controller,
    })
}

/// `--transport udp`: the controller `-C` names (or the default), if the UDP transport has it;
/// the kernel TCP's steering (`--pace auto`, `--dedicated`) does not apply.
fn udp_controller(cfg: &TransferConfig) -> Result<&'static str, EngineError> {
    if cfg.pace_auto || cfg.fast_start {
        return Err(EngineError::Unsupported(
            "--pace auto and --dedicated steer the kernel's TCP; the UDP transport paces itself"
                .into(),
        ));
    }
    let name = cfg.congestion.as_deref().unwrap_or(DEFAULT_UDP_CONTROLLER);
    QUIC_CONTROLLERS
        .into_iter()
        .find(|c| *c == name)
        .ok_or_else(|| {
            EngineError::Unsupported(format!(
                "congestion control {name:?} is not one of the UDP transport's: {}",
                QUIC_CONTROLLERS.join(", ")
            ))
        })
}

/// This host's window plan for a transfer's streams (the test engine's rule: 2 × BDP per stream).
fn window_plan(p: &Plan) -> longhaul_proto::window::WindowPlan {
    let limits = socket::kernel_limits();
    let w = longhaul_proto::window::plan(Nanos(p.rtt_ns), p.rate_bps, p.streams, None, &limits);
    if p.fast_start {
        longhaul_proto::fast_start::open_from_start(w, limits.privileged)
    } else {
        w
    }
}

/// `--dedicated` on a sending client: the route that opens its data connections at the plan's
/// rate, held until the transfer ends.
fn fast_start_route(
    p: &Plan,
    ctl: &Ctl,
    server: std::net::SocketAddr,
) -> Result<Option<(InitialWindowRoute, u32)>, EngineError> {
    if !p.fast_start {
        return Ok(None);
    }
    InitialWindowRoute::for_streams(
        server.ip(),
        ctl.socket().as_fd(),
        p.rate_bps,
        Nanos(p.rtt_ns),
        p.streams,
    )
    .map(Some)
}

/// Opens the client's data connections, buffers set before connect; each sends its preamble and the
/// proof of the session key for its cookie and stream index. Over the UDP transport: its flows
/// (`over_udp`), whose packets are sized from the control connection's path.
fn open_streams(
    cfg: &TransferConfig,
    ctl: &Ctl,
    session: &Session,
    keys: &SessionKeys,
    p: &Plan,
    sender: bool,
) -> Result<Vec<DataConn>, EngineError> {
    let out = if p.transport == Transport::Quic {
        let plan = over_udp::flow_plan(
            &window_plan(p),
            p.controller,
            ctl.socket().as_fd(),
            ctl.channel().is_ipv6(),
        );
        let dial = over_udp::Dial {
            server: session.server,
            bind: cfg.endpoint.bind,
            cookie: session.cookie,
            pinned: session.pinned.as_ref(),
            timeout: cfg.endpoint.timeout,
        };
        over_udp::open(&dial, keys, &plan, p.streams)?
    } else {
        open_tcp_streams(cfg, session, keys, p, sender)?
    };
    if sender && p.pace_auto_bps.is_none() {
        pace(&out, p)?;
    }
    Ok(out)
}

/// The client's TCP data connections.
fn open_tcp_streams(
    cfg: &TransferConfig,
    session: &Session,
    keys: &SessionKeys,
    p: &Plan,
    sender: bool,
) -> Result<Vec<DataConn>, EngineError> {
    let cookie = session.cookie;
    let window = window_plan(p);
    let opts = SocketOptions {
        plan: &window,
        congestion: cfg.congestion.as_deref(),
        flags: NO_DELAY,
    };
    let open_one = |i: u32| -> Result<DataConn, EngineError> {
        let s = cfg.endpoint.socket(session.server)?;
        socket::apply(s.as_fd(), &opts, sender, i)?;
        let s = cfg.endpoint.connect(s, session.server)?;
        let s = cfg.endpoint.wrap(s, session.pinned.as_ref())?;
        let mut hello = Preamble::data(cookie, i).encode().to_vec();
        hello.extend_from_slice(&keys.sending(Role::Client).data_proof(&cookie, i).0);
        s.write_all(&hello)
            .map_err(|e| EngineError::io(format!("send preamble of stream {i}"), e))?;
        Ok(DataConn::Tcp(Box::new(s)))
    };
    // All at once: their handshakes (TCP's, and TLS's with --encrypt) cost one round trip in all,
    // not one each.
    std::thread::scope(|scope| {
        let opening: Vec<_> = (0..p.streams)
            .map(|i| scope.spawn(move || open_one(i)))
            .collect();
        opening
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(EngineError::Transfer(
                        "a thread opening a data connection panicked".into(),
                    ))
                })
            })
            .collect()
    })
}

/// Caps each sending stream at its share of the target rate (`SO_MAX_PACING_RATE`, or a QUIC
/// stream's writes held to it), so that together they send no faster than `--rate`: with the rate
/// of the path's bottleneck, the streams stop overrunning its queue in bursts (the seeds'
/// hand-set pacing, done from the plan).
fn pace(socks: &[DataConn], p: &Plan) -> Result<(), EngineError> {
    let shares = longhaul_proto::pacing::split_pacing(p.rate_bps, p.streams);
    for (s, bytes_per_sec) in socks.iter().zip(shares) {
        s.set_pacing(bytes_per_sec)?;
    }
    Ok(())
}

/// The data connections again, to read while the streams use them (the governor) and once
/// they are done with them: the TCP sockets for `TCP_INFO`, the QUIC flows for their losses.
struct Probes {
    tcp: Vec<Arc<TcpStream>>,
    quic: Vec<crate::quic::FlowHandle>,
}

fn probes(socks: &[DataConn]) -> Probes {
    Probes {
        tcp: socks
            .iter()
            .filter_map(DataConn::tcp)
            .filter_map(|s| s.socket().try_clone().ok().map(Arc::new))
            .collect(),
        quic: socks.iter().filter_map(DataConn::flow).collect(),
    }
}

/// TCP's retransmits, or the packets QUIC declared lost and sent again.
fn retransmits(p: &Probes) -> u64 {
    let tcp: u64 = p
        .tcp
        .iter()
        .filter_map(|s| longhaul_sys::tcp_info(s.as_fd()).ok())
        .map(|t| u64::from(t.total_retrans))
        .sum();
    tcp + p.quic.iter().map(|f| f.lost_packets()).sum::<u64>()
}

/// Where a client's transfer opens its data connections: the server's address, the cookie, and
/// with `--encrypt` the TLS that accepts only the certificate the control connection was shown.
struct Session {
    server: std::net::SocketAddr,
    cookie: [u8; 16],
    pinned: Option<Pinned>,
}

/// A control connection whose server has proven it holds the key and has our proof on its way:
/// the request may follow at once, and the server's answer (the cookie the data connections
/// present) comes a round trip later, in [`Opening::authenticated`].
struct Opening {
    server: std::net::SocketAddr,
    pinned: Option<Pinned>,
    /// What the server's challenge offered.
    offer: conn::Offer,
}

impl Opening {
    /// The server's answer to our proof, read after the request was sent behind the proof.
    fn authenticated(self, ctl: &mut Ctl, timeout: Duration) -> Result<Session, EngineError> {
        let cookie = conn::recv_auth_ok(ctl, timeout)?;
        if self.offer.cookie.is_some_and(|named| named != cookie) {
            return Err(EngineError::Transfer(
                "the server's answer to our proof names another cookie than its challenge did"
                    .into(),
            ));
        }
        Ok(Session {
            server: self.server,
            cookie,
            pinned: self.pinned,
        })
    }

    /// The session as the server's challenge named it, for data connections opened before its
    /// answer to our proof; `None` if it named no cookie (an older server).
    fn named(&self) -> Option<Session> {
        self.offer.cookie.map(|cookie| Session {
            server: self.server,
            cookie,
            pinned: self.pinned.clone(),
        })
    }
}

/// Connects and authenticates: returns the control connection, the session being opened and its
/// keys, with the client's proof sent and the server's answer not yet read.
fn open(
    cfg: &TransferConfig,
    direction: Direction,
) -> Result<(Ctl, Opening, SessionKeys), EngineError> {
    let (channel, server, pinned) = cfg.endpoint.open()?;
    channel
        .write_all(&Preamble::transfer().encode())
        .map_err(|e| EngineError::io("send preamble", e))?;
    let mut ctl = Ctl::new(channel);
    let (keys, offer) = conn::client_handshake(
        &mut ctl,
        &cfg.key,
        cfg.ticket,
        direction,
        cfg.endpoint.timeout,
    )?;
    Ok((
        ctl,
        Opening {
            server,
            pinned,
            offer,
        },
        keys,
    ))
}

/// `longhaul send SRC... HOST:DEST`: each source (a file, a directory tree or a symlink) lands in
/// DEST (relative to the server's root; `None`: the root) under its own name.
pub fn send(
    cfg: &TransferConfig,
    sources: &[PathBuf],
    dest: Option<RelPath>,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    let mut src = Sources::default();
    for s in sources {
        let (parent, name) = split_local(s)?;
        src.add(Root::open(&parent)?, &name, &name)?;
    }
    send_sources(cfg, src, dest, &|_, _, _| Ok(()), on_event)
}

/// The sending side of a third-party copy (`crate::job::copy`): `paths` under `root` (this
/// server's, every path confined to it) go to `cfg.endpoint`'s DEST, each under its own name.
/// `admit(streams, rate, bytes)` checks the controller's limits once the plan is known, before
/// anything is sent.
pub(crate) fn send_from_root(
    cfg: &TransferConfig,
    root: &Path,
    paths: &[RelPath],
    dest: Option<RelPath>,
    admit: &dyn Fn(u32, u64, u64) -> Result<(), EngineError>,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    let mut src = Sources::default();
    for p in paths {
        src.add(Root::open(root)?, p.as_str(), p.file_name())?;
    }
    send_sources(cfg, src, dest, admit, on_event)
}

/// Sends `src` to the server of `cfg`, once `admit` accepts the plan (streams, rate, total bytes).
fn send_sources(
    cfg: &TransferConfig,
    mut src: Sources,
    dest: Option<RelPath>,
    admit: &dyn Fn(u32, u64, u64) -> Result<(), EngineError>,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    src.stripe = cfg.stripe;
    // The request follows the proof in the same flight; the server's answer to the proof comes
    // back with its first answer to the request.
    let (mut ctl, opening, keys) = open(cfg, Direction::Send)?;
    let mut p = plan(
        cfg,
        &ctl,
        opening.offer.path_rate_bps,
        Some(&|chunk| src.chunk_count(chunk)),
    )?;
    let inline = opening.offer.inline
        && src.total_bytes() <= INLINE_LIMIT
        && cfg.streams.is_none()
        && cfg.stripe.is_none()
        && cfg.transport == Transport::Tcp
        && !cfg.pace_auto
        && !cfg.fast_start;
    if inline {
        p.streams = 0;
    }
    admit(p.streams, p.rate_bps, src.total_bytes())?;
    let estimate = trains(cfg, &ctl, opening.server, Direction::Send, &mut p)?;
    ctl.send(&Message::SendTo {
        dest,
        overwrite: cfg.overwrite,
        fsync: cfg.fsync,
        stripe: cfg.stripe,
    })?;
    ctl.send(&p.message())?;
    src.send_manifest(&ctl)?;
    if inline {
        return send_small(cfg, ctl, opening, src, &p, on_event);
    }
    let timeout = cfg.endpoint.timeout;
    let early_digest = opening.offer.early_digest;
    let (have, route, socks) = match opening.named().filter(|_| p.transport == Transport::Tcp) {
        // The cookie came with the challenge: the data connections open now, their handshakes
        // overlapping the server's check of our proof and its answer to the request, so the
        // first chunk can leave as soon as that answer (`have`) is here, a round trip sooner.
        Some(session) => {
            let route = fast_start_route(&p, &ctl, session.server)?;
            let socks = open_streams(cfg, &ctl, &session, &keys, &p, true);
            // A refusal of our proof explains a data connection the server closed.
            opening.authenticated(&mut ctl, timeout)?;
            let socks = socks?;
            (
                source::recv_have(&mut ctl, &src, p.chunk_size)?,
                route,
                socks,
            )
        }
        None => {
            let session = opening.authenticated(&mut ctl, timeout)?;
            let have = source::recv_have(&mut ctl, &src, p.chunk_size)?;
            let route = fast_start_route(&p, &ctl, session.server)?;
            (
                have,
                route,
                open_streams(cfg, &ctl, &session, &keys, &p, true)?,
            )
        }
    };
    let probe = probes(&socks);
    let governor = p.governor(&probe.tcp)?;
    let ramp = route
        .is_some()
        .then(|| RampWatch::start(probe.tcp.clone(), p.rate_bps, p.rtt_ns))
        .transpose()?;
    let skipped = std::mem::take(&mut src.skipped);
    src.early_digest = early_digest;
    let mut side = Side::new(on_event, cfg.idle_timeout);
    side.limit_time(cfg.time_limit);
    side.stripe = cfg.stripe.as_ref().map(|s| stripes::summary(s, None));
    let chunk_key = keys.sending(Role::Client);
    source::run(
        &mut ctl,
        socks,
        src,
        p.chunk_size,
        chunk_key,
        &have,
        &mut side,
    )?;
    let mut s = summary(
        &ctl,
        &side,
        Direction::Send,
        &p,
        skipped,
        Some(retransmits(&probe)),
    );
    s.pace_auto = pace_auto_summary(estimate, governor);
    s.fast_start = route.map(|(_, segments)| FastStartSummary {
        initial_window_segments: segments,
        to_rate_ms: ramp.and_then(RampWatch::finish),
        rtt_ms: p.rtt_ns as f64 / 1e6,
    });
    Ok(s)
}

/// The rest of a small send (a plan of 0 streams): the files, their digests and the end go out at
/// once behind the request, then the server's answers come back: its answer to our proof, its
/// resume state and a result for every file. No data connection is opened: the whole transfer
/// takes the round trip of the handshake and one more.
fn send_small(
    cfg: &TransferConfig,
    mut ctl: Ctl,
    opening: Opening,
    mut src: Sources,
    p: &Plan,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    let mut side = Side::new(on_event, cfg.idle_timeout);
    side.limit_time(cfg.time_limit);
    let sent = source::send_inline(&ctl, &src, p.chunk_size)?;
    opening.authenticated(&mut ctl, cfg.endpoint.timeout)?;
    source::recv_have(&mut ctl, &src, p.chunk_size)?;
    source::inline_results(&mut ctl, &src, p.chunk_size, sent, &mut side)?;
    let retransmits = longhaul_sys::tcp_info(ctl.socket().as_fd())
        .map(|t| u64::from(t.total_retrans))
        .ok();
    let skipped = std::mem::take(&mut src.skipped);
    Ok(summary(
        &ctl,
        &side,
        Direction::Send,
        p,
        skipped,
        retransmits,
    ))
}

/// `--pace auto` for the summary: the client's trains and this side's governor (stopped now).
fn pace_auto_summary(
    estimate: Option<BottleneckEstimate>,
    governor: Option<Pacer>,
) -> Option<PaceAutoSummary> {
    let governor = governor.and_then(Pacer::finish);
    (estimate.is_some() || governor.is_some()).then_some(PaceAutoSummary { estimate, governor })
}

/// `longhaul get HOST:SRC... DEST`: each source (relative to the server's root) lands in the local
/// directory DEST (created if missing) under its own name.
pub fn get(
    cfg: &TransferConfig,
    sources: &[RelPath],
    dest: &Path,
    on_event: &mut dyn FnMut(&Event),
) -> Result<Summary, EngineError> {
    if cfg.fast_start {
        return Err(EngineError::Unsupported(
            "--dedicated opens the sending side's window from a route of its own: on a get the \
             server sends, and a client does not change the server's routes; use send, or \
             --rate alone"
                .into(),
        ));
    }
    // Authenticate first: a wrong key or an unreachable server leaves no trace in DEST.
    let (mut ctl, opening, keys) = open(cfg, Direction::Get)?;
    let mut p = plan(cfg, &ctl, opening.offer.path_rate_bps, None)?;
    let estimate = trains(cfg, &ctl, opening.server, Direction::Get, &mut p)?;
    ctl.send(&Message::Request {
        paths: sources.to_vec(),
    })?;
    ctl.send(&p.message())?;
    let session = opening.authenticated(&mut ctl, cfg.endpoint.timeout)?;
    // The whole manifest is checked before DEST is created or looked at: a server may list only the
    // names asked for, and what lies under them.
    let names: Vec<String> = sources.iter().map(|s| s.file_name().to_string()).collect();
    let manifest = recv_manifest(&mut ctl, Some(&names))?;
    std::fs::create_dir_all(dest)
        .map_err(|e| EngineError::io(format!("create {}", dest.display()), e))?;
    let root = Root::open(dest)?;
    let mut sink = Sink::new(
        root,
        SinkOptions {
            overwrite: cfg.overwrite,
            fsync: cfg.fsync,
            modes: cfg.modes,
            chmod_existing_dirs: cfg.chmod_existing_dirs,
            journal_key: cfg.key.derive_for(JOURNAL_KEY_CONTEXT),
            stripe: None,
        },
    )?;
    sink.prepare_all(manifest, p.chunk_size)?;
    sink.send_have(&ctl)?;
    let socks = open_streams(cfg, &ctl, &session, &keys, &p, false)?;
    let mut side = Side::new(on_event, cfg.idle_timeout);
    let chunk_key = keys.receiving(Role::Client);
    sink::run(&mut ctl, socks, sink, p.chunk_size, chunk_key, &mut side)?;
    let mut s = summary(&ctl, &side, Direction::Get, &p, Vec::new(), None);
    s.pace_auto = pace_auto_summary(estimate, None);
    Ok(s)
}

/// A local source path as (its parent directory, its name).
fn split_local(p: &Path) -> Result<(PathBuf, String), EngineError> {
    let abs = std::path::absolute(p)
        .map_err(|e| EngineError::io(format!("resolve {}", p.display()), e))?;
    // `a/b/.` and `a/b/` mean a/b; `..` components are resolved lexically by the caller's shell.
    let abs: PathBuf = abs.components().collect();
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Err(EngineError::Transfer(format!(
            "{}: cannot send a file system root; name a directory in it",
            p.display()
        )));
    };
    let name = name
        .to_str()
        .ok_or_else(|| EngineError::Transfer(format!("{}: the name is not UTF-8", p.display())))?;
    Ok((parent.to_path_buf(), name.to_string()))
}

/// What a server needs to serve transfers.
#[derive(Debug, Clone)]
pub struct ServeFiles {
    /// The directory exposed; every path is confined to it.
    pub root: PathBuf,
    /// The key clients must prove they hold.
    pub key: Key,
    /// A transfer with no progress at all for this long is ended (its journal stays for a resume).
    pub idle_timeout: Duration,
    /// What clients' modes become on `send` (the operator's choice: no client can change it).
    pub modes: ModePolicy,
    /// With a client's `--overwrite`: existing directories get the client's (filtered) mode too.
    pub chmod_existing_dirs: bool,
    /// `--path-rate`: the payload rate of the path to this server's clients, bit/s, named in
    /// every challenge; a client given no `--rate` plans and paces with it.
    pub path_rate_bps: Option<u64>,
}

/// What a transfer's data connections must prove: the session's client → server key, known once its
/// handshake is done. The server's connection threads check each data connection that presents the
/// transfer's cookie against it before handing it to the session (`server::handle`), so an unproven
/// connection never takes a stream slot. The cookie is named in the server's challenge, before the
/// client has proven anything (a sending client opens its data connections in the flight of its
/// proof), so a connection may come before the key: it waits for it, within its own handshake
/// deadline, and is refused as soon as the session ends without one.
#[derive(Clone, Default)]
pub(crate) struct DataGate(Arc<(Mutex<Gate>, Condvar)>);

#[derive(Default)]
enum Gate {
    /// The client has not proven the key yet.
    #[default]
    Waiting,
    /// Authenticated: data connections prove this key.
    Open(MacKey),
    /// The session ended (or failed its handshake): nothing more is admitted.
    Closed,
}

impl DataGate {
    /// The client is authenticated: admit connections that prove `key`.
    pub(crate) fn open(&self, key: MacKey) {
        self.set(|g| {
            if matches!(g, Gate::Waiting) {
                *g = Gate::Open(key);
            }
        });
    }

    /// The session is over: refuse what comes from now on, and what waits for the key.
    pub(crate) fn close(&self) {
        self.set(|g| *g = Gate::Closed);
    }

    fn set(&self, f: impl FnOnce(&mut Gate)) {
        let (gate, changed) = &*self.0;
        f(&mut gate.lock().unwrap_or_else(|e| e.into_inner()));
        changed.notify_all();
    }

    /// Reads the proof that follows a data connection's preamble (all of it within `timeout`) and
    /// checks it for `cookie` and `stream`, once the session's key is known (within the same
    /// `timeout`).
    pub(crate) fn admit(
        &self,
        conn: &Channel,
        cookie: &[u8; 16],
        stream: u32,
        timeout: Duration,
    ) -> Result<(), EngineError> {
        let deadline = Instant::now() + timeout;
        let mut proof = [0u8; DATA_PROOF_LEN];
        let mut got = 0;
        while got < proof.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(EngineError::Timeout(format!(
                    "the proof of data connection {stream}"
                )));
            }
            conn.socket().set_read_timeout(Some(left)).ok();
            match conn.read(&mut proof[got..]) {
                Ok(0) => return Err(EngineError::Closed(format!("data connection {stream}"))),
                Ok(n) => got += n,
                Err(e) if crate::control::is_timeout(&e) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(EngineError::io(
                        format!("read the proof of data connection {stream}"),
                        e,
                    ));
                }
            }
        }
        conn.socket().set_read_timeout(None).ok();
        let key = self.key_by(deadline).ok_or_else(|| {
            EngineError::Transfer(format!(
                "data connection for stream {stream} of a transfer that did not authenticate"
            ))
        })?;
        verify_data_proof(&key, cookie, stream, &proof)?;
        Ok(())
    }

    /// The session's key once the client has proven it; `None` if the session ends first or
    /// `deadline` passes.
    fn key_by(&self, deadline: Instant) -> Option<MacKey> {
        let (gate, changed) = &*self.0;
        let mut g = gate.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &*g {
                Gate::Open(key) => return Some(key.clone()),
                Gate::Closed => return None,
                Gate::Waiting => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            g = changed
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// What the server gives one transfer: its cookie, the gate its data connections pass (set here
/// once the client is authenticated), where those connections arrive, the deadline of each set-up
/// step, and two hooks into the server's shared state.
pub(crate) struct Admission<'a> {
    pub(crate) cookie: [u8; 16],
    pub(crate) gate: &'a DataGate,
    pub(crate) data: &'a Receiver<(u32, Channel)>,
    pub(crate) timeout: Duration,
    /// Widens the listener's receive buffer so the data connections' window scale fits (as for
    /// tests).
    pub(crate) widen: &'a dyn Fn(u64, bool),
    /// Tells the server how many data connections the client will open (it admits them even while
    /// strangers hold its other handshake slots).
    pub(crate) expect: &'a dyn Fn(u32),
    /// `--transport udp`: routes the flows' hellos from the client to this transfer, and returns
    /// where they arrive.
    pub(crate) udp_hellos: &'a dyn Fn() -> Receiver<(u32, std::net::SocketAddr)>,
    /// The server's TLS, which the UDP transport's flows use.
    pub(crate) tls: &'a Arc<rustls::ServerConfig>,
    /// Set when the server stops (SIGTERM), and what the peer is told then.
    pub(crate) stopping: (&'a std::sync::atomic::AtomicBool, &'static str),
}

/// Serves one transfer on an accepted control connection (after its preamble). A client that
/// presents a copy ticket (a third-party copy's sender) proves the ticket's key instead of the
/// server's, and may only send into the ticket's destination, within its controller's limits;
/// the job that issued the ticket hears how the transfer ended.
pub(crate) fn serve(
    sock: Channel,
    files: Option<&ServeFiles>,
    tickets: &Tickets,
    adm: &Admission<'_>,
) -> Result<Option<Summary>, EngineError> {
    let mut ctl = Ctl::new(sock);
    let mut presented = None;
    let mut key_for = |ticket: Option<TicketId>| {
        let Some(f) = files else {
            return Err(EngineError::Transfer(
                "this server does not serve files (start it with --root DIR --key FILE)".into(),
            ));
        };
        match ticket {
            None => Ok(f.key.clone()),
            Some(id) => {
                presented = Some(id);
                tickets.key_of(&id)
            }
        }
    };
    let path_rate = files.and_then(|f| f.path_rate_bps);
    let handshake =
        conn::server_handshake(&mut ctl, &mut key_for, adm.cookie, path_rate, adm.timeout);
    let mut grant = None;
    let result = match handshake {
        Err(e) => Err(e),
        Ok((direction, keys, early_digest)) => {
            match presented.map(|id| tickets.take(&id)).transpose() {
                Err(e) => Err(e),
                Ok(g) => {
                    grant = g;
                    let files = files.expect("the handshake refuses when no files are served");
                    adm.gate.open(keys.receiving(Role::Server).clone());
                    let asked = Asked {
                        direction,
                        early_digest,
                    };
                    serve_authenticated(&mut ctl, files, asked, &keys, adm, grant.as_ref())
                }
            }
        }
    };
    // Nothing more is admitted, and a connection still waiting for the key (the handshake failed)
    // is refused now rather than at its deadline.
    adm.gate.close();
    if let Err(e) = &result
        && !matches!(e, EngineError::Peer(_) | EngineError::Closed(_))
    {
        ctl.refuse(e);
    }
    if let Some(g) = &grant {
        g.report(
            result
                .as_ref()
                .map(Summary::clone)
                .map_err(EngineError::for_peer),
        );
    }
    result.map(Some)
}

/// What an authenticated client asked for in its hello.
struct Asked {
    direction: Direction,
    /// As a `get`'s receiver it takes a file's digest before the file's chunks are verified.
    early_digest: bool,
}

fn serve_authenticated(
    ctl: &mut Ctl,
    files: &ServeFiles,
    Asked {
        direction,
        early_digest,
    }: Asked,
    keys: &SessionKeys,
    adm: &Admission<'_>,
    grant: Option<&Grant>,
) -> Result<Summary, EngineError> {
    if grant.is_some() && direction == Direction::Get {
        return Err(EngineError::Transfer(
            "a copy ticket admits a send to this server, not a get".into(),
        ));
    }
    if grant.is_some_and(|g| g.encrypted) && !ctl.channel().is_encrypted() {
        return Err(EngineError::Transfer(
            "this copy ticket admits only an encrypted transfer (its controller asked for \
             --encrypt)"
                .into(),
        ));
    }
    let timeout = adm.timeout;
    let root = Root::open(&files.root)?;
    let mut log = |e: &Event| {
        if let Event::File {
            path,
            error: Some(err),
        } = e
        {
            tracing::warn!("transfer: {path}: {err}");
        }
    };
    match direction {
        Direction::Send => {
            let (dest, overwrite, fsync, stripe) = match ctl.recv(timeout, "send_to")? {
                Message::SendTo {
                    dest,
                    overwrite,
                    fsync,
                    stripe,
                } => (dest, overwrite, fsync, stripe),
                m => return Err(unexpected(&m, "send_to")),
            };
            let fsync = fsync || grant.is_some_and(|g| g.fsync);
            if let Some(g) = grant {
                if dest != g.dest {
                    return Err(EngineError::Transfer(format!(
                        "this copy ticket admits a copy into {}, not into {}",
                        shown(g.dest.as_ref()),
                        shown(dest.as_ref())
                    )));
                }
                if overwrite && !g.overwrite {
                    return Err(EngineError::Transfer(
                        "this copy ticket does not admit --overwrite".into(),
                    ));
                }
                if stripe != g.stripe {
                    return Err(EngineError::Transfer(
                        "this copy ticket admits another stripe of the copy".into(),
                    ));
                }
            }
            let p = recv_plan(ctl, adm)?;
            // The UDP flows' hellos are routed here from now on: the client's first hello, sent
            // as soon as it has the `have`, is taken (a lost one would wait for its repeat, and
            // the flow's QUIC handshake for its backed-off retransmission).
            let hellos = udp_hellos(adm, &p);
            if let Some(s) = &stripe
                && s.chunk_size != p.chunk_size
            {
                return Err(EngineError::Transfer(format!(
                    "a stripe's chunk size must be its run's ({} bytes, not {})",
                    s.chunk_size, p.chunk_size
                )));
            }
            // The whole manifest is checked before anything under the root is created.
            let manifest = recv_manifest(ctl, None)?;
            if let Some(g) = grant {
                g.limits
                    .check_copy(p.streams, p.rate_bps, manifest.total_bytes())
                    .map_err(|why| g.refuse(why))?;
            }
            let dest_root = match &dest {
                Some(d) => {
                    root.create_dirs(d.as_str(), 0o755)?;
                    root.subdir(d.as_str())?
                }
                None => root,
            };
            let opts = SinkOptions {
                overwrite,
                fsync,
                modes: files.modes,
                chmod_existing_dirs: files.chmod_existing_dirs,
                journal_key: files.key.derive_for(JOURNAL_KEY_CONTEXT),
                stripe,
            };
            let mut sink = Sink::new(dest_root, opts)?;
            sink.prepare_all(manifest, p.chunk_size)?;
            sink.send_have(ctl)?;
            let socks = accept_data(ctl, adm, hellos, keys, &p, false)?;
            let mut side = Side::new(&mut log, files.idle_timeout);
            side.limit_time(grant.map(|g| Duration::from_nanos(g.limits.max_duration.0)));
            side.stop_when(adm.stopping.0, adm.stopping.1);
            let chunk_key = keys.receiving(Role::Server);
            sink::run(ctl, socks, sink, p.chunk_size, chunk_key, &mut side)?;
            Ok(summary(ctl, &side, direction, &p, Vec::new(), None))
        }
        Direction::Get => {
            let paths = match ctl.recv(timeout, "request")? {
                Message::Request { paths } => paths,
                m => return Err(unexpected(&m, "request")),
            };
            let p = recv_plan(ctl, adm)?;
            // The UDP flows' hellos are routed here from now on: the client's first hello, sent
            // as soon as it has the `have`, is taken (a lost one would wait for its repeat, and
            // the flow's QUIC handshake for its backed-off retransmission).
            let hellos = udp_hellos(adm, &p);
            let mut src = Sources::default();
            for p in &paths {
                src.add(Root::open(&files.root)?, p.as_str(), p.file_name())?;
            }
            src.send_manifest(ctl)?;
            let have = source::recv_have(ctl, &src, p.chunk_size)?;
            let socks = accept_data(ctl, adm, hellos, keys, &p, true)?;
            let probe = probes(&socks);
            let governor = p.governor(&probe.tcp)?;
            let skipped = std::mem::take(&mut src.skipped);
            src.early_digest = early_digest;
            let mut side = Side::new(&mut log, files.idle_timeout);
            side.stop_when(adm.stopping.0, adm.stopping.1);
            let chunk_key = keys.sending(Role::Server);
            source::run(ctl, socks, src, p.chunk_size, chunk_key, &have, &mut side)?;
            let mut s = summary(
                ctl,
                &side,
                direction,
                &p,
                skipped,
                Some(retransmits(&probe)),
            );
            s.pace_auto = pace_auto_summary(None, governor);
            if let Some(g) = s.pace_auto.as_ref().and_then(|p| p.governor.as_ref()) {
                tracing::info!(
                    held_bps = g.held_bps,
                    start_bps = g.start_bps,
                    rounds = g.rounds,
                    "--pace auto governed this get"
                );
            }
            Ok(s)
        }
    }
}

/// A destination as a refusal shows it.
fn shown(dest: Option<&RelPath>) -> String {
    dest.map_or_else(|| "the root".to_string(), |d| format!("{:?}", d.as_str()))
}

/// The client's plan; the server widens its listener for the receive buffer it will set and learns
/// how many data connections to expect.
fn recv_plan(ctl: &mut Ctl, adm: &Admission<'_>) -> Result<Plan, EngineError> {
    match ctl.recv(adm.timeout, "plan")? {
        Message::Plan {
            streams,
            chunk_size,
            rtt_ns,
            rate_bps,
            pace_auto_bps,
            fast_start,
            transport,
            controller,
        } => {
            // Validated on receipt: one of the UDP transport's controllers, and only with it.
            let controller = match transport {
                Transport::Tcp => None,
                Transport::Quic => Some(
                    QUIC_CONTROLLERS
                        .into_iter()
                        .find(|c| Some(*c) == controller.as_deref())
                        .unwrap_or(DEFAULT_UDP_CONTROLLER),
                ),
            };
            let p = Plan {
                streams,
                chunk_size,
                rtt_ns,
                rate_bps,
                // Where the client's rate came from is the client's to report.
                rate_from_server: false,
                pace_auto_bps,
                fast_start,
                transport,
                controller,
            };
            // A plan of 0 streams (a small send) opens no data connection to widen for.
            if let longhaul_proto::window::BufferAction::Set { request, force } =
                window_plan(&p).recv.action
                && streams > 0
            {
                (adm.widen)(request, force);
            }
            (adm.expect)(streams);
            Ok(p)
        }
        m => Err(unexpected(&m, "plan")),
    }
}

/// The server's data connections for the plan, set up for this side's role (`sender`): TCP
/// connections routed here by cookie (proven by the server's connection threads), or the UDP
/// transport's flows, each proven here.
fn accept_data(
    ctl: &Ctl,
    adm: &Admission<'_>,
    hellos: Option<Receiver<(u32, std::net::SocketAddr)>>,
    keys: &SessionKeys,
    p: &Plan,
    sender: bool,
) -> Result<Vec<DataConn>, EngineError> {
    if let Some(hellos) = hellos {
        let local = ctl
            .socket()
            .local_addr()
            .map_err(|e| EngineError::io("read the control connection's address", e))?;
        let accept = over_udp::Accept {
            hellos,
            tls: adm.tls,
            local,
            key: keys.receiving(Role::Server),
            cookie: adm.cookie,
        };
        let plan = over_udp::flow_plan(
            &window_plan(p),
            p.controller,
            ctl.socket().as_fd(),
            ctl.channel().is_ipv6(),
        );
        let socks = over_udp::accept(&accept, &plan, p.streams, sender, adm.timeout)?;
        if sender && p.rate_bps > 0 {
            pace(&socks, p)?;
        }
        return Ok(socks);
    }
    let socks = accept_streams(adm.data, p.streams, adm.timeout, ctl.peer())?;
    let socks: Vec<DataConn> = socks
        .into_iter()
        .map(|s| DataConn::Tcp(Box::new(s)))
        .collect();
    setup_accepted(&socks, p, sender)?;
    Ok(socks)
}

/// Over the UDP transport, where the flows' hellos from the client arrive (routed from the
/// moment this is called).
fn udp_hellos(adm: &Admission<'_>, p: &Plan) -> Option<Receiver<(u32, std::net::SocketAddr)>> {
    (p.transport == Transport::Quic).then(|| (adm.udp_hellos)())
}

/// A transfer's data sockets: TCP_NODELAY, since the preamble, a chunk's header and its payload
/// are small writes right behind one another, and Nagle would hold each one until the previous
/// was acknowledged, a round trip each.
const NO_DELAY: longhaul_proto::msg::SocketFlags = longhaul_proto::msg::SocketFlags {
    mss: None,
    nodelay: true,
    tos: None,
    repeating_payload: false,
    dont_fragment: false,
};

/// Sets up the accepted data connections for this side's role, as the client does before connect.
fn setup_accepted(socks: &[DataConn], p: &Plan, sender: bool) -> Result<(), EngineError> {
    let window = window_plan(p);
    let opts = SocketOptions {
        plan: &window,
        congestion: None,
        flags: NO_DELAY,
    };
    for (i, s) in socks.iter().filter_map(DataConn::tcp).enumerate() {
        socket::apply(s.as_fd(), &opts, sender, i as u32)?;
    }
    if sender && p.rate_bps > 0 && p.pace_auto_bps.is_none() {
        pace(socks, p)?;
    }
    Ok(())
}

/// Collects the `streams` data connections, in stream order.
fn accept_streams(
    data: &Receiver<(u32, Channel)>,
    streams: u32,
    timeout: Duration,
    peer: &str,
) -> Result<Vec<Channel>, EngineError> {
    let mut socks: Vec<Option<Channel>> = (0..streams).map(|_| None).collect();
    let deadline = Instant::now() + timeout;
    for arrived in 0..streams {
        let left = deadline.saturating_duration_since(Instant::now());
        let (i, s) = data.recv_timeout(left).map_err(|_| {
            EngineError::Timeout(format!(
                "{} data connections from {peer}",
                streams - arrived
            ))
        })?;
        match socks.get_mut(i as usize) {
            Some(slot @ None) => *slot = Some(s),
            _ => {
                return Err(EngineError::Transfer(format!(
                    "bad or duplicate stream index {i}"
                )));
            }
        }
    }
    Ok(socks.into_iter().map(|s| s.expect("all arrived")).collect())
}
