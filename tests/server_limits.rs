//! Denial of service and numeric bounds (issue 11, findings 4, 7 and 9): hostile clients that do not
//! hold the key (and one transfer peer that does) try to hold the server's slots, threads and memory,
//! and each is dropped or refused with a reason that names the limit; after each attack a normal
//! `longhaul test` or transfer still succeeds.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use longhaul_proto::wire::{Preamble, encode_frame};
use longhaul_proto::{EndCondition, Message, TestParams, WindowRequest};
use longhaul_transfer::msg::{Direction as XferDirection, HaveFile};
use longhaul_transfer::{Message as Xfer, RangeSet};

use crate::raw_peer::{RawPeer, key_of};
use crate::server_faults::params;
use crate::util::{ServerProc, bin, closed_while_trickling, json_test};

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads one control frame; `None` when the server closed the connection instead.
fn try_read_message(s: &mut TcpStream) -> Option<Message> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(Message::from_json(&body).unwrap())
}

fn read_message(s: &mut TcpStream) -> Message {
    try_read_message(s).expect("a frame from the server")
}

/// The server's error message, failing the test on anything else.
fn error_of(s: &mut TcpStream) -> String {
    match try_read_message(s) {
        Some(Message::Error { message }) => message,
        other => panic!("expected an error from the server, got {other:?}"),
    }
}

/// Sends the control preamble and hello; returns the cookie.
fn hello(s: &mut TcpStream) -> [u8; 16] {
    s.write_all(&Preamble::control().encode()).unwrap();
    s.write_all(&encode_frame(&Message::Hello {
        software: "hostile test".into(),
    }))
    .unwrap();
    match read_message(s) {
        Message::Welcome { cookie, .. } => {
            let mut out = [0u8; 16];
            for (i, b) in out.iter_mut().enumerate() {
                *b = u8::from_str_radix(&cookie[2 * i..2 * i + 2], 16).unwrap();
            }
            out
        }
        m => panic!("expected welcome, got {m:?}"),
    }
}

fn send_params(s: &mut TcpStream, p: TestParams) {
    s.write_all(&encode_frame(&Message::Params(p))).unwrap();
}

