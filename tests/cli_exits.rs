//! How commands end besides their own end (issue 24). A closed standard output (a reader such as
//! `head` that has read enough and gone) ends a command quietly, by SIGPIPE as coreutils end there:
//! no panic message, no backtrace, and a server whose client went that way serves the next one. A
//! SIGINT during `longhaul test` ends the test on both ends and prints what ran. Every command is in
//! README's table of exit codes, exits 2 for bad usage and 1 when it fails.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{ServerProc, bin};

/// `longhaul ARGS` with its standard output a pipe nobody reads from any more.
fn into_a_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        // Whatever the caller's environment asks for, no backtrace may appear.
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run longhaul")
}

fn ended_quietly(args: &[&str], out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{args:?} ended with {:?}: {err}",
        out.status
    );
    assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
}

/// A one-second test against the server on `port` runs to its end with a JSON report.
fn serves_a_test(port: &str) {
    let next = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", port, "-t", "1", "--json"])
        .output()
        .expect("run longhaul test");
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&next.stdout).expect("a JSON report");
    assert!(v.is_object(), "{v}");
}

#[test]
fn commands_whose_reader_has_gone_end_quietly_by_sigpipe() {
    let _m = crate::util::machine_shared();
    for args in [
        &["calc", "--rate", "1G", "--rtt", "100ms"][..],
        &["calc", "--rate", "1G", "--rtt", "100ms", "--json"],
        &["calc", "path", "--rate", "10G", "--rtt", "120ms"],
        &["emulate", "presets"],
        &["lab", "builtins"],
        &["lab", "records"],
    ] {
        ended_quietly(args, &into_a_closed_pipe(args));
    }
}

/// `testbed list` against a service holding a booking: its table into a closed pipe.
#[test]
fn testbed_list_whose_reader_has_gone_ends_quietly() {
    use crate::testbed::{Service, at, post_booking};
    let dir = longhaul_testkit::fixtures::TempDir::new("list-pipe");
    let db = format!("sqlite://{}", dir.0.join("t.sqlite").display());
    let (svc, tokens) = Service::start(&db, &[("alice", "user")]);
    let body = serde_json::json!({
        "resource": "cern/starlight-lambda/1g-b",
        "start": at(1, 0),
        "end": at(1, 60),
    });
    let (status, answer) = post_booking(&svc, &tokens[0], &body, None);
    assert_eq!(status, 201, "{answer}");
    let url = svc.url("");
    for json in [false, true] {
        let mut args = vec!["testbed", "list", "--server", &url, "--token", &tokens[0]];
        if json {
            args.push("--json");
        }
        ended_quietly(&args, &into_a_closed_pipe(&args));
    }
}

#[test]
fn a_test_whose_reader_has_gone_ends_quietly_and_the_server_serves_the_next() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let args = ["test", "127.0.0.1", "-p", &port, "-t", "2"];
    ended_quietly(&args, &into_a_closed_pipe(&args));
    let json = ["test", "127.0.0.1", "-p", &port, "-t", "1", "--json"];
    ended_quietly(&json, &into_a_closed_pipe(&json));
    serves_a_test(&port);
}

/// SIGINT 2 s into a 10-s test: the client prints the summary of the ~2 s that ran (text, or a
/// JSON document that parses, marked interrupted) and exits 130; the server ends the test as
/// finished (not failed) after as long, and serves the next.
#[test]
fn sigint_during_a_test_keeps_what_ran_on_both_ends() {
    let mut server = ServerProc::start(&["--json"]);
    let port = server.port.to_string();
    for json in [false, true] {
        let mut args = vec!["test", "127.0.0.1", "-p", &port, "-t", "10", "-i", "0.5"];
        if json {
            args.push("--json");
        }
        let child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start longhaul test");
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs(2));
        crate::util::sigint(&child);
        let out = child.wait_with_output().expect("longhaul test ends");
        let took = started.elapsed();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(130), "{stdout}{stderr}");
        assert!(took < Duration::from_secs(6), "ended after {took:?}");
        assert!(stderr.contains("interrupted"), "{stderr}");
        let seconds = if json {
            let v: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON document");
            assert_eq!(v["end"]["longhaul"]["interrupted"], true, "{v}");
            assert!(!v["intervals"].as_array().unwrap().is_empty(), "{v}");
            v["end"]["sum_sent"]["seconds"].as_f64().unwrap()
        } else {
            let sum = stdout
                .lines()
                .find(|l| l.starts_with("[SUM]") && l.contains("sender"))
                .or_else(|| stdout.lines().find(|l| l.contains(" sender")))
                .unwrap_or_else(|| panic!("no summary: {stdout}"));
            // "[  1]   0.00-2.03   sec ..."
            let span = sum.split_whitespace().find(|w| w.contains('-')).unwrap();
            span.rsplit('-').next().unwrap().parse().unwrap()
        };
        assert!((1.5..4.0).contains(&seconds), "{seconds} s: {stdout}");
        // The server's own report of the same test: what ran, marked as stopped early.
        let reports = server.reports(if json { 2 } else { 1 });
        let mine = reports.last().expect("a report");
        assert_eq!(mine["end"]["longhaul"]["interrupted"], true, "{mine}");
        let theirs = mine["end"]["sum_received"]["seconds"]
            .as_f64()
            .expect("seconds");
        assert!(
            (1.5..4.0).contains(&theirs),
            "the server's {theirs} s: {mine}"
        );
        assert!(
            mine["end"]["sum_received"]["bytes"].as_u64() > Some(0),
            "{mine}"
        );
    }
    server.wait_for("test finished");
    let log = server.log();
    assert!(!log.contains("test ended with an error"), "{log}");
    serves_a_test(&port);
}

