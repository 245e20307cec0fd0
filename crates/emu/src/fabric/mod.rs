//! Many emulated hosts joined by routers and links (`longhaul-topology`'s
//! [`Network`]): one namespace and vnet TUN per host, and switch threads
//! that move every packet through its route link by link, each link
//! direction with its own model, in virtual time (see [`switch`]).
//!
//! Lifecycle as for the two-host [`crate::Testbed`]: [`Fabric::up`] creates
//! everything, deleting what it made if a later step fails; [`Fabric::down`]
//! (or dropping it) stops the switches, closes the TUNs and deletes the
//! namespaces. Namespaces are `lh-<tag>-<host>`; a SIGKILLed emulator's are
//! deleted by the next `up` ([`crate::clean_stale`]).
//!
//! Live changes ([`Fabric::set_link_up`], [`Fabric::change_link`],
//! [`Fabric::set_route`]) take effect for the next arrival at the link (a
//! new model keeps no backlog: what was queued keeps its release times) or,
//! for a route, the next record a host sends; each is logged with its time.

mod event;
pub mod switch;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use longhaul_link::{Link, LinkConfig, Nanos};
use longhaul_packet::RouterAddrs;
use longhaul_sys::{monotonic_now_ns, online_cpus};
use longhaul_topology::{Network, Step};
use serde::{Deserialize, Serialize};

use crate::capture::{Capture, CaptureStats};
use crate::error::EmuError;
use crate::host::{HostSetup, KERNEL_TCP_WMEM, MAX_TCP_BUFFER, MIN_TCP_BUFFER, Netns, Reach, host};
use crate::testbed::clean_stale;
use longhaul_units::hist::Summary;
pub use switch::SwitchStats;
use switch::{LinkDir, Shared, Switch};

/// What to bring up.
#[derive(Debug, Clone)]
pub struct FabricConfig {
    /// Namespaces are `lh-<tag>-<host>`; `None` picks `e<pid>-<n>`.
    pub tag: Option<String>,
    /// Hosts, routers, links and routes.
    pub network: Network,
    /// Switch threads; `None`: one per online CPU, at most one per host.
    pub switches: Option<usize>,
    /// CPUs to pin switch i to (`cpus[i % len]`), if wanted.
    pub cpus: Option<Vec<usize>>,
    /// `SCHED_FIFO` priority for the switches, if wanted.
    pub realtime: Option<i32>,
    /// Give the hosts the kernel's default TCP buffer limits.
    pub host_tcp_defaults: bool,
    /// Capture every link direction into `DIR/LINK.a_to_b.pcap` and `DIR/LINK.b_to_a.pcap`
    /// (what leaves it for the next node, at the time it leaves), keeping this many bytes of each
    /// packet ([`crate::capture`]).
    pub pcap: Option<(PathBuf, u32)>,
}

/// A host as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostReport {
    /// Its name in the network.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// IPv4 address.
    pub v4: Ipv4Addr,
    /// IPv6 address.
    pub v6: Ipv6Addr,
    /// Packets its TUN device dropped itself.
    pub tun_tx_dropped: Option<u64>,
}

/// One direction of a link as the report shows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LinkDirReport {
    /// The model's counters (segments, drops by cause, queue).
    pub link: longhaul_link::LinkStats,
    /// Bytes in its queue now.
    pub queue_bytes_now: u64,
    /// Records dropped while the link was down.
    pub cut_drops: u64,
    /// How late arrivals at this link were handled (at a host's first link, that includes the
    /// record's wait in the host's queue).
    pub lateness: Summary,
    /// Its configuration now.
    pub config: Option<LinkConfig>,
    /// Its capture file (`pcap`), once the fabric is down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStats>,
}

/// A link as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkReport {
    /// Its name.
    pub name: String,
    /// Its `a` end.
    pub a: String,
    /// Its `b` end.
    pub b: String,
    /// Up or cut.
    pub up: bool,
    /// From `a` to `b`.
    pub a_to_b: LinkDirReport,
    /// From `b` to `a`.
    pub b_to_a: LinkDirReport,
}

/// A live change, with when it was made.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Change {
    /// Wall-clock time, RFC 3339 (UTC).
    pub at: String,
    /// Monotonic clock, ns (the time base of the links' models).
    pub at_monotonic_ns: u64,
    /// What changed.
    pub what: String,
}

