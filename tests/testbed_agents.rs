//! Hosts that register themselves (issue 20), end to end: `longhaul agent` runs in a network
//! namespace of its own (a testbed host, its facts its own interfaces) and reports to `longhaul
//! testbed serve` across a veth pair. It registers pending; an admin accepts it and it joins the
//! inventory; an agent with another key is refused; an MTU changed on the host is an event; an
//! agent that stops heartbeating turns the host unreachable within the agent timeout and the
//! holder of the booking covering it is told through the webhook; it comes back reachable. Hostile
//! reports (no key, a site's id, a parent not in the inventory, facts too large or with terminal
//! escapes, a flood of registrations) are refused by name.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use longhaul_testkit::fixtures::TempDir;
use serde_json::{Value, json};

use crate::testbed::{Service, agent, get, send};
use crate::testbed_console::book_now;
use crate::util::{bin, netns_privileges};

const INVENTORY: &str = r#"
[[resource]]
id = "cern"
kind = "site"

[[resource]]
id = "cern/pc-1"
kind = "host"
"#;

/// A namespace `lh-agt-PID` joined to this one by a veth pair: 10.77.N.1 here, 10.77.N.2 there
/// (N from the pid, so two test runs do not clash). Deleted when dropped.
struct HostNet {
    ns: String,
    here: String,
    there: String,
    server_ip: String,
}

impl HostNet {
    fn new() -> Self {
        let id = std::process::id();
        let ns = format!("lh-agt-{id}");
        let here = format!("lh-ag{}a", id % 100_000);
        let there = format!("lh-ag{}b", id % 100_000);
        let n = id % 250;
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().expect("ip");
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let net = Self {
            ns: ns.clone(),
            here: here.clone(),
            there: there.clone(),
            server_ip: format!("10.77.{n}.1"),
        };
        ip(&["netns", "add", &ns]);
        ip(&[
            "link", "add", &here, "type", "veth", "peer", "name", &there, "netns", &ns,
        ]);
        ip(&["addr", "add", &format!("10.77.{n}.1/30"), "dev", &here]);
        ip(&["link", "set", &here, "up"]);
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("10.77.{n}.2/30"),
            "dev",
            &there,
        ]);
        ip(&["-n", &ns, "link", "set", &there, "mtu", "1500", "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        net
    }

    /// `longhaul agent ARGS` in the namespace.
    fn agent(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns])
            .arg(bin())
            .arg("agent");
        cmd.args(args);
        cmd
    }
}

impl Drop for HostNet {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.here])
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// A webhook receiver: each POST's JSON body, as it arrives.
fn webhook() -> (String, mpsc::Receiver<Value>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok()
                && let Ok(v) = serde_json::from_slice(&body)
            {
                let _ = tx.send(v);
            }
            let _ = conn.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (url, rx)
}

