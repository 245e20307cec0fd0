//! A record path's distance from a traceroute (`longhaul calc distance`): the hops of a `traceroute`
//! or `traceroute6` listing placed at sites of a site table, and the great-circle legs between them,
//! as the Land Speed Record counts distance (seed 001 did this by hand, hop by hop, for its 11,539 km).
//!
//! [`Trace::parse`] reads a listing as the Linux tools print it: the header (`traceroute to NAME
//! (ADDR), … from ADDR, …`, the source only in traceroute6's), then one line per hop: its number, then
//! for each answer a name, its address in parentheses (or the address alone with `-n`) and round-trip
//! times (`12.3 ms`), `*` for a probe without answer; anything after the times (annotations) is
//! ignored, as are lines that are not hops. The first answer of a hop places it.
//!
//! [`distance`] places the source and every hop at the first [`Site`] with a `match` entry for it
//! (an address prefix containing its address, or a fragment of its name) and adds up the great circles
//! between consecutive placed points. A hop that did not answer, or that no site matches, is listed as
//! unplaced and skipped: the leg runs from the last placed point to the next one.
//!
//! Pure: the caller reads the listing and the site table.

use std::net::IpAddr;

use longhaul_units::{great_circle_km, lsr_capped_km};
use serde::Serialize;

use crate::network::Site;

/// Most hops a listing may have (traceroute's own maximum TTL is 255).
pub const MAX_TRACE_HOPS: usize = 255;

/// Who answered one hop.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceHop {
    /// The hop number (TTL) as printed.
    pub ttl: u8,
    /// The answering router's name, when the listing has one (not with `-n`).
    pub name: Option<String>,
    /// Its address, when it answered.
    pub addr: Option<IpAddr>,
    /// Its first round-trip time, ms.
    pub rtt_ms: Option<f64>,
}

/// A parsed listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trace {
    /// The source address (traceroute6's header says `from ADDR`).
    pub source: Option<IpAddr>,
    /// The destination, as the header names it.
    pub destination: Option<String>,
    /// The hops, in order.
    pub hops: Vec<TraceHop>,
}

/// Why a listing was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// No hop line at all.
    #[error("no hops found: not a traceroute or traceroute6 listing")]
    NoHops,
    /// More hops than a traceroute can have.
    #[error("more than {MAX_TRACE_HOPS} hops")]
    TooManyHops,
    /// Hop numbers that go backwards.
    #[error("line {line}: hop {ttl} after hop {previous}: hops must be in order")]
    OutOfOrder {
        /// 1-based line of the listing.
        line: usize,
        /// This hop's number.
        ttl: u8,
        /// The hop before.
        previous: u8,
    },
    /// A site the listing needs has no coordinates.
    #[error("site {0:?} has no lat/lon: give both to place hops there")]
    SiteWithoutPlace(String),
}

impl Trace {
    /// Reads a listing (see the module doc).
    pub fn parse(text: &str) -> Result<Self, TraceError> {
        let mut trace = Trace {
            source: None,
            destination: None,
            hops: Vec::new(),
        };
        // traceroute6 may wrap its header: read the words of every line before the first hop.
        let mut header: Vec<&str> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(ttl) = words.first().and_then(|w| w.parse::<u8>().ok()) else {
                if trace.hops.is_empty() {
                    header.extend(words);
                }
                continue;
            };
            if ttl == 0 {
                continue;
            }
            if let Some(prev) = trace.hops.last().map(|h| h.ttl)
                && ttl <= prev
            {
                return Err(TraceError::OutOfOrder {
                    line: i + 1,
                    ttl,
                    previous: prev,
                });
            }
            if trace.hops.len() == MAX_TRACE_HOPS {
                return Err(TraceError::TooManyHops);
            }
            trace.hops.push(hop(ttl, &words[1..]));
        }
        if trace.hops.is_empty() {
            return Err(TraceError::NoHops);
        }
        if let Some(i) = header
            .iter()
            .position(|w| *w == "traceroute" || *w == "traceroute6")
            && header.get(i + 1) == Some(&"to")
        {
            trace.destination = header
                .get(i + 2)
                .map(|d| d.trim_end_matches(',').to_owned());
        }
        trace.source = header
            .iter()
            .position(|w| *w == "from")
            .and_then(|i| header.get(i + 1))
            .and_then(|a| a.trim_end_matches(',').parse().ok());
        Ok(trace)
    }
}

