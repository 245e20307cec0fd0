//! The two machines without sockets: whole conversations back to back, every phase's unexpected
//! message, and every deadline with made-up times.

use std::time::Duration;

use super::client::{self, Client, ClientSettings};
use super::server::{self, Server, ServerPolicy, ServerSettings};
use super::{Error, Time};
use crate::interval::{StreamInterval, StreamTotals};
use crate::msg::{CpuUse, IntervalSample, SidePlan, SideResults, SocketSetup};
use crate::window::{self, KernelLimits};
use crate::{Direction, EndCondition, Message, ProtoError, TestParams};

const S: Duration = Duration::from_secs(1);
const COOKIE: [u8; 16] = [0xab; 16];

fn params(direction: Direction) -> TestParams {
    let mut p = crate::msg::tests::params();
    p.direction = direction;
    p.streams = 2;
    p.end = EndCondition::Time { ns: 3_000_000_000 };
    p
}

fn policy() -> ServerPolicy {
    ServerPolicy {
        max_rate_bps: None,
        allow_udp: true,
        handshake_timeout: 10 * S,
        max_duration: 100 * S,
        stall_timeout: 60 * S,
        max_streams: 128,
        max_test_memory: 8 << 30,
    }
}

fn client(p: TestParams, now: Time) -> Client {
    Client::new(
        p,
        ClientSettings {
            timeout: 10 * S,
            software: "longhaul test".into(),
            peer: "server:7067".into(),
        },
        now,
    )
}

fn server(now: Time) -> Server {
    server_with(policy(), now)
}

/// A server with `policy` whose hello is due 10 s after `now`.
fn server_with(policy: ServerPolicy, now: Time) -> Server {
    Server::new(policy, settings(false), now + 10 * S)
}

fn settings(key_required: bool) -> ServerSettings {
    ServerSettings {
        software: "longhaul test".into(),
        peer: "client:4000".into(),
        cookie: COOKIE,
        key_required,
    }
}

fn plan(p: &TestParams) -> SidePlan {
    let limits = KernelLimits {
        rmem_max: 4 << 20,
        wmem_max: 4 << 20,
        tcp_rmem_max: 32 << 20,
        tcp_wmem_max: 4 << 20,
        privileged: false,
    };
    SidePlan {
        window: window::plan(
            longhaul_units::Nanos(p.rtt_ns),
            p.target_rate_bps,
            p.streams,
            None,
            &limits,
        ),
        pacing_per_stream: Vec::new(),
        privileged: false,
    }
}

fn setup(stream: u32, sender: bool) -> SocketSetup {
    SocketSetup {
        stream,
        tos: 0,
        nodelay: false,
        dont_fragment: false,
        sender,
        congestion: "cubic".into(),
        mss: 1448,
        sndbuf: 1 << 20,
        rcvbuf: 1 << 20,
        pacing: None,
        local: "127.0.0.1:1".into(),
        remote: "127.0.0.1:2".into(),
    }
}

/// One interval of `streams` sending streams, 1 MB each.
fn sample(index: u32, streams: impl Iterator<Item = u32>) -> Vec<StreamInterval> {
    let i = u64::from(index);
    streams
        .map(|stream| StreamInterval {
            stream,
            start_ns: i * 1_000_000_000,
            end_ns: (i + 1) * 1_000_000_000,
            omitted: false,
            bytes: 1_000_000,
            sender: true,
            tcp: None,
            udp: None,
        })
        .collect()
}

fn results(p: &TestParams, client_side: bool) -> SideResults {
    let n = p.direction.connections(p.streams);
    SideResults {
        cpu: CpuUse {
            user_s: 0.1,
            system_s: 0.2,
            wall_s: 3.0,
        },
        pace_auto: None,
        streams: (0..n)
            .map(|i| StreamTotals {
                stream: i,
                sender: p.direction.client_sends(i, p.streams) == client_side,
                bytes: 3_000_000,
                seconds: 3.0,
                ..StreamTotals::default()
            })
            .collect(),
    }
}

