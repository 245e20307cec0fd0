//! The job conversation: a controller (C) asks a server (S, "A") to run a test to another server
//! ("B") and gets the report back as it goes. It opens a connection of kind
//! `longhaul_proto::wire::ConnKind::Job` and speaks these messages in the usual frames:
//!
//! ```text
//! C: JobHello{version, key_id, client_nonce}
//!                     S: AuthChallenge{server_nonce, server_proof} | Error   (unknown key id)
//! C: (checks server_proof) AuthResponse{client_proof}
//!                     S: (checks client_proof) AuthOk{controller} | Error    (sealed from here on)
//! C: ClockProbe{controller_ns} × k (optional, k ≤ MAX_CLOCK_PROBES)
//!                     S: ClockReply{controller_ns, server_ns} for each
//! C: RunTest{to, port, family, params, start_at_unix_ns}
//!                     S: Error (refused: the reason, e.g. a limit)  |
//!                        TestStarted{start, started_unix_ns}, TestInterval{interval} × n,
//! C: StopTest (optional, once the test runs: the controller was interrupted)
//!                        then TestDone{end} | Error
//! ```
//!
//! A third-party copy (`longhaul copy A:PATH B:DEST`) uses two job connections, one to each server:
//!
//! ```text
//! C → B: IssueTicket{dest, overwrite, fsync, encrypt, stripe?}
//!                     B: Ticket{id} | Error                (B's limits, a free job slot)
//! C → A: Copy{to: B, port, family, paths, dest, …, ticket, sealed_key}
//!                     A: Error (refused) | CopyEvent{event} × n, then CopyDone{summary} | Error
//!   (A sends the files to B as a `longhaul send` client whose key is the ticket's)
//!                     B: CopyDone{summary} | Error         (B's receiving side, when it ends)
//! ```
//!
//! `longhaul monitor` asks for two more kinds of run, each answered once:
//!
//! ```text
//! C → A: RunProbe{to: B, port, family, interval_ns, size, count}
//!                     A: ProbeResult{summary} | Error  (A's probe stream to B's server)
//! C → A: Trace{to: B, family, max_hops}
//!                     A: TraceResult{hops} | Error     (A's traceroute to B)
//! ```
//!
//! The ticket's key is derived by B and the controller from their connection's handshake and
//! handed to A sealed for A's connection (`longhaul_transfer::auth`, "Tickets"); B admits one
//! transfer with it, a `send` into the ticket's `dest`, while the controller's connection to B
//! stays open, and reports to the controller what it received and verified.
//!
//! Clock probes let a controller that drives many servers (a campaign) learn each one's clock
//! offset (NTP's way: the reply's server time against the midpoint of the probe's round trip, the
//! probe of the shortest round trip kept) and ask every server to start its test at one instant,
//! each in its own clock (`start_at_unix_ns`). A server holds its test, set up, until then (at
//! most [`MAX_HOLD_NS`] ahead) and reports when it really started.
//!
//! The key id names which of the server's controllers is asking ([`key_id`]): a hash of its key,
//! never the key. The proofs and the session keys are the transfer's (`longhaul_transfer::auth`);
//! the session keys are derived for the job ([`longhaul_transfer::auth::Key::job_session`]), so a
//! job's frames never verify in a transfer or the other way round. Every frame after the proofs is
//! sealed. The server checks the request against the controller's [`crate::Limits`] before it
//! connects anywhere, and refuses with the reason.
//!
//! Everything received is untrusted: [`JobMessage::from_json`] parses and bounds every field (the
//! test parameters with `TestParams::validate`); the reports a controller receives come from a server
//! that proved it holds the controller's key.

use longhaul_proto::frame::{FrameError, Framed};
use longhaul_proto::probe::{ProbeMessage, ProbeSummary};
use longhaul_proto::report::{End, IntervalReport, Start};
use longhaul_proto::{ProtoError, TestParams};
use longhaul_transfer::RelPath;
use longhaul_transfer::auth::TicketId;
use longhaul_transfer::digest::{Digest, hex_bytes};
use longhaul_transfer::manifest::{MAX_STREAMS, check_chunk_size};
use longhaul_transfer::msg::MAX_REQUEST_PATHS;
use longhaul_transfer::report::{Event, Summary};
use longhaul_transfer::stripe::Stripe;
use serde::{Deserialize, Serialize};

