//! iperf3's protocol both ways, against Debian's iperf3 (3.12): `longhaul test` against `iperf3 -s`
//! (TCP and UDP, -P 4, -R, --bidir; chosen by flag or found by itself) agrees with the iperf3
//! server's own JSON; stock `iperf3 -c` clients against `longhaul server` (the same cases, three at
//! once) complete with their JSON; a hostile iperf3 client (an absurd frame length, bad JSON, too
//! many streams) is refused alone while the server keeps serving.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use longhaul_testkit::fixtures::free_port;
use serde_json::Value;

use crate::util::{ServerProc, bin, machine_alone, program};

/// `iperf3 -s` on `port`, for one test (`-1`) with its JSON at the end, or for many.
pub(crate) fn iperf3_server(port: u16, one: bool) -> Child {
    let mut c = Command::new("iperf3");
    c.args(["-s", "-p", &port.to_string()]);
    if one {
        c.args(["-1", "-J"]);
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start iperf3 -s");
    // Until it listens (a connection to see would be the one test of `-1`).
    for _ in 0..250 {
        if listening(port) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Whether a TCP socket listens on `port` (from /proc/net/tcp and tcp6).
fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&needle) && cols[3] == "0A"
            })
    })
}

fn json_of(out: &std::process::Output, what: &str) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or_else(|| panic!("{path:?} in {v}"))
}

fn within(a: f64, b: f64, frac: f64) -> bool {
    (a - b).abs() <= frac * a.max(b)
}

const CASES: [&[&str]; 5] = [
    &[],
    &["-P", "4"],
    &["-R"],
    &["--bidir"],
    &["-u", "-b", "200M", "-l", "1400"],
];

#[test]
fn longhaul_test_against_a_stock_iperf3_server_agrees_with_its_json() {
    if !program("iperf3", "iperf3") {
        return;
    }
    let _alone = machine_alone();
    for case in CASES {
        let port = free_port();
        let srv = iperf3_server(port, true);
        // Found by the port (5201) or, as here, with --iperf3.
        let out = Command::new(bin())
            .args([
                "test",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "--iperf3",
                "-t",
                "2",
            ])
            .args(case)
            .arg("--json")
            .output()
            .unwrap();
        let ours = json_of(&out, "longhaul test");
        assert!(out.status.success(), "{case:?}: {ours}");
        let theirs = json_of(&srv.wait_with_output().unwrap(), "iperf3 -s -1 -J");
        assert_eq!(ours["start"]["longhaul"]["server_protocol"], "iperf3");
        assert!(
            theirs.get("error").is_none(),
            "{case:?}: iperf3 says {theirs}"
        );
        // The same bytes in both tools' reports: what the iperf3 server sent or received (its
        // JSON gives only its own side; the other sum is 0 there).
        let mut compared = 0;
        for key in [
            "sum_sent",
            "sum_received",
            "sum_sent_bidir_reverse",
            "sum_received_bidir_reverse",
        ] {
            let Some(b) = theirs["end"][key]["bytes"].as_f64().filter(|b| *b > 0.0) else {
                continue;
            };
            let a = f(&ours, &["end", key, "bytes"]);
            println!("{case:?} {key}: longhaul {a}, iperf3 {b}");
            assert!(within(a, b, 0.02), "{case:?} {key}: {a} vs {b}");
            let ra = f(&ours, &["end", key, "bits_per_second"]);
            let rb = f(&theirs, &["end", key, "bits_per_second"]);
            assert!(within(ra, rb, 0.05), "{case:?} {key} rate: {ra} vs {rb}");
            compared += 1;
        }
        assert!(compared >= 1, "{case:?}: nothing to compare in {theirs}");
        if case.contains(&"-u") {
            let lost = f(&theirs, &["end", "sum", "lost_packets"]);
            assert_eq!(f(&ours, &["end", "sum", "lost_packets"]), lost, "{case:?}");
            assert_eq!(
                f(&ours, &["end", "sum", "packets"]),
                f(&theirs, &["end", "sum", "packets"]),
                "{case:?}: the datagrams iperf3 counted"
            );
        }
    }
    // Without the flag, on a port that is not 5201: the server answers as iperf3 does.
    let port = free_port();
    let mut srv = iperf3_server(port, false);
    let out = Command::new(bin())
        .args([
            "test",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    let _ = srv.kill();
    let _ = srv.wait();
    let ours = json_of(&out, "longhaul test, found iperf3 by itself");
    assert!(out.status.success(), "{ours}");
    assert_eq!(ours["start"]["longhaul"]["server_protocol"], "iperf3");
    assert!(f(&ours, &["end", "sum_received", "bytes"]) > 0.0);
}

fn iperf3_client(port: u16, args: &[&str]) -> Value {
    let out = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "2", "-J"])
        .args(args)
        .output()
        .expect("run iperf3 -c");
    let j = json_of(&out, "iperf3 -c");
    assert!(j.get("error").is_none(), "iperf3 {args:?}: {j}");
    j
}

