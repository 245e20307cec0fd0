//! One emulated host: a network namespace created with `ip netns add` and a
//! vnet TUN device `lh0` in it with the host's addresses, MTU, queue length
//! and TCP buffer limits. The two-host [`crate::Testbed`] and the multi-host
//! [`crate::Fabric`] both build their hosts here.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use longhaul_sys::{Tun, TunOptions, ip, netns_path, run_in_netns, write_sysctl};

use crate::error::EmuError;
use crate::netdev::parse_proc_net_dev;

/// Name of the TUN device inside each host namespace.
pub const DEVICE: &str = "lh0";
/// TUN transmit queue length. The TUN default is 500 packets (`TUN_READQ_SIZE`,
/// `drivers/net/tun.c`); a packet dropped there is a loss the emulator did not
/// decide (counted in `tx_dropped`).
pub const TXQUEUELEN: u32 = 10_000;
/// Smallest `tcp_rmem`/`tcp_wmem` maximum set in the hosts.
pub const MIN_TCP_BUFFER: u64 = 4 << 20;
/// Largest: the sysctls are `int`s.
pub const MAX_TCP_BUFFER: u64 = 1 << 30;
/// The kernel's compiled-in `tcp_rmem` (what an untuned host has), set in
/// the hosts when [`TestbedConfig::host_tcp_defaults`] is asked for.
pub const KERNEL_TCP_RMEM: [u64; 3] = [4096, 131_072, 6_291_456];
/// The kernel's compiled-in `tcp_wmem`.
pub const KERNEL_TCP_WMEM: [u64; 3] = [4096, 16_384, 4_194_304];
/// Prefix of the router hops' IPv4 addresses.
pub const ROUTERS_V4: &str = "10.201.1.0/24";
/// Prefix of the router hops' IPv6 addresses.
pub const ROUTERS_V6: &str = "fd00:4c48:1::/64";
/// Every emulated address, hosts and routers: 10.201.0.0/16.
pub(crate) const EMULATED_V4: &str = "10.201.0.0/16";
/// Every emulated IPv6 address: fd00:4c48::/32.
pub(crate) const EMULATED_V6: &str = "fd00:4c48::/32";

static NEXT_TAG: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Refuses without `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` (namespaces and TUN devices need both).
pub(crate) fn check_privileges() -> Result<(), EmuError> {
    const CAP_SYS_ADMIN: u32 = 21;
    if !longhaul_sys::has_net_admin() || !longhaul_sys::has_capability(CAP_SYS_ADMIN) {
        return Err(EmuError::NotPrivileged);
    }
    Ok(())
}

/// The namespaces' tag: `tag` checked, or a fresh `e<pid>-<n>`, unique in this process for two-host
/// testbeds and fabrics alike (one counter, so their namespaces never collide).
pub(crate) fn tag(tag: Option<String>) -> Result<String, EmuError> {
    let tag = tag.unwrap_or_else(|| {
        format!(
            "e{}-{}",
            std::process::id(),
            NEXT_TAG.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        )
    });
    if tag.is_empty() || !tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(EmuError::Config(format!(
            "tag {tag:?}: use letters, digits and '-'"
        )));
    }
    Ok(tag)
}

/// A namespace created with `ip netns add`, deleted when dropped.
#[derive(Debug)]
pub(crate) struct Netns {
    pub(crate) name: String,
}

impl Netns {
    pub(crate) fn add(name: String) -> Result<Self, EmuError> {
        ip(&["netns", "add", &name])?;
        let ns = Self { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub(crate) fn path(&self) -> PathBuf {
        netns_path(&self.name)
    }

    /// The host's TCP shortage counters now.
    pub(crate) fn tcp_short(&self) -> Option<longhaul_sys::ShortOfMemory> {
        run_in_netns(&self.path(), longhaul_sys::ShortOfMemory::read).ok()?
    }

    /// Packets the TUN device dropped itself (`tx_dropped` of `lh0`).
    pub(crate) fn tx_dropped(&self) -> Option<u64> {
        let text = run_in_netns(&self.path(), || {
            std::fs::read_to_string("/proc/thread-self/net/dev")
        })
        .ok()?
        .ok()?;
        parse_proc_net_dev(&text, DEVICE).map(|c| c.tx_dropped)
    }
}

/// Stops the processes still running in namespace `name`: SIGTERM, then SIGKILL after up to a
/// second. Only processes inside that namespace are touched. A namespace deleted with processes in
/// it lives on without its name, and so do they: a command's children that its shell did not pass
/// a SIGTERM to (`sh -c 'longhaul test ... & ...'`), a server orphaned by a SIGKILLed emulator.
pub(crate) fn stop_processes_in(name: &str) {
    let signal = |sig: &str| {
        let list = ip(&["netns", "pids", name]).unwrap_or_default();
        let pids: Vec<&str> = list.split_whitespace().collect();
        if !pids.is_empty() {
            let _ = std::process::Command::new("kill")
                .arg(sig)
                .args(&pids)
                .stderr(std::process::Stdio::null())
                .status();
        }
        !pids.is_empty()
    };
    if signal("-TERM") {
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            if ip(&["netns", "pids", name]).is_ok_and(|l| l.trim().is_empty()) {
                return;
            }
        }
        signal("-KILL");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        stop_processes_in(&self.name);
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            tracing::warn!("cleanup: {e}");
            eprintln!("longhaul: cleanup failed: {e}");
        }
    }
}

