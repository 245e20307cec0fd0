//! The RFC 7323 window limit: no TCP window exceeds 65,535 × 2^14 bytes, so one stream carries at most
//! that per round trip, and faster paths need parallel streams.

use longhaul_units::{MAX_TCP_WINDOW, fmt_duration, fmt_rate, streams_needed, window_ceiling_bps};

use super::{Finding, Status, Target};

/// RFC 7323 caps one window at 65,535 × 2^14 bytes, so one stream cannot
/// exceed that per round trip; beyond it only more streams help
/// (at 100 Gbit/s × ≥ 120 ms one window holds less than a BDP: 71.6 Gbit/s at
/// 120 ms, so parallel streams are mandatory).
pub(crate) fn window_limit(t: &Target, out: &mut Vec<Finding>) {
    let needed = streams_needed(t.rate_bps, t.rtt);
    let per_stream = window_ceiling_bps(MAX_TCP_WINDOW, t.rtt);
    let have = t.streams();
    let status = if have >= needed {
        if needed > 1 { Status::Info } else { Status::Ok }
    } else {
        Status::Warn
    };
    out.push(
        Finding::new("streams (RFC 7323 window)", status)
            .observed(format!(
                "{have} (at most {} each at {})",
                fmt_rate(per_stream),
                fmt_duration(t.rtt)
            ))
            .wanted(format!("≥ {needed}"))
            .why(
                "no TCP window exceeds 65,535 × 2^14 bytes (RFC 7323), whatever the buffers; \
                 beyond that only parallel streams (-P) help",
            ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::evaluate;
    use crate::tuning::fixtures::{MS_120, find, well_tuned};

    #[test]
    fn streams_needed_past_the_1_gib_window() {
        // 100 Gbit/s at 120 ms needs 2 streams (71.6 Gbit/s each at most).
        let t = Target {
            rate_bps: 100_000_000_000,
            rtt: MS_120,
            streams: 1,
        };
        let f = evaluate(&well_tuned(), &t);
        let s = find(&f, "streams (RFC 7323 window)");
        assert_eq!(s.status, Status::Warn);
        assert_eq!(s.wanted, "≥ 2");
        assert!(s.observed.contains("71.6 Gbit/s"), "{}", s.observed);
        // The buffer wanted per stream stops at the 1 GiB window.
        let rmem = find(&f, "net.core.rmem_max");
        assert_eq!(
            rmem.fix.as_deref(),
            Some("sysctl -w net.core.rmem_max=1073741824")
        );
        assert!(rmem.wanted.contains("the 1 GiB window"), "{}", rmem.wanted);
        let tcp = find(&f, "net.ipv4.tcp_rmem");
        assert_eq!(
            tcp.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_rmem=\"4096 87380 2147483647\"")
        );
        let two = Target { streams: 2, ..t };
        let f = evaluate(&well_tuned(), &two);
        assert_eq!(find(&f, "streams (RFC 7323 window)").status, Status::Info);
    }
}
