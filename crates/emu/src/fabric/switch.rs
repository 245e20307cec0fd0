//! One forwarding thread of the fabric: it reads the records its hosts send,
//! and moves every packet it owns through its route link by link in virtual
//! time, writing it to the destination host at its release time.
//!
//! A packet meets each link's model (queue, serializer, loss, delay, ...)
//! at the time it arrives at that link: the time it was read for the first
//! link, and for each later one the release of its first segment from the
//! link before (the link serializes the run again, so a run of segments
//! crossing two links of the same rate leaves the second exactly when it
//! would leave one). Events are handled in time order, each when the clock
//! reaches it, so every link sees its arrivals in time order across all
//! flows: flows that share a link compete on that link only (tandem queues).
//! Links are shared between switches behind a mutex; an arrival that a busy
//! switch handles late is clamped to the link's last arrival.
//!
//! At a router (the node a link enters, when it is not the destination)
//! the TTL / hop limit is decremented; an expiring packet is answered with
//! ICMP time exceeded from that router's addresses, and the answer travels
//! back over the links the packet came by, through their models, like any
//! packet.
//!
//! A ping to a router's own address travels the links toward it (the first links of a route from
//! the sender to a host behind that router) and is answered there with an ICMP echo reply, which
//! comes back the same way; a request damaged on the way fails the router's checksum and is
//! discarded, as a real router does.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use longhaul_link::{Fate, Link, LinkStats, Nanos};
use longhaul_packet::{Echo, HopAction, RouterAddrs, echo_reply, parse, process_hop};
use longhaul_sys::{
    Tun, VNET_HDR_LEN, monotonic_now_ns, pin_thread_to_cpu, set_realtime_priority,
    set_timer_slack_ns, wait_any_readable,
};
use longhaul_topology::{Node, Step};
use serde::{Deserialize, Serialize};

use super::event::{Events, Packet};
use crate::arrival::{ArrivalClock, ArrivalStats};
use crate::capture::Capture;
use crate::forward::{READ_BATCH, record_of, release_runs, spin_ns};
use crate::pool::BufPool;
use longhaul_units::hist::{Histogram, Summary};

/// Longest sleep: a stop request, a route change or a new link state is
/// picked up within this.
const MAX_WAIT_NS: u64 = 1_000_000;
/// How often a switch publishes its counters.
const PUBLISH_NS: u64 = 100_000_000;

/// One direction of one link, shared by every switch.
#[derive(Debug)]
pub(crate) struct LinkDir {
    pub(crate) link: Link,
    /// Whether the link is up (`link NAME down` clears it on both directions).
    pub(crate) up: bool,
    /// The last arrival handed to the model (arrival times never go back).
    last: u64,
    /// How late arrivals were handled (clock − scheduled arrival).
    pub(crate) lateness: Histogram,
    /// Records dropped because the link was down.
    pub(crate) cut_drops: u64,
    /// The model's counters before its configuration last changed.
    pub(crate) earlier: LinkStats,
}

impl LinkDir {
    pub(crate) fn new(link: Link) -> Self {
        Self {
            link,
            up: true,
            last: 0,
            lateness: Histogram::new(),
            cut_drops: 0,
            earlier: LinkStats::default(),
        }
    }

    /// The counters since the fabric came up, across configuration changes.
    pub(crate) fn stats(&self) -> LinkStats {
        let now = self.link.stats();
        let e = &self.earlier;
        LinkStats {
            seed: now.seed,
            records: e.records + now.records,
            segments: e.segments + now.segments,
            bytes: e.bytes + now.bytes,
            delivered: e.delivered + now.delivered,
            delivered_bytes: e.delivered_bytes + now.delivered_bytes,
            drop_queue: e.drop_queue + now.drop_queue,
            drop_random: e.drop_random + now.drop_random,
            drop_burst: e.drop_burst + now.drop_burst,
            drop_aqm: e.drop_aqm + now.drop_aqm,
            duplicates: e.duplicates + now.duplicates,
            reordered: e.reordered + now.reordered,
            corrupted: e.corrupted + now.corrupted,
            queue_max_bytes: e.queue_max_bytes.max(now.queue_max_bytes),
            queue_mean_bytes: now.queue_mean_bytes,
            cross_bytes: e.cross_bytes + now.cross_bytes,
            cross_dropped_bytes: e.cross_dropped_bytes + now.cross_dropped_bytes,
        }
    }

