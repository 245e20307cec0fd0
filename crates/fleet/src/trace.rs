//! A trace's hops, read from the output of Debian's `traceroute -n -q 1` (one probe per TTL,
//! numeric addresses), which a server runs for a controller's `Trace` job:
//!
//! ```text
//! traceroute to 10.201.0.2 (10.201.0.2), 30 hops max, 60 byte packets
//!  1  10.201.1.1  0.050 ms
//!  2  *
//!  3  10.201.0.2  120.307 ms !H
//! ```
//!
//! Lines that do not start with a TTL (the header, warnings) are skipped; a TTL line whose address
//! does not parse is a hop that did not answer. The hops come out numbered 1, 2, ... with the
//! gaps traceroute left filled as silent hops, at most [`MAX_HOPS`].

use crate::msg::{MAX_HOPS, TraceHop};

/// The hops in `output`.
pub fn parse_traceroute(output: &str) -> Vec<TraceHop> {
    let mut hops: Vec<TraceHop> = Vec::new();
    for line in output.lines() {
        let mut words = line.split_whitespace();
        let Some(ttl) = words.next().and_then(|w| w.parse::<u8>().ok()) else {
            continue;
        };
        if ttl == 0 || ttl > MAX_HOPS || usize::from(ttl) <= hops.len() {
            continue;
        }
        while hops.len() + 1 < usize::from(ttl) {
            hops.push(silent(hops.len() + 1));
        }
        let address = words.next().and_then(|w| w.parse().ok());
        let rtt_ns = address.and(
            words
                .next()
                .and_then(|w| w.parse::<f64>().ok())
                .filter(|ms| ms.is_finite() && *ms >= 0.0 && *ms < 3.6e6)
                .map(|ms| (ms * 1e6).round() as u64),
        );
        hops.push(TraceHop {
            ttl,
            address,
            rtt_ns,
        });
    }
    hops
}

fn silent(ttl: usize) -> TraceHop {
    TraceHop {
        ttl: u8::try_from(ttl).unwrap_or(MAX_HOPS),
        address: None,
        rtt_ns: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceroute_output_becomes_numbered_hops() {
        let out = "traceroute to 10.201.0.2 (10.201.0.2), 30 hops max, 60 byte packets\n \
                   1  10.201.1.1  0.050 ms\n 2  *\n 4  10.201.0.2  120.307 ms !H\n";
        let hops = parse_traceroute(out);
        assert_eq!(hops.len(), 4);
        assert_eq!(hops[0].address, Some("10.201.1.1".parse().unwrap()));
        assert_eq!(hops[0].rtt_ns, Some(50_000));
        assert_eq!((hops[1].address, hops[1].rtt_ns), (None, None));
        assert_eq!(
            hops[2],
            silent(3),
            "a TTL traceroute skipped is a silent hop"
        );
        assert_eq!(hops[3].address, Some("10.201.0.2".parse().unwrap()));
        assert_eq!(hops[3].rtt_ns, Some(120_307_000));
        let v6 = parse_traceroute(" 1  fd00:4c48:1::1  0.1 ms\n");
        assert_eq!(v6[0].address, Some("fd00:4c48:1::1".parse().unwrap()));
    }

    #[test]
    fn odd_lines_are_skipped_and_the_hops_stay_bounded() {
        let mut out =
            String::from("garbage\n 0  1.2.3.4  1 ms\n 1  not-an-ip  1 ms\n 1  1.1.1.1 1 ms\n");
        out.push_str(" 200  1.2.3.4  1 ms\n 3  1.2.3.4  NaN ms\n 2  1.2.3.4  -1 ms\n");
        let hops = parse_traceroute(&out);
        assert_eq!(hops.len(), 3);
        assert_eq!(
            hops[0].address, None,
            "an address that does not parse did not answer"
        );
        assert_eq!(hops[1].rtt_ns, None);
        assert_eq!(hops[2].rtt_ns, None);
        let many: String = (1..=255)
            .map(|t| format!(" {t}  10.0.0.1  1 ms\n"))
            .collect();
        assert_eq!(parse_traceroute(&many).len(), usize::from(MAX_HOPS));
    }
}
