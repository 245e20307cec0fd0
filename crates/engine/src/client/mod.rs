//! `longhaul test HOST`: the client side of a memory-to-memory test.
//!
//! The client measures the RTT on the control connection, sends the parameters, sizes its own buffers
//! from RTT × target rate (the server does the same for its side), opens the data connections with the
//! buffers set *before* `connect` (so the window scale in the handshake fits), and then runs the test,
//! merging its own samples with the server's into one report per interval. Intervals always show the
//! *sender's* view of each stream, since that is where cwnd, RTT, pacing and the limit chronographs live.
//!
//! The conversation's rules are `longhaul_proto::conversation::client`'s; this module is its driver:
//! it resolves and connects, opens and sets up the data connections, runs the streams and the clock,
//! and assembles the start of the report from what only this host knows.

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use longhaul_proto::auto_pace::{BottleneckEstimate, TrainTiming};
use longhaul_proto::conversation::client::{Client, ClientSettings, Event};
use longhaul_proto::msg::{AUTO_DATAGRAM_LEN, MAX_DATAGRAM_LEN};
use longhaul_proto::msg::{CpuUse, SidePlan, SideResults, SocketSetup};
use longhaul_proto::msg::{MAX_RATE_BPS, MIN_PACE_BPS, PaceAuto};
use longhaul_proto::report::{Report, Start};
use longhaul_proto::wire::{Cookie, Preamble};
use longhaul_proto::{Direction, TestParams, Transport};
use longhaul_sys as sys;
use longhaul_units::Nanos;

use crate::control::Control;
use crate::fast_start::InitialWindowRoute;
use crate::run::{Run, RunStream, recv_config, send_config, wake_at};
use crate::stream::Flow;

use crate::channel::Channel;
use crate::socket::{self, SocketOptions};
use crate::tls::{Connector, Pinned};
use crate::{EngineError, SOFTWARE};

pub(crate) mod setup;

pub use setup::{ClientConfig, DEFAULT_DATAGRAM_LEN, Observer, Quiet, ServerProtocol, system_info};
pub(crate) use setup::{connect_control, connect_err, new_socket, start_report, window_warnings};

/// Runs one test against a server and returns the full report.
///
/// The conversation itself (phases, deadlines, the end of the test, the drain, the pairing of
/// intervals, the end report) is [`longhaul_proto::conversation::client::Client`]'s; this function
/// owns the sockets, the stream threads and the clock, and acts on what the machine asks.
///
/// With [`ServerProtocol::Auto`], a server on iperf3's port is spoken to in iperf3's protocol, and
/// one elsewhere that answers the hello as an iperf3 server does (its first byte asks for
/// parameters, or says it is busy) is connected to again in iperf3's protocol.
pub fn run_test(cfg: &ClientConfig, obs: &mut dyn Observer) -> Result<Report, EngineError> {
    let iperf3 = match cfg.protocol {
        ServerProtocol::Iperf3 => true,
        ServerProtocol::Auto => cfg.port == longhaul_proto::iperf3::DEFAULT_PORT,
        ServerProtocol::Longhaul => false,
    };
    if iperf3 {
        return run_iperf3(cfg, obs, Duration::ZERO);
    }
    match run_longhaul(cfg, obs) {
        Err(EngineError::SpeaksIperf3) if cfg.protocol == ServerProtocol::Auto => {
            tracing::info!(
                "the server answered as iperf3 does: testing again in iperf3's protocol"
            );
            // iperf3's server reopens its listener after the hello it could not read.
            run_iperf3(cfg, obs, IPERF3_RELISTEN)
        }
        Err(EngineError::SpeaksIperf3) => {
            Err(EngineError::Protocol(longhaul_proto::ProtoError::Invalid(
                "the server speaks iperf3's protocol, not longhaul's (drop --longhaul)".into(),
            )))
        }
        r => r,
    }
}

