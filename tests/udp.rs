//! `longhaul test -u` end to end: over loopback against a `longhaul server` process (iperf3's UDP
//! keys, every datagram accounted for, -R, --bidir and -P), through the emulator (configured random
//! loss measured within 3σ, the tail included; the path's jitter and reordering in the figures), and
//! against a hostile peer (a stream hello from another host than the test's client, or garbage on
//! the server's UDP port, gets no answer, and the server keeps serving).

use std::net::UdpSocket;
use std::time::Duration;

use longhaul_proto::msg::UdpParams;
use longhaul_proto::wire::{Preamble, encode_frame};
use longhaul_proto::{Message, TestParams};
use serde_json::Value;

use crate::emulate::emulate_checked;
use crate::server_faults::{connect, hello, params, read_message};
use crate::util::{ServerProc, bin, json_test, machine_alone, netns_privileges};

/// Every key iperf3 3.12 writes for a UDP stream at the end (`end.streams[].udp`); all but the first
/// in `end.sum`.
const IPERF3_UDP_KEYS: [&str; 11] = [
    "socket",
    "start",
    "end",
    "seconds",
    "bytes",
    "bits_per_second",
    "jitter_ms",
    "lost_packets",
    "packets",
    "lost_percent",
    "sender",
];

fn u64_at(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("{path:?} in {v}"))
}

#[test]
fn a_udp_test_over_loopback_accounts_for_every_datagram_in_iperf3_keys() {
    let srv = ServerProc::start(&[]);
    for dir in [&[][..], &["-R"], &["--bidir"]] {
        let mut args = vec!["-u", "-b", "40M", "-l", "1400", "-P", "2", "-t", "2"];
        args.extend_from_slice(dir);
        let j = json_test("127.0.0.1", srv.port, &args);
        assert_eq!(j["start"]["test_start"]["protocol"], "UDP");
        assert_eq!(j["start"]["test_start"]["blksize"], 1400);
        assert_eq!(j["start"]["test_start"]["target_bitrate"], 40_000_000);
        let streams = j["end"]["streams"].as_array().unwrap();
        assert_eq!(
            streams.len(),
            if dir == ["--bidir"] { 4 } else { 2 },
            "{dir:?}"
        );
        for s in streams {
            let u = &s["udp"];
            for k in IPERF3_UDP_KEYS.iter().chain(&["out_of_order"]) {
                assert!(u.get(k).is_some(), "end.streams[].udp lacks {k}: {u}");
            }
            let sent = u64_at(u, &["packets"]);
            // 40 Mbit/s of 1400-byte datagrams for 2 s: 7,143.
            assert!((6_800..=7_400).contains(&sent), "{dir:?}: {sent} sent: {u}");
            assert_eq!(u64_at(u, &["bytes"]), sent * 1400);
            // Loopback loses nothing at this rate, and the receiver saw the sender's end.
            assert_eq!(u64_at(u, &["lost_packets"]), 0, "{u}");
            assert_eq!(u64_at(u, &["received_packets"]), sent, "{u}");
            assert_eq!(u64_at(s, &["receiver", "bytes"]), sent * 1400, "{s}");
            assert_eq!(u["end_marker_seen"], true, "{u}");
            assert_eq!(u["target_bits_per_second"], 40_000_000);
            let rate = u["bits_per_second"].as_f64().unwrap();
            assert!(
                (0.95 * 40e6..=1.02 * 40e6).contains(&rate),
                "sent at {rate}"
            );
            // The one-way delay says whether it means anything.
            assert!(u["one_way_delay"]["synchronized"].is_boolean(), "{u}");
        }
        let sum = &j["end"]["sum"];
        for k in &IPERF3_UDP_KEYS[1..] {
            assert!(sum.get(k).is_some(), "end.sum lacks {k}: {sum}");
        }
        // Each interval shows the sender's datagrams with the receiver's account of them.
        let first = &j["intervals"][0]["streams"][0];
        assert!(first["packets"].as_u64().unwrap() > 3_000, "{first}");
        assert!(first.get("jitter_ms").is_some() && first.get("lost_packets").is_some());
    }
}

