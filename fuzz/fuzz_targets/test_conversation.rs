//! Fuzzes the test conversation: a client machine and a server machine
//! (`longhaul_proto::conversation`), each with a driver that acts on its events as the engine does,
//! joined by two in-flight queues of messages that cross the wire as JSON frames. The fuzzer's
//! bytes pick the test, the server's limits and its host's buffer limits, and a sequence of steps:
//! deliver the next message either way, let time pass (from a millisecond to hours), inject any
//! message from a hostile peer either way, hand in local interval samples or progress, and the
//! answers to the drivers' questions (did the streams end in time?).
//!
//! Invariants checked beyond "does not panic":
//! - bounded memory: after any one call a machine holds at most 2 messages to send, and at most
//!   3 events plus the intervals it was holding; a client holds no more intervals than it was given;
//! - every sequence ends: once the steps run out, time passes and the messages in flight are
//!   delivered until both sides are over, within a bounded number of rounds; the client then has
//!   either its results (the end report) or an error with a non-empty text, and so has the server
//!   (its conversation finished, or an error).

#![no_main]

use std::collections::VecDeque;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use longhaul_proto::auto_pace::{Governor, GovernorSummary, Reading};
use longhaul_proto::conversation::client::{self, Client, ClientSettings};
use longhaul_proto::conversation::server::{self, Server, ServerPolicy, ServerSettings};
use longhaul_proto::conversation::{Error, Time};
use longhaul_proto::interval::{StreamInterval, StreamTotals, UdpInterval, UdpTotals};
use longhaul_proto::msg::{
    CpuUse, IntervalSample, PaceAuto, SidePlan, SideResults, SocketSetup, UdpParams,
};
use longhaul_proto::udp::DelaySpread;
use longhaul_proto::window::{self, KernelLimits};
use longhaul_proto::wire::encode_frame;
use longhaul_proto::{Direction, EndCondition, Message, TestParams, Transport, WindowRequest};
use longhaul_units::Nanos;

/// Most messages a machine may hold to send after one call.
const MAX_TRANSMIT: usize = 2;
/// Rounds of the closing phase (time passes, messages are delivered) before a side must be over.
const CLOSING_ROUNDS: usize = 64;

/// The fuzzer's bytes, read front to back; zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) << 32 | u64::from(self.u32())
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn params(b: &mut Bytes) -> TestParams {
    let direction =
        [Direction::Forward, Direction::Reverse, Direction::Bidir][usize::from(b.u8() % 3)];
    let end = if b.u8().is_multiple_of(4) {
        EndCondition::Bytes {
            bytes: u64::from(b.u32()).max(1),
        }
    } else {
        EndCondition::Time {
            ns: (u64::from(b.u8() % 8) + 1) * 1_000_000_000,
        }
    };
    let udp = b.u8().is_multiple_of(4).then_some(UdpParams {
        rate_bps: 1_000_000,
        burst: 0,
        counters_64bit: false,
        no_offload: false,
    });
    let p = TestParams {
        streams: u32::from(b.u8() % 4) + 1,
        end,
        interval_ns: [0, 10_000_000, 1_000_000_000][usize::from(b.u8() % 3)],
        direction,
        congestion: None,
        window: WindowRequest::Auto,
        target_rate_bps: u64::from(b.u32()).max(1),
        pace_total_bps: None,
        pace_auto: (udp.is_none() && b.u8() & 1 == 1).then(|| PaceAuto {
            bottleneck_bps: u64::from(b.u32()).max(1_000),
        }),
        fast_start: false,
        write_len: if udp.is_some() { 1400 } else { 128 * 1024 },
        zerocopy: false,
        rtt_ns: 0,
        omit_ns: if matches!(end, EndCondition::Time { .. }) {
            u64::from(b.u8() % 3) * 1_000_000_000
        } else {
            0
        },
        udp,
        transport: Transport::Tcp,
        sockets: Default::default(),
    };
    // The conversation is the same over either transport; the parameters say which.
    let p = TestParams {
        transport: if p.udp.is_none() && p.pace_auto.is_none() && b.u8() & 1 == 1 {
            Transport::Quic
        } else {
            Transport::Tcp
        },
        ..p
    };
    // The driver validates before it connects; a test it would refuse never starts.
    p.validate()
        .expect("the fuzzer's parameters are within range");
    p
}

