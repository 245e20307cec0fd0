//! One run, carried out through the controller: the monitor connects to the pair's sending host as
//! a controller (its key in that server's `--controllers` file) and asks it for the test, the
//! probe stream or the trace, exactly as `longhaul test A --to B` would. Blocking; the runner calls
//! it on a thread of its own.
//!
//! How a run ended is judged here: a sending host whose server does not answer is **down**, and so
//! is a receiving host the sender cannot connect to; any other error is a **failure**. Neither is
//! ever recorded as a measurement of zero.

use std::time::{Duration, SystemTime};

use longhaul_engine::job::{JobClient, TestTo, unix_ns};
use longhaul_engine::{EngineError, Family, Quiet};
use longhaul_fleet::msg::TargetFamily;
use longhaul_monitor::{Hop, Measures, Mesh, Outcome, Run, Status, TestKind};
use longhaul_proto::TestParams;
use longhaul_transfer::auth::Key;
use serde_json::json;

/// Most hops a trace tries.
pub const TRACE_MAX_HOPS: u8 = 30;

/// The probe streams' shape (`monitor run --probe-interval/--probe-size`).
#[derive(Debug, Clone, Copy)]
pub struct ProbeShape {
    /// Time between probes.
    pub interval: Duration,
    /// Bytes of each probe.
    pub size: u32,
}

impl Default for ProbeShape {
    /// Ten probes a second of 100 bytes, as OWAMP's usual streams.
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(100),
            size: 100,
        }
    }
}

/// What every run needs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The mesh.
    pub mesh: Mesh,
    /// Each throughput test's parameters (by test index; `None` for other kinds).
    pub params: Vec<Option<TestParams>>,
    /// The monitor's controller key.
    pub key: Key,
    /// Connect timeout and the wait for each handshake step.
    pub timeout: Duration,
    /// The probe streams' shape.
    pub probe: ProbeShape,
}

/// Time left for a latency run's probes: until its window ends, less a margin for set-up and the
/// last replies (this, or a fifth of a short window), so the next window's session starts on time.
const LATENCY_MARGIN: Duration = Duration::from_secs(3);

impl Plan {
    /// How long `run`'s test may go on at its hosts after it starts, at most (for the in-flight
    /// mark a restarted monitor reads).
    pub fn longest(&self, run: &Run) -> Duration {
        match self.mesh.tests[run.test].kind {
            TestKind::Throughput => {
                let p = self.params[run.test].as_ref();
                let ns = p.map_or(0, |p| match p.end {
                    longhaul_proto::EndCondition::Time { ns } => ns + p.omit_ns,
                    longhaul_proto::EndCondition::Bytes { .. } => 3_600_000_000_000,
                });
                // Set-up (the sender's connect and hello, each within the timeout), the test,
                // and the server's grace for a test that overruns.
                Duration::from_nanos(ns) + 2 * self.timeout + Duration::from_secs(10)
            }
            TestKind::Traceroute => Duration::from_secs(2 * u64::from(TRACE_MAX_HOPS) + 30),
            TestKind::Latency => {
                Duration::from_nanos(self.mesh.tests[run.test].every.0) + Duration::from_secs(60)
            }
        }
    }

    /// Carries out `run` now; its outcome and the full detail (JSON) to archive.
    pub fn execute(&self, run: Run) -> (Outcome, serde_json::Value) {
        let started_ns = unix_ns(SystemTime::now());
        let mut outcome = Outcome {
            run,
            started_ns,
            ended_ns: started_ns,
            status: Status::Ok,
            down_host: None,
            error: None,
            measures: Measures::default(),
            detail: String::new(),
        };
        let kind = self.mesh.tests[run.test].kind;
        let from = &self.mesh.hosts[run.from];
        let to = &self.mesh.hosts[run.to];
        let mut detail = json!({
            "test": self.mesh.tests[run.test].name,
            "kind": kind.as_str(),
            "from": {"name": from.name, "address": from.address, "port": from.port},
            "to": {"name": to.name, "address": to.address, "port": to.port},
            "window_ns": run.window,
            "planned_ns": run.planned,
            "longhaul_version": env!("CARGO_PKG_VERSION"),
        });
        let result = self
            .connect(run)
            .map_err(|e| (e, true))
            .and_then(|mut job| {
                self.measure(&mut job, run, kind, &mut outcome.measures, &mut detail)
                    .map_err(|e| (e, false))
            });
        if let Err((e, connecting)) = result {
            let text = e.to_string();
            let (status, down) = if connecting && matches!(e, EngineError::Connect { .. }) {
                (Status::Down, Some(run.from))
            } else if target_unreachable(&e) {
                (Status::Down, Some(run.to))
            } else {
                (Status::Failed, None)
            };
            outcome.status = status;
            outcome.down_host = down;
            outcome.error = Some(text.clone());
            outcome.measures = Measures::default();
            detail["error"] = json!(text);
        }
        outcome.ended_ns = unix_ns(SystemTime::now());
        detail["status"] = json!(outcome.status.as_str());
        (outcome, detail)
    }

