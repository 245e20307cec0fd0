//! What the *receiver* of a transfer does with what a hostile peer says (issue 11, findings 1, 2 and 6):
//! modes (setuid, setgid, sticky, world-writable directories, existing directories), names a `get`
//! client never asked for (scp's CVE-2019-6111), names reserved for the receiver's temporaries and
//! journal, and a forged journal planted in the destination. Each peer is written by hand with
//! `raw_peer`: a raw client against a real `longhaul server --root`, or a raw server with the real
//! `longhaul get` as its victim.

use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Output, Stdio};

use longhaul_transfer::digest::{self, to_hex};
use longhaul_transfer::manifest::ManifestEntry;
use longhaul_transfer::msg::Direction;
use longhaul_transfer::{Message, RelPath};

use crate::raw_peer::{RawPeer, dir_entry, file_entry, key_of, listener, path};
use crate::transfer::{
    Scratch, listing, one_line_error, s, serve, set_mtime, stderr, xfer_cmd, xfer_ok,
};
use crate::util::ServerProc;

const MIB: u64 = 1 << 20;
/// The file digest of a one-chunk file.
fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .mode()
        & 0o7777
}

/// This process's umask (Linux ≥ 4.7 reports it in /proc); the server and the clients the tests
/// start inherit it.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .expect("Umask in /proc/self/status");
    u32::from_str_radix(line.trim(), 8).expect("octal umask")
}

/// The owner a file gets when this user creates it (the receivers here run as this user too).
fn my_ids(scratch: &Scratch) -> (u32, u32) {
    let probe = scratch.join("owner-probe");
    std::fs::write(&probe, b"").unwrap();
    let m = std::fs::metadata(&probe).unwrap();
    (m.uid(), m.gid())
}

// ---------------------------------------------------------------------------------------------
// Finding 1: modes.

/// A key holder sends a setuid/setgid root-owned file, a sticky world-writable new directory and a
/// 0777 entry for a directory that already exists, to a server running as the test's user (root
/// here): nothing special is applied, group/other bits follow the server's umask, the existing
/// directory keeps its mode, and the file belongs to the server's user.
#[test]
fn a_key_holder_cannot_plant_setuid_files_or_open_up_existing_directories() {
    let t = Scratch::new("hostile-modes-send");
    let key = t.key("key");
    let root = t.dir("root");
    std::fs::create_dir(root.join("existing")).unwrap();
    std::fs::set_permissions(
        root.join("existing"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let server = serve(&root, &key);
    let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Send);
    let shell = b"#!/bin/sh\nid\n";
    let have = peer.offer(
        true,
        vec![
            dir_entry(1, "existing", 0o777),
            file_entry(2, "existing/rootshell", 0o6755, shell.len() as u64),
            dir_entry(3, "drop", 0o1777),
            file_entry(4, "drop/open", 0o666, 2),
        ],
    );
    assert!(have.is_ok(), "the server refused: {have:?}");
    let results = peer.deliver(server.port, &[(2, shell), (4, b"hi")]);
    assert!(
        results
            .iter()
            .all(|m| matches!(m, Message::FileVerified { .. })),
        "{results:?}"
    );
    let um = umask();
    assert_eq!(
        mode_of(&root.join("existing")),
        0o755,
        "an existing directory's mode changed"
    );
    let shell_mode = mode_of(&root.join("existing/rootshell"));
    assert_eq!(
        shell_mode & 0o7000,
        0,
        "special bits applied: {shell_mode:o}"
    );
    assert_eq!(shell_mode, 0o755 & !um);
    assert_eq!(mode_of(&root.join("drop")), 0o777 & !um);
    assert_eq!(mode_of(&root.join("drop/open")), 0o666 & !um);
    // Created by, and owned by, the receiving user; never chowned to anything the peer says.
    let ids = my_ids(&t);
    for p in ["existing/rootshell", "drop", "drop/open"] {
        let m = std::fs::metadata(root.join(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), ids, "{p}");
    }
}

/// The server's operator can ask for the special bits (`--keep-special-bits`); the client cannot.
#[test]
fn special_bits_are_kept_only_when_the_receiving_server_asks() {
    let t = Scratch::new("hostile-modes-keep");
    let key = t.key("key");
    let root = t.dir("root");
    let server = ServerProc::start(&["--root", s(&root), "--key", s(&key), "--keep-special-bits"]);
    let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Send);
    let payload = b"x";
    peer.offer(false, vec![file_entry(1, "tool", 0o4755, 1)])
        .expect("have");
    peer.deliver(server.port, &[(1, payload)]);
    assert_eq!(mode_of(&root.join("tool")), 0o4755 & !umask());
}

