//! The client's side of the test conversation (`longhaul test HOST`), as a state machine.
//!
//! Phases, each with the deadline it waits under and the phase name its "unexpected" error carries:
//!
//! | phase | waits for | until | unexpected … while |
//! |---|---|---|---|
//! | welcome | `Welcome` (or `Busy`) | set-up timeout | waiting for welcome |
//! | RTT | 5 × `Pong`, one at a time | set-up timeout each | measuring the RTT |
//! | plan | `Accepted` | set-up timeout | waiting for the server's plan |
//! | streams | the driver's data connections, then `StreamsReady` | set-up timeout | waiting for streams |
//! | running | the end (time, or every byte moved) | `omit + duration` | running |
//! | draining | the driver's senders, then the server's `Results` | drain deadline | waiting for results |
//! | finishing | the driver's streams and totals | — | (not read) |
//!
//! Interval samples of both sides are paired by index as they arrive: an interval is reported once
//! every side that sends has given it (always the *sender's* view, where cwnd, RTT and pacing live),
//! and whatever is left is reported at the end.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::time::Duration;

use crate::interval::StreamInterval;
use crate::msg::{IntervalSample, SidePlan, SideResults, SocketSetup};
use crate::report::{self, End, IntervalReport};
use crate::wire::Cookie;
use crate::{Direction, EndCondition, Message, ProtoError, TestParams};

use super::common::{Error, Time, after, drain_timeout, parse_cookie, unexpected};

/// Pings sent to measure the RTT; the smallest round trip is the path's RTT with the least queueing.
pub const PINGS: u32 = 5;
/// How often a byte-count test (`-n`) asks the driver whether its streams are done.
pub const BYTES_CHECK: Duration = Duration::from_millis(20);

/// What the client machine needs to know besides the test.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// How long to wait for each set-up step (each answer of the server).
    pub timeout: Duration,
    /// This software's name and version, sent in the hello.
    pub software: String,
    /// The server as errors name it ("127.0.0.1:7067").
    pub peer: String,
}

/// What the driver must do or report.
#[derive(Debug, Clone)]
pub enum Event {
    /// The server accepted the test: open the data connections (each presenting `cookie` and its
    /// index), set up as `params` (its `rtt_ns` now measured) asks, then call
    /// [`Client::streams_connected`].
    OpenStreams {
        /// The test cookie the data connections present.
        cookie: Cookie,
        /// The cookie as the server wrote it (the report shows it).
        cookie_text: String,
        /// The test, with the measured RTT.
        params: TestParams,
        /// The server's plan for its own sockets.
        server_plan: Box<SidePlan>,
    },
    /// The server set up its side of every data connection: report the start, then call
    /// [`Client::start`] and, once the streams run, [`Client::streams_started`].
    StreamsReady {
        /// The server's view of each socket.
        sockets: Vec<SocketSetup>,
    },
    /// The server requires its key for tests: make the proof over `cookie` (and the control
    /// connection's TLS binding, if any) and hand it to [`Client::prove_key`] before the next
    /// message is read; a client without the key ends the test with that reason.
    ProveKey {
        /// This session's cookie.
        cookie: Cookie,
    },
    /// One interval, both sides' samples merged: show it.
    Interval(IntervalReport),
    /// The test is over: stop the senders, let them finish their last write by `drain_by`, hand in
    /// the last local intervals ([`Client::local_interval`]), then call [`Client::senders_drained`].
    StopSenders {
        /// The drain deadline.
        drain_by: Time,
    },
    /// The server's results are in: wait for this side's streams to end by `drain_by`, say whether
    /// they did ([`Client::streams_ended`]), then hand in this side's totals ([`Client::local_results`]).
    ServerResults {
        /// The drain deadline.
        drain_by: Time,
    },
    /// The conversation is complete (its last message, this side's results, waits in
    /// [`Client::poll_transmit`]).
    Finished(Box<Finished>),
}

