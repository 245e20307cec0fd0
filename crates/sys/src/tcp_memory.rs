//! The kernel's memory for TCP: the machine-wide limit `net.ipv4.tcp_mem` (in pages, shared by
//! every network namespace), what all TCP sockets hold now (`/proc/net/sockstat`), and the
//! `TcpExt` counters of a network namespace that say when TCP ran short (`/proc/net/netstat`).
//!
//! Above `tcp_mem`'s second value (pressure) the kernel stops growing socket buffers and starts
//! pruning receive queues; at its third (the hard limit) it refuses memory and drops packets: a
//! stream with a window of hundreds of MiB then collapses, with nothing but these counters to say
//! why.

use std::path::Path;

use crate::error::Result;
use crate::sysctl::{read_sysctl_in, write_sysctl_in};

/// The sysctl's name.
pub const TCP_MEM: &str = "net.ipv4.tcp_mem";

/// `net.ipv4.tcp_mem`, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpMem {
    /// Below this, TCP does not regulate its memory.
    pub min: u64,
    /// Above this, TCP is under memory pressure: buffers stop growing, queues are pruned.
    pub pressure: u64,
    /// The hard limit: memory beyond it is refused (packets are dropped).
    pub max: u64,
}

impl TcpMem {
    /// Reads it from `root` (normally `/proc/sys`).
    pub fn read_in(root: &Path) -> Result<TcpMem> {
        let text = read_sysctl_in(root, TCP_MEM)?;
        Self::parse(&text).ok_or_else(|| {
            crate::SysError::new(
                format!("parse {TCP_MEM} ({text:?})"),
                std::io::Error::new(std::io::ErrorKind::InvalidData, "expected three integers"),
            )
        })
    }

    /// Writes it under `root` (needs root in the initial network namespace).
    pub fn write_in(&self, root: &Path) -> Result<()> {
        write_sysctl_in(root, TCP_MEM, &self.value())
    }

    /// `"min pressure max"`, three integers as the kernel takes them.
    pub fn parse(text: &str) -> Option<TcpMem> {
        let v: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .ok()?;
        match v[..] {
            [min, pressure, max] => Some(TcpMem { min, pressure, max }),
            _ => None,
        }
    }

    /// The value as written to the sysctl: `"min pressure max"`.
    pub fn value(&self) -> String {
        format!("{} {} {}", self.min, self.pressure, self.max)
    }

    /// Each of the three values the larger of `self`'s and `other`'s.
    pub fn at_least(&self, other: &TcpMem) -> TcpMem {
        TcpMem {
            min: self.min.max(other.min),
            pressure: self.pressure.max(other.pressure),
            max: self.max.max(other.max),
        }
    }
}

