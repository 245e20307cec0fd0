//! Wall-clock times as RFC 3339 strings (UTC) and compact run-id stamps, by way of jiff.

use std::time::{SystemTime, UNIX_EPOCH};

use jiff::Timestamp;

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The whole second at or before `unix` (within jiff's years -9999 to 9999, which any clock is).
fn at(unix: f64) -> Timestamp {
    let secs = (unix.floor() as i64).clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// RFC 3339 in UTC with seconds: `2026-11-21T08:30:09Z`.
pub fn rfc3339(unix: f64) -> String {
    at(unix).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A compact stamp for run ids: `20261121-083009`.
pub fn stamp(unix: f64) -> String {
    at(unix).strftime("%Y%m%d-%H%M%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400.5), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_250_000.0), "2026-11-21T08:33:20Z");
        assert_eq!(stamp(1_795_250_000.0), "20261121-083320");
    }
}
