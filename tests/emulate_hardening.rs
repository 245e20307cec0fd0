//! Issue 11, findings 5, 8 and 11, each attack performed end to end: a symlink planted where
//! `emulate --pcap DIR` writes its captures, a server whose file descriptors are exhausted asked for
//! a test cookie, and the emulator's control socket and state directory under a hostile umask, a
//! planted symlink and a client of another user.
//!
//! The emulator tests need root (namespaces and TUN devices) and fail otherwise (unless LONGHAUL_TEST_SKIP=1); they hold the
//! machine alone, as the other emulator tests do, and every testbed they bring up is taken down.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use longhaul_proto::Message;
use longhaul_proto::wire::{Preamble, encode_frame};

use crate::util::{
    bin, machine_alone, machine_shared, namespaces_named, netns_alone, netns_privileges, program,
    read_lines,
};

fn show(what: &str, out: &Output) {
    println!(
        "$ {what} -> {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A scratch directory of this test (root-owned, mode 0755), removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lh-sec-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// Finding 5: `--pcap DIR` must never write through a link or truncate an existing file.

/// The one-shot emulator with a capture into `dir`, running `true` on host a.
fn emulate_pcap(dir: &Path) -> Output {
    let out = Command::new(bin())
        .args(["emulate", "--rtt", "2ms", "--no-server", "--pcap"])
        .arg(dir)
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("run longhaul emulate");
    show(&format!("longhaul emulate --pcap {}", dir.display()), &out);
    out
}

#[test]
fn pcap_refuses_a_planted_symlink_and_never_truncates_an_existing_file() {
    let Some(_machine) = netns_alone() else {
        return;
    };
    let scratch = Scratch::new("pcap");
    let victim = scratch.0.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let before = namespaces_named("lh-");

    // 1. A symlink planted where a_to_b.pcap will be created, pointing at the victim.
    let cap = scratch.0.join("cap");
    std::fs::create_dir(&cap).unwrap();
    std::os::unix::fs::symlink(&victim, cap.join("a_to_b.pcap")).unwrap();
    let out = emulate_pcap(&cap);
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(&victim).unwrap()),
        "precious\n",
        "the emulator wrote through the symlink {}/a_to_b.pcap into the victim",
        cap.display()
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "a planted symlink must be refused"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}/a_to_b.pcap", cap.display())) && stderr.contains("exists"),
        "the error names the file and why: {stderr}"
    );
    assert!(!cap.join("b_to_a.pcap").exists(), "nothing else created");

    // 2. A regular file where b_to_a.pcap will be created: kept as it is.
    let cap2 = scratch.0.join("cap2");
    std::fs::create_dir(&cap2).unwrap();
    std::fs::write(cap2.join("b_to_a.pcap"), "an earlier capture\n").unwrap();
    let out = emulate_pcap(&cap2);
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(cap2.join("b_to_a.pcap")).unwrap()),
        "an earlier capture\n",
        "the emulator truncated an existing capture file"
    );
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}/b_to_a.pcap", cap2.display())),
        "{stderr}"
    );
    assert!(
        !cap2.join("a_to_b.pcap").exists(),
        "the file this run created before the refusal is removed again"
    );

    // 3. DIR itself a symlink to another directory: not followed.
    let elsewhere = scratch.0.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let cap3 = scratch.0.join("cap3");
    std::os::unix::fs::symlink(&elsewhere, &cap3).unwrap();
    let out = emulate_pcap(&cap3);
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "the emulator created captures through the symlink {}",
        cap3.display()
    );
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));

    // 4. A fresh directory still gets both captures.
    let cap4 = scratch.0.join("cap4");
    let out = emulate_pcap(&cap4);
    assert!(out.status.success());
    for f in ["a_to_b.pcap", "b_to_a.pcap"] {
        let m = std::fs::symlink_metadata(cap4.join(f)).unwrap();
        assert!(m.is_file() && m.len() >= 24, "{f}: a pcap header at least");
    }
    assert_eq!(namespaces_named("lh-"), before, "namespaces left behind");
}

// ---------------------------------------------------------------------------------------------
// Finding 8: randomness must fail closed; a server out of file descriptors must not hand out a
// guessable cookie.

/// The cookie the old fallback produced: `(nanos ^ pointer) >> 8i ^ i` for byte i. Both the time in
/// nanoseconds (< 2^64 until 2554) and a pointer fit in 64 bits, so bytes 8..16 were exactly 8..=15.
fn is_fallback_cookie(cookie: &[u8; 16]) -> bool {
    cookie[8..].iter().zip(8u8..).all(|(&b, i)| b == i)
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

fn read_message(s: &mut TcpStream) -> Message {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame from the server");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    Message::from_json(&body).unwrap()
}

/// A `longhaul server` of this test, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    log: std::sync::mpsc::Receiver<String>,
}

