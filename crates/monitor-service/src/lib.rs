//! longhaul-monitor-service: the running side of `longhaul monitor` (issue 15). The pure core
//! (`longhaul-monitor`: the mesh, the schedule, outcomes) decides; this crate acts:
//!
//! - [`archive`]: every result and event in SQLite or PostgreSQL, each written once in a
//!   transaction, read back to resume the schedule after a restart;
//! - [`execute`]: one run through the controller (a test, a probe stream, a trace), and how it
//!   ended: measured, a host down, or failed;
//! - [`runner`]: the loop that asks the schedule what is due, runs it, archives it and moves on;
//! - [`alerting`]: where fired and cleared alerts go (archive, log, API, webhook), and their state
//!   rebuilt after a restart;
//! - [`metrics`]: the Prometheus metrics of the pairs' latest figures, their histograms, how runs
//!   ended; [`http`]: `/metrics` and the JSON API over the archive (`--listen`).
//!
//! Depends on the engine (the controller's side of jobs), sqlx and tokio.

pub mod alerting;
pub mod archive;
pub mod execute;
pub mod http;
pub mod metrics;
pub mod runner;

pub use archive::{Archive, ArchiveError};
pub use execute::{Plan, ProbeShape};
pub use runner::{Runner, Settings};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use longhaul_monitor::Mesh;
use tokio::sync::broadcast;

pub use archive::ResultRow;
pub use runner::Record;

/// The runtime of a monitor: many blocking runs at once (each probe stream holds a thread for its
/// window), so more blocking threads than tokio's default of 512.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(4096)
        .build()
        .context("starting the async runtime")
}

/// `longhaul monitor run`: runs `plan`'s schedule, archiving into `archive_url`, until SIGINT or
/// SIGTERM; serves `/metrics` and the JSON API on `listen` (announced through `listening` once
/// bound); `show` sees every archived outcome as it comes.
pub fn monitor(
    plan: Plan,
    archive_url: &str,
    settings: Settings,
    listen: Option<SocketAddr>,
    listening: impl FnOnce(SocketAddr),
    show: impl FnMut(&Mesh, &Record) + Send + 'static,
) -> anyhow::Result<()> {
    runtime()?.block_on(async move {
        let archive = Archive::open(archive_url)
            .await
            .with_context(|| format!("cannot open the archive {archive_url}"))?;
        let mesh = Arc::new(plan.mesh.clone());
        let metrics = Arc::new(metrics::MonitorMetrics::default());
        let runner = Runner::new(plan, archive.clone(), settings);
        let firing = runner.firing();
        let (live, _) = broadcast::channel(1024);
        if let Some(addr) = listen {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            listening(
                listener
                    .local_addr()
                    .context("read the listening address")?,
            );
            let app = http::router(http::Shared {
                mesh: Arc::clone(&mesh),
                archive: archive.clone(),
                metrics: Arc::clone(&metrics),
                firing: Arc::clone(&firing),
                live: live.clone(),
            });
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::warn!("the monitor's HTTP service stopped: {e}");
                }
            });
        }
        let mut records = runner.subscribe();
        let mut show = show;
        tokio::spawn(async move {
            loop {
                match records.recv().await {
                    Ok(r) => {
                        metrics.record(&mesh, &r);
                        // Nobody watching live is fine.
                        let _ = live.send(r.to_json(&mesh).to_string());
                        show(&mesh, &r);
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!("{n} results were archived but not shown (output too slow)");
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        runner.run(shutdown_signal()).await?;
        Ok(())
    })
}

/// Completes at the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// `longhaul monitor results`: the results of mesh `name` in `archive_url` that started in the
/// last `since`.
pub fn results(archive_url: &str, name: &str, since: Duration) -> anyhow::Result<Vec<ResultRow>> {
    runtime()?.block_on(async {
        let archive = Archive::open(archive_url)
            .await
            .with_context(|| format!("cannot open the archive {archive_url}"))?;
        let now = longhaul_engine::job::unix_ns(std::time::SystemTime::now());
        let rows = archive
            .results(name, now.saturating_sub(since.as_nanos() as u64))
            .await?;
        archive.close().await;
        Ok(rows)
    })
}