#[test]
fn stock_iperf3_clients_are_served_and_their_json_is_complete() {
    if !program("iperf3", "iperf3") {
        return;
    }
    let mut srv = ServerProc::start(&["--iperf3-port", "0"]);
    let port = srv.iperf3_port.expect("the iperf3 port");
    for case in CASES {
        let j = iperf3_client(port, case);
        let sent = f(&j, &["end", "sum_sent", "bytes"]);
        let got = f(&j, &["end", "sum_received", "bytes"]);
        println!("iperf3 {case:?}: sent {sent}, the other end received {got}");
        assert!(sent > 0.0 && got > 0.0, "{case:?}: {j}");
        // This server closes its streams at the client's end, as iperf3's does: what was still on
        // its way is not counted.
        assert!(
            within(sent, got, 0.03),
            "{case:?}: sent {sent}, received {got}"
        );
        if case.contains(&"-u") {
            assert_eq!(f(&j, &["end", "sum", "lost_packets"]), 0.0, "{j}");
            assert!(f(&j, &["end", "sum", "packets"]) > 30_000.0, "{j}");
        }
        // The server's CPU comes back in the results exchange.
        assert!(f(&j, &["end", "cpu_utilization_percent", "remote_total"]) > 0.0);
    }
    // Three stock clients at once (a stock iperf3 server would turn two away).
    let clients: Vec<_> = (0..3)
        .map(|_| std::thread::spawn(move || iperf3_client(port, &["-t", "3"])))
        .collect();
    for c in clients {
        let j = c.join().unwrap();
        assert!(f(&j, &["end", "sum_received", "bytes"]) > 0.0);
    }
    srv.wait_for("iperf3 test finished");
}

#[test]
fn hostile_iperf3_clients_are_refused_alone() {
    if !program("iperf3", "iperf3") {
        return;
    }
    let srv = ServerProc::start(&["--iperf3-port", "0", "--max-streams", "8"]);
    let port = srv.iperf3_port.expect("the iperf3 port");
    let raw = |after_cookie: &[u8]| -> Vec<u8> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s.write_all(&[b'a'; 36]).unwrap();
        s.write_all(&[0]).unwrap();
        s.write_all(after_cookie).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        got
    };
    // A frame of 4 GiB announced: refused before anything is allocated; the connection closes.
    assert_eq!(
        raw(&[0xff, 0xff, 0xff, 0xff]),
        vec![9],
        "PARAM_EXCHANGE, then closed"
    );
    // Not JSON: SERVER_ERROR with iperf3's "protocol does not exist" code.
    let mut bad = 5u32.to_be_bytes().to_vec();
    bad.extend_from_slice(b"{nope");
    let got = raw(&bad);
    assert_eq!(got[..2], [9, 0xfe], "{got:?}");
    assert_eq!(u32::from_be_bytes(got[2..6].try_into().unwrap()), 131);
    // Too many streams for this server: iperf3 prints its own text for the code.
    let out = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "1",
            "-P",
            "9",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("number of parallel streams too large"),
        "{text}"
    );
    // And the server still serves.
    let j = iperf3_client(port, &["-t", "1"]);
    assert!(f(&j, &["end", "sum_received", "bytes"]) > 0.0);
}

/// What `longhaul test` (stderr) and stock `iperf3 -c` (its text) say when refused.
fn refusals(srv: &ServerProc, ours: &[&str], theirs: &[&str]) -> (String, String) {
    let out = crate::util::test_cmd("127.0.0.1", srv.port, ours);
    assert!(!out.status.success(), "longhaul test {ours:?} was served");
    let port = srv.iperf3_port.expect("the iperf3 port").to_string();
    let stock = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &port])
        .args(theirs)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&stock.stdout).to_string()
        + &String::from_utf8_lossy(&stock.stderr);
    assert!(
        !stock.status.success(),
        "iperf3 {theirs:?} was served: {text}"
    );
    (String::from_utf8_lossy(&out.stderr).into_owned(), text)
}

