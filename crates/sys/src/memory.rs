//! The machine's memory as `/proc/meminfo` states it.

/// A field of `/proc/meminfo` (`MemTotal`, `MemAvailable`, ...), in bytes; `None` where the
/// file or the field is missing.
pub fn meminfo_bytes(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let rest = text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_machines_memory() {
        let total = meminfo_bytes("MemTotal").expect("MemTotal");
        let available = meminfo_bytes("MemAvailable").expect("MemAvailable");
        assert!(
            total > 64 << 20 && available <= total,
            "{total} {available}"
        );
        assert_eq!(meminfo_bytes("NoSuchField"), None);
        // A field is matched whole: "Mem" is not "MemTotal".
        assert_eq!(meminfo_bytes("Mem"), None);
    }
}