    /// Replaces the model (a live change), keeping the counters.
    pub(crate) fn replace(&mut self, link: Link) {
        self.earlier = self.stats();
        self.link = link;
    }
}

/// What every switch shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// `links[i][0]` is link i's a→b direction, `[1]` its b→a.
    pub(crate) links: Vec<[Mutex<LinkDir>; 2]>,
    /// `routes[from * hosts + to]`.
    pub(crate) routes: RwLock<Vec<Arc<[Step]>>>,
    /// Bumped after every route change.
    pub(crate) routes_generation: AtomicU64,
    /// The node each link direction enters: `heads[i][0]` for a→b.
    pub(crate) heads: Vec<[Node; 2]>,
    pub(crate) routers: Vec<RouterAddrs>,
    pub(crate) host_of: HashMap<IpAddr, usize>,
    /// Router addresses: pings to them are answered by the router.
    pub(crate) router_of: HashMap<IpAddr, usize>,
    pub(crate) hosts: usize,
    pub(crate) tuns: Vec<Arc<Tun>>,
    /// `captures[i][0]` captures link i's a→b direction (empty: no capture).
    pub(crate) captures: Vec<[Mutex<Option<Capture>>; 2]>,
    pub(crate) stop: AtomicBool,
}

impl Shared {
    fn dir(&self, s: Step) -> &Mutex<LinkDir> {
        &self.links[s.link][usize::from(!s.a_to_b)]
    }

    fn head(&self, s: Step) -> Node {
        self.heads[s.link][usize::from(!s.a_to_b)]
    }

    /// The capture of the direction `s` crosses, if the fabric captures.
    fn capture(&self, s: Step) -> Option<&Mutex<Option<Capture>>> {
        self.captures
            .get(s.link)
            .map(|c| &c[usize::from(!s.a_to_b)])
    }
}

/// What one switch did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SwitchStats {
    /// "switch 0", ...
    pub name: String,
    /// The hosts whose records it reads.
    pub hosts: Vec<String>,
    /// Records read from its hosts.
    pub records_read: u64,
    /// Records for an address no host has (dropped).
    pub no_route: u64,
    /// Records the packet parser refused (forwarded unchanged after each link's delay).
    pub unparseable: u64,
    /// Super-packets split because their segments had different fates.
    pub splits: u64,
    /// Records written to destination hosts.
    pub records_written: u64,
    /// Bytes written (virtio-net headers included).
    pub bytes_written: u64,
    /// Writes a destination TUN refused.
    pub write_errors: u64,
    /// Records that expired at a router and were answered with ICMP time exceeded.
    pub hop_time_exceeded: u64,
    /// Records that expired at a router without an answer.
    pub hop_drops: u64,
    /// Pings to a router answered by it.
    #[serde(default)]
    pub echo_replies: u64,
    /// Pings to a router discarded for a bad ICMP checksum (damaged on the way).
    #[serde(default)]
    pub echo_bad_checksum: u64,
    /// Other records addressed to a router (discarded).
    #[serde(default)]
    pub to_router_ignored: u64,
    /// Most bytes in flight between links at once.
    pub backlog_max_bytes: u64,
    /// Bytes in flight now.
    pub backlog_bytes_now: u64,
    /// Write time − scheduled release, for every record written.
    pub lateness: Summary,
    /// How the records of each host it reads (in the order of `hosts`) were timed.
    #[serde(default)]
    pub arrivals: Vec<ArrivalStats>,
}

/// A forwarding thread.
pub(crate) struct Switch {
    pub(crate) name: String,
    /// Indices of the hosts it reads.
    pub(crate) hosts: Vec<usize>,
    /// Their names, for the counters.
    pub(crate) host_names: Vec<String>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) realtime: Option<i32>,
    pub(crate) cpu: Option<usize>,
    pub(crate) live: Arc<Mutex<SwitchStats>>,
    /// One per host it reads: when each record entered that host's device.
    pub(crate) arrivals: Vec<ArrivalClock>,
}