/// The test's parameters, checked, with a UDP test's datagram length picked from the control
/// connection's MSS when it was left to the client (as iperf3 does).
fn checked_params(cfg: &ClientConfig, ctrl: &TcpStream) -> Result<TestParams, EngineError> {
    let mut params = cfg.params.clone();
    if params.is_udp() && params.write_len == AUTO_DATAGRAM_LEN {
        let mss = sys::mss(ctrl.as_fd()).unwrap_or(0);
        params.write_len = if mss == 0 {
            DEFAULT_DATAGRAM_LEN
        } else {
            mss.min(MAX_DATAGRAM_LEN)
        };
    }
    params.validate()?;
    tracing::debug!("test parameters: {params:?}");
    Ok(params)
}

/// `--pace auto`'s packet trains to the server's reflector, before the test: probes as large as
/// the control connection's segments, timed at the reflector when the client sends the data and
/// back at the client when the server does (or both do).
fn pace_estimate(
    cfg: &ClientConfig,
    params: &TestParams,
    ctrl: &TcpStream,
    server: SocketAddr,
) -> Result<BottleneckEstimate, EngineError> {
    if params.is_udp() || params.pace_total_bps.is_some() {
        return Err(EngineError::Unsupported(
            "--pace auto paces TCP streams; not with -u, nor with a --pace rate".into(),
        ));
    }
    let timing = match params.direction {
        Direction::Forward => TrainTiming::Forward,
        Direction::Reverse | Direction::Bidir => TrainTiming::RoundTrip,
    };
    let mss = sys::mss(ctrl.as_fd()).unwrap_or(DEFAULT_DATAGRAM_LEN);
    crate::probe::estimate_bottleneck(server, mss, timing, cfg.timeout)
}

/// How long a client that found an iperf3 server keeps trying to connect again: the server closes
/// and reopens its listening socket after a client it could not read.
const IPERF3_RELISTEN: Duration = Duration::from_secs(3);

