//! longhaul-service: what every long-running longhaul service shares.
//!
//! - [`metrics`]: `/metrics` in the Prometheus text format (prometheus-client), from registries or
//!   from a process's own counters at scrape time, on an axum router or a thread of its own;
//! - [`assets`]: a web UI's static files, served with a strict Content-Security-Policy.

pub mod assets;
pub mod metrics;

pub use metrics::{CONTENT_TYPE, Endpoint, Family, Kind, Snapshot, render, route};
pub use prometheus_client;
