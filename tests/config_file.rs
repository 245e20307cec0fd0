//! The daemons' configuration files (issue 21): `--config FILE` (or /etc/longhaul/NAME.toml) sets
//! any long flag, the command line wins, `--print-config` prints what is in effect as a file that
//! reads back the same, and a bad file is refused naming the file, the line and the key.

use std::path::Path;
use std::process::Command;

use longhaul_testkit::fixtures::TempDir;

use crate::util::{ServerProc, bin};

fn write(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `longhaul ARGS`: (exit code, stdout, stderr).
fn longhaul(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin()).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `key = value` part of each setting line of a `--print-config` output (not the defaults,
/// commented out).
fn settings(printed: &str) -> Vec<String> {
    printed
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split("  # ").next().unwrap().to_owned())
        .collect()
}

#[test]
fn daemon_settings_come_from_the_file_and_the_command_line_wins() {
    let dir = TempDir::new("config");
    let file = dir.0.join("server.toml");
    let f = file.to_str().unwrap();
    write(
        &file,
        "# a data-transfer node's test server\nmax-tests = 3\nno_udp = true\n\
         allow-from = [\"127.0.0.0/8\", \"::1\"]\niperf3-port = \"off\"\nmax-rate = \"10G\"\n",
        0o644,
    );
    let (code, printed, err) = longhaul(&[
        "server",
        "--config",
        f,
        "--max-tests",
        "5",
        "--print-config",
    ]);
    assert_eq!(code, Some(0), "{err}");
    for line in [
        "max-tests = 5  # command line",
        "no-udp = true  # file",
        "allow-from = [\"127.0.0.0/8\", \"::1\"]  # file",
        "iperf3-port = \"off\"  # file",
        "max-rate = \"10G\"  # file",
        "# port = 7067  # default",
        "# bind =",
    ] {
        assert!(
            printed.lines().any(|l| l == line),
            "no {line:?} in:\n{printed}"
        );
    }
    // What it prints is a file that reads back to the same settings.
    let again = dir.0.join("printed.toml");
    write(&again, &printed, 0o600);
    let (code, reprinted, err) = longhaul(&[
        "server",
        "--config",
        again.to_str().unwrap(),
        "--print-config",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(settings(&reprinted), settings(&printed));

    // The server runs with them: UDP is refused as the file says.
    let srv = ServerProc::start(&["--config", f]);
    let port = srv.port.to_string();
    let (code, _, err) = longhaul(&["test", "127.0.0.1", "-p", &port, "-u", "-t", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("UDP tests are not served here (--no-udp)"),
        "{err}"
    );
}

#[test]
fn a_bad_configuration_file_names_the_file_the_line_and_the_key() {
    let dir = TempDir::new("config-bad");
    let file = dir.0.join("server.toml");
    let f = file.to_str().unwrap();
    for (text, expected) in [
        (
            "port = 7067\nmax_test = 3\n",
            format!(
                "{f}:2: max_test: unknown key: `longhaul server` has no --max-test (its keys: port,"
            ),
        ),
        (
            "max-tests = 0\n",
            format!("{f}:1: max-tests: invalid value '0' for '--max-tests"),
        ),
        (
            "\n\nno-udp = \"yes\"\n",
            format!("{f}:3: no-udp: a switch: give true or false"),
        ),
        (
            "bind = [\"::1\", \"127.0.0.1\"]\n",
            format!("{f}:1: bind: takes one value, not an array"),
        ),
        ("port = 7067\nport = 7068\n", format!("{f}:2: ")),
        (
            "[max-tests]\nvalue = 3\n",
            format!("{f}:1: max-tests: a table is not a value"),
        ),
    ] {
        write(&file, text, 0o600);
        let (code, _, err) = longhaul(&["server", "--config", f, "--print-config"]);
        assert_eq!(code, Some(2), "{text}: {err}");
        assert!(
            err.starts_with(&format!("longhaul: error: {expected}")),
            "{text}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    }
    // A file others may change is no daemon's settings.
    write(&file, "port = 7067\n", 0o666);
    let (code, _, err) = longhaul(&["server", "--config", f]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("group or others may write it (mode 0666)"),
        "{err}"
    );
    let (code, _, err) = longhaul(&[
        "server",
        "--config",
        dir.0.join("nope.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nope.toml: No such file"), "{err}");
}

#[test]
fn every_daemon_reads_a_file_and_prints_its_settings_without_secrets() {
    let dir = TempDir::new("config-daemons");
    let testbed = dir.0.join("testbed.toml");
    write(
        &testbed,
        "database = \"postgres://longhaul:hunter2@db.example/testbed\"\nagent-timeout = 120\n",
        0o600,
    );
    let (code, printed, err) = longhaul(&[
        "testbed",
        "serve",
        "--config",
        testbed.to_str().unwrap(),
        "--print-config",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(printed.contains("agent-timeout = 120  # file"), "{printed}");
    assert!(
        printed.contains("database = \"postgres://longhaul:***@db.example/testbed\"  # file"),
        "{printed}"
    );
    assert!(!printed.contains("hunter2"), "{printed}");

    let agent = dir.0.join("agent.toml");
    write(
        &agent,
        "host = \"cern/pc-7\"\nserver = \"https://testbed.example\"\n",
        0o600,
    );
    let (code, printed, err) = longhaul(&[
        "agent",
        "--config",
        agent.to_str().unwrap(),
        "--print-config",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        printed.contains("host = \"cern/pc-7\"  # file"),
        "{printed}"
    );

    let monitor = dir.0.join("monitor.toml");
    write(
        &monitor,
        "listen = \"127.0.0.1:0\"\nprobe-size = 200\n",
        0o600,
    );
    let (code, printed, err) = longhaul(&[
        "monitor",
        "run",
        "mesh.toml",
        "--config",
        monitor.to_str().unwrap(),
        "--print-config",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(printed.contains("probe-size = 200  # file"), "{printed}");
}

/// The example files the package installs in /etc/longhaul (`generate config NAME`) name every
/// setting of their daemon with its help, change nothing as shipped, and each setting
/// uncommented at its shown default is read back as set, with that value.
#[test]
fn the_example_files_name_every_setting_and_change_nothing() {
    let dir = TempDir::new("examples");
    for (name, command) in [
        ("server", &["server"][..]),
        ("testbed", &["testbed", "serve"][..]),
        ("monitor", &["monitor", "run"][..]),
        ("agent", &["agent"][..]),
    ] {
        let (code, example, err) = longhaul(&["generate", "config", name]);
        assert_eq!(code, Some(0), "{err}");
        let file = dir.0.join(format!("{name}.toml"));
        write(&file, &example, 0o644);
        let mut args = command.to_vec();
        args.extend(["--config", file.to_str().unwrap(), "--print-config"]);
        match name {
            "monitor" => args.push("mesh.toml"),
            "agent" => args.extend(["--host", "lab/dtn-1"]),
            _ => {}
        }
        let (code, printed, err) = longhaul(&args);
        assert_eq!(code, Some(0), "{name}: {err}");
        let from_file = |printed: &str| {
            let lines: Vec<&str> = printed.lines().filter(|l| l.ends_with("# file")).collect();
            settings(&lines.join("\n"))
        };
        assert_eq!(
            from_file(&printed),
            Vec::<String>::new(),
            "{name}: {printed}"
        );
        // Every key --print-config knows is in the example, with help above it.
        for line in printed.lines().skip(1) {
            let key = line.trim_start_matches("# ").split(" =").next().unwrap();
            let at = example
                .find(&format!("\n#{key} = "))
                .unwrap_or_else(|| panic!("{name}: no {key} in the example:\n{example}"));
            assert!(
                example[..at].ends_with(|c: char| c.is_alphanumeric() || ".)]`'\"".contains(c)),
                "{name}: {key} has no help above it"
            );
        }
        // A default uncommented is a setting, read back with its value.
        let with_default = example
            .lines()
            .find(|l| l.starts_with('#') && l.contains(" = ") && !l.contains("unset"))
            .map(|l| l.trim_start_matches('#').to_owned())
            .unwrap();
        write(&file, &format!("{example}{with_default}\n"), 0o644);
        let (code, printed, err) = longhaul(&args);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert_eq!(from_file(&printed), vec![with_default], "{name}: {printed}");
    }
}