/// The outcome of a complete test, as far as the conversation knows it.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Every interval, in order.
    pub intervals: Vec<IntervalReport>,
    /// The end-of-test totals of both sides.
    pub end: End,
}

#[derive(Debug)]
enum Phase {
    Welcome {
        by: Time,
    },
    Rtt {
        seq: u32,
        sent_at: Time,
        best_ns: u64,
        by: Time,
    },
    Plan {
        by: Time,
    },
    /// Data connections being opened (`by` is `None`) or waiting for `StreamsReady`.
    Streams {
        by: Option<Time>,
        early: Option<Vec<SocketSetup>>,
    },
    /// `StreamsReady` is in; the driver starts the streams (`Start` queued once).
    Ready {
        start_sent: bool,
    },
    Running {
        end: End_,
    },
    /// Stop sent (`stopped`) or not yet; the server's results (`early`, if they came first).
    Draining {
        by: Time,
        stopped: bool,
        early: Option<SideResults>,
    },
    /// The driver's streams are ending (`ended`) and then its totals.
    Finishing {
        ended: bool,
    },
    Done,
    Failed,
}

/// When the running phase ends.
#[derive(Debug, Clone, Copy)]
enum End_ {
    /// At this time.
    At(Time),
    /// When the driver reports every stream done; the next check.
    Bytes(Time),
}

/// The client's conversation. Never does I/O nor reads the clock: see the module doc of
/// [`crate::conversation`] for the call order.
#[derive(Debug)]
pub struct Client {
    settings: ClientSettings,
    params: TestParams,
    phase: Phase,
    transmit: VecDeque<Message>,
    events: VecDeque<Event>,
    merger: IntervalMerger,
    cookie: Option<(Cookie, String)>,
    server_results: Option<SideResults>,
    /// When the streams started (the origin of both sides' interval indices, give or take an RTT).
    started: Option<Time>,
    /// The user ended the running test early ([`Self::interrupt`]).
    interrupted: bool,
}

impl Client {
    /// Starts a test of `params` (already validated) at `now`: the hello waits in
    /// [`Self::poll_transmit`]. The driver has connected and written the connection preamble.
    pub fn new(params: TestParams, settings: ClientSettings, now: Time) -> Self {
        let mut transmit = VecDeque::new();
        transmit.push_back(Message::Hello {
            software: settings.software.clone(),
        });
        let merger = IntervalMerger::new(&params);
        Self {
            phase: Phase::Welcome {
                by: after(now, settings.timeout),
            },
            settings,
            params,
            transmit,
            events: VecDeque::new(),
            merger,
            cookie: None,
            server_results: None,
            interrupted: false,
            started: None,
        }
    }

    /// A message from the server. An error ends the conversation.
    pub fn handle(&mut self, msg: Message, now: Time) -> Result<(), Error> {
        let out = self.on_message(msg, now);
        self.fail_on(out)
    }

    /// The next message to send, in order.
    pub fn poll_transmit(&mut self) -> Option<Message> {
        self.transmit.pop_front()
    }

    /// What the driver must do or report next, in order.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next deadline, if the machine waits for one: call [`Self::handle_timeout`] when it passes.
    pub fn poll_timeout(&self) -> Option<Time> {
        match &self.phase {
            Phase::Welcome { by } | Phase::Rtt { by, .. } | Phase::Plan { by } => Some(*by),
            Phase::Streams { by, .. } => *by,
            Phase::Running {
                end: End_::At(t) | End_::Bytes(t),
            } => Some(*t),
            Phase::Draining { by, stopped, .. } => stopped.then_some(*by),
            _ => None,
        }
    }

    /// Time has come to `now`: a set-up step that is not complete fails, a timed test ends.
    pub fn handle_timeout(&mut self, now: Time) -> Result<(), Error> {
        let out = self.on_timeout(now);
        self.fail_on(out)
    }

