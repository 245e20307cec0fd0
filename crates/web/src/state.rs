//! What every handler of the service shares: the store, the resources, the policy, the hold
//! time and the hosts' power endpoints. Below the HTTP API, the web UI and the preview endpoint, which all take it as axum state.

use jiff::SignedDuration;
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::Inventory;

use crate::store::Store;

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The database.
    pub store: Store,
    /// The resources.
    pub inventory: Inventory,
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
}