/// The fabric's counters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FabricReport {
    /// The network's name.
    pub network: String,
    /// The `tcp_rmem`/`tcp_wmem` maximum set in every host.
    pub tcp_buffer_max: u64,
    /// Hosts.
    pub hosts: Vec<HostReport>,
    /// Links, in network order.
    pub links: Vec<LinkReport>,
    /// Switch threads.
    pub switches: Vec<SwitchStats>,
    /// Live changes, in order.
    pub changes: Vec<Change>,
}

impl FabricReport {
    /// Why the run's timing or delivery cannot be trusted (empty when it can): a switch whose
    /// writes had p99 lateness above `max_p99_ns`, a TUN that dropped packets itself, failed
    /// writes.
    pub fn fidelity_problems(&self, max_p99_ns: u64) -> Vec<String> {
        let mut out = Vec::new();
        for s in &self.switches {
            if s.lateness.p99_ns > max_p99_ns {
                out.push(format!(
                    "{}: p99 lateness {:.3} ms > {:.3} ms",
                    s.name,
                    s.lateness.p99_ns as f64 / 1e6,
                    max_p99_ns as f64 / 1e6
                ));
            }
            if s.write_errors > 0 {
                out.push(format!("{}: {} TUN writes failed", s.name, s.write_errors));
            }
            for (host, a) in s.hosts.iter().zip(&s.arrivals) {
                out.extend(crate::arrival::untimed_problem(
                    &format!("{} from {host}", s.name),
                    a,
                ));
            }
        }
        for h in &self.hosts {
            if let Some(n) = h.tun_tx_dropped.filter(|&n| n > 0) {
                out.push(format!(
                    "{}: the TUN device dropped {n} packets itself",
                    h.name
                ));
            }
        }
        out
    }
}

/// What `change_link` changes in one direction (absent fields stay).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkChange {
    /// Serialization rate, bit/s (0: no bottleneck).
    pub rate_bps: Option<u64>,
    /// One-way delay (replaces the delay and any fibre length).
    pub delay: Option<Nanos>,
    /// Random loss.
    pub loss: Option<longhaul_link::Loss>,
    /// Probability that a segment arrives damaged.
    pub corrupt: Option<f64>,
    /// Queue capacity, bytes.
    pub queue_bytes: Option<u64>,
    /// Jitter.
    pub jitter: Option<longhaul_link::Jitter>,
}

impl std::fmt::Display for LinkChange {
    /// `rate 100 Mbit/s, delay 5.000 ms, loss 1 %, ...`: the fields it changes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(r) = self.rate_bps {
            parts.push(if r == 0 {
                "rate unlimited".to_string()
            } else {
                format!("rate {}", longhaul_units::fmt_rate(r))
            });
        }
        if let Some(d) = self.delay {
            parts.push(format!("delay {}", longhaul_units::fmt_duration(d)));
        }
        match self.loss {
            Some(longhaul_link::Loss::Bernoulli { p }) => parts.push(format!("loss {p}")),
            Some(longhaul_link::Loss::None) => parts.push("loss 0".into()),
            Some(longhaul_link::Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            }) => parts.push(format!(
                "burst loss p={p} r={r} 1-h={one_minus_h} 1-k={one_minus_k}"
            )),
            None => {}
        }
        if let Some(c) = self.corrupt {
            parts.push(format!("corrupt {c}"));
        }
        if let Some(q) = self.queue_bytes {
            parts.push(format!("queue {}", longhaul_units::fmt_size(q)));
        }
        match self.jitter {
            Some(longhaul_link::Jitter::Uniform { max }) => parts.push(format!(
                "jitter up to {}",
                longhaul_units::fmt_duration(max)
            )),
            Some(j) => parts.push(format!("jitter {j:?}")),
            None => {}
        }
        f.write_str(&parts.join(", "))
    }
}

