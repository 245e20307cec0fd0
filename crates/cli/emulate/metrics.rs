//! `emulate up --metrics ADDR`: the emulator's counters for Prometheus, per link and direction
//! (`longhaul_emulator_*`, labels `testbed`, `link`, `direction`): bytes and packets offered and
//! delivered, drops by cause, the queue now, how late packets left (the fidelity the reports
//! judge), and whether the link is up. Read at each scrape through the testbed's own control
//! socket (the same status `emulate status` shows), so the forwarders are not touched.

use std::net::SocketAddr;
use std::sync::Arc;

use longhaul_emu::session::{self as state, Request};
use longhaul_service::prometheus_client::registry::Registry;
use longhaul_service::{Endpoint, Family, Kind, Snapshot};
use serde_json::Value;

/// Serves the metrics of testbed `name` at `listen` from a thread of this process.
pub(crate) fn serve(listen: SocketAddr, name: &str) -> anyhow::Result<()> {
    let endpoint = Endpoint::bind(listen)?;
    let at = endpoint.local_addr()?;
    let name = name.to_string();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(move || {
        match state::request(&name, Request::Status) {
            Ok(doc) => families(&name, &doc),
            // The testbed is going down: nothing to report.
            Err(_) => Vec::new(),
        }
    })));
    endpoint.spawn(Arc::new(registry))?;
    eprintln!("emulate: metrics at http://{at}/metrics");
    Ok(())
}

/// One direction of one link in a status document.
struct Direction<'a> {
    link: String,
    direction: &'static str,
    up: bool,
    stats: &'a Value,
}

fn directions(doc: &Value) -> Vec<Direction<'_>> {
    let mut out = Vec::new();
    if let Some(links) = doc["network"]["links"].as_array() {
        for l in links {
            for direction in ["a_to_b", "b_to_a"] {
                out.push(Direction {
                    link: l["name"].as_str().unwrap_or("?").to_string(),
                    direction,
                    up: l["up"].as_bool().unwrap_or(true),
                    stats: &l[direction],
                });
            }
        }
    } else {
        for direction in ["a_to_b", "b_to_a"] {
            out.push(Direction {
                link: "path".into(),
                direction,
                up: doc["link_up"].as_bool().unwrap_or(true),
                stats: &doc["links"][direction],
            });
        }
    }
    out
}

/// The families of a status document.
fn families(testbed: &str, doc: &Value) -> Vec<Family> {
    let dirs = directions(doc);
    let labels = |d: &Direction<'_>| {
        vec![
            ("testbed", testbed.to_string()),
            ("link", d.link.clone()),
            ("direction", d.direction.to_string()),
        ]
    };
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let family = |name, help, kind, value: &dyn Fn(&Direction<'_>) -> f64| Family {
        name,
        help,
        kind,
        samples: dirs.iter().map(|d| (labels(d), value(d))).collect(),
    };
    let mut out = vec![
        family(
            "longhaul_emulator_link_bytes",
            "Bytes offered to the link.",
            Kind::Counter,
            &|d| num(&d.stats["link"]["bytes"]),
        ),
        family(
            "longhaul_emulator_link_delivered_bytes",
            "Bytes the link delivered (rate() of it is the link's current rate).",
            Kind::Counter,
            &|d| num(&d.stats["link"]["delivered_bytes"]),
        ),
        family(
            "longhaul_emulator_link_packets",
            "Packets (segments) offered to the link.",
            Kind::Counter,
            &|d| num(&d.stats["link"]["segments"]),
        ),
        family(
            "longhaul_emulator_link_delivered_packets",
            "Packets the link delivered.",
            Kind::Counter,
            &|d| num(&d.stats["link"]["delivered"]),
        ),
        family(
            "longhaul_emulator_link_queue_bytes",
            "Bytes in the link's queue now.",
            Kind::Gauge,
            &|d| num(&d.stats["queue_bytes_now"]),
        ),
        family(
            "longhaul_emulator_link_queue_max_bytes",
            "The most bytes the link's queue has held.",
            Kind::Gauge,
            &|d| num(&d.stats["link"]["queue_max_bytes"]),
        ),
        family(
            "longhaul_emulator_link_up",
            "1 when the link is up, 0 when cut.",
            Kind::Gauge,
            &|d| f64::from(u8::from(d.up)),
        ),
        family(
            "longhaul_emulator_link_duplicated_packets",
            "Packets the link duplicated.",
            Kind::Counter,
            &|d| num(&d.stats["link"]["duplicates"]),
        ),
        family(
            "longhaul_emulator_link_reordered_packets",
            "Packets the link reordered.",
            Kind::Counter,
            &|d| num(&d.stats["link"]["reordered"]),
        ),
    ];
    let mut drops = Vec::new();
    let mut late = Vec::new();
    for d in &dirs {
        for (cause, value) in [
            ("queue", num(&d.stats["link"]["drop_queue"])),
            ("random", num(&d.stats["link"]["drop_random"])),
            ("burst", num(&d.stats["link"]["drop_burst"])),
            ("aqm", num(&d.stats["link"]["drop_aqm"])),
            ("cut", num(&d.stats["cut_drops"])),
        ] {
            let mut l = labels(d);
            l.push(("cause", cause.to_string()));
            drops.push((l, value));
        }
        for (q, key) in [("0.5", "p50_ns"), ("0.99", "p99_ns"), ("1", "max_ns")] {
            let mut l = labels(d);
            l.push(("quantile", q.to_string()));
            late.push((l, num(&d.stats["lateness"][key]) / 1e9));
        }
    }
    out.push(Family {
        name: "longhaul_emulator_link_drops",
        help: "Packets the link dropped, by cause (queue overflow, random loss, burst loss, AQM, cut).",
        kind: Kind::Counter,
        samples: drops,
    });
    out.push(Family {
        name: "longhaul_emulator_link_lateness_seconds",
        help: "How late packets left the link against their schedule (quantiles since it came up).",
        kind: Kind::Gauge,
        samples: late,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_network_status_becomes_metrics_per_link_and_direction() {
        let doc = serde_json::json!({"network": {"links": [{
            "name": "cern-ams", "up": false,
            "a_to_b": {"link": {"bytes": 3000, "delivered_bytes": 1500, "drop_random": 1,
                "drop_queue": 0, "segments": 2, "delivered": 1}, "queue_bytes_now": 0,
                "cut_drops": 4, "lateness": {"p50_ns": 1000, "p99_ns": 2000000, "max_ns": 3000000}},
            "b_to_a": {"link": {}, "lateness": {}},
        }]}});
        let f = families("sc", &doc);
        let get = |name: &str, extra: Option<(&str, &str)>| {
            let fam = f.iter().find(|x| x.name == name).unwrap();
            fam.samples
                .iter()
                .find(|(l, _)| {
                    l.contains(&("direction", "a_to_b".into()))
                        && extra.is_none_or(|(k, v)| l.contains(&(k, v.to_string())))
                })
                .unwrap()
                .1
        };
        assert_eq!(get("longhaul_emulator_link_delivered_bytes", None), 1500.0);
        assert_eq!(get("longhaul_emulator_link_up", None), 0.0);
        assert_eq!(
            get("longhaul_emulator_link_drops", Some(("cause", "random"))),
            1.0
        );
        assert_eq!(
            get("longhaul_emulator_link_drops", Some(("cause", "cut"))),
            4.0
        );
        assert_eq!(
            get(
                "longhaul_emulator_link_lateness_seconds",
                Some(("quantile", "0.99"))
            ),
            0.002
        );
    }
}