    /// A job connection to `run`'s sending host (one per request: a server serves one job per
    /// connection).
    fn connect(&self, run: Run) -> Result<JobClient, EngineError> {
        let from = &self.mesh.hosts[run.from];
        JobClient::connect(
            &from.address,
            from.port,
            Family::Any,
            &self.key,
            self.timeout,
            None,
        )
    }

    fn measure(
        &self,
        job: &mut JobClient,
        run: Run,
        kind: TestKind,
        m: &mut Measures,
        detail: &mut serde_json::Value,
    ) -> Result<(), EngineError> {
        let to = &self.mesh.hosts[run.to];
        match kind {
            TestKind::Throughput => {
                let params = self.params[run.test]
                    .clone()
                    .expect("a throughput test has parameters");
                let test = TestTo {
                    to: to.address.clone(),
                    port: to.port,
                    family: TargetFamily::Any,
                    params,
                    encrypt: false,
                };
                let (report, _) = job.run_test(&test, None, None, &mut Quiet)?;
                let end = &report.end;
                m.bits_per_second = Some(end.sum_received.bits_per_second);
                m.retransmits = end.sum_sent.retransmits;
                let rtts: Vec<u64> = end
                    .streams
                    .iter()
                    .map(|s| u64::from(s.sender.mean_rtt) * 1000)
                    .filter(|&r| r > 0)
                    .collect();
                if !rtts.is_empty() {
                    m.rtt_ns = Some(rtts.iter().sum::<u64>() / rtts.len() as u64);
                }
                detail["report"] = serde_json::to_value(&report).unwrap_or_default();
                // A traceroute with every throughput test, so a result can be read with its path
                // (a job connection serves one request: a second one for it). Its failure does not
                // spoil the measurement.
                match self
                    .connect(run)
                    .and_then(|mut j| j.trace(&to.address, TargetFamily::Any, TRACE_MAX_HOPS))
                {
                    Ok(hops) => {
                        m.path = Some(hops_of(&hops));
                        detail["trace"] = serde_json::to_value(&hops).unwrap_or_default();
                    }
                    Err(e) => detail["trace_error"] = json!(e.to_string()),
                }
            }
            TestKind::Traceroute => {
                let hops = job.trace(&to.address, TargetFamily::Any, TRACE_MAX_HOPS)?;
                m.path = Some(hops_of(&hops));
                detail["trace"] = serde_json::to_value(&hops).unwrap_or_default();
            }
            TestKind::Latency => {
                let every = Duration::from_nanos(self.mesh.tests[run.test].every.0);
                let window_end = run.window.saturating_add(every.as_nanos() as u64);
                let left =
                    Duration::from_nanos(window_end.saturating_sub(unix_ns(SystemTime::now())))
                        .saturating_sub(LATENCY_MARGIN.min(every / 5));
                let count = (left.as_nanos() / self.probe.interval.as_nanos().max(1)).max(1);
                let count = u64::try_from(count).unwrap_or(1);
                let s = job.run_probe(
                    &to.address,
                    to.port,
                    TargetFamily::Any,
                    self.probe.interval,
                    self.probe.size,
                    count,
                )?;
                m.loss = Some(s.loss);
                m.rtt_ns = s.rtt.map(|r| r.median_ns);
                m.jitter_ns = s.jitter_ns;
                detail["probes"] = serde_json::to_value(&s).unwrap_or_default();
                if s.received == 0 {
                    // Every probe lost: the receiving host's reflector answered nothing. Its
                    // server accepted the session, so the host is up and the path is what fails.
                    detail["note"] = json!("no probe came back");
                }
            }
        }
        Ok(())
    }
}

/// The hops of a trace as the archive keeps them.
fn hops_of(hops: &[longhaul_fleet::msg::TraceHop]) -> Vec<Hop> {
    hops.iter()
        .map(|h| h.address.map(|a| a.to_string()))
        .collect()
}

/// Whether the sending host reported that it could not connect to the receiving one (the
/// engine's `Connect` error, relayed as text by the sender).
fn target_unreachable(e: &EngineError) -> bool {
    match e {
        EngineError::Peer(why) => why.contains("cannot connect to "),
        _ => false,
    }
}
