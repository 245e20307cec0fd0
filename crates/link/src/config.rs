//! The configuration of one direction of a path: which stages run and with
//! what parameters, and the validation that refuses impossible values.
//!
//! Contract: [`LinkConfig::validate`] is called by [`crate::Link::new`]; a
//! configuration it accepts never makes the model panic or loop forever. Each
//! refusal is a [`ConfigError`] naming the field (dotted path, as a topology
//! file would spell it) and saying why, because a silently ignored parameter
//! is the failure users of netem and Mininet hit most (Mininet's `TCIntf`
//! ignores a rate above `bwParamMax` after one error line, `mininet/link.py`).
//!
//! Loss parameters use netem's names so configurations translate one to one:
//! `loss random P` is [`Loss::Bernoulli`], `loss gemodel p r 1-h 1-k` is
//! [`Loss::GilbertElliott`] (tc-netem(8)). Times are [`Nanos`] (serialised as
//! integer nanoseconds), rates bit/s, sizes bytes (ARCHITECTURE.md).

use longhaul_units::{Nanos, bdp_bytes, fibre_delay};
use serde::{Deserialize, Serialize};

/// Bytes an Ethernet frame adds to the IP packet on the wire: header 14 +
/// FCS 4 + preamble 7 + start delimiter 1 + inter-frame gap 12 = 38, so a
/// 1500 B packet occupies 1538 B of line time. A value for
/// [`Bottleneck::overhead_per_frame`].
pub const ETHERNET_OVERHEAD: u32 = 38;

/// Longest one-way delay accepted (base delay, fibre delay, jitter or
/// reordering hold): one minute. The longest seed path (30,000 km) is 150 ms;
/// anything near a minute is a unit mistake.
pub const MAX_DELAY: Nanos = Nanos::from_secs(60);

/// Longest fibre distance accepted, km: Earth–Moon and back is below this.
pub const MAX_KM: f64 = 1_000_000.0;

/// Highest bottleneck rate accepted, bit/s (10 Tbit/s).
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// Per-segment random loss (stage 1), drawn once per segment in order.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum Loss {
    /// No random loss.
    #[default]
    None,
    /// Independent loss with probability `p` per segment (netem `loss random
    /// P`). Counted as [`crate::DropCause::Random`].
    Bernoulli {
        /// Loss probability, in [0, 1].
        p: f64,
    },
    /// Gilbert–Elliott two-state Markov chain with netem's parameters (`loss
    /// gemodel p r 1-h 1-k`), stepped once per segment: the segment is lost
    /// with probability `1-k` in the good state and `1-h` in the bad state,
    /// then the chain moves good→bad with probability `p` and bad→good with
    /// probability `r`. The chain starts in the good state. Stationary bad
    /// probability is p/(p+r) and a bad spell lasts 1/r segments on average.
    /// Counted as [`crate::DropCause::Burst`].
    GilbertElliott {
        /// Good → bad transition probability.
        p: f64,
        /// Bad → good transition probability.
        r: f64,
        /// Loss probability in the bad state (netem `1-h`; default 1).
        #[serde(rename = "1-h", alias = "one_minus_h", default = "one")]
        one_minus_h: f64,
        /// Loss probability in the good state (netem `1-k`; default 0).
        #[serde(rename = "1-k", alias = "one_minus_k", default)]
        one_minus_k: f64,
    },
}

fn one() -> f64 {
    1.0
}

/// Active queue management at the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Aqm {
    /// Plain drop-tail: only a full queue drops.
    #[default]
    DropTail,
    /// CoDel (RFC 8289) in front of drop-tail, evaluated at arrival time
    /// (equivalent for a deterministic FIFO server; see the `codel` module).
    Codel {
        /// Acceptable standing queue delay (RFC 8289 default 5 ms).
        #[serde(default = "codel_target")]
        target: Nanos,
        /// Window over which the delay must stay above target before
        /// dropping starts, about one worst-case RTT (default 100 ms).
        #[serde(default = "codel_interval")]
        interval: Nanos,
    },
}

fn codel_target() -> Nanos {
    Nanos::from_millis(5)
}

fn codel_interval() -> Nanos {
    Nanos::from_millis(100)
}

