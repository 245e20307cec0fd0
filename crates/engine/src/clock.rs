//! The Unix clock in nanoseconds: the timestamps that cross hosts (a job's start time, a probe's
//! send and receive times) and that the archive keeps.

use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
