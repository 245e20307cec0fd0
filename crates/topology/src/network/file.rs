//! The network file (TOML) and its compilation into a [`Network`]: names
//! and limits checked, sites resolved, every link direction compiled into a
//! [`LinkConfig`], routes found (shortest one-way propagation delay, ties to
//! fewer links, then to lower link indices) or pinned, and `queue = "auto"`
//! sized from the routes that cross each direction.
//!
//! Address plan: host `i` (0-based, file order) is 10.201.0.(i+1) /
//! fd00:4c48::(i+1); router `i` is 10.201.1.(i+1) / fd00:4c48:1::(i+1) —
//! the two-host path plan when the hosts are the sender and the receiver.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};

use longhaul_link::{Aqm, Bottleneck, ConfigError, Jitter, LinkConfig, MAX_KM, queue_for_bdp};
use longhaul_units::{Nanos, fibre_delay, great_circle_km, parse_size};
use serde::Deserialize;

use super::model::{Host, NetLink, Network, Node, Router, Site, SiteMatch, Step};
use crate::error::{self, FileError};
use crate::{
    LossSpec, MIN_AUTO_QUEUE_FRAMES, TopologyError, check_loss, check_mtu, check_place,
    default_mtu, duration, fail, rate,
};

/// Most hosts a network may have (10.201.0.1–.253).
pub const MAX_NET_HOSTS: usize = 253;
/// Most routers a network may have (10.201.1.1–.253).
pub const MAX_NET_ROUTERS: usize = 253;
/// Most links a network may have.
pub const MAX_NET_LINKS: usize = 1024;
/// Longest host, router or site name (a host's name is a namespace suffix
/// and an interface name, which Linux limits to 15 bytes).
pub const MAX_NODE_NAME: usize = 15;
/// Longest link name (room for the default `<a>-<b>` of two node names).
pub const MAX_LINK_NAME: usize = 2 * MAX_NODE_NAME + 1;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkFile {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default = "default_mtu")]
    mtu: u32,
    #[serde(default)]
    seed: u64,
    #[serde(default, rename = "site")]
    sites: Vec<SiteSpec>,
    #[serde(default, rename = "router")]
    routers: Vec<NodeSpec>,
    #[serde(default, rename = "host")]
    hosts: Vec<NodeSpec>,
    #[serde(default, rename = "link")]
    links: Vec<LinkSpec>,
    #[serde(default, rename = "route")]
    routes: Vec<RouteSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteSpec {
    name: String,
    #[serde(default)]
    city: Option<String>,
    #[serde(default)]
    lat: Option<f64>,
    #[serde(default)]
    lon: Option<f64>,
    #[serde(default, rename = "match")]
    matches: Vec<String>,
}

impl SiteSpec {
    /// The site, its place and `match` list checked (`field` is `site[i]`).
    fn site(&self, field: &str) -> Result<Site, TopologyError> {
        check_name(&format!("{field}.name"), &self.name, MAX_NODE_NAME)?;
        check_place(field, self.lat, self.lon)?;
        let matches = self
            .matches
            .iter()
            .enumerate()
            .map(|(j, m)| {
                SiteMatch::parse(m)
                    .map_err(|e| TopologyError::field(format!("{field}.match[{j}]"), e))
            })
            .collect::<Result<_, _>>()?;
        Ok(Site {
            name: self.name.clone(),
            city: self.city.clone(),
            lat: self.lat,
            lon: self.lon,
            matches,
        })
    }
}

/// A site table: the `[[site]]` tables of a file, whatever else it holds (a network file, or a
/// file of sites alone), for `longhaul calc distance`.
#[derive(Debug, Deserialize)]
struct SiteTableFile {
    #[serde(default, rename = "site")]
    sites: Vec<SiteSpec>,
}

