//! Issue 11, finding 3: the whole transfer session is authenticated, not only its opening handshake.
//!
//! Each attack is played against a real `longhaul server --root --key`: an on-path relay written here
//! (a TCP proxy between a real `longhaul send`/`get` and the server) passes the handshake through
//! untouched and then rewrites a later control frame (the `send_to` destination, a manifest path), or
//! replaces a chunk's payload together with its plain BLAKE3 (and the file digest to match); and a
//! data connection that presents a sniffed cookie without the session's proof injects a chunk. Each
//! must be refused with nothing written, and the server must keep serving.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use longhaul_proto::wire::{ConnKind, PREAMBLE_LEN, Preamble};
use longhaul_transfer::digest::{file_digest, hash_chunk, to_hex};
use serde_json::Value;

use crate::util::{ServerProc, bin};

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("lh-session-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create scratch dir");
        Self(p)
    }

    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    fn dir(&self, name: &str) -> PathBuf {
        let d = self.join(name);
        std::fs::create_dir_all(&d).expect("create dir");
        d
    }

    fn key(&self) -> PathBuf {
        let k = self.join("key");
        let out = Command::new(bin())
            .arg("keygen")
            .arg(&k)
            .output()
            .expect("run longhaul keygen");
        assert!(out.status.success(), "keygen: {out:?}");
        k
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn serve(root: &Path, key: &Path) -> ServerProc {
    ServerProc::start(&["--root", s(root), "--key", s(key)])
}

/// `longhaul CMD ARGS... -p PORT --key KEY -P 1 --chunk 1M --connect-timeout 5 --idle-timeout 10`.
fn xfer(cmd: &str, port: u16, key: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .arg(cmd)
        .args(args)
        .args(["-p", &port.to_string(), "--key", s(key)])
        .args(["-P", "1", "--chunk", "1M"])
        .args(["--connect-timeout", "5", "--idle-timeout", "10"])
        .output()
        .expect("run longhaul")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the command failed with one line `longhaul: error: ...` naming a failed authentication.
fn refused_for_authentication(out: &Output, what: &str) -> String {
    assert!(
        !out.status.success(),
        "{what}: the transfer succeeded; stderr:\n{}",
        stderr(out)
    );
    let err = stderr(out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: expected one line, got:\n{err}");
    assert!(lines[0].starts_with("longhaul: error: "), "{what}: {err}");
    assert!(
        lines[0].contains("failed authentication"),
        "{what}: not refused for authentication: {err}"
    );
    lines[0].to_string()
}

/// Every regular file under `dir` (relative path, bytes).
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(top: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.map(Result::unwrap) {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                walk(top, &p, out);
            } else if t.is_file() {
                let rel = p.strip_prefix(top).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Every path (files and directories) under `dir`, relative.
fn paths_under(dir: &Path) -> Vec<String> {
    fn walk(top: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.map(Result::unwrap) {
            let p = e.path();
            out.push(p.strip_prefix(top).unwrap().to_string_lossy().into_owned());
            if e.file_type().unwrap().is_dir() {
                walk(top, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut v)
        .unwrap();
    v
}

/// After an attack: a normal transfer straight to the server still works.
fn server_still_serves(t: &Scratch, port: u16, key: &Path, root: &Path) {
    let src = t.join("after.txt");
    std::fs::write(&src, b"still serving").unwrap();
    let out = xfer("send", port, key, &[s(&src), "localhost:after"]);
    assert!(out.status.success(), "after the attack: {}", stderr(&out));
    assert_eq!(
        std::fs::read(root.join("after/after.txt")).unwrap(),
        b"still serving"
    );
}

// ---------------------------------------------------------------------------------------------
// The on-path relay.

/// Rewrites one direction of a relayed connection: it is given the bytes received and not yet
/// forwarded (it may change them) and returns how many leading bytes may be forwarded now; the rest
/// waits for more input (a pattern may continue in the next read). Whatever is held when the sender
/// pauses (50 ms without bytes) is forwarded as it is, so the relay never stalls a conversation.
type Edit = Box<dyn FnMut(&mut Vec<u8>) -> usize + Send>;

/// Which edits a relayed connection gets, by its kind: (client → server, server → client).
type Edits = Arc<dyn Fn(ConnKind) -> (Edit, Edit) + Send + Sync>;

fn pass() -> Edit {
    Box::new(|buf: &mut Vec<u8>| buf.len())
}

/// Length of the longest proper prefix of `pat` that `buf` ends with.
fn partial_tail(buf: &[u8], pat: &[u8]) -> usize {
    (1..pat.len().min(buf.len() + 1))
        .rev()
        .find(|&k| buf.ends_with(&pat[..k]))
        .unwrap_or(0)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Replaces each `from` by its `to` (same length) once, wherever it appears in the stream.
fn replace_bytes(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Edit {
    let mut pending = pairs;
    Box::new(move |buf: &mut Vec<u8>| {
        pending.retain(|(from, to)| {
            assert_eq!(from.len(), to.len());
            match find(buf, from) {
                Some(i) => {
                    buf[i..i + from.len()].copy_from_slice(to);
                    false
                }
                None => true,
            }
        });
        let hold = pending
            .iter()
            .map(|(from, _)| partial_tail(buf, from))
            .max()
            .unwrap_or(0);
        buf.len() - hold
    })
}

/// Rewrites the first control frame of type `kind` with `f` and recomputes its 4-byte length prefix,
/// as an attacker on the path would; the frame's other bytes (and everything after it) pass as they
/// are.
fn rewrite_frame(kind: &str, f: impl Fn(&mut Value) + Send + 'static) -> Edit {
    let needle = format!("{{\"type\":\"{kind}\"").into_bytes();
    let mut done = false;
    Box::new(move |buf: &mut Vec<u8>| {
        if done {
            return buf.len();
        }
        let Some(i) = find(buf, &needle).filter(|&i| i >= 4) else {
            return buf.len() - partial_tail(buf, &needle);
        };
        let len = u32::from_be_bytes(buf[i - 4..i].try_into().unwrap()) as usize;
        if buf.len() < i + len {
            return i - 4;
        }
        let mut v: Value = serde_json::from_slice(&buf[i..i + len]).expect("a JSON frame");
        f(&mut v);
        let body = serde_json::to_vec(&v).unwrap();
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        buf.splice(i - 4..i + len, frame);
        done = true;
        buf.len()
    })
}

/// Copies `from` to `to` through `edit`; with `pace` (bytes per second), no faster than that;
/// counts what it forwards in `moved`.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    mut edit: Edit,
    pace: Option<u64>,
    moved: &AtomicU64,
) {
    from.set_read_timeout(Some(Duration::from_millis(50))).ok();
    let mut buf = Vec::new();
    let mut tmp = vec![0u8; 64 * 1024];
    let (start, mut sent) = (Instant::now(), 0u64);
    loop {
        if let Some(rate) = pace {
            let due = Duration::from_secs_f64(sent as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        match from.read(&mut tmp) {
            Ok(0) => {
                let _ = to.write_all(&buf);
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                let k = edit(&mut buf);
                if to.write_all(&buf[..k]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
                sent += k as u64;
                moved.fetch_add(k as u64, Ordering::Relaxed);
                buf.drain(..k);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if !buf.is_empty() {
                    if to.write_all(&buf).is_err() {
                        let _ = from.shutdown(Shutdown::Both);
                        return;
                    }
                    moved.fetch_add(buf.len() as u64, Ordering::Relaxed);
                    buf.clear();
                }
            }
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// A TCP relay on a loopback port in front of the server: every connection (control and data) is
/// passed to the server, through the edits chosen for its kind.
pub(crate) struct Relay {
    pub(crate) port: u16,
    stop: Arc<AtomicBool>,
    moved: Arc<AtomicU64>,
}

impl Relay {
    fn start(server: u16, edits: Edits) -> Self {
        Self::paced(server, edits, None)
    }

    /// A transparent relay that passes each connection's bytes, each way, at no more than
    /// `bytes_per_sec`: a transfer on loopback that lasts long enough to be interrupted on any machine.
    pub(crate) fn throttled(server: u16, bytes_per_sec: u64) -> Self {
        Self::paced(server, Arc::new(|_| (pass(), pass())), Some(bytes_per_sec))
    }

    /// [`Relay::throttled`], whose transfer control connection, once `late` is set, holds what the
    /// server says next for a second: a server that stops is heard closing its data connections
    /// before it is heard saying why.
    pub(crate) fn throttled_late_reasons(
        server: u16,
        bytes_per_sec: u64,
        late: Arc<AtomicBool>,
    ) -> Self {
        let edits: Edits = Arc::new(move |kind| {
            if kind != ConnKind::Transfer {
                return (pass(), pass());
            }
            let (late, mut held) = (Arc::clone(&late), false);
            let s2c: Edit = Box::new(move |buf: &mut Vec<u8>| {
                if !held && late.load(Ordering::Acquire) {
                    held = true;
                    std::thread::sleep(Duration::from_secs(1));
                }
                buf.len()
            });
            (pass(), s2c)
        });
        Self::paced(server, edits, Some(bytes_per_sec))
    }

    /// A relay that changes nothing (and counts what it forwards, [`Relay::bytes`]).
    pub(crate) fn transparent(server: u16) -> Self {
        Self::paced(server, Arc::new(|_| (pass(), pass())), None)
    }

    /// Bytes forwarded so far, both ways, over every connection.
    pub(crate) fn bytes(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    fn paced(server: u16, edits: Edits, pace: Option<u64>) -> Self {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let moved = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&moved);
        std::thread::spawn(move || {
            for c in l.incoming() {
                if stopped.load(Ordering::Acquire) {
                    return;
                }
                let Ok(mut client) = c else { continue };
                let edits = Arc::clone(&edits);
                let moved = Arc::clone(&counter);
                std::thread::spawn(move || {
                    client.set_nodelay(true).ok();
                    let mut pre = [0u8; PREAMBLE_LEN];
                    if client.read_exact(&mut pre).is_err() {
                        return;
                    }
                    let kind = Preamble::decode(&pre).expect("a valid preamble").kind;
                    let mut up = TcpStream::connect(("127.0.0.1", server)).unwrap();
                    up.set_nodelay(true).ok();
                    up.write_all(&pre).unwrap();
                    let (c2s, s2c) = edits(kind);
                    let (c2, u2) = (client.try_clone().unwrap(), up.try_clone().unwrap());
                    let up_moved = Arc::clone(&moved);
                    let t = std::thread::spawn(move || pump(c2, u2, c2s, pace, &up_moved));
                    pump(up, client, s2c, pace, &moved);
                    let _ = t.join();
                });
            }
        });
        Self { port, stop, moved }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

// ---------------------------------------------------------------------------------------------
// The attacks.

/// The relay itself is transparent: with no rewriting, a transfer through it succeeds (so the
/// refusals below are the rewrites' doing).
#[test]
fn a_relay_that_changes_nothing_is_transparent() {
    let t = Scratch::new("relay-pass");
    let key = t.key();
    let root = t.dir("root");
    let server = serve(&root, &key);
    let relay = Relay::start(server.port, Arc::new(|_| (pass(), pass())));
    let src = t.join("f.bin");
    let payload = random_bytes(3000);
    std::fs::write(&src, &payload).unwrap();
    let out = xfer("send", relay.port, &key, &[s(&src), "localhost:incoming"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(root.join("incoming/f.bin")).unwrap(), payload);
}

/// An on-path relay passes the handshake through and rewrites the client's `send_to`: the data would
/// land where the attacker chose. The server refuses the frame; nothing is created under its root.
#[test]
fn a_relay_rewriting_send_to_after_the_handshake_is_refused() {
    let t = Scratch::new("relay-sendto");
    let key = t.key();
    let root = t.dir("root");
    let mut server = serve(&root, &key);
    let edits: Edits = Arc::new(|kind| match kind {
        ConnKind::Transfer => (
            rewrite_frame("send_to", |v| {
                v["dest"] = Value::from("planted/by/the/relay");
            }),
            pass(),
        ),
        _ => (pass(), pass()),
    });
    let relay = Relay::start(server.port, edits);
    let src = t.join("f.txt");
    std::fs::write(&src, b"meant for incoming").unwrap();
    let out = xfer("send", relay.port, &key, &[s(&src), "localhost:incoming"]);
    let listing = paths_under(&root);
    refused_for_authentication(&out, "send_to rewritten on the path");
    assert!(listing.is_empty(), "created under the root: {listing:?}");
    server.wait_for("failed authentication");
    server_still_serves(&t, server.port, &key, &root);
    assert!(!root.join("planted").exists());
}

/// An on-path relay rewrites a manifest path the server sends to `get` (within the requested
/// directory, so only the session's authentication can tell): the client refuses the frame and
/// writes nothing.
#[test]
fn a_relay_rewriting_a_manifest_path_for_get_is_refused() {
    let t = Scratch::new("relay-manifest");
    let key = t.key();
    let root = t.dir("root");
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("dir/notes.txt"), b"harmless notes").unwrap();
    let server = serve(&root, &key);
    let edits: Edits = Arc::new(|kind| match kind {
        ConnKind::Transfer => (
            pass(),
            rewrite_frame("manifest_batch", |v| {
                for e in v["entries"].as_array_mut().unwrap() {
                    if e["entry"]["path"] == "dir/notes.txt" {
                        e["entry"]["path"] = Value::from("dir/planted-by-relay.sh");
                    }
                }
            }),
        ),
        _ => (pass(), pass()),
    });
    let relay = Relay::start(server.port, edits);
    let dest = t.join("dest");
    let out = xfer("get", relay.port, &key, &["localhost:dir", s(&dest)]);
    let written = files_under(&dest);
    refused_for_authentication(&out, "manifest rewritten on the path");
    // Only the receiver's own journal (created before the manifest arrives), naming no entry.
    assert!(
        written
            .iter()
            .all(|(p, b)| p == ".longhaul-journal" && find(b, b"planted").is_none()),
        "get wrote files: {:?}",
        written.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    assert!(!paths_under(&dest).iter().any(|p| p.contains("planted")));
    server_still_serves(&t, server.port, &key, &root);
}

/// An on-path relay replaces a chunk's payload and the plain BLAKE3 in its header (and, on the
/// control connection, the file digest to match): without a key on the chunk header, the receiver
/// would write the attacker's bytes as verified. The server refuses the header; no byte of the
/// attacker's lands under its root.
#[test]
fn a_relay_replacing_a_chunk_and_its_hash_is_refused() {
    let t = Scratch::new("relay-chunk");
    let key = t.key();
    let root = t.dir("root");
    let mut server = serve(&root, &key);
    let real = random_bytes(700);
    let evil = random_bytes(700);
    let chunk: u64 = 1 << 20;
    let (rh, eh) = (hash_chunk(&real), hash_chunk(&evil));
    let digest_hex =
        |h: &longhaul_transfer::Digest| to_hex(&file_digest(700, chunk, [h]).0).into_bytes();
    let (rd, ed) = (digest_hex(&rh), digest_hex(&eh));
    let (real2, evil2) = (real.clone(), evil.clone());
    let edits: Edits = Arc::new(move |kind| match kind {
        ConnKind::Data => (
            replace_bytes(vec![
                (rh.0.to_vec(), eh.0.to_vec()),
                (real2.clone(), evil2.clone()),
            ]),
            pass(),
        ),
        ConnKind::Transfer => (replace_bytes(vec![(rd.clone(), ed.clone())]), pass()),
        _ => (pass(), pass()),
    });
    let relay = Relay::start(server.port, edits);
    let src = t.join("f.bin");
    std::fs::write(&src, &real).unwrap();
    let out = xfer("send", relay.port, &key, &[s(&src), "localhost:"]);
    let written = files_under(&root);
    assert!(
        !written.iter().any(|(_, b)| find(b, &evil[..64]).is_some()),
        "the attacker's bytes were written: {:?} (client: {})",
        written.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        stderr(&out)
    );
    assert!(!root.join("f.bin").exists(), "f.bin was put in place");
    assert!(!out.status.success(), "the transfer succeeded");
    server.wait_for("failed authentication");
    server_still_serves(&t, server.port, &key, &root);
}

/// A relay that damages one byte of a chunk once (a fault the TCP checksum missed): the receiver
/// finds the chunk's hash wrong and the sender sends it again. The sender has already announced the
/// file's digest by then (it does so as soon as a file's chunks are sent, since the receiver takes
/// a digest early): the receiver holds it until the chunk comes again, then checks the file whole.
#[test]
fn a_chunk_damaged_on_the_way_is_sent_again_after_its_files_digest() {
    let t = Scratch::new("relay-damage");
    let key = t.key();
    let root = t.dir("root");
    let server = serve(&root, &key);
    let content = random_bytes((2 << 20) + 4321);
    let marker = content[(1 << 20) + 1000..(1 << 20) + 1064].to_vec();
    let mut damaged = marker.clone();
    damaged[7] ^= 0x40;
    let edits: Edits = Arc::new(move |kind| match kind {
        ConnKind::Data => (
            replace_bytes(vec![(marker.clone(), damaged.clone())]),
            pass(),
        ),
        _ => (pass(), pass()),
    });
    let relay = Relay::start(server.port, edits);
    let src = t.join("f.bin");
    std::fs::write(&src, &content).unwrap();
    let out = xfer("send", relay.port, &key, &[s(&src), "localhost:", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the JSON summary");
    assert_eq!(v["chunks_resent"], 1, "{v}");
    assert_eq!(v["files"], 1, "{v}");
    assert_eq!(std::fs::read(root.join("f.bin")).unwrap(), content);
}

/// A data connection that presents a transfer's cookie (sniffed on the path) but not the session's
/// proof, and injects a chunk whose header carries the payload's plain BLAKE3: it is not admitted,
/// nothing of it is written, and the session goes on with its own data connection.
#[test]
fn a_data_connection_with_a_sniffed_cookie_but_no_proof_is_not_admitted() {
    use crate::raw_peer::{RawPeer, file_entry, key_of};
    use longhaul_transfer::Message;
    use longhaul_transfer::msg::Direction;

    let t = Scratch::new("sniffed-cookie");
    let key = t.key();
    let root = t.dir("root");
    let mut server = serve(&root, &key);
    let mut peer = RawPeer::connect(server.port, &key_of(&key), Direction::Send);
    let real = b"the real content".to_vec();
    let evil = b"INJECTED CONTENT".to_vec();
    let entry = file_entry(0, "f.txt", 0o644, real.len() as u64);
    peer.offer(false, vec![entry])
        .expect("the server's resume state");

    // The attacker: the cookie, stream 0, and straight away a chunk (version 1's 64-byte header:
    // magic, file, chunk, offset, len, reserved, BLAKE3 of the payload).
    let mut inject = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    inject
        .write_all(&Preamble::data(peer.cookie, 0).encode())
        .unwrap();
    let mut h = Vec::new();
    h.extend_from_slice(b"LHCK");
    h.extend_from_slice(&0u32.to_be_bytes());
    h.extend_from_slice(&0u64.to_be_bytes());
    h.extend_from_slice(&0u64.to_be_bytes());
    h.extend_from_slice(&(evil.len() as u32).to_be_bytes());
    h.extend_from_slice(&0u32.to_be_bytes());
    h.extend_from_slice(&hash_chunk(&evil).0);
    // The server may refuse the connection (no proof) before these bytes are all written, and then
    // a write fails with a reset: that is the outcome wanted, not a failure of the test.
    let _ = inject.write_all(&h);
    let _ = inject.write_all(&evil);
    // Give the server the time to route it (ordering only: the attacker's connection comes first).
    std::thread::sleep(Duration::from_millis(500));

    // The real client's own data connection and chunk: verified, and the file is the real one.
    assert_eq!(
        peer.deliver(server.port, &[(0, &real)]),
        [Message::FileVerified { file: 0 }]
    );
    assert_eq!(std::fs::read(root.join("f.txt")).unwrap(), real);
    let written = files_under(&root);
    assert!(
        !written.iter().any(|(_, b)| find(b, &evil).is_some()),
        "the injected chunk was written"
    );
    drop(inject);
    server.wait_for("data connection refused");
    server_still_serves(&t, server.port, &key, &root);
}

/// The challenge names the transfer's cookie before the client has proven anything (a sender opens
/// its data connections in the flight of its proof). A stranger without the key who takes the cookie
/// from it, opens a data connection with a made-up proof and a chunk behind it, and then fails the
/// handshake gets nothing in: the connection waits for a key that never comes and is closed as soon
/// as the handshake fails (not at its own deadline), nothing is written, and the server keeps serving.
#[test]
fn a_stranger_with_the_challenges_cookie_gets_no_data_connection_in() {
    use longhaul_transfer::Message;
    use longhaul_transfer::msg::{DataCookie, Direction, TRANSFER_VERSION};

    let t = Scratch::new("early-cookie");
    let key = t.key();
    let root = t.dir("root");
    let mut server = serve(&root, &key);
    let frame = |sock: &mut TcpStream| -> Message {
        let mut len = [0u8; 4];
        sock.read_exact(&mut len).expect("a frame's length");
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        sock.read_exact(&mut body).expect("a frame's body");
        Message::from_json(&body).expect("a message")
    };

    let mut ctl = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    ctl.write_all(&Preamble::transfer().encode()).unwrap();
    let hello = Message::TransferHello {
        version: TRANSFER_VERSION,
        direction: Direction::Send,
        client_nonce: [7; 32],
        ticket: None,
        early_digest: false,
    };
    ctl.write_all(&hello.encode_frame()).unwrap();
    let Message::AuthChallenge {
        cookie: Some(DataCookie(cookie)),
        ..
    } = frame(&mut ctl)
    else {
        panic!("expected a challenge that names the cookie")
    };

    let evil = b"INJECTED BEFORE ANY PROOF".to_vec();
    let mut inject = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    inject
        .write_all(&Preamble::data(cookie, 0).encode())
        .unwrap();
    inject.write_all(&[0x5a; 32]).unwrap();
    let _ = inject.write_all(&evil);
    // The proof is in, the key is not: the connection waits (neither admitted nor refused yet).
    std::thread::sleep(Duration::from_millis(300));
    inject
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(inject.read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the data connection was closed before the handshake ended"
    );

    // A wrong proof: the handshake fails, and the waiting connection is refused at once.
    let guess = Message::AuthResponse {
        client_proof: hash_chunk(b"a guess"),
    };
    let failed = Instant::now();
    ctl.write_all(&guess.encode_frame()).unwrap();
    inject
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    match inject.read(&mut b) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the data connection is still open after the failed handshake: {other:?}"),
    }
    assert!(
        failed.elapsed() < Duration::from_secs(3),
        "refused only after {:?}",
        failed.elapsed()
    );
    server.wait_for("authentication failed");
    server.wait_for("data connection refused");
    assert!(
        !files_under(&root)
            .iter()
            .any(|(_, b)| find(b, &evil).is_some()),
        "the injected bytes were written"
    );
    server_still_serves(&t, server.port, &key, &root);
}

/// The hand-written peer speaks version 2 as a server too: a real `longhaul send` authenticates to it,
/// proves its data connection and sends sealed chunk headers it opens, so hostile-server tests built on
/// it are refused for their content, not for a broken seal.
#[test]
fn the_raw_test_peer_as_a_server_receives_a_real_send() {
    use crate::raw_peer::{RawPeer, key_of, listener};
    use longhaul_transfer::Message;
    use longhaul_transfer::msg::Direction;

    let t = Scratch::new("rawserver");
    let key = t.key();
    let src = t.join("f.txt");
    std::fs::write(&src, b"to a hand-written server").unwrap();
    let (l, port) = listener();
    let (k, srcp) = (key.clone(), src.clone());
    let client = std::thread::spawn(move || xfer("send", port, &k, &[s(&srcp), "localhost:"]));
    let (mut peer, direction) = RawPeer::accept(&l, &key_of(&key), [5; 16]);
    assert_eq!(direction, Direction::Send);
    assert!(matches!(peer.recv(), Ok(Message::SendTo { .. })));
    assert!(matches!(peer.recv(), Ok(Message::Plan { streams: 1, .. })));
    let Ok(Message::ManifestBatch {
        entries,
        last: true,
    }) = peer.recv()
    else {
        panic!("expected the manifest")
    };
    let id = entries[0].id;
    peer.send(&Message::Have {
        files: vec![],
        last: true,
    });
    let (stream, mut data) = peer.accept_data(&l);
    assert_eq!(stream, 0);
    let (h, payload) = peer.recv_chunk(&mut data);
    assert_eq!((h.file, h.chunk), (id, 0));
    assert_eq!(payload, b"to a hand-written server");
    peer.send(&Message::ChunkVerdict {
        file: id,
        chunk: 0,
        ok: true,
    });
    assert!(matches!(peer.recv(), Ok(Message::FileDone { .. })));
    peer.send(&Message::FileVerified { file: id });
    assert!(matches!(peer.recv(), Ok(Message::Done { .. })));
    peer.send(&Message::Done {
        files: 1,
        bytes: payload.len() as u64,
    });
    let out = client.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}
