//! `longhaul test` against `longhaul server` over loopback: directions, streams, IPv6, congestion
//! control, the JSON contract, and concurrency.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::{ServerProc, bin, json_test, longhaul, test_cmd};

/// Every stream's receiver got exactly what its sender sent: nothing lost or double-counted.
fn assert_every_byte_arrived(j: &Value) {
    let streams = j["end"]["streams"].as_array().expect("end.streams");
    assert!(!streams.is_empty());
    for s in streams {
        let sent = s["sender"]["bytes"].as_u64().unwrap();
        assert!(sent > 0, "stream sent nothing: {s}");
    }
    assert_sent_equals_received(streams);
}

/// Each stream's receiver got exactly what its sender sent, and something moved.
fn assert_sent_equals_received(streams: &[Value]) {
    let mut total = 0;
    for s in streams {
        let sent = s["sender"]["bytes"].as_u64().unwrap();
        let got = s["receiver"]["bytes"].as_u64().unwrap();
        assert_eq!(sent, got, "sender and receiver disagree: {s}");
        total += sent;
    }
    assert!(total > 0, "no stream sent anything");
}

/// The keys that iperf3 JSON readers look for.
fn assert_iperf3_keys(j: &Value) {
    for key in ["start", "intervals", "end"] {
        assert!(j.get(key).is_some(), "missing top-level {key}");
    }
    let start = &j["start"];
    for key in [
        "connected",
        "version",
        "system_info",
        "timestamp",
        "connecting_to",
        "cookie",
        "tcp_mss_default",
        "sock_bufsize",
        "sndbuf_actual",
        "rcvbuf_actual",
        "test_start",
    ] {
        assert!(start.get(key).is_some(), "missing start.{key}");
    }
    for key in [
        "protocol",
        "num_streams",
        "blksize",
        "omit",
        "duration",
        "bytes",
        "blocks",
        "reverse",
    ] {
        assert!(
            start["test_start"].get(key).is_some(),
            "missing start.test_start.{key}"
        );
    }
    assert!(start["timestamp"]["timesecs"].as_u64().unwrap() > 1_600_000_000);
    let intervals = j["intervals"].as_array().expect("intervals array");
    assert!(!intervals.is_empty(), "no intervals");
    let iv = &intervals[0];
    for key in [
        "socket",
        "start",
        "end",
        "seconds",
        "bytes",
        "bits_per_second",
        "retransmits",
        "snd_cwnd",
        "rtt",
        "rttvar",
        "pmtu",
        "omitted",
        "sender",
    ] {
        assert!(
            iv["streams"][0].get(key).is_some(),
            "missing intervals[].streams[].{key}"
        );
    }
    for key in [
        "start",
        "end",
        "seconds",
        "bytes",
        "bits_per_second",
        "omitted",
        "sender",
    ] {
        assert!(
            iv["sum"].get(key).is_some(),
            "missing intervals[].sum.{key}"
        );
    }
    let end = &j["end"];
    for key in [
        "streams",
        "sum_sent",
        "sum_received",
        "cpu_utilization_percent",
        "sender_tcp_congestion",
        "receiver_tcp_congestion",
    ] {
        assert!(end.get(key).is_some(), "missing end.{key}");
    }
    for key in ["bytes", "bits_per_second", "retransmits", "seconds"] {
        assert!(
            end["sum_sent"].get(key).is_some(),
            "missing end.sum_sent.{key}"
        );
    }
    for key in [
        "socket",
        "bytes",
        "bits_per_second",
        "retransmits",
        "max_snd_cwnd",
        "max_rtt",
        "min_rtt",
        "mean_rtt",
    ] {
        assert!(
            end["streams"][0]["sender"].get(key).is_some(),
            "missing end.streams[].sender.{key}"
        );
    }
    for key in [
        "host_total",
        "host_user",
        "host_system",
        "remote_total",
        "remote_user",
        "remote_system",
    ] {
        assert!(
            end["cpu_utilization_percent"].get(key).is_some(),
            "missing cpu {key}"
        );
    }
    assert!(end["sum_received"]["bits_per_second"].as_f64().unwrap() > 0.0);
}

