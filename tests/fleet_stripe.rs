//! Striped third-party copies (issue 14): `longhaul copy --stripe FROM=TO ... A:SRC B:DEST` over
//! several pairs of real `longhaul server`s on loopback, the senders sharing one source root and the
//! receivers one destination root, as a cluster with shared storage does. A tree (a multi-chunk
//! file, many small files, unicode names, an empty file, a link) arrives bit-identical
//! (`sha256sum`) over three pairs; killing one sender mid-copy leaves nothing in place, and the same
//! copy rerun over the two remaining pairs moves exactly what the journals lack; a ticket holder
//! cannot send another stripe's chunks.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use longhaul_engine::{Family, JobClient};
use longhaul_transfer::msg::Direction;
use longhaul_transfer::stripe::{RunId, Stripe};
use longhaul_transfer::{Message, RangeSet, RelPath};
use serde_json::Value;

use crate::fleet::controllers_named as controllers;
use crate::raw_peer::{RawPeer, file_entry, key_of};
use crate::transfer::{
    Scratch, assert_same_tree, events, journal_verified_bytes, random_bytes, random_file, s,
    same_bytes, snapshot, u, wait_exit,
};
use crate::transfer_session::Relay;
use crate::util::{ServerProc, bin};

/// `n` senders serving `a_root` and `n` receivers writing into `b_root` (the receivers share one
/// transfer key, as servers of one storage cluster do: their journals are keyed by it), all
/// accepting controller `ops` for up to 4 jobs each.
struct Cluster {
    senders: Vec<ServerProc>,
    receivers: Vec<ServerProc>,
    a_root: PathBuf,
    b_root: PathBuf,
    ops: PathBuf,
}

impl Cluster {
    fn start(t: &Scratch, n: usize) -> Self {
        let ops = t.key("ops.key");
        let file = controllers(&t.join(""), "controllers.toml", &ops, "max_jobs = 4");
        let (a_root, b_root) = (t.dir("a-root"), t.dir("b-root"));
        let (a_key, b_key) = (t.key("a.key"), t.key("b.key"));
        let args = |root: &Path, key: &Path| -> Vec<String> {
            [
                "--root",
                s(root),
                "--key",
                s(key),
                "--controllers",
                s(&file),
            ]
            .map(String::from)
            .to_vec()
        };
        let start =
            |a: Vec<String>| ServerProc::start(&a.iter().map(String::as_str).collect::<Vec<_>>());
        Self {
            senders: (0..n).map(|_| start(args(&a_root, &a_key))).collect(),
            receivers: (0..n).map(|_| start(args(&b_root, &b_key))).collect(),
            a_root,
            b_root,
            ops,
        }
    }

    /// `longhaul copy` over pairs `pairs` (sender i → receiver j, or through a port in between),
    /// the first pair as A and B, the rest as `--stripe`.
    fn copy_cmd(&self, pairs: &[(u16, u16)], args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.arg("copy")
            .args(["--key", s(&self.ops)])
            .args(["-p", &pairs[0].0.to_string()])
            .args(["--to-port", &pairs[0].1.to_string()]);
        for (a, b) in &pairs[1..] {
            c.args(["--stripe", &format!("127.0.0.1:{a}=127.0.0.1:{b}")]);
        }
        c.args(args);
        c
    }

    fn copy(&self, pairs: &[(u16, u16)], args: &[&str]) -> Output {
        crate::util::printed(
            &mut self.copy_cmd(pairs, args),
            &format!(
                "longhaul copy over {} pairs {}",
                pairs.len(),
                args.join(" ")
            ),
        )
    }

    fn pairs(&self) -> Vec<(u16, u16)> {
        self.senders
            .iter()
            .zip(&self.receivers)
            .map(|(a, b)| (a.port, b.port))
            .collect()
    }
}