/// Reads the sites of a site table or network file (their names, places and `match` lists
/// checked). Errors name the file, the line and the field.
pub fn sites_from_toml(text: &str, file_name: &str) -> Result<Vec<Site>, TopologyError> {
    let file: SiteTableFile = toml::from_str(text)
        .map_err(|e| FileError::from_toml(&e, text, file_name, error::field_at_line))?;
    let located = |mut e: TopologyError| {
        e.file = file_name.to_owned();
        if let Some(f) = &e.field {
            e.line = error::line_of_field(text, f);
        }
        e
    };
    if file.sites.is_empty() {
        return Err(located(TopologyError::field(
            "site",
            "no [[site]] tables: give each site a name, lat, lon and match list",
        )));
    }
    file.sites
        .iter()
        .enumerate()
        .map(|(i, s)| s.site(&format!("site[{i}]")).map_err(located))
        .collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeSpec {
    name: String,
    #[serde(default)]
    site: Option<String>,
}

/// The parameters a direction may override.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirSpec {
    #[serde(default)]
    rate: Option<String>,
    #[serde(default)]
    delay: Option<String>,
    #[serde(default)]
    loss: Option<LossSpec>,
    #[serde(default)]
    corrupt: Option<f64>,
    #[serde(default)]
    jitter: Option<String>,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    aqm: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkSpec {
    #[serde(default)]
    name: Option<String>,
    a: String,
    b: String,
    #[serde(default)]
    km: Option<f64>,
    #[serde(default)]
    rtt: Option<String>,
    #[serde(default)]
    rate: Option<String>,
    #[serde(default)]
    delay: Option<String>,
    #[serde(default)]
    loss: Option<LossSpec>,
    #[serde(default)]
    corrupt: Option<f64>,
    #[serde(default)]
    jitter: Option<String>,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    aqm: Option<String>,
    #[serde(default)]
    a_to_b: Option<DirSpec>,
    #[serde(default)]
    b_to_a: Option<DirSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteSpec {
    from: String,
    to: String,
    #[serde(default)]
    via: Vec<String>,
    #[serde(default)]
    one_way: bool,
}

/// Whether `text` is a network file (it has `[[host]]` tables) rather than
/// a path file (`[[hop]]`, `[sender]`, `[receiver]`). A cheap look at the
/// lines for the CLI to choose the parser; the text need not parse.
pub fn is_network(text: &str) -> bool {
    error::has_array_table(text, "host")
}

/// The seed of link direction `d` (`2 × link + 0` for a→b, `+ 1` for b→a):
/// SplitMix64's finalizer of `seed + (d + 1) × φ`, a bijection, so the
/// directions of one network never share a seed.
pub(crate) fn direction_seed(seed: u64, d: u64) -> u64 {
    let mut z = seed.wrapping_add(d.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn check_name(field: &str, name: &str, max: usize) -> Result<(), TopologyError> {
    let ok = (1..=max).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        fail(
            field,
            format!(
                "name {name:?}: use 1 to {max} ASCII lowercase letters, digits or '-', starting with a letter"
            ),
        )
    }
}

/// A direction's parameters after the overrides, each with the field it
/// came from (for errors).
struct Dir<'a> {
    rate: Option<(&'a str, String)>,
    delay: Option<(&'a str, String)>,
    loss: Option<(LossSpec, String)>,
    corrupt: Option<(f64, String)>,
    jitter: Option<(&'a str, String)>,
    queue: Option<(&'a str, String)>,
    aqm: Option<(&'a str, String)>,
}

fn merge<'a>(l: &'a LinkSpec, d: Option<&'a DirSpec>, lf: &str, df: &str) -> Dir<'a> {
    fn pick<'a>(
        base: &'a Option<String>,
        over: Option<&'a Option<String>>,
        lf: &str,
        df: &str,
        key: &str,
    ) -> Option<(&'a str, String)> {
        match over.and_then(|o| o.as_deref()) {
            Some(v) => Some((v, format!("{df}.{key}"))),
            None => base.as_deref().map(|v| (v, format!("{lf}.{key}"))),
        }
    }
    Dir {
        rate: pick(&l.rate, d.map(|d| &d.rate), lf, df, "rate"),
        delay: pick(&l.delay, d.map(|d| &d.delay), lf, df, "delay"),
        loss: match d.and_then(|d| d.loss) {
            Some(x) => Some((x, format!("{df}.loss"))),
            None => l.loss.map(|x| (x, format!("{lf}.loss"))),
        },
        corrupt: match d.and_then(|d| d.corrupt) {
            Some(x) => Some((x, format!("{df}.corrupt"))),
            None => l.corrupt.map(|x| (x, format!("{lf}.corrupt"))),
        },
        jitter: pick(&l.jitter, d.map(|d| &d.jitter), lf, df, "jitter"),
        queue: pick(&l.queue, d.map(|d| &d.queue), lf, df, "queue"),
        aqm: pick(&l.aqm, d.map(|d| &d.aqm), lf, df, "aqm"),
    }
}

/// Where a direction's queue comes from once routes are known.
#[derive(Clone, Copy)]
enum QueueSpec {
    None,
    Auto,
}

impl Network {
    /// Reads and compiles a network file. Errors name the file, the line and
    /// the field (`nets/x.toml:14: link[2].a_to_b.rate: …`).
    pub fn from_toml(text: &str, file_name: &str) -> Result<Network, TopologyError> {
        let file: NetworkFile = toml::from_str(text)
            .map_err(|e| FileError::from_toml(&e, text, file_name, error::field_at_line))?;
        file.compile().map_err(|mut e| {
            e.file = file_name.to_owned();
            if let Some(f) = &e.field {
                e.line = error::line_of_field(text, f);
            }
            e
        })
    }
}

impl NetworkFile {
    fn compile(&self) -> Result<Network, TopologyError> {
        if self.name.trim().is_empty() {
            return fail("name", "a network needs a name");
        }
        check_mtu("mtu", self.mtu)?;
        let mtu = self.mtu;
        if self.hosts.len() < 2 {
            return fail("host", "a network needs at least two [[host]] tables");
        }
        for (what, n, max) in [
            ("host", self.hosts.len(), MAX_NET_HOSTS),
            ("router", self.routers.len(), MAX_NET_ROUTERS),
            ("link", self.links.len(), MAX_NET_LINKS),
        ] {
            if n > max {
                return fail(
                    format!("{what}[{max}]"),
                    format!("{n} {what}s; at most {max} are supported"),
                );
            }
        }

        // Names: one namespace for sites, hosts, routers and links.
        let mut names: HashMap<String, String> = HashMap::new();
        let mut claim = |field: String, name: &str| -> Result<(), TopologyError> {
            if let Some(first) = names.get(name) {
                return fail(
                    format!("{field}.name"),
                    format!("duplicate name {name:?} (already {first})"),
                );
            }
            names.insert(name.to_owned(), field);
            Ok(())
        };
        let mut sites = Vec::with_capacity(self.sites.len());
        for (i, s) in self.sites.iter().enumerate() {
            let f = format!("site[{i}]");
            let site = s.site(&f)?;
            claim(f, &s.name)?;
            sites.push(site);
        }
        let site_of = |field: &str, spec: &NodeSpec| -> Result<Option<usize>, TopologyError> {
            match &spec.site {
                None => Ok(None),
                Some(s) => sites
                    .iter()
                    .position(|x| &x.name == s)
                    .map(Some)
                    .ok_or_else(|| {
                        TopologyError::field(
                            format!("{field}.site"),
                            format!("no site named {s:?}"),
                        )
                    }),
            }
        };
        let mut hosts = Vec::with_capacity(self.hosts.len());
        for (i, h) in self.hosts.iter().enumerate() {
            let f = format!("host[{i}]");
            check_name(&format!("{f}.name"), &h.name, MAX_NODE_NAME)?;
            let site = site_of(&f, h)?;
            claim(f, &h.name)?;
            let n = (i + 1) as u8; // at most MAX_NET_HOSTS = 253
            hosts.push(Host {
                name: h.name.clone(),
                site,
                v4: Ipv4Addr::new(10, 201, 0, n),
                v6: Ipv6Addr::new(0xfd00, 0x4c48, 0, 0, 0, 0, 0, u16::from(n)),
            });
        }
        let mut routers = Vec::with_capacity(self.routers.len());
        for (i, r) in self.routers.iter().enumerate() {
            let f = format!("router[{i}]");
            check_name(&format!("{f}.name"), &r.name, MAX_NODE_NAME)?;
            let site = site_of(&f, r)?;
            claim(f, &r.name)?;
            let n = (i + 1) as u8; // at most MAX_NET_ROUTERS = 253
            routers.push(Router {
                name: r.name.clone(),
                site,
                v4: Ipv4Addr::new(10, 201, 1, n),
                v6: Ipv6Addr::new(0xfd00, 0x4c48, 1, 0, 0, 0, 0, u16::from(n)),
            });
        }
        let node = |field: String, name: &str| -> Result<Node, TopologyError> {
            hosts
                .iter()
                .position(|h| h.name == name)
                .map(Node::Host)
                .or_else(|| {
                    routers
                        .iter()
                        .position(|r| r.name == name)
                        .map(Node::Router)
                })
                .ok_or_else(|| {
                    TopologyError::field(field, format!("no host or router named {name:?}"))
                })
        };
        let place = |n: Node| -> Option<(f64, f64)> {
            let site = match n {
                Node::Host(i) => hosts[i].site,
                Node::Router(i) => routers[i].site,
            }?;
            sites[site].lat.zip(sites[site].lon)
        };

        // Links, with their queues left for after routing.
        let mut links = Vec::with_capacity(self.links.len());
        let mut queues: Vec<[QueueSpec; 2]> = Vec::with_capacity(self.links.len());
        for (i, l) in self.links.iter().enumerate() {
            let f = format!("link[{i}]");
            let a = node(format!("{f}.a"), &l.a)?;
            let b = node(format!("{f}.b"), &l.b)?;
            if a == b {
                return fail(format!("{f}.b"), format!("a link from {} to itself", l.a));
            }
            let name = l.name.clone().unwrap_or_else(|| format!("{}-{}", l.a, l.b));
            check_name(&format!("{f}.name"), &name, MAX_LINK_NAME)?;
            claim(f.clone(), &name)?;
            if l.km.is_some() && l.delay.is_some() {
                return fail(
                    format!("{f}.km"),
                    "give km or delay, not both (use rtt to pin a measured time and keep km)",
                );
            }
            if l.delay.is_some() && l.rtt.is_some() {
                return fail(format!("{f}.delay"), "give delay or rtt, not both");
            }
            let km = match (l.km, place(a), place(b)) {
                (Some(km), _, _) => {
                    if !(0.0..=MAX_KM).contains(&km) {
                        return fail(
                            format!("{f}.km"),
                            format!("distance must be >= 0 and at most {MAX_KM} km, got {km}"),
                        );
                    }
                    km
                }
                (None, Some((la, lo)), Some((lb, lob))) if l.delay.is_none() => {
                    great_circle_km(la, lo, lb, lob)
                }
                _ => 0.0,
            };
            // The link's own one-way delay (before per-direction overrides).
            let base_delay = match &l.rtt {
                Some(r) => {
                    let rtt = duration(&format!("{f}.rtt"), r)?;
                    Nanos(rtt.0 / 2)
                }
                None => fibre_delay(km),
            };
            let dir = |k: u64, over: &Option<DirSpec>, dname: &str| {
                let d = merge(l, over.as_ref(), &f, &format!("{f}.{dname}"));
                let seed = direction_seed(self.seed, 2 * i as u64 + k);
                direction(&d, base_delay, mtu, seed)
            };
            let (a_to_b, qa) = dir(0, &l.a_to_b, "a_to_b")?;
            let (b_to_a, qb) = dir(1, &l.b_to_a, "b_to_a")?;
            links.push(NetLink {
                name,
                a,
                b,
                km,
                a_to_b,
                b_to_a,
            });
            queues.push([qa, qb]);
        }

        let n = hosts.len();
        let mut net = Network {
            name: self.name.clone(),
            description: self.description.clone(),
            source: self.source.clone(),
            mtu,
            sites,
            hosts,
            routers,
            links,
            routes: vec![Vec::new(); n * n],
        };

        // Routes: shortest paths, then the pinned ones.
        for from in 0..n {
            let found = shortest_from(&net, from);
            for (to, r) in found.into_iter().enumerate() {
                match r {
                    Some(steps) => net.routes[from * n + to] = steps,
                    None => {
                        return fail(
                            format!("host[{from}]"),
                            format!(
                                "{} cannot reach {} (over links and routers; hosts do not forward)",
                                net.hosts[from].name, net.hosts[to].name
                            ),
                        );
                    }
                }
            }
        }
        let mut pinned: HashMap<(usize, usize), usize> = HashMap::new();
        for (i, r) in self.routes.iter().enumerate() {
            let f = format!("route[{i}]");
            let host = |field: &str, name: &str| -> Result<usize, TopologyError> {
                match net.node_named(name) {
                    Some(Node::Host(h)) => Ok(h),
                    Some(Node::Router(_)) => fail(
                        format!("{f}.{field}"),
                        format!("{name:?} is a router; routes run between hosts"),
                    ),
                    None => fail(format!("{f}.{field}"), format!("no host named {name:?}")),
                }
            };
            let (from, to) = (host("from", &r.from)?, host("to", &r.to)?);
            if from == to {
                return fail(
                    format!("{f}.to"),
                    format!("a route from {} to itself", r.from),
                );
            }
            let mut nodes: Vec<&str> = vec![&r.from];
            nodes.extend(r.via.iter().map(String::as_str));
            nodes.push(&r.to);
            let via = |e: TopologyError| TopologyError::field(format!("{f}.via"), e.message);
            let steps = net.steps_via(&nodes).map_err(via)?;
            net.check_route(from, to, &steps).map_err(via)?;
            let mut set = vec![(from, to, steps.clone())];
            if !r.one_way {
                let back: Vec<Step> = steps.iter().rev().map(|s| s.reversed()).collect();
                set.push((to, from, back));
            }
            for (x, y, s) in set {
                if let Some(j) = pinned.insert((x, y), i) {
                    return fail(
                        f.clone(),
                        format!(
                            "the route {} -> {} is already pinned by route[{j}] (use one_way = true to pin one direction only)",
                            net.hosts[x].name, net.hosts[y].name
                        ),
                    );
                }
                net.set_route(x, y, s).map_err(via)?;
            }
        }

        // Auto queues: one BDP of the largest RTT among host pairs whose
        // route crosses the direction; else twice the direction's delay.
        let mut worst: HashMap<Step, Nanos> = HashMap::new();
        for from in 0..n {
            for to in 0..n {
                if from == to {
                    continue;
                }
                let rtt = net.rtt(from, to);
                for s in net.route(from, to) {
                    let w = worst.entry(*s).or_insert(Nanos::ZERO);
                    *w = (*w).max(rtt);
                }
            }
        }
        let floor = MIN_AUTO_QUEUE_FRAMES * u64::from(mtu);
        for (i, qs) in queues.iter().enumerate() {
            for (k, q) in qs.iter().enumerate() {
                let a_to_b = k == 0;
                let step = Step { link: i, a_to_b };
                let l = &mut net.links[i];
                let cfg = if a_to_b { &mut l.a_to_b } else { &mut l.b_to_a };
                if let (QueueSpec::Auto, Some(b)) = (q, cfg.bottleneck.as_mut()) {
                    let rtt = worst
                        .get(&step)
                        .copied()
                        .unwrap_or(Nanos(cfg.delay.0.saturating_mul(2)));
                    b.queue_bytes = queue_for_bdp(b.rate_bps, rtt, 1.0, floor);
                }
            }
        }
        // Every direction as the link model will see it.
        for (i, l) in self.links.iter().enumerate() {
            for (k, (dname, over)) in [("a_to_b", &l.a_to_b), ("b_to_a", &l.b_to_a)]
                .into_iter()
                .enumerate()
            {
                let f = format!("link[{i}]");
                let d = merge(l, over.as_ref(), &f, &format!("{f}.{dname}"));
                let nl = &net.links[i];
                let cfg = nl.direction(k == 0);
                cfg.validate().map_err(|e| {
                    let (ta, he) = if k == 0 { (nl.a, nl.b) } else { (nl.b, nl.a) };
                    config_error(
                        &e,
                        &d,
                        &f,
                        l,
                        &format!("{} -> {}", net.node_name(ta), net.node_name(he)),
                    )
                })?;
            }
        }
        Ok(net)
    }
}

/// Compiles one direction (queue bytes 0 where `auto`, filled in later).
fn direction(
    d: &Dir<'_>,
    base_delay: Nanos,
    mtu: u32,
    seed: u64,
) -> Result<(LinkConfig, QueueSpec), TopologyError> {
    let delay = match &d.delay {
        Some((s, f)) => duration(f, s)?,
        None => base_delay,
    };
    let loss = match &d.loss {
        Some((l, f)) => {
            check_loss(f, l.to_loss())?;
            l.to_loss()
        }
        None => Default::default(),
    };
    let corrupt = match &d.corrupt {
        Some((p, f)) if !(0.0..=1.0).contains(p) => {
            return fail(f.clone(), format!("probability must be in [0, 1], got {p}"));
        }
        Some((p, _)) => *p,
        None => 0.0,
    };
    let jitter = match &d.jitter {
        Some((s, f)) => match duration(f, s)? {
            Nanos::ZERO => Jitter::None,
            max => Jitter::Uniform { max },
        },
        None => Jitter::None,
    };
    let aqm = match &d.aqm {
        None => Aqm::DropTail,
        Some((s, f)) => match s.trim() {
            "drop_tail" => Aqm::DropTail,
            "codel" => Aqm::codel(),
            other => {
                return fail(
                    f.clone(),
                    format!("unknown aqm {other:?}; use \"drop_tail\" or \"codel\""),
                );
            }
        },
    };
    let rate_bps = match &d.rate {
        None => None,
        Some((s, _)) if s.trim().eq_ignore_ascii_case("unlimited") => None,
        Some((s, f)) => Some(rate(f, s)?),
    };
    let (bottleneck, q) = match rate_bps {
        None => {
            for (what, given) in [("queue", &d.queue), ("aqm", &d.aqm)] {
                if let Some((_, f)) = given {
                    return fail(
                        f.clone(),
                        format!(
                            "a {what} needs a rate (a link without a rate is unlimited and never queues)"
                        ),
                    );
                }
            }
            (None, QueueSpec::None)
        }
        Some(rate_bps) => {
            let (queue_bytes, q) = match &d.queue {
                None => (0, QueueSpec::Auto),
                Some((s, _)) if s.trim().eq_ignore_ascii_case("auto") => (0, QueueSpec::Auto),
                Some((s, f)) => (
                    parse_size(s).map_err(|e| TopologyError::field(f.clone(), e.to_string()))?,
                    QueueSpec::None,
                ),
            };
            (
                Some(Bottleneck {
                    rate_bps,
                    queue_bytes,
                    overhead_per_frame: 0,
                    aqm,
                }),
                q,
            )
        }
    };
    Ok((
        LinkConfig {
            seed,
            mtu,
            loss,
            corrupt,
            bottleneck,
            delay,
            jitter,
            ..LinkConfig::default()
        },
        q,
    ))
}

/// The file field a [`LinkConfig::validate`] refusal comes from.
fn config_error(e: &ConfigError, d: &Dir<'_>, lf: &str, l: &LinkSpec, dir: &str) -> TopologyError {
    let origin = |x: &Option<(&str, String)>, key: &str| {
        x.as_ref()
            .map_or_else(|| format!("{lf}.{key}"), |(_, f)| f.clone())
    };
    let field = match e.field {
        "bottleneck.rate_bps" => origin(&d.rate, "rate"),
        "bottleneck.queue_bytes" => origin(&d.queue, "queue"),
        f if f.starts_with("bottleneck.aqm") => origin(&d.aqm, "aqm"),
        f if f.starts_with("loss") => d
            .loss
            .as_ref()
            .map_or_else(|| format!("{lf}.loss"), |(_, f)| f.clone()),
        f if f.starts_with("jitter") => origin(&d.jitter, "jitter"),
        "mtu" => "mtu".to_owned(),
        _ => match (&d.delay, l.rtt.is_some(), l.km.is_some()) {
            (Some((_, f)), _, _) => f.clone(),
            (None, true, _) => format!("{lf}.rtt"),
            (None, false, true) => format!("{lf}.km"),
            _ => lf.to_owned(),
        },
    };
    TopologyError::field(field, format!("{dir}: {} {}", e.field, e.reason))
}

/// Cost of a partial route: one-way propagation delay, links, link indices.
type Cost = (Nanos, usize, Vec<usize>);

/// Shortest routes from host `from` to every host (`None` where
/// unreachable): least one-way propagation delay of the directions crossed,
/// then fewest links, then the lexicographically lowest sequence of link
/// indices. The order is monotone under extension (equal delays and link
/// counts compare sequences of one length), so Dijkstra finds its minimum.
/// Hosts other than `from` are never left (hosts do not forward).
fn shortest_from(net: &Network, from: usize) -> Vec<Option<Vec<Step>>> {
    let nh = net.hosts.len();
    let idx = |n: Node| match n {
        Node::Host(i) => i,
        Node::Router(i) => nh + i,
    };
    let total = nh + net.routers.len();
    // Adjacency: node -> (step, head).
    let mut adj: Vec<Vec<(Step, Node)>> = vec![Vec::new(); total];
    for (i, l) in net.links.iter().enumerate() {
        adj[idx(l.a)].push((
            Step {
                link: i,
                a_to_b: true,
            },
            l.b,
        ));
        adj[idx(l.b)].push((
            Step {
                link: i,
                a_to_b: false,
            },
            l.a,
        ));
    }
    let mut best: Vec<Option<(Cost, Vec<Step>)>> = vec![None; total];
    let mut done = vec![false; total];
    let mut heap: BinaryHeap<Reverse<(Cost, usize)>> = BinaryHeap::new();
    best[from] = Some(((Nanos::ZERO, 0, Vec::new()), Vec::new()));
    heap.push(Reverse(((Nanos::ZERO, 0, Vec::new()), from)));
    while let Some(Reverse((cost, u))) = heap.pop() {
        if done[u] {
            continue;
        }
        done[u] = true;
        if u < nh && u != from {
            continue; // a host: the route ends here
        }
        let steps = best[u].as_ref().map(|b| b.1.clone()).unwrap_or_default();
        for &(s, head) in &adj[u] {
            let v = idx(head);
            if done[v] {
                continue;
            }
            let d = net.links[s.link].direction(s.a_to_b).propagation();
            let mut seq = cost.2.clone();
            seq.push(s.link);
            let c: Cost = (cost.0.saturating_add(d), cost.1 + 1, seq);
            if best[v].as_ref().is_none_or(|b| c < b.0) {
                let mut st = steps.clone();
                st.push(s);
                best[v] = Some((c.clone(), st));
                heap.push(Reverse((c, v)));
            }
        }
    }
    (0..nh)
        .map(|to| {
            if to == from {
                Some(Vec::new())
            } else {
                best[to].as_ref().map(|b| b.1.clone())
            }
        })
        .collect()
}
