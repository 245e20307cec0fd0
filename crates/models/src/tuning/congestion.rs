//! Congestion control: CUBIC (RFC 9438, the Linux default) or BBR; Reno's recovery after one loss takes
//! hours on these paths (responsiveness C·RTT²/(2·MSS): 10 Gbit/s, 120 ms, 1460 B gives 6,164 s).

use super::{Finding, HostSnapshot, Status};

/// The congestion-control findings: the default algorithm, the BBR module, and what unprivileged
/// processes may select.
pub(crate) fn congestion(snap: &HostSnapshot, out: &mut Vec<Finding>) {
    let has = |name: &str| snap.available_cc.iter().any(|c| c == name);
    let available = snap.available_cc.join(" ");
    let default = snap.default_cc.as_deref().unwrap_or("unknown");
    let observed = format!("default {default}; available: {available}");
    let why = "Reno halves its window on a loss and regains one segment per round trip: hours at \
               10G over 100 ms (calc responsiveness); CUBIC recovers in seconds and BBR does not \
               back off on isolated losses";
    let f = if snap.available_cc.is_empty() && snap.default_cc.is_none() {
        Finding::new("net.ipv4.tcp_congestion_control", Status::Info).observed("unknown")
    } else if !has("cubic") && !has("bbr") {
        Finding::new("net.ipv4.tcp_congestion_control", Status::Fail)
            .observed(observed)
            .fix("modprobe tcp_bbr\nsysctl -w net.ipv4.tcp_congestion_control=bbr")
    } else if !matches!(default, "cubic" | "bbr") {
        let pick = if has("bbr") { "bbr" } else { "cubic" };
        Finding::new("net.ipv4.tcp_congestion_control", Status::Warn)
            .observed(observed)
            .fix(format!("sysctl -w net.ipv4.tcp_congestion_control={pick}"))
    } else {
        Finding::new("net.ipv4.tcp_congestion_control", Status::Ok).observed(observed)
    };
    out.push(f.wanted("cubic or bbr available and default").why(why));

    if snap.available_cc.is_empty() {
        return;
    }
    if !has("bbr") {
        out.push(
            Finding::new("tcp_bbr module", Status::Info)
                .observed("not loaded")
                .wanted("loaded, to compare BBR with CUBIC (longhaul -C bbr)")
                .fix("modprobe tcp_bbr")
                .why(
                    "as root, selecting bbr on a socket loads the module on demand; \
                     unprivileged users need it loaded and allowed",
                ),
        );
    }
    // tcp(7): unprivileged processes may only select algorithms listed in
    // tcp_allowed_congestion_control.
    if !snap.net_admin {
        let missing: Vec<&str> = ["cubic", "bbr"]
            .into_iter()
            .filter(|cc| has(cc) && !snap.allowed_cc.iter().any(|a| a == cc))
            .collect();
        if !missing.is_empty() {
            let mut allowed: Vec<&str> = snap.allowed_cc.iter().map(String::as_str).collect();
            allowed.extend(&missing);
            out.push(
                Finding::new("net.ipv4.tcp_allowed_congestion_control", Status::Info)
                    .observed(snap.allowed_cc.join(" "))
                    .wanted(format!("includes {}", missing.join(" and ")))
                    .fix(format!(
                        "sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{}\"",
                        allowed.join(" ")
                    ))
                    .why("unprivileged processes may only choose the algorithms listed here"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::evaluate;
    use crate::tuning::fixtures::{find, target, well_tuned};

    #[test]
    fn congestion_control_rules() {
        let reno = HostSnapshot {
            available_cc: vec!["reno".into(), "cubic".into()],
            default_cc: Some("reno".into()),
            net_admin: true,
            ..well_tuned()
        };
        let f = evaluate(&reno, &target());
        let cc = find(&f, "net.ipv4.tcp_congestion_control");
        assert_eq!(cc.status, Status::Warn);
        assert_eq!(
            cc.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_congestion_control=cubic")
        );
        let bbr = find(&f, "tcp_bbr module");
        assert_eq!(bbr.status, Status::Info);
        assert_eq!(bbr.fix.as_deref(), Some("modprobe tcp_bbr"));

        let only_reno = HostSnapshot {
            available_cc: vec!["reno".into()],
            ..reno
        };
        let f = evaluate(&only_reno, &target());
        let cc = find(&f, "net.ipv4.tcp_congestion_control");
        assert_eq!(cc.status, Status::Fail);
        assert_eq!(
            cc.fix.as_deref(),
            Some("modprobe tcp_bbr\nsysctl -w net.ipv4.tcp_congestion_control=bbr")
        );
    }
}
