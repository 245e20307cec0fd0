//! Console capture (issue 20), end to end: `longhaul testbed serve --bmc` reads a host's serial
//! console where it is exposed and archives it, boots and panics marked; the holder of a booking
//! reads it (`GET /api/v1/console`, `longhaul testbed console`), others get 403 and the attempt is
//! logged. Here the console is a TCP server the test plays (as ser2net or QEMU's `-serial tcp:`
//! would be), saying what a hostile or broken console says too: invalid UTF-8, terminal escapes,
//! a line of a megabyte, a flood.

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use longhaul_testkit::fixtures::TempDir;
use serde_json::Value;

use crate::testbed::{Service, get, post_booking};
use crate::util::bin;

const INVENTORY: &str = r#"
[[resource]]
id = "cern"
kind = "site"

[[resource]]
id = "cern/pc-1"
kind = "host"
"#;

pub(crate) fn private_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Books `resource` for `token`'s user from now, for an hour.
pub(crate) fn book_now(svc: &Service, token: &str, resource: &str) {
    let now = jiff::Timestamp::now().as_second();
    let (status, body) = post_booking(
        svc,
        token,
        &serde_json::json!({
            "resource": resource,
            "start": jiff::Timestamp::from_second(now).unwrap().to_string(),
            "end": jiff::Timestamp::from_second(now + 3600).unwrap().to_string(),
        }),
        None,
    );
    assert_eq!(status, 201, "{body}");
}

