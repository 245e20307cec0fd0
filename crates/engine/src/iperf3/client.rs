//! `longhaul test` against a stock iperf3 server (3.x), speaking its protocol: the cookie, the
//! parameters as iperf3's client writes them, its streams (TCP connections presenting the cookie,
//! or UDP sockets opened with "9876"), the end, and the results exchange. The streams run as in a
//! longhaul test (same workers, pacing, UDP batching, interval accounting); an iperf3 server reports
//! no intervals and none of its set-up, so the report's intervals are this side's view (its
//! receivers' bytes included) and the server's side is what its results say.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use longhaul_proto::conversation::drain_timeout;
use longhaul_proto::iperf3::{self, COOKIE_LEN, State};
use longhaul_proto::msg::{CpuUse, SocketSetup};
use longhaul_proto::report::{self, IntervalReport, Report};
use longhaul_proto::{EndCondition, TestParams};
use longhaul_sys as sys;

use super::{expect_state, read_json, results_of, tcp_sender, totals_of, write_json, write_state};
use crate::client::setup::{
    ClientConfig, Observer, connect_err, new_socket, start_report, window_warnings,
};
use crate::run::{Run, RunStream, recv_config, send_config};
use crate::socket::{self, SocketOptions};
use crate::stream::Flow;
use crate::{EngineError, random};

/// How often an unanswered UDP stream opening is sent again (iperf3's client sends it once and
/// waits; a lost one would hang it, so this side repeats, rarely enough that a slow server is not
/// sent a second one it would count as data).
const UDP_CONNECT_REPEAT: Duration = Duration::from_secs(1);

/// Runs one test against an iperf3 server. `ctrl` is the connected control socket and `params`
/// the test, its datagram length already chosen.
pub(crate) fn run(
    cfg: &ClientConfig,
    ctrl: TcpStream,
    server: SocketAddr,
    mut params: TestParams,
    obs: &mut dyn Observer,
) -> Result<Report, EngineError> {
    if cfg.encrypt.is_some() {
        return Err(EngineError::Unsupported(
            "an iperf3 server does not speak TLS: drop --encrypt".into(),
        ));
    }
    let _ = ctrl.set_nodelay(true);
    let step = || Instant::now() + cfg.timeout;
    let mut raw = [0u8; 36];
    random::fill(&mut raw, "an iperf3 cookie")?;
    let cookie = iperf3::make_cookie(&raw);
    (&ctrl)
        .write_all(&cookie)
        .map_err(|e| EngineError::io("send the iperf3 cookie", e))?;
    expect_state(
        &ctrl,
        State::ParamExchange,
        step(),
        "the iperf3 server's welcome",
    )?;
    write_json(&ctrl, &iperf3::write_params(&params, super::IPERF3_VERSION))?;
    expect_state(
        &ctrl,
        State::CreateStreams,
        step(),
        "the iperf3 server's go-ahead",
    )?;
    // iperf3 measures no RTT; the kernel has, on the control connection.
    params.rtt_ns = sys::tcp_info(ctrl.as_fd()).map_or(0, |t| u64::from(t.rtt_us) * 1000);
    let wall_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let local_plan = socket::side_plan(&params);
    let (flows, setups) = open_streams(cfg, server, &params, &local_plan.window, &cookie)?;
    expect_state(
        &ctrl,
        State::TestStart,
        step(),
        "the iperf3 server's test start",
    )?;
    expect_state(&ctrl, State::TestRunning, step(), "the iperf3 server's go")?;
    let cookie_text = String::from_utf8_lossy(&cookie[..COOKIE_LEN - 1]).into_owned();
    let start = start_report(
        cfg.connecting_to(),
        None,
        &params,
        wall_start,
        &cookie_text,
        &local_plan,
        None,
        &setups,
        &[],
    );
    obs.start(&start);
    let cpu_before = sys::thread_cpu_time().unwrap_or_default();
    let streams = flows
        .into_iter()
        .zip(&setups)
        .map(|(sock, s)| RunStream::new(sock, s))
        .collect();
    let mut send = send_config(&params)?;
    if let Some(u) = send.udp.as_mut() {
        u.end_markers = false;
    }
    let mut recv = recv_config(&params);
    recv.report = true;
    let mut run = Run::start(streams, &send, recv, params.interval_ns, params.omit_ns)?;
    let interrupt = cfg.interrupt.as_deref();
    let outcome = drive(&ctrl, &mut run, &params, obs, cfg.timeout, interrupt);
    let intervals = match outcome {
        Ok(i) => i,
        Err(e) => {
            run.abort();
            let _ = run.finish();
            return Err(e);
        }
    };
    let (totals, worker_cpu, wall, stream_error) = run.finish();
    if let Some(e) = stream_error {
        return Err(e);
    }
    let cpu = worker_cpu + (sys::thread_cpu_time().unwrap_or_default() - cpu_before);
    let local_cpu = CpuUse {
        user_s: cpu.user.as_secs_f64(),
        system_s: cpu.system.as_secs_f64(),
        wall_s: wall,
    };
    let mine = results_of(&totals, &local_cpu);
    write_json(
        &ctrl,
        &iperf3::write_results(&mine, tcp_sender(&params, true)),
    )?;
    let theirs = read_json(&ctrl, step(), "the iperf3 server's results")?;
    let connections = params.direction.connections(params.streams) as usize;
    let theirs = iperf3::read_results(&theirs, connections)?;
    expect_state(
        &ctrl,
        State::DisplayResults,
        step(),
        "the iperf3 server's end",
    )?;
    let _ = write_state(&ctrl, State::IperfDone);
    let (remote, remote_cpu) = totals_of(&theirs, &params, true, wall);
    let all: Vec<_> = totals.into_iter().chain(remote).collect();
    let mut end = report::end_report(
        &all,
        params.direction,
        params.streams,
        local_cpu,
        remote_cpu,
    );
    end.longhaul.warnings = window_warnings(&start.longhaul);
    end.longhaul.interrupted = interrupt.is_some_and(|f| f.load(Ordering::Relaxed));
    Ok(Report {
        start,
        intervals,
        end,
        error: None,
    })
}

