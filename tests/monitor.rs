//! `longhaul monitor` (issue 15) end to end over loopback, with real `longhaul server`s taking the
//! monitor's jobs: a mesh runs, the monitor is killed mid-schedule and restarted, and the archive
//! is checked for every window of every pair once, nothing lost, throughput tests never overlapping
//! on a host, and a host that does not answer recorded as down. The probe stream is checked on its
//! own, with a hostile peer; bad mesh files are refused with file, line and field.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use longhaul_proto::frame::{FrameDecoder, encode_frame};
use longhaul_proto::probe::{Probe, ProbeMessage, parse_session};
use longhaul_proto::wire::Preamble;
use longhaul_testkit::fixtures::{RefusingPort, free_port};
use serde_json::Value;

use crate::transfer::{Scratch, s};
use crate::util::{ServerProc, bin, ended_within, read_lines, sigterm};

/// A controllers file naming `key` as controller `mon` with room for a monitor's jobs.
pub(crate) fn controllers(dir: &Scratch, key: &Path) -> String {
    let file = dir.join("controllers.toml");
    std::fs::write(
        &file,
        format!(
            "[[controller]]\nname = \"mon\"\nkey = \"{}\"\nmax_jobs = 16\n",
            key.display()
        ),
    )
    .unwrap();
    s(&file).to_string()
}

