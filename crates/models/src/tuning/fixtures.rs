//! Hosts and targets the rules' tests share: the project's test VM as shipped, a well-tuned 10G host,
//! and the default 10 Gbit/s × 120 ms target.

use longhaul_units::Nanos;

use super::{Feature, Finding, HostSnapshot, Interface, Offloads, Probe, Qdisc, Target};

pub(crate) const MS_120: Nanos = Nanos(120_000_000);
pub(crate) const G10: u64 = 10_000_000_000;

pub(crate) fn iface(name: &str, mtu: u32, qdisc: &str, offloads: bool) -> Interface {
    let on = Feature {
        on: offloads,
        fixed: false,
    };
    Interface {
        name: name.into(),
        loopback: false,
        operstate: "up".into(),
        mtu: Some(mtu),
        speed_mbps: Some(100_000),
        tx_queue_len: Some(10_000),
        qdisc: Probe::Known(Qdisc {
            root: qdisc.into(),
            children: vec![],
        }),
        offloads: Probe::Known(Offloads {
            tso: Some(on),
            gso: Some(on),
            gro: Some(on),
        }),
    }
}

pub(crate) fn lo() -> Interface {
    Interface {
        name: "lo".into(),
        loopback: true,
        operstate: "unknown".into(),
        mtu: Some(65_536),
        speed_mbps: None,
        tx_queue_len: Some(1000),
        qdisc: Probe::Known(Qdisc {
            root: "noqueue".into(),
            children: vec![],
        }),
        offloads: Probe::Unknown("ethtool not installed".into()),
    }
}

/// The project's test VM as shipped (Linux 6.18.44, Debian 12.11; sysctls as read on the VM).
pub(crate) fn vm_defaults() -> HostSnapshot {
    HostSnapshot {
        kernel_release: Some("6.18.44".into()),
        rmem_max: Some(4_194_304),
        wmem_max: Some(4_194_304),
        tcp_rmem: Some([4096, 131_072, 33_554_432]),
        tcp_wmem: Some([4096, 16_384, 4_194_304]),
        tcp_mem: Some([287_913, 383_885, 575_826]),
        page_size: Some(4096),
        available_cc: vec!["reno".into(), "bbr".into(), "cubic".into()],
        allowed_cc: vec!["reno".into(), "bbr".into()],
        default_cc: Some("bbr".into()),
        window_scaling: Some(true),
        timestamps: Some(true),
        sack: Some(true),
        mtu_probing: Some(0),
        no_metrics_save: Some(false),
        default_qdisc: Some("pfifo_fast".into()),
        netdev_max_backlog: Some(1000),
        notsent_lowat: Some(4_294_967_295),
        interfaces: vec![
            Interface {
                speed_mbps: None,
                tx_queue_len: Some(1000),
                offloads: Probe::Unknown("ethtool not installed".into()),
                ..iface("eth0", 1400, "pfifo_fast", true)
            },
            lo(),
        ],
        net_admin: false,
        problems: vec![],
    }
}

/// fasterdata's "10G NIC with paths up to 200 ms" test-host set plus
/// jumbo frames, fq and offloads.
pub(crate) fn well_tuned() -> HostSnapshot {
    HostSnapshot {
        rmem_max: Some(536_870_912),
        wmem_max: Some(536_870_912),
        tcp_rmem: Some([4096, 87_380, 536_870_912]),
        tcp_wmem: Some([4096, 65_536, 536_870_912]),
        mtu_probing: Some(1),
        no_metrics_save: Some(true),
        default_qdisc: Some("fq".into()),
        netdev_max_backlog: Some(250_000),
        allowed_cc: vec!["reno".into(), "bbr".into(), "cubic".into()],
        interfaces: vec![iface("eth0", 9000, "fq", true), lo()],
        ..vm_defaults()
    }
}

pub(crate) fn target() -> Target {
    Target {
        rate_bps: G10,
        rtt: MS_120,
        streams: 1,
    }
}

pub(crate) fn find<'a>(findings: &'a [Finding], check: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.check == check)
        .unwrap_or_else(|| panic!("no finding {check:?} in {findings:#?}"))
}
