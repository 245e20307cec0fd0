//! Jobs: a controller asks this server to act for it (issue 14). Today one kind of job: a test
//! from this server ("A") to another ("B"), `longhaul test A --to B`, whose report streams back to
//! the controller as it goes. The controller carries no test data: A runs an ordinary test client
//! ([`crate::run_test`]) against B, and only the report crosses the job connection.
//!
//! The conversation is `longhaul_fleet::msg`'s; its handshake is the transfer's mutual
//! challenge–response with a job's own proof and session contexts
//! (`longhaul_transfer::auth::Key::job_proof`, `job_session`), and every frame after it is sealed.
//! A server accepts only the controllers of its `--controllers` file ([`Controllers`]), each known
//! by its key, and checks every request against that controller's limits (`longhaul_fleet::Limits`)
//! and its count of running jobs before it connects anywhere; a refusal names the limit.

use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use longhaul_fleet::controllers::Reach;
use longhaul_fleet::msg::{KEY_ID_LEN, MAX_CLOCK_PROBES, MAX_HOLD_NS, TargetFamily, key_id};
use longhaul_fleet::{ControllerSpec, JOB_VERSION, JobMessage};
use longhaul_proto::report::{IntervalReport, Report, Start};
use longhaul_proto::wire::Preamble;
use longhaul_proto::{EndCondition, TestParams};
use longhaul_transfer::auth::{Key, Role};
use tracing::{info, warn};

use crate::address::{self, Family};
use crate::client::{ClientConfig, Observer, run_test};
use crate::control::{self, Conn};
use crate::transfer::conn::seal;
use crate::{EngineError, random};

/// A job's connection.
type JobConn = Conn<JobMessage>;

/// How long an authenticated controller has to send its request (after its clock probes, if any).
const REQUEST_WAIT: Duration = Duration::from_secs(60);

/// Largest frame on a job connection once both sides are authenticated: a report's start and end
/// list every stream (up to 1024 streams both ways, as a test's own control connection allows).
const AUTHENTICATED_FRAME_LIMIT: usize = 4 << 20;

/// One controller this server accepts.
#[derive(Debug)]
struct Controller {
    spec: ControllerSpec,
    key: Key,
    id: [u8; KEY_ID_LEN],
    running: AtomicU32,
}

/// The controllers a server accepts, with their keys and their running jobs.
#[derive(Debug, Default)]
pub struct Controllers(Vec<Controller>);

impl Controllers {
    /// The controllers of a `--controllers` file, each with its key (read by the caller). Two
    /// controllers with the same key are refused: a job would not know whose limits apply.
    pub fn new(list: Vec<(ControllerSpec, Key)>) -> Result<Self, EngineError> {
        let mut out: Vec<Controller> = Vec::with_capacity(list.len());
        for (spec, key) in list {
            let id = key_id(&key);
            if let Some(other) = out.iter().find(|c| c.id == id) {
                return Err(EngineError::Transfer(format!(
                    "controllers {} and {} have the same key; give each its own (longhaul keygen)",
                    other.spec.name, spec.name
                )));
            }
            out.push(Controller {
                spec,
                key,
                id,
                running: AtomicU32::new(0),
            });
        }
        Ok(Self(out))
    }

    /// Whether any controller is accepted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn by_id(&self, id: &[u8; KEY_ID_LEN]) -> Option<&Controller> {
        self.0.iter().find(|c| c.id == *id)
    }
}

/// A controller's job slot, released on drop.
struct JobSlot<'a>(&'a AtomicU32);

impl Drop for JobSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a served job did, for the server's log.
#[derive(Debug)]
pub(crate) struct JobDone {
    pub(crate) controller: String,
    pub(crate) target: String,
    pub(crate) bits_per_second: f64,
}

/// Serves one job connection (after its preamble): the handshake by `deadline`, the request within
/// [`REQUEST_WAIT`] after it, the checks, the test, the report. Errors are sent to the controller before they are returned.
pub(crate) fn serve(
    conn: TcpStream,
    controllers: &Controllers,
    deadline: Instant,
    connect_timeout: Duration,
) -> Result<JobDone, EngineError> {
    let mut ctl = JobConn::new(conn);
    let result = serve_on(&mut ctl, controllers, deadline, connect_timeout);
    if let Err(e) = &result
        && !matches!(e, EngineError::Peer(_) | EngineError::Closed(_))
    {
        let _ = ctl.send(&JobMessage::Error {
            message: e.to_string(),
        });
        control::linger_close(ctl.socket());
    }
    result
}

