//! longhaul-monitor: the pure core of `longhaul monitor` (issue 15), which watches a mesh of hosts
//! continuously as perfSONAR does: scheduled throughput tests that never overlap on a host,
//! traceroutes, background latency and loss probes, an archive, alerts.
//!
//! - [`mesh`]: the mesh file (hosts, groups, tests and which pairs run them, how often), read and
//!   checked with errors that name the file, the line and the field;
//! - [`schedule`]: when each test of each pair runs: a start randomised within its slip window each
//!   period, throughput tests exclusive per host (never two at once on one host), the longest-waiting
//!   first, and a schedule that resumes from the last runs an archive recorded;
//! - [`rule`], [`alert`]: alert rules (throughput below a share of the pair's baseline, loss or
//!   RTT above, a path change, a host down) and their state: each fires after N consecutive bad
//!   results of a pair and clears after M good ones;
//! - [`outcome`]: what a run found (measured, a host down, failed), its figures, and when a
//!   traceroute's path changed.
//!
//! No I/O, threads, clock or randomness source: the caller passes the time and a seed (a `clippy.toml`
//! bans the clock).

pub mod alert;
pub mod mesh;
pub mod outcome;
pub mod rule;
pub mod schedule;

pub use alert::{AlertEvent, Alerts};
pub use mesh::{Host, Mesh, TestKind, TestSpec};
pub use outcome::{Hop, Measures, Outcome, Status, known_path, path_changed};
pub use rule::{AlertRule, When};
pub use schedule::{Run, Scheduler};