/// Polls `GET path` until `done` holds for the answer (60 s at most).
fn until(svc: &Service, token: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = get(svc, token, path);
        assert_eq!(status, 200, "{body}");
        if done(&body) {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{path} never showed it: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn events_of(svc: &Service, token: &str, kind: &str) -> Vec<Value> {
    let (_, log) = get(svc, token, "/api/v1/hosts/events?host=cern/pc-7");
    log["event"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .cloned()
        .collect()
}

fn kill(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn testbed_agent_registers_is_accepted_reports_changes_and_goes_unreachable() {
    if !netns_privileges() {
        return;
    }
    let net = HostNet::new();
    let dir = TempDir::new("agents");
    let (hook, hooks) = webhook();
    let db = dir.0.join("tb.sqlite").display().to_string();
    let listen = format!("{}:0", net.server_ip);
    let (svc, tokens) = Service::start_with(
        &db,
        &[("root", "admin", None), ("alice", "user", None)],
        &[
            "--listen",
            &listen,
            "--agent-timeout",
            "3",
            "--webhook",
            &hook,
        ],
        INVENTORY,
    );
    let (admin, alice) = (&tokens[0], &tokens[1]);
    let url = svc.url("");
    let key = dir.0.join("agent.key");
    let key = key.to_str().unwrap();
    let args = ["--server", &url, "--host", "cern/pc-7", "--key-file", key];

    // First run: a key is made (private), the host registers, pending.
    let mut first = net.agent(&args).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(first.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("with key ") {
        said.clear();
        assert!(stderr.read_line(&mut said).unwrap() > 0, "the agent ended");
    }
    let printed = said
        .split("with key ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    std::thread::spawn(move || for _ in stderr.lines() {});
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let listed = until(&svc, alice, "/api/v1/hosts", |b| {
        b["host"][0]["state"] == "pending"
    });
    let host = &listed["host"][0];
    assert_eq!(host["host"], "cern/pc-7");
    assert_eq!(host["fingerprint"], printed.as_str(), "{said}");
    let nic = &host["facts"]["nics"][0];
    assert_eq!(
        nic["name"],
        net.there.as_str(),
        "the namespace's own interface: {host}"
    );
    assert_eq!(nic["mtu"], 1500);
    assert!(
        host["facts"]["congestion_controls"]
            .as_array()
            .unwrap()
            .len()
            >= 2
    );
    // Not bookable before an admin accepts it.
    let (status, _) = get(&svc, alice, "/api/v1/resources");
    assert_eq!(status, 200);
    let (_, resources) = get(&svc, alice, "/api/v1/resources");
    assert!(!resources.to_string().contains("cern/pc-7"), "{resources}");

    // A user may not accept it; an admin does, and it joins the inventory.
    let accept = |token: &str| {
        send(
            agent()
                .post(&svc.url("/api/v1/hosts/accept?host=cern/pc-7"))
                .set("Authorization", &format!("Bearer {token}")),
            None,
        )
    };
    let (status, body) = accept(alice);
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("admin_only")),
        "{body}"
    );
    let out = Command::new(bin())
        .args([
            "testbed",
            "hosts",
            "accept",
            "cern/pc-7",
            "--server",
            &url,
            "--token",
            admin,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, resources) = get(&svc, alice, "/api/v1/resources");
    assert!(
        resources.to_string().contains("\"cern/pc-7\""),
        "{resources}"
    );

    // Another key for the same host is refused, by name, and the registration is unchanged.
    let other = dir.0.join("other.key");
    let out = net
        .agent(&[
            "--server",
            &url,
            "--host",
            "cern/pc-7",
            "--key-file",
            other.to_str().unwrap(),
            "--once",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cern/pc-7 is registered with another key"),
        "{err}"
    );
    assert!(err.contains("401 wrong_key"), "{err}");

    // A changed fact (the host's MTU) is an event.
    let ip = Command::new("ip")
        .args(["-n", &net.ns, "link", "set", &net.there, "mtu", "9000"])
        .status()
        .unwrap();
    assert!(ip.success());
    let changed = until(&svc, alice, "/api/v1/hosts/events?host=cern/pc-7", |b| {
        b.to_string().contains("mtu 1500 → 9000")
    });
    assert!(changed["event"][0]["kind"] == "facts_changed", "{changed}");

    // Alice books it; its agent stops: unreachable within the timeout, and she is told.
    book_now(&svc, alice, "cern/pc-7");
    std::thread::sleep(Duration::from_millis(1500));
    kill(first);
    let stopped = Instant::now();
    let told = hooks
        .recv_timeout(Duration::from_secs(30))
        .expect("the webhook is called");
    let took = stopped.elapsed();
    assert_eq!(told["event"], "unreachable", "{told}");
    assert_eq!(told["host"], "cern/pc-7");
    assert!(
        told["bookings"][0].as_str().unwrap().ends_with("(alice)"),
        "{told}"
    );
    // The last report came at most a heartbeat (1 s) before the kill; the watch looks every
    // second: unreachable between 2 and 3 + 1 s after, with slack for a loaded machine.
    assert!(took >= Duration::from_secs(2), "too soon: {took:?}");
    assert!(took < Duration::from_secs(8), "too late: {took:?}");
    let listed = until(&svc, alice, "/api/v1/hosts", |b| {
        b["host"][0]["reachable"] == false
    });
    assert_eq!(
        listed["host"][0]["hung"], false,
        "no console declared: {listed}"
    );
    let unreachable = events_of(&svc, alice, "unreachable");
    assert_eq!(unreachable.len(), 1, "{unreachable:?}");
    assert!(
        unreachable[0]["detail"]
            .as_str()
            .unwrap()
            .contains("agent timeout 3 s")
    );

    // It comes back.
    let again = net.agent(&args).stderr(Stdio::null()).spawn().unwrap();
    let told = hooks
        .recv_timeout(Duration::from_secs(30))
        .expect("the webhook is called again");
    assert_eq!(told["event"], "reachable", "{told}");
    until(&svc, alice, "/api/v1/hosts", |b| {
        b["host"][0]["reachable"] == true
    });
    kill(again);

    // A restarted service still has the accepted host in its inventory.
    drop(svc);
    let (svc, _) = Service::start_with(&db, &[], &["--listen", &listen], INVENTORY);
    let (_, resources) = get(&svc, alice, "/api/v1/resources");
    assert!(
        resources.to_string().contains("\"cern/pc-7\""),
        "{resources}"
    );
}

/// Reports a hostile agent or a stranger sends are refused with the reason, and never register a
/// host; a flood of registrations stops at the cap.
#[test]
fn testbed_agent_reports_that_are_hostile_are_refused() {
    let dir = TempDir::new("agents-hostile");
    hostile_reports(&dir.0.join("tb.sqlite").display().to_string());
}

#[test]
fn testbed_postgres_agent_reports_that_are_hostile_are_refused() {
    let Some(pg) = crate::util::postgres() else {
        return;
    };
    hostile_reports(&pg.database());
}

fn hostile_reports(db: &str) {
    // cern/pc-1 has a power endpoint, so that a refused power request is logged (below).
    let dir = TempDir::new("agents-hostile-bmc");
    let bmc = dir.0.join("bmc.toml");
    crate::testbed_console::private_file(
        &bmc,
        "[[host]]\nid = \"cern/pc-1\"\ncommand = { status = [\"echo\", \"off\"], on = [\"true\"], off = [\"true\"] }\n",
    );
    let (svc, tokens) = Service::start_with(
        db,
        &[("alice", "user", None)],
        &["--bmc", &bmc.display().to_string()],
        INVENTORY,
    );
    let key = |i: usize| format!("{i:064x}");
    let report = |auth: Option<&str>, body: &Value| {
        let mut req = agent().post(&svc.url("/api/v1/agent/report"));
        if let Some(k) = auth {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        send(req, Some(body))
    };
    let facts = json!({"congestion_controls": ["reno"], "nics": [], "longhaul_version": "0.1.0"});
    let body = |host: &str| json!({"host": host, "facts": facts});

    let (status, b) = report(None, &body("cern/pc-8"));
    assert_eq!(status, 401, "{b}");
    let (status, b) = report(Some("not-a-key"), &body("cern/pc-8"));
    assert_eq!(status, 401, "{b}");
    let (status, b) = report(Some(&key(1)), &body("cern"));
    assert_eq!(
        (status, b["code"].as_str()),
        (422, Some("not_a_host")),
        "{b}"
    );
    let (status, b) = report(Some(&key(1)), &body("fnal/pc-1"));
    assert_eq!(
        (status, b["code"].as_str()),
        (422, Some("unknown_parent")),
        "{b}"
    );
    assert!(
        b["message"].as_str().unwrap().contains("fnal is not in it"),
        "{b}"
    );
    let (status, b) = report(Some(&key(1)), &body("../etc"));
    assert_eq!(status, 400, "{b}");

    let mut bad = body("cern/pc-8");
    bad["facts"]["hostname"] = json!("pc\u{1b}]0;owned\u{7}");
    let (status, b) = report(Some(&key(1)), &bad);
    assert_eq!(
        (status, b["code"].as_str()),
        (400, Some("invalid_facts")),
        "{b}"
    );
    let mut bad = body("cern/pc-8");
    bad["facts"]["nics"] = (0..300)
        .map(|i| {
            json!({"name": format!("e{i}"), "operstate": "up", "mtu": 1500, "speed_mbps": null,
            "driver": null, "tso": null, "gso": null, "gro": null})
        })
        .collect();
    let (status, b) = report(Some(&key(1)), &bad);
    assert_eq!(
        (status, b["code"].as_str()),
        (400, Some("invalid_facts")),
        "{b}"
    );
    let mut bad = body("cern/pc-8");
    bad["facts"]["cpu_model"] = json!("x".repeat(300 * 1024));
    let (status, b) = report(Some(&key(1)), &bad);
    assert_eq!(status, 413, "{b}");
    let mut bad = body("cern/pc-8");
    bad["facts"]["owner"] = json!("root");
    let (status, b) = report(Some(&key(1)), &bad);
    assert_eq!(
        (status, b["code"].as_str()),
        (400, Some("invalid_body")),
        "{b}"
    );
    let (_, hosts) = get(&svc, &tokens[0], "/api/v1/hosts");
    assert_eq!(hosts["host"].as_array().unwrap().len(), 0, "{hosts}");

    // A flood of new hosts: 64 wait for acceptance, the next is refused until some are dealt with.
    for i in 0..64 {
        let (status, b) = report(Some(&key(i + 10)), &body(&format!("cern/flood-{i}")));
        assert_eq!(status, 202, "{b}");
    }
    let (status, b) = report(Some(&key(99)), &body("cern/flood-64"));
    assert_eq!(
        (status, b["code"].as_str()),
        (429, Some("too_many_pending")),
        "{b}"
    );
    // A registered host's own reports still go through.
    let (status, b) = report(Some(&key(10)), &body("cern/flood-0"));
    assert_eq!((status, b["state"].as_str()), (200, Some("pending")), "{b}");
    let (_, hosts) = get(&svc, &tokens[0], "/api/v1/hosts");
    assert_eq!(hosts["host"].as_array().unwrap().len(), 64);
    let (_, log) = get(&svc, &tokens[0], "/api/v1/hosts/events?limit=1000");
    let events = log["event"].as_array().unwrap();
    assert_eq!(events.len(), 64, "one registration each");
    assert_eq!(events[0]["host"], "cern/flood-63", "newest first");
    assert!(events.iter().all(|e| e["kind"] == "registered"));
    // A NUL byte in a reason, refused and logged (PostgreSQL's text cannot hold it): no server
    // error, and the log keeps the reason with the NUL replaced.
    let (status, b) = send(
        agent()
            .post(&svc.url("/api/v1/power"))
            .set("Authorization", &format!("Bearer {}", tokens[0])),
        Some(&json!({"host": "cern/pc-1", "action": "on", "reason": "a\u{0}b"})),
    );
    assert_eq!(
        (status, b["code"].as_str()),
        (403, Some("no_reservation")),
        "{b}"
    );
    let (_, ops) = get(&svc, &tokens[0], "/api/v1/operations?host=cern/pc-1");
    assert_eq!(ops["operations"][0]["reason"], "a\u{fffd}b", "{ops}");
    // A NUL byte in a filter: nothing matches, no server error.
    for path in [
        "/api/v1/hosts/events?host=cern%00x",
        "/api/v1/operations?host=cern%00x",
    ] {
        let (status, b) = get(&svc, &tokens[0], path);
        assert_eq!(status, 200, "{path}: {b}");
        assert_eq!(
            b.as_object().unwrap().values().next().unwrap(),
            &json!([]),
            "{b}"
        );
    }
}

/// Two accepted hosts whose agents stop, each with a console the service reads: the one whose
/// console still speaks is unreachable, the one whose console is silent too is hung.
#[test]
fn testbed_a_host_silent_on_its_console_too_is_hung() {
    let dir = TempDir::new("agents-hung");
    let speaking = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let bmc = dir.0.join("bmc.toml");
    crate::testbed_console::private_file(
        &bmc,
        &format!(
            "[[host]]\nid = \"cern/pc-1\"\nconsole = \"tcp:{}\"\n\n\
             [[host]]\nid = \"cern/pc-2\"\nconsole = \"tcp:{}\"\n",
            speaking.local_addr().unwrap(),
            silent.local_addr().unwrap()
        ),
    );
    // pc-1's console says a line every 200 ms; pc-2's accepts the connection and says nothing.
    std::thread::spawn(move || {
        for conn in speaking.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut n = 0u64;
            while conn.write_all(format!("tick {n}\n").as_bytes()).is_ok() {
                n += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming().flatten() {
            held.push(conn);
        }
    });
    let db = dir.0.join("tb.sqlite").display().to_string();
    let inventory = format!("{INVENTORY}\n[[resource]]\nid = \"cern/pc-2\"\nkind = \"host\"\n");
    let (svc, tokens) = Service::start_with(
        &db,
        &[("root", "admin", None)],
        &["--bmc", &bmc.display().to_string(), "--agent-timeout", "3"],
        &inventory,
    );
    let admin = &tokens[0];
    let url = svc.url("");
    let agents: Vec<Child> = ["cern/pc-1", "cern/pc-2"]
        .iter()
        .map(|host| {
            let key = dir.0.join(format!("{}.key", host.replace('/', "-")));
            Command::new(bin())
                .args(["agent", "--server", &url, "--host", host, "--key-file"])
                .arg(&key)
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    until(&svc, admin, "/api/v1/hosts", |b| {
        b["host"].as_array().is_some_and(|h| h.len() == 2)
    });
    for host in ["cern/pc-1", "cern/pc-2"] {
        let (status, b) = send(
            agent()
                .post(&svc.url(&format!("/api/v1/hosts/accept?host={host}")))
                .set("Authorization", &format!("Bearer {admin}")),
            None,
        );
        assert_eq!(status, 200, "{b}");
    }
    std::thread::sleep(Duration::from_millis(1500));
    for a in agents {
        kill(a);
    }
    let listed = until(&svc, admin, "/api/v1/hosts", |b| {
        b["host"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["reachable"] == false)
    });
    let hosts = listed["host"].as_array().unwrap();
    assert_eq!(
        (hosts[0]["host"].as_str(), &hosts[0]["hung"]),
        (Some("cern/pc-1"), &json!(false))
    );
    assert_eq!(
        (hosts[1]["host"].as_str(), &hosts[1]["hung"]),
        (Some("cern/pc-2"), &json!(true))
    );
    let (_, log) = get(&svc, admin, "/api/v1/hosts/events");
    let kinds: Vec<(String, String, String)> = log["event"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "hung" || e["kind"] == "unreachable")
        .map(|e| {
            (
                e["host"].as_str().unwrap().to_owned(),
                e["kind"].as_str().unwrap().to_owned(),
                e["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    for (host, kind, detail) in &kinds {
        match host.as_str() {
            "cern/pc-1" => {
                assert_eq!(kind, "unreachable");
                assert!(detail.contains("its console still speaks"), "{detail}");
            }
            _ => {
                assert_eq!(kind, "hung");
                assert!(detail.contains("console silent as long"), "{detail}");
            }
        }
    }
}

/// The agent's key file: a symbolic link planted where it would be (to a file root can read, or
/// dangling where root would write) is refused, never read nor written through; so is a key file
/// others may read, or one that holds no key. Nothing is sent.
#[test]
fn testbed_agent_refuses_a_planted_or_exposed_key_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("agent-key");
    let run = |key: &std::path::Path| {
        // No service listens on port 9: a key that passed would fail later, differently.
        let out = Command::new(bin())
            .args([
                "agent",
                "--server",
                "http://127.0.0.1:9",
                "--host",
                "cern/pc-1",
                "--once",
            ])
            .arg("--key-file")
            .arg(key)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let secret = dir.0.join("secret");
    crate::testbed_console::private_file(&secret, &format!("{}\n", "a".repeat(64)));
    let planted = dir.0.join("planted.key");
    std::os::unix::fs::symlink(&secret, &planted).unwrap();
    let err = run(&planted);
    assert!(err.contains("is a symbolic link; refused"), "{err}");
    let dangling = dir.0.join("dangling.key");
    let target = dir.0.join("made-through-the-link");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();
    let err = run(&dangling);
    assert!(err.contains("is a symbolic link; refused"), "{err}");
    assert!(!target.exists(), "nothing written through the link");

    let exposed = dir.0.join("exposed.key");
    std::fs::write(&exposed, "a".repeat(64)).unwrap();
    std::fs::set_permissions(&exposed, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = run(&exposed);
    assert!(err.contains("is readable by others (mode 644)"), "{err}");
    let garbage = dir.0.join("garbage.key");
    crate::testbed_console::private_file(&garbage, "not a key\n");
    let err = run(&garbage);
    assert!(err.contains("does not hold an agent key"), "{err}");
    // A good key gets as far as the network.
    let err = run(&secret);
    assert!(err.contains("cannot reach the testbed service"), "{err}");
}
