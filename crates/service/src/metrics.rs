//! Prometheus exposition for every long-running longhaul process (`server`, the emulator,
//! `testbed serve`, `monitor run`), so that one Prometheus scrapes them all.
//!
//! - [`render`]: a registry in the OpenMetrics text format that Prometheus reads (prometheus-client,
//!   the Prometheus project's own Rust client);
//! - [`Snapshot`]: metrics computed at scrape time from a process's own counters, for processes that
//!   keep plain atomics on their hot paths and should not know about Prometheus;
//! - [`route`]: `GET /metrics` for a service that already runs axum; [`Endpoint`]: the same
//!   endpoint on a thread of its own, for a process without an async runtime.
//!
//! Names follow Prometheus' conventions: `longhaul_<process>_<what>_<unit>`, base units (seconds,
//! bytes, bits per second as `bits_per_second`, ratios 0–1), counters ending in `_total`.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use anyhow::Context;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `registry` in the OpenMetrics text format.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; a collector that fails leaves what it wrote.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// A counter or a gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (the name gets `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// One metric and its samples, each with its labels.
#[derive(Debug, Clone)]
pub struct Family {
    /// Its name, without `_total` for a counter.
    pub name: &'static str,
    /// What it counts.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// (labels, value) per sample.
    pub samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    /// A family of one unlabelled sample.
    pub fn one(name: &'static str, help: &'static str, kind: Kind, value: f64) -> Self {
        Self {
            name,
            help,
            kind,
            samples: vec![(Vec::new(), value)],
        }
    }
}

/// A collector whose metrics a function computes at each scrape.
pub struct Snapshot<F>(pub F);

impl<F> std::fmt::Debug for Snapshot<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Snapshot")
    }
}

impl<F: Fn() -> Vec<Family> + Send + Sync + 'static> Collector for Snapshot<F> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in (self.0)() {
            let kind = match family.kind {
                Kind::Counter => MetricType::Counter,
                Kind::Gauge => MetricType::Gauge,
            };
            let mut metric = encoder.encode_descriptor(family.name, family.help, None, kind)?;
            for (labels, value) in &family.samples {
                let sample = metric.encode_family(labels)?;
                match family.kind {
                    Kind::Counter => ConstCounter::new(*value).encode(sample)?,
                    Kind::Gauge => ConstGauge::new(*value).encode(sample)?,
                }
            }
        }
        Ok(())
    }
}

/// `GET /metrics`: `render()`'s text.
pub fn route<S: Clone + Send + Sync + 'static>(
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> axum::Router<S> {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let render = Arc::clone(&render);
            async move { ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], render()) }
        }),
    )
}

/// A bound `/metrics` listener, served from a thread of its own once [`Endpoint::spawn`]ed (bind
/// first, so "address in use" reaches the user; spawn after any fork, such as `server --daemon`).
#[derive(Debug)]
pub struct Endpoint(TcpListener);

impl Endpoint {
    /// Binds `listen` (port 0: a free port).
    pub fn bind(listen: SocketAddr) -> anyhow::Result<Self> {
        let l = TcpListener::bind(listen)
            .with_context(|| format!("cannot listen on {listen} for /metrics"))?;
        l.set_nonblocking(true)
            .context("set the metrics listener non-blocking")?;
        Ok(Self(l))
    }

    /// The address bound.
    pub fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        self.0.local_addr().context("read the metrics address")
    }

    /// Serves `GET /metrics` (`registry`, rendered at each scrape) from a thread of its own.
    pub fn spawn(self, registry: Arc<Registry>) -> anyhow::Result<()> {
        let app: axum::Router = route(Arc::new(move || render(&registry)));
        let listener = self.0;
        std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_io()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::warn!("metrics endpoint: cannot start its runtime: {e}");
                        return;
                    }
                };
                rt.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => {
                            if let Err(e) = axum::serve(l, app).await {
                                tracing::warn!("metrics endpoint stopped: {e}");
                            }
                        }
                        Err(e) => tracing::warn!("metrics endpoint: {e}"),
                    }
                });
            })
            .context("start the metrics thread")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn a_snapshot_is_computed_at_each_scrape_and_served() {
        let hits = Arc::new(AtomicU64::new(0));
        let mut registry = Registry::default();
        let h = Arc::clone(&hits);
        registry.register_collector(Box::new(Snapshot(move || {
            vec![
                Family::one(
                    "longhaul_test_scrapes",
                    "Scrapes so far.",
                    Kind::Counter,
                    h.fetch_add(1, Ordering::Relaxed) as f64 + 1.0,
                ),
                Family {
                    name: "longhaul_test_queue_bytes",
                    help: "Bytes queued per link.",
                    kind: Kind::Gauge,
                    samples: vec![
                        (vec![("link", "a-b".to_string())], 1500.0),
                        (vec![("link", "b-a".to_string())], 0.0),
                    ],
                },
            ]
        })));
        let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = endpoint.local_addr().unwrap();
        endpoint.spawn(Arc::new(registry)).unwrap();
        let get = || {
            ureq::get(&format!("http://{addr}/metrics"))
                .call()
                .unwrap()
                .into_string()
                .unwrap()
        };
        let first = get();
        assert!(
            first.contains("# TYPE longhaul_test_scrapes counter"),
            "{first}"
        );
        assert!(first.contains("longhaul_test_scrapes_total 1"), "{first}");
        assert!(
            first.contains("longhaul_test_queue_bytes{link=\"a-b\"} 1500"),
            "{first}"
        );
        assert!(first.ends_with("# EOF\n"), "{first}");
        assert!(get().contains("longhaul_test_scrapes_total 2"));
    }
}
