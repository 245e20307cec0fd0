//! Parsers of what the host says, for the snapshot: `tc qdisc show dev IF` and `ethtool -k IF` output,
//! sysctl values, and the kernel release. Pure: the engine runs the tools and reads the files.

use std::collections::BTreeMap;

use super::snapshot::{Feature, Offloads, Qdisc};

/// Reads `tc qdisc show dev IF` output: the root qdisc's kind and the kinds
/// of the qdiscs below it (ingress and clsact left out). `None` if no line
/// says `root`.
pub fn parse_tc_qdisc(out: &str) -> Option<Qdisc> {
    let mut root = None;
    let mut children = Vec::new();
    for line in out.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let [first, kind, ..] = tokens.as_slice() else {
            continue;
        };
        if *first != "qdisc" {
            continue;
        }
        if tokens.contains(&"root") {
            root = Some((*kind).to_owned());
        } else if !matches!(*kind, "ingress" | "clsact") {
            children.push((*kind).to_owned());
        }
    }
    root.map(|root| Qdisc { root, children })
}

/// Every feature in `ethtool -k IF` output, by name, with its value as printed: `on`, `off`,
/// `off [fixed]`, `on [requested off]`. Sub-features (indented lines such as `tx-tcp-segmentation`)
/// are listed like the others; the `Features for IF:` header is not. The one reader of `ethtool -k`
/// output: [`parse_ethtool_features`] picks the offloads doctor checks from it, and `longhaul lab`
/// the ones it records.
pub fn parse_ethtool_k(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter(|line| !line.starts_with("Features for "))
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            Some((name.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// Reads TSO, GSO and GRO from `ethtool -k IF` output (`name: on`,
/// `name: off [fixed]`).
pub fn parse_ethtool_features(out: &str) -> Offloads {
    let features = parse_ethtool_k(out);
    let feature = |name: &str| {
        features.get(name).map(|value| Feature {
            on: value.starts_with("on"),
            fixed: value.contains("[fixed]"),
        })
    };
    Offloads {
        tso: feature("tcp-segmentation-offload"),
        gso: feature("generic-segmentation-offload"),
        gro: feature("generic-receive-offload"),
    }
}

/// A three-number sysctl such as `tcp_rmem`: "4096\t131072\t6291456" →
/// [4096, 131072, 6291456].
pub fn sysctl_triple(v: &str) -> Option<[u64; 3]> {
    let n: Vec<u64> = v
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    <[u64; 3]>::try_from(n).ok()
}

/// A 0/1 sysctl: "1" → true, "0" → false (also "2" → true, as for
/// `tcp_timestamps`).
pub fn sysctl_flag(v: &str) -> Option<bool> {
    v.trim().parse::<u64>().ok().map(|n| n != 0)
}

/// A list sysctl such as `tcp_available_congestion_control`: its words.
pub fn sysctl_words(v: &str) -> Vec<String> {
    v.split_whitespace().map(str::to_owned).collect()
}

/// (major, minor) of a kernel release string: "6.18.44-fc" → (6, 18).
pub(crate) fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::fixtures::{find, target, well_tuned};
    use crate::tuning::{Probe, Status, evaluate};

    #[test]
    fn mq_with_fq_children_counts_as_fq() {
        let q = parse_tc_qdisc(
            "qdisc mq 0: root \nqdisc fq 0: parent :2 limit 10000p\n\
             qdisc fq 0: parent :1 limit 10000p\nqdisc clsact ffff: parent ffff:fff1\n",
        )
        .unwrap();
        assert_eq!(q.root, "mq");
        assert_eq!(q.children, ["fq", "fq"]);
        assert!(q.is_fq());
        assert_eq!(q.to_string(), "mq (2 × fq)");
        let q = parse_tc_qdisc(
            "qdisc pfifo_fast 0: root refcnt 2 bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n",
        )
        .unwrap();
        assert_eq!(q.root, "pfifo_fast");
        assert!(!q.is_fq());
        assert!(parse_tc_qdisc("").is_none());
    }

    #[test]
    fn every_ethtool_feature_is_read_with_its_value_as_printed() {
        let out = "Features for lh0:\nrx-checksumming: on [fixed]\ntcp-segmentation-offload: on\n\
                   \ttx-tcp-segmentation: on\ngeneric-receive-offload: off [requested on]\n";
        let all = parse_ethtool_k(out);
        assert_eq!(all.len(), 4, "{all:?}");
        assert_eq!(all["rx-checksumming"], "on [fixed]");
        assert_eq!(all["tx-tcp-segmentation"], "on");
        assert_eq!(all["generic-receive-offload"], "off [requested on]");
    }

    #[test]
    fn ethtool_output_is_parsed() {
        let out = "Features for eth0:\nrx-checksumming: on\n\
                   tcp-segmentation-offload: off\n\ttx-tcp-segmentation: off\n\
                   generic-segmentation-offload: on\ngeneric-receive-offload: off [fixed]\n";
        let o = parse_ethtool_features(out);
        assert_eq!(
            o.tso,
            Some(Feature {
                on: false,
                fixed: false
            })
        );
        assert_eq!(
            o.gso,
            Some(Feature {
                on: true,
                fixed: false
            })
        );
        assert_eq!(
            o.gro,
            Some(Feature {
                on: false,
                fixed: true
            })
        );

        let mut snap = well_tuned();
        snap.interfaces[0].offloads = Probe::Known(o);
        let f = evaluate(&snap, &target());
        let off = find(&f, "eth0 offloads");
        assert_eq!(off.status, Status::Warn);
        // GRO is fixed off: no command can turn it on.
        assert_eq!(off.fix.as_deref(), Some("ethtool -K eth0 tso on"));
        assert_eq!(off.observed, "tso off, gso on, gro off [fixed]");
    }
}
