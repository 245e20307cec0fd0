//! `--transport udp`: tests whose data connections are QUIC connections over UDP (issue 19),
//! on loopback; the emulated long paths are in `transport_path.rs`.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::util::{DownOnDrop, KillOnDrop, ServerProc, bin, json_test, read_lines, test_cmd};

/// The streams of every interval of a report, flattened.
fn interval_streams(j: &Value) -> Vec<&Value> {
    j["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .flat_map(|i| i["streams"].as_array().expect("streams").iter())
        .collect()
}

/// A forward test over QUIC reports as a TCP test does: intervals with the sender's RTT, window and
/// losses, the end totals on both sides, the controller on every socket, and the QUIC plan (a
/// flow-control window of at least 4 MiB) in the start, and no socket buffer judged as a window.
#[test]
fn a_test_over_quic_reports_in_the_shape_of_a_tcp_test() {
    let server = ServerProc::start(&[]);
    let j = json_test(
        "127.0.0.1",
        server.port,
        &["--transport", "udp", "-t", "2", "-i", "0.5"],
    );
    let quic = &j["start"]["longhaul"]["quic"];
    assert_eq!(quic["controller"], "cubic", "{quic}");
    assert!(quic["window_bytes"].as_u64().unwrap() >= 4 << 20, "{quic}");
    // No socket buffer is judged as a TCP window would be (a user's 4 MiB cap would read as a
    // 280 Mbit/s ceiling at 120 ms that QUIC does not have).
    for side in ["local_buffers", "remote_buffers"] {
        let judged = &j["start"]["longhaul"][side];
        assert!(
            judged.as_array().is_some_and(Vec::is_empty),
            "{side}: {judged}"
        );
    }
    for side in ["local_sockets", "remote_sockets"] {
        let socks = j["start"]["longhaul"][side].as_array().unwrap();
        assert_eq!(socks.len(), 1, "{side}");
        assert_eq!(socks[0]["congestion"], "quic-cubic", "{side}");
    }
    let streams = interval_streams(&j);
    assert!(streams.len() >= 3, "{}", j["intervals"]);
    for s in &streams {
        assert!(s["rtt"].as_u64().unwrap() > 0, "{s}");
        assert!(s["snd_cwnd"].as_u64().unwrap() > 0, "{s}");
        assert!(s["pmtu"].as_u64().unwrap() >= 1200, "{s}");
        assert!(s["retransmits"].is_u64(), "{s}");
    }
    let sent = j["end"]["sum_sent"]["bytes"].as_u64().unwrap();
    let received = j["end"]["sum_received"]["bytes"].as_u64().unwrap();
    assert!(sent > 1 << 20, "{}", j["end"]);
    assert_eq!(sent, received, "a reliable stream delivers what was sent");
}

/// A byte count moves exactly that many bytes, in each direction and with parallel streams, with
/// each controller.
#[test]
fn byte_counts_arrive_exactly_in_every_direction_with_every_controller() {
    let server = ServerProc::start(&[]);
    for (dir, cc) in [
        (None, "cubic"),
        (Some("-R"), "newreno"),
        (Some("--bidir"), "bbr"),
        (Some("-R"), "udt"),
    ] {
        let mut args = vec!["--transport", "udp", "-n", "24M", "-P", "2", "-C", cc];
        args.extend(dir);
        let j = json_test("127.0.0.1", server.port, &args);
        let socks = j["start"]["longhaul"]["local_sockets"].as_array().unwrap();
        let expected = if dir == Some("--bidir") { 4 } else { 2 };
        assert_eq!(socks.len(), expected, "{args:?}");
        assert!(
            socks
                .iter()
                .all(|s| s["congestion"] == format!("quic-{cc}")),
            "{args:?}: {socks:?}"
        );
        let mut sums = vec!["sum_sent", "sum_received"];
        if dir == Some("--bidir") {
            sums.extend(["sum_sent_bidir_reverse", "sum_received_bidir_reverse"]);
        }
        for sum in sums {
            assert_eq!(
                j["end"][sum]["bytes"].as_u64(),
                Some(24 << 20),
                "{args:?} {sum}: {}",
                j["end"]
            );
        }
    }
}

/// `--pace RATE` caps a test over the UDP transport as it caps TCP streams, whichever side sends:
/// loopback carries QUIC at gigabits, two streams keep to 40 Mbit/s together.
#[test]
fn pace_caps_the_udp_transport_in_each_direction() {
    let server = ServerProc::start(&[]);
    for dir in [None, Some("-R")] {
        let mut args = vec!["--transport", "udp", "--pace", "40M", "-P", "2", "-t", "3"];
        args.extend(dir);
        let j = json_test("127.0.0.1", server.port, &args);
        let sent = j["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap();
        assert!(sent <= 1.05 * 40e6, "{args:?}: {sent} bit/s: {}", j["end"]);
        assert!(sent > 0.0, "{args:?}: {}", j["end"]);
    }
}

/// What only TCP or only datagrams do is refused with one line naming the conflict, before any
/// connection: a kernel controller's name, `-u`, `-Z`, `--pace auto`.
#[test]
fn what_only_tcp_or_datagrams_do_is_refused_with_the_udp_transport() {
    for (args, says) in [
        (&["-C", "htcp"][..], "not one of the UDP transport's"),
        (&["-u"][..], "--udp"),
        (&["-Z"][..], "--zerocopy"),
        (&["--pace", "auto"][..], "--pace auto"),
    ] {
        let mut all = vec!["--transport", "udp"];
        all.extend_from_slice(args);
        let out = test_cmd("127.0.0.1", 9, &all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{all:?}");
        assert!(err.contains(says), "{all:?}: {err}");
        assert!(err.lines().count() <= 5, "{all:?}: {err}");
    }
}

/// A peer that sends QUIC handshakes (or anything else) to the server's port without a test's
/// hello gets nothing back: no answer to amplify, no reflection; the server keeps serving.
#[test]
fn datagrams_without_a_hello_are_never_answered() {
    let server = ServerProc::start(&[]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.connect(("127.0.0.1", server.port)).unwrap();
    // A QUIC Initial's first bytes (long header, version 1), padded as a client pads it, and a
    // short-header packet: both would draw a response from a QUIC server listening here.
    let mut initial = vec![0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    initial.resize(1200, 0);
    let mut short = vec![0x40];
    short.resize(100, 7);
    for _ in 0..200 {
        sock.send(&initial).unwrap();
        sock.send(&short).unwrap();
    }
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 2048];
    assert!(sock.recv(&mut buf).is_err(), "the server answered");
    let j = json_test(
        "127.0.0.1",
        server.port,
        &["--transport", "udp", "-n", "4M"],
    );
    assert_eq!(j["end"]["sum_received"]["bytes"], 4 << 20);
}

/// The resident memory of process `pid`, bytes (`VmRSS` of /proc/PID/status).
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib << 10
}

/// A flood of QUIC handshakes from the test client's own address (16 sockets, 40,000 Initials
/// of 1,200 bytes and as many short-header packets, about 50 MB) while a test over the UDP
/// transport runs: nothing comes back to any of them (no amplification, no reflection), the
/// server's memory grows by less than 32 MiB, and the running test ends with its bytes. The
/// flows' sockets are connected to the client's own address and port, so the kernel gives them
/// nothing of the flood; the server's port answers only hellos.
#[test]
fn a_flood_of_handshakes_during_a_test_gets_no_answer_and_costs_no_memory() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let running = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "--transport", "udp"])
        .args(["-t", "4", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let before = resident(server.pid());
    let socks: Vec<UdpSocket> = (0..16)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.connect(("127.0.0.1", server.port)).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let mut initial = vec![0xc3, 0, 0, 0, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    initial.resize(1200, 0);
    let mut short = vec![0x40];
    short.resize(100, 7);
    let mut sent = 0u64;
    for i in 0..2_500u32 {
        for (k, s) in socks.iter().enumerate() {
            // A fresh connection id for every Initial, as a flood of new handshakes has.
            initial[6..10].copy_from_slice(&i.to_be_bytes());
            initial[10] = k as u8;
            for packet in [&initial[..], &short[..]] {
                if s.send(packet).is_ok() {
                    sent += packet.len() as u64;
                }
            }
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = resident(server.pid());
    let mut buf = [0u8; 2048];
    let answered: usize = socks
        .iter()
        .map(|s| std::iter::from_fn(|| s.recv(&mut buf).ok()).count())
        .sum();
    let out = running.wait_with_output().unwrap();
    println!(
        "flood of {sent} bytes: {answered} datagrams answered; server memory {} -> {} MiB",
        before >> 20,
        after >> 20
    );
    assert!(sent > 40_000_000, "only {sent} bytes of flood left");
    assert_eq!(answered, 0, "the server answered the flood");
    assert!(
        after < before + (32 << 20),
        "the server grew from {before} to {after} bytes under the flood"
    );
    assert!(
        out.status.success(),
        "the test under the flood: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert!(
        j["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0,
        "{}",
        j["end"]
    );
    // The server keeps serving.
    let next = json_test(
        "127.0.0.1",
        server.port,
        &["--transport", "udp", "-n", "4M"],
    );
    assert_eq!(next["end"]["sum_received"]["bytes"], 4 << 20);
}

/// `longhaul emulate exec --name NAME HOST -- ARGS...`.
fn exec(name: &str, host: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["emulate", "exec", "--name", name, host, "--"])
        .args(args);
    c
}

/// A client whose QUIC handshakes never reach the server (its hellos do: a firewall in the
/// server's namespace drops every UDP datagram of 1,000 bytes or more, as a QUIC Initial is): both
/// ends name the handshake that timed out, the server stays up, and once the firewall is gone the
/// same test runs.
#[test]
fn a_handshake_that_never_arrives_is_named_and_the_server_serves_the_next_test() {
    if !crate::util::program("iptables", "iptables") {
        return;
    }
    let Some(_machine) = crate::util::netns_alone() else {
        return;
    };
    let name = format!("q{}", std::process::id() % 100_000);
    let up = Command::new(bin())
        .args(["emulate", "up", "--name", &name, "--no-server"])
        .args(["--rtt", "10ms", "--rate", "200M"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let _down = DownOnDrop(name.clone());
    let mut server = KillOnDrop(
        exec(
            &name,
            "b",
            &[bin(), "server", "--log", "info", "--handshake-timeout", "3"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let log = read_lines(server.0.stderr.take().unwrap(), None, |_| true);
    let wait_for = |needle: &str| loop {
        let line = log
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the server never logged {needle:?}"));
        if line.contains(needle) {
            return line;
        }
    };
    wait_for("longhaul server listening on");
    let firewall = |op: &str| {
        let ok = exec(
            &name,
            "b",
            &[
                "iptables",
                op,
                "INPUT",
                "-p",
                "udp",
                "-m",
                "length",
                "--length",
                "1000:65535",
                "-j",
                "DROP",
            ],
        )
        .status()
        .unwrap();
        assert!(ok.success(), "iptables {op}");
    };
    firewall("-I");
    let test = || {
        exec(
            &name,
            "a",
            &[
                bin(),
                "test",
                "10.201.0.2",
                "--transport",
                "udp",
                "-n",
                "8M",
                "--connect-timeout",
                "3",
            ],
        )
        .output()
        .unwrap()
    };
    let refused = test();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("QUIC handshake"), "{err}");
    let logged = wait_for("test ended with an error");
    assert!(logged.contains("QUIC handshake from"), "{logged}");
    firewall("-D");
    let served = test();
    assert!(
        served.status.success(),
        "{}",
        String::from_utf8_lossy(&served.stderr)
    );
}

/// A client that stops acknowledging in the middle of a reverse test (a firewall in its namespace
/// drops every UDP datagram it sends; the control connection, TCP, still works): the server's
/// sender, whose stream holds at most three windows, is blocked, not growing. It sees its stop
/// while blocked and waits for the last acknowledgements at most 16 RTT (2 s at least); the
/// client cuts the receivers whose end of stream does not come (1 s + 4 RTT after the stop). The
/// 6 s test ends in 9.4 s measured; before, the server's sender waited for its blocked write and
/// then for every byte, and the client gave up after the drain timeout (21.8 s, "timed out
/// waiting for the server's results"). The server serves the next test once the firewall is gone.
#[test]
fn a_client_that_stops_acknowledging_does_not_hold_the_server() {
    if !crate::util::program("iptables", "iptables") {
        return;
    }
    let Some(_machine) = crate::util::netns_alone() else {
        return;
    };
    let bed = crate::util::Testbed::up(&["--rtt", "20ms", "--rate", "200M"]);
    let (_server, _log) = bed.serve(&[bin(), "server", "--log", "info"]);
    let firewall = |op: &str| {
        let ok = bed
            .exec("a", &["iptables", op, "OUTPUT", "-p", "udp", "-j", "DROP"])
            .status()
            .unwrap();
        assert!(ok.success(), "iptables {op}");
    };
    let test = |seconds: &str| {
        bed.exec(
            "a",
            &[
                bin(),
                "test",
                "10.201.0.2",
                "--transport",
                "udp",
                "-R",
                "-t",
                seconds,
                "--json",
            ],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let started = std::time::Instant::now();
    let silent = test("6");
    std::thread::sleep(Duration::from_secs(3));
    firewall("-I");
    let out = silent.wait_with_output().unwrap();
    let took = started.elapsed();
    firewall("-D");
    let report = String::from_utf8_lossy(&out.stdout);
    println!(
        "{took:?}: {}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < Duration::from_secs(6 + 10),
        "a 6 s test took {took:?}: the server held on to a peer that went silent"
    );
    if out.status.success() {
        // What arrived before the firewall; the sender counts at most what its stream held more.
        let j: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
        let received = j["end"]["sum_received"]["bytes"].as_u64().unwrap();
        assert!(received > 0, "{}", j["end"]);
    } else {
        let j: Value = serde_json::from_slice(&out.stdout).expect("a JSON report with the error");
        assert!(j["error"].as_str().is_some_and(|e| !e.is_empty()), "{j}");
    }
    let next = test("2").wait_with_output().unwrap();
    assert!(
        next.status.success(),
        "the next test: {}",
        String::from_utf8_lossy(&next.stderr)
    );
}
