//! Networks beyond two hosts: sites, routers, hosts and links, each link
//! direction with its own model, and a route for every pair of hosts.

mod model;

pub use model::{Host, NetLink, Network, Node, Router, Site, Step};
