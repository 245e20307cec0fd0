//! Per-interface checks (interfaces that are up and not loopback): link speed, MTU, root qdisc and
//! TSO/GSO/GRO; and `tcp_mtu_probing`, which matters once jumbo frames are in use.

use longhaul_units::{fmt_duration, fmt_rate, responsiveness};

use super::parse::kernel_version;
use super::target::TEN_GBIT;
use super::{Feature, Finding, HostSnapshot, Interface, Probe, Status, Target};

/// The MTU recommended on 10 Gbit/s and faster paths (jumbo frames).
pub const JUMBO_MTU: u32 = 9000;

/// Per-interface checks (up, non-loopback interfaces only) and MTU probing.
pub(crate) fn links(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    let checked: Vec<&Interface> = snap.interfaces.iter().filter(|i| i.checked()).collect();
    if checked.is_empty() {
        out.push(
            Finding::new("interfaces", Status::Info)
                .observed(if snap.interfaces.is_empty() {
                    "none listed".to_owned()
                } else {
                    "none up besides loopback".to_owned()
                })
                .wanted("the interface that carries the path")
                .why("MTU, qdisc and offload checks need an interface that is up"),
        );
    }
    let kernel = snap.kernel_release.as_deref().and_then(kernel_version);
    let bbr_default = snap.default_cc.as_deref() == Some("bbr");
    for i in &checked {
        let n = &i.name;
        // Link speed: a NIC slower than the target cannot carry it (if the
        // path uses that NIC; the route is not known here).
        let f = match i.speed_mbps {
            Some(mbps) => {
                let bps = mbps.saturating_mul(1_000_000);
                let status = if bps >= t.rate_bps {
                    Status::Ok
                } else {
                    Status::Warn
                };
                Finding::new(format!("{n} speed"), status).observed(fmt_rate(bps))
            }
            None => Finding::new(format!("{n} speed"), Status::Info)
                .observed("not reported (virtual NIC?)"),
        };
        out.push(f.wanted(format!("≥ {}", fmt_rate(t.rate_bps))).why(format!(
                    "if the path leaves through {n}, its line rate bounds the test (txqueuelen {})",
                    i.tx_queue_len.map_or("unknown".to_owned(), |q| q.to_string())
                )));

        // MTU: the Mathis ceiling grows with the MSS and Reno's recovery
        // time shrinks with it (Mathis et al. 1997; C·RTT²/(2·MSS) at 10G,
        // 120 ms: 6,164 s at MSS 1460, 1,004 s at 8960). Every hop must carry the larger frames.
        if let Some(mtu) = i.mtu {
            let status = if mtu >= JUMBO_MTU {
                Status::Ok
            } else if t.rate_bps >= TEN_GBIT {
                Status::Warn
            } else {
                Status::Info
            };
            let mss = u64::from(mtu.saturating_sub(40)).max(1);
            let mut f = Finding::new(format!("{n} mtu"), status)
                .observed(mtu.to_string())
                .wanted(format!("≥ {JUMBO_MTU} on 10G and faster paths"))
                .why(format!(
                    "larger segments raise the loss-limited ceiling and speed recovery: one loss \
                     costs Reno {} at MSS {mss}, {} at MSS 8960; every hop on the path must \
                     carry 9000-byte frames",
                    fmt_duration(responsiveness(t.rate_bps, t.rtt, mss)),
                    fmt_duration(responsiveness(t.rate_bps, t.rtt, 8960)),
                ));
            if status != Status::Ok {
                f = f.fix(format!("ip link set dev {n} mtu {JUMBO_MTU}"));
            }
            out.push(f);
        }

        let f = match &i.qdisc {
            Probe::Known(q) if q.is_fq() => {
                Finding::new(format!("{n} qdisc"), Status::Ok).observed(q.to_string())
            }
            Probe::Known(q) => {
                let old_bbr = kernel.is_some_and(|v| v < (4, 20)) && bbr_default;
                Finding::new(
                    format!("{n} qdisc"),
                    if old_bbr { Status::Fail } else { Status::Warn },
                )
                .observed(q.to_string())
                .fix(format!("tc qdisc replace dev {n} root fq"))
            }
            Probe::Unknown(why) => Finding::new(format!("{n} qdisc"), Status::Info)
                .observed(format!("unknown ({why})")),
        };
        out.push(f.wanted("fq").why(
            "fq paces each flow and keeps bursts off the path (fasterdata); since Linux 4.20 TCP \
             also paces by itself, so SO_MAX_PACING_RATE and BBR work without fq, but BBR on \
             older kernels needs it",
        ));

        // TSO/GSO/GRO: at 10G+ per-packet CPU cost is the limit; offloads
        // move 64 KiB per stack traversal instead of one MTU (at 100G the
        // bottleneck is the host again: "Reexamining Paradigms of End-to-End
        // Data Movement", arXiv 2512.15028).
        let f = match &i.offloads {
            Probe::Known(o) => {
                let off: Vec<&str> = o
                    .each()
                    .into_iter()
                    .filter(|(_, f)| f.is_some_and(|f| !f.on))
                    .map(|(name, _)| name)
                    .collect();
                let changeable: Vec<&str> = o
                    .each()
                    .into_iter()
                    .filter(|(_, f)| f.is_some_and(|f| !f.on && !f.fixed))
                    .map(|(name, _)| name)
                    .collect();
                let observed = o
                    .each()
                    .iter()
                    .map(|(name, f)| {
                        let state = match f {
                            Some(Feature { on: true, fixed }) => {
                                if *fixed {
                                    "on [fixed]"
                                } else {
                                    "on"
                                }
                            }
                            Some(Feature { on: false, fixed }) => {
                                if *fixed {
                                    "off [fixed]"
                                } else {
                                    "off"
                                }
                            }
                            None => "not listed",
                        };
                        format!("{name} {state}")
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let mut f = Finding::new(
                    format!("{n} offloads"),
                    if off.is_empty() {
                        Status::Ok
                    } else {
                        Status::Warn
                    },
                )
                .observed(observed);
                if !changeable.is_empty() {
                    let args: Vec<String> = changeable.iter().map(|c| format!("{c} on")).collect();
                    f = f.fix(format!("ethtool -K {n} {}", args.join(" ")));
                }
                f
            }
            Probe::Unknown(why) => Finding::new(format!("{n} offloads"), Status::Info)
                .observed(format!("unknown ({why})")),
        };
        out.push(f.wanted("tso, gso, gro on").why(
            "segmentation and receive offloads hand the stack 64 KiB at a time instead of one \
             MTU; without them per-packet CPU cost limits a stream well below 10 Gbit/s",
        ));
    }

    // RFC 4821 packetization-layer PMTU discovery: with jumbo frames, a hop
    // with a smaller MTU whose ICMP "fragmentation needed" is filtered stalls
    // connections; probing recovers. fasterdata_tuning.py sets it when the
    // MTU exceeds 8000.
    let jumbo = checked.iter().any(|i| i.mtu.is_some_and(|m| m > 8000));
    let name = "net.ipv4.tcp_mtu_probing";
    let f = match (snap.mtu_probing, jumbo) {
        (None, _) => Finding::new(name, Status::Info).observed("unknown"),
        (Some(0), true) => Finding::new(name, Status::Warn)
            .observed("0")
            .fix(format!("sysctl -w {name}=1")),
        (Some(v), _) => Finding::new(name, Status::Ok).observed(v.to_string()),
    };
    out.push(
        f.wanted(if jumbo {
            "1 (jumbo frames in use)"
        } else {
            "1 with jumbo frames"
        })
        .why(
            "with jumbo frames, a smaller-MTU hop that drops ICMP 'fragmentation needed' \
                 stalls connections; probing (RFC 4821) finds the working size",
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::evaluate;
    use crate::tuning::fixtures::{find, lo, target, vm_defaults, well_tuned};

    #[test]
    fn qdisc_is_a_warning_except_for_bbr_before_4_20() {
        let mut snap = vm_defaults();
        assert_eq!(
            find(&evaluate(&snap, &target()), "eth0 qdisc").status,
            Status::Warn
        );
        snap.kernel_release = Some("4.19.0-27-amd64".into());
        assert_eq!(
            find(&evaluate(&snap, &target()), "eth0 qdisc").status,
            Status::Fail
        );
        snap.default_cc = Some("cubic".into());
        assert_eq!(
            find(&evaluate(&snap, &target()), "eth0 qdisc").status,
            Status::Warn
        );
        assert_eq!(kernel_version("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(kernel_version("4.19.0-27-amd64"), Some((4, 19)));
        assert_eq!(kernel_version("x"), None);
    }

    #[test]
    fn jumbo_frames_want_mtu_probing() {
        let snap = HostSnapshot {
            mtu_probing: Some(0),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let p = find(&f, "net.ipv4.tcp_mtu_probing");
        assert_eq!(p.status, Status::Warn);
        assert_eq!(
            p.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_mtu_probing=1")
        );
    }

    #[test]
    fn slow_nic_and_small_mtu_below_10g() {
        let mut snap = well_tuned();
        snap.interfaces[0].speed_mbps = Some(1000);
        snap.interfaces[0].mtu = Some(1500);
        let t = Target {
            rate_bps: 5_000_000_000,
            ..target()
        };
        let f = evaluate(&snap, &t);
        assert_eq!(find(&f, "eth0 speed").status, Status::Warn);
        // Below 10G jumbo frames are a suggestion.
        assert_eq!(find(&f, "eth0 mtu").status, Status::Info);
        assert!(!f.iter().any(|f| f.check == "net.core.netdev_max_backlog"));
    }

    #[test]
    fn no_interface_up_is_reported() {
        let snap = HostSnapshot {
            interfaces: vec![lo()],
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        assert_eq!(find(&f, "interfaces").status, Status::Info);
    }
}