/// One hop line's words after its number: the first answer's name, address and time.
fn hop(ttl: u8, words: &[&str]) -> TraceHop {
    let mut h = TraceHop {
        ttl,
        name: None,
        addr: None,
        rtt_ms: None,
    };
    let mut i = 0;
    while i < words.len() && words[i] == "*" {
        i += 1;
    }
    let Some(first) = words.get(i) else {
        return h;
    };
    match first.parse::<IpAddr>() {
        Ok(a) => h.addr = Some(a),
        Err(_) => {
            h.name = Some((*first).to_owned());
            h.addr = words
                .get(i + 1)
                .and_then(|w| w.strip_prefix('(')?.strip_suffix(')')?.parse().ok());
        }
    }
    h.rtt_ms = words
        .windows(2)
        .skip(i + 1)
        .find(|w| w[1] == "ms")
        .and_then(|w| w[0].parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t >= 0.0);
    h
}

/// One point of the path (the source or a hop) and where it was placed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacedHop {
    /// The point as the listing gives it (`ttl` 0 for the source).
    #[serde(flatten)]
    pub hop: TraceHop,
    /// The site it was placed at; `None`: unplaced.
    pub site: Option<String>,
    /// Why it is unplaced.
    pub unplaced: Option<&'static str>,
    /// The great circle from the previous placed point, km (placed hops after the first).
    pub leg_km: Option<f64>,
}

/// The distance of a listing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceDistance {
    /// The source (`ttl` 0) and every hop, in order.
    pub points: Vec<PlacedHop>,
    /// The hops that could not be placed.
    pub unplaced: usize,
    /// The sum of the great circles, km.
    pub total_km: f64,
    /// The distance the Land Speed Record counts: the total, capped at 30,000 km.
    pub lsr_km: f64,
    /// Whether the cap applied.
    pub capped: bool,
}