/// Polls `GET /api/v1/console` until `done` holds for the answer (30 s at most).
pub(crate) fn console_until(
    svc: &Service,
    token: &str,
    query: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = get(svc, token, &format!("/api/v1/console?{query}"));
        assert_eq!(status, 200, "{body}");
        if done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "console never showed it: {body}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(crate) fn texts(log: &Value) -> Vec<String> {
    log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["text"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn testbed_console_archives_marks_and_bounds_a_console() {
    let dir = TempDir::new("console");
    let console = TcpListener::bind("127.0.0.1:0").unwrap();
    let bmc = dir.0.join("bmc.toml");
    private_file(
        &bmc,
        &format!(
            "[[host]]\nid = \"cern/pc-1\"\nconsole = \"tcp:{}\"\n",
            console.local_addr().unwrap()
        ),
    );
    let db = dir.0.join("testbed.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[
            ("alice", "user", None),
            ("bob", "user", None),
            ("root", "admin", None),
        ],
        &["--bmc", &bmc.display().to_string()],
        INVENTORY,
    );
    let (alice, bob, root) = (&tokens[0], &tokens[1], &tokens[2]);
    book_now(&svc, alice, "cern/pc-1");

    // The service connects; the "host" boots, misbehaves and panics; then the console drops and
    // comes back (the service reconnects) for a second boot.
    let (mut c, _) = console.accept().unwrap();
    c.write_all(b"[    0.000000] Linux version 6.1.0-lh (debian-kernel@lists.debian.org)\r\n")
        .unwrap();
    c.write_all(b"[    0.100000] escape \x1b]0;owned\x07 and \xff\xfe bytes\n")
        .unwrap();
    c.write_all(&[b'y'; 1 << 20]).unwrap();
    c.write_all(b"\n").unwrap();
    c.write_all("spam\n".repeat(20_000).as_bytes()).unwrap();
    c.write_all(b"[   12.000000] Kernel panic - not syncing: sysrq triggered crash\n")
        .unwrap();
    drop(c);
    let (mut c, _) = console.accept().unwrap();
    c.write_all(b"[    0.000000] Linux version 6.1.0-lh (again)\n[    1.000000] init up\n")
        .unwrap();

    let log = console_until(&svc, alice, "host=cern/pc-1", |l| {
        texts(l).iter().any(|t| t.contains("init up"))
    });
    let boots = log["boots"].as_array().unwrap();
    assert_eq!(boots.len(), 2, "{log}");
    assert_eq!(boots[0]["panics"], 1);
    assert_eq!(boots[1]["panics"], 0);
    // The default is the latest boot.
    assert!(
        texts(&log)[0].ends_with("Linux version 6.1.0-lh (again)"),
        "{log}"
    );
    assert_eq!(log["lines"][0]["mark"], "boot");
    let first = console_until(&svc, alice, "host=cern/pc-1&boot=-2&limit=10000", |_| true);
    let t = texts(&first);
    assert_eq!(first["lines"][0]["mark"], "boot");
    assert!(
        t.contains(
            &"[    0.100000] escape \\u{1b}]0;owned\\u{7} and \u{fffd}\u{fffd} bytes".to_owned()
        ),
        "{t:?}"
    );
    // A line of a megabyte is stored in 4 KiB pieces; the flood is cut and says so; the panic
    // after it is kept and marked.
    assert!(t.iter().all(|l| l.len() <= 4096 * 6));
    assert!(
        t.iter().any(|l| l.contains("console lines dropped")),
        "{t:?}"
    );
    assert!(t.len() < 10_000, "{}", t.len());
    let panic = first["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["mark"] == "panic")
        .expect("panic marked");
    assert!(
        panic["text"]
            .as_str()
            .unwrap()
            .contains("sysrq triggered crash")
    );

    // Following: lines after a position, through the next boot.
    let last = log["last_seq"].as_u64().unwrap();
    c.write_all(b"after the poll\n").unwrap();
    let next = console_until(&svc, alice, &format!("host=cern/pc-1&after={last}"), |l| {
        !texts(l).is_empty()
    });
    assert_eq!(texts(&next), ["after the poll"]);

    // Who may: bob not, root with a reason; each first read is in the operations log.
    let (s, b) = get(&svc, bob, "/api/v1/console?host=cern/pc-1");
    assert_eq!(
        (s, b["code"].as_str()),
        (403, Some("no_reservation")),
        "{b}"
    );
    let (s, b) = get(
        &svc,
        bob,
        &format!("/api/v1/console?host=cern/pc-1&after={last}"),
    );
    assert_eq!(s, 403, "a follower's poll is checked too: {b}");
    let (s, b) = get(&svc, root, "/api/v1/console?host=cern/pc-1");
    assert_eq!(
        (s, b["code"].as_str()),
        (403, Some("reason_required")),
        "{b}"
    );
    let (s, _) = get(
        &svc,
        root,
        "/api/v1/console?host=cern/pc-1&reason=reading+the+panic",
    );
    assert_eq!(s, 200);
    let (_, ops) = get(&svc, root, "/api/v1/operations");
    let ops = ops["operations"].as_array().unwrap();
    let reads: Vec<&Value> = ops
        .iter()
        .filter(|o| o["action"] == "console read")
        .collect();
    assert!(
        reads
            .iter()
            .any(|o| o["actor"] == "bob" && o["result"] == "refused")
    );
    assert!(
        reads
            .iter()
            .any(|o| o["actor"] == "root" && o["grounds"] == "admin: reading the panic")
    );
    assert!(reads.iter().filter(|o| o["actor"] == "alice").count() >= 2);

    // The command line.
    let out = std::process::Command::new(bin())
        .args([
            "testbed",
            "console",
            "cern/pc-1",
            "--boots",
            "--server",
            &svc.url(""),
            "--token",
            alice,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.lines().next().unwrap().contains("1 panics"),
        "{printed}"
    );
    let out = std::process::Command::new(bin())
        .args([
            "testbed",
            "console",
            "cern/pc-1",
            "--boot",
            "-1",
            "--server",
            &svc.url(""),
            "--token",
            alice,
        ])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("[boot] [    0.000000] Linux version 6.1.0-lh (again)"),
        "{printed}"
    );
    assert!(printed.trim_end().ends_with("after the poll"), "{printed}");
}

#[test]
fn testbed_console_receives_netconsole_by_source_address() {
    let dir = TempDir::new("netconsole");
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bmc = dir.0.join("bmc.toml");
    private_file(
        &bmc,
        "[[host]]\nid = \"cern/pc-1\"\nnetconsole = \"127.0.0.1\"\n",
    );
    let db = dir.0.join("testbed.sqlite").display().to_string();
    let (svc, tokens) = Service::start_with(
        &db,
        &[("alice", "user", None)],
        &[
            "--bmc",
            &bmc.display().to_string(),
            "--netconsole",
            &format!("127.0.0.1:{port}"),
        ],
        INVENTORY,
    );
    book_now(&svc, &tokens[0], "cern/pc-1");
    // The host's kernel (extended netconsole format: level,seq,time,flags;message), and a stranger
    // on another loopback address claiming a panic.
    let host = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let stranger = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
    let to = format!("127.0.0.1:{port}");
    stranger
        .send_to(b"0,1,1,-;Kernel panic - not syncing: forged", &to)
        .unwrap();
    host.send_to(b"5,0,0,-;Linux version 6.1.0-lh (netconsole)\n", &to)
        .unwrap();
    host.send_to(
        b"4,812,12345678,-;BUG: kernel NULL pointer dereference, address: 0000000000000000",
        &to,
    )
    .unwrap();
    host.send_to(b"6,813,12345679,-;still here\n", &to).unwrap();
    let log = console_until(&svc, &tokens[0], "host=cern/pc-1", |l| {
        texts(l).iter().any(|t| t.contains("still here"))
    });
    let marks: Vec<&str> = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["mark"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(marks, ["boot", "oops", ""], "{log}");
    // Had the stranger's line been taken, it would stand before the boot, as boot 0.
    assert_eq!(log["boots"].as_array().unwrap().len(), 1, "{log}");
    let all = console_until(
        &svc,
        &tokens[0],
        "host=cern/pc-1&since=2000-01-01T00:00:00Z",
        |_| true,
    );
    assert!(!texts(&all).iter().any(|t| t.contains("forged")), "{all}");
    assert_eq!(log["boots"][0]["oopses"], 1);
    assert_eq!(log["boots"][0]["panics"], 0);
}
