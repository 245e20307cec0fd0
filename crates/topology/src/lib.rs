//! Topologies for longhaul's WAN emulator: a path as a chain of named router
//! hops with places and distances, read from a TOML file or taken from the
//! presets built from the seed documents, and compiled into the two
//! [`LinkConfig`]s (data and ACK direction) plus the per-hop delays the
//! emulator needs to answer traceroute with each hop's cumulative RTT. Depends
//! on `longhaul-units`, `longhaul-link` (the configs it compiles into), toml,
//! serde and thiserror; the binary's `emulate`, `longhaul-experiments` and
//! `longhaul-testbed` read topologies. Start at [`Topology`] and [`presets`].
//!
//! Networks: any number of hosts, routers and links, each link direction
//! with its own model and a route for every pair of hosts, read from a
//! network file ([`Network::from_toml`]; [`is_network`] tells the two
//! formats apart) or taken from [`networks`]; the emulator's multi-host
//! fabric runs the compiled [`Network`].
//!
//! Contract: pure. No I/O (the caller reads the file and passes its text), no
//! clock, no randomness. Every refusal is a [`TopologyError`] naming the file,
//! the line and the field (`paths/x.toml:14: hop[3].km: …`); impossible values
//! (negative delay, rate 0, a queue smaller than one frame) are refused, never
//! ignored. The file format and the presets are documented in
//! docs/topology.md.
//!
//! Address plan: the sending host is 10.201.0.1 / fd00:4c48::1, the receiving
//! host 10.201.0.2 / fd00:4c48::2; router hop `i` (0-based) answers from
//! 10.201.1.(i+1) / fd00:4c48:1::(i+1). In a network, host `i` (file order)
//! is 10.201.0.(i+1) / fd00:4c48::(i+1) and router `i` 10.201.1.(i+1) /
//! fd00:4c48:1::(i+1): the same plan when the hosts are the two ends.

mod error;
mod network;
mod presets;
pub mod traceroute;

use std::net::{Ipv4Addr, Ipv6Addr};

use longhaul_link::{Bottleneck, LinkConfig, Loss, MAX_DELAY, MAX_KM, queue_for_bdp};
use longhaul_units::{
    Nanos, TimeUnit, fibre_delay, fmt_km, fmt_rate, fmt_size_si, great_circle_km, lsr_capped_km,
    parse_duration, parse_rate, parse_size,
};
use serde::{Deserialize, Serialize};

pub use error::{FileError, TopologyError, field_at_line, line_col, line_of_field, write_place};
pub use network::{
    DESCRIBE_ALL_PAIRS_UP_TO, Host, MAX_LINK_NAME, MAX_NET_HOSTS, MAX_NET_LINKS, MAX_NET_ROUTERS,
    MAX_NODE_NAME, NetLink, Network, NetworkPreset, Node, Router, Site, SiteMatch, Step,
    describe_network, is_network, network, networks, sites_from_toml,
};
pub use presets::{Preset, preset, presets};

/// Most router hops a path may have (addresses 10.201.1.1–.253).
pub const MAX_HOPS: usize = 253;

/// The smallest automatic queue, in frames of the path's MTU: a queue of one
/// BDP is never made smaller than this.
pub const MIN_AUTO_QUEUE_FRAMES: u64 = 4;

/// The sending host, `10.201.0.1` / `fd00:4c48::1`. Only its place matters:
/// the first hop's distance is measured from it.
pub const SENDER_V4: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
/// The receiving host, `10.201.0.2`.
pub const RECEIVER_V4: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 2);
/// The sending host's IPv6 address, `fd00:4c48::1`.
pub const SENDER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x4c48, 0, 0, 0, 0, 0, 1);
/// The receiving host's IPv6 address, `fd00:4c48::2`.
pub const RECEIVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x4c48, 0, 0, 0, 0, 0, 2);

/// Random loss as a topology file writes it: a bare probability
/// (`loss = 0.001`, Bernoulli) or a link-model table
/// (`loss = { model = "gilbert_elliott", p = 0.01, r = 0.3 }`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LossSpec {
    /// Independent loss with this probability per segment.
    Probability(f64),
    /// Any [`Loss`] model of the link crate.
    Model(Loss),
}

