//! The pure link model of longhaul's WAN emulator: one direction of a path as
//! a chain of stages driven by virtual time (docs/ARCHITECTURE.md, `crates/link`).
//! Depends on `longhaul-units` (time as [`Nanos`]), rand_chacha, serde and
//! thiserror; `longhaul-topology` compiles a path into its [`LinkConfig`]s and
//! `longhaul-emu` drives it in real time. Start at [`Link`] and [`LinkConfig`].
//!
//! Stages, per TCP segment: random loss (Bernoulli, Gilbert–Elliott with
//! netem's parameters), synthetic cross traffic, a bottleneck byte queue and
//! serializer (drop-tail, CoDel per RFC 8289), propagation delay with
//! FIFO-preserving jitter, reordering as displacement (RFC 4737 style, not
//! netem's delay bypass), duplication; counters per direction. Chained
//! stages follow Mahimahi and Rattan; loss parameters follow tc-netem(8).
//!
//! Contract: no I/O, threads or clock: time is a [`Nanos`] passed in, and
//! every random draw comes from ChaCha8 streams of the configured seed, so a
//! run replays exactly. Input is a [`Record`] (a GSO super-packet described
//! by sizes); output is each segment's fate, exact ([`Link::arrive_each`])
//! or as runs of segments ([`Link::arrive`]). A record of N segments gets
//! exactly the fates of N one-segment records at the same time. The same
//! model serves two drivers: the virtual-time simulator in [`sim`] for tests, and the emulator's
//! real-time TUN loop.

mod codel;
pub mod config;
pub mod link;
mod queue;
pub mod record;
mod rng;
pub mod sim;

pub use config::{
    Aqm, Bottleneck, ConfigError, CrossTraffic, ETHERNET_OVERHEAD, Jitter, LinkConfig, Loss,
    MAX_DELAY, MAX_KM, MAX_RATE_BPS, OnOff, Reorder, delay_from_km, queue_for_bdp,
};
pub use link::{Link, LinkStats};
pub use longhaul_units::Nanos;
pub use queue::Burst;
pub use record::{DropCause, Fate, Record, RecordError, SegmentFate, What, coalesce};
