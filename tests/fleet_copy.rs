//! Third-party copies (issue 14): `longhaul copy A:SRC B:DEST` run by a controller that holds
//! neither the data nor either server's transfer key, with real `longhaul server`s on loopback. A
//! tree (a multi-chunk file, many small files, unicode names, a link) arrives bit-identical
//! (`sha256sum`); killing the sending server mid-copy leaves nothing half written in place and the
//! same command resumes with only the missing bytes; refusals (a server that takes no jobs, an
//! unknown controller, limits on either side) name the host and the reason and write nothing; and a
//! hostile holder of a ticket (the sending side gone bad, or a stranger who saw its id) cannot use
//! it for anything but the one copy it admits.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use longhaul_engine::{Family, JobClient};
use longhaul_transfer::auth::TicketId;
use longhaul_transfer::msg::Direction;
use longhaul_transfer::{Key, Message, RelPath};
use serde_json::Value;

use crate::fleet::controllers_named as controllers;
use crate::raw_peer::{RawPeer, key_of};
use crate::transfer::{
    KILL_PACE, KILL_SIZE, Scratch, assert_same_tree, events, journal_verified_bytes, listing,
    random_bytes, random_file, s, same_bytes, set_mtime, snapshot, u, wait_exit, wait_mid_transfer,
};
use crate::transfer_session::Relay;
use crate::util::{ServerProc, bin};

/// A server with a root, its own transfer key, and (if given) a controllers file.
fn server(t: &Scratch, name: &str, controllers: Option<&Path>) -> (ServerProc, PathBuf) {
    let root = t.dir(&format!("{name}-root"));
    let key = t.key(&format!("{name}.key"));
    let mut args = vec!["--root", s(&root), "--key", s(&key)];
    if let Some(c) = controllers {
        args.extend(["--controllers", s(c)]);
    }
    (ServerProc::start(&args), root)
}

/// `longhaul copy -p A --to-port B --key KEY ARGS...` as a command.
fn copy_cmd(a: u16, b: u16, key: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("copy")
        .args([
            "-p",
            &a.to_string(),
            "--to-port",
            &b.to_string(),
            "--key",
            s(key),
        ])
        .args(args);
    c
}

fn copy(a: u16, b: u16, key: &Path, args: &[&str]) -> Output {
    crate::util::printed(
        &mut copy_cmd(a, b, key, args),
        &format!("longhaul copy {}", args.join(" ")),
    )
}

/// The one line a refused copy prints on stderr.
fn refusal(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "refused with exit code 1");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "a reason on stderr");
    assert!(
        lines.iter().all(|l| l.starts_with("longhaul: error: ")),
        "{err}"
    );
    lines.join("\n")
}

