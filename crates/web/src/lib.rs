//! The `longhaul testbed` reservation service (issue 6): an HTTP API (axum) over a booking store on
//! SQLite (the embedded default) or PostgreSQL (sqlx), enforcing the rules of the pure
//! `longhaul-testbed` crate. "No double booking, ever" is the database's job: exclusion constraints
//! over claim rows on PostgreSQL, `BEGIN IMMEDIATE` plus a trigger backstop on SQLite
//! (docs/testbed.md §5). The binary's `longhaul testbed serve` and `token add|list|revoke|feed` call
//! [`serve`], [`add_token`], [`list_tokens`], [`revoke_tokens`], [`feed_token`] and
//! [`revoke_feed_token`]. Depends on `longhaul-testbed` (every decision), `longhaul-topology`
//! (discovery), axum, tokio, sqlx, jiff and blake3. Start at [`serve`], then `http` (the routes) and
//! `store`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use jiff::{SignedDuration, Timestamp};
use longhaul_testbed::booking::Role;
use longhaul_testbed::policy::Policy;
use longhaul_testbed::resource::Inventory;

pub mod agent_store;
pub mod agents;
pub mod console;
pub mod console_store;
pub mod http;
pub mod metrics;
mod migrations;
pub mod oplog;
#[cfg(test)]
mod oracle_tests;
pub mod postgres;
pub mod power;
pub mod preview;
pub mod reply;
pub mod request;
pub mod reservation_end;
pub mod rows;
pub mod sqlite;
pub mod state;
pub mod store;
pub mod tokens;
pub mod ui;
pub mod write;

pub use reply::StoreError;
pub use store::Store;
pub use tokens::{RevokeError, TokenInfo, TokenSelector};

/// What `longhaul testbed serve` needs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `postgres://…`, `sqlite://PATH` or a path.
    pub database: String,
    /// Address to listen on (port 0: any free port; the chosen address is
    /// printed).
    pub listen: SocketAddr,
    /// An inventory file of real equipment, added to the discovered
    /// resources.
    pub inventory: Option<PathBuf>,
    /// How long a hold lasts.
    pub hold_ttl: SignedDuration,
    /// How often the background sweep marks expired holds (with an audit
    /// event by `system`).
    pub sweep_every: std::time::Duration,
    /// Whether approvers (and admins) may approve their own bookings
    /// ([`Policy::allow_self_approval`]; off by default).
    pub allow_self_approval: bool,
    /// The BMC file: each host's power endpoint and credentials, and its console
    /// (`docs/testbed.md`, Operations).
    pub bmc: Option<PathBuf>,
    /// Where to receive netconsole datagrams (the BMC file says which address is which host).
    pub netconsole: Option<SocketAddr>,
    /// How long the console archive keeps lines.
    pub console_retention: console::Retention,
    /// How long an accepted host's agent may be silent before the host is unreachable.
    pub agent_timeout: std::time::Duration,
    /// Where host events that concern a booking's holder (unreachable, hung, reachable) are
    /// POSTed as JSON.
    pub webhook: Option<String>,
}

/// The resources: every topology preset, plus `file`.
pub fn load_inventory(file: Option<&std::path::Path>) -> anyhow::Result<Inventory> {
    let topologies = longhaul_topology::presets()
        .iter()
        .map(|p| p.topology())
        .collect::<Result<Vec<_>, _>>()
        .context("topology presets")?;
    let mut inv = Inventory::from_topologies(&topologies)?;
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading inventory {}", path.display()))?;
        inv.extend_from_toml(&text, &path.display().to_string())?;
    }
    Ok(inv)
}

