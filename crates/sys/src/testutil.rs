//! Helpers for the crate's privileged tests: uniquely named, self-deleting
//! network namespaces. Every name starts with `lh-sys-test-<pid>-`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::Result;
use crate::ip::ip;
use crate::netns::netns_path;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace created with `ip netns add lh-sys-test-<pid>-<n>-<tag>`
/// and deleted with `ip netns del` when dropped (also while unwinding).
pub(crate) struct TestNetns {
    name: String,
}

impl TestNetns {
    /// Creates a fresh namespace; `tag` ends the name (keep the whole name
    /// short enough for `ip`, which accepts up to 255 bytes).
    pub(crate) fn new(tag: &str) -> Result<Self> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("lh-sys-test-{}-{n}-{tag}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Self { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn path(&self) -> PathBuf {
        netns_path(&self.name)
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("cleanup failed: {e}");
        }
    }
}

/// Whether a test that creates namespaces and TUN devices can run; when not, the
/// test fails with the reason ([`longhaul_testkit::cannot_run`]) or, opted out,
/// is skipped. `ip netns add` and `setns` need `CAP_SYS_ADMIN`, TUN devices
/// and addresses `CAP_NET_ADMIN`.
pub(crate) fn netns_privileges() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    longhaul_testkit::require(
        crate::has_net_admin(),
        "needs CAP_NET_ADMIN (TUN devices, addresses): run as root",
    ) && longhaul_testkit::require(
        crate::has_capability(CAP_SYS_ADMIN),
        "needs CAP_SYS_ADMIN (network namespaces): run as root",
    )
}
