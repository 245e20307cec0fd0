//! What every handler of the service shares: the store, the resources, the policy, the hold
//! time and the hosts' power endpoints. Below the HTTP API, the web UI and the preview endpoint, which all take it as axum state.

use std::sync::{Arc, RwLock};

use jiff::SignedDuration;
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::Inventory;

use crate::store::Store;

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// The resources: the inventory file's, the presets' and the accepted agents' hosts (which
    /// join while the service runs; see [`AppState::inventory`]).
    pub inventory: RwLock<Arc<Inventory>>,
    /// Booking policy.
    pub policy: Policy,
    /// How long a hold lasts before it must be confirmed.
    pub hold_ttl: SignedDuration,
    /// What `/metrics` serves.
    pub metrics: crate::metrics::TestbedMetrics,
    /// Each host's power endpoint (the `--bmc` file; empty without one).
    pub power: longhaul_power::BmcFile,
    /// The hosts whose power is being changed now (one change at a time per host).
    pub power_busy: std::sync::Mutex<std::collections::HashSet<String>>,
    /// How long an accepted host's agent may be silent before the host is unreachable.
    pub agent_timeout: std::time::Duration,
    /// Where host events for bookings' holders are POSTed.
    pub webhook: Option<String>,
}

impl AppState {
    /// How often agents report: a third of the agent timeout, so that one lost report does not
    /// make a host unreachable.
    pub fn heartbeat(&self) -> std::time::Duration {
        self.agent_timeout / 3
    }

    /// The resources now (a snapshot: a host accepted meanwhile is in the next one).
    pub fn inventory(&self) -> Arc<Inventory> {
        Arc::clone(
            &self
                .inventory
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}
