//! Hostile and broken peers: the server logs them, frees their resources and keeps serving others.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use longhaul_proto::wire::{Preamble, encode_frame};
use longhaul_proto::{Direction, EndCondition, Message, TestParams, Transport, WindowRequest};
use serde_json::Value;

use crate::util::{ServerProc, bin, json_test, read_all, test_cmd};

pub(crate) fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads one control frame (length + JSON) from a raw socket.
pub(crate) fn read_message(s: &mut TcpStream) -> Message {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame from the server");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    Message::from_json(&body).unwrap()
}

pub(crate) fn hello(s: &mut TcpStream) -> String {
    s.write_all(&Preamble::control().encode()).unwrap();
    s.write_all(&encode_frame(&Message::Hello {
        software: "raw test".into(),
    }))
    .unwrap();
    match read_message(s) {
        Message::Welcome { cookie, .. } => cookie,
        m => panic!("expected welcome, got {m:?}"),
    }
}

/// One 1-second stream at 1 Gbit/s, everything else default: parameters the server accepts.
pub(crate) fn params() -> TestParams {
    TestParams {
        streams: 1,
        end: EndCondition::Time { ns: 1_000_000_000 },
        interval_ns: 1_000_000_000,
        direction: Direction::Forward,
        congestion: None,
        window: WindowRequest::Auto,
        target_rate_bps: 1_000_000_000,
        pace_total_bps: None,
        pace_auto: None,
        fast_start: false,
        write_len: 131_072,
        zerocopy: false,
        rtt_ns: 100_000,
        omit_ns: 0,
        udp: None,
        transport: Transport::Tcp,
        sockets: Default::default(),
    }
}

#[test]
fn garbage_clients_do_not_disturb_a_concurrent_good_test() {
    let mut srv = ServerProc::start(&[]);
    let port = srv.port.to_string();
    // A good 3-second test runs while the garbage arrives.
    let good = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    srv.wait_for("test started");

    // 1. Random bytes instead of a preamble.
    let mut s = connect(srv.port);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n and some more bytes to fill a preamble")
        .unwrap();
    assert_eq!(read_all(&mut s), "", "garbage gets no answer, just a close");

    // 2. A valid control preamble, then a frame claiming 4 GiB.
    let mut s = connect(srv.port);
    s.write_all(&Preamble::control().encode()).unwrap();
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let answer = String::from_utf8_lossy(&rest);
    assert!(answer.contains("exceeds the 64 KiB limit"), "{answer}");

    // 3. A truncated frame, then the client vanishes.
    let mut s = connect(srv.port);
    s.write_all(&Preamble::control().encode()).unwrap();
    let frame = encode_frame(&Message::Hello {
        software: "x".into(),
    });
    s.write_all(&frame[..frame.len() - 3]).unwrap();
    drop(s);

    // 4. Well-framed JSON that is not a message.
    let mut s = connect(srv.port);
    s.write_all(&Preamble::control().encode()).unwrap();
    let junk = br#"{"type":"format_disk","now":true}"#;
    s.write_all(&(junk.len() as u32).to_be_bytes()).unwrap();
    s.write_all(junk).unwrap();
    let answer = read_all(&mut s);
    assert!(answer.contains("malformed control message"), "{answer}");

    // 5. A data connection with a cookie nobody issued.
    let mut s = connect(srv.port);
    s.write_all(&Preamble::data([0xAB; 16], 0).encode())
        .unwrap();
    assert_eq!(read_all(&mut s), "");

    let out = good.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "good test failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s0 = &j["end"]["streams"][0];
    assert!(s0["receiver"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(s0["sender"]["bytes"], s0["receiver"]["bytes"]);

    srv.wait_for("bad magic");
    srv.wait_for("exceeds the 64 KiB limit");
    srv.wait_for("in the middle of a message");
    srv.wait_for("unknown test cookie");
    assert!(srv.alive());
    // And it still serves: every slot was released.
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

#[test]
fn a_peer_of_another_protocol_version_is_told_so() {
    let srv = ServerProc::start(&[]);
    let mut s = connect(srv.port);
    let mut pre = Preamble::control().encode();
    pre[8..10].copy_from_slice(&99u16.to_be_bytes());
    s.write_all(&pre).unwrap();
    match read_message(&mut s) {
        Message::Error { message } => {
            assert!(message.contains("protocol version mismatch"), "{message}")
        }
        m => panic!("expected an error, got {m:?}"),
    }
}

#[test]
fn server_refuses_unknown_congestion_control_in_params() {
    let srv = ServerProc::start(&[]);
    let mut s = connect(srv.port);
    hello(&mut s);
    let mut p = params();
    p.congestion = Some("nosuchcc".into());
    s.write_all(&encode_frame(&Message::Params(p))).unwrap();
    match read_message(&mut s) {
        Message::Error { message } => {
            assert!(
                message.contains("congestion control \"nosuchcc\" is not available"),
                "{message}"
            )
        }
        m => panic!("expected an error, got {m:?}"),
    }
}

#[test]
fn invalid_params_are_refused_before_any_stream() {
    let srv = ServerProc::start(&[]);
    let mut s = connect(srv.port);
    hello(&mut s);
    let mut p = serde_json::to_value(Message::Params(params())).unwrap();
    p["streams"] = 100_000.into();
    let body = serde_json::to_vec(&p).unwrap();
    s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
    let answer = read_all(&mut s);
    assert!(answer.contains("streams must be 1..=1024"), "{answer}");
}

#[test]
fn server_refuses_a_bad_omit_period_in_params() {
    let srv = ServerProc::start(&[]);
    // Too long, and with a byte count: each refused with a reason naming it, before any stream.
    for (omit_ns, end, needle) in [
        (
            601_000_000_000u64,
            EndCondition::Time { ns: 1_000_000_000 },
            "omit period must be at most 600 s",
        ),
        (
            1_000_000_000,
            EndCondition::Bytes { bytes: 1 << 20 },
            "omit period (-O) cannot be used with a byte count (-n)",
        ),
    ] {
        let mut s = connect(srv.port);
        hello(&mut s);
        let mut p = params();
        p.omit_ns = omit_ns;
        p.end = end;
        s.write_all(&encode_frame(&Message::Params(p))).unwrap();
        match read_message(&mut s) {
            Message::Error { message } => assert!(message.contains(needle), "{message}"),
            m => panic!("expected an error, got {m:?}"),
        }
    }
}

#[test]
fn a_client_that_dies_mid_test_frees_its_slot() {
    let mut srv = ServerProc::start(&["--max-tests", "1"]);
    let port = srv.port.to_string();
    let mut victim = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "30", "-P", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    srv.wait_for("test started");
    victim.kill().unwrap();
    victim.wait().unwrap();
    srv.wait_for("test ended with an error");
    assert!(srv.alive());
    // The only slot is free again.
    json_test("127.0.0.1", srv.port, &["-t", "1"]);
}

#[test]
fn a_server_that_dies_mid_test_is_a_clear_client_error() {
    let mut srv = ServerProc::start(&[]);
    let port = srv.port;
    let client = std::thread::spawn(move || test_cmd("127.0.0.1", port, &["-t", "20", "-R"]));
    srv.wait_for("test started");
    drop(std::mem::replace(&mut srv, ServerProc::start(&[])));
    let out = client.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("longhaul: error:"), "{err}");
    assert!(
        err.contains("closed the control connection") || err.contains("stream"),
        "{err}"
    );
}
