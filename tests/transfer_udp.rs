//! `send` / `get --transport udp` (issue 19): a tree goes there and back over QUIC flows
//! bit-identical, with every controller; a transfer killed over UDP resumes over TCP and one
//! killed over TCP resumes over UDP, each moving only the chunks the receiver's journal lacks
//! (the journal does not depend on the transport); a stranger's hellos with a transfer's cookie
//! from another address get no answer, and the server serves the next transfer.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::transfer::{
    Scratch, assert_same_tree, events, journal_verified_bytes, random_bytes, random_file, s,
    same_bytes, serve, snapshot, stderr, u, wait_exit, wait_mid_transfer, xfer_ok,
};
use crate::util::{Testbed, bin};

/// A tree of one large file (several chunks on each of the streams) and many small files,
/// with nested and unicode names.
fn tree(top: &Path) -> u64 {
    let mut total = 0;
    let big = top.join("large/εικόνα 1.raw");
    std::fs::create_dir_all(big.parent().unwrap()).unwrap();
    random_file(&big, 48 << 20);
    total += 48 << 20;
    for i in 0..300usize {
        let dir = top.join(format!("small/{:02} ü/日本 {}", i % 7, i % 3));
        std::fs::create_dir_all(&dir).unwrap();
        let len = (i * 7919) % 40_000;
        std::fs::write(dir.join(format!("файл {i}.dat")), random_bytes(len)).unwrap();
        total += len as u64;
    }
    std::fs::write(top.join("empty"), b"").unwrap();
    total
}

#[test]
fn a_tree_goes_there_and_back_over_the_udp_transport_bit_identical() {
    let t = Scratch::new("udp-tree");
    let key = t.key("key");
    let root = t.dir("root");
    let mut server = serve(&root, &key);
    let src = t.dir("src/tree");
    let total = tree(&src);
    let want = snapshot(&src);

    let v = xfer_ok(
        "send",
        server.port,
        &key,
        &[s(&src), "localhost:in", "--transport", "udp"],
    );
    assert_eq!(u(&v, "bytes_moved"), total, "{v}");
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["udp"]["controller"], "cubic", "{v}");
    server.wait_for("transfer done");
    assert_same_tree(&want, &snapshot(&root.join("in/tree")), "sent over UDP");

    for controller in ["bbr", "newreno", "udt"] {
        let back = t.join(&format!("back-{controller}"));
        let v = xfer_ok(
            "get",
            server.port,
            &key,
            &[
                "localhost:in/tree",
                s(&back),
                "--transport",
                "udp",
                "-C",
                controller,
            ],
        );
        assert_eq!(u(&v, "bytes_moved"), total, "{v}");
        assert_eq!(v["udp"]["controller"], controller, "{v}");
        assert_same_tree(
            &want,
            &snapshot(&back.join("tree")),
            &format!("fetched over UDP with {controller}"),
        );
    }

    // A controller the UDP transport does not have is a usage error before anything moves.
    let out = crate::transfer::xfer(
        "send",
        server.port,
        &key,
        &[
            s(&src),
            "localhost:other",
            "--transport",
            "udp",
            "-C",
            "reno",
        ],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("not one of the UDP transport's"), "{err}");
    assert!(!root.join("other").exists(), "nothing created");
}

/// 96 MiB over an emulated 20 ms, 200 Mbit/s path: about 4 s, long enough to kill the sender
/// twice.
const SIZE: u64 = 96 << 20;