#[test]
fn a_third_party_copy_of_a_tree_arrives_bit_identical_and_only_progress_reaches_the_controller() {
    let t = Scratch::new("copy-tree");
    let ops = t.key("ops.key");
    let file = controllers(&t.join(""), "controllers.toml", &ops, "");
    let (mut a, a_root) = server(&t, "a", Some(&file));
    let (mut b, b_root) = server(&t, "b", Some(&file));
    let tree = a_root.join("run42");
    random_file(&tree.join("big/multi-chunk.bin"), (48 << 20) + 17);
    for i in 0..400 {
        let p = tree.join(format!("small/{:02}/f{i}.dat", i % 20));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, random_bytes(i * 37 % 5000)).unwrap();
    }
    for (name, len) in [("ünï cödé/ø.txt", 17), ("emoji 🚀/🎉 party.dat", 3000)] {
        let p = tree.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, random_bytes(len)).unwrap();
        set_mtime(&p, 1_000_000_000, 123_456_789);
    }
    std::os::unix::fs::symlink("big/multi-chunk.bin", tree.join("link to big")).unwrap();
    let want = snapshot(&tree);
    let relay = Relay::transparent(a.port);

    let out = copy(
        relay.port,
        b.port,
        &ops,
        &[
            "127.0.0.1:run42",
            "127.0.0.1:incoming",
            "--json",
            "--chunk",
            "1M",
        ],
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
    assert_eq!(r["ok"], true, "{r}");
    let files = 400 + 2 + 1;
    assert_eq!(u(&r["sender"], "files"), files, "{r}");
    assert_eq!(u(&r["receiver"], "files"), files, "{r}");
    assert_eq!(r["receiver"]["verified"], true, "{r}");
    let got = snapshot(&b_root.join("incoming/run42"));
    assert_same_tree(&want, &got, "the copy at B");
    // A sent with the ticket, B received it; each logged the job for controller ops.
    a.wait_for("job done");
    b.wait_for("job done");
    assert!(b.log().contains("transfer done"), "{}", b.log());
    // The controller's connection to A carried progress and the summary, not the data.
    let moved = u(&r["sender"], "bytes_moved");
    let control = relay.bytes();
    println!("copy moved {moved} B; the controller's connection to A {control} B");
    assert!(moved > 48 << 20, "{moved}");
    assert!(control > 0 && control * 100 < moved, "{control} vs {moved}");
    // Every chunk moved was verified, and both ends count the same chunks.
    let chunks = u(&r["receiver"], "chunks_verified");
    assert!(chunks >= files, "{r}");
    assert_eq!(u(&r["sender"], "chunks_verified"), chunks, "{r}");

    // Again: everything is there already, nothing moves.
    let out = copy(
        a.port,
        b.port,
        &ops,
        &["127.0.0.1:run42", "127.0.0.1:incoming", "--json"],
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(u(&r["sender"], "bytes_moved"), 0, "{r}");
}

#[test]
fn killing_the_sending_server_mid_copy_leaves_nothing_in_place_and_the_rerun_resumes() {
    let t = Scratch::new("copy-kill");
    let ops = t.key("ops.key");
    let file = controllers(&t.join(""), "controllers.toml", &ops, "");
    let (a, a_root) = server(&t, "a", Some(&file));
    let (mut b, b_root) = server(&t, "b", Some(&file));
    random_file(&a_root.join("big.dat"), KILL_SIZE);
    // A reaches B through a paced relay, so the kill comes mid-copy on any machine.
    let relay = Relay::throttled(b.port, KILL_PACE);
    let args = [
        "127.0.0.1:big.dat",
        "127.0.0.1:in",
        "-P",
        "1",
        "--chunk",
        "1M",
        "--json-stream",
    ];
    let mut child = copy_cmd(a.port, relay.port, &ops, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = events(&mut child);
    let err = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || crate::util::read_all(err));
    let at = wait_mid_transfer(&rx, KILL_SIZE);
    let a_key = t.join("a.key");
    let a_args = [
        "--root",
        s(&a_root),
        "--key",
        s(&a_key),
        "--controllers",
        s(&file),
    ];
    drop(a); // SIGKILL
    let status = wait_exit(&mut child);
    let err = err.join().unwrap();
    println!("killed at {at}; the controller said:\n{err}");
    assert!(!status.success());
    assert!(
        err.contains("longhaul: error: the sending server 127.0.0.1 port"),
        "{err}"
    );
    b.wait_for("transfer ended with an error");
    assert!(
        !b_root.join("in/big.dat").exists(),
        "no partial file in place"
    );
    let verified = journal_verified_bytes(&b_root.join("in"));
    assert!(verified > 0 && verified < KILL_SIZE, "{verified}");

    // The same command, with A back: only what B does not hold verified moves.
    let a = ServerProc::start(&a_args);
    let out = copy(a.port, b.port, &ops, &[&args[..6], &["--json"]].concat());
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        u(&r["receiver"], "bytes_moved"),
        KILL_SIZE - verified,
        "{r}"
    );
    assert!(same_bytes(
        &a_root.join("big.dat"),
        &b_root.join("in/big.dat")
    ));
    assert!(!b_root.join("in/.longhaul-journal").exists());
}

