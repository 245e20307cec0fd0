//! Clocks: the Unix clock in nanoseconds (the timestamps that cross hosts: a job's start time, a
//! probe's send and receive times, a UDP datagram's stamp; and that the archive keeps), and a test's
//! monotonic [`Clock`].

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A monotonic clock with a fixed origin (the test start), in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock(Instant);

impl Clock {
    pub(crate) fn start() -> Self {
        Self(Instant::now())
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }

    pub(crate) fn origin(&self) -> Instant {
        self.0
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