#[test]
fn flags_that_mean_tcp_are_refused_with_udp() {
    let srv = ServerProc::start(&[]);
    for (args, needle) in [
        (&["-u", "-C", "cubic"][..], "TCP tests only"),
        (&["-u", "-Z"], "TCP tests only"),
        (&["-u", "--pace", "1G"], "paced by -b"),
        (&["-u", "-l", "8"], "12..=65507"),
        (&["-u", "-b", "1G/0"], "burst must be"),
        (&["-b", "1G", "--pace", "2G"], "give one"),
    ] {
        let out = crate::util::test_cmd("127.0.0.1", srv.port, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// 1 % random loss on the forward path, 50 Mbit/s of 1400-byte datagrams for 4 s (about 17,900):
/// the loss `test -u` measures, the datagrams lost after the last one received included, is within
/// 3σ of 1 %. With 2 ms of jitter that may reorder, and 2 % of segments duplicated, the receiver sees
/// jitter, reordering and duplicates.
#[test]
fn emulated_loss_jitter_and_reordering_show_in_the_figures() {
    if !netns_privileges() {
        return;
    }
    let _alone = machine_alone();
    let test = |extra: &[&str]| {
        let mut args = vec!["--rtt", "20ms", "--rate", "500M", "--seed", "11", "--json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[
            "--",
            bin(),
            "test",
            "10.201.0.2",
            "-u",
            "-b",
            "50M",
            "-l",
            "1400",
            "-t",
            "4",
            "--json",
        ]);
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, check: &dyn Fn(&Value) -> Result<(), String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        emulate_checked(&args, |out| {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
            let j: Value = serde_json::from_slice(&out.stdout).expect("test --json on stdout");
            check(&j)
        })
    };
    run(test(&["--loss", "1%"]), &|j| {
        let u = &j["end"]["streams"][0]["udp"];
        let sent = u64_at(u, &["packets"]) as f64;
        let lost = u64_at(u, &["lost_packets"]) as f64;
        assert_eq!(u["end_marker_seen"], true, "{u}");
        assert_eq!(
            u64_at(u, &["lost_packets"]) + u64_at(u, &["received_packets"]),
            u64_at(u, &["packets"]),
            "every datagram sent is taken or lost: {u}"
        );
        let p = 0.01;
        let sigma = (p * (1.0 - p) / sent).sqrt();
        let measured = lost / sent;
        println!(
            "UDP loss {:.3} % of {sent} datagrams, configured 1 % ± {:.3} % (3σ)",
            100.0 * measured,
            300.0 * sigma
        );
        if (measured - p).abs() <= 3.0 * sigma {
            Ok(())
        } else {
            Err(format!(
                "measured {measured}, expected {p} ± {}",
                3.0 * sigma
            ))
        }
    });
    run(
        test(&["--jitter", "2ms", "--jitter-reorders", "--duplicate", "2%"]),
        &|j| {
            let u = &j["end"]["streams"][0]["udp"];
            let jitter = u["jitter_ms"].as_f64().unwrap();
            let ooo = u64_at(u, &["out_of_order"]);
            let dups = u64_at(u, &["duplicates"]);
            println!("jitter {jitter} ms, {ooo} out of order, {dups} duplicates");
            // Delays spread over 2 ms reorder datagrams sent 0.22 ms apart; 2 % of 17,900 doubled.
            assert!(ooo > 100, "{u}");
            assert!((200..=520).contains(&dups), "{u}");
            assert_eq!(u64_at(u, &["lost_packets"]), 0, "late is not lost: {u}");
            if jitter > 0.2 {
                Ok(())
            } else {
                Err(format!(
                    "jitter {jitter} ms through a path with 2 ms of jitter"
                ))
            }
        },
    );
}

/// A raw client sets up a UDP test by the protocol; a stream hello carrying the right cookie but
/// sent from another address (127.0.0.2) than the client's (127.0.0.1) gets no answer, nor does
/// garbage; the same hello from the client's address is echoed. The server serves a test after.
#[test]
fn a_stream_hello_from_another_host_or_garbage_gets_no_answer() {
    let srv = ServerProc::start(&[]);
    let mut ctrl = connect(srv.port);
    let cookie_text = hello(&mut ctrl);
    let p = TestParams {
        write_len: 1400,
        udp: Some(UdpParams {
            rate_bps: 1_000_000,
            burst: 0,
            counters_64bit: false,
            no_offload: false,
        }),
        ..params()
    };
    std::io::Write::write_all(&mut ctrl, &encode_frame(&Message::Params(p))).unwrap();
    assert!(matches!(read_message(&mut ctrl), Message::Accepted(_)));
    let cookie = longhaul_proto::conversation::parse_cookie(&cookie_text).unwrap();
    let hello = Preamble::data(cookie, 0).encode();
    let answer = |from: &str, what: &[u8]| -> Option<Vec<u8>> {
        let s = UdpSocket::bind((from, 0)).unwrap();
        s.connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(700)))
            .unwrap();
        s.send(what).unwrap();
        let mut buf = [0u8; 64];
        s.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
    };
    assert_eq!(answer("127.0.0.2", &hello), None, "a stranger's hello");
    assert_eq!(answer("127.0.0.1", b"garbage"), None);
    let mut wrong = hello;
    wrong[12] ^= 1;
    assert_eq!(answer("127.0.0.1", &wrong), None, "a wrong cookie");
    assert_eq!(answer("127.0.0.1", &hello).as_deref(), Some(&hello[..]));
    drop(ctrl);
    let j = json_test("127.0.0.1", srv.port, &["-u", "-t", "1", "-l", "1000"]);
    assert_eq!(j["end"]["streams"][0]["udp"]["lost_packets"], 0);
}

