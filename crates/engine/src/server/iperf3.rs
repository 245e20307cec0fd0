//! Stock iperf3 clients served by `longhaul server` on iperf3's port (5201 by default), many at once
//! (a stock iperf3 server serves one): `iperf3 -c HOST` works against it, TCP and UDP, `-P`, `-R`,
//! `--bidir`, `-t`, `-n`, `-O`, and its results exchange is answered so that its JSON is complete.
//!
//! Every connection to the port starts with a 37-byte cookie, which iperf3's client picks and sends
//! on its control connection and on every TCP stream: a connection whose cookie a session is
//! waiting for is one of that session's streams, and any other is a new control connection. A UDP stream opens with
//! the 4-byte "9876" from the client's address; it goes to the oldest session from that address
//! still waiting for UDP streams, which answers "6789" from a socket of its own connected to it.
//!
//! The session then runs the test with the streams of a longhaul test, under the same limits
//! (streams, duration, buffer memory, the tests cap); a refusal is sent as iperf3's server sends
//! one (its error code: the client prints its own text for it), and the reason is logged. What this
//! server does not act on (`-M`, `-N`, `-S`, `--dont-fragment`, `-A`, …) is logged and ignored;
//! `--get-server-output` gets no output; RSA authentication is refused.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use longhaul_proto::conversation::server::{OVERRUN_GRACE, check_limits};
use longhaul_proto::iperf3::{self, COOKIE_LEN, ErrorCode, State};
use longhaul_proto::msg::CpuUse;
use longhaul_proto::{EndCondition, TestParams};
use longhaul_sys as sys;
use tracing::{info, warn};

use super::state::{
    Busy, Counts, Handshaking, Shared, Slot, accept_forever, policy, receive_forever,
};
use crate::EngineError;
use crate::channel::Channel;
use crate::iperf3::{
    read_exact_by, read_json, read_state, results_of, tcp_sender, write_json, write_state,
};
use crate::run::{Run, RunStream, recv_config, send_config};
use crate::socket::{self, SocketOptions};
use crate::stream::Flow;

/// Sessions waiting for their streams: TCP streams by cookie, UDP streams by the client's address.
#[derive(Default)]
struct Pending {
    tcp: HashMap<[u8; COOKIE_LEN], SyncSender<TcpStream>>,
    /// Oldest first.
    udp: Vec<(u64, IpAddr, SyncSender<SocketAddr>)>,
    next: u64,
}

/// The iperf3 port's sockets.
pub(super) struct Listeners {
    pub(super) tcp: TcpListener,
    pub(super) udp: UdpSocket,
}

/// Accepts connections on the iperf3 port forever (on its own thread), and routes UDP stream
/// openings (on another).
pub(super) fn serve(shared: &Arc<Shared>, l: Listeners) -> Result<(), EngineError> {
    let Listeners { tcp, udp } = l;
    let pending: Arc<Mutex<Pending>> = Arc::default();
    let p = Arc::clone(&pending);
    std::thread::Builder::new()
        .name("lh-iperf3-udp".into())
        .spawn(move || route_udp(&p, &udp))
        .map_err(|e| EngineError::io("start the iperf3 UDP thread", e))?;
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("lh-iperf3".into())
        .spawn(move || {
            let shared = Arc::clone(&s);
            accept_forever(
                &s,
                &tcp,
                "lh-iperf3-conn",
                move |conn, peer, deadline, hs| {
                    handle(&shared, &pending, conn, peer, deadline, hs);
                },
            )
        })
        .map_err(|e| EngineError::io("start the iperf3 listener thread", e))?;
    Ok(())
}

