//! The server's side of the test conversation (`longhaul server`), as a state machine, with the
//! limits the server puts on clients that hold no key.
//!
//! Phases, each with its deadline and the phase name its "unexpected" error carries:
//!
//! | phase | waits for | until | unexpected … while |
//! |---|---|---|---|
//! | hello | `Hello` | the first step's deadline (from accept, preamble included) | waiting for hello |
//! | parameters | `Ping` × ≤ [`MAX_PINGS`], then `Params` | one step | waiting for test parameters |
//! | planning | the driver's plan of its sockets ([`Server::accept`]) | — | waiting for start |
//! | streams | every data connection ([`Server::data_connection`]) | one step | waiting for start |
//! | start | `Start` (after the driver's [`Server::streams_ready`]) | one step | waiting for start |
//! | running | `Stop` | duration + the client's drain time + [`OVERRUN_GRACE`] + 2 RTT; no byte for `stall_timeout` | running |
//! | draining | the driver's streams, then its totals | drain deadline | (not read) |
//! | results | the client's results, or anything | [`RESULTS_GRACE`] | (not read) |
//!
//! Admission (the cap on tests running at once, with its `Busy` answer, and the handshake slots) is
//! the driver's: it counts across sessions. The machine starts once a session is admitted.

use std::collections::VecDeque;
use std::time::Duration;

use crate::interval::StreamInterval;
use crate::msg::{IntervalSample, MAX_RTT_NS, SidePlan, SideResults, SocketSetup};
use crate::window::{BufferAction, BufferPlan};
use crate::wire::Cookie;
use crate::{Direction, EndCondition, Message, ProtoError, TestParams};

use super::common::{Error, Time, after, cookie_hex, drain_timeout, unexpected};

/// Most pings a test client may send before its parameters (the client sends 5).
pub const MAX_PINGS: u32 = 64;
/// How long past its duration and the client's drain time ([`drain_timeout`]) a test the client did
/// not stop may run: one-way delays, the client's start after ours, a busy client's scheduling.
pub const OVERRUN_GRACE: Duration = Duration::from_secs(5);
/// How long the server waits for the client's results after sending its own, so the client can read
/// them before the connection closes.
pub const RESULTS_GRACE: Duration = Duration::from_secs(5);

/// The server's own limits on one test (beyond the protocol's ranges), from its configuration.
#[derive(Debug, Clone)]
pub struct ServerPolicy {
    /// How long a peer may take for each whole set-up step.
    pub handshake_timeout: Duration,
    /// Longest test: a longer one is refused, and any test still running after it (plus grace) ends.
    pub max_duration: Duration,
    /// A running test in which no stream moved a byte for this long is ended.
    pub stall_timeout: Duration,
    /// Most streams (`-P`) of one test.
    pub max_streams: u32,
    /// Most socket-buffer bytes one test may make this server request, over all its connections.
    pub max_test_memory: u64,
    /// Highest rate a test may move, all streams and both directions together, bit/s: a UDP test
    /// asking for more (or for no limit, `-b 0`) is refused; any test measured above it (its
    /// average over at least [`RATE_CHECK_AFTER`], with [`RATE_TOLERANCE`]) is ended.
    pub max_rate_bps: Option<u64>,
    /// Whether UDP tests (`-u`) are served.
    pub allow_udp: bool,
}

/// How long a test runs before its average rate is held to [`ServerPolicy::max_rate_bps`].
pub const RATE_CHECK_AFTER: Duration = Duration::from_secs(2);
/// How far above `max_rate_bps` a test's average may be (pacing and timers are not exact).
pub const RATE_TOLERANCE: f64 = 0.05;

/// What the server machine needs to know besides its policy.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// This software's name and version, sent in the welcome.
    pub software: String,
    /// The client as errors name it.
    pub peer: String,
    /// The cookie the test's data connections will present (the driver routes them by it).
    pub cookie: Cookie,
    /// Tests only for clients that prove they hold the server's key (`--require-key`): the welcome
    /// says so, and parameters that come without a proof are refused.
    pub key_required: bool,
}

