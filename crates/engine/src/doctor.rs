//! Host facts for `longhaul doctor`: the I/O half of the host checks.
//!
//! [`gather`] reads the kernel's TCP and queueing tunables under `/proc/sys`, lists the interfaces in
//! `/sys/class/net`, asks `tc` for each interface's root qdisc and `ethtool` for its offloads (both
//! optional: a missing tool is recorded, not an error), and notes whether the process holds
//! `CAP_NET_ADMIN`. It never changes anything. The result is plain data,
//! [`longhaul_models::tuning::HostSnapshot`]; the rules that judge it, the fixes and the parsers of the
//! tools' output are pure and live in `longhaul_models::tuning`.
//!
//! [`record`] reads, through the same sysctl reader, the facts `longhaul lab` writes into every
//! result file (kernel, congestion controls, chosen sysctls as text, CPU, host name, load): the one
//! place that gathers facts about this host.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use longhaul_models::tuning::{
    HostSnapshot, Interface, Probe, parse_ethtool_features, parse_tc_qdisc, sysctl_flag,
    sysctl_triple, sysctl_words,
};
use longhaul_sys::{NetLimits, has_net_admin, read_sysctl};

/// Where Linux lists network interfaces.
const SYS_CLASS_NET: &str = "/sys/class/net";

/// `ARPHRD_LOOPBACK` (linux/if_arp.h): the `type` of a loopback interface.
const ARPHRD_LOOPBACK: u32 = 772;

/// Reads everything `longhaul_models::tuning::evaluate` looks at from this
/// host. Never fails and never writes: what cannot be read is left empty and
/// explained in [`HostSnapshot::problems`]. Runs `tc` and `ethtool` once per
/// interface if they are installed.
pub fn gather() -> HostSnapshot {
    let mut snap = HostSnapshot {
        net_admin: has_net_admin(),
        ..HostSnapshot::default()
    };
    let mut problems = Vec::new();
    match NetLimits::read() {
        Ok(l) => {
            snap.rmem_max = Some(l.rmem_max);
            snap.wmem_max = Some(l.wmem_max);
            snap.tcp_rmem = Some(l.tcp_rmem);
            snap.tcp_wmem = Some(l.tcp_wmem);
            snap.available_cc = l.available_cc;
            snap.allowed_cc = l.allowed_cc;
            snap.default_cc = Some(l.default_cc);
            snap.window_scaling = Some(l.tcp_window_scaling);
            snap.mtu_probing = l.tcp_mtu_probing;
            snap.default_qdisc = l.default_qdisc;
        }
        Err(e) => {
            // Some entries are hidden in non-initial network namespaces;
            // read what is there one by one.
            problems.push(format!("reading the TCP limits: {e}"));
            let mut get = |name: &str| sysctl(name, &mut problems);
            snap.rmem_max = get("net.core.rmem_max").and_then(|v| v.parse().ok());
            snap.wmem_max = get("net.core.wmem_max").and_then(|v| v.parse().ok());
            snap.tcp_rmem = get("net.ipv4.tcp_rmem").and_then(|v| sysctl_triple(&v));
            snap.tcp_wmem = get("net.ipv4.tcp_wmem").and_then(|v| sysctl_triple(&v));
            snap.available_cc = get("net.ipv4.tcp_available_congestion_control")
                .map(|v| sysctl_words(&v))
                .unwrap_or_default();
            snap.allowed_cc = get("net.ipv4.tcp_allowed_congestion_control")
                .map(|v| sysctl_words(&v))
                .unwrap_or_default();
            snap.default_cc = get("net.ipv4.tcp_congestion_control");
            snap.window_scaling = get("net.ipv4.tcp_window_scaling").and_then(|v| sysctl_flag(&v));
            snap.mtu_probing = get("net.ipv4.tcp_mtu_probing").and_then(|v| v.parse().ok());
            snap.default_qdisc = get("net.core.default_qdisc");
        }
    }
    let mut get = |name: &str| sysctl(name, &mut problems);
    snap.kernel_release = get("kernel.osrelease");
    snap.tcp_mem = get("net.ipv4.tcp_mem").and_then(|v| sysctl_triple(&v));
    snap.page_size = Some(longhaul_sys::tcp_memory::page_size());
    snap.timestamps = get("net.ipv4.tcp_timestamps").and_then(|v| sysctl_flag(&v));
    snap.sack = get("net.ipv4.tcp_sack").and_then(|v| sysctl_flag(&v));
    snap.no_metrics_save = get("net.ipv4.tcp_no_metrics_save").and_then(|v| sysctl_flag(&v));
    snap.netdev_max_backlog = get("net.core.netdev_max_backlog").and_then(|v| v.parse().ok());
    snap.notsent_lowat = get("net.ipv4.tcp_notsent_lowat").and_then(|v| v.parse().ok());
    snap.interfaces = interfaces(Path::new(SYS_CLASS_NET), &mut problems);
    snap.problems = problems;
    snap
}