/// Passes every queued message from one machine to the other, until both are quiet.
fn exchange(c: &mut Client, s: &mut Server, now: Time) -> Result<(), Error> {
    loop {
        let mut moved = false;
        while let Some(m) = c.poll_transmit() {
            s.handle(m, now)?;
            moved = true;
        }
        while let Some(m) = s.poll_transmit() {
            c.handle(m, now)?;
            moved = true;
        }
        if !moved {
            return Ok(());
        }
    }
}

/// The events each machine has for its driver now.
fn events<T>(poll: impl FnMut() -> Option<T>) -> Vec<T> {
    std::iter::from_fn(poll).collect()
}

/// Plays a whole test between the two machines, as both drivers would, at made-up times; returns
/// the client's outcome and every interval it showed.
fn whole_test(direction: Direction) -> (client::Finished, Vec<usize>) {
    let p = params(direction);
    let n = p.direction.connections(p.streams);
    let mut now = Duration::from_millis(5);
    let mut c = client(p.clone(), now);
    let mut s = server(Duration::ZERO);
    exchange(&mut c, &mut s, now).unwrap();
    // Hello → welcome, five pings, params → plan.
    let [server::Event::Plan(got)] = &events(|| s.poll_event())[..] else {
        panic!("expected the plan request")
    };
    assert_eq!(got.streams, 2);
    assert!(
        got.rtt_ns >= 1,
        "the measured RTT travels in the parameters"
    );
    s.accept(plan(got), now).unwrap();
    assert_eq!(
        events(|| s.poll_event()),
        vec![server::Event::ExpectStreams { count: n }]
    );
    exchange(&mut c, &mut s, now).unwrap();
    let ev = events(|| c.poll_event());
    let [client::Event::OpenStreams { cookie, params, .. }] = &ev[..] else {
        panic!("expected the data connections: {ev:?}")
    };
    assert_eq!(*cookie, COOKIE);
    assert_eq!(params.rtt_ns, got.rtt_ns);
    now += Duration::from_millis(3);
    c.streams_connected(now);
    for i in (0..n).rev() {
        s.data_connection(i).unwrap();
    }
    assert_eq!(events(|| s.poll_event()), vec![server::Event::SetUpStreams]);
    s.streams_ready(
        (0..n)
            .map(|i| setup(i, !p.direction.client_sends(i, p.streams)))
            .collect(),
        now,
    );
    exchange(&mut c, &mut s, now).unwrap();
    let ev = events(|| c.poll_event());
    assert!(
        matches!(&ev[..], [client::Event::StreamsReady { sockets }] if sockets.len() == n as usize)
    );
    c.start();
    exchange(&mut c, &mut s, now).unwrap();
    assert_eq!(events(|| s.poll_event()), vec![server::Event::StartStreams]);
    s.streams_started(now);
    c.streams_started(now);
    assert_eq!(
        c.poll_timeout(),
        Some(now + 3 * S),
        "a timed test ends on time"
    );

    // Three intervals from each side that sends.
    let client_sends: Vec<u32> = (0..n)
        .filter(|&i| p.direction.client_sends(i, p.streams))
        .collect();
    let server_sends: Vec<u32> = (0..n)
        .filter(|&i| !p.direction.client_sends(i, p.streams))
        .collect();
    let mut shown = Vec::new();
    let started = now;
    for index in 0..3 {
        now = started + (index + 1) * S;
        s.progress(u64::from(index + 1) << 20, now);
        s.handle_timeout(now).unwrap();
        s.local_interval(index, sample(index, server_sends.iter().copied()));
        if index < 2 {
            c.local_interval(index, sample(index, client_sends.iter().copied()));
        }
        exchange(&mut c, &mut s, now).unwrap();
        shown.extend(events(|| c.poll_event()).into_iter().map(|e| match e {
            client::Event::Interval(r) => r.streams.len(),
            e => panic!("expected an interval, got {e:?}"),
        }));
    }
    // The end: the client stops its senders, drains, says stop; the server drains and answers.
    c.handle_timeout(now).unwrap();
    let ev = events(|| c.poll_event());
    let [client::Event::StopSenders { drain_by }] = ev[..] else {
        panic!("expected the stop: {ev:?}")
    };
    assert_eq!(drain_by, now + super::drain_timeout(&c_params(&p, got)));
    c.local_interval(2, sample(2, client_sends.iter().copied()));
    c.senders_drained();
    exchange(&mut c, &mut s, now).unwrap();
    let ev = events(|| s.poll_event());
    assert!(matches!(ev[..], [server::Event::StopSenders { .. }]));
    s.streams_ended(true).unwrap();
    s.local_results(results(&p, false), now);
    exchange(&mut c, &mut s, now).unwrap();
    let mut ev = events(|| c.poll_event());
    assert!(matches!(
        ev.pop(),
        Some(client::Event::ServerResults { .. })
    ));
    shown.extend(ev.into_iter().map(|e| match e {
        client::Event::Interval(r) => r.streams.len(),
        e => panic!("expected an interval, got {e:?}"),
    }));
    c.streams_ended(true).unwrap();
    c.local_results(results(&p, true));
    let mut ev = events(|| c.poll_event());
    let Some(client::Event::Finished(done)) = ev.pop() else {
        panic!("expected the end: {ev:?}")
    };
    shown.extend(ev.into_iter().map(|e| match e {
        client::Event::Interval(r) => r.streams.len(),
        e => panic!("expected an interval, got {e:?}"),
    }));
    assert!(c.is_over());
    // The client's results go to the server, which is then done.
    exchange(&mut c, &mut s, now).unwrap();
    assert_eq!(events(|| s.poll_event()), vec![server::Event::Finished]);
    assert!(s.is_over());
    (*done, shown)
}