/// What the driver must do or report.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The test the client asks for (its ranges checked): check what only the host knows (the
    /// congestion control), plan this side's sockets, then call [`Server::accept`].
    Plan(TestParams),
    /// The client's proof that it holds the server's key (only when [`ServerSettings::key_required`]),
    /// made over this session's cookie: check it, and [`Server::refuse`] the test if it is wrong.
    CheckKey {
        /// 64 hex digits, as the client sent them.
        proof: String,
    },
    /// `count` data connections with the cookie are expected now: admit them and hand each to
    /// [`Server::data_connection`]. `Accepted` waits in [`Server::poll_transmit`]: send it first.
    ExpectStreams {
        /// Data connections of the test.
        count: u32,
    },
    /// Every data connection is in: set them up, then call [`Server::streams_ready`].
    SetUpStreams,
    /// The client said start: start the streams, then call [`Server::streams_started`].
    StartStreams,
    /// The client said stop: stop the senders, let them finish their last write by `drain_by`, hand
    /// in the last intervals ([`Server::local_interval`]), wait for every stream to end by `drain_by`
    /// ([`Server::streams_ended`]), then hand in this side's totals ([`Server::local_results`]).
    StopSenders {
        /// The drain deadline.
        drain_by: Time,
    },
    /// The conversation is complete: close.
    Finished,
}

#[derive(Debug)]
enum Phase {
    Hello {
        by: Time,
    },
    Params {
        by: Time,
        pings: u32,
    },
    Planning,
    Streams {
        by: Time,
        arrived: Vec<bool>,
        left: u32,
    },
    SettingUp,
    Start {
        by: Time,
    },
    Running(Option<Running>),
    Draining {
        by: Time,
    },
    Finishing,
    Results {
        by: Time,
    },
    Done,
    Failed,
}

/// The clock of a running test.
#[derive(Debug, Clone, Copy)]
struct Running {
    started: Time,
    /// The duration the test may run (its own, at most the server's maximum).
    limit: Duration,
    end_by: Time,
    moved: u64,
    progress_at: Time,
    /// The average rate, once measured above the server's maximum, bit/s.
    over_rate: Option<u64>,
}

/// The server's conversation with one test client. Never does I/O nor reads the clock: see the
/// module doc of [`crate::conversation`] for the call order.
#[derive(Debug)]
pub struct Server {
    policy: ServerPolicy,
    settings: ServerSettings,
    params: Option<TestParams>,
    phase: Phase,
    transmit: VecDeque<Message>,
    events: VecDeque<Event>,
    /// The client said start before its streams were set up (it is read in order, later).
    early_start: bool,
    /// The client sent something after stop (read as the end of the conversation, later).
    peer_done: bool,
    /// The client sent its key proof (the driver checked it: a wrong one ended the session).
    key_proved: bool,
    /// The client's totals, when it sent them at the end.
    peer_results: Option<SideResults>,
}

impl Server {
    /// A session admitted by the driver; the hello is due by `hello_by` (the first step, counted
    /// from accept, covers the preamble too).
    pub fn new(policy: ServerPolicy, settings: ServerSettings, hello_by: Time) -> Self {
        Self {
            policy,
            settings,
            params: None,
            phase: Phase::Hello { by: hello_by },
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            early_start: false,
            peer_done: false,
            key_proved: false,
            peer_results: None,
        }
    }

    /// A message from the client. An error ends the conversation (the driver tells the client why).
    pub fn handle(&mut self, msg: Message, now: Time) -> Result<(), Error> {
        let out = self.on_message(msg, now);
        self.fail_on(out)
    }

    /// The next message to send, in order.
    pub fn poll_transmit(&mut self) -> Option<Message> {
        self.transmit.pop_front()
    }

