//! Where alerts go once the pure rules (`longhaul_monitor::alert`) fire or clear them: the archive
//! (an `alert_fire` or `alert_clear` event in the result's own transaction, written by the
//! runner), the log, the JSON API and dashboard (the alerts firing now), and the mesh's webhook (a
//! JSON POST per alert, from a thread of its own so a slow receiver never holds the monitor).
//!
//! A restarted monitor rebuilds the rules' state by replaying the last day of archived results
//! through them, without announcing anything again: alerts that were firing stay firing.

use std::collections::HashSet;
use std::time::Duration;

use longhaul_monitor::{AlertEvent, Alerts, Measures, Mesh, Outcome, Run, Status};
use serde_json::json;
use tracing::warn;

use crate::archive::{Archive, ArchiveError, path_hops};

/// How far back a restarted monitor replays results into its alert rules.
const REPLAY: Duration = Duration::from_secs(86_400);
/// How long a webhook receiver has to answer.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// An alert event as JSON: what the archive keeps, the webhook receives and the API serves.
pub fn json(mesh: &Mesh, e: &AlertEvent) -> serde_json::Value {
    let rule = &mesh.alerts[e.rule];
    json!({
        "mesh": mesh.name,
        "alert": rule.name,
        "when": rule.when.as_str(),
        "threshold_percent": rule.when.takes_value().then_some(rule.value),
        "state": if e.firing { "firing" } else { "cleared" },
        "test": mesh.tests[e.test].name,
        "src": mesh.hosts[e.from].name,
        "dst": mesh.hosts[e.to].name,
        "value": e.value,
        "baseline": e.baseline,
        "at_ns": e.at_ns,
    })
}

/// The alerts firing now, as JSON.
pub fn firing(mesh: &Mesh, alerts: &Alerts) -> Vec<serde_json::Value> {
    alerts
        .firing()
        .into_iter()
        .map(|(rule, test, from, to)| {
            json!({
                "alert": mesh.alerts[rule].name,
                "when": mesh.alerts[rule].when.as_str(),
                "test": mesh.tests[test].name,
                "src": mesh.hosts[from].name,
                "dst": mesh.hosts[to].name,
            })
        })
        .collect()
}

/// Logs each event and POSTs it to the mesh's webhook, if it has one.
pub fn announce(mesh: &Mesh, events: &[AlertEvent]) {
    for e in events {
        let body = json(mesh, e);
        warn!(
            alert = %mesh.alerts[e.rule].name,
            state = if e.firing { "firing" } else { "cleared" },
            test = %mesh.tests[e.test].name,
            src = %mesh.hosts[e.from].name,
            dst = %mesh.hosts[e.to].name,
            "alert"
        );
        if let Some(url) = mesh.webhook.clone() {
            tokio::task::spawn_blocking(move || {
                let sent = ureq::post(&url).timeout(WEBHOOK_TIMEOUT).send_json(&body);
                if let Err(e) = sent {
                    warn!("alert webhook {url}: {e}");
                }
            });
        }
    }
}

/// Feeds the archive's results of the last day to `alerts`, oldest first, as if they had just
/// been measured (their events are not announced: they were when they happened).
pub async fn replay(
    alerts: &mut Alerts,
    mesh: &Mesh,
    archive: &Archive,
    now_ns: u64,
) -> Result<(), ArchiveError> {
    if mesh.alerts.is_empty() {
        return Ok(());
    }
    let since = now_ns.saturating_sub(REPLAY.as_nanos() as u64);
    let changed: HashSet<(String, String, String, u64)> = archive
        .events(&mesh.name, since)
        .await?
        .into_iter()
        .filter(|e| e.kind == "path_change")
        .filter_map(|e| {
            let w = e.detail["window_ns"].as_u64()?;
            Some((e.test, e.src, e.dst, w))
        })
        .collect();
    for r in archive.results(&mesh.name, since).await? {
        let host = |n: &str| mesh.hosts.iter().position(|h| h.name == n);
        let (Some(test), Some(from), Some(to)) = (
            mesh.tests.iter().position(|t| t.name == r.test),
            host(&r.src),
            host(&r.dst),
        ) else {
            continue;
        };
        let Some(status) = Status::parse(&r.status) else {
            continue;
        };
        let outcome = Outcome {
            run: Run {
                test,
                from,
                to,
                window: r.window_ns,
                planned: r.started_ns,
                exclusive: mesh.tests[test].kind.exclusive(),
            },
            started_ns: r.started_ns,
            ended_ns: r.ended_ns,
            status,
            down_host: None,
            error: None,
            measures: Measures {
                bits_per_second: r.bits_per_second,
                retransmits: r.retransmits,
                rtt_ns: r.rtt_ns,
                loss: r.loss,
                jitter_ns: r.jitter_ns,
                path: r.path.as_deref().map(path_hops),
            },
            detail: String::new(),
        };
        let key = (r.test, r.src, r.dst, r.window_ns);
        alerts.judge(&outcome, changed.contains(&key));
    }
    Ok(())
}