/// One connection: its cookie says whether it is a waiting session's stream or a new test.
fn handle(
    shared: &Arc<Shared>,
    pending: &Mutex<Pending>,
    conn: TcpStream,
    peer: SocketAddr,
    deadline: Instant,
    hs: Handshaking,
) {
    let mut cookie = [0u8; COOKIE_LEN];
    if let Err(e) = read_exact_by(&conn, &mut cookie, deadline, "the iperf3 cookie") {
        warn!(%peer, "dropped iperf3 connection: {e}");
        return;
    }
    drop(hs);
    let stream_of = pending
        .lock()
        .expect("iperf3 pending lock")
        .tcp
        .get(&cookie)
        .cloned();
    if let Some(tx) = stream_of {
        let _ = tx.try_send(conn);
        return;
    }
    if let Err(why) = shared.cfg.admits_iperf3(peer.ip()) {
        info!(%peer, "refused iperf3 test: {why}");
        refuse(&conn, ErrorCode::AuthTest, &why);
        return;
    }
    let cap = shared.cfg.max_tests;
    let running = shared.running.fetch_add(1, Ordering::AcqRel);
    let slot = Slot(&shared.running);
    if running >= cap {
        info!(%peer, running, cap, "refused iperf3 test: busy");
        shared.counts.refused(Busy::Test);
        let _ = write_state(&conn, State::AccessDenied);
        return;
    }
    let _ = conn.set_nodelay(true);
    match session(shared, pending, &conn, peer, cookie) {
        Ok(bytes) => {
            Counts::add(&shared.counts.tests_finished, 1);
            Counts::add(&shared.counts.test_bytes, bytes);
        }
        Err(e) => {
            Counts::add(&shared.counts.tests_failed, 1);
            warn!(%peer, "iperf3 test ended with an error: {e}");
        }
    }
    drop(slot);
}

