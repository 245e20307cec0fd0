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

/// The preset `$name` with its summary and source, embedded from `presets/$name.toml` (the name is
/// written once).
macro_rules! preset {
    ($name:literal, $summary:literal, $source:literal) => {
        Preset {
            name: $name,
            summary: $summary,
            source: $source,
            toml: include_str!(concat!("../presets/", $name, ".toml")),
        }
    };
}

const PRESETS: [Preset; 6] = [
    preset!(
        "cern-starlight",
        "DataTAG 2003, Geneva - Chicago, 7,067 km, RTT 127.2 ms (measured)",
        "seed 000 (DataTAG testbed); RTT from seed 001's traceroute"
    ),
    preset!(
        "ipv6-lsr-2004",
        "IPv6 LSR path Geneva - Chicago - Indianapolis - Kansas City - Sunnyvale - Los Angeles - Phoenix, 11,539 km, RTT 192.8 ms",
        "seed 001 (traceroute6 and hop distances)"
    ),
    preset!(
        "amsterdam-geneva",
        "10GE WAN PHY Amsterdam - Geneva, RTT 17 ms",
        "seed 002"
    ),
    preset!(
        "sc2004-loop",
        "SC2004 loop Geneva - Chicago - Los Angeles - Pittsburgh - Chicago - Geneva, RTT 466 ms",
        "seed 003"
    ),
    preset!(
        "cern-caltech-2004",
        "Caltech Pasadena - Los Angeles - Chicago - Geneva CERN, OC-192, RTT 264 ms (measured)",
        "seed 003 (the CERN-Caltech single-flow tests: Reno 3.0, BIC 5.0, FAST 7.3 Gbit/s)"
    ),
    preset!(
        "tokyo-loop-30000km",
        "Data Reservoir loop Tokyo - Chicago - Amsterdam - Seattle - Tokyo, 32,372 km real, 30,000 km counted",
        "seed 004; internet2.edu/lsr (2006-12-30/31)"
    ),
];

/// All presets, in the order listed by `longhaul emulate presets`.
pub fn presets() -> Vec<Preset> {
    PRESETS.to_vec()
}

/// The preset called `name`.
pub fn preset(name: &str) -> Option<Preset> {
    PRESETS.iter().find(|p| p.name == name).cloned()
}