#[test]
fn refused_copies_name_the_host_and_the_reason_and_write_nothing() {
    let t = Scratch::new("copy-refused");
    let ops = t.key("ops.key");
    let other = t.key("other.key");
    let open = controllers(&t.join(""), "open.toml", &ops, "");
    let strict = controllers(
        &t.join(""),
        "strict.toml",
        &ops,
        "max_streams = 2\nmax_bytes = \"1M\"",
    );
    let strangers = controllers(&t.join(""), "strangers.toml", &other, "");
    let (mut a, a_root) = server(&t, "a", Some(&open));
    let (no_jobs, no_jobs_root) = server(&t, "nojobs", None);
    let (stranger, stranger_root) = server(&t, "stranger", Some(&strangers));
    let (strict_b, strict_root) = server(&t, "strict", Some(&strict));
    for root in [&a_root, &strict_root] {
        std::fs::write(root.join("f.dat"), random_bytes(2 << 20)).unwrap();
    }
    let src = "127.0.0.1:f.dat";

    let receiving = |port: u16| format!("the receiving server 127.0.0.1 port {port}: ");
    let sending = |port: u16| format!("the sending server 127.0.0.1 port {port}: ");
    let cases: [(u16, u16, &[&str], String, &str); 5] = [
        (
            a.port,
            no_jobs.port,
            &[],
            receiving(no_jobs.port),
            "this server takes no jobs",
        ),
        (
            stranger.port,
            a.port,
            &[],
            sending(stranger.port),
            "unknown controller",
        ),
        (
            a.port,
            stranger.port,
            &[],
            receiving(stranger.port),
            "unknown controller",
        ),
        (
            a.port,
            strict_b.port,
            &["-P", "1"],
            receiving(strict_b.port),
            "controller ops: a copy of 2 MiB asked, at most 1 MiB allowed (max_bytes)",
        ),
        (
            strict_b.port,
            a.port,
            &["-P", "4"],
            sending(strict_b.port),
            "controller ops: 4 streams asked, at most 2 allowed (-P)",
        ),
    ];
    for (from, to, extra, host, why) in cases {
        let mut args = vec![src, "127.0.0.1:in"];
        args.extend_from_slice(extra);
        let err = refusal(&copy(from, to, &ops, &args));
        println!("{err}");
        assert!(err.contains(&host), "want {host:?} in {err:?}");
        assert!(err.contains(why), "want {why:?} in {err:?}");
    }
    for root in [&a_root, &no_jobs_root, &stranger_root, &strict_root] {
        let written: Vec<_> = listing(root)
            .into_iter()
            .filter(|(p, _)| p != "f.dat")
            .collect();
        assert!(written.is_empty(), "{}: {written:?}", root.display());
    }
    // A still serves its controller.
    let (b, b_root) = server(&t, "b", Some(&open));
    let out = copy(a.port, b.port, &ops, &[src, "127.0.0.1:in"]);
    assert!(out.status.success());
    assert!(same_bytes(&a_root.join("f.dat"), &b_root.join("in/f.dat")));
    assert!(a.log().contains("job done"));
}

/// Asks B for a ticket into `dest` as controller `ops` would; the connection keeps it valid.
fn ticket(b: u16, ops: &Key, dest: &str) -> (JobClient, TicketId, Key) {
    ticket_for(b, ops, dest, false)
}

/// [`ticket`], for an encrypted transfer only with `encrypt`.
fn ticket_for(b: u16, ops: &Key, dest: &str, encrypt: bool) -> (JobClient, TicketId, Key) {
    let mut job = JobClient::connect(
        "127.0.0.1",
        b,
        Family::V4,
        ops,
        Duration::from_secs(10),
        None,
    )
    .expect("B accepts the controller");
    let (id, key) = job
        .issue_ticket(
            Some(RelPath::parse(dest).unwrap()),
            false,
            false,
            encrypt,
            None,
        )
        .expect("a ticket");
    (job, id, key)
}

#[test]
fn a_ticket_admits_one_send_into_its_dest_and_nothing_else() {
    let t = Scratch::new("copy-ticket");
    let ops_path = t.key("ops.key");
    let ops = key_of(&ops_path);
    let file = controllers(&t.join(""), "controllers.toml", &ops_path, "max_jobs = 8");
    let (mut b, b_root) = server(&t, "b", Some(&file));
    let send_to = |peer: &mut RawPeer, dest: &str, overwrite: bool| {
        peer.send(&Message::SendTo {
            dest: Some(RelPath::parse(dest).unwrap()),
            overwrite,
            fsync: false,
            stripe: None,
        });
        peer.recv()
    };

    // A stranger who saw a ticket's id on the wire, without its key: B does not prove the key
    // the stranger guessed, and the ticket is not used up.
    let (_job, id, key) = ticket(b.port, &ops, "incoming");
    let guess = Key::from_bytes([7; 32]);
    let e = RawPeer::try_connect(b.port, &guess, Some(id), Direction::Send).err();
    assert!(e.is_some_and(|e| e.contains("authentication failed")));
    // An id B never issued.
    let e = RawPeer::try_connect(b.port, &key, Some(TicketId([1; 16])), Direction::Send).err();
    assert!(e.is_some_and(|e| e.contains("unknown, used or expired copy ticket")));
    // The holder of the ticket, sending somewhere else, or replacing files it was not allowed to.
    let mut peer = RawPeer::try_connect(b.port, &key, Some(id), Direction::Send).unwrap();
    let e = send_to(&mut peer, "elsewhere", false).unwrap_err();
    assert!(
        e.contains("admits a copy into \"incoming\", not into \"elsewhere\""),
        "{e}"
    );
    // Used once, even though refused.
    let e = RawPeer::try_connect(b.port, &key, Some(id), Direction::Send).err();
    assert!(e.is_some_and(|e| e.contains("unknown, used or expired copy ticket")));

    let (_job, id, key) = ticket(b.port, &ops, "incoming");
    let mut peer = RawPeer::try_connect(b.port, &key, Some(id), Direction::Send).unwrap();
    let e = send_to(&mut peer, "incoming", true).unwrap_err();
    assert!(e.contains("does not admit --overwrite"), "{e}");

    // A ticket for an encrypted copy, presented by a plaintext client.
    let (_job, id, key) = ticket_for(b.port, &ops, "incoming", true);
    let mut peer = RawPeer::try_connect(b.port, &key, Some(id), Direction::Send).unwrap();
    let e = send_to(&mut peer, "incoming", false).unwrap_err();
    assert!(e.contains("admits only an encrypted transfer"), "{e}");

    // Fetching with a ticket.
    let (_job, id, key) = ticket(b.port, &ops, "incoming");
    let e = RawPeer::try_connect(b.port, &key, Some(id), Direction::Get)
        .and_then(|mut p| {
            p.send(&Message::Request {
                paths: vec![RelPath::parse("x").unwrap()],
            });
            p.recv().map(|_| p)
        })
        .err();
    assert!(e.is_some_and(|e| e.contains("admits a send to this server, not a get")));

    // A controller that hangs up before the copy starts revokes its ticket.
    let (job, id, key) = ticket(b.port, &ops, "incoming");
    drop(job);
    std::thread::sleep(Duration::from_millis(600));
    let e = RawPeer::try_connect(b.port, &key, Some(id), Direction::Send).err();
    assert!(e.is_some_and(|e| e.contains("unknown, used or expired copy ticket")));

    // The ticket's key is not B's key: a plain send with it is refused.
    let e = RawPeer::try_connect(b.port, &key, None, Direction::Send).err();
    assert!(e.is_some(), "B proved a ticket's key as its own");

    assert!(listing(&b_root).is_empty(), "{:?}", listing(&b_root));
    assert!(!b.log().contains("panicked"), "{}", b.log());
}

