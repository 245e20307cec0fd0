//! What one run found, as the archive keeps it: how it ended (measured, a host down, or failed), the
//! headline figures its kind measures, and the full report as JSON for anyone who wants more.
//!
//! A host that does not answer is recorded as **down**, with no figures, never as a run that
//! measured zero. Path changes are judged here too ([`path_changed`]), so the monitor, the archive
//! and the alerts agree on what a change is.

use crate::schedule::Run;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// It measured.
    Ok,
    /// A host of the pair did not answer (`down_host` says which): nothing was measured.
    Down,
    /// Both hosts answered but the run failed (a refusal, an error mid-test): the error says why.
    Failed,
}

impl Status {
    /// The archive's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Down => "down",
            Status::Failed => "failed",
        }
    }

    /// The status the archive's word names.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ok" => Some(Status::Ok),
            "down" => Some(Status::Down),
            "failed" => Some(Status::Failed),
            _ => None,
        }
    }
}

/// One traceroute hop: the address that answered at this TTL, `None` where none did (`*`).
pub type Hop = Option<String>;

/// The headline figures of a run; each kind fills its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measures {
    /// Throughput: the receiver's rate, bit/s.
    pub bits_per_second: Option<f64>,
    /// Throughput: the sender's retransmitted segments.
    pub retransmits: Option<u64>,
    /// Throughput: the mean RTT the sender's TCP saw; latency: the median probe RTT. ns.
    pub rtt_ns: Option<u64>,
    /// Latency: the fraction of probes lost (0–1).
    pub loss: Option<f64>,
    /// Latency: the RFC 3550 interarrival jitter of the probes, ns.
    pub jitter_ns: Option<u64>,
    /// Traceroute: the hops in TTL order, the last one the destination if it answered.
    pub path: Option<Vec<Hop>>,
}

/// What the archive keeps of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The run (test, pair, window, planned start).
    pub run: Run,
    /// When it started, ns since the epoch.
    pub started_ns: u64,
    /// When it ended.
    pub ended_ns: u64,
    /// How it ended.
    pub status: Status,
    /// With [`Status::Down`]: the host that did not answer (index into the mesh's hosts).
    pub down_host: Option<usize>,
    /// Why it did not measure (down or failed), one line.
    pub error: Option<String>,
    /// Its figures.
    pub measures: Measures,
    /// Its full report and parameters, JSON.
    pub detail: String,
}

/// Whether the path `new` differs from `old`: at some TTL both have an answering hop and the hops
/// differ, or one path reached its destination at a TTL where the other did not (a route got
/// longer or shorter). A hop that did not answer (`*`) in either path says nothing: routers that
/// rate-limit ICMP make `*` come and go without any route changing.
pub fn path_changed(old: &[Hop], new: &[Hop]) -> bool {
    let differs = old
        .iter()
        .zip(new)
        .any(|(a, b)| matches!((a, b), (Some(a), Some(b)) if a != b));
    let reached = |p: &[Hop]| p.last().and_then(|h| h.clone()).map(|_| p.len());
    differs || (reached(old).is_some() && reached(new).is_some() && reached(old) != reached(new))
}

/// The pair's path as last known from its recent traces, newest first: the newest trace's length,
/// and at each TTL the newest hop that answered there. A router that answers one trace in three
/// is still known, so the trace where it answers as another router shows as a change.
pub fn known_path(newest_first: &[Vec<Hop>]) -> Vec<Hop> {
    let Some(newest) = newest_first.first() else {
        return Vec::new();
    };
    (0..newest.len())
        .map(|ttl| {
            newest_first
                .iter()
                .find_map(|p| p.get(ttl).cloned().flatten())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(hops: &[&str]) -> Vec<Hop> {
        hops.iter()
            .map(|h| (*h != "*").then(|| h.to_string()))
            .collect()
    }

    #[test]
    fn a_path_changes_when_an_answering_hop_differs_or_the_destination_moves() {
        let base = path(&["10.0.0.1", "10.0.1.1", "10.0.2.1"]);
        assert!(!path_changed(&base, &base));
        // A hop that stopped answering is not a change; nor is one that starts again.
        assert!(!path_changed(&base, &path(&["10.0.0.1", "*", "10.0.2.1"])));
        assert!(!path_changed(&path(&["10.0.0.1", "*", "10.0.2.1"]), &base));
        // A different router at a TTL is.
        assert!(path_changed(
            &base,
            &path(&["10.0.0.1", "10.0.9.1", "10.0.2.1"])
        ));
        // The destination reached one hop later (a longer route) is.
        assert!(path_changed(
            &path(&["10.0.0.1", "10.0.2.1"]),
            &path(&["10.0.0.1", "10.0.1.1", "10.0.2.1"])
        ));
        // A trace that never reached the destination says nothing about its length.
        assert!(!path_changed(
            &base,
            &path(&["10.0.0.1", "10.0.1.1", "*", "*"])
        ));
    }

    #[test]
    fn the_known_path_fills_silent_hops_from_earlier_traces() {
        let known = known_path(&[
            path(&["10.0.0.1", "*", "*"]),
            path(&["*", "10.0.1.1", "*"]),
            path(&["10.0.0.9", "10.0.1.9", "10.0.2.1", "10.0.3.1"]),
        ]);
        assert_eq!(known, path(&["10.0.0.1", "10.0.1.1", "10.0.2.1"]));
        assert!(known_path(&[]).is_empty());
    }

    #[test]
    fn statuses_round_trip_through_their_archive_words() {
        for s in [Status::Ok, Status::Down, Status::Failed] {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(Status::parse("zero"), None);
    }
}