/// Whom a host reaches through its TUN device.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reach {
    /// One peer host (a point-to-point address) and the router hops.
    Peer(Ipv4Addr, Ipv6Addr),
    /// Every emulated address ([`EMULATED_V4`], [`EMULATED_V6`]).
    Everyone,
}

/// How a host is set up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostSetup {
    pub(crate) mtu: u32,
    pub(crate) v4: Ipv4Addr,
    pub(crate) v6: Ipv6Addr,
    pub(crate) reach: Reach,
    /// `tcp_rmem`/`tcp_wmem` maximum.
    pub(crate) tcp_max: u64,
    /// The kernel's default TCP buffer limits instead of `tcp_max`.
    pub(crate) kernel_defaults: bool,
}

/// The host's TUN with TCP and UDP segmentation offload: the forwarder reads a sender's
/// super-packets and super-datagrams whole (one read for up to 64 KB) and writes them whole to a
/// receiver that takes them so (UDP: a socket with `UDP_GRO`). Kernels before 6.2 refuse UDP's
/// (`EINVAL`); their hosts segment UDP themselves, as before.
fn open_tun() -> longhaul_sys::Result<Tun> {
    let udp = TunOptions {
        udp_gso: true,
        ..TunOptions::vnet()
    };
    Tun::open(DEVICE, udp).or_else(|e| {
        tracing::debug!("no UDP segmentation offload on the TUN: {e}");
        Tun::open(DEVICE, TunOptions::vnet())
    })
}

/// Brings up one host: TUN, addresses, routes, MTU, queue length, link state
/// and TCP buffer sysctls; returns its TUN, non-blocking.
pub(crate) fn host(ns: &Netns, h: HostSetup) -> Result<Tun, EmuError> {
    let tun = run_in_netns(&ns.path(), open_tun)??;
    let n = ns.name.as_str();
    let mtu = h.mtu.to_string();
    let txq = TXQUEUELEN.to_string();
    ip(&[
        "-n",
        n,
        "link",
        "set",
        DEVICE,
        "mtu",
        &mtu,
        "txqueuelen",
        &txq,
        "up",
    ])?;
    let me4 = h.v4.to_string();
    let me6 = format!("{}/128", h.v6);
    match h.reach {
        Reach::Peer(peer4, peer6) => {
            let (peer4, peer6) = (peer4.to_string(), format!("{peer6}/128"));
            ip(&["-n", n, "addr", "add", &me4, "peer", &peer4, "dev", DEVICE])?;
            ip(&["-n", n, "-6", "addr", "add", &me6, "dev", DEVICE, "nodad"])?;
            ip(&["-n", n, "-6", "route", "add", &peer6, "dev", DEVICE])?;
            // The routers' ICMP replies arrive from 10.201.1.x / fd00:4c48:1::x: a route
            // back through the TUN keeps reverse-path filtering from dropping them.
            ip(&["-n", n, "route", "add", ROUTERS_V4, "dev", DEVICE])?;
            ip(&["-n", n, "-6", "route", "add", ROUTERS_V6, "dev", DEVICE])?;
        }
        Reach::Everyone => {
            ip(&["-n", n, "addr", "add", &format!("{me4}/32"), "dev", DEVICE])?;
            ip(&["-n", n, "-6", "addr", "add", &me6, "dev", DEVICE, "nodad"])?;
            ip(&["-n", n, "route", "add", EMULATED_V4, "dev", DEVICE])?;
            ip(&["-n", n, "-6", "route", "add", EMULATED_V6, "dev", DEVICE])?;
        }
    }
    let join = |v: [u64; 3]| format!("{} {} {}", v[0], v[1], v[2]);
    let (rmem, wmem) = if h.kernel_defaults {
        (join(KERNEL_TCP_RMEM), join(KERNEL_TCP_WMEM))
    } else {
        (
            join([4096, 131_072, h.tcp_max]),
            join([4096, 65_536, h.tcp_max]),
        )
    };
    run_in_netns(&ns.path(), || -> Result<(), EmuError> {
        write_sysctl("net.ipv4.tcp_rmem", &rmem)?;
        write_sysctl("net.ipv4.tcp_wmem", &wmem)?;
        write_sysctl("net.ipv4.tcp_no_metrics_save", "1")?;
        Ok(())
    })??;
    tun.set_nonblocking(true)?;
    Ok(tun)
}
