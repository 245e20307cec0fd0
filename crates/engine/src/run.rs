//! One side of a running test: its stream workers, its interval clock and its accounting.
//!
//! Client and server both drive a [`Run`] from their control thread: `poll_intervals` at each tick,
//! `stop_senders` when the test ends, `wait` for the streams to drain, `finish` for the totals. The
//! arithmetic lives in `longhaul_proto::interval`; this module only gathers the inputs: at the tick that
//! ends the omit period (`-O`) it reads every stream's counters, senders' and receivers' alike, and hands
//! them to the stream's statistics as the baseline of its totals.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use longhaul_proto::auto_pace::GovernorSummary;
use longhaul_proto::interval::{
    ReportClock, StreamInterval, StreamStats, StreamTotals, TcpSample, Tick, UdpInterval,
    UdpTotals, tcp_interval,
};
use longhaul_proto::msg::SocketSetup;
use longhaul_proto::udp::UdpCounts;
use longhaul_sys::CpuTime;

use longhaul_proto::{EndCondition, TestParams, WindowRequest};
use longhaul_units::models::MAX_TCP_WINDOW;

use crate::EngineError;
use crate::channel::Channel;
use crate::clock::Clock;
use crate::pacer::{self, PacedSocket, Pacer};
use crate::stream::{Flow, Job, StreamState, Worker};
use crate::udp::UdpSend;
use crate::zerocopy::SendMethod;

/// One data connection handed to a run.
pub(crate) struct RunStream {
    pub(crate) index: u32,
    pub(crate) sender: bool,
    pub(crate) sock: Flow,
    pub(crate) congestion: String,
    pub(crate) mss: u32,
}

impl RunStream {
    /// The stream on `sock`, as its set-up reports it.
    pub(crate) fn new(sock: Flow, setup: &SocketSetup) -> Self {
        Self {
            index: setup.stream,
            sender: setup.sender,
            sock,
            congestion: setup.congestion.clone(),
            mss: setup.mss,
        }
    }
}

/// How the senders of this side behave.
pub(crate) struct SendConfig {
    pub(crate) method: SendMethod,
    pub(crate) write_len: usize,
    /// Byte budget per sending stream (`-n`), if any.
    pub(crate) budget_per_stream: Option<u64>,
    /// How a UDP test's senders send (`-u`).
    pub(crate) udp: Option<UdpSend>,
    /// `--pace auto`: the bottleneck the packet trains found, bit/s of IP packets; a governor
    /// paces this side's TCP senders from it.
    pub(crate) pace_auto_bps: Option<u64>,
}

/// How the receivers of this side behave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvConfig {
    pub(crate) read_len: usize,
    /// The window each receiver holds (`-w`), if fixed.
    pub(crate) window: Option<u64>,
    /// A UDP test's datagram counters are 64-bit (`--udp-counters-64bit`).
    pub(crate) udp_counters_64: bool,
    /// A UDP test's receivers take coalesced runs of datagrams (UDP GRO).
    pub(crate) udp_gro: bool,
    /// TCP receivers report their bytes each interval too (an iperf3 peer reports no intervals, so
    /// a receiving side shows its own).
    pub(crate) report: bool,
}

struct Tracked {
    worker: Worker,
    prev: Option<TcpSample>,
    /// A UDP stream's counters at the last tick.
    prev_udp: UdpCounts,
    last_bytes: u64,
    stats: StreamStats,
}

/// A running side of a test.
pub(crate) struct Run {
    pub(crate) clock: Clock,
    streams: Vec<Tracked>,
    ticks: ReportClock,
    report_receivers: bool,
    /// A UDP test's rate per sending stream (the report's target), bit/s.
    udp_rate_bps: u64,
    /// `--pace auto`'s governor of this side's senders.
    pacer: Option<Pacer>,
    /// With QUIC streams: the CPU time of the QUIC runtime's threads at the start.
    quic_cpu_before: Option<CpuTime>,
}

