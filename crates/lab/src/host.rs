//! Host facts for the result file: kernel, congestion controls, the TCP sysctls that bound a
//! long fat path, and (from the testbed) the offloads of the emulated hosts' devices. Read from
//! `/proc/sys` and `ethtool -k`; a fact that cannot be read is left out, never invented.

use std::collections::BTreeMap;
use std::path::Path;

use longhaul_experiments::result::HostFacts;
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

fn sysctl(name: &str) -> Option<String> {
    let path = Path::new("/proc/sys").join(name.replace('.', "/"));
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// This host's facts (offloads empty: see [`parse_offloads`]).
pub fn gather() -> HostFacts {
    let mut other = BTreeMap::new();
    if let Ok(cpu) = std::fs::read_to_string("/proc/cpuinfo")
        && let Some(model) = cpu
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
    {
        other.insert("cpu_model".into(), Value::from(model.trim()));
    }
    if let Ok(n) = std::thread::available_parallelism() {
        other.insert("cpus".into(), Value::from(n.get()));
    }
    if let Some(l) = sysctl("kernel.hostname") {
        other.insert("hostname".into(), Value::from(l));
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        other.insert("loadavg_at_start".into(), Value::from(l.trim()));
    }
    HostFacts {
        kernel: sysctl("kernel.osrelease").unwrap_or_default(),
        congestion_available: sysctl("net.ipv4.tcp_available_congestion_control")
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        sysctls: SYSCTLS
            .iter()
            .filter_map(|n| sysctl(n).map(|v| ((*n).to_owned(), v)))
            .collect(),
        offloads: BTreeMap::new(),
        other,
    }
}

/// The [`OFFLOADS`] from `ethtool -k DEV` output (`tcp-segmentation-offload: on`).
pub fn parse_offloads(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            OFFLOADS
                .contains(&k.trim())
                .then(|| (k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect()
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