/// The commands `longhaul --help` lists.
fn commands() -> Vec<String> {
    let help = crate::util::longhaul(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    help.split("Commands:")
        .nth(1)
        .expect("a command list")
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_has_its_exit_codes_documented_and_bad_usage_exits_2() {
    let readme = include_str!("../README.md");
    let table = readme
        .split("### Exit codes")
        .nth(1)
        .expect("README has the exit code table")
        .split("\n### ")
        .next()
        .unwrap_or_default();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| `")).collect();
    let listed = commands();
    assert!(listed.len() >= 15, "{listed:?}");
    for cmd in &listed {
        let named = format!("`{cmd}`");
        assert!(
            rows.iter()
                .any(|r| r.split(" | ").next().is_some_and(|c| c.contains(&named))),
            "README's exit code table has no row for {cmd}"
        );
        let out = crate::util::longhaul(&[cmd, "--no-such-flag"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd} --no-such-flag: {err}");
        assert!(
            err.starts_with("error: ") && !err.contains("panicked"),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn failures_exit_1_and_bad_values_2() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port().to_string();
    drop(closed);
    let url = format!("http://127.0.0.1:{port}");
    for (args, code) in [
        (&["test", "127.0.0.1", "-p", &port][..], 1),
        (&["probe", "127.0.0.1", "-p", &port], 1),
        (&["testbed", "list", "--server", &url, "--token", "t"], 1),
        (&["keygen", "/proc/no-such-dir/key"], 1),
        (&["calc", "--rate", "1G", "--rtt", "0"], 2),
        (&["calc", "mathis", "--rtt", "100ms", "--loss", "2"], 2),
        (&["doctor", "--rate", "1G", "--rtt", "0"], 2),
    ] {
        let out = crate::util::longhaul(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("longhaul: error: "), "{args:?}: {err}");
    }
}

/// SIGTERM (a service manager's stop) ends a test as SIGINT does, with 143.
#[test]
fn sigterm_during_a_test_keeps_what_ran_and_exits_143() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let child = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "10", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start longhaul test");
    std::thread::sleep(Duration::from_secs(2));
    crate::util::sigterm(child.id());
    let out = child.wait_with_output().expect("longhaul test ends");
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON document");
    assert_eq!(v["end"]["longhaul"]["interrupted"], true, "{v}");
}

/// SIGINT during `--find-rate`'s trials: the search ends with the trials that finished, the cut
/// one left out, as one JSON document marked interrupted, and 130.
#[test]
fn sigint_during_find_rate_keeps_the_finished_trials() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let args = [
        "test",
        "127.0.0.1",
        "-p",
        &port,
        "-u",
        "--find-rate",
        "-b",
        "200M",
        "-t",
        "1",
    ];
    let child = Command::new(bin())
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start longhaul test --find-rate");
    std::thread::sleep(Duration::from_secs(3));
    crate::util::sigint(&child);
    let out = child.wait_with_output().expect("the search ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted: the search stopped after"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON document");
    assert_eq!(v["interrupted"], true, "{v}");
    let trials = v["trials"].as_array().expect("trials").len();
    let load = v["load"].as_array().expect("load").len();
    // A 1-s trial takes over 1.3 s with its set-up and pause: 3 s hold two at most.
    assert!(trials + load <= 2, "{trials} trials, {load} at load: {v}");
}