/// A test in iperf3's protocol. For `retry` after the start, a connection the server refused or
/// reset before the test began (iperf3's server closing and reopening its listener) is made again.
fn run_iperf3(
    cfg: &ClientConfig,
    obs: &mut dyn Observer,
    retry: Duration,
) -> Result<Report, EngineError> {
    cfg.params.validate_request()?;
    if cfg.pace_auto {
        return Err(EngineError::Unsupported(
            "--pace auto needs a longhaul server (its reflector times the packet trains), not \
             iperf3's"
                .into(),
        ));
    }
    if let Some(cc) = &cfg.params.congestion {
        socket::check_congestion(cc)?;
    }
    let until = Instant::now() + retry;
    loop {
        let mut watch = Started {
            obs,
            started: false,
        };
        let outcome = connect_control(cfg).and_then(|(ctrl, server)| {
            let params = checked_params(cfg, &ctrl)?;
            crate::iperf3::client::run(cfg, ctrl, server, params, &mut watch)
        });
        match outcome {
            Err(e) if !watch.started && Instant::now() < until && turned_away(&e) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// An observer that notes whether the test started (so that a retry never repeats a start).
struct Started<'a> {
    obs: &'a mut dyn Observer,
    started: bool,
}

impl Observer for Started<'_> {
    fn start(&mut self, start: &longhaul_proto::report::Start) {
        self.started = true;
        self.obs.start(start);
    }

    fn interval(&mut self, interval: &longhaul_proto::report::IntervalReport) {
        self.obs.interval(interval);
    }
}

/// Whether a connection was turned away before any test: refused, reset, or closed at once.
fn turned_away(e: &EngineError) -> bool {
    use std::io::ErrorKind::{ConnectionRefused, ConnectionReset};
    match e {
        EngineError::Connect { source, .. } | EngineError::Io { source, .. } => {
            matches!(source.kind(), ConnectionRefused | ConnectionReset)
        }
        EngineError::Closed(_) => true,
        _ => false,
    }
}

fn run_longhaul(cfg: &ClientConfig, obs: &mut dyn Observer) -> Result<Report, EngineError> {
    let params = cfg.params.clone();
    params.validate_request()?;
    if params.is_udp() && cfg.encrypt.is_some() {
        return Err(EngineError::Unsupported(
            "a UDP test (-u) cannot be encrypted: its datagrams are random filler; drop --encrypt"
                .into(),
        ));
    }
    if let Some(cc) = &params.congestion
        && params.transport.is_tcp()
    {
        socket::check_congestion(cc)?;
    }
    if params.fast_start && params.direction != Direction::Forward {
        return Err(EngineError::Unsupported(
            "--dedicated opens the sending side's window from a route of its own: with -R or \
             --bidir the server sends, and a client does not change the server's routes"
                .into(),
        ));
    }
    let (ctrl_sock, server) = connect_control(cfg)?;
    let mut params = checked_params(cfg, &ctrl_sock)?;
    let pace_estimate = if cfg.pace_auto {
        let e = pace_estimate(cfg, &params, &ctrl_sock, server)?;
        params.pace_auto = Some(PaceAuto {
            bottleneck_bps: e.start_bps.clamp(MIN_PACE_BPS, MAX_RATE_BPS),
        });
        params.validate()?;
        Some(e)
    } else {
        None
    };
    let (channel, pinned) = match &cfg.encrypt {
        Some(tls) => {
            let (c, p) = Connector::new(tls)?.connect(ctrl_sock, &cfg.host, cfg.timeout)?;
            (c, Some(p))
        }
        None => (Channel::plain(ctrl_sock), None),
    };
    let mut ctrl = Control::new(channel);
    let wall_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    ctrl.channel()
        .write_all(&Preamble::control().encode())
        .map_err(|e| EngineError::io("send preamble", e))?;
    let origin = Instant::now();
    let settings = ClientSettings {
        timeout: cfg.timeout,
        software: SOFTWARE.into(),
        peer: ctrl
            .socket()
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into()),
    };
    let mut drv = Driver {
        cfg,
        server,
        pinned,
        encryption: ctrl.channel().encryption(),
        origin,
        wall_start,
        conv: Client::new(params, settings, Duration::ZERO),
        test: None,
        run: None,
        report: None,
        pace_estimate,
        route: None,
    };
    if cfg.encrypt.is_none() {
        flush(&mut drv.conv, &mut ctrl)?;
        if answers_as_iperf3(ctrl.socket(), cfg.timeout) {
            return Err(EngineError::SpeaksIperf3);
        }
    }
    let outcome = drv.converse(&mut ctrl, obs);
    if let Some(run) = drv.run.take() {
        // The test failed while its streams ran: wake and join them.
        run.abort();
        let _ = run.finish();
    }
    outcome?;
    drv.report
        .ok_or_else(|| EngineError::Timeout("the end of the test".into()))
}

/// Whether the server's first byte is an iperf3 server's (it asks for parameters, or says it is
/// busy) rather than the start of a longhaul frame (whose length starts with a zero byte). Waits
/// for it at most `timeout`; nothing by then is not iperf3 (the conversation's own deadline
/// reports it).
fn answers_as_iperf3(sock: &TcpStream, timeout: Duration) -> bool {
    let _ = sock.set_read_timeout(Some(timeout));
    let mut b = [0u8; 1];
    let first = sock.peek(&mut b);
    let _ = sock.set_read_timeout(None);
    matches!(first, Ok(1))
        && matches!(
            longhaul_proto::iperf3::State::from_byte(b[0]),
            Some(
                longhaul_proto::iperf3::State::ParamExchange
                    | longhaul_proto::iperf3::State::AccessDenied
            )
        )
}

/// Returns at `at` (wall clock): one absolute sleep on the real-time clock, with this thread's
/// timer slack at its minimum. A sleeper woken by its timer runs at once on a core that is not
/// saturated, so tests held on one machine start within tens of microseconds; spinning the last
/// milliseconds instead would take the cores the other held tests need to wake (on two cores,
/// four spinners started 2-3 ms apart).
pub(crate) fn hold_until(at: SystemTime) {
    let Ok(since_epoch) = at.duration_since(std::time::UNIX_EPOCH) else {
        return;
    };
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    let wake = rustix::thread::Timespec {
        tv_sec: i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: since_epoch.subsec_nanos().into(),
    };
    while let Err(rustix::io::Errno::INTR) =
        rustix::thread::clock_nanosleep_absolute(rustix::thread::ClockId::Realtime, &wake)
    {}
    // Back to the thread's default slack.
    let _ = rustix::thread::set_current_timer_slack(None);
}