fn unix_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// `longhaul monitor run MESH --json`, its stdout lines on a channel; killed on drop.
pub(crate) struct MonitorProc {
    pub(crate) child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl MonitorProc {
    pub(crate) fn start(mesh: &Path, archive: &Path, key: &Path) -> Self {
        Self::start_with(mesh, archive, key, &[]).0
    }

    /// With `extra` flags; also the address of its HTTP service.
    pub(crate) fn start_with(
        mesh: &Path,
        archive: &Path,
        key: &Path,
        extra: &[&str],
    ) -> (Self, std::net::SocketAddr) {
        let mut child = Command::new(bin())
            .args([
                "monitor",
                "run",
                s(mesh),
                "--archive",
                s(archive),
                "--key",
                s(key),
            ])
            .args([
                "--json",
                "--log",
                "info",
                "--probe-interval",
                "50ms",
                "--drain",
                "20",
            ])
            .args(["--connect-timeout", "5", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start longhaul monitor");
        let listening = read_lines(child.stderr.take().unwrap(), Some("monitor"), |l| {
            l.starts_with("longhaul monitor listening on http://")
        });
        let at = listening
            .recv_timeout(Duration::from_secs(20))
            .expect("the monitor says where it listens");
        let at = at
            .trim_start_matches("longhaul monitor listening on http://")
            .parse()
            .expect("an address");
        let lines = read_lines(child.stdout.take().unwrap(), Some("record"), |_| true);
        (Self { child, lines }, at)
    }

    /// Waits until `n` records of `kind` have been printed (at most `limit`); all records seen.
    pub(crate) fn records_until(&mut self, kind: &str, n: usize, limit: Duration) -> Vec<Value> {
        let end = Instant::now() + limit;
        let mut seen = Vec::new();
        while seen.iter().filter(|r: &&Value| r["kind"] == kind).count() < n {
            let left = end.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "fewer than {n} {kind} records in {limit:?}: {seen:?}"
            );
            if let Ok(l) = self.lines.recv_timeout(left) {
                seen.push(serde_json::from_str(&l).expect("a JSON line per record"));
            }
        }
        seen
    }
}

impl Drop for MonitorProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every archived result, through `longhaul monitor results --json`.
fn archived(mesh: &Path, archive: &Path) -> Vec<Value> {
    let out = Command::new(bin())
        .args([
            "monitor",
            "results",
            s(mesh),
            "--archive",
            s(archive),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn key_of(r: &Value) -> (String, String, String, u64) {
    (
        r["test"].as_str().unwrap().to_string(),
        r["src"].as_str().unwrap().to_string(),
        r["dst"].as_str().unwrap().to_string(),
        r["window_ns"].as_u64().unwrap(),
    )
}

#[test]
fn a_killed_monitor_loses_nothing_repeats_nothing_and_keeps_throughput_tests_apart() {
    let t = Scratch::new("monitor-kill");
    let key = t.key("mon.key");
    let ctl = controllers(&t, &key);
    let servers: Vec<ServerProc> = (0..4)
        .map(|_| ServerProc::start(&["-B", "127.0.0.1", "--controllers", &ctl]))
        .collect();
    let dead = RefusingPort::new();
    let mut mesh = String::from("name = \"kill\"\n");
    for (name, port) in ["a", "b", "c", "d"]
        .iter()
        .zip(servers.iter().map(|s| s.port))
        .chain([(&"dead", dead.port)])
    {
        mesh += &format!(
            "[[host]]\nname = \"{name}\"\naddress = \"127.0.0.1\"\nport = {port}\ngroups = [\"all\"]\n"
        );
    }
    mesh += "[[test]]\nname = \"bw\"\nkind = \"throughput\"\nfrom = [\"all\"]\nevery = \"1min\"\n\
             slip = \"10s\"\nargs = \"-t 1\"\n";
    mesh +=
        "[[test]]\nname = \"lat\"\nkind = \"latency\"\nfrom = [\"a\", \"b\"]\nevery = \"10s\"\n";
    mesh += "[[test]]\nname = \"trace\"\nkind = \"traceroute\"\nfrom = [\"a\"]\nto = [\"c\"]\n\
             every = \"10s\"\n";
    let mesh_file = t.join("kill.toml");
    std::fs::write(&mesh_file, mesh).unwrap();
    let archive = t.join("kill.sqlite");

    // Start early in a minute, so the window of the kill has time for all of its 20 pairs.
    while unix_s() % 60.0 > 3.0 {
        std::thread::sleep(Duration::from_millis(200));
    }
    let window_start = (unix_s() / 60.0).floor() as u64 * 60;
    let mut first = MonitorProc::start(&mesh_file, &archive, &key);
    first.records_until("throughput", 6, Duration::from_secs(40));
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let before = archived(&mesh_file, &archive);
    assert!(before.len() >= 6, "{before:?}");

    let mut second = MonitorProc::start(&mesh_file, &archive, &key);
    // Until the window of the kill is over and every pair has had its run in it.
    let end = Instant::now() + Duration::from_secs(70);
    while unix_s() < (window_start + 60) as f64 + 2.0 {
        assert!(Instant::now() < end);
        std::thread::sleep(Duration::from_millis(200));
    }
    // SIGTERM: the monitor drains the runs under way and exits 0.
    sigterm(second.child.id());
    let status = ended_within(&mut second.child, Duration::from_secs(30), "the monitor");
    assert!(status.success(), "{status}");
    let after = archived(&mesh_file, &archive);

    // Nothing archived before the kill is lost or changed.
    for r in &before {
        assert!(after.contains(r), "lost or changed after the restart: {r}");
    }
    // Every throughput pair ran exactly once in the window of the kill (live and dead hosts).
    let window_ns = window_start * 1_000_000_000;
    let mut per_pair: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in after
        .iter()
        .filter(|r| r["kind"] == "throughput" && r["window_ns"] == window_ns)
    {
        *per_pair
            .entry((
                r["src"].as_str().unwrap().into(),
                r["dst"].as_str().unwrap().into(),
            ))
            .or_default() += 1;
    }
    assert_eq!(
        per_pair.len(),
        20,
        "all 5 x 4 pairs in the window: {per_pair:?}"
    );
    assert!(per_pair.values().all(|&n| n == 1), "{per_pair:?}");
    // A host that does not answer is down, never zero throughput; the live pairs measured.
    for r in after.iter().filter(|r| r["kind"] == "throughput") {
        if r["src"] == "dead" || r["dst"] == "dead" {
            assert_eq!(r["status"], "down", "{r}");
            assert_eq!(r["down_host"], "dead", "{r}");
            assert!(r["bits_per_second"].is_null(), "{r}");
        } else {
            assert_eq!(r["status"], "ok", "{r}");
            assert!(r["bits_per_second"].as_f64().unwrap() > 1e8, "{r}");
            assert!(r["path"].is_string(), "a trace with every test: {r}");
        }
    }
    // Throughput tests never overlapped on a host (their runs' times, from the archive).
    let bw: Vec<&Value> = after
        .iter()
        .filter(|r| r["kind"] == "throughput" && r["status"] == "ok")
        .collect();
    for (i, x) in bw.iter().enumerate() {
        for y in &bw[i + 1..] {
            let hosts = |r: &Value| [r["src"].clone(), r["dst"].clone()];
            let share = hosts(x).iter().any(|h| hosts(y).contains(h));
            let overlap = x["started_ns"].as_u64() < y["ended_ns"].as_u64()
                && y["started_ns"].as_u64() < x["ended_ns"].as_u64();
            assert!(!(share && overlap), "overlap on a host:\n{x}\n{y}");
        }
    }
    // Latency streams and traces ran and measured.
    let lat: Vec<&Value> = after.iter().filter(|r| r["kind"] == "latency").collect();
    assert!(lat.len() >= 4, "{lat:?}");
    for r in &lat {
        assert_eq!(r["status"], "ok", "{r}");
        assert!(
            r["loss"].as_f64().unwrap() < 0.05,
            "loopback loses nothing: {r}"
        );
        assert!(r["rtt_ns"].as_u64().unwrap() > 0, "{r}");
    }
    let traces = after.iter().filter(|r| r["kind"] == "traceroute").count();
    assert!(traces >= 2, "{after:?}");
    // Keys are unique (the archive's own key makes this hold; the check reads what it holds).
    let mut keys: Vec<_> = after.iter().map(key_of).collect();
    keys.sort();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n);
}

fn send(c: &mut TcpStream, m: &ProbeMessage) {
    c.write_all(&encode_frame(m)).unwrap();
}

fn recv(c: &mut TcpStream) -> ProbeMessage {
    let mut dec = FrameDecoder::<ProbeMessage>::new();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    loop {
        if let Some(m) = dec.next_message().unwrap() {
            return m;
        }
        let mut b = vec![0u8; dec.wanted().min(4096)];
        let n = c.read(&mut b).unwrap();
        assert!(n > 0, "the server closed the connection");
        dec.push(&b[..n]).unwrap();
    }
}

fn hello(count: u64, interval_ns: u64) -> ProbeMessage {
    ProbeMessage::ProbeHello {
        version: 1,
        interval_ns,
        size: 100,
        count,
        synced: false,
        train: 1,
    }
}

#[test]
fn the_probe_stream_measures_and_its_reflector_answers_no_one_else() {
    let mut server = ServerProc::start(&["-B", "127.0.0.1", "--max-duration", "60"]);
    let probe = |count| {
        longhaul_engine::run_probe(&longhaul_engine::ProbeConfig {
            host: "127.0.0.1".into(),
            port: server.port,
            family: longhaul_engine::Family::V4,
            interval: Duration::from_millis(5),
            size: 200,
            count,
            timeout: Duration::from_secs(5),
        })
    };
    let sum = probe(200).expect("a probe stream");
    assert_eq!((sum.sent, sum.received, sum.lost), (200, 200, 0));
    assert_eq!(sum.b_received, Some(200));
    assert!(sum.rtt.unwrap().median_ns > 0);
    assert_eq!(sum.forward.is_some(), sum.synchronized);

    // A hostile peer: the session's id, sent from another address, bigger than agreed, or as a
    // reply, gets nothing back; the reflector counts each as refused.
    let mut c = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    c.write_all(&Preamble::probe().encode()).unwrap();
    send(&mut c, &hello(10, 10_000_000));
    let (port, session) = match recv(&mut c) {
        ProbeMessage::ProbeAccept {
            udp_port, session, ..
        } => (udp_port, parse_session(&session).unwrap()),
        m => panic!("{m:?}"),
    };
    let answered = |from: &str, len: usize, reply: bool| {
        let u = UdpSocket::bind((from, 0)).unwrap();
        u.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut p = Probe::request(session, 0, 1);
        p.reply = reply;
        let mut buf = vec![0u8; len];
        p.write(&mut buf);
        u.send_to(&buf, ("127.0.0.1", port)).unwrap();
        let mut back = [0u8; 2048];
        u.recv(&mut back).ok()
    };
    assert_eq!(answered("127.0.0.2", 100, false), None, "another address");
    assert_eq!(
        answered("127.0.0.1", 300, false),
        None,
        "bigger than agreed"
    );
    assert_eq!(answered("127.0.0.1", 100, true), None, "a reply");
    assert_eq!(
        answered("127.0.0.1", 100, false),
        Some(100),
        "the peer itself"
    );
    send(&mut c, &ProbeMessage::ProbeStop);
    assert_eq!(
        recv(&mut c),
        ProbeMessage::ProbeDone {
            received: 1,
            duplicates: 0,
            refused: 3
        }
    );
    // A session longer than the server allows is refused with the reason.
    let mut c = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    c.write_all(&Preamble::probe().encode()).unwrap();
    send(&mut c, &hello(1000, 100_000_000));
    match recv(&mut c) {
        ProbeMessage::Error { message } => assert!(message.contains("--max-duration"), "{message}"),
        m => panic!("{m:?}"),
    }
    // A client that never says hello is dropped; the server serves the next one.
    let mut silent = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    silent.write_all(&Preamble::probe().encode()).unwrap();
    assert_eq!(
        probe(20).expect("served after the hostile peers").received,
        20
    );
    assert!(server.alive());

    // Sessions beyond --max-probes are refused with the reason while one is held open.
    let busy = ServerProc::start(&["-B", "127.0.0.1", "--max-probes", "1"]);
    let mut held = TcpStream::connect(("127.0.0.1", busy.port)).unwrap();
    held.write_all(&Preamble::probe().encode()).unwrap();
    send(&mut held, &hello(100, 100_000_000));
    assert!(matches!(recv(&mut held), ProbeMessage::ProbeAccept { .. }));
    let refused = longhaul_engine::run_probe(&longhaul_engine::ProbeConfig {
        host: "127.0.0.1".into(),
        port: busy.port,
        family: longhaul_engine::Family::V4,
        interval: Duration::from_millis(5),
        size: 64,
        count: 5,
        timeout: Duration::from_secs(5),
    })
    .unwrap_err()
    .to_string();
    assert!(refused.contains("--max-probes"), "{refused}");
}

/// `longhaul monitor check` on a two-host mesh whose one test ends with `test_tail`: it fails
/// with status 1; its standard error.
fn refused_mesh(t: &Scratch, test_tail: &str) -> String {
    let mesh = t.join("bad.toml");
    std::fs::write(
        &mesh,
        format!(
            "[[host]]\nname = \"a\"\naddress = \"10.0.0.1\"\n[[host]]\nname = \"b\"\n\
             address = \"10.0.0.2\"\n[[test]]\nname = \"bw\"\nkind = \"throughput\"\n\
             from = [\"a\"]\n{test_tail}"
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["monitor", "check", s(&mesh)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_mesh_files_are_refused_naming_file_line_and_field() {
    let t = Scratch::new("monitor-bad");
    let err = refused_mesh(&t, "to = [\"c\"]\n");
    assert!(
        err.contains("bad.toml:11: test[0].to: \"c\": no host or group of that name"),
        "{err}"
    );
    // Flags a throughput test's args cannot take are refused too, naming the test.
    let err = refused_mesh(&t, "to = [\"b\"]\nargs = \"-t 20 --to b\"\n");
    assert!(
        err.contains("test \"bw\": args") && err.contains("--to"),
        "{err}"
    );
}

/// The shipped alerting rules and Grafana dashboard (packaging/).
const RULES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/prometheus/longhaul.rules.yml"
);
const GRAFANA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/grafana/longhaul-monitor.json"
);

/// The `longhaul_*` metric names in `text`.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("longhaul_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// A PromQL instant query through Prometheus' HTTP API: each series' labels and value.
fn promql(at: u16, query: &str) -> Vec<(Value, f64)> {
    let r: Value = ureq::get(&format!("http://127.0.0.1:{at}/api/v1/query"))
        .query("query", query)
        .call()
        .expect("Prometheus answers")
        .into_json()
        .unwrap();
    assert_eq!(r["status"], "success", "{r}");
    r["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let v: f64 = x["value"][1].as_str().unwrap().parse().unwrap();
            (x["metric"].clone(), v)
        })
        .collect()
}

#[test]
fn prometheus_scrapes_the_monitor_a_server_and_the_emulator() {
    if !crate::util::program("prometheus", "prometheus")
        || !crate::util::netns_privileges()
        || !crate::util::program("ping", "iputils-ping")
    {
        return;
    }
    let t = Scratch::new("monitor-prom");
    let key = t.key("mon.key");
    let ctl = controllers(&t, &key);
    let mut a = ServerProc::start(&[
        "-B",
        "127.0.0.1",
        "--controllers",
        &ctl,
        "--metrics",
        "127.0.0.1:0",
    ]);
    let b = ServerProc::start(&["-B", "127.0.0.1", "--controllers", &ctl]);
    a.wait_for("metrics at http://");
    let log = a.log();
    let server_metrics = log
        .split("metrics at http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let mesh = format!(
        "name = \"prom\"\n[[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\nport = {}\n\
         [[host]]\nname = \"b\"\naddress = \"127.0.0.1\"\nport = {}\n\
         [[test]]\nname = \"lat\"\nkind = \"latency\"\nfrom = [\"a\", \"b\"]\nevery = \"5s\"\n",
        a.port, b.port
    );
    let mesh_file = t.join("prom.toml");
    std::fs::write(&mesh_file, mesh).unwrap();
    let (mut monitor, at) = MonitorProc::start_with(&mesh_file, &t.join("prom.sqlite"), &key, &[]);
    let first = monitor.records_until("latency", 2, Duration::from_secs(30));

    // An emulated path with its counters served, and some packets across it.
    let name = format!("p{}", std::process::id() % 100_000);
    let _down = crate::util::DownOnDrop(name.clone());
    let emu_metrics = format!("127.0.0.1:{}", free_port());
    let up = Command::new(bin())
        .args([
            "emulate", "up", "--name", &name, "--rtt", "10ms", "--rate", "100M",
        ])
        .args(["--no-server", "--metrics", &emu_metrics])
        .output()
        .unwrap();
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let ping = Command::new(bin())
        .args(["emulate", "exec", "--name", &name, "a", "--"])
        .args(["ping", "-c", "3", "-i", "0.2", "10.201.0.2"])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stderr)
    );

    let prom_port = free_port();
    let config = t.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nrule_files: [\"{}\"]\n\
             scrape_configs:\n  - job_name: monitor\n    \
             static_configs:\n      - targets: [\"{at}\"]\n  - job_name: server\n    \
             static_configs:\n      - targets: [\"{server_metrics}\"]\n  - job_name: emulator\n    \
             static_configs:\n      - targets: [\"{emu_metrics}\"]\n",
            RULES
        ),
    )
    .unwrap();
    let _prometheus = crate::util::KillOnDrop(
        Command::new("prometheus")
            .arg(format!("--config.file={}", s(&config)))
            .arg(format!("--storage.tsdb.path={}", s(&t.join("tsdb"))))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );

    // The three targets up, then the monitor's figures through PromQL.
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        // Until Prometheus listens, the query has nobody to answer it.
        let ready = ureq::get(&format!("http://127.0.0.1:{prom_port}/-/ready"))
            .call()
            .is_ok();
        let up = if ready {
            promql(prom_port, "up == 1")
        } else {
            Vec::new()
        };
        if up.len() == 3 {
            break;
        }
        assert!(
            Instant::now() < end,
            "Prometheus never scraped the three targets: {up:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let rtts = promql(
        prom_port,
        "longhaul_monitor_latest_rtt_seconds{test=\"lat\"}",
    );
    assert_eq!(rtts.len(), 2, "{rtts:?}");
    let mut seen = first;
    seen.extend(
        monitor
            .lines
            .try_iter()
            .map(|l| serde_json::from_str::<Value>(&l).unwrap()),
    );
    for (labels, value) in &rtts {
        // The value Prometheus holds is one the monitor measured and printed for that pair.
        let measured: Vec<f64> = seen
            .iter()
            .filter(|r| r["src"] == labels["src"] && r["dst"] == labels["dst"])
            .map(|r| r["rtt_ns"].as_f64().unwrap() / 1e9)
            .collect();
        assert!(
            measured.iter().any(|m| (m - value).abs() < 1e-12),
            "{labels}: {value} not among {measured:?}"
        );
    }
    let loss = promql(prom_port, "max(longhaul_monitor_latest_loss_ratio)");
    assert_eq!(loss[0].1, 0.0, "loopback loses nothing");
    let runs = promql(prom_port, "sum(longhaul_monitor_runs_total{status=\"ok\"})");
    assert!(runs[0].1 >= 2.0, "{runs:?}");
    // The sending server's own counters: the probe streams it ran as jobs.
    let jobs = promql(prom_port, "longhaul_server_jobs_total{result=\"ok\"}");
    assert!(jobs[0].1 >= 1.0, "{jobs:?}");
    // The emulator's: both directions up, the pings (and their replies) across.
    let links = promql(prom_port, "longhaul_emulator_link_up");
    assert_eq!(links.len(), 2, "{links:?}");
    assert!(links.iter().all(|(_, v)| *v == 1.0), "{links:?}");
    let sent = promql(
        prom_port,
        "longhaul_emulator_link_delivered_packets_total{direction=\"a_to_b\"}",
    );
    assert!(sent[0].1 >= 3.0, "{sent:?}");

    // The shipped rules file loaded: Prometheus evaluates all of its rules.
    let rules: Value = ureq::get(&format!("http://127.0.0.1:{prom_port}/api/v1/rules"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let loaded: usize = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum();
    assert_eq!(loaded, 9, "{rules}");
    // Every server and emulator metric the rules and the Grafana dashboard name is one those
    // processes serve (the monitor's, whose families appear with their first sample, are checked
    // against its registry by a unit test of crates/monitor-service).

    let mut declared = std::collections::BTreeSet::new();
    for target in [at.to_string(), server_metrics.clone(), emu_metrics.clone()] {
        let text = ureq::get(&format!("http://{target}/metrics"))
            .call()
            .unwrap()
            .into_string()
            .unwrap();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().unwrap().to_string());
            }
        }
    }
    let grafana = std::fs::read_to_string(GRAFANA).unwrap();
    let dashboard: Value = serde_json::from_str(&grafana).expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().unwrap().len() >= 10);
    for text in [std::fs::read_to_string(RULES).unwrap(), grafana] {
        for name in metric_names(&text)
            .into_iter()
            .filter(|n| !n.starts_with("longhaul_monitor_"))
        {
            let base = ["_total", "_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(&name);
            assert!(
                declared.contains(base),
                "{name} is named in packaging/ but served by none: {declared:?}"
            );
        }
    }
}

/// A webhook receiver: every POST body it gets, as JSON, on a channel.
fn webhook() -> (u16, std::sync::mpsc::Receiver<Value>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then Content-Length bytes of body.
            let body = loop {
                let n = c.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break None;
                }
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len: usize = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break Some(got[end + 4..end + 4 + len].to_vec());
                    }
                }
            };
            let _ = c.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
            if let Some(b) = body
                && tx
                    .send(serde_json::from_slice(&b).expect("JSON body"))
                    .is_err()
            {
                return;
            }
        }
    });
    (port, rx)
}