impl LossSpec {
    fn to_loss(self) -> Loss {
        match self {
            Self::Probability(0.0) => Loss::None,
            Self::Probability(p) => Loss::Bernoulli { p },
            Self::Model(l) => l,
        }
    }
}

/// The sending host's place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sender {
    /// Label, e.g. "HP RX2600 at CERN".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// City.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// Latitude, decimal degrees north.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat: Option<f64>,
    /// Longitude, decimal degrees east.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lon: Option<f64>,
}

/// A router hop, or (for `[receiver]`) the receiving host, with the leg that
/// leads to it from the previous point.
///
/// The leg's distance is `km`, else the great circle from the previous
/// point's `lat`/`lon` when both are known, else 0. Its one-way delay is
/// `delay`, else half the measured cumulative `rtt` minus the one-way delay
/// up to the previous point, else the fibre delay of the distance (5 µs/km).
/// `km` and `delay` together are refused (say which one you mean; use `rtt`
/// to pin a measured time while keeping `km` for the distance).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hop {
    /// Router label as traceroute would annotate it ("Juniper T320 Chicago").
    #[serde(default)]
    pub name: String,
    /// City.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    /// Latitude, decimal degrees north.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat: Option<f64>,
    /// Longitude, decimal degrees east.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lon: Option<f64>,
    /// Distance from the previous hop (or the sender), km.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub km: Option<f64>,
    /// One-way delay of the leg, e.g. "3.5ms" (bare numbers are ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
    /// Measured round-trip time from the sender to this hop, as traceroute
    /// shows it, e.g. "127.237ms".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<String>,
    /// Free text (where a figure comes from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A path as written in a topology file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Short name ("cern-starlight").
    pub name: String,
    /// One line for listings.
    #[serde(default)]
    pub description: String,
    /// Citation of the figures.
    #[serde(default)]
    pub source: String,
    /// IP MTU of the hosts: 1500 or 9000 (default 1500).
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Bottleneck rate of both directions, e.g. "1G" (decimal prefixes).
    pub rate: String,
    /// Rate of the reverse (ACK) direction, when it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_rate: Option<String>,
    /// Bottleneck queue per direction: "auto" (1 BDP of the path RTT, at
    /// least [`MIN_AUTO_QUEUE_FRAMES`] frames) or a size ("15MB", "64M").
    #[serde(default = "default_queue")]
    pub queue: String,
    /// Random loss of the data (forward) direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossSpec>,
    /// Random loss of the ACK (reverse) direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse_loss: Option<LossSpec>,
    /// Measured end-to-end RTT: when given, every leg's delay is scaled by
    /// the same factor so the path's RTT equals it (as `--rtt` does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<String>,
    /// The sending host.
    #[serde(default)]
    pub sender: Sender,
    /// Router hops in path order from the sender to the receiver.
    #[serde(default, rename = "hop")]
    pub hops: Vec<Hop>,
    /// The receiving host and the last leg (from the last router).
    #[serde(default)]
    pub receiver: Hop,
}

fn default_mtu() -> u32 {
    1500
}

fn default_queue() -> String {
    "auto".into()
}

/// The command line's `--rtt/--rate/--loss/--mtu/--queue`, applied over a
/// topology. `rtt` scales every leg's delay by one factor so the total RTT
/// matches to the nanosecond (odd nanoseconds round the one-way delay);
/// `rate` sets both directions; `loss` replaces the forward loss with a
/// Bernoulli probability; `queue` is bytes per direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Overrides {
    /// Round-trip time of the whole path.
    pub rtt: Option<Nanos>,
    /// Bottleneck rate, bit/s, both directions.
    pub rate: Option<u64>,
    /// Forward random loss probability.
    pub loss: Option<f64>,
    /// IP MTU (1500 or 9000).
    pub mtu: Option<u32>,
    /// Queue bytes per direction.
    pub queue: Option<u64>,
}