/// Sends every message the machine holds, in order.
fn flush(conv: &mut Client, ctrl: &mut Control) -> Result<(), EngineError> {
    while let Some(m) = conv.poll_transmit() {
        ctrl.send(&m)?;
    }
    Ok(())
}

/// What the client learns during set-up and keeps for the report and the run.
struct Test {
    params: TestParams,
    /// `--transport udp`: how the QUIC connections are set up.
    quic: Option<longhaul_proto::report::QuicStart>,
    cookie_text: String,
    server_plan: Box<SidePlan>,
    local_plan: SidePlan,
    socks: Vec<Flow>,
    local_setups: Vec<SocketSetup>,
    start: Option<Start>,
    /// CPU of this test's threads only (control + streams), as the server counts its side: correct
    /// even when client and server share a process (the self-test).
    cpu_before: sys::CpuTime,
    /// This host's TCP shortage counters when the streams started.
    short_before: Option<sys::ShortOfMemory>,
}

/// How soon a client with an interrupt flag sees it set, at most.
const INTERRUPT_CHECK: Duration = Duration::from_millis(100);

/// The client's driver: the machine, and the I/O it asks for.
struct Driver<'a> {
    cfg: &'a ClientConfig,
    server: SocketAddr,
    /// With `--encrypt`: TLS for the data connections, accepting only the control's certificate.
    pinned: Option<Pinned>,
    /// With `--encrypt`: the TLS version and cipher suite, for the report.
    encryption: Option<String>,
    origin: Instant,
    wall_start: u64,
    conv: Client,
    test: Option<Test>,
    run: Option<Run>,
    report: Option<Report>,
    /// `--pace auto`: the packet trains' estimate, for the start of the report.
    pace_estimate: Option<BottleneckEstimate>,
    /// `--dedicated`: the route that opens the data connections at the pacing rate, removed when
    /// the test ends.
    route: Option<InitialWindowRoute>,
}

