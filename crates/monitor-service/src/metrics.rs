//! The monitor's Prometheus metrics: per pair, the latest figures of each test (gauges) and their
//! distribution since the monitor started (histograms), how runs ended and how often paths changed
//! (counters). Updated as each outcome is archived; served at `/metrics`.

use std::sync::atomic::AtomicU64;

use longhaul_monitor::{Mesh, Status};
use longhaul_service::prometheus_client::metrics::counter::Counter;
use longhaul_service::prometheus_client::metrics::family::Family;
use longhaul_service::prometheus_client::metrics::gauge::Gauge;
use longhaul_service::prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use longhaul_service::prometheus_client::registry::Registry;

use crate::runner::Record;

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// The metrics of one monitor.
#[derive(Debug)]
pub struct MonitorMetrics {
    registry: Registry,
    throughput: Family<Labels, FloatGauge>,
    retransmits: Family<Labels, FloatGauge>,
    rtt: Family<Labels, FloatGauge>,
    loss: Family<Labels, FloatGauge>,
    jitter: Family<Labels, FloatGauge>,
    down: Family<Labels, FloatGauge>,
    last: Family<Labels, FloatGauge>,
    runs: Family<Labels, Counter>,
    path_changes: Family<Labels, Counter>,
    throughput_hist: Family<Labels, Histogram>,
    rtt_hist: Family<Labels, Histogram>,
    loss_hist: Family<Labels, Histogram>,
}

fn throughput_buckets() -> Histogram {
    // 1 Mbit/s to 316 Gbit/s, a half decade apart.
    Histogram::new(exponential_buckets(1e6, 10f64.sqrt(), 12))
}

fn rtt_buckets() -> Histogram {
    // 50 µs to about 3 s, doubling.
    Histogram::new(exponential_buckets(50e-6, 2.0, 16))
}

fn loss_buckets() -> Histogram {
    Histogram::new([0.0, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.5, 1.0])
}

impl Default for MonitorMetrics {
    fn default() -> Self {
        let mut m = Self {
            registry: Registry::default(),
            throughput: Family::default(),
            retransmits: Family::default(),
            rtt: Family::default(),
            loss: Family::default(),
            jitter: Family::default(),
            down: Family::default(),
            last: Family::default(),
            runs: Family::default(),
            path_changes: Family::default(),
            throughput_hist: Family::new_with_constructor(throughput_buckets),
            rtt_hist: Family::new_with_constructor(rtt_buckets),
            loss_hist: Family::new_with_constructor(loss_buckets),
        };
        let r = &mut m.registry;
        r.register(
            "longhaul_monitor_latest_throughput_bits_per_second",
            "The latest throughput a pair measured (the receiver's rate).",
            m.throughput.clone(),
        );
        r.register(
            "longhaul_monitor_latest_retransmits",
            "Retransmitted segments in a pair's latest throughput test.",
            m.retransmits.clone(),
        );
        r.register(
            "longhaul_monitor_latest_rtt_seconds",
            "A pair's latest RTT: the median probe RTT of a latency test, the mean TCP RTT of a \
             throughput test.",
            m.rtt.clone(),
        );
        r.register(
            "longhaul_monitor_latest_loss_ratio",
            "The fraction of probes lost in a pair's latest latency run.",
            m.loss.clone(),
        );
        r.register(
            "longhaul_monitor_latest_jitter_seconds",
            "RFC 3550 jitter of a pair's latest latency run.",
            m.jitter.clone(),
        );
        r.register(
            "longhaul_monitor_pair_down",
            "1 when a pair's latest run found a host not answering, else 0.",
            m.down.clone(),
        );
        r.register(
            "longhaul_monitor_latest_result_timestamp_seconds",
            "When a pair's latest run ended (Unix time).",
            m.last.clone(),
        );
        r.register(
            "longhaul_monitor_runs",
            "Runs archived, by test, kind and how they ended (ok, down, failed).",
            m.runs.clone(),
        );
        r.register(
            "longhaul_monitor_path_changes",
            "Path changes found by a pair's traces.",
            m.path_changes.clone(),
        );
        r.register(
            "longhaul_monitor_throughput_bits_per_second",
            "Throughput measured by a pair's runs since the monitor started.",
            m.throughput_hist.clone(),
        );
        r.register(
            "longhaul_monitor_rtt_seconds",
            "RTT measured by a pair's runs since the monitor started.",
            m.rtt_hist.clone(),
        );
        r.register(
            "longhaul_monitor_loss_ratio",
            "Probe loss of a pair's latency runs since the monitor started.",
            m.loss_hist.clone(),
        );
        m
    }
}