/// One router hop, ready for the emulator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledHop {
    /// Router label.
    pub name: String,
    /// City ("" when not given).
    pub city: String,
    /// One-way delay of the leg leading to this hop.
    pub one_way: Nanos,
    /// One-way delay from the sender to this hop: a traceroute probe
    /// expiring here returns after twice this.
    pub cumulative_one_way: Nanos,
    /// Length of the leg leading to this hop, km.
    pub km: f64,
    /// Address the hop answers ICMP time-exceeded from.
    pub addr_v4: Ipv4Addr,
    /// IPv6 address of the hop.
    pub addr_v6: Ipv6Addr,
}

/// A topology with overrides applied: hops, both link directions and totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompiledPath {
    /// The topology's name.
    pub name: String,
    /// Router hops in path order.
    pub hops: Vec<CompiledHop>,
    /// Receiver label and city.
    pub receiver: String,
    /// One-way delay of the last leg (last router to the receiver).
    pub receiver_one_way: Nanos,
    /// Length of the last leg, km.
    pub receiver_km: f64,
    /// Data direction (sender → receiver): bottleneck and total delay.
    pub forward: LinkConfig,
    /// ACK direction (receiver → sender).
    pub reverse: LinkConfig,
    /// Round-trip time, twice the one-way delay.
    pub rtt: Nanos,
    /// Sum of the legs' distances, km.
    pub distance_km: f64,
    /// IP MTU.
    pub mtu: u32,
}

impl CompiledPath {
    /// The distance the Land Speed Record would count: the sum of the legs,
    /// capped at 30,000 km.
    pub fn lsr_distance_km(&self) -> f64 {
        lsr_capped_km(self.distance_km)
    }

    /// Router hops between the hosts (the LSR asks for at least two).
    pub fn router_hops(&self) -> usize {
        self.hops.len()
    }

    /// One-way delay from the sender to the receiver.
    pub fn one_way(&self) -> Nanos {
        self.forward.delay
    }
}

fn fail<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, TopologyError> {
    Err(TopologyError::field(field, message))
}

fn duration(field: &str, s: &str) -> Result<Nanos, TopologyError> {
    let d = parse_duration(s, TimeUnit::Millis)
        .map_err(|e| TopologyError::field(field, e.to_string()))?;
    if d > MAX_DELAY.saturating_add(MAX_DELAY) {
        return fail(
            field,
            format!("is {d}; more than 2 min is refused as absurd"),
        );
    }
    Ok(d)
}

fn rate(field: &str, s: &str) -> Result<u64, TopologyError> {
    let r = parse_rate(s).map_err(|e| TopologyError::field(field, e.to_string()))?;
    if r == 0 {
        return fail(field, format!("rate must be > 0, got {s:?}"));
    }
    Ok(r)
}

fn check_mtu(field: &str, mtu: u32) -> Result<(), TopologyError> {
    if mtu == 1500 || mtu == 9000 {
        Ok(())
    } else {
        fail(field, format!("MTU must be 1500 or 9000, got {mtu}"))
    }
}

fn check_loss(field: &str, loss: Loss) -> Result<(), TopologyError> {
    let ps: Vec<(&str, f64)> = match loss {
        Loss::None => vec![],
        Loss::Bernoulli { p } => vec![("", p)],
        Loss::GilbertElliott {
            p,
            r,
            one_minus_h,
            one_minus_k,
        } => vec![
            (".p", p),
            (".r", r),
            (".1-h", one_minus_h),
            (".1-k", one_minus_k),
        ],
    };
    for (sub, p) in ps {
        if !(0.0..=1.0).contains(&p) {
            return fail(
                format!("{field}{sub}"),
                format!("probability must be in [0, 1], got {p}"),
            );
        }
    }
    Ok(())
}

fn check_place(field: &str, lat: Option<f64>, lon: Option<f64>) -> Result<(), TopologyError> {
    if let Some(lat) = lat
        && !(-90.0..=90.0).contains(&lat)
    {
        return fail(
            format!("{field}.lat"),
            format!("latitude must be in [-90, 90], got {lat}"),
        );
    }
    if let Some(lon) = lon
        && !(-180.0..=180.0).contains(&lon)
    {
        return fail(
            format!("{field}.lon"),
            format!("longitude must be in [-180, 180], got {lon}"),
        );
    }
    Ok(())
}

