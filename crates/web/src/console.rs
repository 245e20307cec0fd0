//! Consoles (issue 20): the service reads every host's console that the BMC file names
//! ([`longhaul_console`]: TCP and Unix sockets, devices, netconsole on `--netconsole`), archives
//! each line with its boot and mark ([`crate::console_store`]), trims the archive by age and count,
//! and serves `GET /api/v1/console` to the holder of an active booking covering the host (or an
//! admin with a reason), like power. Reading a console is logged in the operations log once per
//! request without `after` (a follower's polls, which carry it, are not).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use jiff::Timestamp;
use longhaul_console::{Captured, Limits, Mark, Source};
use longhaul_testbed::operations::ConsoleLog;
use longhaul_testbed::time::parse_instant;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::console_store::{LineQuery, NewLine};
use crate::power::{account_and_host, admit, decide};
use crate::request::{bad_query, error, internal, respond, wants_xml};
use crate::state::AppState;
use crate::store::Store;

type Shared = Arc<AppState>;

/// How long the archive keeps lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Days a line is kept.
    pub days: u32,
    /// Lines kept per host, newest.
    pub lines: u32,
}

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new().route("/api/v1/console", get(console))
}

/// Starts reading every console `state.power` names (and netconsole on `netconsole`), the
/// archiver and the retention sweep. Returns the tasks, to abort at shutdown.
pub async fn start(
    state: &AppState,
    netconsole: Option<SocketAddr>,
    retention: Retention,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let (tx, rx) = mpsc::channel::<Captured>(10_000);
    let mut tasks = Vec::new();
    let mut by_address = HashMap::new();
    for id in state.power.ids() {
        let Some(h) = state.power.get(id) else {
            continue;
        };
        if let Some(c) = &h.console {
            let source = Source::parse(c).map_err(|e| anyhow::anyhow!("--bmc: {id}: {e}"))?;
            tasks.push(tokio::spawn(longhaul_console::capture::capture(
                id.to_owned(),
                source,
                Limits::default(),
                tx.clone(),
            )));
        }
        if let Some(ip) = h.netconsole {
            by_address.insert(ip, id.to_owned());
        }
    }
    match (netconsole, by_address.is_empty()) {
        (Some(addr), _) => {
            let socket = tokio::net::UdpSocket::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("--netconsole {addr}: {e}"))?;
            tracing::info!(target: "longhaul::console", %addr, hosts = by_address.len(), "netconsole listening");
            tasks.push(tokio::spawn(longhaul_console::capture::netconsole(
                socket,
                by_address,
                Limits::default(),
                tx.clone(),
            )));
        }
        (None, false) => anyhow::bail!(
            "the --bmc file names netconsole addresses: give --netconsole ADDRESS:PORT to receive them"
        ),
        (None, true) => {}
    }
    drop(tx);
    let boots = state.store.console_boots_now().await?.into_iter().collect();
    tasks.push(tokio::spawn(archive(state.store.clone(), rx, boots)));
    tasks.push(tokio::spawn(trim(state.store.clone(), retention)));
    Ok(tasks)
}

/// Writes captured lines in batches (up to 500, or what came within 200 ms), numbering boots: a
/// boot mark starts the host's next.
async fn archive(store: Store, mut rx: mpsc::Receiver<Captured>, mut boots: HashMap<String, u64>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
        while batch.len() < 500 {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(c)) => batch.push(c),
                _ => break,
            }
        }
        let lines: Vec<NewLine> = batch
            .into_iter()
            .map(|c| {
                let boot = boots.entry(c.host.clone()).or_insert(0);
                if c.mark == Some(Mark::Boot) {
                    *boot += 1;
                }
                if matches!(c.mark, Some(Mark::Panic | Mark::Oops)) {
                    tracing::warn!(target: "longhaul::console", host = c.host, mark = ?c.mark, line = c.text, "kernel trouble on a console");
                }
                NewLine { host: c.host, at: c.at, boot: *boot, mark: c.mark.map(Mark::as_str), text: c.text }
            })
            .collect();
        if let Err(e) = store.append_console(&lines).await {
            tracing::warn!(target: "longhaul::console", error = %e, lines = lines.len(), "console lines not archived");
        }
    }
}

