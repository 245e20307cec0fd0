//! iperf3's client flags as iperf3 users type them (issue 24, docs/test.md "iperf3's client flags"):
//! each flag the table says longhaul takes runs against a `longhaul server` and has the effect
//! iperf3's manual gives it, checked where it shows (the sockets read back on both ends, the
//! packets on the wire, the process's CPU set, the output); each flag the table refuses is a usage
//! error with its one line.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{ServerProc, bin, json_test, program, read_lines, test_cmd};

/// A port that was free a moment ago (below the ephemeral range), with the next one free too
/// (`--cport P` binds P, P+1, ...).
fn free_ports() -> u16 {
    loop {
        let p = longhaul_testkit::fixtures::free_port();
        if p < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
}

fn sockets<'a>(report: &'a Value, side: &str) -> &'a Vec<Value> {
    report["start"]["longhaul"][format!("{side}_sockets")]
        .as_array()
        .unwrap_or_else(|| panic!("start.longhaul.{side}_sockets in {report}"))
}

fn text(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn socket_flags_are_set_on_both_ends_and_read_back() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let cport = free_ports();
    let r = json_test(
        "127.0.0.1",
        server.port,
        &[
            "-t",
            "1",
            "-P",
            "2",
            "-M",
            "1000",
            "-N",
            "-S",
            "0x28",
            "--cport",
            &cport.to_string(),
            "-T",
            "run 7",
            "--extra-data",
            "lab notes",
        ],
    );
    for side in ["local", "remote"] {
        let list = sockets(&r, side);
        assert_eq!(list.len(), 2, "{side}: {list:?}");
        for s in list {
            let mss = s["mss"].as_u64().expect("mss");
            // The kernel's MSS is the clamp less TCP options (timestamps: 12 bytes).
            assert!((960..=1000).contains(&mss), "{side} mss {mss} for -M 1000");
            assert_eq!(s["tos"], 0x28, "{side}: {s}");
            assert_eq!(s["nodelay"], true, "{side}: {s}");
        }
    }
    let ports: Vec<u64> = r["start"]["connected"]
        .as_array()
        .expect("connected")
        .iter()
        .map(|c| c["local_port"].as_u64().expect("local_port"))
        .collect();
    assert_eq!(ports, [u64::from(cport), u64::from(cport) + 1]);
    assert_eq!(r["start"]["test_start"]["tos"], 0x28);
    assert_eq!(r["title"], "run 7");
    assert_eq!(r["extra_data"], "lab notes");

    // --dscp names a code point: AF11 is 10, the TOS byte 40; iperf3's -c names the server.
    let out = Command::new(bin())
        .args(["test", "-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"])
        .args(["--dscp", "af11", "-u", "--dont-fragment"])
        .output()
        .expect("run longhaul test");
    let r: Value = serde_json::from_str(&text(&out)).expect("a JSON report");
    for side in ["local", "remote"] {
        for s in sockets(&r, side) {
            assert_eq!(s["tos"], 40, "{side}: {s}");
            assert_eq!(s["dont_fragment"], true, "{side}: {s}");
        }
    }
}

#[test]
fn blockcount_sends_that_many_blocks_and_bitrate_paces_each_stream() {
    let server = ServerProc::start(&[]);
    let r = json_test("127.0.0.1", server.port, &["-k", "100", "-l", "64K"]);
    assert_eq!(r["start"]["test_start"]["blocks"], 100);
    assert_eq!(r["end"]["sum_sent"]["bytes"], 100 * 65536);
    assert_eq!(r["end"]["sum_received"]["bytes"], 100 * 65536);
    for flag in ["-b", "--fq-rate"] {
        let r = json_test(
            "127.0.0.1",
            server.port,
            &["-t", "3", "-P", "2", flag, "100M"],
        );
        for s in r["end"]["streams"].as_array().expect("streams") {
            for end in ["sender", "receiver"] {
                let bps = s[end]["bits_per_second"].as_f64().expect("bits_per_second");
                assert!(
                    (bps / 100e6 - 1.0).abs() < 0.05,
                    "{flag} 100M: a stream's {end} saw {:.1} Mbit/s",
                    bps / 1e6
                );
            }
        }
    }
}

#[test]
fn output_flags_shape_the_text_as_iperf3_does() {
    let server = ServerProc::start(&[]);
    let run = |args: &[&str]| text(&test_cmd("127.0.0.1", server.port, args));

    let out = run(&["-t", "1", "-f", "m"]);
    // The report lines' bitrate column (not the plan's "target 10.0 Gbits/sec").
    let rates: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with('[') && l.contains("/sec"))
        .collect();
    assert!(rates.len() >= 3, "{out}");
    for l in rates {
        assert!(
            l.contains("Mbits/sec") && !l.contains("Gbits/sec"),
            "-f m: {l}"
        );
    }

    let out = run(&["-t", "1", "-T", "dtn1", "--timestamps=%Y~ "]);
    let year = jiff::Zoned::now().year().to_string();
    for l in out.lines() {
        assert!(l.starts_with(&format!("{year}~ dtn1:  ")), "{l}");
    }

    let out = run(&["-t", "1", "-V", "--get-server-output"]);
    for needle in [
        "Starting Test: protocol: TCP, 1 streams, 1048576 byte blocks",
        "client socket 1 (sends)",
        "server socket 1 (receives)",
        "Test Complete. Summary Results:",
        "receiver",
        "remote/server",
    ] {
        assert!(out.contains(needle), "-V: no {needle:?} in\n{out}");
    }

    let err = test_cmd("127.0.0.1", server.port, &["-t", "1", "-d"]).stderr;
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains("DEBUG") && err.contains("data connection 0 open"),
        "-d: {err}"
    );
}