/// A leg's distance and one-way delay, before any RTT scaling.
fn leg(
    field: &str,
    hop: &Hop,
    prev: Option<(f64, f64)>,
    before: Nanos,
) -> Result<(f64, Nanos), TopologyError> {
    check_place(field, hop.lat, hop.lon)?;
    if hop.km.is_some() && hop.delay.is_some() {
        return fail(
            format!("{field}.km"),
            "give km or delay, not both (use rtt to pin a measured time and keep km)",
        );
    }
    if hop.delay.is_some() && hop.rtt.is_some() {
        return fail(format!("{field}.delay"), "give delay or rtt, not both");
    }
    let km = match (hop.km, prev, hop.lat.zip(hop.lon)) {
        (Some(km), _, _) => {
            if !(0.0..=MAX_KM).contains(&km) {
                return fail(
                    format!("{field}.km"),
                    format!("distance must be >= 0 and at most {MAX_KM} km, got {km}"),
                );
            }
            km
        }
        (None, Some((a, b)), Some((c, d))) => great_circle_km(a, b, c, d),
        _ => 0.0,
    };
    let one_way = if let Some(d) = &hop.delay {
        duration(&format!("{field}.delay"), d)?
    } else if let Some(r) = &hop.rtt {
        let half = Nanos(duration(&format!("{field}.rtt"), r)?.0 / 2);
        match half.checked_sub(before) {
            Some(d) => d,
            None => {
                return fail(
                    format!("{field}.rtt"),
                    format!(
                        "rtt {r} is less than the RTT up to the previous hop ({})",
                        Nanos(before.0.saturating_mul(2))
                    ),
                );
            }
        }
    } else {
        fibre_delay(km)
    };
    Ok((km, one_way))
}

impl Topology {
    /// Reads a topology from the text of `file_name` and checks that it
    /// compiles with no overrides. Errors name the file, the line and the
    /// field.
    pub fn from_toml(text: &str, file_name: &str) -> Result<Self, TopologyError> {
        let topo: Self = toml::from_str(text)
            .map_err(|e| FileError::from_toml(&e, text, file_name, error::field_at_line))?;
        topo.compile(&Overrides::default()).map_err(|mut e| {
            e.file = file_name.to_owned();
            if let Some(f) = &e.field {
                e.line = error::line_of_field(text, f);
            }
            e
        })?;
        Ok(topo)
    }