    /// What the driver must do next, in order.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next deadline, if the machine waits for one: call [`Self::handle_timeout`] when it passes
    /// (in the running phase, after reporting [`Self::progress`]).
    pub fn poll_timeout(&self) -> Option<Time> {
        match &self.phase {
            Phase::Hello { by }
            | Phase::Params { by, .. }
            | Phase::Streams { by, .. }
            | Phase::Start { by }
            | Phase::Draining { by }
            | Phase::Results { by } => Some(*by),
            Phase::Running(Some(r)) if r.over_rate.is_some() => Some(r.progress_at),
            Phase::Running(Some(r)) => Some(
                r.end_by
                    .min(after(r.progress_at, self.policy.stall_timeout)),
            ),
            _ => None,
        }
    }

    /// Time has come to `now`: an incomplete set-up step fails, a test past its duration or stalled
    /// ends, a client that sends no results is done with.
    pub fn handle_timeout(&mut self, now: Time) -> Result<(), Error> {
        let out = self.on_timeout(now);
        self.fail_on(out)
    }

    /// This side's plan for its sockets: checked against the server's limits, then sent
    /// (`Accepted`), and the data connections are expected.
    pub fn accept(&mut self, plan: SidePlan, now: Time) -> Result<(), Error> {
        if !matches!(self.phase, Phase::Planning) {
            return Ok(());
        }
        let Some(params) = &self.params else {
            return Ok(());
        };
        if let Err(e) = check_limits(&self.policy, params, &plan) {
            return self.fail_on(Err(e));
        }
        let count = params.direction.connections(params.streams);
        self.transmit.push_back(Message::Accepted(plan));
        self.events.push_back(Event::ExpectStreams { count });
        self.phase = Phase::Streams {
            by: after(now, self.policy.handshake_timeout),
            arrived: vec![false; count as usize],
            left: count,
        };
        if count == 0 {
            // Not a valid test (at least one stream), but nothing to wait for either.
            self.phase = Phase::SettingUp;
            self.events.push_back(Event::SetUpStreams);
        }
        Ok(())
    }

    /// The data connection of stream `index` arrived (with the cookie).
    pub fn data_connection(&mut self, index: u32) -> Result<(), Error> {
        let Phase::Streams { arrived, left, .. } = &mut self.phase else {
            return Ok(());
        };
        match arrived.get_mut(index as usize) {
            Some(slot @ false) => *slot = true,
            _ => {
                let e = ProtoError::Invalid(format!("bad or duplicate stream index {index}"));
                return self.fail_on(Err(e.into()));
            }
        }
        *left -= 1;
        if *left == 0 {
            self.phase = Phase::SettingUp;
            self.events.push_back(Event::SetUpStreams);
        }
        Ok(())
    }

    /// Every data connection is set up as the kernel reports it: `StreamsReady` waits in
    /// [`Self::poll_transmit`], and the start is due within one step from `now`.
    pub fn streams_ready(&mut self, sockets: Vec<SocketSetup>, now: Time) {
        if !matches!(self.phase, Phase::SettingUp) {
            return;
        }
        self.transmit.push_back(Message::StreamsReady { sockets });
        if self.early_start {
            self.begin();
        } else {
            self.phase = Phase::Start {
                by: after(now, self.policy.handshake_timeout),
            };
        }
    }

    /// The streams started at `now`: the test's duration, its grace and the stall clock run from
    /// here.
    pub fn streams_started(&mut self, now: Time) {
        let (Phase::Running(r @ None), Some(params)) = (&mut self.phase, &self.params) else {
            return;
        };
        // The test ends by its duration (or this server's maximum) plus grace, stopped or not.
        let limit = match params.end {
            EndCondition::Time { ns } => Duration::from_nanos(ns.saturating_add(params.omit_ns))
                .min(self.policy.max_duration),
            EndCondition::Bytes { .. } => self.policy.max_duration,
        };
        // The client says stop once its senders finished their last writes, which it may wait
        // for up to the drain timeout (a loaded host schedules hundreds of sender threads
        // slowly): a client that does just that is not cut off.
        let rtt2 = Duration::from_nanos(params.rtt_ns.min(MAX_RTT_NS) * 2);
        let drain = drain_timeout(params);
        *r = Some(Running {
            started: now,
            limit,
            end_by: after(after(after(after(now, limit), drain), OVERRUN_GRACE), rtt2),
            moved: 0,
            progress_at: now,
            over_rate: None,
        });
    }

