//! The memory plan of `longhaul emulate` (issue 22) with the machine-wide `net.ipv4.tcp_mem` set
//! low on purpose (needs root; fails otherwise, unless LONGHAUL_TEST_SKIP=1): `--host-memory
//! check` refuses with the exact sysctl line and changes nothing; the default raises it for the run
//! and restores it after, also after the emulator is killed with SIGKILL (the next emulator puts it
//! back); `--host-memory ignore` runs anyway and the report names the hosts where TCP ran short.
//!
//! Each test holds the machine alone: `tcp_mem` is every test's, and the original value is put back
//! when the test ends, whatever happens.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use longhaul_testkit::fixtures::TempDir;

use crate::util::{bin, ended_within, machine_alone, netns_privileges};

const TCP_MEM: &str = "/proc/sys/net/ipv4/tcp_mem";
/// 8 MiB before pressure, 12 MiB hard: far below what a 1 Gbit/s × 200 ms path makes TCP hold.
const LOW: &str = "1024 2048 3072";
/// A path whose windows need ~100 MB at each end.
const PATH: [&str; 4] = ["--rtt", "200ms", "--rate", "1G"];

fn tcp_mem() -> String {
    std::fs::read_to_string(TCP_MEM)
        .expect("read tcp_mem")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sets `tcp_mem` and puts the original back when dropped.
struct TcpMemSet(String);

impl TcpMemSet {
    fn to(value: &str) -> TcpMemSet {
        let original = tcp_mem();
        std::fs::write(TCP_MEM, value).expect("set tcp_mem");
        TcpMemSet(original)
    }
}

impl Drop for TcpMemSet {
    fn drop(&mut self) {
        std::fs::write(TCP_MEM, &self.0).expect("restore tcp_mem");
    }
}

/// `longhaul ARGS` with no standard input.
fn longhaul(args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args).stdin(Stdio::null());
    c
}

fn emulate(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["emulate"];
    all.extend(args);
    let out = longhaul(&all).output().expect("run longhaul emulate");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("{stderr}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    )
}

/// Polls `done` every 20 ms; fails after 30 s.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "waited 30 s for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value in `net.ipv4.tcp_mem raised from "A" to "B"`.
fn raised_to(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.contains("net.ipv4.tcp_mem raised from"))
        .unwrap_or_else(|| panic!("no raise in:\n{stderr}"));
    line.split('"')
        .nth(3)
        .expect("the value raised to")
        .to_string()
}

#[test]
fn check_refuses_with_the_sysctl_to_run_and_changes_nothing() {
    if !netns_privileges() {
        return;
    }
    let _m = machine_alone();
    let _low = TcpMemSet::to(LOW);
    let mut args = PATH.to_vec();
    args.extend(["--host-memory", "check", "--", "true"]);
    let (code, _, stderr) = emulate(&args);
    assert_ne!(code, 0, "{stderr}");
    let fix = stderr
        .lines()
        .find(|l| l.contains("net.ipv4.tcp_mem"))
        .unwrap_or_else(|| panic!("no tcp_mem in:\n{stderr}"));
    assert!(fix.contains("run `sysctl -w net.ipv4.tcp_mem=\""), "{fix}");
    assert!(
        fix.contains(&format!("\"{LOW}\"")),
        "names the value now: {fix}"
    );
    assert_eq!(tcp_mem(), LOW, "nothing changed");
    // The line's value is enough: with it set, the same run goes ahead without raising anything.
    let value = fix
        .split("tcp_mem=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    std::fs::write(TCP_MEM, value).unwrap();
    let (code, _, stderr) = emulate(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("net.ipv4.tcp_mem \"{value}\" holds it")),
        "{stderr}"
    );
}

#[test]
fn raise_holds_tcp_mem_up_for_the_run_and_restores_it() {
    if !netns_privileges() {
        return;
    }
    let _m = machine_alone();
    let _low = TcpMemSet::to(LOW);
    let dir = TempDir::new("host-memory");
    let mark = dir.0.join("running");
    let mut args = vec!["emulate"];
    args.extend(PATH);
    let cmd = format!("touch {}; sleep 2", mark.display());
    args.extend(["--", "sh", "-c", &cmd]);
    let child = longhaul(&args).stderr(Stdio::piped()).spawn().unwrap();
    wait_until("CMD to run", || mark.exists());
    let during = tcp_mem();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert!(out.status.success(), "{stderr}");
    assert_eq!(during, raised_to(&stderr), "the value the run had");
    let p: Vec<u64> = during.split(' ').map(|v| v.parse().unwrap()).collect();
    // ~100 MB per end: the pressure threshold covers both ends (pages of 4 KiB).
    assert!(p[1] * 4096 > 150_000_000 && p[2] > p[1], "{during}");
    assert_eq!(tcp_mem(), LOW, "restored after the run");
}

