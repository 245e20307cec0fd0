//! Display strings the calculator's reports carry beside their base units.

use longhaul_units::{fmt_rate, fmt_size, fmt_size_si, group_thousands};

/// "19.74 MB (18.83 MiB)"; exact below 1 kB.
pub fn both_sizes(bytes: u64) -> String {
    let si = fmt_size_si(bytes);
    let bin = fmt_size(bytes);
    if si == bin {
        si
    } else {
        format!("{si} ({bin})")
    }
}

/// A large count, whole with separators up to a billion, else in e-notation.
pub fn count(x: f64) -> String {
    if x.is_finite() && x < 1e9 {
        group_thousands(x.round() as u64)
    } else {
        format!("{x:.2e}")
    }
}

/// A rate that may be unbounded (`u64::MAX`).
pub fn rate_text(bps: u64) -> String {
    if bps == u64::MAX {
        "unbounded".to_owned()
    } else {
        fmt_rate(bps)
    }
}
