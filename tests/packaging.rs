//! What the Debian package ships besides the binary (issue 21): a manual page per command, from
//! the same flag definitions as `--help`, each rendered by man(1) without a warning; and shell
//! completions, the bash one completing subcommands and flags.

use std::process::Command;

use longhaul_testkit::fixtures::{TempDir, run};

use crate::util::bin;

#[test]
fn every_command_has_a_manual_page_that_man_renders_cleanly() {
    let dir = TempDir::new("man");
    let out = run(Command::new(bin()).args(["generate", "man"]).arg(&dir.0));
    let pages: Vec<String> = out.lines().map(str::to_owned).collect();
    for name in [
        "longhaul.1",
        "longhaul-server.1",
        "longhaul-test.1",
        "longhaul-testbed-serve.1",
        "longhaul-testbed-hosts-accept.1",
        "longhaul-monitor-run.1",
        "longhaul-agent.1",
    ] {
        assert!(
            pages.iter().any(|p| p.ends_with(&format!("/{name}"))),
            "no {name}: {pages:?}"
        );
    }
    assert!(
        !pages.iter().any(|p| p.contains("generate")),
        "the hidden command has no page"
    );
    for page in &pages {
        let man = Command::new("man")
            .args(["--warnings", "-l", page])
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&man.stdout);
        assert!(
            man.status.success(),
            "{page}: {}",
            String::from_utf8_lossy(&man.stderr)
        );
        assert!(
            man.stderr.is_empty(),
            "{page}: {}",
            String::from_utf8_lossy(&man.stderr)
        );
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{page}: {text}"
        );
    }
    let server = std::fs::read_to_string(dir.0.join("longhaul-server.1")).unwrap();
    assert!(server.contains("max\\-tests"), "the flags are in the page");
}

