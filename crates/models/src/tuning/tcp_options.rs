//! TCP options that long fat paths depend on (RFC 7323 window scaling and timestamps, RFC 2018 SACK) and
//! the per-destination metrics cache.

use longhaul_units::{Nanos, fmt_duration, fmt_rate};

use super::{Finding, HostSnapshot, Status, Target};

/// The TCP-option findings: window scaling, timestamps, SACK, `tcp_no_metrics_save`.
pub(crate) fn tcp_options(snap: &HostSnapshot, t: &Target, out: &mut Vec<Finding>) {
    // RFC 7323 §2: without window scaling a window is at most 65,535 bytes.
    let f = match snap.window_scaling {
        Some(true) => Finding::new("net.ipv4.tcp_window_scaling", Status::Ok).observed("1"),
        Some(false) => Finding::new("net.ipv4.tcp_window_scaling", Status::Fail)
            .observed(format!(
                "0 → 64 KiB window, ceiling {} at {}",
                fmt_rate(t.ceiling(65_535)),
                fmt_duration(t.rtt)
            ))
            .fix("sysctl -w net.ipv4.tcp_window_scaling=1"),
        None => Finding::new("net.ipv4.tcp_window_scaling", Status::Info).observed("unknown"),
    };
    out.push(
        f.wanted("1")
            .why("RFC 7323 window scaling: without it no window exceeds 64 KiB"),
    );

    // RFC 7323 §5 (PAWS): sequence numbers wrap after 4 GiB, which at
    // 10 Gbit/s takes 3.4 s, less than a segment may live in the network;
    // timestamps tell old segments from new ones, and give RTT samples.
    let wrap = if t.rate_bps > 0 {
        format!(
            "; at {} the 4 GiB sequence space wraps every {}",
            fmt_rate(t.rate_bps),
            fmt_duration(Nanos::from_secs_f64(
                (1u64 << 32) as f64 * 8.0 / t.rate_bps as f64
            ))
        )
    } else {
        String::new()
    };
    out.push(on_off(
        "net.ipv4.tcp_timestamps",
        snap.timestamps,
        Status::Warn,
        format!("RFC 7323 timestamps protect against wrapped sequence numbers (PAWS) and time every round trip{wrap}"),
    ));
    // RFC 2018: without SACK, each of several losses in one window costs a
    // round trip to find; a 10G × 100 ms window holds 83,333 segments.
    out.push(on_off(
        "net.ipv4.tcp_sack",
        snap.sack,
        Status::Warn,
        "selective acknowledgements (RFC 2018) repair several losses in one window in one round \
         trip; without them each costs a round trip"
            .to_owned(),
    ));
    // fasterdata's test-host page and `fasterdata-systemd` template set it:
    // otherwise a connection starts from the ssthresh a previous lossy
    // connection to the same host left in the route cache.
    out.push(on_off(
        "net.ipv4.tcp_no_metrics_save",
        snap.no_metrics_save,
        Status::Warn,
        "with 0 the kernel caches ssthresh per destination, so one lossy run makes the next \
         start in slow linear growth; fasterdata sets 1 on test hosts"
            .to_owned(),
    ));
}

/// A 0/1 sysctl wanted at 1.
fn on_off(name: &str, value: Option<bool>, if_off: Status, why: String) -> Finding {
    let f = match value {
        Some(true) => Finding::new(name, Status::Ok).observed("1"),
        Some(false) => Finding::new(name, if_off)
            .observed("0")
            .fix(format!("sysctl -w {name}=1")),
        None => Finding::new(name, Status::Info).observed("unknown"),
    };
    f.wanted("1").why(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::evaluate;
    use crate::tuning::fixtures::{find, target, well_tuned};

    #[test]
    fn window_scaling_off_fails() {
        let snap = HostSnapshot {
            window_scaling: Some(false),
            ..well_tuned()
        };
        let f = evaluate(&snap, &target());
        let w = find(&f, "net.ipv4.tcp_window_scaling");
        assert_eq!(w.status, Status::Fail);
        assert_eq!(
            w.fix.as_deref(),
            Some("sysctl -w net.ipv4.tcp_window_scaling=1")
        );
        // 65,535 B / 120 ms = 4.37 Mbit/s.
        assert!(w.observed.contains("4.37 Mbit/s"), "{}", w.observed);
    }
}