/// Version of the job conversation spoken by this build.
pub const JOB_VERSION: u16 = 1;
/// Longest host name or address in a request, and longest free text (error messages).
pub const MAX_TEXT: usize = 4096;
/// Bytes of a key id.
pub const KEY_ID_LEN: usize = 8;
/// Most clock probes on one job connection.
pub const MAX_CLOCK_PROBES: u32 = 64;
/// Longest a server holds a set-up test for its start time: the target server waits for the start
/// within its own set-up deadline (`--handshake-timeout`, 10 s by default), so a start must come
/// well before that.
pub const MAX_HOLD_NS: u64 = 8_000_000_000;

/// The id a controller's key is known by: the first [`KEY_ID_LEN`] bytes of a hash derived from
/// the key (`Key::derive_for("longhaul controller key id v1")`), so it names the key without
/// revealing anything that helps to forge a proof.
pub fn key_id(key: &longhaul_transfer::auth::Key) -> [u8; KEY_ID_LEN] {
    let full = key.derive_for("longhaul controller key id v1");
    let mut id = [0; KEY_ID_LEN];
    id.copy_from_slice(&full[..KEY_ID_LEN]);
    id
}

/// Which address family the server uses to reach the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetFamily {
    /// Whatever the name resolves to.
    Any,
    /// IPv4 only.
    V4,
    /// IPv6 only.
    V6,
}

