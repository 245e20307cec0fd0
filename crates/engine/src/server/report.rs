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
use longhaul_proto::{Direction, EndCondition, TestParams};

/// Most stream-intervals (streams × intervals) one test's report keeps: the client chooses both
/// (up to 1024 streams, intervals of 10 ms, a day), so without a bound a test could make the
/// server hold gigabytes for its report. 100,000 is 27 hours of one stream at -i 1, or 13 minutes
/// of 128 streams.
pub(super) const MAX_STREAM_INTERVALS: usize = 100_000;

/// What the report of one test needs, gathered as it runs.
#[derive(Debug, Default)]
pub(super) struct Record {
    setups: Vec<SocketSetup>,
    intervals: Vec<IntervalReport>,
    /// Stream-intervals kept, and intervals left out past [`MAX_STREAM_INTERVALS`].
    kept: usize,
    left_out: u64,
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

    /// One interval of this side's streams (left out once the report holds
    /// [`MAX_STREAM_INTERVALS`]).
    pub(super) fn interval(
        &mut self,
        direction: Direction,
        per_direction: u32,
        streams: &[StreamInterval],
    ) {
        if self.kept + streams.len() > MAX_STREAM_INTERVALS {
            self.left_out += 1;
            return;
        }
        self.kept += streams.len();
        self.intervals
            .push(report::interval_report(streams, direction, per_direction));
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
        if self.left_out > 0 {
            end.longhaul.warnings.push(format!(
                "the server's report keeps the first {} intervals ({MAX_STREAM_INTERVALS} \
                 stream-intervals); {} later ones are left out (the totals count them)",
                self.intervals.len(),
                self.left_out
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A client asking for 1024 streams at 10-ms intervals cannot make the report grow past its
    /// bound.
    #[test]
    fn the_report_keeps_a_bounded_number_of_intervals() {
        let streams: Vec<StreamInterval> = (0..1024)
            .map(|stream| StreamInterval {
                stream,
                start_ns: 0,
                end_ns: 10_000_000,
                omitted: false,
                bytes: 1,
                sender: false,
                tcp: None,
                udp: None,
            })
            .collect();
        let mut r = Record::default();
        for _ in 0..200 {
            r.interval(Direction::Forward, 1024, &streams);
        }
        assert_eq!(r.intervals.len(), MAX_STREAM_INTERVALS / 1024);
        assert!(r.kept <= MAX_STREAM_INTERVALS);
        assert_eq!(r.left_out, 200 - (MAX_STREAM_INTERVALS / 1024) as u64);
    }
}
