//! Hosts put back in a clean state when a reservation ends (issue 20): a host whose BMC file entry
//! says `at_end = "off" | "cycle" | "reset"` gets that power change when a booking covering it (of
//! the host or of an ancestor, such as its site) ends — at its end, released early or preempted —
//! so the next holder does not find the last one's kernel, settings or processes. Each change is
//! an entry of the operations log by `system`, with the booking that ended as its grounds.
//!
//! The watch looks every sweep interval at the bookings that ended since its last look; bookings
//! that ended while the service was down are not acted on afterwards (the host may be in use by
//! then).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use longhaul_power::PowerAction;
use longhaul_testbed::booking::{Booking, BookingId, Status};
use longhaul_testbed::resource::ResourceId;

use crate::oplog::NewOperation;
use crate::power::{Failure, carry_out};
use crate::request::now_us;
use crate::rows::system;
use crate::state::AppState;

/// When `b` stopped being used, if it was used and has stopped by `now`.
fn ended(b: &Booking, now: Timestamp) -> Option<Timestamp> {
    if !matches!(
        b.status,
        Status::Confirmed | Status::Released { .. } | Status::Preempted { .. }
    ) {
        return None;
    }
    let end = b.effective_slot()?.end();
    (end <= now).then_some(end)
}

/// Runs the watch until the service stops.
pub async fn watch(state: Arc<AppState>, every: Duration) {
    let hosts: Vec<(ResourceId, PowerAction)> = state
        .power
        .ids()
        .filter_map(|id| {
            let action = state.power.get(id)?.at_end?;
            Some((ResourceId::parse(id).ok()?, action))
        })
        .collect();
    if hosts.is_empty() {
        return;
    }
    let mut since = now_us();
    // The bookings acted on, with their ends: kept an hour past them, so a booking seen twice
    // (listed again at the edge of a look) is acted on once.
    let mut done: BTreeMap<BookingId, Timestamp> = BTreeMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = now_us();
        for (host, action) in &hosts {
            let bookings = match state.store.list(Some(host), Some(since), Some(now)).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(target: "longhaul::testbed::power", error = %e, %host, "reading bookings");
                    continue;
                }
            };
            let over: Vec<&Booking> = bookings
                .iter()
                .filter(|b| b.resource.is_ancestor_or_self_of(host) && !done.contains_key(&b.id))
                .filter(|b| ended(b, now).is_some_and(|e| e > since))
                .collect();
            if over.is_empty() {
                continue;
            }
            for b in &over {
                done.insert(b.id, ended(b, now).unwrap_or(now));
            }
            let names: Vec<String> = over
                .iter()
                .map(|b| format!("booking {} ({}) ended", b.id, b.owner))
                .collect();
            reset(&state, host, *action, &names.join(", ")).await;
        }
        let horizon = now - jiff::SignedDuration::from_hours(1);
        done.retain(|_, end| *end > horizon);
        since = now;
    }
}

/// Does `action` to `host` as `system`, logged with `why`.
async fn reset(state: &AppState, host: &ResourceId, action: PowerAction, why: &str) {
    let Some(hp) = state.power.get(host.as_str()) else {
        return;
    };
    let Some(endpoint) = hp.endpoint.clone() else {
        return;
    };
    let actor = system();
    let what = format!("power {action}");
    let grounds = format!("at_end: {why}");
    let logged = state
        .store
        .log_operation(&NewOperation {
            at: now_us(),
            actor: &actor,
            host: host.as_str(),
            action: &what,
            reason: Some(why),
            allowed: true,
            grounds: &grounds,
            result: "pending",
        })
        .await;
    let seq = match logged {
        Ok(seq) => seq,
        Err(e) => {
            tracing::warn!(target: "longhaul::testbed::power", error = %e, %host, "logging a reset");
            return;
        }
    };
    match carry_out(state, host, endpoint, hp.wait, action, seq).await {
        Ok(out) => {
            tracing::info!(target: "longhaul::testbed::power", %host, %action, state = %out.state, seq, why, "reset at a reservation's end");
        }
        Err(Failure::Busy(msg) | Failure::Bmc(msg)) => {
            tracing::warn!(target: "longhaul::testbed::power", %host, %action, error = %msg, seq, why, "reset at a reservation's end failed");
        }
        Err(Failure::Store(e)) => {
            tracing::warn!(target: "longhaul::testbed::power", error = %e, %host, seq, "logging a reset");
        }
    }
}