impl LinkChange {
    /// `cfg` with the change applied.
    pub fn apply(&self, cfg: &LinkConfig) -> LinkConfig {
        let mut c = cfg.clone();
        if let Some(r) = self.rate_bps {
            c.bottleneck = match (r, c.bottleneck) {
                (0, _) => None,
                (r, Some(mut b)) => {
                    b.rate_bps = r;
                    Some(b)
                }
                (r, None) => Some(longhaul_link::Bottleneck {
                    rate_bps: r,
                    queue_bytes: longhaul_link::queue_for_bdp(
                        r,
                        Nanos(c.propagation().0.saturating_mul(2)),
                        1.0,
                        4 * u64::from(c.mtu),
                    ),
                    overhead_per_frame: 0,
                    aqm: Default::default(),
                }),
            };
        }
        if let Some(d) = self.delay {
            c.delay = d;
            c.km = None;
        }
        if let Some(l) = self.loss {
            c.loss = l;
        }
        if let Some(p) = self.corrupt {
            c.corrupt = p;
        }
        if let (Some(q), Some(b)) = (self.queue_bytes, c.bottleneck.as_mut()) {
            b.queue_bytes = q;
        }
        if let Some(j) = self.jitter {
            c.jitter = j;
        }
        c
    }

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// A running multi-host fabric. Dropping it tears everything down.
#[derive(Debug)]
pub struct Fabric {
    network: RwLock<Network>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<SwitchStats>>,
    live: Vec<Arc<Mutex<SwitchStats>>>,
    changes: Mutex<Vec<Change>>,
    tcp_buffer_max: u64,
    // Dropped after the threads are joined and the TUNs closed (see Drop).
    namespaces: Vec<Netns>,
}

/// `tcp_rmem`/`tcp_wmem` maximum for a network: for the host pair that needs most, twice the
/// bytes its path can hold (its slowest link's rate × its RTT plus every queue on both routes),
/// within the testbed's bounds; the maximum when a route has no rate limit at all.
pub fn tcp_buffer_for_network(n: &Network) -> u64 {
    let mut need = 0u64;
    for from in 0..n.hosts.len() {
        for to in 0..n.hosts.len() {
            if from == to {
                continue;
            }
            let steps = n.route(from, to).iter().chain(n.route(to, from));
            let mut rate = u64::MAX;
            let mut queues = 0u64;
            for s in steps {
                if let Some(b) = n.links[s.link].direction(s.a_to_b).bottleneck {
                    rate = rate.min(b.rate_bps);
                    queues = queues.saturating_add(b.queue_bytes);
                }
            }
            if rate == u64::MAX {
                return MAX_TCP_BUFFER;
            }
            let bdp = longhaul_units::bdp_bytes(rate, n.rtt(from, to));
            need = need.max(bdp.saturating_add(queues).saturating_mul(2));
        }
    }
    need.clamp(MIN_TCP_BUFFER, MAX_TCP_BUFFER)
}

/// The namespace of host `host` in a fabric tagged `tag`.
pub fn namespace_of(tag: &str, host: &str) -> String {
    format!("lh-{tag}-{host}")
}

impl Fabric {
    /// Creates every host and starts the switches. Needs `CAP_NET_ADMIN` and `CAP_SYS_ADMIN`;
    /// on any failure everything made so far is deleted.
    pub fn up(cfg: FabricConfig) -> Result<Fabric, EmuError> {
        crate::host::check_privileges()?;
        let net = cfg.network;
        if net.hosts.len() < 2 {
            return Err(EmuError::Config(format!(
                "network {}: at least two hosts are needed",
                net.name
            )));
        }
        let mut links = Vec::with_capacity(net.links.len());
        let mut heads = Vec::with_capacity(net.links.len());
        for (i, l) in net.links.iter().enumerate() {
            let dir = |c: &LinkConfig| {
                Link::new(c.clone())
                    .map(LinkDir::new)
                    .map_err(|e| EmuError::Config(format!("link {}: {e}", l.name)))
            };
            links.push([Mutex::new(dir(&l.a_to_b)?), Mutex::new(dir(&l.b_to_a)?)]);
            let ab = Step {
                link: i,
                a_to_b: true,
            };
            heads.push([net.head(ab), net.head(ab.reversed())]);
        }
        // The capture files first: a refused --pcap DIR leaves nothing to tear down.
        let captures = match &cfg.pcap {
            Some((dir, snaplen)) => {
                let names: Vec<String> = net
                    .links
                    .iter()
                    .flat_map(|l| link_capture_files(&l.name))
                    .collect();
                let mut files = crate::capture::create_all(dir, &names, *snaplen)?.into_iter();
                let mut next = || Mutex::new(files.next());
                (0..net.links.len()).map(|_| [next(), next()]).collect()
            }
            None => Vec::new(),
        };
        clean_stale();
        let tag = crate::host::tag(cfg.tag.clone())?;
        let tcp_max = if cfg.host_tcp_defaults {
            KERNEL_TCP_WMEM[2]
        } else {
            tcp_buffer_for_network(&net)
        };
        let mut namespaces = Vec::with_capacity(net.hosts.len());
        let mut tuns = Vec::with_capacity(net.hosts.len());
        for h in &net.hosts {
            let ns = Netns::add(namespace_of(&tag, &h.name))?;
            let tun = host(
                &ns,
                HostSetup {
                    mtu: net.mtu,
                    v4: h.v4,
                    v6: h.v6,
                    reach: Reach::Everyone,
                    tcp_max,
                    kernel_defaults: cfg.host_tcp_defaults,
                },
            );
            namespaces.push(ns);
            tuns.push(Arc::new(tun?));
        }
        let n = net.hosts.len();
        let mut routes = Vec::with_capacity(n * n);
        for from in 0..n {
            for to in 0..n {
                routes.push(Arc::<[Step]>::from(net.route(from, to)));
            }
        }
        let mut host_of = HashMap::new();
        for (i, h) in net.hosts.iter().enumerate() {
            host_of.insert(IpAddr::V4(h.v4), i);
            host_of.insert(IpAddr::V6(h.v6), i);
        }
        let mut router_of = HashMap::new();
        for (i, r) in net.routers.iter().enumerate() {
            router_of.insert(IpAddr::V4(r.v4), i);
            router_of.insert(IpAddr::V6(r.v6), i);
        }
        let shared = Arc::new(Shared {
            links,
            routes: RwLock::new(routes),
            routes_generation: AtomicU64::new(0),
            heads,
            routers: net
                .routers
                .iter()
                .map(|r| RouterAddrs { v4: r.v4, v6: r.v6 })
                .collect(),
            host_of,
            router_of,
            hosts: n,
            tuns,
            captures,
            stop: AtomicBool::new(false),
        });
        let switches = cfg.switches.unwrap_or_else(online_cpus).clamp(1, n);
        let mut fabric = Fabric {
            network: RwLock::new(net),
            shared: shared.clone(),
            threads: Vec::new(),
            live: Vec::new(),
            changes: Mutex::new(Vec::new()),
            tcp_buffer_max: tcp_max,
            namespaces,
        };
        for k in 0..switches {
            let hosts: Vec<usize> = (k..n).step_by(switches).collect();
            let name = format!("switch {k}");
            let host_names = fabric.host_names(&hosts);
            let live = Arc::new(Mutex::new(SwitchStats {
                name: name.clone(),
                hosts: host_names.clone(),
                ..SwitchStats::default()
            }));
            fabric.live.push(live.clone());
            let arrivals = hosts
                .iter()
                .zip(&host_names)
                .map(|(&h, host)| {
                    let ns = fabric.namespaces[h].path();
                    let tap = crate::arrival::tap_host(&ns, &format!("{name} from {host}"));
                    crate::arrival::ArrivalClock::new(tap)
                })
                .collect();
            let sw = Switch {
                arrivals,
                name: name.clone(),
                hosts,
                host_names,
                shared: shared.clone(),
                realtime: cfg.realtime,
                cpu: cfg
                    .cpus
                    .as_ref()
                    .filter(|c| !c.is_empty())
                    .map(|c| c[k % c.len()]),
                live,
            };
            let handle = std::thread::Builder::new()
                .name(format!("lh-{name}"))
                .spawn(move || sw.run())
                .map_err(|source| EmuError::Io {
                    what: format!("start {name}"),
                    source,
                })?;
            fabric.threads.push(handle);
        }
        tracing::info!(
            "fabric up: {} hosts, {} links, {switches} switches",
            n,
            fabric.shared.links.len()
        );
        Ok(fabric)
    }