    /// Every data connection is open (its preamble written): the server's `StreamsReady` is due
    /// within the set-up timeout from `now`.
    pub fn streams_connected(&mut self, now: Time) {
        if let Phase::Streams { by, early } = &mut self.phase
            && by.is_none()
        {
            match early.take() {
                Some(sockets) => {
                    self.phase = Phase::Ready { start_sent: false };
                    self.events.push_back(Event::StreamsReady { sockets });
                }
                None => *by = Some(after(now, self.settings.timeout)),
            }
        }
    }

    /// The proof [`Event::ProveKey`] asked for: it waits in [`Self::poll_transmit`] (the server reads
    /// it with the pings, before the parameters). Ignored once the parameters are sent.
    pub fn prove_key(&mut self, proof: String) {
        if matches!(self.phase, Phase::Rtt { .. }) {
            self.transmit.push_back(Message::KeyProof { proof });
        }
    }

    /// The driver is ready to start: `Start` waits in [`Self::poll_transmit`].
    pub fn start(&mut self) {
        if let Phase::Ready { start_sent } = &mut self.phase
            && !*start_sent
        {
            *start_sent = true;
            self.transmit.push_back(Message::Start);
        }
    }

    /// The streams started at `now` (the origin of their interval clock): a timed test ends
    /// `omit + duration` later.
    pub fn streams_started(&mut self, now: Time) {
        if !matches!(self.phase, Phase::Ready { start_sent: true }) {
            return;
        }
        let end = match self.params.end {
            // The omit period comes on top of the measured duration, as in iperf3.
            EndCondition::Time { ns } => End_::At(after(
                now,
                Duration::from_nanos(self.params.omit_ns.saturating_add(ns)),
            )),
            EndCondition::Bytes { .. } => End_::Bytes(after(now, BYTES_CHECK)),
        };
        self.phase = Phase::Running { end };
        self.started = Some(now);
    }

    /// With `-n`, whether every local sender and every local receiver has ended, as of `now`: the
    /// test ends when every byte has been sent (forward), received (reverse), or both (bidir).
    /// Ignored in a timed test and outside the running phase.
    pub fn streams_finished(&mut self, senders: bool, receivers: bool, now: Time) {
        let Phase::Running {
            end: End_::Bytes(check),
        } = &mut self.phase
        else {
            return;
        };
        let done = match self.params.direction {
            Direction::Forward => senders,
            Direction::Reverse => receivers,
            Direction::Bidir => senders && receivers,
        };
        if done {
            self.stop(now);
        } else {
            *check = after(now, BYTES_CHECK);
        }
    }

    /// One interval of this side's sending streams.
    pub fn local_interval(&mut self, index: u32, streams: Vec<StreamInterval>) {
        if matches!(self.phase, Phase::Done | Phase::Failed) {
            return;
        }
        self.merger.local(index, streams, &mut self.events);
    }

    /// The senders stopped (or the drain deadline passed) and their last intervals are in: `Stop`
    /// waits in [`Self::poll_transmit`], and the server's results are due by the drain deadline.
    pub fn senders_drained(&mut self) {
        let Phase::Draining {
            by, stopped, early, ..
        } = &mut self.phase
        else {
            return;
        };
        if *stopped {
            return;
        }
        *stopped = true;
        self.transmit.push_back(Message::Stop);
        if let Some(results) = early.take() {
            let by = *by;
            self.results_in(results, by);
        }
    }

    /// Whether every local stream ended by the drain deadline; if not, the test fails.
    pub fn streams_ended(&mut self, all: bool) -> Result<(), Error> {
        let Phase::Finishing { ended } = &mut self.phase else {
            return Ok(());
        };
        if all {
            *ended = true;
            return Ok(());
        }
        self.fail_on(Err(Error::Timeout("the server's streams to end".into())))
    }