/// The server's limits hold for both protocols, each refusal naming its limit (iperf3 clients get
/// the error code their own text explains).
#[test]
fn server_limits_refuse_both_protocols_with_the_reason() {
    if !program("iperf3", "iperf3") {
        return;
    }
    let srv = ServerProc::start(&["--iperf3-port", "0", "--no-udp"]);
    let (ours, theirs) = refusals(&srv, &["-u", "-t", "1"], &["-u", "-t", "1"]);
    assert!(ours.contains("--no-udp"), "{ours}");
    assert!(theirs.contains("protocol does not exist"), "{theirs}");
    drop(srv);

    let srv = ServerProc::start(&["--iperf3-port", "0", "--max-rate", "200M"]);
    let (ours, theirs) = refusals(
        &srv,
        &["-u", "-b", "300M", "-t", "1"],
        &["-u", "-b", "300M"],
    );
    assert!(ours.contains("--max-rate"), "{ours}");
    assert!(theirs.contains("larger than server limit"), "{theirs}");
    // An unpaced TCP test over loopback moves far more than 200 Mbit/s: ended once measured.
    let (ours, theirs) = refusals(&srv, &["-t", "5"], &["-t", "5"]);
    assert!(ours.contains("--max-rate"), "{ours}");
    assert!(theirs.contains("larger than server limit"), "{theirs}");
    // Within the limit, both are served.
    let j = crate::util::json_test("127.0.0.1", srv.port, &["-u", "-b", "100M", "-t", "1"]);
    assert!(f(&j, &["end", "sum_received", "bytes"]) > 0.0);
    let port = srv.iperf3_port.unwrap();
    let j = iperf3_client(port, &["-u", "-b", "100M", "-t", "1"]);
    assert!(f(&j, &["end", "sum_received", "bytes"]) > 0.0);
    drop(srv);

    let srv = ServerProc::start(&["--iperf3-port", "0", "--allow-from", "10.0.0.0/8,::1"]);
    let (ours, theirs) = refusals(&srv, &["-t", "1"], &["-t", "1"]);
    assert!(
        ours.contains("127.0.0.1") && ours.contains("--allow-from"),
        "{ours}"
    );
    assert!(theirs.contains("test authorization failed"), "{theirs}");
    drop(srv);

    // A server that requires its key for tests: iperf3 clients cannot prove one.
    let key = std::env::temp_dir().join(format!("lh-iperf3-key-{}", std::process::id()));
    let _ = std::fs::remove_file(&key);
    let made = crate::util::longhaul(&["keygen", key.to_str().unwrap()]);
    assert!(made.status.success(), "{made:?}");
    let key_arg = key.to_str().unwrap();
    let srv = ServerProc::start(&["--iperf3-port", "0", "--key", key_arg, "--require-key"]);
    let (ours, theirs) = refusals(&srv, &["-t", "1"], &["-t", "1"]);
    assert!(ours.contains("--key FILE"), "{ours}");
    assert!(theirs.contains("test authorization failed"), "{theirs}");
    let j = crate::util::json_test("127.0.0.1", srv.port, &["-t", "1", "--key", key_arg]);
    assert!(f(&j, &["end", "sum_received", "bytes"]) > 0.0);
    let _ = std::fs::remove_file(&key);
}

/// A lying or silent "iperf3 server" (a raw socket here): `longhaul test --iperf3` ends with a clear
/// error naming what went wrong, within its set-up timeout, never hangs or panics.
#[test]
fn a_lying_or_silent_iperf3_server_is_a_clear_client_error() {
    // What the fake server does once it has read the client's cookie.
    let cases: [(&[u8], &str); 3] = [
        // An unknown state byte.
        (&[7], "unknown iperf3 state 7"),
        // A refusal with the code for "too many streams" (and errno 0).
        (
            &[0xfe, 0, 0, 0, 6, 0, 0, 0, 0],
            "number of parallel streams too large",
        ),
        // Nothing at all: the client gives up at its set-up timeout.
        (&[], "timed out waiting for the iperf3 server's welcome"),
    ];
    for (answer, needle) in cases {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let fake = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut cookie = [0u8; 37];
            s.read_exact(&mut cookie).unwrap();
            s.write_all(answer).unwrap();
            // Hold the connection open until the client gives up.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        let started = std::time::Instant::now();
        let out = Command::new(bin())
            .args(["test", "127.0.0.1", "-p", &port.to_string(), "--iperf3"])
            .args(["-t", "1", "--connect-timeout", "2"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{needle}: {err}");
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{needle}: took too long"
        );
        fake.join().unwrap();
    }
}

/// Ctrl-C (SIGINT) 2 s into a 10-s test against a stock iperf3 server: the client ends the test as
/// a byte count ends (the server takes the early end), and both ends give JSON of the ~2 s that
/// ran: the client's marked interrupted (status 130), the server's its usual `-J` document.
#[test]
fn sigint_against_a_stock_iperf3_server_keeps_both_ends_results() {
    if !program("iperf3", "iperf3") {
        return;
    }
    let _alone = machine_alone();
    let port = free_port();
    let srv = iperf3_server(port, true);
    let child = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port.to_string(), "--iperf3"])
        .args(["-t", "10", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start longhaul test");
    std::thread::sleep(Duration::from_secs(2));
    crate::util::sigint(&child);
    let out = child.wait_with_output().expect("longhaul test ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let ours: Value = serde_json::from_slice(&out.stdout).expect("the client's JSON");
    assert_eq!(ours["end"]["longhaul"]["interrupted"], true, "{ours}");
    let theirs: Value =
        serde_json::from_slice(&srv.wait_with_output().expect("iperf3 -s -1 ends").stdout)
            .expect("the server's JSON");
    for (who, v) in [("client", &ours), ("server", &theirs)] {
        let secs = v["end"]["sum_received"]["seconds"].as_f64().unwrap_or(0.0);
        assert!((1.5..4.0).contains(&secs), "{who}: {secs} s: {v}");
    }
}