    fn host_names(&self, hosts: &[usize]) -> Vec<String> {
        let net = self.network.read().unwrap_or_else(|e| e.into_inner());
        hosts.iter().map(|&h| net.hosts[h].name.clone()).collect()
    }

    /// The network as it runs now (with route changes).
    pub fn network(&self) -> Network {
        self.network
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The namespace of every host, in network order.
    pub fn namespaces(&self) -> Vec<String> {
        self.namespaces.iter().map(|n| n.name.clone()).collect()
    }

    /// The `tcp_rmem`/`tcp_wmem` maximum set in every host.
    pub fn tcp_buffer_max(&self) -> u64 {
        self.tcp_buffer_max
    }

    fn link_index(&self, name: &str) -> Result<usize, EmuError> {
        let net = self.network.read().unwrap_or_else(|e| e.into_inner());
        net.link_named(name).ok_or_else(|| {
            let names: Vec<&str> = net.links.iter().map(|l| l.name.as_str()).collect();
            EmuError::Config(format!(
                "no link named {name:?} in {} (links: {})",
                net.name,
                names.join(", ")
            ))
        })
    }

    fn log(&self, what: String) {
        tracing::info!("{what}");
        let at = jiff::Timestamp::now().to_string();
        let mut c = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        c.push(Change {
            at,
            at_monotonic_ns: monotonic_now_ns(),
            what,
        });
    }

    /// Cuts link `name` in both directions (`up = false`: every packet reaching it is dropped
    /// and counted as `cut_drops`) or restores it.
    pub fn set_link_up(&self, name: &str, up: bool) -> Result<(), EmuError> {
        let i = self.link_index(name)?;
        for d in &self.shared.links[i] {
            d.lock().unwrap_or_else(|e| e.into_inner()).up = up;
        }
        self.log(format!("link {name} {}", if up { "up" } else { "down" }));
        Ok(())
    }

    /// Changes one direction (`Some(true)`: a→b, `Some(false)`: b→a) or both (`None`) of link
    /// `name`. The new configuration is checked before anything changes.
    pub fn change_link(
        &self,
        name: &str,
        a_to_b: Option<bool>,
        change: &LinkChange,
    ) -> Result<(), EmuError> {
        let i = self.link_index(name)?;
        let dirs: &[usize] = match a_to_b {
            None => &[0, 1],
            Some(true) => &[0],
            Some(false) => &[1],
        };
        let mut net = self.network.write().unwrap_or_else(|e| e.into_inner());
        let mut made = Vec::new();
        for &d in dirs {
            let cfg = change.apply(net.links[i].direction(d == 0));
            let link = Link::new(cfg.clone())
                .map_err(|e| EmuError::Config(format!("link {name}: {e}")))?;
            made.push((d, cfg, link));
        }
        for (d, cfg, link) in made {
            self.shared.links[i][d]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .replace(link);
            let l = &mut net.links[i];
            if d == 0 {
                l.a_to_b = cfg;
            } else {
                l.b_to_a = cfg;
            }
        }
        drop(net);
        let which = match a_to_b {
            None => "",
            Some(true) => " a→b",
            Some(false) => " b→a",
        };
        self.log(format!("link {name}{which} set: {change}"));
        Ok(())
    }

    /// Routes host `from` to host `to` through the nodes `via` (routers, in order); with
    /// `both`, the way back goes through them in reverse. Checked before anything changes.
    pub fn set_route(
        &self,
        from: &str,
        to: &str,
        via: &[String],
        both: bool,
    ) -> Result<(), EmuError> {
        let mut net = self.network.write().unwrap_or_else(|e| e.into_inner());
        let host = |n: &str| {
            net.host_named(n)
                .ok_or_else(|| EmuError::Config(format!("no host named {n:?} in {}", net.name)))
        };
        let (f, t) = (host(from)?, host(to)?);
        let mut nodes: Vec<&str> = vec![from];
        nodes.extend(via.iter().map(String::as_str));
        nodes.push(to);
        let forward = net
            .steps_via(&nodes)
            .map_err(|e| EmuError::Config(e.to_string()))?;
        let mut pairs = vec![(f, t, forward.clone())];
        if both {
            let back: Vec<Step> = forward.iter().rev().map(|s| s.reversed()).collect();
            pairs.push((t, f, back));
        }
        for (a, b, steps) in &pairs {
            net.check_route(*a, *b, steps)
                .map_err(|e| EmuError::Config(e.to_string()))?;
        }
        let n = net.hosts.len();
        let mut routes = self
            .shared
            .routes
            .write()
            .unwrap_or_else(|e| e.into_inner());
        for (a, b, steps) in pairs {
            routes[a * n + b] = Arc::from(steps.as_slice());
            net.set_route(a, b, steps)
                .map_err(|e| EmuError::Config(e.to_string()))?;
        }
        drop(routes);
        self.shared
            .routes_generation
            .fetch_add(1, Ordering::Release);
        let path = describe_route(&net, f, t);
        drop(net);
        self.log(format!(
            "route {from} -> {to}{}: {path}",
            if both { " (and back)" } else { "" }
        ));
        Ok(())
    }

    /// The counters as they are now (switches publish every 100 ms; links are read now).
    pub fn snapshot(&self) -> FabricReport {
        let switches = self
            .live
            .iter()
            .map(|l| l.lock().map(|s| s.clone()).unwrap_or_default())
            .collect();
        self.report(switches)
    }

    fn report(&self, switches: Vec<SwitchStats>) -> FabricReport {
        let net = self.network.read().unwrap_or_else(|e| e.into_inner());
        let now = Nanos(monotonic_now_ns());
        let dir = |d: &Mutex<LinkDir>| {
            let d = d.lock().unwrap_or_else(|e| e.into_inner());
            LinkDirReport {
                link: d.stats(),
                queue_bytes_now: d.link.backlog_bytes(now),
                cut_drops: d.cut_drops,
                lateness: d.lateness.summary(),
                config: Some(d.link.config().clone()),
                capture: None,
            }
        };
        let links = net
            .links
            .iter()
            .zip(&self.shared.links)
            .map(|(l, d)| LinkReport {
                name: l.name.clone(),
                a: net.node_name(l.a).to_owned(),
                b: net.node_name(l.b).to_owned(),
                up: d[0].lock().map(|x| x.up).unwrap_or(true),
                a_to_b: dir(&d[0]),
                b_to_a: dir(&d[1]),
            })
            .collect();
        let hosts = net
            .hosts
            .iter()
            .zip(&self.namespaces)
            .map(|(h, ns)| HostReport {
                name: h.name.clone(),
                namespace: ns.name.clone(),
                v4: h.v4,
                v6: h.v6,
                tun_tx_dropped: ns.tx_dropped(),
            })
            .collect();
        FabricReport {
            network: net.name.clone(),
            tcp_buffer_max: self.tcp_buffer_max,
            hosts,
            links,
            switches,
            changes: self.changes.lock().map(|c| c.clone()).unwrap_or_default(),
        }
    }

    fn stop_threads(&mut self) -> Vec<SwitchStats> {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|h| h.join().unwrap_or_default())
            .collect()
    }

