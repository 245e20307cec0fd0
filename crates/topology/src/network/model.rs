//! The compiled network: hosts, routers and links with both directions'
//! link configurations, and a route for every ordered pair of hosts. What
//! the emulator's fabric (`longhaul-emu`) runs; made by
//! [`Network::from_toml`](crate::Network::from_toml) and changed live only
//! through [`Network::set_route`], which keeps its invariants.
//!
//! Invariants (checked when a network is compiled and on every route
//! change): every host reaches every other host; a route is a walk over
//! links from its first host to its last that visits no node twice and
//! passes through no other host (hosts do not forward); node and link
//! names are unique across hosts, routers and links.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use longhaul_link::LinkConfig;
use longhaul_units::Nanos;
use serde::{Deserialize, Serialize};

use crate::TopologyError;

/// A place hosts and routers belong to (a lab, a point of presence).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Site {
    /// Unique name.
    pub name: String,
    /// City, for listings.
    pub city: Option<String>,
    /// Latitude, decimal degrees north.
    pub lat: Option<f64>,
    /// Longitude, decimal degrees east.
    pub lon: Option<f64>,
    /// What places a traceroute hop here (`longhaul calc distance`): address prefixes and name
    /// fragments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<SiteMatch>,
}

impl Site {
    /// A site at a place, with its `match` entries read by [`SiteMatch::parse`].
    pub fn at(name: &str, lat: f64, lon: f64, matches: &[&str]) -> Result<Self, String> {
        Ok(Self {
            name: name.to_owned(),
            city: None,
            lat: Some(lat),
            lon: Some(lon),
            matches: matches
                .iter()
                .map(|m| SiteMatch::parse(m))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// One entry of a site's `match` list: what places a traceroute hop at the site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteMatch {
    /// An address prefix ("2001:468:ff:14c3::/64", "198.51.100.0/24"; a bare address is one host).
    Prefix(ipnet::IpNet),
    /// A fragment of the hop's name, compared without case ("iplsng-chinng", ".cern.ch").
    Name(String),
}

impl SiteMatch {
    /// Reads one entry: a prefix or an address if it parses as one, else a name fragment of letters,
    /// digits, '.', '-' and '_' (at most 253 bytes).
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Ok(net) = s.parse::<ipnet::IpNet>() {
            return Ok(Self::Prefix(net.trunc()));
        }
        if let Ok(addr) = s.parse::<IpAddr>() {
            return Ok(Self::Prefix(ipnet::IpNet::from(addr)));
        }
        let name_ok = (1..=253).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if s.contains('/') || !name_ok {
            return Err(format!(
                "{s:?} is neither an address prefix (2001:db8::/32, 192.0.2.0/24) nor a name \
                 fragment (letters, digits, '.', '-', '_')"
            ));
        }
        Ok(Self::Name(s.to_owned()))
    }

    /// Whether this entry matches a point with this name and address.
    pub fn matches(&self, name: Option<&str>, addr: Option<IpAddr>) -> bool {
        match self {
            SiteMatch::Prefix(net) => addr.is_some_and(|a| net.contains(&a.to_canonical())),
            SiteMatch::Name(fragment) => name.is_some_and(|n| {
                n.to_ascii_lowercase()
                    .contains(&fragment.to_ascii_lowercase())
            }),
        }
    }
}

/// An end host: its own network namespace and TUN device in the emulator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// Unique name (also the namespace suffix and `exec`'s argument).
    pub name: String,
    /// Index into [`Network::sites`].
    pub site: Option<usize>,
    /// IPv4 address.
    pub v4: Ipv4Addr,
    /// IPv6 address.
    pub v6: Ipv6Addr,
}

/// A router: no device of its own; the emulator decrements TTL / hop limit
/// on its behalf and answers ICMP from its addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Router {
    /// Unique name.
    pub name: String,
    /// Index into [`Network::sites`].
    pub site: Option<usize>,
    /// Source of its ICMPv4 replies.
    pub v4: Ipv4Addr,
    /// Source of its ICMPv6 replies.
    pub v6: Ipv6Addr,
}

/// An end of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Node {
    /// Index into [`Network::hosts`].
    Host(usize),
    /// Index into [`Network::routers`].
    Router(usize),
}

/// A link between two nodes, each direction with its own model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetLink {
    /// Unique name (`emulate link NAME ...`).
    pub name: String,
    /// One end.
    pub a: Node,
    /// The other end.
    pub b: Node,
    /// Fibre length, km (0 where only a delay was given).
    pub km: f64,
    /// The direction from `a` to `b`.
    pub a_to_b: LinkConfig,
    /// The direction from `b` to `a`.
    pub b_to_a: LinkConfig,
}

impl NetLink {
    /// The configuration of one direction.
    pub fn direction(&self, a_to_b: bool) -> &LinkConfig {
        if a_to_b { &self.a_to_b } else { &self.b_to_a }
    }
}

/// One link crossed in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Step {
    /// Index into [`Network::links`].
    pub link: usize,
    /// Crossed from its `a` end to its `b` end.
    pub a_to_b: bool,
}

impl Step {
    /// The same link crossed the other way.
    pub fn reversed(self) -> Step {
        Step {
            link: self.link,
            a_to_b: !self.a_to_b,
        }
    }
}

/// A compiled network. See the module docs for its invariants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// Name.
    pub name: String,
    /// One line.
    pub description: Option<String>,
    /// Where the numbers come from.
    pub source: Option<String>,
    /// Largest IP packet the hosts send.
    pub mtu: u32,
    /// Sites.
    pub sites: Vec<Site>,
    /// Hosts, in file order.
    pub hosts: Vec<Host>,
    /// Routers, in file order.
    pub routers: Vec<Router>,
    /// Links, in file order.
    pub links: Vec<NetLink>,
    /// `routes[from * hosts.len() + to]`: the steps from host `from` to
    /// host `to` (empty for `from == to`).
    pub(crate) routes: Vec<Vec<Step>>,
}