fn policy(b: &mut Bytes) -> ServerPolicy {
    ServerPolicy {
        max_rate_bps: (b.u8() & 1 == 1).then(|| u64::from(b.u32()).max(1)),
        allow_udp: b.u8() & 1 == 1,
        handshake_timeout: Duration::from_millis(u64::from(b.u8()) * 100 + 1),
        max_duration: Duration::from_secs(u64::from(b.u8() % 16) + 1),
        stall_timeout: Duration::from_secs(u64::from(b.u8() % 8) + 1),
        max_streams: u32::from(b.u8() % 5),
        max_test_memory: u64::from(b.u32()) << 8,
    }
}

/// The server host's buffer limits (sysctls and privilege), as `socket::side_plan` reads them.
fn host(b: &mut Bytes) -> KernelLimits {
    let mut limit = || u64::from(b.u32()).max(4096);
    KernelLimits {
        rmem_max: limit(),
        wmem_max: limit(),
        tcp_rmem_max: limit(),
        tcp_wmem_max: limit(),
        privileged: b.u8() & 1 == 1,
    }
}

/// The plan a host with `limits` makes for its side of `p`.
fn plan(p: &TestParams, limits: &KernelLimits) -> SidePlan {
    SidePlan {
        window: window::plan(Nanos(p.rtt_ns), p.target_rate_bps, p.streams, None, limits),
        pacing_per_stream: Vec::new(),
        privileged: limits.privileged,
    }
}

fn samples(b: &mut Bytes) -> Vec<StreamInterval> {
    (0..b.u8() % 4)
        .map(|_| StreamInterval {
            stream: b.u32(),
            start_ns: b.u64(),
            end_ns: b.u64(),
            omitted: b.u8() & 1 == 1,
            bytes: b.u64(),
            sender: b.u8() % 4 != 0,
            tcp: None,
            udp: (b.u8() & 1 == 1).then(|| UdpInterval {
                packets: b.u64(),
                lost: b.u64(),
                out_of_order: b.u64(),
                duplicates: b.u64(),
                malformed: b.u64(),
                host_drops: b.u64(),
                jitter_ms: f64::from(b.u32()) / 1e3,
            }),
        })
        .collect()
}

/// A `--pace auto` governor fed with readings from the fuzzer (any order, any values), as a side
/// would report it; now and then with more rounds than a report may hold.
fn governor(b: &mut Bytes) -> Option<GovernorSummary> {
    if b.u8() & 1 == 0 {
        return None;
    }
    let mut g = Governor::new(b.u64(), b.u64());
    for _ in 0..usize::from(b.u8()) * 2 {
        g.observe(Reading {
            at_ns: b.u64(),
            acked_bytes: b.u64(),
            retransmits: b.u64(),
            srtt_us: b.u32(),
            min_rtt_us: b.u32(),
            pacing_bound: b.u8() & 1 == 1,
        });
    }
    Some(g.summary())
}

fn totals(b: &mut Bytes) -> SideResults {
    SideResults {
        pace_auto: governor(b),
        cpu: CpuUse {
            user_s: f64::from(b.u8()),
            system_s: f64::from(b.u8()),
            wall_s: f64::from(b.u8()),
        },
        streams: (0..b.u8() % 4)
            .map(|_| StreamTotals {
                stream: b.u32(),
                sender: b.u8() & 1 == 1,
                bytes: b.u64(),
                seconds: f64::from(b.u32()) / 1e3,
                omitted_bytes: b.u64(),
                retransmits: b.u64(),
                udp: (b.u8() & 1 == 1).then(|| UdpTotals {
                    counts: UdpInterval {
                        packets: b.u64(),
                        lost: b.u64(),
                        out_of_order: b.u64(),
                        duplicates: b.u64(),
                        jitter_ms: f64::from(b.u32()),
                        ..UdpInterval::default()
                    },
                    clock_synced: b.u8() & 1 == 1,
                    transit: (b.u8() & 1 == 1).then(|| DelaySpread {
                        samples: b.u64(),
                        min_ns: b.u64(),
                        p50_ns: b.u64(),
                        p90_ns: b.u64(),
                        p99_ns: b.u64(),
                        max_ns: b.u64(),
                    }),
                    ..UdpTotals::default()
                }),
                ..StreamTotals::default()
            })
            .collect(),
    }
}