    /// Writes the topology as TOML (parses back equal).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Applies `overrides` and computes hops, delays, addresses and both link
    /// directions. Errors name the field (`hop[2].km`, `--rate`).
    pub fn compile(&self, overrides: &Overrides) -> Result<CompiledPath, TopologyError> {
        check_mtu("mtu", self.mtu)?;
        let mtu = match overrides.mtu {
            Some(m) => {
                check_mtu("--mtu", m)?;
                m
            }
            None => self.mtu,
        };
        if self.hops.is_empty() {
            return fail("hop", "a path needs at least one [[hop]] (router)");
        }
        if self.hops.len() > MAX_HOPS {
            return fail(
                "hop",
                format!("{} hops; at most {MAX_HOPS} are supported", self.hops.len()),
            );
        }
        check_place("sender", self.sender.lat, self.sender.lon)?;

        // Legs: every hop, then the receiver.
        let mut legs: Vec<(f64, Nanos)> = Vec::with_capacity(self.hops.len() + 1);
        let mut prev = self.sender.lat.zip(self.sender.lon);
        let mut before = Nanos::ZERO;
        let points = self
            .hops
            .iter()
            .enumerate()
            .map(|(i, h)| (format!("hop[{i}]"), h))
            .chain(std::iter::once(("receiver".to_owned(), &self.receiver)));
        for (field, hop) in points {
            let (km, d) = leg(&field, hop, prev, before)?;
            before = before.saturating_add(d);
            if before > MAX_DELAY {
                return fail(
                    field,
                    format!(
                        "one-way delay up to here is {before}; more than {MAX_DELAY} is absurd"
                    ),
                );
            }
            legs.push((km, d));
            prev = hop.lat.zip(hop.lon);
        }

        // RTT scaling: the override, else the file's measured RTT.
        let target = match (overrides.rtt, &self.rtt) {
            (Some(r), _) => Some(("--rtt", r)),
            (None, Some(s)) => Some(("rtt", duration("rtt", s)?)),
            (None, None) => None,
        };
        if let Some((field, rtt)) = target {
            if rtt == Nanos::ZERO {
                return fail(field, "RTT must be > 0");
            }
            if rtt > MAX_DELAY.saturating_add(MAX_DELAY) {
                return fail(field, format!("RTT {rtt} is more than 2 min"));
            }
            scale(&mut legs, Nanos(rtt.0.div_ceil(2)));
        }
        let one_way = legs.iter().fold(Nanos::ZERO, |a, l| a.saturating_add(l.1));
        let rtt = Nanos(one_way.0.saturating_mul(2));
        let distance_km: f64 = legs.iter().map(|l| l.0).sum();

        // Bottleneck.
        let fwd_rate = match overrides.rate {
            Some(0) => return fail("--rate", "rate must be > 0, got 0"),
            Some(r) => r,
            None => rate("rate", &self.rate)?,
        };
        let rev_rate = match (overrides.rate, &self.reverse_rate) {
            (Some(r), _) => r,
            (None, Some(s)) => rate("reverse_rate", s)?,
            (None, None) => fwd_rate,
        };
        let min_queue = u64::from(mtu);
        let queue_for = |r: u64| -> Result<u64, TopologyError> {
            let (field, q) = match overrides.queue {
                Some(q) => ("--queue", q),
                None if self.queue.trim().eq_ignore_ascii_case("auto") => {
                    return Ok(queue_for_bdp(
                        r,
                        rtt,
                        1.0,
                        MIN_AUTO_QUEUE_FRAMES * u64::from(mtu),
                    ));
                }
                None => (
                    "queue",
                    parse_size(&self.queue)
                        .map_err(|e| TopologyError::field("queue", e.to_string()))?,
                ),
            };
            if q < min_queue {
                return fail(
                    field,
                    format!("queue of {q} B is smaller than one MTU frame ({min_queue} B)"),
                );
            }
            Ok(q)
        };
        let (fwd_queue, rev_queue) = (queue_for(fwd_rate)?, queue_for(rev_rate)?);

        let fwd_loss = match (overrides.loss, self.loss) {
            (Some(p), _) => {
                check_loss("--loss", Loss::Bernoulli { p })?;
                LossSpec::Probability(p).to_loss()
            }
            (None, Some(l)) => {
                check_loss("loss", l.to_loss())?;
                l.to_loss()
            }
            (None, None) => Loss::None,
        };
        let rev_loss = match self.reverse_loss {
            Some(l) => {
                check_loss("reverse_loss", l.to_loss())?;
                l.to_loss()
            }
            None => Loss::None,
        };
        let direction = |seed, rate_bps, queue_bytes, loss| LinkConfig {
            seed,
            mtu,
            loss,
            bottleneck: Some(Bottleneck {
                rate_bps,
                queue_bytes,
                overhead_per_frame: 0,
                aqm: Default::default(),
            }),
            delay: one_way,
            ..LinkConfig::default()
        };
        let forward = direction(1, fwd_rate, fwd_queue, fwd_loss);
        let reverse = direction(2, rev_rate, rev_queue, rev_loss);
        for (name, cfg) in [("forward", &forward), ("reverse", &reverse)] {
            cfg.validate().map_err(|e| {
                let field = match e.field {
                    "bottleneck.rate_bps" if name == "forward" => "rate",
                    "bottleneck.rate_bps" => "reverse_rate",
                    "bottleneck.queue_bytes" => "queue",
                    "loss.p" | "loss.r" | "loss.1-h" | "loss.1-k" if name == "reverse" => {
                        "reverse_loss"
                    }
                    "loss.p" | "loss.r" | "loss.1-h" | "loss.1-k" => "loss",
                    "mtu" => "mtu",
                    _ => "rtt",
                };
                TopologyError::field(field, format!("{name} direction: {e}"))
            })?;
        }

        let mut cumulative = Nanos::ZERO;
        let hops = self
            .hops
            .iter()
            .zip(&legs)
            .enumerate()
            .map(|(i, (h, &(km, d)))| {
                cumulative = cumulative.saturating_add(d);
                let n = (i + 1) as u8; // at most MAX_HOPS = 253
                CompiledHop {
                    name: h.name.clone(),
                    city: h.city.clone().unwrap_or_default(),
                    one_way: d,
                    cumulative_one_way: cumulative,
                    km,
                    addr_v4: Ipv4Addr::new(10, 201, 1, n),
                    addr_v6: Ipv6Addr::new(0xfd00, 0x4c48, 1, 0, 0, 0, 0, u16::from(n)),
                }
            })
            .collect();
        let last = legs.last().copied().unwrap_or_default();
        let receiver = match (&self.receiver.name, &self.receiver.city) {
            (n, Some(c)) if n.is_empty() => c.clone(),
            (n, Some(c)) => format!("{n} ({c})"),
            (n, None) => n.clone(),
        };
        Ok(CompiledPath {
            name: self.name.clone(),
            hops,
            receiver,
            receiver_one_way: last.1,
            receiver_km: last.0,
            forward,
            reverse,
            rtt,
            distance_km,
            mtu,
        })
    }
}

