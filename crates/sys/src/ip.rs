//! Running iproute2's `ip` command.
//!
//! Creating and deleting network namespaces (`ip netns add/del NAME`, which
//! bind-mounts the namespace at `/run/netns/NAME`) and configuring addresses,
//! routes and links inside them (`ip -n NAME addr add …`) is left to the
//! `ip` tool rather than reimplemented over rtnetlink. [`ip`] runs it and turns
//! a failure into a [`SysError`] that names the command line and carries
//! `ip`'s own message.

use std::io;
use std::process::Command;

use crate::error::{Result, SysError};

/// Runs `ip ARGS…` and returns its standard output.
///
/// Fails when `ip` cannot be started (for example `ENOENT` when iproute2 is
/// not installed) or exits unsuccessfully; the error names the command line
/// (`ip netns add lh-x`) and holds the exit status and `ip`'s standard error,
/// e.g. `ip netns add lh-x: exit status: 1: Cannot create namespace file
/// "/run/netns/lh-x": File exists`. Such a failure has kind
/// [`io::ErrorKind::Other`] and no raw OS error.
pub fn ip(args: &[&str]) -> Result<String> {
    let describe = || format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| SysError::new(describe(), e))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(SysError::new(
            describe(),
            io::Error::other(format!("{}: {}", out.status, stderr.trim())),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_command_and_stderr() {
        match ip(&["link", "show", "dev", "lh-no-such-dev"]) {
            Err(e) => {
                let text = e.to_string();
                assert!(
                    text.starts_with("ip link show dev lh-no-such-dev: exit status"),
                    "{text}"
                );
                assert!(text.contains("lh-no-such-dev"), "{text}");
                println!("error as printed: {text}");
            }
            Ok(out) => panic!("unexpected success: {out}"),
        }
    }

    #[test]
    fn returns_stdout() {
        // `ip -V` only prints the version; it touches no namespace or device.
        match ip(&["-V"]) {
            Ok(out) => assert!(out.contains("iproute2"), "{out}"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                longhaul_testkit::cannot_run(format_args!(
                    "`ip` is not installed (apt-get install iproute2): {e}"
                ));
            }
            Err(e) => panic!("{e}"),
        }
    }
}
