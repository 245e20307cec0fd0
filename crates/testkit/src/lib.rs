//! How a test that cannot run on this machine ends: it fails with the reason, so that a run that
//! was never made is not counted as passed. Tests that need root (namespaces, TUN devices,
//! `SO_*BUFFORCE`, a tmpfs mount) or a program (iperf3, ping, traceroute, tcpdump, Chromium,
//! PostgreSQL, schemathesis, ...) ask here first; `scripts/test.sh`, run as root, installs
//! everything they need. Whoever wants to run the rest anyway sets `LONGHAUL_TEST_SKIP=1`: such a
//! test then writes `skipped: <test>: <reason>` to standard error and returns, and
//! `scripts/test.sh` counts those lines. For tests only: no crate uses it outside its tests and
//! test fixtures. Depends on std only. Start at [`require`]; [`fixtures`] has what several crates'
//! tests share (temporary directories, a PostgreSQL cluster of their own); [`flights`] is a relay
//! in virtual time that counts a conversation's round trips.

use std::fmt::Display;
use std::io::Write;
use std::path::Path;

pub mod fixtures;
pub mod flights;

/// The environment variable that turns "cannot run" from a failure into a skip (value `1`).
pub const SKIP_VAR: &str = "LONGHAUL_TEST_SKIP";

/// The calling test cannot run here, for `reason`. Panics with the reason (and what to do about
/// it) unless [`SKIP_VAR`] is `1`; then writes `skipped: <test>: <reason>` and returns, and the
/// caller returns. The line goes straight to standard error, past the test harness's capture, so
/// that it shows in the run's output; `<test>` is the name of the thread, which libtest names
/// after the test.
#[track_caller]
pub fn cannot_run(reason: impl Display) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed thread)")
        .to_owned();
    if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
        // One write of the whole line, so that the harness's own output (the same pipe, under
        // scripts/test.sh) cannot cut into it; best effort: a closed stderr fails nothing.
        let line = format!("skipped: {test}: {reason}\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        return;
    }
    panic!(
        "{test} cannot run here: {reason}. scripts/test.sh (as root) installs and runs everything \
         the tests need; {SKIP_VAR}=1 skips such tests instead (the run prints which, and why)"
    );
}

/// `ok`, after [`cannot_run`]`(reason)` when it is false.
#[track_caller]
pub fn require(ok: bool, reason: impl Display) -> bool {
    if !ok {
        cannot_run(reason);
    }
    ok
}

/// Whether `name` is an executable file in a directory of `PATH` (as `command -v` finds it); when
/// not, [`cannot_run`] with the Debian package that provides it.
#[track_caller]
pub fn program(name: &str, package: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| is_executable(&dir.join(name))));
    require(
        found,
        format_args!("`{name}` is not installed (apt-get install {package})"),
    )
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_program_on_path() {
        assert!(program("sh", "dash"));
    }

    #[test]
    fn a_missing_program_fails_the_test_with_the_reason_or_is_skipped() {
        let r = std::panic::catch_unwind(|| program("lh-no-such-program", "nothing"));
        if std::env::var(SKIP_VAR).is_ok_and(|v| v == "1") {
            assert!(matches!(r, Ok(false)));
        } else {
            let msg = r.expect_err("must fail");
            let msg = msg.downcast_ref::<String>().expect("a formatted message");
            assert!(
                msg.contains("cannot run here: `lh-no-such-program` is not installed"),
                "{msg}"
            );
        }
    }
}