/// A client trickling its preamble one byte every 2 s is dropped when the whole step's deadline (10 s
/// by default) passes; before, every read had its own 10 s and the client held its slot forever.
/// The same for the hello: preamble and hello share the first deadline, counted from accept.
#[test]
fn a_trickled_preamble_or_hello_is_dropped_at_the_step_deadline() {
    let mut srv = ServerProc::start(&["--max-tests", "1"]);
    let port = srv.port;
    let hello_trickler = std::thread::spawn(move || {
        let mut s = connect(port);
        std::thread::sleep(Duration::from_secs(6));
        s.write_all(&Preamble::control().encode()).unwrap();
        let frame = encode_frame(&Message::Hello {
            software: "x".repeat(40),
        });
        let t0 = Instant::now();
        let closed = closed_while_trickling(
            &mut s,
            &frame,
            Duration::from_secs(1),
            Duration::from_secs(25),
        );
        (closed, t0.elapsed())
    });
    let mut s = connect(port);
    let t0 = Instant::now();
    let pre = Preamble::control().encode();
    let closed = closed_while_trickling(
        &mut s,
        &pre,
        Duration::from_secs(2),
        Duration::from_secs(25),
    );
    let took = t0.elapsed();
    assert!(
        closed,
        "a preamble trickled over {took:?} still held its connection"
    );
    assert!(
        took < Duration::from_secs(16),
        "dropped only after {took:?}"
    );
    let (closed, took) = hello_trickler.join().unwrap();
    assert!(closed, "a hello trickled over {took:?} still held its slot");
    // 10 s from accept, 6 s of which passed before the preamble: the hello had 4 s left.
    assert!(
        took < Duration::from_secs(9),
        "hello dropped only after {took:?}"
    );
    srv.wait_for("connection preamble (");
    srv.wait_for("preamble and hello from");
    assert!(srv.alive());
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

/// A client that keeps pinging is dropped after the ping limit, and one that pings slowly when the
/// whole pings-and-parameters step's deadline passes; before, each ping restarted the timeout and the
/// client held its slot forever.
#[test]
fn a_client_that_keeps_pinging_loses_its_slot() {
    let mut srv = ServerProc::start(&["--max-tests", "2"]);
    let port = srv.port;
    let slow = std::thread::spawn(move || {
        let mut s = connect(port);
        hello(&mut s);
        let t0 = Instant::now();
        for seq in 0..20 {
            if s.write_all(&encode_frame(&Message::Ping { seq })).is_err() {
                break;
            }
            match try_read_message(&mut s) {
                Some(Message::Pong { .. }) => std::thread::sleep(Duration::from_secs(2)),
                Some(Message::Error { message }) => return (message, t0.elapsed()),
                other => return (format!("{other:?}"), t0.elapsed()),
            }
        }
        ("still pinging after 20 pings".to_string(), t0.elapsed())
    });
    let mut s = connect(port);
    hello(&mut s);
    let mut answer = String::from("every ping answered");
    for seq in 0..200 {
        s.write_all(&encode_frame(&Message::Ping { seq })).unwrap();
        match try_read_message(&mut s) {
            Some(Message::Pong { seq: got }) => assert_eq!(got, seq),
            Some(Message::Error { message }) => {
                answer = message;
                break;
            }
            other => panic!("ping {seq}: {other:?}"),
        }
    }
    assert!(answer.contains("more than 64 pings"), "{answer}");
    let (message, took) = slow.join().unwrap();
    assert!(message.contains("pings and test parameters"), "{message}");
    assert!(
        took < Duration::from_secs(16),
        "slow pinger dropped after {took:?}"
    );
    srv.wait_for("more than 64 pings");
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

/// Plays a test up to the start: params, the data connections, start. Returns the control
/// connection and the data connections (which the test then leaves silent).
fn start_test(port: u16, p: TestParams) -> (TcpStream, Vec<TcpStream>) {
    let mut s = connect(port);
    let cookie = hello(&mut s);
    let conns = p.direction.connections(p.streams);
    send_params(&mut s, p);
    match read_message(&mut s) {
        Message::Accepted(_) => {}
        m => panic!("expected accepted, got {m:?}"),
    }
    let data: Vec<TcpStream> = (0..conns)
        .map(|i| {
            let mut d = connect(port);
            d.write_all(&Preamble::data(cookie, i).encode()).unwrap();
            d
        })
        .collect();
    match read_message(&mut s) {
        Message::StreamsReady { .. } => {}
        m => panic!("expected streams_ready, got {m:?}"),
    }
    s.write_all(&encode_frame(&Message::Start)).unwrap();
    (s, data)
}

/// A 1-second test whose client never says stop is ended by the server some seconds after its
/// duration (the default stall timeout is far longer); before, it ran until the client went away.
#[test]
fn a_test_the_client_never_stops_is_ended_after_its_duration() {
    let mut srv = ServerProc::start(&["--max-tests", "1"]);
    let t0 = Instant::now();
    let (mut s, _data) = start_test(srv.port, params());
    let message = error_of(&mut s);
    let took = t0.elapsed();
    assert!(message.contains("never said stop"), "{message}");
    // 1 s, the client's drain time (15 s + 20 RTT), then 5 s + 2 RTT.
    assert!(took > Duration::from_secs(20), "ended after {took:?}");
    assert!(took < Duration::from_secs(30), "ended after {took:?}");
    srv.wait_for("never said stop");
    // Its slot (the only one) is free again.
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

/// `--max-duration` refuses longer tests by name; `--stall-timeout` ends a running test in which no
/// stream moves a byte (the client sends nothing on its streams and never stops).
#[test]
fn max_duration_and_stall_timeout_are_enforced() {
    let mut srv = ServerProc::start(&["--max-duration", "30", "--stall-timeout", "2"]);
    let mut s = connect(srv.port);
    hello(&mut s);
    let mut p = params();
    p.end = EndCondition::Time { ns: 60_000_000_000 };
    send_params(&mut s, p);
    let message = error_of(&mut s);
    assert!(
        message.contains("longer than this server's maximum of 30 s (--max-duration)"),
        "{message}"
    );

    let mut p = params();
    p.end = EndCondition::Time { ns: 25_000_000_000 };
    let t0 = Instant::now();
    let (mut s, _data) = start_test(srv.port, p);
    let message = error_of(&mut s);
    let took = t0.elapsed();
    assert!(
        message.contains("no stream moved a byte for 2 s (--stall-timeout)"),
        "{message}"
    );
    assert!(took < Duration::from_secs(10), "ended after {took:?}");
    srv.wait_for("test stalled");
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

/// `count` silent connections to `port` from the loopback address 127.0.0.`host`.
fn flood(port: u16, host: u8, count: usize) -> Vec<TcpStream> {
    let target: SocketAddr = ([127, 0, 0, 1], port).into();
    (0..count)
        .map(|_| {
            let sock =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock.bind(&SocketAddr::from(([127, 0, 0, host], 0)).into())
                .unwrap();
            sock.connect(&target.into()).unwrap();
            TcpStream::from(sock)
        })
        .collect()
}

/// More connections than the server will have handshaking at once, silent. From one other address
/// (127.0.0.2): the per-source cap keeps them from the slots, so a normal test from 127.0.0.1 gets
/// its control and data connections through. From 40 addresses, filling every general slot: a
/// session already waiting for its data connections still gets them. Before, 256 such connections
/// filled every slot and the test's connections were dropped.
#[test]
fn a_flood_of_silent_connections_cannot_starve_a_test() {
    let mut srv = ServerProc::start(&[]);
    let one_host = flood(srv.port, 2, 300);
    // The server accepts and counts them on its own time: wait until it drops the first.
    srv.wait_for("dropped connection:");
    let j = json_test("127.0.0.1", srv.port, &["-t", "1", "-P", "4"]);
    assert!(
        j["end"]["streams"][3]["receiver"]["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        srv.log()
            .contains("dropped connection: 32 connections from 127.0.0.2")
    );
    drop(one_host);

    // A session set up before the flood, then 40 hosts × 32 connections, then its data connections.
    let mut s = connect(srv.port);
    let cookie = hello(&mut s);
    let mut p = params();
    p.streams = 4;
    send_params(&mut s, p);
    assert!(matches!(read_message(&mut s), Message::Accepted(_)));
    let many: Vec<Vec<TcpStream>> = (3..43).map(|h| flood(srv.port, h, 32)).collect();
    srv.wait_for("1024 connections already handshaking");
    let _data: Vec<TcpStream> = (0..4)
        .map(|i| {
            let mut d = connect(srv.port);
            d.write_all(&Preamble::data(cookie, i).encode()).unwrap();
            d
        })
        .collect();
    match try_read_message(&mut s) {
        Some(Message::StreamsReady { sockets }) => assert_eq!(sockets.len(), 4),
        other => panic!("expected streams_ready, got {other:?}"),
    }
    drop(many);
}

/// Refusals of parameters beyond the server's own limits and the protocol's ranges, each named, none
/// of them panicking the server: too many streams, too much socket-buffer memory, a congestion
/// control the kernel does not already offer, an absurd RTT and rate (which overflowed the window
/// plan: a panic in this debug build).
#[test]
fn tests_beyond_the_servers_limits_are_refused_by_name() {
    let mut srv = ServerProc::start(&[]);
    type Mutation = Box<dyn Fn(&mut TestParams)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (
            Box::new(|p| p.streams = 1000),
            "test asks for 1000 streams; this server allows 128 per test (--max-streams)",
        ),
        (
            Box::new(|p| {
                p.streams = 100;
                p.window = WindowRequest::Fixed { bytes: 1 << 30 };
            }),
            "(--max-test-memory)",
        ),
        (
            Box::new(|p| p.congestion = Some("vegas".into())),
            "congestion control \"vegas\" is not available",
        ),
        (
            Box::new(|p| {
                // Within the rate range, so the RTT is what is refused: before, 2 × BDP overflowed.
                p.rtt_ns = u64::MAX;
                p.target_rate_bps = 1_000_000_000_000;
            }),
            "rtt must be at most 10 s",
        ),
    ];
    for (mutate, needle) in cases {
        let mut s = connect(srv.port);
        hello(&mut s);
        let mut p = params();
        mutate(&mut p);
        send_params(&mut s, p);
        let message = error_of(&mut s);
        assert!(
            message.contains(needle),
            "{message:?} should contain {needle:?}"
        );
        assert!(srv.alive());
    }
    srv.wait_for("(--max-streams)");
    srv.wait_for("(--max-test-memory)");
    srv.wait_for("is not available");
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
    // The refusal of a congestion control names the ones the kernel offers.
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if let Some(first) = available.split_whitespace().next() {
        assert!(srv.log().contains(first));
    }
}

/// The receive buffer (`rb`) of the server's listening socket, from `ss`.
fn listener_rcvbuf(port: u16) -> u64 {
    let out = Command::new("ss")
        .args(["-Hltmn", &format!("sport = :{port}")])
        .output()
        .expect("run ss");
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text
        .find(",rb")
        .unwrap_or_else(|| panic!("no rb in ss output: {text}"));
    text[at + 3..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// A test asking for a 1 GiB window forces the listener's receive buffer up (for the window scale),
/// which every later connection inherits; once the test is gone it comes back down to the
/// autotuning ceiling (`tcp_rmem[2]`). Before, it stayed at 2 GiB for good.
#[test]
fn the_listener_buffer_comes_back_down_after_a_huge_window_test() {
    if !longhaul_testkit::require(
        nix_root(),
        "needs root (SO_RCVBUFFORCE) to force a 1 GiB listener buffer",
    ) {
        return;
    }
    let mut srv = ServerProc::start(&[]);
    let before = listener_rcvbuf(srv.port);
    let mut s = connect(srv.port);
    hello(&mut s);
    let mut p = params();
    p.window = WindowRequest::Fixed { bytes: 1 << 30 };
    send_params(&mut s, p);
    assert!(matches!(read_message(&mut s), Message::Accepted(_)));
    let during = listener_rcvbuf(srv.port);
    assert!(
        during >= 1 << 30,
        "the listener was not widened ({before} -> {during})"
    );
    drop(s);
    srv.wait_for("test ended with an error");
    let tcp_rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = listener_rcvbuf(srv.port);
    while after > tcp_rmem_max && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = listener_rcvbuf(srv.port);
    }
    assert!(
        after <= tcp_rmem_max,
        "listener buffer {after} after the test (before {before}, during {during}, tcp_rmem[2] {tcp_rmem_max})"
    );
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

fn nix_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A scratch directory with a key and a served root holding one 3 MiB file `f`.
struct Files {
    dir: PathBuf,
    key: PathBuf,
    root: PathBuf,
}

impl Files {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lh-limits-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("f"), vec![7u8; 3 << 20]).unwrap();
        std::fs::write(dir.join("local"), vec![9u8; 1 << 20]).unwrap();
        let key = dir.join("key");
        let out = Command::new(bin())
            .arg("keygen")
            .arg(&key)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        Self { dir, key, root }
    }

    fn serve(&self, extra: &[&str]) -> ServerProc {
        let mut args = vec!["--root", s(&self.root), "--key", s(&self.key)];
        args.extend_from_slice(extra);
        ServerProc::start(&args)
    }

    /// `longhaul send local 127.0.0.1:DEST`.
    fn send(&self, port: u16, dest: &str) -> Output {
        Command::new(bin())
            .arg("send")
            .arg(self.dir.join("local"))
            .arg(format!("127.0.0.1:{dest}"))
            .args(["-p", &port.to_string(), "--key", s(&self.key)])
            .output()
            .unwrap()
    }

    fn send_ok(&self, port: u16, dest: &str) {
        let out = self.send(port, dest);
        assert!(
            out.status.success(),
            "send failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(self.root.join(dest).join("local").exists());
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Unauthenticated test clients holding every test slot do not make transfers "busy": transfers have
/// their own cap (`--max-transfers`), which is named when it is full.
#[test]
fn test_clients_cannot_fill_the_transfer_slots() {
    let f = Files::new("admission");
    let srv = f.serve(&["--max-tests", "1"]);
    let mut holder = connect(srv.port);
    hello(&mut holder);
    f.send_ok(srv.port, "a");
    drop(holder);
    drop(srv);

    // The transfer cap itself: one authenticated peer holds it, the next transfer is told why.
    let srv = f.serve(&["--max-transfers", "1"]);
    let key = key_of(&f.key);
    let _peer = RawPeer::connect(srv.port, &key, XferDirection::Send);
    let out = f.send(srv.port, "b");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("transfers running (cap 1, --max-transfers)"),
        "{err}"
    );
}

/// Finding 7: a transfer plan beyond the memory limit (256 streams × 64 MiB chunks) and a `have`
/// naming a file that is not in the manifest are refused by name; the server keeps serving.
#[test]
fn a_key_holder_cannot_exceed_the_transfer_memory_bound_or_forge_have() {
    let f = Files::new("memory");
    let mut srv = f.serve(&[]);
    let key = key_of(&f.key);

    let mut peer = RawPeer::connect(srv.port, &key, XferDirection::Send);
    peer.send(&Xfer::SendTo {
        dest: None,
        overwrite: false,
        fsync: false,
        stripe: None,
    });
    peer.send(&Xfer::Plan {
        streams: 256,
        chunk_size: 64 << 20,
        rtt_ns: 1_000_000,
        rate_bps: 1_000_000_000,
        pace_auto_bps: None,
        fast_start: false,
        transport: longhaul_proto::msg::Transport::Tcp,
        controller: None,
    });
    let err = peer.recv().expect_err("the plan is refused");
    assert!(err.contains("over the 512 MiB limit"), "{err}");

    let mut peer = RawPeer::connect(srv.port, &key, XferDirection::Get);
    peer.send(&Xfer::Request {
        paths: vec![longhaul_transfer::RelPath::parse("f").unwrap()],
    });
    peer.send(&Xfer::Plan {
        streams: 1,
        chunk_size: 1 << 20,
        rtt_ns: u64::MAX,
        rate_bps: 0,
        pace_auto_bps: None,
        fast_start: false,
        transport: longhaul_proto::msg::Transport::Tcp,
        controller: None,
    });
    let err = peer.recv().expect_err("the plan's rtt is refused");
    assert!(err.contains("rtt"), "{err}");

    // A --pace auto bottleneck no path has (5 bit/s) would pace the server's streams to a crawl.
    let mut peer = RawPeer::connect(srv.port, &key, XferDirection::Get);
    peer.send(&Xfer::Request {
        paths: vec![longhaul_transfer::RelPath::parse("f").unwrap()],
    });
    peer.send(&Xfer::Plan {
        streams: 1,
        chunk_size: 1 << 20,
        rtt_ns: 1_000_000,
        rate_bps: 1_000_000_000,
        pace_auto_bps: Some(5),
        fast_start: false,
        transport: longhaul_proto::msg::Transport::Tcp,
        controller: None,
    });
    let err = peer.recv().expect_err("the plan's bottleneck is refused");
    assert!(err.contains("--pace auto's bottleneck"), "{err}");

    let mut peer = RawPeer::connect(srv.port, &key, XferDirection::Get);
    peer.send(&Xfer::Request {
        paths: vec![longhaul_transfer::RelPath::parse("f").unwrap()],
    });
    peer.send(&Xfer::Plan {
        streams: 1,
        chunk_size: 1 << 20,
        rtt_ns: 1_000_000,
        rate_bps: 1_000_000_000,
        pace_auto_bps: None,
        fast_start: false,
        transport: longhaul_proto::msg::Transport::Tcp,
        controller: None,
    });
    peer.recv_until(|m| matches!(m, Xfer::ManifestBatch { last: true, .. }))
        .expect("the manifest");
    let mut verified = RangeSet::new();
    verified.insert_range(0, 1);
    peer.send(&Xfer::Have {
        files: vec![HaveFile {
            file: 4242,
            verified,
        }],
        last: true,
    });
    let err = peer.recv().expect_err("the have is refused");
    assert!(err.contains("not a file of the manifest"), "{err}");
    srv.wait_for("over the 512 MiB limit");
    srv.wait_for("not a file of the manifest");

    f.send_ok(srv.port, "after");
}

/// `server --key K --require-key`: tests only for clients that prove they hold K, over the cookie
/// the server issues per test. A client with no key or another key, one replaying a proof seen on
/// another test, one sending its parameters with no proof, and one sending garbage for a proof are
/// each refused with the reason before anything is planned for them; the key holder's tests run
/// (TCP, UDP, and encrypted, where the proof is also bound to the TLS session).
#[test]
fn a_server_that_requires_its_key_serves_tests_only_to_key_holders() {
    let files = Files::new("test-key");
    let other = Files::new("test-key-other");
    let mut srv = ServerProc::start(&["--key", s(&files.key), "--require-key"]);
    let refused = |args: &[&str]| {
        let out = crate::util::test_cmd("127.0.0.1", srv.port, args);
        assert!(!out.status.success(), "longhaul test {args:?} was served");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = refused(&["-t", "1"]);
    assert!(
        e.contains("--require-key") && e.contains("--key FILE"),
        "{e}"
    );
    let e = refused(&["-t", "1", "--key", s(&other.key)]);
    assert!(e.contains("test authorization failed"), "{e}");

    // An on-path onlooker has seen a key holder's proof for one test's cookie; it opens no other.
    let key = key_of(&files.key);
    let seen = key.test_proof(&[0x5a; 16], None).to_string();
    let mut c = connect(srv.port);
    let cookie = hello(&mut c);
    assert_ne!(cookie, [0x5a; 16]);
    c.write_all(&encode_frame(&Message::KeyProof { proof: seen }))
        .unwrap();
    send_params(&mut c, params());
    let e = error_of(&mut c);
    assert!(e.contains("test authorization failed"), "{e}");
    // Parameters without a proof.
    let mut c = connect(srv.port);
    hello(&mut c);
    send_params(&mut c, params());
    let e = error_of(&mut c);
    assert!(e.contains("--require-key"), "{e}");
    // A proof that is not one.
    let mut c = connect(srv.port);
    hello(&mut c);
    c.write_all(&encode_frame(&Message::Ping { seq: 0 }))
        .unwrap();
    assert!(matches!(read_message(&mut c), Message::Pong { seq: 0 }));
    let frame = br#"{"type":"key_proof","proof":"not hex"}"#;
    c.write_all(&(frame.len() as u32).to_be_bytes()).unwrap();
    c.write_all(frame).unwrap();
    let e = error_of(&mut c);
    assert!(e.contains("64 lowercase hex"), "{e}");
    assert!(srv.alive());
    srv.wait_for("test authorization failed");

    // The key holder: a proof made by hand over this test's cookie is accepted …
    let mut c = connect(srv.port);
    let cookie = hello(&mut c);
    let proof = key.test_proof(&cookie, None).to_string();
    c.write_all(&encode_frame(&Message::KeyProof { proof }))
        .unwrap();
    send_params(&mut c, params());
    assert!(
        matches!(read_message(&mut c), Message::Accepted(_)),
        "the key holder's parameters are planned"
    );
    drop(c);
    // … and `longhaul test --key` runs, TCP, UDP and encrypted.
    for extra in [&[][..], &["-u", "-b", "50M"], &["--encrypt"]] {
        let mut args = vec!["-t", "1", "--key", s(&files.key)];
        args.extend_from_slice(extra);
        let j = json_test("127.0.0.1", srv.port, &args);
        assert!(
            j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0) > 0.0,
            "{extra:?}: {j}"
        );
    }
    let _ = std::fs::remove_dir_all(&files.dir);
    let _ = std::fs::remove_dir_all(&other.dir);
}
