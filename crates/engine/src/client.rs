//! `longhaul test HOST`: the client side of a memory-to-memory test.
//!
//! The client measures the RTT on the control connection, sends the parameters, sizes its own buffers
//! from RTT × target rate (the server does the same for its side), opens the data connections with the
//! buffers set *before* `connect` (so the window scale in the handshake fits), and then runs the test,
//! merging its own samples with the server's into one report per interval. Intervals always show the
//! *sender's* view of each stream, since that is where cwnd, RTT, pacing and the limit chronographs live.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use longhaul_proto::interval::StreamInterval;
use longhaul_proto::msg::{CpuUse, SidePlan, SideResults, SocketSetup};
use longhaul_proto::report::{
    self, Connected, ConnectingTo, IntervalReport, Report, Start, StartExtra, TestStart, Timestamp,
};
use longhaul_proto::window::{BufferAction, BufferOutcome, WindowPlan, assess};
use longhaul_proto::wire::Preamble;
use longhaul_proto::{Direction, EndCondition, Message, ProtoError, TestParams, WindowRequest};
use longhaul_sys as sys;
use longhaul_units::Nanos;

use crate::control::{Control, unexpected};
use crate::run::{Run, RunStream, drain_timeout, recv_config, send_config};

use crate::address::{self, Family};
use crate::socket::{self, SocketOptions};
use crate::{EngineError, SOFTWARE, random};

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

/// Runs one test against a server and returns the full report.
pub fn run_test(cfg: &ClientConfig, obs: &mut dyn Observer) -> Result<Report, EngineError> {
    let mut params = cfg.params.clone();
    params.validate()?;
    if let Some(cc) = &params.congestion {
        socket::check_congestion(cc)?;
    }
    let (ctrl_sock, server) = connect_control(cfg)?;
    let mut ctrl = Control::new(ctrl_sock);
    let wall_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    std::io::Write::write_all(&mut ctrl.socket(), &Preamble::control().encode())
        .map_err(|e| EngineError::io("send preamble", e))?;
    ctrl.send(&Message::Hello {
        software: SOFTWARE.into(),
    })?;
    let cookie_hex = match ctrl.recv(cfg.timeout, "the server's welcome")? {
        Message::Welcome { cookie, .. } => cookie,
        Message::Busy { running, cap } => return Err(EngineError::Busy { running, cap }),
        m => return Err(unexpected(&m, "waiting for welcome")),
    };
    let cookie = random::unhex(&cookie_hex)
        .ok_or_else(|| ProtoError::Invalid(format!("bad cookie {cookie_hex:?}")))?;

    params.rtt_ns = measure_rtt(&mut ctrl, cfg.timeout)?.0;
    ctrl.send(&Message::Params(params.clone()))?;
    let remote_plan = match ctrl.recv(cfg.timeout, "the server's plan")? {
        Message::Accepted(plan) => plan,
        m => return Err(unexpected(&m, "waiting for the server's plan")),
    };

    let local_plan = socket::side_plan(&params);
    let plan = &local_plan.window;

    // Open the data connections, each set up before connect.
    let total = params.direction.connections(params.streams);
    let opts = SocketOptions {
        plan,
        congestion: params.congestion.as_deref(),
    };
    let mut socks = Vec::with_capacity(total as usize);
    let mut local_setups = Vec::with_capacity(total as usize);
    for i in 0..total {
        let sender = params.direction.client_sends(i, params.streams);
        let s = connect_data(
            cfg,
            server,
            &opts,
            sender,
            i,
            &Preamble::data(cookie, i).encode(),
        )?;
        let pace = socket::pacing_for(&local_plan, i, params.streams, sender);
        if let Some(p) = pace {
            socket::apply_pacing(s.as_fd(), p)?;
        }
        local_setups.push(socket::describe(&s, i, sender, pace));
        socks.push(s);
    }
    let remote_setups = match ctrl.recv(cfg.timeout, "the server's stream set-up")? {
        Message::StreamsReady { sockets } => sockets,
        m => return Err(unexpected(&m, "waiting for streams")),
    };

    let start = start_report(
        cfg,
        &params,
        wall_start,
        &cookie_hex,
        &local_plan,
        &remote_plan,
        &local_setups,
        &remote_setups,
    );
    obs.start(&start);

    // CPU of this test's threads only (control + streams), as the server counts its side: correct even
    // when client and server share a process (the self-test).
    let cpu_before = sys::thread_cpu_time().unwrap_or_default();
    let streams: Vec<RunStream> = socks
        .into_iter()
        .zip(&local_setups)
        .map(|(sock, s)| RunStream {
            index: s.stream,
            sender: s.sender,
            sock,
            congestion: s.congestion.clone(),
            mss: s.mss,
        })
        .collect();
    let send = send_config(&params)?;
    ctrl.send(&Message::Start)?;
    let mut run = Run::start(
        streams,
        &send,
        recv_config(&params),
        params.interval_ns,
        params.omit_ns,
    )?;
    let mut merger = IntervalMerger::new(&params, run.has_senders());
    let outcome = drive(&mut ctrl, &mut run, &params, &mut merger, obs);
    if outcome.is_err() {
        run.abort();
    }
    let remote_results = match outcome {
        Ok(r) => r,
        Err(e) => {
            let _ = run.finish();
            return Err(e);
        }
    };
    let (mut totals, worker_cpu, wall, stream_error) = run.finish();
    if let Some(e) = stream_error {
        return Err(e);
    }
    let cpu = worker_cpu + (sys::thread_cpu_time().unwrap_or_default() - cpu_before);
    let local_cpu = CpuUse {
        user_s: cpu.user.as_secs_f64(),
        system_s: cpu.system.as_secs_f64(),
        wall_s: wall,
    };
    // Let the server log our side; it closes after reading this.
    let _ = ctrl.send(&Message::Results(SideResults {
        cpu: local_cpu,
        streams: totals.clone(),
    }));

    let intervals = merger.finish(obs);
    totals.extend(remote_results.streams);
    let mut end = report::end_report(
        &totals,
        params.direction,
        params.streams,
        local_cpu,
        remote_results.cpu,
    );
    end.longhaul.warnings = window_warnings(&start.longhaul);
    Ok(Report {
        start,
        intervals,
        end,
        error: None,
    })
}

