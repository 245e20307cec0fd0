//! The paths of the seed documents, each a topology file embedded from
//! `crates/topology/presets/` (so each is also an example of the format).

use crate::Topology;

/// A built-in path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preset {
    /// Name on the command line (`longhaul emulate cern-starlight -- …`).
    pub name: &'static str,
    /// One line for `longhaul emulate presets`.
    pub summary: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
    /// The topology file text.
    pub toml: &'static str,
}

impl Preset {
    /// Parses the embedded file (file name `presets/NAME.toml` in errors).
    pub fn topology(&self) -> Result<Topology, crate::TopologyError> {
        Topology::from_toml(self.toml, &format!("presets/{}.toml", self.name))
    }
}

const PRESETS: [Preset; 5] = [
    Preset {
        name: "cern-starlight",
        summary: "DataTAG 2003, Geneva - Chicago, 7,067 km, RTT 127.2 ms (measured)",
        source: "seed 000 (DataTAG testbed); RTT from seed 001's traceroute",
        toml: include_str!("../presets/cern-starlight.toml"),
    },
    Preset {
        name: "ipv6-lsr-2004",
        summary: "IPv6 LSR path Geneva - Chicago - Indianapolis - Kansas City - Sunnyvale - Los Angeles - Phoenix, 11,539 km, RTT 192.8 ms",
        source: "seed 001 (traceroute6 and hop distances)",
        toml: include_str!("../presets/ipv6-lsr-2004.toml"),
    },
    Preset {
        name: "amsterdam-geneva",
        summary: "10GE WAN PHY Amsterdam - Geneva, RTT 17 ms",
        source: "seed 002",
        toml: include_str!("../presets/amsterdam-geneva.toml"),
    },
    Preset {
        name: "sc2004-loop",
        summary: "SC2004 loop Geneva - Chicago - Los Angeles - Pittsburgh - Chicago - Geneva, RTT 466 ms",
        source: "seed 003",
        toml: include_str!("../presets/sc2004-loop.toml"),
    },
    Preset {
        name: "tokyo-loop-30000km",
        summary: "Data Reservoir loop Tokyo - Chicago - Amsterdam - Seattle - Tokyo, 32,372 km real, 30,000 km counted",
        source: "seed 004; internet2.edu/lsr (2006-12-30/31)",
        toml: include_str!("../presets/tokyo-loop-30000km.toml"),
    },
];

/// All presets, in the order listed by `longhaul emulate presets`.
pub fn presets() -> Vec<Preset> {
    PRESETS.to_vec()
}

/// The preset called `name`.
pub fn preset(name: &str) -> Option<Preset> {
    PRESETS.iter().find(|p| p.name == name).cloned()
}