impl Driver<'_> {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn converse(&mut self, ctrl: &mut Control, obs: &mut dyn Observer) -> Result<(), EngineError> {
        let mut interrupted = false;
        loop {
            if !interrupted
                && self
                    .cfg
                    .interrupt
                    .as_ref()
                    .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                interrupted = true;
                let started = self.test.as_ref().is_some_and(|t| t.start.is_some());
                if !self.conv.interrupt(self.now()) && !started {
                    return Err(EngineError::Interrupted("before the test started"));
                }
            }
            while let Some(ev) = self.conv.poll_event() {
                self.act(ev, ctrl, obs)?;
            }
            flush(&mut self.conv, ctrl)?;
            if self.conv.is_over() {
                return Ok(());
            }
            let mut wake = wake_at(self.origin, self.conv.poll_timeout(), self.run.as_ref());
            if self.cfg.interrupt.is_some() && !interrupted {
                wake = wake.min(Instant::now() + INTERRUPT_CHECK);
            }
            match ctrl.recv_until(wake)? {
                Some(m) => self.conv.handle(m, self.now())?,
                None => {
                    if let Some(run) = &mut self.run {
                        for (index, streams) in run.poll_intervals() {
                            self.conv.local_interval(index, streams);
                        }
                        let (senders, receivers) =
                            (run.all_finished(true), run.all_finished(false));
                        self.conv
                            .streams_finished(senders, receivers, self.origin.elapsed());
                    }
                    self.conv.handle_timeout(self.now())?;
                }
            }
        }
    }

    fn act(
        &mut self,
        ev: Event,
        ctrl: &mut Control,
        obs: &mut dyn Observer,
    ) -> Result<(), EngineError> {
        match ev {
            Event::ProveKey { cookie } => {
                let Some(key) = &self.cfg.key else {
                    return Err(EngineError::Limit(
                        "the server serves tests only to clients that hold its key \
                         (--require-key); give the key file with --key FILE"
                            .into(),
                    ));
                };
                let binding = ctrl.channel().binding();
                let proof = key.test_proof(&cookie, binding.as_ref());
                self.conv.prove_key(proof.to_string());
            }
            Event::OpenStreams {
                cookie,
                cookie_text,
                params,
                server_plan,
            } => {
                // The server admitted the test: its stream set-up, intervals and results may be as
                // large as the test's stream count needs.
                ctrl.set_frame_limit(params.frame_limit());
                if params.fast_start {
                    let (route, _) = InitialWindowRoute::for_streams(
                        self.server.ip(),
                        ctrl.socket().as_fd(),
                        params.pace_total_bps.unwrap_or(params.target_rate_bps),
                        Nanos(params.rtt_ns),
                        params.streams,
                    )?;
                    self.route = Some(route);
                }
                let quic = (params.transport == Transport::Quic).then(|| {
                    crate::quic::FlowPlan::new(
                        &socket::side_plan(&params),
                        params.congestion.as_deref(),
                        ctrl.socket().as_fd(),
                        self.server.is_ipv6(),
                    )
                });
                let (socks, local_setups, local_plan) =
                    self.open_streams(&params, cookie, quic.as_ref())?;
                self.test = Some(Test {
                    quic: quic.as_ref().map(crate::quic::FlowPlan::report),
                    params,
                    cookie_text,
                    server_plan,
                    local_plan,
                    socks,
                    local_setups,
                    start: None,
                    cpu_before: sys::CpuTime::default(),
                    short_before: None,
                });
                self.conv.streams_connected(self.now());
            }
            Event::StreamsReady { sockets } => {
                let t = self
                    .test
                    .as_mut()
                    .expect("streams ready after they were opened");
                let mut start = start_report(
                    self.cfg.connecting_to(),
                    self.encryption.clone(),
                    &t.params,
                    self.wall_start,
                    &t.cookie_text,
                    &t.local_plan,
                    Some(&t.server_plan),
                    &t.local_setups,
                    &sockets,
                );
                start.longhaul.pace_auto = self.pace_estimate.clone();
                start.longhaul.quic = t.quic.clone();
                if t.quic.is_some() {
                    // A QUIC flow's window is its flow-control window, in user space: the socket
                    // buffers judged as a TCP window's would report limits that do not exist.
                    start.longhaul.local_buffers.clear();
                    start.longhaul.remote_buffers.clear();
                }
                // Everything is set up: only the start is left to do at the common instant.
                if let Some(at) = self.cfg.start_at {
                    hold_until(at);
                }
                obs.start(&start);
                t.start = Some(start);
                t.cpu_before = sys::thread_cpu_time().unwrap_or_default();
                t.short_before = sys::ShortOfMemory::read();
                let streams: Vec<RunStream> = std::mem::take(&mut t.socks)
                    .into_iter()
                    .zip(&t.local_setups)
                    .map(|(sock, s)| RunStream::new(sock, s))
                    .collect();
                let send = send_config(&t.params)?;
                self.conv.start();
                flush(&mut self.conv, ctrl)?;
                let run = Run::start(
                    streams,
                    &send,
                    recv_config(&t.params),
                    t.params.interval_ns,
                    t.params.omit_ns,
                )?;
                let started = run.clock.origin().saturating_duration_since(self.origin);
                self.run = Some(run);
                self.conv.streams_started(started);
            }
            Event::Interval(rep) => obs.interval(&rep),
            Event::StopSenders { drain_by } => {
                let run = self.run.as_mut().expect("running");
                run.stop_senders();
                // The server's senders stop when our Stop reaches them.
                let grace = self
                    .test
                    .as_ref()
                    .map_or(Duration::ZERO, |t| crate::udp::receive_grace(&t.params));
                run.drain_udp_receivers(grace);
                // Let each sender finish its last write before the last interval is read, so the
                // intervals add up to the totals; a sender still stuck at the deadline is reported by
                // `wait_all` after the server's results.
                run.wait_senders(self.origin + drain_by);
                for (index, streams) in run.poll_intervals() {
                    self.conv.local_interval(index, streams);
                }
                if let Some((index, streams)) = run.final_interval() {
                    self.conv.local_interval(index, streams);
                }
                self.conv.senders_drained();
            }
            Event::ServerResults { drain_by } => {
                let tail = Instant::now()
                    + self.test.as_ref().map_or(Duration::ZERO, |t| {
                        longhaul_proto::conversation::tail_grace(&t.params)
                    });
                let ended = self
                    .run
                    .as_ref()
                    .expect("running")
                    .end_streams(tail, self.origin + drain_by);
                self.conv.streams_ended(ended)?;
                let mut run = self.run.take().expect("running");
                let pace_auto = run.pace_summary();
                let (totals, worker_cpu, wall, stream_error) = run.finish();
                if let Some(e) = stream_error {
                    return Err(e);
                }
                let t = self.test.as_ref().expect("set up");
                let cpu = worker_cpu + (sys::thread_cpu_time().unwrap_or_default() - t.cpu_before);
                self.conv.local_results(SideResults {
                    cpu: CpuUse {
                        user_s: cpu.user.as_secs_f64(),
                        system_s: cpu.system.as_secs_f64(),
                        wall_s: wall,
                    },
                    streams: totals,
                    pace_auto,
                });
                // Let the server log our side; it closes after reading this.
                while let Some(m) = self.conv.poll_transmit() {
                    let _ = ctrl.send(&m);
                }
            }
            Event::Finished(done) => {
                let t = self.test.take().expect("set up");
                let start = t.start.expect("started");
                let mut end = done.end;
                end.longhaul.warnings = window_warnings(&start.longhaul);
                end.longhaul
                    .warnings
                    .extend(memory_warning(t.short_before.as_ref()));
                self.report = Some(Report {
                    start,
                    intervals: done.intervals,
                    end,
                    error: None,
                });
            }
        }
        Ok(())
    }

    /// Opens the data connections, each set up before connect, and returns them with their set-up and
    /// this side's plan.
    fn open_streams(
        &self,
        params: &TestParams,
        cookie: Cookie,
        quic: Option<&crate::quic::FlowPlan>,
    ) -> Result<(Vec<Flow>, Vec<SocketSetup>, SidePlan), EngineError> {
        let local_plan = socket::side_plan(params);
        let total = params.direction.connections(params.streams);
        if let Some(plan) = quic {
            return self.open_quic_streams(params, cookie, plan, local_plan);
        }
        if params.is_udp() {
            let hellos: Vec<([u8; 32], bool)> = (0..total)
                .map(|i| {
                    let hello = Preamble::data(cookie, i).encode();
                    (hello, params.direction.client_sends(i, params.streams))
                })
                .collect();
            let socks = crate::udp::open_flows(
                self.server,
                self.cfg.bind,
                self.cfg.data_port,
                &hellos,
                &local_plan.window,
                self.cfg.timeout,
            )?;
            for (i, s) in socks.iter().enumerate() {
                socket::apply_flags(s.as_fd(), &params.sockets, i as u32)?;
            }
            let setups = socks
                .iter()
                .zip(&hellos)
                .enumerate()
                .map(|(i, (s, (_, sender)))| crate::udp::describe(s, i as u32, *sender))
                .collect();
            return Ok((
                socks.into_iter().map(Flow::Udp).collect(),
                setups,
                local_plan,
            ));
        }
        let opts = SocketOptions {
            plan: &local_plan.window,
            congestion: params.congestion.as_deref(),
            flags: params.sockets,
        };
        let mut socks = Vec::with_capacity(total as usize);
        let mut local_setups = Vec::with_capacity(total as usize);
        for i in 0..total {
            let sender = params.direction.client_sends(i, params.streams);
            let s = connect_data(
                self.cfg,
                self.server,
                self.pinned.as_ref(),
                &opts,
                sender,
                i,
                &Preamble::data(cookie, i).encode(),
            )?;
            let pace = socket::pacing_for(&local_plan, i, params.streams, sender);
            if let Some(p) = pace {
                socket::apply_pacing(s.as_fd(), p)?;
            }
            let setup = socket::describe(s.socket(), i, sender, pace);
            tracing::debug!("data connection {i} open: {setup:?}");
            local_setups.push(setup);
            socks.push(Flow::Tcp(Box::new(s)));
        }
        Ok((socks, local_setups, local_plan))
    }
}