/// An interrupt (SIGINT) ends a running test at once as its time would: the stop goes to the
/// server, both sides' results of what ran make the report, marked interrupted. Before the streams
/// run, and once the end is on its way, it changes nothing.
#[test]
fn an_interrupted_test_stops_now_and_reports_what_ran() {
    for phase in [0, 1, 2, 3, 5] {
        let (mut c, _, now) = client_at(phase);
        let deadline = c.poll_timeout();
        assert!(!c.interrupt(now + S), "phase {phase}");
        assert!(c.poll_event().is_none(), "phase {phase}");
        assert_eq!(c.poll_timeout(), deadline, "phase {phase}");
    }
    let p = params(Direction::Forward);
    let (mut c, _, now) = client_at(4);
    assert_eq!(c.poll_timeout(), Some(now + 3 * S), "a 3-s test");
    let at = now + Duration::from_millis(1200);
    c.local_interval(0, sample(0, 0..2));
    assert!(c.interrupt(at));
    let ev = events(|| c.poll_event());
    assert!(
        matches!(ev.last(), Some(client::Event::StopSenders { drain_by }) if *drain_by > at),
        "{ev:?}"
    );
    assert!(!c.interrupt(at), "a second interrupt changes nothing");
    c.senders_drained();
    let sent: Vec<Message> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert!(sent.iter().any(|m| matches!(m, Message::Stop)), "{sent:?}");
    c.handle(Message::Results(results(&p, false)), at).unwrap();
    while c.poll_event().is_some() {}
    c.streams_ended(true).unwrap();
    c.local_results(results(&p, true));
    let ev = events(|| c.poll_event());
    let Some(client::Event::Finished(done)) = ev.last() else {
        panic!("expected the end: {ev:?}")
    };
    assert!(done.end.longhaul.interrupted);
    assert!(c.is_over());
    let json = serde_json::to_value(&done.end).unwrap();
    assert_eq!(json["longhaul"]["interrupted"], true, "{json}");
}

fn c_params(p: &TestParams, sent: &TestParams) -> TestParams {
    TestParams {
        rtt_ns: sent.rtt_ns,
        ..p.clone()
    }
}