/// The journals left in `dir`.
fn journals(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.starts_with(".longhaul-journal"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn pairs_of(r: &Value) -> &Vec<Value> {
    r["pairs"].as_array().expect("pairs")
}

#[test]
fn a_tree_striped_over_three_pairs_arrives_bit_identical_and_one_receiver_puts_it_in_place() {
    let t = Scratch::new("stripe-tree");
    let c = Cluster::start(&t, 3);
    let tree = c.a_root.join("run42");
    let big = (24 << 20) + 17;
    random_file(&tree.join("big/multi-chunk.bin"), big);
    let mut total = big;
    for i in 0..200u64 {
        let p = tree.join(format!("small/{:02}/f{i}.dat", i % 10));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let len = (i * 37 % 5000) as usize;
        std::fs::write(&p, random_bytes(len)).unwrap();
        total += len as u64;
    }
    for (name, len) in [
        ("ünï cödé/ø.txt", 17),
        ("emoji 🚀/🎉 party.dat", 3000),
        ("empty", 0),
    ] {
        let p = tree.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, random_bytes(len)).unwrap();
        total += len as u64;
    }
    std::os::unix::fs::symlink("big/multi-chunk.bin", tree.join("link to big")).unwrap();
    let want = snapshot(&tree);

    let out = c.copy(
        &c.pairs(),
        &[
            "127.0.0.1:run42",
            "127.0.0.1:incoming",
            "--chunk",
            "1M",
            "--json",
        ],
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(u(&r, "chunk_size"), 1 << 20, "{r}");
    let files = 1 + 200 + 3; // the big one, the small ones, three more (the link is not a file)
    assert_eq!(u(&r, "files_in_place"), files, "{r}");
    let got = snapshot(&c.b_root.join("incoming/run42"));
    assert_same_tree(&want, &got, "the striped copy at B");
    assert!(journals(&c.b_root.join("incoming")).is_empty());

    // Every pair moved its share, together exactly the data; one receiver finished.
    let mut finished = 0;
    let mut moved = 0;
    for p in pairs_of(&r) {
        let sent = u(&p["sender"], "bytes_moved");
        assert!(sent > total / 6, "an uneven share: {p}");
        assert_eq!(u(&p["receiver"], "bytes_moved"), sent, "{p}");
        moved += sent;
        let stripe = &p["receiver"]["stripe"];
        assert_eq!(u(stripe, "count"), 3, "{p}");
        if stripe["finished"] == true {
            finished += 1;
            assert_eq!(u(stripe, "files_in_place"), files, "{p}");
        }
    }
    assert_eq!(moved, total, "{r}");
    assert_eq!(u(&r, "bytes_moved"), total, "{r}");
    assert_eq!(
        finished, 1,
        "exactly one receiver put the files in place: {r}"
    );

    // Again over two pairs: everything is there, nothing moves.
    let out = c.copy(
        &c.pairs()[..2],
        &[
            "127.0.0.1:run42",
            "127.0.0.1:incoming",
            "--chunk",
            "1M",
            "--json",
        ],
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(u(&r, "bytes_moved"), 0, "{r}");
}

#[test]
fn killing_one_sender_mid_copy_leaves_nothing_in_place_and_two_pairs_finish_what_is_missing() {
    const SIZE: u64 = 768 << 20;
    let t = Scratch::new("stripe-kill");
    let mut c = Cluster::start(&t, 3);
    random_file(&c.a_root.join("big.dat"), SIZE);
    random_file(&c.a_root.join("other.dat"), 3 << 20);
    // Each sender reaches its receiver through a paced relay (256 MiB per pair, ~3 s at this
    // pace), so the kill comes mid-copy on any machine.
    let relays: Vec<Relay> = c
        .receivers
        .iter()
        .map(|b| Relay::throttled(b.port, 80 << 20))
        .collect();
    let through: Vec<(u16, u16)> = c
        .senders
        .iter()
        .zip(&relays)
        .map(|(a, r)| (a.port, r.port))
        .collect();
    let args = [
        "127.0.0.1:big.dat",
        "127.0.0.1:other.dat",
        "127.0.0.1:in",
        "-P",
        "2",
    ];
    let mut child = c
        .copy_cmd(
            &through,
            &[&args[..], &["--chunk", "1M", "--json-stream"]].concat(),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = events(&mut child);
    let err = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || crate::util::read_all(err));
    // Progress from the third pair, well short of its share: kill its sender.
    loop {
        let e = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("progress events");
        if e["event"] == "summary" || e["event"] == "error" {
            panic!("the copy ended before it could be interrupted: {e}");
        }
        if e["event"] == "progress" && u(&e, "stripe") == 2 && u(&e, "bytes") > 0 {
            assert!(
                u(&e, "bytes") < SIZE / 3 * 3 / 4,
                "too fast to interrupt: {e}"
            );
            break;
        }
    }
    drop(c.senders.pop()); // SIGKILL
    let status = wait_exit(&mut child);
    let err = err.join().unwrap();
    println!("the controller said:\n{err}");
    assert!(!status.success());
    assert!(
        err.contains("longhaul: error: the sending server 127.0.0.1 port"),
        "{err}"
    );
    let summary: Value = std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(5)).ok())
        .find(|e| e["event"] == "summary")
        .expect("a summary");
    assert_eq!(summary["ok"], false, "{summary}");
    assert!(
        !c.b_root.join("in/big.dat").exists() && !c.b_root.join("in/other.dat").exists(),
        "nothing half written in place"
    );
    let dest = c.b_root.join("in");
    assert_eq!(journals(&dest).len(), 4, "{:?}", journals(&dest));
    let verified = journal_verified_bytes(&dest);
    let total = SIZE + (3 << 20);
    assert!(verified > total / 2 && verified < total, "{verified}");

    // The same copy over the two pairs left: only what no journal holds verified moves.
    let out = c.copy(
        &c.pairs(),
        &[&args[..], &["--chunk", "1M", "--json"]].concat(),
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(u(&r, "bytes_moved"), total - verified, "{r}");
    for p in pairs_of(&r) {
        assert!(
            u(&p["sender"], "bytes_moved") > 0,
            "both pairs share the rest: {p}"
        );
    }
    for f in ["big.dat", "other.dat"] {
        assert!(same_bytes(&c.a_root.join(f), &dest.join(f)), "{f}");
    }
    assert!(journals(&dest).is_empty(), "{:?}", journals(&dest));
}

#[test]
fn a_ticket_holder_cannot_send_another_stripes_chunks_or_another_stripe() {
    let t = Scratch::new("stripe-hostile");
    let mut c = Cluster::start(&t, 1);
    let ops = key_of(&c.ops);
    let port = c.receivers[0].port;
    let mine = Stripe {
        run: RunId([3; 16]),
        index: 1,
        count: 2,
        chunk_size: 1 << 20,
    };
    let ticket = || {
        let mut job = JobClient::connect(
            "127.0.0.1",
            port,
            Family::V4,
            &ops,
            Duration::from_secs(10),
            None,
        )
        .expect("B accepts the controller");
        let (id, key) = job
            .issue_ticket(
                Some(RelPath::parse("in").unwrap()),
                false,
                false,
                false,
                Some(mine),
            )
            .expect("a ticket");
        (job, id, key)
    };
    let send_to = |peer: &mut RawPeer, stripe: Option<Stripe>| {
        peer.send(&Message::SendTo {
            dest: Some(RelPath::parse("in").unwrap()),
            overwrite: false,
            fsync: false,
            stripe,
        });
    };
    let plan = |peer: &mut RawPeer, chunk_size: u64| {
        peer.send(&Message::Plan {
            streams: 1,
            chunk_size,
            rtt_ns: 100_000,
            rate_bps: 1_000_000_000,
            pace_auto_bps: None,
            fast_start: false,
            transport: longhaul_proto::msg::Transport::Tcp,
            controller: None,
        });
    };

    // Another stripe than the ticket's, or none: refused.
    for other in [None, Some(Stripe { index: 0, ..mine })] {
        let (_job, id, key) = ticket();
        let mut peer = RawPeer::try_connect(port, &key, Some(id), Direction::Send).unwrap();
        send_to(&mut peer, other);
        let e = peer.recv().unwrap_err();
        assert!(e.contains("admits another stripe"), "{e}");
    }
    // Its stripe with another chunk size than the run's: refused.
    let (_job, id, key) = ticket();
    let mut peer = RawPeer::try_connect(port, &key, Some(id), Direction::Send).unwrap();
    send_to(&mut peer, Some(mine));
    plan(&mut peer, 2 << 20);
    let e = peer
        .recv_until(|m| matches!(m, Message::Have { .. }))
        .unwrap_err();
    assert!(e.contains("chunk size must be its run's"), "{e}");

    // Its stripe: a 2-chunk file, chunk 0 stripe 0's and chunk 1 ours. B says it has chunk 0 (not
    // ours to send), then refuses it when it comes anyway.
    let (_job, id, key) = ticket();
    let mut peer = RawPeer::try_connect(port, &key, Some(id), Direction::Send).unwrap();
    send_to(&mut peer, Some(mine));
    plan(&mut peer, 1 << 20);
    peer.send(&Message::ManifestBatch {
        entries: vec![file_entry(0, "f", 0o644, 2 << 20)],
        last: true,
    });
    let have = peer
        .recv_until(|m| matches!(m, Message::Have { last: true, .. }))
        .unwrap();
    let Message::Have { files, .. } = have else {
        unreachable!()
    };
    let mut not_ours = RangeSet::new();
    not_ours.insert(0);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(files[0].verified, not_ours, "{files:?}");
    let mut data = peer.open_data(port, 0);
    let payload = random_bytes(1 << 20);
    // B refuses on the header: the payload may meet a closed stream.
    let _ = peer.write_chunk(&mut data, 0, 0, 0, &payload);
    let e = peer
        .recv_until(|m| matches!(m, Message::ChunkVerdict { .. }))
        .unwrap_err();
    assert!(e.contains("chunk 0 of f is not this stripe's"), "{e}");
    assert!(!c.b_root.join("in/f").exists(), "nothing in place");
    // The refused chunk never reached the file: its temporary holds no byte of it.
    for entry in std::fs::read_dir(c.b_root.join("in")).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with(".lh-") {
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                bytes[..1 << 20].iter().all(|&b| b == 0),
                "{name} holds sent bytes"
            );
        }
    }
    let log = c.receivers[0].log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn bad_stripe_flags_are_refused_with_one_line_and_exit_2() {
    let t = Scratch::new("stripe-usage");
    let ops = t.key("ops.key");
    for (flag, why) in [
        ("nonsense", "give FROM=TO"),
        ("h1:0=h2", "the port must be 1 to 65535"),
        ("h1:99999=h2", "the port must be 1 to 65535"),
        ("[::1=h2", "must close the IPv6 address"),
        ("=h2", "name a server"),
        ("127.0.0.1=127.0.0.1", "already in the copy"),
    ] {
        let out = Command::new(bin())
            .args(["copy", "--key", s(&ops), "--stripe", flag])
            .args(["127.0.0.1:x", "127.0.0.1:"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--stripe {flag}: {err}");
        assert_eq!(err.lines().count(), 1, "--stripe {flag}: {err}");
        assert!(
            err.starts_with("longhaul: error: ") && err.contains(why),
            "--stripe {flag}: {err}"
        );
    }
}