/// The proof the server's driver takes for the key's (the machines never judge a proof).
const GOOD_PROOF: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// Any other proof.
const BAD_PROOF: &str = "1111111111111111111111111111111111111111111111111111111111111111";

/// Any message a hostile peer could send (valid on the wire: it passes `Message::from_json`).
fn any_message(b: &mut Bytes, p: &TestParams, limits: &KernelLimits) -> Message {
    match b.u8() % 15 {
        0 => Message::Hello {
            software: "h".into(),
        },
        1 => Message::Welcome {
            software: "w".into(),
            cookie: if b.u8() & 1 == 0 {
                "00".repeat(16)
            } else {
                "zz".into()
            },
            key_required: b.u8() & 1 == 0,
        },
        2 => Message::Busy {
            running: b.u32(),
            cap: b.u32(),
        },
        3 => Message::Ping { seq: b.u32() },
        4 => Message::Pong { seq: b.u32() % 6 },
        5 => Message::Params(p.clone()),
        6 => Message::Accepted(plan(p, limits)),
        7 => Message::StreamsReady {
            sockets: (0..b.u8() % 3).map(|i| setup(u32::from(i))).collect(),
        },
        8 => Message::Start,
        9 => Message::Interval(IntervalSample {
            index: b.u32() % 64,
            streams: samples(b),
        }),
        10 => Message::Stop,
        11 => Message::Results(totals(b)),
        12 => Message::Error {
            message: "e".into(),
        },
        13 => Message::KeyProof {
            proof: if b.u8() & 1 == 0 {
                GOOD_PROOF
            } else {
                BAD_PROOF
            }
            .into(),
        },
        _ => Message::Ping { seq: 0 },
    }
}

fn setup(stream: u32) -> SocketSetup {
    SocketSetup {
        stream,
        tos: 0,
        nodelay: false,
        dont_fragment: false,
        sender: true,
        congestion: "cubic".into(),
        mss: 1448,
        sndbuf: 1 << 20,
        rcvbuf: 1 << 20,
        pacing: None,
        local: "a".into(),
        remote: "b".into(),
    }
}

/// A message as the peer receives it: a frame, decoded and validated.
fn wire(m: &Message) -> Option<Message> {
    Message::from_json(&encode_frame(m)[4..]).ok()
}

/// Puts what a machine queued in one call on the wire towards its peer, checking the bound.
fn send_all(poll: impl FnMut() -> Option<Message>, to: &mut VecDeque<Message>, who: &str) {
    let sent: Vec<Message> = std::iter::from_fn(poll).collect();
    assert!(
        sent.len() <= MAX_TRANSMIT,
        "{who} queued {} messages in one call",
        sent.len()
    );
    to.extend(sent.iter().filter_map(wire));
}

/// How a side ended.
#[derive(Debug)]
enum End {
    Running,
    Finished,
    Failed(String),
}

struct Sides {
    /// The server host's buffer limits.
    host: KernelLimits,
    now: Time,
    params: TestParams,
    c: Client,
    s: Server,
    to_server: VecDeque<Message>,
    to_client: VecDeque<Message>,
    client_end: End,
    server_end: End,
    /// Interval samples handed to the client (local and remote): what it may hold at most.
    intervals_given: usize,
    /// The drivers' answers: whether streams end in time.
    streams_end: bool,
}

impl Sides {
    fn client_call(&mut self, f: impl FnOnce(&mut Client, Time) -> Result<(), Error>) {
        if !matches!(self.client_end, End::Running) {
            return;
        }
        let held = self.c.held_intervals();
        let out = f(&mut self.c, self.now);
        self.settle_client(out, held);
    }

    fn server_call(&mut self, f: impl FnOnce(&mut Server, Time) -> Result<(), Error>) {
        if !matches!(self.server_end, End::Running) {
            return;
        }
        let out = f(&mut self.s, self.now);
        self.settle_server(out);
    }

    /// Takes what the client's call produced: its messages go in flight, its events to its driver.
    fn settle_client(&mut self, out: Result<(), Error>, held: usize) {
        send_all(|| self.c.poll_transmit(), &mut self.to_server, "client");
        if let Err(e) = out {
            return self.client_failed(e);
        }
        let events: Vec<client::Event> = std::iter::from_fn(|| self.c.poll_event()).collect();
        assert!(
            events.len() <= 3 + held,
            "client queued {} events holding {held} intervals",
            events.len()
        );
        assert!(self.c.held_intervals() <= self.intervals_given + 1);
        for ev in events {
            self.client_acts(ev);
        }
    }