/// Refuses the test as iperf3's server does: SERVER_ERROR, the error code, errno 0.
fn refuse(conn: &TcpStream, code: ErrorCode, reason: &str) -> EngineError {
    let mut b = vec![State::ServerError.byte()];
    b.extend_from_slice(&(code as u32).to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    let _ = (&*conn).write_all(&b);
    EngineError::Limit(format!("refused the iperf3 client: {reason}"))
}

/// The iperf3 error code closest to a limit's reason.
fn limit_code(reason: &str) -> ErrorCode {
    if reason.contains("--max-rate") {
        ErrorCode::TotalRate
    } else if reason.contains("--no-udp") {
        ErrorCode::Protocol
    } else if reason.contains("streams") {
        ErrorCode::NumStreams
    } else if reason.contains("s (omit") || reason.contains("duration") {
        ErrorCode::Duration
    } else if reason.contains("buffers") {
        ErrorCode::BufSize
    } else {
        ErrorCode::Protocol
    }
}

/// One iperf3 test; returns the bytes it moved.
fn session(
    shared: &Arc<Shared>,
    pending: &Mutex<Pending>,
    conn: &TcpStream,
    peer: SocketAddr,
    cookie: [u8; COOKIE_LEN],
) -> Result<u64, EngineError> {
    let step = || Instant::now() + shared.cfg.handshake_timeout;
    let cpu_start = sys::thread_cpu_time().unwrap_or_default();
    write_state(conn, State::ParamExchange)?;
    let json = read_json(conn, step(), "the iperf3 client's parameters")?;
    let request = match iperf3::read_params(&json) {
        Ok(r) => r,
        Err(r) => return Err(refuse(conn, r.code, &r.reason)),
    };
    let mut params = request.params;
    // The kernel measured the control connection's RTT: the window plan uses it.
    params.rtt_ns = sys::tcp_info(conn.as_fd()).map_or(0, |t| u64::from(t.rtt_us) * 1000);
    if let Some(cc) = &params.congestion
        && let Err(e) = socket::check_congestion(cc)
    {
        return Err(refuse(conn, ErrorCode::SetCongestion, &e.to_string()));
    }
    let side = socket::side_plan(&params);
    if let Err(e) = check_limits(&policy(&shared.cfg), &params, &side) {
        let reason = e.to_string();
        return Err(refuse(conn, limit_code(&reason), &reason));
    }
    if !request.ignored.is_empty() {
        info!(%peer, ignored = ?request.ignored, "iperf3 client options not acted on");
    }
    info!(
        %peer,
        client = request.client_version.as_deref().unwrap_or("?"),
        udp = params.is_udp(),
        streams = params.streams,
        direction = ?params.direction,
        "iperf3 test"
    );
    let connections = params.direction.connections(params.streams);
    let local = conn
        .local_addr()
        .map_err(|e| EngineError::io("read the control connection's address", e))?;
    let waiting = Waiting::register(pending, cookie, params.is_udp().then(|| peer.ip()));
    write_state(conn, State::CreateStreams)?;
    let streams = collect_streams(&waiting, &params, &side, local, step())?;
    drop(waiting);
    write_state(conn, State::TestStart)?;
    write_state(conn, State::TestRunning)?;
    let mut send = send_config(&params)?;
    if let Some(u) = send.udp.as_mut() {
        u.end_markers = false;
    }
    let run = Run::start(streams, &send, recv_config(&params), 0, params.omit_ns)?;
    // The client says when the test ends; it may not take longer than its own length allows.
    let limit = match params.end {
        EndCondition::Time { ns } => Duration::from_nanos(ns.saturating_add(params.omit_ns)),
        EndCondition::Bytes { .. } => shared.cfg.max_duration,
    }
    .min(shared.cfg.max_duration)
        + OVERRUN_GRACE;
    let ended = wait_for_end(conn, &run, limit, shared.cfg.max_rate_bps);
    // As iperf3's server: the streams close at the client's end (a UDP receiver takes what is
    // still on its way for a moment first).
    // (A sender blocked in a write, its peer no longer reading after its end, is woken by the
    // abort: an iperf3 client stops reading a --bidir test's streams when it ends it.)
    run.stop_senders();
    run.drain_udp_receivers(Duration::from_millis(100));
    run.wait_senders(Instant::now() + Duration::from_millis(50));
    if params.is_udp() {
        run.wait_all(Instant::now() + Duration::from_millis(200));
    }
    run.abort();
    let (totals, worker_cpu, wall, stream_error) = run.finish();
    ended?;
    if let Some(e) = stream_error {
        warn!(%peer, "iperf3 test: {e}");
    }
    let cpu = worker_cpu + (sys::thread_cpu_time().unwrap_or_default() - cpu_start);
    let cpu = CpuUse {
        user_s: cpu.user.as_secs_f64(),
        system_s: cpu.system.as_secs_f64(),
        wall_s: wall,
    };
    write_state(conn, State::ExchangeResults)?;
    let theirs = read_json(conn, step(), "the iperf3 client's results")?;
    iperf3::read_results(&theirs, connections as usize)?;
    let mine = results_of(&totals, &cpu);
    write_json(
        conn,
        &iperf3::write_results(&mine, tcp_sender(&params, false)),
    )?;
    write_state(conn, State::DisplayResults)?;
    // The client's IPERF_DONE, or its close.
    let _ = read_state(conn, step(), "the iperf3 client's goodbye");
    let bytes = totals.iter().map(|t| t.bytes).sum();
    info!(%peer, bytes, seconds = wall, "iperf3 test finished");
    Ok(bytes)
}

/// Waits for the client's TEST_END within `limit` of the start, checking the test's average rate
/// against `max_rate` once a second (as iperf3's `--server-bitrate-limit` does, an iperf3 client
/// over it is told "total required bandwidth is larger than server limit").
fn wait_for_end(
    conn: &TcpStream,
    run: &Run,
    limit: Duration,
    max_rate: Option<u64>,
) -> Result<(), EngineError> {
    use longhaul_proto::conversation::server::{RATE_CHECK_AFTER, RATE_TOLERANCE};
    let end_by = run.clock.origin() + limit;
    loop {
        let next = (Instant::now() + Duration::from_secs(1)).min(end_by);
        match read_state(conn, next, "the iperf3 client's end") {
            Ok(State::TestEnd) => return Ok(()),
            Ok(s) => {
                return Err(EngineError::Protocol(longhaul_proto::ProtoError::Invalid(
                    format!("iperf3 state {s:?} while the test ran"),
                )));
            }
            Err(EngineError::Timeout(_)) if Instant::now() < end_by => {
                let ran = run.clock.origin().elapsed();
                if let Some(max) = max_rate
                    && ran >= RATE_CHECK_AFTER
                {
                    let rate = run.bytes_moved() as f64 * 8.0 / ran.as_secs_f64();
                    if rate > max as f64 * (1.0 + RATE_TOLERANCE) {
                        let e = refuse(
                            conn,
                            ErrorCode::TotalRate,
                            &format!(
                                "moving {:.1} Mbit/s, above --max-rate {:.1} Mbit/s",
                                rate / 1e6,
                                max as f64 / 1e6
                            ),
                        );
                        // Streams still open until the client has read why (it closes then): a
                        // closed stream first would be all it reported.
                        let _ =
                            read_state(conn, Instant::now() + Duration::from_secs(2), "a close");
                        return Err(e);
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// A session's registration for its streams; unregistered on drop.
struct Waiting<'a> {
    pending: &'a Mutex<Pending>,
    cookie: [u8; COOKIE_LEN],
    udp_id: Option<u64>,
    tcp: Receiver<TcpStream>,
    udp: Option<Receiver<SocketAddr>>,
}

impl<'a> Waiting<'a> {
    fn register(
        pending: &'a Mutex<Pending>,
        cookie: [u8; COOKIE_LEN],
        udp_from: Option<IpAddr>,
    ) -> Self {
        let (ttx, trx) = mpsc::sync_channel(2 * longhaul_proto::msg::MAX_STREAMS as usize);
        let mut p = pending.lock().expect("iperf3 pending lock");
        p.tcp.insert(cookie, ttx);
        let (udp_id, udp) = match udp_from {
            Some(ip) => {
                let (utx, urx) = mpsc::sync_channel(4 * longhaul_proto::msg::MAX_STREAMS as usize);
                let id = p.next;
                p.next += 1;
                p.udp.push((id, ip.to_canonical(), utx));
                (Some(id), Some(urx))
            }
            None => (None, None),
        };
        Self {
            pending,
            cookie,
            udp_id,
            tcp: trx,
            udp,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut p = self.pending.lock().expect("iperf3 pending lock");
        p.tcp.remove(&self.cookie);
        if let Some(id) = self.udp_id {
            p.udp.retain(|(i, _, _)| *i != id);
        }
    }
}

/// Takes the test's streams in the order the client opens them (the ones it sends on first), set up
/// as planned, by `deadline`.
fn collect_streams(
    w: &Waiting<'_>,
    p: &TestParams,
    side: &longhaul_proto::msg::SidePlan,
    local: SocketAddr,
    deadline: Instant,
) -> Result<Vec<RunStream>, EngineError> {
    let connections = p.direction.connections(p.streams);
    let mut out = Vec::with_capacity(connections as usize);
    for i in 0..connections {
        let sender = !p.direction.client_sends(i, p.streams);
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = || {
            EngineError::Timeout(format!(
                "{} of the iperf3 client's {connections} streams",
                connections - i
            ))
        };
        if let Some(udp) = &w.udp {
            let from = udp.recv_timeout(left).map_err(|_| timeout())?;
            let s = crate::udp::accept_flow(local, from)
                .map_err(|e| EngineError::io(format!("open UDP stream {i} to {from}"), e))?;
            crate::udp::apply_buffers(&s, &side.window, sender, i)?;
            socket::apply_flags(s.as_fd(), &p.sockets, i)?;
            s.send(&iperf3::UDP_CONNECT_REPLY)
                .map_err(|e| EngineError::io(format!("answer UDP stream {i}"), e))?;
            let setup = crate::udp::describe(&s, i, sender);
            out.push(RunStream::new(Flow::Udp(s), &setup));
            continue;
        }
        let s = w.tcp.recv_timeout(left).map_err(|_| timeout())?;
        let opts = SocketOptions {
            plan: &side.window,
            congestion: p.congestion.as_deref(),
            flags: p.sockets,
        };
        socket::apply(s.as_fd(), &opts, sender, i)?;
        let pace = socket::pacing_for(side, i, p.streams, sender);
        if let Some(rate) = pace {
            socket::apply_pacing(s.as_fd(), rate)?;
        }
        let setup = socket::describe(&s, i, sender, pace);
        out.push(RunStream::new(
            Flow::Tcp(Box::new(Channel::plain(s))),
            &setup,
        ));
    }
    Ok(out)
}

/// Hands each UDP stream opening to the oldest session waiting for UDP streams from its address.
fn route_udp(pending: &Mutex<Pending>, sock: &UdpSocket) -> ! {
    receive_forever(sock, "iperf3 UDP socket", |datagram, from| {
        if !iperf3::is_udp_connect(datagram) {
            return;
        }
        let ip = from.ip().to_canonical();
        let to = pending
            .lock()
            .expect("iperf3 pending lock")
            .udp
            .iter()
            .find(|(_, from_ip, _)| *from_ip == ip)
            .map(|(_, _, tx)| tx.clone());
        if let Some(tx) = to {
            let _ = tx.try_send(from);
        }
    })
}