/// The size of a memory page, bytes (the unit of `tcp_mem`).
pub fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the running system; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Pages all TCP sockets of the machine hold now (the `mem` field of `/proc/net/sockstat`'s `TCP:`
/// line; the count is machine-wide, whichever namespace reads it).
pub fn tcp_pages_in_use() -> Option<u64> {
    parse_sockstat_tcp_mem(&std::fs::read_to_string("/proc/net/sockstat").ok()?)
}

/// The `mem` field of the `TCP:` line of `/proc/net/sockstat` text.
pub fn parse_sockstat_tcp_mem(text: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix("TCP:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .chunks(2)
        .find(|kv| kv.first() == Some(&"mem"))
        .and_then(|kv| kv.get(1)?.parse().ok())
}

/// The `TcpExt` counters of one network namespace that say TCP ran short of memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShortOfMemory {
    /// `TCPMemoryPressures`: times TCP entered memory pressure (the machine-wide `tcp_mem[1]`).
    pub memory_pressures: u64,
    /// `PruneCalled`: times a receive queue had to be pruned (over its buffer or under pressure).
    pub prune_called: u64,
    /// `RcvPruned`: packets dropped from receive queues because pruning could not make room.
    pub rcv_pruned: u64,
    /// `OfoPruned`: packets dropped from out-of-order queues (SACKed data thrown away).
    pub ofo_pruned: u64,
    /// `TCPRcvQDrop`: packets dropped on arrival because no memory could be charged for them.
    pub rcv_q_drop: u64,
}

impl ShortOfMemory {
    /// The counters of the calling thread's network namespace.
    pub fn read() -> Option<ShortOfMemory> {
        Self::parse(&std::fs::read_to_string("/proc/thread-self/net/netstat").ok()?)
    }

    /// The counters in `/proc/net/netstat` text: a `TcpExt:` line of names followed by a `TcpExt:`
    /// line of values. `None` when the lines are missing or do not pair up; a counter this kernel
    /// lacks reads 0.
    pub fn parse(text: &str) -> Option<ShortOfMemory> {
        let mut lines = text.lines().filter_map(|l| l.strip_prefix("TcpExt:"));
        let names: Vec<&str> = lines.next()?.split_whitespace().collect();
        let values: Vec<u64> = lines
            .next()?
            .split_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .ok()?;
        if names.len() != values.len() {
            return None;
        }
        let get = |name: &str| {
            names
                .iter()
                .position(|n| *n == name)
                .map_or(0, |i| values[i])
        };
        Some(ShortOfMemory {
            memory_pressures: get("TCPMemoryPressures"),
            prune_called: get("PruneCalled"),
            rcv_pruned: get("RcvPruned"),
            ofo_pruned: get("OfoPruned"),
            rcv_q_drop: get("TCPRcvQDrop"),
        })
    }

    /// What changed since `earlier` (counters that went backwards read 0).
    pub fn since(&self, earlier: &ShortOfMemory) -> ShortOfMemory {
        ShortOfMemory {
            memory_pressures: self
                .memory_pressures
                .saturating_sub(earlier.memory_pressures),
            prune_called: self.prune_called.saturating_sub(earlier.prune_called),
            rcv_pruned: self.rcv_pruned.saturating_sub(earlier.rcv_pruned),
            ofo_pruned: self.ofo_pruned.saturating_sub(earlier.ofo_pruned),
            rcv_q_drop: self.rcv_q_drop.saturating_sub(earlier.rcv_q_drop),
        }
    }

    /// Whether any counter is non-zero.
    pub fn any(&self) -> bool {
        *self != ShortOfMemory::default()
    }

    /// The non-zero counters in words, e.g. `entered memory pressure 3 times (TCPMemoryPressures),
    /// 120 out-of-order packets dropped (OfoPruned)`; empty when all are zero.
    pub fn describe(&self) -> String {
        let parts = [
            (
                self.memory_pressures,
                "entered memory pressure {} times (TCPMemoryPressures)",
            ),
            (
                self.prune_called,
                "pruned receive queues {} times (PruneCalled)",
            ),
            (
                self.rcv_pruned,
                "{} received packets dropped by pruning (RcvPruned)",
            ),
            (
                self.ofo_pruned,
                "{} out-of-order packets dropped (OfoPruned)",
            ),
            (
                self.rcv_q_drop,
                "{} packets dropped for want of memory (TCPRcvQDrop)",
            ),
        ];
        parts
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, text)| text.replace("{}", &n.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = "TcpExt: SyncookiesSent PruneCalled RcvPruned OfoPruned TCPMemoryPressures TCPRcvQDrop\n\
TcpExt: 0 7 2 40 3 5\n\
IpExt: InNoRoutes\n\
IpExt: 0\n";

    #[test]
    fn reads_the_counters_that_say_tcp_ran_short() {
        let c = ShortOfMemory::parse(NETSTAT).expect("parses");
        assert_eq!(
            c,
            ShortOfMemory {
                memory_pressures: 3,
                prune_called: 7,
                rcv_pruned: 2,
                ofo_pruned: 40,
                rcv_q_drop: 5
            }
        );
        assert!(c.describe().starts_with(
            "entered memory pressure 3 times (TCPMemoryPressures), pruned receive queues 7 times"
        ));
        let later = ShortOfMemory {
            ofo_pruned: 41,
            ..c
        };
        let d = later.since(&c);
        assert!(d.any());
        assert_eq!(d.describe(), "1 out-of-order packets dropped (OfoPruned)");
        assert!(!c.since(&later).any(), "counters going back read 0");
    }

    #[test]
    fn refuses_netstat_text_that_does_not_pair_up() {
        assert_eq!(ShortOfMemory::parse(""), None);
        assert_eq!(ShortOfMemory::parse("TcpExt: A B\nTcpExt: 1\n"), None);
        assert_eq!(ShortOfMemory::parse("TcpExt: A B\nTcpExt: 1 x\n"), None);
        // A kernel without the counters reads zeros.
        assert_eq!(
            ShortOfMemory::parse("TcpExt: A\nTcpExt: 9\n"),
            Some(ShortOfMemory::default())
        );
    }

    #[test]
    fn reads_this_machines_tcp_memory() {
        let m = TcpMem::read_in(Path::new(crate::PROC_SYS)).expect("tcp_mem");
        assert!(
            m.min <= m.pressure && m.pressure <= m.max && m.max > 0,
            "{m:?}"
        );
        assert_eq!(TcpMem::parse(&m.value()), Some(m));
        assert!(tcp_pages_in_use().is_some());
        assert!(ShortOfMemory::read().is_some());
        assert!(page_size() >= 4096);
    }

    #[test]
    fn parses_tcp_mem_and_sockstat() {
        assert_eq!(
            TcpMem::parse("287913\t383885\t575826"),
            Some(TcpMem {
                min: 287_913,
                pressure: 383_885,
                max: 575_826
            })
        );
        assert_eq!(TcpMem::parse("1 2"), None);
        assert_eq!(TcpMem::parse("1 2 3 4"), None);
        assert_eq!(TcpMem::parse("1 2 x"), None);
        let a = TcpMem {
            min: 1,
            pressure: 20,
            max: 3,
        };
        let b = TcpMem {
            min: 10,
            pressure: 2,
            max: 30,
        };
        assert_eq!(
            a.at_least(&b),
            TcpMem {
                min: 10,
                pressure: 20,
                max: 30
            }
        );
        let sockstat =
            "sockets: used 9\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 98\nUDP: inuse 0 mem 0\n";
        assert_eq!(parse_sockstat_tcp_mem(sockstat), Some(98));
        assert_eq!(parse_sockstat_tcp_mem("UDP: inuse 0 mem 4\n"), None);
    }
}
