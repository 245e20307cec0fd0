//! The `/etc/sysctl.d` snippet: the `sysctl -w` fixes of a doctor run, in the form that survives a
//! reboot.

use super::Finding;

/// Renders the `sysctl -w` fixes among `findings` as the contents of
/// `/etc/sysctl.d/90-longhaul.conf`, so they survive a reboot (apply now with
/// `sysctl --system`). Empty if no fix is a sysctl.
pub fn write_sysctl_file(findings: &[Finding]) -> String {
    let mut lines = Vec::new();
    for f in findings {
        let Some(fix) = &f.fix else { continue };
        for cmd in fix.lines() {
            let Some(assignments) = cmd.trim().strip_prefix("sysctl -w ") else {
                continue;
            };
            if let Some((name, value)) = assignments.split_once('=') {
                let value = value.trim().trim_matches('"');
                lines.push(format!("{} = {value}", name.trim()));
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "# /etc/sysctl.d/90-longhaul.conf, written by `longhaul doctor`.\n\
         # Apply without a reboot: sysctl --system\n",
    );
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::evaluate;
    use crate::tuning::fixtures::{target, vm_defaults};

    #[test]
    fn sysctl_file_collects_every_sysctl_fix() {
        let f = evaluate(&vm_defaults(), &target());
        let conf = write_sysctl_file(&f);
        assert!(
            conf.starts_with("# /etc/sysctl.d/90-longhaul.conf"),
            "{conf}"
        );
        for line in [
            "net.core.rmem_max = 536870912",
            "net.core.wmem_max = 536870912",
            "net.ipv4.tcp_rmem = 4096 131072 536870912",
            "net.ipv4.tcp_wmem = 4096 16384 536870912",
            "net.core.default_qdisc = fq",
            "net.ipv4.tcp_no_metrics_save = 1",
            "net.core.netdev_max_backlog = 250000",
            "net.ipv4.tcp_allowed_congestion_control = reno bbr cubic",
        ] {
            assert!(
                conf.lines().any(|l| l == line),
                "missing {line:?} in\n{conf}"
            );
        }
        // Not sysctls: left to the "To fix" list.
        assert!(!conf.contains("ip link"));
        assert!(!conf.contains("tc qdisc"));
    }
}
