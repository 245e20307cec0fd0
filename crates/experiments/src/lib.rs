//! The pure core of `longhaul lab`: the seeds' experiments as data files and
//! everything about them that needs no I/O. Depends on `longhaul-units`,
//! `longhaul-topology` (an experiment's path), `longhaul-proto` (the test's
//! limits), serde, serde_json, toml and thiserror; `longhaul-lab` runs it.
//! Start at [`spec`].
//!
//! - [`spec`]: the experiment file format (TOML), checked with errors that name
//!   the file, line and field, and expanded into sweep [`Point`]s with their
//!   `longhaul test` and `longhaul emulate` arguments;
//! - [`builtin`]: the built-in experiments (seed 002 Figs. 4, 6, 7, 9, 10, its
//!   UDT comparison with loss added, and seed 003's congestion-control
//!   comparison) scaled to one machine;
//! - [`predict`]: the models beside the measurements (window ÷ RTT ceiling,
//!   BDP knee, Mathis, responsiveness);
//! - [`result`]: the versioned result-file schema and its validator;
//! - [`analysis`]: mean throughput, recovery time after a burst, the
//!   window-sweep check;
//! - [`records`]: the Land Speed Record table, rule checker and leaderboard.
//!
//! Contract: pure. No I/O (the runner reads files and passes their text), no
//! threads, no clock (times are passed in as strings or numbers). The runner,
//! archive, plots and reports live in an I/O crate on top of this API.

pub mod analysis;
pub mod builtin;
mod error;
pub mod predict;
pub mod records;
pub mod result;
pub mod spec;

pub use error::{SpecError, SpecWarning};
pub use spec::{
    Axis, Event, EventPlan, EventRate, PathSource, PathSpec, Point, QueueSize, Series, Spec,
};