/// The running phase: interval reports until the end condition, then stop, drain and collect results.
fn drive(
    ctrl: &mut Control,
    run: &mut Run,
    params: &TestParams,
    merger: &mut IntervalMerger,
    obs: &mut dyn Observer,
) -> Result<SideResults, EngineError> {
    let started = run.clock.origin();
    let end_at = match params.end {
        // The omit period comes on top of the measured duration, as in iperf3.
        EndCondition::Time { ns } => Some(started + Duration::from_nanos(params.omit_ns + ns)),
        EndCondition::Bytes { .. } => None,
    };
    loop {
        let now = Instant::now();
        let done = match end_at {
            Some(t) => now >= t,
            // With -n the test ends when every byte has been sent (forward) or received (reverse).
            None => match params.direction {
                Direction::Forward => run.all_finished(true),
                Direction::Reverse => run.all_finished(false),
                Direction::Bidir => run.all_finished(true) && run.all_finished(false),
            },
        };
        if done {
            break;
        }
        let mut wake = now + Duration::from_millis(if end_at.is_some() { 1000 } else { 20 });
        for t in [run.next_tick(), end_at].into_iter().flatten() {
            wake = wake.min(t);
        }
        match ctrl.recv_until(wake)? {
            Some(Message::Interval(s)) => merger.remote(s.index, s.streams, obs),
            Some(m) => return Err(unexpected(&m, "running")),
            None => {
                for (index, streams) in run.poll_intervals() {
                    merger.local(index, streams, obs);
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
        merger.local(index, streams, obs);
    }
    if let Some((index, streams)) = run.final_interval() {
        merger.local(index, streams, obs);
    }
    ctrl.send(&Message::Stop)?;
    let results = loop {
        match ctrl.recv_until(deadline)? {
            Some(Message::Interval(s)) => merger.remote(s.index, s.streams, obs),
            Some(Message::Results(r)) => break r,
            Some(m) => return Err(unexpected(&m, "waiting for results")),
            None => return Err(EngineError::Timeout("the server's results".into())),
        }
    };
    if !run.wait_all(deadline) {
        return Err(EngineError::Timeout("the server's streams to end".into()));
    }
    Ok(results)
}

/// One interval's samples from this side and from the server, as they arrive.
type Halves = (Option<Vec<StreamInterval>>, Option<Vec<StreamInterval>>);

/// Pairs local and remote interval samples by index and emits each interval once it is complete.
struct IntervalMerger {
    direction: Direction,
    streams: u32,
    need_local: bool,
    need_remote: bool,
    pending: BTreeMap<u32, Halves>,
    done: Vec<IntervalReport>,
}

impl IntervalMerger {
    fn new(params: &TestParams, local_senders: bool) -> Self {
        let remote_senders = params.direction != Direction::Forward;
        Self {
            direction: params.direction,
            streams: params.streams,
            need_local: local_senders,
            need_remote: remote_senders,
            pending: BTreeMap::new(),
            done: Vec::new(),
        }
    }

    fn local(&mut self, index: u32, s: Vec<StreamInterval>, obs: &mut dyn Observer) {
        self.pending.entry(index).or_default().0 = Some(s);
        self.flush(false, obs);
    }

    fn remote(&mut self, index: u32, s: Vec<StreamInterval>, obs: &mut dyn Observer) {
        self.pending.entry(index).or_default().1 = Some(s);
        self.flush(false, obs);
    }

    /// Emits complete intervals in order; with `all`, emits whatever is left.
    fn flush(&mut self, all: bool, obs: &mut dyn Observer) {
        while let Some(entry) = self.pending.first_entry() {
            let (l, r) = entry.get();
            let complete = (!self.need_local || l.is_some()) && (!self.need_remote || r.is_some());
            if !complete && !all {
                return;
            }
            let (l, r) = entry.remove();
            let samples: Vec<StreamInterval> = l.into_iter().chain(r).flatten().collect();
            if samples.is_empty() {
                continue;
            }
            let rep = report::interval_report(&samples, self.direction, self.streams);
            obs.interval(&rep);
            self.done.push(rep);
        }
    }

    fn finish(mut self, obs: &mut dyn Observer) -> Vec<IntervalReport> {
        self.flush(true, obs);
        self.done
    }
}

fn resolve(cfg: &ClientConfig) -> Result<Vec<SocketAddr>, EngineError> {
    address::resolve(&cfg.host, cfg.port, cfg.family, cfg.bind)
}

fn new_socket(cfg: &ClientConfig, server: SocketAddr) -> Result<socket2::Socket, EngineError> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(server),
        socket2::Type::STREAM,
        None,
    )
    .map_err(|e| EngineError::io("create socket", e))?;
    if let Some(ip) = cfg.bind {
        let local = SocketAddr::new(ip, 0);
        s.bind(&local.into())
            .map_err(|e| EngineError::io(format!("bind {ip}"), e))?;
    }
    Ok(s)
}

fn connect_err(server: SocketAddr, e: std::io::Error) -> EngineError {
    EngineError::Connect {
        target: server.to_string(),
        source: e,
        hint: " (is `longhaul server` running there, on that port, and reachable?)",
    }
}

fn connect_control(cfg: &ClientConfig) -> Result<(TcpStream, SocketAddr), EngineError> {
    let mut last = None;
    for server in resolve(cfg)? {
        let s = new_socket(cfg, server)?;
        match s.connect_timeout(&server.into(), cfg.timeout) {
            Ok(()) => return Ok((s.into(), server)),
            Err(e) => last = Some(connect_err(server, e)),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

fn connect_data(
    cfg: &ClientConfig,
    server: SocketAddr,
    opts: &SocketOptions<'_>,
    sender: bool,
    index: u32,
    preamble: &[u8],
) -> Result<TcpStream, EngineError> {
    let s = new_socket(cfg, server)?;
    socket::apply(s.as_fd(), opts, sender, index)?;
    s.connect_timeout(&server.into(), cfg.timeout)
        .map_err(|e| connect_err(server, e))?;
    let mut s: TcpStream = s.into();
    std::io::Write::write_all(&mut s, preamble)
        .map_err(|e| EngineError::io(format!("send preamble of stream {index}"), e))?;
    Ok(s)
}

/// Measures the RTT with a few pings on the control connection; the minimum is the path's RTT with the
/// least queueing.
fn measure_rtt(ctrl: &mut Control, timeout: Duration) -> Result<Nanos, EngineError> {
    let mut best = u64::MAX;
    for seq in 0..5 {
        let t0 = Instant::now();
        ctrl.send(&Message::Ping { seq })?;
        match ctrl.recv(timeout, "pong")? {
            Message::Pong { seq: s } if s == seq => {}
            m => return Err(unexpected(&m, "measuring the RTT")),
        }
        best = best.min(t0.elapsed().as_nanos() as u64);
    }
    Ok(Nanos(best.max(1)))
}

/// One outcome per buffer kind that matters on this side, from the first socket of each role.
fn outcomes(plan: &WindowPlan, setups: &[SocketSetup]) -> Vec<BufferOutcome> {
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
fn start_report(
    cfg: &ClientConfig,
    params: &TestParams,
    timesecs: u64,
    cookie: &str,
    local_plan: &SidePlan,
    remote_plan: &SidePlan,
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
    let remote_buffers = outcomes(&remote_plan.window, remote);
    Start {
        connected,
        version: SOFTWARE.into(),
        system_info: system_info(),
        timestamp: Timestamp::from_unix(timesecs),
        connecting_to: ConnectingTo {
            host: cfg.host.clone(),
            port: cfg.port,
        },
        cookie: cookie.into(),
        tcp_mss_default: first.map_or(0, |s| s.mss),
        sock_bufsize: fixed,
        sndbuf_actual: first.map_or(0, |s| s.sndbuf),
        rcvbuf_actual: first.map_or(0, |s| s.rcvbuf),
        test_start: TestStart {
            protocol: "TCP".into(),
            num_streams: params.streams,
            blksize: params.write_len,
            omit: (params.omit_ns / 1_000_000_000) as u32,
            duration,
            bytes,
            blocks: 0,
            reverse: u8::from(params.direction == Direction::Reverse),
            tos: 0,
            target_bitrate: 0,
            bidir: u8::from(params.direction == Direction::Bidir),
            fqrate: local_plan.pacing_per_stream.first().map_or(0, |b| b * 8),
            interval: params.interval_ns as f64 / 1e9,
        },
        longhaul: StartExtra {
            rtt_ms: params.rtt_ns as f64 / 1e6,
            target_rate_bps: params.target_rate_bps,
            congestion_requested: params.congestion.clone(),
            pace_total_bps: params.pace_total_bps,
            zerocopy: params.zerocopy.then(|| {
                crate::zerocopy::ZeroCopyMethod::selected()
                    .name()
                    .to_string()
            }),
            local_plan: local_plan.clone(),
            local_buffers,
            remote_plan: remote_plan.clone(),
            remote_buffers,
            local_sockets: local.to_vec(),
            remote_sockets: remote.to_vec(),
        },
    }
}

/// Buffer outcomes that limit the run, with their fixes, plus the plans' notes.
fn window_warnings(x: &StartExtra) -> Vec<String> {
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