#[test]
fn a_whole_test_back_to_back_in_every_direction() {
    for direction in [Direction::Forward, Direction::Reverse, Direction::Bidir] {
        let (done, shown) = whole_test(direction);
        let senders = if direction == Direction::Bidir { 4 } else { 2 };
        // Each interval once, complete (every sender of both sides), in order.
        assert_eq!(shown, vec![senders; 3], "{direction:?}");
        assert_eq!(done.intervals.len(), 3, "{direction:?}");
        assert!(done.intervals.iter().all(|i| i.streams.len() == senders));
        assert_eq!(done.end.streams.len(), senders, "{direction:?}");
    }
}

/// A client at `phase` of the conversation (0: welcome, 1: RTT, 2: plan, 3: streams, 4: running,
/// 5: waiting for results), with the server that took it there.
fn client_at(phase: u32) -> (Client, Server, Time) {
    let (mut c, s, now) = play_client_to(phase);
    while c.poll_event().is_some() {}
    (c, s, now)
}

fn play_client_to(phase: u32) -> (Client, Server, Time) {
    let p = params(Direction::Forward);
    let now = Duration::ZERO;
    let mut c = client(p.clone(), now);
    let mut s = server(now);
    if phase == 0 {
        return (c, s, now);
    }
    s.handle(c.poll_transmit().unwrap(), now).unwrap();
    c.handle(s.poll_transmit().unwrap(), now).unwrap();
    if phase == 1 {
        return (c, s, now);
    }
    exchange(&mut c, &mut s, now).unwrap();
    let Some(server::Event::Plan(got)) = s.poll_event() else {
        panic!("plan")
    };
    if phase == 2 {
        return (c, s, now);
    }
    s.accept(plan(&got), now).unwrap();
    exchange(&mut c, &mut s, now).unwrap();
    c.streams_connected(now);
    if phase == 3 {
        return (c, s, now);
    }
    c.handle(
        Message::StreamsReady {
            sockets: vec![setup(0, false), setup(1, false)],
        },
        now,
    )
    .unwrap();
    c.start();
    c.streams_started(now);
    if phase == 4 {
        return (c, s, now);
    }
    c.handle_timeout(now + 3 * S).unwrap();
    c.senders_drained();
    (c, s, now + 3 * S)
}

fn unexpected(got: &'static str, phase: &'static str) -> Error {
    Error::Protocol(ProtoError::Unexpected { got, phase })
}

#[test]
fn every_client_phase_refuses_what_does_not_belong_with_todays_text() {
    for (phase, wrong, name) in [
        (0, Message::Pong { seq: 0 }, "waiting for welcome"),
        (1, Message::Start, "measuring the RTT"),
        (1, Message::Pong { seq: 3 }, "measuring the RTT"),
        (2, Message::Stop, "waiting for the server's plan"),
        (3, Message::Start, "waiting for streams"),
        (4, Message::Stop, "running"),
        (5, Message::Start, "waiting for results"),
    ] {
        let (mut c, _, now) = client_at(phase);
        let kind = wrong.kind();
        assert_eq!(c.handle(wrong, now), Err(unexpected(kind, name)));
        assert!(c.is_over() && c.poll_transmit().is_none());
        let e = unexpected(kind, name).to_string();
        assert!(
            e.contains(&format!("unexpected {kind} message while {name}")),
            "{e}"
        );
    }
}

#[test]
fn client_answers_busy_error_and_a_bad_cookie_clearly() {
    let (mut c, _, now) = client_at(0);
    assert_eq!(
        c.handle(Message::Busy { running: 3, cap: 3 }, now),
        Err(Error::Busy { running: 3, cap: 3 })
    );
    let (mut c, _, now) = client_at(4);
    let e = c.handle(
        Message::Error {
            message: "no".into(),
        },
        now,
    );
    assert_eq!(e, Err(Error::Peer("no".into())));
    let (mut c, _, now) = client_at(0);
    let e = c
        .handle(
            Message::Welcome {
                software: "x".into(),
                cookie: "zz".into(),
                key_required: false,
            },
            now,
        )
        .unwrap_err();
    assert!(e.to_string().contains("bad cookie \"zz\""), "{e}");
}

