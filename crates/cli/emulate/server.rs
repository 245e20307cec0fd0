//! The `longhaul server` the emulator starts on host b (on every host but CMD's, for a network), so
//! that `longhaul test`/`send` has a peer at once.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

/// Starts `longhaul server` in namespace `ns` (host `host`) and waits until it listens. It binds
/// every address of the host (dual-stack), which are only its own (for host b: 10.201.0.2,
/// fd00:4c48::2) and loopback. Its log lines go to this process's standard error, prefixed
/// `server: `.
pub(crate) fn start_server(ns: &str, host: &str) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("cannot find the longhaul executable")?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(["server", "--log", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start longhaul server on host {host}"))?;
    let stderr = child.stderr.take().context("server stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut ready = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("longhaul server listening on ") {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            } else {
                eprintln!("server: {line}");
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(10)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        bail!("longhaul server on host {host} did not start listening within 10 s");
    }
    Ok(child)
}