/// One message of the job conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JobMessage {
    /// The controller's first message.
    JobHello {
        /// [`JOB_VERSION`] of the controller.
        version: u16,
        /// Which controller is asking ([`key_id`]), 16 hex digits.
        #[serde(with = "hex_bytes")]
        key_id: [u8; KEY_ID_LEN],
        /// The controller's fresh nonce.
        #[serde(with = "hex_bytes")]
        client_nonce: [u8; 32],
    },
    /// The server's nonce and its proof of the controller's key.
    AuthChallenge {
        /// The server's fresh nonce.
        #[serde(with = "hex_bytes")]
        server_nonce: [u8; 32],
        /// `proof(Server, server_nonce, client_nonce)`.
        server_proof: Digest,
    },
    /// The controller's proof of its key.
    AuthResponse {
        /// `proof(Client, server_nonce, client_nonce)`.
        client_proof: Digest,
    },
    /// Authenticated: the server knows the controller by this name (from its controllers file).
    AuthOk {
        /// The controller's name on this server.
        controller: String,
    },
    /// What time the controller's clock said when it sent this probe.
    ClockProbe {
        /// Unix time, ns, by the controller's clock.
        controller_ns: u64,
    },
    /// The server's clock when it answered a probe.
    ClockReply {
        /// The probe's `controller_ns`, echoed.
        controller_ns: u64,
        /// Unix time, ns, by the server's clock.
        server_ns: u64,
    },
    /// Run `longhaul test` from this server to `to`:`port` with these parameters.
    RunTest {
        /// The target server's host name or address.
        to: String,
        /// Its port.
        port: u16,
        /// Address family for reaching it.
        family: TargetFamily,
        /// The test, as `longhaul test` would ask it (`rtt_ns` is measured by the server).
        params: TestParams,
        /// Start the test (once set up) at this Unix time, ns, by the server's clock; at most
        /// [`MAX_HOLD_NS`] after the request arrives. `None`: as soon as it is set up.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_at_unix_ns: Option<u64>,
        /// Run the test in TLS (`--encrypt`).
        #[serde(default)]
        encrypt: bool,
    },
    /// The test is set up (the report's `start`, as the server's client sees it).
    TestStarted {
        /// The report's start.
        start: Box<Start>,
        /// When the test started, Unix time, ns, by the server's clock.
        started_unix_ns: u64,
    },
    /// One interval of the running test.
    TestInterval {
        /// The interval, as `longhaul test` reports it.
        interval: Box<IntervalReport>,
    },
    /// The controller asks the running test to end now (its user pressed Ctrl-C): the server
    /// ends it as its time would, and its `TestDone` holds what ran, marked interrupted.
    StopTest,
    /// The test finished: the report's totals.
    TestDone {
        /// The report's end.
        end: Box<End>,
    },
    /// Issue a ticket for one third-party copy into this server's root.
    IssueTicket {
        /// Where the copy lands, relative to this server's root (`None`: the root).
        dest: Option<RelPath>,
        /// Whether the copy may replace existing files that differ.
        overwrite: bool,
        /// Whether each file is made durable before it is renamed into place.
        fsync: bool,
        /// Admit only a transfer in TLS (the controller asked for `--encrypt`).
        #[serde(default)]
        encrypt: bool,
        /// A striped copy: the one stripe the ticket admits.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stripe: Option<Stripe>,
    },
    /// The ticket issued: its key is derived from this connection's handshake
    /// (`Key::ticket_key`). It admits one transfer, started while this connection stays open.
    Ticket {
        /// The ticket's id.
        id: TicketId,
    },
    /// Send these files under this server's root to `to`:`port`, proving the ticket it issued.
    Copy {
        /// The receiving server's host name or address.
        to: String,
        /// Its port.
        port: u16,
        /// Address family for reaching it.
        family: TargetFamily,
        /// What to send, relative to this server's root.
        paths: Vec<RelPath>,
        /// Where it lands under the receiving server's root (as its ticket says).
        dest: Option<RelPath>,
        /// Replace existing files that differ.
        overwrite: bool,
        /// fsync each file before it is renamed into place.
        fsync: bool,
        /// The receiving server's ticket.
        ticket: TicketId,
        /// The ticket's key, sealed for this connection (`Key::seal_ticket`).
        #[serde(with = "hex_bytes")]
        sealed_key: [u8; 32],
        /// Data streams (`None`: from the sending server's window plan).
        streams: Option<u32>,
        /// Target rate of all streams together, bit/s (`longhaul send --rate`).
        rate_bps: u64,
        /// Chunk size (`None`: the sending server chooses).
        chunk_size: Option<u64>,
        /// Congestion control for the data connections.
        congestion: Option<String>,
        /// Seconds without progress after which the copy gives up.
        idle_timeout_s: u64,
        /// Send in TLS (`--encrypt`).
        #[serde(default)]
        encrypt: bool,
        /// A striped copy: the stripe this server sends (its chunk size is the copy's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stripe: Option<Stripe>,
    },
    /// A running copy's event (the sending server's: started, progress, a file done).
    CopyEvent {
        /// The event, as `longhaul send --json-stream` prints it.
        event: Event,
    },
    /// The copy ended, as one server saw it (the sender's summary from A, the receiver's from B).
    CopyDone {
        /// That side's summary.
        summary: Box<Summary>,
    },
    /// Run a probe stream from this server to `to`:`port` (`longhaul monitor`'s latency tests;
    /// `longhaul_proto::probe`).
    RunProbe {
        /// The reflecting server's host name or address.
        to: String,
        /// Its port.
        port: u16,
        /// Address family for reaching it.
        family: TargetFamily,
        /// Time between probes, ns.
        interval_ns: u64,
        /// Bytes of each probe.
        size: u32,
        /// How many probes.
        count: u64,
    },
    /// The probe stream's figures.
    ProbeResult {
        /// What it measured.
        summary: Box<ProbeSummary>,
    },
    /// Trace the route from this server to `to` (Debian's `traceroute`, numeric, one probe per
    /// hop).
    Trace {
        /// The destination's host name or address.
        to: String,
        /// Address family.
        family: TargetFamily,
        /// Most hops to try (1 ..= [`MAX_HOPS`]).
        max_hops: u8,
    },
    /// The hops, in TTL order.
    TraceResult {
        /// At most [`MAX_HOPS`].
        hops: Vec<TraceHop>,
    },
    /// Refused or failed; the sender closes the connection after it.
    Error {
        /// Why, in one line.
        message: String,
    },
}

/// Most hops of a trace (traceroute's own limit is 255; 64 covers any real path).
pub const MAX_HOPS: u8 = 64;

/// One hop of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceHop {
    /// Its TTL, from 1.
    pub ttl: u8,
    /// The address that answered, if any did.
    pub address: Option<std::net::IpAddr>,
    /// Its round trip, ns, if it answered.
    pub rtt_ns: Option<u64>,
}

