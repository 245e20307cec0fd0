//! The I/O side of `longhaul lab`, on top of the pure `longhaul-experiments` crate. Depends on
//! `longhaul-experiments`, `longhaul-topology`, `longhaul-units`, `longhaul-engine` (host facts),
//! `longhaul-models` (the `ethtool -k` parser), `longhaul-sys` (the data directory), rusqlite,
//! plotters, jiff and signal-hook; the binary's `lab` subcommand calls it. Start at [`run`]:
//!
//! - [`runner`]: runs an experiment point by point by driving this same binary as subprocesses
//!   (`longhaul emulate up/exec/burst/down` and `longhaul test --json-stream`), records host
//!   facts, emulator fidelity, predictions and derived metrics, and writes the result file after
//!   every point;
//! - [`archive`]: the result archive, one JSON file per run and an SQLite index of the runs;
//! - [`plot`]: PNG and SVG plots (time series per point, one summary per experiment), rendered
//!   from result files only;
//! - [`report`]: a self-contained HTML report of one or more runs;
//! - [`lsr`]: a run's points beside the Land Speed Records of their classes (`lsr = true`).
//!
//! Contract: plots and reports never read live state, only [`ResultFile`]s; an incomplete run is
//! always shown as such.
//!
//! [`ResultFile`]: longhaul_experiments::result::ResultFile

pub mod archive;
pub mod host;
pub mod lsr;
pub mod plot;
pub mod report;
pub mod runner;
pub mod time;

pub use archive::{Archive, RunRow};
pub use runner::{Loaded, Progress, RunOptions, RunOutcome, load, run};