impl Aqm {
    /// CoDel with RFC 8289's defaults: target 5 ms, interval 100 ms.
    pub fn codel() -> Self {
        Self::Codel {
            target: codel_target(),
            interval: codel_interval(),
        }
    }
}

/// The bottleneck (stage 3): a FIFO byte queue drained by a serializer at
/// `rate_bps`, charging each segment's wire bytes (headers + payload +
/// `overhead_per_frame`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bottleneck {
    /// Serialization rate, bit/s.
    pub rate_bps: u64,
    /// Queue capacity in bytes, including the frame being serialized. A
    /// segment is dropped when backlog + its wire size would exceed it. Size
    /// it with [`queue_for_bdp`] (1 BDP of the path RTT is the usual default).
    pub queue_bytes: u64,
    /// Bytes added to every segment on the wire (default 0, i.e. rate counts
    /// IP bytes; [`ETHERNET_OVERHEAD`] = 38 models Ethernet line rate).
    #[serde(default)]
    pub overhead_per_frame: u32,
    /// Queue discipline (default drop-tail).
    #[serde(default)]
    pub aqm: Aqm,
}

/// Extra per-segment delay (stage 4), drawn once per delivered segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Jitter {
    /// No jitter.
    #[default]
    None,
    /// Uniform on [0, max] (whole nanoseconds, both ends included).
    Uniform {
        /// Largest extra delay.
        max: Nanos,
    },
    /// Normal with the given mean and standard deviation, rounded to whole
    /// nanoseconds and clamped at zero.
    Normal {
        /// Mean extra delay.
        mean: Nanos,
        /// Standard deviation.
        sigma: Nanos,
    },
}

/// Reordering as displacement (stage 5; RFC 4737's view of reordering, not
/// netem's `reorder`, which lets selected packets skip the delay entirely).
///
/// With probability `probability` a delivered segment is held `hold` longer
/// than its in-order release time. It does not hold back the segments behind
/// it: they keep their own release times, so the held segment arrives after
/// every segment whose release falls within `hold` of its own. With a
/// saturated bottleneck that is `hold / (wire / R)` positions; on an idle
/// path it may be none, which RFC 4737 would not count as reordered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reorder {
    /// Probability that a delivered segment is displaced, in [0, 1].
    pub probability: f64,
    /// How much later than its in-order release it is delivered (> 0).
    pub hold: Nanos,
}

/// An on/off background source (mm-onoff style): `rate_bps` while on,
/// nothing while off. Starts "on" at the link's first arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnOff {
    /// Rate while on, bit/s.
    pub rate_bps: u64,
    /// (Mean) length of an on period.
    pub on: Nanos,
    /// (Mean) length of an off period.
    pub off: Nanos,
    /// Fixed periods when false; exponentially distributed periods with the
    /// given means, drawn from the cross-traffic stream, when true.
    #[serde(default)]
    pub exponential: bool,
}

/// Synthetic cross traffic (stage 2): virtual bytes that occupy
/// the bottleneck queue and serializer, never materialised. Needs a
/// [`Bottleneck`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossTraffic {
    /// Constant bit rate, bit/s (0 for none); must be below the bottleneck
    /// rate or the link would never drain.
    #[serde(default)]
    pub cbr_bps: u64,
    /// An on/off source added to the CBR.
    #[serde(default)]
    pub on_off: Option<OnOff>,
}

