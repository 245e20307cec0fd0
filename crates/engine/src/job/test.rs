//! The test job: `longhaul test A --to B`. A runs an ordinary test client ([`run_test`]) against B
//! and relays its report to the controller as it goes; a campaign asks each server to start at one
//! instant (`start_at_unix_ns`, held at most [`MAX_HOLD_NS`] ahead).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use longhaul_fleet::JobMessage;
use longhaul_fleet::msg::{MAX_HOLD_NS, TargetFamily};
use longhaul_proto::report::{IntervalReport, Report, Start};
use longhaul_proto::{EndCondition, TestParams};
use longhaul_transfer::auth::Key;
use tracing::{info, warn};

use super::client::JobClient;
use super::conn::{JobConn, family, unexpected, unix_ns};
use super::controllers::{Asked, JobContext, JobDone};
use crate::EngineError;
use crate::address::Family;
use crate::client::{ClientConfig, Observer, run_test};
use crate::control;
use crate::tls::ClientTlsConfig;

/// Runs the test a controller asked for (`m`, a `run_test`), within its limits.
pub(super) fn serve(
    ctl: &mut JobConn,
    asked: &Asked<'_>,
    m: JobMessage,
    cx: &JobContext<'_>,
) -> Result<JobDone, EngineError> {
    let JobMessage::RunTest {
        to,
        port,
        family: fam,
        params,
        start_at_unix_ns,
        encrypt,
    } = m
    else {
        return Err(unexpected(&m, "run_test"));
    };
    let c = asked.controller;
    let start_at = match start_at_unix_ns {
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
    c.spec
        .limits
        .check_test(&params)
        .map_err(|why| c.refuse(why))?;
    let family = family(fam);
    let host = c.reach(&to, port, family)?;
    let _slot = c.slot()?;
    let target = format!("{to} port {port}");
    info!(controller = %c.spec.name, %target, "job: test");
    let cfg = ClientConfig {
        host,
        port,
        family,
        bind: None,
        params,
        timeout: cx.connect_timeout,
        start_at,
        // Without a certificate to check B against: TLS keeps the test's bytes from onlookers.
        encrypt: encrypt.then(ClientTlsConfig::default),
        protocol: crate::client::ServerProtocol::Auto,
        // A job's test holds no key for its target: a target that requires one refuses it.
        key: None,
        // A job's test carries no --pace auto (its parameters came from the controller).
        pace_auto: false,
        // A job's test ends at its end, or when the controller sends StopTest.
        interrupt: Some(Arc::new(AtomicBool::new(false))),
        data_port: None,
    };
    let mut relay = Relay {
        writer: ctl.writer(),
        gone: false,
    };
    let done = AtomicBool::new(false);
    let ran = std::thread::scope(|s| {
        let stop = cfg.interrupt.as_deref().expect("set above");
        let (reader, done) = (&mut *ctl, &done);
        s.spawn(move || watch_for_stop(reader, stop, done));
        let ran = run_test(&cfg, &mut relay);
        done.store(true, Ordering::SeqCst);
        ran
    });
    let report = match ran {
        Ok(r) => r,
        Err(e) => {
            let message = format!("the test to {target} failed: {e}");
            let _ = ctl.send(&JobMessage::Error {
                message: message.clone(),
            });
            control::linger_close(ctl.channel());
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
        what: format!(
            "test to {target}: {:.3} Gbit/s received",
            bits_per_second / 1e9
        ),
    })
}

/// Reads the controller's connection while its test runs, until `done`: a `StopTest` sets `stop`
/// (the test ends as a Ctrl-C ends one, with what ran). A controller that went away, or says
/// anything else, is left to the relay: the test runs to its end.
fn watch_for_stop(ctl: &mut JobConn, stop: &AtomicBool, done: &AtomicBool) {
    while !done.load(Ordering::SeqCst) {
        match ctl.recv_until(Instant::now() + STOP_POLL) {
            Ok(None) => {}
            Ok(Some(JobMessage::StopTest)) => {
                info!("job: the controller stopped the test");
                stop.store(true, Ordering::SeqCst);
                return;
            }
            Ok(Some(m)) => {
                warn!("job: {} while the test runs, ignored", m.kind());
                return;
            }
            Err(_) => return,
        }
    }
}

/// How often the controller's connection is looked at for a `StopTest` (and the job's end).
const STOP_POLL: Duration = Duration::from_millis(100);

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
    /// Run it in TLS.
    pub encrypt: bool,
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
    /// `--encrypt`: the job connection to A in TLS with these settings.
    pub encrypt: Option<ClientTlsConfig>,
    /// Set (by a SIGINT or SIGTERM handler) to have A end the running test now; its report then
    /// holds what ran, marked interrupted. `None`: only the test's end ends it.
    pub interrupt: Option<Arc<AtomicBool>>,
}

/// Asks `cfg.server` to run the test to `cfg.test.to` and returns its report; `obs` sees it as it
/// goes, as with [`run_test`]. The report is A's client's: A is the sender (or with `-R` the
/// receiver).
pub fn run_remote_test(cfg: &RemoteTest, obs: &mut dyn Observer) -> Result<Report, EngineError> {
    cfg.test.params.validate()?;
    let mut job = JobClient::connect(
        &cfg.server,
        cfg.port,
        cfg.family,
        &cfg.key,
        cfg.timeout,
        cfg.encrypt.as_ref(),
    )?;
    job.run_test(&cfg.test, None, cfg.interrupt.as_deref(), obs)
        .map(|(report, _)| report)
}

impl JobClient {
    /// Asks the server to run `test`, starting at `start_at_unix_ns` by the server's clock if
    /// given; returns the report and when the server says it started (Unix ns, its clock). Once
    /// `stop` is set (a signal handler's flag), the server is asked to end the test now.
    pub fn run_test(
        &mut self,
        test: &TestTo,
        start_at_unix_ns: Option<u64>,
        stop: Option<&AtomicBool>,
        obs: &mut dyn Observer,
    ) -> Result<(Report, u64), EngineError> {
        self.ctl.send(&JobMessage::RunTest {
            to: test.to.clone(),
            port: test.port,
            family: test.family,
            params: test.params.clone(),
            start_at_unix_ns,
            encrypt: test.encrypt,
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
        let mut deadline = Instant::now() + patience;
        let mut stop_sent = false;
        loop {
            let watching = stop.filter(|_| !stop_sent);
            let wake = match watching {
                Some(_) => deadline.min(Instant::now() + STOP_POLL),
                None => deadline,
            };
            let Some(m) = self.ctl.recv_until(wake)? else {
                if Instant::now() >= deadline {
                    return Err(EngineError::Timeout(format!(
                        "the test's report from {}",
                        self.server
                    )));
                }
                if watching.is_some_and(|f| f.load(Ordering::SeqCst)) {
                    self.ctl.send(&JobMessage::StopTest)?;
                    stop_sent = true;
                }
                continue;
            };
            deadline = Instant::now() + patience;
            match m {
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