#[test]
fn an_alert_fires_after_repeated_bad_results_reaches_the_webhook_and_clears() {
    let t = Scratch::new("monitor-alert");
    let key = t.key("mon.key");
    let ctl = controllers(&t, &key);
    let a = ServerProc::start(&["-B", "127.0.0.1", "--controllers", &ctl]);
    let b = RefusingPort::new();
    let b_port = b.port;
    let (hook, posts) = webhook();
    let mesh = format!(
        "name = \"alert\"\nwebhook = \"http://127.0.0.1:{hook}/alerts\"\n\
         [[host]]\nname = \"a\"\naddress = \"127.0.0.1\"\nport = {}\n\
         [[host]]\nname = \"b\"\naddress = \"127.0.0.1\"\nport = {b_port}\n\
         [[test]]\nname = \"lat\"\nkind = \"latency\"\nfrom = [\"a\"]\nto = [\"b\"]\nevery = \"2s\"\n\
         [[alert]]\nname = \"b-gone\"\nwhen = \"down\"\nafter = 2\nclear_after = 1\n",
        a.port
    );
    let mesh_file = t.join("alert.toml");
    std::fs::write(&mesh_file, mesh).unwrap();
    let (mut monitor, at) = MonitorProc::start_with(&mesh_file, &t.join("alert.sqlite"), &key, &[]);

    // b is not there: two down results, then the alert fires, once.
    let seen = monitor.records_until("latency", 2, Duration::from_secs(30));
    assert!(
        seen.iter()
            .all(|r| r["status"] == "down" && r["down_host"] == "b"),
        "{seen:?}"
    );
    let fired = posts
        .recv_timeout(Duration::from_secs(20))
        .expect("the webhook gets the alert");
    assert_eq!(fired["alert"], "b-gone");
    assert_eq!(fired["state"], "firing");
    assert_eq!(
        (fired["src"].as_str(), fired["dst"].as_str()),
        (Some("a"), Some("b"))
    );
    let firing: Value = ureq::get(&format!("http://{at}/api/v1/alerts"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(firing.as_array().unwrap().len(), 1, "{firing}");
    assert!(
        posts.recv_timeout(Duration::from_secs(5)).is_err(),
        "a firing alert is announced once, not at every bad result"
    );

    // b comes up on its port: the next good result clears it.
    drop(b);
    let _b = ServerProc::start(&["-B", "127.0.0.1", "-p", &b_port.to_string()]);
    let cleared = posts
        .recv_timeout(Duration::from_secs(30))
        .expect("the clearing");
    assert_eq!(
        (cleared["alert"].as_str(), cleared["state"].as_str()),
        (Some("b-gone"), Some("cleared"))
    );
    let events: Value = ureq::get(&format!("http://{at}/api/v1/events"))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["alert_fire", "alert_clear"],
        "archived with their results"
    );
}
