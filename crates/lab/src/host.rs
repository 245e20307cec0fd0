//! Host facts for the result file: kernel, congestion controls, the TCP sysctls that bound a
//! long fat path, and (from the testbed) the offloads of the emulated hosts' devices. This module
//! chooses what to record and in which keys; reading is `longhaul_engine::doctor::record` and parsing
//! `ethtool -k` is `longhaul_models::tuning::parse_ethtool_k`, as for `longhaul doctor`. A fact that
//! cannot be read is left out, never invented.

use std::collections::BTreeMap;

use longhaul_engine::doctor::record;
use longhaul_experiments::result::HostFacts;
use longhaul_models::tuning::parse_ethtool_k;
use serde_json::Value;

/// The sysctls recorded with every run.
pub const SYSCTLS: &[&str] = &[
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.default_qdisc",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_slow_start_after_idle",
];

/// The offloads recorded (names as `ethtool -k` prints them).
pub const OFFLOADS: &[&str] = &[
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
    "tx-checksumming",
    "rx-checksumming",
    "scatter-gather",
];

/// This host's facts, read by `longhaul_engine::doctor::record` (offloads empty: the runner fills
/// them from the testbed with [`parse_offloads`]).
pub fn gather() -> HostFacts {
    let r = record(SYSCTLS);
    let mut other = BTreeMap::new();
    if let Some(model) = r.cpu_model {
        other.insert("cpu_model".into(), Value::from(model));
    }
    if let Some(n) = r.cpus {
        other.insert("cpus".into(), Value::from(n));
    }
    if let Some(h) = r.hostname {
        other.insert("hostname".into(), Value::from(h));
    }
    if let Some(l) = r.loadavg {
        other.insert("loadavg_at_start".into(), Value::from(l));
    }
    HostFacts {
        kernel: r.kernel_release.unwrap_or_default(),
        congestion_available: r.available_cc,
        sysctls: r.sysctls,
        offloads: BTreeMap::new(),
        other,
    }
}

/// The [`OFFLOADS`] from `ethtool -k DEV` output (`tcp-segmentation-offload: on`), read by
/// `longhaul_models::tuning::parse_ethtool_k`.
pub fn parse_offloads(text: &str) -> BTreeMap<String, String> {
    let mut all = parse_ethtool_k(text);
    all.retain(|name, _| OFFLOADS.contains(&name.as_str()));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offloads_are_parsed_from_ethtool_output() {
        let t = "Features for lh0:\nrx-checksumming: on [fixed]\ntcp-segmentation-offload: on\n\
                 \ttx-tcp-segmentation: on\ngeneric-receive-offload: off\n";
        let o = parse_offloads(t);
        assert_eq!(o.len(), 3);
        assert_eq!(o["tcp-segmentation-offload"], "on");
        assert_eq!(o["rx-checksumming"], "on [fixed]");
    }
}
