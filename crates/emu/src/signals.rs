//! Termination signals for the emulator's front end: SIGINT, SIGTERM and
//! SIGHUP set a flag (via `signal-hook`) instead of killing the process, so
//! the caller can stop its child command and tear the testbed down; then it
//! exits with 128 + the signal number.

use std::io;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use signal_hook::SigId;
use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGTERM};

/// How often a child is polled while waiting for it.
const POLL: Duration = Duration::from_millis(20);
/// How long a child gets to exit after being passed the signal before it
/// is killed.
pub const GRACE: Duration = Duration::from_secs(2);

/// The termination signals caught while installed; restores the default
/// actions when dropped.
#[derive(Debug)]
pub struct Termination {
    last: Arc<AtomicUsize>,
    ids: Vec<SigId>,
}

impl Termination {
    /// Catches SIGINT, SIGTERM and SIGHUP from now on.
    pub fn install() -> io::Result<Self> {
        let last = Arc::new(AtomicUsize::new(0));
        let mut ids = Vec::new();
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            ids.push(signal_hook::flag::register_usize(
                sig,
                last.clone(),
                sig as usize,
            )?);
        }
        Ok(Self { last, ids })
    }

    /// The last termination signal received, if any.
    pub fn received(&self) -> Option<i32> {
        match self.last.load(Ordering::SeqCst) {
            0 => None,
            s => i32::try_from(s).ok(),
        }
    }

    /// Waits for `child`; if a termination signal arrives meanwhile, passes
    /// it on to the child, gives it [`GRACE`] to exit, then kills it.
    /// Returns the child's status and the signal received, if any.
    pub fn wait_child(&self, child: &mut Child) -> io::Result<(ExitStatus, Option<i32>)> {
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok((status, self.received()));
            }
            if let Some(sig) = self.received() {
                return stop_child(child, sig).map(|s| (s, Some(sig)));
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Termination {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Sends `sig` to `child`, waits up to [`GRACE`], then kills it.
pub fn stop_child(child: &mut Child, sig: i32) -> io::Result<ExitStatus> {
    stop(child, sig, false)
}

/// Like [`stop_child`] for a child started as the leader of its own process
/// group (`CommandExt::process_group(0)`): the signal, and the final
/// SIGKILL, go to the whole group, so a shell's children stop too.
pub fn stop_process_group(child: &mut Child, sig: i32) -> io::Result<ExitStatus> {
    let status = stop(child, sig, true)?;
    // Anything of the group still alive (the leader has gone) is killed.
    send(child.id(), SIGKILL, true);
    Ok(status)
}

/// Signals `pid` (or its process group) with /bin/kill: no unsafe code.
fn send(pid: u32, sig: i32, group: bool) {
    let target = if group {
        format!("-{pid}")
    } else {
        pid.to_string()
    };
    let _ = Command::new("kill")
        .args(["-s", &sig.to_string(), "--", &target])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn stop(child: &mut Child, sig: i32, group: bool) -> io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    send(child.id(), sig, group);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(POLL);
    }
    if group {
        send(child.id(), SIGKILL, true);
    } else {
        let _ = child.kill();
    }
    child.wait()
}

/// Waits up to `limit` for `child` to exit on its own.
pub fn wait_for(child: &mut Child, limit: Duration) -> io::Result<Option<ExitStatus>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stubborn_child_is_killed_and_a_polite_one_stops() {
        let mut polite = Command::new("sleep").arg("30").spawn().unwrap();
        let t = Instant::now();
        let status = stop_child(&mut polite, SIGTERM).unwrap();
        assert!(t.elapsed() < GRACE, "{:?}", t.elapsed());
        assert!(!status.success());
        let mut done = Command::new("true").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(stop_child(&mut done, SIGTERM).unwrap().success());
    }

    #[test]
    fn a_shells_children_stop_with_its_group() {
        use std::os::unix::process::CommandExt;
        let mut sh = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; true"])
            .process_group(0)
            .spawn()
            .unwrap();
        assert_eq!(wait_for(&mut sh, Duration::from_millis(100)).unwrap(), None);
        let pgid = sh.id();
        stop_process_group(&mut sh, SIGTERM).unwrap();
        // No live process of the group is left (orphans may linger as zombies until init reaps them).
        let live = || {
            let out = Command::new("pgrep")
                .args(["-g", &pgid.to_string()])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .ok()
                        .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()))
                        .is_some_and(|r| !r.starts_with('Z'))
                })
                .count()
        };
        let t = Instant::now();
        while live() > 0 && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(POLL);
        }
        assert_eq!(live(), 0);
    }
}