    /// This side's totals: they wait in [`Self::poll_transmit`] (for the server's log), and the
    /// conversation finishes with the last intervals and the end report of both sides.
    pub fn local_results(&mut self, local: SideResults) {
        if !matches!(self.phase, Phase::Finishing { ended: true }) {
            return;
        }
        let Some(remote) = self.server_results.take() else {
            return;
        };
        let mut totals = local.streams.clone();
        let remote_cpu = remote.cpu;
        totals.extend(remote.streams);
        let mut end = report::end_report(
            &totals,
            self.params.direction,
            self.params.streams,
            local.cpu,
            remote_cpu,
        );
        end.longhaul.interrupted = self.interrupted;
        if self.params.pace_auto.is_some() {
            end.longhaul.pace_auto = Some(report::PaceAutoReport {
                client: local.pace_auto.clone(),
                server: remote.pace_auto,
            });
        }
        self.transmit.push_back(Message::Results(local));
        let intervals = self.merger.finish(&mut self.events);
        self.events
            .push_back(Event::Finished(Box::new(Finished { intervals, end })));
        self.phase = Phase::Done;
    }

    /// The user asks to end the test now (SIGINT, SIGTERM). A running test stops as a timed one
    /// does at its end, `Stop` tells the server, and both sides' results of what ran make the
    /// report, marked interrupted; returns true. Before the streams run there is nothing to
    /// report and after they stopped the end is already on its way: false, and nothing changes
    /// (the driver gives up before the start, or lets the end finish).
    pub fn interrupt(&mut self, now: Time) -> bool {
        if !matches!(self.phase, Phase::Running { .. }) {
            return false;
        }
        self.interrupted = true;
        self.stop(now);
        true
    }