impl MonitorMetrics {
    /// Counts an archived outcome.
    pub fn record(&self, mesh: &Mesh, r: &Record) {
        let o = &r.outcome;
        let test = &mesh.tests[o.run.test];
        let pair: Labels = vec![
            ("test", test.name.clone()),
            ("src", mesh.hosts[o.run.from].name.clone()),
            ("dst", mesh.hosts[o.run.to].name.clone()),
        ];
        self.runs
            .get_or_create(&vec![
                ("test", test.name.clone()),
                ("kind", test.kind.as_str().to_string()),
                ("status", o.status.as_str().to_string()),
            ])
            .inc();
        self.last.get_or_create(&pair).set(o.ended_ns as f64 / 1e9);
        self.down
            .get_or_create(&pair)
            .set(if o.status == Status::Down { 1.0 } else { 0.0 });
        if r.change.is_some() {
            self.path_changes.get_or_create(&pair).inc();
        }
        if o.status != Status::Ok {
            return;
        }
        let m = &o.measures;
        if let Some(b) = m.bits_per_second {
            self.throughput.get_or_create(&pair).set(b);
            self.throughput_hist.get_or_create(&pair).observe(b);
        }
        if let Some(n) = m.retransmits {
            self.retransmits.get_or_create(&pair).set(n as f64);
        }
        if let Some(rtt) = m.rtt_ns {
            let s = rtt as f64 / 1e9;
            self.rtt.get_or_create(&pair).set(s);
            self.rtt_hist.get_or_create(&pair).observe(s);
        }
        if let Some(l) = m.loss {
            self.loss.get_or_create(&pair).set(l);
            self.loss_hist.get_or_create(&pair).observe(l);
        }
        if let Some(j) = m.jitter_ns {
            self.jitter.get_or_create(&pair).set(j as f64 / 1e9);
        }
    }

    /// The text Prometheus scrapes.
    pub fn render(&self) -> String {
        longhaul_service::render(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use longhaul_monitor::{Measures, Outcome, Run};

    use super::*;

    /// Two hosts, one throughput test a -> b.
    fn mesh() -> Mesh {
        Mesh::from_toml(
            "[[host]]\nname = \"a\"\naddress = \"10.0.0.1\"\n[[host]]\nname = \"b\"\n\
             address = \"10.0.0.2\"\n[[test]]\nname = \"bw\"\nkind = \"throughput\"\nfrom = [\"a\"]\n\
             to = [\"b\"]\n",
            "m.toml",
        )
        .unwrap()
    }

    /// A measured run of that test with `measures`.
    fn outcome(measures: Measures) -> Outcome {
        Outcome {
            run: Run {
                test: 0,
                from: 0,
                to: 1,
                window: 0,
                planned: 0,
                exclusive: true,
            },
            started_ns: 1_000_000_000,
            ended_ns: 2_000_000_000,
            status: Status::Ok,
            down_host: None,
            error: None,
            measures,
            detail: String::new(),
        }
    }

    #[test]
    fn an_outcome_sets_its_pairs_latest_figures_and_a_down_host_sets_none() {
        let mesh = mesh();
        let m = MonitorMetrics::default();
        let mut o = outcome(Measures {
            bits_per_second: Some(9.5e8),
            retransmits: Some(3),
            rtt_ns: Some(120_000_000),
            ..Measures::default()
        });
        m.record(
            &mesh,
            &Record {
                outcome: o.clone(),
                change: None,
                alerts: Vec::new(),
            },
        );
        let text = m.render();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(name) && l.contains("test="))
                .unwrap_or_else(|| panic!("{name} in:\n{text}"))
                .to_string()
        };
        assert!(
            line("longhaul_monitor_latest_throughput_bits_per_second").ends_with(" 950000000.0")
        );
        assert!(line("longhaul_monitor_latest_rtt_seconds").ends_with(" 0.12"));
        assert!(text.contains("longhaul_monitor_runs_total{"), "{text}");
        assert!(
            text.contains("longhaul_monitor_throughput_bits_per_second_count{"),
            "{text}"
        );
        // Down: the latest figures stay as they were, the pair is marked down.
        o.status = Status::Down;
        o.down_host = Some(1);
        o.measures = Measures::default();
        m.record(
            &mesh,
            &Record {
                outcome: o,
                change: None,
                alerts: Vec::new(),
            },
        );
        let text = m.render();
        assert!(
            text.lines()
                .any(|l| l.starts_with("longhaul_monitor_pair_down{") && l.ends_with(" 1.0")),
            "{text}"
        );
        assert!(text.contains("status=\"down\"} 1"), "{text}");
    }

    #[test]
    fn every_monitor_metric_the_packaged_rules_and_dashboard_name_exists() {
        let mesh = mesh();
        let m = MonitorMetrics::default();
        // One outcome carrying every figure, with a path change: every family gets a sample.
        let o = outcome(Measures {
            bits_per_second: Some(1e9),
            retransmits: Some(1),
            rtt_ns: Some(1),
            loss: Some(0.0),
            jitter_ns: Some(1),
            path: Some(vec![]),
        });
        let change = crate::archive::PathChange {
            before: vec![],
            after: vec![],
        };
        m.record(
            &mesh,
            &Record {
                outcome: o,
                change: Some(change),
                alerts: Vec::new(),
            },
        );
        let declared: Vec<String> = m
            .render()
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|r| r.split(' ').next().unwrap().to_string())
            .collect();
        for text in [
            include_str!("../../../packaging/prometheus/longhaul.rules.yml"),
            include_str!("../../../packaging/grafana/longhaul-monitor.json"),
        ] {
            for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if !word.starts_with("longhaul_monitor_") {
                    continue;
                }
                let base = ["_total", "_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s))
                    .unwrap_or(word);
                assert!(declared.iter().any(|d| d == base), "{word}: {declared:?}");
            }
        }
    }
}