/// The BMC file at `file` (none: no host has power control), each of its hosts a host of
/// `inventory`.
pub fn load_bmc(
    file: Option<&std::path::Path>,
    inventory: &Inventory,
) -> anyhow::Result<longhaul_power::BmcFile> {
    let Some(path) = file else {
        return Ok(longhaul_power::BmcFile::default());
    };
    let bmc = longhaul_power::BmcFile::load(path)?;
    for id in bmc.ids() {
        let known = longhaul_testbed::resource::ResourceId::parse(id)
            .ok()
            .and_then(|r| inventory.get(&r).cloned());
        match known {
            Some(r) if r.kind == longhaul_testbed::resource::ResourceKind::Host => {}
            Some(r) => anyhow::bail!(
                "{}: {id} is a {}, not a host",
                path.display(),
                serde_json::to_value(r.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            ),
            None => anyhow::bail!(
                "{}: {id} is not in the inventory (declare the host in --inventory)",
                path.display()
            ),
        }
    }
    Ok(bmc)
}

/// `inventory` with the hosts admins accepted from their agents' reports that it does not name
/// (they joined while an earlier run of the service ran), named after their hostnames.
async fn with_accepted_hosts(store: &Store, mut inventory: Inventory) -> anyhow::Result<Inventory> {
    let mut joined = false;
    for row in store
        .agent_hosts()
        .await
        .context("reading the registered hosts")?
    {
        let Ok(id) = longhaul_testbed::resource::ResourceId::parse(&row.host) else {
            continue;
        };
        if row.state != "accepted" || inventory.get(&id).is_some() {
            continue;
        }
        let mut resource = longhaul_testbed::resource::Resource::new(
            id,
            longhaul_testbed::resource::ResourceKind::Host,
            row.host.as_str(),
        );
        if let Some(name) = row.facts.hostname {
            resource.name = name;
        }
        if let Err(e) = inventory.insert(resource) {
            tracing::warn!(target: "longhaul::testbed::agents", host = row.host, error = %e,
                "an accepted host cannot join the inventory");
        } else {
            joined = true;
        }
    }
    if joined {
        store
            .sync_inventory(&inventory)
            .await
            .context("writing the inventory")?;
    }
    Ok(inventory)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Runs the service until SIGINT or SIGTERM. Prints
/// `longhaul testbed listening on http://ADDR` on stderr once it accepts.
pub fn serve(opts: &ServeOptions) -> anyhow::Result<()> {
    runtime()?.block_on(serve_async(opts))
}

/// Feeds systemd's watchdog (`WatchdogSec=`; `$WATCHDOG_USEC`) every half interval, each time
/// the database answered a query within that half: a service whose database hangs or whose runtime
/// is wedged stops feeding it, and systemd restarts it. Nothing without a watchdog.
async fn feed_watchdog(store: Store) {
    let mut usec = 0;
    if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
        return;
    }
    let every = std::time::Duration::from_micros(usec / 2);
    loop {
        let answered = tokio::time::timeout(every, store.pending_agents()).await;
        if matches!(answered, Ok(Ok(_)))
            && let Err(e) = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog])
        {
            tracing::warn!(target: "longhaul::testbed", error = %e, "cannot feed the watchdog");
        }
        tokio::time::sleep(every).await;
    }
}

async fn serve_async(opts: &ServeOptions) -> anyhow::Result<()> {
    let inventory = load_inventory(opts.inventory.as_deref())?;
    let power = load_bmc(opts.bmc.as_deref(), &inventory)?;
    let store = Store::open(&opts.database)
        .await
        .with_context(|| format!("opening database {}", redact(&opts.database)))?;
    store
        .sync_inventory(&inventory)
        .await
        .context("writing the inventory")?;
    let inventory = with_accepted_hosts(&store, inventory).await?;
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("listening on {}", opts.listen))?;
    let addr = listener.local_addr()?;
    tracing::info!(target: "longhaul::testbed", %addr, database = store.kind(),
        resources = inventory.len(), "serving");
    eprintln!(
        "longhaul testbed listening on http://{addr} ({} database, {} resources)",
        store.kind(),
        inventory.len()
    );
    // Under systemd (`Type=notify`): ready now.
    let status = format!("serving on http://{addr}");
    if let Err(e) = sd_notify::notify(
        false,
        &[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(&status),
        ],
    ) {
        tracing::warn!(target: "longhaul::testbed", error = %e, "cannot tell systemd it is ready");
    }
    let state = Arc::new(http::AppState {
        store,
        inventory: std::sync::RwLock::new(Arc::new(inventory)),
        policy: Policy {
            allow_self_approval: opts.allow_self_approval,
            ..Policy::default()
        },
        hold_ttl: opts.hold_ttl,
        metrics: metrics::TestbedMetrics::default(),
        power,
        power_busy: std::sync::Mutex::default(),
        agent_timeout: opts.agent_timeout,
        webhook: opts.webhook.clone(),
    });
    let watchdog = tokio::spawn(feed_watchdog(state.store.clone()));
    let sweeper = tokio::spawn(sweep(state.store.clone(), opts.sweep_every));
    let watch = tokio::spawn(agents::watch(Arc::clone(&state)));
    let resets = tokio::spawn(reservation_end::watch(Arc::clone(&state), opts.sweep_every));
    let reloads = tokio::spawn(reload_on_sighup(
        Arc::clone(&state),
        opts.inventory.clone(),
        opts.bmc.clone(),
    ));
    let consoles = console::start(&state, opts.netconsole, opts.console_retention).await?;
    let served = axum::serve(listener, http::router(state))
        .with_graceful_shutdown(shutdown())
        .await
        .context("serving");
    watchdog.abort();
    sweeper.abort();
    watch.abort();
    resets.abort();
    reloads.abort();
    for t in consoles {
        t.abort();
    }
    served
}