    /// Bytes moved so far on every local stream, sent or received, as of `now` (the stall check).
    pub fn progress(&mut self, bytes: u64, now: Time) {
        if let Phase::Running(Some(r)) = &mut self.phase
            && bytes != r.moved
        {
            r.moved = bytes;
            r.progress_at = now;
            let ran = now.saturating_sub(r.started);
            if let Some(max) = self.policy.max_rate_bps
                && ran >= RATE_CHECK_AFTER
            {
                let rate = (u128::from(bytes) * 8 * 1_000_000_000 / ran.as_nanos().max(1)) as u64;
                if rate as f64 > max as f64 * (1.0 + RATE_TOLERANCE) {
                    r.over_rate = Some(rate);
                }
            }
        }
    }

    /// One interval of this side's sending streams: it goes to the client (if this side sends).
    pub fn local_interval(&mut self, index: u32, streams: Vec<StreamInterval>) {
        // A UDP test's receivers report too: their account of loss, order and jitter.
        let sends = self
            .params
            .as_ref()
            .is_some_and(|p| p.direction != Direction::Forward || p.is_udp());
        if sends && matches!(self.phase, Phase::Running(_) | Phase::Draining { .. }) {
            self.transmit
                .push_back(Message::Interval(IntervalSample { index, streams }));
        }
    }

    /// Whether every local stream ended by the drain deadline; if not, the test fails.
    pub fn streams_ended(&mut self, all: bool) -> Result<(), Error> {
        if !matches!(self.phase, Phase::Draining { .. }) {
            return Ok(());
        }
        if !all {
            return self.fail_on(Err(Error::Timeout("the client's streams to end".into())));
        }
        self.phase = Phase::Finishing;
        Ok(())
    }

    /// This side's totals: `Results` waits in [`Self::poll_transmit`]; the client's are awaited
    /// briefly, so it can read ours before the connection closes.
    pub fn local_results(&mut self, results: SideResults, now: Time) {
        if !matches!(self.phase, Phase::Finishing) {
            return;
        }
        self.transmit.push_back(Message::Results(results));
        if self.peer_done {
            self.finish();
        } else {
            self.phase = Phase::Results {
                by: after(now, RESULTS_GRACE),
            };
        }
    }

    /// The connection failed or closed; returns whether that is a normal end (the client may close
    /// instead of sending its results), in which case the conversation is finished.
    pub fn connection_closed(&mut self) -> bool {
        match self.phase {
            Phase::Results { .. } => {
                self.finish();
                true
            }
            Phase::Done => true,
            _ => false,
        }
    }

    /// The client's totals, if it sent them after the stop (for the server's own report).
    pub fn peer_results(&self) -> Option<&SideResults> {
        self.peer_results.as_ref()
    }

    /// The test's parameters, once the client sent them.
    pub fn params(&self) -> Option<&TestParams> {
        self.params.as_ref()
    }