    fn client_failed(&mut self, e: Error) {
        let text = e.to_string();
        assert!(!text.is_empty());
        assert!(self.c.is_over(), "a failed client is over");
        self.client_end = End::Failed(text);
        // The client closes its control connection.
        self.to_server.clear();
        let closed = self.s.connection_closed();
        if matches!(self.server_end, End::Running) {
            self.server_end = if closed {
                End::Finished
            } else {
                End::Failed("the client closed".into())
            };
        }
    }

    /// The client's driver, as the engine's: every step answered at once.
    fn client_acts(&mut self, ev: client::Event) {
        match ev {
            client::Event::OpenStreams { .. } => self.client_call(|c, now| {
                c.streams_connected(now);
                Ok(())
            }),
            client::Event::StreamsReady { .. } => self.client_call(|c, now| {
                c.start();
                c.streams_started(now);
                Ok(())
            }),
            client::Event::ProveKey { .. } => self.client_call(|c, _| {
                c.prove_key(GOOD_PROOF.into());
                Ok(())
            }),
            client::Event::Interval(_) => {}
            client::Event::StopSenders { .. } => self.client_call(|c, _| {
                c.senders_drained();
                Ok(())
            }),
            client::Event::ServerResults { .. } => {
                let ended = self.streams_end;
                let p = self.params.clone();
                self.client_call(|c, _| {
                    c.streams_ended(ended)?;
                    c.local_results(own_results(&p, true));
                    Ok(())
                })
            }
            client::Event::Finished(done) => {
                assert!(self.c.is_over());
                let _ = done.end;
                self.client_end = End::Finished;
            }
        }
    }

    fn settle_server(&mut self, out: Result<(), Error>) {
        send_all(|| self.s.poll_transmit(), &mut self.to_client, "server");
        if let Err(e) = out {
            let text = e.to_string();
            assert!(!text.is_empty());
            assert!(self.s.is_over(), "a failed server is over");
            // The server tells the client why, and closes.
            self.to_client.push_back(Message::Error {
                message: text.clone(),
            });
            self.server_end = End::Failed(text);
            return;
        }
        let events: Vec<server::Event> = std::iter::from_fn(|| self.s.poll_event()).collect();
        assert!(events.len() <= 3, "server queued {} events", events.len());
        for ev in events {
            self.server_acts(ev);
        }
    }

    /// The server's driver, as the engine's.
    fn server_acts(&mut self, ev: server::Event) {
        match ev {
            server::Event::CheckKey { proof } => self.server_call(|s, _| {
                if proof == GOOD_PROOF {
                    Ok(())
                } else {
                    s.refuse("test authorization failed".into())
                }
            }),
            server::Event::Plan(p) => {
                let host = self.host;
                self.server_call(|s, now| s.accept(plan(&p, &host), now))
            }
            server::Event::ExpectStreams { count } => {
                for i in 0..count {
                    self.server_call(|s, _| s.data_connection(i));
                }
            }
            server::Event::SetUpStreams => {
                let n = self.params.direction.connections(self.params.streams);
                self.server_call(|s, now| {
                    s.streams_ready((0..n).map(setup).collect(), now);
                    Ok(())
                })
            }
            server::Event::StartStreams => self.server_call(|s, now| {
                s.streams_started(now);
                Ok(())
            }),
            server::Event::StopSenders { .. } => {
                let ended = self.streams_end;
                let p = self.params.clone();
                self.server_call(|s, now| {
                    s.streams_ended(ended)?;
                    s.local_results(own_results(&p, false), now);
                    Ok(())
                })
            }
            server::Event::Finished => {
                assert!(self.s.is_over());
                self.server_end = End::Finished;
            }
        }
    }

    fn deliver_to_server(&mut self) {
        if let Some(m) = self.to_server.pop_front() {
            self.server_call(|s, now| s.handle(m, now));
        }
    }

    fn deliver_to_client(&mut self) {
        if let Some(m) = self.to_client.pop_front() {
            if matches!(m, Message::Interval(_)) {
                self.intervals_given += 1;
            }
            self.client_call(|c, now| c.handle(m, now));
        }
    }