impl Driver<'_> {
    /// `--transport udp`: each stream's socket says hello as a `-u` flow's does, then carries a
    /// QUIC connection to the server's socket that the hello set up.
    fn open_quic_streams(
        &self,
        params: &TestParams,
        cookie: Cookie,
        plan: &crate::quic::FlowPlan,
        local_plan: SidePlan,
    ) -> Result<(Vec<Flow>, Vec<SocketSetup>, SidePlan), EngineError> {
        let total = params.direction.connections(params.streams);
        let mut flows = Vec::with_capacity(total as usize);
        let mut described = Vec::with_capacity(total as usize);
        for i in 0..total {
            let port = self.cfg.data_port(i)?;
            let sock = crate::udp::flow_socket(self.server, self.cfg.bind, i, port)?;
            crate::quic::size_buffers(&sock, plan.privileged)?;
            let sender = params.direction.client_sends(i, params.streams);
            described.push(crate::udp::describe(&sock, i, sender));
            flows.push((sock, Preamble::data(cookie, i).encode()));
        }
        let tls = match &self.pinned {
            Some(p) => p.clone(),
            None => Pinned::any()?,
        };
        let flows = crate::quic::QuicFlow::connect_all(
            flows,
            self.server,
            tls.rustls_config(),
            plan,
            self.cfg.timeout,
        )?;
        // `--pace RATE`: each sending flow's share.
        for (i, f) in flows.iter().enumerate() {
            let sender = params.direction.client_sends(i as u32, params.streams);
            if let Some(p) = socket::pacing_for(&local_plan, i as u32, params.streams, sender) {
                f.set_pacing(p);
            }
        }
        let setups = flows
            .iter()
            .zip(&described)
            .map(|(f, d)| f.describe(d))
            .collect();
        let flows = flows.into_iter().map(|f| Flow::Quic(Box::new(f))).collect();
        Ok((flows, setups, local_plan))
    }
}