    /// Whether the conversation is over (finished or failed).
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
    }

    /// The driver refuses the test for a reason only it can judge (a wrong key proof,
    /// [`Event::CheckKey`]): the conversation ends with [`Error::Limit`] of that reason, which the
    /// driver sends the client as the other errors.
    pub fn refuse(&mut self, reason: String) -> Result<(), Error> {
        self.fail_on(Err(Error::Limit(reason)))
    }

    fn fail_on(&mut self, out: Result<(), Error>) -> Result<(), Error> {
        if out.is_err() {
            self.phase = Phase::Failed;
            self.transmit.clear();
        }
        out
    }

    fn finish(&mut self) {
        self.phase = Phase::Done;
        self.events.push_back(Event::Finished);
    }

    fn begin(&mut self) {
        self.phase = Phase::Running(None);
        self.events.push_back(Event::StartStreams);
    }

    fn on_message(&mut self, msg: Message, now: Time) -> Result<(), Error> {
        if let (
            Message::Results(r),
            Phase::Draining { .. } | Phase::Finishing | Phase::Results { .. },
        ) = (&msg, &self.phase)
        {
            self.peer_results = Some(r.clone());
        }
        match self.phase {
            // After stop the client is read only at the end, and whatever it says then (its results,
            // normally, or an error) ends the conversation.
            Phase::Draining { .. } | Phase::Finishing => {
                self.peer_done = true;
                return Ok(());
            }
            Phase::Results { .. } => {
                self.finish();
                return Ok(());
            }
            Phase::Done => return Ok(()),
            _ => {}
        }
        if let Message::Error { message } = msg {
            return Err(Error::Peer(message));
        }
        let t = self.policy.handshake_timeout;
        match &mut self.phase {
            Phase::Hello { .. } => match msg {
                Message::Hello { .. } => {
                    self.transmit.push_back(Message::Welcome {
                        software: self.settings.software.clone(),
                        cookie: cookie_hex(&self.settings.cookie),
                        key_required: self.settings.key_required,
                    });
                    // All pings and the parameters: one step, one deadline, a bounded number of pings.
                    self.phase = Phase::Params {
                        by: after(now, t),
                        pings: 0,
                    };
                    Ok(())
                }
                m => Err(unexpected(&m, "waiting for hello")),
            },
            Phase::Params { pings, .. } => match msg {
                Message::Ping { seq } => {
                    *pings += 1;
                    if *pings > MAX_PINGS {
                        return Err(Error::Limit(format!(
                            "more than {MAX_PINGS} pings before the test parameters"
                        )));
                    }
                    self.transmit.push_back(Message::Pong { seq });
                    Ok(())
                }
                Message::KeyProof { proof } if self.settings.key_required && !self.key_proved => {
                    self.key_proved = true;
                    self.events.push_back(Event::CheckKey { proof });
                    Ok(())
                }
                Message::Params(_) if self.settings.key_required && !self.key_proved => {
                    Err(Error::Limit(
                        "this server serves tests only to clients that hold its key \
                         (--require-key); give the key file with longhaul test --key FILE"
                            .into(),
                    ))
                }
                Message::Params(p) => {
                    self.params = Some(p.clone());
                    self.events.push_back(Event::Plan(p));
                    self.phase = Phase::Planning;
                    Ok(())
                }
                m => Err(unexpected(&m, "waiting for test parameters")),
            },
            // Read in order: what comes before the streams are set up counts as read while waiting
            // for the start.
            Phase::Planning | Phase::Streams { .. } | Phase::SettingUp => match msg {
                Message::Start if !self.early_start => {
                    self.early_start = true;
                    Ok(())
                }
                Message::Start => Err(unexpected(&msg, "running")),
                m => Err(unexpected(&m, "waiting for start")),
            },
            Phase::Start { .. } => match msg {
                Message::Start => {
                    self.begin();
                    Ok(())
                }
                m => Err(unexpected(&m, "waiting for start")),
            },
            Phase::Running(_) => match msg {
                Message::Stop => {
                    let drain = self.params.as_ref().map(drain_timeout).unwrap_or_default();
                    let drain_by = after(now, drain);
                    self.events.push_back(Event::StopSenders { drain_by });
                    self.phase = Phase::Draining { by: drain_by };
                    Ok(())
                }
                m => Err(unexpected(&m, "running")),
            },
            Phase::Failed => Err(unexpected(&msg, "closed after an error")),
            Phase::Draining { .. } | Phase::Finishing | Phase::Results { .. } | Phase::Done => {
                Ok(())
            }
        }
    }

    fn on_timeout(&mut self, now: Time) -> Result<(), Error> {
        let Some(due) = self.poll_timeout() else {
            return Ok(());
        };
        if now < due {
            return Ok(());
        }
        let step = |what: &str| {
            Error::Timeout(format!(
                "{what} from {} (each set-up step must complete within {} s)",
                self.settings.peer,
                self.policy.handshake_timeout.as_secs_f64()
            ))
        };
        match &self.phase {
            Phase::Hello { .. } => Err(step("preamble and hello")),
            Phase::Params { .. } => Err(step("pings and test parameters")),
            Phase::Streams { left, .. } => Err(step(&format!("{left} data connections"))),
            Phase::Start { .. } => {
                Err(Error::Timeout(format!("start from {}", self.settings.peer)))
            }
            Phase::Running(Some(r)) => {
                if let (Some(rate), Some(max)) = (r.over_rate, self.policy.max_rate_bps) {
                    return Err(Error::Limit(format!(
                        "test moving {:.1} Mbit/s on average, above this server's maximum of \
                         {:.1} Mbit/s (--max-rate)",
                        rate as f64 / 1e6,
                        max as f64 / 1e6
                    )));
                }
                if now >= r.end_by {
                    return Err(Error::Limit(format!(
                        "test still running {:.0} s after its start, past its {} s duration; the \
                         client never said stop (this server's maximum is {} s, --max-duration)",
                        now.saturating_sub(r.started).as_secs_f64(),
                        r.limit.as_secs_f64(),
                        self.policy.max_duration.as_secs()
                    )));
                }
                Err(Error::Limit(format!(
                    "test stalled: no stream moved a byte for {} s (--stall-timeout)",
                    self.policy.stall_timeout.as_secs()
                )))
            }
            Phase::Draining { .. } => Err(Error::Timeout("the client's streams to end".into())),
            Phase::Results { .. } => {
                self.finish();
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Checks a test's parameters against this server's own limits (beyond the protocol's ranges).
pub fn check_limits(
    policy: &ServerPolicy,
    params: &TestParams,
    side: &SidePlan,
) -> Result<(), Error> {
    if params.streams > policy.max_streams {
        return Err(Error::Limit(format!(
            "test asks for {} streams; this server allows {} per test (--max-streams)",
            params.streams, policy.max_streams
        )));
    }
    if let EndCondition::Time { ns } = params.end {
        let total = Duration::from_nanos(ns.saturating_add(params.omit_ns));
        if total > policy.max_duration {
            return Err(Error::Limit(format!(
                "test of {} s (omit period included) is longer than this server's maximum of {} s \
                 (--max-duration)",
                total.as_secs_f64(),
                policy.max_duration.as_secs()
            )));
        }
    }
    if params.is_udp() && !policy.allow_udp {
        return Err(Error::Limit(
            "UDP tests are not served here (--no-udp)".into(),
        ));
    }
    if let (Some(max), Some(u)) = (policy.max_rate_bps, &params.udp) {
        let asked = u
            .rate_bps
            .saturating_mul(u64::from(params.direction.connections(params.streams)));
        if u.rate_bps == 0 || asked > max {
            return Err(Error::Limit(format!(
                "UDP test asks for {}, above this server's maximum of {:.1} Mbit/s (--max-rate)",
                if u.rate_bps == 0 {
                    "as fast as the host can send (-b 0)".to_string()
                } else {
                    format!("{:.1} Mbit/s in all", asked as f64 / 1e6)
                },
                max as f64 / 1e6
            )));
        }
    }
    let memory = buffer_bytes(side, params);
    if memory > policy.max_test_memory {
        return Err(Error::Limit(format!(
            "test needs {} MiB of socket buffers on this server ({} connections); it allows {} MiB \
             per test (--max-test-memory): use a smaller -w, fewer streams or a lower target rate",
            memory >> 20,
            params.direction.connections(params.streams),
            policy.max_test_memory >> 20
        )));
    }
    Ok(())
}

/// Socket-buffer bytes a test makes this server request, as the kernel grants them (twice each
/// request), over all data connections. Autotuned buffers are not counted: the kernel bounds them by
/// `net.ipv4.tcp_rmem`/`tcp_wmem` and its global `tcp_mem` pressure.
fn buffer_bytes(side: &SidePlan, params: &TestParams) -> u64 {
    let per = |b: &BufferPlan| match b.action {
        BufferAction::Set { request, .. } => request.saturating_mul(2),
        BufferAction::Autotune { .. } => 0,
    };
    (0..params.direction.connections(params.streams)).fold(0u64, |t, i| {
        let sender = !params.direction.client_sends(i, params.streams);
        let b = if sender {
            &side.window.send
        } else {
            &side.window.recv
        };
        t.saturating_add(per(b))
    })
}