    fn pass_time(&mut self, by: Duration) {
        self.now = self.now.saturating_add(by);
        self.client_call(|c, now| c.handle_timeout(now));
        self.server_call(|s, now| s.handle_timeout(now));
    }
}

/// A side's own totals, as its driver hands them in.
fn own_results(p: &TestParams, client_side: bool) -> SideResults {
    SideResults {
        pace_auto: None,
        cpu: CpuUse {
            user_s: 0.1,
            system_s: 0.1,
            wall_s: 1.0,
        },
        streams: (0..p.direction.connections(p.streams))
            .map(|i| StreamTotals {
                stream: i,
                sender: p.direction.client_sends(i, p.streams) == client_side,
                bytes: 1 << 20,
                seconds: 1.0,
                ..StreamTotals::default()
            })
            .collect(),
    }
}

const STEPS: [Duration; 8] = [
    Duration::ZERO,
    Duration::from_millis(1),
    Duration::from_millis(20),
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(11),
    Duration::from_secs(61),
    Duration::from_secs(100_000),
];

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let p = params(&mut b);
    let policy = policy(&mut b);
    let host = host(&mut b);
    let now = Duration::from_millis(u64::from(b.u8()));
    let settings = ClientSettings {
        timeout: Duration::from_secs(10),
        software: "c".into(),
        peer: "s".into(),
    };
    let c = Client::new(p.clone(), settings, now);
    let s = Server::new(
        policy,
        ServerSettings {
            software: "s".into(),
            peer: "c".into(),
            cookie: [0; 16],
            key_required: b.u8() & 1 == 0,
        },
        now + Duration::from_secs(1),
    );
    let mut sides = Sides {
        now,
        host,
        params: p.clone(),
        c,
        s,
        to_server: VecDeque::new(),
        to_client: VecDeque::new(),
        client_end: End::Running,
        server_end: End::Running,
        intervals_given: 0,
        streams_end: b.u8() != 0,
    };
    sides.settle_client(Ok(()), 0);

    while !b.is_empty() {
        match b.u8() % 10 {
            0..=2 => sides.deliver_to_server(),
            3..=5 => sides.deliver_to_client(),
            6 => {
                let by = STEPS[usize::from(b.u8() % 8)];
                sides.pass_time(by);
            }
            7 => {
                let m = any_message(&mut b, &p, &host);
                if b.u8() & 1 == 0 {
                    sides.to_server.extend(wire(&m));
                } else {
                    sides.to_client.extend(wire(&m));
                }
            }
            8 => {
                let (index, s) = (b.u32() % 64, samples(&mut b));
                sides.intervals_given += 1;
                let s2 = s.clone();
                sides.client_call(|c, _| {
                    c.local_interval(index, s);
                    Ok(())
                });
                sides.server_call(|sv, _| {
                    sv.local_interval(index, s2);
                    Ok(())
                });
            }
            _ => {
                let (bytes, senders, receivers) = (b.u64(), b.u8() & 1 == 1, b.u8() & 1 == 1);
                sides.server_call(|s, now| {
                    s.progress(bytes, now);
                    Ok(())
                });
                sides.client_call(|c, now| {
                    c.streams_finished(senders, receivers, now);
                    Ok(())
                });
            }
        }
    }

    // Closing: everything in flight is delivered and time passes until both sides are over.
    for _ in 0..CLOSING_ROUNDS {
        while !sides.to_server.is_empty() || !sides.to_client.is_empty() {
            sides.deliver_to_server();
            sides.deliver_to_client();
        }
        if !matches!(sides.client_end, End::Running) && !matches!(sides.server_end, End::Running) {
            break;
        }
        sides.pass_time(Duration::from_secs(100_000));
        // The engine's client also asks its byte-count streams whether they are done.
        sides.client_call(|c, now| {
            c.streams_finished(true, true, now);
            Ok(())
        });
    }
    assert!(
        !matches!(sides.client_end, End::Running),
        "client never ended: {:?}",
        sides.c
    );
    assert!(
        !matches!(sides.server_end, End::Running),
        "server never ended: {:?}",
        sides.s
    );
    for end in [&sides.client_end, &sides.server_end] {
        if let End::Failed(why) = end {
            assert!(!why.is_empty(), "an error without a text");
        }
    }
});