/// The receiver's other opt-ins: a server started with `--chmod-existing-dirs` changes an existing
/// directory's mode only when the client also asked for `--overwrite` (and then through its umask);
/// `get --keep-special-bits` keeps what a server sends.
#[test]
fn existing_directories_change_mode_only_with_overwrite_and_the_receivers_flag() {
    let t = Scratch::new("hostile-modes-optin");
    let key = t.key("key");
    let root = t.dir("root");
    std::fs::create_dir(root.join("d")).unwrap();
    std::fs::set_permissions(root.join("d"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let server = ServerProc::start(&[
        "--root",
        s(&root),
        "--key",
        s(&key),
        "--chmod-existing-dirs",
    ]);
    for (overwrite, want) in [(false, 0o700), (true, 0o777 & !umask())] {
        let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Send);
        peer.offer(overwrite, vec![dir_entry(1, "d", 0o777)])
            .expect("have");
        peer.deliver(server.port, &[]);
        assert_eq!(mode_of(&root.join("d")), want, "overwrite {overwrite}");
    }

    let _m = crate::util::machine_shared();
    let dest = t.dir("dest");
    let (l, port) = listener();
    let child = spawn_get(
        port,
        &key,
        &["localhost:tool", s(&dest), "--keep-special-bits"],
    );
    serve_files(
        &l,
        &key,
        &["tool"],
        vec![file_entry(1, "tool", 0o4755, 1)],
        &[(1, b"x")],
    );
    let out = wait_output(child);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode_of(&dest.join("tool")), 0o4755 & !umask());
}