impl Server {
    fn start() -> Self {
        let mut child = Command::new(bin())
            .args(["server", "-p", "0", "--log", "info"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start longhaul server");
        let rx = read_lines(child.stderr.take().unwrap(), None, |_| true);
        let port = loop {
            let line = rx.recv_timeout(Duration::from_secs(20)).expect("listening");
            if let Some(rest) = line.strip_prefix("longhaul server listening on ") {
                let addr = rest.split_whitespace().next().unwrap();
                break addr.rsplit(':').next().unwrap().parse().unwrap();
            }
        };
        Self {
            child,
            port,
            log: rx,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_out_of_file_descriptors_never_hands_out_a_guessable_cookie() {
    let _machine = machine_shared();
    if !program("prlimit", "util-linux") {
        return;
    }
    let server = Server::start();
    let pid = server.child.id();
    // Let the server settle, then lower its descriptor limit to just above what it holds (silent
    // connections fill whatever slots are free below the limit).
    std::thread::sleep(Duration::from_millis(200));
    let limit = open_fds(pid) + 2;
    let set = Command::new("prlimit")
        .args([
            "--pid",
            &pid.to_string(),
            &format!("--nofile={limit}:{limit}"),
        ])
        .status()
        .unwrap();
    assert!(set.success(), "prlimit failed");

    // The attacker's control connection takes one descriptor ...
    let mut ctrl = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    ctrl.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    ctrl.write_all(&Preamble::control().encode()).unwrap();
    // ... and silent connections take the rest (each is held for the handshake timeout, 10 s),
    // until one waits in the listen queue because the server cannot accept it: EMFILE, so it cannot
    // open a file either.
    let mut fillers = Vec::new();
    let start = Instant::now();
    'exhausted: loop {
        assert!(
            fillers.len() < 64 && start.elapsed() < Duration::from_secs(5),
            "the server never ran out of descriptors (limit {limit})"
        );
        fillers.push(TcpStream::connect(("127.0.0.1", server.port)).unwrap());
        std::thread::sleep(Duration::from_millis(30));
        while let Ok(line) = server.log.try_recv() {
            if line.contains("accept") && line.contains("Too many open files") {
                break 'exhausted;
            }
        }
    }
    ctrl.write_all(&encode_frame(&Message::Hello {
        software: "fd exhaustion".into(),
    }))
    .unwrap();
    match read_message(&mut ctrl) {
        Message::Welcome { cookie, .. } => {
            let cookie = longhaul_hex(&cookie);
            assert!(
                !is_fallback_cookie(&cookie),
                "the server handed out the time-and-pointer fallback cookie {cookie:02x?}: bytes \
8..16 are 8..=15, the rest is the clock XOR an address"
            );
        }
        // Failing closed: the session is refused with a reason.
        Message::Error { message } => {
            assert!(message.contains("random"), "{message}");
        }
        m => panic!("expected a welcome or an error, got {m:?}"),
    }
    drop(fillers);
}

fn longhaul_hex(s: &str) -> [u8; 16] {
    assert_eq!(s.len(), 32, "a 16-byte cookie in hex: {s}");
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[test]
fn the_fallback_cookie_pattern_is_what_the_old_code_made() {
    // The shape the attack test looks for, computed as the old `random::fill` did.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let buf = [0u8; 16];
    let salt = buf.as_ptr() as usize as u128;
    let mut c = [0u8; 16];
    for (i, b) in c.iter_mut().enumerate() {
        *b = ((t ^ salt) >> ((i % 16) * 8)) as u8 ^ i as u8;
    }
    assert!(is_fallback_cookie(&c), "{c:02x?}");
    assert!(!is_fallback_cookie(&[0u8; 16]));
}

// ---------------------------------------------------------------------------------------------
// Finding 11: the control socket of a named testbed is 0600 in a 0700 directory whatever the umask,
// only root and the uid that started the emulator may use it, and a symlink planted at the state
// directory is not followed. The state directory is moved into a scratch directory
// (LONGHAUL_EMULATE_DIR), away from the machine's testbeds.

/// `longhaul emulate ARGS` with the state in `state`, run by `sh -c PREFIX "$@"`, e.g. with a umask
/// or under `setpriv` as another user.
fn emulate_as(state: &Path, prefix: &str, args: &[&str]) -> Output {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{prefix} \"$@\""))
        .arg("sh")
        .arg(bin())
        .arg("emulate")
        .args(args)
        .env("LONGHAUL_EMULATE_DIR", state)
        .stdin(Stdio::null())
        .output()
        .expect("run longhaul emulate");
    show(
        &format!("{prefix} longhaul emulate {}", args.join(" ")),
        &out,
    );
    out
}

/// Takes the named testbed down (as root) when dropped.
struct DownOnDrop<'a>(&'a Path, String);

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = Command::new(bin())
            .args(["emulate", "down", "--name", &self.1])
            .env("LONGHAUL_EMULATE_DIR", self.0)
            .output();
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// Runs as nobody (uid and gid 65534, no supplementary groups).
const AS_NOBODY: &str = "setpriv --reuid=65534 --regid=65534 --clear-groups";
/// As nobody, but with CAP_DAC_OVERRIDE: file modes do not stop it, so only the emulator's check of
/// the peer's credentials can.
const AS_NOBODY_WITH_DAC_OVERRIDE: &str = "setpriv --reuid=65534 --regid=65534 --clear-groups \
--inh-caps=+dac_override --ambient-caps=+dac_override";

#[test]
fn the_control_socket_is_private_whatever_the_umask_and_refuses_other_users() {
    if !netns_privileges() {
        return;
    }
    if !program("setpriv", "util-linux") {
        return;
    }
    let _machine = machine_alone();
    let scratch = Scratch::new("ctl");
    let state = scratch.0.join("emulate");
    let name = format!("u{}", std::process::id() % 100_000);
    let _down = DownOnDrop(&state, name.clone());
    let up = emulate_as(
        &state,
        "umask 000; exec",
        &["up", "--name", &name, "--rtt", "2ms", "--no-server"],
    );
    assert!(up.status.success());
    assert_eq!(namespaces_named(&format!("lh-{name}-")), 2);

    // Started with umask 000: the directory is 0700, the socket 0600, the state and log files too.
    let sock = state.join(format!("{name}.sock"));
    let modes: Vec<(PathBuf, u32)> = [
        state.clone(),
        sock.clone(),
        state.join(format!("{name}.json")),
        state.join(format!("{name}.log")),
    ]
    .into_iter()
    .map(|p| {
        let m = mode(&p);
        println!("{} {m:o}", p.display());
        (p, m)
    })
    .collect();
    assert_eq!(modes[0].1, 0o700, "{}", state.display());
    assert!(
        std::fs::symlink_metadata(&sock)
            .unwrap()
            .file_type()
            .is_socket()
    );
    for (p, m) in &modes[1..] {
        assert_eq!(m & 0o077, 0, "{} is mode {m:o}", p.display());
    }

    // Another user can neither stop nor query the testbed ...
    for cmd in [["down", "--name", &name], ["status", "--name", &name]] {
        let out = emulate_as(&state, AS_NOBODY, &cmd);
        assert_ne!(out.status.code(), Some(0), "nobody ran `{}`", cmd[0]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Permission denied"), "{err}");
    }
    // ... not even past the file modes: the emulator checks who is asking (SO_PEERCRED).
    let out = emulate_as(
        &state,
        AS_NOBODY_WITH_DAC_OVERRIDE,
        &["link", "--name", &name, "down"],
    );
    assert_ne!(out.status.code(), Some(0), "nobody cut the path");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("uid 65534") && err.contains("refused"),
        "a clear refusal naming the uid: {err}"
    );
    let out = emulate_as(
        &state,
        AS_NOBODY_WITH_DAC_OVERRIDE,
        &["down", "--name", &name],
    );
    assert_ne!(out.status.code(), Some(0), "nobody took the testbed down");

    // The testbed is still up, its path never cut, and root still controls it.
    let st = emulate_as(&state, "exec", &["status", "--name", &name, "--json"]);
    assert!(st.status.success(), "the testbed should still be up");
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(st["testbeds"][0]["link_up"], true, "{st}");
    assert!(
        emulate_as(&state, "exec", &["down", "--name", &name])
            .status
            .success()
    );
    assert_eq!(namespaces_named(&format!("lh-{name}-")), 0);
}

#[test]
fn a_symlink_planted_at_the_state_directory_is_not_followed() {
    let Some(_machine) = netns_alone() else {
        return;
    };
    let scratch = Scratch::new("state");
    let victim = scratch.0.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o777)).unwrap();
    let state = scratch.0.join("emulate");
    std::os::unix::fs::symlink(&victim, &state).unwrap();
    let name = format!("s{}", std::process::id() % 100_000);
    let _down = DownOnDrop(&state, name.clone());
    let up = emulate_as(
        &state,
        "exec",
        &["up", "--name", &name, "--rtt", "2ms", "--no-server"],
    );
    let planted: Vec<_> = std::fs::read_dir(&victim)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        planted.is_empty(),
        "the emulator followed the link {} and created {planted:?} in {}",
        state.display(),
        victim.display()
    );
    assert_eq!(up.status.code(), Some(1));
    let err = String::from_utf8_lossy(&up.stderr);
    assert!(
        err.contains(&state.display().to_string()) && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(namespaces_named(&format!("lh-{name}-")), 0);
}
