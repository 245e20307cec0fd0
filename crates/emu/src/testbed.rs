//! Two emulated hosts joined by an emulated path: namespaces `lh-<tag>-a` and
//! `lh-<tag>-b`, a vnet TUN `lh0` in each, and one forwarder thread per
//! direction. No veth pair or kernel hop joins the namespaces: every packet
//! between the hosts passes through the emulator.
//!
//! Lifecycle: [`Testbed::up`] creates everything, deleting what it already
//! made if a later step fails; [`Testbed::down`] (or dropping the testbed)
//! stops the forwarders, closes the TUNs and deletes both namespaces. A
//! process killed before that leaves its namespaces behind; the next `up`
//! deletes namespaces that follow this module's naming (`lh-e<pid>-<n>-a|b`)
//! and whose creating process is gone ([`stale_namespaces`]).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use longhaul_link::{Link, LinkConfig, Nanos};
use longhaul_packet::RouterAddrs;
use longhaul_sys::{ShortOfMemory, Tun, ip};
use serde::{Deserialize, Serialize};

use crate::error::EmuError;
use crate::forward::{Bursts, DirectionStats, Forwarder, HopStage, delay_line_buffers};
pub use crate::host::{
    DEVICE, KERNEL_TCP_RMEM, KERNEL_TCP_WMEM, MAX_TCP_BUFFER, MIN_TCP_BUFFER, ROUTERS_V4,
    ROUTERS_V6, TXQUEUELEN,
};
use crate::host::{HostSetup, Netns, Reach, host};
use crate::host_memory::{HostShortage, Lease, Plan, Policy, Store, path_bytes};

/// Host a's IPv4 address.
pub const HOST_A_V4: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
/// Host b's IPv4 address.
pub const HOST_B_V4: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// Host a's IPv6 address.
pub const HOST_A_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x4c48, 0, 0, 0, 0, 0, 1);
/// Host b's IPv6 address.
pub const HOST_B_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x4c48, 0, 0, 0, 0, 0, 2);

/// IPv4 address of router hop `i` (0-based): 10.201.1.(i+1).
pub fn router_v4(i: usize) -> Ipv4Addr {
    let n = i + 1;
    Ipv4Addr::new(10, 201, 1 + (n / 256) as u8, (n % 256) as u8)
}

/// IPv6 address of router hop `i` (0-based): fd00:4c48:1::(i+1).
pub fn router_v6(i: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x4c48, 1, 0, 0, 0, 0, (i + 1) as u16)
}

/// Most router hops on a path (traceroute's default maximum TTL is 30).
pub const MAX_HOPS: usize = 64;

/// One router on the path from host a to host b. The router has no device:
/// the forwarders decrement TTL / hop limit on its behalf and synthesise its
/// ICMP time-exceeded replies. The topology crate's `CompiledHop` maps onto
/// it field for field (its `city` and `km` are not needed here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// Name (shown nowhere on the wire; in reports and errors).
    pub name: String,
    /// One-way delay from the previous hop (or host a) to this hop.
    pub one_way: Nanos,
    /// One-way delay from host a to this hop.
    pub cumulative_one_way: Nanos,
    /// Source of its ICMPv4 replies.
    pub addr_v4: Ipv4Addr,
    /// Source of its ICMPv6 replies.
    pub addr_v6: Ipv6Addr,
}

/// `n` routers `hop1..hopN` evenly spaced along a path of one-way delay
/// `one_way`: hop i (1-based) at `one_way × i / (n + 1)`, addresses
/// [`router_v4`] / [`router_v6`].
pub fn evenly_spaced_hops(n: usize, one_way: Nanos) -> Vec<Hop> {
    let at = |i: usize| Nanos((one_way.0 as u128 * i as u128 / (n as u128 + 1)) as u64);
    (0..n)
        .map(|i| Hop {
            name: format!("hop{}", i + 1),
            one_way: Nanos(at(i + 1).0 - at(i).0),
            cumulative_one_way: at(i + 1),
            addr_v4: router_v4(i),
            addr_v6: router_v6(i),
        })
        .collect()
}

