//! Reading a device's counters from `/proc/net/dev` as seen from a network
//! namespace (the file follows the reading thread's namespace when read as
//! `/proc/thread-self/net/dev`; `/sys/class/net` would show the namespace
//! sysfs was mounted in instead).

/// Counters of one device from the text of `/proc/net/dev`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevCounters {
    /// Packets received (by the device's host stack).
    pub rx_packets: u64,
    /// Receive drops.
    pub rx_dropped: u64,
    /// Packets transmitted.
    pub tx_packets: u64,
    /// Transmit drops: for a TUN, packets the kernel discarded because the
    /// reader (the emulator) did not keep up.
    pub tx_dropped: u64,
}

/// Finds `dev` in the text of `/proc/net/dev`.
///
/// Line format (after two header lines): `name: rx_bytes rx_packets rx_errs
/// rx_drop rx_fifo rx_frame rx_compressed rx_multicast tx_bytes tx_packets
/// tx_errs tx_drop ...`.
pub fn parse_proc_net_dev(text: &str, dev: &str) -> Option<DevCounters> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != dev {
            return None;
        }
        let v: Vec<u64> = rest
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        (v.len() >= 12).then(|| DevCounters {
            rx_packets: v[1],
            rx_dropped: v[3],
            tx_packets: v[9],
            tx_dropped: v[11],
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_device() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n   \
lh0: 1234567    890    0    2    0     0          0         0  7654321     456    0    17    0     0       0          0\n";
        assert_eq!(
            parse_proc_net_dev(text, "lh0"),
            Some(DevCounters {
                rx_packets: 890,
                rx_dropped: 2,
                tx_packets: 456,
                tx_dropped: 17
            })
        );
        assert_eq!(parse_proc_net_dev(text, "lh"), None);
        assert_eq!(parse_proc_net_dev(text, "eth0"), None);
        assert_eq!(parse_proc_net_dev("lh0: 1 2 x\n", "lh0"), None);
    }
}
