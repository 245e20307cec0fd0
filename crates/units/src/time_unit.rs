//! The unit a bare number of a duration is in: a leaf that parse errors and duration parsing share.

use std::fmt;

/// The unit of a bare number in [`parse_duration`](crate::parse_duration) (chosen per flag: seconds
/// for `-t 10`, milliseconds for `--rtt 120`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// Nanoseconds.
    Nanos,
    /// Microseconds.
    Micros,
    /// Milliseconds.
    Millis,
    /// Seconds.
    Secs,
}

impl TimeUnit {
    /// Nanoseconds in one of this unit.
    pub const fn nanos(self) -> u64 {
        match self {
            Self::Nanos => 1,
            Self::Micros => 1_000,
            Self::Millis => 1_000_000,
            Self::Secs => 1_000_000_000,
        }
    }
}

/// The unit's symbol: "ns", "µs", "ms", "s".
impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Nanos => "ns",
            Self::Micros => "µs",
            Self::Millis => "ms",
            Self::Secs => "s",
        })
    }
}
