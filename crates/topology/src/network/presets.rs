//! The networks of the seed documents, each a network file embedded from
//! `crates/topology/networks/` (so each is also an example of the format).

use super::model::Network;

/// A built-in network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPreset {
    /// Name on the command line.
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    /// Where the figures come from.
    pub source: &'static str,
    /// The network file text.
    pub toml: &'static str,
}

impl NetworkPreset {
    /// Compiles the embedded file (file name `networks/NAME.toml` in errors).
    pub fn network(&self) -> Result<Network, crate::TopologyError> {
        Network::from_toml(self.toml, &format!("networks/{}.toml", self.name))
    }
}

macro_rules! network_preset {
    ($name:literal, $summary:literal, $source:literal) => {
        NetworkPreset {
            name: $name,
            summary: $summary,
            source: $source,
            toml: include_str!(concat!("../../networks/", $name, ".toml")),
        }
    };
}

const NETWORKS: [NetworkPreset; 4] = [
    network_preset!(
        "datatag-2003",
        "DataTAG: CERN Geneva, StarLight Chicago, NetherLight Amsterdam, 3 hosts each; transatlantic RTT 127.2 ms, Amsterdam-Geneva 17 ms",
        "seed 000 (testbed, 7,067 km, the Amsterdam-Chicago-Geneva triangle); seed 001 (RTT 127.237 ms); seed 002 (Amsterdam-Geneva RTT 17 ms)"
    ),
    network_preset!(
        "sc2004-bwc",
        "SC2004 bandwidth challenge: the Pittsburgh show floor and NLR waves to Los Angeles (2), Chicago, Jacksonville, Sunnyvale, and CERN via Chicago",
        "seed 003 (waves, LSR loop RTT 466 ms, mixing 1 and 10 Gbit/s flows with different RTTs)"
    ),
    network_preset!(
        "data-reservoir",
        "Data Reservoir loop Tokyo - Chicago - Amsterdam - Seattle - Tokyo with a host at every point, to isolate a faulty segment",
        "seed 004 (loopbacks to narrow the faulty section by half, 30,000 km LSR maximum); internet2.edu/lsr (the 2006-12-30/31 loop, 32,372 km)"
    ),
    network_preset!(
        "ipv6-lsr-2004-routers",
        "The 2003 IPv6 Land Speed Record path Geneva - Phoenix (the path preset ipv6-lsr-2004) with its eight routers forwarding and answering traceroute6; RTT 192.8 ms",
        "seed 001 (traceroute6 RTTs and hop distances); Internet2 news of 2004-04-20 (11,539 km)"
    ),
];

/// All network presets.
pub fn networks() -> Vec<NetworkPreset> {
    NETWORKS.to_vec()
}

/// The network preset called `name`.
pub fn network(name: &str) -> Option<NetworkPreset> {
    NETWORKS.iter().find(|p| p.name == name).cloned()
}