/// Scales the legs' delays by one factor so they sum to `total` exactly:
/// each cumulative delay is rounded, and legs are the differences. With a
/// zero total the whole delay goes on the legs equally.
fn scale(legs: &mut [(f64, Nanos)], total: Nanos) {
    let sum: u128 = legs.iter().map(|l| u128::from(l.1.0)).sum();
    let n = legs.len() as u128;
    let mut cum: u128 = 0;
    let mut prev_scaled: u128 = 0;
    for (i, l) in legs.iter_mut().enumerate() {
        cum += u128::from(l.1.0);
        let scaled = (cum * u128::from(total.0) + sum / 2)
            .checked_div(sum)
            .unwrap_or(u128::from(total.0) * (i as u128 + 1) / n);
        l.1 = Nanos(u64::try_from(scaled - prev_scaled).unwrap_or(u64::MAX));
        prev_scaled = scaled;
    }
}

fn ms3(d: Nanos) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// A traceroute-like listing of a compiled path: a summary line, then per
/// hop its number, router name, city, leg distance and cumulative RTT, then
/// the receiver.
pub fn describe(path: &CompiledPath) -> String {
    let fwd = path.forward.bottleneck;
    let mut out = format!(
        "{}: {} ({} counted by LSR rules), {} router hops, RTT {}, rate {}, queue {}, MTU {}\n",
        path.name,
        fmt_km(path.distance_km),
        fmt_km(path.lsr_distance_km()),
        path.router_hops(),
        ms3(path.rtt),
        fwd.map_or("unlimited".into(), |b| fmt_rate(b.rate_bps)),
        fwd.map_or("-".into(), |b| fmt_size_si(b.queue_bytes)),
        path.mtu,
    );
    out.push_str(&format!(
        "{:>3}  {:<32} {:<16} {:>10} {:>12}  {}\n",
        "hop", "router", "city", "km", "RTT", "address"
    ));
    for (i, h) in path.hops.iter().enumerate() {
        out.push_str(&format!(
            "{:>3}  {:<32} {:<16} {:>10} {:>12}  {}\n",
            i + 1,
            h.name,
            h.city,
            fmt_km(h.km),
            ms3(Nanos(h.cumulative_one_way.0.saturating_mul(2))),
            h.addr_v4,
        ));
    }
    out.push_str(&format!(
        "{:>3}  {:<32} {:<16} {:>10} {:>12}  {}\n",
        path.hops.len() + 1,
        path.receiver,
        "",
        fmt_km(path.receiver_km),
        ms3(path.rtt),
        RECEIVER_V4,
    ));
    out
}

#[cfg(test)]
mod tests;