fn serve_on(
    ctl: &mut JobConn,
    controllers: &Controllers,
    deadline: Instant,
    connect_timeout: Duration,
) -> Result<JobDone, EngineError> {
    let (version, id, client_nonce) = match ctl.recv_by(deadline, "job hello")? {
        JobMessage::JobHello {
            version,
            key_id,
            client_nonce,
        } => (version, key_id, client_nonce),
        m => return Err(unexpected(&m, "job hello")),
    };
    if version != JOB_VERSION {
        return Err(EngineError::Version {
            ours: JOB_VERSION,
            theirs: version,
        });
    }
    if controllers.is_empty() {
        return Err(EngineError::Transfer(
            "this server takes no jobs (start it with --controllers FILE)".into(),
        ));
    }
    let Some(c) = controllers.by_id(&id) else {
        return Err(EngineError::Transfer(format!(
            "unknown controller: key id {} is not in this server's --controllers file",
            longhaul_transfer::digest::to_hex(&id)
        )));
    };
    let server_nonce = nonce()?;
    ctl.send(&JobMessage::AuthChallenge {
        server_nonce,
        server_proof: c.key.job_proof(Role::Server, &server_nonce, &client_nonce),
    })?;
    let proof = match ctl.recv_by(deadline, "the controller's proof")? {
        JobMessage::AuthResponse { client_proof } => client_proof,
        m => return Err(unexpected(&m, "the controller's proof")),
    };
    let keys = c.key.job_session(&server_nonce, &client_nonce);
    seal(ctl, &keys, Role::Server);
    if c.key
        .verify_job(Role::Client, &server_nonce, &client_nonce, &proof)
        .is_err()
    {
        return Err(EngineError::Transfer(format!(
            "authentication failed: the controller does not hold the key of controller {}",
            c.spec.name
        )));
    }
    ctl.set_frame_limit(AUTHENTICATED_FRAME_LIMIT);
    ctl.send(&JobMessage::AuthOk {
        controller: c.spec.name.clone(),
    })?;
    // An authenticated controller may take longer to ask: a campaign reaches all its servers
    // first, and one that is slow to answer (up to the controller's connect timeout) must not make
    // the others give up on it.
    let asked_by = Instant::now() + REQUEST_WAIT;
    let mut probes = 0;
    let (to, port, family, params, start_at) = loop {
        match ctl.recv_by(asked_by, "the job")? {
            JobMessage::ClockProbe { controller_ns } if probes < MAX_CLOCK_PROBES => {
                probes += 1;
                ctl.send(&JobMessage::ClockReply {
                    controller_ns,
                    server_ns: unix_ns(SystemTime::now()),
                })?;
            }
            JobMessage::RunTest {
                to,
                port,
                family,
                params,
                start_at_unix_ns,
            } => break (to, port, family, params, start_at_unix_ns),
            m => return Err(unexpected(&m, "the job")),
        }
    };
    let start_at = match start_at {
        None => None,
        Some(ns) => {
            let now = unix_ns(SystemTime::now());
            if ns > now.saturating_add(MAX_HOLD_NS) {
                return Err(EngineError::Limit(format!(
                    "start time {:.3} s ahead; a test is held at most {} s for its start",
                    (ns - now) as f64 / 1e9,
                    MAX_HOLD_NS / 1_000_000_000
                )));
            }
            Some(UNIX_EPOCH + Duration::from_nanos(ns))
        }
    };
    let refuse = |why: String| {
        EngineError::Limit(format!(
            "controller {}: {why} (its limits in this server's --controllers file)",
            c.spec.name
        ))
    };
    c.spec.limits.check_test(&params).map_err(refuse)?;
    let family = match family {
        TargetFamily::Any => Family::Any,
        TargetFamily::V4 => Family::V4,
        TargetFamily::V6 => Family::V6,
    };
    // With a target list, the test goes to the addresses checked (never resolved again: a name
    // that resolves elsewhere a moment later cannot slip past), or to a name listed as it is.
    let host = match &c.spec.limits.targets {
        None => to.clone(),
        Some(_) => {
            let addrs: Vec<std::net::IpAddr> = address::resolve(&to, port, family, None)?
                .iter()
                .map(|a| a.ip())
                .collect();
            match c.spec.limits.check_target(&to, &addrs).map_err(refuse)? {
                Reach::Name => to.clone(),
                Reach::Address(a) => a.to_string(),
            }
        }
    };
    let running = c.running.fetch_add(1, Ordering::AcqRel);
    let _slot = JobSlot(&c.running);
    if running >= c.spec.limits.max_jobs {
        return Err(refuse(format!(
            "{running} of its jobs already run here, at most {} at once (max_jobs)",
            c.spec.limits.max_jobs
        )));
    }
    let target = format!("{to} port {port}");
    info!(controller = %c.spec.name, %target, "job: test");
    let cfg = ClientConfig {
        host,
        port,
        family,
        bind: None,
        params,
        timeout: connect_timeout,
        start_at,
    };
    let mut relay = Relay {
        writer: ctl.writer(),
        gone: false,
    };
    let report = match run_test(&cfg, &mut relay) {
        Ok(r) => r,
        Err(e) => {
            let message = format!("the test to {target} failed: {e}");
            let _ = ctl.send(&JobMessage::Error {
                message: message.clone(),
            });
            control::linger_close(ctl.socket());
            // Told already: `Peer` keeps `serve` from sending it twice.
            return Err(EngineError::Peer(message));
        }
    };
    let bits_per_second = report.end.sum_received.bits_per_second;
    ctl.send(&JobMessage::TestDone {
        end: Box::new(report.end),
    })?;
    Ok(JobDone {
        controller: c.spec.name.clone(),
        target,
        bits_per_second,
    })
}