#[test]
fn one_stream_forward_json_is_iperf3_shaped() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-t", "1"]);
    assert_iperf3_keys(&j);
    assert_every_byte_arrived(&j);
    assert_eq!(j["start"]["test_start"]["num_streams"], 1);
    assert_eq!(j["start"]["test_start"]["reverse"], 0);
    // The client sent, so interval figures are the client's sender view with TCP internals.
    assert_eq!(j["intervals"][0]["streams"][0]["sender"], true);
    assert!(j["intervals"][0]["streams"][0]["rtt"].as_u64().unwrap() > 0);
    // Window sizing is reported on both ends.
    assert!(
        !j["start"]["longhaul"]["local_buffers"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        !j["start"]["longhaul"]["remote_buffers"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(j["start"]["longhaul"]["rtt_ms"].as_f64().unwrap() > 0.0);
}

#[test]
fn four_streams_sum_to_the_total() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-t", "1", "-P", "4"]);
    assert_every_byte_arrived(&j);
    let streams = j["end"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 4);
    let total: u64 = streams
        .iter()
        .map(|s| s["receiver"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(total, j["end"]["sum_received"]["bytes"].as_u64().unwrap());
    assert_eq!(j["intervals"][0]["streams"].as_array().unwrap().len(), 4);
}

#[test]
fn reverse_runs_server_to_client() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-t", "1", "-R"]);
    assert_every_byte_arrived(&j);
    assert_eq!(j["start"]["test_start"]["reverse"], 1);
    // The server sends, so the client's sockets are receivers and the server's are senders.
    assert_eq!(j["start"]["longhaul"]["local_sockets"][0]["sender"], false);
    assert_eq!(j["start"]["longhaul"]["remote_sockets"][0]["sender"], true);
    // Intervals carry the server's sender-side view (TCP internals included).
    let iv = &j["intervals"][0]["streams"][0];
    assert_eq!(iv["sender"], true);
    assert!(iv["bytes"].as_u64().unwrap() > 0);
}

#[test]
fn bidir_reports_both_directions() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-t", "1", "--bidir"]);
    assert_every_byte_arrived(&j);
    let end = &j["end"];
    assert_eq!(end["streams"].as_array().unwrap().len(), 2);
    assert!(end["sum_received"]["bytes"].as_u64().unwrap() > 0);
    assert!(end["sum_received_bidir_reverse"]["bytes"].as_u64().unwrap() > 0);
    assert!(j["intervals"][0]["sum_bidir_reverse"].is_object());
}

/// The most streams a default server allows, both ways: 256 data connections, whose set-up, interval
/// and results messages outgrow the 64 KiB a control frame may have during the handshake (they were
/// refused at the end of the test, "control frame of 77568 bytes exceeds the 64 KiB limit").
#[test]
fn bidir_with_the_most_streams_a_default_server_allows_reports_them_all() {
    let srv = ServerProc::start(&[]);
    let j = json_test(
        "127.0.0.1",
        srv.port,
        &["-t", "1", "--bidir", "-P", "128", "-l", "128K"],
    );
    // 256 sending threads on two cores beside other tests: the scheduler may not run one of them
    // within the test's second (seen twice in CI: one stream with 0 bytes, its socket idle since
    // the preamble). What this test is about is that every stream is reported, consistently.
    assert_sent_equals_received(j["end"]["streams"].as_array().unwrap());
    assert_eq!(j["end"]["streams"].as_array().unwrap().len(), 256);
    assert_eq!(
        j["start"]["longhaul"]["remote_sockets"]
            .as_array()
            .unwrap()
            .len(),
        256
    );
}

#[test]
fn ipv6_loopback_works() {
    let srv = ServerProc::start(&[]);
    let j = json_test("::1", srv.port, &["-t", "1", "-6"]);
    assert_every_byte_arrived(&j);
    assert_eq!(j["start"]["connected"][0]["remote_host"], "::1");
}

#[test]
fn congestion_control_is_applied_on_both_ends_and_reported() {
    let srv = ServerProc::start(&[]);
    for cc in ["cubic", "reno"] {
        let j = json_test("127.0.0.1", srv.port, &["-t", "1", "-C", cc]);
        assert_eq!(j["end"]["sender_tcp_congestion"], cc);
        assert_eq!(j["end"]["receiver_tcp_congestion"], cc);
        // Read back from the kernel on each socket, on each side.
        assert_eq!(j["start"]["longhaul"]["local_sockets"][0]["congestion"], cc);
        assert_eq!(
            j["start"]["longhaul"]["remote_sockets"][0]["congestion"],
            cc
        );
        assert_eq!(j["end"]["streams"][0]["sender"]["congestion"], cc);
    }
}

#[test]
fn unknown_congestion_control_is_a_clear_error() {
    let srv = ServerProc::start(&[]);
    let out = test_cmd("127.0.0.1", srv.port, &["-t", "1", "-C", "nosuchcc"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("congestion control \"nosuchcc\" is not available"),
        "{err}"
    );
    assert!(
        err.contains("cubic"),
        "should list what the kernel offers: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn byte_count_mode_sends_exactly_that_much() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-n", "300M", "-P", "3"]);
    assert_every_byte_arrived(&j);
    assert_eq!(
        j["end"]["sum_received"]["bytes"].as_u64().unwrap(),
        300 << 20
    );
}

#[test]
fn pacing_total_is_split_across_streams() {
    let srv = ServerProc::start(&[]);
    let j = json_test(
        "127.0.0.1",
        srv.port,
        &["-t", "1", "-P", "2", "--pace", "800M"],
    );
    // 800 Mbit/s total = 100 MB/s, 50 MB/s per stream, set as SO_MAX_PACING_RATE on each socket.
    for s in j["start"]["longhaul"]["local_sockets"].as_array().unwrap() {
        assert_eq!(s["pacing"], 50_000_000);
    }
    // A cap: the run cannot exceed it by much (first-RTT bursts aside).
    let rate = j["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap();
    assert!(rate < 800e6 * 1.25, "paced run too fast: {rate}");
}

/// A slowly paced test ends at its `-t` (regression: `-t 2 --pace 2M` queued a megabyte per
/// stream, four seconds of data at that pace, ran for 17 s and failed waiting for the server's
/// results). The sender may queue at most 100 ms of its data, and the windows are sized for the
/// paced rate, not for `--rate`.
#[test]
fn a_slowly_paced_test_ends_at_its_time() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-t", "2", "--pace", "2M"]);
    let end = &j["end"]["sum_received"];
    let seconds = end["seconds"].as_f64().unwrap();
    assert!(seconds < 3.0, "ran {seconds} s for -t 2: {end}");
    // Loopback's MSS is 64 KiB, so the initial window (10 segments) goes out at once before the
    // pacing takes hold: about 0.3 MB more than 2 s at 2 Mbit/s.
    let rate = end["bits_per_second"].as_f64().unwrap();
    assert!(rate < 2e6 * 2.0, "{rate}");
    for s in j["start"]["longhaul"]["local_sockets"].as_array().unwrap() {
        assert_eq!(s["pacing"], 250_000);
    }
}

#[test]
fn json_stream_emits_one_event_per_line() {
    let srv = ServerProc::start(&[]);
    let out = test_cmd(
        "127.0.0.1",
        srv.port,
        &["-t", "1.5", "-i", "0.5", "--json-stream"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(events.first().unwrap()["event"], "start");
    assert_eq!(events.last().unwrap()["event"], "end");
    let intervals = events.iter().filter(|e| e["event"] == "interval").count();
    assert!(
        intervals >= 3,
        "expected ≥ 3 intervals of 0.5 s in 1.5 s, got {intervals}"
    );
    assert!(
        events.last().unwrap()["data"]["sum_received"]["bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn distance_adds_the_land_speed_record_metric() {
    let srv = ServerProc::start(&[]);
    let j = json_test(
        "127.0.0.1",
        srv.port,
        &["-t", "1", "--distance-km", "11539"],
    );
    let lsr = &j["end"]["longhaul"]["lsr"];
    let bps = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    let metric = lsr["bit_meters_per_second"].as_f64().unwrap();
    assert!((metric - bps * 11_539_000.0).abs() / metric < 1e-9);
    assert!(lsr["display"].as_str().unwrap().contains("Tbit·m/s"));
}

#[test]
fn two_clients_are_served_at_the_same_time() {
    let mut srv = ServerProc::start(&[]);
    let port = srv.port.to_string();
    let spawn = || {
        Command::new(bin())
            .args(["test", "127.0.0.1", "-p", &port, "-t", "2", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_every_byte_arrived(&j);
    }
    // Both ran concurrently: the server logged two starts before either finish.
    let log = srv.log();
    let starts: Vec<usize> = log.match_indices("test started").map(|(i, _)| i).collect();
    let first_finish = log.find("test finished").expect("finished logged");
    assert_eq!(starts.len(), 2, "{log}");
    assert!(starts[1] < first_finish, "tests did not overlap:\n{log}");
}

#[test]
fn a_full_server_says_busy_with_the_count() {
    let mut srv = ServerProc::start(&["--max-tests", "1"]);
    let port = srv.port.to_string();
    let long = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    srv.wait_for("test started");
    let out = test_cmd("127.0.0.1", srv.port, &["-t", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("busy, 1 tests running"), "{err}");
    assert!(long.wait_with_output().unwrap().status.success());
}

#[test]
fn refused_connection_is_a_one_line_error() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = test_cmd("127.0.0.1", port, &["-t", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot connect to 127.0.0.1"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn invalid_flags_exit_2_with_a_reason() {
    for (args, needle) in [
        (&["test", "-P", "0"][..], "parallel"),
        (&["test", "-l", "12Q"][..], "12Q"),
        (&["test", "-w", "huge"][..], "auto"),
        (&["test", "-t", "-5"][..], "-5"),
        (&["test", "-R", "--bidir"][..], "cannot be used with"),
    ] {
        let out = longhaul(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn self_test_without_a_host_runs_on_loopback() {
    let _machine = crate::util::machine_shared();
    let out = longhaul(&["test", "-t", "1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_every_byte_arrived(&j);
    assert_eq!(j["start"]["connecting_to"]["host"], "127.0.0.1");
}

/// Sums `pick` over the intervals that are (or are not) omitted.
fn interval_sum(j: &Value, omitted: bool, pick: impl Fn(&Value) -> u64) -> u64 {
    j["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|iv| iv["sum"]["omitted"].as_bool().unwrap() == omitted)
        .map(pick)
        .sum()
}

/// The omit period's contract on one report: omitted intervals first and flagged on every entry, times
/// restarting at 0 after them, and `end` covering exactly the measured part on the sending side.
fn assert_omit_accounting(j: &Value) {
    let intervals = j["intervals"].as_array().unwrap();
    let flags: Vec<bool> = intervals
        .iter()
        .map(|iv| iv["sum"]["omitted"].as_bool().unwrap())
        .collect();
    let omitted = flags.iter().filter(|&&f| f).count();
    assert!(omitted >= 1, "no omitted interval: {flags:?}");
    assert!(
        flags[..omitted].iter().all(|&f| f),
        "omitted intervals must come first: {flags:?}"
    );
    assert!(omitted < flags.len(), "no measured interval: {flags:?}");
    for iv in intervals {
        for s in iv["streams"].as_array().unwrap() {
            assert_eq!(s["omitted"], iv["sum"]["omitted"], "{iv}");
        }
    }
    // -i 1 -O 1: one omitted interval, 0-1 s; measured times restart at 0, as in iperf3.
    assert_eq!(omitted, 1, "{flags:?}");
    assert_eq!(intervals[0]["sum"]["start"].as_f64().unwrap(), 0.0);
    assert_eq!(intervals[0]["sum"]["end"].as_f64().unwrap(), 1.0);
    assert_eq!(intervals[1]["sum"]["start"].as_f64().unwrap(), 0.0);

    // Exact on the sending side: the boundary reading closes the last omitted interval and is the
    // baseline of the totals, and the last interval is read after the senders finished.
    let end = &j["end"];
    let measured = interval_sum(j, false, |iv| iv["sum"]["bytes"].as_u64().unwrap());
    assert_eq!(end["sum_sent"]["bytes"].as_u64().unwrap(), measured);
    let streams = end["streams"].as_array().unwrap();
    let omitted_sent: u64 = streams
        .iter()
        .map(|s| s["sender"]["omitted_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(
        omitted_sent,
        interval_sum(j, true, |iv| iv["sum"]["bytes"].as_u64().unwrap())
    );
    for s in streams {
        let (tx, rx) = (&s["sender"], &s["receiver"]);
        let all = |e: &Value| e["bytes"].as_u64().unwrap() + e["omitted_bytes"].as_u64().unwrap();
        // Nothing lost or counted twice across the boundary.
        assert_eq!(all(tx), all(rx), "{s}");
        assert!(rx["omitted_bytes"].as_u64().unwrap() > 0, "{s}");
        // Not exact: the receiver reads its counter at its own boundary, a few ms of data apart
        // from the sender's (the server's clock starts half an RTT later; bytes in flight).
        let (sent, got) = (tx["bytes"].as_f64().unwrap(), rx["bytes"].as_f64().unwrap());
        assert!((sent - got).abs() < 0.1 * sent, "{s}");
    }
    // Retransmits after the boundary: the intervals' plus any from the drain after the last reading.
    let retrans = interval_sum(j, false, |iv| iv["sum"]["retransmits"].as_u64().unwrap());
    assert!(end["sum_sent"]["retransmits"].as_u64().unwrap() >= retrans);
    // Loose sanity: the measured seconds are about -t, not -O + -t.
    let secs = end["sum_sent"]["seconds"].as_f64().unwrap();
    assert!(secs > 1.0 && secs < 2.9, "sum_sent.seconds {secs}");
}

#[test]
fn omit_period_is_reported_but_left_out_of_the_totals() {
    let srv = ServerProc::start(&[]);
    let t0 = std::time::Instant::now();
    let j = json_test("127.0.0.1", srv.port, &["-t", "2", "-O", "1", "-P", "2"]);
    // The test runs -O + -t.
    assert!(t0.elapsed().as_secs_f64() >= 3.0, "{:?}", t0.elapsed());
    assert_iperf3_keys(&j);
    assert_eq!(j["start"]["test_start"]["omit"], 1);
    assert_eq!(j["start"]["test_start"]["duration"], 2);
    assert_omit_accounting(&j);
}

#[test]
fn omit_period_with_the_server_sending() {
    let srv = ServerProc::start(&[]);
    // The server reads the boundary of its senders and its own interval samples are flagged.
    let j = json_test("127.0.0.1", srv.port, &["-t", "2", "-O", "1", "-R"]);
    assert_eq!(j["intervals"][0]["streams"][0]["sender"], true);
    assert_omit_accounting(&j);
}

#[test]
fn omit_period_without_interval_reports_still_rebases_the_totals() {
    let srv = ServerProc::start(&[]);
    let j = json_test("127.0.0.1", srv.port, &["-t", "1", "-O", "1", "-i", "0"]);
    assert!(j["intervals"].as_array().unwrap().is_empty());
    let s = &j["end"]["streams"][0];
    for side in ["sender", "receiver"] {
        assert!(s[side]["omitted_bytes"].as_u64().unwrap() > 0, "{s}");
        assert!(s[side]["bytes"].as_u64().unwrap() > 0, "{s}");
    }
    let all = |e: &Value| e["bytes"].as_u64().unwrap() + e["omitted_bytes"].as_u64().unwrap();
    assert_eq!(all(&s["sender"]), all(&s["receiver"]), "{s}");
}

#[test]
fn omitted_intervals_are_marked_in_the_text_report() {
    let srv = ServerProc::start(&[]);
    let out = test_cmd("127.0.0.1", srv.port, &["-t", "1", "-O", "1", "-P", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.contains(" sec "))
        .expect("interval lines");
    // The first interval (both streams and their sum) is in the omit period, the summary is not.
    for l in &lines[first..first + 3] {
        assert!(l.ends_with("(omitted)"), "{l:?}\n{text}");
    }
    let marked = lines.iter().filter(|l| l.contains("(omitted)")).count();
    assert_eq!(marked, 3, "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("sender") && !l.contains("(omitted)")),
        "{text}"
    );
}

#[test]
fn bad_omit_values_exit_2_with_one_error_line() {
    for (args, needle) in [
        (
            &["test", "--omit=-1"][..],
            "negative values are not allowed",
        ),
        (&["test", "-O", "-1"][..], "'-1'"),
        (
            &["test", "-O", "601"][..],
            "omit period must be at most 600 s",
        ),
        (
            &["test", "-O", "1e9"][..],
            "omit period must be at most 600 s",
        ),
        (&["test", "-O", "soon"][..], "soon"),
        (&["test", "-O", "1", "-n", "1M"][..], "cannot be used with"),
    ] {
        let out = longhaul(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: {err}");
        assert!(errors[0].contains(needle), "{args:?}: {err}");
    }
}
