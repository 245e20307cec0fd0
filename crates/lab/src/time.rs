//! Wall-clock times as RFC 3339 strings (UTC) and compact run-id stamps, without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Civil date (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn parts(unix: f64) -> (i64, u32, u32, u64, u64, u64) {
    let secs = unix.floor() as i64;
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400) as u64;
    (y, m, d, s / 3600, s / 60 % 60, s % 60)
}

/// RFC 3339 in UTC with seconds: `2026-11-21T08:30:09Z`.
pub fn rfc3339(unix: f64) -> String {
    let (y, mo, d, h, mi, s) = parts(unix);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// A compact stamp for run ids: `20261121-083009`.
pub fn stamp(unix: f64) -> String {
    let (y, mo, d, h, mi, s) = parts(unix);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
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