#[test]
fn a_sigkilled_emulators_raise_is_put_back_by_the_next_emulator() {
    if !netns_privileges() {
        return;
    }
    let _m = machine_alone();
    let _low = TcpMemSet::to(LOW);
    let mut args = vec!["emulate"];
    args.extend(PATH);
    args.extend(["--no-server", "--", "sleep", "60"]);
    let mut child = longhaul(&args).stderr(Stdio::null()).spawn().unwrap();
    wait_until("tcp_mem to be raised", || tcp_mem() != LOW);
    child.kill().unwrap();
    ended_within(&mut child, Duration::from_secs(5), "emulate");
    assert_ne!(tcp_mem(), LOW, "SIGKILL leaves the raise behind");
    // The next emulator, on a path that needs nothing, reaps the dead one's lease (and its
    // namespaces, with the orphaned `sleep` in them).
    let (code, _, stderr) = emulate(&["--no-server", "--", "true"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(tcp_mem(), LOW, "put back");
}

#[test]
fn ignore_runs_anyway_and_the_report_names_the_hosts_that_ran_short() {
    if !netns_privileges() {
        return;
    }
    let _m = machine_alone();
    let _low = TcpMemSet::to(LOW);
    let dir = TempDir::new("host-memory");
    let result = dir.0.join("test.json");
    let mut args = PATH.to_vec();
    let cmd = format!(
        "{} test $LH_PEER -t 4 --json > {} || true",
        bin(),
        result.display()
    );
    args.extend(["--host-memory", "ignore", "--json", "--", "sh", "-c", &cmd]);
    let (code, _, stderr) = emulate(&args);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("is short of"),
        "the start line says so: {stderr}"
    );
    assert_eq!(tcp_mem(), LOW, "nothing changed");
    let doc: serde_json::Value =
        serde_json::from_str(&stderr[stderr.find("{\n").unwrap()..]).expect("the report is JSON");
    let short = doc["emulator"]["tcp_shortage"]
        .as_array()
        .expect("tcp_shortage");
    assert!(!short.is_empty(), "TCP ran short at 12 MiB: {doc:#}");
    let named: u64 = short
        .iter()
        .map(|h| {
            [
                "memory_pressures",
                "prune_called",
                "rcv_pruned",
                "ofo_pruned",
                "rcv_q_drop",
            ]
            .iter()
            .map(|k| h[k].as_u64().unwrap())
            .sum::<u64>()
        })
        .sum();
    assert!(named > 0, "{short:?}");
    assert_eq!(doc["emulator"]["host_memory"]["policy"], "ignore");
    // The sender (host a, where `longhaul test` runs) is short too, and the test's own report
    // names it.
    assert!(
        short
            .iter()
            .any(|h| h["host"].as_str().unwrap().ends_with("-a")),
        "{short:?}"
    );
    let test: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let warnings = test["end"]["longhaul"]["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("ran short of memory during the test")),
        "{warnings:?}"
    );
}

#[test]
fn a_test_on_a_host_short_of_tcp_memory_says_so_before_the_run_with_the_fix() {
    if !netns_privileges() {
        return;
    }
    let _m = machine_alone();
    let _low = TcpMemSet::to(LOW);
    // On loopback, in the machine's own namespace (the only one where tcp_mem is visible).
    let port = longhaul_testkit::fixtures::free_port().to_string();
    let mut server = longhaul(&["server", "-p", &port, "--iperf3-port", "off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let port_n: u16 = port.parse().unwrap();
    wait_until("the server to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port_n)).is_ok()
    });
    // Two streams with 16 MiB windows: 32 MiB of buffers on each side, the pressure value is 8 MiB.
    let test = [
        "test",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "-P",
        "2",
        "-w",
        "16M",
    ];
    let out = longhaul(&test).output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let note = stdout
        .lines()
        .find(|l| l.starts_with("note: this test's buffers (32 MiB)"))
        .unwrap_or_else(|| panic!("no tcp_mem note in:\n{stdout}"));
    assert!(
        note.contains(&format!(
            "(net.ipv4.tcp_mem \"{LOW}\": 2048 pages of 4096 bytes)"
        )),
        "{note}"
    );
    // 32 MiB + an eighth = 9,216 pages; the hard limit a third above.
    assert!(
        note.ends_with("fix: sysctl -w net.ipv4.tcp_mem=\"1024 9216 12288\""),
        "{note}"
    );
    let first_result = stdout
        .find("[SUM]")
        .or_else(|| stdout.find(" sec "))
        .unwrap_or(0);
    assert!(
        stdout.find(note).unwrap() < first_result,
        "said before the run:\n{stdout}"
    );
}