/// Runs `longhaul get` against a raw server on `port`; the caller plays the server.
fn spawn_get(port: u16, key: &Path, args: &[&str]) -> Child {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-P", "1", "--chunk", "1M", "--connect-timeout", "20"]);
    xfer_cmd("get", port, key, &all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start longhaul get")
}

fn wait_output(child: Child) -> Output {
    child.wait_with_output().expect("longhaul get ends")
}

/// As a raw server: accepts `longhaul get`, checks it asked for `want`, and answers with `entries`.
fn serve_manifest(
    l: &TcpListener,
    key: &Path,
    want: &[&str],
    entries: Vec<ManifestEntry>,
) -> RawPeer {
    let (mut peer, direction) = RawPeer::accept(l, &key_of(key), [7; 16]);
    assert_eq!(direction, Direction::Get);
    match peer.recv().expect("request") {
        Message::Request { paths } => {
            let got: Vec<&str> = paths.iter().map(RelPath::as_str).collect();
            assert_eq!(got, want);
        }
        m => panic!("expected request, got {m:?}"),
    }
    let plan = peer.recv().expect("plan");
    assert!(
        matches!(
            plan,
            Message::Plan {
                streams: 1,
                chunk_size: MIB,
                ..
            }
        ),
        "{plan:?}"
    );
    peer.send(&Message::ManifestBatch {
        entries,
        last: true,
    });
    peer
}

/// As a raw server: [`serve_manifest`], then each `(id, payload)` as one chunk on the client's one
/// data stream, its digest, and `done`.
fn serve_files(
    l: &TcpListener,
    key: &Path,
    want: &[&str],
    entries: Vec<ManifestEntry>,
    files: &[(u32, &[u8])],
) {
    let mut peer = serve_manifest(l, key, want, entries);
    peer.recv_until(|m| matches!(m, Message::Have { last: true, .. }))
        .expect("the client's have");
    let (_, mut data) = peer.accept_data(l);
    for &(id, payload) in files {
        peer.send_chunk(&mut data, id, 0, 0, payload);
        peer.recv_until(|m| matches!(m, Message::ChunkVerdict { ok: true, .. }))
            .expect("a verdict");
        peer.send(&Message::FileDone {
            file: id,
            digest: crate::raw_peer::one_chunk_digest(payload, MIB),
        });
        peer.recv_until(|m| matches!(m, Message::FileVerified { .. }))
            .expect("the file is verified");
    }
    drop(data);
    peer.done(files);
}

/// A server `get` asked for `a` lists `a` itself with mode 0777 (DEST/a exists), a new sticky
/// world-writable directory and a setuid file: the client keeps DEST/a's mode, drops the special bits
/// and applies its umask.
#[test]
fn a_hostile_server_cannot_open_up_the_clients_directories_or_make_setuid_files() {
    let _m = crate::util::machine_shared();
    let t = Scratch::new("hostile-modes-get");
    let key = t.key("key");
    let dest = t.dir("dest");
    std::fs::create_dir(dest.join("a")).unwrap();
    std::fs::set_permissions(dest.join("a"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (l, port) = listener();
    let child = spawn_get(port, &key, &["localhost:a", s(&dest)]);
    let payload = b"#!/bin/sh\n";
    serve_files(
        &l,
        &key,
        &["a"],
        vec![
            dir_entry(1, "a", 0o777),
            dir_entry(2, "a/tmp", 0o1777),
            file_entry(3, "a/tmp/su", 0o6777, payload.len() as u64),
        ],
        &[(3, payload)],
    );
    let out = wait_output(child);
    assert!(out.status.success(), "{}", stderr(&out));
    let um = umask();
    assert_eq!(mode_of(&dest.join("a")), 0o755, "DEST/a's mode changed");
    assert_eq!(mode_of(&dest.join("a/tmp")), 0o777 & !um);
    assert_eq!(mode_of(&dest.join("a/tmp/su")), 0o777 & !um);
    let ids = my_ids(&t);
    let m = std::fs::metadata(dest.join("a/tmp/su")).unwrap();
    assert_eq!((m.uid(), m.gid()), ids);
}

// ---------------------------------------------------------------------------------------------
// Finding 2: `get` accepts only what it asked for.

/// Asked for `a`, a server lists `a` and then `.profile`, `.ssh/authorized_keys` and `b`: the client
/// refuses the whole transfer with one line before it writes anything in DEST (not `a`, not a
/// journal), and without probing DEST (a `.profile` that exists there is not reported as differing).
#[test]
fn get_refuses_names_it_did_not_ask_for_before_touching_dest() {
    let _m = crate::util::machine_shared();
    let t = Scratch::new("hostile-names-get");
    let key = t.key("key");
    let dest = t.dir("dest");
    std::fs::write(dest.join(".profile"), b"# mine\n").unwrap();
    let before = listing(&dest);
    let evil = b"ssh-ed25519 AAAA attacker\n";
    let cases: Vec<Vec<ManifestEntry>> = vec![
        vec![
            file_entry(1, "a", 0o644, 1),
            file_entry(2, ".profile", 0o644, evil.len() as u64),
        ],
        vec![
            file_entry(1, "a", 0o644, 1),
            dir_entry(2, ".ssh", 0o700),
            file_entry(3, ".ssh/authorized_keys", 0o600, evil.len() as u64),
        ],
        vec![
            dir_entry(1, "a", 0o755),
            file_entry(2, "a/x", 0o644, 1),
            file_entry(3, "b", 0o644, 1),
        ],
    ];
    for entries in cases {
        let (l, port) = listener();
        let child = spawn_get(port, &key, &["localhost:a", s(&dest)]);
        let names: Vec<String> = entries.iter().map(|e| e.entry.path.to_string()).collect();
        let mut peer = serve_manifest(&l, &key, &["a"], entries);
        // The client must not answer with its resume state: it refuses. (The old client answered and
        // waited for data; closing here makes it end instead of waiting for its idle timeout.)
        let answer = peer.recv();
        drop(peer);
        drop(l);
        let out = wait_output(child);
        let line = one_line_error(&out);
        assert_eq!(out.status.code(), Some(1), "{line}");
        assert!(
            line.contains("was not requested"),
            "{names:?}: {line} (server saw {answer:?})"
        );
        assert!(!line.contains("exists"), "{line}");
        assert_eq!(listing(&dest), before, "{names:?}: DEST changed");
        assert_eq!(std::fs::read(dest.join(".profile")).unwrap(), b"# mine\n");
    }
}

/// A DEST that does not exist is not even created when the manifest is refused.
#[test]
fn get_creates_no_dest_for_a_refused_manifest() {
    let _m = crate::util::machine_shared();
    let t = Scratch::new("hostile-names-nodest");
    let key = t.key("key");
    let dest = t.join("new-dest");
    let (l, port) = listener();
    let child = spawn_get(port, &key, &["localhost:dir/a", s(&dest)]);
    let _peer = serve_manifest(&l, &key, &["dir/a"], vec![file_entry(1, "dir", 0o644, 1)]);
    let out = wait_output(child);
    let line = one_line_error(&out);
    assert!(line.contains("was not requested"), "{line}");
    assert!(!dest.exists(), "DEST was created");
}

// ---------------------------------------------------------------------------------------------
// Finding 6: reserved names and the journal.

/// Under --overwrite, a source file named like another file's temporary (the receiver's first
/// temporary is `.lh-00000000.part`) would be renamed over it, and the other file then put in place as
/// "verified" with the attacker's bytes; a file named `.longhaul-journal` would plant a journal. Both
/// are refused with a clear error, and the server goes on serving.
#[test]
fn manifests_naming_temporaries_or_the_journal_are_refused() {
    let t = Scratch::new("hostile-reserved");
    let key = t.key("key");
    let root = t.dir("root");
    let server = serve(&root, &key);
    for (i, bad) in [
        ".lh-00000000.part",
        ".longhaul-journal",
        "d/.lh-00000001.part",
    ]
    .into_iter()
    .enumerate()
    {
        let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Send);
        let err = peer
            .offer(
                true,
                vec![
                    file_entry(1, "big", 0o644, 5),
                    dir_entry(2, "d", 0o755),
                    file_entry(3, bad, 0o644, 5),
                ],
            )
            .expect_err("a manifest with a reserved name is refused");
        assert!(err.contains("reserved"), "{bad}: {err}");
        assert!(
            err.contains(bad.rsplit('/').next().unwrap()),
            "{bad}: {err}"
        );
        assert_eq!(
            listing(&root),
            Default::default(),
            "case {i}: the refused transfer left files behind"
        );
    }
    // Still serving.
    let src = t.dir("src");
    std::fs::write(src.join("ok.txt"), b"fine\n").unwrap();
    xfer_ok(
        "send",
        server.port,
        &key,
        &[s(&src.join("ok.txt")), "localhost:"],
    );
    assert_eq!(std::fs::read(root.join("ok.txt")).unwrap(), b"fine\n");
}

/// A line of the journal as the format seals it (content, space, 8 hex digits of BLAKE3, newline):
/// what anyone who can write the destination can forge.
fn sealed(content: &str) -> String {
    let sum = to_hex(&digest::hash_chunk(content.as_bytes()).0[..4]);
    format!("{content} {sum}\n")
}

/// A `.longhaul-journal` planted in the destination claims that `a.txt` (changed since: restart, so
/// "delete the old temporary") and `b.txt` (same identity: continue, "write into the temporary and
/// rename it") live in `victim1.txt` and `victim2.txt`. The next transfer must not delete, write or
/// rename either. (Receivers now write keyed journals and ignore this one entirely; the journal's unit
/// tests show that even a record with a valid tag cannot name a temporary other than its derived one.)
#[test]
fn a_forged_journal_cannot_make_the_receiver_touch_other_files() {
    let t = Scratch::new("hostile-journal");
    let key = t.key("key");
    let root = t.dir("root");
    let server = serve(&root, &key);
    let src = t.dir("src");
    std::fs::write(src.join("a.txt"), b"new a\n").unwrap();
    std::fs::write(src.join("b.txt"), b"new b, longer\n").unwrap();
    set_mtime(&src.join("a.txt"), 1_700_000_000, 5);
    set_mtime(&src.join("b.txt"), 1_700_000_000, 7);
    std::fs::write(root.join("victim1.txt"), b"precious one\n").unwrap();
    std::fs::write(root.join("victim2.txt"), b"precious two\n").unwrap();
    let b_size = std::fs::metadata(src.join("b.txt")).unwrap().len();
    let mut journal = sealed("longhaul-journal-v1");
    journal += &sealed(
        r#"{"r":"file","id":0,"path":"a.txt","size":999,"mtime_ns":1,"mode":420,"chunk_size":1048576,"temp":"victim1.txt"}"#,
    );
    journal += &sealed(&format!(
        r#"{{"r":"file","id":1,"path":"b.txt","size":{b_size},"mtime_ns":1700000000000000007,"mode":420,"chunk_size":1048576,"temp":"victim2.txt"}}"#
    ));
    std::fs::write(root.join(".longhaul-journal"), &journal).unwrap();
    let v = xfer_ok(
        "send",
        server.port,
        &key,
        &[
            s(&src.join("a.txt")),
            s(&src.join("b.txt")),
            "localhost:",
            "--chunk",
            "1M",
        ],
    );
    assert_eq!(v["files"], 2, "{v}");
    assert_eq!(
        std::fs::read(root.join("victim1.txt")).ok().as_deref(),
        Some(&b"precious one\n"[..]),
        "victim1.txt was deleted or changed"
    );
    assert_eq!(
        std::fs::read(root.join("victim2.txt")).ok().as_deref(),
        Some(&b"precious two\n"[..]),
        "victim2.txt was written or renamed"
    );
    assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"new a\n");
    assert_eq!(
        std::fs::read(root.join("b.txt")).unwrap(),
        b"new b, longer\n"
    );
}

/// The other side of the rule: a server whose tree holds a receiver's leftovers (an earlier
/// transfer's journal and partial files) leaves them out of what it sends, so a `get` of that tree
/// is not refused by the client and never carries them. Played by a raw `get` client.
#[test]
fn a_sender_leaves_reserved_names_out() {
    let t = Scratch::new("hostile-reserved-out");
    let key = t.key("key");
    let root = t.dir("root");
    let tree = root.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("data.txt"), b"the data\n").unwrap();
    std::fs::write(tree.join(".longhaul-journal"), b"old journal\n").unwrap();
    std::fs::write(tree.join("sub/.lh-00000000.part"), b"partial\n").unwrap();
    let server = serve(&root, &key);
    let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Get);
    peer.send(&Message::Request {
        paths: vec![path("tree")],
    });
    peer.send(&Message::Plan {
        streams: 1,
        chunk_size: MIB,
        rtt_ns: 100_000,
        rate_bps: 1_000_000_000,
        pace_auto_bps: None,
        fast_start: false,
        transport: longhaul_proto::msg::Transport::Tcp,
        controller: None,
    });
    let mut listed = Vec::new();
    loop {
        match peer.recv().expect("the manifest") {
            Message::ManifestBatch { entries, last } => {
                listed.extend(entries);
                if last {
                    break;
                }
            }
            m => panic!("expected the manifest, got {m:?}"),
        }
    }
    let names: Vec<&str> = listed.iter().map(|e| e.entry.path.as_str()).collect();
    assert_eq!(names, ["tree", "tree/data.txt", "tree/sub"], "{names:?}");
    peer.send(&Message::Have {
        files: Vec::new(),
        last: true,
    });
    let mut data = peer.open_data(server.port, 0);
    let (h, payload) = peer.recv_chunk(&mut data);
    assert_eq!(payload, b"the data\n");
    peer.send(&Message::ChunkVerdict {
        file: h.file,
        chunk: h.chunk,
        ok: true,
    });
    let done = peer
        .recv_until(|m| matches!(m, Message::FileDone { .. }))
        .expect("the file's digest");
    assert_eq!(
        done,
        Message::FileDone {
            file: h.file,
            digest: crate::raw_peer::one_chunk_digest(&payload, MIB)
        }
    );
    peer.send(&Message::FileVerified { file: h.file });
    peer.recv_until(|m| matches!(m, Message::Done { .. }))
        .expect("the server's done");
    peer.send(&Message::Done {
        files: 1,
        bytes: payload.len() as u64,
    });
}