#[test]
fn a_server_that_requires_its_key_has_the_proof_checked_before_it_plans() {
    let now = Duration::from_millis(5);
    let proof = "ab".repeat(32);
    let keyed = || Server::new(policy(), settings(true), now + 10 * S);
    // The client proves over the session's cookie; the server's driver checks it, then plans.
    let (mut c, mut s) = (client(params(Direction::Forward), now), keyed());
    s.handle(c.poll_transmit().unwrap(), now).unwrap();
    c.handle(s.poll_transmit().unwrap(), now).unwrap();
    let [client::Event::ProveKey { cookie }] = &events(|| c.poll_event())[..] else {
        panic!("a welcome that requires the key asks the client's driver for a proof")
    };
    assert_eq!(*cookie, COOKIE);
    c.prove_key(proof.clone());
    exchange(&mut c, &mut s, now).unwrap();
    let ev = events(|| s.poll_event());
    assert!(
        matches!(&ev[..], [server::Event::CheckKey { proof: p }, server::Event::Plan(_)] if *p == proof),
        "{ev:?}"
    );
    // A client that sends no proof is refused with the reason, and nothing is planned.
    let (mut c, mut s) = (client(params(Direction::Forward), now), keyed());
    let e = exchange(&mut c, &mut s, now).unwrap_err();
    assert!(
        matches!(&e, Error::Limit(m) if m.contains("--require-key") && m.contains("--key FILE")),
        "{e}"
    );
    assert!(events(|| s.poll_event()).is_empty());
    // A second proof, or a proof to a server that asked for none, is out of place.
    let (mut c, mut s) = (client(params(Direction::Forward), now), keyed());
    s.handle(c.poll_transmit().unwrap(), now).unwrap();
    let key_proof = || Message::KeyProof {
        proof: proof.clone(),
    };
    s.handle(key_proof(), now).unwrap();
    assert_eq!(
        s.handle(key_proof(), now),
        Err(unexpected("key_proof", "waiting for test parameters"))
    );
    let (mut c, mut s) = (client(params(Direction::Forward), now), server(now));
    s.handle(c.poll_transmit().unwrap(), now).unwrap();
    assert_eq!(
        s.handle(key_proof(), now),
        Err(unexpected("key_proof", "waiting for test parameters"))
    );
    // A welcome without the requirement asks the client for nothing.
    let (mut c, mut s) = (client(params(Direction::Forward), now), server(now));
    s.handle(c.poll_transmit().unwrap(), now).unwrap();
    c.handle(s.poll_transmit().unwrap(), now).unwrap();
    assert!(events(|| c.poll_event()).is_empty());
}

#[test]
fn every_client_step_times_out_by_name() {
    for (phase, what) in [
        (
            0,
            "timed out waiting for the server's welcome from server:7067",
        ),
        (1, "timed out waiting for pong from server:7067"),
        (
            2,
            "timed out waiting for the server's plan from server:7067",
        ),
        (
            3,
            "timed out waiting for the server's stream set-up from server:7067",
        ),
        (5, "timed out waiting for the server's results"),
    ] {
        let (mut c, _, now) = client_at(phase);
        let due = c.poll_timeout().unwrap();
        // Not a moment early.
        c.handle_timeout(due - Duration::from_nanos(1)).unwrap();
        assert!(!c.is_over(), "{what}");
        assert!(due >= now);
        let e = c.handle_timeout(due).unwrap_err();
        assert_eq!(e.to_string(), what);
    }
}

