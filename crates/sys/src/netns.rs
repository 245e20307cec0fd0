//! Running code inside another network namespace without moving the caller.
//!
//! A network namespace is a per-thread property on Linux. [`run_in_netns`]
//! spawns a short-lived scoped thread, moves only that thread into the target
//! namespace (`setns(2)` with `CLONE_NEWNET`) and runs a closure there, so the
//! calling thread never changes namespace. Whatever the closure *creates* —
//! sockets, TUN devices — belongs to the namespace it was created in and stays
//! there, usable from any thread of the process, after the closure returns:
//!
//! ```no_run
//! use std::net::TcpListener;
//! use longhaul_sys::{netns_path, run_in_netns};
//!
//! let path = netns_path("lh-receiver");
//! let listener = run_in_netns(&path, || TcpListener::bind("10.201.0.2:5001"))??;
//! // `listener` accepts connections arriving in lh-receiver, from this thread.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Namespaces are created and deleted with `ip netns add/del NAME` (see
//! [`ip()`](crate::ip())), which keeps each one alive by bind-mounting it at
//! `/run/netns/NAME` ([`netns_path`]). `setns` into a network namespace needs
//! `CAP_SYS_ADMIN`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Result, SysError};

/// Directory where `ip netns add NAME` bind-mounts named network namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// The path of the namespace `ip netns add NAME` creates: `/run/netns/NAME`.
pub fn netns_path(name: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(name)
}

/// Runs `f` on a new scoped thread that has first joined the network
/// namespace at `path` (`setns(open(path), CLONE_NEWNET)`), and returns `f`'s
/// result. The calling thread's namespace is never changed.
///
/// `path` is a namespace file such as [`netns_path`]`("lh-a")` or
/// `/proc/PID/ns/net`. Threads that `f` spawns inherit the namespace. Fails
/// (without running `f`) if `path` cannot be opened or `setns` is refused
/// (`EPERM` without `CAP_SYS_ADMIN`, `EINVAL` if `path` is not a network
/// namespace). A panic in `f` is propagated to the caller.
pub fn run_in_netns<T: Send>(path: &Path, f: impl FnOnce() -> T + Send) -> Result<T> {
    let ns = File::open(path)
        .map_err(|e| SysError::new(format!("open network namespace {}", path.display()), e))?;
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| {
            // SAFETY: `ns` is an open file descriptor for the duration of the
            // call; setns only changes the calling (freshly spawned) thread's
            // namespace and touches no memory of ours.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                return Err(SysError::last_os_error(|| {
                    format!("setns(CLONE_NEWNET) into {}", path.display())
                }));
            }
            Ok(f())
        });
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Identifier of the calling thread's network namespace: the inode number of
/// `/proc/thread-self/ns/net` (what `ip netns identify` and `lsns` compare).
/// Two threads are in the same network namespace exactly when the numbers
/// are equal. For the tests (that [`run_in_netns`] entered the namespace).
#[cfg(test)]
pub(crate) fn current_netns_id() -> Result<u64> {
    netns_id(Path::new("/proc/thread-self/ns/net"))
}

/// Identifier (inode number) of the network namespace at `path`, for example
/// [`netns_path`]`("lh-a")`. For the tests.
#[cfg(test)]
pub(crate) fn netns_id(path: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .map(|m| m.ino())
        .map_err(|e| SysError::new(format!("stat {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{TestNetns, netns_privileges};

    #[test]
    fn path_of_named_namespace() {
        assert_eq!(netns_path("lh-a"), PathBuf::from("/run/netns/lh-a"));
    }

    #[test]
    fn own_namespace_is_stable_and_shared_by_threads() {
        let here = current_netns_id().unwrap();
        assert_eq!(netns_id(Path::new("/proc/self/ns/net")).unwrap(), here);
        let there = std::thread::spawn(current_netns_id)
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(here, there);
    }

    #[test]
    fn missing_namespace_is_reported_without_running() {
        let path = netns_path("lh-sys-test-does-not-exist");
        let err = run_in_netns(&path, || panic!("must not run")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert!(
            err.to_string()
                .starts_with("open network namespace /run/netns/lh-sys-test-does-not-exist: "),
            "{err}"
        );
    }

    #[test]
    fn runs_in_own_namespace_by_path() {
        // Joining the namespace we are already in needs CAP_SYS_ADMIN too.
        let here = current_netns_id().unwrap();
        match run_in_netns(Path::new("/proc/self/ns/net"), current_netns_id) {
            Ok(id) => assert_eq!(id.unwrap(), here),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
                longhaul_testkit::cannot_run(format_args!("needs CAP_SYS_ADMIN ({e})"));
            }
        }
    }

    #[test]
    fn enters_named_namespace_and_leaves_caller_alone() {
        if !netns_privileges() {
            return;
        }
        let ns = TestNetns::new("ns").unwrap();
        let here = current_netns_id().unwrap();
        let target = netns_id(&ns.path()).unwrap();
        assert_ne!(here, target);
        let inside = run_in_netns(&ns.path(), current_netns_id).unwrap().unwrap();
        assert_eq!(inside, target);
        assert_eq!(current_netns_id().unwrap(), here);
        // Borrowing from the caller's stack works (scoped thread).
        let mut seen = Vec::new();
        run_in_netns(&ns.path(), || seen.push(current_netns_id().unwrap())).unwrap();
        assert_eq!(seen, [target]);
        println!("caller netns {here}, {} netns {target}", ns.name());
    }

    #[test]
    fn propagates_panics() {
        if !netns_privileges() {
            return;
        }
        let ns = TestNetns::new("panic").unwrap();
        let caught = std::panic::catch_unwind(|| {
            let _ = run_in_netns(&ns.path(), || panic!("boom inside netns"));
        });
        assert!(caught.is_err());
    }
}