/// A switch's working state.
struct Work {
    events: Events,
    pool: BufPool,
    fates: Vec<Fate>,
    reply: Vec<u8>,
    stats: SwitchStats,
    lateness: Histogram,
    next_id: u64,
    routes: Vec<Arc<[Step]>>,
    routes_generation: u64,
    /// `(sender, router)` → the links from the sender to the router, for this route generation.
    router_paths: HashMap<(usize, usize), Arc<[Step]>>,
}

impl Switch {
    /// Runs until the fabric stops; returns the counters.
    pub(crate) fn run(mut self) -> SwitchStats {
        if let Err(e) = set_timer_slack_ns(1) {
            tracing::warn!("{}: {e}", self.name);
        }
        if let Some(prio) = self.realtime
            && let Err(e) = set_realtime_priority(prio)
        {
            tracing::warn!("{}: no real-time priority: {e}", self.name);
        }
        if let Some(cpu) = self.cpu
            && let Err(e) = pin_thread_to_cpu(cpu)
        {
            tracing::warn!("{}: not pinned: {e}", self.name);
        }
        let sh = self.shared.clone();
        let tuns: Vec<&Tun> = self.hosts.iter().map(|&h| &*sh.tuns[h]).collect();
        let mut w = Work {
            events: Events::default(),
            pool: BufPool::new(),
            fates: Vec::new(),
            reply: Vec::new(),
            stats: SwitchStats {
                name: self.name.clone(),
                hosts: self.host_names.clone(),
                ..SwitchStats::default()
            },
            lateness: Histogram::new(),
            next_id: 0,
            routes: Vec::new(),
            routes_generation: u64::MAX,
            router_paths: HashMap::new(),
        };
        let mut buf = w.pool.take_full();
        let mut ready = Vec::new();
        let mut next_publish = 0;
        let spin = spin_ns(self.realtime.is_some());
        while !sh.stop.load(Ordering::Relaxed) {
            let generation = sh.routes_generation.load(Ordering::Acquire);
            if generation != w.routes_generation {
                w.routes_generation = generation;
                w.routes = sh.routes.read().unwrap_or_else(|e| e.into_inner()).clone();
                w.router_paths.clear();
            }
            let now = self.handle_due(&mut w, monotonic_now_ns());
            if now >= next_publish {
                next_publish = now + PUBLISH_NS;
                self.arrivals.iter_mut().for_each(ArrivalClock::resync);
                self.publish(&mut w);
            }
            let wait = w
                .events
                .next_due()
                .map_or(MAX_WAIT_NS, |due| due.saturating_sub(now))
                .min(MAX_WAIT_NS)
                .saturating_sub(spin);
            match wait_any_readable(&tuns, Duration::from_nanos(wait), &mut ready) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(e) => {
                    tracing::error!("{}: {e}", self.name);
                    break;
                }
            }
            for (i, &host) in self.hosts.iter().enumerate() {
                if !ready[i] {
                    continue;
                }
                for _ in 0..READ_BATCH {
                    let n = match tuns[i].read(&mut buf) {
                        Ok(n) => n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) => {
                            tracing::error!("{}: {e}", self.name);
                            sh.stop.store(true, Ordering::Relaxed);
                            break;
                        }
                    };
                    w.stats.records_read += 1;
                    let packet = buf[..n].get(VNET_HDR_LEN..).unwrap_or_default();
                    let arrived = self.arrivals[i].arrival(packet, monotonic_now_ns());
                    self.ingress(&mut w, host, &mut buf, n, arrived);
                    // Due writes get a turn after every record, as in the two-host forwarder.
                    let t = monotonic_now_ns();
                    if w.events.next_due().is_some_and(|d| d <= t) {
                        self.handle_due(&mut w, t);
                    }
                }
            }
        }
        self.publish(&mut w);
        w.stats
    }

    /// A record host `src` sent, `buf[..len]`, arrived at `arrived`: onto its route's first link.
    fn ingress(&self, w: &mut Work, src: usize, buf: &mut Vec<u8>, len: usize, arrived: u64) {
        let parsed = match parse(&buf[..len]) {
            Ok(p) => p,
            Err(e) => {
                w.stats.unparseable += 1;
                tracing::debug!("{}: unparseable record of {len} B: {e}", self.name);
                return;
            }
        };
        let (dst, to_router, path) = match self.shared.host_of.get(&parsed.flow.dst) {
            Some(&dst) => (dst, None, w.routes[src * self.shared.hosts + dst].clone()),
            None => match self.shared.router_of.get(&parsed.flow.dst) {
                Some(&r) => match self.path_to_router(w, src, r) {
                    Some(path) => (src, Some(r), path),
                    None => {
                        w.stats.no_route += 1;
                        return;
                    }
                },
                None => {
                    w.stats.no_route += 1;
                    return;
                }
            },
        };
        if path.is_empty() {
            w.stats.no_route += 1;
            return;
        }
        let bytes = w.pool.hand_over(buf, len, true);
        let packet = Packet {
            bytes,
            parsed: Some(parsed),
            path,
            pos: 0,
            src,
            dst,
            to_router,
        };
        self.step(w, arrived, packet, monotonic_now_ns());
    }

    /// The links from host `src` to router `r`: the shortest start of a route from `src` that
    /// reaches `r` (none when no route from `src` passes it).
    fn path_to_router(&self, w: &mut Work, src: usize, r: usize) -> Option<Arc<[Step]>> {
        if let Some(p) = w.router_paths.get(&(src, r)) {
            return Some(p.clone());
        }
        let sh = &*self.shared;
        let best = (0..sh.hosts)
            .filter_map(|to| {
                let route = &w.routes[src * sh.hosts + to];
                let i = route.iter().position(|&s| sh.head(s) == Node::Router(r))?;
                Some(Arc::<[Step]>::from(&route[..=i]))
            })
            .min_by_key(|p| p.len())?;
        w.router_paths.insert((src, r), best.clone());
        Some(best)
    }

    /// Handles every event due at `now`; returns the clock after the last.
    fn handle_due(&self, w: &mut Work, mut now: u64) -> u64 {
        while let Some(e) = w.events.pop_due(now) {
            self.step(w, e.at, e.packet, now);
            now = monotonic_now_ns();
        }
        now
    }

    /// `p` reaches the node after `p.path[..p.pos]` at `at` (the clock reads `now`).
    fn step(&self, w: &mut Work, at: u64, mut p: Packet, now: u64) {
        let sh = &*self.shared;
        if p.pos == p.path.len()
            && let Some(r) = p.to_router
        {
            self.answer_ping(w, r, at, p);
            return;
        }
        if p.pos == p.path.len() {
            w.lateness.record(now.saturating_sub(at));
            match sh.tuns[p.dst].write(&p.bytes) {
                Ok(_) => {
                    w.stats.records_written += 1;
                    w.stats.bytes_written += p.bytes.len() as u64;
                }
                Err(e) => {
                    w.stats.write_errors += 1;
                    tracing::debug!("{}: {e}", self.name);
                }
            }
            w.pool.put(p.bytes);
            return;
        }
        if p.pos > 0
            && let Node::Router(r) = sh.head(p.path[p.pos - 1])
            && !self.router(w, r, at, &mut p)
        {
            return;
        }
        let step = p.path[p.pos];
        let last_step = p.pos + 1 == p.path.len();
        let mut d = sh.dir(step).lock().unwrap_or_else(|e| e.into_inner());
        d.lateness.record(now.saturating_sub(at));
        if !d.up {
            d.cut_drops += 1;
            drop(d);
            w.pool.put(p.bytes);
            return;
        }
        let t = at.max(d.last);
        d.last = t;
        let parsed = match p.parsed.map_or_else(|| parse(&p.bytes), Ok) {
            Ok(x) => x,
            Err(_) => {
                // Forwarded unchanged after the link's delay.
                let delay = d.link.config().propagation().as_nanos();
                drop(d);
                w.stats.unparseable += 1;
                p.pos += 1;
                p.parsed = None;
                w.events.push(t + delay, p);
                return;
            }
        };
        let record = record_of(w.next_id, &parsed);
        w.next_id += 1;
        w.fates.clear();
        let arrived = d.link.arrive(Nanos(t), &record, &mut w.fates);
        drop(d);
        if let Err(e) = arrived {
            // Cannot happen for records built by `record_of` at non-decreasing times.
            tracing::debug!("{}: {e}", self.name);
            w.pool.put(p.bytes);
            return;
        }
        let len = p.bytes.len();
        let Work {
            events,
            pool,
            fates,
            ..
        } = w;
        let capture = sh.capture(step);
        let split = release_runs(&mut p.bytes, len, &parsed, fates, pool, false, |run| {
            if let Some(c) = capture
                && let Some(c) = c.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
            {
                c.offer(run.at, run.bytes.get(VNET_HDR_LEN..).unwrap_or_default());
            }
            // The destination gets the run as one write when its last segment is released
            // (never early); the next link gets it when its first one arrives there.
            let next = if last_step { run.at } else { run.from };
            let packet = Packet {
                bytes: run.bytes,
                parsed: run.whole.then_some(parsed),
                path: p.path.clone(),
                pos: p.pos + 1,
                src: p.src,
                dst: p.dst,
                to_router: p.to_router,
            };
            events.push(next, packet);
        });
        w.pool.put(std::mem::take(&mut p.bytes));
        if split {
            w.stats.splits += 1;
        }
    }

    /// Router `r` handles `p` at `at`: decrements its TTL, or answers and drops it. Returns
    /// whether it goes on.
    fn router(&self, w: &mut Work, r: usize, at: u64, p: &mut Packet) -> bool {
        let sh = &*self.shared;
        match process_hop(&mut p.bytes, &sh.routers[r], &mut w.reply) {
            Ok(HopAction::Forward) | Err(_) => true,
            Ok(HopAction::TimeExceeded) => {
                w.stats.hop_time_exceeded += 1;
                w.pool.put(std::mem::take(&mut p.bytes));
                self.send_back(w, at, &p.path[..p.pos], p.src);
                false
            }
            Ok(HopAction::Drop) => {
                w.stats.hop_drops += 1;
                w.pool.put(std::mem::take(&mut p.bytes));
                false
            }
        }
    }

    /// A router's answer (in `w.reply`) leaves at `at` for host `to`, back over the links
    /// `crossed` (the way the packet it answers came).
    fn send_back(&self, w: &mut Work, at: u64, crossed: &[Step], to: usize) {
        let back: Vec<Step> = crossed.iter().rev().map(|s| s.reversed()).collect();
        let reply = Packet {
            bytes: std::mem::take(&mut w.reply),
            parsed: None,
            path: Arc::from(back),
            pos: 0,
            src: to,
            dst: to,
            to_router: None,
        };
        self.step(w, at, reply, monotonic_now_ns());
    }

    /// Router `r` receives `p`, addressed to it, at `at`: a ping is answered back over the links
    /// it came by; anything else is discarded.
    fn answer_ping(&self, w: &mut Work, r: usize, at: u64, mut p: Packet) {
        let sh = &*self.shared;
        let outcome = echo_reply(&p.bytes, &sh.routers[r], &mut w.reply);
        w.pool.put(std::mem::take(&mut p.bytes));
        match outcome {
            Ok(Echo::Reply) => {
                w.stats.echo_replies += 1;
                self.send_back(w, at, &p.path, p.src);
            }
            Ok(Echo::BadChecksum) => w.stats.echo_bad_checksum += 1,
            Ok(Echo::Ignored) | Err(_) => w.stats.to_router_ignored += 1,
        }
    }

    fn publish(&self, w: &mut Work) {
        w.stats.lateness = w.lateness.summary();
        w.stats.arrivals = self.arrivals.iter().map(ArrivalClock::stats).collect();
        w.stats.backlog_max_bytes = w.events.max_bytes() as u64;
        w.stats.backlog_bytes_now = w.events.bytes() as u64;
        if let Ok(mut live) = self.live.lock() {
            live.clone_from(&w.stats);
        }
    }
}
