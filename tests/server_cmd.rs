//! `longhaul server` itself: running in the background with a log file and a pid file.

use std::time::Duration;

use crate::util::{ServerProc, json_test, longhaul};

#[test]
fn daemon_mode_detaches_logs_to_a_file_and_writes_its_pid() {
    let dir = std::env::temp_dir().join(format!("lh-daemon-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (log, pid) = (dir.join("server.log"), dir.join("server.pid"));
    // A free port: bind an ephemeral one and release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = longhaul(&[
        "server",
        "-D",
        "-B",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "--logfile",
        log.to_str().unwrap(),
        "--pidfile",
        pid.to_str().unwrap(),
    ]);
    // The foreground process returns at once; the daemon keeps serving.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("listening on 127.0.0.1:"));
    let mut pid_text = String::new();
    for _ in 0..100 {
        pid_text = std::fs::read_to_string(&pid).unwrap_or_default();
        if pid_text.ends_with('\n') {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let daemon_pid: i32 = pid_text
        .trim()
        .parse()
        .expect("pid file holds the daemon's pid");
    let result = std::panic::catch_unwind(|| {
        json_test("127.0.0.1", port, &["-t", "1"]);
        let mut text = String::new();
        for _ in 0..100 {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("test finished") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(text.contains("test finished"), "log file: {text}");
    });
    // Stop the daemon whatever happened.
    let _ = std::process::Command::new("kill")
        .arg(daemon_pid.to_string())
        .status();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn an_unwritable_log_file_is_an_error_before_detaching() {
    let out = longhaul(&[
        "server",
        "-D",
        "-p",
        "0",
        "--logfile",
        "/nonexistent-dir/x.log",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot open log file /nonexistent-dir/x.log"),
        "{err}"
    );
}

/// `--path-rate` is a rate the clients can pace at, for a server that serves files: anything else
/// is a usage error of one line, before the server starts.
#[test]
fn a_path_rate_out_of_range_or_without_files_is_a_usage_error() {
    for (args, says) in [
        (
            &["--path-rate", "0", "--root", "/tmp", "--key", "k"][..],
            "above 0",
        ),
        (
            &["--path-rate", "11T", "--root", "/tmp", "--key", "k"][..],
            "1k to 10T",
        ),
        (
            &["--path-rate", "fast", "--root", "/tmp", "--key", "k"][..],
            "--path-rate",
        ),
        (&["--path-rate", "1G"][..], "--root"),
    ] {
        let mut all = vec!["server", "-p", "0"];
        all.extend_from_slice(args);
        let out = longhaul(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// Logs that do not go to a terminal are plain text: no ANSI colour escapes in a `--logfile` nor in
/// stderr read through a pipe (what a service manager or `2>file` gives).
#[test]
fn logs_to_a_file_or_a_pipe_have_no_colour_escapes() {
    // stderr is a pipe here (ServerProc reads it).
    let mut piped = ServerProc::start(&[]);
    json_test("127.0.0.1", piped.port, &["-t", "1"]);
    piped.wait_for("test finished");
    let text = piped.log();
    assert!(!text.contains("\x1b["), "piped stderr: {text:?}");

    let dir = std::env::temp_dir().join(format!("lh-plain-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("server.log");
    let server = ServerProc::start(&["--logfile", log.to_str().unwrap()]);
    json_test("127.0.0.1", server.port, &["-t", "1"]);
    let mut text = String::new();
    for _ in 0..100 {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("test finished") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(text.contains("test finished"), "log file: {text:?}");
    assert!(!text.contains("\x1b["), "log file: {text:?}");
}

/// SIGTERM (what `systemctl stop` sends) ends the server cleanly: a running test ends within a
/// second or two with the reason on the client's side, the server logs that it stops and exits 0.
#[test]
fn sigterm_ends_running_tests_telling_the_client_why_and_exits_zero() {
    let mut server = ServerProc::start(&[]);
    let client = std::process::Command::new(crate::util::bin())
        .args([
            "test",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-t",
            "30",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_for("test started");
    std::thread::sleep(Duration::from_secs(1));
    let sent = std::time::Instant::now();
    crate::util::sigterm(server.pid());
    let out = client.wait_with_output().unwrap();
    let ended = sent.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("the server is shutting down (SIGTERM"),
        "{err}"
    );
    assert!(
        ended < Duration::from_secs(10),
        "the client ended {ended:?} after SIGTERM"
    );
    assert_eq!(server.ended().code(), Some(0));
    let log = server.log();
    assert!(
        log.contains("stopping (SIGTERM)") && log.contains("stopped"),
        "{log}"
    );
}