impl Run {
    /// Starts one worker per stream; the clock starts now. Interval reports every `interval_ns` (0: none);
    /// the first `omit_ns` of this clock are left out of the totals.
    pub(crate) fn start(
        streams: Vec<RunStream>,
        send: &SendConfig,
        recv: RecvConfig,
        interval_ns: u64,
        omit_ns: u64,
    ) -> Result<Self, EngineError> {
        let clock = Clock::start();
        let mut tracked = Vec::with_capacity(streams.len());
        let mut paced: Vec<Arc<dyn PacedSocket>> = Vec::new();
        let mut pace_mss = None;
        let quic_cpu_before = streams
            .iter()
            .any(|s| matches!(s.sock, Flow::Quic(_)))
            .then(crate::quic::runtime_cpu);
        for s in streams {
            let udp = matches!(s.sock, Flow::Udp(_));
            let state = StreamState::new(s.index, s.sender, s.sock);
            let job = match (s.sender, udp, &send.udp) {
                (true, true, Some(cfg)) => Job::SendUdp(cfg.clone()),
                (false, true, _) => Job::RecvUdp {
                    counters_64: recv.udp_counters_64,
                    gro: recv.udp_gro,
                },
                (true, _, _) => Job::Send {
                    method: send.method.clone(),
                    write_len: send.write_len,
                    budget: send.budget_per_stream,
                },
                (false, _, _) => Job::Recv {
                    read_len: recv.read_len,
                    window: recv.window,
                },
            };
            if s.sender && !udp {
                pace_mss.get_or_insert((s.mss, state.sock.tcp().is_some_and(Channel::is_ipv6)));
                paced.push(Arc::clone(&state) as Arc<dyn PacedSocket>);
            }
            let worker = Worker::spawn(Arc::clone(&state), clock, job)
                .map_err(|e| EngineError::io(format!("start stream {} thread", s.index), e))?;
            tracked.push(Tracked {
                worker,
                prev: None,
                prev_udp: UdpCounts::default(),
                last_bytes: 0,
                stats: StreamStats::new(s.index, s.sender, s.congestion, s.mss),
            });
        }
        let pacer = match (send.pace_auto_bps, pace_mss) {
            (Some(wire_bps), Some((mss, ipv6))) => {
                Some(Pacer::start(paced, pacer::start_rate(wire_bps, mss, ipv6))?)
            }
            _ => None,
        };
        Ok(Self {
            clock,
            streams: tracked,
            ticks: ReportClock::new(interval_ns, omit_ns),
            report_receivers: recv.report,
            udp_rate_bps: send.udp.as_ref().map_or(0, |u| u.rate_bps),
            pacer,
            quic_cpu_before,
        })
    }

    /// When the next interval tick is due.
    pub(crate) fn next_tick(&self) -> Option<Instant> {
        self.ticks
            .next_deadline()
            .map(|ns| self.clock.origin() + Duration::from_nanos(ns))
    }

    /// Handles every due tick: the sending streams' bytes and TCP internals per interval, and at the end
    /// of the omit period the baseline of every stream's totals. A tick that only ends the omit period
    /// (interval reports off) yields no interval.
    pub(crate) fn poll_intervals(&mut self) -> Vec<(u32, Vec<StreamInterval>)> {
        let now = self.clock.now_ns();
        let mut out = Vec::new();
        while let Some(tick) = self.ticks.poll(now) {
            let sample = self.sample(&tick, now);
            if tick.span.is_some() {
                out.push((tick.index, sample));
            }
        }
        out
    }

    /// The last, partial interval (from the last tick to now), if interval reports are on and it moved
    /// any bytes. Called after the senders have finished, so that the intervals add up to the totals.
    pub(crate) fn final_interval(&mut self) -> Option<(u32, Vec<StreamInterval>)> {
        let now = self.clock.now_ns();
        let tick = self.ticks.last_partial(now)?;
        let sample = self.sample(&tick, now);
        // Nothing moved since the last tick (a receiving-only side, or senders already done): no line.
        sample
            .iter()
            .any(|s| s.bytes > 0)
            .then_some((tick.index, sample))
    }

    /// Reads the counters for `tick` (at clock time `now_ns`): one interval entry per sending stream
    /// (and per UDP receiver, whose account of loss, order and jitter the report shows beside its
    /// sender's figures), and if the tick ends the omit period, every stream's baseline.
    fn sample(&mut self, tick: &Tick, now_ns: u64) -> Vec<StreamInterval> {
        let (start_ns, end_ns) = tick.span.unwrap_or((0, 0));
        let mut out = Vec::new();
        for t in self.streams.iter_mut() {
            let st = &t.worker.state;
            let bytes = st.bytes();
            let (report, tcp, udp) = if let Some(live) = &st.udp {
                let now = live.load(bytes);
                if tick.omit_end {
                    t.stats.mark_omit_end(bytes, now_ns, None);
                    t.stats.mark_udp_omit_end(&now);
                }
                let udp = UdpInterval::between(&t.prev_udp, &now);
                t.prev_udp = now;
                (true, None, Some(udp))
            } else if !st.sender {
                if tick.omit_end {
                    t.stats.mark_omit_end(bytes, now_ns, None);
                }
                (self.report_receivers, None, None)
            } else {
                let sample = st.sock.sample();
                let tcp = sample.map(|s| {
                    t.stats.observe(&s);
                    tcp_interval(t.prev.as_ref(), &s)
                });
                if sample.is_some() {
                    t.prev = sample;
                }
                if tick.omit_end {
                    // The same reading closes the last omitted interval and opens the measured
                    // part, so the omitted intervals add up exactly to what the totals leave out.
                    t.stats.mark_omit_end(bytes, now_ns, sample.as_ref());
                }
                (true, tcp, None)
            };
            if !report {
                continue;
            }
            out.push(StreamInterval {
                stream: st.index,
                start_ns,
                end_ns,
                bytes: bytes - t.last_bytes,
                omitted: tick.omitted,
                sender: st.sender,
                tcp,
                udp,
            });
            t.last_bytes = bytes;
        }
        out
    }