fn connect_data(
    cfg: &ClientConfig,
    server: SocketAddr,
    pinned: Option<&Pinned>,
    opts: &SocketOptions<'_>,
    sender: bool,
    index: u32,
    preamble: &[u8],
) -> Result<Channel, EngineError> {
    let s = new_socket(cfg, server, cfg.data_port(index)?)?;
    socket::apply(s.as_fd(), opts, sender, index)?;
    s.connect_timeout(&server.into(), cfg.timeout)
        .map_err(|e| connect_err(server, e))?;
    let s = match pinned {
        Some(p) => p.connect(s.into(), cfg.timeout)?,
        None => Channel::plain(s.into()),
    };
    s.write_all(preamble)
        .map_err(|e| EngineError::io(format!("send preamble of stream {index}"), e))?;
    Ok(s)
}

/// The warning when TCP on this host ran short of memory during the test (its network namespace's
/// `TcpExt` counters moved): the results are then bounded by the kernel's TCP memory, not the path.
fn memory_warning(before: Option<&sys::ShortOfMemory>) -> Option<String> {
    let run = sys::ShortOfMemory::read()?.since(before?);
    run.any().then(|| {
        format!(
            "TCP on this host ran short of memory during the test: {}; the rate was bounded by the \
kernel's TCP memory (net.ipv4.tcp_mem, machine-wide) or the socket buffers, not by the path \
(`longhaul doctor` shows the limits)",
            run.describe()
        )
    })
}