/// Runs the test to its end (time, or bytes, or `interrupt` set: the user's early end, which an
/// iperf3 server takes as it takes a byte count's), reporting each interval, then tells the
/// server and waits for its go to exchange results; this side's streams have ended when it
/// returns.
fn drive(
    ctrl: &TcpStream,
    run: &mut Run,
    p: &TestParams,
    obs: &mut dyn Observer,
    timeout: Duration,
    interrupt: Option<&AtomicBool>,
) -> Result<Vec<IntervalReport>, EngineError> {
    let mut intervals = Vec::new();
    let mut report = |run: &mut Run, last: bool| {
        let mut samples = run.poll_intervals();
        if last {
            samples.extend(run.final_interval());
        }
        for (_, s) in samples {
            let rep = report::interval_report(&s, p.direction, p.streams);
            obs.interval(&rep);
            intervals.push(rep);
        }
    };
    let end_at = match p.end {
        EndCondition::Time { ns } => {
            Some(run.clock.origin() + Duration::from_nanos(ns.saturating_add(p.omit_ns)))
        }
        EndCondition::Bytes { .. } => None,
    };
    let bytes_target = match p.end {
        EndCondition::Bytes { bytes } => bytes,
        EndCondition::Time { .. } => u64::MAX,
    };
    loop {
        let now = Instant::now();
        if end_at.is_some_and(|t| now >= t) || interrupt.is_some_and(|f| f.load(Ordering::Relaxed))
        {
            break;
        }
        // A byte count ends when this side's senders spent their budget, or (receiving) when
        // the bytes have come, as iperf3's client decides.
        if end_at.is_none()
            && (run.all_finished(true) && run.has_senders() || run.received() >= bytes_target)
        {
            break;
        }
        let wake = [
            run.next_tick(),
            end_at,
            Some(now + Duration::from_millis(20)),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("a wake-up time");
        // The server says nothing while the test runs; a byte now is it giving up.
        let mut b = [0u8; 1];
        ctrl.set_read_timeout(Some(
            wake.saturating_duration_since(now)
                .max(Duration::from_millis(1)),
        ))
        .map_err(|e| EngineError::io("set a read timeout", e))?;
        match ctrl.peek(&mut b) {
            Ok(0) => {
                return Err(EngineError::Closed(
                    ctrl.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                ));
            }
            Ok(_) => {
                super::read_state(ctrl, Instant::now() + timeout, "the iperf3 server")?;
                return Err(EngineError::Protocol(longhaul_proto::ProtoError::Invalid(
                    "the iperf3 server spoke while the test ran".into(),
                )));
            }
            Err(_) => {}
        }
        report(run, false);
    }
    run.stop_senders();
    let grace = crate::udp::receive_grace(p);
    run.drain_udp_receivers(grace);
    let drain = Instant::now() + drain_timeout(p);
    run.wait_senders(drain);
    write_state(ctrl, State::TestEnd)?;
    expect_state(
        ctrl,
        State::ExchangeResults,
        drain,
        "the iperf3 server's results exchange",
    )?;
    // The server closed its streams: ours end (TCP) or stop after the grace (UDP).
    if !run.wait_all(drain) {
        return Err(EngineError::Timeout(
            "this side's streams to end after the iperf3 server closed them".into(),
        ));
    }
    report(run, true);
    Ok(intervals)
}

/// Opens the test's streams as iperf3's client does: all that the client sends on first.
fn open_streams(
    cfg: &ClientConfig,
    server: SocketAddr,
    p: &TestParams,
    plan: &longhaul_proto::window::WindowPlan,
    cookie: &[u8; COOKIE_LEN],
) -> Result<(Vec<Flow>, Vec<SocketSetup>), EngineError> {
    let total = p.direction.connections(p.streams);
    let mut flows = Vec::with_capacity(total as usize);
    let mut setups = Vec::with_capacity(total as usize);
    for i in 0..total {
        let sender = p.direction.client_sends(i, p.streams);
        if p.is_udp() {
            let s = udp_stream(cfg, server, plan, sender, i)?;
            socket::apply_flags(s.as_fd(), &p.sockets, i)?;
            setups.push(crate::udp::describe(&s, i, sender));
            flows.push(Flow::Udp(s));
            continue;
        }
        let s = new_socket(cfg, server, cfg.data_port(i)?)?;
        let opts = SocketOptions {
            plan,
            congestion: p.congestion.as_deref(),
            flags: p.sockets,
        };
        socket::apply(s.as_fd(), &opts, sender, i)?;
        s.connect_timeout(&server.into(), cfg.timeout)
            .map_err(|e| connect_err(server, e))?;
        let s: TcpStream = s.into();
        (&s).write_all(cookie)
            .map_err(|e| EngineError::io(format!("send the cookie on stream {i}"), e))?;
        let pace = p
            .pace_total_bps
            .filter(|_| sender)
            .map(|t| t / 8 / u64::from(p.streams.max(1)));
        if let Some(rate) = pace {
            socket::apply_pacing(s.as_fd(), rate)?;
        }
        setups.push(socket::describe(&s, i, sender, pace));
        flows.push(Flow::Tcp(Box::new(crate::channel::Channel::plain(s))));
    }
    Ok((flows, setups))
}

/// One UDP stream: connected to the server's port, opened with iperf3's "9876" until "6789"
/// comes back (in a reversed test the server's data may come first).
fn udp_stream(
    cfg: &ClientConfig,
    server: SocketAddr,
    plan: &longhaul_proto::window::WindowPlan,
    sender: bool,
    index: u32,
) -> Result<UdpSocket, EngineError> {
    let s = crate::udp::flow_socket(server, cfg.bind, index, cfg.data_port(index)?)?;
    crate::udp::apply_buffers(&s, plan, sender, index)?;
    let deadline = Instant::now() + cfg.timeout;
    let mut buf = vec![0u8; 65_536];
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Err(EngineError::Timeout(format!(
                "the iperf3 server to answer UDP stream {index} (is UDP port {} reachable?)",
                server.port()
            )));
        }
        let _ = s.send(&iperf3::UDP_CONNECT_MSG);
        let until = (now + UDP_CONNECT_REPEAT).min(deadline);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s.set_read_timeout(Some(left))
                .map_err(|e| EngineError::io("set a read timeout", e))?;
            match s.recv(&mut buf) {
                Ok(n) if iperf3::is_udp_connect_reply(&buf[..n]) => {
                    s.set_read_timeout(None)
                        .map_err(|e| EngineError::io("clear a read timeout", e))?;
                    return Ok(s);
                }
                // Data of a reversed test racing the answer, or a stray datagram: not it.
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}
