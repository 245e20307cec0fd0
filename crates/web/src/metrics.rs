//! The service's Prometheus metrics (`GET /metrics`): every request counted by route, method and
//! status with its latency, and the booking requests by outcome (created, conflict: the slot is
//! taken, refused: a rule or policy said no). Recorded by the request middleware of [`crate::http`].

use std::time::Duration;

use longhaul_service::prometheus_client::metrics::counter::Counter;
use longhaul_service::prometheus_client::metrics::family::Family;
use longhaul_service::prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use longhaul_service::prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// The service's metrics.
#[derive(Debug)]
pub struct TestbedMetrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    bookings: Family<Labels, Counter>,
}

fn latency_buckets() -> Histogram {
    // 100 µs to about 3 s, doubling.
    Histogram::new(exponential_buckets(100e-6, 2.0, 15))
}

impl Default for TestbedMetrics {
    fn default() -> Self {
        let m = Self {
            registry: Registry::default(),
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_buckets),
            bookings: Family::default(),
        };
        let mut m = m;
        m.registry.register(
            "longhaul_testbed_requests",
            "HTTP requests answered, by route, method and status.",
            m.requests.clone(),
        );
        m.registry.register(
            "longhaul_testbed_request_duration_seconds",
            "How long requests took to answer, by route and method.",
            m.latency.clone(),
        );
        m.registry.register(
            "longhaul_testbed_booking_requests",
            "Booking requests (POST /api/v1/bookings) by outcome: created, conflict (the slot or a \
             related partition is taken), refused (a rule or the policy), invalid.",
            m.bookings.clone(),
        );
        m
    }
}

impl TestbedMetrics {
    /// Counts one answered request (`route`: the matched route, `None` for no route).
    pub fn request(&self, method: &str, route: Option<&str>, status: u16, took: Duration) {
        let route = route.unwrap_or("unmatched").to_string();
        self.requests
            .get_or_create(&vec![
                ("route", route.clone()),
                ("method", method.to_string()),
                ("status", status.to_string()),
            ])
            .inc();
        self.latency
            .get_or_create(&vec![
                ("route", route.clone()),
                ("method", method.to_string()),
            ])
            .observe(took.as_secs_f64());
        if method == "POST" && route == "/api/v1/bookings" {
            let outcome = match status {
                201 => "created",
                409 => "conflict",
                403 => "refused",
                _ => "invalid",
            };
            self.bookings
                .get_or_create(&vec![("outcome", outcome.to_string())])
                .inc();
        }
    }

    /// The text Prometheus scrapes.
    pub fn render(&self) -> String {
        longhaul_service::render(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_booking_outcomes_are_counted() {
        let m = TestbedMetrics::default();
        let ms = Duration::from_millis(2);
        m.request("POST", Some("/api/v1/bookings"), 201, ms);
        m.request("POST", Some("/api/v1/bookings"), 409, ms);
        m.request("GET", None, 404, ms);
        let text = m.render();
        assert!(text.contains("longhaul_testbed_booking_requests_total{outcome=\"created\"} 1"));
        assert!(text.contains("longhaul_testbed_booking_requests_total{outcome=\"conflict\"} 1"));
        assert!(text.contains(
            "longhaul_testbed_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"} 1"
        ));
        assert!(text.contains("longhaul_testbed_request_duration_seconds_count{"));
    }
}
