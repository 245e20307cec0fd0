//! Whether the process holds the capabilities that privileged socket options
//! need, read from the `CapEff` line of `/proc/self/status`.
//!
//! `SO_SNDBUFFORCE`/`SO_RCVBUFFORCE` (buffers beyond `net.core.*mem_max`) and
//! selecting a congestion control outside
//! `net.ipv4.tcp_allowed_congestion_control` need `CAP_NET_ADMIN`.

use std::fs;

/// Capability number of `CAP_NET_ADMIN` (linux/capability.h).
pub const CAP_NET_ADMIN: u32 = 12;

/// Whether the process has `CAP_NET_ADMIN` in its effective set.
///
/// Returns `false` if `/proc/self/status` cannot be read or parsed.
pub fn has_net_admin() -> bool {
    has_capability(CAP_NET_ADMIN)
}

/// Whether capability number `cap` (see capabilities(7)) is in the process's
/// effective set. Returns `false` if `/proc/self/status` cannot be read or
/// parsed, or for `cap >= 64`.
pub fn has_capability(cap: u32) -> bool {
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    effective_caps(&status).is_some_and(|mask| cap < 64 && mask & (1u64 << cap) != 0)
}

/// The `CapEff` hex mask from the text of a `/proc/<pid>/status` file.
fn effective_caps(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff() {
        let root = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                    CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
        assert_eq!(effective_caps(root), Some(0x1ff_ffff_ffff));
        let user = "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";
        assert_eq!(effective_caps(user), Some(0));
        let net_admin_only = "CapEff:\t0000000000001000\n";
        assert_eq!(effective_caps(net_admin_only), Some(1 << CAP_NET_ADMIN));
        assert_eq!(effective_caps("Name: x\n"), None);
        assert_eq!(effective_caps("CapEff:\tzz\n"), None);
    }

    #[test]
    fn agrees_with_the_kernel() {
        assert!(!has_capability(64));
        // The answer must match whether a forced buffer size is permitted.
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let forced = crate::set_recv_buffer(std::os::fd::AsFd::as_fd(&s), 1 << 20, true);
        assert_eq!(forced.is_ok(), has_net_admin(), "{forced:?}");
    }
}