/// What can be wrong with a job message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The frame itself (length, seal).
    #[error("job frame: {0}")]
    Frame(#[from] FrameError),
    /// Not valid JSON for any message.
    #[error("malformed job message: {0}")]
    BadMessage(String),
    /// Well-formed but out of bounds.
    #[error("invalid job message: {0}")]
    Invalid(String),
}

impl From<ProtoError> for JobError {
    fn from(e: ProtoError) -> Self {
        JobError::Invalid(e.to_string())
    }
}

impl JobMessage {
    /// Parses and validates one message from a frame's JSON body.
    pub fn from_json(bytes: &[u8]) -> Result<Self, JobError> {
        let m: JobMessage =
            serde_json::from_slice(bytes).map_err(|e| JobError::BadMessage(e.to_string()))?;
        m.validate()?;
        Ok(m)
    }

    /// Checks bounds serde cannot express.
    pub fn validate(&self) -> Result<(), JobError> {
        let text = |what: &str, s: &str| {
            if s.len() > MAX_TEXT {
                Err(JobError::Invalid(format!(
                    "{what} longer than {MAX_TEXT} bytes"
                )))
            } else {
                Ok(())
            }
        };
        match self {
            JobMessage::RunTest {
                to, port, params, ..
            } => {
                target(to, *port)?;
                params.validate()?;
                Ok(())
            }
            JobMessage::Copy {
                to,
                port,
                paths,
                streams,
                rate_bps,
                chunk_size,
                congestion,
                idle_timeout_s,
                stripe,
                ..
            } => {
                target(to, *port)?;
                if let Some(s) = stripe {
                    s.validate().map_err(|e| JobError::Invalid(e.to_string()))?;
                }
                if paths.is_empty() || paths.len() > MAX_REQUEST_PATHS {
                    return Err(JobError::Invalid(format!(
                        "a copy names 1 to {MAX_REQUEST_PATHS} paths, not {}",
                        paths.len()
                    )));
                }
                if streams.is_some_and(|n| n == 0 || n > MAX_STREAMS) {
                    return Err(JobError::Invalid(format!("streams: 1 to {MAX_STREAMS}")));
                }
                if *rate_bps > longhaul_proto::msg::MAX_RATE_BPS {
                    return Err(JobError::Invalid(format!("rate {rate_bps} bit/s")));
                }
                if let Some(c) = chunk_size {
                    check_chunk_size(*c).map_err(|e| JobError::Invalid(e.to_string()))?;
                }
                if let Some(c) = congestion
                    && (c.is_empty()
                        || c.len() > 16
                        || !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                {
                    return Err(JobError::Invalid(format!(
                        "congestion control {c:?}: a name such as cubic or bbr"
                    )));
                }
                if !(1..=86_400).contains(idle_timeout_s) {
                    return Err(JobError::Invalid(format!(
                        "idle timeout {idle_timeout_s} s: 1 to 86400"
                    )));
                }
                Ok(())
            }
            JobMessage::IssueTicket {
                stripe: Some(s), ..
            } => s.validate().map_err(|e| JobError::Invalid(e.to_string())),
            JobMessage::RunProbe {
                to,
                port,
                interval_ns,
                size,
                count,
                ..
            } => {
                target(to, *port)?;
                let hello = ProbeMessage::ProbeHello {
                    version: longhaul_proto::probe::PROBE_VERSION,
                    interval_ns: *interval_ns,
                    size: *size,
                    count: *count,
                    synced: false,
                    train: 1,
                };
                ProbeMessage::from_json(&serde_json::to_vec(&hello).expect("serialises"))?;
                Ok(())
            }
            JobMessage::ProbeResult { summary } => {
                let s = summary.as_ref();
                if s.received > s.sent
                    || s.sent > longhaul_proto::probe::MAX_COUNT
                    || !(0.0..=1.0).contains(&s.loss)
                {
                    return Err(JobError::Invalid("probe figures out of range".into()));
                }
                Ok(())
            }
            JobMessage::Trace { to, max_hops, .. } => {
                target(to, 1)?;
                if !(1..=MAX_HOPS).contains(max_hops) {
                    return Err(JobError::Invalid(format!(
                        "max hops {max_hops}: 1 to {MAX_HOPS}"
                    )));
                }
                Ok(())
            }
            JobMessage::TraceResult { hops } => {
                if hops.len() > usize::from(MAX_HOPS)
                    || hops
                        .iter()
                        .enumerate()
                        .any(|(i, h)| usize::from(h.ttl) != i + 1)
                {
                    return Err(JobError::Invalid(
                        "a trace's hops are numbered 1, 2, ... up to 64".into(),
                    ));
                }
                Ok(())
            }
            JobMessage::AuthOk { controller } => text("controller name", controller),
            JobMessage::Error { message } => text("error message", message),
            _ => Ok(()),
        }
    }

    /// The message's `type`, for errors and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            JobMessage::JobHello { .. } => "job_hello",
            JobMessage::AuthChallenge { .. } => "auth_challenge",
            JobMessage::AuthResponse { .. } => "auth_response",
            JobMessage::AuthOk { .. } => "auth_ok",
            JobMessage::ClockProbe { .. } => "clock_probe",
            JobMessage::ClockReply { .. } => "clock_reply",
            JobMessage::RunTest { .. } => "run_test",
            JobMessage::TestStarted { .. } => "test_started",
            JobMessage::TestInterval { .. } => "test_interval",
            JobMessage::StopTest => "stop_test",
            JobMessage::TestDone { .. } => "test_done",
            JobMessage::IssueTicket { .. } => "issue_ticket",
            JobMessage::Ticket { .. } => "ticket",
            JobMessage::Copy { .. } => "copy",
            JobMessage::CopyEvent { .. } => "copy_event",
            JobMessage::CopyDone { .. } => "copy_done",
            JobMessage::RunProbe { .. } => "run_probe",
            JobMessage::ProbeResult { .. } => "probe_result",
            JobMessage::Trace { .. } => "trace",
            JobMessage::TraceResult { .. } => "trace_result",
            JobMessage::Error { .. } => "error",
        }
    }
}