    /// Whether the conversation is over (finished or failed).
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
    }

    /// Interval samples held while their other half is awaited, and intervals reported (a bound on
    /// the memory this test holds, for the fuzzer).
    pub fn held_intervals(&self) -> usize {
        self.merger.pending.len() + self.merger.done.len()
    }

    fn fail_on(&mut self, out: Result<(), Error>) -> Result<(), Error> {
        if out.is_err() {
            self.phase = Phase::Failed;
            self.transmit.clear();
        }
        out
    }

    fn on_message(&mut self, msg: Message, now: Time) -> Result<(), Error> {
        // The client reads nothing more once the server's results are in.
        if matches!(self.phase, Phase::Finishing { .. } | Phase::Done) {
            return Ok(());
        }
        if let Message::Error { message } = msg {
            return Err(Error::Peer(message));
        }
        let timeout = self.settings.timeout;
        match &mut self.phase {
            Phase::Welcome { .. } => match msg {
                Message::Welcome {
                    cookie,
                    key_required,
                    ..
                } => {
                    let bytes = parse_cookie(&cookie)
                        .ok_or_else(|| ProtoError::Invalid(format!("bad cookie {cookie:?}")))?;
                    self.cookie = Some((bytes, cookie));
                    if key_required {
                        self.events.push_back(Event::ProveKey { cookie: bytes });
                    }
                    self.ping(0, u64::MAX, now);
                    Ok(())
                }
                Message::Busy { running, cap } => Err(Error::Busy { running, cap }),
                m => Err(unexpected(&m, "waiting for welcome")),
            },
            Phase::Rtt {
                seq,
                sent_at,
                best_ns,
                ..
            } => match msg {
                Message::Pong { seq: s } if s == *seq => {
                    let rtt = now.saturating_sub(*sent_at).as_nanos();
                    let best = (*best_ns).min(u64::try_from(rtt).unwrap_or(u64::MAX));
                    let next = *seq + 1;
                    if next < PINGS {
                        self.ping(next, best, now);
                    } else {
                        self.params.rtt_ns = best.max(1);
                        self.transmit
                            .push_back(Message::Params(self.params.clone()));
                        self.phase = Phase::Plan {
                            by: after(now, timeout),
                        };
                    }
                    Ok(())
                }
                m => Err(unexpected(&m, "measuring the RTT")),
            },
            Phase::Plan { .. } => match msg {
                Message::Accepted(server_plan) => {
                    let (cookie, cookie_text) = self.cookie.clone().unwrap_or_default();
                    self.events.push_back(Event::OpenStreams {
                        cookie,
                        cookie_text,
                        params: self.params.clone(),
                        server_plan: Box::new(server_plan),
                    });
                    self.phase = Phase::Streams {
                        by: None,
                        early: None,
                    };
                    Ok(())
                }
                m => Err(unexpected(&m, "waiting for the server's plan")),
            },
            Phase::Streams { by, early } => match msg {
                Message::StreamsReady { sockets } if early.is_none() => {
                    if by.is_some() {
                        self.phase = Phase::Ready { start_sent: false };
                        self.events.push_back(Event::StreamsReady { sockets });
                    } else {
                        *early = Some(sockets);
                    }
                    Ok(())
                }
                m => Err(unexpected(&m, "waiting for streams")),
            },
            Phase::Ready { .. } | Phase::Running { .. } => match msg {
                Message::Interval(s) => {
                    check_remote_interval(&self.params, self.started, &s, now)?;
                    self.merger.remote(s.index, s.streams, &mut self.events);
                    Ok(())
                }
                m => Err(unexpected(&m, "running")),
            },
            Phase::Draining {
                by, stopped, early, ..
            } => match msg {
                Message::Interval(s) => {
                    check_remote_interval(&self.params, self.started, &s, now)?;
                    self.merger.remote(s.index, s.streams, &mut self.events);
                    Ok(())
                }
                Message::Results(r) if early.is_none() => {
                    if *stopped {
                        let by = *by;
                        self.results_in(r, by);
                    } else {
                        *early = Some(r);
                    }
                    Ok(())
                }
                m => Err(unexpected(&m, "waiting for results")),
            },
            Phase::Failed => Err(unexpected(&msg, "closed after an error")),
            Phase::Finishing { .. } | Phase::Done => Ok(()),
        }
    }

    fn on_timeout(&mut self, now: Time) -> Result<(), Error> {
        let Some(due) = self.poll_timeout() else {
            return Ok(());
        };
        if now < due {
            return Ok(());
        }
        let what = match &mut self.phase {
            Phase::Welcome { .. } => "the server's welcome",
            Phase::Rtt { .. } => "pong",
            Phase::Plan { .. } => "the server's plan",
            Phase::Streams { .. } => "the server's stream set-up",
            Phase::Running {
                end: End_::At(_), ..
            } => {
                self.stop(now);
                return Ok(());
            }
            // A byte-count test: time to ask the driver again (`streams_finished` moves the check).
            Phase::Running {
                end: End_::Bytes(check),
            } => {
                *check = after(now, BYTES_CHECK);
                return Ok(());
            }
            Phase::Draining { .. } => {
                return Err(Error::Timeout("the server's results".into()));
            }
            _ => return Ok(()),
        };
        Err(Error::Timeout(format!(
            "{what} from {}",
            self.settings.peer
        )))
    }

    fn ping(&mut self, seq: u32, best_ns: u64, now: Time) {
        self.transmit.push_back(Message::Ping { seq });
        self.phase = Phase::Rtt {
            seq,
            sent_at: now,
            best_ns,
            by: after(now, self.settings.timeout),
        };
    }

    fn stop(&mut self, now: Time) {
        let drain_by = after(now, drain_timeout(&self.params));
        self.events.push_back(Event::StopSenders { drain_by });
        self.phase = Phase::Draining {
            by: drain_by,
            stopped: false,
            early: None,
        };
    }

    fn results_in(&mut self, results: SideResults, drain_by: Time) {
        self.server_results = Some(results);
        self.events.push_back(Event::ServerResults { drain_by });
        self.phase = Phase::Finishing { ended: false };
    }
}