#[test]
fn forceflush_lines_arrive_as_the_test_runs() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let started = Instant::now();
    let mut child = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "4", "--forceflush"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run longhaul test");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut interval = String::new();
    while !interval.contains("0.00-1.00") {
        interval.clear();
        assert!(
            lines.read_line(&mut interval).expect("read") > 0,
            "no interval line"
        );
    }
    let at = started.elapsed();
    assert!(
        child.try_wait().expect("try_wait").is_none() && at < Duration::from_secs(3),
        "the first interval line came at {at:?}, not while the 4-s test ran"
    );
    assert!(child.wait().expect("wait").success());
}

#[test]
fn logfile_appends_and_never_writes_through_a_link() {
    let server = ServerProc::start(&[]);
    let dir = longhaul_testkit::fixtures::TempDir::new("logfile");
    let log = dir.0.join("test.log");
    let log_arg = log.to_str().expect("utf-8");
    for _ in 0..2 {
        let out = test_cmd("127.0.0.1", server.port, &["-t", "1", "--logfile", log_arg]);
        assert!(text(&out).is_empty(), "--logfile: stdout not empty");
    }
    let written = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(
        written.matches("Connecting to host").count(),
        2,
        "{written}"
    );
    assert_eq!(written.matches("CPU Utilization").count(), 2, "{written}");

    // A link planted where the log is to go (root would append to its target).
    let target = dir.0.join("passwd");
    std::fs::write(&target, "root:x:0:0\n").expect("target");
    let link = dir.0.join("planted.log");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let out = test_cmd(
        "127.0.0.1",
        server.port,
        &["-t", "1", "--logfile", link.to_str().expect("utf-8")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("symbolic link") && err.lines().count() == 1,
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("target"),
        "root:x:0:0\n"
    );
}

#[test]
fn affinity_pins_the_client_to_that_cpu() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = (cpus - 1).to_string();
    let mut child = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "3", "-A", &cpu])
        .stdout(Stdio::null())
        .spawn()
        .expect("run longhaul test");
    std::thread::sleep(Duration::from_millis(1500));
    let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).expect("tasks");
    let mut threads = 0;
    for t in tasks {
        let status = std::fs::read_to_string(t.expect("task").path().join("status"));
        let Ok(status) = status else { continue };
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim();
        assert_eq!(allowed, cpu, "a thread of the client runs on {allowed}");
        threads += 1;
    }
    assert!(threads >= 2, "the client and its stream thread: {threads}");
    assert!(child.wait().expect("wait").success());
}

/// The packets the server sends to the client's data port during `longhaul test -R ARGS`, as
/// `tcpdump -v -A` prints them.
fn server_packets(server: &ServerProc, args: &[&str]) -> String {
    packets_to(|cport| {
        let mut all = vec!["-t", "1", "-R", "--cport", cport];
        all.extend_from_slice(args);
        text(&test_cmd("127.0.0.1", server.port, &all));
    })
}

/// The data packets sent to a client's port while `run(PORT)` runs a test whose client binds its
/// data connection there (`--cport PORT`), as `tcpdump -v -A` prints them.
fn packets_to(run: impl FnOnce(&str)) -> String {
    capture(
        20,
        |cport| format!("tcp dst port {cport} and greater 600"),
        run,
    )
}