/// One direction of a path. All stages are optional except the propagation
/// delay (which may be zero).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkConfig {
    /// Seed of every random stream of this direction; each stage draws from
    /// its own ChaCha8 stream of this seed, so enabling one stage does not
    /// change another's draws. Record it to replay a run.
    pub seed: u64,
    /// Largest IP packet the hosts send (1500 or 9000 typically): the queue
    /// must hold at least one such frame.
    pub mtu: u32,
    /// Random loss (stage 1).
    pub loss: Loss,
    /// Synthetic cross traffic (stage 2).
    pub cross: Option<CrossTraffic>,
    /// Bottleneck queue and serializer (stage 3); `None` for an unlimited
    /// link.
    pub bottleneck: Option<Bottleneck>,
    /// One-way propagation delay (stage 4), added to `km` of fibre.
    pub delay: Nanos,
    /// Fibre length in km whose delay ([`delay_from_km`]) adds to `delay`.
    pub km: Option<f64>,
    /// Jitter (stage 4).
    pub jitter: Jitter,
    /// When false (default), releases are clamped so jitter never reorders
    /// (release_i = max(release_i, release_{i−1})); when true, each segment
    /// keeps its own jittered time, as netem does.
    pub jitter_reorders: bool,
    /// Reordering by displacement (stage 5).
    pub reorder: Option<Reorder>,
    /// Probability that a delivered segment is delivered twice (stage 6),
    /// the copy at the same release time, right after the original.
    pub duplicate: f64,
    /// Probability that a delivered segment arrives damaged (stage 7): a bit
    /// error on the wire after the sender computed its checksums, as a bad
    /// fibre or transceiver causes (netem's `corrupt`). The segment still
    /// occupies the queue and every link after this one; the receiver's
    /// checksum drops it. A duplicate copy is not damaged.
    pub corrupt: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            mtu: 1500,
            loss: Loss::None,
            cross: None,
            bottleneck: None,
            delay: Nanos::ZERO,
            km: None,
            jitter: Jitter::None,
            jitter_reorders: false,
            reorder: None,
            duplicate: 0.0,
            corrupt: 0.0,
        }
    }
}

/// A configuration value the model refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("link config: `{field}` {reason}")]
pub struct ConfigError {
    /// The field, as a dotted path ("bottleneck.queue_bytes").
    pub field: &'static str,
    /// Why it is refused, with the value.
    pub reason: String,
}

fn refuse(field: &'static str, reason: String) -> Result<(), ConfigError> {
    Err(ConfigError { field, reason })
}

fn probability(field: &'static str, p: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        refuse(field, format!("is {p}; a probability must be in [0, 1]"))
    }
}

fn delay_bound(field: &'static str, d: Nanos) -> Result<(), ConfigError> {
    if d <= MAX_DELAY {
        Ok(())
    } else {
        refuse(
            field,
            format!("is {d}; more than {MAX_DELAY} is refused as absurd"),
        )
    }
}

impl LinkConfig {
    /// The total one-way propagation delay: `delay` plus the fibre delay of
    /// `km`.
    pub fn propagation(&self) -> Nanos {
        self.delay + self.km.map_or(Nanos::ZERO, delay_from_km)
    }

    /// Largest wire frame: MTU plus the bottleneck's per-frame overhead.
    pub fn max_frame(&self) -> u64 {
        u64::from(self.mtu)
            + self
                .bottleneck
                .map_or(0, |b| u64::from(b.overhead_per_frame))
    }

