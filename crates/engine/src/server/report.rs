//! `server --json`: the server's own report of each test it served, in the shape of the client's
//! (iperf3's `start`, `intervals`, `end`), gathered as the test runs and sent when it ends, also
//! when the client stopped it early (an interrupted client: `end.longhaul.interrupted`).

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use longhaul_proto::conversation::cookie_hex;
use longhaul_proto::interval::StreamInterval;
use longhaul_proto::msg::{SidePlan, SideResults, SocketSetup};
use longhaul_proto::report::{self, ConnectingTo, IntervalReport, Report};
use longhaul_proto::wire::Cookie;
use longhaul_proto::{EndCondition, TestParams};

/// What the report of one test needs, gathered as it runs.
#[derive(Debug, Default)]
pub(super) struct Record {
    setups: Vec<SocketSetup>,
    intervals: Vec<IntervalReport>,
    local: Option<SideResults>,
    started_unix: u64,
}

impl Record {
    /// The data connections as this server set them up.
    pub(super) fn set_up(&mut self, setups: &[SocketSetup]) {
        self.setups = setups.to_vec();
    }

    /// The streams started now.
    pub(super) fn started(&mut self) {
        self.started_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
    }

    /// One interval of this side's streams.
    pub(super) fn interval(&mut self, params: &TestParams, streams: &[StreamInterval]) {
        self.intervals.push(report::interval_report(
            streams,
            params.direction,
            params.streams,
        ));
    }

    /// This side's totals.
    pub(super) fn results(&mut self, r: &SideResults) {
        self.local = Some(r.clone());
    }

    /// The report, from this server's side (`start.connecting_to` names the client), if the test
    /// ran to its results.
    pub(super) fn report(
        self,
        params: &TestParams,
        side: &SidePlan,
        peer: &str,
        cookie: &Cookie,
        peer_results: Option<&SideResults>,
    ) -> Option<Report> {
        let local = self.local?;
        let client = peer.parse::<SocketAddr>().ok();
        let mut start = crate::client::start_report(
            ConnectingTo {
                host: client
                    .map_or_else(|| peer.to_string(), |a| a.ip().to_canonical().to_string()),
                port: client.map_or(0, |a| a.port()),
            },
            None,
            params,
            self.started_unix,
            &cookie_hex(cookie),
            side,
            None,
            &self.setups,
            &[],
        );
        start.longhaul.server_protocol = "longhaul".into();
        let mut totals = local.streams.clone();
        if let Some(r) = peer_results {
            totals.extend(r.streams.iter().cloned());
        }
        let mut end = report::end_report(
            &totals,
            params.direction,
            params.streams,
            local.cpu,
            peer_results.map(|r| r.cpu).unwrap_or_default(),
        );
        end.longhaul.interrupted = stopped_early(params, &local);
        Some(Report {
            start,
            intervals: self.intervals,
            end,
            error: None,
        })
    }
}

/// Whether the client stopped the test well before its time or byte count (a Ctrl-C): ran less
/// than 90 % of its time, or moved less than its bytes.
fn stopped_early(params: &TestParams, local: &SideResults) -> bool {
    match params.end {
        EndCondition::Time { ns } => {
            let planned = (ns + params.omit_ns) as f64 / 1e9;
            local.cpu.wall_s < 0.9 * planned
        }
        EndCondition::Bytes { bytes } => {
            let moved: u64 = local.streams.iter().map(|s| s.bytes).sum();
            moved < bytes
        }
    }
}