/// The first `count` packets that `filter(PORT)` selects while `run(PORT)` runs a test whose
/// client binds its data connection to PORT, as `tcpdump -v -A` prints them (within 30 s).
fn capture(count: u32, filter: impl FnOnce(&str) -> String, run: impl FnOnce(&str)) -> String {
    let cport = free_ports().to_string();
    let mut dump = Command::new("timeout")
        .args([
            "30", "tcpdump", "-i", "lo", "-n", "-v", "-A", "-l", "-s", "200",
        ])
        .args(["-c", &count.to_string(), &filter(&cport)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tcpdump");
    let listening = read_lines(dump.stderr.take().expect("stderr"), None, |_| true);
    let line = listening
        .recv_timeout(Duration::from_secs(20))
        .expect("tcpdump starts");
    assert!(line.contains("listening on lo"), "{line}");
    run(&cport);
    let out = dump.wait_with_output().expect("tcpdump ends");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `-M 1000`: the client's SYN asks for segments of 1000 bytes (the MSS option), so neither end
/// sends larger ones (the sockets read back 988: 1000 less the timestamp option, as above).
#[test]
fn set_mss_is_the_mss_the_syn_advertises() {
    if !program("tcpdump", "tcpdump") {
        return;
    }
    let server = ServerProc::start(&[]);
    let syn = capture(
        1,
        |cport| format!("tcp src port {cport} and tcp[tcpflags] & tcp-syn != 0"),
        |cport| {
            text(&test_cmd(
                "127.0.0.1",
                server.port,
                &["-t", "1", "--cport", cport, "-M", "1000"],
            ));
        },
    );
    assert!(syn.contains("mss 1000"), "the SYN of -M 1000:\n{syn}");
}

#[test]
fn tos_and_repeating_payload_reach_the_wire_from_a_dual_stack_server() {
    if !program("tcpdump", "tcpdump") {
        return;
    }
    let server = ServerProc::start(&[]);
    let digits = "0123456789".repeat(4);
    let marked = server_packets(&server, &["-S", "0x28", "--repeating-payload"]);
    assert!(marked.contains("tos 0x28"), "-S 0x28:\n{marked}");
    assert!(marked.contains(&digits), "--repeating-payload:\n{marked}");
    let plain = server_packets(&server, &[]);
    assert!(plain.contains("tos 0x0"), "{plain}");
    assert!(
        !plain.contains("tos 0x28") && !plain.contains(&digits),
        "{plain}"
    );
}

/// iperf3's peers both ways: a stock iperf3 client asks a longhaul server's iperf3 port for -S and
/// --repeating-payload, which the server sends with (-R); a longhaul client asks a stock iperf3
/// server for --repeating-payload, which it sends (iperf3 3.12's server leaves -S out when it
/// sends, for its own client too: `iperf3 -c -R -S 0x28` shows tos 0x0 on the wire).
#[test]
fn iperf3_peers_take_tos_and_repeating_payload_both_ways() {
    if !program("tcpdump", "tcpdump") || !program("iperf3", "iperf3") {
        return;
    }
    let digits = "0123456789".repeat(4);
    let ours = ServerProc::start(&["--iperf3-port", "0"]);
    let port = ours.iperf3_port.expect("the iperf3 port").to_string();
    let seen = packets_to(|cport| {
        let out = Command::new("iperf3")
            .args([
                "-c",
                "127.0.0.1",
                "-p",
                &port,
                "-R",
                "-t",
                "1",
                "--cport",
                cport,
            ])
            .args(["-S", "0x28", "--repeating-payload"])
            .output()
            .expect("run iperf3 -c");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    });
    assert!(
        seen.contains("tos 0x28") && seen.contains(&digits),
        "iperf3 to longhaul:\n{seen}"
    );

    let port = longhaul_testkit::fixtures::free_port();
    let stock = crate::iperf3::iperf3_server(port, true);
    let seen = packets_to(|cport| {
        let out = test_cmd(
            "127.0.0.1",
            port,
            &[
                "--iperf3",
                "-R",
                "-t",
                "1",
                "--cport",
                cport,
                "-S",
                "0x28",
                "--repeating-payload",
            ],
        );
        text(&out);
    });
    let _ = stock.wait_with_output();
    assert!(seen.contains(&digits), "longhaul to iperf3:\n{seen}");
}

#[test]
fn refused_iperf3_flags_say_the_longhaul_way() {
    let server = ServerProc::start(&[]);
    for (flag, says) in [
        (&["--sctp"][..], "not SCTP"),
        (&["-X", "eth0"], "not SCTP"),
        (&["--nstreams", "2"], "-P N"),
        (&["-m"], "not MPTCP"),
        (&["-F", "data.bin"], "longhaul send FILE HOST:DEST"),
        (&["-I", "pid"], "$!"),
        (&["--bind-dev", "lo"], "-B ADDR"),
        (&["--rcv-timeout", "5000"], "--stall-timeout"),
        (&["--snd-timeout", "5000"], "--stall-timeout"),
        (&["--pacing-timer", "1000"], "SO_MAX_PACING_RATE"),
        (&["-L", "7"], "flow label"),
        (&["--username", "u"], "--key FILE"),
        (&["--rsa-public-key-path", "k.pem"], "--key FILE"),
        (&["--skip-rx-copy"], "-Z"),
        (&["--cntl-ka", "10/5/3"], "--stall-timeout"),
        (&["-v"], "longhaul --version"),
        (&["-A", "0,1"], "CPUAffinity="),
        (&["-M", "40"], "88 to 32767"),
    ] {
        let out = test_cmd("127.0.0.1", server.port, flag);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {err}");
        assert!(err.contains(says), "{flag:?}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: "), "{flag:?}: {err}");
        if flag[0] != "-A" && flag[0] != "-M" {
            assert!(first.contains("is not supported"), "{flag:?}: {err}");
        }
    }
}
