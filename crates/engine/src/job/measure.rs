//! The monitor's small jobs (`longhaul monitor`): a probe stream from this server to another
//! ([`crate::probe`]) and a traceroute to it (Debian's `traceroute`). Each is asked once and
//! answered once; the controller's side is [`JobClient::run_probe`] and [`JobClient::trace`].

use std::process::{Command, Stdio};
use std::time::Duration;

use longhaul_fleet::JobMessage;
use longhaul_fleet::msg::{TargetFamily, TraceHop};
use longhaul_fleet::trace::parse_traceroute;
use longhaul_proto::probe::ProbeSummary;
use longhaul_units::Nanos;
use tracing::info;

use super::client::JobClient;
use super::conn::{JobConn, family, unexpected};
use super::controllers::{Asked, JobContext, JobDone};
use crate::probe::{ProbeConfig, run_probe};
use crate::{EngineError, control};

/// A's side of `RunProbe`: checks the controller's limits, runs the probe stream to the target's
/// server, answers with its figures.
pub(super) fn serve_probe(
    ctl: &mut JobConn,
    asked: &Asked<'_>,
    m: JobMessage,
    cx: &JobContext<'_>,
) -> Result<JobDone, EngineError> {
    let JobMessage::RunProbe {
        to,
        port,
        family: fam,
        interval_ns,
        size,
        count,
    } = m
    else {
        return Err(unexpected(&m, "run_probe"));
    };
    let c = asked.controller;
    let length = Nanos(interval_ns.saturating_mul(count));
    if length > c.spec.limits.max_duration {
        return Err(c.refuse(format!(
            "a probe stream of {length} is longer than this controller's limit, {}",
            c.spec.limits.max_duration
        )));
    }
    let family = family(fam);
    let host = c.reach(&to, port, family)?;
    let _slot = c.slot()?;
    info!(controller = %c.spec.name, target = %to, count, "job: probe stream");
    let summary = match run_probe(&ProbeConfig {
        host,
        port,
        family,
        interval: Duration::from_nanos(interval_ns),
        size,
        count,
        timeout: cx.connect_timeout,
    }) {
        Ok(s) => s,
        Err(e) => {
            let message = format!("the probe stream to {to} port {port} failed: {e}");
            let _ = ctl.send(&JobMessage::Error {
                message: message.clone(),
            });
            control::linger_close(ctl.channel());
            // Told already: `Peer` keeps `serve` from sending it twice.
            return Err(EngineError::Peer(message));
        }
    };
    let what = format!(
        "probes to {to}: {} of {} back",
        summary.received, summary.sent
    );
    ctl.send(&JobMessage::ProbeResult {
        summary: Box::new(summary),
    })?;
    Ok(JobDone {
        controller: c.spec.name.clone(),
        what,
    })
}

/// A's side of `Trace`: checks the target against the controller's limits, runs `traceroute -n
/// -q 1` to it, answers with the hops.
pub(super) fn serve_trace(
    ctl: &mut JobConn,
    asked: &Asked<'_>,
    m: JobMessage,
) -> Result<JobDone, EngineError> {
    let JobMessage::Trace {
        to,
        family: fam,
        max_hops,
    } = m
    else {
        return Err(unexpected(&m, "trace"));
    };
    let c = asked.controller;
    let host = c.reach(&to, 1, family(fam))?;
    let _slot = c.slot()?;
    info!(controller = %c.spec.name, target = %to, "job: trace");
    let mut cmd = Command::new("traceroute");
    match fam {
        TargetFamily::V4 => {
            cmd.arg("-4");
        }
        TargetFamily::V6 => {
            cmd.arg("-6");
        }
        TargetFamily::Any => {}
    }
    // The target was checked: never empty, no leading '-', no whitespace (`JobMessage::validate`).
    let out = cmd
        .args(["-n", "-q", "1", "-w", "2", "-m"])
        .arg(max_hops.to_string())
        .arg(&host)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            EngineError::Transfer(if e.kind() == std::io::ErrorKind::NotFound {
                "traceroute is not installed on this server (apt-get install traceroute)".into()
            } else {
                format!("cannot run traceroute: {e}")
            })
        })?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(EngineError::Transfer(format!(
            "traceroute to {to} failed: {}",
            why.lines().last().unwrap_or("no output").trim()
        )));
    }
    let hops = parse_traceroute(&String::from_utf8_lossy(&out.stdout));
    let what = format!("trace to {to}: {} hops", hops.len());
    ctl.send(&JobMessage::TraceResult { hops })?;
    Ok(JobDone {
        controller: c.spec.name.clone(),
        what,
    })
}

impl JobClient {
    /// Asks the server to run a probe stream to `to`:`port` and returns its figures.
    pub fn run_probe(
        &mut self,
        to: &str,
        port: u16,
        family: TargetFamily,
        interval: Duration,
        size: u32,
        count: u64,
    ) -> Result<ProbeSummary, EngineError> {
        let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        self.ctl.send(&JobMessage::RunProbe {
            to: to.to_string(),
            port,
            family,
            interval_ns,
            size,
            count,
        })?;
        let patience = interval.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX))
            + Duration::from_secs(60)
            + 4 * self.timeout;
        match self.ctl.recv(patience, "the probe stream's figures")? {
            JobMessage::ProbeResult { summary } => Ok(*summary),
            m => Err(unexpected(&m, "the probe stream's figures")),
        }
    }

    /// Asks the server for a traceroute to `to` of at most `max_hops` hops.
    pub fn trace(
        &mut self,
        to: &str,
        family: TargetFamily,
        max_hops: u8,
    ) -> Result<Vec<TraceHop>, EngineError> {
        self.ctl.send(&JobMessage::Trace {
            to: to.to_string(),
            family,
            max_hops,
        })?;
        // traceroute waits up to 2 s per probe, 16 probes at a time.
        let patience = Duration::from_secs(2 * u64::from(max_hops) + 30) + 4 * self.timeout;
        match self.ctl.recv(patience, "the trace")? {
            JobMessage::TraceResult { hops } => Ok(hops),
            m => Err(unexpected(&m, "the trace")),
        }
    }
}