#[test]
fn a_transfer_killed_over_udp_resumes_over_tcp_and_back_moving_only_what_is_missing() {
    if !crate::util::netns_privileges() {
        return;
    }
    let _machine = crate::util::machine_alone();
    let t = Scratch::new("udp-resume");
    let key = t.key("key");
    let root = t.dir("root");
    let src = t.join("src/big.dat");
    random_file(&src, SIZE);
    let bed = Testbed::up(&["--rtt", "20ms", "--rate", "200M"]);
    let (_server, log) = bed.server(&root, &key, &[]);
    let send = |transport: &str, extra: &[&str]| {
        let mut args = vec![
            bin(),
            "send",
            s(&src),
            "10.201.0.2:in",
            "--key",
            s(&key),
            "-P",
            "2",
            "--chunk",
            "1M",
            "--transport",
            transport,
        ];
        args.extend_from_slice(extra);
        bed.exec("a", &args)
    };
    // Starts a send over `transport`, checks it was to move `left` bytes, and kills it (SIGKILL)
    // mid-transfer; returns what the receiver's journal then holds.
    let kill_mid = |transport: &str, left: u64| -> u64 {
        let mut child = send(transport, &["--json-stream"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let rx = events(&mut child);
        let at = wait_mid_transfer(&rx, left);
        child.kill().unwrap();
        let _ = wait_exit(&mut child);
        log.wait_for("transfer ended with an error");
        assert!(
            !root.join("in/big.dat").exists(),
            "no partial file in place"
        );
        let verified = journal_verified_bytes(&root.join("in"));
        println!("{transport}: killed at {at}; the journal holds {verified} bytes");
        verified
    };

    let over_udp = kill_mid("udp", SIZE);
    assert!(over_udp > 0 && over_udp < SIZE, "{over_udp}");
    // Over TCP, only what the UDP run left; killed again.
    let over_tcp = kill_mid("tcp", SIZE - over_udp);
    assert!(over_tcp > over_udp && over_tcp < SIZE, "{over_tcp}");
    // Over UDP again, to the end: only what both runs left.
    let out = send("udp", &["--json"]).output().unwrap();
    assert!(out.status.success(), "resume over UDP: {}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(u(&v, "bytes_to_send"), SIZE - over_tcp, "{v}");
    assert_eq!(u(&v, "bytes_moved"), SIZE - over_tcp, "{v}");
    assert_eq!(v["udp"]["controller"], "cubic", "{v}");
    log.wait_for("transfer done");
    assert!(same_bytes(&src, &root.join("in/big.dat")), "not identical");
    assert!(!root.join("in/.longhaul-journal").exists());
}

/// A stranger who learned a transfer's cookie (the control connection is plaintext without
/// `--encrypt`) says the UDP flows' hellos from another address: the server answers none of them
/// (no reflection towards the address the stranger names), logs each, ends that transfer by its
/// set-up deadline naming the flows that never came, and serves the next transfer.
#[test]
fn hellos_with_a_transfers_cookie_from_another_address_get_no_answer() {
    use longhaul_transfer::Message;
    use longhaul_transfer::msg::Direction;

    use crate::raw_peer::{RawPeer, file_entry, key_of};

    let t = Scratch::new("udp-spoofed-hello");
    let key = t.key("key");
    let root = t.dir("root");
    let mut server = crate::util::ServerProc::start(&[
        "--root",
        s(&root),
        "--key",
        s(&key),
        "--handshake-timeout",
        "3",
    ]);
    // The client's control connection (from 127.0.0.1) asks for one UDP flow.
    let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Send);
    peer.send(&Message::SendTo {
        dest: None,
        overwrite: false,
        fsync: false,
        stripe: None,
    });
    peer.send(&Message::Plan {
        streams: 1,
        chunk_size: 1 << 20,
        rtt_ns: 100_000,
        rate_bps: 1_000_000_000,
        pace_auto_bps: None,
        fast_start: false,
        transport: longhaul_proto::msg::Transport::Quic,
        controller: Some("bbr".into()),
    });
    peer.send(&Message::ManifestBatch {
        entries: vec![file_entry(0, "f", 0o644, 5)],
        last: true,
    });
    peer.recv_until(|m| matches!(m, Message::Have { last: true, .. }))
        .expect("the server's have");
    // The stranger, on another address, with the right cookie.
    let stranger = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
    stranger
        .set_read_timeout(Some(std::time::Duration::from_millis(300)))
        .unwrap();
    let hello = longhaul_proto::wire::Preamble::data(peer.cookie, 0).encode();
    let mut buf = [0u8; 2048];
    for _ in 0..5 {
        stranger
            .send_to(&hello, ("127.0.0.1", server.port))
            .unwrap();
        if let Ok((n, from)) = stranger.recv_from(&mut buf) {
            panic!("the server answered a stranger's hello with {n} bytes from {from}");
        }
    }
    let refused = peer
        .recv()
        .expect_err("the transfer ends without its flows");
    assert!(
        refused.contains("UDP transport streams to say hello"),
        "{refused}"
    );
    server.wait_for("UDP stream hello from another host");
    server.wait_for("transfer ended with an error");
    assert!(!root.join("f").exists(), "nothing written");

    // The next transfer, over UDP, is served.
    let src = t.join("src.bin");
    std::fs::write(&src, random_bytes(3 << 20)).unwrap();
    let v = xfer_ok(
        "send",
        server.port,
        &key,
        &[s(&src), "127.0.0.1:", "--transport", "udp"],
    );
    assert_eq!(u(&v, "bytes_moved"), 3 << 20, "{v}");
    assert!(same_bytes(&src, &root.join("src.bin")));
}

/// `--rate` caps a transfer over UDP as it does over TCP, whichever side sends: loopback carries
/// QUIC at gigabits, the transfer keeps to 40 Mbit/s.
#[test]
fn a_udp_transfer_keeps_to_its_rate_both_ways() {
    let t = Scratch::new("udp-rate");
    let key = t.key("key");
    let root = t.dir("root");
    let server = serve(&root, &key);
    let src = t.join("paced.bin");
    std::fs::write(&src, random_bytes(10 << 20)).unwrap();
    const RATE: f64 = 40e6;
    let rate = ["--transport", "udp", "--rate", "40M"];
    let mut args = vec![s(&src), "127.0.0.1:"];
    args.extend(rate);
    let sent = xfer_ok("send", server.port, &key, &args);
    let back = t.join("back");
    let mut args = vec!["127.0.0.1:paced.bin", s(&back)];
    args.extend(rate);
    let got = xfer_ok("get", server.port, &key, &args);
    for v in [&sent, &got] {
        assert_eq!(u(v, "bytes_moved"), 10 << 20, "{v}");
        let bps = v["bits_per_second"].as_f64().unwrap();
        assert!(bps <= 1.05 * RATE, "{bps} bit/s above --rate 40M: {v}");
    }
    assert!(same_bytes(&src, &back.join("paced.bin")));
}