/// `--find-rate` on a clean 1 Gbit/s path (the emulator's rate counts IP bytes) finds 1 Gbit/s at
/// the IP layer within 2 %, then reports jitter and delay variation at 50, 90 and 100 % of it.
#[test]
fn find_rate_finds_the_bottleneck_of_a_clean_path() {
    if !netns_privileges() {
        return;
    }
    let _alone = machine_alone();
    emulate_checked(
        &[
            "--rtt",
            "10ms",
            "--rate",
            "1G",
            "--",
            bin(),
            "test",
            "10.201.0.2",
            "-u",
            "--find-rate",
            "-b",
            "1.1G",
            "--resolution",
            "5M",
            "-t",
            "1",
            "--json",
        ],
        |out| {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
            let j: Value = serde_json::from_slice(&out.stdout).expect("--find-rate --json");
            let ip = j["ip_rate_bps"].as_f64().unwrap();
            let trials = j["trials"].as_array().unwrap();
            println!(
                "found {ip} bit/s at the IP layer in {} trials",
                trials.len()
            );
            assert_eq!(
                trials[0]["rate_bps"], 1_100_000_000,
                "the upper bound first"
            );
            assert_eq!(
                trials[0]["passed"], false,
                "1.1 Gbit/s cannot pass 1 Gbit/s"
            );
            let load = j["load"].as_array().unwrap();
            assert_eq!(
                load.iter()
                    .map(|p| p["percent"].as_u64().unwrap())
                    .collect::<Vec<_>>(),
                [50, 90, 100]
            );
            for p in load {
                assert!(p["trial"]["jitter_ms"].as_f64().is_some(), "{p}");
                assert!(
                    p["trial"]["delay_variation"]["p99_ms"].as_f64().is_some(),
                    "{p}"
                );
            }
            if (ip - 1e9).abs() <= 0.02 * 1e9 {
                Ok(())
            } else {
                Err(format!("found {ip} bit/s on a 1 Gbit/s path"))
            }
        },
    );
}