impl Network {
    /// The steps from host `from` to host `to` (empty for the same host).
    ///
    /// # Panics
    /// If either index is out of range.
    pub fn route(&self, from: usize, to: usize) -> &[Step] {
        assert!(from < self.hosts.len() && to < self.hosts.len());
        &self.routes[from * self.hosts.len() + to]
    }

    /// The node a step leaves.
    pub fn tail(&self, s: Step) -> Node {
        let l = &self.links[s.link];
        if s.a_to_b { l.a } else { l.b }
    }

    /// The node a step enters.
    pub fn head(&self, s: Step) -> Node {
        self.tail(s.reversed())
    }

    /// A node's name.
    pub fn node_name(&self, n: Node) -> &str {
        match n {
            Node::Host(i) => &self.hosts[i].name,
            Node::Router(i) => &self.routers[i].name,
        }
    }

    /// The node called `name`.
    pub fn node_named(&self, name: &str) -> Option<Node> {
        self.host_named(name).map(Node::Host).or_else(|| {
            self.routers
                .iter()
                .position(|r| r.name == name)
                .map(Node::Router)
        })
    }

    /// The host called `name`.
    pub fn host_named(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// The link called `name`.
    pub fn link_named(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// The host that owns `addr`.
    pub fn host_at(&self, addr: IpAddr) -> Option<usize> {
        self.hosts.iter().position(|h| match addr {
            IpAddr::V4(a) => h.v4 == a,
            IpAddr::V6(a) => h.v6 == a,
        })
    }

    /// One-way propagation delay along the route from `from` to `to` (the
    /// links' delays; queueing and serialization not included).
    pub fn one_way(&self, from: usize, to: usize) -> Nanos {
        self.route(from, to)
            .iter()
            .map(|s| self.links[s.link].direction(s.a_to_b).propagation())
            .fold(Nanos::ZERO, Nanos::saturating_add)
    }

    /// Round-trip propagation delay between two hosts along their routes.
    pub fn rtt(&self, from: usize, to: usize) -> Nanos {
        self.one_way(from, to)
            .saturating_add(self.one_way(to, from))
    }

    /// The steps along the nodes named `nodes` (the first and last hosts,
    /// routers between), each consecutive pair joined by a link (the first
    /// such link in file order), checked like any route.
    pub fn steps_via(&self, nodes: &[&str]) -> Result<Vec<Step>, TopologyError> {
        let mut at = Vec::with_capacity(nodes.len());
        for n in nodes {
            at.push(
                self.node_named(n)
                    .ok_or_else(|| TopologyError::field("route", format!("no node named {n:?}")))?,
            );
        }
        let mut steps = Vec::with_capacity(at.len().saturating_sub(1));
        for w in at.windows(2) {
            let step = self
                .links
                .iter()
                .enumerate()
                .find_map(|(i, l)| {
                    if (l.a, l.b) == (w[0], w[1]) {
                        Some(Step {
                            link: i,
                            a_to_b: true,
                        })
                    } else if (l.b, l.a) == (w[0], w[1]) {
                        Some(Step {
                            link: i,
                            a_to_b: false,
                        })
                    } else {
                        None
                    }
                })
                .ok_or_else(|| {
                    TopologyError::field(
                        "route",
                        format!(
                            "no link joins {} and {}",
                            self.node_name(w[0]),
                            self.node_name(w[1])
                        ),
                    )
                })?;
            steps.push(step);
        }
        Ok(steps)
    }

    /// Checks that `steps` is a route from host `from` to host `to` (see the
    /// module docs).
    pub fn check_route(&self, from: usize, to: usize, steps: &[Step]) -> Result<(), TopologyError> {
        let bad = |why: String| {
            Err(TopologyError::field(
                "route",
                format!(
                    "{} -> {}: {why}",
                    self.hosts[from].name, self.hosts[to].name
                ),
            ))
        };
        if from == to {
            return if steps.is_empty() {
                Ok(())
            } else {
                bad("a host reaches itself without links".into())
            };
        }
        let mut seen = vec![Node::Host(from)];
        let mut at = Node::Host(from);
        for (i, s) in steps.iter().enumerate() {
            if s.link >= self.links.len() {
                return bad(format!("step {i}: no link {}", s.link));
            }
            if self.tail(*s) != at {
                return bad(format!(
                    "link {} does not start at {}",
                    self.links[s.link].name,
                    self.node_name(at)
                ));
            }
            at = self.head(*s);
            if seen.contains(&at) {
                return bad(format!("a loop: {} is visited twice", self.node_name(at)));
            }
            if i + 1 < steps.len() && matches!(at, Node::Host(_)) {
                return bad(format!(
                    "passes through host {} (hosts do not forward)",
                    self.node_name(at)
                ));
            }
            seen.push(at);
        }
        if at != Node::Host(to) {
            return bad(format!("ends at {}", self.node_name(at)));
        }
        Ok(())
    }

    /// Replaces the route from host `from` to host `to` after checking it.
    pub fn set_route(
        &mut self,
        from: usize,
        to: usize,
        steps: Vec<Step>,
    ) -> Result<(), TopologyError> {
        if from >= self.hosts.len() || to >= self.hosts.len() {
            return Err(TopologyError::field("route", "no such host"));
        }
        self.check_route(from, to, &steps)?;
        let n = self.hosts.len();
        self.routes[from * n + to] = steps;
        Ok(())
    }
}