    /// Refuses impossible or absurd values, naming the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(68..=65_535).contains(&self.mtu) {
            refuse(
                "mtu",
                format!("is {}; an IP MTU must be in 68..=65535", self.mtu),
            )?;
        }
        match self.loss {
            Loss::None => {}
            Loss::Bernoulli { p } => probability("loss.p", p)?,
            Loss::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                probability("loss.p", p)?;
                probability("loss.r", r)?;
                probability("loss.1-h", one_minus_h)?;
                probability("loss.1-k", one_minus_k)?;
            }
        }
        if let Some(b) = &self.bottleneck {
            if b.rate_bps == 0 {
                refuse(
                    "bottleneck.rate_bps",
                    "is 0; a link must carry something (omit the bottleneck for an unlimited link)"
                        .into(),
                )?;
            }
            if b.rate_bps > MAX_RATE_BPS {
                refuse(
                    "bottleneck.rate_bps",
                    format!("is {}; above 10 Tbit/s is refused as absurd", b.rate_bps),
                )?;
            }
            if b.overhead_per_frame > 1_000 {
                refuse(
                    "bottleneck.overhead_per_frame",
                    format!(
                        "is {} B; Ethernet adds {ETHERNET_OVERHEAD}, more than 1000 is absurd",
                        b.overhead_per_frame
                    ),
                )?;
            }
            let frame = self.max_frame();
            if b.queue_bytes < frame {
                refuse(
                    "bottleneck.queue_bytes",
                    format!(
                        "is {} B, smaller than one MTU-sized frame ({frame} B)",
                        b.queue_bytes
                    ),
                )?;
            }
            if let Aqm::Codel { target, interval } = b.aqm {
                if target == Nanos::ZERO {
                    refuse("bottleneck.aqm.target", "is 0; it must be positive".into())?;
                }
                if interval == Nanos::ZERO || interval > MAX_DELAY {
                    refuse(
                        "bottleneck.aqm.interval",
                        format!("is {interval}; it must be in (0, {MAX_DELAY}]"),
                    )?;
                }
                if target >= interval {
                    refuse(
                        "bottleneck.aqm.target",
                        format!("is {target}, not below the interval ({interval})"),
                    )?;
                }
            }
        }
        if let Some(c) = &self.cross {
            let Some(b) = &self.bottleneck else {
                return refuse(
                    "cross",
                    "needs a bottleneck: cross traffic occupies its queue".into(),
                );
            };
            if c.cbr_bps >= b.rate_bps {
                refuse(
                    "cross.cbr_bps",
                    format!(
                        "is {} bit/s, not below the bottleneck rate ({} bit/s)",
                        c.cbr_bps, b.rate_bps
                    ),
                )?;
            }
            if let Some(o) = &c.on_off {
                if o.rate_bps == 0 || o.rate_bps > MAX_RATE_BPS {
                    refuse(
                        "cross.on_off.rate_bps",
                        format!("is {}; it must be in (0, 10 Tbit/s]", o.rate_bps),
                    )?;
                }
                if o.on == Nanos::ZERO {
                    refuse("cross.on_off.on", "is 0; it must be positive".into())?;
                }
                if o.off == Nanos::ZERO {
                    refuse("cross.on_off.off", "is 0; it must be positive".into())?;
                }
                delay_bound("cross.on_off.on", o.on)?;
                delay_bound("cross.on_off.off", o.off)?;
            }
        }
        delay_bound("delay", self.delay)?;
        if let Some(km) = self.km
            && !(0.0..=MAX_KM).contains(&km)
        {
            refuse(
                "km",
                format!("is {km}; a distance must be in [0, {MAX_KM}] km"),
            )?;
        }
        delay_bound("delay", self.propagation())?;
        match self.jitter {
            Jitter::None => {}
            Jitter::Uniform { max } => delay_bound("jitter.max", max)?,
            Jitter::Normal { mean, sigma } => {
                delay_bound("jitter.mean", mean)?;
                delay_bound("jitter.sigma", sigma)?;
            }
        }
        if let Some(r) = &self.reorder {
            probability("reorder.probability", r.probability)?;
            if r.hold == Nanos::ZERO {
                refuse(
                    "reorder.hold",
                    "is 0; a displaced segment must be held some time".into(),
                )?;
            }
            delay_bound("reorder.hold", r.hold)?;
        }
        probability("duplicate", self.duplicate)?;
        probability("corrupt", self.corrupt)
    }
}

/// One-way delay of `km` of fibre at 2×10⁸ m/s (5 µs per km), as
/// [`longhaul_units::fibre_delay`].
pub fn delay_from_km(km: f64) -> Nanos {
    fibre_delay(km)
}

