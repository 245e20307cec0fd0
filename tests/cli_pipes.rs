//! A closed standard output (a reader such as `head` that has read enough and gone) ends a command
//! quietly, by SIGPIPE as coreutils end there: no panic message, no backtrace, and a server whose
//! client went that way serves the next one (issue 24).

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

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

#[test]
fn a_test_whose_reader_has_gone_ends_quietly_and_the_server_serves_the_next() {
    let server = ServerProc::start(&[]);
    let port = server.port.to_string();
    let args = ["test", "127.0.0.1", "-p", &port, "-t", "2"];
    ended_quietly(&args, &into_a_closed_pipe(&args));
    let json = ["test", "127.0.0.1", "-p", &port, "-t", "1", "--json"];
    ended_quietly(&json, &into_a_closed_pipe(&json));
    let next = Command::new(bin())
        .args(["test", "127.0.0.1", "-p", &port, "-t", "1", "--json"])
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