#[test]
fn a_byte_count_test_ends_when_the_driver_says_every_byte_moved() {
    let mut p = params(Direction::Reverse);
    p.end = EndCondition::Bytes { bytes: 1 << 20 };
    let mut c = client(p, Duration::ZERO);
    let mut s = server(Duration::ZERO);
    exchange(&mut c, &mut s, Duration::ZERO).unwrap();
    let Some(server::Event::Plan(got)) = s.poll_event() else {
        panic!("plan")
    };
    s.accept(plan(&got), Duration::ZERO).unwrap();
    exchange(&mut c, &mut s, Duration::ZERO).unwrap();
    c.streams_connected(Duration::ZERO);
    c.handle(Message::StreamsReady { sockets: vec![] }, Duration::ZERO)
        .unwrap();
    c.start();
    c.streams_started(Duration::ZERO);
    while c.poll_event().is_some() {}
    // Reverse: the client's senders do not matter, its receivers do; no end by time.
    c.streams_finished(true, false, S);
    assert!(c.poll_event().is_none());
    assert_eq!(c.poll_timeout(), Some(S + client::BYTES_CHECK));
    c.handle_timeout(100 * S).unwrap();
    assert!(c.poll_event().is_none());
    c.streams_finished(false, true, 101 * S);
    assert!(matches!(
        c.poll_event(),
        Some(client::Event::StopSenders { .. })
    ));
}

/// A server at `phase` (0: hello, 1: parameters, 2: planning, 3: streams, 4: start, 5: running).
fn server_at(phase: u32) -> (Server, Time) {
    server_in(phase, policy(), Direction::Forward)
}

/// A server with `policy`, playing a test in `direction`, at `phase` (as [`server_at`]).
fn server_in(phase: u32, policy: ServerPolicy, direction: Direction) -> (Server, Time) {
    let now = Duration::ZERO;
    let mut s = server_with(policy, now);
    let p = params(direction);
    let steps: [&dyn Fn(&mut Server); 5] = [
        &|s| {
            s.handle(
                Message::Hello {
                    software: "c".into(),
                },
                now,
            )
            .unwrap()
        },
        &|s| s.handle(Message::Params(p.clone()), now).unwrap(),
        &|s| s.accept(plan(&p), now).unwrap(),
        &|s| {
            for i in 0..p.direction.connections(p.streams) {
                s.data_connection(i).unwrap();
            }
            s.streams_ready(vec![], now);
        },
        &|s| {
            s.handle(Message::Start, now).unwrap();
            s.streams_started(now);
        },
    ];
    for step in steps.iter().take(phase as usize) {
        step(&mut s);
    }
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    (s, now)
}

#[test]
fn every_server_phase_refuses_what_does_not_belong_with_todays_text() {
    for (phase, wrong, name) in [
        (0, Message::Ping { seq: 0 }, "waiting for hello"),
        (1, Message::Start, "waiting for test parameters"),
        (2, Message::Ping { seq: 1 }, "waiting for start"),
        (
            3,
            Message::Hello {
                software: "c".into(),
            },
            "waiting for start",
        ),
        (4, Message::Stop, "waiting for start"),
        (5, Message::Start, "running"),
    ] {
        let (mut s, now) = server_at(phase);
        let kind = wrong.kind();
        assert_eq!(s.handle(wrong, now), Err(unexpected(kind, name)), "{phase}");
        assert!(s.is_over());
    }
}

#[test]
fn a_start_before_the_streams_are_set_up_is_read_in_order() {
    let (mut s, now) = server_at(3);
    s.handle(Message::Start, now).unwrap();
    s.data_connection(0).unwrap();
    s.data_connection(1).unwrap();
    assert_eq!(s.poll_event(), Some(server::Event::SetUpStreams));
    s.streams_ready(vec![], now);
    assert_eq!(s.poll_event(), Some(server::Event::StartStreams));
    assert!(matches!(
        s.poll_transmit(),
        Some(Message::StreamsReady { .. })
    ));
}

