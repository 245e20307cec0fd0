//! Networks beyond two hosts: sites, routers, hosts and links, each link
//! direction with its own model, and a route for every pair of hosts.

mod describe;
mod file;
mod model;
mod presets;

pub use describe::{DESCRIBE_ALL_PAIRS_UP_TO, describe_network};
pub use file::{
    MAX_LINK_NAME, MAX_NET_HOSTS, MAX_NET_LINKS, MAX_NET_ROUTERS, MAX_NODE_NAME, is_network,
    sites_from_toml,
};
pub use model::{Host, NetLink, Network, Node, Router, Site, SiteMatch, Step};
pub use presets::{NetworkPreset, network, networks};

#[cfg(test)]
mod tests;