/// The bash completion, sourced in bash, completes `longhaul ser` to `server` and `longhaul server
/// --max-t` to its three flags.
#[test]
fn the_bash_completion_completes_subcommands_and_flags() {
    let script = Command::new(bin())
        .args(["generate", "completions", "bash"])
        .output()
        .unwrap();
    assert!(script.status.success());
    let dir = TempDir::new("completion");
    let file = dir.0.join("longhaul.bash");
    std::fs::write(&file, &script.stdout).unwrap();
    let complete = |words: &[&str]| {
        let line = words.join(" ");
        let program = format!(
            "source {}; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; \
             COMP_POINT=${{#COMP_LINE}}; _longhaul longhaul {} {}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display(),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        run(Command::new("bash").args(["-c", &program]))
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(complete(&["longhaul", "ser"]), ["server"]);
    assert_eq!(
        complete(&["longhaul", "server", "--max-t"]),
        ["--max-tests", "--max-transfers", "--max-test-memory"]
    );
    for shell in ["zsh", "fish"] {
        let out = Command::new(bin())
            .args(["generate", "completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success() && out.stdout.len() > 1000, "{shell}");
    }
}

/// `longhaul --version` says which commit it was built from (the checkout's, here), for what
/// target, and what is built in; `-V` stays one line.
#[test]
fn the_version_names_the_commit_and_what_is_built_in() {
    let out = Command::new(bin()).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("longhaul {}", env!("CARGO_PKG_VERSION")));
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    if head.status.success() {
        let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
        assert!(lines[1].starts_with(&format!("commit: {head}")), "{text}");
    } else {
        assert_eq!(lines[1], "commit: unknown", "{text}");
    }
    assert!(
        lines[2].starts_with(&format!("target: {}-", std::env::consts::ARCH)),
        "{text}"
    );
    assert!(lines[3].starts_with("built in: "), "{text}");
    let short = Command::new(bin()).arg("-V").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&short.stdout).lines().count(), 1);
}

/// Under systemd (`Type=notify`, `WatchdogSec=`), each daemon says READY=1 once it serves, then
/// feeds the watchdog every half interval: here the test plays systemd's notification socket.
#[test]
fn daemons_tell_systemd_when_they_serve() {
    use std::os::unix::net::UnixDatagram;
    let dir = TempDir::new("notify");
    let socket = dir.0.join("notify.sock");
    let systemd = UnixDatagram::bind(&socket).unwrap();
    systemd
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let db = dir.0.join("tb.sqlite");
    for args in [
        vec!["server", "-p", "0", "--iperf3-port", "off"],
        vec![
            "testbed",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database",
            db.to_str().unwrap(),
        ],
    ] {
        // As systemd does: WATCHDOG_PID is the daemon's (the shell's, which execs it).
        let child = Command::new("sh")
            .args(["-c", r#"WATCHDOG_PID=$$ exec "$0" "$@""#, bin()])
            .args(&args)
            .env("NOTIFY_SOCKET", &socket)
            .env("WATCHDOG_USEC", "300000")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let _child = crate::util::KillOnDrop(child);
        let mut buf = [0u8; 4096];
        let mut said = Vec::new();
        let start = std::time::Instant::now();
        // READY=1, then the watchdog fed every 150 ms: six feeds in well under 10 s.
        while said.iter().filter(|l| *l == "WATCHDOG=1").count() < 6 {
            let n = systemd.recv(&mut buf).expect("a notification");
            said.extend(
                String::from_utf8_lossy(&buf[..n])
                    .lines()
                    .map(str::to_owned),
            );
            assert!(start.elapsed().as_secs() < 30, "{args:?}: {said:?}");
        }
        assert!(said.iter().any(|l| l == "READY=1"), "{args:?}: {said:?}");
        assert!(
            said.iter().any(|l| l.starts_with("STATUS=serving on ")),
            "{args:?}: {said:?}"
        );
    }
}

/// Every systemd unit of packaging/systemd passes `systemd-analyze verify` (with this build's
/// binary for /usr/bin/longhaul), and `systemd-analyze security` rates none worse than MEDIUM.
#[test]
fn the_systemd_units_verify() {
    let units = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/systemd");
    let dir = TempDir::new("units");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(units).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("/usr/bin/longhaul", bin());
        std::fs::write(dir.0.join(&name), text).unwrap();
        names.push(name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "longhaul-agent.service",
            "longhaul-monitor.service",
            "longhaul-server.service",
            "longhaul-testbed.service"
        ]
    );
    // Each unit's Documentation= page exists (verify runs man on it).
    let man = dir.0.join("man");
    let out = Command::new(bin())
        .args(["generate", "man"])
        .arg(man.join("man1"))
        .output()
        .unwrap();
    assert!(out.status.success());
    for name in &names {
        let unit = format!("./{name}");
        let out = Command::new("systemd-analyze")
            .args(["verify", &unit])
            .env("MANPATH", &man)
            .current_dir(&dir.0)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.trim().is_empty(),
            "{name}: {err}"
        );
        let out = Command::new("systemd-analyze")
            .args(["security", "--offline=true", &unit])
            .current_dir(&dir.0)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let level = text
            .lines()
            .find(|l| l.contains("Overall exposure level"))
            .unwrap_or_else(|| panic!("{name}: {text}"));
        assert!(
            level.contains(" OK") || level.contains(" MEDIUM"),
            "{name}: {level}"
        );
    }
}

/// Under systemd, a daemon's stderr is the journal's stream (`$JOURNAL_STREAM` names its device
/// and inode): each log line then starts with its syslog priority, with no colour and no time.
/// With the variable inherited but stderr elsewhere, lines are as ever.
#[test]
fn logs_to_the_journal_carry_syslog_priorities() {
    use std::os::unix::fs::MetadataExt;
    let dir = TempDir::new("journal");
    // Taken, so the server warns that it serves no iperf3 clients there.
    let taken = std::net::TcpListener::bind("[::]:0").unwrap();
    let taken = taken.local_addr().unwrap().port().to_string();
    for journal in [true, false] {
        let log = dir.0.join(format!("stderr-{journal}"));
        let file = std::fs::File::create(&log).unwrap();
        let meta = file.metadata().unwrap();
        let ino = if journal { meta.ino() } else { meta.ino() + 1 };
        let child = Command::new(bin())
            .args([
                "server",
                "-p",
                "0",
                "--iperf3-port",
                &taken,
                "--log",
                "info",
            ])
            .env("JOURNAL_STREAM", format!("{}:{ino}", meta.dev()))
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        let child = crate::util::KillOnDrop(child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let text = loop {
            let text = std::fs::read_to_string(&log).unwrap();
            if text.contains("server listening") && text.contains("iperf3 clients not served") {
                break text;
            }
            assert!(std::time::Instant::now() < deadline, "{text}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        drop(child);
        let logged: Vec<&str> = text.lines().filter(|l| l.contains("longhaul_")).collect();
        assert!(logged.len() >= 2, "{text}");
        let info = logged
            .iter()
            .find(|l| l.contains("server listening"))
            .unwrap();
        let warning = logged
            .iter()
            .find(|l| l.contains("iperf3 clients not served"))
            .unwrap();
        if journal {
            assert!(info.starts_with("<6>longhaul_engine::server: "), "{text}");
            assert!(warning.starts_with("<4>"), "{text}");
            assert!(!text.contains('\x1b') && !text.contains(" INFO "), "{text}");
        } else {
            assert!(info.contains(" INFO ") && !info.starts_with('<'), "{text}");
            assert!(warning.contains(" WARN "), "{text}");
        }
    }
}
