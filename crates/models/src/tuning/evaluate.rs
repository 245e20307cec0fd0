//! [`evaluate`]: every check of a snapshot against a target, in a fixed order.

use super::buffers::buffers;
use super::congestion::congestion;
use super::links::links;
use super::queueing::queueing;
use super::tcp_memory::tcp_memory;
use super::tcp_options::tcp_options;
use super::window_limit::window_limit;
use super::{Finding, HostSnapshot, Target};

/// Checks `snap` against what `target` needs. Pure: the same snapshot and
/// target always give the same findings, in a fixed order.
pub fn evaluate(snap: &HostSnapshot, target: &Target) -> Vec<Finding> {
    let mut out = Vec::new();
    buffers(snap, target, &mut out);
    tcp_memory(snap, target, &mut out);
    tcp_options(snap, target, &mut out);
    congestion(snap, &mut out);
    queueing(snap, target, &mut out);
    links(snap, target, &mut out);
    window_limit(target, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::fixtures::{find, target, vm_defaults, well_tuned};
    use crate::tuning::{Status, any_fail, write_sysctl_file};

    #[test]
    fn vm_defaults_fail_10g_120ms_with_exact_fixes() {
        let f = evaluate(&vm_defaults(), &target());
        let rmem = find(&f, "net.core.rmem_max");
        assert_eq!(rmem.status, Status::Fail);
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=536870912")
        );
        // 4 MiB / 120 ms = 280 Mbit/s.
        assert!(
            rmem.observed.contains("279 Mbit/s") || rmem.observed.contains("280 Mbit/s"),
            "{}",
            rmem.observed
        );
        assert_eq!(find(&f, "net.core.wmem_max").status, Status::Fail);
        let tcp_rmem = find(&f, "net.ipv4.tcp_rmem");
        assert_eq!(tcp_rmem.status, Status::Fail);
        assert_eq!(
            tcp_rmem.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 131072 536870912\"")
        );
        assert_eq!(
            find(&f, "net.ipv4.tcp_wmem").fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_wmem=\"4096 16384 536870912\"")
        );
        assert_eq!(find(&f, "SO_*BUFFORCE").status, Status::Info);
        assert!(any_fail(&f));
        // Not root: cubic is loaded but not allowed.
        let allowed = find(&f, "net.ipv4.tcp_allowed_congestion_control");
        assert_eq!(
            allowed.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_allowed_congestion_control=\"reno bbr cubic\"")
        );
        let mtu = find(&f, "eth0 mtu");
        assert_eq!(mtu.status, Status::Warn);
        assert_eq!(mtu.fix.as_deref(), Some("ip link set dev eth0 mtu 9000"));
        let q = find(&f, "eth0 qdisc");
        assert_eq!(q.status, Status::Warn);
        assert_eq!(q.fix.as_deref(), Some("tc qdisc replace dev eth0 root fq"));
        let off = find(&f, "eth0 offloads");
        assert_eq!(off.status, Status::Info);
        assert_eq!(off.observed, "unknown (ethtool not installed)");
        assert_eq!(find(&f, "eth0 speed").status, Status::Info);
        // Loopback is never checked.
        assert!(f.iter().all(|f| !f.check.starts_with("lo ")));
        assert_eq!(find(&f, "net.ipv4.tcp_mtu_probing").status, Status::Ok);
        assert_eq!(find(&f, "streams (RFC 7323 window)").status, Status::Ok);
    }

    #[test]
    fn well_tuned_host_is_all_ok() {
        let f = evaluate(&well_tuned(), &target());
        let not_ok: Vec<&Finding> = f.iter().filter(|f| f.status != Status::Ok).collect();
        assert!(not_ok.is_empty(), "{not_ok:#?}");
        assert!(f.iter().all(|f| f.fix.is_none()));
        assert_eq!(write_sysctl_file(&f), "");
    }

    #[test]
    fn unknown_values_are_info_not_failures() {
        let snap = HostSnapshot::default();
        let f = evaluate(&snap, &target());
        assert!(!any_fail(&f), "{f:#?}");
    }
}
