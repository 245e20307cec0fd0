//! `longhaul calc` as data: one serialisable report per subcommand.
//!
//! [`bdp`] (bandwidth-delay product, window, buffer sysctls, ceilings at common windows), [`mathis`]
//! (Reno's loss–throughput relation, with HighSpeed TCP and CUBIC for comparison), [`responsiveness`]
//! (time to recover from one loss), [`lsr`] (Internet2 Land Speed Record metric) and [`path`] (the first
//! three at once). Each module's `report` takes parsed inputs and returns a report that carries every
//! input and output in base units plus display strings, so the binary only prints it as text or JSON.
//! The formulas live in `longhaul_units::models`, each with its source.

use longhaul_units::Nanos;

pub mod bdp;
mod display;
pub mod lsr;
pub mod mathis;
pub mod path;
pub mod responsiveness;

pub use display::{both_sizes, count, rate_text};

/// Rate, RTT, MSS and streams of a path: the inputs of [`bdp`], [`responsiveness`] and [`path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathInputs {
    /// Bottleneck rate, bit/s (above 0).
    pub rate_bps: u64,
    /// Round-trip time (above 0).
    pub rtt: Nanos,
    /// Segment payload, bytes (at least 1).
    pub mss: u64,
    /// Parallel streams sharing the rate (at least 1).
    pub streams: u32,
}