#[test]
fn server_limits_pings_streams_and_indices() {
    let (mut s, now) = server_at(1);
    for seq in 0..server::MAX_PINGS {
        s.handle(Message::Ping { seq }, now).unwrap();
        assert_eq!(s.poll_transmit(), Some(Message::Pong { seq }));
    }
    let e = s.handle(Message::Ping { seq: 99 }, now).unwrap_err();
    assert!(e.to_string().contains("more than 64 pings"), "{e}");

    let (mut s, now) = server_at(1);
    let mut p = params(Direction::Forward);
    p.streams = 200;
    s.handle(Message::Params(p.clone()), now).unwrap();
    let e = s.accept(plan(&p), now).unwrap_err();
    assert!(e.to_string().contains("(--max-streams)"), "{e}");

    for bad in [[0, 0], [0, 7]] {
        let (mut s, _) = server_at(3);
        s.data_connection(bad[0]).unwrap();
        let e = s.data_connection(bad[1]).unwrap_err();
        let want = format!("bad or duplicate stream index {}", bad[1]);
        assert!(e.to_string().contains(&want), "{e}");
    }
}

#[test]
fn every_server_step_times_out_by_name() {
    let step = "(each set-up step must complete within 10 s)";
    for (phase, what) in [
        (0, format!("preamble and hello from client:4000 {step}")),
        (
            1,
            format!("pings and test parameters from client:4000 {step}"),
        ),
        (3, format!("2 data connections from client:4000 {step}")),
        (4, "start from client:4000".to_string()),
    ] {
        let (mut s, now) = server_at(phase);
        let due = s.poll_timeout().unwrap();
        assert_eq!(due, now + 10 * S);
        s.handle_timeout(due - Duration::from_nanos(1)).unwrap();
        let e = s.handle_timeout(due).unwrap_err();
        assert_eq!(e.to_string(), format!("timed out waiting for {what}"));
    }
}

#[test]
fn a_running_test_ends_when_stalled_or_never_stopped() {
    // Stalled: no byte for the stall timeout (60 s), though the test may run 3 s + grace.
    let (mut s, now) = server_at(5);
    s.progress(100, now + S);
    let stall = now + S + 60 * S;
    // Its duration, then the time the client may take to drain its senders before it says stop.
    let drain = 15 * S + Duration::from_nanos(20 * 120_000_000);
    let end = now + 3 * S + drain + server::OVERRUN_GRACE + Duration::from_nanos(2 * 120_000_000);
    assert_eq!(s.poll_timeout(), Some(end.min(stall)));
    let e = s.handle_timeout(end).unwrap_err();
    assert!(e.to_string().contains("the client never said stop"), "{e}");

    let mut policy = policy();
    policy.stall_timeout = 2 * S;
    let (mut s, _) = server_in(5, policy, Direction::Forward);
    s.progress(5, S);
    s.handle_timeout(2 * S).unwrap();
    let e = s.handle_timeout(3 * S).unwrap_err();
    assert!(
        e.to_string()
            .contains("no stream moved a byte for 2 s (--stall-timeout)"),
        "{e}"
    );
}

#[test]
fn the_server_waits_briefly_for_the_clients_results() {
    let (mut s, now) = server_at(5);
    s.handle(Message::Stop, now).unwrap();
    let Some(server::Event::StopSenders { drain_by }) = s.poll_event() else {
        panic!("stop")
    };
    assert!(drain_by >= now + 15 * S);
    // The server sends on no stream in a forward test: its intervals stay home.
    s.local_interval(0, vec![]);
    assert!(s.poll_transmit().is_none());
    s.streams_ended(true).unwrap();
    s.local_results(results(&params(Direction::Forward), false), now);
    assert!(matches!(s.poll_transmit(), Some(Message::Results(_))));
    assert_eq!(s.poll_timeout(), Some(now + server::RESULTS_GRACE));
    s.handle_timeout(now + server::RESULTS_GRACE).unwrap();
    assert_eq!(s.poll_event(), Some(server::Event::Finished));
    assert!(s.is_over());

    // A client that closes instead of answering is a normal end too; before that, it is not.
    let (mut s, now) = server_at(5);
    assert!(!s.connection_closed());
    s.handle(Message::Stop, now).unwrap();
    s.streams_ended(true).unwrap();
    s.local_results(results(&params(Direction::Forward), false), now);
    assert!(s.connection_closed());
    assert!(s.is_over());

    // Streams that do not end by the drain deadline fail the test.
    let (mut s, now) = server_at(5);
    s.handle(Message::Stop, now).unwrap();
    let e = s.streams_ended(false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "timed out waiting for the client's streams to end"
    );
}