/// SIGHUP (`systemctl reload`): reads the inventory file again, with the accepted agents' hosts,
/// checks the BMC file against it, writes it to the database as at start and serves it. A file
/// with an error is logged (file, line, field) and the inventory in force stays. The BMC file and
/// the other settings are read at start only.
async fn reload_on_sighup(
    state: Arc<http::AppState>,
    inventory: Option<std::path::PathBuf>,
    bmc: Option<std::path::PathBuf>,
) {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        let reloaded = async {
            let fresh = load_inventory(inventory.as_deref())?;
            load_bmc(bmc.as_deref(), &fresh)?;
            state
                .store
                .sync_inventory(&fresh)
                .await
                .context("writing the inventory")?;
            with_accepted_hosts(&state.store, fresh).await
        };
        match reloaded.await {
            Ok(fresh) => {
                let count = fresh.len();
                *state.inventory.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(fresh);
                tracing::info!(target: "longhaul::testbed", resources = count, "inventory reloaded (SIGHUP)");
            }
            Err(e) => tracing::error!(
                target: "longhaul::testbed",
                "inventory not reloaded, the one in force stays: {e:#}"
            ),
        }
    }
}

/// Every `every`, marks the holds whose time ran out as expired (audited as
/// `system`). Holds stop blocking at expiry whether or not this ran; the
/// sweep makes their state visible. A failed sweep is logged and retried
/// next time.
async fn sweep(store: Store, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.expire_holds(Timestamp::now()).await {
            Ok(ids) if !ids.is_empty() => {
                tracing::info!(target: "longhaul::testbed::booking", ?ids, "holds expired");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(target: "longhaul::testbed", error = %e, "hold sweep failed"),
        }
    }
}

async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Creates an API token for `user` with `role` in `database` (migrating it
/// first) and returns it. `zone`, an IANA time zone name, becomes the
/// user's display zone (an unknown name is refused).
pub fn add_token(
    database: &str,
    user: &str,
    role: Role,
    zone: Option<&str>,
) -> anyhow::Result<String> {
    if user.trim().is_empty() || user == "system" {
        anyhow::bail!("user name {user:?} is reserved or empty; pick another");
    }
    if let Some(z) = zone {
        longhaul_testbed::time::zone(z).map_err(|e| anyhow::anyhow!("--tz: {e}"))?;
    }
    runtime()?.block_on(async {
        let store = Store::open(database)
            .await
            .with_context(|| format!("opening database {}", redact(database)))?;
        store.add_token(user, role, zone, Timestamp::now()).await
    })
}

/// Every token in `database` (migrating it first), oldest first: user,
/// role, zone, created, a short non-secret id and whether (and when) it was
/// revoked.
pub fn list_tokens(database: &str) -> anyhow::Result<Vec<TokenInfo>> {
    runtime()?.block_on(async {
        let store = Store::open(database)
            .await
            .with_context(|| format!("opening database {}", redact(database)))?;
        Ok(store.tokens().await?)
    })
}

/// Revokes the tokens `sel` names in `database` now; the service refuses
/// them with 401 from the next request on. Returns each named token and
/// whether this call revoked it (`false`: revoked already). An unknown or
/// ambiguous id, or a user with no token, is an error.
pub fn revoke_tokens(
    database: &str,
    sel: TokenSelector<'_>,
) -> anyhow::Result<Vec<(TokenInfo, bool)>> {
    runtime()?.block_on(async {
        let store = Store::open(database)
            .await
            .with_context(|| format!("opening database {}", redact(database)))?;
        store.revoke_tokens(sel, Timestamp::now()).await
    })
}

/// Makes a new calendar feed token for `user` in `database` (replacing
/// theirs, which stops working at once) and returns it. It reads
/// `/api/v1/ical/user/USER.ics` and the resource feeds as `?token=`, and
/// nothing else. A user with no valid API token is an error.
pub fn feed_token(database: &str, user: &str) -> anyhow::Result<String> {
    runtime()?.block_on(async {
        let store = Store::open(database)
            .await
            .with_context(|| format!("opening database {}", redact(database)))?;
        store
            .rotate_feed_token(user, Timestamp::now())
            .await?
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "user {user:?} has no valid API token (see `longhaul testbed token list`); \
                     a feed token belongs to an account"
                )
            })
    })
}

/// Removes `user`'s calendar feed token from `database`; whether there was
/// one.
pub fn revoke_feed_token(database: &str, user: &str) -> anyhow::Result<bool> {
    runtime()?.block_on(async {
        let store = Store::open(database)
            .await
            .with_context(|| format!("opening database {}", redact(database)))?;
        Ok(store.revoke_feed_token(user).await?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("/tmp/x.sqlite"), "/tmp/x.sqlite");
    }

    #[test]
    fn openapi_lists_every_route() {
        let doc: serde_json::Value = serde_json::from_str(http::OPENAPI).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        for (method, path) in http::ROUTES {
            assert!(
                doc["paths"][path][method]["responses"].is_object(),
                "{method} {path}"
            );
        }
        let documented: usize = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p.as_object().unwrap().len())
            .sum();
        assert_eq!(documented, http::ROUTES.len(), "no undocumented extras");
    }

    #[test]
    fn the_default_inventory_has_the_presets() {
        let inv = load_inventory(None).unwrap();
        assert!(
            inv.get(
                &longhaul_testbed::resource::ResourceId::parse("geneva/cern-starlight").unwrap()
            )
            .is_some()
        );
    }
}
