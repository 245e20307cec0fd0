//! `longhaul testbed power HOST ACTION` and `longhaul testbed operations`: a host's power through
//! the service (which holds the BMC credentials and checks the reservation), and the log of such
//! attempts.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use longhaul_testbed::operations::{OperationLog, PowerReply, PowerRequest};

use super::{ClientArgs, call, url};

/// What to do with a host's power.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub(super) enum PowerArg {
    /// Read the state from the BMC.
    Status,
    /// Power on.
    On,
    /// Power off at once (not a graceful shutdown).
    Off,
    /// Off, then on (on only, when off).
    Cycle,
    /// Hard reset of a host that is on.
    Reset,
}

impl PowerArg {
    fn as_str(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::On => "on",
            Self::Off => "off",
            Self::Cycle => "cycle",
            Self::Reset => "reset",
        }
    }
}

#[derive(Args, Debug)]
pub(super) struct PowerArgs {
    /// The host's resource id (`longhaul testbed` resources of kind host).
    host: String,
    /// What to do.
    #[arg(value_enum)]
    action: PowerArg,
    /// Why: required of an admin who holds no booking of the host; kept in the operations log.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(Args, Debug)]
pub(super) struct OperationsArgs {
    /// Only the attempts on this host.
    #[arg(long)]
    host: Option<String>,
    /// How many, newest first.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: u32,
    #[command(flatten)]
    client: ClientArgs,
}

/// An agent that waits as long as a power action may take (a cycle is two waits for the BMC).
fn patient_agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(600))
        .build()
}

pub(super) fn power(p: &PowerArgs) -> anyhow::Result<ExitCode> {
    let auth = format!("Bearer {}", p.client.token);
    let text = match p.action {
        PowerArg::Status => call::<()>(
            patient_agent()
                .get(&url(&p.client, "/api/v1/power"))
                .query("host", &p.host)
                .set("Authorization", &auth),
            None,
        ),
        a => call(
            patient_agent()
                .post(&url(&p.client, "/api/v1/power"))
                .set("Authorization", &auth),
            Some(&PowerRequest {
                host: p.host.clone(),
                action: a.as_str().to_owned(),
                reason: p.reason.clone(),
            }),
        ),
    }
    .with_context(|| format!("power {} of {}", p.action.as_str(), p.host))?;
    if p.client.json.json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let r: PowerReply = serde_json::from_str(&text).context("the service's answer")?;
    println!(
        "{}: power {} ({} {}, {:.1} s; operation {})",
        r.host,
        r.state,
        r.endpoint,
        r.action,
        r.millis as f64 / 1000.0,
        r.seq
    );
    for a in &r.answers {
        println!("  {a}");
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn operations(o: &OperationsArgs) -> anyhow::Result<ExitCode> {
    let mut req = super::agent()
        .get(&url(&o.client, "/api/v1/operations"))
        .query("limit", &o.limit.to_string())
        .set("Authorization", &format!("Bearer {}", o.client.token));
    if let Some(h) = &o.host {
        req = req.query("host", h);
    }
    let text = call::<()>(req, None)?;
    if o.client.json.json {
        println!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let log: OperationLog = serde_json::from_str(&text).context("the service's answer")?;
    for op in &log.operations {
        println!(
            "{:>6}  {}  {:<8} {:<12} {:<24} {:<8} {}",
            op.seq,
            op.at,
            op.result,
            op.action,
            op.host,
            op.actor,
            op.state.as_deref().unwrap_or("")
        );
        println!("        {}", op.grounds);
        if let Some(d) = &op.detail {
            println!("        {d}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