/// Places the source and the hops of `trace` at `sites` and adds up the legs. The source is the
/// listing's own (traceroute6), else the site named `from`.
pub fn distance(
    trace: &Trace,
    sites: &[Site],
    from: Option<&str>,
) -> Result<TraceDistance, TraceError> {
    let site_of = |name: Option<&str>, addr: Option<IpAddr>| {
        sites
            .iter()
            .find(|s| s.matches.iter().any(|m| m.matches(name, addr)))
    };
    let source = TraceHop {
        ttl: 0,
        name: None,
        addr: trace.source,
        rtt_ms: None,
    };
    let mut total = 0.0;
    let mut previous: Option<(f64, f64)> = None;
    let mut points = Vec::with_capacity(trace.hops.len() + 1);
    for hop in std::iter::once(source).chain(trace.hops.iter().cloned()) {
        let site = if hop.ttl == 0 {
            from.and_then(|f| sites.iter().find(|s| s.name == f))
                .or_else(|| site_of(None, hop.addr))
        } else {
            site_of(hop.name.as_deref(), hop.addr)
        };
        let mut p = PlacedHop {
            site: site.map(|s| s.name.clone()),
            unplaced: None,
            leg_km: None,
            hop,
        };
        match site {
            Some(s) => {
                let here = s
                    .lat
                    .zip(s.lon)
                    .ok_or_else(|| TraceError::SiteWithoutPlace(s.name.clone()))?;
                if let Some((lat, lon)) = previous {
                    let km = great_circle_km(lat, lon, here.0, here.1);
                    p.leg_km = Some(km);
                    total += km;
                }
                previous = Some(here);
            }
            None => {
                p.unplaced = Some(if p.hop.ttl == 0 {
                    "the source: the listing does not give its address, or no site matches it; \
                     name its site with --from"
                } else if p.hop.addr.is_none() && p.hop.name.is_none() {
                    "no answer"
                } else {
                    "no site matches its name or address"
                });
            }
        }
        points.push(p);
    }
    let unplaced = points
        .iter()
        .filter(|p| p.hop.ttl > 0 && p.site.is_none())
        .count();
    Ok(TraceDistance {
        points,
        unplaced,
        total_km: total,
        lsr_km: lsr_capped_km(total),
        capped: lsr_capped_km(total) < total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINUX: &str = "traceroute to example.org (192.0.2.9), 30 hops max, 60 byte packets
 1  gw.lan (192.168.1.1)  0.512 ms  0.430 ms  0.401 ms
 2  * * *
 3  core1.ams.example.net (198.51.100.1)  5.123 ms core2.ams.example.net (198.51.100.2)  5.2 ms  5.1 ms
 4  192.0.2.9  17.9 ms  18.0 ms *
";

    #[test]
    fn linux_listings_give_each_hops_first_answer() {
        let t = Trace::parse(LINUX).unwrap();
        assert_eq!(t.destination.as_deref(), Some("example.org"));
        assert_eq!(t.source, None);
        assert_eq!(t.hops.len(), 4);
        assert_eq!(t.hops[0].name.as_deref(), Some("gw.lan"));
        assert_eq!(t.hops[0].addr, Some("192.168.1.1".parse().unwrap()));
        assert_eq!(t.hops[0].rtt_ms, Some(0.512));
        assert_eq!(t.hops[1].addr, None);
        assert_eq!(t.hops[2].name.as_deref(), Some("core1.ams.example.net"));
        assert_eq!(t.hops[2].addr, Some("198.51.100.1".parse().unwrap()));
        assert_eq!(t.hops[3].name, None);
        assert_eq!(t.hops[3].addr, Some("192.0.2.9".parse().unwrap()));
        assert_eq!(t.hops[3].rtt_ms, Some(17.9));
    }

    #[test]
    fn what_is_not_a_listing_is_refused_or_ignored() {
        assert_eq!(Trace::parse(""), Err(TraceError::NoHops));
        assert_eq!(
            Trace::parse("hello\nworld 1 2 3\n"),
            Err(TraceError::NoHops)
        );
        let e = Trace::parse(" 2  a (192.0.2.1) 1 ms\n 1  b (192.0.2.2) 1 ms\n").unwrap_err();
        assert!(e.to_string().contains("line 2: hop 1 after hop 2"), "{e}");
        // Garbage around hop lines, a bad address, a time that is not one: no panic, no place.
        let t = Trace::parse(" 1  x (not-an-address) NaN ms\n 3  ( ) ms ms\nend\n").unwrap();
        assert_eq!(t.hops.len(), 2);
        assert_eq!(t.hops[0].addr, None);
        assert_eq!(t.hops[0].rtt_ms, None);
        let many: String = (1..=255).map(|i| format!("{i} 192.0.2.1 1 ms\n")).collect();
        assert_eq!(Trace::parse(&many).unwrap().hops.len(), 255);
    }

    fn site(name: &str, lat: f64, lon: f64, matches: &[&str]) -> Site {
        Site::at(name, lat, lon, matches).unwrap()
    }

    #[test]
    fn hops_are_placed_by_prefix_or_name_and_unplaced_ones_are_skipped() {
        let sites = [
            site("home", 52.37, 4.90, &["192.168.1.0/24"]),
            site("ams", 52.37, 4.90, &["ams.example"]),
            site("far", 40.71, -74.01, &["192.0.2.9"]),
        ];
        let t = Trace::parse(LINUX).unwrap();
        let d = distance(&t, &sites, Some("home")).unwrap();
        assert_eq!(d.points[0].site.as_deref(), Some("home"));
        assert_eq!(d.points[1].site.as_deref(), Some("home"));
        assert_eq!(d.points[2].unplaced, Some("no answer"));
        assert_eq!(d.points[3].site.as_deref(), Some("ams"));
        assert_eq!(d.points[4].site.as_deref(), Some("far"));
        assert_eq!(d.unplaced, 1);
        let ams_nyc = great_circle_km(52.37, 4.90, 40.71, -74.01);
        assert!((d.total_km - ams_nyc).abs() < 1e-6, "{}", d.total_km);
        assert!(!d.capped);
        // Without --from the source is unplaced and the first placed hop starts the path.
        let d = distance(&t, &sites, None).unwrap();
        assert!(d.points[0].unplaced.is_some());
        assert!((d.total_km - ams_nyc).abs() < 1e-6);
    }
}
