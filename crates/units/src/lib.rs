//! Units and models for longhaul: byte sizes, bit rates, nanosecond time and
//! distances, how to read them from flags and print them, and the TCP models
//! (BDP, Mathis, responsiveness, HighSpeed, Scalable, CUBIC) and Land Speed
//! Record metric the calculator and the emulator comparisons use. Depends on
//! serde and thiserror only; every other longhaul crate builds on it. Start
//! with [`rate`] and [`size`] (the forms a flag accepts), then [`models`].
//!
//! Conventions (ARCHITECTURE.md): bytes are `u64`; rates are bit/s in `u64`;
//! time is [`Nanos`]; distance is km in `f64`; the LSR metric is bit·m/s in
//! `f64`. Sizes parse the iperf way ("64M" = 64 × 2^20) and print with binary
//! prefixes; rates parse and print with decimal prefixes ("10G" = 10^10 bit/s,
//! "32.6 Gbit/s"). Every `parse_*` returns a [`ParseError`] whose message
//! names the input and the accepted forms.
//!
//! The crate is pure: no I/O, no clock, no randomness. Its items are reachable
//! both through their modules and from the crate root.

pub mod distance;
pub mod error;
pub mod hist;
pub mod models;
mod num;
pub mod rate;
pub mod size;
pub mod time;
pub mod time_unit;

pub use distance::{
    EARTH_MEAN_RADIUS_KM, FIBRE_SPEED_M_PER_S, fibre_delay, fmt_km, great_circle_km,
    parse_distance, path_km,
};
pub use error::{ParseError, ParseErrorKind, Quantity};
pub use models::{
    CUBIC_BETA, CUBIC_C, LSR_IMPROVEMENT, LSR_MAX_KM, LSR_MIN_HOPS, LSR_MIN_KM, LSR_MIN_SECONDS,
    MATHIS_C_DELAYED_ACK, MATHIS_C_PER_ACK, MAX_TCP_WINDOW, SCALABLE_A, SCALABLE_B, bdp_bytes,
    bdp_segments, cubic_avg_window, cubic_k, fmt_lsr, hstcp_window, lsr_beats, lsr_capped_km,
    lsr_metric, lsr_metric_capped, lsr_metric_from_rate, mathis_loss_for_rate, mathis_rate_bps,
    max_window_ceiling_bps, reno_avg_window, responsiveness, scalable_recovery_rtts,
    streams_needed, streams_needed_for_window, window_ceiling_bps,
};
pub use num::group_thousands;
pub use rate::{fmt_rate, fmt_rate_iperf, parse_rate};
pub use size::{fmt_size, fmt_size_iperf, fmt_size_si, parse_size};
pub use time::{Nanos, fmt_duration, parse_duration};
pub use time_unit::TimeUnit;