/// Facts that identify this host and its TCP set-up, as text, for a record of a run (`longhaul lab`'s
/// result files). A fact that cannot be read is `None` or left out, never invented.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRecord {
    /// `kernel.osrelease`.
    pub kernel_release: Option<String>,
    /// `net.ipv4.tcp_available_congestion_control`, one name per word.
    pub available_cc: Vec<String>,
    /// Each requested sysctl that could be read, by name; runs of whitespace (the tabs between the
    /// numbers of `tcp_rmem`) become one space.
    pub sysctls: BTreeMap<String, String>,
    /// `kernel.hostname`.
    pub hostname: Option<String>,
    /// The first `model name` in `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// How many CPUs this process may use (`std::thread::available_parallelism`).
    pub cpus: Option<usize>,
    /// `/proc/loadavg` as read, trimmed.
    pub loadavg: Option<String>,
}

/// Reads a [`HostRecord`] with the sysctls `names` (dotted, as `sysctl(8)` names them). Never fails
/// and never writes; runs no tool.
pub fn record(names: &[&str]) -> HostRecord {
    let text = |name: &str| {
        read_sysctl(name)
            .ok()
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    HostRecord {
        kernel_release: text("kernel.osrelease"),
        available_cc: text("net.ipv4.tcp_available_congestion_control")
            .map(|v| sysctl_words(&v))
            .unwrap_or_default(),
        sysctls: names
            .iter()
            .filter_map(|&n| text(n).map(|v| (n.to_owned(), v)))
            .collect(),
        hostname: text("kernel.hostname"),
        cpu_model: fs::read_to_string("/proc/cpuinfo").ok().and_then(|cpu| {
            cpu.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        }),
        cpus: std::thread::available_parallelism().ok().map(|n| n.get()),
        loadavg: fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|l| l.trim().to_owned()),
    }
}

/// Reads one sysctl; a failure is noted in `problems` and gives `None`.
fn sysctl(name: &str, problems: &mut Vec<String>) -> Option<String> {
    match read_sysctl(name) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    }
}

/// Reads a one-line attribute file under an interface's sysfs directory.
fn attr(dir: &Path, name: &str) -> Option<String> {
    fs::read_to_string(dir.join(name))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Every interface under `root` (normally `/sys/class/net`), sorted by name.
fn interfaces(root: &Path, problems: &mut Vec<String>) -> Vec<Interface> {
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) => {
            problems.push(format!("listing {}: {e}", root.display()));
            return Vec::new();
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let dir = root.join(&name);
            let kind: Option<u32> = attr(&dir, "type").and_then(|v| v.parse().ok());
            // `speed` is -1 or unreadable (EINVAL) when the driver has none.
            let speed_mbps = attr(&dir, "speed")
                .and_then(|v| v.parse::<i64>().ok())
                .and_then(|v| u64::try_from(v).ok())
                .filter(|&v| v > 0);
            let qdisc = run_tool("tc", &["qdisc", "show", "dev", &name]).and_then(|out| {
                parse_tc_qdisc(&out).map_or_else(
                    || Probe::Unknown("tc listed no root qdisc".into()),
                    Probe::Known,
                )
            });
            let offloads = run_tool("ethtool", &["-k", &name])
                .and_then(|out| Probe::Known(parse_ethtool_features(&out)));
            Interface {
                loopback: kind == Some(ARPHRD_LOOPBACK) || name == "lo",
                operstate: attr(&dir, "operstate").unwrap_or_else(|| "unknown".into()),
                mtu: attr(&dir, "mtu").and_then(|v| v.parse().ok()),
                speed_mbps,
                tx_queue_len: attr(&dir, "tx_queue_len").and_then(|v| v.parse().ok()),
                qdisc,
                offloads,
                name,
            }
        })
        .collect()
}

/// Runs a read-only query tool and returns its standard output. The tool is
/// looked up in `PATH`, then in `/usr/sbin` and `/sbin` (often missing from
/// an unprivileged user's `PATH`).
fn run_tool(tool: &str, args: &[&str]) -> Probe<String> {
    for program in [
        tool.to_owned(),
        format!("/usr/sbin/{tool}"),
        format!("/sbin/{tool}"),
    ] {
        let out = Command::new(&program)
            .args(args)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output();
        match out {
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Probe::Unknown(format!("{tool} could not run: {e}")),
            Ok(out) if out.status.success() => {
                return Probe::Known(String::from_utf8_lossy(&out.stdout).into_owned());
            }
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let first = stderr.lines().next().unwrap_or("").trim();
                return Probe::Unknown(format!(
                    "{tool} {}: {} {first}",
                    args.join(" "),
                    out.status
                ));
            }
        }
    }
    Probe::Unknown(format!("{tool} not installed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_reads_this_host_without_failing() {
        let snap = gather();
        // /proc/sys is always there on Linux, even in containers.
        assert!(snap.kernel_release.is_some(), "{:?}", snap.problems);
        assert!(snap.interfaces.iter().any(|i| i.loopback), "{snap:#?}");
    }

    #[test]
    fn record_reads_this_host_and_joins_multi_valued_sysctls_with_one_space() {
        let r = record(&["net.ipv4.tcp_rmem", "no.such.sysctl"]);
        assert!(r.kernel_release.is_some(), "{r:?}");
        assert_eq!(r.sysctls.len(), 1, "{r:?}");
        let rmem = &r.sysctls["net.ipv4.tcp_rmem"];
        assert_eq!(rmem.split(' ').count(), 3, "{rmem:?}");
        assert!(r.cpus.is_some_and(|n| n > 0));
    }
}