/// Every hour (and at start), deletes what retention no longer keeps.
async fn trim(store: Store, retention: Retention) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tick.tick().await;
        let cutoff = longhaul_testbed::time::sat_add(
            Timestamp::now(),
            -jiff::SignedDuration::from_hours(24 * i64::from(retention.days)),
        );
        match store.trim_console(cutoff, retention.lines).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(target: "longhaul::console", lines = n, "console archive trimmed")
            }
            Err(e) => {
                tracing::warn!(target: "longhaul::console", error = %e, "console trim failed")
            }
        }
    }
}

/// `GET /api/v1/console?host=H[&boot=N|-1][&since=T][&after=SEQ][&limit=N][&reason=R]`.
#[derive(Debug, Deserialize)]
pub struct ConsoleQuery {
    host: String,
    /// A boot number, or -1 for the latest, -2 for the one before, ...
    boot: Option<i64>,
    since: Option<String>,
    after: Option<u64>,
    limit: Option<u32>,
    reason: Option<String>,
}

async fn console(
    State(state): State<Shared>,
    headers: HeaderMap,
    q: Result<Query<ConsoleQuery>, QueryRejection>,
) -> Response {
    let xml = wants_xml(&headers);
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return bad_query(&e, xml),
    };
    let (account, host) = match account_and_host(&state, &headers, &q.host).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if state
        .power
        .get(host.as_str())
        .is_none_or(|h| h.console.is_none() && h.netconsole.is_none())
    {
        return error(
            404,
            "no_console",
            format!("{host} has no console (the service's --bmc file names none for it)"),
            xml,
        );
    }
    let since = match q
        .since
        .as_deref()
        .map(|t| parse_instant(t, "since"))
        .transpose()
    {
        Ok(s) => s,
        Err(e) => return error(400, "invalid_time", e.to_string(), xml),
    };
    // A follower's polls (after=) were admitted at their first request; each is still checked.
    let result = if q.after.is_some() { None } else { Some("ok") };
    let admitted = match result {
        Some(r) => admit(
            &state,
            &account,
            &host,
            "console read",
            q.reason.as_deref(),
            r,
            xml,
        )
        .await
        .map(|_| ()),
        None => match decide(&state, &account, &host, q.reason.as_deref(), xml).await {
            Ok((_, Ok(_))) => Ok(()),
            Ok((_, Err(r))) => Err(error(403, r.code, r.message, xml)),
            Err(r) => Err(r),
        },
    };
    if let Err(r) = admitted {
        return r;
    }
    let boots = match state.store.console_boots(host.as_str()).await {
        Ok(b) => b,
        Err(e) => return internal(&e, xml),
    };
    let boot = match q.boot {
        None if since.is_none() && q.after.is_none() => boots.last().map(|b| b.boot),
        None => None,
        Some(n) if n >= 0 => Some(u64::try_from(n).unwrap_or(0)),
        Some(n) => {
            let back = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
            match boots.len().checked_sub(back) {
                Some(i) => Some(boots[i].boot),
                None => {
                    return error(
                        404,
                        "no_such_boot",
                        format!("{host}'s console archive holds {} boots", boots.len()),
                        xml,
                    );
                }
            }
        }
    };
    let query = LineQuery {
        boot,
        after: q.after,
        since,
        limit: q.limit.unwrap_or(1000).clamp(1, 10_000),
    };
    match state.store.console_lines(host.as_str(), &query).await {
        Ok((lines, last_seq)) => respond(
            200,
            &ConsoleLog {
                host: host.to_string(),
                boots,
                lines,
                last_seq,
            },
            xml,
        ),
        Err(e) => internal(&e, xml),
    }
}