    /// Stops the switches, reads the counters, closes the capture files, deletes every host and
    /// returns the counters.
    pub fn down(mut self) -> FabricReport {
        let switches = self.stop_threads();
        let mut report = self.report(switches);
        for (l, caps) in report.links.iter_mut().zip(&self.shared.captures) {
            let finish = |c: &Mutex<Option<Capture>>| {
                c.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .map(Capture::finish)
            };
            l.a_to_b.capture = finish(&caps[0]);
            l.b_to_a.capture = finish(&caps[1]);
        }
        report
        // `self` drops here: TUNs closed, namespaces deleted.
    }
}

/// The capture files of link `name`: `[a→b, b→a]`.
pub fn link_capture_files(name: &str) -> [String; 2] {
    [format!("{name}.a_to_b.pcap"), format!("{name}.b_to_a.pcap")]
}

/// `a -> r1 -> r2 -> b` for the route from host `from` to host `to`.
pub fn describe_route(net: &Network, from: usize, to: usize) -> String {
    let mut s = net.hosts[from].name.clone();
    for step in net.route(from, to) {
        s.push_str(" -> ");
        s.push_str(net.node_name(net.head(*step)));
    }
    s
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.stop_threads();
        // The switches hold the TUNs through `shared`: joined above, so this is the last
        // reference, and the devices close before their namespaces go.
        if let Some(sh) = Arc::get_mut(&mut self.shared) {
            sh.tuns.clear();
        }
        self.namespaces.clear();
    }
}