/// Checks the hops against the path: at most [`MAX_HOPS`], cumulative delays
/// non-decreasing and within the one-way delay of both directions.
pub fn check_hops(hops: &[Hop], a_to_b: Nanos, b_to_a: Nanos) -> Result<(), EmuError> {
    if hops.len() > MAX_HOPS {
        return Err(EmuError::Config(format!(
            "{} router hops; at most {MAX_HOPS} are supported",
            hops.len()
        )));
    }
    let mut prev = Nanos::ZERO;
    for h in hops {
        if h.cumulative_one_way < prev {
            return Err(EmuError::Config(format!(
                "hop {}: cumulative one-way delay {} is less than the previous hop's {}",
                h.name, h.cumulative_one_way, prev
            )));
        }
        let path = a_to_b.min(b_to_a);
        if h.cumulative_one_way > path {
            return Err(EmuError::Config(format!(
                "hop {}: cumulative one-way delay {} is beyond the end of the path ({})",
                h.name, h.cumulative_one_way, path
            )));
        }
        prev = h.cumulative_one_way;
    }
    Ok(())
}

/// The hop stages of one direction in path order: a→b meets the hops in the
/// given order, each answering after twice its delay from a; b→a meets them
/// reversed, each answering after twice its delay from b.
fn stages(hops: &[Hop], from_b: Option<Nanos>) -> Vec<HopStage> {
    let stage = |h: &Hop| {
        let one_way = match from_b {
            None => h.cumulative_one_way,
            Some(total) => Nanos(total.0.saturating_sub(h.cumulative_one_way.0)),
        };
        HopStage {
            addrs: RouterAddrs {
                v4: h.addr_v4,
                v6: h.addr_v6,
            },
            reply_delay_ns: 2 * one_way.0,
        }
    };
    match from_b {
        None => hops.iter().map(stage).collect(),
        Some(_) => hops.iter().rev().map(stage).collect(),
    }
}

/// What to bring up.
#[derive(Debug, Clone)]
pub struct TestbedConfig {
    /// Names are `lh-<tag>-a` / `lh-<tag>-b`; `None` picks `e<pid>-<n>`,
    /// unique among running processes.
    pub tag: Option<String>,
    /// MTU of both TUN devices (1500 or 9000 typically).
    pub mtu: u32,
    /// Path from a to b.
    pub a_to_b: LinkConfig,
    /// Path from b to a.
    pub b_to_a: LinkConfig,
    /// `SCHED_FIFO` priority for the forwarder threads, if wanted.
    pub realtime: Option<i32>,
    /// CPUs to pin the a→b and b→a forwarder threads to, if wanted.
    pub cpus: Option<[usize; 2]>,
    /// Capture each direction into `a_to_b.pcap` / `b_to_a.pcap` in this
    /// directory (created if missing), keeping this many bytes per packet.
    pub pcap: Option<(PathBuf, u32)>,
    /// Router hops from a to b, in path order (empty: a direct path).
    pub hops: Vec<Hop>,
    /// Give the hosts the kernel's default TCP buffer limits
    /// ([`KERNEL_TCP_RMEM`], [`KERNEL_TCP_WMEM`]) instead of raising them to
    /// cover the path: what an untuned host (and iperf3 on it) gets.
    pub host_tcp_defaults: bool,
    /// What to do when the path needs more of the kernel's TCP memory than `net.ipv4.tcp_mem`
    /// allows ([`crate::host_memory`]).
    pub host_memory: Policy,
}