/// Someone who can write the destination plants files under the names the receiver will use: a
/// hard link to a file outside the tree under the next temporary's name (derived, so predictable)
/// and under the journal's, and (when the test runs as root) a file of another user under a second
/// temporary's name. The receiver writes through none of them: each is replaced by a file of its
/// own, the linked files are untouched, and the files put in place are the receiver's.
#[test]
fn temporaries_and_journals_planted_by_others_are_never_written_through() {
    use longhaul_transfer::FileIdentity;
    use longhaul_transfer::journal::temp_path;
    let t = Scratch::new("hostile-planted-temp");
    let key = t.key("key");
    let root = t.dir("root");
    let server = serve(&root, &key);
    let src = t.dir("src");
    let (a, b) = (src.join("a.bin"), src.join("b.bin"));
    std::fs::write(&a, vec![7u8; (3 << 20) + 5]).unwrap();
    std::fs::write(&b, b"b's data\n").unwrap();
    let temp_of = |p: &Path, name: &str| {
        let m = std::fs::metadata(p).unwrap();
        let id = FileIdentity {
            size: m.len(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            chunk_size: MIB,
        };
        root.join(temp_path(&path(name), &id).as_str())
    };
    let victim = t.join("victim");
    let journal_victim = t.join("journal-victim");
    std::fs::write(&victim, b"precious\n").unwrap();
    std::fs::write(&journal_victim, b"precious too\n").unwrap();
    std::fs::hard_link(&victim, temp_of(&a, "a.bin")).unwrap();
    std::fs::hard_link(&journal_victim, root.join(".longhaul-journal")).unwrap();
    let (uid, _) = my_ids(&t);
    let b_temp = temp_of(&b, "b.bin");
    std::fs::write(&b_temp, b"planted by nobody\n").unwrap();
    if uid == 0 {
        std::os::unix::fs::chown(&b_temp, Some(65534), Some(65534)).unwrap();
    }
    let v = xfer_ok(
        "send",
        server.port,
        &key,
        &[s(&a), s(&b), "localhost:", "--chunk", "1M"],
    );
    assert_eq!(v["files"], 2, "{v}");
    assert!(
        std::fs::read(&victim).unwrap() == b"precious\n",
        "the receiver wrote through a hard link under its temporary's name"
    );
    assert!(
        std::fs::read(&journal_victim).unwrap() == b"precious too\n",
        "the receiver wrote through a hard link under its journal's name"
    );
    assert_eq!(std::fs::metadata(&victim).unwrap().nlink(), 1);
    assert_eq!(std::fs::metadata(&journal_victim).unwrap().nlink(), 1);
    assert!(std::fs::read(root.join("a.bin")).unwrap() == std::fs::read(&a).unwrap());
    assert_eq!(std::fs::read(root.join("b.bin")).unwrap(), b"b's data\n");
    for f in ["a.bin", "b.bin"] {
        assert_eq!(std::fs::metadata(root.join(f)).unwrap().uid(), uid, "{f}");
    }
}

/// A key holder's small send (a plan of 0 streams, chunks on the control connection) writes
/// nowhere the manifest and its chunk plans do not allow: an inline chunk for a file not in the
/// manifest, or one that is not its chunk, ends that transfer with the reason and puts nothing in
/// place; one for a file the server refused (it exists, no --overwrite) leaves that file as it
/// was. The server keeps serving: a real small send afterwards lands.
#[test]
fn inline_chunks_outside_the_manifest_or_their_chunk_plan_are_refused() {
    let scratch = Scratch::new("hostile-inline");
    let key_path = scratch.key("k");
    let key = key_of(&key_path);
    let dst = scratch.dir("dst");
    std::fs::write(dst.join("kept"), b"original").unwrap();
    let srv = serve(&dst, &key_path);
    let inline = |file: u32, data: &[u8]| Message::ChunkInline {
        file,
        chunk: 0,
        data: data.to_vec(),
    };

    for (entry, chunk, why) in [
        (
            file_entry(1, "a", 0o644, 3),
            inline(7, b"abc"),
            "not in the manifest",
        ),
        (
            file_entry(1, "b", 0o644, 3),
            inline(1, b"abcdef"),
            "does not match its chunk plan",
        ),
        (
            file_entry(1, "c", 0o644, 3),
            Message::ChunkInline {
                file: 1,
                chunk: 1,
                data: b"abc".to_vec(),
            },
            "does not match its chunk plan",
        ),
    ] {
        let mut peer = RawPeer::connect(srv.port, &key, Direction::Send);
        peer.offer_small(false, vec![entry]).unwrap();
        peer.send(&chunk);
        let err = peer.recv_until(|_| false).unwrap_err();
        assert!(err.contains(why), "{err:?} should say {why:?}");
    }

    let mut peer = RawPeer::connect(srv.port, &key, Direction::Send);
    peer.offer_small(false, vec![file_entry(1, "kept", 0o644, 3)])
        .unwrap();
    peer.send(&inline(1, b"bad"));
    peer.send(&Message::FileDone {
        file: 1,
        digest: crate::raw_peer::one_chunk_digest(b"bad", MIB),
    });
    let result = peer
        .recv_until(|m| matches!(m, Message::FileVerified { .. } | Message::FileFailed { .. }))
        .unwrap();
    assert!(
        matches!(&result, Message::FileFailed { reason, .. } if reason.contains("overwrite")),
        "{result:?}"
    );
    peer.done(&[(1, b"bad")]);
    assert_eq!(std::fs::read(dst.join("kept")).unwrap(), b"original");
    for name in ["a", "b", "c"] {
        assert!(!dst.join(name).exists(), "{name} was put in place");
    }

    let src = scratch.dir("src");
    std::fs::write(src.join("new"), b"xyz").unwrap();
    let v = xfer_ok(
        "send",
        srv.port,
        &key_path,
        &[s(&src.join("new")), "127.0.0.1:"],
    );
    assert_eq!(
        v["streams"], 0,
        "a 3-byte send opens no data connection: {v}"
    );
    assert_eq!(std::fs::read(dst.join("new")).unwrap(), b"xyz");
}

/// A server's `--path-rate` (named in its challenge) steers a client given no `--rate`, within
/// what the protocol carries: a server claiming 0 bit/s (a transfer paced to a standstill) is
/// refused at its challenge with one line naming the claim, before DEST exists; a claim in range
/// becomes the rate of the client's plan.
#[test]
fn a_servers_path_rate_is_taken_only_within_range() {
    let _m = crate::util::machine_shared();
    let t = Scratch::new("hostile-path-rate");
    let key = t.key("key");
    let dest = t.join("dest");
    let (l, port) = listener();

    let child = spawn_get(port, &key, &["localhost:x", s(&dest)]);
    let refused = RawPeer::accept_claiming(&l, &key_of(&key), [7; 16], Some(0));
    assert!(
        refused.is_err(),
        "the client went on after a claim of 0 bit/s"
    );
    let out = wait_output(child);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--path-rate"), "{}", stderr(&out));
    assert!(!dest.exists(), "DEST was created");

    let child = spawn_get(port, &key, &["localhost:x", s(&dest)]);
    let (mut peer, _) =
        RawPeer::accept_claiming(&l, &key_of(&key), [7; 16], Some(1_930_000_000)).unwrap();
    assert!(matches!(peer.recv(), Ok(Message::Request { .. })));
    let plan = peer.recv();
    assert!(
        matches!(
            plan,
            Ok(Message::Plan {
                rate_bps: 1_930_000_000,
                ..
            })
        ),
        "{plan:?}"
    );
    drop(peer);
    assert!(!wait_output(child).status.success());
}