/// Sends the test's report to the controller as it goes. A controller that went away does not
/// stop the test (it runs to its end, within the limits checked before it started).
struct Relay {
    writer: control::Writer<JobMessage>,
    gone: bool,
}

impl Relay {
    fn send(&mut self, m: &JobMessage) {
        if !self.gone
            && let Err(e) = self.writer.send(m)
        {
            warn!("job: the controller is gone ({e}); the test runs to its end");
            self.gone = true;
        }
    }
}

impl Observer for Relay {
    fn start(&mut self, start: &Start) {
        self.send(&JobMessage::TestStarted {
            start: Box::new(start.clone()),
            started_unix_ns: unix_ns(SystemTime::now()),
        });
    }

    fn interval(&mut self, interval: &IntervalReport) {
        self.send(&JobMessage::TestInterval {
            interval: Box::new(interval.clone()),
        });
    }
}

/// The test a server is asked to run: to whom, and what.
#[derive(Debug, Clone)]
pub struct TestTo {
    /// The target server ("B"), as the running server resolves it.
    pub to: String,
    /// B's port.
    pub port: u16,
    /// Address family the running server uses for B.
    pub family: TargetFamily,
    /// The test.
    pub params: TestParams,
}

/// A test that a server runs to another, asked by this controller.
#[derive(Debug, Clone)]
pub struct RemoteTest {
    /// The server that runs the test ("A").
    pub server: String,
    /// Its port.
    pub port: u16,
    /// Address family for reaching A.
    pub family: Family,
    /// The controller's key, as A's `--controllers` file lists it.
    pub key: Key,
    /// The test A runs.
    pub test: TestTo,
    /// Connect timeout, and the deadline of each handshake step.
    pub timeout: Duration,
}

/// Asks `cfg.server` to run the test to `cfg.test.to` and returns its report; `obs` sees it as it
/// goes, as with [`run_test`]. The report is A's client's: A is the sender (or with `-R` the
/// receiver).
pub fn run_remote_test(cfg: &RemoteTest, obs: &mut dyn Observer) -> Result<Report, EngineError> {
    cfg.test.params.validate()?;
    let mut job = JobClient::connect(&cfg.server, cfg.port, cfg.family, &cfg.key, cfg.timeout)?;
    job.run_test(&cfg.test, None, obs).map(|(report, _)| report)
}

/// A controller's authenticated job connection to one server.
pub struct JobClient {
    ctl: JobConn,
    server: String,
    timeout: Duration,
}

/// A server's clock against the controller's, from clock probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// Server clock − controller clock, ns.
    pub offset_ns: i64,
    /// Round trip of the probe it was taken from (the shortest), ns: the offset is good to half.
    pub rtt_ns: u64,
}

