//! longhaul-monitor-service: the running side of `longhaul monitor` (issue 15). The pure core
//! (`longhaul-monitor`: the mesh, the schedule, outcomes) decides; this crate acts:
//!
//! - [`archive`]: every result and event in SQLite or PostgreSQL, each written once in a
//!   transaction, read back to resume the schedule after a restart.
//!
//! Depends on the engine (the controller's side of jobs), sqlx and tokio.

pub mod archive;

pub use archive::{Archive, ArchiveError};