    /// Bytes moved so far on every stream of this side, sent or received (the server's stall check).
    pub(crate) fn bytes_moved(&self) -> u64 {
        self.streams
            .iter()
            .fold(0u64, |t, s| t.saturating_add(s.worker.state.bytes()))
    }

    /// Whether this side sends on any stream.
    pub(crate) fn has_senders(&self) -> bool {
        self.streams.iter().any(|t| t.worker.state.sender)
    }

    /// Bytes this side's receivers have taken so far.
    pub(crate) fn received(&self) -> u64 {
        self.streams
            .iter()
            .filter(|t| !t.worker.state.sender)
            .fold(0u64, |n, t| n.saturating_add(t.worker.state.bytes()))
    }

    /// Whether every stream in the chosen role (senders if `senders`, else receivers) has ended.
    pub(crate) fn all_finished(&self, senders: bool) -> bool {
        self.streams
            .iter()
            .filter(|t| t.worker.state.sender == senders)
            .all(|t| t.worker.state.finished().is_some())
    }

    /// Asks every sender to stop after its current write. (TCP receivers are flagged too, so that
    /// the end of their connection is not an error; UDP receivers keep taking the datagrams still
    /// on their way, until the sender's end marker or [`Self::drain_udp_receivers`].)
    pub(crate) fn stop_senders(&self) {
        if let Some(p) = &self.pacer {
            p.halt();
        }
        for t in &self.streams {
            let st = &t.worker.state;
            if st.sender || st.udp.is_none() {
                st.stop.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The peer has stopped sending: UDP receivers end `after` from now at the latest, even if no
    /// end marker reaches them.
    pub(crate) fn drain_udp_receivers(&self, after: Duration) {
        let by = self
            .clock
            .now_ns()
            .saturating_add(u64::try_from(after.as_nanos()).unwrap_or(u64::MAX));
        for t in &self.streams {
            if let (false, Some(live)) = (t.worker.state.sender, &t.worker.state.udp) {
                live.drain_by(by);
            }
        }
    }

    /// Waits until this side's senders ended (after [`Self::stop_senders`], each finishes its current
    /// write) or `deadline` passed; returns whether they all ended.
    pub(crate) fn wait_senders(&self, deadline: Instant) -> bool {
        loop {
            if self.all_finished(true) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits until all streams ended or `deadline` passed; returns whether all ended.
    pub(crate) fn wait_all(&self, deadline: Instant) -> bool {
        loop {
            if self.all_finished(true) && self.all_finished(false) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits until all streams ended or `deadline` passed, cutting at `tail` the receivers told to
    /// stop whose end of stream has not come ([`longhaul_proto::conversation::tail_grace`]: the
    /// sender's queue drains through a crawling path); a cut receiver keeps the count of what
    /// arrived. Returns whether all ended.
    pub(crate) fn end_streams(&self, tail: Instant, deadline: Instant) -> bool {
        if self.wait_all(tail.min(deadline)) {
            return true;
        }
        for t in &self.streams {
            let st = &t.worker.state;
            if !st.sender && st.stop.load(Ordering::Relaxed) && st.finished().is_none() {
                tracing::debug!(
                    "stream {}: no end of stream in the tail grace; the receiver keeps the {} bytes that arrived",
                    st.index,
                    st.bytes.load(Ordering::Relaxed)
                );
                st.sock.shut_down();
            }
        }
        self.wait_all(deadline)
    }

    /// Shuts every socket down, waking any worker stuck in a read or write (the peer died or the path
    /// stalled). Workers stopped this way do not report errors.
    pub(crate) fn abort(&self) {
        for t in &self.streams {
            t.worker.state.stop.store(true, Ordering::Relaxed);
            t.worker.state.sock.shut_down();
        }
    }

    /// What `--pace auto`'s governor did on this side (it stops now if it still ran).
    pub(crate) fn pace_summary(&mut self) -> Option<GovernorSummary> {
        self.pacer.take().and_then(Pacer::finish)
    }

    /// Joins the workers. Returns per-stream totals (net of the omit period), the workers' CPU time, the
    /// wall time of the whole run in seconds (omit period included: what the CPU time is spent over) and
    /// the first stream error.
    pub(crate) fn finish(mut self) -> (Vec<StreamTotals>, CpuTime, f64, Option<EngineError>) {
        // A last TCP_INFO snapshot of each sender, so totals include the final retransmits.
        for t in self.streams.iter_mut().filter(|t| t.worker.state.sender) {
            if let Some(s) = t.worker.state.sock.sample() {
                t.stats.observe(&s);
            }
        }
        let synced = longhaul_sys::clock_synchronized();
        let end = self.clock.now_ns();
        let mut totals = Vec::with_capacity(self.streams.len());
        let mut cpu = CpuTime::default();
        let mut first_error = None;
        let mut wall_ns = 0;
        for t in self.streams {
            let state = Arc::clone(&t.worker.state);
            let result = t.worker.join();
            cpu = cpu + result.cpu;
            if let (Some(e), None) = (result.error, &first_error) {
                first_error = Some(EngineError::Stream {
                    stream: state.index,
                    source: e,
                });
            }
            let end_ns = state.finished().unwrap_or(end);
            wall_ns = wall_ns.max(end_ns);
            // A UDP receiver's stream ended with its last datagram, not with its wait after it.
            let end_ns = result
                .udp_end
                .and_then(|e| e.last_data_ns)
                .map_or(end_ns, |t| t.min(end_ns));
            let udp = state.udp.as_ref().map(|live| {
                let (counts, end) = match result.udp_end {
                    Some(e) => (e.counts, Some(e)),
                    None => (live.load(state.bytes()), None),
                };
                UdpTotals {
                    counts: t.stats.udp_since_omit(&counts),
                    target_bps: self.udp_rate_bps,
                    clock_synced: synced,
                    transit: end.and_then(|e| e.transit),
                    end_seen: end.is_some_and(|e| e.end_seen),
                }
            });
            let mut stream_totals = t.stats.finish(state.bytes(), end_ns);
            stream_totals.udp = udp;
            totals.push(stream_totals);
        }
        // QUIC's packets are built, sealed and opened on the runtime's threads, not the workers'.
        if let Some(before) = self.quic_cpu_before {
            cpu = cpu + (crate::quic::runtime_cpu() - before);
        }
        (totals, cpu, wall_ns as f64 / 1e9, first_error)
    }
}

/// When a driver wakes next: at the conversation's deadline (`deadline` after `origin`) or the run's
/// next interval tick, whichever is first; a second from now if neither (only a fallback: every phase
/// that waits on the peer has a deadline).
pub(crate) fn wake_at(origin: Instant, deadline: Option<Duration>, run: Option<&Run>) -> Instant {
    let tick = run.and_then(Run::next_tick);
    match (deadline.map(|d| origin + d), tick) {
        (Some(d), Some(t)) => d.min(t),
        (Some(w), None) | (None, Some(w)) => w,
        (None, None) => Instant::now() + Duration::from_secs(1),
    }
}

pub(crate) fn send_config(params: &TestParams) -> Result<SendConfig, EngineError> {
    let write_len = params.write_len as usize;
    let repeating = params.sockets.repeating_payload;
    let method = crate::zerocopy::method(params.zerocopy, write_len, repeating)?;
    let budget_per_stream = match params.end {
        EndCondition::Bytes { bytes } => Some(bytes.div_ceil(u64::from(params.streams))),
        EndCondition::Time { .. } => None,
    };
    let udp = match &params.udp {
        Some(u) => Some(UdpSend::new(
            u,
            params.write_len,
            budget_per_stream,
            repeating,
        )?),
        None => None,
    };
    Ok(SendConfig {
        method,
        write_len,
        budget_per_stream,
        udp,
        pace_auto_bps: params.pace_auto.map(|p| p.bottleneck_bps),
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
        udp_counters_64: params.udp.is_some_and(|u| u.counters_64bit),
        udp_gro: params.udp.is_some_and(|u| !u.no_offload),
        report: false,
    }
}