impl JobClient {
    /// Connects to `server` and proves this controller's `key` (after the server proved it first).
    pub fn connect(
        server: &str,
        port: u16,
        family: Family,
        key: &Key,
        timeout: Duration,
    ) -> Result<Self, EngineError> {
        let mut last = None;
        let mut sock = None;
        for a in address::resolve(server, port, family, None)? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    sock = Some(s);
                    break;
                }
                Err(source) => {
                    last = Some(EngineError::Connect {
                        target: a.to_string(),
                        source,
                        hint: " (is `longhaul server --controllers FILE` running there, on that \
port?)",
                    })
                }
            }
        }
        let Some(mut sock) = sock else {
            return Err(last.expect("resolve returns at least one address"));
        };
        std::io::Write::write_all(&mut sock, &Preamble::job().encode())
            .map_err(|e| EngineError::io("send the job preamble", e))?;
        let mut ctl = JobConn::new(sock);
        let client_nonce = nonce()?;
        ctl.send(&JobMessage::JobHello {
            version: JOB_VERSION,
            key_id: key_id(key),
            client_nonce,
        })?;
        let (server_nonce, server_proof) = match ctl.recv(timeout, "the server's challenge")? {
            JobMessage::AuthChallenge {
                server_nonce,
                server_proof,
            } => (server_nonce, server_proof),
            m => return Err(unexpected(&m, "the server's challenge")),
        };
        key.verify_job(Role::Server, &server_nonce, &client_nonce, &server_proof)
            .map_err(|_| {
                EngineError::Transfer(format!(
                    "server {server} does not hold this controller's key; nothing was asked"
                ))
            })?;
        ctl.send(&JobMessage::AuthResponse {
            client_proof: key.job_proof(Role::Client, &server_nonce, &client_nonce),
        })?;
        let keys = key.job_session(&server_nonce, &client_nonce);
        seal(&mut ctl, &keys, Role::Client);
        match ctl.recv(timeout, "the server's authentication result")? {
            JobMessage::AuthOk { .. } => {}
            m => return Err(unexpected(&m, "the authentication result")),
        }
        ctl.set_frame_limit(AUTHENTICATED_FRAME_LIMIT);
        Ok(Self {
            ctl,
            server: server.to_string(),
            timeout,
        })
    }

    /// The server's clock offset, from `probes` probes (the one with the shortest round trip).
    pub fn clock_offset(&mut self, probes: u32) -> Result<ClockOffset, EngineError> {
        let mut best: Option<ClockOffset> = None;
        for _ in 0..probes.clamp(1, MAX_CLOCK_PROBES) {
            let sent = unix_ns(SystemTime::now());
            self.ctl.send(&JobMessage::ClockProbe {
                controller_ns: sent,
            })?;
            let server_ns = match self.ctl.recv(self.timeout, "a clock reply")? {
                JobMessage::ClockReply {
                    controller_ns,
                    server_ns,
                } if controller_ns == sent => server_ns,
                m => return Err(unexpected(&m, "a clock reply")),
            };
            let back = unix_ns(SystemTime::now());
            let rtt_ns = back.saturating_sub(sent);
            let midpoint = sent + rtt_ns / 2;
            let sample = ClockOffset {
                offset_ns: (i128::from(server_ns) - i128::from(midpoint))
                    .clamp(i128::from(i64::MIN), i128::from(i64::MAX))
                    as i64,
                rtt_ns,
            };
            if best.is_none_or(|b| sample.rtt_ns < b.rtt_ns) {
                best = Some(sample);
            }
        }
        Ok(best.expect("at least one probe"))
    }

    /// Asks the server to run `test`, starting at `start_at_unix_ns` by the server's clock if
    /// given; returns the report and when the server says it started (Unix ns, its clock).
    pub fn run_test(
        &mut self,
        test: &TestTo,
        start_at_unix_ns: Option<u64>,
        obs: &mut dyn Observer,
    ) -> Result<(Report, u64), EngineError> {
        self.ctl.send(&JobMessage::RunTest {
            to: test.to.clone(),
            port: test.port,
            family: test.family,
            params: test.params.clone(),
            start_at_unix_ns,
        })?;
        // Each report message comes within the test's whole length plus set-up (and the hold for
        // its start); a bytes test has no known length (A ends it at the bytes asked).
        let patience = match test.params.end {
            EndCondition::Time { ns } => {
                Duration::from_nanos(
                    ns.saturating_add(test.params.omit_ns)
                        .saturating_add(MAX_HOLD_NS),
                ) + 4 * self.timeout
            }
            EndCondition::Bytes { .. } => Duration::from_secs(86_400),
        };
        let mut start = None;
        let mut intervals = Vec::new();
        loop {
            match self.ctl.recv(patience, "the test's report")? {
                JobMessage::TestStarted {
                    start: s,
                    started_unix_ns,
                } => {
                    obs.start(&s);
                    start = Some((*s, started_unix_ns));
                }
                JobMessage::TestInterval { interval } => {
                    obs.interval(&interval);
                    intervals.push(*interval);
                }
                JobMessage::TestDone { end } => {
                    let (start, started) = start.ok_or_else(|| {
                        EngineError::Peer(format!(
                            "server {} ended the test before starting it",
                            self.server
                        ))
                    })?;
                    let report = Report {
                        start,
                        intervals,
                        end: *end,
                        error: None,
                    };
                    return Ok((report, started));
                }
                m => return Err(unexpected(&m, "the test's report")),
            }
        }
    }
}

/// Nanoseconds since the Unix epoch (0 before it).
pub fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A fresh 32-byte nonce.
fn nonce() -> Result<[u8; 32], EngineError> {
    let mut n = [0u8; 32];
    random::fill(&mut n, "a handshake nonce")?;
    Ok(n)
}

/// A message that does not belong at this point of the conversation.
fn unexpected(m: &JobMessage, waiting_for: &str) -> EngineError {
    EngineError::Job(longhaul_fleet::JobError::Invalid(format!(
        "unexpected {} while waiting for {waiting_for}",
        m.kind()
    )))
}