/// Queue size for a bottleneck of `rate_bps` on a path of round-trip time
/// `rtt`: `factor` × BDP bytes, rounded up. The usual default is one BDP of
/// the path RTT (factor 1.0); one direction does not know the RTT, so the
/// caller (the topology) computes it. Never below `min_bytes` (pass one MTU
/// frame so validation passes on short paths). Negative or NaN factors give
/// `min_bytes`.
pub fn queue_for_bdp(rate_bps: u64, rtt: Nanos, factor: f64, min_bytes: u64) -> u64 {
    let bdp = bdp_bytes(rate_bps, rtt) as f64 * factor;
    // `as` saturates and maps NaN to 0.
    (bdp.ceil() as u64).max(min_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> LinkConfig {
        LinkConfig {
            bottleneck: Some(Bottleneck {
                rate_bps: 1_000_000_000,
                queue_bytes: 1_000_000,
                overhead_per_frame: 0,
                aqm: Aqm::codel(),
            }),
            ..LinkConfig::default()
        }
    }

    fn refused(c: &LinkConfig) -> &'static str {
        let e = c.validate().expect_err("should be refused");
        assert!(e.to_string().contains(e.field), "{e}");
        e.field
    }

    #[test]
    fn defaults_validate() {
        LinkConfig::default().validate().unwrap();
        base().validate().unwrap();
    }

    #[test]
    fn refuses_each_impossible_value_naming_the_field() {
        let with = |f: &dyn Fn(&mut LinkConfig)| {
            let mut c = base();
            f(&mut c);
            refused(&c)
        };
        assert_eq!(with(&|c| c.mtu = 20), "mtu");
        assert_eq!(with(&|c| c.loss = Loss::Bernoulli { p: 1.5 }), "loss.p");
        assert_eq!(
            with(&|c| c.loss = Loss::Bernoulli { p: f64::NAN }),
            "loss.p"
        );
        assert_eq!(
            with(&|c| c.loss = Loss::GilbertElliott {
                p: 0.1,
                r: -0.1,
                one_minus_h: 1.0,
                one_minus_k: 0.0
            }),
            "loss.r"
        );
        assert_eq!(
            with(&|c| c.loss = Loss::GilbertElliott {
                p: 0.1,
                r: 0.1,
                one_minus_h: 2.0,
                one_minus_k: 0.0
            }),
            "loss.1-h"
        );
        assert_eq!(
            with(&|c| c.bottleneck.as_mut().unwrap().rate_bps = 0),
            "bottleneck.rate_bps"
        );
        assert_eq!(
            with(&|c| c.bottleneck.as_mut().unwrap().queue_bytes = 1499),
            "bottleneck.queue_bytes"
        );
        assert_eq!(
            with(&|c| {
                let b = c.bottleneck.as_mut().unwrap();
                b.queue_bytes = 1500;
                b.overhead_per_frame = ETHERNET_OVERHEAD;
            }),
            "bottleneck.queue_bytes"
        );
        assert_eq!(
            with(&|c| c.bottleneck.as_mut().unwrap().aqm = Aqm::Codel {
                target: Nanos::from_millis(200),
                interval: Nanos::from_millis(100)
            }),
            "bottleneck.aqm.target"
        );
        assert_eq!(with(&|c| c.delay = Nanos::from_secs(3600)), "delay");
        assert_eq!(with(&|c| c.km = Some(-1.0)), "km");
        assert_eq!(with(&|c| c.km = Some(f64::INFINITY)), "km");
        assert_eq!(
            with(&|c| c.jitter = Jitter::Uniform {
                max: Nanos::from_secs(61)
            }),
            "jitter.max"
        );
        assert_eq!(
            with(&|c| c.reorder = Some(Reorder {
                probability: 0.5,
                hold: Nanos::ZERO
            })),
            "reorder.hold"
        );
        assert_eq!(
            with(&|c| c.reorder = Some(Reorder {
                probability: -0.5,
                hold: Nanos(1)
            })),
            "reorder.probability"
        );
        assert_eq!(with(&|c| c.duplicate = 1.01), "duplicate");
        assert_eq!(
            with(&|c| c.cross = Some(CrossTraffic {
                cbr_bps: 1_000_000_000,
                on_off: None
            })),
            "cross.cbr_bps"
        );
        assert_eq!(
            with(&|c| c.cross = Some(CrossTraffic {
                cbr_bps: 0,
                on_off: Some(OnOff {
                    rate_bps: 1,
                    on: Nanos::ZERO,
                    off: Nanos(1),
                    exponential: false
                })
            })),
            "cross.on_off.on"
        );
        assert_eq!(
            with(&|c| {
                c.bottleneck = None;
                c.cross = Some(CrossTraffic::default());
            }),
            "cross"
        );
    }

    #[test]
    fn fibre_and_queue_helpers() {
        assert_eq!(delay_from_km(7_067.0), Nanos(35_335_000));
        let c = LinkConfig {
            delay: Nanos::from_millis(1),
            km: Some(1_000.0),
            ..LinkConfig::default()
        };
        assert_eq!(c.propagation(), Nanos::from_millis(6));
        // 1 Gbit/s × 120 ms = 15 MB; half of it; and the floor.
        assert_eq!(
            queue_for_bdp(1_000_000_000, Nanos::from_millis(120), 1.0, 1500),
            15_000_000
        );
        assert_eq!(
            queue_for_bdp(1_000_000_000, Nanos::from_millis(120), 0.5, 1500),
            7_500_000
        );
        assert_eq!(queue_for_bdp(1_000, Nanos(1), 1.0, 1538), 1538);
        assert_eq!(queue_for_bdp(1_000, Nanos(1), f64::NAN, 9), 9);
    }
}
