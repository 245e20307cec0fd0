//! Fuzzes `longhaul calc distance`'s reading of a traceroute listing and the placing of its hops:
//! any bytes as a listing, and a site table whose sites match by prefix and by name fragment.
//!
//! Invariants checked beyond "does not panic":
//! - a parsed listing has 1 to 255 hops, numbered in increasing order from 1, each round-trip time
//!   finite and not negative;
//! - the distance is finite and not negative, the sum of its legs, each leg at most half the Earth's
//!   circumference; the Land Speed Record distance is the total capped at 30,000 km; the unplaced
//!   count is the number of hops without a site.

#![no_main]

use libfuzzer_sys::fuzz_target;
use longhaul_topology::Site;
use longhaul_topology::traceroute::{MAX_TRACE_HOPS, Trace, distance};

fn site(name: &str, lat: f64, lon: f64, matches: &[&str]) -> Site {
    Site::at(name, lat, lon, matches).expect("valid matches")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(trace) = Trace::parse(text) else {
        return;
    };
    assert!((1..=MAX_TRACE_HOPS).contains(&trace.hops.len()));
    for w in trace.hops.windows(2) {
        assert!(w[0].ttl < w[1].ttl);
    }
    for h in &trace.hops {
        assert!(h.ttl >= 1);
        assert!(h.rtt_ms.is_none_or(|t| t.is_finite() && t >= 0.0));
    }
    let sites = [
        site("a", 46.2, 6.1, &["10.0.0.0/8", "2001:db8::/32", "ams"]),
        site("b", -33.9, 151.2, &["192.0.2.1", "syd"]),
        site("c", 90.0, 180.0, &["0.0.0.0/0"]),
    ];
    for from in [None, Some("a")] {
        let d = distance(&trace, &sites, from).expect("every site has a place");
        assert!(d.total_km.is_finite() && d.total_km >= 0.0);
        let legs: f64 = d.points.iter().filter_map(|p| p.leg_km).sum();
        assert!((legs - d.total_km).abs() <= 1e-6 * d.total_km.max(1.0));
        assert!(
            d.points
                .iter()
                .filter_map(|p| p.leg_km)
                .all(|k| k <= 20_100.0)
        );
        assert_eq!(d.lsr_km, d.total_km.min(30_000.0));
        let unplaced = d
            .points
            .iter()
            .filter(|p| p.hop.ttl > 0 && p.site.is_none())
            .count();
        assert_eq!(d.unplaced, unplaced);
        assert_eq!(d.points.len(), trace.hops.len() + 1);
    }
});