/// One interval's samples from this side and from the server, as they arrive.
/// Ticks a side's interval clock can have had beyond whole intervals since its start: the one at the
/// end of the omit period, the last partial interval, and one for the server's start lagging or
/// leading the client's by up to an RTT.
const TICK_SLACK: u64 = 3;

/// Checks an interval sample from the server before it is kept: the server reports only the streams
/// it sends on (none in a forward test) or, in a UDP test, every stream in its own role, each once,
/// and only intervals its clock can have reached by `now`. So a lying server can neither forge the
/// samples of the client's own streams nor grow the client's memory faster than the test's own
/// interval clock.
fn check_remote_interval(
    params: &TestParams,
    started: Option<Time>,
    s: &IntervalSample,
    now: Time,
) -> Result<(), Error> {
    let refuse = |why: String| Err(Error::Protocol(ProtoError::Invalid(why)));
    let udp = params.is_udp();
    if params.direction == Direction::Forward && !udp {
        return refuse(format!(
            "the server sent interval {} although it sends on no stream in a forward test",
            s.index
        ));
    }
    let elapsed = started.map_or(Duration::ZERO, |t| now.saturating_sub(t));
    let whole = match params.interval_ns {
        0 => 0,
        every => u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX) / every,
    };
    if u64::from(s.index) > whole.saturating_add(TICK_SLACK) {
        return refuse(format!(
            "the server sent interval {} {:.3} s into the test (at most {} intervals so far)",
            s.index,
            elapsed.as_secs_f64(),
            whole.saturating_add(TICK_SLACK)
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for st in &s.streams {
        let server_sends = !params.direction.client_sends(st.stream, params.streams);
        let valid = st.stream < params.direction.connections(params.streams)
            && if udp {
                st.sender == server_sends && st.udp.is_some()
            } else {
                server_sends
            };
        if !valid || !seen.insert(st.stream) {
            return refuse(format!(
                "the server's interval {} reports stream {} {}",
                s.index,
                st.stream,
                if valid {
                    "twice"
                } else if udp {
                    "in a role it does not have"
                } else {
                    "that it does not send on"
                }
            ));
        }
    }
    Ok(())
}

type Halves = (Option<Vec<StreamInterval>>, Option<Vec<StreamInterval>>);

/// Pairs local and remote interval samples by index and reports each interval once it is complete.
#[derive(Debug)]
struct IntervalMerger {
    direction: Direction,
    streams: u32,
    need_local: bool,
    need_remote: bool,
    pending: BTreeMap<u32, Halves>,
    done: Vec<IntervalReport>,
}

impl IntervalMerger {
    fn new(params: &TestParams) -> Self {
        Self {
            direction: params.direction,
            streams: params.streams,
            // The client sends on some stream unless the test is reversed; the server unless forward.
            // In a UDP test both sides report every interval (the receivers their account).
            need_local: params.direction != Direction::Reverse || params.is_udp(),
            need_remote: params.direction != Direction::Forward || params.is_udp(),
            pending: BTreeMap::new(),
            done: Vec::new(),
        }
    }

    fn local(&mut self, index: u32, s: Vec<StreamInterval>, out: &mut VecDeque<Event>) {
        self.pending.entry(index).or_default().0 = Some(s);
        self.flush(false, out);
    }

    fn remote(&mut self, index: u32, s: Vec<StreamInterval>, out: &mut VecDeque<Event>) {
        self.pending.entry(index).or_default().1 = Some(s);
        self.flush(false, out);
    }

    /// Reports complete intervals in order; with `all`, whatever is left.
    fn flush(&mut self, all: bool, out: &mut VecDeque<Event>) {
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
            out.push_back(Event::Interval(rep.clone()));
            self.done.push(rep);
        }
    }

    fn finish(&mut self, out: &mut VecDeque<Event>) -> Vec<IntervalReport> {
        self.flush(true, out);
        std::mem::take(&mut self.done)
    }
}