/// Both directions' counters, read at teardown.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Namespace of host a.
    pub host_a: String,
    /// Namespace of host b.
    pub host_b: String,
    /// The `tcp_rmem`/`tcp_wmem` maximum set in both hosts, bytes (with
    /// kernel defaults: the smaller, `tcp_wmem`'s).
    pub tcp_buffer_max: u64,
    /// Host a to host b.
    pub a_to_b: DirectionStats,
    /// Host b to host a.
    pub b_to_a: DirectionStats,
    /// The memory plan: what the run makes TCP and the delay line hold, and what was done about
    /// `net.ipv4.tcp_mem`.
    #[serde(default)]
    pub host_memory: Option<Plan>,
    /// The hosts where TCP ran short of memory during the run (empty when neither did).
    #[serde(default)]
    pub tcp_shortage: Vec<HostShortage>,
}

impl Report {
    /// Why the run's timing or delivery cannot be trusted (empty when it
    /// can): p99 lateness above `max_p99_ns` in either direction, a TUN
    /// device that dropped packets on its own, failed writes, or more than
    /// 1 % of the records timed when read rather than when sent (no tap on
    /// the sending host's device, or a tap that missed them).
    pub fn fidelity_problems(&self, max_p99_ns: u64) -> Vec<String> {
        let mut out = Vec::new();
        for d in [&self.a_to_b, &self.b_to_a] {
            if d.lateness.p99_ns > max_p99_ns {
                out.push(format!(
                    "{}: p99 lateness {:.3} ms > {:.3} ms",
                    d.name,
                    d.lateness.p99_ns as f64 / 1e6,
                    max_p99_ns as f64 / 1e6
                ));
            }
            if let Some(n) = d.tun_tx_dropped.filter(|&n| n > 0) {
                out.push(format!(
                    "{}: the TUN device dropped {n} packets itself",
                    d.name
                ));
            }
            if d.write_errors > 0 {
                out.push(format!("{}: {} TUN writes failed", d.name, d.write_errors));
            }
            out.extend(crate::arrival::untimed_problem(&d.name, &d.arrival));
        }
        // A stall in either direction can overflow either direction's queue (see crate::stall).
        let drops_after = self.a_to_b.stalls.drops_after + self.b_to_a.stalls.drops_after;
        for d in [&self.a_to_b, &self.b_to_a] {
            if let Some(w) = d.stalls.worst().filter(|_| drops_after > 0) {
                out.push(format!(
                    "{}: {} (worst {:.1} ms late at {:.1} s) followed by {drops_after} \
                     bottleneck drops the path may not have made",
                    d.name,
                    crate::stall::stalls(d.stalls.count),
                    w.worst_ms,
                    w.at_s
                ));
            }
        }
        out
    }
}

/// `tcp_rmem`/`tcp_wmem` maximum for a path: twice the bytes it can hold
/// (bandwidth × RTT plus both bottleneck queues), within
/// [`MIN_TCP_BUFFER`]..=[`MAX_TCP_BUFFER`]; the maximum without a rate limit.
pub fn tcp_buffer_for(a_to_b: &LinkConfig, b_to_a: &LinkConfig) -> u64 {
    let (Some(x), Some(y)) = (a_to_b.bottleneck, b_to_a.bottleneck) else {
        return MAX_TCP_BUFFER;
    };
    let rtt = a_to_b.propagation() + b_to_a.propagation();
    let rate = x.rate_bps.max(y.rate_bps);
    let bdp = longhaul_units::bdp_bytes(rate, rtt);
    (2 * (bdp + x.queue_bytes + y.queue_bytes)).clamp(MIN_TCP_BUFFER, MAX_TCP_BUFFER)
}

/// The bytes the path holds in its fuller direction (the data direction is not known in advance):
/// rate × RTT plus that direction's bottleneck queue.
fn data_path_bytes(a_to_b: &LinkConfig, b_to_a: &LinkConfig) -> u64 {
    let rtt = (a_to_b.propagation() + b_to_a.propagation()).as_nanos();
    [a_to_b, b_to_a]
        .iter()
        .map(|d| {
            let b = d.bottleneck;
            path_bytes(b.map(|b| b.rate_bps), rtt, b.map_or(0, |b| b.queue_bytes))
        })
        .max()
        .unwrap_or(0)
}