#[test]
fn a_campaign_runs_a_copy_beside_a_test_and_adds_them_up() {
    let t = Scratch::new("copy-campaign");
    let ops = t.key("ops.key");
    let file = controllers(&t.join(""), "controllers.toml", &ops, "max_jobs = 2");
    let (a, a_root) = server(&t, "a", Some(&file));
    let (b, b_root) = server(&t, "b", Some(&file));
    random_file(&a_root.join("data/one.bin"), 20 << 20);
    std::fs::write(a_root.join("data/two.txt"), random_bytes(4321)).unwrap();
    let campaign = t.join("mixed.toml");
    std::fs::write(
        &campaign,
        format!(
            "start_in = \"1s\"\nargs = \"-t 2 --pace 20M\"\ncopy_args = \"-P 2\"\n\
             [[pair]]\nname = \"t\"\nfrom = \"127.0.0.1\"\nfrom_port = {a}\nto = \"127.0.0.1\"\nto_port = {b}\n\
             [[pair]]\nname = \"c\"\nfrom = \"127.0.0.1\"\nfrom_port = {a}\nto = \"127.0.0.1\"\nto_port = {b}\n\
             copy = [\"data\"]\ndest = \"incoming\"\nargs = \"--chunk 1M\"\n",
            a = a.port,
            b = b.port
        ),
    )
    .unwrap();
    let out = crate::util::printed(
        Command::new(bin()).args(["campaign", s(&campaign), "--key", s(&ops), "--json"]),
        "longhaul campaign mixed.toml --json",
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
    let pairs = r["pairs"].as_array().unwrap();
    assert!(pairs.iter().all(|p| p["ok"] == true), "{r}");
    let copy = &pairs[1]["copy"];
    assert_eq!(u(&copy["receiver"], "files"), 2, "{copy}");
    assert_eq!(copy["receiver"]["verified"], true, "{copy}");
    assert_eq!(u(&copy["sender"], "chunk_size"), 1 << 20, "{copy}");
    assert!(same_bytes(
        &a_root.join("data/one.bin"),
        &b_root.join("incoming/data/one.bin")
    ));
    // The sum is the test's received rate plus the copy's, as B measured it.
    let test_rx = pairs[0]["report"]["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    let copy_rx = copy["receiver"]["bits_per_second"].as_f64().unwrap();
    let agg = &r["aggregate"];
    let sum = agg["sum_received_bits_per_second"].as_f64().unwrap();
    assert!((sum - test_rx - copy_rx).abs() < 1e-3, "{agg}");
    assert!(copy_rx > 0.0 && test_rx > 0.8 * 20e6, "{agg}");
    assert_eq!(agg["pairs_ok"], 2, "{agg}");
}