#[test]
fn intervals_are_paired_by_index_and_sent_only_by_a_sending_server() {
    let (mut c, _, _) = client_at(4);
    // Forward: only the client sends, so its own samples complete an interval.
    c.local_interval(1, sample(1, 0..2));
    c.local_interval(0, sample(0, 0..2));
    let shown: Vec<_> = events(|| c.poll_event());
    assert_eq!(shown.len(), 2);
    let (mut s, _) = server_in(5, policy(), Direction::Reverse);
    s.local_interval(0, sample(0, 0..2));
    assert!(matches!(
        s.poll_transmit(),
        Some(Message::Interval(IntervalSample { index: 0, .. }))
    ));
}

/// A server that lies in its intervals: it reports streams it does not send on (in a forward test it
/// sends on none), streams that do not exist, or intervals far ahead of the test, to grow the client's
/// memory or forge its report. Each is refused with the reason.
#[test]
fn a_lying_servers_intervals_are_refused() {
    let refused = |c: &mut Client, index: u32, streams: Vec<StreamInterval>, now: Time| {
        let e = c
            .handle(Message::Interval(IntervalSample { index, streams }), now)
            .expect_err("a lying interval is refused");
        assert!(matches!(e, Error::Protocol(ProtoError::Invalid(_))), "{e}");
        e.to_string()
    };
    // Forward: the server sends on no stream, so it has no interval to report.
    let (mut c, _, now) = client_at(4);
    let e = refused(&mut c, 0, sample(0, 0..2), now + S);
    assert!(e.contains("sends on no stream"), "{e}");

    // Reverse (streams 0 and 1 are the server's): a stream that does not exist, a stream twice, and
    // an interval a thousand seconds ahead of a test 1 s old.
    for (index, streams, why) in [
        (0, sample(0, [0, 7].into_iter()), "stream 7"),
        (0, sample(0, [1, 1].into_iter()), "stream 1"),
        (1000, sample(1000, 0..2), "interval 1000"),
    ] {
        let mut c = reverse_client_running();
        let e = refused(&mut c, index, streams, now + S);
        assert!(e.contains(why), "{e}");
    }
    // What a real server sends is taken: its own streams, at the test's pace.
    let mut c = reverse_client_running();
    c.handle(
        Message::Interval(IntervalSample {
            index: 0,
            streams: sample(0, 0..2),
        }),
        now + S,
    )
    .unwrap();
}

/// A reverse test's client in its running phase, started at time 0.
fn reverse_client_running() -> Client {
    let p = params(Direction::Reverse);
    let mut c = client(p, Duration::ZERO);
    let mut s = server(Duration::ZERO);
    let now = Duration::ZERO;
    s.handle(c.poll_transmit().unwrap(), now).unwrap();
    c.handle(s.poll_transmit().unwrap(), now).unwrap();
    exchange(&mut c, &mut s, now).unwrap();
    let Some(server::Event::Plan(got)) = s.poll_event() else {
        panic!("plan")
    };
    s.accept(plan(&got), now).unwrap();
    exchange(&mut c, &mut s, now).unwrap();
    c.streams_connected(now);
    c.handle(
        Message::StreamsReady {
            sockets: vec![setup(0, true), setup(1, true)],
        },
        now,
    )
    .unwrap();
    c.start();
    c.streams_started(now);
    while c.poll_event().is_some() {}
    c
}