/// A request's target server: a host name or address (no spaces, at most 255 bytes) and a port.
fn target(to: &str, port: u16) -> Result<(), JobError> {
    // Never a leading '-': a server may hand the name to a program (traceroute) as an argument.
    if to.is_empty()
        || to.len() > 255
        || to.starts_with('-')
        || to.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(JobError::Invalid(format!(
            "target host {to:?}: give a host name or address"
        )));
    }
    if port == 0 {
        return Err(JobError::Invalid("target port 0".into()));
    }
    Ok(())
}

impl Framed for JobMessage {
    type Error = JobError;

    fn from_json(bytes: &[u8]) -> Result<Self, JobError> {
        JobMessage::from_json(bytes)
    }

    fn kind(&self) -> &'static str {
        JobMessage::kind(self)
    }

    fn peer_error(&self) -> Option<&str> {
        match self {
            JobMessage::Error { message } => Some(message),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_proto::frame::encode_frame;

    fn params() -> TestParams {
        serde_json::from_value(serde_json::json!({
            "streams": 2, "end": {"time": {"ns": 2_000_000_000u64}}, "interval_ns": 1_000_000_000u64,
            "direction": "forward", "congestion": null, "window": "auto",
            "target_rate_bps": 1_000_000_000u64, "pace_total_bps": null, "write_len": 131072,
            "zerocopy": false, "rtt_ns": 0
        }))
        .expect("test params")
    }

    #[test]
    fn a_run_test_request_goes_through_a_frame_unchanged() {
        let m = JobMessage::RunTest {
            to: "10.201.0.3".into(),
            port: 7067,
            family: TargetFamily::V4,
            params: params(),
            start_at_unix_ns: Some(1_800_000_000_000_000_000),
            encrypt: true,
        };
        let frame = encode_frame(&m);
        let back = JobMessage::from_json(&frame[4..]).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&m).unwrap()
        );
    }

    #[test]
    fn bad_requests_are_refused_with_the_field() {
        let bad = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = serde_json::to_value(JobMessage::RunTest {
                to: "b".into(),
                port: 7067,
                family: TargetFamily::Any,
                params: params(),
                start_at_unix_ns: None,
                encrypt: false,
            })
            .unwrap();
            f(&mut v);
            JobMessage::from_json(v.to_string().as_bytes())
                .unwrap_err()
                .to_string()
        };
        assert!(bad(&|v| v["to"] = "".into()).contains("target host"));
        assert!(bad(&|v| v["to"] = "a b".into()).contains("target host"));
        assert!(bad(&|v| v["port"] = 0.into()).contains("port 0"));
        assert!(bad(&|v| v["params"]["streams"] = 0.into()).contains("streams"));
        assert!(bad(&|v| v["family"] = "v5".into()).contains("malformed"));
        let long = "x".repeat(MAX_TEXT + 1);
        let e = JobMessage::from_json(
            serde_json::json!({"type": "error", "message": long})
                .to_string()
                .as_bytes(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("longer than"), "{e}");
    }

    fn copy() -> serde_json::Value {
        serde_json::to_value(JobMessage::Copy {
            to: "10.201.0.3".into(),
            port: 7067,
            family: TargetFamily::Any,
            paths: vec![RelPath::parse("run42").unwrap()],
            dest: Some(RelPath::parse("incoming").unwrap()),
            overwrite: false,
            fsync: false,
            ticket: TicketId([9; 16]),
            sealed_key: [1; 32],
            streams: Some(4),
            rate_bps: 2_000_000_000,
            chunk_size: None,
            congestion: Some("cubic".into()),
            idle_timeout_s: 60,
            encrypt: false,
            stripe: None,
        })
        .unwrap()
    }

    #[test]
    fn copy_requests_are_checked_field_by_field() {
        let ok = copy();
        assert!(JobMessage::from_json(ok.to_string().as_bytes()).is_ok());
        let bad = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = copy();
            f(&mut v);
            JobMessage::from_json(v.to_string().as_bytes())
                .unwrap_err()
                .to_string()
        };
        assert!(bad(&|v| v["paths"] = serde_json::json!([])).contains("paths"));
        assert!(bad(&|v| v["paths"] = serde_json::json!(["../etc"])).contains("malformed"));
        assert!(bad(&|v| v["dest"] = "/etc".into()).contains("malformed"));
        assert!(bad(&|v| v["streams"] = 0.into()).contains("streams"));
        assert!(bad(&|v| v["chunk_size"] = 3.into()).contains("chunk"));
        assert!(bad(&|v| v["congestion"] = "bbr; rm".into()).contains("congestion"));
        assert!(bad(&|v| v["idle_timeout_s"] = 0.into()).contains("idle"));
        assert!(bad(&|v| v["ticket"] = "00".into()).contains("malformed"));
        assert!(bad(&|v| v["to"] = "".into()).contains("target host"));
        let many: Vec<String> = (0..=MAX_REQUEST_PATHS).map(|i| format!("f{i}")).collect();
        assert!(bad(&|v| v["paths"] = serde_json::json!(many)).contains("paths"));
        let stripe = |index: u32, count: u32| {
            serde_json::json!({"run": "ab".repeat(16), "index": index, "count": count,
                "chunk_size": 8 << 20})
        };
        let mut striped = copy();
        striped["stripe"] = stripe(1, 3);
        assert!(JobMessage::from_json(striped.to_string().as_bytes()).is_ok());
        assert!(bad(&|v| v["stripe"] = stripe(3, 3)).contains("stripe"));
        assert!(bad(&|v| v["stripe"] = stripe(0, 65)).contains("stripe"));
        let ticket = |s: serde_json::Value| {
            serde_json::json!({"type": "issue_ticket", "dest": null, "overwrite": false,
                "fsync": false, "stripe": s})
        };
        assert!(JobMessage::from_json(ticket(stripe(0, 2)).to_string().as_bytes()).is_ok());
        let e = JobMessage::from_json(ticket(stripe(2, 2)).to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("stripe"), "{e}");
    }

    #[test]
    fn key_ids_differ_by_key_and_are_not_the_key() {
        use longhaul_transfer::auth::Key;
        let (a, b) = (Key::from_bytes([1; 32]), Key::from_bytes([2; 32]));
        assert_ne!(key_id(&a), key_id(&b));
        assert_eq!(key_id(&a), key_id(&Key::from_bytes([1; 32])));
        assert_ne!(key_id(&a)[..], [1u8; 32][..KEY_ID_LEN]);
    }
}