/// Namespaces in `ip netns list` output named `lh-e<pid>-<n>-<host>` whose
/// `pid` is not alive: left behind by an emulator that was killed. `<host>` is
/// `a` or `b` for a two-host testbed, a network's host name for a fabric
/// (lowercase letters, digits and '-', starting with a letter).
pub fn stale_namespaces(list: &str, alive: impl Fn(u32) -> bool) -> Vec<String> {
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| {
            let Some(rest) = name.strip_prefix("lh-e") else {
                return false;
            };
            let parts: Vec<&str> = rest.splitn(3, '-').collect();
            match parts.as_slice() {
                [pid, n, host] => {
                    host.starts_with(|c: char| c.is_ascii_lowercase())
                        && host
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && n.parse::<u32>().is_ok()
                        && pid.parse::<u32>().is_ok_and(|p| !alive(p))
                }
                _ => false,
            }
        })
        .map(str::to_string)
        .collect()
}

/// Deletes namespaces left behind by killed emulators; returns their names.
pub fn clean_stale() -> Vec<String> {
    let Ok(list) = ip(&["netns", "list"]) else {
        return Vec::new();
    };
    let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    if let Err(e) = crate::host_memory::reap(&Store::system()) {
        tracing::warn!("host memory: {e}");
    }
    let stale = stale_namespaces(&list, alive);
    for name in &stale {
        match delete_namespace(name) {
            Ok(_) => tracing::info!("deleted stale namespace {name}"),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    stale
}

/// Deletes namespace `name` (one of ours, left behind by a dead emulator) after stopping the
/// processes still running in it (a `longhaul server` or `--b-cmd` orphaned by SIGKILL; see
/// [`crate::host::stop_processes_in`]).
pub fn delete_namespace(name: &str) -> Result<(), EmuError> {
    crate::host::stop_processes_in(name);
    ip(&["netns", "del", name])?;
    Ok(())
}

/// A running two-host testbed. Dropping it tears everything down.
#[derive(Debug)]
pub struct Testbed {
    stop: Arc<AtomicBool>,
    cut: Arc<AtomicBool>,
    bursts: [Arc<Bursts>; 2],
    threads: Vec<JoinHandle<DirectionStats>>,
    live: Vec<Arc<Mutex<DirectionStats>>>,
    tuns: Vec<Arc<Tun>>,
    tcp_buffer_max: u64,
    plan: Plan,
    /// Both hosts' TCP shortage counters when they came up.
    short_at_start: [Option<ShortOfMemory>; 2],
    // Dropped after the threads are joined and the TUNs closed (see Drop).
    a: Option<Netns>,
    b: Option<Netns>,
    /// Given back after the hosts are gone.
    lease: Option<Lease>,
}

impl Testbed {
    /// Creates both hosts and starts the forwarders. Needs `CAP_NET_ADMIN`
    /// and `CAP_SYS_ADMIN`; on any failure everything made so far is deleted.
    pub fn up(cfg: TestbedConfig) -> Result<Testbed, EmuError> {
        crate::host::check_privileges()?;
        let link_ab = Link::new(cfg.a_to_b.clone()).map_err(|source| EmuError::Link {
            direction: "a→b",
            source,
        })?;
        let link_ba = Link::new(cfg.b_to_a.clone()).map_err(|source| EmuError::Link {
            direction: "b→a",
            source,
        })?;
        if !(68..=65_535).contains(&cfg.mtu) {
            return Err(EmuError::Config(format!(
                "MTU {} is outside 68..=65535",
                cfg.mtu
            )));
        }
        check_hops(
            &cfg.hops,
            cfg.a_to_b.propagation(),
            cfg.b_to_a.propagation(),
        )?;
        clean_stale();
        let tag = crate::host::tag(cfg.tag.clone())?;
        let tcp_max = if cfg.host_tcp_defaults {
            KERNEL_TCP_WMEM[2]
        } else {
            tcp_buffer_for(&cfg.a_to_b, &cfg.b_to_a)
        };
        let planned = crate::host_memory::prepare(
            cfg.host_memory,
            &Store::system(),
            data_path_bytes(&cfg.a_to_b, &cfg.b_to_a),
            tcp_max,
            ((delay_line_buffers(&cfg.a_to_b) + delay_line_buffers(&cfg.b_to_a))
                * longhaul_sys::MAX_RECORD_LEN) as u64,
        )?;
        let tcp_max = planned.tcp_max;
        // The capture files first: a refused --pcap DIR leaves nothing to tear down.
        let mut captures: Vec<Option<_>> = match &cfg.pcap {
            Some((dir, snaplen)) => {
                let names = ["a_to_b.pcap", "b_to_a.pcap"].map(String::from);
                let files = crate::capture::create_all(dir, &names, *snaplen)?;
                files.into_iter().map(Some).collect()
            }
            None => vec![None, None],
        };
        let a = Netns::add(format!("lh-{tag}-a"))?;
        let b = Netns::add(format!("lh-{tag}-b"))?;
        let setup = |v4, v6, reach| HostSetup {
            mtu: cfg.mtu,
            v4,
            v6,
            reach,
            tcp_max,
            kernel_defaults: cfg.host_tcp_defaults,
        };
        let tun_a = Arc::new(host(
            &a,
            setup(HOST_A_V4, HOST_A_V6, Reach::Peer(HOST_B_V4, HOST_B_V6)),
        )?);
        let tun_b = Arc::new(host(
            &b,
            setup(HOST_B_V4, HOST_B_V6, Reach::Peer(HOST_A_V4, HOST_A_V6)),
        )?);
        let short_at_start = [a.tcp_short(), b.tcp_short()];
        let mut bed = Testbed {
            stop: Arc::new(AtomicBool::new(false)),
            cut: Arc::new(AtomicBool::new(false)),
            bursts: [Arc::default(), Arc::default()],
            threads: Vec::new(),
            live: Vec::new(),
            tuns: vec![tun_a.clone(), tun_b.clone()],
            tcp_buffer_max: tcp_max,
            plan: planned.plan,
            short_at_start,
            a: Some(a),
            b: Some(b),
            lease: planned.lease,
        };
        let phase = Arc::new(crate::phase::PhaseShared::new(
            longhaul_sys::monotonic_now_ns(),
        ));
        let stalls = Arc::new(crate::stall::StallShared::default());
        let rtt_ns = (cfg.a_to_b.propagation() + cfg.b_to_a.propagation()).as_nanos();
        let hops_ab = stages(&cfg.hops, None);
        let hops_ba = stages(&cfg.hops, Some(cfg.b_to_a.propagation()));
        for (i, (name, src, dst, link, hops)) in [
            ("a→b", &tun_a, &tun_b, link_ab, hops_ab),
            ("b→a", &tun_b, &tun_a, link_ba, hops_ba),
        ]
        .into_iter()
        .enumerate()
        {
            let capture = captures[i].take();
            let live = Arc::new(Mutex::new(DirectionStats {
                name: name.to_string(),
                ..DirectionStats::default()
            }));
            bed.live.push(live.clone());
            let sender = [&bed.a, &bed.b][i].as_ref().map(|ns| ns.path());
            let tap = sender.and_then(|path| crate::arrival::tap_host(&path, name));
            let fwd = Forwarder {
                arrivals: crate::arrival::ArrivalClock::new(tap),
                name: name.to_string(),
                src: src.clone(),
                dst: dst.clone(),
                link,
                hops,
                stop: bed.stop.clone(),
                cut: bed.cut.clone(),
                bursts: bed.bursts[i].clone(),
                realtime: cfg.realtime,
                cpu: cfg.cpus.map(|c| c[i]),
                live,
                capture,
                rtt_ns,
                phase: phase.clone(),
                stalls: stalls.clone(),
            };
            let handle = std::thread::Builder::new()
                .name(format!("lh-fwd {name}"))
                .spawn(move || fwd.run())
                .map_err(|source| EmuError::Io {
                    what: format!("start the {name} forwarder thread"),
                    source,
                })?;
            bed.threads.push(handle);
        }
        tracing::info!(
            "testbed up: {} ({HOST_A_V4}, {HOST_A_V6}) <-> {} ({HOST_B_V4}, {HOST_B_V6})",
            bed.host_a(),
            bed.host_b()
        );
        Ok(bed)
    }

    /// Namespace name of host a (the sender in `longhaul emulate`).
    pub fn host_a(&self) -> &str {
        self.a.as_ref().map_or("", |n| n.name.as_str())
    }

    /// Namespace name of host b.
    pub fn host_b(&self) -> &str {
        self.b.as_ref().map_or("", |n| n.name.as_str())
    }

    /// The `tcp_rmem`/`tcp_wmem` maximum set in both hosts.
    pub fn tcp_buffer_max(&self) -> u64 {
        self.tcp_buffer_max
    }

    /// Cuts the path in both directions (`up = false`: every packet is dropped, counted as
    /// `cut_drops`, until it is restored) or restores it. Connections across it see an outage, as
    /// when a fibre is cut: no error, no packet.
    pub fn set_link(&self, up: bool) {
        self.cut.store(!up, Ordering::Relaxed);
    }

    /// Schedules a burst of cross traffic on the bottleneck of one direction (`a_to_b`: the
    /// direction host a sends in), from `from_ns` (monotonic clock, `longhaul_sys::monotonic_now_ns`)
    /// for `length` at `rate_bps`. The forwarder picks it up on its next turn.
    pub fn schedule_burst(&self, a_to_b: bool, from_ns: u64, length: Nanos, rate_bps: u64) {
        let b = longhaul_link::Burst {
            from: Nanos(from_ns),
            until: Nanos(from_ns.saturating_add(length.as_nanos())),
            rate_bps,
        };
        self.bursts[usize::from(!a_to_b)].push(b);
    }

    /// Whether the path is up (not cut).
    pub fn link_up(&self) -> bool {
        !self.cut.load(Ordering::Relaxed)
    }

    /// The counters as they are now (published by the forwarders every
    /// 100 ms), with the TUN devices' drop counters read now.
    pub fn snapshot(&self) -> Report {
        let read = |i: usize| {
            self.live
                .get(i)
                .and_then(|l| l.lock().ok().map(|s| s.clone()))
                .unwrap_or_default()
        };
        self.report(read(0), read(1))
    }

    /// Both directions' counters with the TUN devices' drop counters read now (each direction's
    /// source TUN is the one whose drops it would cause).
    fn report(&self, mut a_to_b: DirectionStats, mut b_to_a: DirectionStats) -> Report {
        a_to_b.tun_tx_dropped = self.a.as_ref().and_then(Netns::tx_dropped);
        b_to_a.tun_tx_dropped = self.b.as_ref().and_then(Netns::tx_dropped);
        let tcp_shortage = [&self.a, &self.b]
            .into_iter()
            .zip(&self.short_at_start)
            .filter_map(|(ns, start)| {
                let ns = ns.as_ref()?;
                let run = ns.tcp_short()?.since(start.as_ref()?);
                run.any().then(|| HostShortage::new(&ns.name, &run))
            })
            .collect();
        Report {
            host_a: self.host_a().to_string(),
            host_b: self.host_b().to_string(),
            tcp_buffer_max: self.tcp_buffer_max,
            a_to_b,
            b_to_a,
            host_memory: Some(self.plan.clone()),
            tcp_shortage,
        }
    }

    /// The memory plan the testbed was brought up with.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    fn stop_threads(&mut self) -> Vec<DirectionStats> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|h| h.join().unwrap_or_default())
            .collect()
    }

    /// Stops the forwarders, reads the TUN drop counters, deletes both hosts
    /// and returns the counters.
    pub fn down(mut self) -> Report {
        let mut stats = self.stop_threads();
        let b_to_a = stats.pop().unwrap_or_default();
        let a_to_b = stats.pop().unwrap_or_default();
        self.report(a_to_b, b_to_a)
        // `self` drops here: TUNs closed, namespaces deleted.
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.stop_threads();
        self.tuns.clear();
        self.b.take();
        self.a.take();
        self.lease.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_link::{Bottleneck, Nanos};

    #[test]
    fn hops_are_evenly_spaced_and_answer_after_the_round_trip() {
        let hops = evenly_spaced_hops(3, Nanos::from_millis(20));
        let names: Vec<&str> = hops.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["hop1", "hop2", "hop3"]);
        let cum: Vec<u64> = hops
            .iter()
            .map(|h| h.cumulative_one_way.as_millis())
            .collect();
        assert_eq!(cum, [5, 10, 15]);
        assert!(hops.iter().all(|h| h.one_way == Nanos::from_millis(5)));
        assert_eq!(hops[2].addr_v4, Ipv4Addr::new(10, 201, 1, 3));
        assert_eq!(
            hops[0].addr_v6,
            "fd00:4c48:1::1".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(router_v4(255), Ipv4Addr::new(10, 201, 2, 0));
        let d = Nanos::from_millis(20);
        assert!(check_hops(&hops, d, d).is_ok());
        assert!(check_hops(&hops, d, Nanos::from_millis(10)).is_err());
        let mut back = hops.clone();
        back.swap(0, 2);
        assert!(check_hops(&back, d, d).is_err());
        assert!(check_hops(&evenly_spaced_hops(MAX_HOPS + 1, d), d, d).is_err());

        let ab = stages(&hops, None);
        let ms: Vec<u64> = ab.iter().map(|s| s.reply_delay_ns / 1_000_000).collect();
        assert_eq!(ms, [10, 20, 30]);
        assert_eq!(ab[0].addrs.v4, hops[0].addr_v4);
        // From b the last hop comes first, 5 ms away.
        let ba = stages(&hops, Some(d));
        let ms: Vec<u64> = ba.iter().map(|s| s.reply_delay_ns / 1_000_000).collect();
        assert_eq!(ms, [10, 20, 30]);
        assert_eq!(ba[0].addrs.v4, hops[2].addr_v4);
        assert!(evenly_spaced_hops(0, d).is_empty());
    }

    #[test]
    fn the_verdict_names_records_timed_at_their_read() {
        let d = |from_tap, at_read, tapped| DirectionStats {
            name: "a→b".to_string(),
            arrival: crate::arrival::ArrivalStats {
                tapped,
                from_tap,
                at_read,
                ..Default::default()
            },
            ..DirectionStats::default()
        };
        let report = |a_to_b| Report {
            host_a: String::new(),
            host_b: String::new(),
            tcp_buffer_max: 0,
            a_to_b,
            b_to_a: d(0, 0, true),
            host_memory: None,
            tcp_shortage: Vec::new(),
        };
        // The first few records, sent before the tap opened, pass; so does 1 % of a long run.
        assert!(report(d(10, 9, true)).fidelity_problems(1).is_empty());
        assert!(
            report(d(99_000, 1_000, true))
                .fidelity_problems(1)
                .is_empty()
        );
        let p = report(d(90_000, 2_000, true)).fidelity_problems(1);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].contains("2000 of 92000 records timed when read"),
            "{p:?}"
        );
        assert!(p[0].contains("the tap missed them"), "{p:?}");
        let p = report(d(0, 5_000, false)).fidelity_problems(1);
        assert!(p[0].contains("no tap on the sending host"), "{p:?}");
    }

    #[test]
    fn the_verdict_flags_a_stall_only_when_bottleneck_drops_followed_it() {
        use crate::stall::{Stall, StallStats};
        let stalled = |drops_after| DirectionStats {
            name: "b→a".to_string(),
            stalls: StallStats {
                threshold_ns: 33_000_000,
                count: 2,
                list: vec![
                    Stall {
                        at_s: 120.3,
                        worst_ms: 1_746.2,
                        ..Stall::default()
                    },
                    Stall {
                        at_s: 378.0,
                        worst_ms: 900.0,
                        ..Stall::default()
                    },
                ],
                drops_after,
            },
            ..DirectionStats::default()
        };
        let report = |b_to_a, a_drops| Report {
            host_a: String::new(),
            host_b: String::new(),
            tcp_buffer_max: 0,
            a_to_b: DirectionStats {
                name: "a→b".to_string(),
                stalls: StallStats {
                    drops_after: a_drops,
                    ..StallStats::default()
                },
                ..DirectionStats::default()
            },
            b_to_a,
            host_memory: None,
            tcp_shortage: Vec::new(),
        };
        // A stall without drops after it: the p99 decides, as before.
        assert!(report(stalled(0), 0).fidelity_problems(1).is_empty());
        // The ACKs stalled and the data's queue overflowed after it.
        let p = report(stalled(0), 11_745).fidelity_problems(1);
        assert_eq!(
            p,
            [
                "b→a: 2 stalls (worst 1746.2 ms late at 120.3 s) followed by 11745 bottleneck \
              drops the path may not have made"
            ]
        );
        assert_eq!(report(stalled(5), 0).fidelity_problems(1).len(), 1);
    }

    #[test]
    fn finds_only_our_dead_namespaces() {
        let list = "lh-e100-0-a (id: 3)\nlh-e100-0-b (id: 4)\nlh-e200-1-a\nlh-sys-test-100-0-a\n\
                    other\nlh-e100-a\nlh-ex-0-a\nlh-e100-0-Cern\nlh-e100-0-1a\n";
        let stale = stale_namespaces(list, |pid| pid == 200);
        assert_eq!(stale, ["lh-e100-0-a", "lh-e100-0-b"]);
        // A fabric's hosts carry the network's host names.
        let fabric = "lh-e100-1-cern1\nlh-e100-1-star-light2 (id: 9)\nlh-e200-1-cern1\n";
        assert_eq!(
            stale_namespaces(fabric, |pid| pid == 200),
            ["lh-e100-1-cern1", "lh-e100-1-star-light2"]
        );
        assert!(stale_namespaces(list, |_| true).is_empty());
    }

    #[test]
    fn tcp_buffers_cover_twice_the_path() {
        let dir = |rate_bps, queue_bytes| LinkConfig {
            delay: Nanos::from_millis(60),
            bottleneck: Some(Bottleneck {
                rate_bps,
                queue_bytes,
                overhead_per_frame: 0,
                aqm: Default::default(),
            }),
            ..LinkConfig::default()
        };
        // 1 Gbit/s × 120 ms = 15 MB; plus 2 × 15 MB of queue; times 2.
        let x = dir(1_000_000_000, 15_000_000);
        assert_eq!(tcp_buffer_for(&x, &x), 90_000_000);
        let small = dir(1_000_000, 6000);
        assert_eq!(tcp_buffer_for(&small, &small), MIN_TCP_BUFFER);
        let huge = dir(100_000_000_000, 1 << 30);
        assert_eq!(tcp_buffer_for(&huge, &huge), MAX_TCP_BUFFER);
        assert_eq!(
            tcp_buffer_for(&LinkConfig::default(), &LinkConfig::default()),
            MAX_TCP_BUFFER
        );
    }
}
